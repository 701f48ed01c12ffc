//! The directory without a socket: a `Dit` over an in-memory store, changed by its operations
//! (`dit::add`, `dit::modify`, `dit::modrdn`, `dit::delete`) inside the write path's
//! `write_job` (stamps, overlay chain, all or nothing) and checked with its access and
//! assertion checks, as every protocol operation and start-up entry is.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::sync::Arc;

use common::*;

use dit::acl::Rights;
use dit::modify::Mod;
use dit::modrdn::Rename;
use dit::overlays::Applied;
use dit::write::{authorize, Assertion};
use dit::{Dit, Identity};
use proto::{ModOp, ResultCode};
use schema::Dn;

#[test]
fn a_change_is_stamped_with_increasing_csns() {
    let dit = setup();
    let a = add_person(&dit, "alice").unwrap();
    let b = add_person(&dit, "bob").unwrap();
    let csn = |applied: &Applied| {
        let e = applied.after.as_ref().unwrap();
        let v = e.attr(dit.known.entry_csn).unwrap().first().unwrap();
        String::from_utf8(v.to_vec()).unwrap()
    };
    let (ca, cb) = (csn(&a), csn(&b));
    assert!(ca < cb, "{ca} then {cb}");
    assert!(ca.ends_with("#007#000000"), "server id 7 in {ca}");
    assert_eq!(dit.store.read().len(), 3);
}

#[test]
fn an_overlay_refusal_rolls_the_whole_change_back() {
    let dit = setup();
    add_person(&dit, "alice").unwrap();
    let before = dit.store.read().len();
    // An entry repeating uid=alice under another RDN.
    let e = add(
        &dit,
        &format!("cn=other,{SUFFIX}"),
        &[
            ("objectClass", &["inetOrgPerson"]),
            ("cn", &["other"]),
            ("sn", &["other"]),
            ("uid", &["alice"]),
        ],
    )
    .err()
    .expect("the repeated uid is refused");
    assert_eq!(e.code, ResultCode::ConstraintViolation, "{e}");
    assert!(e.message.contains("uid=alice"), "{e}");
    // The refused entry left nothing behind.
    assert_eq!(dit.store.read().len(), before);
    let schema = dit.schema();
    assert!(dit
        .store
        .read()
        .lookup(&norm(&schema, &format!("cn=other,{SUFFIX}")))
        .is_none());
}

#[test]
fn write_access_is_checked_on_the_version_being_changed() {
    let dit = setup();
    add_person(&dit, "alice").unwrap();
    add_person(&dit, "bob").unwrap();
    let schema = dit.schema();
    let alice = Identity {
        dn: format!("uid=alice,{SUFFIX}"),
        ndn: Some(norm(&schema, &format!("uid=alice,{SUFFIX}"))),
        is_admin: false,
    };
    let v = dit.store.read();
    let bob = norm(&schema, &format!("uid=bob,{SUFFIX}"));
    let pw = schema.attr_by_name("userPassword");
    // The default rules: a user may change her own password, not another's, and may not
    // change other attributes at all.
    authorize(
        &dit,
        &v,
        &alice,
        &norm(&schema, &format!("uid=alice,{SUFFIX}")),
        &[(pw, Rights::WRITE)],
        true,
        "write",
    )
    .unwrap();
    let e = authorize(
        &dit,
        &v,
        &alice,
        &bob,
        &[(pw, Rights::WRITE)],
        true,
        "write",
    )
    .expect_err("another user's password");
    assert_eq!(e.code, ResultCode::InsufficientAccessRights, "{e}");
    let anonymous = Identity::default();
    let e = authorize(&dit, &v, &anonymous, &bob, &[], true, "write").unwrap_err();
    assert_eq!(e.code, ResultCode::StrongerAuthRequired, "{e}");
    // A missing entry is noSuchObject with the nearest visible ancestor.
    let missing = norm(&schema, &format!("uid=nobody,{SUFFIX}"));
    let e = authorize(&dit, &v, &alice, &missing, &[], true, "write").unwrap_err();
    assert_eq!(e.code, ResultCode::NoSuchObject);
    assert_eq!(e.matched, SUFFIX);
}

#[test]
fn the_assertion_control_sees_what_the_requester_may_search() {
    let dit = setup();
    add_person(&dit, "alice").unwrap();
    let schema = dit.schema();
    let v = dit.store.read();
    let alice = v
        .lookup(&norm(&schema, &format!("uid=alice,{SUFFIX}")))
        .unwrap();
    let filter = |text: &str| proto::Filter::parse(text).unwrap();
    let admin = Arc::new(Identity {
        dn: "cn=admin,dc=example,dc=com".into(),
        ndn: Some(dit.admin.clone()),
        is_admin: true,
    });
    Assertion::new(admin.clone(), filter("(sn=alice)"))
        .check(&dit, &v, alice)
        .unwrap();
    let e = Assertion::new(admin, filter("(sn=bob)"))
        .check(&dit, &v, alice)
        .unwrap_err();
    assert_eq!(e.code, ResultCode::AssertionFailed);
}

#[test]
fn authentication_identities_map_to_entries_by_dn_or_search() {
    use dit::authz::{AuthzMap, AuthzRuleSpec, Mapped};
    let dit = setup();
    add_person(&dit, "alice").unwrap();
    add_person(&dit, "bob").unwrap();
    let rule = |pattern: &str, replace: &str| AuthzRuleSpec {
        pattern: pattern.into(),
        replace: replace.into(),
    };
    let map = AuthzMap::compile(&[
        rule(
            r"gidNumber=0\+uidNumber=0,cn=peercred,cn=external,cn=auth",
            "cn=admin,dc=example,dc=com",
        ),
        rule(
            "cn=([^,]+),ou=certs",
            "ldap:///dc=example,dc=com??sub?(uid=$1)",
        ),
        rule(
            "cn=anyone,ou=certs2",
            "ldap:///dc=example,dc=com??sub?(sn=*)",
        ),
    ])
    .unwrap();
    let schema = dit.schema();
    assert_eq!(
        map.map(
            &dit,
            "gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth"
        ),
        Mapped::Dn(dit.admin.clone())
    );
    // The whole identity must match, case-insensitively.
    assert_eq!(
        map.map(
            &dit,
            "gidNumber=0+uidNumber=01,cn=peercred,cn=external,cn=auth"
        ),
        Mapped::Unmapped
    );
    assert_eq!(
        map.map(&dit, "CN=alice,OU=certs"),
        Mapped::Dn(norm(&schema, &format!("uid=alice,{SUFFIX}")))
    );
    assert!(
        matches!(map.map(&dit, "cn=carol,ou=certs"), Mapped::Nothing(m) if m.contains("no entry"))
    );
    assert!(
        matches!(map.map(&dit, "cn=anyone,ou=certs2"), Mapped::Nothing(m) if m.contains("more than one"))
    );
    let e = AuthzMap::compile(&[rule("(unclosed", "cn=x")]).unwrap_err();
    assert!(e.starts_with("authz_map rule 1: pattern:"), "{e}");
    let e = AuthzMap::compile(&[rule("x", "ldap:///dc=x??nowhere?(a=b)")]).unwrap_err();
    assert!(e.contains("unknown scope 'nowhere'"), "{e}");
}

/// Replaces the values of one attribute of the entry `dn`, as the administrator.
fn replace(dit: &Arc<Dit>, dn: &str, attr_name: &'static str, values: &[&str]) {
    let schema = dit.schema();
    let ndn = norm(&schema, dn);
    let ty = schema.attr_by_name(attr_name).unwrap();
    drop(schema);
    let mods = vec![Mod {
        op: ModOp::Replace,
        ty,
        options: String::new(),
        name: attr_name.into(),
        values: values.iter().map(|v| v.as_bytes().into()).collect(),
    }];
    let needs = dit::modify::needs(&mods);
    let who = admin(dit);
    change(dit, move |d, txn| {
        dit::modify::apply(d, txn, &who, &ndn, &needs, mods, None, false)
    })
    .unwrap();
}

/// Renames the entry `dn` to the single RDN `new_rdn` under the same parent, deleting the old
/// RDN value, as the administrator.
fn rename(dit: &Arc<Dit>, dn: &str, new_rdn: &str) {
    let schema = dit.schema();
    let rdn = Dn::parse(new_rdn).unwrap();
    let r = Rename {
        ndn: norm(&schema, dn),
        new_rdn_norm: rdn.normalize(&schema).unwrap(),
        new_rdn: rdn,
        delete_old_rdn: true,
        new_superior: None,
    };
    drop(schema);
    let who = admin(dit);
    change(dit, move |d, txn| dit::modrdn::apply(d, txn, &who, r, None)).unwrap();
}

/// Deletes the leaf entry `dn`, as the administrator.
fn delete(dit: &Arc<Dit>, dn: &str) {
    let ndn = norm(&dit.schema(), dn);
    let who = admin(dit);
    change(dit, move |d, txn| {
        dit::delete::apply(d, txn, &who, &ndn, None, false)
    })
    .unwrap();
}

fn memberof_directory() -> Arc<Dit> {
    let dit = setup_with(directory_with(&dit::overlays::MemberOfSpec {
        memberof: true,
        groups: dit::overlays::MemberOfSpec::default_groups(),
        refint: vec!["member".into(), "uniqueMember".into(), "seeAlso".into()],
    }));
    for uid in ["alice", "bob", "carol"] {
        add_person(&dit, uid).unwrap();
    }
    dit
}

const ALICE: &str = "uid=alice,dc=example,dc=com";
const BOB: &str = "uid=bob,dc=example,dc=com";
const CAROL: &str = "uid=carol,dc=example,dc=com";
const STAFF: &str = "cn=staff,dc=example,dc=com";

#[test]
fn group_changes_keep_memberof_in_the_same_change() {
    let dit = memberof_directory();
    add(
        &dit,
        STAFF,
        &[
            ("objectClass", &["groupOfNames"]),
            ("cn", &["staff"]),
            ("member", &[ALICE, "UID=Bob, DC=example,DC=com"]),
        ],
    )
    .unwrap();
    assert_eq!(values_of(&dit, ALICE, "memberOf"), [STAFF]);
    assert_eq!(values_of(&dit, BOB, "memberOf"), [STAFF]);
    assert!(values_of(&dit, CAROL, "memberOf").is_empty());
    // Adding carol and removing alice touches only them.
    let bob_csn = values_of(&dit, BOB, "entryCSN");
    replace(&dit, STAFF, "member", &[BOB, CAROL]);
    assert!(values_of(&dit, ALICE, "memberOf").is_empty());
    assert_eq!(values_of(&dit, CAROL, "memberOf"), [STAFF]);
    assert_eq!(
        values_of(&dit, BOB, "entryCSN"),
        bob_csn,
        "bob was not rewritten"
    );
    // A second kind of group.
    add(
        &dit,
        "cn=admins,dc=example,dc=com",
        &[
            ("objectClass", &["groupOfUniqueNames"]),
            ("cn", &["admins"]),
            ("uniqueMember", &[BOB]),
        ],
    )
    .unwrap();
    assert_eq!(
        values_of(&dit, BOB, "memberOf"),
        ["cn=admins,dc=example,dc=com", STAFF]
    );
    // Deleting the group removes it from its members.
    delete(&dit, STAFF);
    assert_eq!(
        values_of(&dit, BOB, "memberOf"),
        ["cn=admins,dc=example,dc=com"]
    );
    assert!(values_of(&dit, CAROL, "memberOf").is_empty());
}

#[test]
fn deletes_and_renames_follow_into_the_values_that_name_them() {
    let dit = memberof_directory();
    add(
        &dit,
        STAFF,
        &[
            ("objectClass", &["groupOfNames"]),
            ("cn", &["staff"]),
            ("member", &[ALICE, BOB]),
            ("seeAlso", &[CAROL]),
        ],
    )
    .unwrap();
    // Rename bob: the group names the new DN, and bob keeps his membership.
    rename(&dit, BOB, "uid=robert");
    assert_eq!(
        values_of(&dit, STAFF, "member"),
        [ALICE, "uid=robert,dc=example,dc=com"]
    );
    assert_eq!(
        values_of(&dit, "uid=robert,dc=example,dc=com", "memberOf"),
        [STAFF]
    );
    // Delete carol: the seeAlso naming her goes.
    delete(&dit, CAROL);
    assert!(values_of(&dit, STAFF, "seeAlso").is_empty());
    // A member added after the group named it gets its memberOf.
    replace(
        &dit,
        STAFF,
        "member",
        &[ALICE, "uid=dave,dc=example,dc=com"],
    );
    add_person(&dit, "dave").unwrap();
    assert_eq!(
        values_of(&dit, "uid=dave,dc=example,dc=com", "memberOf"),
        [STAFF]
    );
}

#[test]
fn a_renamed_subtree_renames_the_values_naming_entries_in_it() {
    let dit = memberof_directory();
    add(
        &dit,
        "ou=teams,dc=example,dc=com",
        &[("objectClass", &["organizationalUnit"]), ("ou", &["teams"])],
    )
    .unwrap();
    let erin = "uid=erin,ou=teams,dc=example,dc=com";
    add(
        &dit,
        erin,
        &[
            ("objectClass", &["inetOrgPerson"]),
            ("cn", &["erin"]),
            ("sn", &["erin"]),
            ("uid", &["erin"]),
        ],
    )
    .unwrap();
    add(
        &dit,
        STAFF,
        &[
            ("objectClass", &["groupOfNames"]),
            ("cn", &["staff"]),
            ("member", &[ALICE, erin]),
        ],
    )
    .unwrap();
    rename(&dit, "ou=teams,dc=example,dc=com", "ou=squads");
    assert_eq!(
        values_of(&dit, STAFF, "member"),
        [ALICE, "uid=erin,ou=squads,dc=example,dc=com"]
    );
    assert_eq!(
        values_of(&dit, "uid=erin,ou=squads,dc=example,dc=com", "memberOf"),
        [STAFF]
    );
}

#[test]
fn a_delete_of_a_subtree_removes_every_entry_or_none() {
    let dit = setup();
    let teams = "ou=teams,dc=example,dc=com";
    add(
        &dit,
        teams,
        &[("objectClass", &["organizationalUnit"]), ("ou", &["teams"])],
    )
    .unwrap();
    for uid in ["erin", "frank"] {
        add(
            &dit,
            &format!("uid={uid},{teams}"),
            &[
                ("objectClass", &["inetOrgPerson"]),
                ("cn", &[uid]),
                ("sn", &[uid]),
                ("uid", &[uid]),
            ],
        )
        .unwrap();
    }
    let before = dit.store.read().len();
    let ndn = norm(&dit.schema(), teams);
    let delete_teams = |subtree: bool, who: Identity| {
        let ndn = ndn.clone();
        change(&dit, move |d, txn| {
            dit::delete::apply(d, txn, &who, &ndn, None, subtree)
        })
    };
    // Without the control, a non-leaf stays.
    let e = delete_teams(false, admin(&dit)).err().expect("not a leaf");
    assert_eq!(e.code, ResultCode::NotAllowedOnNonLeaf, "{e}");
    // Someone without the delete right removes nothing, not even the leaves they reach first.
    let alice = Identity {
        dn: "uid=alice,dc=example,dc=com".into(),
        ndn: Some(norm(&dit.schema(), "uid=alice,dc=example,dc=com")),
        is_admin: false,
    };
    assert!(delete_teams(true, alice).is_err());
    assert_eq!(dit.store.read().len(), before);
    // The administrator's subtree delete removes the three entries in one change.
    let applied = delete_teams(true, admin(&dit)).unwrap();
    assert_eq!(applied.also.len(), 2, "the two subordinates");
    assert_eq!(dit.store.read().len(), before - 3);
}

#[test]
fn bulk_import_builds_and_places_entries_as_adds_would() {
    let dit = directory();
    let dir = tempfile::tempdir().unwrap();
    let ldif = "\
dn: dc=example,dc=com
objectClass: dcObject
objectClass: organization
dc: example
o: Example

dn: uid=alice,dc=example,dc=com
objectClass: inetOrgPerson
cn: alice
sn: alice

dn: uid=orphan,ou=nowhere,dc=example,dc=com
objectClass: inetOrgPerson
cn: orphan
sn: orphan

dn: uid=bad,dc=example,dc=com
objectClass: inetOrgPerson
cn: bad
";
    let opts = dit::bulk::ImportOptions {
        continue_on_error: true,
        threads: 2,
        input_bytes: None,
    };
    let import = || {
        dit::bulk::import(
            &dit,
            &dit::overlays::MemberOfSpec::default(),
            "cn=admin,dc=example,dc=com",
            dir.path(),
            ldif.as_bytes(),
            &opts,
            &mut |_, _| {},
        )
    };
    let report = import().unwrap();
    assert_eq!(report.entries, 2);
    let lines: Vec<usize> = report.rejected.iter().map(|r| r.line).collect();
    assert_eq!(lines, [12, 17], "{:?}", report.rejected);
    assert!(
        report.rejected[0].message.contains("parent"),
        "{:?}",
        report.rejected
    );
    assert!(
        report.rejected[1].message.contains("sn"),
        "{:?}",
        report.rejected
    );
    // A second import into the same directory is refused: it would overwrite it.
    assert!(matches!(import(), Err(dit::bulk::BulkError::Setup(_))));
}
