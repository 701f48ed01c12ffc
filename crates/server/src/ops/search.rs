//! Search (RFC 4511 §4.5): resolve base, compile the filter, walk the version, stream entries.
//!
//! The request is parsed and the filter compiled in the read loop; the walk runs on the
//! blocking pool so long searches neither stall the connection nor other connections, and
//! encoded entries go to the connection's write task every `FLUSH_BYTES`. The walk sees one
//! version of the store from start to end.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::{tags, ResultCode, SearchRequest};
use schema::{AttrId, NormDn, Schema};
use store::{Entry, Filter, Tri};

use crate::op::{Next, Op};
use crate::ops::{paged, sort};
use crate::reply::{Conn, FLUSH_BYTES};
use crate::state::Shared;
use dit::acl::{self, Rights};
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;
use dit::write::{check_assertion, Assertion};

pub use dit::filter::compile;

pub use dit::select::Selection;

/// Encodes one entry as a SearchResultEntry, with the attributes `sel` asks for and the
/// server-computed operational attributes, each only if `access` (none: everything) allows
/// reading it. With a message id a whole PDU, without one the bare SearchResultEntry (the
/// value of a pre/post-read response control, RFC 4527).
pub(crate) fn encode_entry(
    shared: &Shared,
    v: Option<&store::Version>,
    out: &mut Vec<u8>,
    id: Option<i32>,
    e: &Entry,
    sel: &Selection,
    access: Option<&acl::EntryAccess<'_>>,
) {
    encode_entry_with_controls(shared, v, out, id, e, sel, access, &[]);
}

/// `encode_entry` with response controls on the entry's PDU (e.g. Entry Change Notification).
/// One pass over the entry: each attribute the selection and the access rules let through is
/// written as it is found (`proto::EntryWriter`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_entry_with_controls(
    shared: &Shared,
    v: Option<&store::Version>,
    out: &mut Vec<u8>,
    id: Option<i32>,
    e: &Entry,
    sel: &Selection,
    access: Option<&acl::EntryAccess<'_>>,
    controls: &[proto::Control<'_>],
) {
    let schema = &*shared.schema();
    let k = &shared.known;
    let readable = |ty: AttrId| access.is_none_or(|a| a.can(Some(ty), Rights::READ));
    let mut w = proto::EntryWriter::start(out, id, e.dn_bytes());
    for a in e.attrs() {
        if !sel.wants_with(schema, a.ty, a.options) || !readable(a.ty) {
            continue;
        }
        let name = schema.attr(a.ty).name();
        if a.options.is_empty() {
            write_selected(&mut w, sel, schema, name.as_bytes(), a.ty, a.values());
        } else {
            let name = format!("{name}{}", a.options);
            write_selected(&mut w, sel, schema, name.as_bytes(), a.ty, a.values());
        }
    }
    // Computed operational attributes (only for stored entries).
    if let Some(v) = v {
        let wanted = |ty: AttrId| sel.wants(schema, ty) && readable(ty);
        let mut computed = |ty: AttrId, value: &[u8]| {
            let name = schema.attr(ty).name().as_bytes();
            write_selected(&mut w, sel, schema, name, ty, std::iter::once(value));
        };
        if wanted(k.entry_dn) {
            computed(k.entry_dn, e.dn_bytes());
        }
        let (has, num) = (wanted(k.has_subordinates), wanted(k.num_subordinates));
        if has || num {
            // Children the requester cannot see are not counted: the count must not reveal
            // them.
            let kids = match access {
                Some(a) => v.children(e.id).map_or(0, |ids| {
                    ids.iter()
                        .filter_map(|id| v.get(id))
                        .filter(|c| a.sees(c))
                        .count() as u64
                }),
                None => v.num_children(e.id),
            };
            if has {
                computed(
                    k.has_subordinates,
                    if kids > 0 { b"TRUE" } else { b"FALSE" },
                );
            }
            if num {
                computed(k.num_subordinates, kids.to_string().as_bytes());
            }
        }
        if wanted(k.subschema_subentry) {
            computed(k.subschema_subentry, b"cn=Subschema");
        }
    }
    w.finish(controls);
}

/// Writes an attribute an entry returns, with the values the selection keeps (none for
/// typesOnly); left out when matched values leave it no value.
fn write_selected<'v>(
    w: &mut proto::EntryWriter<'_>,
    sel: &Selection,
    schema: &Schema,
    name: &[u8],
    ty: AttrId,
    mut values: impl Iterator<Item = &'v [u8]>,
) {
    match (sel.values.is_some(), sel.types_only) {
        (false, false) => w.attribute(name, values),
        (false, true) => w.attribute(name, []),
        (true, false) => {
            w.attribute_if_any(name, values.filter(|v| sel.keeps(schema, ty, v)));
        }
        (true, true) => {
            if values.any(|v| sel.keeps(schema, ty, v)) {
                w.attribute(name, []);
            }
        }
    }
}

/// A search ready to run: everything resolved from the request.
pub(crate) struct Prepared {
    pub(crate) base: Arc<NormDn>,
    pub(crate) root: bool,
    pub(crate) scope: store::Scope,
    pub(crate) filter: Filter,
    pub(crate) sel: Selection,
    pub(crate) size_limit: u64,
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
    /// The assertion control, checked against the base entry.
    pub(crate) assertion: Option<Assertion>,
    /// Server-side sort and VLV (`ops::sort`); `None` for a plain search.
    pub(crate) order: Option<sort::Order>,
    /// The dereference control's specs: each entry returned carries the entries its
    /// DN-valued attributes name (`deref_control`).
    pub(crate) deref: Option<Vec<crate::controls::DerefSpec>>,
}

pub(crate) fn prepare(
    shared: &Shared,
    v: &store::Version,
    req: &SearchRequest<'_>,
    who: &Identity,
    bases: &std::sync::Mutex<dit::DnCache>,
) -> LdapResult<Prepared> {
    let max_attrs = shared.config().max_requested_attributes;
    if max_attrs > 0 && req.attributes.len() > max_attrs {
        return Err(LdapError::new(
            ResultCode::AdminLimitExceeded,
            format!(
                "{} attributes requested, more than the server allows ({max_attrs}, max_requested_attributes)",
                req.attributes.len()
            ),
        ));
    }
    let root = req.base.is_empty();
    let base = if root {
        Arc::new(NormDn::root())
    } else {
        match bases.lock() {
            Ok(mut cache) => shared.parse_dn_cached(&mut cache, &req.base)?,
            Err(_) => Arc::new(shared.parse_dn(&req.base)?.1),
        }
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
    let c = &shared.config();
    let (size, time) = if who.is_anonymous() {
        (c.size_limit_anonymous, c.time_limit_anonymous)
    } else {
        (c.size_limit, c.time_limit)
    };
    let size_limit = limit(req.size_limit, size);
    let time_limit = limit(req.time_limit, time);
    let schema = &*shared.schema();
    let view = shared.acl.view(schema, v, who);
    let mut check = Vec::new();
    // The root DSE and the subschema subentry are outside the rules: anyone may read them.
    // So is cn=Monitor for those who may read it.
    let outside = (scope == store::Scope::Base
        && (root || base.norm == shared.subschema().ndn_str()))
        || crate::monitor::serves(shared, &base, who);
    let filter = compile(
        schema,
        &mut |ty| match view.searchable(schema, ty) {
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
        assertion: None,
        order: None,
        deref: None,
    })
}

pub(crate) async fn handle(mut op: Op, req: &SearchRequest<'_>) -> Next {
    // The Sync Request when the provider is on, or critical (then refused); else ignored.
    if let Some(sync) = op.controls.sync.take() {
        if op.shared().syncprov.is_some() || op.controls.sync_critical {
            return super::syncprov::start(op, req, sync).await;
        }
    }
    if let Some(ps) = op.controls.persistent.take() {
        return super::psearch::start(op, req, ps).await;
    }
    if op.controls.sort.is_some() || op.controls.vlv.is_some() {
        return sort::handle(op, req).await;
    }
    run(op, req, None).await
}

/// Runs a search, sorted (and windowed) by `order` if there is one.
pub(crate) async fn run(mut op: Op, req: &SearchRequest<'_>, order: Option<sort::Order>) -> Next {
    let shared = op.shared().clone();
    let assertion = op.take_assertion();
    let paged = op.controls.paged.take();
    // Later pages of a paged search run on the version of its first page.
    let mut paging = None;
    if let Some(pr) = paged {
        let key = match &order {
            Some(o) => sort::list_key(req, &op.who, o.fingerprint()),
            None => request_key(req, &op.who),
        };
        let mut cursor = None;
        if !pr.cookie.is_empty() {
            let taken = match op.conn.paged.lock() {
                Ok(mut open) => open.take(&pr.cookie, key),
                Err(_) => Err(LdapError::new(
                    ResultCode::Other,
                    "paged results state lost",
                )),
            };
            match taken {
                Ok(c) => cursor = Some(c),
                Err(e) => {
                    op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
                    return Next::Continue;
                }
            }
        }
        if pr.size == 0 {
            // Size 0 ends a paged search (RFC 2696 §3); its state is gone with the cursor. As
            // slapd, the result carries no paged results control.
            op.finish(tags::SEARCH_RESULT_DONE, Ok(()), Some(0)).await;
            return Next::Continue;
        }
        paging = Some(Paging {
            size: pr.size,
            key,
            cursor,
        });
    }
    let v = match paging.as_ref().and_then(|p| p.cursor.as_ref()) {
        Some(c) => c.version.clone(),
        None => order
            .as_ref()
            .and_then(|o| o.version())
            .unwrap_or_else(|| shared.store.read()),
    };
    let mut p = match prepare(&shared, &v, req, &op.who, &op.conn.bases) {
        Ok(p) => p,
        Err(e) => {
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
            return Next::Continue;
        }
    };
    p.assertion = assertion;
    p.order = order;
    p.deref = op.controls.deref_specs.take();
    if let Some(items) = op.controls.values_return.take() {
        p.sel.values = Some(dit::filter::compile_values(&shared.schema(), &items));
    }
    // The server-held entries: root DSE and subschema subentry, base scope only.
    let virtual_entry = if p.root && p.scope == store::Scope::Base {
        Some(&shared.root_dse)
    } else if p.scope == store::Scope::Base && p.base.norm == shared.subschema().ndn_str() {
        Some(&*shared.subschema())
    } else {
        None
    };
    if crate::monitor::holds(&shared, &p.base) {
        search_monitor(op, &v, &p, paging.is_some()).await;
        return Next::Continue;
    }
    if let Some(e) = virtual_entry {
        if paging.is_some() {
            op.response.push(paged_control(0, Vec::new()));
        }
        let mut out = Vec::with_capacity(1024);
        let mut n = 0;
        let r = check_assertion(p.assertion.as_ref(), &shared, &v, e);
        if r.is_ok() && p.filter.eval(&shared.schema(), e) == store::Tri::True {
            encode_entry(&shared, None, &mut out, Some(op.id), e, &p.sel, None);
            n = 1;
        }
        op.encode_result_into(&mut out, tags::SEARCH_RESULT_DONE, r.as_ref().map(|_| ()));
        let rc = crate::op::code_of(r.as_ref().map(|_| ()));
        op.finish_with(out, rc, Some(n)).await;
        return Next::Continue;
    }
    // Small searches (one base entry, or few index candidates) run right here: cheaper than a
    // hop to the blocking pool, and they cannot hold up the connection for long. A paged
    // search's first page walks the whole result set, so it is never small.
    let base_only = p.scope == store::Scope::Base && !p.root;
    if !base_only {
        p.cands = v.candidates(&shared.schema(), &p.filter);
    }
    let small = base_only
        || (paging.as_ref().is_none_or(|pg| pg.cursor.is_some())
            && p.cands
                .as_ref()
                .is_some_and(|c| c.len() <= INLINE_CANDIDATES));
    if small {
        let mut pending: Vec<Vec<u8>> = Vec::new();
        let ran = execute(
            &op.conn,
            &v,
            op.id,
            &p,
            &AtomicBool::new(false),
            &mut |b| {
                pending.push(b);
                true
            },
            paging.as_mut(),
        );
        for b in pending {
            op.conn.send(b).await;
        }
        if let Some(ran) = ran {
            let (pdu, rc, n) = ran.finish(&mut op, paging);
            op.finish_with(pdu, rc, Some(n)).await;
        }
        return Next::Continue;
    }
    let Ok(permit) = op.conn.permits.clone().acquire_owned().await else {
        return Next::Continue;
    };
    let flag = Arc::new(AtomicBool::new(false));
    if let Ok(mut m) = op.conn.running.lock() {
        m.insert(op.id, flag.clone());
    }
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let conn = op.conn.clone();
        let id = op.id;
        let ran = execute(
            &conn,
            &v,
            id,
            &p,
            &flag,
            &mut |b| conn.send_blocking(b),
            paging.as_mut(),
        );
        let cancel = super::cancel::search_ended(&conn, id, &flag);
        let ended_first = ran.is_some();
        match (ran, &cancel) {
            (Some(ran), _) => {
                let (pdu, rc, n) = ran.finish(&mut op, paging);
                rt.block_on(op.finish_with(pdu, rc, Some(n)));
            }
            // Cancelled (RFC 3909): unlike Abandon, a result says so.
            (None, Some(_)) => {
                let e = super::cancel::cancelled();
                rt.block_on(op.finish(tags::SEARCH_RESULT_DONE, Err(&e), None));
            }
            // Abandoned (or the client went away): no result was sent.
            (None, None) => conn.log_abandoned(op.log.take()),
        }
        // After the search's result: the Cancel's answer follows it.
        if let Some(c) = cancel {
            let _ = c.send(!ended_first);
        }
        drop(permit);
    });
    Next::Continue
}

/// A paged search's page in the making.
pub(crate) struct Paging {
    /// Entries this page may hold.
    size: u64,
    /// The request's fingerprint (`request_key`).
    key: u64,
    /// The walk so far; `None` on the first page.
    cursor: Option<paged::Cursor>,
}

/// The paged results response control: the result set's size and the next page's cookie.
pub(crate) fn paged_control(size: u64, cookie: Vec<u8>) -> proto::Control<'static> {
    let value = proto::controls::PagedResults {
        size: i64::try_from(size).unwrap_or(i64::MAX),
        cookie: cookie.into(),
    };
    proto::Control {
        oid: proto::oids::PAGED_RESULTS.as_bytes().into(),
        critical: false,
        value: Some(value.to_vec().into()),
    }
}

/// A fingerprint of everything in a search request but its controls, and of the requester:
/// the later pages of a paged search must repeat the first page's request (RFC 2696 §3).
pub(crate) fn request_key(req: &SearchRequest<'_>, who: &Identity) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    req.base.hash(&mut h);
    (req.scope as u8).hash(&mut h);
    (req.deref as u8).hash(&mut h);
    req.size_limit.hash(&mut h);
    req.time_limit.hash(&mut h);
    req.types_only.hash(&mut h);
    req.filter.to_string().hash(&mut h);
    req.attributes.hash(&mut h);
    who.dn.hash(&mut h);
    h.finish()
}

/// What a search sent, with the bytes not yet handed to the connection.
pub(crate) struct Ran {
    pub outcome: Result<(), LdapError>,
    pub sent: u64,
    pub out: Vec<u8>,
    /// The sortResult to report (a sorted search that got to sort, or to find it could not).
    pub sorted: Option<(u32, Option<String>)>,
    /// The VLV response to report.
    pub vlv: Option<proto::controls::vlv::VlvResponse<'static>>,
}

impl Ran {
    /// The final bytes (the last entries and the SearchResultDone, with the paged results
    /// control when paging), the result code and the number of entries, for `Op::finish_with`.
    fn finish(mut self, op: &mut Op, paging: Option<Paging>) -> (Vec<u8>, ResultCode, u64) {
        if let Some((code, attr)) = self.sorted.take() {
            op.response.push(sort::sort_control(code, attr.as_deref()));
        }
        if let Some(r) = self.vlv.take() {
            op.response.push(sort::vlv_control(&r));
        }
        if let Some(pg) = paging {
            // Another page follows only if entries are left and the walk did not fail.
            let next = match pg.cursor {
                Some(c) if self.outcome.is_ok() && !c.left.is_empty() => {
                    let total = c.sent + c.left.len();
                    let max = op.conn.shared.config().max_paged_searches;
                    let cookie = op
                        .conn
                        .paged
                        .lock()
                        .map(|mut open| open.keep(c, max))
                        .unwrap_or_default();
                    (total, cookie)
                }
                Some(c) => (c.sent + c.left.len(), Vec::new()),
                None => (0, Vec::new()),
            };
            op.response.push(paged_control(next.0, next.1));
        }
        op.encode_result_into(
            &mut self.out,
            tags::SEARCH_RESULT_DONE,
            self.outcome.as_ref().map(|_| ()),
        );
        let rc = crate::op::code_of(self.outcome.as_ref().map(|_| ()));
        (self.out, rc, self.sent)
    }
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

/// The dereference response control (draft-masarati-ldap-deref) of entry `e`, as slapd's
/// deref overlay builds it: for each spec whose attribute `e` has and the requester may read,
/// one DerefRes per value, with the requested attributes of the entry the value names that
/// the requester may read (none when it is absent or hidden). No control when no spec applies.
fn deref_control(
    shared: &Shared,
    v: &store::Version,
    view: &acl::View,
    specs: &[crate::controls::DerefSpec],
    e: &Entry,
    access: Option<&acl::EntryAccess<'_>>,
) -> Option<proto::Control<'static>> {
    let schema = &*shared.schema();
    let readable = |a: Option<&acl::EntryAccess<'_>>, ty: AttrId| {
        a.is_none_or(|a| a.can(Some(ty), Rights::READ))
    };
    // Attributes of exactly this type, without options (slapd's `attr_find`).
    fn plain(e: &Entry, ty: AttrId) -> Vec<&[u8]> {
        e.attrs()
            .filter(|a| a.ty == ty && a.options.is_empty())
            .flat_map(|a| a.values())
            .collect()
    }
    let mut res = Vec::new();
    for spec in specs {
        let values = plain(e, spec.attr);
        if values.is_empty() || !readable(access, spec.attr) {
            continue;
        }
        let attr_name = schema.attr(spec.attr).name().as_bytes();
        for value in values {
            let target = shared
                .parse_dn(value)
                .ok()
                .and_then(|(_, ndn)| v.lookup(&ndn));
            let mut attrs = Vec::new();
            if let Some(t) = target {
                let t_access = (!view.is_admin()).then(|| view.entry(schema, t));
                if t_access.as_ref().is_none_or(|a| a.visible()) {
                    for &ty in &spec.attrs {
                        let vals = plain(t, ty);
                        if !vals.is_empty() && readable(t_access.as_ref(), ty) {
                            attrs.push((schema.attr(ty).name().as_bytes(), vals));
                        }
                    }
                }
            }
            res.push(proto::controls::deref::DerefRes {
                attr: attr_name,
                value,
                attrs,
            });
        }
    }
    if res.is_empty() {
        return None;
    }
    let mut value = Vec::with_capacity(256);
    proto::controls::deref::encode_response(&res, &mut value);
    Some(proto::Control {
        oid: proto::oids::DEREF.as_bytes().into(),
        critical: false,
        value: Some(value.into()),
    })
}

/// Searches whose index candidates are at most this many run inline in the read loop.
const INLINE_CANDIDATES: u64 = 64;

/// What `walk` hands each entry it finds: the entry and the requester's access to it.
pub(crate) type Visit<'v> =
    dyn FnMut(&Arc<Entry>, Option<acl::EntryAccess<'_>>) -> ControlFlow<()> + 'v;

/// How a walk over the scope ended.
pub(crate) enum Walked {
    Done,
    TimedOut,
    /// The visitor stopped it, or the search was abandoned.
    Stopped,
}

/// Walks the search's scope on version `v`, handing `visit` each matching entry the requester
/// may see (with their access to it; `None` for the administrator).
pub(crate) fn walk(
    shared: &Shared,
    v: &store::Version,
    p: &Prepared,
    bases: &[Arc<Entry>],
    abandoned: &AtomicBool,
    visit: &mut Visit<'_>,
) -> Walked {
    let schema = &*shared.schema();
    let mut scope = p.scope;
    if p.root && scope == store::Scope::One {
        scope = store::Scope::Base;
    }
    for base in bases {
        let mut stopped = false;
        let mut check = |e: &Arc<Entry>| -> ControlFlow<()> {
            // Hidden entries are skipped before the visitor sees them, so that a limit
            // reached never hints at entries the requester may not see.
            let access = (!p.view.is_admin()).then(|| p.view.entry(schema, e));
            if let Some(a) = &access {
                if !a.visible() || !searchable_here(schema, p, a, e) {
                    return ControlFlow::Continue(());
                }
            }
            let r = visit(e, access);
            stopped |= r.is_break();
            r
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
            &mut check,
            tick,
        );
        if timed_out {
            return Walked::TimedOut;
        }
        if stopped || abandoned.load(Ordering::Relaxed) {
            return Walked::Stopped;
        }
    }
    Walked::Done
}

/// Runs a prepared search on version `v`, handing encoded entries to `sink` (false from the
/// sink: the connection is gone); `None` if abandoned or gone (nothing more is sent). With
/// `paging`, sends the next page of the paged search and leaves its cursor there.
pub(crate) fn execute(
    conn: &Conn,
    v: &Arc<store::Version>,
    id: i32,
    p: &Prepared,
    abandoned: &AtomicBool,
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
    paging: Option<&mut Paging>,
) -> Option<Ran> {
    let shared = &*conn.shared;
    let schema = &*shared.schema();
    let mut ran = Ran {
        outcome: Ok(()),
        sent: 0,
        // Most searches answer one small entry: a buffer that grows when it must costs
        // less than a 16 KiB one each time (a large allocation for the allocator).
        out: Vec::with_capacity(2 * 1024),
        sorted: None,
        vlv: None,
    };
    // The bases to walk: the named entry, or every naming context for the root.
    let mut bases: Vec<Arc<Entry>> = Vec::new();
    if p.root {
        for s in &shared.suffixes {
            if let Some(e) = v.lookup(s) {
                bases.push(e.clone());
            }
        }
    } else {
        match v.lookup(&p.base) {
            Some(e) if p.view.entry(schema, e).visible() => bases.push(e.clone()),
            _ => {
                ran.outcome = Err(shared.no_such_object_for(v, &p.base, &p.view));
                return Some(ran);
            }
        }
    }
    // The assertion control is checked against the base entry (the root DSE for the root).
    if let Some(a) = &p.assertion {
        let target = bases.first().map_or(&shared.root_dse, |b| &**b);
        let target = if p.root { &shared.root_dse } else { target };
        if let Err(e) = a.check(shared, v, target) {
            ran.outcome = Err(e);
            return Some(ran);
        }
    }
    // A sorted search reports its sortResult from here on (unless its sort or VLV fails).
    if let Some(o) = &p.order {
        ran.sorted = Some((o.result_code(), o.result_attr().map(str::to_owned)));
    }
    let mut gone = false;
    // Encodes one entry of the result; a buffer's worth goes to the sink. False when the
    // search must stop: the connection is gone, or the search was abandoned while the sink
    // waited for a slow reader (checked now rather than up to TICK_EVERY entries later).
    let mut emit = |ran: &mut Ran, e: &Arc<Entry>, access: Option<&acl::EntryAccess<'_>>| {
        let deref = p
            .deref
            .as_deref()
            .and_then(|specs| deref_control(shared, v, &p.view, specs, e, access));
        encode_entry_with_controls(
            shared,
            Some(v),
            &mut ran.out,
            Some(id),
            e,
            &p.sel,
            access,
            deref.as_slice(),
        );
        ran.sent += 1;
        if ran.out.len() >= FLUSH_BYTES {
            if !sink(std::mem::take(&mut ran.out)) || abandoned.load(Ordering::Relaxed) {
                return false;
            }
            ran.out.reserve(16 * 1024);
        }
        true
    };
    let walked = match paging {
        Some(pg) => {
            let walked = match &pg.cursor {
                Some(_) => Walked::Done,
                None => {
                    // The first page: every entry the search matches, by id.
                    let (left, w) = if p.order.as_ref().is_some_and(|o| o.sorts()) {
                        match sort::collect(shared, v, p, &bases, abandoned, walk) {
                            Ok((list, w)) => (paged::Left::Sorted(list.ids.into()), w),
                            Err(e) => {
                                ran.sorted = None;
                                ran.outcome = Err(e);
                                return Some(ran);
                            }
                        }
                    } else {
                        let mut left = store::RoaringBitmap::new();
                        let w = walk(shared, v, p, &bases, abandoned, &mut |e, _| {
                            left.insert(e.id);
                            ControlFlow::Continue(())
                        });
                        (paged::Left::Ids(left), w)
                    };
                    pg.cursor = Some(paged::Cursor {
                        key: pg.key,
                        version: v.clone(),
                        left,
                        sent: 0,
                    });
                    w
                }
            };
            if let (Walked::Done, Some(c)) = (&walked, pg.cursor.as_mut()) {
                let mut taken = 0;
                for eid in c.left.iter() {
                    if ran.sent >= pg.size {
                        break;
                    }
                    // The size limit bounds the whole paged walk, as slapd's does.
                    if p.size_limit > 0 && c.sent >= p.size_limit {
                        ran.outcome = Err(LdapError::new(
                            ResultCode::SizeLimitExceeded,
                            "size limit exceeded",
                        ));
                        break;
                    }
                    taken += 1;
                    let Some(e) = v.get(eid) else { continue };
                    let access = (!p.view.is_admin()).then(|| p.view.entry(schema, e));
                    c.sent += 1;
                    if !emit(&mut ran, e, access.as_ref()) {
                        gone = true;
                        break;
                    }
                }
                c.left.drop_first(taken);
            }
            walked
        }
        None if p.order.as_ref().is_some_and(|o| o.sorts()) => {
            match sort::send(conn, v, p, &bases, abandoned, walk, &mut ran, &mut emit) {
                Some(w) => w,
                None => {
                    gone = true;
                    Walked::Stopped
                }
            }
        }
        None => walk(shared, v, p, &bases, abandoned, &mut |e, access| {
            if p.size_limit > 0 && ran.sent >= p.size_limit {
                ran.outcome = Err(LdapError::new(
                    ResultCode::SizeLimitExceeded,
                    "size limit exceeded",
                ));
                return ControlFlow::Break(());
            }
            if !emit(&mut ran, e, access.as_ref()) {
                gone = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }),
    };
    if gone || abandoned.load(Ordering::Relaxed) {
        return None;
    }
    if let Walked::TimedOut = walked {
        ran.outcome = Err(LdapError::new(
            ResultCode::TimeLimitExceeded,
            "time limit exceeded",
        ));
    }
    Some(ran)
}

/// Answers a search based under cn=Monitor: the entries in its scope that match its filter,
/// built now. Someone who may not read cn=Monitor gets noSuchObject, as from slapd when its
/// rules hide it.
async fn search_monitor(mut op: Op, v: &store::Version, p: &Prepared, paged: bool) {
    let shared = op.shared().clone();
    if paged {
        // One page holds it all (it is small): no cookie, as for the root DSE.
        op.response.push(paged_control(0, Vec::new()));
    }
    let mut out = Vec::with_capacity(8 * 1024);
    let mut n = 0;
    let r = (|| -> Result<(), LdapError> {
        let hidden = || LdapError::new(ResultCode::NoSuchObject, "no such object");
        if !crate::monitor::may_read(&shared, &op.who) {
            return Err(hidden());
        }
        let all = crate::monitor::entries(&shared);
        let Some(list) = crate::monitor::in_scope(&all, &p.base, p.scope) else {
            // matchedDN: the nearest entry of the tree above the base.
            let matched = all
                .iter()
                .filter(|(d, _)| schema::norm_is_descendant(&p.base.norm, &d.norm))
                .max_by_key(|(d, _)| d.rdns.len())
                .map(|(_, e)| e.dn().to_string())
                .unwrap_or_default();
            return Err(hidden().with_matched(matched));
        };
        if let Some((_, base)) = all.iter().find(|(d, _)| d.norm == p.base.norm) {
            dit::write::check_assertion(p.assertion.as_ref(), &shared, v, base)?;
        }
        let schema = shared.schema();
        for e in &list {
            if p.filter.eval(&schema, e) != store::Tri::True {
                continue;
            }
            if p.size_limit > 0 && n >= p.size_limit {
                return Err(LdapError::new(
                    ResultCode::SizeLimitExceeded,
                    "size limit exceeded",
                ));
            }
            encode_entry(&shared, None, &mut out, Some(op.id), e, &p.sel, None);
            n += 1;
        }
        Ok(())
    })();
    op.encode_result_into(&mut out, tags::SEARCH_RESULT_DONE, r.as_ref().map(|_| ()));
    let rc = crate::op::code_of(r.as_ref().map(|_| ()));
    op.finish_with(out, rc, Some(n)).await;
}
