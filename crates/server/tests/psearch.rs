//! Persistent search (draft-ietf-ldapext-psearch-03) over a real socket: the initial entries
//! first, then one entry per matching change with its Entry Change Notification; Abandon ends
//! it; a subscriber that stops reading is cut off with adminLimitExceeded while the writer goes
//! on; the per-connection limit. The psearch client is raw PDUs built with `proto`; changes are
//! made with ldap3 on other connections. No sleeps: a change is queued for every persistent
//! search before its write is acknowledged, so after the ack the notification is on its way,
//! and reads have a deadline only so a broken server fails instead of hanging.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{TestServer, ADMIN_DN, ADMIN_PW};
use ldap3::{LdapConn, Mod};
use proto::controls::psearch::{ChangeType, EntryChangeNotification, PersistentSearch};
use proto::{Control, LdapMessage, ProtocolOp, ResultCode};

const WAIT: Duration = Duration::from_secs(20);
const SUB: &str = "ou=ps,dc=example,dc=com";

/// One response, detached from the bytes it was read from.
#[derive(Debug)]
enum Msg {
    Entry {
        id: i32,
        dn: String,
        attrs: Vec<(String, Vec<Vec<u8>>)>,
        /// (changeType, previousDN) of an Entry Change Notification.
        ecn: Option<(ChangeType, Option<String>)>,
    },
    Done {
        id: i32,
        code: ResultCode,
        message: String,
    },
    /// Any other response, with its result code if it has one.
    Other { id: i32, code: Option<ResultCode> },
}

struct Client {
    s: TcpStream,
    buf: Vec<u8>,
    next_id: i32,
}

impl Client {
    fn connect(srv: &TestServer) -> Client {
        Client::over(TcpStream::connect(srv.addr).expect("connect"))
    }

    fn over(s: TcpStream) -> Client {
        s.set_read_timeout(Some(WAIT)).expect("timeout");
        let mut c = Client {
            s,
            buf: Vec::new(),
            next_id: 1,
        };
        let id = c.send(ProtocolOp::BindRequest(proto::BindRequest {
            version: 3,
            name: Cow::Borrowed(ADMIN_DN.as_bytes()),
            auth: proto::BindAuth::Simple(Cow::Borrowed(ADMIN_PW.as_bytes())),
        }));
        match c.next() {
            Msg::Other { id: i, code } => assert_eq!((i, code), (id, Some(ResultCode::Success))),
            other => panic!("bind response expected, got {other:?}"),
        }
        c
    }

    fn send_with(&mut self, op: ProtocolOp<'_>, controls: Vec<Control<'_>>) -> i32 {
        let id = self.next_id;
        self.next_id += 1;
        let m = LdapMessage { id, op, controls };
        self.s.write_all(&m.to_vec()).expect("write");
        id
    }

    fn send(&mut self, op: ProtocolOp<'_>) -> i32 {
        self.send_with(op, Vec::new())
    }

    /// Starts a persistent search with filter `filter` under `base` (subtree), all user
    /// attributes.
    fn psearch(&mut self, base: &str, filter: &str, ps: PersistentSearch) -> i32 {
        let mut value = Vec::new();
        ps.encode(&mut value);
        let f = proto::Filter::parse(filter).expect("filter");
        self.send_with(
            ProtocolOp::SearchRequest(proto::SearchRequest {
                base: Cow::Owned(base.as_bytes().to_vec()),
                scope: proto::Scope::Subtree,
                deref: proto::DerefAliases::Never,
                size_limit: 0,
                time_limit: 0,
                types_only: false,
                filter: f,
                attributes: Vec::new(),
            }),
            vec![Control {
                oid: Cow::Borrowed(proto::oids::PERSISTENT_SEARCH.as_bytes()),
                critical: true,
                value: Some(Cow::Owned(value)),
            }],
        )
    }

    /// The next response; panics after `WAIT` without one.
    fn next(&mut self) -> Msg {
        loop {
            if let Some(n) = proto::frame(&self.buf, 1 << 30).expect("frame") {
                let m = LdapMessage::decode(&self.buf[..n]).expect("decode");
                let msg = summarize(&m);
                self.buf.drain(..n);
                return msg;
            }
            self.s.read_buf_into(&mut self.buf);
        }
    }

    /// Sends a WhoAmI and returns every response that arrives before its answer: since a
    /// connection's requests are dispatched in order, everything sent before it has been
    /// acted on (e.g. an Abandon) once its answer is read.
    fn sync(&mut self) -> Vec<Msg> {
        let id = self.send(ProtocolOp::ExtendedRequest(proto::ExtendedRequest {
            oid: Cow::Borrowed(proto::oids::WHO_AM_I.as_bytes()),
            value: None,
        }));
        let mut before = Vec::new();
        loop {
            match self.next() {
                Msg::Other { id: i, .. } if i == id => return before,
                m => before.push(m),
            }
        }
    }
}

trait ReadBuf {
    fn read_buf_into(&mut self, buf: &mut Vec<u8>);
}

impl ReadBuf for TcpStream {
    fn read_buf_into(&mut self, buf: &mut Vec<u8>) {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.read(&mut chunk).expect("read (timed out?)");
        assert!(n > 0, "server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn summarize(m: &LdapMessage<'_>) -> Msg {
    match &m.op {
        ProtocolOp::SearchResultEntry { dn, attributes } => {
            let ecn = m
                .controls
                .iter()
                .find(|c| &*c.oid == proto::oids::ENTRY_CHANGE_NOTIFICATION.as_bytes())
                .map(|c| {
                    let v = c.value.as_deref().expect("ECN value");
                    let e = EntryChangeNotification::decode(v).expect("ECN decodes");
                    (
                        e.change_type,
                        e.previous_dn
                            .map(|d| String::from_utf8(d.into_owned()).expect("utf8")),
                    )
                });
            Msg::Entry {
                id: m.id,
                dn: String::from_utf8(dn.to_vec()).expect("utf8"),
                attrs: attributes
                    .iter()
                    .map(|a| {
                        (
                            String::from_utf8(a.name.to_vec()).expect("utf8"),
                            a.values.iter().map(|v| v.to_vec()).collect(),
                        )
                    })
                    .collect(),
                ecn,
            }
        }
        ProtocolOp::SearchResultDone(r) => Msg::Done {
            id: m.id,
            code: r.code,
            message: String::from_utf8_lossy(&r.message).into_owned(),
        },
        ProtocolOp::BindResponse(r, _) => Msg::Other {
            id: m.id,
            code: Some(r.code),
        },
        ProtocolOp::ExtendedResponse(r) => Msg::Other {
            id: m.id,
            code: Some(r.result.code),
        },
        _ => Msg::Other {
            id: m.id,
            code: None,
        },
    }
}

fn set(v: &[&str]) -> HashSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn person(uid: &str) -> Vec<(String, HashSet<String>)> {
    vec![
        ("objectClass".into(), set(&["inetOrgPerson"])),
        ("uid".into(), set(&[uid])),
        ("cn".into(), set(&[uid])),
        ("sn".into(), set(&["Tester"])),
    ]
}

fn ok(r: ldap3::result::Result<ldap3::LdapResult>) {
    let r = r.expect("request");
    assert_eq!(r.rc, 0, "{r:?}");
}

/// A server with `ou=ps` holding two people.
fn setup(tweak: impl FnOnce(&mut server::Config)) -> (TestServer, LdapConn) {
    let srv = TestServer::start_with(tweak);
    let mut w = srv.admin();
    ok(w.add(
        SUB,
        vec![
            ("objectClass".to_string(), set(&["organizationalUnit"])),
            ("ou".to_string(), set(&["ps"])),
        ],
    ));
    for uid in ["a", "b"] {
        ok(w.add(&format!("uid={uid},{SUB}"), person(uid)));
    }
    (srv, w)
}

fn all(changes_only: bool) -> PersistentSearch {
    PersistentSearch {
        change_types: 15,
        changes_only,
        return_ecs: true,
    }
}

/// The entry a message must be: for search `id`, DN `dn`, with this ECN.
fn expect_entry(m: Msg, id: i32, dn: &str, ecn: Option<(ChangeType, Option<&str>)>) -> Msg {
    match &m {
        Msg::Entry {
            id: i,
            dn: d,
            ecn: e,
            ..
        } => {
            assert_eq!((*i, d.as_str()), (id, dn), "{m:?}");
            let e = e.as_ref().map(|(t, p)| (*t, p.as_deref()));
            assert_eq!(e, ecn, "{m:?}");
        }
        other => panic!("expected entry {dn} for search {id}, got {other:?}"),
    }
    m
}

fn attr<'a>(m: &'a Msg, name: &str) -> Option<&'a Vec<Vec<u8>>> {
    match m {
        Msg::Entry { attrs, .. } => attrs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v),
        _ => None,
    }
}

#[test]
fn initial_entries_then_each_change_with_its_notification() {
    let (srv, mut w) = setup(|_| {});
    let mut c = Client::connect(&srv);
    // Deletes only, no initial entries, no ECN; sent first, so that it follows the feed once
    // the next one's initial entries arrive (a connection's requests are dispatched in order).
    let del = c.psearch(
        SUB,
        "(objectClass=inetOrgPerson)",
        PersistentSearch {
            change_types: ChangeType::Delete.bit(),
            changes_only: true,
            return_ecs: false,
        },
    );
    // Everything, with the initial entries.
    let id = c.psearch(SUB, "(objectClass=*)", all(false));

    // The initial result set, without ECNs and without a SearchResultDone.
    let mut initial: Vec<String> = (0..3)
        .map(|_| match c.next() {
            Msg::Entry { id: i, dn, ecn, .. } if i == id && ecn.is_none() => dn,
            other => panic!("expected an initial entry, got {other:?}"),
        })
        .collect();
    initial.sort();
    assert_eq!(
        initial,
        vec![
            SUB.to_string(),
            format!("uid=a,{SUB}"),
            format!("uid=b,{SUB}")
        ]
    );

    // A change outside the base is not reported; the next one is.
    ok(w.add("uid=outside,dc=example,dc=com", person("outside")));
    let c_dn = format!("uid=c,{SUB}");
    ok(w.add(&c_dn, person("c")));
    let m = expect_entry(c.next(), id, &c_dn, Some((ChangeType::Add, None)));
    assert!(attr(&m, "uid").is_some());

    ok(w.modify(
        &c_dn,
        vec![Mod::Replace("description".into(), set(&["changed"]))],
    ));
    let m = expect_entry(c.next(), id, &c_dn, Some((ChangeType::Modify, None)));
    assert_eq!(attr(&m, "description"), Some(&vec![b"changed".to_vec()]));

    ok(w.modifydn(&c_dn, "uid=d", true, None));
    let d_dn = format!("uid=d,{SUB}");
    expect_entry(
        c.next(),
        id,
        &d_dn,
        Some((ChangeType::ModDn, Some(c_dn.as_str()))),
    );

    // A delete: the entry as it was, to both searches (the delete-only one without ECN).
    ok(w.delete(&d_dn));
    let (a, b) = (c.next(), c.next());
    let (first, second) = match &a {
        Msg::Entry { id: i, .. } if *i == id => (a, b),
        _ => (b, a),
    };
    let m = expect_entry(first, id, &d_dn, Some((ChangeType::Delete, None)));
    assert_eq!(attr(&m, "description"), Some(&vec![b"changed".to_vec()]));
    expect_entry(second, del, &d_dn, None);

    // A change the filter does not match (an organizationalUnit) reaches only the first.
    ok(w.modify(SUB, vec![Mod::Replace("description".into(), set(&["ou"]))]));
    expect_entry(c.next(), id, SUB, Some((ChangeType::Modify, None)));
    assert!(c.sync().is_empty(), "nothing else was sent");
}

#[test]
fn notifications_pass_the_same_access_control_as_a_search() {
    // The default policy: users read everything but other people's userPassword; anonymous
    // clients see nothing.
    let (srv, mut w) = setup(|c| c.access = None);
    ok(w.modify(
        &format!("uid=a,{SUB}"),
        vec![Mod::Replace("userPassword".into(), set(&["pw-a"]))],
    ));
    // Bound as uid=b (after giving it a password), a psearch sees a's changes without a's
    // password; an anonymous psearch is refused the base.
    ok(w.modify(
        &format!("uid=b,{SUB}"),
        vec![Mod::Replace("userPassword".into(), set(&["pw-b"]))],
    ));
    let mut c = Client::over(TcpStream::connect(srv.addr).expect("connect"));
    // Re-bind as b on the same connection.
    let bid = c.send(ProtocolOp::BindRequest(proto::BindRequest {
        version: 3,
        name: Cow::Owned(format!("uid=b,{SUB}").into_bytes()),
        auth: proto::BindAuth::Simple(Cow::Borrowed(b"pw-b")),
    }));
    match c.next() {
        Msg::Other { id, code } => assert_eq!((id, code), (bid, Some(ResultCode::Success))),
        other => panic!("bind response expected, got {other:?}"),
    }
    let id = c.psearch(SUB, "(uid=a)", all(true));
    // Once the WhoAmI after it is answered, the search follows the feed: the change below
    // cannot come before it.
    assert!(c.sync().is_empty());
    ok(w.modify(
        &format!("uid=a,{SUB}"),
        vec![Mod::Replace("description".into(), set(&["x"]))],
    ));
    let m = expect_entry(
        c.next(),
        id,
        &format!("uid=a,{SUB}"),
        Some((ChangeType::Modify, None)),
    );
    assert!(attr(&m, "description").is_some());
    assert!(attr(&m, "userPassword").is_none(), "{m:?}");

    // Anonymous: the base does not exist for them.
    let anon = TcpStream::connect(srv.addr).expect("connect");
    anon.set_read_timeout(Some(WAIT)).expect("timeout");
    let mut a = Client {
        s: anon,
        buf: Vec::new(),
        next_id: 1,
    };
    let id = a.psearch(SUB, "(objectClass=*)", all(true));
    match a.next() {
        Msg::Done { id: i, code, .. } => {
            assert_eq!(i, id);
            assert_eq!(code, ResultCode::NoSuchObject);
        }
        other => panic!("expected noSuchObject, got {other:?}"),
    }
}

#[test]
fn abandon_ends_a_persistent_search_without_a_response() {
    let (srv, mut w) = setup(|_| {});
    let mut c = Client::connect(&srv);
    let id = c.psearch(SUB, "(objectClass=*)", all(true));
    let keep = c.psearch(SUB, "(objectClass=*)", all(true));
    c.send(ProtocolOp::AbandonRequest(id));
    // Once the WhoAmI after it is answered, the Abandon has been acted on.
    assert!(c.sync().is_empty());
    ok(w.add(&format!("uid=e,{SUB}"), person("e")));
    // Only the other search reports the add; the abandoned one sent nothing, not even a
    // SearchResultDone.
    expect_entry(
        c.next(),
        keep,
        &format!("uid=e,{SUB}"),
        Some((ChangeType::Add, None)),
    );
    assert!(c.sync().is_empty(), "the abandoned search sent something");
}

/// Reads until the server closes the connection; every message that came before.
fn until_closed(c: &mut Client) -> Vec<Msg> {
    let mut got = Vec::new();
    loop {
        if let Some(n) = proto::frame(&c.buf, 1 << 30).expect("frame") {
            let m = LdapMessage::decode(&c.buf[..n]).expect("decode");
            got.push(summarize(&m));
            c.buf.drain(..n);
            continue;
        }
        let mut chunk = [0u8; 64 * 1024];
        match c
            .s
            .read(&mut chunk)
            .expect("read (timed out: the connection stayed open)")
        {
            0 => return got,
            n => c.buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[test]
fn unbind_and_close_end_persistent_searches_silently() {
    // The server closes a connection only once every task holding it has ended, so seeing
    // the connection close proves the persistent searches are gone.
    let (srv, _w) = setup(|_| {});
    let mut c = Client::connect(&srv);
    let id = c.psearch(SUB, "(objectClass=*)", all(false));
    c.psearch(SUB, "(objectClass=*)", all(true));
    c.send(ProtocolOp::UnbindRequest);
    let got = until_closed(&mut c);
    assert!(
        got.iter()
            .all(|m| matches!(m, Msg::Entry { id: i, ecn: None, .. } if *i == id)),
        "only initial entries, no SearchResultDone: {got:?}"
    );

    let mut c = Client::connect(&srv);
    c.psearch(SUB, "(objectClass=*)", all(true));
    assert!(c.sync().is_empty());
    c.s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    assert!(until_closed(&mut c).is_empty());
}

#[test]
fn the_per_connection_limit_refuses_with_admin_limit_exceeded() {
    let (srv, mut w) = setup(|c| c.max_persistent_searches = 2);
    let mut c = Client::connect(&srv);
    let first = c.psearch(SUB, "(objectClass=*)", all(true));
    let _second = c.psearch(SUB, "(objectClass=*)", all(true));
    let third = c.psearch(SUB, "(objectClass=*)", all(true));
    match c.next() {
        Msg::Done { id, code, message } => {
            assert_eq!((id, code), (third, ResultCode::AdminLimitExceeded));
            assert!(message.contains("max_persistent_searches"), "{message}");
        }
        other => panic!("expected the third to be refused, got {other:?}"),
    }
    // Another connection has its own allowance, and an abandoned search frees a place.
    let mut other = Client::connect(&srv);
    let o = other.psearch(SUB, "(objectClass=*)", all(true));
    c.send(ProtocolOp::AbandonRequest(first));
    let fourth = c.psearch(SUB, "(objectClass=*)", all(true));
    assert!(c.sync().is_empty(), "the fourth was accepted");
    ok(w.add(&format!("uid=f,{SUB}"), person("f")));
    let mut ids: Vec<i32> = (0..2)
        .map(|_| match c.next() {
            Msg::Entry { id, .. } => id,
            m => panic!("{m:?}"),
        })
        .collect();
    ids.sort();
    assert_eq!(ids, vec![_second, fourth]);
    expect_entry(
        other.next(),
        o,
        &format!("uid=f,{SUB}"),
        Some((ChangeType::Add, None)),
    );
}

#[test]
fn a_client_that_stops_reading_is_cut_off_and_writes_go_on() {
    const QUEUE: usize = 4;
    const BUFFERED: usize = 64 * 1024;
    let (srv, mut w) = setup(|c| {
        c.persistent_search_queue = QUEUE;
        c.max_buffered_bytes = BUFFERED;
    });
    // A small receive buffer on the client (which also stops Linux from growing it), so the
    // bytes that can be in flight are bounded by what the kernel reports.
    let (s, rcvbuf) = small_socket(srv.addr);
    let mut c = Client::over(s);
    let id = c.psearch(&format!("uid=a,{SUB}"), "(objectClass=*)", all(true));
    assert!(c.sync().is_empty());

    // Each change makes a notification of ~VALUE bytes. In flight at most: the client's
    // receive buffer, the server's send buffer (at most tcp_wmem's maximum), the connection's
    // response budget, one write batch of the write task, and the notification being encoded;
    // beyond that the persistent search's queue takes QUEUE batches. Twice as many changes as
    // all of that cannot fit, so the cut-off is certain, with no timing involved.
    const VALUE: usize = 256 * 1024;
    let wmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse::<usize>().ok())
        .unwrap_or(4 << 20);
    let in_flight = rcvbuf + wmem + BUFFERED + 256 * 1024 + 2 * VALUE;
    let writes = 2 * (in_flight / VALUE + QUEUE + 2);
    let big = "x".repeat(VALUE);
    for i in 0..writes {
        // Every write is acknowledged although the persistent search is stuck.
        ok(w.modify(
            &format!("uid=a,{SUB}"),
            vec![Mod::Replace(
                "description".into(),
                set(&[&format!("{i}{big}")]),
            )],
        ));
    }
    // Now read: the notifications queued before the cut, then the end.
    let mut entries = 0;
    let (code, message) = loop {
        match c.next() {
            Msg::Entry { id: i, .. } if i == id => entries += 1,
            Msg::Done {
                id: i,
                code,
                message,
            } if i == id => break (code, message),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(code, ResultCode::AdminLimitExceeded, "{message}");
    assert!(message.contains("search again"), "{message}");
    assert!(entries < writes, "{entries} of {writes}: nothing was cut");
    // The connection is still usable.
    assert!(c.sync().is_empty());
}

/// A connected socket whose receive buffer is set small (before connecting, so the window
/// is negotiated with it), and that buffer's size as the kernel reports it.
fn small_socket(addr: std::net::SocketAddr) -> (TcpStream, usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let s = tokio::net::TcpSocket::new_v4().expect("socket");
        s.set_recv_buffer_size(32 * 1024).expect("SO_RCVBUF");
        let size = s.recv_buffer_size().expect("SO_RCVBUF") as usize;
        let stream = s.connect(addr).await.expect("connect");
        let std = stream.into_std().expect("std");
        std.set_nonblocking(false).expect("blocking");
        (std, size)
    })
}

#[test]
fn openldap_ldapsearch_follows_a_persistent_search() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let (srv, mut w) = setup(|_| {});
    // OpenLDAP's own client: `-E '!ps=15/0/1'` (all change types, initial entries, ECNs),
    // line-buffered (stdbuf) so each record reaches the pipe as it is printed.
    let mut child = Command::new("stdbuf")
        .args([
            "-oL",
            "ldapsearch",
            "-LLL",
            "-o",
            "ldif-wrap=no",
            "-x",
            "-H",
            &srv.url,
        ])
        .args([
            "-D",
            ADMIN_DN,
            "-w",
            ADMIN_PW,
            "-b",
            SUB,
            "-E",
            "!ps=15/0/1",
        ])
        .args(["(objectClass=*)", "uid"])
        .env("LDAPCONF", "/dev/null")
        .env("LDAPRC", "/dev/null")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run ldapsearch ({e}): install ldap-utils (scripts/install-test-deps.sh)")
        });
    // A deadline for a broken server: the child is killed (by its id) and the reads below end.
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    let pid = child.id().to_string();
    let guard = std::thread::spawn(move || {
        if watchdog.recv_timeout(WAIT).is_err() {
            let _ = Command::new("kill").arg(&pid).status();
        }
    });
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    // ldapsearch ends a record only when it prints the next one (and with -LLL shows the ECN as
    // a comment, "# persistentSearch: add"), so read line by line: until
    // a line equal to `want`, returning the lines before it.
    let mut until = |want: &str| -> Vec<String> {
        let mut seen = Vec::new();
        for l in lines.by_ref() {
            let l = l.expect("ldapsearch output");
            if l == want {
                return seen;
            }
            seen.push(l);
        }
        panic!("ldapsearch ended before {want:?}; it printed {seen:?}");
    };
    // The initial entries prove the search is registered before the first change.
    until(&format!("dn: {SUB}"));
    until("dn: uid=a,ou=ps,dc=example,dc=com");
    until("dn: uid=b,ou=ps,dc=example,dc=com");
    let g_dn = format!("uid=g,{SUB}");
    ok(w.add(&g_dn, person("g")));
    until(&format!("dn: {g_dn}"));
    until("# persistentSearch: add");
    ok(w.modifydn(&g_dn, "uid=h", true, None));
    until(&format!("dn: uid=h,{SUB}"));
    let moddn = until("uid: h");
    assert!(
        moddn
            .iter()
            .any(|l| l.starts_with("# persistentSearch: moddn")),
        "{moddn:?}"
    );
    ok(w.delete(&format!("uid=h,{SUB}")));
    until(&format!("dn: uid=h,{SUB}"));
    until("# persistentSearch: delete");
    let _ = done.send(());
    let _ = guard.join();
    let _ = child.kill();
    let _ = child.wait();
}
