//! Persistent search (draft-ietf-ldapext-psearch-03): a search that, after its initial results
//! (unless changesOnly), stays open and sends every later change that matches it as a
//! SearchResultEntry, with an Entry Change Notification control when returnECs is set.
//!
//! Shape: `start` resolves the request like a normal search (`engine::prepare`), then spawns
//! one tokio task per persistent search. The initial result set is walked on the blocking
//! pool (`engine::execute` with the `Plain` source, as a big search is); the task then follows
//! the store's change feed (`Store::subscribe`, `long::next_batch`) and holds no thread while
//! it waits.
//!
//! No change is lost or sent twice between the initial results and the first notification:
//! the task subscribes to the feed *before* it takes the version the initial search walks.
//! Every batch published after that version was taken has a larger `seq` and is queued for the
//! subscription; every batch already in the version has `seq <= version.seq` and is skipped.
//!
//! Each change is checked as a search by the same requester would check it, against the
//! newest version when the change is processed: scope from the entry's DN, the filter on the
//! entry after the change (before it, for a delete), visibility and searchable attributes
//! under the access rules, and only the attributes the requester may read are sent. Like
//! 389-ds and the draft, an entry is sent only if it matches after the change: an entry
//! modified or renamed out of the search's scope or filter is not reported (the client's copy
//! goes stale; a replication client should use syncrepl instead). A deleted entry is sent as
//! it was before the delete. A rename reports every entry whose DN changed (the renamed entry
//! and each of its descendants), each as modDN with its own previousDN. Changes one batch made
//! to one entry are one notification (an entry renamed and modified in one batch: modDN).
//! The ECN carries no changeNumber (the feed numbers batches, not changes).
//!
//! Ends: Abandon (nothing sent), unbind or connection close (nothing sent), a server shutdown
//! (`unavailable`), or falling more than `persistent_search_queue` batches behind the writer —
//! typically a client that stops reading — which ends the search with `adminLimitExceeded`
//! after the notifications queued before the cut, so the client knows it must search again.
//! Size and time limits apply to the initial results only. A connection may hold at most
//! `max_persistent_searches` open (more: `adminLimitExceeded`).

use std::borrow::Cow;
use std::sync::Arc;

use proto::controls::psearch::{ChangeType, EntryChangeNotification, PersistentSearch};
use proto::{tags, Control, ResultCode, SearchRequest};
use store::{Batch, ChangeKind, Subscription};

use super::encode::Encoder;
use super::engine::{execute, prepare, Held, Plain, Prepared};
use super::long::{finish, next_batch, shutting_down, Cut, End};
use super::state::Stop;
use crate::op::{Next, Op};
use crate::ops::syncprov::only_context_csn;
use crate::reply::Conn;
use crate::state::Shared;
use dit::error::LdapError;
use dit::identity::Identity;

/// Starts persistent search `op`: checks the limit, subscribes, resolves the request, then
/// hands the rest to a task. Returns once the task is started (or the search refused).
pub(crate) async fn start(op: Op, req: &SearchRequest<'_>, ps: PersistentSearch) -> Next {
    let conn = op.conn.clone();
    let shared = &conn.shared;
    let id = op.id;
    let who = op.who.clone();
    let stop = match conn
        .psearches
        .register(id, shared.config().max_persistent_searches)
    {
        Ok(s) => s,
        Err(e) => {
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
            return Next::Continue;
        }
    };
    // Subscribe first, then take the version: see the module comment.
    let sub = shared
        .store
        .subscribe(shared.config().persistent_search_queue);
    let v = shared.store.read();
    let refused = match prepare(shared, &v, req, &who, &conn.bases) {
        Err(e) => Err(e),
        Ok(p) if matches!(p.held, Some(Held::RootDse | Held::Subschema)) => Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "persistent search of a server-held entry (root DSE, subschema): it never changes",
        )),
        Ok(p) => {
            // With changesOnly the base must still exist for the requester, as for the
            // initial results.
            let seen = p.root
                || !ps.changes_only
                || v.lookup(&p.base)
                    .is_some_and(|e| p.sees(&shared.schema(), e));
            if seen {
                Ok(p)
            } else {
                Err(shared.no_such_object_for(&v, &p.base, &p.view))
            }
        }
    };
    let p = match refused {
        Ok(p) => p,
        Err(e) => {
            conn.psearches.unregister(id, &stop);
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
            return Next::Continue;
        }
    };
    if let Ok(mut m) = conn.running.lock() {
        m.insert(id, stop.flag.clone());
    }
    let req = super::long::owned(req);
    tokio::spawn(async move {
        let end = follow(&conn, id, &req, &who, ps, sub, v, p, &stop).await;
        finish(&conn, id, &stop, op, end).await;
    });
    Next::Continue
}

/// The task of one persistent search: the initial results, then the changes.
#[expect(
    clippy::too_many_arguments,
    reason = "the task's whole state, handed over once by `start`"
)]
async fn follow(
    conn: &Arc<Conn>,
    id: i32,
    req: &SearchRequest<'static>,
    who: &Identity,
    ps: PersistentSearch,
    mut sub: Subscription,
    v: Arc<store::Version>,
    p: Prepared,
    stop: &Stop,
) -> End {
    let mut sent = 0;
    let seen = v.seq;
    if !ps.changes_only {
        let (c, flag) = (conn.clone(), stop.flag.clone());
        let walked = tokio::task::spawn_blocking(move || {
            let mut p = p;
            p.plan(&c.shared.schema(), &v);
            let sink = &mut |b| c.send_blocking(b, &flag);
            execute(&c, &v, id, &p, &flag, sink, &mut Plain).map(|r| (r.outcome, r.sent, r.out))
        })
        .await;
        match walked {
            Ok(Some((outcome, n, rest))) => {
                if !rest.is_empty() && !conn.send(rest).await {
                    return End::Silent;
                }
                sent = n;
                if let Err(e) = outcome {
                    return End::Done(Err(e), sent);
                }
            }
            Ok(None) => return End::Silent,
            Err(e) => {
                tracing::error!("persistent search {id}: initial search failed: {e}");
                return End::Done(
                    Err(LdapError::new(ResultCode::Other, "internal error")),
                    sent,
                );
            }
        }
    } else {
        drop(p);
        drop(v);
    }
    loop {
        let batch = match next_batch(stop, &mut sub, seen).await {
            Ok(b) => b,
            Err(Cut::Stopped) => return End::Silent,
            Err(Cut::Lagged) => {
                return End::Done(
                    Err(LdapError::new(
                        ResultCode::AdminLimitExceeded,
                        format!(
                            "persistent search fell more than {} changes behind \
                             (persistent_search_queue) and was ended; search again",
                            conn.shared.config().persistent_search_queue
                        ),
                    )),
                    sent,
                )
            }
            Err(Cut::Closed) => return End::Done(Err(shutting_down()), sent),
        };
        let (out, n) = encode_batch(&conn.shared, id, req, who, ps, &batch);
        if n > 0 {
            // Not raced against `stop`: cancelling a send could lose buffer accounting; a
            // client that stops reading is disconnected by `write_timeout`.
            if !conn.send(out).await {
                return End::Silent;
            }
            sent += n;
        }
    }
}

/// The notifications one batch makes for this search, encoded, and how many.
fn encode_batch(
    shared: &Shared,
    id: i32,
    req: &SearchRequest<'static>,
    who: &Identity,
    ps: PersistentSearch,
    batch: &Batch,
) -> (Vec<u8>, u64) {
    let schema = &*shared.schema();
    let mut out = Vec::new();
    let mut n = 0;
    // Resolved once per batch, against the newest version (access rules that name groups
    // follow membership changes), and only when some change gets this far.
    let mut resolved: Option<(Arc<store::Version>, Prepared)> = None;
    for c in &batch.changes {
        let (t, e, previous) = match (c.kind(), &c.before, &c.after) {
            (ChangeKind::Add, _, Some(a)) => (ChangeType::Add, a, None),
            (ChangeKind::Delete, Some(b), _) => (ChangeType::Delete, b, None),
            (ChangeKind::Modify, _, Some(a)) => (ChangeType::Modify, a, None),
            (ChangeKind::Rename, Some(b), Some(a)) => (ChangeType::ModDn, a, Some(b.dn())),
            _ => continue,
        };
        // The sync provider's contextCSN bookkeeping on a suffix entry is no change to report.
        if !ps.wants(t) || only_context_csn(shared, c) {
            continue;
        }
        if resolved.is_none() {
            let v = shared.store.read();
            match prepare(shared, &v, req, who, &Default::default()) {
                Ok(p) => resolved = Some((v, p)),
                // The request resolved at start; it cannot fail now, but if it did there is
                // nothing this search could match.
                Err(_) => return (out, n),
            }
        }
        let Some((v, p)) = resolved.as_ref() else {
            continue;
        };
        let Some(access) = p.matches(shared, schema, e) else {
            continue;
        };
        let mut ctls = Vec::new();
        if ps.return_ecs {
            let mut value = Vec::with_capacity(16 + previous.map_or(0, str::len));
            EntryChangeNotification {
                change_type: t,
                previous_dn: previous.map(|d| Cow::Borrowed(d.as_bytes())),
                change_number: None,
            }
            .encode(&mut value);
            ctls.push(Control {
                oid: Cow::Borrowed(proto::oids::ENTRY_CHANGE_NOTIFICATION.as_bytes()),
                critical: false,
                value: Some(Cow::Owned(value)),
            });
        }
        let enc = Encoder {
            shared,
            schema,
            v: Some(v),
            sel: &p.sel,
            id: Some(id),
        };
        enc.entry(&mut out, e, access.as_ref(), &ctls);
        n += 1;
    }
    (out, n)
}
