//! The cache of verified credentials (docs/credential-cache.md), over a real socket: a repeat
//! bind is answered from the cache, a password change or a wrong password never is, and the
//! cache can be turned off. Checked through the server's counters of verifications
//! (`Server::credential_stats`), never through timings.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;

use common::TestServer;
use ldap3::Mod;
use server::credcache::CredentialStats;

/// Argon2id (the default scheme) at its smallest cost: a slow scheme for the server's
/// purposes, quick for the test.
fn server(cache_entries: usize) -> TestServer {
    TestServer::start_with(|c| {
        c.durability = server::Durability::NoSync;
        c.credential_cache_entries = cache_entries;
        c.set_password_policy(pwhash::Policy {
            scheme: pwhash::Scheme::Argon2,
            cost: pwhash::Cost {
                argon2_memory_kib: 64,
                argon2_iterations: 1,
                ..pwhash::Cost::default()
            },
        });
    })
}

fn dn(cn: &str) -> String {
    format!("cn={cn},{}", common::BASE)
}

fn add_person(srv: &TestServer, cn: &str, pw: &str) {
    let attrs: Vec<(String, HashSet<String>)> = [
        ("objectClass", "person"),
        ("cn", cn),
        ("sn", cn),
        ("userPassword", pw),
    ]
    .into_iter()
    .map(|(a, v)| (a.to_string(), HashSet::from([v.to_string()])))
    .collect();
    let r = srv.admin().add(&dn(cn), attrs).expect("add");
    assert_eq!(r.rc, 0, "{r:?}");
}

/// `after - before` for each counter.
fn delta(before: CredentialStats, after: CredentialStats) -> (u64, u64, u64, u64) {
    (
        after.slow_verifications - before.slow_verifications,
        after.cache.hits - before.cache.hits,
        after.cache.inserts - before.cache.inserts,
        after.inline_verifications - before.inline_verifications,
    )
}

/// Counters around `f`: (slow verifications, cache hits, inserts, inline verifications).
fn counting(srv: &TestServer, f: impl FnOnce()) -> (u64, u64, u64, u64) {
    let before = srv.server.credential_stats();
    f();
    delta(before, srv.server.credential_stats())
}

#[test]
fn a_repeat_bind_is_answered_from_the_cache() {
    let srv = server(1000);
    add_person(&srv, "alice", "alice-pw");
    // First bind: the scheme runs (on the hashing threads) and the success is remembered.
    let first = counting(&srv, || {
        assert_eq!(srv.bind_rc(&dn("alice"), "alice-pw"), 0)
    });
    assert_eq!(first, (1, 0, 1, 0));
    // Second and third, on new connections: from the cache, no hash computed.
    let again = counting(&srv, || {
        assert_eq!(srv.bind_rc(&dn("alice"), "alice-pw"), 0);
        assert_eq!(srv.bind_rc(&dn("alice"), "alice-pw"), 0);
    });
    assert_eq!(again, (0, 2, 0, 0));
    // The DN in another spelling is the same entry, hence the same tag.
    let spelled = counting(&srv, || {
        assert_eq!(
            srv.bind_rc(&format!("CN=Alice,{}", common::BASE), "alice-pw"),
            0
        )
    });
    assert_eq!(spelled, (0, 1, 0, 0));
}

#[test]
fn a_wrong_password_is_never_cached_as_a_success() {
    let srv = server(1000);
    add_person(&srv, "bob", "bob-pw");
    // Fewer failures than the throttling limit (5 per DN), so no answer is held back.
    for _ in 0..2 {
        let wrong = counting(&srv, || assert_eq!(srv.bind_rc(&dn("bob"), "guess"), 49));
        assert_eq!(wrong, (1, 0, 0, 0), "every wrong password runs the scheme");
    }
    // The right password after wrong ones: verified, then cached.
    assert_eq!(
        counting(&srv, || assert_eq!(srv.bind_rc(&dn("bob"), "bob-pw"), 0)),
        (1, 0, 1, 0)
    );
    // A cached right password does not make a wrong one pass.
    assert_eq!(
        counting(&srv, || assert_eq!(srv.bind_rc(&dn("bob"), "bob-pw!"), 49)),
        (1, 0, 0, 0)
    );
    // Nor another user's password, nor a DN that does not exist.
    add_person(&srv, "carol", "carol-pw");
    assert_eq!(srv.bind_rc(&dn("carol"), "bob-pw"), 49);
    assert_eq!(
        counting(&srv, || assert_eq!(
            srv.bind_rc(&dn("nobody"), "bob-pw"),
            49
        )),
        (1, 0, 0, 0),
        "an unknown DN costs one (dummy) verification and caches nothing"
    );
}

#[test]
fn a_password_change_invalidates_the_cached_login() {
    let srv = server(1000);
    add_person(&srv, "dave", "old-pw");
    assert_eq!(srv.bind_rc(&dn("dave"), "old-pw"), 0);
    assert_eq!(
        counting(&srv, || assert_eq!(srv.bind_rc(&dn("dave"), "old-pw"), 0)),
        (0, 1, 0, 0),
        "cached"
    );
    // A modify of userPassword (hashed by the server: a new stored value).
    let r = srv
        .admin()
        .modify(
            &dn("dave"),
            vec![Mod::Replace(
                "userPassword".to_string(),
                HashSet::from(["new-pw".to_string()]),
            )],
        )
        .expect("modify");
    assert_eq!(r.rc, 0, "{r:?}");
    assert_eq!(
        counting(&srv, || assert_eq!(srv.bind_rc(&dn("dave"), "old-pw"), 49)),
        (1, 0, 0, 0),
        "the old password's tag no longer matches: the scheme runs and refuses it"
    );
    assert_eq!(
        counting(&srv, || assert_eq!(srv.bind_rc(&dn("dave"), "new-pw"), 0)),
        (1, 0, 1, 0)
    );
    assert_eq!(
        counting(&srv, || assert_eq!(srv.bind_rc(&dn("dave"), "new-pw"), 0)),
        (0, 1, 0, 0)
    );
    // Password Modify (RFC 3062), the user changing their own password.
    let mut me = srv.bind_as(&dn("dave"), "new-pw");
    let r = me
        .extended(ldap3::exop::PasswordModify {
            user_id: None,
            old_pass: Some("new-pw"),
            new_pass: Some("newer-pw"),
        })
        .expect("password modify")
        .1;
    assert_eq!(r.rc, 0, "{r:?}");
    assert_eq!(srv.bind_rc(&dn("dave"), "new-pw"), 49);
    assert_eq!(srv.bind_rc(&dn("dave"), "newer-pw"), 0);
    // Setting the very same password again stores a new salt, hence a new value: a miss.
    let r = srv
        .admin()
        .modify(
            &dn("dave"),
            vec![Mod::Replace(
                "userPassword".to_string(),
                HashSet::from(["newer-pw".to_string()]),
            )],
        )
        .expect("modify");
    assert_eq!(r.rc, 0, "{r:?}");
    assert_eq!(
        counting(&srv, || assert_eq!(srv.bind_rc(&dn("dave"), "newer-pw"), 0)),
        (1, 0, 1, 0)
    );
}

#[test]
fn the_cache_can_be_turned_off() {
    let srv = server(0);
    add_person(&srv, "erin", "erin-pw");
    let binds = counting(&srv, || {
        for _ in 0..3 {
            assert_eq!(srv.bind_rc(&dn("erin"), "erin-pw"), 0);
        }
    });
    assert_eq!(binds, (3, 0, 0, 0), "every bind runs the scheme");
    assert_eq!(srv.server.credential_stats().cache.inserts, 0);
}

#[test]
fn cheap_schemes_are_verified_inline_and_not_cached() {
    let srv = server(1000);
    let ssha = pwhash::hash(pwhash::Scheme::Ssha, b"frank-pw");
    add_person(&srv, "frank", std::str::from_utf8(&ssha).expect("ascii"));
    let binds = counting(&srv, || {
        assert_eq!(srv.bind_rc(&dn("frank"), "frank-pw"), 0);
        assert_eq!(srv.bind_rc(&dn("frank"), "frank-pw"), 0);
        assert_eq!(srv.bind_rc(&dn("frank"), "wrong"), 49);
    });
    assert_eq!(binds, (0, 0, 0, 3));
}
