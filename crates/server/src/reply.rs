//! The reply half of a connection: the state its operations share (`Conn`), the queue of
//! encoded responses with its back-pressure, the write task that coalesces them into few
//! syscalls, and the access-log lines of operations. Operations send through it; the read
//! loop (`session`) owns it. It knows nothing of operations.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use proto::ResultCode;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::error::{wire_result, LdapError};
use crate::state::{Identity, Shared};
use crate::tls::TlsInfo;

/// Response bytes queued per connection before producers wait (back-pressure on slow readers).
pub(crate) const OUT_QUEUE: usize = 256;
/// Bytes a search encodes before handing them to the write task.
pub(crate) const FLUSH_BYTES: usize = 32 * 1024;
/// State shared between a connection's read loop and the tasks it starts.
pub(crate) struct Conn {
    pub shared: Arc<Shared>,
    pub out: mpsc::Sender<Vec<u8>>,
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
    pub paged: Mutex<crate::ops::paged::PagedSearches>,
    /// Virtual list views kept for their context ids (`ops::sort`).
    pub(crate) vlv: Mutex<crate::ops::state::VlvContexts>,
    /// Open persistent searches, for Abandon, close and `max_persistent_searches`.
    pub(crate) psearches: crate::ops::live::Open,
    /// Open LDAP transactions (RFC 5805), dropped with the connection.
    pub(crate) txns: crate::ops::state::Transactions,
    /// Cancel requests waiting for their searches, and what cannot be cancelled.
    pub(crate) cancels: crate::ops::state::Cancels,
    /// Search bases this connection used lately, parsed (`Dit::parse_dn_cached`).
    pub(crate) bases: Mutex<dit::DnCache>,
    /// The last bind found the password reset and to be changed: operations other than
    /// changing it are refused (`ppolicy::restriction`).
    pub(crate) must_change: std::sync::atomic::AtomicBool,
}

/// Queue permits (KiB) a response of `len` bytes takes; at most the whole budget, so that one
/// large message cannot wait forever.
fn kib(len: usize, budget: usize) -> u32 {
    u32::try_from(len.div_ceil(1024).clamp(1, budget.max(1))).unwrap_or(u32::MAX)
}

impl Conn {
    /// The start of an access-log line for operation `op` by `who`, if the access log is on.
    pub(crate) fn log_start(
        &self,
        op: i32,
        who: &Identity,
        what: impl FnOnce(&mut crate::logs::Line),
    ) -> Option<AccessLine> {
        if !self.shared.access_log.enabled() {
            return None;
        }
        let mut line = crate::logs::access_prefix(
            self.shared.config.access_log_format,
            &self.log_tag.0,
            op,
            &self.log_tag.1,
            &who.dn,
        );
        what(&mut line);
        Some(AccessLine {
            line,
            start: std::time::Instant::now(),
        })
    }

    /// Ends and queues an access-log line.
    pub(crate) fn log_end(&self, l: Option<AccessLine>, rc: ResultCode, entries: Option<u64>) {
        if let Some(l) = l {
            self.shared.access_log.write(crate::logs::access_finish(
                l.line,
                rc,
                entries,
                l.start.elapsed(),
            ));
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
                self.shared.config.access_log_format,
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

impl Conn {
    /// Queues response bytes, waiting while the connection's buffer is full; false when the
    /// connection is gone.
    pub async fn send(&self, bytes: Vec<u8>) -> bool {
        let n = kib(bytes.len(), self.shared.config.max_buffered_bytes / 1024);
        match self.buffered.acquire_many(n).await {
            Ok(p) => p.forget(),
            Err(_) => return false,
        }
        self.out.send(bytes).await.is_ok()
    }

    /// `send` without waiting, from any thread (the store's writer answers writes with it):
    /// `Err` gives the bytes back when the connection's buffer or queue has no room now, for
    /// `send` to wait for it. Bytes for a connection that is gone are dropped, as `send` does.
    pub fn try_send(&self, bytes: Vec<u8>) -> Result<(), Vec<u8>> {
        use tokio::sync::{mpsc::error::TrySendError, TryAcquireError};
        let n = kib(bytes.len(), self.shared.config.max_buffered_bytes / 1024);
        match self.buffered.try_acquire_many(n) {
            Ok(p) => p.forget(),
            Err(TryAcquireError::Closed) => return Ok(()),
            Err(TryAcquireError::NoPermits) => return Err(bytes),
        }
        match self.out.try_send(bytes) {
            Ok(()) | Err(TrySendError::Closed(_)) => Ok(()),
            Err(TrySendError::Full(bytes)) => {
                self.buffered.add_permits(n as usize);
                Err(bytes)
            }
        }
    }

    /// `send` from a blocking-pool thread (searches run there).
    pub fn send_blocking(&self, bytes: Vec<u8>) -> bool {
        tokio::runtime::Handle::current().block_on(self.send(bytes))
    }

    /// Whether requests are still being worked on (writes awaiting the writer, searches).
    pub(crate) fn busy(&self) -> bool {
        self.permits.available_permits() < self.shared.config.max_outstanding.max(1)
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
/// Writes what the connection's channel carries, coalescing whatever is waiting into one
/// `write_all`. When `handover` fires (StartTLS), it writes what is queued and returns the
/// write half so the stream can be wrapped in TLS; otherwise it runs until the channel closes.
/// Every write must complete within `write_timeout` (a client that stops reading is
/// disconnected); bytes written return their permits to `buffered`.
#[allow(
    clippy::too_many_arguments,
    reason = "the parts of one connection's write half"
)]
pub(crate) async fn write_loop<W: AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    mut wr: W,
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut handover: oneshot::Receiver<()>,
    buffered: Arc<Semaphore>,
    budget: usize,
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
        let first = tokio::select! {
            biased;
            m = rx.recv() => match m {
                Some(b) => b,
                None => break,
            },
            r = &mut handover, if may_hand_over => {
                if r.is_err() {
                    may_hand_over = false;
                    continue;
                }
                while let Ok(b) = rx.try_recv() {
                    buffered.add_permits(kib(b.len(), budget) as usize);
                    if !written(&mut wr, &b).await {
                        buffered.close();
                        return None;
                    }
                }
                return wr.flush().await.ok().map(|_| wr);
            }
        };
        batch.clear();
        batch.extend_from_slice(&first);
        let mut permits = kib(first.len(), budget) as usize;
        while batch.len() < 256 * 1024 {
            match rx.try_recv() {
                Ok(more) => {
                    permits += kib(more.len(), budget) as usize;
                    batch.extend_from_slice(&more)
                }
                Err(_) => break,
            }
        }
        let ok = written(&mut wr, &batch).await;
        buffered.add_permits(permits);
        if !ok {
            // Producers waiting for room give up; the read loop sees the closed channel.
            buffered.close();
            rx.close();
            return None;
        }
    }
    buffered.close();
    let _ = wr.shutdown().await;
    None
}
