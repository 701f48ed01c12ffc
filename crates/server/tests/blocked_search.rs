//! Cancel (RFC 3909) and Abandon reach a search that is blocked writing to a client that reads
//! nothing: the connection's read loop keeps reading while the search waits for room, the
//! Cancel ends it with canceled (118) and is answered success, an Abandon drops it. As slapd
//! (compared in tests/conformance/test_cancel.py, which runs against both).
//!
//! No sleeps stand for "long enough": the client stops reading and waits until cn=Monitor
//! shows an operation waiting for room to write (`cn=Write,cn=Waiters`, as slapd's); after the Cancel or
//! Abandon it waits until cn=Monitor shows the search ended (no search in progress but the
//! poll itself), which only a stop can do: the client's receive buffer is made small and the
//! search returns more than the server's buffers can hold.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;
use std::time::{Duration, Instant};

use common::raw::RawClient;
use common::{TestServer, ADMIN_DN, ADMIN_PW};
use proto::{oids, tags, ProtocolOp, ResultCode};

const MIB: usize = 1 << 20;
/// The server's response buffer per connection (`max_buffered_bytes`), small for the test.
const BUFFERED: usize = MIB;

fn b(s: &str) -> Cow<'static, [u8]> {
    Cow::Owned(s.as_bytes().to_vec())
}

/// The largest send buffer the kernel gives the server's socket.
fn wmem_max() -> usize {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().last().and_then(|v| v.parse().ok()))
        .unwrap_or(4 * MIB)
}

/// The number of 1 MiB entries a search must return so that it cannot end while the client
/// reads nothing: more than the server's buffer, its socket's send buffer and the client's
/// (small, fixed) receive buffer hold — at least 40, as in the issue.
fn entries_needed() -> usize {
    ((BUFFERED + wmem_max()) / MIB + 8).max(40)
}

/// `monitorCounter` or another numeric attribute of a cn=Monitor entry.
fn monitor(c: &mut ldap3::LdapConn, dn: &str, attrs: &[&str]) -> Vec<u64> {
    let (rc, _, es) = common::search(c, dn, ldap3::Scope::Base, "(objectClass=*)", attrs);
    assert_eq!(rc, 0, "{dn}");
    let e = es.first().expect("monitor entry");
    attrs
        .iter()
        .map(|a| {
            e.attrs
                .get(*a)
                .and_then(|v| v.first())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{dn}: {a}: {e:?}"))
        })
        .collect()
}

/// Operations waiting now for room to write.
fn write_waits(c: &mut ldap3::LdapConn) -> u64 {
    monitor(c, "cn=Write,cn=Waiters,cn=Monitor", &["monitorCounter"])[0]
}

/// Searches in progress besides the one reading this figure.
fn searches_running(c: &mut ldap3::LdapConn) -> u64 {
    let v = monitor(
        c,
        "cn=Search,cn=Operations,cn=Monitor",
        &["monitorOpInitiated", "monitorOpCompleted"],
    );
    v[0] - v[1] - 1
}

/// Polls `cond` until it holds, within a generous deadline.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn search_op(filter: proto::Filter<'static>) -> ProtocolOp<'static> {
    ProtocolOp::SearchRequest(proto::SearchRequest {
        base: b("ou=big,dc=example,dc=com"),
        scope: proto::Scope::One,
        deref: proto::DerefAliases::Never,
        size_limit: 0,
        time_limit: 0,
        types_only: false,
        filter,
        attributes: vec![],
    })
}

/// A client that reads nothing until told to: its receive buffer is small and fixed.
fn stalled_client(srv: &TestServer) -> RawClient {
    let mut c = RawClient::connect(srv.addr);
    rustix::net::sockopt::set_socket_recv_buffer_size(&c.stream, 64 * 1024).expect("SO_RCVBUF");
    c.bind(1, ADMIN_DN, ADMIN_PW);
    c
}

/// Starts search 2 over the big entries and waits until the server is blocked writing it.
fn blocked_search(
    srv: &TestServer,
    mon: &mut ldap3::LdapConn,
    filter: proto::Filter<'static>,
) -> RawClient {
    let mut c = stalled_client(srv);
    c.send(2, search_op(filter), vec![]);
    wait_until("the search waits for room to write", || {
        write_waits(mon) >= 1
    });
    c
}

/// The search filters: one the equality index answers with few candidates (the search runs
/// in the read loop), one that scans (the search runs on the blocking pool).
fn filters() -> [(&'static str, proto::Filter<'static>); 2] {
    [
        (
            "indexed",
            proto::Filter::Equality(b("objectClass"), b("device")),
        ),
        ("scan", proto::Filter::Present(b("description"))),
    ]
}

fn big_server() -> (TestServer, usize) {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.max_buffered_bytes = BUFFERED;
        // A stalled search must end by the Cancel or Abandon, not by the client being cut off.
        c.write_timeout = 600;
    });
    let n = entries_needed();
    let mut admin = srv.admin();
    admin
        .add(
            "ou=big,dc=example,dc=com",
            vec![
                ("objectClass", ["organizationalUnit"].into()),
                ("ou", ["big"].into()),
            ],
        )
        .expect("add")
        .success()
        .expect("add ou=big");
    let value = "x".repeat(MIB);
    for i in 0..n {
        admin
            .add(
                &format!("cn=big{i},ou=big,dc=example,dc=com"),
                vec![
                    ("objectClass", ["device"].into()),
                    ("cn", [format!("big{i}").as_str()].into()),
                    ("description", [value.as_str()].into()),
                ],
            )
            .expect("add")
            .success()
            .expect("add a big entry");
    }
    (srv, n)
}

#[test]
fn cancel_and_abandon_reach_a_search_blocked_on_a_client_that_reads_nothing() {
    let (srv, n) = big_server();
    let mut mon = srv.admin();
    for (name, filter) in filters() {
        // Cancel: the search ends with canceled (118), then the Cancel is answered success.
        let mut c = blocked_search(&srv, &mut mon, filter.clone());
        c.send(
            3,
            ProtocolOp::ExtendedRequest(proto::ExtendedRequest {
                oid: b(oids::CANCEL),
                value: Some(Cow::Owned(proto::txn::encode_cancel(2))),
            }),
            vec![],
        );
        wait_until("the cancelled search ends", || {
            searches_running(&mut mon) == 0
        });
        let got = c.recv_until_done(2);
        let entries = got
            .iter()
            .filter(|r| r.tag == tags::SEARCH_RESULT_ENTRY)
            .count();
        let done = got.last().expect("result");
        assert_eq!(done.code, Some(ResultCode::Canceled), "{name}: {done:?}");
        assert!(entries < n, "{name}: {entries} of {n} entries: not stopped");
        let answer = c.recv();
        assert_eq!(answer.id, 3, "{name}: {answer:?}");
        assert_eq!(answer.code, Some(ResultCode::Success), "{name}: {answer:?}");
        drop(c);
        wait_until("the connection's writes end", || write_waits(&mut mon) == 0);

        // Abandon: the search is dropped, without a result; the connection goes on.
        let mut c = blocked_search(&srv, &mut mon, filter);
        c.send(3, ProtocolOp::AbandonRequest(2), vec![]);
        wait_until("the abandoned search ends", || {
            searches_running(&mut mon) == 0
        });
        c.send(4, common::raw::base_search("", &["1.1"]), vec![]);
        let mut entries = 0;
        loop {
            let r = c.recv();
            if r.id == 4 {
                assert_eq!(r.tag, tags::SEARCH_RESULT_ENTRY, "{name}: {r:?}");
                let done = c.recv();
                assert_eq!(done.code, Some(ResultCode::Success), "{name}: {done:?}");
                break;
            }
            assert_eq!(r.id, 2, "{name}: {r:?}");
            assert_eq!(
                r.tag,
                tags::SEARCH_RESULT_ENTRY,
                "{name}: no result after Abandon: {r:?}"
            );
            entries += 1;
        }
        assert!(
            entries < n,
            "{name}: {entries} of {n} entries: not abandoned"
        );
        drop(c);
        wait_until("the connection's writes end", || write_waits(&mut mon) == 0);
    }
}
