//! The source of a paged search (Simple Paged Results, RFC 2696): its first page walks the
//! whole result set once, keeping the ids of every matching entry (sorted, when the search is
//! sorted too: RFC 2891 with RFC 2696) with the version it ran on; each page sends the first
//! ids left, and the next page's cookie names what is left (`state::PagedSearches`, on the
//! connection). The size limit bounds the whole paged walk, as slapd's does.

use proto::{ResultCode, SearchRequest};

use super::engine::{request_key, Emitter, Prepared, Source, Walked};
use super::sorted::{self, Order};
use super::state::{Cursor, Left};
use crate::op::Op;
use crate::reply::Conn;
use dit::error::{LdapError, LdapResult};

/// A paged search's page in the making.
pub(crate) struct Paged {
    /// Entries this page may hold.
    size: u64,
    /// The request's fingerprint (`request_key`, with the order's).
    key: u64,
    /// The walk so far; `None` on the first page.
    cursor: Option<Cursor>,
    /// Its server-side sort, if it has one.
    order: Option<Order>,
    /// The sortResult to report.
    sorted: Option<(u32, Option<String>)>,
}

/// How a search with the paged results control goes on.
pub(crate) enum Begin {
    /// Not a paged search: the whole result at once (in this order, if sorted).
    Whole(Option<Order>),
    Page(Paged),
    /// It ends here with this result: a cookie refused, or size 0 ending a paged search.
    End(LdapResult<()>),
}

impl Paged {
    /// Takes the paged results control of `op` (searching `req`, in `order` if sorted), and the
    /// cursor its cookie names.
    pub(crate) fn begin(op: &mut Op, req: &SearchRequest<'_>, order: Option<Order>) -> Begin {
        let Some(pr) = op.controls.paged.take() else {
            return Begin::Whole(order);
        };
        let key = order
            .as_ref()
            .map_or_else(|| request_key(req, &op.who), Order::key);
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
                Err(e) => return Begin::End(Err(e)),
            }
        }
        if pr.size == 0 {
            // Size 0 ends a paged search (RFC 2696 §3); its state is gone with the cursor. As
            // slapd, the result carries no paged results control.
            return Begin::End(Ok(()));
        }
        Begin::Page(Paged {
            size: pr.size,
            key,
            cursor,
            order,
            sorted: None,
        })
    }

    /// The version a later page runs on: its first page's.
    pub(crate) fn version(&self) -> Option<std::sync::Arc<store::Version>> {
        self.cursor.as_ref().map(|c| c.version.clone())
    }
}

impl Source for Paged {
    /// A first page walks the whole result set: small only for one base entry.
    fn inline(&self, p: &Prepared) -> bool {
        p.few() && (self.cursor.is_some() || p.base_only())
    }

    fn feed(&mut self, em: &mut Emitter<'_>) -> Walked {
        let Some(bases) = em.bases() else {
            return Walked::Done;
        };
        if let Some(o) = &self.order {
            self.sorted = Some(o.sort_result());
        }
        let walked = match &self.cursor {
            Some(_) => Walked::Done,
            None => {
                // The first page: every entry the search matches, by id.
                let (left, w) = match self.order.as_ref().filter(|o| o.sorts()) {
                    Some(o) => match sorted::collect(em, o, &bases) {
                        Ok((list, w)) => (Left::Sorted(list.ids.into()), w),
                        Err(e) => {
                            self.sorted = None;
                            em.fail(e);
                            return Walked::Done;
                        }
                    },
                    None => {
                        let mut left = store::RoaringBitmap::new();
                        let w = em.walk(&bases, &mut |_, e, _| {
                            left.insert(e.id);
                            std::ops::ControlFlow::Continue(())
                        });
                        (Left::Ids(left), w)
                    }
                };
                self.cursor = Some(Cursor {
                    key: self.key,
                    version: em.v.clone(),
                    left,
                    sent: 0,
                });
                w
            }
        };
        if let (Walked::Done, Some(c)) = (&walked, self.cursor.as_mut()) {
            em.before = c.sent;
            let mut taken = 0;
            for eid in c.left.iter() {
                if em.sent >= self.size || em.limit_reached() {
                    break;
                }
                taken += 1;
                let Some(e) = em.v.get(eid) else { continue };
                c.sent += 1;
                if em.listed(e).is_break() {
                    break;
                }
            }
            c.left.drop_first(taken);
        }
        walked
    }

    /// The sortResult if sorted, then the paged results control: the result set's size, and
    /// the next page's cookie if entries are left and the walk did not fail.
    fn respond(
        self,
        conn: &Conn,
        outcome: &LdapResult<()>,
        response: &mut Vec<proto::Control<'static>>,
    ) {
        if let Some((code, attr)) = self.sorted {
            response.push(sorted::sort_control(code, attr.as_deref()));
        }
        let (size, cookie) = match self.cursor {
            Some(c) if outcome.is_ok() && !c.left.is_empty() => {
                let total = c.sent + c.left.len();
                let max = conn.shared.config().max_paged_searches;
                let cookie = conn
                    .paged
                    .lock()
                    .map(|mut open| open.keep(c, max))
                    .unwrap_or_default();
                (total, cookie)
            }
            Some(c) => (c.sent + c.left.len(), Vec::new()),
            None => (0, Vec::new()),
        };
        response.push(paged_control(size, cookie));
    }
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
