//! One client connection: framing, decoding, dispatch, and batched writes.
//!
//! The read loop takes every complete PDU that has arrived and dispatches it without waiting for
//! earlier requests to finish: binds, compares and extended operations that only read are
//! answered inline; searches run on the blocking pool (concurrently with each other, streaming
//! entries as found); writes are queued to the store's writer in the order they arrived, and
//! answered when their batch commits. All responses go through one channel to a write task that
//! coalesces whatever is waiting into one `write_all`.
//!
//! Limits (style.md rule 6): `max_pdu_size` bytes per PDU (larger → Notice of Disconnection),
//! `max_outstanding` requests in progress per connection (the loop stops reading until one ends).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use proto::{tags, Control, LdapMessage, ProtocolOp, ResultCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::tls::TlsInfo;

use crate::error::{wire_result, LdapError};
use crate::ops;
use crate::state::{Counters, Identity, Shared};

/// Response bytes queued per connection before producers wait (back-pressure on slow readers).
const OUT_QUEUE: usize = 256;
/// Bytes a search encodes before handing them to the write task.
pub(crate) const FLUSH_BYTES: usize = 32 * 1024;

/// Controls Linden understands; any other control marked critical is refused.
pub const SUPPORTED_CONTROLS: &[&str] =
    &[proto::oids::MANAGE_DSA_IT, proto::oids::PERSISTENT_SEARCH];

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
    log_tag: (String, String),
    /// Response bytes that may still be queued, in KiB (`max_buffered_bytes`): taken by
    /// producers, returned by the write task; closed when the connection is gone.
    pub buffered: Arc<Semaphore>,
    /// Open persistent searches, for Abandon, close and `max_persistent_searches`.
    pub(crate) psearches: ops::psearch::Open,
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
        what: impl FnOnce(&mut String),
    ) -> Option<AccessLine> {
        if !self.shared.access_log.enabled() {
            return None;
        }
        let mut line = crate::logs::access_prefix(&self.log_tag.0, op, &self.log_tag.1, &who.dn);
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
            line.push_str(&format!(
                " result=abandoned etime_us={}\n",
                l.start.elapsed().as_micros()
            ));
            self.shared.access_log.write(line.into_bytes());
        }
    }

    /// Queues an access-log line for an event without a result (connection, abandon, unbind).
    fn log_event(&self, op: i32, who: &Identity, what: &str) {
        if self.shared.access_log.enabled() {
            let mut line =
                crate::logs::access_prefix(&self.log_tag.0, op, &self.log_tag.1, &who.dn);
            line.push(' ');
            line.push_str(what);
            line.push('\n');
            self.shared.access_log.write(line.into_bytes());
        }
    }
}

/// An access-log line waiting for its operation's result.
pub(crate) struct AccessLine {
    line: String,
    start: std::time::Instant,
}

/// The result code a response carries.
pub(crate) fn code_of(r: Result<(), &LdapError>) -> ResultCode {
    match r {
        Ok(()) => ResultCode::Success,
        Err(e) => e.code,
    }
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

/// `require_tls_for_writes`: changes only over TLS.
pub(crate) fn writes_allowed(conn: &Conn) -> Result<(), LdapError> {
    if conn.shared.config.require_tls_for_writes && conn.tls.is_none() {
        return Err(LdapError::new(
            ResultCode::ConfidentialityRequired,
            "changes require TLS (use StartTLS or ldaps)",
        ));
    }
    Ok(())
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
fn notice_of_disconnection(code: ResultCode, message: &str) -> Vec<u8> {
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
async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut handover: oneshot::Receiver<()>,
    buffered: Arc<Semaphore>,
    budget: usize,
    write_timeout: Option<std::time::Duration>,
    peer: SocketAddr,
) -> Option<W> {
    let written = async |wr: &mut W, bytes: &[u8]| -> bool {
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

/// The response tag for a request tag, for refusing a request before it runs.
fn response_tag(op: &ProtocolOp<'_>) -> Option<u8> {
    Some(match op {
        ProtocolOp::BindRequest(_) => tags::BIND_RESPONSE,
        ProtocolOp::SearchRequest(_) => tags::SEARCH_RESULT_DONE,
        ProtocolOp::ModifyRequest(_) => tags::MODIFY_RESPONSE,
        ProtocolOp::AddRequest(_) => tags::ADD_RESPONSE,
        ProtocolOp::DelRequest(_) => tags::DEL_RESPONSE,
        ProtocolOp::ModifyDnRequest(_) => tags::MODIFY_DN_RESPONSE,
        ProtocolOp::CompareRequest(_) => tags::COMPARE_RESPONSE,
        ProtocolOp::ExtendedRequest(_) => tags::EXTENDED_RESPONSE,
        _ => return None,
    })
}

fn unsupported_critical(controls: &[Control<'_>]) -> Option<String> {
    controls
        .iter()
        .find(|c| c.critical && !SUPPORTED_CONTROLS.iter().any(|s| s.as_bytes() == &*c.oid))
        .map(|c| String::from_utf8_lossy(&c.oid).into_owned())
}

pub(crate) enum Next {
    Continue,
    Close,
    /// The StartTLS response is queued: hand the stream to TLS.
    StartTls,
}

/// Answers a connection over a limit with a Notice of Disconnection (busy) and closes it.
pub(crate) async fn refuse_busy(mut stream: TcpStream, why: crate::connlimit::Refused) {
    let msg = match why {
        crate::connlimit::Refused::Total => "too many connections (max_connections)",
        crate::connlimit::Refused::PerIp => {
            "too many connections from this address (max_connections_per_ip)"
        }
    };
    let notice = notice_of_disconnection(ResultCode::Busy, msg);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let _ = stream.write_all(&notice).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Serves one accepted connection: LDAPS connections start with the TLS handshake, plain ones
/// may switch to TLS with StartTLS.
pub(crate) async fn run(shared: Arc<Shared>, stream: TcpStream, peer: SocketAddr, ldaps: bool) {
    let _ = stream.set_nodelay(true);
    Counters::bump(&shared.counters.connections);
    if ldaps {
        if let Some((tls, info)) = handshake(&shared, stream, peer).await {
            let (rd, wr) = tokio::io::split(tls);
            serve(shared, rd, wr, peer, Some(info)).await;
        }
        return;
    }
    let (rd, wr) = stream.into_split();
    if let Ended::StartTls(rd, wr) = serve(shared.clone(), rd, wr, peer, None).await {
        let Ok(stream) = rd.reunite(wr) else {
            return;
        };
        if let Some((tls, info)) = handshake(&shared, stream, peer).await {
            let (rd, wr) = tokio::io::split(tls);
            serve(shared, rd, wr, peer, Some(info)).await;
        }
    }
}

type TlsStream = tokio_rustls::server::TlsStream<TcpStream>;

async fn handshake(
    shared: &Shared,
    stream: TcpStream,
    peer: SocketAddr,
) -> Option<(TlsStream, TlsInfo)> {
    let config = shared.tls.clone()?;
    let accept = tokio_rustls::TlsAcceptor::from(config).accept(stream);
    match tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(tls)) => {
            let client_subject = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(crate::tls::subject_dn);
            Some((tls, TlsInfo { client_subject }))
        }
        Ok(Err(e)) => {
            tracing::debug!(%peer, "TLS handshake failed: {e}");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

/// How a connection's serving ended.
enum Ended<R, W> {
    Closed,
    /// StartTLS succeeded: the plain halves, to be wrapped in TLS.
    StartTls(R, W),
}

/// The read loop of one connection over `rd`/`wr` (plain TCP or TLS).
async fn serve<R, W>(
    shared: Arc<Shared>,
    mut rd: R,
    wr: W,
    peer: SocketAddr,
    tls: Option<TlsInfo>,
) -> Ended<R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(OUT_QUEUE);
    let (handover_tx, handover_rx) = oneshot::channel();
    let conn_id = shared
        .counters
        .connections
        .load(std::sync::atomic::Ordering::Relaxed);
    let budget = (shared.config.max_buffered_bytes / 1024).max(1);
    let buffered = Arc::new(Semaphore::new(budget));
    let write_timeout = (shared.config.write_timeout > 0)
        .then(|| std::time::Duration::from_secs(shared.config.write_timeout));
    let writer = tokio::spawn(write_loop(
        wr,
        rx,
        handover_rx,
        buffered.clone(),
        budget,
        write_timeout,
        peer,
    ));
    let idle = (shared.config.idle_timeout > 0)
        .then(|| std::time::Duration::from_secs(shared.config.idle_timeout));
    let max_pdu = shared.config.max_pdu_size;
    let conn = Arc::new(Conn {
        permits: Arc::new(Semaphore::new(shared.config.max_outstanding.max(1))),
        shared,
        out: tx,
        running: Mutex::new(HashMap::new()),
        peer,
        tls,
        id: conn_id,
        log_tag: crate::logs::conn_tag(conn_id, peer),
        buffered,
        psearches: Default::default(),
    });
    let mut identity = Arc::new(Identity::default());
    conn.log_event(
        0,
        &identity,
        if conn.tls.is_some() {
            "CONNECT tls=yes"
        } else {
            "CONNECT tls=no"
        },
    );
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    'conn: loop {
        let mut start = 0;
        loop {
            match proto::frame(&buf[start..], max_pdu) {
                Ok(Some(n)) => {
                    let end = start + n;
                    let next = dispatch(&conn, &buf[start..end], &mut identity).await;
                    start = end;
                    match next {
                        Next::Continue => {}
                        Next::Close => break 'conn,
                        Next::StartTls => {
                            // RFC 4511 §4.14.1: the client sends nothing more until the TLS
                            // handshake; bytes that arrived anyway make the connection unusable.
                            if start != buf.len() {
                                break 'conn;
                            }
                            // The writer writes the queued response and hands its half back
                            // (while `conn` keeps the channel open).
                            let _ = handover_tx.send(());
                            let wr = writer.await;
                            drop(conn);
                            return match wr {
                                Ok(Some(wr)) => Ended::StartTls(rd, wr),
                                _ => Ended::Closed,
                            };
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(%peer, "closing connection: {e}");
                    let _ = conn
                        .send(notice_of_disconnection(
                            ResultCode::ProtocolError,
                            &e.to_string(),
                        ))
                        .await;
                    break 'conn;
                }
            }
        }
        buf.drain(..start);
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
        let read = match idle {
            None => rd.read_buf(&mut buf).await,
            Some(t) => loop {
                match tokio::time::timeout(t, rd.read_buf(&mut buf)).await {
                    Ok(r) => break r,
                    // Silent, but still waiting for its own results: not idle.
                    Err(_) if conn.busy() => continue,
                    Err(_) => {
                        conn.log_event(0, &identity, "IDLE-TIMEOUT");
                        break 'conn;
                    }
                }
            },
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    // Let running operations finish writing; then the write task drains and closes.
    conn.psearches.close();
    conn.log_event(0, &identity, "CLOSED");
    drop(conn);
    drop(handover_tx);
    let _ = writer.await;
    Ended::Closed
}

async fn dispatch(conn: &Arc<Conn>, pdu: &[u8], identity: &mut Arc<Identity>) -> Next {
    let limits = proto::DecodeLimits {
        max_ber_depth: conn.shared.config.max_ber_depth,
        max_filter_depth: conn.shared.config.max_filter_depth,
    };
    let msg = match LdapMessage::decode_with(pdu, &limits) {
        Ok(m) => m,
        Err(e) => {
            let _ = conn
                .send(notice_of_disconnection(
                    ResultCode::ProtocolError,
                    &e.to_string(),
                ))
                .await;
            return Next::Close;
        }
    };
    let id = msg.id;
    if let Some(oid) = unsupported_critical(&msg.controls) {
        if let Some(tag) = response_tag(&msg.op) {
            let e = LdapError::new(
                ResultCode::UnavailableCriticalExtension,
                format!("critical control {oid} is not supported"),
            );
            conn.send(result_pdu(id, tag, Err(&e))).await;
        }
        return Next::Continue;
    }
    let shared = &conn.shared;
    match msg.op {
        ProtocolOp::UnbindRequest => {
            conn.log_event(id, identity, "UNBIND");
            return Next::Close;
        }
        ProtocolOp::AbandonRequest(target) => {
            Counters::bump(&shared.counters.abandon);
            conn.log_event(id, identity, &format!("ABANDON target={target}"));
            if let Ok(map) = conn.running.lock() {
                if let Some(flag) = map.get(&target) {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            conn.psearches.abandon(target);
        }
        ProtocolOp::BindRequest(req) => {
            Counters::bump(&shared.counters.bind);
            // A bind resets the connection's identity first (RFC 4511 §4.2.1), then sets it on success.
            *identity = Arc::new(Identity::default());
            let log = conn.log_start(id, identity, |l| {
                l.push_str(" BIND dn=");
                crate::logs::quote(l, &req.name);
                match &req.auth {
                    proto::BindAuth::Simple(_) => l.push_str(" method=simple"),
                    proto::BindAuth::Sasl { mechanism, .. } => {
                        l.push_str(" method=sasl mech=");
                        crate::logs::quote(l, mechanism);
                    }
                }
            });
            let r = ops::bind::bind(shared, &req, conn.peer.ip(), conn.tls.as_ref()).await;
            let r = match r {
                Ok(who) => {
                    *identity = Arc::new(who);
                    Ok(())
                }
                Err(e) => Err(e),
            };
            conn.log_end(log, code_of(r.as_ref().map(|_| ())), None);
            conn.send(result_pdu(id, tags::BIND_RESPONSE, r.as_ref().map(|_| ())))
                .await;
        }
        ProtocolOp::SearchRequest(req) => {
            Counters::bump(&shared.counters.search);
            if !ops::psearch::dispatch(conn, id, &req, identity, &msg.controls).await {
                ops::search::start(conn, id, &req, identity.clone()).await;
            }
        }
        ProtocolOp::CompareRequest(req) => {
            Counters::bump(&shared.counters.compare);
            let log = conn.log_start(id, identity, |l| {
                l.push_str(" COMPARE dn=");
                crate::logs::quote(l, &req.dn);
                l.push_str(" attr=");
                crate::logs::quote(l, &req.attr);
            });
            let r = ops::compare::compare(shared, identity, &req);
            let rc = match &r {
                Ok(true) => ResultCode::CompareTrue,
                Ok(false) => ResultCode::CompareFalse,
                Err(e) => e.code,
            };
            conn.log_end(log, rc, None);
            let out = match r {
                Ok(true) => result_pdu(
                    id,
                    tags::COMPARE_RESPONSE,
                    Err(&LdapError::new(ResultCode::CompareTrue, "")),
                ),
                Ok(false) => result_pdu(
                    id,
                    tags::COMPARE_RESPONSE,
                    Err(&LdapError::new(ResultCode::CompareFalse, "")),
                ),
                Err(e) => result_pdu(id, tags::COMPARE_RESPONSE, Err(&e)),
            };
            conn.send(out).await;
        }
        ProtocolOp::AddRequest(req) => {
            Counters::bump(&shared.counters.add);
            let log = conn.log_start(id, identity, |l| {
                l.push_str(" ADD dn=");
                crate::logs::quote(l, &req.dn);
            });
            let audit = audit(conn, identity, &req.dn, || {
                crate::logs::add_change(shared, &req)
            });
            let fut = match writes_allowed(conn) {
                Ok(()) => ops::add::submit(shared, identity, &req).await,
                Err(e) => ops::ready(Err(e)),
            };
            respond_later(conn, id, tags::ADD_RESPONSE, fut, log, audit).await;
        }
        ProtocolOp::DelRequest(dn) => {
            Counters::bump(&shared.counters.delete);
            let log = conn.log_start(id, identity, |l| {
                l.push_str(" DELETE dn=");
                crate::logs::quote(l, &dn);
            });
            let audit = audit(conn, identity, &dn, || ldif::ChangeRecord::Delete);
            let fut = match writes_allowed(conn) {
                Ok(()) => ops::delete::submit(shared, identity, &dn),
                Err(e) => ops::ready(Err(e)),
            };
            respond_later(conn, id, tags::DEL_RESPONSE, fut, log, audit).await;
        }
        ProtocolOp::ModifyRequest(req) => {
            Counters::bump(&shared.counters.modify);
            let log = conn.log_start(id, identity, |l| {
                l.push_str(" MODIFY dn=");
                crate::logs::quote(l, &req.dn);
            });
            let audit = audit(conn, identity, &req.dn, || {
                crate::logs::modify_change(shared, &req)
            });
            let fut = match writes_allowed(conn) {
                Ok(()) => ops::modify::submit(shared, identity, &req).await,
                Err(e) => ops::ready(Err(e)),
            };
            respond_later(conn, id, tags::MODIFY_RESPONSE, fut, log, audit).await;
        }
        ProtocolOp::ModifyDnRequest(req) => {
            Counters::bump(&shared.counters.modrdn);
            let log = conn.log_start(id, identity, |l| {
                l.push_str(" MODRDN dn=");
                crate::logs::quote(l, &req.dn);
                l.push_str(" newrdn=");
                crate::logs::quote(l, &req.new_rdn);
                if let Some(sup) = &req.new_superior {
                    l.push_str(" newsuperior=");
                    crate::logs::quote(l, sup);
                }
            });
            let audit = audit(conn, identity, &req.dn, || crate::logs::modrdn_change(&req));
            let fut = match writes_allowed(conn) {
                Ok(()) => ops::modrdn::submit(shared, identity, &req),
                Err(e) => ops::ready(Err(e)),
            };
            respond_later(conn, id, tags::MODIFY_DN_RESPONSE, fut, log, audit).await;
        }
        ProtocolOp::ExtendedRequest(req) => {
            Counters::bump(&shared.counters.extended);
            return ops::extended::handle(conn, id, &req, identity).await;
        }
        other => {
            // A response PDU, or an operation a client may not send.
            let _ = other;
            let _ = conn
                .send(notice_of_disconnection(
                    ResultCode::ProtocolError,
                    "unexpected PDU: not a request",
                ))
                .await;
            return Next::Close;
        }
    }
    Next::Continue
}

/// The audit record of a change, if the audit log is on (written once the change succeeds).
pub(crate) fn audit(
    conn: &Conn,
    who: &Identity,
    dn: &[u8],
    change: impl FnOnce() -> ldif::ChangeRecord,
) -> Option<Vec<u8>> {
    conn.shared.audit_log.enabled().then(|| {
        crate::logs::audit_record(
            conn.id,
            conn.peer,
            &who.dn,
            &String::from_utf8_lossy(dn),
            &change(),
        )
    })
}

/// Queues the result of a write once the writer has committed it, without holding up the read
/// loop. The write was already handed to the writer (in arrival order) when `fut` was made.
/// On success the audit record (if any) is logged; the access line always is.
pub(crate) async fn respond_later(
    conn: &Arc<Conn>,
    id: i32,
    tag: u8,
    fut: impl std::future::Future<Output = Result<(), LdapError>> + Send + 'static,
    log: Option<AccessLine>,
    audit: Option<Vec<u8>>,
) {
    let Ok(permit) = conn.permits.clone().acquire_owned().await else {
        return;
    };
    let conn = conn.clone();
    tokio::spawn(async move {
        let r = fut.await;
        conn.send(result_pdu(id, tag, r.as_ref().map(|_| ()))).await;
        if r.is_ok() {
            if let Some(a) = audit {
                conn.shared.audit_log.write(a);
            }
        }
        conn.log_end(log, code_of(r.as_ref().map(|_| ())), None);
        drop(permit);
    });
}

pub(crate) use Next as DispatchNext;
