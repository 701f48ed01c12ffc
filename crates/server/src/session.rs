//! One client connection: framing, decoding, dispatch, and batched writes.
//!
//! The read loop takes every complete PDU that has arrived and dispatches it without waiting for
//! earlier requests to finish: binds, compares and extended operations that only read are
//! answered inline; searches run on the blocking pool (concurrently with each other, streaming
//! entries as found); writes are queued to the store's writer in the order they arrived, and
//! answered when their batch commits. Responses are queued in the connection's `Outbox`: the
//! read loop writes what the requests of one read answered in one syscall after running them
//! (plain TCP and Unix sockets), and a write task writes whatever is queued at other times,
//! coalesced into one `write_all` (see `reply`).
//!
//! Limits (style.md rule 6): `max_pdu_size` bytes per PDU, `max_pdu_size_anonymous` before a
//! bind (larger → Notice of Disconnection as soon as the header arrives); a request larger than
//! the connection's own buffer is paid for from the shared budget (`incoming`,
//! `max_incoming_bytes`) before it is read; `max_outstanding` requests in progress per
//! connection (the loop stops reading until one ends); `max_buffered_bytes` of responses
//! queued (searches wait for room in tasks of their own, so that Abandon and Cancel are still
//! read; other answers make the loop wait); `idle_timeout`,
//! `idle_timeout_anonymous` and `pdu_timeout_anonymous` bound the waits for a client.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proto::{LdapMessage, ProtocolOp, ResultCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Semaphore};

use crate::incoming::{RequestBuf, Room};
use crate::op::{Next, Op};
use crate::ops;
use crate::reply::{flush_now, notice_of_disconnection, result_pdu, write_loop, Conn, Outbox};
use crate::state::{Counters, OpType, Shared};
use crate::tls::{PeerCred, TlsInfo};
use dit::error::LdapError;
use dit::identity::Identity;

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
            serve_tls(shared, rd, wr, peer, info).await;
        }
        return;
    }
    let (rd, wr) = stream.into_split();
    if let Ended::StartTls(rd, wr) = serve_direct(shared.clone(), rd, wr, peer, None).await {
        let Ok(stream) = rd.reunite(wr) else {
            return;
        };
        if let Some((tls, info)) = handshake(&shared, stream, peer).await {
            let (rd, wr) = tokio::io::split(tls);
            serve_tls(shared, rd, wr, peer, info).await;
        }
    }
}

/// Serves one `ldapi://` connection: local, so secure without TLS, and SASL EXTERNAL binds as
/// the connecting process's user and group. StartTLS works as on TCP (slapd allows it, and
/// clients configured for it, such as Net::LDAP's `start_tls`, send it there too); the peer's
/// credentials stay the connection's EXTERNAL identity after it.
#[cfg(unix)]
pub(crate) async fn run_local(shared: Arc<Shared>, stream: tokio::net::UnixStream) {
    let cred = match stream.peer_cred() {
        Ok(c) => PeerCred {
            uid: c.uid(),
            gid: c.gid(),
        },
        Err(e) => {
            tracing::debug!("ldapi: cannot read the peer's credentials: {e}");
            return;
        }
    };
    Counters::bump(&shared.counters.connections);
    let (rd, wr) = stream.into_split();
    let info = TlsInfo {
        client_subject: None,
        local: Some(cred),
        encrypted: false,
    };
    // A local client stands for no network address; its log lines say `client=ldapi`.
    let peer = SocketAddr::from(([0, 0, 0, 0], 0));
    if let Ended::StartTls(rd, wr) = serve_direct(shared.clone(), rd, wr, peer, Some(info)).await {
        let Ok(stream) = rd.reunite(wr) else {
            return;
        };
        if let Some((tls, mut info)) = handshake(&shared, stream, peer).await {
            info.local = Some(cred);
            let (rd, wr) = tokio::io::split(tls);
            serve_tls(shared, rd, wr, peer, info).await;
        }
    }
}

/// Serves the web console's in-process connection (`console::client`): the same read loop as
/// a TCP client's, over one end of a duplex stream, as if from `peer` (the browser's address,
/// for the failed-bind throttle and the logs); `encrypted` when the browser's connection is
/// HTTPS. Counted against the connection limits as a TCP client from `peer` is.
pub(crate) async fn run_in_process(
    shared: Arc<Shared>,
    stream: tokio::io::DuplexStream,
    peer: SocketAddr,
    encrypted: bool,
) {
    let c = shared.config();
    let admitted = match crate::connlimit::Connections::admit(
        &shared.connections,
        peer.ip(),
        c.max_connections,
        c.max_connections_per_ip,
    ) {
        Ok(a) => a,
        Err(why) => {
            drop(c);
            tracing::debug!(%peer, "console connection refused: {why:?} limit reached");
            let mut stream = stream;
            let msg = match why {
                crate::connlimit::Refused::Total => "too many connections (max_connections)",
                crate::connlimit::Refused::PerIp => {
                    "too many connections from this address (max_connections_per_ip)"
                }
            };
            let _ = stream
                .write_all(&notice_of_disconnection(ResultCode::Busy, msg))
                .await;
            return;
        }
    };
    drop(c);
    Counters::bump(&shared.counters.connections);
    let (rd, wr) = tokio::io::split(stream);
    let info = encrypted.then_some(TlsInfo {
        client_subject: None,
        local: None,
        encrypted: true,
    });
    // The write task writes every response: a duplex stream's write may wait for the reader.
    let out = Arc::new(Outbox::new());
    let _ = serve(shared, rd, wr, peer, info, out, false).await;
    drop(admitted);
}

async fn handshake<S>(
    shared: &Shared,
    stream: S,
    peer: SocketAddr,
) -> Option<(tokio_rustls::server::TlsStream<S>, TlsInfo)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let config = shared.live.load().tls.clone()?;
    let accept = tokio_rustls::TlsAcceptor::from(config).accept(stream);
    match tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(tls)) => {
            let client_subject = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(crate::tls::subject_dn);
            Some((
                tls,
                TlsInfo {
                    client_subject,
                    local: None,
                    encrypted: true,
                },
            ))
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

/// Answers a request refused before it was dispatched (its controls, or the identity they ask
/// to act as), with its access-log line; requests without a response get none.
async fn refuse(
    conn: &Conn,
    id: i32,
    identity: &Identity,
    (t, op): (OpType, &ProtocolOp<'_>),
    e: &LdapError,
) {
    if let Some(tag) = t.response_tag() {
        let start = std::time::Instant::now();
        let log = conn.log_start(id, identity, start, |l| describe(l, t, op));
        conn.send(result_pdu(id, tag, Err(e))).await;
        conn.log_end(log, e.code, None, start.elapsed());
    }
}

/// How a connection's serving ended.
enum Ended<R, W> {
    Closed,
    /// StartTLS succeeded: the plain halves, to be wrapped in TLS.
    StartTls(R, W),
}

/// `serve` over TLS: the write task writes every response (a TLS stream keeps the bytes it
/// encrypts until it is polled again, so the read loop cannot write in passing).
async fn serve_tls<R, W>(shared: Arc<Shared>, rd: R, wr: W, peer: SocketAddr, info: TlsInfo)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let out = Arc::new(Outbox::new());
    serve(shared, rd, wr, peer, Some(info), out, false).await;
}

/// `serve` over a transport whose writes complete in the call (plain TCP, Unix sockets): the
/// read loop writes the answers to the requests of each read itself, and while it runs, what
/// is queued waits for it (`Outbox::defer`) instead of waking the write task.
async fn serve_direct<R, W>(
    shared: Arc<Shared>,
    rd: R,
    wr: W,
    peer: SocketAddr,
    tls: Option<TlsInfo>,
) -> Ended<R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let out = Arc::new(Outbox::new());
    let read_loop = serve(shared, rd, wr, peer, tls, out.clone(), true);
    let mut read_loop = std::pin::pin!(read_loop);
    // Deferred while the read loop runs, not while it waits: anything queued while it waits
    // (for input, the writer, room in the queue, a slow password check) must reach the socket
    // without it.
    std::future::poll_fn(|cx| {
        out.defer(true);
        let r = std::future::Future::poll(read_loop.as_mut(), cx);
        out.defer(false);
        r
    })
    .await
}

/// The read loop of one connection over `rd`/`wr` (plain TCP or TLS), queueing responses in
/// `out`. With `direct` (see `serve_direct`), it writes what the requests of each read
/// answered itself after running them.
async fn serve<R, W>(
    shared: Arc<Shared>,
    mut rd: R,
    wr: W,
    peer: SocketAddr,
    tls: Option<TlsInfo>,
    out: Arc<Outbox>,
    direct: bool,
) -> Ended<R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let slot = Arc::new(Mutex::new(Some(wr)));
    let (handover_tx, handover_rx) = oneshot::channel();
    let conn_id = shared
        .counters
        .connections
        .load(std::sync::atomic::Ordering::Relaxed);
    let budget = (shared.config().max_buffered_bytes / 1024).max(1);
    let buffered = Arc::new(Semaphore::new(budget));
    let write_timeout = (shared.config().write_timeout > 0)
        .then(|| std::time::Duration::from_secs(shared.config().write_timeout));
    let writer = tokio::spawn(write_loop(
        shared.clone(),
        slot.clone(),
        out.clone(),
        handover_rx,
        buffered.clone(),
        write_timeout,
        peer,
    ));
    let log_tag = crate::logs::conn_tag(
        shared.config().access_log_format,
        conn_id,
        match tls.as_ref().and_then(|t| t.local) {
            Some(_) => None,
            None => Some(peer),
        },
    );
    let conn = Arc::new(Conn {
        permits: Arc::new(Semaphore::new(shared.config().max_outstanding.max(1))),
        shared,
        out,
        running: Mutex::new(HashMap::new()),
        peer,
        log_tag,
        tls,
        id: conn_id,
        buffered,
        paged: Mutex::new(Default::default()),
        vlv: Mutex::new(Default::default()),
        psearches: Default::default(),
        txns: Default::default(),
        cancels: Default::default(),
        bases: Default::default(),
        must_change: Default::default(),
        stopped: Default::default(),
    });
    let mut identity = Arc::new(Identity::default());
    conn.log_event(
        0,
        &identity,
        match &conn.tls {
            Some(t) if t.local.is_some() && t.encrypted => "CONNECT ldapi tls=yes",
            Some(t) if t.local.is_some() => "CONNECT ldapi",
            Some(_) => "CONNECT tls=yes",
            None => "CONNECT tls=no",
        },
    );
    let mut req = RequestBuf::new();
    // When the first byte of the partial request in `req` arrived (`pdu_timeout_anonymous`).
    let mut pdu_started: Option<Instant> = None;
    'conn: loop {
        let mut start = 0;
        loop {
            let (max_pdu, limit_key) = conn.shared.config().pdu_limit(identity.is_anonymous());
            match proto::frame(&req.buf[start..], max_pdu) {
                Ok(Some(n)) => {
                    let end = start + n;
                    let next = dispatch(&conn, &req.buf[start..end], &mut identity).await;
                    start = end;
                    match next {
                        Next::Continue => {}
                        Next::Bound(who) => identity = who,
                        Next::Close => break 'conn,
                        Next::StartTls => {
                            // RFC 4511 §4.14.1: the client sends nothing more until the TLS
                            // handshake; bytes that arrived anyway make the connection unusable.
                            if start != req.buf.len() {
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
                // Refused from its header alone, before its body is read.
                Err(proto::FrameError::TooLarge { len, max }) => {
                    tracing::debug!(%peer, "closing connection: request of {len} bytes over {limit_key} ({max})");
                    let size = if len == usize::MAX {
                        String::new()
                    } else {
                        format!(" of {len} bytes")
                    };
                    let msg = if limit_key == "max_pdu_size_anonymous" {
                        format!(
                            "request{size} is larger than the {max} bytes a connection may send \
                             before it binds (max_pdu_size_anonymous)"
                        )
                    } else {
                        format!("request{size} is larger than the server accepts ({max} bytes, max_pdu_size)")
                    };
                    let size = if len == usize::MAX { 0 } else { len };
                    conn.log_event(
                        0,
                        &identity,
                        &format!("PDU-TOO-LARGE size={size} limit={limit_key}"),
                    );
                    let _ = conn
                        .send(notice_of_disconnection(ResultCode::ProtocolError, &msg))
                        .await;
                    break 'conn;
                }
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
        // The answers to what was read: written now, by this task, in one syscall.
        if direct {
            flush_now(&conn, &slot);
        }
        req.buf.drain(..start);
        // A request announced larger than the connection's own buffer is paid for from the
        // shared budget before its bytes are read (`incoming`).
        let need = proto::announced_len(&req.buf, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or(0);
        pdu_started = match pdu_started {
            _ if req.buf.is_empty() => None,
            // The request before it ended in the last read, so this one started there.
            Some(_) if start > 0 => Some(Instant::now()),
            Some(t) => Some(t),
            None => Some(Instant::now()),
        };
        let anonymous = identity.is_anonymous();
        let config = &conn.shared.config();
        let pdu_deadline = pdu_started
            .filter(|_| anonymous && config.pdu_timeout_anonymous > 0)
            .map(|t| t + Duration::from_secs(config.pdu_timeout_anonymous));
        let limits = Patience {
            // In the middle of a request the time it may take is what counts, not silence.
            idle: match pdu_deadline {
                Some(_) => None,
                None => config.idle_limit(anonymous),
            },
            pdu_deadline,
        };
        let room = match req.room(need) {
            Room::Ready(n) => n,
            Room::Charge(bytes) => {
                let budget = &conn.shared.incoming;
                match limits.bound(&conn, req.charge(budget, bytes, need)).await {
                    Ok(true) => match req.room(need) {
                        Room::Ready(n) => n,
                        Room::Charge(_) => break 'conn,
                    },
                    Ok(false) => break 'conn,
                    Err(cut) => {
                        cut.report(&conn, &identity).await;
                        break 'conn;
                    }
                }
            }
        };
        // At most to the end of a large request, so that the buffer never holds more than
        // what was paid for.
        let mut limited = (&mut rd).take(room as u64);
        let reading = limited.read_buf(&mut req.buf);
        let read = match limits.bound(&conn, reading).await {
            Ok(r) => r,
            Err(cut) => {
                cut.report(&conn, &identity).await;
                break 'conn;
            }
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                conn.shared
                    .counters
                    .traffic
                    .bytes_received
                    .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    // Let running operations finish writing; then the write task drains and closes.
    conn.out.defer(false);
    conn.psearches.close();
    conn.txns.clear();
    conn.log_event(0, &identity, "CLOSED");
    drop(conn);
    drop(handover_tx);
    let _ = writer.await;
    Ended::Closed
}

/// How long the read loop waits for a client (to send, or for the budget its request needs).
struct Patience {
    /// `idle_timeout` (or `idle_timeout_anonymous`): silence with nothing in progress.
    idle: Option<Duration>,
    /// `pdu_timeout_anonymous`: when the partial request must have arrived in full.
    pdu_deadline: Option<Instant>,
}

/// Why the read loop stopped waiting.
enum Cut {
    Idle,
    PduTimeout,
    /// The write half gave up on a client that leaves its responses unread (`write_timeout`):
    /// nothing more can be answered.
    WriterGone,
}

impl Patience {
    /// Runs `fut` unless a limit is reached first. A connection whose own operations are
    /// still running is not idle, however silent.
    async fn bound<T>(&self, conn: &Conn, fut: impl Future<Output = T>) -> Result<T, Cut> {
        let mut fut = std::pin::pin!(fut);
        let pdu_timeout = async {
            match self.pdu_deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let mut pdu_timeout = std::pin::pin!(pdu_timeout);
        loop {
            let idle = async {
                match self.idle {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = &mut fut => return Ok(r),
                () = idle => {
                    if !conn.busy() {
                        return Err(Cut::Idle);
                    }
                }
                () = &mut pdu_timeout => return Err(Cut::PduTimeout),
                () = conn.out.closed() => return Err(Cut::WriterGone),
            }
        }
    }
}

impl Cut {
    /// Logs why the connection ends and tells the client where there is something to say.
    async fn report(self, conn: &Conn, identity: &Identity) {
        match self {
            Cut::Idle => conn.log_event(0, identity, "IDLE-TIMEOUT"),
            Cut::PduTimeout => {
                let secs = conn.shared.config().pdu_timeout_anonymous;
                conn.log_event(0, identity, "PDU-TIMEOUT limit=pdu_timeout_anonymous");
                let msg = format!(
                    "request not received in full within {secs} s of its first byte \
                     (pdu_timeout_anonymous, for connections that have not bound)"
                );
                let _ = conn
                    .send(notice_of_disconnection(ResultCode::TimeLimitExceeded, &msg))
                    .await;
            }
            Cut::WriterGone => {}
        }
    }
}

async fn dispatch(conn: &Arc<Conn>, pdu: &[u8], identity: &mut Arc<Identity>) -> Next {
    let limits = proto::DecodeLimits {
        max_ber_depth: conn.shared.config().max_ber_depth,
        max_filter_depth: conn.shared.config().max_filter_depth,
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
    let Some(t) = OpType::of(&msg.op) else {
        // A response PDU: no client may send one.
        let _ = conn
            .send(notice_of_disconnection(
                ResultCode::ProtocolError,
                "unexpected PDU: not a request",
            ))
            .await;
        return Next::Close;
    };
    let max_controls = conn.shared.config().max_controls_per_request;
    let controls = if max_controls > 0 && msg.controls.len() > max_controls {
        Err(LdapError::new(
            ResultCode::AdminLimitExceeded,
            format!(
                "{} controls, more than the server allows in one request ({max_controls}, max_controls_per_request)",
                msg.controls.len()
            ),
        ))
    } else {
        let features = crate::controls::Features::of(&conn.shared.config());
        crate::controls::parse(&msg.controls, t, &limits, features)
            .and_then(|mut c| c.check_schema(&conn.shared.schema()).map(|()| c))
    };
    let controls = match controls {
        Ok(c) => c,
        Err(e) => {
            refuse(conn, id, identity, (t, &msg.op), &e).await;
            return Next::Continue;
        }
    };
    let shared = &conn.shared;
    // Proxied authorization (RFC 4370): the operation acts for another identity, if the bound
    // one may act for it.
    let who = match &controls.proxied {
        None => identity.clone(),
        Some(authz) => match crate::proxy::resolve(shared, identity, authz) {
            Ok(who) => who,
            Err(e) => {
                refuse(conn, id, identity, (t, &msg.op), &e).await;
                return Next::Continue;
            }
        },
    };
    let proxied = controls.proxied.is_some();
    let refer = referred(shared, &controls, &msg.op);
    // The context of the operation, for the connection's identity as it is when it starts.
    let op = |identity: &Arc<Identity>| {
        // The one clock reading of the operation's start: its latency (cn=Monitor, /metrics)
        // and the access log's etime_us both count from it.
        let start = std::time::Instant::now();
        let log = conn.log_start(id, identity, start, |l| {
            if proxied {
                l.quoted("authzid", who.dn.as_bytes());
            }
            describe(l, t, &msg.op)
        });
        Op {
            id,
            conn: conn.clone(),
            bound: identity.clone(),
            who: if proxied { who } else { identity.clone() },
            controls,
            response: Vec::new(),
            log,
            start,
            kind: t,
            counted: false,
        }
    };
    // A password reset to be changed restricts the connection (password policy).
    if let Some(e) = crate::ppolicy::restriction(conn, identity, &msg.op) {
        let mut op = op(identity);
        if op.controls.ppolicy {
            op.response.push(crate::ppolicy::restriction_control());
        }
        if let Some(tag) = t.response_tag() {
            op.finish(tag, Err(&e), None).await;
        }
        return Next::Continue;
    }
    // An operation on an entry at or below a referral object, or outside every naming
    // context with a default referral, is referred (RFC 3296, RFC 4511 §4.1.10).
    if let Some(e) = refer {
        let op = op(identity);
        if let Some(tag) = t.response_tag() {
            op.finish(tag, Err(&e), None).await;
        }
        return Next::Continue;
    }
    Counters::bump(shared.counters.initiated(t));
    match msg.op {
        ProtocolOp::UnbindRequest => {
            Counters::bump(shared.counters.completed(t));
            conn.log_event(id, identity, "UNBIND");
            Next::Close
        }
        ProtocolOp::AbandonRequest(target) => {
            Counters::bump(shared.counters.completed(t));
            conn.log_event(id, identity, &format!("ABANDON target={target}"));
            conn.psearches.abandon(target);
            if let Ok(map) = conn.running.lock() {
                if let Some(flag) = map.get(&target) {
                    conn.stop(flag);
                }
            }
            // A persistent or sync search waiting for room to write stops too.
            conn.stopped.notify_waiters();
            Next::Continue
        }
        ProtocolOp::BindRequest(ref req) => {
            // A bind resets the connection's identity first (RFC 4511 §4.2.1), then sets it
            // on success.
            *identity = Arc::new(Identity::default());
            ops::bind::handle(op(identity), req).await
        }
        ProtocolOp::SearchRequest(ref req) => ops::search::handle(op(identity), req).await,
        ProtocolOp::CompareRequest(ref req) => ops::compare::handle(op(identity), req).await,
        ProtocolOp::AddRequest(ref req) => ops::add::handle(op(identity), req).await,
        ProtocolOp::DelRequest(ref dn) => ops::delete::handle(op(identity), dn).await,
        ProtocolOp::ModifyRequest(ref req) => ops::modify::handle(op(identity), req).await,
        ProtocolOp::ModifyDnRequest(ref req) => ops::modrdn::handle(op(identity), req).await,
        ProtocolOp::ExtendedRequest(ref req) => ops::extended::handle(op(identity), req).await,
        // `OpType::of` let requests only through.
        _ => Next::Close,
    }
}

/// The referral that answers a compare, add, delete, modify or modify DN (unless ManageDsaIT
/// asks to treat referral objects as plain entries): a referral object at the target or at its
/// nearest existing ancestor (`Dit::find`), with its URLs rewritten for the target; else, for
/// a target outside every naming context, the default referral (`referral`). Searches decide
/// this themselves (`search::engine`); binds and extended operations are not referred, as
/// slapd's are not. Costs one index lookup when no referral object exists and no default
/// referral is set.
fn referred(
    shared: &crate::state::Shared,
    controls: &crate::controls::RequestControls,
    op: &ProtocolOp<'_>,
) -> Option<LdapError> {
    use dit::standin::{rewrite, Kinds, Miss, Target};
    let raw: &[u8] = match op {
        ProtocolOp::CompareRequest(r) => &r.dn,
        ProtocolOp::AddRequest(r) => &r.dn,
        ProtocolOp::DelRequest(dn) => dn,
        ProtocolOp::ModifyRequest(r) => &r.dn,
        ProtocolOp::ModifyDnRequest(r) => &r.dn,
        _ => return None,
    };
    let v = shared.store.read();
    let kinds = shared.holds(
        &v,
        Kinds {
            alias: false,
            referral: !controls.manage_dsa_it,
        },
    );
    let default = !shared.config().referral.is_empty();
    if !kinds.referral && !default {
        return None;
    }
    // A DN that does not parse is the operation's own error to report.
    let dn = std::str::from_utf8(raw).ok()?;
    let ndn = shared.parse_ndn(raw).ok()?;
    if kinds.referral {
        if let Err(Miss::Referred(e)) = shared.find(&v, &ndn.norm, dn, None, kinds) {
            return Some(e);
        }
    }
    let held = ndn.is_root()
        || ndn.norm == shared.subschema().ndn_str()
        || dit::monitor::is_monitor_dn(&ndn.norm);
    if default && !held && shared.suffix_of(&ndn.norm).is_none() {
        let target = Target::Result {
            base: None,
            dn,
            scope: None,
        };
        let urls = shared.config().referral.clone();
        let urls = urls
            .iter()
            .filter_map(|u| rewrite(u.as_bytes(), target))
            .collect();
        return Some(LdapError::referral(urls));
    }
    None
}

/// The access-log description of a request (after the time, connection, operation, client
/// and bound DN).
fn describe(l: &mut crate::logs::Line, t: OpType, op: &ProtocolOp<'_>) {
    l.kind(t.keyword());
    match op {
        ProtocolOp::BindRequest(req) => {
            l.quoted("dn", &req.name);
            match &req.auth {
                proto::BindAuth::Simple(_) => l.word("method", "simple"),
                proto::BindAuth::Sasl { mechanism, .. } => {
                    l.word("method", "sasl");
                    l.quoted("mech", mechanism);
                }
            }
        }
        ProtocolOp::SearchRequest(req) => {
            l.quoted("base", &req.base);
            l.word(
                "scope",
                match req.scope {
                    proto::Scope::Base => "base",
                    proto::Scope::One => "one",
                    proto::Scope::Subtree => "sub",
                },
            );
            match req.deref {
                proto::DerefAliases::Never => {}
                proto::DerefAliases::InSearching => l.word("deref", "search"),
                proto::DerefAliases::FindingBase => l.word("deref", "find"),
                proto::DerefAliases::Always => l.word("deref", "always"),
            }
            l.quoted("filter", req.filter.to_string().as_bytes());
            let attrs: Vec<&[u8]> = req.attributes.iter().map(|a| &**a).collect();
            l.quoted("attrs", &attrs.join(&b' '));
            if req.size_limit > 0 || req.time_limit > 0 {
                l.num("sizelimit", req.size_limit);
                l.num("timelimit", req.time_limit);
            }
        }
        ProtocolOp::CompareRequest(req) => {
            l.quoted("dn", &req.dn);
            l.quoted("attr", &req.attr);
        }
        ProtocolOp::AddRequest(req) => {
            l.quoted("dn", &req.dn);
        }
        ProtocolOp::DelRequest(dn) => {
            l.quoted("dn", dn);
        }
        ProtocolOp::ModifyRequest(req) => {
            l.quoted("dn", &req.dn);
        }
        ProtocolOp::ModifyDnRequest(req) => {
            l.quoted("dn", &req.dn);
            l.quoted("newrdn", &req.new_rdn);
            if let Some(sup) = &req.new_superior {
                l.quoted("newsuperior", sup);
            }
        }
        ProtocolOp::ExtendedRequest(req) => {
            l.quoted("oid", &req.oid);
        }
        _ => {}
    }
}
