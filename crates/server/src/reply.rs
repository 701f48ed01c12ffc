//! The reply half of a connection: the state its operations share (`Conn`), the queue of
//! encoded responses with its back-pressure (`Outbox`), the write task that coalesces them into
//! few syscalls, and the access-log lines of operations. Operations send through it; the read
//! loop (`session`) owns it. It knows nothing of operations.
//!
//! Who writes: while the read loop runs the requests it just read (`Outbox::defer`), what they
//! answer stays queued, and the read loop writes it itself when it has run them all
//! (`flush_now`): one syscall for a batch of requests and no hand-off to another task, which is
//! what a synchronous client's request costs most (its wake-up and the switch). Bytes queued at
//! any other time (searches on the blocking pool, writes answered when their batch commits, a
//! read loop waiting on something) wake the write task, which writes whatever is queued then.
//! Either writes only with the socket's write half in hand (`Slot`), so bytes leave in the
//! order they were queued.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use proto::ResultCode;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{oneshot, Notify, Semaphore};

use crate::state::Shared;
use crate::tls::TlsInfo;
use dit::error::{wire_result, LdapError};
use dit::identity::Identity;

/// Bytes a search encodes before handing them to the write task.
pub(crate) const FLUSH_BYTES: usize = 32 * 1024;
/// Bytes one write of the write task takes from the queue at most.
const BATCH_BYTES: usize = 256 * 1024;
/// State shared between a connection's read loop and the tasks it starts.
pub(crate) struct Conn {
    pub shared: Arc<Shared>,
    /// Encoded responses on their way to the socket.
    pub(crate) out: Arc<Outbox>,
    /// Running searches by message id, for Abandon.
    pub running: Mutex<HashMap<i32, Arc<AtomicBool>>>,
    pub permits: Arc<Semaphore>,
    /// The client's address.
    pub peer: SocketAddr,
    /// Set once the connection runs over TLS (LDAPS, or after StartTLS).
    pub tls: Option<TlsInfo>,
    /// Connection number, for the access and audit logs.
    pub id: u64,
    /// ` conn=N` and ` client=ADDR:PORT` for access-log lines, formatted once.
    pub(crate) log_tag: (String, String),
    /// Response bytes that may still be queued, in KiB (`max_buffered_bytes`): taken by
    /// producers, returned by the write task; closed when the connection is gone.
    pub buffered: Arc<Semaphore>,
    /// Open paged searches (RFC 2696), between their pages.
    pub paged: Mutex<crate::ops::search::state::PagedSearches>,
    /// Virtual list views kept for their context ids (`ops::search::sorted`).
    pub(crate) vlv: Mutex<crate::ops::search::state::VlvContexts>,
    /// Open persistent searches, for Abandon, close and `max_persistent_searches`.
    pub(crate) psearches: crate::ops::search::state::Open,
    /// Open LDAP transactions (RFC 5805), dropped with the connection.
    pub(crate) txns: crate::ops::state::Transactions,
    /// Cancel requests waiting for their searches, and what cannot be cancelled.
    pub(crate) cancels: crate::ops::state::Cancels,
    /// Search bases this connection used lately, parsed (`Dit::parse_dn_cached`).
    pub(crate) bases: Mutex<dit::DnCache>,
    /// The last bind found the password reset and to be changed: operations other than
    /// changing it are refused (`ppolicy::restriction`).
    pub(crate) must_change: std::sync::atomic::AtomicBool,
    /// Wakes the operations waiting for room to write (`send_unless`) after an Abandon or a
    /// Cancel set a stop flag in `running`, so that a search blocked on a client that reads
    /// nothing stops at once instead of when the client reads again.
    pub(crate) stopped: Notify,
}

/// The last holder of the connection's state is gone (the read loop and every operation it
/// started): nothing more can be queued.
impl Drop for Conn {
    fn drop(&mut self) {
        self.out.end();
    }
}

/// Queue permits (KiB) a response of `len` bytes takes; at most the whole budget, so that one
/// large message cannot wait forever.
fn kib(len: usize, budget: usize) -> u32 {
    u32::try_from(len.div_ceil(1024).clamp(1, budget.max(1))).unwrap_or(u32::MAX)
}

impl Conn {
    /// The start of an access-log line for operation `op` by `who`, received at `start`, if
    /// the access log is on.
    pub(crate) fn log_start(
        &self,
        op: i32,
        who: &Identity,
        start: std::time::Instant,
        what: impl FnOnce(&mut crate::logs::Line),
    ) -> Option<AccessLine> {
        if !self.shared.access_log.enabled() {
            return None;
        }
        let mut line = crate::logs::access_prefix(
            self.shared.config().access_log_format,
            &self.log_tag.0,
            op,
            &self.log_tag.1,
            &who.dn,
        );
        what(&mut line);
        Some(AccessLine { line, start })
    }

    /// Ends and queues an access-log line: the operation took `elapsed` (`etime_us`).
    pub(crate) fn log_end(
        &self,
        l: Option<AccessLine>,
        rc: ResultCode,
        entries: Option<u64>,
        elapsed: std::time::Duration,
    ) {
        if let Some(l) = l {
            self.shared
                .access_log
                .write(crate::logs::access_finish(l.line, rc, entries, elapsed));
        }
    }

    /// Ends an access-log line for an operation that was abandoned (no result was sent).
    pub(crate) fn log_abandoned(&self, l: Option<AccessLine>) {
        if let Some(l) = l {
            let mut line = l.line;
            line.word("result", "abandoned");
            line.num("etime_us", l.start.elapsed().as_micros());
            self.shared.access_log.write(line.finish());
        }
    }

    /// Queues an access-log line for an event without a result (connection, abandon, unbind).
    pub(crate) fn log_event(&self, op: i32, who: &Identity, what: &str) {
        if self.shared.access_log.enabled() {
            let mut line = crate::logs::access_prefix(
                self.shared.config().access_log_format,
                &self.log_tag.0,
                op,
                &self.log_tag.1,
                &who.dn,
            );
            line.event(what);
            self.shared.access_log.write(line.finish());
        }
    }
}

/// An access-log line waiting for its operation's result.
pub(crate) struct AccessLine {
    line: crate::logs::Line,
    start: std::time::Instant,
}

/// Counts an operation in `write_waits` while it waits for room to write.
struct Waiting<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> Waiting<'a> {
    fn enter(gauge: &'a std::sync::atomic::AtomicU64) -> Waiting<'a> {
        gauge.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Waiting(gauge)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Conn {
    /// Queues response bytes, waiting while the connection's buffer is full; false when the
    /// connection is gone.
    pub async fn send(&self, bytes: Vec<u8>) -> bool {
        self.send_unless(bytes, &AtomicBool::new(false)).await
    }

    /// `send`, giving up (false, the bytes dropped) when `stop` is set (Abandon, Cancel)
    /// while it waits for room; the setter wakes it with `stop_waiters`.
    pub(crate) async fn send_unless(&self, bytes: Vec<u8>, stop: &AtomicBool) -> bool {
        use tokio::sync::TryAcquireError;
        let n = kib(bytes.len(), self.shared.config().max_buffered_bytes / 1024);
        match self.buffered.try_acquire_many(n) {
            Ok(p) => p.forget(),
            Err(TryAcquireError::Closed) => return false,
            Err(TryAcquireError::NoPermits) => {
                let _waiting = Waiting::enter(&self.shared.counters.traffic.write_waits);
                loop {
                    let stopped = self.stopped.notified();
                    let mut stopped = std::pin::pin!(stopped);
                    // Registered before the flag is read, so a stop between the two still wakes.
                    stopped.as_mut().enable();
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return false;
                    }
                    tokio::select! {
                        p = self.buffered.acquire_many(n) => match p {
                            Ok(p) => {
                                p.forget();
                                break;
                            }
                            Err(_) => return false,
                        },
                        () = stopped => {}
                    }
                }
            }
        }
        self.out.push(bytes, n)
    }

    /// Sets the stop flag of a running operation (Abandon, Cancel) and wakes it if it waits
    /// for room to write.
    pub(crate) fn stop(&self, flag: &AtomicBool) {
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
        self.stopped.notify_waiters();
    }

    /// `send` without waiting, from any thread (the store's writer answers writes with it):
    /// `Err` gives the bytes back when the connection's buffer or queue has no room now, for
    /// `send` to wait for it. Bytes for a connection that is gone are dropped, as `send` does.
    pub fn try_send(&self, bytes: Vec<u8>) -> Result<(), Vec<u8>> {
        use tokio::sync::TryAcquireError;
        let n = kib(bytes.len(), self.shared.config().max_buffered_bytes / 1024);
        match self.buffered.try_acquire_many(n) {
            Ok(p) => p.forget(),
            Err(TryAcquireError::Closed) => return Ok(()),
            Err(TryAcquireError::NoPermits) => return Err(bytes),
        }
        // The queue itself has no length limit (its room is the permits above); false means
        // the write side failed, and the bytes go nowhere.
        self.out.push(bytes, n);
        Ok(())
    }

    /// `send_unless` from a blocking-pool thread (searches run there).
    pub(crate) fn send_blocking(&self, bytes: Vec<u8>, stop: &AtomicBool) -> bool {
        tokio::runtime::Handle::current().block_on(self.send_unless(bytes, stop))
    }

    /// Whether requests are still being worked on (writes awaiting the writer, searches).
    pub(crate) fn busy(&self) -> bool {
        self.permits.available_permits() < self.shared.config().max_outstanding.max(1)
            || self.running.lock().map(|m| !m.is_empty()).unwrap_or(true)
    }
}

/// Encodes an LDAPResult-only response.
pub(crate) fn result_pdu(id: i32, tag: u8, r: Result<(), &LdapError>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    encode_result_into(&mut out, id, tag, r);
    out
}

pub(crate) fn encode_result_into(out: &mut Vec<u8>, id: i32, tag: u8, r: Result<(), &LdapError>) {
    proto::encode_result(out, id, tag, &wire_result(r));
}

/// The Notice of Disconnection (RFC 4511 §4.4.1) sent before closing on a protocol error.
pub(crate) fn notice_of_disconnection(code: ResultCode, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    let e = LdapError::new(code, message);
    proto::encode_extended_response(
        &mut out,
        0,
        &wire_result(Err(&e)),
        Some(proto::oids::NOTICE_OF_DISCONNECTION.as_bytes()),
        None,
    );
    out
}
/// The queue of encoded responses of one connection, in the order they are to be written.
pub(crate) struct Outbox {
    state: Mutex<Queued>,
    /// Wakes the write task: bytes were queued that nobody else will write.
    kick: Notify,
    /// Wakes those waiting for the write side to fail (`closed`).
    failed: Notify,
}

#[derive(Default)]
struct Queued {
    /// PDUs (or runs of them) with the queue permits (KiB of `buffered`) each holds.
    pdus: VecDeque<(Vec<u8>, u32)>,
    /// The read loop is running requests and writes what they queue when it is done.
    deferred: bool,
    /// The write side failed: nothing more is queued or written.
    failed: bool,
    /// Nobody can queue anything more (the connection state is gone): the write task
    /// writes what is left and closes the socket.
    ended: bool,
}

impl Outbox {
    pub(crate) fn new() -> Outbox {
        Outbox {
            state: Mutex::new(Queued::default()),
            kick: Notify::new(),
            failed: Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Queued> {
        // Nothing panics while holding the lock; a poisoned one still holds a usable queue.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a PDU (or several, encoded back to back) holding `permits`; false once the write
    /// side failed.
    fn push(&self, bytes: Vec<u8>, permits: u32) -> bool {
        let mut q = self.state();
        if q.failed {
            return false;
        }
        q.pdus.push_back((bytes, permits));
        let kick = !q.deferred;
        drop(q);
        if kick {
            self.kick.notify_one();
        }
        true
    }

    /// While `on`, what is queued waits for the read loop's `flush_now` instead of waking the
    /// write task; turning it off wakes the write task if anything is waiting.
    pub(crate) fn defer(&self, on: bool) {
        let mut q = self.state();
        q.deferred = on;
        let kick = !on && !q.pdus.is_empty();
        drop(q);
        if kick {
            self.kick.notify_one();
        }
    }

    /// Moves queued PDUs into `batch` (up to `BATCH_BYTES`, at least one); returns the queue
    /// permits (KiB) they held and whether the queue has ended and is now empty.
    fn take(&self, batch: &mut Vec<u8>) -> (usize, bool) {
        let mut q = self.state();
        let mut permits = 0;
        while let Some((p, held)) = q.pdus.front() {
            if !batch.is_empty() && batch.len() + p.len() > BATCH_BYTES {
                break;
            }
            permits += *held as usize;
            batch.extend_from_slice(p);
            q.pdus.pop_front();
        }
        (permits, q.ended && q.pdus.is_empty())
    }

    /// The write side failed: producers give up, and so does the read loop (`closed`).
    fn fail(&self) {
        let mut q = self.state();
        q.failed = true;
        q.pdus.clear();
        drop(q);
        self.failed.notify_waiters();
    }

    /// The connection's state is gone: the write task finishes the queue and closes.
    pub(crate) fn end(&self) {
        self.state().ended = true;
        self.kick.notify_one();
    }

    /// Resolves when the write side has failed (a client that leaves responses unread for
    /// `write_timeout`, or a broken connection).
    pub(crate) async fn closed(&self) {
        loop {
            let failed = self.failed.notified();
            if self.state().failed {
                return;
            }
            failed.await;
        }
    }
}

/// The write half of a connection, held by whoever writes: the read loop (`flush_now`) or the
/// write task. Empty while one of them writes.
pub(crate) type Slot<W> = Mutex<Option<W>>;

fn take_slot<W>(slot: &Slot<W>) -> Option<W> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
}

fn put_slot<W>(slot: &Slot<W>, w: W) {
    *slot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(w);
}

/// Writes what is queued now, from the read loop, without waiting: as much as the socket takes
/// (one vectored write). What it does not take stays first in the queue, for the write task.
/// Only for transports whose writes complete in the call (plain TCP and Unix sockets: a TLS
/// stream would keep the bytes it encrypts until it is polled again).
pub(crate) fn flush_now<W: AsyncWrite + Unpin>(conn: &Conn, slot: &Slot<W>) {
    let Some(mut w) = take_slot(slot) else {
        // The write task is writing: it takes what is queued after that.
        return;
    };
    let mut q = conn.out.state();
    if q.failed || q.pdus.is_empty() {
        drop(q);
        put_slot(slot, w);
        return;
    }
    // The queue stays locked during the write (producers wait for one syscall at most), so
    // what is not written is still first in it.
    let mut slices = [std::io::IoSlice::new(&[]); 32];
    let n = q.pdus.len().min(slices.len());
    for (s, (p, _)) in slices.iter_mut().zip(q.pdus.iter()) {
        *s = std::io::IoSlice::new(p);
    }
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let written = match Pin::new(&mut w).poll_write_vectored(&mut cx, &slices[..n]) {
        Poll::Ready(Ok(k)) => k,
        // Not writable now, or an error the write task will meet and report.
        Poll::Ready(Err(_)) | Poll::Pending => 0,
    };
    let mut left = written;
    let mut permits = 0;
    while let Some((p, held)) = q.pdus.front_mut() {
        if left == 0 {
            break;
        }
        if left < p.len() {
            // Its permits return when the rest is written.
            p.drain(..left);
            break;
        }
        left -= p.len();
        permits += *held as usize;
        q.pdus.pop_front();
    }
    drop(q);
    put_slot(slot, w);
    if written > 0 {
        let sent = &conn.shared.counters.traffic.bytes_sent;
        sent.fetch_add(written as u64, std::sync::atomic::Ordering::Relaxed);
        conn.buffered.add_permits(permits);
    }
}

/// Writes what the write task is woken for (`Outbox`), coalescing whatever is queued into one
/// `write_all`. When `handover` fires (StartTLS), it writes what is queued and returns the
/// write half so the stream can be wrapped in TLS; otherwise it runs until the queue ends.
/// Every write must complete within `write_timeout` (a client that stops reading is
/// disconnected); bytes written return their permits to `buffered`.
pub(crate) async fn write_loop<W: AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    slot: Arc<Slot<W>>,
    out: Arc<Outbox>,
    mut handover: oneshot::Receiver<()>,
    buffered: Arc<Semaphore>,
    write_timeout: Option<std::time::Duration>,
    peer: SocketAddr,
) -> Option<W> {
    let sent = &shared.counters.traffic.bytes_sent;
    let written = async |wr: &mut W, bytes: &[u8]| -> bool {
        sent.fetch_add(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let w = wr.write_all(bytes);
        match write_timeout {
            Some(t) => match tokio::time::timeout(t, w).await {
                Ok(r) => r.is_ok(),
                Err(_) => {
                    tracing::info!(%peer, "disconnecting a client that left responses unread for {} s", t.as_secs());
                    false
                }
            },
            None => w.await.is_ok(),
        }
    };
    let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut may_hand_over = true;
    loop {
        tokio::select! {
            biased;
            () = out.kick.notified() => {}
            r = &mut handover, if may_hand_over => {
                may_hand_over = false;
                if r.is_ok() {
                    // StartTLS: the read loop waits for this task, so the write half is here.
                    let mut wr = take_slot(&slot)?;
                    loop {
                        batch.clear();
                        let (permits, _) = out.take(&mut batch);
                        if batch.is_empty() {
                            return wr.flush().await.ok().map(|_| wr);
                        }
                        let ok = written(&mut wr, &batch).await;
                        buffered.add_permits(permits);
                        if !ok {
                            buffered.close();
                            out.fail();
                            return None;
                        }
                    }
                }
                continue;
            }
        }
        // Write until the queue is empty; the read loop holding the write half means it is
        // writing, and it wakes this task again if it leaves anything.
        while let Some(mut wr) = take_slot(&slot) {
            batch.clear();
            let (permits, ended) = out.take(&mut batch);
            if batch.is_empty() {
                if ended {
                    buffered.close();
                    let _ = wr.shutdown().await;
                    return None;
                }
                put_slot(&slot, wr);
                break;
            }
            let ok = written(&mut wr, &batch).await;
            buffered.add_permits(permits);
            put_slot(&slot, wr);
            if !ok {
                // Producers waiting for room give up; the read loop sees `closed`.
                buffered.close();
                out.fail();
                return None;
            }
        }
    }
}
