//! The directory without a socket: a `Dit` over an in-memory store, changed through the write
//! path's `write_job` (stamps, overlay chain, all or nothing) and checked with its access and
//! assertion checks, as every protocol operation and start-up entry is.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;

use dit::acl::{Acl, Rights};
use dit::entries::{attr, virtual_entry};
use dit::error::LdapResult;
use dit::overlays::unique::UniqueSpec;
use dit::overlays::Applied;
use dit::write::{authorize, stamp_modified, write_job, Assertion};
use dit::{Dit, Identity, WriteLimits};
use proto::ResultCode;
use schema::{Dn, NormDn, Schema};
use store::{Attr, Store, Txn};

const SUFFIX: &str = "dc=example,dc=com";

fn norm(schema: &Schema, dn: &str) -> NormDn {
    Dn::parse(dn).unwrap().normalize(schema).unwrap()
}

/// A directory with the default access rules and one uniqueness rule on `uid`.
fn directory() -> Dit {
    let schema = Arc::new(Schema::builtin());
    let uid = schema.attr_by_name("uid").unwrap();
    let store = Store::new(schema.clone(), &[uid]);
    let overlays = dit::overlays::chain(
        &[UniqueSpec {
            attributes: vec!["uid".into()],
            base: None,
        }],
        &schema,
    )
    .unwrap();
    let root_dse = virtual_entry(
        "",
        NormDn {
            norm: String::new(),
            rdns: Vec::new(),
        },
        vec![attr(&schema, "objectClass", &[b"top"])],
    );
    Dit::new(
        store,
        vec![norm(&schema, SUFFIX)],
        norm(&schema, "cn=admin,dc=example,dc=com"),
        Acl::compile(&schema, &dit::acl::default_policy()).unwrap(),
        root_dse,
        overlays,
        7,
        WriteLimits {
            max_values_per_attribute: 100,
            max_attributes_per_request: 100,
        },
    )
    .unwrap()
}

fn attrs(schema: &Schema, pairs: &[(&str, &[&str])]) -> Vec<Attr> {
    pairs
        .iter()
        .map(|(name, values)| {
            let ty = schema.attr_by_name(name).unwrap();
            let values = values.iter().map(|v| v.as_bytes().into()).collect();
            Attr::new(schema, ty, "", values).unwrap()
        })
        .collect()
}

/// Adds one entry in a write job, stamped, through the overlay chain.
fn add(dit: &Arc<Dit>, dn: &str, pairs: &[(&str, &[&str])], root: bool) -> LdapResult<Applied> {
    let schema = dit.schema();
    let ndn = norm(&schema, dn);
    let mut a = attrs(&schema, pairs);
    drop(schema);
    let d = dit.clone();
    let dn = dn.to_string();
    dit.store
        .write_blocking(move |txn: &mut Txn| {
            write_job(&d, txn, |txn| {
                stamp_modified(&d, &mut a, "cn=admin,dc=example,dc=com", txn.now());
                let id = txn.add(dn, ndn, a, root)?;
                Ok(Applied {
                    before: None,
                    after: txn.version().get(id).cloned(),
                })
            })
        })
        .unwrap()
}

fn person(uid: &str) -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("objectClass", vec!["inetOrgPerson".into()]),
        ("cn", vec![uid.to_string()]),
        ("sn", vec![uid.to_string()]),
        ("uid", vec![uid.to_string()]),
    ]
}

fn add_person(dit: &Arc<Dit>, uid: &str) -> LdapResult<Applied> {
    let owned = person(uid);
    let values: Vec<Vec<&str>> = owned
        .iter()
        .map(|(_, v)| v.iter().map(String::as_str).collect())
        .collect();
    let pairs: Vec<(&str, &[&str])> = owned
        .iter()
        .zip(&values)
        .map(|((n, _), v)| (*n, v.as_slice()))
        .collect();
    add(dit, &format!("uid={uid},{SUFFIX}"), &pairs, false)
}

fn setup() -> Arc<Dit> {
    let dit = Arc::new(directory());
    add(
        &dit,
        SUFFIX,
        &[
            ("objectClass", &["dcObject", "organization"]),
            ("dc", &["example"]),
            ("o", &["Example"]),
        ],
        true,
    )
    .unwrap();
    dit
}

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
        false,
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
