//! What one client, and all clients together, can make the server hold: the request size
//! before a bind (`max_pdu_size_anonymous`), the shared budget for large requests being
//! received (`max_incoming_bytes`), and the timeouts of connections that do not bind
//! (`idle_timeout_anonymous`, `pdu_timeout_anonymous`). Over real sockets; every wait is a
//! poll of a condition with a generous deadline, or a read the server's answer ends.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;
use std::io::Read;
use std::time::{Duration, Instant};

use common::raw::{base_search, RawClient, Response};
use common::{TestServer, ADMIN_DN, ADMIN_PW, BASE};
use proto::{LdapMessage, ProtocolOp, ResultCode};

/// What every connection reads into without charge (`server::incoming::FREE_BYTES`).
const FREE: usize = server::incoming::FREE_BYTES;

/// A compare of `o` on the suffix entry with a value of `size` bytes: a request of any size
/// that reads nothing and changes nothing (answered compareFalse).
fn big_compare(id: i32, size: usize) -> Vec<u8> {
    LdapMessage {
        id,
        op: ProtocolOp::CompareRequest(proto::CompareRequest {
            dn: Cow::Borrowed(BASE.as_bytes()),
            attr: Cow::Borrowed(b"o"),
            value: Cow::Owned(vec![b'x'; size]),
        }),
        controls: vec![],
    }
    .to_vec()
}

fn whoami(c: &mut RawClient, id: i32) -> Response {
    c.send(
        id,
        ProtocolOp::ExtendedRequest(proto::ExtendedRequest {
            oid: Cow::Borrowed(proto::oids::WHO_AM_I.as_bytes()),
            value: None,
        }),
        vec![],
    );
    c.recv()
}

/// A connection bound as the administrator.
fn admin(srv: &TestServer) -> RawClient {
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    c
}

/// The next response must be a Notice of Disconnection with `code`, then the connection ends.
fn expect_notice_then_close(c: &mut RawClient, code: ResultCode) -> String {
    let r = c.recv();
    assert_eq!(
        (r.id, r.tag, r.code),
        (0, proto::tags::EXTENDED_RESPONSE, Some(code)),
        "expected a Notice of Disconnection: {r:?}"
    );
    let mut rest = [0u8; 64];
    assert_eq!(
        c.stream.read(&mut rest).expect("read after the notice"),
        0,
        "the connection must close after the notice"
    );
    r.message
}

/// The connection ends (EOF or reset) without anything more from the server.
fn expect_close(c: &mut RawClient) {
    let mut rest = [0u8; 64];
    match c.stream.read(&mut rest) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("expected the connection to close: {e}"),
        Ok(n) => panic!("expected the connection to close, got {n} bytes"),
    }
}

/// One gauge of the server's `/metrics` text.
fn metric(srv: &TestServer, name: &str) -> u64 {
    let text = srv.server.metrics_text().expect("metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("/metrics has no {name}"))
        .parse::<f64>()
        .expect("a number") as u64
}

/// Polls `cond` (every 10 ms, at most 30 s: a guard against a hung server) until it holds.
fn poll(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not reached in 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `monitorCounter` of a `cn=Monitor` entry, read by an administrator connection.
fn monitor_counter(c: &mut RawClient, id: i32, dn: &str) -> u64 {
    c.send(id, base_search(dn, &["monitorCounter"]), vec![]);
    let rs = c.recv_until_done(id);
    assert_eq!(rs.last().and_then(|r| r.code), Some(ResultCode::Success));
    let v = rs[0]
        .attrs
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("monitorCounter"))
        .unwrap_or_else(|| panic!("{dn}: no monitorCounter: {:?}", rs[0]));
    String::from_utf8_lossy(&v.1[0]).parse().expect("a number")
}

#[test]
fn a_request_over_the_anonymous_limit_is_refused_from_its_header() {
    let srv = TestServer::start(false);
    let mut keeper = admin(&srv);
    let size = 1 << 20;
    let pdu = big_compare(2, size);

    // Only the header and a few bytes: the server cannot wait for the rest and answer.
    let mut anon = RawClient::connect(srv.addr);
    anon.send_bytes(&pdu[..16]);
    let msg = expect_notice_then_close(&mut anon, ResultCode::ProtocolError);
    assert!(
        msg.contains("max_pdu_size_anonymous") && msg.contains("262144"),
        "the notice names the limit: {msg}"
    );
    // Refused, not paid for.
    assert_eq!(metric(&srv, "linden_incoming_bytes"), 0);

    // The same request from a bound connection is read and answered.
    let mut bound = admin(&srv);
    bound.send_bytes(&pdu);
    let r = bound.recv();
    assert_eq!((r.id, r.code), (2, Some(ResultCode::CompareFalse)), "{r:?}");
    // So is one that fits the anonymous limit, from an anonymous connection.
    let mut anon = RawClient::connect(srv.addr);
    anon.send_bytes(&big_compare(3, 200 * 1024));
    let r = anon.recv();
    assert_eq!((r.id, r.code), (3, Some(ResultCode::CompareFalse)), "{r:?}");
    // A failed bind leaves the connection anonymous, and the limit with it.
    anon.send(
        4,
        ProtocolOp::BindRequest(proto::BindRequest {
            version: 3,
            name: Cow::Borrowed(ADMIN_DN.as_bytes()),
            auth: proto::BindAuth::Simple(Cow::Borrowed(b"wrong")),
        }),
        vec![],
    );
    assert_eq!(anon.recv().code, Some(ResultCode::InvalidCredentials));
    anon.send_bytes(&big_compare(5, size)[..16]);
    expect_notice_then_close(&mut anon, ResultCode::ProtocolError);
    // Others are unaffected.
    assert_eq!(whoami(&mut keeper, 9).code, Some(ResultCode::Success));
    assert_eq!(whoami(&mut bound, 9).code, Some(ResultCode::Success));
}

#[test]
fn large_requests_wait_for_the_shared_budget_and_give_it_back() {
    const BUDGET: usize = 1 << 20;
    const SIZE: usize = 600 * 1024;
    let srv = TestServer::start_with(|c| {
        c.max_incoming_bytes = BUDGET;
        c.max_pdu_size = BUDGET;
    });
    let mut keeper = admin(&srv);
    let pdu_a = big_compare(2, SIZE);
    let pdu_b = big_compare(2, SIZE);
    let charge = pdu_a.len() - FREE;
    let held = || metric(&srv, "linden_incoming_bytes");
    let waiting = || metric(&srv, "linden_incoming_waiting_connections");
    assert_eq!(metric(&srv, "linden_incoming_budget_bytes"), BUDGET as u64);

    // A: half its request; it pays for all of it up front.
    let mut a = admin(&srv);
    a.send_bytes(&pdu_a[..SIZE / 2]);
    poll("A's request is paid for", || held() == charge as u64);
    // B and C do not fit beside it: their reads pause.
    let mut b = admin(&srv);
    b.send_bytes(&pdu_b[..100]);
    poll("B waits", || waiting() == 1);
    let mut c = admin(&srv);
    c.send_bytes(&pdu_b[..100]);
    poll("C waits", || waiting() == 2);
    assert_eq!(
        held(),
        charge as u64,
        "waiting takes nothing from the budget"
    );
    // cn=Monitor shows the same.
    assert_eq!(
        monitor_counter(
            &mut keeper,
            2,
            "cn=Waiting For Budget,cn=Connections,cn=Monitor"
        ),
        2
    );
    assert_eq!(
        monitor_counter(
            &mut keeper,
            3,
            "cn=Incoming Bytes,cn=Connections,cn=Monitor"
        ),
        charge as u64
    );
    // Small requests, on other connections and anonymous ones, are served meanwhile.
    assert_eq!(whoami(&mut keeper, 4).code, Some(ResultCode::Success));
    let mut anon = RawClient::connect(srv.addr);
    assert_eq!(whoami(&mut anon, 1).code, Some(ResultCode::Success));

    // A completes: answered, and B (first in line) gets the budget.
    a.send_bytes(&pdu_a[SIZE / 2..]);
    let r = a.recv();
    assert_eq!((r.id, r.code), (2, Some(ResultCode::CompareFalse)), "{r:?}");
    poll("B is paid for, C still waits", || {
        waiting() == 1 && held() == charge as u64
    });
    b.send_bytes(&pdu_b[100..]);
    let r = b.recv();
    assert_eq!((r.id, r.code), (2, Some(ResultCode::CompareFalse)), "{r:?}");
    // C gets it next; it leaves halfway, and what it held comes back.
    poll("C is paid for", || {
        waiting() == 0 && held() == charge as u64
    });
    drop(c);
    poll("the budget is back", || held() == 0 && waiting() == 0);
    assert_eq!(whoami(&mut a, 3).code, Some(ResultCode::Success));

    // A connection that leaves while it waits gives its place back too (once its turn comes:
    // it is not read from while it waits).
    let mut a = admin(&srv);
    a.send_bytes(&pdu_a[..100]);
    poll("A is paid for", || held() == charge as u64);
    let mut b = admin(&srv);
    b.send_bytes(&pdu_b[..100]);
    poll("B waits", || waiting() == 1);
    drop(b);
    drop(a);
    poll("everything is back", || held() == 0 && waiting() == 0);
    assert_eq!(whoami(&mut keeper, 5).code, Some(ResultCode::Success));
}

#[test]
fn connections_that_do_not_bind_are_closed_when_idle_or_slow() {
    let srv = TestServer::start_with(|c| {
        c.idle_timeout_anonymous = 1;
        c.pdu_timeout_anonymous = 1;
    });
    // Bound first: it has been silent at least as long as the anonymous one when that one is
    // closed, and must still be served.
    let mut bound = admin(&srv);
    let mut anon = RawClient::connect(srv.addr);
    assert_eq!(whoami(&mut anon, 1).code, Some(ResultCode::Success));
    expect_close(&mut anon);
    assert_eq!(whoami(&mut bound, 2).code, Some(ResultCode::Success));

    // Half a request: a bound connection may take its time, one that has not bound may not.
    let pdu = big_compare(3, 100);
    bound.send_bytes(&pdu[..50]);
    let mut anon = RawClient::connect(srv.addr);
    anon.send_bytes(&pdu[..50]);
    let msg = expect_notice_then_close(&mut anon, ResultCode::TimeLimitExceeded);
    assert!(msg.contains("pdu_timeout_anonymous"), "{msg}");
    bound.send_bytes(&pdu[50..]);
    let r = bound.recv();
    assert_eq!((r.id, r.code), (3, Some(ResultCode::CompareFalse)), "{r:?}");

    // A connection that has bound and then binds anonymously is anonymous again.
    bound.send(
        4,
        ProtocolOp::BindRequest(proto::BindRequest {
            version: 3,
            name: Cow::Borrowed(b""),
            auth: proto::BindAuth::Simple(Cow::Borrowed(b"")),
        }),
        vec![],
    );
    assert_eq!(bound.recv().code, Some(ResultCode::Success));
    expect_close(&mut bound);
}
