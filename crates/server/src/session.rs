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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};

use crate::error::{wire_result, LdapError};
use crate::ops;
use crate::state::{Counters, Identity, Shared};

/// Response bytes queued per connection before producers wait (back-pressure on slow readers).
const OUT_QUEUE: usize = 256;
/// Bytes a search encodes before handing them to the write task.
pub(crate) const FLUSH_BYTES: usize = 32 * 1024;

/// Controls Linden understands; any other control marked critical is refused.
pub const SUPPORTED_CONTROLS: &[&str] = &[proto::oids::MANAGE_DSA_IT];

/// State shared between a connection's read loop and the tasks it starts.
pub(crate) struct Conn {
    pub shared: Arc<Shared>,
    pub out: mpsc::Sender<Vec<u8>>,
    /// Running searches by message id, for Abandon.
    pub running: Mutex<HashMap<i32, Arc<AtomicBool>>>,
    pub permits: Arc<Semaphore>,
    /// The client's address.
    pub peer: SocketAddr,
}

impl Conn {
    /// Queues response bytes; false when the connection is gone.
    pub async fn send(&self, bytes: Vec<u8>) -> bool {
        self.out.send(bytes).await.is_ok()
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

async fn write_loop(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<u8>>) {
    let mut batch: Vec<u8> = Vec::with_capacity(64 * 1024);
    while let Some(first) = rx.recv().await {
        batch.clear();
        batch.extend_from_slice(&first);
        while batch.len() < 256 * 1024 {
            match rx.try_recv() {
                Ok(more) => batch.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if wr.write_all(&batch).await.is_err() {
            return;
        }
    }
    let _ = wr.shutdown().await;
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
}

pub(crate) async fn run(shared: Arc<Shared>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    Counters::bump(&shared.counters.connections);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel(OUT_QUEUE);
    let writer = tokio::spawn(write_loop(wr, rx));
    let max_pdu = shared.config.max_pdu_size;
    let conn = Arc::new(Conn {
        permits: Arc::new(Semaphore::new(shared.config.max_outstanding.max(1))),
        shared,
        out: tx,
        running: Mutex::new(HashMap::new()),
        peer,
    });
    let mut identity = Arc::new(Identity::default());
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    'conn: loop {
        let mut start = 0;
        loop {
            match proto::frame(&buf[start..], max_pdu) {
                Ok(Some(n)) => {
                    let end = start + n;
                    let next = dispatch(&conn, &buf[start..end], &mut identity).await;
                    start = end;
                    if let Next::Close = next {
                        break 'conn;
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
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    // Let running operations finish writing; then the write task drains and closes.
    drop(conn);
    let _ = writer.await;
}

async fn dispatch(conn: &Arc<Conn>, pdu: &[u8], identity: &mut Arc<Identity>) -> Next {
    let msg = match LdapMessage::decode(pdu) {
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
        ProtocolOp::UnbindRequest => return Next::Close,
        ProtocolOp::AbandonRequest(target) => {
            Counters::bump(&shared.counters.abandon);
            if let Ok(map) = conn.running.lock() {
                if let Some(flag) = map.get(&target) {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        ProtocolOp::BindRequest(req) => {
            Counters::bump(&shared.counters.bind);
            // A bind resets the connection's identity first (RFC 4511 §4.2.1), then sets it on success.
            *identity = Arc::new(Identity::default());
            let r = ops::bind::bind(shared, &req, conn.peer.ip()).await;
            let r = match r {
                Ok(who) => {
                    *identity = Arc::new(who);
                    Ok(())
                }
                Err(e) => Err(e),
            };
            conn.send(result_pdu(id, tags::BIND_RESPONSE, r.as_ref().map(|_| ())))
                .await;
        }
        ProtocolOp::SearchRequest(req) => {
            Counters::bump(&shared.counters.search);
            ops::search::start(conn, id, &req, identity.clone()).await;
        }
        ProtocolOp::CompareRequest(req) => {
            Counters::bump(&shared.counters.compare);
            let r = ops::compare::compare(shared, identity, &req);
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
            let fut = ops::add::submit(shared, identity, &req);
            respond_later(conn, id, tags::ADD_RESPONSE, fut).await;
        }
        ProtocolOp::DelRequest(dn) => {
            Counters::bump(&shared.counters.delete);
            let fut = ops::delete::submit(shared, identity, &dn);
            respond_later(conn, id, tags::DEL_RESPONSE, fut).await;
        }
        ProtocolOp::ModifyRequest(req) => {
            Counters::bump(&shared.counters.modify);
            let fut = ops::modify::submit(shared, identity, &req);
            respond_later(conn, id, tags::MODIFY_RESPONSE, fut).await;
        }
        ProtocolOp::ModifyDnRequest(req) => {
            Counters::bump(&shared.counters.modrdn);
            let fut = ops::modrdn::submit(shared, identity, &req);
            respond_later(conn, id, tags::MODIFY_DN_RESPONSE, fut).await;
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

/// Queues the result of a write once the writer has committed it, without holding up the read
/// loop. The write was already handed to the writer (in arrival order) when `fut` was made.
pub(crate) async fn respond_later(
    conn: &Arc<Conn>,
    id: i32,
    tag: u8,
    fut: impl std::future::Future<Output = Result<(), LdapError>> + Send + 'static,
) {
    let Ok(permit) = conn.permits.clone().acquire_owned().await else {
        return;
    };
    let conn = conn.clone();
    tokio::spawn(async move {
        let r = fut.await;
        conn.send(result_pdu(id, tag, r.as_ref().map(|_| ()))).await;
        drop(permit);
    });
}

pub(crate) use Next as DispatchNext;
