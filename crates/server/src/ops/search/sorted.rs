//! Server-side sort (RFC 2891) and virtual list view (draft-ietf-ldapext-ldapv3-vlv-09) on
//! searches. OpenLDAP's `sssvlv` overlay is the reference for every answer.
//!
//! A sorted search walks its scope as any search does, keeps each matching entry's id with
//! its sort keys (each value normalized once with the key's ordering rule, the schema's own
//! ordering comparison), sorts that list once, then sends it whole, a page at a time (the
//! paged results cursor keeps the sorted ids), or a window of it (VLV). At most
//! `max_sort_entries` entries are held; more is adminLimitExceeded.
//!
//! A virtual list view's sorted list is kept per connection (with the version it was made
//! on) under a context id returned in every VLV response; a later request carrying that id
//! (and the same search) reads another window of the same list without searching again.
//! `max_vlv_contexts` bounds the lists one connection keeps; opening one more drops the
//! oldest.
//!
//! Plain searches do not come here: `search::handle` tests the two controls once. A sorted
//! paged search takes its sorted list from here (`collect`) and pages it (`paged`).

use std::cmp::Ordering;
use std::ops::ControlFlow;
use std::sync::Arc;

use proto::controls::vlv::{Target, VlvRequest, VlvResponse};
use proto::{ResultCode, SearchRequest};
use schema::{AttrId, RuleId, Schema};
use store::Entry;

use super::engine::{request_key, Emitter, Source, Walked};
use super::state::List;
use crate::controls::SortRequest;
use crate::op::Op;
use crate::reply::Conn;
use dit::acl;
use dit::error::{LdapError, LdapResult};

/// OpenLDAP's numbers for the VLV result codes (its `LDAP_VLV_SSS_MISSING` and
/// `LDAP_VLV_RANGE_ERROR`); the draft's sortControlMissing (60) and offsetRangeError (61) are
/// taken in LDAPv3 by other meanings, and clients read slapd's.
const VLV_SORT_MISSING: u32 = 76;
const VLV_RANGE_ERROR: u32 = 77;

/// One resolved sort key.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    ty: AttrId,
    rule: RuleId,
    reverse: bool,
}

/// How a search is to be ordered, resolved from its sort and VLV controls.
pub(crate) struct Order {
    keys: Vec<Key>,
    /// A non-critical sort that cannot be done: the sortResult code and attribute; the
    /// search runs unsorted (RFC 2891 §2).
    unsorted: Option<(ResultCode, String)>,
    /// The VLV request, with the list its context names when it continues one.
    vlv: Option<Vlv>,
    /// The fingerprint of the search and its order (its keys), naming its VLV list: a paged
    /// or VLV continuation serves the same search in the same order.
    list_key: u64,
}

struct Vlv {
    req: VlvRequest<'static>,
    list: Option<(u64, Arc<List>)>,
}

impl Order {
    /// Whether entries are to be sorted (false: a non-critical sort that cannot be).
    pub(crate) fn sorts(&self) -> bool {
        self.unsorted.is_none()
    }

    /// The sortResult this search reports when it runs: its code and attribute.
    pub(crate) fn sort_result(&self) -> (u32, Option<String>) {
        match &self.unsorted {
            Some((code, attr)) => (*code as u32, Some(attr.clone())),
            None => (0, None),
        }
    }

    /// The fingerprint of the search and its order: a paged continuation or a VLV context
    /// serves only its own search.
    pub(crate) fn key(&self) -> u64 {
        self.list_key
    }

    /// The version a VLV continuation runs on.
    pub(crate) fn version(&self) -> Option<Arc<store::Version>> {
        self.vlv
            .as_ref()
            .and_then(|v| v.list.as_ref())
            .map(|(_, l)| l.version.clone())
    }
}

/// The order a search asks for with its sort and VLV controls, if it has either; refused
/// (with the VLV response control on `op` when the draft asks for one) when it cannot be
/// served.
pub(crate) fn order(op: &mut Op, req: &SearchRequest<'_>) -> LdapResult<Option<Order>> {
    if op.controls.sort.is_none() && op.controls.vlv.is_none() {
        return Ok(None);
    }
    let sort = op.controls.sort.take();
    let vlv = op.controls.vlv.take();
    match resolve(op, req, sort, vlv) {
        Ok(order) => Ok(Some(order)),
        Err((e, vlv_response)) => {
            if let Some(r) = vlv_response {
                op.response.push(vlv_control(&r));
            }
            Err(e)
        }
    }
}

type Refusal = (LdapError, Option<VlvResponse<'static>>);

fn resolve(
    op: &Op,
    req: &SearchRequest<'_>,
    sort: Option<SortRequest>,
    vlv: Option<VlvRequest<'static>>,
) -> Result<Order, Refusal> {
    let shared = op.shared();
    let Some(sort) = sort else {
        // VLV without sort: as slapd, virtualListViewError with sortControlMissing.
        let r = VlvResponse {
            target_position: 0,
            content_count: 0,
            result: VLV_SORT_MISSING,
            context: None,
        };
        return Err((
            LdapError::new(
                ResultCode::VirtualListViewError,
                "Sort control is required with VLV",
            ),
            Some(r),
        ));
    };
    let schema = shared.schema();
    let mut keys = Vec::with_capacity(sort.keys.len());
    let mut unsorted = None;
    for k in &sort.keys {
        let ty = match dit::resolve_attr(&schema, &k.attr) {
            Ok((ty, _)) => ty,
            Err(_) => {
                return Err((
                    LdapError::new(
                        ResultCode::NoSuchAttribute,
                        "serverSort control: Unrecognized attribute type in sort key",
                    ),
                    None,
                ))
            }
        };
        let rule = match &k.rule {
            Some(name) => std::str::from_utf8(name)
                .ok()
                .and_then(|n| schema.rule_by_name(n)),
            None => schema.attr(ty).ordering,
        };
        match rule {
            Some(rule) => keys.push(Key {
                ty,
                rule,
                reverse: k.reverse,
            }),
            // A rule named but unknown is refused whatever the criticality, as slapd; an
            // attribute without an ordering rule only when the sort is critical (or a VLV
            // needs it), RFC 2891 §2.
            None if k.rule.is_some() || sort.critical || vlv.is_some() => {
                return Err((
                    LdapError::new(
                        ResultCode::InappropriateMatching,
                        "serverSort control: No ordering rule",
                    ),
                    None,
                ))
            }
            None => {
                if unsorted.is_none() {
                    unsorted = Some((
                        ResultCode::InappropriateMatching,
                        String::from_utf8_lossy(&k.attr).into_owned(),
                    ));
                }
            }
        }
    }
    // As slapd: the keys are checked first (when it parses the control), then their number
    // and the company the control keeps.
    let max_keys = shared.config().max_sort_keys;
    if sort.keys.len() > max_keys {
        return Err((
            LdapError::new(
                ResultCode::UnwillingToPerform,
                format!("Too many sort keys (at most {max_keys}, max_sort_keys)"),
            ),
            None,
        ));
    }
    if vlv.is_some() && op.controls.paged.is_some() {
        return Err((
            LdapError::new(
                ResultCode::UnwillingToPerform,
                "VLV incompatible with PagedResults",
            ),
            None,
        ));
    }
    let fingerprint = {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        for k in &keys {
            (k.ty.0, k.rule.0, k.reverse).hash(&mut h);
        }
        h.finish()
    };
    let key = list_key(req, &op.who, fingerprint);
    let vlv = vlv.map(|req_vlv| {
        let list = req_vlv
            .context
            .as_deref()
            .and_then(|c| <[u8; 8]>::try_from(c).ok())
            .map(u64::from_be_bytes)
            .and_then(|id| {
                let open = op.conn.vlv.lock().ok()?;
                open.find(id, key).map(|l| (id, l))
            });
        Vlv { req: req_vlv, list }
    });
    Ok(Order {
        keys,
        unsorted,
        vlv,
        list_key: key,
    })
}

pub(crate) fn list_key(
    req: &SearchRequest<'_>,
    who: &dit::identity::Identity,
    fingerprint: u64,
) -> u64 {
    request_key(req, who) ^ fingerprint.rotate_left(17)
}

/// The sort key of one entry for one key: the least of its values of that attribute type (RFC
/// 2891 §2.2), normalized by the key's rule; `None` when it has none that normalize.
fn key_value(schema: &Schema, e: &Entry, k: &Key) -> Option<Vec<u8>> {
    let mut best: Option<Vec<u8>> = None;
    for a in e.attrs().filter(|a| a.ty == k.ty) {
        for v in a.values() {
            let Some(n) = schema.order_key(k.rule, v) else {
                continue;
            };
            if best
                .as_ref()
                .is_none_or(|b| schema.compare_keys(k.rule, &n, b) == Ordering::Less)
            {
                best = Some(n);
            }
        }
    }
    best
}

/// Orders two values of one key: a missing value sorts after every value (before, reversed),
/// as slapd and RFC 2891 §2.2 do.
fn cmp_key(schema: &Schema, k: &Key, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    let o = match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(a), Some(b)) => schema.compare_keys(k.rule, a, b),
    };
    if k.reverse {
        o.reverse()
    } else {
        o
    }
}

/// Walks the search from `bases` and sorts what it matched, in `order`. Err: more than
/// `max_sort_entries` matched.
pub(crate) fn collect(
    em: &mut Emitter<'_>,
    order: &Order,
    bases: &[Arc<Entry>],
) -> LdapResult<(List, Walked)> {
    let schema = em.schema;
    let max = em.shared.config().max_sort_entries;
    let mut rows: Vec<(u32, Vec<Option<Vec<u8>>>)> = Vec::new();
    let mut over = false;
    let w = em.walk(bases, &mut |_, e, access| {
        if max > 0 && rows.len() >= max {
            over = true;
            return ControlFlow::Break(());
        }
        // A value the requester may not search counts as missing: the order must not reveal
        // it (slapd sorts by it whatever its access rules say).
        let vals = order
            .keys
            .iter()
            .map(|k| match &access {
                Some(a) if !a.can(Some(k.ty), acl::Rights::SEARCH) => None,
                _ => key_value(schema, e, k),
            })
            .collect();
        rows.push((e.id, vals));
        ControlFlow::Continue(())
    });
    if over {
        return Err(LdapError::new(
            ResultCode::AdminLimitExceeded,
            format!(
                "the search matches more than {max} entries, the most a sort may hold (max_sort_entries)"
            ),
        ));
    }
    // A stable sort: entries with equal keys keep the walk's order.
    rows.sort_by(|(_, a), (_, b)| {
        order
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| cmp_key(schema, k, a[i].as_deref(), b[i].as_deref()))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    let mut ids = Vec::with_capacity(rows.len());
    let mut first = Vec::with_capacity(rows.len());
    for (id, mut vals) in rows {
        ids.push(id);
        first.push(vals.get_mut(0).and_then(Option::take));
    }
    Ok((
        List {
            ids,
            first,
            version: em.v.clone(),
            key: 0,
        },
        w,
    ))
}

/// The source of a sorted search that is not paged: the whole sorted list (up to the size
/// limit), or a VLV window of it.
pub(crate) struct Sorted {
    order: Order,
    /// The sortResult to report (a sorted search that got to sort, or to find it could not).
    sorted: Option<(u32, Option<String>)>,
    /// The VLV response to report.
    vlv: Option<VlvResponse<'static>>,
}

impl Sorted {
    pub(crate) fn new(order: Order) -> Sorted {
        Sorted {
            order,
            sorted: None,
            vlv: None,
        }
    }

    /// The version a VLV continuation runs on: its list's.
    pub(crate) fn version(&self) -> Option<Arc<store::Version>> {
        self.order.version()
    }

    /// A failed sort or VLV: no sortResult, the error as the search's outcome.
    fn fail(&mut self, em: &mut Emitter<'_>, e: LdapError) -> Walked {
        self.sorted = None;
        em.fail(e);
        Walked::Done
    }
}

impl Source for Sorted {
    fn feed(&mut self, em: &mut Emitter<'_>) -> Walked {
        let Some(bases) = em.bases() else {
            return Walked::Done;
        };
        // A sorted search reports its sortResult from here on (unless its sort or VLV fails).
        self.sorted = Some(self.order.sort_result());
        if !self.order.sorts() {
            // A non-critical sort that cannot be done: the entries as a plain search finds them.
            return em.walk(&bases, &mut |em, e, access| em.entry(e, access.as_ref()));
        }
        let order = &self.order;
        let Some(vlv) = &order.vlv else {
            let (list, w) = match collect(em, order, &bases) {
                Ok(x) => x,
                Err(e) => return self.fail(em, e),
            };
            for id in list.ids {
                let Some(e) = em.v.get(id) else { continue };
                if em.listed(e).is_break() {
                    break;
                }
            }
            return w;
        };
        // The list: the one the context names, or a new one kept under a new context.
        let (ctx, list, walked) = match &vlv.list {
            Some((id, l)) => (*id, l.clone(), Walked::Done),
            None => {
                let (mut list, w) = match collect(em, order, &bases) {
                    Ok(x) => x,
                    Err(e) => return self.fail(em, e),
                };
                if !matches!(w, Walked::Done) {
                    return w;
                }
                list.key = order.list_key;
                let list = Arc::new(list);
                let max = em.shared.config().max_vlv_contexts;
                let id = em
                    .conn
                    .vlv
                    .lock()
                    .map(|mut open| open.keep(list.clone(), max))
                    .unwrap_or(0);
                (id, list, w)
            }
        };
        let context = Some(std::borrow::Cow::Owned(ctx.to_be_bytes().to_vec()));
        let n = list.ids.len() as i64;
        match window(em.schema, order, &vlv.req, &list) {
            Ok(None) => {
                // An empty list: nothing to send, target 0.
                self.vlv = Some(VlvResponse {
                    target_position: 0,
                    content_count: 0,
                    result: 0,
                    context,
                });
            }
            Ok(Some((target, range))) => {
                // The size limit bounds a window as it bounds any search (slapd's sssvlv does
                // not apply it; without it, one anonymous request could read a whole list past
                // `size_limit_anonymous`).
                for &id in &list.ids[range] {
                    let Some(e) = em.v.get(id) else { continue };
                    if em.listed(e).is_break() {
                        break;
                    }
                }
                self.vlv = Some(VlvResponse {
                    target_position: target,
                    content_count: n,
                    result: 0,
                    context,
                });
            }
            Err((code, msg)) => {
                self.fail(em, LdapError::new(ResultCode::VirtualListViewError, msg));
                self.vlv = Some(VlvResponse {
                    target_position: 0,
                    content_count: n,
                    result: code,
                    context,
                });
            }
        }
        walked
    }

    fn respond(self, _: &Conn, _: &LdapResult<()>, response: &mut Vec<proto::Control<'static>>) {
        if let Some((code, attr)) = self.sorted {
            response.push(sort_control(code, attr.as_deref()));
        }
        if let Some(r) = &self.vlv {
            response.push(vlv_control(r));
        }
    }
}

/// A VLV window: the target position reported, and the range of the list to send.
type Window = (i64, std::ops::Range<usize>);

/// The target position reported and the range of the list to send, for a VLV request on a
/// list; `None` for an empty list; Err: the VLV result code and message.
fn window(
    schema: &Schema,
    order: &Order,
    req: &VlvRequest<'_>,
    list: &List,
) -> Result<Option<Window>, (u32, &'static str)> {
    let n = list.ids.len();
    if n == 0 {
        return Ok(None);
    }
    let n64 = n as i64;
    let before = usize::try_from(req.before).unwrap_or(usize::MAX);
    let after = usize::try_from(req.after).unwrap_or(usize::MAX);
    let range_error = (VLV_RANGE_ERROR, "VLV target offset out of range");
    // `at`: the index of the target entry; `target`: the position reported.
    let (at, target) = match &req.target {
        Target::ByOffset {
            offset,
            content_count,
        } => {
            let (offset, count) = (*offset, *content_count);
            let target = if offset == count {
                n64
            } else if offset == 1 {
                1
            } else if count != 0 && count != n64 {
                // The client's estimate of the list's size differs: scale its offset
                // (draft §5: offset / contentCount of the real count).
                if offset > count {
                    return Err(range_error);
                }
                // Both are at most i64::MAX and n is a list length: i128 cannot overflow.
                i64::try_from(i128::from(n64) * i128::from(offset) / i128::from(count)).unwrap_or(0)
            } else {
                if offset > n64 {
                    return Err(range_error);
                }
                offset
            };
            let at = usize::try_from(target.clamp(1, n64) - 1).unwrap_or(0);
            (at, target)
        }
        Target::GreaterThanOrEqual(value) => {
            let k = order.keys.first().ok_or(range_error)?;
            let value = schema.order_key(k.rule, value).ok_or((
                ResultCode::InappropriateMatching as u32,
                "VLV assertion value invalid for the sort key's ordering rule",
            ))?;
            // The first entry whose first key is at or after the value in the sort's order.
            let at = list
                .first
                .iter()
                .position(|x| cmp_key(schema, k, x.as_deref(), Some(&value)).is_ge());
            match at {
                Some(at) => (at, at as i64 + 1),
                // Past the end: the position after the last entry, and the window ends
                // with the last entry (as slapd).
                None => {
                    let start = (n - 1).saturating_sub(before.saturating_sub(1));
                    return Ok(Some((n64 + 1, start..n)));
                }
            }
        }
    };
    let start = at.saturating_sub(before);
    let end = at.saturating_add(after).saturating_add(1).min(n);
    Ok(Some((target, start..end)))
}

/// The VLV response control.
pub(crate) fn vlv_control(r: &VlvResponse<'_>) -> proto::Control<'static> {
    proto::Control {
        oid: proto::oids::VLV_RESPONSE.as_bytes().into(),
        critical: false,
        value: Some(r.to_vec().into()),
    }
}

/// The sortResult response control.
pub(crate) fn sort_control(code: u32, attr: Option<&str>) -> proto::Control<'static> {
    let r = proto::controls::sort::SortResult {
        code,
        attr: attr.map(|a| std::borrow::Cow::Owned(a.as_bytes().to_vec())),
    };
    proto::Control {
        oid: proto::oids::SORT_RESPONSE.as_bytes().into(),
        critical: false,
        value: Some(r.to_vec().into()),
    }
}
