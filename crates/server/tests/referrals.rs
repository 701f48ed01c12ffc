//! The default referral (`referral`, slapd's global `referral` directive) and how searches
//! that dereference aliases show in the access log. Referral objects and aliases stored in
//! the directory are compared with slapd in tests/conformance/test_referrals_aliases.py; the
//! default referral cannot be (the reference slapd has none), so the answers expected here
//! are those slapd 2.5 gave with `referral ldap://root.example/` (written out beside each).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;

use common::{wait_for, TestServer};
use ldap3::{DerefAliases, LdapConn, Mod, Scope, SearchOptions};

const ROOT: &str = "ldap://root.example/";

fn search_rc(c: &mut LdapConn, base: &str, scope: Scope) -> (u32, Vec<String>) {
    let ldap3::SearchResult(_, r) = c
        .search(base, scope, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    (r.rc, r.refs)
}

#[test]
fn the_default_referral_answers_for_dns_outside_every_naming_context() {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.referral = vec![ROOT.to_string()];
    });
    let mut c = srv.admin();
    // slapd: result: 10 Referral, ref: ldap://root.example/dc=nowhere??one
    assert_eq!(
        search_rc(&mut c, "dc=nowhere", Scope::OneLevel),
        (10, vec![format!("{ROOT}dc=nowhere??one")])
    );
    assert_eq!(
        search_rc(&mut c, "cn=x,dc=nowhere", Scope::Subtree),
        (10, vec![format!("{ROOT}cn=x,dc=nowhere??sub")])
    );
    // slapd: Compare Result: Referral (10), Referral: ldap://root.example/cn=x,dc=nowhere
    let r = c.compare("cn=x,dc=nowhere", "cn", "x").expect("compare").0;
    assert_eq!((r.rc, r.refs), (10, vec![format!("{ROOT}cn=x,dc=nowhere")]));
    let r = c
        .modify(
            "cn=x,dc=nowhere",
            vec![Mod::Replace("sn", HashSet::from(["y"]))],
        )
        .expect("modify");
    assert_eq!((r.rc, r.refs), (10, vec![format!("{ROOT}cn=x,dc=nowhere")]));
    let r = c.delete("cn=a,dc=nowhere").expect("delete");
    assert_eq!((r.rc, r.refs), (10, vec![format!("{ROOT}cn=a,dc=nowhere")]));
    let r = c
        .add(
            "cn=z,dc=nowhere",
            vec![
                ("objectClass", HashSet::from(["person"])),
                ("cn", HashSet::from(["z"])),
                ("sn", HashSet::from(["z"])),
            ],
        )
        .expect("add");
    assert_eq!((r.rc, r.refs), (10, vec![format!("{ROOT}cn=z,dc=nowhere")]));
    // Inside a naming context a missing entry is still noSuchObject; the server's own entries
    // answer as ever.
    assert_eq!(
        search_rc(&mut c, "cn=nobody,dc=example,dc=com", Scope::Base),
        (32, vec![])
    );
    assert_eq!(search_rc(&mut c, "cn=Subschema", Scope::Base), (0, vec![]));
    assert_eq!(search_rc(&mut c, "", Scope::Base), (0, vec![]));
    let r = c
        .compare("cn=Subschema", "cn", "Subschema")
        .expect("compare")
        .0;
    assert_ne!(r.rc, 10, "cn=Subschema is the server's own: {r:?}");
    // A bind is not referred (slapd: invalidCredentials).
    assert_eq!(srv.bind_rc("cn=x,dc=nowhere", "x"), 49);
}

#[test]
fn without_a_default_referral_dns_outside_are_no_such_object() {
    let srv = TestServer::start(true);
    let mut c = srv.admin();
    assert_eq!(
        search_rc(&mut c, "dc=nowhere", Scope::Subtree),
        (32, vec![])
    );
    let r = c
        .modify(
            "cn=x,dc=nowhere",
            vec![Mod::Replace("sn", HashSet::from(["y"]))],
        )
        .expect("modify");
    assert_eq!(r.rc, 32);
}

#[test]
fn a_search_that_dereferences_aliases_says_so_in_the_access_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let access = dir.path().join("access.log");
    let a2 = access.clone();
    let srv = TestServer::start_with(move |c| {
        c.demo = true;
        c.access_log = server::logs::LogTarget::File(a2);
    });
    let mut c = srv.admin();
    for (deref, base) in [
        (DerefAliases::Always, "ou=people,dc=example,dc=com"),
        (
            DerefAliases::Finding,
            "uid=alice,ou=people,dc=example,dc=com",
        ),
        (
            DerefAliases::Searching,
            "uid=bob,ou=people,dc=example,dc=com",
        ),
        (DerefAliases::Never, "uid=carol,ou=people,dc=example,dc=com"),
    ] {
        let ldap3::SearchResult(_, r) = c
            .with_search_options(SearchOptions::new().deref(deref))
            .search(base, Scope::Base, "(objectClass=*)", vec!["1.1"])
            .expect("search");
        assert_eq!(r.rc, 0);
    }
    drop(c);
    let log = wait_for(&access, |t| {
        t.contains("uid=carol") && t.contains("result=0")
    });
    let line = |needle: &str| -> String {
        log.lines()
            .find(|l| l.contains(" SEARCH ") && l.contains(needle))
            .unwrap_or_else(|| panic!("no search line with {needle:?} in:\n{log}"))
            .to_string()
    };
    assert!(line("base=\"ou=people,").contains(" deref=always "));
    assert!(line("base=\"uid=alice,").contains(" deref=find "));
    assert!(line("base=\"uid=bob,").contains(" deref=search "));
    assert!(
        !line("base=\"uid=carol,").contains("deref="),
        "never is not written"
    );
}
