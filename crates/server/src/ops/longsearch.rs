//! What the long-lived searches share (persistent search, `ops::psearch`; sync search,
//! `ops::syncprov`): an owned copy of the request for their task, and how that task ends —
//! taken off the connection's list, then a SearchResultDone, or nothing after an Abandon, or a
//! Cancel's canceled result (RFC 3909), with the Cancel's own answer after it.

use std::borrow::Cow;
use std::sync::Arc;

use proto::{tags, SearchRequest};

use crate::op::Op;
use crate::ops::live::Stop;
use crate::reply::Conn;
use dit::error::LdapError;

/// How a long-lived search ended.
pub(crate) enum End {
    /// With a SearchResultDone carrying this result (and the response controls); entries sent.
    Done(Result<(), LdapError>, u64),
    /// Abandoned, cancelled, or the connection went away: no result unless a Cancel asks.
    Silent,
}

/// Ends the long-lived search `op` (message `id`, stopped through `stop`) as `end` says.
pub(crate) async fn finish(conn: &Arc<Conn>, id: i32, stop: &Arc<Stop>, mut op: Op, end: End) {
    conn.psearches.unregister(id, stop);
    let cancel = super::cancel::search_ended(conn, id, &stop.flag);
    let ended_first = matches!(end, End::Done(..));
    match end {
        End::Done(r, n) => {
            op.finish(tags::SEARCH_RESULT_DONE, r.as_ref().map(|_| ()), Some(n))
                .await
        }
        // Cancelled (RFC 3909): unlike Abandon, a result says so.
        End::Silent if cancel.is_some() => {
            let e = super::cancel::cancelled();
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), None).await
        }
        End::Silent => conn.log_abandoned(op.log.take()),
    }
    // After the search's result: the Cancel's answer follows it.
    if let Some(c) = cancel {
        let _ = c.send(!ended_first);
    }
}

/// A copy of `req` that owns its bytes, for the search's task.
pub(crate) fn owned(req: &SearchRequest<'_>) -> SearchRequest<'static> {
    SearchRequest {
        base: Cow::Owned(req.base.to_vec()),
        scope: req.scope,
        deref: req.deref,
        size_limit: req.size_limit,
        time_limit: req.time_limit,
        types_only: req.types_only,
        filter: req.filter.clone().into_owned(),
        attributes: req
            .attributes
            .iter()
            .map(|a| Cow::Owned(a.to_vec()))
            .collect(),
    }
}
