//! The search engine: one way to run every search. A search is `prepare`d from its request
//! (base, scope, limits, the requester's view of the access rules, the filter compiled against
//! the schema, the attribute selection), then a **source** (`Source`) hands an **emitter**
//! (`Emitter`) the entries of its result, in order; the emitter applies the size limit (the
//! time limit and Abandon are checked as the scope is walked), encodes each entry with the
//! attributes the requester may read (and its dereference control), and hands the connection
//! a buffer every `FLUSH_BYTES`; `run` answers it: the last entries and the SearchResultDone
//! with the source's response controls.
//!
//! Entries that stand for others (`dit::standin`: aliases, referral objects) are met in one
//! place: `Emitter::bases` (an alias on the way to the base, a referral object at or above
//! it, the default referral) and `Emitter::walk`, which leaves them out of the scope's walk
//! and then sends what they bring (`stand_ins`). `Prepared::stand_ins` decides once whether
//! the search meets any: a search that asks for nothing, or whose version holds none, walks
//! as before.
//!
//! The sources: every matching entry of the scope (`Plain`), a page of them (`paged`), sorted
//! or a window of the sorted list (`sorted`), the entries the server holds itself (`held`), and
//! the refresh of a sync search (`sync`). A new search feature is a new source.
//!
//! A small search (one base entry, or few index candidates) runs right in the read loop:
//! cheaper than a hop to the blocking pool, and it cannot hold up the connection for long. Any
//! other waits for a `max_outstanding` permit and runs on the blocking pool, so long searches
//! neither stall the connection nor other connections. A search sees one version of the store
//! from start to end.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proto::{tags, ResultCode, SearchRequest};
use schema::{AttrId, NormDn, Schema};
use store::{Entry, Filter, Tri, Version};

use super::encode::{deref_control, Encoder};
use crate::op::{Next, Op};
use crate::ops::cancel;
use crate::reply::{Conn, FLUSH_BYTES};
use crate::state::Shared;
use dit::acl::{self, Rights};
use dit::error::{LdapError, LdapResult};
use dit::filter::compile;
use dit::identity::Identity;
use dit::select::Selection;
use dit::write::Assertion;

/// Searches whose index candidates are at most this many run inline in the read loop.
const INLINE_CANDIDATES: u64 = 64;

/// An entry the server holds itself, outside the naming contexts and the access rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// The root DSE: a base search of the empty DN.
    RootDse,
    /// The subschema subentry (cn=Subschema), base scope.
    Subschema,
    /// cn=Monitor and the entries below it: read by those who may (`readable`); anyone else
    /// is told there is no such object.
    Monitor { readable: bool },
}

/// A search ready to run: everything resolved from the request.
pub(crate) struct Prepared {
    pub(crate) base: Arc<NormDn>,
    pub(crate) root: bool,
    pub(crate) scope: store::Scope,
    /// The server-held entries it reads, if it reads those.
    pub(crate) held: Option<Held>,
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
    /// The index candidates, once planned against the version the search runs on (`plan`).
    cands: Option<store::RoaringBitmap>,
    /// The assertion control, checked against the base entry.
    pub(crate) assertion: Option<Assertion>,
    /// The dereference control's specs: each entry returned carries the entries its
    /// DN-valued attributes name (`deref_control`).
    pub(crate) deref: Option<Vec<crate::controls::DerefSpec>>,
    /// How aliases and referral objects are met (`stand_ins`); all off unless the version
    /// holds some and the request asks.
    pub(crate) meet: Meet,
}

/// How a search meets entries that stand for others (`dit::standin`), decided once.
#[derive(Default)]
pub(crate) struct Meet {
    /// Aliases met in the scope are followed (derefInSearching, derefAlways) and referral
    /// objects answer with continuation references (no ManageDsaIT).
    pub(crate) walk: dit::standin::Kinds,
    /// Aliases on the way to the base are followed (derefFindingBaseObj, derefAlways).
    pub(crate) finding: bool,
    /// The request's scope and base DN as sent, for referral URLs: kept only when a
    /// referral may answer.
    pub(crate) scope: Option<proto::Scope>,
    pub(crate) dn: Option<Box<str>>,
    /// A default referral is set and the base lies outside every naming context (or no entry
    /// at or above it exists).
    pub(crate) default: bool,
}

pub(crate) fn prepare(
    shared: &Shared,
    v: &Version,
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
    let held = if root && scope == store::Scope::Base {
        Some(Held::RootDse)
    } else if scope == store::Scope::Base && base.norm == shared.subschema().ndn_str() {
        Some(Held::Subschema)
    } else if crate::monitor::holds(shared, &base) {
        Some(Held::Monitor {
            readable: crate::monitor::may_read(shared, who),
        })
    } else {
        None
    };
    // The root DSE and the subschema subentry are outside the rules: anyone may read them.
    // So is cn=Monitor for those who may read it.
    let outside = match held {
        Some(Held::RootDse | Held::Subschema) => true,
        Some(Held::Monitor { readable }) => readable,
        None => false,
    };
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
    // `(member=DN)` also finds the dynamic groups whose URLs find DN, as the requester.
    let filter = shared.dynlist.rewrite(shared, v, filter, &|e| {
        view.reader(schema, e).is_none_or(|a| a.visible())
    });
    let untyped = !view.is_admin() && has_untyped_extensible(&filter);
    Ok(Prepared {
        base,
        root,
        scope,
        held,
        filter,
        sel: Selection::parse(schema, &req.attributes, req.types_only),
        size_limit,
        deadline: (time_limit > 0).then(|| Instant::now() + Duration::from_secs(time_limit)),
        view,
        check,
        untyped,
        cands: None,
        assertion: None,
        deref: None,
        meet: Meet::default(),
    })
}

impl Prepared {
    /// Decides how the search meets aliases and referral objects (`Meet`): from its
    /// derefAliases and ManageDsaIT, what version `v` holds and the default referral. Costs
    /// two index lookups when the version holds neither.
    pub(crate) fn stand_ins(
        &mut self,
        shared: &Shared,
        v: &Version,
        req: &SearchRequest<'_>,
        manage_dsa_it: bool,
    ) {
        use proto::DerefAliases as D;
        if self.held.is_some() {
            return;
        }
        let asked = dit::standin::Kinds {
            alias: matches!(req.deref, D::InSearching | D::Always),
            referral: !manage_dsa_it,
        };
        let walk = shared.holds(v, asked);
        let finding = matches!(req.deref, D::FindingBase | D::Always)
            && shared
                .holds(
                    v,
                    dit::standin::Kinds {
                        alias: true,
                        referral: false,
                    },
                )
                .alias;
        // As slapd: outside every naming context, or where not even an entry above the base
        // exists (an empty naming context).
        let default = !self.root
            && !shared.config().referral.is_empty()
            && (shared.suffix_of(&self.base.norm).is_none()
                || (v.lookup(&self.base).is_none() && v.matched(&self.base).is_none()));
        let refers = walk.referral || default;
        self.meet = Meet {
            walk,
            finding,
            scope: refers.then_some(req.scope),
            dn: refers.then(|| String::from_utf8_lossy(&req.base).into()),
            default,
        };
    }

    /// The requester's access to entry `e`; `None` for the administrator, who sees everything.
    pub(crate) fn access<'a>(
        &'a self,
        schema: &'a Schema,
        e: &Entry,
    ) -> Option<acl::EntryAccess<'a>> {
        self.view.reader(schema, e)
    }

    /// Whether the requester may see entry `e` at all (the search's base, for instance).
    pub(crate) fn sees(&self, schema: &Schema, e: &Entry) -> bool {
        self.access(schema, e).is_none_or(|a| a.visible())
    }

    /// A base search of one stored entry: nothing to plan.
    pub(crate) fn base_only(&self) -> bool {
        self.scope == store::Scope::Base && !self.root
    }

    /// Plans the filter over version `v`'s indexes (`Version::candidates`).
    pub(crate) fn plan(&mut self, schema: &Schema, v: &Version) {
        if !self.base_only() {
            self.cands = v.candidates(schema, &self.filter);
        }
    }

    /// Whether the search looks at few entries: one base entry, or few index candidates
    /// (once planned).
    pub(crate) fn few(&self) -> bool {
        self.base_only()
            || self
                .cands
                .as_ref()
                .is_some_and(|c| c.len() <= INLINE_CANDIDATES)
    }

    /// Whether the normalized DN `ndn` is within the search's base and scope.
    pub(crate) fn in_scope(&self, shared: &Shared, ndn: &str) -> bool {
        use store::Scope;
        if self.root {
            return match self.scope {
                Scope::Base => false,
                Scope::One => shared.is_suffix(ndn),
                Scope::Subtree => true,
            };
        }
        let base = self.base.norm.as_str();
        match self.scope {
            Scope::Base => ndn == base,
            Scope::One => schema::norm_parent(ndn) == Some(base),
            Scope::Subtree => ndn == base || schema::norm_is_descendant(ndn, base),
        }
    }

    /// Whether entry `e` (a change the feed reports) belongs to the search's result as the
    /// requester would search for it: in scope, matching the filter, visible, matching on
    /// what they may search. `Some(access)` if so (`None` inside: the administrator).
    pub(crate) fn matches<'a>(
        &'a self,
        shared: &Shared,
        schema: &'a Schema,
        e: &Entry,
    ) -> Option<Option<acl::EntryAccess<'a>>> {
        if !self.in_scope(shared, e.ndn_str()) || self.filter.eval(schema, e) != Tri::True {
            return None;
        }
        self.admit(schema, e)
    }

    /// The requester's access to entry `e`, which the filter matched, if they may see it in
    /// the result: the entry visible to them, and matching on what they may search in it.
    /// `Some(None)` for the administrator.
    fn admit<'a>(&'a self, schema: &'a Schema, e: &Entry) -> Option<Option<acl::EntryAccess<'a>>> {
        let access = self.access(schema, e);
        if let Some(a) = &access {
            if !a.visible() || !self.searchable_here(schema, a, e) {
                return None;
            }
        }
        Some(access)
    }

    /// Whether the entry still matches once the filter attributes the requester may not
    /// search in this entry are taken as Undefined.
    fn searchable_here(&self, schema: &Schema, a: &acl::EntryAccess<'_>, e: &Entry) -> bool {
        let hide: Vec<AttrId> = self
            .check
            .iter()
            .copied()
            .filter(|t| !a.can(Some(*t), Rights::SEARCH))
            .collect();
        // An extensible match over all attributes looks at the entry without the attributes
        // the requester may not search.
        let stripped = if self.untyped && e.attrs().any(|x| !a.can(Some(x.ty), Rights::SEARCH)) {
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
        acl::mask_filter(&self.filter, &|t| hide.contains(&t)).eval(schema, e) == Tri::True
    }
}

/// The entries of object class `class` (its equality form) within `scope` of `base`: from the
/// objectClass index, or by walking the scope when objectClass has none.
fn of_class(
    v: &Version,
    known: &dit::Known,
    class: &[u8],
    base: &Arc<Entry>,
    scope: store::Scope,
) -> Vec<Arc<Entry>> {
    let oc = known.object_class;
    let mut out = Vec::new();
    match v.holders(oc, class) {
        Some(ids) => {
            for id in &ids {
                if let Some(e) = v.get(id) {
                    if v.in_scope(base, scope, e) && e.has_value(oc, class) {
                        out.push(e.clone());
                    }
                }
            }
        }
        None => {
            let mut take = |e: &Arc<Entry>| {
                if v.in_scope(base, scope, e) && e.has_value(oc, class) {
                    out.push(e.clone());
                }
                ControlFlow::Continue(())
            };
            match scope {
                store::Scope::Base => {
                    let _ = take(base);
                }
                store::Scope::One => {
                    if let Some(kids) = v.children(base.id) {
                        for id in kids {
                            if let Some(e) = v.get(id) {
                                let _ = take(e);
                            }
                        }
                    }
                }
                store::Scope::Subtree => {
                    let _ = v.walk(base, &mut take);
                }
            }
        }
    }
    out
}

fn has_untyped_extensible(f: &Filter) -> bool {
    match f {
        Filter::And(v) | Filter::Or(v) => v.iter().any(has_untyped_extensible),
        Filter::Not(f) => has_untyped_extensible(f),
        Filter::Extensible { attr: None, .. } => true,
        _ => false,
    }
}

/// A fingerprint of everything in a search request but its controls, and of the requester:
/// the later pages of a paged search must repeat the first page's request (RFC 2696 §3), and
/// a VLV context serves only its own search.
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

/// Where a search's entries come from: it hands the emitter every entry of the result, in
/// order, and names the response controls of the result.
pub(crate) trait Source {
    /// Whether the search may run in the read loop: it looks at few entries.
    fn inline(&self, p: &Prepared) -> bool {
        p.few()
    }

    /// Hands `em` the entries of the result; how the walk over the scope ended.
    fn feed(&mut self, em: &mut Emitter<'_>) -> Walked;

    /// The response controls of the SearchResultDone, its outcome known.
    fn respond(
        self,
        _conn: &Conn,
        _outcome: &LdapResult<()>,
        _response: &mut Vec<proto::Control<'static>>,
    ) where
        Self: Sized,
    {
    }
}

/// Every matching entry of the scope, as the walk finds them: a search with no control that
/// changes which entries it returns.
pub(crate) struct Plain;

impl Source for Plain {
    fn feed(&mut self, em: &mut Emitter<'_>) -> Walked {
        let Some(bases) = em.bases() else {
            return Walked::Done;
        };
        em.walk(&bases, &mut |em, e, access| em.entry(e, access.as_ref()))
    }
}

/// How a walk over the scope ended.
pub(crate) enum Walked {
    Done,
    TimedOut,
    /// The visitor stopped it, or the search was abandoned.
    Stopped,
}

/// What `Emitter::walk` hands each entry it finds: the emitter, the entry and the requester's
/// access to it.
pub(crate) type Visit<'v, 's> =
    dyn FnMut(&mut Emitter<'s>, &Arc<Entry>, Option<acl::EntryAccess<'s>>) -> ControlFlow<()> + 'v;

/// The entries a search starts from: the named entry, or every naming context for the root.
pub(crate) enum Bases {
    One(Arc<Entry>),
    Contexts(Vec<Arc<Entry>>),
}

impl std::ops::Deref for Bases {
    type Target = [Arc<Entry>];

    fn deref(&self) -> &[Arc<Entry>] {
        match self {
            Bases::One(e) => std::slice::from_ref(e),
            Bases::Contexts(v) => v,
        }
    }
}

/// Sends the entries of one search: the size limit, encoding (with the attributes the
/// requester may read, and the dereference control), and flushing to the connection.
pub(crate) struct Emitter<'s> {
    pub(crate) conn: &'s Conn,
    pub(crate) shared: &'s Shared,
    pub(crate) schema: &'s Schema,
    /// The version the search runs on.
    pub(crate) v: &'s Arc<Version>,
    pub(crate) p: &'s Prepared,
    enc: Encoder<'s>,
    abandoned: &'s AtomicBool,
    /// Takes each full buffer; false when the connection is gone.
    sink: &'s mut dyn FnMut(Vec<u8>) -> bool,
    out: Vec<u8>,
    /// Entries this request sent.
    pub(crate) sent: u64,
    /// Entries the earlier requests of the same search sent (a paged search's earlier pages),
    /// which its size limit counts too.
    pub(crate) before: u64,
    outcome: LdapResult<()>,
    /// The connection is gone, or the search was abandoned while the sink waited for a slow
    /// reader: nothing more is sent.
    gone: bool,
}

/// What a search sent, with the bytes not yet handed to the connection.
pub(crate) struct Ran {
    pub outcome: LdapResult<()>,
    pub sent: u64,
    pub out: Vec<u8>,
}

impl<'s> Emitter<'s> {
    fn new(
        conn: &'s Conn,
        schema: &'s Schema,
        v: &'s Arc<Version>,
        p: &'s Prepared,
        id: i32,
        abandoned: &'s AtomicBool,
        sink: &'s mut dyn FnMut(Vec<u8>) -> bool,
    ) -> Emitter<'s> {
        let shared = &*conn.shared;
        Emitter {
            conn,
            shared,
            schema,
            v,
            p,
            enc: Encoder {
                shared,
                schema,
                v: Some(v),
                sel: &p.sel,
                id: Some(id),
            },
            abandoned,
            sink,
            // Most searches answer one small entry: a buffer that grows when it must costs
            // less than a 16 KiB one each time (a large allocation for the allocator).
            out: Vec::with_capacity(2 * 1024),
            sent: 0,
            before: 0,
            outcome: Ok(()),
            gone: false,
        }
    }

    /// Ends the search with error `e` (the entries sent so far stay sent).
    pub(crate) fn fail(&mut self, e: LdapError) {
        self.outcome = Err(e);
    }

    pub(crate) fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// The requester's access to entry `e` (`None`: the administrator).
    pub(crate) fn access(&self, e: &Entry) -> Option<acl::EntryAccess<'s>> {
        self.p.access(self.schema, e)
    }

    /// The entries the search starts from, the assertion control checked against its base
    /// (the root DSE for the root). `None` when the search fails there (noSuchObject, the
    /// assertion): its outcome is set.
    pub(crate) fn bases(&mut self) -> Option<Bases> {
        let (shared, v, p) = (self.shared, self.v, self.p);
        let bases = if p.root {
            Bases::Contexts(
                shared
                    .suffixes
                    .iter()
                    .filter_map(|s| v.lookup(s).cloned())
                    .collect(),
            )
        } else if p.meet.finding || p.meet.walk.referral || p.meet.default {
            match self.find_base() {
                Ok(e) => Bases::One(e),
                Err(e) => {
                    self.fail(e);
                    return None;
                }
            }
        } else {
            match v.lookup(&p.base) {
                Some(e) if p.sees(self.schema, e) => Bases::One(e.clone()),
                _ => {
                    self.fail(shared.no_such_object_for(v, &p.base, &p.view));
                    return None;
                }
            }
        };
        if let Some(a) = &p.assertion {
            let target = match &bases {
                Bases::One(e) => &**e,
                Bases::Contexts(_) => &shared.root_dse,
            };
            if let Err(e) = a.check(shared, v, target) {
                self.fail(e);
                return None;
            }
        }
        Some(bases)
    }

    /// The base entry of a search that may meet a stand-in on the way (`Meet`): aliases
    /// followed when finding, a referral object at or above it answering referral, the
    /// default referral outside every naming context (`Dit::find`).
    fn find_base(&self) -> LdapResult<Arc<Entry>> {
        use dit::standin::{rewrite, Kinds, Miss, Target};
        let (shared, v, p) = (self.shared, self.v, self.p);
        let dn = p.meet.dn.as_deref().unwrap_or_default();
        let kinds = Kinds {
            alias: p.meet.finding,
            referral: p.meet.walk.referral,
        };
        match shared.find(v, &p.base.norm, dn, p.meet.scope, kinds) {
            Ok(e) if p.sees(self.schema, &e) => Ok(e),
            Ok(_) | Err(Miss::Absent) => {
                if p.meet.default {
                    let target = Target::Result {
                        base: None,
                        dn,
                        scope: p.meet.scope,
                    };
                    let urls = shared.config().referral.clone();
                    let urls = urls
                        .iter()
                        .filter_map(|u| rewrite(u.as_bytes(), target))
                        .collect();
                    return Err(LdapError::referral(urls));
                }
                Err(shared.no_such_object_for(v, &p.base, &p.view))
            }
            Err(Miss::Referred(e) | Miss::Alias(e)) => Err(e),
        }
    }

    /// Walks the search's scope under `bases`, handing `visit` each matching entry the
    /// requester may see (with their access to it); then what the stand-ins in the scope
    /// bring (`stand_ins`).
    pub(crate) fn walk(&mut self, bases: &[Arc<Entry>], visit: &mut Visit<'_, 's>) -> Walked {
        let mut scope = self.p.scope;
        if self.p.root && scope == store::Scope::One {
            scope = store::Scope::Base;
        }
        for base in bases {
            match self.walk_scope(base, scope, None, visit) {
                Walked::Done => {}
                w => return w,
            }
            if self.p.meet.walk.any() && scope != store::Scope::Base {
                match self.stand_ins(base, scope, visit) {
                    Walked::Done => {}
                    w => return w,
                }
            }
        }
        Walked::Done
    }

    /// Walks `scope` under `base`. Entries that stand for others (as the search meets them)
    /// are left to `stand_ins`, but for the base itself. `besides`: the walk of an alias's
    /// target, which skips what the search's own scope (base, scope) holds and what earlier
    /// targets sent (the set, which it adds to): each entry is returned once.
    fn walk_scope(
        &mut self,
        base: &Arc<Entry>,
        scope: store::Scope,
        mut besides: Option<(&Entry, store::Scope, &mut store::RoaringBitmap)>,
        visit: &mut Visit<'_, 's>,
    ) -> Walked {
        let (shared, schema, v, p, abandoned) =
            (self.shared, self.schema, self.v, self.p, self.abandoned);
        let meet = p.meet.walk;
        let mut stopped = false;
        let mut check = |e: &Arc<Entry>| -> ControlFlow<()> {
            if meet.any() && e.id != base.id && shared.stand_in(e, meet).is_some() {
                return ControlFlow::Continue(());
            }
            if let Some((b, s, sent)) = besides.as_mut() {
                if v.in_scope(b, *s, e) || !sent.insert(e.id) {
                    return ControlFlow::Continue(());
                }
            }
            // Hidden entries are skipped before the visitor sees them, so that a limit
            // reached never hints at entries the requester may not see.
            let Some(access) = p.admit(schema, e) else {
                return ControlFlow::Continue(());
            };
            let r = visit(self, e, access);
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
        Walked::Done
    }

    /// What the stand-ins within `scope` of `base` bring (RFC 4511 §4.5.3, §4.5.1.3): a
    /// continuation reference for each referral object the requester may see, whatever the
    /// filter; the entries each alias names (for a one-level search) or their subtrees (for a
    /// subtree search, following the aliases met there too), each entry once. An alias that
    /// loops or names nothing is passed over, as slapd does.
    fn stand_ins(
        &mut self,
        base: &Arc<Entry>,
        scope: store::Scope,
        visit: &mut Visit<'_, 's>,
    ) -> Walked {
        use dit::standin::{rewrite, Target};
        let (shared, schema, v, p) = (self.shared, self.schema, self.v, self.p);
        let known = &shared.known;
        if p.meet.walk.referral {
            let asked = p.meet.scope.unwrap_or(proto::Scope::Subtree);
            for r in of_class(v, known, &known.referral_class, base, scope) {
                if r.id == base.id || !p.sees(schema, &r) {
                    continue;
                }
                let urls: Vec<String> = r
                    .attr(known.ref_)
                    .map(|a| {
                        a.values()
                            .filter_map(|u| {
                                rewrite(
                                    u,
                                    Target::Continuation {
                                        base: r.dn(),
                                        scope: asked,
                                    },
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if !urls.is_empty() && self.reference(&urls).is_break() {
                    return Walked::Stopped;
                }
            }
        }
        if !p.meet.walk.alias {
            return Walked::Done;
        }
        let mut queue: Vec<Arc<Entry>> = of_class(v, known, &known.alias_class, base, scope)
            .into_iter()
            .filter(|a| a.id != base.id)
            .collect();
        let mut followed: Vec<store::EntryId> = Vec::new();
        let mut sent = store::RoaringBitmap::new();
        let target_scope = match scope {
            store::Scope::One => store::Scope::Base,
            _ => store::Scope::Subtree,
        };
        while let Some(a) = queue.pop() {
            if followed.contains(&a.id) || !p.sees(schema, &a) {
                continue;
            }
            followed.push(a.id);
            let Ok(t) = shared.deref(v, &a) else {
                continue;
            };
            if !p.sees(schema, &t) {
                continue;
            }
            match self.walk_scope(&t, target_scope, Some((base, scope, &mut sent)), visit) {
                Walked::Done => {}
                w => return w,
            }
            if target_scope == store::Scope::Subtree {
                queue.extend(
                    of_class(v, known, &known.alias_class, &t, store::Scope::Subtree)
                        .into_iter()
                        .filter(|x| !v.in_scope(base, scope, x)),
                );
            }
        }
        Walked::Done
    }

    /// Sends a continuation reference (SearchResultReference) with `urls`; the size limit
    /// counts entries only, as slapd's.
    fn reference(&mut self, urls: &[String]) -> ControlFlow<()> {
        let msg = proto::LdapMessage {
            id: self.enc.id.unwrap_or(0),
            op: proto::ProtocolOp::SearchResultReference(
                urls.iter()
                    .map(|u| std::borrow::Cow::Borrowed(u.as_bytes()))
                    .collect(),
            ),
            controls: vec![],
        };
        msg.encode(&mut self.out);
        self.flush_if_full()
    }

    /// Whether the search sent as many entries as its size limit allows; if so its outcome is
    /// sizeLimitExceeded. Checked before each entry, so that a result of exactly the limit
    /// succeeds.
    pub(crate) fn limit_reached(&mut self) -> bool {
        let limit = self.p.size_limit;
        let reached = limit > 0 && self.before + self.sent >= limit;
        if reached {
            self.fail(LdapError::new(
                ResultCode::SizeLimitExceeded,
                "size limit exceeded",
            ));
        }
        reached
    }

    /// Sends one entry encoded by `encode`, within the size limit. Break: the search must
    /// stop (the limit is reached, the connection is gone, or the search was abandoned).
    pub(crate) fn push(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> ControlFlow<()> {
        if self.limit_reached() {
            return ControlFlow::Break(());
        }
        encode(&mut self.out);
        self.sent += 1;
        self.flush_if_full()
    }

    /// Hands the buffer to the connection once it holds `FLUSH_BYTES`. Break: the connection
    /// is gone or the search was abandoned.
    fn flush_if_full(&mut self) -> ControlFlow<()> {
        if self.out.len() >= FLUSH_BYTES {
            // Abandoned while the sink waited for a slow reader: checked now rather than up
            // to a walk's tick later.
            if !(self.sink)(std::mem::take(&mut self.out)) || self.abandoned() {
                self.gone = true;
                return ControlFlow::Break(());
            }
            self.out.reserve(16 * 1024);
        }
        ControlFlow::Continue(())
    }

    /// Sends stored entry `e`, which the requester reads with `access`.
    pub(crate) fn entry(
        &mut self,
        e: &Entry,
        access: Option<&acl::EntryAccess<'_>>,
    ) -> ControlFlow<()> {
        let (enc, v, p) = (self.enc, self.v, self.p);
        self.push(|out| {
            let deref = p
                .deref
                .as_deref()
                .and_then(|specs| deref_control(&enc, v, &p.view, specs, e, access));
            enc.entry(out, e, access, deref.as_slice());
        })
    }

    /// Sends stored entry `e` of a list the search made earlier (sorted, or pages).
    pub(crate) fn listed(&mut self, e: &Entry) -> ControlFlow<()> {
        let access = self.access(e);
        self.entry(e, access.as_ref())
    }

    /// Sends an entry the server holds (no computed attributes, no access rules).
    pub(crate) fn held(&mut self, e: &Entry) -> ControlFlow<()> {
        let enc = Encoder {
            v: None,
            ..self.enc
        };
        self.push(|out| enc.entry(out, e, None, &[]))
    }

    /// How the search ended: `None` if abandoned or the connection is gone (nothing more is
    /// sent), else what it sent and its outcome (timeLimitExceeded when the walk ran out of
    /// time).
    pub(crate) fn end(self, walked: Walked) -> Option<Ran> {
        if self.gone || self.abandoned() {
            return None;
        }
        let mut outcome = self.outcome;
        if let Walked::TimedOut = walked {
            outcome = Err(LdapError::new(
                ResultCode::TimeLimitExceeded,
                "time limit exceeded",
            ));
        }
        Some(Ran {
            outcome,
            sent: self.sent,
            out: self.out,
        })
    }
}

/// Runs search `p` from `source` on version `v`, handing encoded entries to `sink` (false
/// from the sink: the connection is gone); `None` if abandoned or gone.
pub(crate) fn execute<S: Source>(
    conn: &Conn,
    v: &Arc<Version>,
    id: i32,
    p: &Prepared,
    abandoned: &AtomicBool,
    sink: &mut dyn FnMut(Vec<u8>) -> bool,
    source: &mut S,
) -> Option<Ran> {
    let guard = conn.shared.schema();
    let mut em = Emitter::new(conn, &guard, v, p, id, abandoned, sink);
    let walked = source.feed(&mut em);
    em.end(walked)
}

impl Ran {
    /// The final bytes (the last entries and the SearchResultDone, with the source's response
    /// controls), the result code and the number of entries, for `Op::finish_with`.
    fn finish<S: Source>(mut self, op: &mut Op, source: S) -> (Vec<u8>, ResultCode, u64) {
        source.respond(&op.conn, &self.outcome, &mut op.response);
        let r = self.outcome.as_ref().map(|_| ());
        op.encode_result_into(&mut self.out, tags::SEARCH_RESULT_DONE, r);
        (self.out, crate::op::code_of(r), self.sent)
    }
}

/// Runs search `p` from `source` on version `v` and answers it: inline in the read loop when
/// the source says it is small, else on the blocking pool (after a `max_outstanding` permit),
/// where Abandon and Cancel can stop it.
///
/// An inline search queues its entries without waiting. When the connection's buffer
/// (`max_buffered_bytes`) is full — a client that leaves its responses unread — the entries
/// that did not fit, and the result, are handed to a task of their own that Abandon and Cancel
/// can stop, and the read loop goes on reading: it never waits for a client to read.
pub(crate) async fn run<S: Source + Send + 'static>(
    op: Op,
    v: Arc<Version>,
    p: Prepared,
    source: S,
) -> Next {
    let mut op = op;
    let mut source = source;
    if source.inline(&p) {
        // Entries that found no room in the connection's buffer, in order.
        let mut overflow: Vec<Vec<u8>> = Vec::new();
        let conn = op.conn.clone();
        let ran = execute(
            &conn,
            &v,
            op.id,
            &p,
            &AtomicBool::new(false),
            &mut |b| {
                if overflow.is_empty() {
                    if let Err(b) = conn.try_send(b) {
                        overflow.push(b);
                    }
                } else {
                    overflow.push(b);
                }
                true
            },
            &mut source,
        );
        let Some(ran) = ran else {
            return Next::Continue;
        };
        if overflow.is_empty() {
            let (pdu, rc, n) = ran.finish(&mut op, source);
            op.finish_with(pdu, rc, Some(n)).await;
            return Next::Continue;
        }
        let Some((permit, flag)) = running(&op).await else {
            return Next::Continue;
        };
        tokio::spawn(async move {
            let conn = op.conn.clone();
            let mut ran = Some(ran);
            for b in overflow {
                if !conn.send_unless(b, &flag).await {
                    ran = None;
                    break;
                }
            }
            answer(op, &flag, ran, source).await;
            drop(permit);
        });
        return Next::Continue;
    }
    let Some((permit, flag)) = running(&op).await else {
        return Next::Continue;
    };
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let conn = op.conn.clone();
        let id = op.id;
        let sink = &mut |b| conn.send_blocking(b, &flag);
        let ran = execute(&conn, &v, id, &p, &flag, sink, &mut source);
        rt.block_on(answer(op, &flag, ran, source));
        drop(permit);
    });
    Next::Continue
}

/// Registers search `op` as running (a `max_outstanding` permit, and its stop flag in
/// `Conn::running` for Abandon and Cancel); `None` when the connection is closing.
async fn running(op: &Op) -> Option<(tokio::sync::OwnedSemaphorePermit, Arc<AtomicBool>)> {
    let permit = op.conn.permits.clone().acquire_owned().await.ok()?;
    let flag = Arc::new(AtomicBool::new(false));
    if let Ok(mut m) = op.conn.running.lock() {
        m.insert(op.id, flag.clone());
    }
    Some((permit, flag))
}

/// Answers running search `op` (stop flag `flag`), whose entries are all queued (`ran`) or
/// which was stopped (`None`): its result, or canceled (118) for a Cancel, or nothing after an
/// Abandon; then the Cancel's own answer.
async fn answer<S: Source>(mut op: Op, flag: &Arc<AtomicBool>, ran: Option<Ran>, source: S) {
    let conn = op.conn.clone();
    let cancel = cancel::search_ended(&conn, op.id, flag);
    let ended_first = ran.is_some();
    match (ran, &cancel) {
        (Some(ran), _) => {
            let (pdu, rc, n) = ran.finish(&mut op, source);
            op.finish_with(pdu, rc, Some(n)).await;
        }
        // Cancelled (RFC 3909): unlike Abandon, a result says so.
        (None, Some(_)) => {
            let e = cancel::cancelled();
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), None).await;
        }
        // Abandoned (or the client went away): no result was sent.
        (None, None) => conn.log_abandoned(op.log.take()),
    }
    // After the search's result: the Cancel's answer follows it.
    if let Some(c) = cancel {
        let _ = c.send(!ended_first);
    }
}
