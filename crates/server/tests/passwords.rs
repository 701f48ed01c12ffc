//! Password storage and failed-bind throttling over real connections.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::TestServer;
use ldap3::{LdapConn, Mod, Scope, SearchEntry};

const ALICE: &str = "uid=alice,ou=people,dc=example,dc=com";

fn stored_password(admin: &mut LdapConn, dn: &str) -> String {
    let ldap3::SearchResult(rs, _) = admin
        .search(dn, Scope::Base, "(objectClass=*)", vec!["userPassword"])
        .expect("search");
    let e = SearchEntry::construct(rs.into_iter().next().expect("entry"));
    let v = e
        .attrs
        .get("userPassword")
        .map(|v| v[0].as_bytes().to_vec())
        .or_else(|| e.bin_attrs.get("userPassword").map(|v| v[0].clone()))
        .expect("userPassword");
    String::from_utf8(v).expect("ascii")
}

/// The case: a burst of wrong passwords from one address — some for the service
/// account, some for users, some for DNs that do not exist — then the service account and
/// another user bind at the same time with the right passwords, and both succeed. Failures are
/// only answered late (at most 20 ms here), never refused.
#[test]
fn failed_binds_never_lock_out_the_right_password() {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.bind_failures_per_dn = 3;
        c.bind_failures_per_ip = 4;
        c.bind_lockout_seconds = Duration::from_secs(600);
        c.bind_throttle_max_ms = Duration::from_millis(20);
    });
    let service = "uid=bob,ou=people,dc=example,dc=com";
    let carol = "uid=carol,ou=people,dc=example,dc=com";
    let ghost = "uid=ghost,ou=people,dc=example,dc=com";
    for i in 0..60 {
        let dn = [service, ALICE, ghost][i % 3];
        assert_eq!(srv.bind_rc(dn, "wrong"), 49, "bind {i} as {dn}");
    }
    // Both at once, from the address that just failed 60 times.
    std::thread::scope(|s| {
        let a = s.spawn(|| srv.bind_rc(service, "password"));
        let b = s.spawn(|| srv.bind_rc(carol, "password"));
        assert_eq!(a.join().expect("thread"), 0, "the service account binds");
        assert_eq!(b.join().expect("thread"), 0, "another user binds");
    });
    assert_eq!(
        srv.bind_rc(ALICE, "password"),
        0,
        "a DN with failures binds"
    );
    assert_eq!(srv.bind_rc(common::ADMIN_DN, common::ADMIN_PW), 0);
    // A DN that does not exist is answered exactly like a wrong password, by ldap-utils too.
    assert_eq!(srv.bind_rc(ghost, "password"), 49);
    let (rc, _, err) = common::tool(
        "ldapwhoami",
        &["-x", "-H", &srv.url, "-D", ALICE, "-w", "wrong"],
        None,
    );
    assert_eq!(rc, 49, "ldapwhoami sees invalidCredentials: {err}");
    assert!(err.contains("Invalid credentials"), "{err}");
}

#[test]
fn cleartext_is_hashed_with_the_configured_scheme_and_migrated_hashes_work() {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.set_password_policy(pwhash::Policy {
            scheme: pwhash::Scheme::Pbkdf2Sha512,
            cost: pwhash::Cost {
                pbkdf2_iterations: 20_000,
                ..pwhash::Cost::default()
            },
        });
    });
    let mut admin = srv.admin();
    // Demo data (cleartext in the LDIF) was hashed on add.
    assert!(stored_password(&mut admin, ALICE).starts_with("{PBKDF2-SHA512}20000$"));
    // Modify with cleartext: hashed.
    admin
        .modify(
            ALICE,
            vec![Mod::Replace("userPassword", HashSet::from(["n3w"]))],
        )
        .expect("modify")
        .success()
        .expect("modified");
    assert!(stored_password(&mut admin, ALICE).starts_with("{PBKDF2-SHA512}"));
    assert_eq!(srv.bind_rc(ALICE, "n3w"), 0);
    // Password Modify: hashed.
    let mut alice = srv.anon();
    alice
        .simple_bind(ALICE, "n3w")
        .expect("bind")
        .success()
        .expect("bound");
    alice
        .extended(ldap3::exop::PasswordModify {
            user_id: None,
            old_pass: Some("n3w"),
            new_pass: Some("n3w2"),
        })
        .expect("exop")
        .1
        .success()
        .expect("changed");
    assert!(stored_password(&mut admin, ALICE).starts_with("{PBKDF2-SHA512}"));
    assert_eq!(srv.bind_rc(ALICE, "n3w2"), 0);
    // Values hashed elsewhere are stored as given and verify (OpenLDAP slappasswd, glibc crypt,
    // argon2-cffi, passlib: see crates/pwhash/tests/vectors.rs).
    for (uid, hashed) in [
        ("bob", "{CRYPT}$6$6BpJ6FHO3t2gxcbC$XnmfTosDuBaU8MqdIN/ObGSB.UQYMilEqgMb9qbPlc.qIKLQWLixdkE3AHTfV4tvCUMikRcoKpmVWYdcN8T7x."),
        ("carol", "{ARGON2}$argon2i$v=19$m=4096,t=3,p=1$/Lh6LOtZjMhusQNUAhonpg$t83GFEr3pHwsEXUFdNPe2vPEoSIOYzzPpyo9lBO8Rjw"),
        ("dave", "{SSHA}4OJGiUaWpTrVTIjkJRuzEB3m5MAcQBcI"),
    ] {
        let dn = format!("uid={uid},ou=people,dc=example,dc=com");
        admin
            .modify(&dn, vec![Mod::Replace("userPassword", HashSet::from([hashed]))])
            .expect("modify")
            .success()
            .expect("modified");
        assert_eq!(stored_password(&mut admin, &dn), hashed, "kept as given");
        let (rc, out, err) = common::tool("ldapwhoami", &["-x", "-H", &srv.url, "-D", &dn, "-w", "correct horse"], None);
        assert_eq!(rc, 0, "{uid}: {err}");
        assert_eq!(out.trim(), format!("dn:{dn}"));
        assert_eq!(srv.bind_rc(&dn, "correct horse!"), 49);
    }
}

#[test]
fn default_scheme_is_argon2id() {
    let srv = TestServer::start(true);
    let mut admin = srv.admin();
    assert!(
        stored_password(&mut admin, ALICE).starts_with("{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$")
    );
    assert_eq!(srv.bind_rc(ALICE, "password"), 0);
}

#[test]
fn add_with_cleartext_password_is_hashed_and_binds() {
    let srv = TestServer::start(false);
    let mut admin = srv.admin();
    let dn = "cn=newbie,dc=example,dc=com";
    let mut add = |dn: &str, pw: &str| {
        admin
            .add(
                dn,
                vec![
                    ("objectClass", HashSet::from(["person"])),
                    ("cn", HashSet::from([&dn[3..dn.find(',').expect("rdn")]])),
                    ("sn", HashSet::from(["Newbie"])),
                    ("userPassword", HashSet::from([pw])),
                ],
            )
            .expect("add")
            .success()
            .expect("added");
    };
    add(dn, "s3cret pw");
    // A value hashed elsewhere is stored as given.
    let migrated = "cn=migrated,dc=example,dc=com";
    add(migrated, "{SSHA}4OJGiUaWpTrVTIjkJRuzEB3m5MAcQBcI");
    let stored = stored_password(&mut admin, dn);
    assert!(
        stored.starts_with("{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$"),
        "{stored}"
    );
    assert_eq!(srv.bind_rc(dn, "s3cret pw"), 0);
    assert_eq!(srv.bind_rc(dn, "s3cret"), 49);
    assert_eq!(
        stored_password(&mut admin, migrated),
        "{SSHA}4OJGiUaWpTrVTIjkJRuzEB3m5MAcQBcI"
    );
    assert_eq!(srv.bind_rc(migrated, "correct horse"), 0);
}
