//! Cancel (RFC 3909, extended operation 1.3.6.1.1.8). Searches — plain, paged and persistent
//! — are the operations that can be cancelled: Cancel stops them as Abandon does (the flag in
//! `Conn::running`, and the wake-up of a persistent search), and the search then ends with
//! `canceled` (118) where an abandoned one sends nothing. The Cancel's own answer waits for
//! that result, so it comes after it, as the RFC asks: success once the search ended
//! cancelled, tooLate (120) if it ended on its own first.
//!
//! A search waiting for room to write (a client that reads nothing) is still running: the read
//! loop goes on reading (`engine::run`), and `Conn::stop` wakes the wait (`Conn::send_unless`).
//!
//! Writes handed to the writer (and Cancel operations themselves) cannot be cancelled
//! (cannotCancel, 121); any other id — unknown, or an operation that already ended (binds and
//! StartTLS end before the connection reads its next request) — is noSuchOperation (119).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use proto::ResultCode;
use tokio::sync::oneshot;

use crate::op::Op;
use crate::reply::Conn;
use dit::error::LdapError;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks operation `id` as in progress and not cancellable until the guard drops.
pub(crate) struct Uncancellable {
    conn: Arc<Conn>,
    id: i32,
}

impl Uncancellable {
    pub(crate) fn enter(conn: &Arc<Conn>, id: i32) -> Uncancellable {
        lock(&conn.cancels.uncancellable).insert(id);
        Uncancellable {
            conn: conn.clone(),
            id,
        }
    }
}

impl Drop for Uncancellable {
    fn drop(&mut self) {
        lock(&self.conn.cancels.uncancellable).remove(&self.id);
    }
}

/// The end of search `id` (whose stop flag is `flag`): removes it from `Conn::running` and
/// takes the Cancel waiting for it, under the same lock a Cancel looks it up with, so a Cancel
/// either finds the search running and is told how it ended, or does not find it.
pub(crate) fn search_ended(
    conn: &Conn,
    id: i32,
    flag: &Arc<AtomicBool>,
) -> Option<oneshot::Sender<bool>> {
    let mut running = lock(&conn.running);
    if running.get(&id).is_some_and(|f| Arc::ptr_eq(f, flag)) {
        running.remove(&id);
    }
    lock(&conn.cancels.waiting).remove(&id)
}

/// The result of a cancelled search.
pub(crate) fn cancelled() -> LdapError {
    LdapError::new(ResultCode::Canceled, "operation cancelled")
}

/// Handles a Cancel request; the answer comes from a task of its own once the target ended.
pub(crate) async fn handle(op: Op, value: Option<&[u8]>) {
    let target = match value.map(proto::txn::decode_cancel) {
        None => return fail(op, ResultCode::ProtocolError, "no message ID supplied").await,
        Some(Err(_)) => {
            return fail(op, ResultCode::ProtocolError, "message ID parse failed").await
        }
        Some(Ok(t)) => t,
    };
    let Ok(target) = i32::try_from(target) else {
        return fail(op, ResultCode::NoSuchOperation, "message ID not found").await;
    };
    let conn = op.conn.clone();
    if target == op.id || lock(&conn.cancels.uncancellable).contains(&target) {
        return fail(
            op,
            ResultCode::CannotCancel,
            "the operation cannot be cancelled (writes handed to the writer and Cancel requests cannot)",
        )
        .await;
    }
    let rx = match register(&conn, target) {
        Ok(rx) => rx,
        Err((code, msg)) => return fail(op, code, msg).await,
    };
    // A persistent search waits on the change feed: wake it.
    conn.psearches.abandon(target);
    conn.stopped.notify_waiters();
    let Ok(permit) = conn.permits.clone().acquire_owned().await else {
        return;
    };
    let guard = Uncancellable::enter(&conn, op.id);
    tokio::spawn(async move {
        match rx.await {
            Ok(true) => op.finish_extended(Ok(()), None).await,
            Ok(false) => {
                let e = LdapError::new(
                    ResultCode::TooLate,
                    "the operation ended before it could be cancelled",
                );
                op.finish_extended(Err(&e), None).await
            }
            Err(_) => {
                let e = LdapError::new(ResultCode::TooLate, "the operation ended");
                op.finish_extended(Err(&e), None).await
            }
        }
        drop(guard);
        drop(permit);
    });
}

/// Finds search `target` running, registers the Cancel's wait for it and stops it.
fn register(
    conn: &Conn,
    target: i32,
) -> Result<oneshot::Receiver<bool>, (ResultCode, &'static str)> {
    let running = lock(&conn.running);
    let flag = running
        .get(&target)
        .ok_or((ResultCode::NoSuchOperation, "message ID not found"))?;
    let mut waiting = lock(&conn.cancels.waiting);
    if waiting.contains_key(&target) {
        return Err((
            ResultCode::CannotCancel,
            "the operation is already being cancelled",
        ));
    }
    let (tx, rx) = oneshot::channel();
    waiting.insert(target, tx);
    conn.stop(flag);
    Ok(rx)
}

async fn fail(op: Op, code: ResultCode, msg: &str) {
    let e = LdapError::new(code, msg);
    op.finish_extended(Err(&e), None).await;
}
