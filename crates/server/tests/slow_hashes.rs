//! A password hash or verification that takes long holds up neither other connections nor the
//! writer: it runs on the hashing threads (the ones binds use).
//!
//! A test binary of its own: the Argon2 memory pool is per process, and these slow hashes
//! would hold up the binds (and so the timing) of tests running beside them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use common::TestServer;
use ldap3::{LdapConn, Mod, Scope};

/// The two tests run one at a time, so that one's hashes do not slow the other's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// An Argon2 cost that makes one hash take hundreds of milliseconds, so that a stall it causes
/// stands out from scheduling noise.
fn slow_server() -> TestServer {
    TestServer::start_with(|c| {
        // Not what is measured: without fsyncs a write's time is the writer's work alone.
        c.durability = server::Durability::NoSync;
        c.set_password_policy(pwhash::Policy {
            scheme: pwhash::Scheme::Argon2,
            cost: pwhash::Cost {
                argon2_memory_kib: 64 * 1024,
                argon2_iterations: 12,
                ..pwhash::Cost::default()
            },
        });
    })
}

fn person(cn: &str, pw: &str) -> Vec<(String, HashSet<String>)> {
    [
        ("objectClass", "person"),
        ("cn", cn),
        ("sn", cn),
        ("userPassword", pw),
    ]
    .into_iter()
    .map(|(a, v)| (a.to_string(), HashSet::from([v.to_string()])))
    .collect()
}

fn dn(cn: &str) -> String {
    format!("cn={cn},{}", common::BASE)
}

/// Runs `op` again and again until `done` reaches `until`; returns the slowest run.
fn slowest_while(done: &AtomicUsize, until: usize, mut op: impl FnMut()) -> Duration {
    let mut slowest = Duration::ZERO;
    while done.load(Ordering::SeqCst) < until {
        let t = Instant::now();
        op();
        slowest = slowest.max(t.elapsed());
    }
    slowest
}

#[test]
fn adds_with_cleartext_passwords_leave_other_connections_served() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let srv = slow_server();
    // More adds than the test server has runtime threads (2): hashed on those threads, they
    // would leave none to serve anyone else.
    const ADDS: usize = 4;
    let done = AtomicUsize::new(0);
    let go = Barrier::new(ADDS + 1);
    let mut reader = srv.admin();
    let (add_times, slowest_search) = std::thread::scope(|s| {
        let adders: Vec<_> = (0..ADDS)
            .map(|i| {
                let mut c = srv.admin();
                let (go, done) = (&go, &done);
                s.spawn(move || {
                    go.wait();
                    // Staggered, so each arrives while the ones before are being hashed.
                    std::thread::sleep(Duration::from_millis(30 * i as u64));
                    let t = Instant::now();
                    let r = c
                        .add(&dn(&format!("slow{i}")), person(&format!("slow{i}"), "pw"))
                        .expect("add");
                    let took = t.elapsed();
                    done.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(r.rc, 0, "{r:?}");
                    took
                })
            })
            .collect();
        go.wait();
        let slowest = slowest_while(&done, ADDS, || {
            let (rc, _, _) = common::search(
                &mut reader,
                common::BASE,
                Scope::Base,
                "(objectClass=*)",
                &["1.1"],
            );
            assert_eq!(rc, 0);
        });
        let times: Vec<Duration> = adders
            .into_iter()
            .map(|h| h.join().expect("adder"))
            .collect();
        (times, slowest)
    });
    let quickest_add = add_times.iter().min().copied().unwrap_or_default();
    assert!(
        slowest_search * 4 < quickest_add,
        "a search took {slowest_search:?} while adds with a password took {add_times:?}"
    );
    for i in 0..ADDS {
        let stored = stored_password(&mut reader, &dn(&format!("slow{i}")));
        assert!(
            stored.starts_with("{ARGON2}$argon2id$v=19$m=65536,t=12,p=1$"),
            "{stored}"
        );
    }
}

#[test]
fn password_modify_leaves_the_writer_free() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let srv = slow_server();
    let mut admin = srv.admin();
    // One hash, timed as the yardstick.
    let t = Instant::now();
    let r = admin
        .add(&dn("user"), person("user", "old-pw"))
        .expect("add");
    let one_hash = t.elapsed();
    assert_eq!(r.rc, 0, "{r:?}");
    let r = admin.add(
        &dn("other"),
        person("other", "{SSHA}4OJGiUaWpTrVTIjkJRuzEB3m5MAcQBcI"),
    );
    assert_eq!(r.expect("add").rc, 0);
    let mut user = srv.bind_as(&dn("user"), "old-pw");
    let done = AtomicUsize::new(0);
    let go = Barrier::new(2);
    let (changed, slowest_modify) = std::thread::scope(|s| {
        let (go, done) = (&go, &done);
        let changer = s.spawn(move || {
            go.wait();
            // The old password is verified (one slow hash) and the new one hashed (another).
            let r = user.extended(ldap3::exop::PasswordModify {
                user_id: None,
                old_pass: Some("old-pw"),
                new_pass: Some("new-pw"),
            });
            done.fetch_add(1, Ordering::SeqCst);
            r.expect("password modify").1.rc
        });
        go.wait();
        let mut n = 0;
        let slowest = slowest_while(done, 1, || {
            n += 1;
            let r = admin
                .modify(
                    &dn("other"),
                    vec![Mod::Replace(
                        "description".to_string(),
                        HashSet::from([n.to_string()]),
                    )],
                )
                .expect("modify");
            assert_eq!(r.rc, 0, "{r:?}");
        });
        (changer.join().expect("changer"), slowest)
    });
    assert_eq!(changed, 0, "password modify");
    assert!(
        slowest_modify * 4 < one_hash,
        "a modify took {slowest_modify:?} during a password modify; one hash takes {one_hash:?}"
    );
    assert_eq!(srv.bind_rc(&dn("user"), "new-pw"), 0);
    assert_eq!(srv.bind_rc(&dn("user"), "old-pw"), 49);
}

fn stored_password(c: &mut LdapConn, dn: &str) -> String {
    let (rc, _, entries) = common::search(c, dn, Scope::Base, "(objectClass=*)", &["userPassword"]);
    assert_eq!(rc, 0);
    let e = entries.into_iter().next().expect("entry");
    e.attrs
        .get("userPassword")
        .and_then(|v| v.first().cloned())
        .or_else(|| {
            e.bin_attrs
                .get("userPassword")
                .and_then(|v| v.first())
                .map(|b| String::from_utf8_lossy(b).into_owned())
        })
        .expect("userPassword")
}
