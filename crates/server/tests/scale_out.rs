//! Scale-out reads (issue 18, design.md "Beyond one machine"): a provider and two read
//! replicas (Linden, `[[syncrepl]]`); clients read from the replicas while a writer changes the
//! provider, and the replicas follow the writes.
//!
//! - `reads_spread_over_two_replicas_follow_writes_to_the_provider` always runs: the test
//!   itself spreads the readers' connections over the replicas, as a balancer would.
//! - `reads_through_lloadd_reach_both_replicas` does the same through OpenLDAP's load balancer
//!   `lloadd`, and `users_through_lloadd_keep_their_identity` checks lloadd's
//!   `feature proxyauthz` (simple and SASL PLAIN binds, anonymous) against the replicas. They
//!   need lloadd's standalone daemon: `LLOADD`, or `lloadd` on PATH, in /usr/sbin or
//!   /usr/local/libexec. No Debian package ships it (Debian 12's slapd 2.5.13 has neither the
//!   daemon nor the `lloadd.la` module); it is built from OpenLDAP's source
//!   (docs/replication.md, "Behind OpenLDAP's load balancer"). They are ignored unless run
//!   with `LINDEN_TEST_LLOADD=1 cargo test -p server --test scale_out -- --ignored`, which
//!   scripts/test.sh does where it finds lloadd; opted in, a missing lloadd is a failure.
//!
//! Bounded: fixed counts of reads and writes, every wait a bounded poll.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use server::state::OpType;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::raw::RawClient;
use common::{TestServer, ADMIN_DN, ADMIN_PW, BASE};
use ldap3::exop::WhoAmI;
use ldap3::{LdapConn, LdapConnSettings, Mod, Scope, SearchEntry};

const ALICE: &str = "uid=alice,ou=people,dc=example,dc=com";
const WRITES: usize = 100;
const READS_PER_CONN: usize = 150;
/// busy: what lloadd answers when none of its connections to the backends can take an
/// operation now (a bind needs a bind connection to itself; see `unless_busy`).
const BUSY: u32 = 51;

fn provider() -> TestServer {
    TestServer::start_with(|c| {
        c.demo = true;
        c.syncprov = true;
        c.server_id = 1;
    })
}

fn replica(provider: &TestServer) -> TestServer {
    let url = provider.url.clone();
    TestServer::start_with(move |c| {
        c.syncrepl = vec![common::consumer_spec(&url)];
        c.updateref = vec![url];
    })
}

/// Runs `op` until its result code is not busy (bounded), and returns that code and what
/// `op` gave with it: a client of lloadd gets busy while lloadd's connections to the
/// backends are all taken or not yet open, and tries again. Linden never answers busy to these
/// tests' binds, searches and Who am I?, so on a direct connection this runs `op` once.
fn unless_busy<T>(what: &str, mut op: impl FnMut() -> (u32, T)) -> (u32, T) {
    for _ in 0..400 {
        let (rc, out) = op();
        if rc != BUSY {
            return (rc, out);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{what}: still busy after 400 tries");
}

/// A connection to `url` bound as `dn`.
fn bind(url: &str, dn: &str, pw: &str) -> LdapConn {
    let s = LdapConnSettings::new().set_conn_timeout(Duration::from_secs(10));
    let mut c = LdapConn::with_settings(s, url).unwrap();
    c.with_timeout(Duration::from_secs(10));
    let what = format!("bind as {dn} on {url}");
    let (rc, r) = unless_busy(&what, || {
        let r = c.simple_bind(dn, pw).unwrap();
        (r.rc, r)
    });
    assert_eq!(rc, 0, "{what}: {r:?}");
    c
}

fn connect(url: &str) -> LdapConn {
    bind(url, ADMIN_DN, ADMIN_PW)
}

fn search(c: &mut LdapConn, base: &str, filter: &str, attrs: &[&str]) -> Vec<SearchEntry> {
    let what = format!("search {base} {filter}");
    let (rc, entries) = unless_busy(&what, || {
        let (rc, _, entries) = common::search(c, base, Scope::Subtree, filter, attrs);
        (rc, entries)
    });
    assert_eq!(rc, 0, "{what}");
    entries
}

/// alice's description on the server at `url` (`v<N>` once written).
fn description(c: &mut LdapConn) -> Option<String> {
    let e = search(c, ALICE, "(objectClass=*)", &["description"]);
    e.into_iter()
        .next()?
        .attrs
        .get("description")?
        .first()
        .cloned()
}

fn version(d: &Option<String>) -> i64 {
    d.as_deref()
        .and_then(|v| v.strip_prefix('v'))
        .and_then(|n| n.parse().ok())
        .unwrap_or(-1)
}

/// Polls (bounded) until the server at `url` shows the last write.
fn follows(url: &str) {
    let want = Some(format!("v{}", WRITES - 1));
    let mut c = connect(url);
    for _ in 0..400 {
        if description(&mut c) == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{url} did not follow the writes: {:?}", description(&mut c));
}

/// Polls (bounded) until every replica has refreshed and persists.
fn persisting(replicas: &[&TestServer]) {
    for r in replicas {
        for _ in 0..400 {
            if r.server.replication()[0].state() == repl::consumer::Phase::Persisting {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        assert_eq!(
            r.server.replication()[0].state(),
            repl::consumer::Phase::Persisting,
            "{}",
            r.server.replication()[0].last_error()
        );
    }
}

fn searches(s: &TestServer) -> u64 {
    s.server
        .counters()
        .initiated(OpType::Search)
        .load(Ordering::Relaxed)
}

/// Provider and replicas up and in step; then `WRITES` modifies of alice on the provider
/// while readers (one thread per URL of `fronts`) search alice `READS_PER_CONN` times each;
/// then every replica shows the last write. Returns each replica's searches served during the
/// reads.
fn scale_out(
    p: &TestServer,
    replicas: &[&TestServer],
    fronts: &[String],
    monotonic: bool,
) -> Vec<u64> {
    persisting(replicas);
    let before: Vec<u64> = replicas.iter().map(|r| searches(r)).collect();
    let writer = {
        let url = p.url.clone();
        std::thread::spawn(move || {
            let mut w = connect(&url);
            for i in 0..WRITES {
                let v = format!("v{i}");
                w.modify(
                    ALICE,
                    vec![Mod::Replace("description", [v.as_str()].into())],
                )
                .unwrap()
                .success()
                .unwrap();
            }
        })
    };
    let readers: Vec<_> = fronts
        .iter()
        .cloned()
        .map(|url| {
            std::thread::spawn(move || {
                let mut c = connect(&url);
                let mut last = -1;
                for _ in 0..READS_PER_CONN {
                    let v = version(&description(&mut c));
                    // One replica applies the provider's changes in order: a client of it
                    // never sees an older value after a newer one.
                    if monotonic {
                        assert!(v >= last, "{url}: v{v} after v{last}");
                    }
                    last = v;
                }
            })
        })
        .collect();
    for r in readers {
        r.join().expect("reader");
    }
    writer.join().expect("writer");
    // Counted before `follows`, whose own searches go to the replicas directly.
    let served = replicas
        .iter()
        .zip(before)
        .map(|(r, b)| searches(r) - b)
        .collect();
    for r in replicas {
        follows(&r.url);
    }
    follows(&p.url);
    served
}

#[test]
fn reads_spread_over_two_replicas_follow_writes_to_the_provider() {
    let p = provider();
    let (r1, r2) = (replica(&p), replica(&p));
    // Two reader connections per replica.
    let fronts = vec![
        r1.url.clone(),
        r2.url.clone(),
        r1.url.clone(),
        r2.url.clone(),
    ];
    let served = scale_out(&p, &[&r1, &r2], &fronts, true);
    for (i, n) in served.iter().enumerate() {
        assert_eq!(
            *n,
            2 * READS_PER_CONN as u64,
            "replica {i} served {n} searches"
        );
    }
    // A replica refers a user's write to the provider (updateref).
    let mut alice = r1.bind_as(ALICE, "password");
    let r = alice
        .modify(ALICE, vec![Mod::Replace("description", ["x"].into())])
        .unwrap();
    assert_eq!(r.rc, 10, "referral: {r:?}");
    assert_eq!(r.refs, std::slice::from_ref(&p.url));
}

/// The lloadd daemon for test `test`, if it runs: opted in with `LINDEN_TEST_LLOADD=1`, and
/// then lloadd must be there.
fn lloadd(test: &str) -> Option<PathBuf> {
    if !common::opted_in("LINDEN_TEST_LLOADD", test) {
        return None;
    }
    if let Some(p) = std::env::var_os("LLOADD") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "LLOADD={} is not a file", p.display());
        return Some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain([
            PathBuf::from("/usr/sbin"),
            PathBuf::from("/usr/local/libexec"),
        ])
        .map(|d| d.join("lloadd"))
        .find(|p| p.is_file());
    assert!(
        found.is_some(),
        "LINDEN_TEST_LLOADD=1 but OpenLDAP's load balancer lloadd is not installed (no Debian \
         package ships it: Debian 12's slapd 2.5.13 has neither the lloadd daemon nor the \
         lloadd.la module). Build it from OpenLDAP's source (`./configure \
         --enable-balancer=yes`, then `make` in servers/lloadd; docs/replication.md, \
         \"Behind OpenLDAP's load balancer\") and set LLOADD=/path/to/lloadd"
    );
    found
}

/// lloadd (its standalone daemon) in front of some Linden servers, on a loopback port; its
/// log (`-d stats`) goes to a file; stopped when dropped.
struct Lloadd {
    child: std::process::Child,
    url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Lloadd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last lines of lloadd's log, for failure messages.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Polls (bounded) until the lloadd `child` answers a bind on `url`; an error if it exits or
/// never does.
fn up(child: &mut std::process::Child, url: &str) -> Result<(), String> {
    for _ in 0..400 {
        if let Some(status) = child.try_wait().unwrap() {
            return Err(format!("exited ({status}) on {url}"));
        }
        if let Ok(mut c) = LdapConn::new(url) {
            if c.simple_bind(ADMIN_DN, ADMIN_PW).is_ok_and(|r| r.rc == 0) {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err(format!("no bind answered on {url} in 10 s"))
}

impl Lloadd {
    /// The configuration of docs/replication.md: `bindconf` as the administrator, one
    /// `backend-server` per server (2 connections for operations, 2 for clients' binds),
    /// and `features` (e.g. `feature proxyauthz`) before them.
    fn start(bin: &Path, features: &str, backends: &[&TestServer]) -> Lloadd {
        let dir = tempfile::tempdir().unwrap();
        let mut conf = format!(
            "pidfile {d}/lloadd.pid\nargsfile {d}/lloadd.args\n{features}\nbindconf\n    \
             bindmethod=simple\n    binddn={ADMIN_DN}\n    credentials={ADMIN_PW}\n",
            d = dir.path().display()
        );
        for b in backends {
            conf.push_str(&format!(
                "\nbackend-server\n    uri={}\n    numconns=2\n    bindconns=2\n    \
                 retry=1000\n    max-pending-ops=64\n    conn-max-pending=16\n",
                b.url
            ));
        }
        let conf_path = dir.path().join("lloadd.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let log = dir.path().join("lloadd.log");
        // Should another process take the free port first, lloadd exits with "Address already
        // in use" and the next round tries another.
        for _ in 0..3 {
            let url = format!("ldap://127.0.0.1:{}", common::free_port());
            let mut child = std::process::Command::new(bin)
                .arg("-d")
                .arg("stats")
                .arg("-f")
                .arg(&conf_path)
                .arg("-h")
                .arg(format!("{url}/"))
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            match up(&mut child, &url) {
                Ok(()) => {
                    let l = Lloadd {
                        child,
                        url,
                        log,
                        _dir: dir,
                    };
                    l.reaches(backends);
                    return l;
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    if !log_tail(&log).contains("Address already in use") {
                        panic!("lloadd: {e}\n{}", log_tail(&log));
                    }
                    eprintln!("lloadd: {e}; trying another port");
                }
            }
        }
        panic!("lloadd found no free port:\n{}", log_tail(&log));
    }

    /// Polls (bounded) with searches through lloadd until each backend has served one: lloadd
    /// opens its connections to the backends one by one, and skips a backend none of whose
    /// connections is ready yet.
    fn reaches(&self, backends: &[&TestServer]) {
        let before: Vec<u64> = backends.iter().map(|b| searches(b)).collect();
        let mut c = connect(&self.url);
        for _ in 0..400 {
            search(&mut c, BASE, "(objectClass=organization)", &["1.1"]);
            if backends.iter().zip(&before).all(|(b, n)| searches(b) > *n) {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!(
            "lloadd did not reach every backend in 10 s\n{}",
            log_tail(&self.log)
        );
    }
}

/// A provider, two replicas persisting, and lloadd (with `features`) in front of the replicas;
/// `None` when the test is not opted in (`lloadd`).
fn behind_lloadd(
    test: &str,
    features: &str,
) -> Option<(TestServer, TestServer, TestServer, Lloadd)> {
    let bin = lloadd(test)?;
    let p = provider();
    let (r1, r2) = (replica(&p), replica(&p));
    persisting(&[&r1, &r2]);
    let lb = Lloadd::start(&bin, features, &[&r1, &r2]);
    Some((p, r1, r2, lb))
}

/// lloadd in front of two replicas: every read through it succeeds, both replicas serve some
/// (lloadd spreads operations, not connections), and they follow the writes made on the
/// provider.
#[test]
#[ignore = "needs OpenLDAP's lloadd (built from source; LLOADD=/path/to/lloadd); run with LINDEN_TEST_LLOADD=1"]
fn reads_through_lloadd_reach_both_replicas() {
    let Some((p, r1, r2, lb)) = behind_lloadd("reads_through_lloadd_reach_both_replicas", "")
    else {
        return;
    };
    let fronts = vec![lb.url.clone(); 4];
    let served = scale_out(&p, &[&r1, &r2], &fronts, false);
    assert_eq!(
        served.iter().sum::<u64>(),
        4 * READS_PER_CONN as u64,
        "every read reached a replica, once: {served:?}\n{}",
        log_tail(&lb.log)
    );
    assert!(
        served.iter().all(|n| *n > 0),
        "both replicas served: {served:?}"
    );
    // Without `feature proxyauthz`, every operation reaches the replicas as lloadd's own
    // bind identity (bindconf), whoever the client bound as: alice reads bob's userPassword,
    // which the replicas never show her directly.
    let mut alice = bind(&lb.url, ALICE, "password");
    assert_eq!(whoami(&mut alice), format!("dn:{ADMIN_DN}"));
    assert!(sees_bobs_password(&mut alice));
    assert!(!sees_bobs_password(&mut bind(&r1.url, ALICE, "password")));
}

fn whoami(c: &mut LdapConn) -> String {
    let (_, r) = unless_busy("Who am I?", || {
        let r = c.extended(WhoAmI).unwrap();
        (r.1.rc, r)
    });
    let (exop, _) = r.success().unwrap();
    String::from_utf8(exop.val.unwrap_or_default()).unwrap()
}

/// Whether bob's userPassword shows (only to the administrator: `open_read_policy`).
fn sees_bobs_password(c: &mut LdapConn) -> bool {
    let e = search(c, BASE, "(uid=bob)", &["userPassword"]);
    assert_eq!(e.len(), 1, "bob: {e:?}");
    e[0].bin_attrs.contains_key("userPassword") || e[0].attrs.contains_key("userPassword")
}

/// A raw response's result code (`u32::MAX` for a response without one).
fn code(r: &common::raw::Response) -> u32 {
    r.code.map_or(u32::MAX, |c| c as u32)
}

/// A search for bob's userPassword, as a raw request.
fn bobs_password() -> proto::ProtocolOp<'static> {
    proto::ProtocolOp::SearchRequest(proto::SearchRequest {
        base: BASE.as_bytes().into(),
        scope: proto::Scope::Subtree,
        deref: proto::DerefAliases::Never,
        size_limit: 0,
        time_limit: 0,
        types_only: false,
        filter: proto::Filter::parse("(uid=bob)").unwrap(),
        attributes: vec![b"userPassword".as_slice().into()],
    })
}

/// A SASL PLAIN bind over a raw connection (ldap3 has no PLAIN), retried while busy.
fn plain_bind(c: &mut RawClient, authcid: &str, pw: &str) {
    let mut id = 0;
    let (rc, r) = unless_busy("SASL PLAIN bind", || {
        id += 1;
        c.send(
            id,
            proto::ProtocolOp::BindRequest(proto::BindRequest {
                version: 3,
                name: b"".as_slice().into(),
                auth: proto::BindAuth::Sasl {
                    mechanism: b"PLAIN".as_slice().into(),
                    credentials: Some(format!("\0{authcid}\0{pw}").into_bytes().into()),
                },
            }),
            vec![],
        );
        let r = c.recv();
        assert_eq!(r.id, id, "{r:?}");
        (code(&r), r)
    });
    assert_eq!(rc, 0, "SASL PLAIN bind as {authcid}: {r:?}");
}

/// lloadd with `feature proxyauthz` (as in OpenLDAP's guide) in front of two replicas: it
/// forwards each client's operations with the Proxied Authorization control (RFC 4370)
/// naming who the client bound as, so the replicas apply that user's rights, whichever
/// replica answers. After a SASL bind lloadd learns the identity with Who am I? on the
/// backend connection of the bind.
#[test]
#[ignore = "needs OpenLDAP's lloadd (built from source; LLOADD=/path/to/lloadd); run with LINDEN_TEST_LLOADD=1"]
fn users_through_lloadd_keep_their_identity() {
    let Some((p, r1, r2, lb)) = behind_lloadd(
        "users_through_lloadd_keep_their_identity",
        "feature proxyauthz\n",
    ) else {
        return;
    };
    let before = [searches(&r1), searches(&r2)];
    let alice_dn = format!("dn:{ALICE}");

    // A simple bind: her identity and her rights, on both replicas (lloadd alternates).
    let mut alice = bind(&lb.url, ALICE, "password");
    for _ in 0..4 {
        assert_eq!(whoami(&mut alice), alice_dn);
        assert!(!sees_bobs_password(&mut alice));
    }
    // The administrator is lloadd's own identity: its operations go without the control.
    let mut admin = connect(&lb.url);
    assert_eq!(whoami(&mut admin), format!("dn:{ADMIN_DN}"));
    assert!(sees_bobs_password(&mut admin));
    // Anonymous: the control with an empty authzId (RFC 4370: anonymous).
    let mut anon = LdapConn::new(&lb.url).unwrap();
    assert_eq!(whoami(&mut anon), "");
    assert!(!sees_bobs_password(&mut anon));
    // A write of hers reaches a replica as hers, and is referred to the provider.
    let (_, r) = unless_busy("modify", || {
        let r = alice
            .modify(ALICE, vec![Mod::Replace("description", ["x"].into())])
            .unwrap();
        (r.rc, r)
    });
    assert_eq!(r.rc, 10, "referral: {r:?}");
    assert_eq!(r.refs, std::slice::from_ref(&p.url));

    // SASL PLAIN: lloadd runs the exchange on a bind connection, then asks that backend
    // Who am I? for the identity it will proxy.
    let addr = lb.url.trim_start_matches("ldap://").parse().unwrap();
    let mut raw = RawClient::connect(addr);
    plain_bind(&mut raw, "alice", "password");
    let mut id = 100;
    let (rc, r) = unless_busy("Who am I? (SASL)", || {
        id += 1;
        let who = proto::ProtocolOp::ExtendedRequest(proto::ExtendedRequest {
            oid: proto::oids::WHO_AM_I.as_bytes().into(),
            value: None,
        });
        raw.send(id, who, vec![]);
        let r = raw.recv();
        (code(&r), r)
    });
    assert_eq!(rc, 0, "{r:?}");
    assert_eq!(r.value.as_deref(), Some(alice_dn.as_bytes()));
    // Her rights too, on both replicas.
    for _ in 0..4 {
        let (rc, bob) = unless_busy("search as alice (SASL)", || {
            id += 1;
            raw.send(id, bobs_password(), vec![]);
            let r = raw.recv_until_done(id);
            let done = r.last().unwrap();
            (code(done), r)
        });
        assert_eq!((rc, bob.len()), (0, 2), "bob and done: {bob:?}");
        assert!(
            bob[0].attrs.iter().all(|(a, _)| a != "userPassword"),
            "{bob:?}"
        );
    }
    let served = [searches(&r1) - before[0], searches(&r2) - before[1]];
    assert!(
        served.iter().all(|n| *n > 0),
        "both replicas served: {served:?}"
    );
}
