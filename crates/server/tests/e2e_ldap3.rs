//! End-to-end tests with the `ldap3` client over a real socket: binds, the write operations,
//! search scopes and filters, attribute selection, access to userPassword, the extended
//! operations, schema checks, controls and the operation counters.
//!
//! Expected result codes are those of OpenLDAP slapd 2.5 (tests/conformance/README.md).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use server::state::OpType;

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use common::{TestServer, ADMIN_DN, ADMIN_PW, BASE};
use ldap3::controls::RawControl;
use ldap3::exop::{Exop, PasswordModify, PasswordModifyResp, WhoAmI};
use ldap3::{LdapConn, Mod, Scope, SearchEntry, SearchOptions};

const PEOPLE: &str = "ou=people,dc=example,dc=com";
const ALICE: &str = "uid=alice,ou=people,dc=example,dc=com";
const BOB: &str = "uid=bob,ou=people,dc=example,dc=com";

fn set(vals: &[&str]) -> HashSet<String> {
    vals.iter().map(|s| s.to_string()).collect()
}

fn attrs(list: &[(&str, &[&str])]) -> Vec<(String, HashSet<String>)> {
    list.iter().map(|(k, v)| (k.to_string(), set(v))).collect()
}

/// Entries and result code of a search (any result code).
fn search(
    c: &mut LdapConn,
    base: &str,
    scope: Scope,
    filter: &str,
    attrs: &[&str],
) -> (Vec<SearchEntry>, u32) {
    let (rc, _, entries) = common::search(c, base, scope, filter, attrs);
    (entries, rc)
}

/// Entries of a search that must succeed.
fn search_ok(
    c: &mut LdapConn,
    base: &str,
    scope: Scope,
    filter: &str,
    attrs: &[&str],
) -> Vec<SearchEntry> {
    let (e, rc) = search(c, base, scope, filter, attrs);
    assert_eq!(rc, 0, "search {base} {filter}");
    e
}

fn dns(entries: &[SearchEntry]) -> Vec<String> {
    let mut v: Vec<String> = entries.iter().map(|e| e.dn.to_lowercase()).collect();
    v.sort();
    v
}

/// Values of attribute `name` (case-insensitive), text or binary.
fn values(e: &SearchEntry, name: &str) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for (k, v) in &e.attrs {
        if k.eq_ignore_ascii_case(name) {
            out.extend(v.iter().map(|s| s.as_bytes().to_vec()));
        }
    }
    for (k, v) in &e.bin_attrs {
        if k.eq_ignore_ascii_case(name) {
            out.extend(v.iter().cloned());
        }
    }
    out
}

fn has_attr(e: &SearchEntry, name: &str) -> bool {
    e.attrs
        .keys()
        .chain(e.bin_attrs.keys())
        .any(|k| k.eq_ignore_ascii_case(name))
}

fn one(c: &mut LdapConn, dn: &str, attrs: &[&str]) -> SearchEntry {
    let mut e = search_ok(c, dn, Scope::Base, "(objectClass=*)", attrs);
    assert_eq!(e.len(), 1, "base search of {dn}");
    e.remove(0)
}

fn whoami(c: &mut LdapConn) -> String {
    let (exop, res) = c
        .extended(WhoAmI)
        .expect("whoami request")
        .success()
        .expect("whoami succeeds");
    assert_eq!(res.rc, 0);
    String::from_utf8(exop.val.unwrap_or_default()).expect("authzid is UTF-8")
}

fn exists(c: &mut LdapConn, dn: &str) -> bool {
    let (e, rc) = search(c, dn, Scope::Base, "(objectClass=*)", &["1.1"]);
    match rc {
        0 => {
            assert_eq!(e.len(), 1);
            true
        }
        32 => false,
        rc => panic!("base search of {dn}: rc {rc}"),
    }
}

fn person(uid: &str) -> Vec<(String, HashSet<String>)> {
    attrs(&[
        ("objectClass", &["inetOrgPerson"]),
        ("uid", &[uid]),
        ("cn", &[&format!("{uid} Test")]),
        ("sn", &["Test"]),
        ("mail", &[&format!("{uid}@example.com")]),
    ])
}

// ---------------------------------------------------------------------------------------------
// Bind and WhoAmI

#[test]
fn bind_outcomes() {
    let srv = TestServer::start(true);
    assert_eq!(srv.bind_rc(ADMIN_DN, ADMIN_PW), 0, "admin");
    assert_eq!(
        srv.bind_rc(ALICE, "password"),
        0,
        "user with right password"
    );
    assert_eq!(
        srv.bind_rc(ALICE, "wrong"),
        49,
        "wrong password → invalidCredentials"
    );
    assert_eq!(srv.bind_rc(ADMIN_DN, "wrong"), 49, "admin, wrong password");
    assert_eq!(
        srv.bind_rc("uid=nobody,ou=people,dc=example,dc=com", "password"),
        49,
        "unknown DN"
    );
    assert_eq!(
        srv.bind_rc("cn=mail,ou=services,dc=example,dc=com", "x"),
        49,
        "entry without userPassword"
    );
    assert_eq!(
        srv.bind_rc(ALICE, ""),
        53,
        "DN with empty password → unwillingToPerform"
    );
    assert_eq!(srv.bind_rc("", ""), 0, "anonymous");
    assert_eq!(
        srv.bind_rc("not a dn", "x"),
        34,
        "invalid DN → invalidDNSyntax"
    );
    // DN given in another spelling binds the same entry.
    let mut c = srv.bind_as("UID=alice,OU=People,DC=Example,DC=COM", "password");
    assert_eq!(whoami(&mut c).to_lowercase(), format!("dn:{ALICE}"));
}

#[test]
fn whoami_reports_the_bound_identity() {
    let srv = TestServer::start(true);
    assert_eq!(whoami(&mut srv.admin()), format!("dn:{ADMIN_DN}"));
    assert_eq!(
        whoami(&mut srv.bind_as(ALICE, "password")),
        format!("dn:{ALICE}")
    );
    assert_eq!(whoami(&mut srv.anon()), "", "anonymous");
    // A failed bind leaves the connection anonymous (RFC 4513 §5.1).
    let mut c = srv.bind_as(BOB, "password");
    assert_eq!(c.simple_bind(ALICE, "wrong").expect("bind").rc, 49);
    assert_eq!(whoami(&mut c), "");
}

// ---------------------------------------------------------------------------------------------
// Write operations

#[test]
fn add_search_modify_compare() {
    let srv = TestServer::start(true);
    let mut c = srv.admin();
    let dn = "uid=zed,ou=people,dc=example,dc=com";
    let r = c.add(dn, person("zed")).expect("add");
    assert_eq!(r.rc, 0, "{r:?}");
    assert_eq!(
        c.add(dn, person("zed")).expect("add").rc,
        68,
        "entry exists → entryAlreadyExists"
    );
    let found = search_ok(&mut c, PEOPLE, Scope::OneLevel, "(uid=zed)", &["*"]);
    assert_eq!(dns(&found), vec![dn.to_string()]);
    assert_eq!(values(&found[0], "mail"), vec![b"zed@example.com".to_vec()]);

    // add, delete (one value), replace in one request
    let r = c
        .modify(
            dn,
            vec![
                Mod::Add(
                    "telephoneNumber".to_string(),
                    set(&["+1 555 0199", "+1 555 0198"]),
                ),
                Mod::Add("description".to_string(), set(&["first", "second"])),
                Mod::Delete("description".to_string(), set(&["first"])),
                Mod::Replace("mail".to_string(), set(&["zed@example.org"])),
            ],
        )
        .expect("modify");
    assert_eq!(r.rc, 0, "{r:?}");
    let e = one(&mut c, dn, &["*"]);
    assert_eq!(values(&e, "telephoneNumber").len(), 2);
    assert_eq!(values(&e, "description"), vec![b"second".to_vec()]);
    assert_eq!(values(&e, "mail"), vec![b"zed@example.org".to_vec()]);

    // delete a whole attribute; replace with no values deletes too
    let r = c
        .modify(
            dn,
            vec![
                Mod::Delete("telephoneNumber".to_string(), set(&[])),
                Mod::Replace("description".to_string(), set(&[])),
            ],
        )
        .expect("modify");
    assert_eq!(r.rc, 0, "{r:?}");
    let e = one(&mut c, dn, &["*"]);
    assert!(
        !has_attr(&e, "telephoneNumber") && !has_attr(&e, "description"),
        "{e:?}"
    );

    // A request whose second change fails changes nothing (RFC 4511 §4.6: atomic).
    let r = c
        .modify(
            dn,
            vec![
                Mod::Add("description".to_string(), set(&["must not stay"])),
                Mod::Delete("mail".to_string(), set(&["not-a-value@example.com"])),
            ],
        )
        .expect("modify");
    assert_eq!(
        r.rc, 16,
        "deleting a missing value → noSuchAttribute: {r:?}"
    );
    let e = one(&mut c, dn, &["*"]);
    assert!(
        !has_attr(&e, "description"),
        "first change of a failed modify was applied: {e:?}"
    );

    // other modify errors
    let r = c
        .modify(
            dn,
            vec![Mod::Add("mail".to_string(), set(&["zed@example.org"]))],
        )
        .expect("modify");
    assert_eq!(r.rc, 20, "add existing value → attributeOrValueExists");
    let r = c
        .modify(dn, vec![Mod::Delete("sn".to_string(), set(&[]))])
        .expect("modify");
    assert_eq!(r.rc, 65, "delete MUST attribute → objectClassViolation");
    let r = c
        .modify(dn, vec![Mod::Delete("uid".to_string(), set(&[]))])
        .expect("modify");
    assert_eq!(r.rc, 64, "delete RDN value → namingViolation");
    let r = c
        .modify(
            "uid=ghost,ou=people,dc=example,dc=com",
            vec![Mod::Replace("sn", ["x"].into())],
        )
        .expect("modify");
    assert_eq!(r.rc, 32, "no such entry");
    assert_eq!(r.matched.to_lowercase(), PEOPLE);

    // compare
    assert_eq!(
        c.compare(dn, "mail", "zed@example.org")
            .expect("compare")
            .0
            .rc,
        6,
        "compareTrue"
    );
    assert_eq!(
        c.compare(dn, "mail", "ZED@EXAMPLE.ORG")
            .expect("compare")
            .0
            .rc,
        6,
        "mail matches case-insensitively"
    );
    assert_eq!(
        c.compare(dn, "mail", "other@example.org")
            .expect("compare")
            .0
            .rc,
        5,
        "compareFalse"
    );
    assert!(c
        .compare(dn, "sn", "test")
        .expect("compare")
        .equal()
        .expect("compare ok"));
    assert_eq!(
        c.compare(dn, "description", "x").expect("compare").0.rc,
        16,
        "attribute not in entry"
    );
    assert_eq!(
        c.compare(dn, "fooBarBaz", "x").expect("compare").0.rc,
        17,
        "unknown attribute"
    );
    let r = c
        .compare("uid=ghost,ou=people,dc=example,dc=com", "sn", "x")
        .expect("compare")
        .0;
    assert_eq!(r.rc, 32, "compare of a missing entry");
    assert_eq!(r.matched.to_lowercase(), PEOPLE);
}

#[test]
fn modrdn_renames_and_moves_subtrees() {
    let srv = TestServer::start(true);
    let mut c = srv.admin();
    let dn = "uid=mover,ou=people,dc=example,dc=com";
    assert_eq!(c.add(dn, person("mover")).expect("add").rc, 0);

    // deleteoldrdn = true: old RDN value removed
    let r = c.modifydn(dn, "uid=moved", true, None).expect("modrdn");
    assert_eq!(r.rc, 0, "{r:?}");
    assert!(!exists(&mut c, dn));
    let e = one(&mut c, "uid=moved,ou=people,dc=example,dc=com", &["uid"]);
    assert_eq!(values(&e, "uid"), vec![b"moved".to_vec()]);

    // deleteoldrdn = false: old RDN value kept
    let r = c
        .modifydn(
            "uid=moved,ou=people,dc=example,dc=com",
            "uid=moved2",
            false,
            None,
        )
        .expect("modrdn");
    assert_eq!(r.rc, 0, "{r:?}");
    let e = one(&mut c, "uid=moved2,ou=people,dc=example,dc=com", &["uid"]);
    let mut uids = values(&e, "uid");
    uids.sort();
    assert_eq!(uids, vec![b"moved".to_vec(), b"moved2".to_vec()]);

    // renaming onto an existing entry fails
    let r = c
        .modifydn(
            "uid=moved2,ou=people,dc=example,dc=com",
            "uid=alice",
            true,
            None,
        )
        .expect("modrdn");
    assert_eq!(r.rc, 68, "target exists → entryAlreadyExists");

    // newSuperior: move a subtree with children and a grandchild
    let proj = "ou=projects,dc=example,dc=com";
    assert_eq!(
        c.add(
            proj,
            attrs(&[
                ("objectClass", &["organizationalUnit"]),
                ("ou", &["projects"])
            ])
        )
        .expect("add")
        .rc,
        0
    );
    for p in ["apollo", "gemini"] {
        let pdn = format!("ou={p},{proj}");
        assert_eq!(
            c.add(
                &pdn,
                attrs(&[("objectClass", &["organizationalUnit"]), ("ou", &[p])])
            )
            .expect("add")
            .rc,
            0
        );
        let role = format!("cn=lead,{pdn}");
        assert_eq!(
            c.add(
                &role,
                attrs(&[("objectClass", &["organizationalRole"]), ("cn", &["lead"])])
            )
            .expect("add")
            .rc,
            0
        );
    }
    assert_eq!(
        search_ok(&mut c, proj, Scope::Subtree, "(objectClass=*)", &["1.1"]).len(),
        5
    );

    let r = c
        .modifydn(
            proj,
            "ou=projects",
            true,
            Some("ou=groups,dc=example,dc=com"),
        )
        .expect("modrdn");
    assert_eq!(r.rc, 0, "move subtree: {r:?}");
    let new_base = "ou=projects,ou=groups,dc=example,dc=com";
    let moved = search_ok(
        &mut c,
        new_base,
        Scope::Subtree,
        "(objectClass=*)",
        &["1.1"],
    );
    assert_eq!(
        dns(&moved),
        vec![
            "cn=lead,ou=apollo,ou=projects,ou=groups,dc=example,dc=com",
            "cn=lead,ou=gemini,ou=projects,ou=groups,dc=example,dc=com",
            "ou=apollo,ou=projects,ou=groups,dc=example,dc=com",
            "ou=gemini,ou=projects,ou=groups,dc=example,dc=com",
            "ou=projects,ou=groups,dc=example,dc=com",
        ]
    );
    let (_, rc) = search(&mut c, proj, Scope::Subtree, "(objectClass=*)", &["1.1"]);
    assert_eq!(rc, 32, "old subtree base is gone");
    assert!(!exists(
        &mut c,
        "cn=lead,ou=apollo,ou=projects,dc=example,dc=com"
    ));
    // found by filter from the top, only at the new place
    let leads = search_ok(&mut c, BASE, Scope::Subtree, "(cn=lead)", &["1.1"]);
    assert_eq!(leads.len(), 2);
    assert!(
        leads
            .iter()
            .all(|e| e.dn.to_lowercase().ends_with(new_base)),
        "{:?}",
        dns(&leads)
    );
    // entryDN follows the move
    let e = one(
        &mut c,
        "cn=lead,ou=gemini,ou=projects,ou=groups,dc=example,dc=com",
        &["entryDN"],
    );
    assert_eq!(
        String::from_utf8_lossy(&values(&e, "entryDN")[0]).to_lowercase(),
        "cn=lead,ou=gemini,ou=projects,ou=groups,dc=example,dc=com"
    );

    // moving under a missing parent
    let r = c
        .modifydn(
            new_base,
            "ou=projects",
            true,
            Some("ou=nowhere,dc=example,dc=com"),
        )
        .expect("modrdn");
    assert_eq!(r.rc, 32, "new superior missing: {r:?}");
    // moving an entry below itself
    let r = c
        .modifydn(
            new_base,
            "ou=projects",
            true,
            Some("ou=apollo,ou=projects,ou=groups,dc=example,dc=com"),
        )
        .expect("modrdn");
    assert_ne!(r.rc, 0, "an entry cannot become its own descendant");
    assert!(exists(&mut c, new_base));
}

#[test]
fn delete_leaf_nonleaf_missing() {
    let srv = TestServer::start(true);
    let mut c = srv.admin();
    let r = c.delete(PEOPLE).expect("delete");
    assert_eq!(r.rc, 66, "non-leaf → notAllowedOnNonLeaf: {r:?}");
    assert!(exists(&mut c, ALICE));

    let r = c
        .delete("cn=mail,ou=services,dc=example,dc=com")
        .expect("delete");
    assert_eq!(r.rc, 0, "{r:?}");
    assert!(!exists(&mut c, "cn=mail,ou=services,dc=example,dc=com"));
    // now a leaf
    assert_eq!(
        c.delete("ou=services,dc=example,dc=com")
            .expect("delete")
            .rc,
        0
    );

    let r = c
        .delete("uid=ghost,ou=people,dc=example,dc=com")
        .expect("delete");
    assert_eq!(r.rc, 32, "missing → noSuchObject");
    assert_eq!(
        r.matched.to_lowercase(),
        PEOPLE,
        "matched DN is the deepest existing ancestor"
    );
    let r = c
        .delete("cn=x,ou=missing,dc=example,dc=com")
        .expect("delete");
    assert_eq!(r.rc, 32);
    assert_eq!(r.matched.to_lowercase(), BASE);
}

#[test]
fn writes_need_the_right_identity() {
    let srv = TestServer::start(true);
    let mut anon = srv.anon();
    let r = anon
        .add("uid=x,ou=people,dc=example,dc=com", person("x"))
        .expect("add");
    assert_eq!(r.rc, 8, "anonymous add → strongerAuthRequired: {r:?}");
    assert_eq!(r.text, "modifications require authentication");
    assert_eq!(
        anon.modify(ALICE, vec![Mod::Replace("sn", ["x"].into())])
            .expect("modify")
            .rc,
        8
    );
    assert_eq!(anon.delete(ALICE).expect("delete").rc, 8);

    let mut alice = srv.bind_as(ALICE, "password");
    assert_eq!(
        alice
            .add("uid=x,ou=people,dc=example,dc=com", person("x"))
            .expect("add")
            .rc,
        50,
        "user add"
    );
    assert_eq!(
        alice
            .modify(BOB, vec![Mod::Replace("sn", ["x"].into())])
            .expect("modify")
            .rc,
        50,
        "user modifies another"
    );
    assert_eq!(
        alice
            .modify(ALICE, vec![Mod::Replace("sn", ["x"].into())])
            .expect("modify")
            .rc,
        50,
        "user modifies own sn"
    );
    assert_eq!(
        alice
            .delete("cn=mail,ou=services,dc=example,dc=com")
            .expect("delete")
            .rc,
        50,
        "user delete"
    );
    assert_eq!(
        alice
            .modifydn(BOB, "uid=bobby", true, None)
            .expect("modrdn")
            .rc,
        50,
        "user modrdn"
    );
    // nothing changed
    let mut admin = srv.admin();
    assert_eq!(
        values(&one(&mut admin, BOB, &["sn"]), "sn"),
        vec![b"Brown".to_vec()]
    );

    // a user may replace their own password by modify, and bind with it
    let r = alice
        .modify(
            ALICE,
            vec![Mod::Replace("userPassword", ["by-modify"].into())],
        )
        .expect("modify");
    assert_eq!(r.rc, 0, "self password modify: {r:?}");
    assert_eq!(srv.bind_rc(ALICE, "by-modify"), 0);
    assert_eq!(srv.bind_rc(ALICE, "password"), 49);
    // stored hashed
    let stored = values(&one(&mut admin, ALICE, &["userPassword"]), "userPassword");
    assert_eq!(stored.len(), 1);
    assert!(
        stored[0].starts_with(b"{") && stored[0] != b"by-modify",
        "stored as given: {:?}",
        String::from_utf8_lossy(&stored[0])
    );
    // but not someone else's
    let r = alice
        .modify(BOB, vec![Mod::Replace("userPassword", ["hijack"].into())])
        .expect("modify");
    assert_eq!(r.rc, 50);
    assert_eq!(srv.bind_rc(BOB, "password"), 0);
}

// ---------------------------------------------------------------------------------------------
// Search

#[test]
fn search_scopes_count_entries() {
    let srv = TestServer::start(true);
    let mut c = srv.anon();
    let f = "(objectClass=*)";
    assert_eq!(search_ok(&mut c, PEOPLE, Scope::Base, f, &["1.1"]).len(), 1);
    assert_eq!(
        search_ok(&mut c, PEOPLE, Scope::OneLevel, f, &["1.1"]).len(),
        10
    );
    assert_eq!(
        search_ok(&mut c, PEOPLE, Scope::Subtree, f, &["1.1"]).len(),
        11
    );
    assert_eq!(
        dns(&search_ok(&mut c, BASE, Scope::OneLevel, f, &["1.1"])),
        vec![
            "ou=groups,dc=example,dc=com",
            "ou=people,dc=example,dc=com",
            "ou=services,dc=example,dc=com"
        ]
    );
    // suffix + 3 OUs + 10 people + 3 groups + 1 service
    assert_eq!(
        search_ok(&mut c, BASE, Scope::Subtree, f, &["1.1"]).len(),
        18
    );
    assert_eq!(
        search_ok(&mut c, ALICE, Scope::OneLevel, f, &["1.1"]).len(),
        0,
        "leaf has no children"
    );

    let (_, rc) = search(
        &mut c,
        "uid=ghost,ou=people,dc=example,dc=com",
        Scope::Base,
        f,
        &["1.1"],
    );
    assert_eq!(rc, 32, "missing base");
    let (_, rc) = search(&mut c, "dc=elsewhere,dc=org", Scope::Subtree, f, &["1.1"]);
    assert_eq!(rc, 32, "base outside the naming contexts");
    let (_, rc) = search(&mut c, "this is not a DN", Scope::Base, f, &["1.1"]);
    assert_eq!(rc, 34, "invalid base DN");
}

#[test]
fn search_filters_of_every_kind() {
    let srv = TestServer::start(true);
    let mut c = srv.anon();
    let mut count =
        |filter: &str| search_ok(&mut c, PEOPLE, Scope::Subtree, filter, &["1.1"]).len();
    assert_eq!(count("(uid=alice)"), 1, "equality");
    assert_eq!(count("(UID=ALICE)"), 1, "type and value case-insensitive");
    assert_eq!(count("(cn=a*)"), 1, "initial substring");
    assert_eq!(
        count("(sn=*n)"),
        4,
        "final substring: Anderson Brown Chen Hansen"
    );
    assert_eq!(
        count("(cn=*an*)"),
        5,
        "any substring: Alice Anderson, Erin Evans, Frank, Heidi Hansen, Ivan Ivanov"
    );
    assert_eq!(count("(cn=I*an*ov)"), 1, "initial, any and final");
    assert_eq!(
        count("(title=*Engineer*)"),
        6,
        "substring matches 'Engineering Manager' too"
    );
    assert_eq!(
        count("(uidNumber>=10002)"),
        1,
        "greaterOrEqual, integer ordering"
    );
    assert_eq!(count("(uidNumber<=10001)"), 1, "lessOrEqual");
    assert_eq!(count("(uidNumber>=9)"), 2, "integer, not string, ordering");
    assert_eq!(count("(uidNumber=*)"), 2, "present");
    assert_eq!(count("(objectClass=*)"), 11, "present objectClass");
    assert_eq!(count("(&(objectClass=inetOrgPerson)(title=*Engineer))"), 5);
    assert_eq!(count("(|(uid=alice)(uid=bob)(uid=nobody))"), 2, "or");
    assert_eq!(count("(!(uid=alice))"), 10, "not: ou=people and 9 people");
    assert_eq!(count("(&(objectClass=posixAccount)(!(uid=bob)))"), 1);
    assert_eq!(count("(&)"), 11, "absolute true (RFC 4526)");
    assert_eq!(count("(|)"), 0, "absolute false (RFC 4526)");
    assert_eq!(
        count("(cn:caseExactMatch:=Alice Anderson)"),
        1,
        "extensible with rule"
    );
    assert_eq!(
        count("(cn:caseExactMatch:=alice anderson)"),
        0,
        "extensible, case-exact"
    );
    assert_eq!(
        count("(ou:dn:=people)"),
        11,
        "extensible :dn: matches RDN values of the entry's DN"
    );
    assert_eq!(
        count("(:caseIgnoreMatch:=alice)"),
        1,
        "extensible without type"
    );
    assert_eq!(
        count("(unknownAttr=x)"),
        0,
        "undefined attribute → Undefined, no error"
    );
    assert_eq!(count("(!(unknownAttr=x))"), 0, "NOT Undefined is Undefined");
    assert_eq!(count("(|(unknownAttr=x)(uid=bob))"), 1, "Undefined OR TRUE");
    assert_eq!(
        count("(uidNumber=abc)"),
        0,
        "assertion invalid for syntax → Undefined"
    );

    let approx = search_ok(
        &mut c,
        PEOPLE,
        Scope::Subtree,
        "(cn~=Alice Anderson)",
        &["1.1"],
    );
    assert!(
        dns(&approx).contains(&ALICE.to_string()),
        "approx match: {:?}",
        dns(&approx)
    );
    assert!(!dns(&approx).contains(&BOB.to_string()));

    let eng = search_ok(
        &mut c,
        BASE,
        Scope::Subtree,
        &format!("(member={ALICE})"),
        &["cn"],
    );
    assert_eq!(
        dns(&eng),
        vec!["cn=engineering,ou=groups,dc=example,dc=com"],
        "DN-syntax equality"
    );
    let eng = search_ok(
        &mut c,
        BASE,
        Scope::Subtree,
        "(member=UID=Alice,OU=People,DC=Example,DC=Com)",
        &["cn"],
    );
    assert_eq!(eng.len(), 1, "DN values compare normalised");
}

#[test]
fn size_limit_returns_exactly_n_entries() {
    let srv = TestServer::start(true);
    let mut c = srv.anon();
    let r = c
        .with_search_options(SearchOptions::new().sizelimit(3))
        .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!(r.1.rc, 4, "sizeLimitExceeded");
    assert_eq!(r.0.len(), 3, "exactly the limit");
    // limit equal to the result count is not exceeded
    let r = c
        .with_search_options(SearchOptions::new().sizelimit(10))
        .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!((r.1.rc, r.0.len()), (0, 10));
}

#[test]
fn operational_attributes_only_on_request() {
    let srv = TestServer::start(true);
    let mut c = srv.anon();
    let ops = [
        "createTimestamp",
        "modifyTimestamp",
        "creatorsName",
        "modifiersName",
        "entryUUID",
        "entryDN",
        "structuralObjectClass",
        "hasSubordinates",
        "subschemaSubentry",
    ];
    for sel in [&[][..], &["*"][..]] {
        let e = one(&mut c, ALICE, sel);
        assert!(
            has_attr(&e, "uid") && has_attr(&e, "mail"),
            "user attributes for {sel:?}"
        );
        for a in ops {
            assert!(
                !has_attr(&e, a),
                "{a} returned for {sel:?} without being asked"
            );
        }
    }
    let e = one(&mut c, ALICE, &["+"]);
    for a in ops {
        assert!(has_attr(&e, a), "{a} missing for '+': {:?}", e.attrs.keys());
    }
    assert!(!has_attr(&e, "uid"), "'+' alone returns no user attributes");
    let s = |a: &str| String::from_utf8_lossy(&values(&e, a)[0]).into_owned();
    assert_eq!(s("structuralObjectClass").to_lowercase(), "inetorgperson");
    assert_eq!(s("hasSubordinates"), "FALSE");
    assert_eq!(s("entryDN").to_lowercase(), ALICE);
    assert_eq!(s("subschemaSubentry").to_lowercase(), "cn=subschema");
    assert_eq!(s("entryUUID").len(), 36, "entryUUID is a UUID string");
    assert!(
        s("createTimestamp").ends_with('Z') && s("createTimestamp").len() >= 15,
        "GeneralizedTime"
    );

    let e = one(&mut c, ALICE, &["*", "+"]);
    assert!(has_attr(&e, "uid") && has_attr(&e, "entryUUID"));
    let e = one(&mut c, ALICE, &["entryUUID", "cn"]);
    assert!(
        has_attr(&e, "entryUUID")
            && has_attr(&e, "cn")
            && !has_attr(&e, "createTimestamp")
            && !has_attr(&e, "sn")
    );
    let e = one(&mut c, ALICE, &["1.1"]);
    assert!(
        e.attrs.is_empty() && e.bin_attrs.is_empty(),
        "1.1 returns no attributes"
    );

    let e = one(&mut c, PEOPLE, &["hasSubordinates", "numSubordinates"]);
    assert_eq!(values(&e, "hasSubordinates"), vec![b"TRUE".to_vec()]);
    assert_eq!(values(&e, "numSubordinates"), vec![b"10".to_vec()]);

    // timestamps and names reflect who changed the entry
    let mut admin = srv.admin();
    assert_eq!(
        admin
            .modify(ALICE, vec![Mod::Replace("title", ["CTO"].into())])
            .expect("modify")
            .rc,
        0
    );
    let e = one(&mut c, ALICE, &["modifiersName"]);
    assert_eq!(
        String::from_utf8_lossy(&values(&e, "modifiersName")[0]).to_lowercase(),
        ADMIN_DN
    );
    // and cannot be written
    let r = admin
        .modify(
            ALICE,
            vec![Mod::Replace("modifyTimestamp", ["20000101000000Z"].into())],
        )
        .expect("modify");
    assert_eq!(r.rc, 19, "NO-USER-MODIFICATION → constraintViolation");
}

#[test]
fn attribute_selection_supertype_and_types_only() {
    let srv = TestServer::start(true);
    let mut c = srv.anon();
    let e = one(&mut c, ALICE, &["name"]);
    assert!(
        has_attr(&e, "cn") && has_attr(&e, "sn"),
        "'name' returns its subtypes cn and sn: {:?}",
        e.attrs.keys()
    );
    assert!(has_attr(&e, "givenName"), "givenName is a subtype of name");
    assert!(!has_attr(&e, "mail") && !has_attr(&e, "uid") && !has_attr(&e, "objectClass"));
    assert_eq!(values(&e, "cn"), vec![b"Alice Anderson".to_vec()]);

    let e = one(&mut c, ALICE, &["CN", "unknownAttrXyz"]);
    assert!(
        has_attr(&e, "cn") && e.attrs.len() + e.bin_attrs.len() == 1,
        "unknown requested attribute ignored"
    );

    let r = c
        .with_search_options(SearchOptions::new().typesonly(true))
        .search(ALICE, Scope::Base, "(objectClass=*)", vec!["cn", "sn"])
        .expect("search");
    assert_eq!(r.1.rc, 0);
    let e = SearchEntry::construct(r.0.into_iter().next().expect("entry"));
    assert!(has_attr(&e, "cn"), "typesOnly still names the attribute");
    assert!(
        values(&e, "cn").is_empty(),
        "typesOnly returns no values: {e:?}"
    );
}

#[test]
fn dn_normalisation_on_requests() {
    let srv = TestServer::start(true);
    let mut c = srv.anon();
    let e = search_ok(
        &mut c,
        "UID=Alice , OU=People,dc=Example,DC=com",
        Scope::Base,
        "(objectClass=*)",
        &["uid"],
    );
    assert_eq!(e.len(), 1, "differently spelled DN finds the entry");
    assert_eq!(values(&e[0], "uid"), vec![b"alice".to_vec()]);
    let e = search_ok(
        &mut c,
        "ou=PEOPLE,dc=EXAMPLE,dc=COM",
        Scope::OneLevel,
        "(uid=bob)",
        &["1.1"],
    );
    assert_eq!(e.len(), 1);
    assert_eq!(
        c.compare("uid=ALICE,ou=people,DC=example,dc=com", "sn", "Anderson")
            .expect("compare")
            .0
            .rc,
        6
    );

    let mut admin = srv.admin();
    let r = admin
        .modify(
            "UID=Alice , OU=People,dc=Example,DC=com",
            vec![Mod::Replace("title", ["Chief"].into())],
        )
        .expect("modify");
    assert_eq!(r.rc, 0, "modify by a differently spelled DN");
    assert_eq!(
        values(&one(&mut c, ALICE, &["title"]), "title"),
        vec![b"Chief".to_vec()]
    );
    // adding the same entry under another spelling collides
    assert_eq!(
        admin
            .add("UID=ALICE,ou=People,dc=example,dc=com", person("alice"))
            .expect("add")
            .rc,
        68
    );
}

// ---------------------------------------------------------------------------------------------
// userPassword and Password Modify

#[test]
fn user_password_visible_only_to_admin() {
    let srv = TestServer::start(true);
    for (who, mut c) in [
        ("anonymous", srv.anon()),
        ("alice herself", srv.bind_as(ALICE, "password")),
        ("bob", srv.bind_as(BOB, "password")),
    ] {
        for sel in [&["userPassword"][..], &["*"][..], &[][..]] {
            let e = one(&mut c, ALICE, sel);
            assert!(
                !has_attr(&e, "userPassword"),
                "{who} got userPassword with {sel:?}"
            );
        }
        let r = c
            .compare(ALICE, "userPassword", "password")
            .expect("compare")
            .0;
        assert_eq!(
            r.rc, 50,
            "{who} compare userPassword → insufficientAccessRights"
        );
        // nor can it be probed by filter
        let e = search_ok(
            &mut c,
            PEOPLE,
            Scope::OneLevel,
            "(userPassword=*)",
            &["1.1"],
        );
        assert!(
            e.is_empty(),
            "{who} could filter on userPassword: {}",
            e.len()
        );
    }
    let mut admin = srv.admin();
    for sel in [&["userPassword"][..], &["*"][..]] {
        let e = one(&mut admin, ALICE, sel);
        let v = values(&e, "userPassword");
        assert_eq!(v.len(), 1, "admin sees userPassword with {sel:?}");
        assert!(
            v[0].starts_with(b"{"),
            "hashed with a {{SCHEME}} prefix: {:?}",
            String::from_utf8_lossy(&v[0])
        );
        assert!(
            !v[0].windows(8).any(|w| w == b"password"),
            "cleartext stored"
        );
    }
    // As in slapd, compare matches the stored (hashed) value with octetStringMatch: the
    // cleartext is FALSE, the stored hash is TRUE (verified against slapd 2.5).
    let stored = values(&one(&mut admin, ALICE, &["userPassword"]), "userPassword").remove(0);
    assert_eq!(
        admin
            .compare(ALICE, "userPassword", "password")
            .expect("compare")
            .0
            .rc,
        5,
        "cleartext"
    );
    assert_eq!(
        admin
            .compare(ALICE, "userPassword", &stored)
            .expect("compare")
            .0
            .rc,
        6,
        "stored value"
    );
}

#[test]
fn password_modify_self_and_by_admin() {
    let srv = TestServer::start(true);
    // self, with the old password
    let mut alice = srv.bind_as(ALICE, "password");
    let r = alice
        .extended(PasswordModify {
            user_id: None,
            old_pass: Some("password"),
            new_pass: Some("n3w-secret"),
        })
        .expect("passwd request");
    assert_eq!(r.1.rc, 0, "{:?}", r.1);
    assert_eq!(
        srv.bind_rc(ALICE, "n3w-secret"),
        0,
        "bind with the new password"
    );
    assert_eq!(
        srv.bind_rc(ALICE, "password"),
        49,
        "old password no longer works"
    );
    // wrong old password
    let r = alice
        .extended(PasswordModify {
            user_id: None,
            old_pass: Some("password"),
            new_pass: Some("again"),
        })
        .expect("passwd request");
    assert_ne!(r.1.rc, 0, "wrong old password accepted");
    assert_eq!(srv.bind_rc(ALICE, "n3w-secret"), 0);
    // a user cannot set someone else's
    let r = alice
        .extended(PasswordModify {
            user_id: Some(BOB),
            old_pass: None,
            new_pass: Some("stolen"),
        })
        .expect("passwd request");
    assert_eq!(r.1.rc, 50, "user changes another's password");
    assert_eq!(srv.bind_rc(BOB, "password"), 0);
    // anonymous cannot either
    let r = srv
        .anon()
        .extended(PasswordModify {
            user_id: Some(BOB),
            old_pass: None,
            new_pass: Some("stolen"),
        })
        .expect("passwd request");
    assert_ne!(r.1.rc, 0, "anonymous password modify accepted");

    // admin, no new password: the server generates one and returns it
    let mut admin = srv.admin();
    let (exop, res) = admin
        .extended(PasswordModify {
            user_id: Some(BOB),
            old_pass: None,
            new_pass: None,
        })
        .expect("passwd request")
        .success()
        .expect("generated password");
    assert_eq!(res.rc, 0);
    assert!(
        exop.val.is_some(),
        "no responseValue (genPasswd) when the server generated the password"
    );
    let generated = exop.parse::<PasswordModifyResp>().gen_pass;
    assert!(
        generated.len() >= 8,
        "generated password too short: {generated:?}"
    );
    assert_eq!(
        srv.bind_rc(BOB, &generated),
        0,
        "bind with the generated password"
    );
    assert_eq!(srv.bind_rc(BOB, "password"), 49);
    // admin with an explicit password: no value in the response
    let (exop, _) = admin
        .extended(PasswordModify {
            user_id: Some(BOB),
            old_pass: None,
            new_pass: Some("chosen"),
        })
        .expect("passwd request")
        .success()
        .expect("password set");
    assert!(
        exop.val.as_deref().unwrap_or_default().is_empty(),
        "no genPasswd when one was given"
    );
    assert_eq!(srv.bind_rc(BOB, "chosen"), 0);
    // the stored value is hashed
    let v = values(&one(&mut admin, BOB, &["userPassword"]), "userPassword");
    assert!(v.len() == 1 && v[0].starts_with(b"{"), "{v:?}");
    // missing user
    let r = admin
        .extended(PasswordModify {
            user_id: Some("uid=ghost,ou=people,dc=example,dc=com"),
            old_pass: None,
            new_pass: Some("x"),
        })
        .expect("passwd request");
    assert_ne!(r.1.rc, 0, "password set on a missing entry");
}

// ---------------------------------------------------------------------------------------------
// Schema

#[test]
fn schema_violations_on_add_and_modify() {
    let srv = TestServer::start(true);
    let mut c = srv.admin();
    let dn = |u: &str| format!("uid={u},ou=people,dc=example,dc=com");

    let r = c
        .add(
            &dn("nosn"),
            attrs(&[
                ("objectClass", &["inetOrgPerson"]),
                ("uid", &["nosn"]),
                ("cn", &["No Sn"]),
            ]),
        )
        .expect("add");
    assert_eq!(r.rc, 65, "missing MUST sn → objectClassViolation: {r:?}");

    let mut a = person("unk");
    a.push(("fooBarUnknown".to_string(), set(&["x"])));
    assert_eq!(
        c.add(&dn("unk"), a).expect("add").rc,
        17,
        "unknown attribute → undefinedAttributeType"
    );

    let mut a = person("badsyntax");
    a[0] = (
        "objectClass".to_string(),
        set(&["inetOrgPerson", "posixAccount"]),
    );
    a.extend(attrs(&[
        ("uidNumber", &["abc"]),
        ("gidNumber", &["1"]),
        ("homeDirectory", &["/home/x"]),
    ]));
    assert_eq!(
        c.add(&dn("badsyntax"), a).expect("add").rc,
        21,
        "uidNumber=abc → invalidAttributeSyntax"
    );

    let mut a = person("twice");
    a.push(("displayName".to_string(), set(&["One", "Two"])));
    assert_eq!(
        c.add(&dn("twice"), a).expect("add").rc,
        19,
        "single-valued twice → constraintViolation"
    );

    let mut a = person("notallowed");
    a.push(("dc".to_string(), set(&["x"])));
    assert_eq!(
        c.add(&dn("notallowed"), a).expect("add").rc,
        65,
        "attribute not allowed"
    );

    let a = attrs(&[("objectClass", &["top"]), ("uid", &["nostruct"])]);
    assert_eq!(
        c.add(&dn("nostruct"), a).expect("add").rc,
        65,
        "no structural object class"
    );

    let mut a = person("unkoc");
    a[0] = (
        "objectClass".to_string(),
        set(&["inetOrgPerson", "noSuchClass"]),
    );
    assert_eq!(
        c.add(&dn("unkoc"), a).expect("add").rc,
        21,
        "unknown objectClass"
    );

    let mut a = person("ts");
    a.push(("createTimestamp".to_string(), set(&["20000101000000Z"])));
    assert_eq!(
        c.add(&dn("ts"), a).expect("add").rc,
        19,
        "NO-USER-MODIFICATION attribute"
    );

    let r = c
        .add("uid=orphan,ou=nowhere,dc=example,dc=com", person("orphan"))
        .expect("add");
    assert_eq!(r.rc, 32, "parent missing");
    assert_eq!(r.matched.to_lowercase(), BASE);
    assert_eq!(
        c.add(
            "dc=other,dc=org",
            attrs(&[
                ("objectClass", &["dcObject", "organization"]),
                ("o", &["x"])
            ])
        )
        .expect("add")
        .rc,
        53
    );

    // none of the failed adds left anything behind
    let left = search_ok(&mut c, PEOPLE, Scope::OneLevel, "(objectClass=*)", &["1.1"]);
    assert_eq!(left.len(), 10, "{:?}", dns(&left));

    // the same checks on modify
    let m = |c: &mut LdapConn, mods: Vec<Mod<&str>>| c.modify(ALICE, mods).expect("modify").rc;
    assert_eq!(
        m(&mut c, vec![Mod::Replace("uidNumber", ["abc"].into())]),
        21
    );
    assert_eq!(m(&mut c, vec![Mod::Add("fooBarUnknown", ["x"].into())]), 17);
    assert_eq!(
        m(&mut c, vec![Mod::Replace("displayName", ["A", "B"].into())]),
        19
    );
    assert_eq!(
        m(
            &mut c,
            vec![Mod::Replace("objectClass", ["organizationalUnit"].into())]
        ),
        69,
        "structural class change"
    );
    assert_eq!(
        m(&mut c, vec![Mod::Increment("telephoneNumber", "1")]),
        19,
        "increment non-integer"
    );
    assert_eq!(
        m(&mut c, vec![Mod::Increment("uidNumber", "5")]),
        0,
        "increment integer"
    );
    assert_eq!(
        values(&one(&mut c, ALICE, &["uidNumber"]), "uidNumber"),
        vec![b"10006".to_vec()]
    );
}

#[test]
fn rdn_value_joins_entry_on_add() {
    let srv = TestServer::start(true);
    let mut c = srv.admin();
    let dn = "uid=rdnonly,ou=people,dc=example,dc=com";
    let a = attrs(&[
        ("objectClass", &["inetOrgPerson"]),
        ("cn", &["Rdn Only"]),
        ("sn", &["Only"]),
    ]);
    let r = c.add(dn, a).expect("add");
    assert_eq!(r.rc, 0, "RDN attribute not listed → still accepted: {r:?}");
    let e = one(&mut c, dn, &["uid"]);
    assert_eq!(
        values(&e, "uid"),
        vec![b"rdnonly".to_vec()],
        "RDN value added to the entry"
    );
    assert_eq!(
        search_ok(&mut c, PEOPLE, Scope::OneLevel, "(uid=rdnonly)", &["1.1"]).len(),
        1,
        "and indexed"
    );
    // multi-valued RDN
    let dn2 = "cn=Multi+sn=Valued,ou=people,dc=example,dc=com";
    assert_eq!(
        c.add(dn2, attrs(&[("objectClass", &["person"])]))
            .expect("add")
            .rc,
        0
    );
    let e = one(&mut c, dn2, &["cn", "sn"]);
    assert_eq!(
        (values(&e, "cn"), values(&e, "sn")),
        (vec![b"Multi".to_vec()], vec![b"Valued".to_vec()])
    );
}

// ---------------------------------------------------------------------------------------------
// Root DSE, subschema, controls, extended operations

#[test]
fn root_dse_and_subschema() {
    let srv = TestServer::start(false);
    let mut c = srv.anon();
    let e = one(&mut c, "", &["+"]);
    let contexts: Vec<String> = values(&e, "namingContexts")
        .iter()
        .map(|v| String::from_utf8_lossy(v).to_lowercase())
        .collect();
    assert_eq!(contexts, vec![BASE.to_string()]);
    let exts: Vec<Vec<u8>> = values(&e, "supportedExtension");
    assert!(
        exts.contains(&b"1.3.6.1.4.1.4203.1.11.3".to_vec()),
        "WhoAmI advertised"
    );
    assert!(
        exts.contains(&b"1.3.6.1.4.1.4203.1.11.1".to_vec()),
        "Password Modify advertised"
    );
    assert!(values(&e, "supportedLDAPVersion").contains(&b"3".to_vec()));
    assert_eq!(
        String::from_utf8_lossy(&values(&e, "subschemaSubentry")[0]).to_lowercase(),
        "cn=subschema"
    );
    // base scope only: the root DSE is not a parent of the naming contexts
    let (e, rc) = search(&mut c, "", Scope::OneLevel, "(objectClass=*)", &["1.1"]);
    assert!(
        rc != 0 || e.is_empty() || dns(&e) == vec![BASE.to_string()],
        "rc {rc} {:?}",
        dns(&e)
    );

    let r = c
        .search(
            "cn=Subschema",
            Scope::Base,
            "(objectClass=subschema)",
            vec!["attributeTypes", "objectClasses"],
        )
        .expect("search");
    assert_eq!(r.1.rc, 0);
    assert_eq!(r.0.len(), 1);
    let e = SearchEntry::construct(r.0.into_iter().next().expect("entry"));
    let ocs = values(&e, "objectClasses");
    assert!(
        ocs.iter()
            .any(|v| String::from_utf8_lossy(v).contains("'inetOrgPerson'")),
        "inetOrgPerson in objectClasses"
    );
    assert!(
        ocs.iter()
            .any(|v| String::from_utf8_lossy(v).contains("'posixAccount'")),
        "nis schema loaded"
    );
    let ats = values(&e, "attributeTypes");
    assert!(ats
        .iter()
        .any(|v| String::from_utf8_lossy(v).contains("'uidNumber'")));
}

#[test]
fn controls_and_unknown_extended_operation() {
    let srv = TestServer::start(true);
    let mut c = srv.anon();
    let crit = RawControl {
        ctype: "1.2.3.4.5.6.7.8.9".to_string(),
        crit: true,
        val: None,
    };
    let r = c
        .with_controls(crit)
        .search(ALICE, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!(
        r.1.rc, 12,
        "unknown critical control → unavailableCriticalExtension"
    );
    assert!(r.0.is_empty(), "no entries when the control is refused");

    let noncrit = RawControl {
        ctype: "1.2.3.4.5.6.7.8.9".to_string(),
        crit: false,
        val: Some(b"x".to_vec()),
    };
    let r = c
        .with_controls(noncrit)
        .search(ALICE, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!(
        (r.1.rc, r.0.len()),
        (0, 1),
        "non-critical unknown control ignored"
    );

    let crit = RawControl {
        ctype: "1.2.3.4.5.6.7.8.9".to_string(),
        crit: true,
        val: None,
    };
    let mut admin = srv.admin();
    let r = admin
        .with_controls(crit)
        .modify(ALICE, vec![Mod::Replace("title", ["X"].into())])
        .expect("modify");
    assert_eq!(r.rc, 12);
    assert_eq!(
        values(&one(&mut admin, ALICE, &["title"]), "title"),
        vec![b"Principal Engineer".to_vec()],
        "not applied"
    );

    let r = c
        .extended(Exop {
            name: Some("1.2.3.4.99".to_string()),
            val: None,
        })
        .expect("extended");
    assert_eq!(r.1.rc, 2, "unknown extended operation → protocolError");
    assert!(
        r.1.text.contains("1.2.3.4.99"),
        "message names the OID: {:?}",
        r.1.text
    );
    // the connection still works afterwards
    assert_eq!(whoami(&mut c), "");
}

#[test]
fn counters_match_operations_sent() {
    let srv = TestServer::start(true);
    let k = srv.server.counters();
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let before = [
        get(k.initiated(OpType::Bind)),
        get(k.initiated(OpType::Search)),
        get(k.initiated(OpType::Compare)),
        get(k.initiated(OpType::Add)),
        get(k.initiated(OpType::Delete)),
        get(k.initiated(OpType::Modify)),
        get(k.initiated(OpType::Modrdn)),
        get(k.initiated(OpType::Extended)),
        get(&k.connections),
    ];
    let mut c = srv.admin(); // 1 connection, 1 bind
    for _ in 0..10 {
        search_ok(&mut c, ALICE, Scope::Base, "(objectClass=*)", &["1.1"]);
    }
    for _ in 0..3 {
        c.compare(ALICE, "sn", "Anderson").expect("compare");
    }
    c.add(
        "cn=counted,dc=example,dc=com",
        attrs(&[("objectClass", &["device"])]),
    )
    .expect("add");
    c.modify(
        "cn=counted,dc=example,dc=com",
        vec![Mod::Add("description", ["d"].into())],
    )
    .expect("modify");
    c.modify(
        "cn=counted,dc=example,dc=com",
        vec![Mod::Add("description", ["e"].into())],
    )
    .expect("modify");
    c.modifydn("cn=counted,dc=example,dc=com", "cn=counted2", true, None)
        .expect("modrdn");
    c.delete("cn=counted2,dc=example,dc=com").expect("delete");
    c.delete("cn=counted2,dc=example,dc=com").expect("delete"); // fails, still counted
    whoami(&mut c);
    whoami(&mut c);
    c.simple_bind(ALICE, "password").expect("bind");
    let mut d = srv.anon(); // 1 connection, no bind
    search_ok(&mut d, BASE, Scope::Base, "(objectClass=*)", &["1.1"]);
    let after = [
        get(k.initiated(OpType::Bind)),
        get(k.initiated(OpType::Search)),
        get(k.initiated(OpType::Compare)),
        get(k.initiated(OpType::Add)),
        get(k.initiated(OpType::Delete)),
        get(k.initiated(OpType::Modify)),
        get(k.initiated(OpType::Modrdn)),
        get(k.initiated(OpType::Extended)),
        get(&k.connections),
    ];
    let delta: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    assert_eq!(
        delta,
        vec![2, 11, 3, 1, 2, 2, 1, 2, 2],
        "deltas of bind, search, compare, add, delete, modify, modrdn, extended, connections"
    );
}
