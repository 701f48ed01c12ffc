//! LDAP transactions (RFC 5805). Start Transaction opens a transaction on the connection and
//! returns its identifier; an add, delete, modify or modify DN carrying the Transaction
//! Specification control is checked as far as it can be outside the writer, queued, and
//! answered success at once (as slapd does); End Transaction either drops the queue (abort) or
//! hands every queued change to the writer as ONE job (`write_job` per change: access control,
//! schema, stamps, overlays), which the writer applies all-or-nothing within one batch — one
//! log record, one fsync. The first change that fails rolls the job back, and the End
//! Transaction response carries its result and names its message id (txnEndRes).
//!
//! A transaction belongs to its connection (`Conn::txns`) and ends with it. Limits:
//! `max_transactions` open per connection, `max_transaction_ops` queued per transaction.

use std::sync::{Arc, MutexGuard};

use proto::ResultCode;

use super::state::{Inner, Queued, Transactions};
use crate::audit::write_audit;
use crate::op::Op;
use crate::ops::state::{Audit, Change};
use crate::reply::Conn;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;
use dit::overlays::Applied;
use dit::write::write_job;

impl Transactions {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection is closing: its transactions end without applying anything.
    pub(crate) fn clear(&self) {
        self.lock().open.clear();
    }
}

fn invalid_id() -> LdapError {
    LdapError::new(ResultCode::TxnIdInvalid, "invalid transaction identifier")
}

/// Start Transaction (1.3.6.1.1.21.1): the new transaction's identifier.
pub(crate) fn start(conn: &Conn, value: Option<&[u8]>) -> LdapResult<Vec<u8>> {
    if value.is_some() {
        return Err(LdapError::new(
            ResultCode::ProtocolError,
            "no request data expected",
        ));
    }
    let max = conn.shared.config().max_transactions;
    let mut t = conn.txns.lock();
    if max == 0 {
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "transactions are turned off (max_transactions = 0)",
        ));
    }
    if t.open.len() >= max {
        return Err(LdapError::new(
            ResultCode::Busy,
            format!("too many transactions open on this connection (max_transactions = {max})"),
        ));
    }
    t.started += 1;
    let id = t.started.to_string().into_bytes();
    t.open.insert(id.clone(), Vec::new());
    Ok(id)
}

/// Queues a write carrying the Transaction Specification control naming `txn_id`, and answers
/// it: success once queued, or why it cannot be (it is then not part of the transaction, which
/// stays open).
pub(crate) async fn queue(
    op: Op,
    tag: u8,
    txn_id: Vec<u8>,
    change: LdapResult<Change>,
    audit: Audit,
) {
    let r = enqueue(&op, txn_id, change, audit);
    op.finish(tag, r.as_ref().map(|_| ()), None).await;
}

fn enqueue(op: &Op, txn_id: Vec<u8>, change: LdapResult<Change>, audit: Audit) -> LdapResult<()> {
    // As slapd: the entries a change reads back would have to come with the End Transaction
    // response (updatesControls); refused instead.
    if op.controls.pre_read.is_some() || op.controls.post_read.is_some() {
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "cannot perform pre-read or post-read in a transaction",
        ));
    }
    let conn = &op.conn;
    let max = conn.shared.config().max_transaction_ops;
    let mut t = conn.txns.lock();
    let ops = t.open.get_mut(&txn_id).ok_or_else(invalid_id)?;
    let change = change?;
    if ops.len() >= max {
        return Err(LdapError::new(
            ResultCode::AdminLimitExceeded,
            format!(
                "the transaction already holds {} operations (max_transaction_ops = {max})",
                ops.len()
            ),
        ));
    }
    ops.push(Queued {
        msg_id: op.id,
        change,
        audit,
        who: op.who.clone(),
    });
    Ok(())
}

/// End Transaction (1.3.6.1.1.21.3): aborts, or commits all queued operations as one writer
/// job, then answers (from a task of its own, so the connection's later requests go on while
/// the commit waits for its fsync). The job is handed to the writer before this returns, so
/// it keeps its place among the connection's writes.
pub(crate) async fn end(op: Op, value: Option<&[u8]>) {
    let req = match value.map(proto::txn::TxnEndRequest::decode) {
        Some(Ok(r)) => r,
        Some(Err(_)) => {
            let e = LdapError::new(ResultCode::ProtocolError, "request data decoding error");
            return op.finish_extended(Err(&e), None).await;
        }
        None => {
            let e = LdapError::new(ResultCode::ProtocolError, "request data expected");
            return op.finish_extended(Err(&e), None).await;
        }
    };
    let queued = op.conn.txns.lock().open.remove(req.id);
    let Some(queued) = queued else {
        return op.finish_extended(Err(&invalid_id()), None).await;
    };
    if !req.commit {
        // As slapd: success, saying what happened.
        return op.finish_extended_text("transaction aborted").await;
    }
    if queued.is_empty() {
        let e = LdapError::new(ResultCode::OperationsError, "no updates to commit");
        return op.finish_extended(Err(&e), None).await;
    }
    let shared = op.conn.shared.clone();
    let sh = shared.clone();
    let fut = shared.store.write(move |txn| {
        let mut done: Vec<(Applied, Audit, Arc<Identity>)> = Vec::with_capacity(queued.len());
        for q in queued {
            match write_job(&sh, txn, q.change) {
                Ok(a) => done.push((a, q.audit, q.who)),
                Err(e) => return Err((q.msg_id, e)),
            }
        }
        Ok(done)
    });
    let Ok(permit) = op.conn.permits.clone().acquire_owned().await else {
        return;
    };
    let guard = super::cancel::Uncancellable::enter(&op.conn, op.id);
    tokio::spawn(async move {
        match fut.await {
            Ok(Ok(done)) => {
                for (applied, audit, who) in done {
                    write_audit(&op.conn, &who, audit, &applied);
                }
                op.finish_extended(Ok(()), None).await;
            }
            Ok(Err((msg_id, e))) => {
                let value = proto::txn::encode_txn_end_failed(msg_id);
                op.finish_extended(Err(&e), Some(value)).await;
            }
            Err(e) => {
                let e: LdapError = e.into();
                op.finish_extended(Err(&e), None).await;
            }
        }
        drop(guard);
        drop(permit);
    });
}
