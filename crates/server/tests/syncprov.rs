//! The replication provider (RFC 4533) over a real socket: full and incremental refreshOnly,
//! refreshAndPersist with live changes, the session log too old for a cookie, a consumer that
//! stops reading ended with e-syncRefreshRequired, contextCSN on the suffix entry, and the root
//! DSE advertising the Sync Request control only when the provider is on. The consumer is raw
//! PDUs built with `proto`; changes are made with ldap3 on other connections. No sleeps: a
//! change is queued for every sync search before its write is acknowledged, so after the ack
//! its message is on its way; reads have a deadline only so a broken server fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{TestServer, ADMIN_DN, ADMIN_PW, BASE};
use ldap3::{LdapConn, Mod, Scope};
use proto::controls::sync::{Mode, State, SyncCookie, SyncDone, SyncInfo, SyncRequest, SyncState};
use proto::{Control, LdapMessage, ProtocolOp, ResultCode};

const WAIT: Duration = Duration::from_secs(20);
const SUB: &str = "ou=sync,dc=example,dc=com";

#[derive(Debug)]
enum Msg {
    Entry {
        dn: String,
        attrs: Vec<(String, Vec<Vec<u8>>)>,
        state: State,
        uuid: [u8; 16],
        cookie: Option<Vec<u8>>,
    },
    Info(SyncInfo<'static>),
    Done {
        code: ResultCode,
        message: String,
        /// (cookie, refreshDeletes) of the Sync Done control.
        done: Option<(Option<Vec<u8>>, bool)>,
    },
    Other {
        id: i32,
        code: Option<ResultCode>,
    },
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
        let id = c.send(
            ProtocolOp::BindRequest(proto::BindRequest {
                version: 3,
                name: Cow::Borrowed(ADMIN_DN.as_bytes()),
                auth: proto::BindAuth::Simple(Cow::Borrowed(ADMIN_PW.as_bytes())),
            }),
            Vec::new(),
        );
        match c.next() {
            Msg::Other { id: i, code } => assert_eq!((i, code), (id, Some(ResultCode::Success))),
            other => panic!("bind response expected, got {other:?}"),
        }
        c
    }

    fn send(&mut self, op: ProtocolOp<'_>, controls: Vec<Control<'_>>) -> i32 {
        let id = self.next_id;
        self.next_id += 1;
        let m = LdapMessage { id, op, controls };
        self.s.write_all(&m.to_vec()).expect("write");
        id
    }

    /// A sync search of `SUB` (subtree, every user attribute and entryUUID).
    fn sync(&mut self, mode: Mode, cookie: Option<&[u8]>) -> i32 {
        let mut value = Vec::new();
        SyncRequest {
            mode,
            cookie: cookie.map(Cow::Borrowed),
            reload_hint: false,
        }
        .encode(&mut value);
        self.send(
            ProtocolOp::SearchRequest(proto::SearchRequest {
                base: Cow::Borrowed(SUB.as_bytes()),
                scope: proto::Scope::Subtree,
                deref: proto::DerefAliases::Never,
                size_limit: 0,
                time_limit: 0,
                types_only: false,
                filter: proto::Filter::parse("(objectClass=*)").expect("filter"),
                attributes: vec![Cow::Borrowed(b"*"), Cow::Borrowed(b"entryUUID")],
            }),
            vec![Control {
                oid: Cow::Borrowed(proto::oids::SYNC_REQUEST.as_bytes()),
                critical: true,
                value: Some(Cow::Owned(value)),
            }],
        )
    }

    fn next(&mut self) -> Msg {
        loop {
            if let Some(n) = proto::frame(&self.buf, 1 << 30).expect("frame") {
                let m = LdapMessage::decode(&self.buf[..n]).expect("decode");
                let msg = summarize(&m);
                self.buf.drain(..n);
                return msg;
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.s.read(&mut chunk).expect("read (timed out?)");
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Every message up to and including the SearchResultDone.
    fn until_done(&mut self) -> Vec<Msg> {
        let mut out = Vec::new();
        loop {
            let m = self.next();
            let done = matches!(m, Msg::Done { .. });
            out.push(m);
            if done {
                return out;
            }
        }
    }

    /// Every message up to and including the Sync Info that ends the refresh phase.
    fn until_refreshed(&mut self) -> Vec<Msg> {
        let mut out = Vec::new();
        loop {
            let m = self.next();
            let end = matches!(
                m,
                Msg::Info(SyncInfo::RefreshPresent { .. } | SyncInfo::RefreshDelete { .. })
            );
            assert!(!matches!(m, Msg::Done { .. }), "search ended: {m:?}");
            out.push(m);
            if end {
                return out;
            }
        }
    }
}

fn summarize(m: &LdapMessage<'_>) -> Msg {
    match &m.op {
        ProtocolOp::SearchResultEntry { dn, attributes } => {
            let c = m
                .controls
                .iter()
                .find(|c| &*c.oid == proto::oids::SYNC_STATE.as_bytes())
                .expect("every entry of a sync search has a Sync State control");
            let st = SyncState::decode(c.value.as_deref().expect("value")).expect("decodes");
            Msg::Entry {
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
                state: st.state,
                uuid: st.entry_uuid,
                cookie: st.cookie.map(|c| c.into_owned()),
            }
        }
        ProtocolOp::IntermediateResponse {
            oid: Some(oid),
            value: Some(v),
        } if &oid[..] == proto::oids::SYNC_INFO.as_bytes() => {
            let info = SyncInfo::decode(v).expect("sync info decodes");
            Msg::Info(match info {
                SyncInfo::NewCookie(c) => SyncInfo::NewCookie(Cow::Owned(c.into_owned())),
                SyncInfo::RefreshDelete {
                    cookie,
                    refresh_done,
                } => SyncInfo::RefreshDelete {
                    cookie: cookie.map(|c| Cow::Owned(c.into_owned())),
                    refresh_done,
                },
                SyncInfo::RefreshPresent {
                    cookie,
                    refresh_done,
                } => SyncInfo::RefreshPresent {
                    cookie: cookie.map(|c| Cow::Owned(c.into_owned())),
                    refresh_done,
                },
                SyncInfo::SyncIdSet {
                    cookie,
                    refresh_deletes,
                    uuids,
                } => SyncInfo::SyncIdSet {
                    cookie: cookie.map(|c| Cow::Owned(c.into_owned())),
                    refresh_deletes,
                    uuids,
                },
            })
        }
        ProtocolOp::SearchResultDone(r) => Msg::Done {
            code: r.code,
            message: String::from_utf8_lossy(&r.message).into_owned(),
            done: m
                .controls
                .iter()
                .find(|c| &*c.oid == proto::oids::SYNC_DONE.as_bytes())
                .map(|c| {
                    let d = SyncDone::decode(c.value.as_deref().expect("value")).expect("decodes");
                    (d.cookie.map(|c| c.into_owned()), d.refresh_deletes)
                }),
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

fn ou(w: &mut LdapConn, dn: &str, name: &str) {
    ok(w.add(
        dn,
        vec![
            ("objectClass".to_string(), set(&["organizationalUnit"])),
            ("ou".to_string(), set(&[name])),
        ],
    ));
}

/// A provider with `ou=sync` holding `n` people, and `ou=elsewhere` outside it.
fn setup(n: usize, tweak: impl FnOnce(&mut server::Config)) -> (TestServer, LdapConn) {
    let srv = TestServer::start_with(|c| {
        c.syncprov = true;
        c.server_id = 1;
        tweak(c)
    });
    let mut w = srv.admin();
    ou(&mut w, SUB, "sync");
    ou(&mut w, &format!("ou=elsewhere,{BASE}"), "elsewhere");
    for i in 0..n {
        ok(w.add(&format!("uid=u{i},{SUB}"), person(&format!("u{i}"))));
    }
    (srv, w)
}

/// The entryUUID of every entry under `SUB`, by DN (lower case).
fn uuids(w: &mut LdapConn) -> HashMap<String, [u8; 16]> {
    let (rc, _, es) = common::search(w, SUB, Scope::Subtree, "(objectClass=*)", &["entryUUID"]);
    assert_eq!(rc, 0);
    es.into_iter()
        .map(|e| {
            let u = e.attrs["entryUUID"][0].replace('-', "");
            let mut b = [0u8; 16];
            for (i, x) in b.iter_mut().enumerate() {
                *x = u8::from_str_radix(&u[2 * i..2 * i + 2], 16).expect("hex");
            }
            (e.dn.to_lowercase(), b)
        })
        .collect()
}

fn context_csn(w: &mut LdapConn) -> Vec<String> {
    let (rc, _, es) = common::search(w, BASE, Scope::Base, "(objectClass=*)", &["contextCSN"]);
    assert_eq!(rc, 0);
    es[0].attrs.get("contextCSN").cloned().unwrap_or_default()
}

/// (state, DN) of the entries, and the uuids of syncIdSets with refreshDeletes.
fn content(msgs: &[Msg]) -> (Vec<(State, String)>, Vec<[u8; 16]>) {
    let mut entries = Vec::new();
    let mut deleted = Vec::new();
    for m in msgs {
        match m {
            Msg::Entry { state, dn, .. } => entries.push((*state, dn.to_lowercase())),
            Msg::Info(SyncInfo::SyncIdSet {
                refresh_deletes: true,
                uuids,
                ..
            }) => deleted.extend(uuids.iter().copied()),
            _ => {}
        }
    }
    entries.sort_by(|a, b| a.1.cmp(&b.1));
    (entries, deleted)
}

fn done(msgs: &[Msg]) -> (Vec<u8>, bool) {
    match msgs.last() {
        Some(Msg::Done {
            code: ResultCode::Success,
            done: Some((Some(cookie), deletes)),
            ..
        }) => (cookie.clone(), *deletes),
        other => panic!("expected a successful end with a Sync Done cookie, got {other:?}"),
    }
}

#[test]
fn refresh_only_sends_everything_with_uuids_and_a_cookie_of_the_context_csn() {
    let (srv, mut w) = setup(3, |_| {});
    let mut c = Client::connect(&srv);
    c.sync(Mode::RefreshOnly, Some(b"rid=042"));
    let msgs = c.until_done();
    let (entries, deleted) = content(&msgs);
    assert!(deleted.is_empty());
    let dns: Vec<&str> = entries.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(
        dns,
        [
            SUB,
            "uid=u0,ou=sync,dc=example,dc=com",
            "uid=u1,ou=sync,dc=example,dc=com",
            "uid=u2,ou=sync,dc=example,dc=com"
        ]
    );
    assert!(entries.iter().all(|(s, _)| *s == State::Add));
    // Each entry's Sync State names its entryUUID.
    let want = uuids(&mut w);
    for m in &msgs {
        if let Msg::Entry { dn, uuid, .. } = m {
            assert_eq!(want[&dn.to_lowercase()], *uuid, "{dn}");
        }
    }
    // A full refresh is a present phase; the cookie echoes the rid and carries the server
    // id and the contextCSN the suffix entry shows.
    let (cookie, deletes) = done(&msgs);
    assert!(!deletes);
    let parsed = SyncCookie::parse(&cookie).expect("cookie parses");
    assert_eq!((parsed.rid, parsed.sid), (Some(42), Some(1)));
    let ctx = context_csn(&mut w);
    assert_eq!(ctx.len(), 1, "{ctx:?}");
    assert_eq!(parsed.csns, ctx);
    assert!(ctx[0].contains("#001#"), "{ctx:?}");
    // The Root DSE lists the control.
    let (_, _, root) = common::search(
        &mut w,
        "",
        Scope::Base,
        "(objectClass=*)",
        &["supportedControl"],
    );
    assert!(root[0].attrs["supportedControl"].contains(&proto::oids::SYNC_REQUEST.to_string()));
}

#[test]
fn refresh_with_a_cookie_sends_only_what_changed() {
    let (srv, mut w) = setup(4, |_| {});
    let mut c = Client::connect(&srv);
    c.sync(Mode::RefreshOnly, Some(b"rid=001"));
    let (cookie, _) = done(&c.until_done());
    let before = uuids(&mut w);

    // An add, a modify, a delete, a rename in place, a move out of the scope, a move in.
    ok(w.add(&format!("uid=new,{SUB}"), person("new")));
    ok(w.modify(
        &format!("uid=u0,{SUB}"),
        vec![Mod::Replace("sn".into(), set(&["Changed"]))],
    ));
    ok(w.delete(&format!("uid=u1,{SUB}")));
    ok(w.modifydn(&format!("uid=u2,{SUB}"), "uid=u2b", true, None));
    ok(w.modifydn(
        &format!("uid=u3,{SUB}"),
        "uid=u3",
        true,
        Some(&format!("ou=elsewhere,{BASE}")),
    ));
    ok(w.add(&format!("uid=x,ou=elsewhere,{BASE}"), person("x")));
    ok(w.modifydn(
        &format!("uid=x,ou=elsewhere,{BASE}"),
        "uid=x",
        true,
        Some(SUB),
    ));
    // A change outside the scope only: not sent.
    ok(w.add(&format!("uid=y,ou=elsewhere,{BASE}"), person("y")));

    c.sync(Mode::RefreshOnly, Some(&cookie));
    let msgs = c.until_done();
    let (entries, deleted) = content(&msgs);
    assert_eq!(
        entries,
        [
            (State::Add, "uid=new,ou=sync,dc=example,dc=com".to_string()),
            (State::Add, "uid=u0,ou=sync,dc=example,dc=com".to_string()),
            (State::Add, "uid=u2b,ou=sync,dc=example,dc=com".to_string()),
            (State::Add, "uid=x,ou=sync,dc=example,dc=com".to_string()),
        ]
    );
    let gone: HashSet<[u8; 16]> = deleted.into_iter().collect();
    let u1 = before["uid=u1,ou=sync,dc=example,dc=com"];
    let u3 = before["uid=u3,ou=sync,dc=example,dc=com"];
    assert!(gone.contains(&u1) && gone.contains(&u3), "{gone:?}");
    // The entries sent carry their new contents.
    let u0 = msgs
        .iter()
        .find_map(|m| match m {
            Msg::Entry { dn, attrs, .. } if dn.starts_with("uid=u0") => Some(attrs),
            _ => None,
        })
        .expect("u0");
    assert!(u0
        .iter()
        .any(|(n, v)| n == "sn" && v == &[b"Changed".to_vec()]));
    // A delete phase: the consumer keeps what it was not told about.
    let (cookie2, deletes) = done(&msgs);
    assert!(deletes);
    assert_ne!(cookie2, cookie);
    assert_eq!(
        SyncCookie::parse(&cookie2).unwrap().csns,
        context_csn(&mut w)
    );

    // Up to date: nothing but the end.
    c.sync(Mode::RefreshOnly, Some(&cookie2));
    let msgs = c.until_done();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(done(&msgs), (cookie2, true));
}

/// A cookie older than the session log is served from the directory itself: the entries
/// changed after it (their entryCSN) and the deletes after it (the tombstones), as a delete
/// phase. Once a tombstone it may need was forgotten (`syncprov_tombstones`), it gets a full
/// refresh (a present phase: the consumer removes what it was not sent).
#[test]
fn a_cookie_older_than_the_session_log_is_served_from_the_tombstones_or_in_full() {
    let (srv, mut w) = setup(3, |c| {
        c.syncprov_sessionlog = 2;
        c.syncprov_tombstones = 1;
    });
    let ids = uuids(&mut w);
    let mut c = Client::connect(&srv);
    c.sync(Mode::RefreshOnly, None);
    let (cookie, _) = done(&c.until_done());
    for i in 0..3 {
        ok(w.modify(
            &format!("uid=u{i},{SUB}"),
            vec![Mod::Replace("sn".into(), set(&["Changed"]))],
        ));
    }
    ok(w.delete(&format!("uid=u2,{SUB}")));
    c.sync(Mode::RefreshOnly, Some(&cookie));
    let msgs = c.until_done();
    let (entries, deleted) = content(&msgs);
    assert_eq!(
        entries.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(),
        [format!("uid=u0,{SUB}"), format!("uid=u1,{SUB}")],
        "{msgs:?}"
    );
    assert_eq!(deleted, [ids[&format!("uid=u2,{SUB}")]]);
    let (after_u2, deletes) = done(&msgs);
    assert!(deletes, "a delete phase");
    // A second delete: the tombstone of u2 is forgotten (one is kept).
    ok(w.delete(&format!("uid=u1,{SUB}")));
    c.sync(Mode::RefreshOnly, Some(&cookie));
    let msgs = c.until_done();
    let (entries, deleted) = content(&msgs);
    // Every entry in scope, as a present phase (refreshDeletes FALSE).
    assert_eq!(entries.len(), 2, "ou=sync and u0: {entries:?}");
    assert!(deleted.is_empty());
    assert!(!done(&msgs).1);
    // A cookie taken after the forgotten delete is still served from the tombstone kept.
    c.sync(Mode::RefreshOnly, Some(&after_u2));
    let msgs = c.until_done();
    let (entries, deleted) = content(&msgs);
    assert!(entries.is_empty(), "{entries:?}");
    assert_eq!(deleted, [ids[&format!("uid=u1,{SUB}")]]);
    assert!(done(&msgs).1);
    // A log that holds the changes still serves a cookie incrementally.
    let (cookie, _) = done(&msgs);
    ok(w.modify(
        &format!("uid=u0,{SUB}"),
        vec![Mod::Replace("sn".into(), set(&["Again"]))],
    ));
    c.sync(Mode::RefreshOnly, Some(&cookie));
    let msgs = c.until_done();
    assert_eq!(content(&msgs).0.len(), 1, "{msgs:?}");
    assert!(done(&msgs).1);
}

#[test]
fn refresh_and_persist_follows_live_changes() {
    let (srv, mut w) = setup(2, |_| {});
    let mut c = Client::connect(&srv);
    let id = c.sync(Mode::RefreshAndPersist, Some(b"rid=007"));
    let refresh = c.until_refreshed();
    assert_eq!(content(&refresh).0.len(), 3);
    let Some(Msg::Info(SyncInfo::RefreshPresent {
        cookie: Some(cookie),
        refresh_done: true,
    })) = refresh.last()
    else {
        panic!("{refresh:?}");
    };
    let mut last_cookie = cookie.to_vec();
    let ids = uuids(&mut w);
    let mut expect = |c: &mut Client, st: State, dn: &str| -> Msg {
        let m = c.next();
        match &m {
            Msg::Entry {
                state,
                dn: d,
                cookie,
                ..
            } => {
                assert_eq!((*state, d.to_lowercase()), (st, dn.to_lowercase()), "{m:?}");
                let ck = cookie
                    .clone()
                    .expect("the last message of a batch has the cookie");
                assert!(ck > last_cookie, "cookies move forward");
                assert_eq!(SyncCookie::parse(&ck).unwrap().rid, Some(7));
                last_cookie = ck;
            }
            other => panic!("expected {st:?} {dn}, got {other:?}"),
        }
        m
    };
    ok(w.add(&format!("uid=n,{SUB}"), person("n")));
    expect(&mut c, State::Add, &format!("uid=n,{SUB}"));
    ok(w.modify(
        &format!("uid=u0,{SUB}"),
        vec![Mod::Replace("sn".into(), set(&["Live"]))],
    ));
    let m = expect(&mut c, State::Modify, &format!("uid=u0,{SUB}"));
    match m {
        Msg::Entry { attrs, uuid, .. } => {
            assert_eq!(uuid, ids[&format!("uid=u0,{SUB}")]);
            assert!(attrs
                .iter()
                .any(|(n, v)| n == "sn" && v == &[b"Live".to_vec()]));
        }
        _ => unreachable!(),
    }
    ok(w.modifydn(&format!("uid=u1,{SUB}"), "uid=u1r", true, None));
    expect(&mut c, State::Modify, &format!("uid=u1r,{SUB}"));
    // Moved out of the scope: a delete with the DN it had.
    ok(w.modifydn(
        &format!("uid=u1r,{SUB}"),
        "uid=u1r",
        true,
        Some(&format!("ou=elsewhere,{BASE}")),
    ));
    expect(&mut c, State::Delete, &format!("uid=u1r,{SUB}"));
    ok(w.delete(&format!("uid=n,{SUB}")));
    let m = expect(&mut c, State::Delete, &format!("uid=n,{SUB}"));
    assert!(matches!(m, Msg::Entry { ref attrs, .. } if attrs.is_empty()));
    // Changes outside the scope send nothing; the next in scope comes right after.
    ok(w.add(&format!("uid=z,ou=elsewhere,{BASE}"), person("z")));
    ok(w.add(&format!("uid=m,{SUB}"), person("m")));
    expect(&mut c, State::Add, &format!("uid=m,{SUB}"));

    // Abandon ends it silently; a refresh with the last cookie is up to date.
    c.send(ProtocolOp::AbandonRequest(id), Vec::new());
    c.sync(Mode::RefreshOnly, Some(&last_cookie));
    let msgs = c.until_done();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(done(&msgs).1);
}

#[test]
fn a_persisting_consumer_with_an_up_to_date_cookie_gets_a_delete_phase_end() {
    let (srv, _w) = setup(1, |_| {});
    let mut c = Client::connect(&srv);
    c.sync(Mode::RefreshOnly, None);
    let (cookie, _) = done(&c.until_done());
    c.sync(Mode::RefreshAndPersist, Some(&cookie));
    let msgs = c.until_refreshed();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(matches!(
        &msgs[0],
        Msg::Info(SyncInfo::RefreshDelete {
            refresh_done: true,
            cookie: Some(_)
        })
    ));
}

#[test]
fn a_consumer_that_stops_reading_is_told_to_refresh_and_writes_go_on() {
    const QUEUE: usize = 4;
    const BUFFERED: usize = 64 * 1024;
    let (srv, mut w) = setup(1, |c| {
        c.syncprov_queue = QUEUE;
        c.max_buffered_bytes = BUFFERED;
    });
    let (s, rcvbuf) = small_socket(srv.addr);
    let mut c = Client::over(s);
    c.sync(Mode::RefreshAndPersist, None);
    c.until_refreshed();
    // As in the persistent search test: more bytes than the client's receive buffer, the
    // server's send buffer, the connection's budget and the queue can hold, so the cut-off
    // is certain without timing.
    const VALUE: usize = 256 * 1024;
    let wmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse::<usize>().ok())
        .unwrap_or(4 << 20);
    let in_flight = rcvbuf + wmem + BUFFERED + 256 * 1024 + 2 * VALUE;
    let writes = 2 * (in_flight / VALUE + QUEUE + 2);
    let big = "x".repeat(VALUE);
    for i in 0..writes {
        ok(w.modify(
            &format!("uid=u0,{SUB}"),
            vec![Mod::Replace(
                "description".into(),
                set(&[&format!("{i}{big}")]),
            )],
        ));
    }
    let mut entries = 0;
    let (code, message) = loop {
        match c.next() {
            Msg::Entry { .. } => entries += 1,
            Msg::Done { code, message, .. } => break (code, message),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(code, ResultCode::SyncRefreshRequired, "{message}");
    assert!(entries < writes, "{entries} of {writes}: nothing was cut");
}

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
fn without_the_provider_the_control_is_neither_advertised_nor_served() {
    let srv = TestServer::start(false);
    let mut w = srv.admin();
    let (_, _, root) = common::search(
        &mut w,
        "",
        Scope::Base,
        "(objectClass=*)",
        &["supportedControl"],
    );
    assert!(!root[0].attrs["supportedControl"].contains(&proto::oids::SYNC_REQUEST.to_string()));
    ou(&mut w, SUB, "sync");
    // No contextCSN is kept.
    assert!(context_csn(&mut w).is_empty());
    let mut c = Client::connect(&srv);
    c.sync(Mode::RefreshOnly, None);
    match c.next() {
        Msg::Done { code, .. } => assert_eq!(code, ResultCode::UnavailableCriticalExtension),
        other => panic!("{other:?}"),
    }
}

/// contextCSN and the tombstones are kept with the data: after a restart (the session log
/// empty) a cookie from before is served incrementally from the entries and tombstones, the
/// delete made before the restart included.
#[test]
fn context_csn_and_tombstones_survive_a_restart() {
    let data = tempfile::tempdir().expect("data directory");
    let dir = data.path().to_path_buf();
    let (ctx, cookie, u1) = {
        let d = dir.clone();
        let (srv, mut w) = setup(2, move |c| c.data_dir = d);
        let u1 = uuids(&mut w)[&format!("uid=u1,{SUB}")];
        let mut c = Client::connect(&srv);
        c.sync(Mode::RefreshOnly, None);
        let (cookie, _) = done(&c.until_done());
        ok(w.modify(
            &format!("uid=u0,{SUB}"),
            vec![Mod::Replace("sn".into(), set(&["Before restart"]))],
        ));
        ok(w.delete(&format!("uid=u1,{SUB}")));
        (context_csn(&mut w), cookie, u1)
    };
    let d = dir.clone();
    let srv = TestServer::start_with(move |c| {
        c.syncprov = true;
        c.server_id = 1;
        c.data_dir = d;
    });
    let mut w = srv.admin();
    assert_eq!(context_csn(&mut w), ctx);
    let mut c = Client::connect(&srv);
    c.sync(Mode::RefreshOnly, Some(&cookie));
    let msgs = c.until_done();
    let (entries, deleted) = content(&msgs);
    assert_eq!(entries, [(State::Add, format!("uid=u0,{SUB}"))], "{msgs:?}");
    assert_eq!(deleted, [u1]);
    let (now, deletes) = done(&msgs);
    assert!(deletes);
    assert_eq!(SyncCookie::parse(&now).unwrap().csns, ctx);
    c.sync(Mode::RefreshOnly, Some(&now));
    let msgs = c.until_done();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(done(&msgs).1);
}

/// Data kept before tombstones were (here: a server that never deleted anything and was
/// restarted) gets a floor at its contextCSN at start: a cookie from before it may miss
/// deletes that left no trace, so it gets a full refresh.
#[test]
fn cookies_from_before_the_tombstones_get_a_full_refresh() {
    let data = tempfile::tempdir().expect("data directory");
    let dir = data.path().to_path_buf();
    let d = dir.clone();
    // Written without the provider: no contextCSN, no tombstones.
    let (srv, mut w) = setup(2, move |c| {
        c.data_dir = d;
        c.syncprov = false;
    });
    drop(w.unbind());
    drop(srv);
    let d = dir.clone();
    let srv = TestServer::start_with(move |c| {
        c.syncprov = true;
        c.server_id = 1;
        c.data_dir = d;
    });
    let mut w = srv.admin();
    let ctx = context_csn(&mut w);
    assert!(!ctx.is_empty(), "given at start from the entries");
    // A cookie older than that, as a consumer of an earlier provider would hold.
    let old = "rid=001,csn=20000101000000.000000Z#000000#001#000000";
    let mut c = Client::connect(&srv);
    c.sync(Mode::RefreshOnly, Some(old.as_bytes()));
    let msgs = c.until_done();
    assert_eq!(content(&msgs).0.len(), 3, "{msgs:?}");
    assert!(!done(&msgs).1, "a present phase");
}

#[test]
fn persistent_searches_do_not_see_the_context_csn_upkeep() {
    use proto::controls::psearch::PersistentSearch;
    let (srv, mut w) = setup(0, |_| {});
    let mut c = Client::connect(&srv);
    let mut value = Vec::new();
    PersistentSearch {
        change_types: 15,
        changes_only: true,
        return_ecs: false,
    }
    .encode(&mut value);
    c.send(
        ProtocolOp::SearchRequest(proto::SearchRequest {
            base: Cow::Borrowed(BASE.as_bytes()),
            scope: proto::Scope::Subtree,
            deref: proto::DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: proto::Filter::parse("(objectClass=*)").expect("filter"),
            attributes: Vec::new(),
        }),
        vec![Control {
            oid: Cow::Borrowed(proto::oids::PERSISTENT_SEARCH.as_bytes()),
            critical: true,
            value: Some(Cow::Owned(value)),
        }],
    );
    // Each add also raises the suffix entry's contextCSN; only the adds are notified.
    for uid in ["p1", "p2"] {
        ok(w.add(&format!("uid={uid},{SUB}"), person(uid)));
        let dn = format!("uid={uid},{SUB}");
        let raw: Vec<u8> = loop {
            if let Some(n) = proto::frame(&c.buf, 1 << 30).expect("frame") {
                break c.buf.drain(..n).collect();
            }
            let mut chunk = [0u8; 4096];
            let n = c.s.read(&mut chunk).expect("read");
            assert!(n > 0);
            c.buf.extend_from_slice(&chunk[..n]);
        };
        let m = LdapMessage::decode(&raw).expect("decode");
        match m.op {
            ProtocolOp::SearchResultEntry { dn: d, .. } => {
                assert_eq!(String::from_utf8_lossy(&d).to_lowercase(), dn)
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_directory_served_before_without_the_provider_gets_its_context_csn_at_start() {
    let data = tempfile::tempdir().expect("data directory");
    let dir = data.path().to_path_buf();
    let newest = {
        let d = dir.clone();
        let srv = TestServer::start_with(move |c| c.data_dir = d);
        let mut w = srv.admin();
        ou(&mut w, SUB, "sync");
        ok(w.add(&format!("uid=a,{SUB}"), person("a")));
        assert!(context_csn(&mut w).is_empty());
        let (_, _, es) = common::search(
            &mut w,
            BASE,
            Scope::Subtree,
            "(objectClass=*)",
            &["entryCSN"],
        );
        es.iter()
            .filter_map(|e| e.attrs.get("entryCSN").map(|v| v[0].clone()))
            .max()
            .expect("entryCSN")
    };
    let d = dir.clone();
    let srv = TestServer::start_with(move |c| {
        c.syncprov = true;
        c.data_dir = d;
    });
    let mut w = srv.admin();
    // A sync search waits for the provider's start (the session log), which sets it first.
    let mut c = Client::connect(&srv);
    c.sync(Mode::RefreshOnly, None);
    c.until_done();
    assert_eq!(context_csn(&mut w), [newest]);
}
