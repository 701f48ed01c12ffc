//! What the long-lived searches share (persistent search, `persistent`; sync search, `sync`):
//! an owned copy of the request for their task, how that task follows the change feed
//! (`next_batch`), and how it ends — taken off the connection's list, then a
//! SearchResultDone, or nothing after an Abandon, or a Cancel's canceled result (RFC 3909),
//! with the Cancel's own answer after it.

use std::borrow::Cow;
use std::sync::Arc;

use proto::{tags, ResultCode, SearchRequest};
use store::{Batch, FeedEnd, Subscription};

use super::state::Stop;
use crate::op::Op;
use crate::ops::cancel;
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
    let cancel = cancel::search_ended(conn, id, &stop.flag);
    let ended_first = matches!(end, End::Done(..));
    match end {
        End::Done(r, n) => {
            op.finish(tags::SEARCH_RESULT_DONE, r.as_ref().map(|_| ()), Some(n))
                .await
        }
        // Cancelled (RFC 3909): unlike Abandon, a result says so.
        End::Silent if cancel.is_some() => {
            let e = cancel::cancelled();
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

/// How following the feed stopped.
pub(crate) enum Cut {
    /// Abandoned, or the connection is closing: no result.
    Stopped,
    /// The search fell more batches behind than its queue holds (the client stopped reading).
    Lagged,
    /// The server is shutting down (`shutting_down`).
    Closed,
}

/// The next batch of the feed after version `seen` (batches the version holds are skipped),
/// unless the search is stopped first.
pub(crate) async fn next_batch(
    stop: &Stop,
    sub: &mut Subscription,
    seen: u64,
) -> Result<Arc<Batch>, Cut> {
    loop {
        if stop.stopped() {
            return Err(Cut::Stopped);
        }
        let next = tokio::select! {
            biased;
            _ = stop.wake.notified() => continue,
            b = sub.recv() => b,
        };
        match next {
            Ok(b) if b.seq <= seen => {}
            Ok(b) => return Ok(b),
            Err(FeedEnd::Lagged) => return Err(Cut::Lagged),
            Err(FeedEnd::Closed) => return Err(Cut::Closed),
        }
    }
}

/// The result of a long-lived search ended by the server's shutdown.
pub(crate) fn shutting_down() -> LdapError {
    LdapError::new(ResultCode::Unavailable, "the server is shutting down")
}
