//! Raw-socket tests: hand-built BER PDUs over `std::net::TcpStream`, hostile framing, pipelining,
//! abandon and unbind. Every read has a deadline so a misbehaving server fails a test instead of
//! hanging it, and after each hostile case a well-behaved client on another connection must
//! still be served.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use server::state::OpType;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{TestServer, ADMIN_DN, ADMIN_PW, BASE};

const NOTICE_OID: &[u8] = b"1.3.6.1.4.1.1466.20036";
const WHOAMI_OID: &[u8] = b"1.3.6.1.4.1.4203.1.11.3";
const WAIT: Duration = Duration::from_secs(10);

// Protocol op tags (RFC 4511, APPLICATION n).
const BIND_RESPONSE: u8 = 0x61;
const SEARCH_ENTRY: u8 = 0x64;
const SEARCH_DONE: u8 = 0x65;
const ADD_RESPONSE: u8 = 0x69;
const EXTENDED_RESPONSE: u8 = 0x78;

// ---------------------------------------------------------------------------------------------
// BER encoding

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = (n as u32).to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// Minimal two's-complement content octets of an INTEGER.
fn int_content(v: i64) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut i = 0;
    while i < 7 {
        let redundant = (bytes[i] == 0x00 && bytes[i + 1] & 0x80 == 0)
            || (bytes[i] == 0xff && bytes[i + 1] & 0x80 != 0);
        if !redundant {
            break;
        }
        i += 1;
    }
    bytes[i..].to_vec()
}

fn int(v: i64) -> Vec<u8> {
    tlv(0x02, &int_content(v))
}

fn enumerated(v: i64) -> Vec<u8> {
    tlv(0x0a, &int_content(v))
}

fn octets(s: &[u8]) -> Vec<u8> {
    tlv(0x04, s)
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn message(id: i64, op: &[u8]) -> Vec<u8> {
    tlv(0x30, &cat(&[&int(id), op]))
}

fn bind_request(id: i64, dn: &str, pw: &str) -> Vec<u8> {
    let op = tlv(
        0x60,
        &cat(&[&int(3), &octets(dn.as_bytes()), &tlv(0x80, pw.as_bytes())]),
    );
    message(id, &op)
}

/// Search with filter `(objectClass=*)` and attribute list `attrs` (empty = all user attributes).
fn search_request(id: i64, base: &str, scope: i64, attrs: &[&str]) -> Vec<u8> {
    let attr_list: Vec<u8> = attrs.iter().flat_map(|a| octets(a.as_bytes())).collect();
    let op = tlv(
        0x63,
        &cat(&[
            &octets(base.as_bytes()),
            &enumerated(scope),
            &enumerated(0),
            &int(0),
            &int(0),
            &tlv(0x01, &[0x00]),
            &tlv(0x87, b"objectClass"),
            &tlv(0x30, &attr_list),
        ]),
    );
    message(id, &op)
}

fn abandon_request(id: i64, target: i64) -> Vec<u8> {
    message(id, &tlv(0x50, &int_content(target)))
}

fn unbind_request(id: i64) -> Vec<u8> {
    message(id, &[0x42, 0x00])
}

fn whoami_request(id: i64) -> Vec<u8> {
    message(id, &tlv(0x77, &tlv(0x80, WHOAMI_OID)))
}

fn add_request(id: i64, dn: &str, attrs: &[(&str, &[&str])]) -> Vec<u8> {
    let list: Vec<u8> = attrs
        .iter()
        .flat_map(|(ty, vals)| {
            let set: Vec<u8> = vals.iter().flat_map(|v| octets(v.as_bytes())).collect();
            tlv(0x30, &cat(&[&octets(ty.as_bytes()), &tlv(0x31, &set)]))
        })
        .collect();
    message(
        id,
        &tlv(0x68, &cat(&[&octets(dn.as_bytes()), &tlv(0x30, &list)])),
    )
}

// ---------------------------------------------------------------------------------------------
// BER decoding of responses

/// A TLV found at the start of a buffer: tag, content octets, total encoded length.
type Tlv<'a> = (u8, &'a [u8], usize);

/// One TLV at the start of `buf`: Ok(Some(tlv)), Ok(None) if more bytes are needed, Err for
/// encodings a server must never send.
fn parse_tlv(buf: &[u8]) -> Result<Option<Tlv<'_>>, String> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let tag = buf[0];
    let first = buf[1];
    let (len, hdr) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 {
            return Err(format!("server sent length byte {first:#04x}"));
        }
        if buf.len() < 2 + n {
            return Ok(None);
        }
        let len = buf[2..2 + n]
            .iter()
            .fold(0usize, |acc, b| acc << 8 | *b as usize);
        (len, 2 + n)
    };
    if buf.len() < hdr + len {
        return Ok(None);
    }
    Ok(Some((tag, &buf[hdr..hdr + len], hdr + len)))
}

/// The TLVs of a constructed value's content, in order.
fn children(mut content: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let (tag, c, used) = parse_tlv(content)
            .unwrap_or_else(|e| panic!("bad BER in response: {e}"))
            .unwrap_or_else(|| panic!("truncated element in response: {content:02x?}"));
        out.push((tag, c.to_vec()));
        content = &content[used..];
    }
    out
}

fn int_value(c: &[u8]) -> i64 {
    assert!(
        !c.is_empty() && c.len() <= 8,
        "bad INTEGER content {c:02x?}"
    );
    let mut v: i64 = if c[0] & 0x80 != 0 { -1 } else { 0 };
    for b in c {
        v = v << 8 | *b as i64;
    }
    v
}

/// A response LDAPMessage: its id, protocol op tag and the op's content octets.
#[derive(Debug)]
struct Msg {
    id: i64,
    tag: u8,
    body: Vec<u8>,
}

impl Msg {
    fn parse(content: &[u8]) -> Msg {
        let parts = children(content);
        assert!(
            parts.len() >= 2,
            "LDAPMessage with {} elements",
            parts.len()
        );
        assert_eq!(parts[0].0, 0x02, "messageID is not an INTEGER");
        Msg {
            id: int_value(&parts[0].1),
            tag: parts[1].0,
            body: parts[1].1.clone(),
        }
    }

    /// resultCode of an LDAPResult-shaped response.
    fn rc(&self) -> i64 {
        let parts = children(&self.body);
        assert_eq!(
            parts[0].0, 0x0a,
            "response {:#04x} does not start with a resultCode",
            self.tag
        );
        int_value(&parts[0].1)
    }

    fn diagnostic(&self) -> String {
        String::from_utf8_lossy(&children(&self.body)[2].1).into_owned()
    }

    /// The element with context tag `tag` (e.g. 0x8a responseName, 0x8b responseValue).
    fn field(&self, tag: u8) -> Option<Vec<u8>> {
        children(&self.body)
            .into_iter()
            .find(|(t, _)| *t == tag)
            .map(|(_, c)| c)
    }

    /// objectName of a SearchResultEntry.
    fn entry_dn(&self) -> String {
        assert_eq!(self.tag, SEARCH_ENTRY);
        String::from_utf8_lossy(&children(&self.body)[0].1).into_owned()
    }

    fn assert_notice_of_disconnection(&self) {
        assert_eq!(
            self.id, 0,
            "notice of disconnection must have messageID 0: {self:?}"
        );
        assert_eq!(
            self.tag, EXTENDED_RESPONSE,
            "notice must be an ExtendedResponse: {self:?}"
        );
        assert_eq!(self.rc(), 2, "notice must carry protocolError: {self:?}");
        assert_eq!(
            self.field(0x8a).as_deref(),
            Some(NOTICE_OID),
            "notice responseName"
        );
    }
}

#[derive(Debug)]
enum Event {
    Pdu(Msg),
    Eof,
    Timeout,
}

struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("read timeout");
        s.set_write_timeout(Some(WAIT)).expect("write timeout");
        Raw { s, buf: Vec::new() }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write to server");
    }

    /// The next response, EOF, or Timeout after `wait`.
    fn next(&mut self, wait: Duration) -> Event {
        let deadline = Instant::now() + wait;
        loop {
            if let Some((tag, content, used)) =
                parse_tlv(&self.buf).unwrap_or_else(|e| panic!("{e}"))
            {
                assert_eq!(tag, 0x30, "response is not a SEQUENCE");
                let m = Msg::parse(content);
                self.buf.drain(..used);
                return Event::Pdu(m);
            }
            if Instant::now() >= deadline {
                return Event::Timeout;
            }
            let mut tmp = [0u8; 64 * 1024];
            match self.s.read(&mut tmp) {
                Ok(0) => {
                    assert!(
                        self.buf.is_empty(),
                        "connection closed inside a PDU: {:02x?}",
                        self.buf
                    );
                    return Event::Eof;
                }
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                    ) =>
                {
                    return Event::Eof
                }
                Err(e) => panic!("read from server: {e}"),
            }
        }
    }

    fn expect_pdu(&mut self) -> Msg {
        match self.next(WAIT) {
            Event::Pdu(m) => m,
            other => panic!("expected a response, got {other:?}"),
        }
    }

    fn expect_eof(&mut self) {
        match self.next(WAIT) {
            Event::Eof => {}
            other => panic!("expected the server to close the connection, got {other:?}"),
        }
    }

    fn expect_notice_then_eof(&mut self) {
        let m = self.expect_pdu();
        m.assert_notice_of_disconnection();
        self.expect_eof();
    }
}

/// A well-behaved client on a fresh connection: bind, whoami, base search.
fn assert_server_healthy(srv: &TestServer) {
    let mut c = Raw::connect(srv.addr);
    c.send(&bind_request(1, ADMIN_DN, ADMIN_PW));
    let m = c.expect_pdu();
    assert_eq!(
        (m.id, m.tag, m.rc()),
        (1, BIND_RESPONSE, 0),
        "admin bind on a fresh connection"
    );
    c.send(&whoami_request(2));
    let m = c.expect_pdu();
    assert_eq!((m.id, m.tag, m.rc()), (2, EXTENDED_RESPONSE, 0));
    assert_eq!(
        m.field(0x8b).as_deref(),
        Some(format!("dn:{ADMIN_DN}").as_bytes())
    );
}

/// A long-lived ldap3 connection opened before the hostile case must still work after it.
fn assert_keeper_works(keeper: &mut ldap3::LdapConn) {
    let (entries, _) = keeper
        .search(BASE, ldap3::Scope::Base, "(objectClass=*)", vec!["dc"])
        .expect("search on the long-lived connection")
        .success()
        .expect("search succeeds");
    assert_eq!(entries.len(), 1);
}

// ---------------------------------------------------------------------------------------------

#[test]
fn raw_bind_requests() {
    let srv = TestServer::start(true);
    let mut c = Raw::connect(srv.addr);
    c.send(&bind_request(1, ADMIN_DN, ADMIN_PW));
    let m = c.expect_pdu();
    assert_eq!((m.id, m.tag, m.rc()), (1, BIND_RESPONSE, 0));

    c.send(&bind_request(2, ADMIN_DN, "wrong"));
    let m = c.expect_pdu();
    assert_eq!(
        (m.id, m.tag, m.rc()),
        (2, BIND_RESPONSE, 49),
        "wrong password → invalidCredentials"
    );

    c.send(&bind_request(
        3,
        "uid=alice,ou=people,dc=example,dc=com",
        "password",
    ));
    let m = c.expect_pdu();
    assert_eq!((m.id, m.tag, m.rc()), (3, BIND_RESPONSE, 0));
    c.send(&whoami_request(4));
    let m = c.expect_pdu();
    assert_eq!(
        m.field(0x8b).as_deref(),
        Some(&b"dn:uid=alice,ou=people,dc=example,dc=com"[..])
    );

    // A large message id (4 content octets) is echoed back unchanged.
    c.send(&bind_request(0x7fff_fff0, "", ""));
    let m = c.expect_pdu();
    assert_eq!((m.id, m.tag, m.rc()), (0x7fff_fff0, BIND_RESPONSE, 0));
}

#[test]
fn garbage_gets_notice_of_disconnection_then_close() {
    let srv = TestServer::start(false);
    let mut keeper = srv.admin();
    let mut c = Raw::connect(srv.addr);
    c.send(b"\xff\xfeHELLO this is not BER\r\n");
    c.expect_notice_then_eof();
    assert_keeper_works(&mut keeper);
    assert_server_healthy(&srv);
}

#[test]
fn valid_pdu_then_garbage_answers_the_valid_one_first() {
    let srv = TestServer::start(false);
    let mut keeper = srv.admin();
    let mut c = Raw::connect(srv.addr);
    // A SEQUENCE whose first element is an OCTET STRING instead of the messageID.
    let garbage = tlv(0x30, &octets(b"abc"));
    c.send(&cat(&[&bind_request(1, ADMIN_DN, ADMIN_PW), &garbage]));
    let m = c.expect_pdu();
    assert_eq!(
        (m.id, m.tag, m.rc()),
        (1, BIND_RESPONSE, 0),
        "the valid PDU is answered"
    );
    c.expect_notice_then_eof();
    assert_keeper_works(&mut keeper);
    assert_server_healthy(&srv);
}

#[test]
fn indefinite_length_gets_notice() {
    let srv = TestServer::start(false);
    let mut keeper = srv.admin();
    let mut c = Raw::connect(srv.addr);
    // The whoami PDU's content, wrapped in an indefinite-length SEQUENCE (forbidden by RFC 4511 §5.1).
    let inner = cat(&[&int(1), &tlv(0x77, &tlv(0x80, WHOAMI_OID))]);
    c.send(&cat(&[&[0x30, 0x80], &inner, &[0x00, 0x00]]));
    c.expect_notice_then_eof();
    assert_keeper_works(&mut keeper);
    assert_server_healthy(&srv);
}

#[test]
fn oversized_pdu_is_refused_before_it_is_sent() {
    let srv = TestServer::start_with(|c| c.max_pdu_size = 1024);
    let mut keeper = srv.admin();
    let mut c = Raw::connect(srv.addr);
    // Declares 64 KiB; send only the header and a few content bytes, then wait.
    c.send(&[0x30, 0x83, 0x01, 0x00, 0x00, 0x02, 0x01, 0x01, 0x68]);
    c.expect_notice_then_eof();
    assert_keeper_works(&mut keeper);

    // Just under the limit is still served: an add with a 900-byte description.
    let mut c = Raw::connect(srv.addr);
    c.send(&bind_request(1, ADMIN_DN, ADMIN_PW));
    assert_eq!(c.expect_pdu().rc(), 0);
    let desc = "d".repeat(900);
    let pdu = add_request(
        2,
        "cn=big,dc=example,dc=com",
        &[("objectClass", &["device"]), ("description", &[&desc])],
    );
    assert!(
        pdu.len() < 1024,
        "test PDU must be under the limit: {}",
        pdu.len()
    );
    c.send(&pdu);
    let m = c.expect_pdu();
    assert_eq!(
        (m.id, m.tag, m.rc()),
        (2, ADD_RESPONSE, 0),
        "{}",
        m.diagnostic()
    );

    // And a complete PDU over the limit gets the notice too.
    let desc = "d".repeat(2000);
    c.send(&add_request(
        3,
        "cn=bigger,dc=example,dc=com",
        &[("objectClass", &["device"]), ("description", &[&desc])],
    ));
    c.expect_notice_then_eof();
    assert_keeper_works(&mut keeper);
    assert_server_healthy(&srv);
}

#[test]
fn truncated_pdu_then_client_close_leaves_server_up() {
    let srv = TestServer::start(false);
    let mut keeper = srv.admin();
    for cut in [1usize, 2, 5, 10] {
        let pdu = bind_request(1, ADMIN_DN, ADMIN_PW);
        let mut c = Raw::connect(srv.addr);
        c.send(&pdu[..cut.min(pdu.len() - 1)]);
        c.s.shutdown(Shutdown::Write).expect("half-close");
        // The server must not answer a partial PDU; it just sees the close.
        match c.next(Duration::from_secs(5)) {
            Event::Eof => {}
            Event::Pdu(m) => m.assert_notice_of_disconnection(),
            Event::Timeout => {
                panic!("server kept a half-closed connection open with a partial PDU")
            }
        }
        drop(c);
        assert_keeper_works(&mut keeper);
    }
    assert_server_healthy(&srv);
}

#[test]
fn pipelined_searches_all_answered_by_message_id() {
    const N: i64 = 200;
    let srv = TestServer::start(false);
    let mut keeper = srv.admin();
    let mut c = Raw::connect(srv.addr);
    let batch: Vec<u8> = (1..=N)
        .flat_map(|id| search_request(id, BASE, 0, &[]))
        .collect();
    // Write from another thread so a server that answers while we are still writing cannot
    // deadlock the test on full socket buffers.
    let mut w = c.s.try_clone().expect("clone socket");
    let writer = std::thread::spawn(move || w.write_all(&batch));

    let mut entries = vec![0u32; N as usize + 1];
    let mut dones = vec![0u32; N as usize + 1];
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut total_done = 0;
    while total_done < N {
        assert!(
            Instant::now() < deadline,
            "only {total_done} of {N} searches finished in 30 s"
        );
        let m = match c.next(Duration::from_secs(10)) {
            Event::Pdu(m) => m,
            other => panic!("after {total_done} results: {other:?}"),
        };
        assert!(
            (1..=N).contains(&m.id),
            "response to unknown message id {}",
            m.id
        );
        match m.tag {
            SEARCH_ENTRY => {
                assert_eq!(m.entry_dn(), BASE);
                entries[m.id as usize] += 1;
            }
            SEARCH_DONE => {
                assert_eq!(m.rc(), 0, "search {} failed: {}", m.id, m.diagnostic());
                assert_eq!(
                    entries[m.id as usize], 1,
                    "search {} done before/without its entry",
                    m.id
                );
                dones[m.id as usize] += 1;
                total_done += 1;
            }
            t => panic!("unexpected response tag {t:#04x}"),
        }
    }
    writer
        .join()
        .expect("writer thread")
        .expect("write requests");
    for id in 1..=N as usize {
        assert_eq!((entries[id], dones[id]), (1, 1), "message id {id}");
    }
    assert!(
        matches!(c.next(Duration::from_millis(300)), Event::Timeout),
        "extra responses after all were done"
    );
    assert_keeper_works(&mut keeper);
}

/// Adds `n` organizationalRole entries under `ou=bulk`, each with `description`, over one
/// pipelined raw connection.
fn add_bulk(srv: &TestServer, n: i64, description: &str) {
    let mut c = Raw::connect(srv.addr);
    c.send(&bind_request(1, ADMIN_DN, ADMIN_PW));
    assert_eq!(c.expect_pdu().rc(), 0);
    c.send(&add_request(
        2,
        "ou=bulk,dc=example,dc=com",
        &[("objectClass", &["organizationalUnit"]), ("ou", &["bulk"])],
    ));
    assert_eq!(c.expect_pdu().rc(), 0);
    let mut next_id = 3;
    while next_id < n + 3 {
        let hi = (next_id + 64).min(n + 3);
        let batch: Vec<u8> = (next_id..hi)
            .flat_map(|id| {
                let cn = format!("e{id}");
                add_request(
                    id,
                    &format!("cn={cn},ou=bulk,dc=example,dc=com"),
                    &[
                        ("objectClass", &["organizationalRole"]),
                        ("cn", &[&cn]),
                        ("description", &[description]),
                    ],
                )
            })
            .collect();
        c.send(&batch);
        for _ in next_id..hi {
            let m = c.expect_pdu();
            assert_eq!(
                (m.tag, m.rc()),
                (ADD_RESPONSE, 0),
                "add {}: {}",
                m.id,
                m.diagnostic()
            );
        }
        next_id = hi;
    }
}

/// A raw connection whose receive buffer is fixed at about `bytes` (the size the kernel
/// reports back is returned): left alone, Linux may grow it up to `tcp_rmem`'s maximum
/// (32 MiB on some systems) and the test would have to outsize that.
fn connect_small_window(addr: SocketAddr, bytes: u32) -> (Raw, usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let (s, rcvbuf) = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().expect("socket");
        sock.set_recv_buffer_size(bytes).expect("SO_RCVBUF");
        let rcvbuf = sock.recv_buffer_size().expect("SO_RCVBUF") as usize;
        let s = sock.connect(addr).await.expect("connect");
        (s.into_std().expect("std stream"), rcvbuf)
    });
    s.set_nonblocking(false).expect("blocking");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("read timeout");
    s.set_write_timeout(Some(WAIT)).expect("write timeout");
    (Raw { s, buf: Vec::new() }, rcvbuf)
}

/// The largest send buffer the kernel gives a socket that does not set SO_SNDBUF itself (the
/// server does not): the maximum of Linux's `tcp_wmem` autotuning, or a generous guess elsewhere.
fn max_auto_send_buffer() -> usize {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(16 << 20)
}

/// Whether `dn` exists, by a base search on connection `k` with message id `id`.
fn exists(k: &mut Raw, id: i64, dn: &str) -> bool {
    k.send(&search_request(id, dn, 0, &["1.1"]));
    let mut found = false;
    loop {
        let m = k.expect_pdu();
        assert_eq!(m.id, id);
        match m.tag {
            SEARCH_ENTRY => found = true,
            SEARCH_DONE => return found && m.rc() == 0,
            tag => panic!("unexpected response tag {tag:#04x} to a search"),
        }
    }
}

#[test]
fn abandon_stops_a_running_search() {
    // This must not depend on which thread wins: the search runs on the blocking pool, the
    // Abandon is handled by the read loop, and a search that finished before the read loop
    // reached the Abandon once failed this test on a busy machine. Here the search cannot
    // finish before the Abandon is handled, by construction:
    // - Its output is twice `capacity`, more than the server can pass on while the client reads
    //   nothing: the connection's response budget (`max_buffered_bytes`), one chunk being
    //   encoded and one being written, the server socket's send buffer (at most tcp_wmem's
    //   maximum: the server does not set SO_SNDBUF) and the client's receive buffer (fixed
    //   small). So the search blocks on back-pressure with entries still to send.
    // - The read loop never waits for a search and an Abandon has no response to queue, so it
    //   handles the Abandon, then the Add after it, while the search is blocked.
    // - The client reads nothing on this connection until another connection sees the Add's
    //   entry, which the read loop handed to the writer only after flagging the search.
    // When the client then reads, the search wakes with the flag already set: it sends the
    // chunk it was blocked on and stops, and never sends its SearchResultDone.
    const VALUE: usize = 32 * 1024;
    const BUDGET: usize = 64 * 1024;
    const BULK: &str = "ou=bulk,dc=example,dc=com";
    const MARKER: &str = "cn=after the abandon,dc=example,dc=com";
    let srv = TestServer::start_with(|c| {
        c.max_buffered_bytes = BUDGET;
        // Leaving responses unread is the point here: no timeout may end the connection.
        c.write_timeout = 0;
    });
    let mut keeper = srv.admin();
    let (mut c, rcvbuf) = connect_small_window(srv.addr, 16 * 1024);
    let capacity = max_auto_send_buffer() + rcvbuf + BUDGET + 4 * VALUE + (1 << 20);
    // At least 200 entries, so that the search runs on the blocking pool (more than
    // INLINE_CANDIDATES = 64 candidates), not inline in the read loop.
    let n = (2 * capacity / VALUE).max(200);
    add_bulk(&srv, n as i64, &"x".repeat(VALUE));
    let total = n + 1; // the entries plus ou=bulk
    let abandons_before = srv
        .server
        .counters()
        .initiated(OpType::Abandon)
        .load(std::sync::atomic::Ordering::Relaxed);

    c.send(&bind_request(1, ADMIN_DN, ADMIN_PW));
    assert_eq!(c.expect_pdu().rc(), 0);
    c.send(&cat(&[
        &search_request(2, BULK, 2, &[]),
        &abandon_request(3, 2),
        &add_request(
            4,
            MARKER,
            &[
                ("objectClass", &["organizationalRole"]),
                ("cn", &["after the abandon"]),
            ],
        ),
    ]));
    // Reading nothing on `c`, wait until the Add after the Abandon has been applied.
    let mut k = Raw::connect(srv.addr);
    k.send(&bind_request(1, ADMIN_DN, ADMIN_PW));
    assert_eq!(k.expect_pdu().rc(), 0);
    let deadline = Instant::now() + 3 * WAIT;
    let mut id = 2;
    while !exists(&mut k, id, MARKER) {
        assert!(
            Instant::now() < deadline,
            "the Add pipelined after the Abandon was not applied within {:?}; is the read \
             loop blocked?",
            3 * WAIT
        );
        id += 1;
        // Pacing of the poll only; nothing is ordered by it.
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        srv.server
            .counters()
            .initiated(OpType::Abandon)
            .load(std::sync::atomic::Ordering::Relaxed),
        abandons_before + 1,
        "abandon counter"
    );

    // Now read: entries the search had queued, then the Add's response (an Abandon has none).
    let mut seen = 0usize;
    let mut entry_of_abandoned = |m: &Msg, when: &str| {
        match (m.id, m.tag) {
            (2, SEARCH_ENTRY) => seen += 1,
            (2, SEARCH_DONE) => panic!(
                "abandoned search sent its SearchResultDone (rc {}) {when}",
                m.rc()
            ),
            _ => return false,
        }
        true
    };
    loop {
        let m = c.expect_pdu();
        if entry_of_abandoned(&m, "before the Add's response") {
            continue;
        }
        assert_eq!((m.id, m.tag), (4, ADD_RESPONSE), "abandon has no response");
        assert_eq!(m.rc(), 0, "add after the abandon: {}", m.diagnostic());
        break;
    }
    // The connection is still usable for a full search (the subtree is intact).
    c.send(&search_request(5, BULK, 2, &["1.1"]));
    let mut full = 0;
    loop {
        let m = c.expect_pdu();
        if entry_of_abandoned(&m, "after the Add's response") {
            continue;
        }
        assert_eq!(m.id, 5);
        if m.tag == SEARCH_DONE {
            assert_eq!(m.rc(), 0);
            break;
        }
        full += 1;
        assert!(full <= total);
    }
    assert_eq!(full, total);
    // After an Unbind the server closes the connection once every task that could still send
    // on it is done, so reading to the end sees everything the abandoned search ever sent.
    c.send(&unbind_request(6));
    loop {
        match c.next(WAIT) {
            Event::Eof => break,
            Event::Pdu(m) if entry_of_abandoned(&m, "after the Unbind") => {}
            other => panic!("after the Unbind: {other:?}"),
        }
    }
    // Without the Abandon every entry would have been sent; with it, the search stopped after
    // what the buffers held and the one chunk it was blocked on.
    assert!(
        seen <= capacity / VALUE + 1,
        "abandoned search sent {seen} entries; the buffers hold at most {}",
        capacity / VALUE
    );
    assert!(
        seen < total,
        "search was not stopped: all {total} entries were sent"
    );
    assert_keeper_works(&mut keeper);
}

#[test]
fn unbind_closes_the_connection() {
    let srv = TestServer::start(false);
    let mut keeper = srv.admin();
    let mut c = Raw::connect(srv.addr);
    c.send(&bind_request(1, ADMIN_DN, ADMIN_PW));
    assert_eq!(c.expect_pdu().rc(), 0);
    c.send(&unbind_request(2));
    // No response to an unbind; the server closes.
    c.expect_eof();
    assert_keeper_works(&mut keeper);
    assert_server_healthy(&srv);
}

#[test]
fn hostile_clients_in_sequence_do_not_disturb_a_long_lived_one() {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.max_pdu_size = 4096;
    });
    let mut keeper = srv.admin();
    let hostile: Vec<(&str, Vec<u8>)> = vec![
        ("not a SEQUENCE", vec![0x04, 0x03, b'a', b'b', b'c']),
        (
            "length of length 0x89",
            vec![
                0x30, 0x89, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        ),
        (
            "indefinite length",
            vec![0x30, 0x80, 0x02, 0x01, 0x01, 0x00, 0x00],
        ),
        (
            "declared 1 GiB",
            vec![0x30, 0x84, 0x40, 0x00, 0x00, 0x00, 0x02, 0x01],
        ),
        ("empty SEQUENCE", vec![0x30, 0x00]),
        ("message id only", tlv(0x30, &int(1))),
        (
            "unknown op tag",
            tlv(0x30, &cat(&[&int(1), &tlv(0x7e, b"")])),
        ),
        (
            "response op sent as request",
            message(
                1,
                &tlv(0x61, &cat(&[&enumerated(0), &octets(b""), &octets(b"")])),
            ),
        ),
    ];
    for (what, bytes) in hostile {
        let mut c = Raw::connect(srv.addr);
        c.send(&bytes);
        let m = match c.next(WAIT) {
            Event::Pdu(m) => m,
            other => panic!("{what}: expected a notice of disconnection, got {other:?}"),
        };
        assert!(
            m.id == 0
                && m.tag == EXTENDED_RESPONSE
                && m.rc() == 2
                && m.field(0x8a).as_deref() == Some(NOTICE_OID),
            "{what}: expected a notice of disconnection, got {m:?}"
        );
        match c.next(WAIT) {
            Event::Eof => {}
            other => panic!("{what}: expected close after the notice, got {other:?}"),
        }
        assert_keeper_works(&mut keeper);
    }
    assert_server_healthy(&srv);
}

/// PDUs captured from OpenLDAP 2.5's `ldapwhoami -x -D cn=admin,dc=example,dc=com -w secret`
/// and `ldapsearch -x -b dc=example,dc=com -s base '(objectClass=*)'` (a listener recorded them).
const CAPTURED_ADMIN_BIND: &str =
    "302c0201016027020103041a636e3d61646d696e2c64633d6578616d706c652c64633d636f6d8006736563726574";
const CAPTURED_WHOAMI: &str = "301e02010277198017312e332e362e312e342e312e343230332e312e31312e33";
const CAPTURED_ANON_BIND: &str = "300c020101600702010304008000";
const CAPTURED_SEARCH: &str = "30360201026331041164633d6578616d706c652c64633d636f6d0a01000a0100020100020100010100870b6f626a656374436c6173733000";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn captured_openldap_client_pdus() {
    // The hand-built encoders above produce exactly what the real client sends.
    assert_eq!(
        bind_request(1, ADMIN_DN, ADMIN_PW),
        unhex(CAPTURED_ADMIN_BIND)
    );
    assert_eq!(whoami_request(2), unhex(CAPTURED_WHOAMI));
    assert_eq!(bind_request(1, "", ""), unhex(CAPTURED_ANON_BIND));
    assert_eq!(search_request(2, BASE, 0, &[]), unhex(CAPTURED_SEARCH));

    let srv = TestServer::start(false);
    let mut c = Raw::connect(srv.addr);
    c.send(&unhex(CAPTURED_ADMIN_BIND));
    let m = c.expect_pdu();
    assert_eq!((m.id, m.tag, m.rc()), (1, BIND_RESPONSE, 0));
    c.send(&unhex(CAPTURED_WHOAMI));
    let m = c.expect_pdu();
    assert_eq!((m.id, m.tag, m.rc()), (2, EXTENDED_RESPONSE, 0));
    assert_eq!(
        m.field(0x8b).as_deref(),
        Some(&b"dn:cn=admin,dc=example,dc=com"[..])
    );

    let mut c = Raw::connect(srv.addr);
    c.send(&cat(&[&unhex(CAPTURED_ANON_BIND), &unhex(CAPTURED_SEARCH)]));
    let m = c.expect_pdu();
    assert_eq!((m.id, m.tag, m.rc()), (1, BIND_RESPONSE, 0));
    let m = c.expect_pdu();
    assert_eq!((m.id, m.tag), (2, SEARCH_ENTRY));
    assert_eq!(m.entry_dn(), BASE);
    let m = c.expect_pdu();
    assert_eq!((m.id, m.tag, m.rc()), (2, SEARCH_DONE, 0));
}

// ---------------------------------------------------------------------------------------------
// Limits and more hostile input

/// Resident memory of this test process (the server runs in it), in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn connections_over_the_per_address_limit_get_busy() {
    let srv = TestServer::start_with(|c| c.max_connections_per_ip = 3);
    let mut open: Vec<Raw> = (0..3).map(|_| Raw::connect(srv.addr)).collect();
    for (i, c) in open.iter_mut().enumerate() {
        c.send(&whoami_request(i as i64 + 1));
        assert_eq!(c.expect_pdu().rc(), 0);
    }
    let mut fourth = Raw::connect(srv.addr);
    let m = fourth.expect_pdu();
    assert_eq!(
        (m.id, m.tag, m.rc(), m.field(0x8a).as_deref()),
        (0, EXTENDED_RESPONSE, 51, Some(NOTICE_OID)),
        "busy notice: {m:?}"
    );
    assert!(m.diagnostic().contains("max_connections_per_ip"), "{m:?}");
    fourth.expect_eof();
    // A place frees up when a connection closes.
    drop(open.pop());
    let deadline = Instant::now() + WAIT;
    loop {
        let mut c = Raw::connect(srv.addr);
        c.send(&whoami_request(1));
        let m = c.expect_pdu();
        if m.tag == EXTENDED_RESPONSE && m.id == 1 {
            assert_eq!(m.rc(), 0);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the freed place was not given back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_connections_are_closed() {
    let srv = TestServer::start_with(|c| c.idle_timeout = 1);
    let mut c = Raw::connect(srv.addr);
    c.send(&whoami_request(1));
    assert_eq!(c.expect_pdu().rc(), 0);
    let t = Instant::now();
    c.expect_eof();
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "closed too early"
    );
    assert_server_healthy(&srv);
}

/// A client that sends requests as fast as it can and never reads a response: the server
/// stops reading from it (back-pressure), then disconnects it once its responses have gone
/// unread for `write_timeout`; memory stays bounded and another client is served throughout.
#[test]
fn a_client_that_never_reads_is_disconnected_and_memory_stays_bounded() {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.write_timeout = 1;
        c.max_buffered_bytes = 1 << 20;
    });
    let mut keeper = srv.admin();
    let before = rss_kib();
    let s = TcpStream::connect(srv.addr).expect("connect");
    s.set_write_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    // A million WhoAmI requests, sent in 64 KiB writes, until the server stops taking them.
    let chunk: Vec<u8> = (0..2000)
        .flat_map(|i| whoami_request(i % 1000 + 1))
        .collect();
    let per_chunk = 2000u64;
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let writer = {
        let mut s = s.try_clone().expect("clone");
        std::thread::spawn(move || {
            let mut sent = 0u64;
            let deadline = Instant::now() + Duration::from_secs(30);
            while sent < 1_000_000 && Instant::now() < deadline && stop_rx.try_recv().is_err() {
                if s.write_all(&chunk).is_err() {
                    break;
                }
                sent += per_chunk;
            }
            sent
        })
    };
    // Meanwhile, another client is answered.
    for _ in 0..20 {
        assert_keeper_works(&mut keeper);
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = stop_tx.send(());
    let sent = writer.join().expect("writer thread");
    assert!(sent > 0);
    // The server gives up on the silent reader once its writes have waited `write_timeout`:
    // nothing is read until then (reading would let its writes through again), so wait until
    // only the keeper's connection is open (bounded: a guard against a hung server).
    let deadline = Instant::now() + Duration::from_secs(120);
    while srv.server.open_connections() > 1 {
        assert!(
            Instant::now() < deadline,
            "the non-reading client was not disconnected"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Reading now finds the connection closed, after whatever responses were in flight.
    let mut s = s;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut tmp = vec![0u8; 1 << 20];
    loop {
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 256 * 1024, "memory grew by {grown} KiB");
    assert_keeper_works(&mut keeper);
    assert_server_healthy(&srv);
}

#[test]
fn more_hostile_pdus_get_notices_and_leave_others_served() {
    let srv = TestServer::start_with(|c| c.demo = true);
    let mut keeper = srv.admin();
    // A filter nested 10,000 levels deep: (!(!(!...(objectClass=*)...))).
    let mut deep = tlv(0x87, b"objectClass");
    for _ in 0..10_000 {
        deep = tlv(0xa2, &deep);
    }
    let deep_search = message(
        1,
        &tlv(
            0x63,
            &cat(&[
                &octets(BASE.as_bytes()),
                &enumerated(0),
                &enumerated(0),
                &int(0),
                &int(0),
                &tlv(0x01, &[0]),
                &deep,
                &tlv(0x30, b""),
            ]),
        ),
    );
    // BER nesting without a filter: SEQUENCE in SEQUENCE ... as the message.
    let mut nested = int(1);
    for _ in 0..5_000 {
        nested = tlv(0x30, &nested);
    }
    let huge_id = tlv(0x30, &cat(&[&tlv(0x02, &[0x7f; 40]), &tlv(0x42, b"")]));
    let zero_everything = tlv(0x30, &cat(&[&tlv(0x02, b""), &tlv(0x60, b"")]));
    let wrong_tag_in_bind = message(
        1,
        &tlv(
            0x60,
            &cat(&[&tlv(0x04, &[3]), &octets(b""), &tlv(0x80, b"")]),
        ),
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("filter nested 10,000 deep", deep_search),
        ("SEQUENCE nested 5,000 deep", nested),
        ("40-byte message id", huge_id),
        ("zero-length integer and bind", zero_everything),
        ("wrong tag for the bind version", wrong_tag_in_bind),
        (
            "length says 2 GiB",
            vec![0x30, 0x84, 0x7f, 0xff, 0xff, 0xff, 0x02],
        ),
        ("length of length 0", vec![0x30, 0x80]),
    ];
    for (what, bytes) in cases {
        let mut c = Raw::connect(srv.addr);
        c.send(&bytes);
        match c.next(WAIT) {
            Event::Pdu(m) => {
                // Either a notice of disconnection or a protocolError result for the request;
                // never a crash, never a hang.
                assert!(
                    m.rc() == 2 || m.tag == EXTENDED_RESPONSE,
                    "{what}: unexpected answer {m:?}"
                );
            }
            Event::Eof => {}
            Event::Timeout => panic!("{what}: no answer and no close"),
        }
        assert_keeper_works(&mut keeper);
    }
    assert_server_healthy(&srv);
}
