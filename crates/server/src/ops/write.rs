//! The write path's way in from the operations: a prepared change (`Change`) is queued in its
//! LDAP transaction or handed to the store's writer (`route_write`), and answered from the
//! writer's thread once its batch is committed (`answer`: the pre/post-read controls, the audit
//! record, the response).

use dit::error::LdapResult;
use dit::overlays::Applied;
use dit::write::write_job;

use super::state::{Audit, Change};
use super::{cancel, search, txn};
use crate::op::Op;

/// Sends a prepared write on its way: queued in the transaction its Transaction Specification
/// control names (answered at once, `txn::queue`), or handed to the writer now and answered
/// from the writer's thread once its batch is committed (`submit_write`).
pub(crate) async fn route_write(mut op: Op, tag: u8, change: LdapResult<Change>, audit: Audit) {
    if let Some(id) = op.controls.txn.take() {
        txn::queue(op, tag, id, change, audit).await;
        return;
    }
    match change {
        Ok(c) => submit_write(op, tag, c, audit).await,
        Err(e) => op.finish(tag, Err(&e), None).await,
    }
}

/// Whether an operation's checks against the current version may refuse it before it reaches
/// the writer: not in a transaction, where an earlier operation of the same transaction may
/// create what it needs (the writer checks everything again anyway).
pub(crate) fn early_checks(op: &Op) -> bool {
    op.controls.txn.is_none()
}

/// The write path: queues the change `f` on the writer now, without holding up the read loop
/// for its answer. In the writer's job, `f` checks and applies the change against the newest
/// version (`Txn`), then the overlay chain runs on what it applied; any error rolls all of it
/// back. Once the batch holding it is committed, the writer's thread answers it (`answer`),
/// so a batch's answers cost one wake-up of each connection's write task, not a task per
/// operation.
async fn submit_write(op: Op, tag: u8, f: Change, audit: Audit) {
    // `max_outstanding`: the read loop waits here while the connection has that many.
    let Ok(permit) = op.conn.permits.clone().acquire_owned().await else {
        return;
    };
    // From now on the write is the writer's: a Cancel naming it gets cannotCancel.
    let guard = cancel::Uncancellable::enter(&op.conn, op.id);
    let runtime = tokio::runtime::Handle::current();
    let shared = op.shared().clone();
    let sh = shared.clone();
    shared.store.write_then(
        move |txn| write_job(&sh, txn, f),
        move |r| {
            let r = r.unwrap_or_else(|e| Err(e.into()));
            if let Some(wait) = answer(op, tag, r, audit) {
                // The connection's queue is full: wait for room on the runtime.
                runtime.spawn(async move {
                    wait.await;
                    drop((guard, permit));
                });
            }
        },
    );
}

/// Answers a committed (or refused) write, on the writer's thread: on success the pre-read
/// and post-read entries (RFC 4527) join the response and the audit record (if any) is
/// logged; the access line always is. The future, if any, still has to send the response.
fn answer(
    mut op: Op,
    tag: u8,
    r: LdapResult<Applied>,
    audit: Audit,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    if let Ok(applied) = &r {
        read_entry_controls(&mut op, applied);
        crate::audit::write_audit(&op.conn, &op.who, audit, applied);
    }
    op.finish_now(tag, r.as_ref().map(|_| ()))
}

/// The pre-read and post-read response controls (RFC 4527): the entry before or after the
/// change, with the attributes asked for that the requester may read.
fn read_entry_controls(op: &mut Op, applied: &Applied) {
    let reads = [
        (
            op.controls.pre_read.take(),
            &applied.before,
            proto::oids::PRE_READ,
        ),
        (
            op.controls.post_read.take(),
            &applied.after,
            proto::oids::POST_READ,
        ),
    ];
    if reads.iter().all(|(attrs, _, _)| attrs.is_none()) {
        return;
    }
    let shared = op.conn.shared.clone();
    let schema = &*shared.schema();
    let v = shared.store.read();
    let view = shared.acl.view(schema, &v, &op.who);
    for (attrs, entry, oid) in reads {
        let (Some(attrs), Some(e)) = (attrs, entry) else {
            continue;
        };
        let attrs: Vec<std::borrow::Cow<'_, [u8]>> =
            attrs.attrs.into_iter().map(Into::into).collect();
        let sel = dit::select::Selection::parse(schema, &attrs, false);
        let access = view.reader(schema, e);
        let mut value = Vec::with_capacity(256);
        // With the version the computed attributes (entryDN, hasSubordinates,
        // subschemaSubentry) are returned too, as in a search and as slapd does.
        let enc = search::encode::Encoder {
            shared: &shared,
            schema,
            v: Some(&v),
            sel: &sel,
            id: None,
        };
        enc.entry(&mut value, e, access.as_ref(), &[]);
        op.response.push(proto::Control {
            oid: oid.as_bytes().into(),
            critical: false,
            value: Some(value.into()),
        });
    }
}
