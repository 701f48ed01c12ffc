//! Scale-out reads (issue 18, design.md "Beyond one machine"): a provider and two read
//! replicas (Linden, `[[syncrepl]]`); clients read from the replicas while a writer changes the
//! provider, and the replicas follow the writes.
//!
//! - `reads_spread_over_two_replicas_follow_writes_to_the_provider` always runs: the test
//!   itself spreads the readers' connections over the replicas, as a balancer would.
//! - `reads_through_lloadd_reach_both_replicas` does the same through OpenLDAP's load balancer
//!   `lloadd` (its standalone daemon: `LLOADD`, or `lloadd` on PATH or in /usr/sbin). Debian
//!   12's slapd 2.5.13 ships neither the daemon nor the `lloadd.la` module, so on this machine
//!   it passes with a "skipped" message.
//!
//! Bounded: fixed counts of reads and writes, every wait a bounded poll.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{TestServer, ADMIN_DN, ADMIN_PW};
use ldap3::{LdapConn, LdapConnSettings, Mod, Scope, SearchEntry};

const ALICE: &str = "uid=alice,ou=people,dc=example,dc=com";
const WRITES: usize = 100;
const READS_PER_CONN: usize = 150;

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

fn connect(url: &str) -> LdapConn {
    let s = LdapConnSettings::new().set_conn_timeout(Duration::from_secs(10));
    let mut c = LdapConn::with_settings(s, url).unwrap();
    c.with_timeout(Duration::from_secs(10));
    c.simple_bind(ADMIN_DN, ADMIN_PW)
        .unwrap()
        .success()
        .unwrap();
    c
}

/// alice's description on the server at `url` (`v<N>` once written).
fn description(c: &mut LdapConn) -> Option<String> {
    let (rs, _) = c
        .search(ALICE, Scope::Base, "(objectClass=*)", vec!["description"])
        .unwrap()
        .success()
        .unwrap();
    let e = SearchEntry::construct(rs.into_iter().next()?);
    e.attrs.get("description")?.first().cloned()
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
    let before: Vec<u64> = replicas
        .iter()
        .map(|r| r.server.counters().search.load(Ordering::Relaxed))
        .collect();
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
    for r in replicas {
        follows(&r.url);
    }
    follows(&p.url);
    replicas
        .iter()
        .zip(before)
        .map(|(r, b)| r.server.counters().search.load(Ordering::Relaxed) - b)
        .collect()
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
        assert!(
            *n >= 2 * READS_PER_CONN as u64,
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

/// The lloadd binary, if installed.
fn lloadd() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LLOADD") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([
            PathBuf::from("/usr/sbin"),
            PathBuf::from("/usr/local/libexec"),
        ])
        .map(|d| d.join("lloadd"))
        .find(|p| p.is_file())
}

/// lloadd in front of two replicas: every read through it succeeds, both replicas serve some,
/// and they follow the writes made on the provider.
#[test]
fn reads_through_lloadd_reach_both_replicas() {
    let Some(bin) = lloadd() else {
        eprintln!(
            "skipped: lloadd is not installed (Debian 12's slapd 2.5.13 ships neither the lloadd \
             daemon nor the lloadd.la module); set LLOADD=/path/to/lloadd to run this test"
        );
        return;
    };
    let p = provider();
    let (r1, r2) = (replica(&p), replica(&p));
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut conf = format!(
        "pidfile {d}/lloadd.pid\nargsfile {d}/lloadd.args\n\nbindconf\n    bindmethod=simple\n    binddn={ADMIN_DN}\n    credentials={ADMIN_PW}\n",
        d = dir.path().display()
    );
    for r in [&r1, &r2] {
        conf.push_str(&format!(
            "\nbackend-server\n    uri={}\n    numconns=2\n    bindconns=2\n    retry=1000\n    max-pending-ops=64\n    conn-max-pending=16\n",
            r.url
        ));
    }
    let path = dir.path().join("lloadd.conf");
    std::fs::write(&path, conf).unwrap();
    let url = format!("ldap://127.0.0.1:{port}");
    let mut child = std::process::Command::new(&bin)
        .arg("-d")
        .arg("0")
        .arg("-f")
        .arg(&path)
        .arg("-h")
        .arg(format!("{url}/"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    // lloadd accepts once its backends are connected: poll (bounded) for a working bind.
    let mut up = false;
    for _ in 0..400 {
        if let Ok(mut c) = LdapConn::new(&url) {
            if c.simple_bind(ADMIN_DN, ADMIN_PW).is_ok_and(|r| r.rc == 0) {
                up = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(up, "lloadd did not come up on {url}");
    let fronts = vec![url.clone(); 4];
    let served = scale_out(&p, &[&r1, &r2], &fronts, false);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        served.iter().sum::<u64>(),
        4 * READS_PER_CONN as u64,
        "every read reached a replica: {served:?}"
    );
    assert!(
        served.iter().all(|n| *n > 0),
        "both replicas served: {served:?}"
    );
}
