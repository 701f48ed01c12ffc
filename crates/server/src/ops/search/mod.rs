//! Search (RFC 4511 §4.5) and its variants, which are one search fed from different sources:
//! plain, paged (RFC 2696), sorted and windowed (RFC 2891, VLV), of the entries the server
//! holds itself, persistent (draft-ietf-ldapext-psearch) and sync (RFC 4533). This module is
//! the router: it decides once, from the request's controls, which source answers.
//!
//! - `engine`: the request `prepare`d, the walk over the scope, the `Emitter` (size and time
//!   limits, encoding under the access rules, flushing), `run` (inline or on the blocking
//!   pool, and the answer), the `Source` trait and the `Plain` source;
//! - `encode`: an entry as a SearchResultEntry, and the dereference control;
//! - `paged`, `sorted`, `held`: the sources of paged, sorted (and VLV) and server-held-entry
//!   searches; `state`: what searches keep on a connection between requests (paged cursors,
//!   VLV lists, the open long-lived searches);
//! - `persistent`, `sync`: the long-lived searches, which go on following the change feed
//!   after their first results; `long`: what they share.

pub(crate) mod encode;
pub(crate) mod engine;
pub(crate) mod held;
pub(crate) mod long;
pub(crate) mod paged;
pub(crate) mod persistent;
pub(crate) mod sorted;
pub(crate) mod state;
pub(crate) mod sync;

use proto::{tags, SearchRequest};

use crate::op::{Next, Op};
use engine::{prepare, run, Plain};
use held::HeldEntries;
use paged::{Begin, Paged};
use sorted::Sorted;

pub(crate) async fn handle(mut op: Op, req: &SearchRequest<'_>) -> Next {
    // The Sync Request when the provider is on, or critical (then refused); else ignored.
    if let Some(s) = op.controls.sync.take() {
        if op.shared().syncprov.is_some() || op.controls.sync_critical {
            return sync::start(op, req, s).await;
        }
    }
    if let Some(ps) = op.controls.persistent.take() {
        return persistent::start(op, req, ps).await;
    }
    let order = match sorted::order(&mut op, req) {
        Ok(o) => o,
        Err(e) => {
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
            return Next::Continue;
        }
    };
    let (paged, sorted) = match Paged::begin(&mut op, req, order) {
        Begin::Page(pg) => (Some(pg), None),
        Begin::Whole(order) => (None, order.map(Sorted::new)),
        Begin::End(r) => {
            op.finish(tags::SEARCH_RESULT_DONE, r.as_ref().map(|_| ()), Some(0))
                .await;
            return Next::Continue;
        }
    };
    // Later pages of a paged search run on the version of its first page, a VLV continuation
    // on its list's.
    let shared = op.shared().clone();
    let v = paged
        .as_ref()
        .and_then(Paged::version)
        .or_else(|| sorted.as_ref().and_then(Sorted::version))
        .unwrap_or_else(|| shared.store.read());
    let mut p = match prepare(&shared, &v, req, &op.who, &op.conn.bases) {
        Ok(p) => p,
        Err(e) => {
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
            return Next::Continue;
        }
    };
    p.stand_ins(&shared, &v, req, op.controls.manage_dsa_it);
    p.assertion = op.take_assertion();
    p.deref = op.controls.deref_specs.take();
    if let Some(items) = op.controls.values_return.take() {
        p.sel.values = Some(dit::filter::compile_values(&shared.schema(), &items));
    }
    if let Some(held) = p.held {
        return run(op, v, p, HeldEntries::new(held, paged.is_some())).await;
    }
    p.plan(&shared.schema(), &v);
    match (paged, sorted) {
        (Some(pg), _) => run(op, v, p, pg).await,
        (None, Some(s)) => run(op, v, p, s).await,
        (None, None) => run(op, v, p, Plain).await,
    }
}
