//! Search (RFC 4511 §4.5): resolve base, compile the filter, walk the version, stream entries.
//!
//! The request is parsed and the filter compiled in the read loop; the walk runs on the
//! blocking pool so long searches neither stall the connection nor other connections, and
//! encoded entries go to the connection's write task every `FLUSH_BYTES`. The walk sees one
//! version of the store from start to end.

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::{tags, ResultCode, SearchRequest};
use schema::{AttrId, NormDn, Schema};
use store::{Entry, Filter, Tri};

use crate::acl::{self, Rights};
use crate::error::{LdapError, LdapResult};
use crate::session::{encode_result_into, result_pdu, Conn, FLUSH_BYTES};
use crate::state::{Identity, Shared};

/// Compiles a wire filter against the schema (see `store::filter` for the Undefined rules).
/// An assertion on an attribute `allowed` refuses (one the requester may not search) is
/// Undefined, so results cannot be used to learn its values. (An extensible match over all
/// attributes is checked per entry: see `searchable_here`.)
pub fn compile(
    schema: &Schema,
    allowed: &mut dyn FnMut(AttrId) -> bool,
    f: &proto::Filter<'_>,
) -> Filter {
    use proto::Filter as P;
    let mut attr = |raw: &[u8]| -> Option<AttrId> {
        let s = std::str::from_utf8(raw).ok()?;
        let (name, _) = crate::state::split_description(s);
        let id = schema.attr_by_name(name)?;
        allowed(id).then_some(id)
    };
    match f {
        P::And(v) if v.is_empty() => Filter::True,
        P::Or(v) if v.is_empty() => Filter::False,
        P::And(v) => Filter::And(v.iter().map(|f| compile(schema, allowed, f)).collect()),
        P::Or(v) => Filter::Or(v.iter().map(|f| compile(schema, allowed, f)).collect()),
        P::Not(f) => Filter::Not(Box::new(compile(schema, allowed, f))),
        P::Equality(a, v) | P::Approx(a, v) => match attr(a) {
            Some(ty) if schema.attr(ty).equality.is_some() => match schema.normalize_eq(ty, v) {
                Ok(norm) => Filter::Equality { attr: ty, norm },
                Err(_) => Filter::Undefined,
            },
            _ => Filter::Undefined,
        },
        P::Substrings {
            attr: a,
            initial,
            any,
            final_,
        } => match attr(a) {
            Some(ty) if schema.attr(ty).substr.is_some() => Filter::Substrings {
                attr: ty,
                initial: initial.as_ref().map(|c| c.to_vec()),
                any: any.iter().map(|c| c.to_vec()).collect(),
                final_: final_.as_ref().map(|c| c.to_vec()),
            },
            _ => Filter::Undefined,
        },
        P::GreaterOrEqual(a, v) => match attr(a) {
            Some(ty) if schema.attr(ty).ordering.is_some() => Filter::GreaterOrEqual {
                attr: ty,
                value: v.to_vec(),
            },
            _ => Filter::Undefined,
        },
        P::LessOrEqual(a, v) => match attr(a) {
            Some(ty) if schema.attr(ty).ordering.is_some() => Filter::LessOrEqual {
                attr: ty,
                value: v.to_vec(),
            },
            _ => Filter::Undefined,
        },
        P::Present(a) => match attr(a) {
            Some(ty)
                if schema
                    .attr(ty)
                    .names
                    .iter()
                    .any(|n| n.eq_ignore_ascii_case("objectClass")) =>
            {
                Filter::True
            }
            Some(ty) => Filter::Present(ty),
            None => Filter::Undefined,
        },
        P::Extensible {
            rule,
            attr: a,
            value,
            dn_attributes,
        } => {
            let rule = match rule {
                Some(r) => match std::str::from_utf8(r)
                    .ok()
                    .and_then(|r| schema.rule_by_name(r))
                {
                    Some(r) => Some(r),
                    None => return Filter::Undefined,
                },
                None => None,
            };
            let ty = match a {
                Some(a) => match attr(a) {
                    Some(t) => Some(t),
                    None => return Filter::Undefined,
                },
                None => None,
            };
            if rule.is_none() && ty.is_none() {
                return Filter::Undefined;
            }
            Filter::Extensible {
                rule,
                attr: ty,
                value: value.to_vec(),
                dn: *dn_attributes,
            }
        }
    }
}

/// Which attributes a search returns (RFC 4511 §4.5.1.8).
pub struct Selection {
    /// Attribute names only, no values.
    types_only: bool,
    all_user: bool,
    all_operational: bool,
    named: Vec<AttrId>,
}

impl Selection {
    pub fn parse(schema: &Schema, attrs: &[Cow<'_, [u8]>], types_only: bool) -> Selection {
        let mut s = Selection {
            types_only,
            all_user: attrs.is_empty(),
            all_operational: false,
            named: Vec::new(),
        };
        for a in attrs {
            match &**a {
                b"*" => s.all_user = true,
                b"+" => s.all_operational = true,
                b"1.1" => {}
                raw => {
                    if let Ok(name) = std::str::from_utf8(raw) {
                        let (name, _) = crate::state::split_description(name);
                        if let Some(id) = schema.attr_by_name(name) {
                            s.named.push(id);
                        }
                    }
                }
            }
        }
        s
    }

    pub fn wants(&self, schema: &Schema, ty: AttrId) -> bool {
        let all = if schema.attr(ty).is_operational() {
            self.all_operational
        } else {
            self.all_user
        };
        all || self.named.iter().any(|n| schema.is_subtype(ty, *n))
    }
}

/// Encodes one entry as a SearchResultEntry, with the attributes `sel` asks for and the
/// server-computed operational attributes, each only if `access` (none: everything) allows
/// reading it.
pub(crate) fn encode_entry(
    shared: &Shared,
    v: Option<&store::Version>,
    out: &mut Vec<u8>,
    id: i32,
    e: &Entry,
    sel: &Selection,
    access: Option<&acl::EntryAccess<'_>>,
) {
    encode_entry_with_controls(shared, v, out, id, e, sel, access, &[]);
}

/// `encode_entry` with response controls on the entry (e.g. Entry Change Notification).
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_entry_with_controls(
    shared: &Shared,
    v: Option<&store::Version>,
    out: &mut Vec<u8>,
    id: i32,
    e: &Entry,
    sel: &Selection,
    access: Option<&acl::EntryAccess<'_>>,
    controls: &[proto::Control<'_>],
) {
    let schema = &*shared.schema;
    let k = &shared.known;
    let readable = |ty: AttrId| access.is_none_or(|a| a.can(Some(ty), Rights::READ));
    let mut attrs: Vec<OutAttr<'_>> = Vec::with_capacity(e.attrs().len() + 4);
    for a in e.attrs() {
        if !sel.wants(schema, a.ty) || !readable(a.ty) {
            continue;
        }
        let name = schema.attr(a.ty).name();
        let name: Cow<'_, [u8]> = if a.options.is_empty() {
            Cow::Borrowed(name.as_bytes())
        } else {
            Cow::Owned(format!("{name}{}", a.options).into_bytes())
        };
        let values = if sel.types_only {
            Vec::new()
        } else {
            a.values().collect()
        };
        attrs.push((name, values));
    }
    // Computed operational attributes (only for stored entries).
    let mut computed: Vec<(AttrId, Vec<u8>)> = Vec::new();
    if let Some(v) = v {
        if sel.wants(schema, k.entry_dn) {
            computed.push((k.entry_dn, e.dn().as_bytes().to_vec()));
        }
        // Children the requester cannot see are not counted: the count must not reveal them.
        let kids = match access {
            Some(a)
                if sel.wants(schema, k.has_subordinates)
                    || sel.wants(schema, k.num_subordinates) =>
            {
                v.children(e.id).map_or(0, |ids| {
                    ids.iter()
                        .filter_map(|id| v.get(id))
                        .filter(|c| a.sees(c))
                        .count() as u64
                })
            }
            _ => v.num_children(e.id),
        };
        if sel.wants(schema, k.has_subordinates) {
            computed.push((
                k.has_subordinates,
                if kids > 0 {
                    b"TRUE".to_vec()
                } else {
                    b"FALSE".to_vec()
                },
            ));
        }
        if sel.wants(schema, k.num_subordinates) {
            computed.push((k.num_subordinates, kids.to_string().into_bytes()));
        }
        if sel.wants(schema, k.subschema_subentry) {
            computed.push((k.subschema_subentry, b"cn=Subschema".to_vec()));
        }
    }
    computed.retain(|(ty, _)| readable(*ty));
    for (ty, val) in &computed {
        let values = if sel.types_only {
            Vec::new()
        } else {
            vec![val.as_slice()]
        };
        attrs.push((Cow::Borrowed(schema.attr(*ty).name().as_bytes()), values));
    }
    let attrs = attrs.iter().map(|(n, vs)| (&**n, vs.iter().copied()));
    if controls.is_empty() {
        proto::encode_search_entry(out, id, e.dn().as_bytes(), attrs);
    } else {
        proto::encode_search_entry_with_controls(out, id, e.dn().as_bytes(), attrs, controls);
    }
}

/// An attribute on its way out: description and values.
type OutAttr<'a> = (Cow<'a, [u8]>, Vec<&'a [u8]>);

/// A search ready to run: everything resolved from the request.
pub(crate) struct Prepared {
    pub(crate) base: NormDn,
    pub(crate) root: bool,
    pub(crate) scope: store::Scope,
    pub(crate) filter: Filter,
    pub(crate) sel: Selection,
    size_limit: u64,
    deadline: Option<Instant>,
    /// The access rules as they apply to the requester.
    pub(crate) view: acl::View,
    /// Filter attributes the requester may search in some entries only: checked per entry.
    check: Vec<AttrId>,
    /// The filter has an extensible match over all attributes and the requester is not the
    /// administrator: it must only see the attributes they may search.
    untyped: bool,
    /// The index candidates, once planned against the version the search runs on.
    pub(crate) cands: Option<store::RoaringBitmap>,
}

pub(crate) fn prepare(
    shared: &Shared,
    v: &store::Version,
    req: &SearchRequest<'_>,
    who: &Identity,
) -> LdapResult<Prepared> {
    let root = req.base.is_empty();
    let base = if root {
        NormDn {
            norm: String::new(),
            rdns: Vec::new(),
        }
    } else {
        shared.parse_dn(&req.base)?.1
    };
    let scope = match req.scope {
        proto::Scope::Base => store::Scope::Base,
        proto::Scope::One => store::Scope::One,
        proto::Scope::Subtree => store::Scope::Subtree,
    };
    let limit = |client: i64, server: u64| -> u64 {
        let client = u64::try_from(client).unwrap_or(0);
        let server = if who.is_admin { 0 } else { server };
        match (client, server) {
            (0, s) => s,
            (c, 0) => c,
            (c, s) => c.min(s),
        }
    };
    let c = &shared.config;
    let (size, time) = if who.is_anonymous() {
        (c.size_limit_anonymous, c.time_limit_anonymous)
    } else {
        (c.size_limit, c.time_limit)
    };
    let size_limit = limit(req.size_limit, size);
    let time_limit = limit(req.time_limit, time);
    let schema = &*shared.schema;
    let view = shared.acl.view(schema, v, who);
    let mut check = Vec::new();
    // The root DSE and the subschema subentry are outside the rules: anyone may read them.
    let outside = scope == store::Scope::Base && (root || base.norm == shared.subschema.ndn_str());
    let filter = compile(
        schema,
        &mut |ty| match view.searchable(&shared.acl, schema, ty) {
            _ if outside => true,
            acl::Searchable::Always => true,
            acl::Searchable::Never => false,
            acl::Searchable::Depends => {
                if !check.contains(&ty) {
                    check.push(ty);
                }
                true
            }
        },
        &req.filter,
    );
    let untyped = !view.is_admin() && has_untyped_extensible(&filter);
    Ok(Prepared {
        base,
        root,
        scope,
        filter,
        sel: Selection::parse(schema, &req.attributes, req.types_only),
        size_limit,
        deadline: (time_limit > 0).then(|| Instant::now() + Duration::from_secs(time_limit)),
        view,
        check,
        untyped,
        cands: None,
    })
}

/// The access-log line of a search (also used by persistent search).
pub(crate) fn log_search(
    conn: &Conn,
    id: i32,
    req: &SearchRequest<'_>,
    who: &Identity,
) -> Option<crate::session::AccessLine> {
    conn.log_start(id, who, |l| {
        use std::fmt::Write as _;
        l.push_str(" SEARCH base=");
        crate::logs::quote(l, &req.base);
        l.push_str(match req.scope {
            proto::Scope::Base => " scope=base",
            proto::Scope::One => " scope=one",
            proto::Scope::Subtree => " scope=sub",
        });
        l.push_str(" filter=");
        crate::logs::quote(l, req.filter.to_string().as_bytes());
        l.push_str(" attrs=");
        let attrs: Vec<&[u8]> = req.attributes.iter().map(|a| &**a).collect();
        crate::logs::quote(l, &attrs.join(&b' '));
        if req.size_limit > 0 || req.time_limit > 0 {
            let _ = write!(
                l,
                " sizelimit={} timelimit={}",
                req.size_limit, req.time_limit
            );
        }
    })
}

pub(crate) async fn start(conn: &Arc<Conn>, id: i32, req: &SearchRequest<'_>, who: Arc<Identity>) {
    let shared = &conn.shared;
    let log = log_search(conn, id, req, &who);
    let v = shared.store.read();
    let p = match prepare(shared, &v, req, &who) {
        Ok(p) => p,
        Err(e) => {
            conn.send(result_pdu(id, tags::SEARCH_RESULT_DONE, Err(&e)))
                .await;
            conn.log_end(log, e.code, Some(0));
            return;
        }
    };
    // The server-held entries: root DSE and subschema subentry, base scope only.
    let virtual_entry = if p.root && p.scope == store::Scope::Base {
        Some(&shared.root_dse)
    } else if p.scope == store::Scope::Base && p.base.norm == shared.subschema.ndn_str() {
        Some(&shared.subschema)
    } else {
        None
    };
    if let Some(e) = virtual_entry {
        let mut out = Vec::with_capacity(1024);
        let mut n = 0;
        if p.filter.eval(&shared.schema, e) == store::Tri::True {
            encode_entry(shared, None, &mut out, id, e, &p.sel, None);
            n = 1;
        }
        encode_result_into(&mut out, id, tags::SEARCH_RESULT_DONE, Ok(()));
        conn.send(out).await;
        conn.log_end(log, ResultCode::Success, Some(n));
        return;
    }
    // Small searches (one base entry, or few index candidates) run right here: cheaper than a
    // hop to the blocking pool, and they cannot hold up the connection for long.
    let mut p = p;
    let base_only = p.scope == store::Scope::Base && !p.root;
    if !base_only {
        p.cands = v.candidates(&shared.schema, &p.filter);
    }
    let small = base_only
        || p.cands
            .as_ref()
            .is_some_and(|c| c.len() <= INLINE_CANDIDATES);
    if small {
        let mut pending: Vec<Vec<u8>> = Vec::new();
        let done = run(conn, &v, id, &p, &AtomicBool::new(false), &mut |b| {
            pending.push(b);
            true
        });
        for b in pending {
            conn.send(b).await;
        }
        if let Some((rc, n)) = done {
            conn.log_end(log, rc, Some(n));
        }
        return;
    }
    let Ok(permit) = conn.permits.clone().acquire_owned().await else {
        return;
    };
    let flag = Arc::new(AtomicBool::new(false));
    if let Ok(mut m) = conn.running.lock() {
        m.insert(id, flag.clone());
    }
    let conn = conn.clone();
    tokio::task::spawn_blocking(move || {
        let done = run(&conn, &v, id, &p, &flag, &mut |b| conn.send_blocking(b));
        match done {
            Some((rc, n)) => conn.log_end(log, rc, Some(n)),
            // Abandoned (or the client went away): no result was sent.
            None => conn.log_abandoned(log),
        }
        if let Ok(mut m) = conn.running.lock() {
            m.remove(&id);
        }
        drop(permit);
    });
}

/// Whether the entry still matches once the filter attributes the requester may not search in
/// this entry are taken as Undefined.
pub(crate) fn searchable_here(
    schema: &Schema,
    p: &Prepared,
    a: &acl::EntryAccess<'_>,
    e: &Entry,
) -> bool {
    let hide: Vec<AttrId> = p
        .check
        .iter()
        .copied()
        .filter(|t| !a.can(Some(*t), Rights::SEARCH))
        .collect();
    // An extensible match over all attributes looks at the entry without the attributes
    // the requester may not search.
    let stripped = if p.untyped && e.attrs().any(|x| !a.can(Some(x.ty), Rights::SEARCH)) {
        let mut attrs = e.to_attrs();
        attrs.retain(|x| a.can(Some(x.ty), Rights::SEARCH));
        Some(e.with_attrs(&attrs))
    } else {
        None
    };
    if hide.is_empty() && stripped.is_none() {
        return true;
    }
    let e = stripped.as_ref().unwrap_or(e);
    acl::mask_filter(&p.filter, &|t| hide.contains(&t)).eval(schema, e) == Tri::True
}

fn has_untyped_extensible(f: &Filter) -> bool {
    match f {
        Filter::And(v) | Filter::Or(v) => v.iter().any(has_untyped_extensible),
        Filter::Not(f) => has_untyped_extensible(f),
        Filter::Extensible { attr: None, .. } => true,
        _ => false,
    }
}

/// Searches whose index candidates are at most this many run inline in the read loop.
const INLINE_CANDIDATES: u64 = 64;

/// Runs a prepared search on version `v`, handing encoded entries and the result to `sink`
/// (false from the sink: the connection is gone), unless abandoned.
fn run(
    conn: &Conn,
    v: &store::Version,
    id: i32,
    p: &Prepared,
    abandoned: &AtomicBool,
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
) -> Option<(ResultCode, u64)> {
    let (outcome, sent, mut out) = walk(conn, v, id, p, abandoned, sink)?;
    encode_result_into(
        &mut out,
        id,
        tags::SEARCH_RESULT_DONE,
        outcome.as_ref().map(|_| ()),
    );
    sink(out);
    Some((crate::session::code_of(outcome.as_ref().map(|_| ())), sent))
}

/// `run` without the SearchResultDone: the outcome, the number of entries sent and the
/// encoded bytes not yet handed to `sink`; `None` when abandoned or the connection is gone.
pub(crate) fn walk(
    conn: &Conn,
    v: &store::Version,
    id: i32,
    p: &Prepared,
    abandoned: &AtomicBool,
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
) -> Option<(Result<(), LdapError>, u64, Vec<u8>)> {
    let shared = &*conn.shared;
    let schema = &*shared.schema;
    // The bases to walk: the named entry, or every naming context for the root.
    let mut bases: Vec<Arc<Entry>> = Vec::new();
    let mut scope = p.scope;
    if p.root {
        for s in &shared.suffixes {
            if let Some(e) = v.lookup(s) {
                bases.push(e.clone());
            }
        }
        if scope == store::Scope::One {
            scope = store::Scope::Base;
        }
    } else {
        match v.lookup(&p.base) {
            Some(e) if p.view.entry(&shared.acl, schema, e).visible() => bases.push(e.clone()),
            _ => {
                let e = shared.no_such_object_for(v, &p.base, &p.view);
                return Some((Err(e), 0, Vec::new()));
            }
        }
    }
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut sent: u64 = 0;
    let mut outcome: Result<(), LdapError> = Ok(());
    let mut gone = false;
    'bases: for base in &bases {
        let mut visit = |e: &Arc<Entry>| -> ControlFlow<()> {
            // Hidden entries are skipped before the size check, so that a limit reached
            // never hints at entries the requester may not see.
            let access = (!p.view.is_admin()).then(|| p.view.entry(&shared.acl, schema, e));
            if let Some(a) = &access {
                if !a.visible() || !searchable_here(schema, p, a, e) {
                    return ControlFlow::Continue(());
                }
            }
            if p.size_limit > 0 && sent >= p.size_limit {
                outcome = Err(LdapError::new(
                    ResultCode::SizeLimitExceeded,
                    "size limit exceeded",
                ));
                return ControlFlow::Break(());
            }
            encode_entry(shared, Some(v), &mut out, id, e, &p.sel, access.as_ref());
            sent += 1;
            if out.len() >= FLUSH_BYTES {
                if !sink(std::mem::take(&mut out)) {
                    gone = true;
                    return ControlFlow::Break(());
                }
                out.reserve(16 * 1024);
            }
            ControlFlow::Continue(())
        };
        let mut timed_out = false;
        let tick = || {
            if abandoned.load(Ordering::Relaxed) {
                return ControlFlow::Break(());
            }
            if p.deadline.is_some_and(|d| Instant::now() > d) {
                timed_out = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        };
        v.search_planned(
            schema,
            base,
            scope,
            &p.filter,
            p.cands.as_ref(),
            &mut visit,
            tick,
        );
        if timed_out {
            outcome = Err(LdapError::new(
                ResultCode::TimeLimitExceeded,
                "time limit exceeded",
            ));
        }
        if outcome.is_err() || gone || abandoned.load(Ordering::Relaxed) {
            break 'bases;
        }
    }
    if gone || abandoned.load(Ordering::Relaxed) {
        return None;
    }
    Some((outcome, sent, out))
}
