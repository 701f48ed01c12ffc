//! What the directory tests share: a `Dit` over an in-memory store with the default access
//! rules, and its operations run as the administrator inside the write path's `write_job`.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code, each test binary using a part of it"
)]

use std::borrow::Cow;
use std::sync::Arc;

use dit::acl::Acl;
use dit::entries::{attr, virtual_entry};
use dit::error::LdapResult;
use dit::overlays::unique::UniqueSpec;
use dit::overlays::Applied;
use dit::write::write_job;
use dit::{Dit, Identity, WriteLimits};
use schema::{Dn, NormDn, Schema};
use store::{Store, Txn};

pub const SUFFIX: &str = "dc=example,dc=com";

pub fn norm(schema: &Schema, dn: &str) -> NormDn {
    Dn::parse(dn).unwrap().normalize(schema).unwrap()
}

/// A directory with the default access rules and one uniqueness rule on `uid`.
pub fn directory() -> Dit {
    directory_with(&dit::overlays::MemberOfSpec::default())
}

/// `directory`, with group membership and referential integrity as `memberof` asks.
pub fn directory_with(memberof: &dit::overlays::MemberOfSpec) -> Dit {
    directory_limited(
        memberof,
        WriteLimits {
            max_values_per_attribute: 100,
            max_attributes_per_request: 100,
            max_subtree_delete: 100,
        },
    )
}

/// The store `directory` is over, empty.
pub fn empty_store() -> Store {
    let schema = Arc::new(Schema::builtin());
    let indexed: Vec<_> = ["uid", "member", "uniqueMember", "seeAlso", "memberOf"]
        .iter()
        .map(|n| schema.attr_by_name(n).unwrap())
        .collect();
    Store::new(schema, &indexed)
}

/// `directory_with`, with these request limits.
pub fn directory_limited(memberof: &dit::overlays::MemberOfSpec, limits: WriteLimits) -> Dit {
    directory_on(empty_store(), memberof, limits)
}

/// `directory_limited` over `store` (made by `empty_store`, holding what a test put there).
pub fn directory_on(
    store: Store,
    memberof: &dit::overlays::MemberOfSpec,
    limits: WriteLimits,
) -> Dit {
    let schema = store.schema();
    let overlays = dit::overlays::chain(
        &[UniqueSpec {
            attributes: vec!["uid".into()],
            base: None,
        }],
        memberof,
        "cn=admin,dc=example,dc=com",
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
        limits,
    )
    .unwrap()
}

/// The administrator, as the operations below act.
pub fn admin(dit: &Dit) -> Identity {
    Identity {
        dn: "cn=admin,dc=example,dc=com".into(),
        ndn: Some(dit.admin.clone()),
        is_admin: true,
    }
}

/// Adds one entry as the administrator: built and checked as an add request's, then placed,
/// stamped and run through the overlay chain in one write job.
pub fn add(dit: &Arc<Dit>, dn: &str, pairs: &[(&str, &[&str])]) -> LdapResult<Applied> {
    let input: Vec<dit::add::InputAttr<'_>> = pairs
        .iter()
        .map(|(n, vs)| {
            let values = vs.iter().map(|v| Cow::Borrowed(v.as_bytes())).collect();
            (Cow::Borrowed(n.as_bytes()), values)
        })
        .collect();
    let e = dit::add::build(dit, dn.as_bytes(), &input, false)?;
    let who = admin(dit);
    change(dit, move |d, txn| dit::add::apply(d, txn, &who, e, None))
}

pub fn person(uid: &str) -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("objectClass", vec!["inetOrgPerson".into()]),
        ("cn", vec![uid.to_string()]),
        ("sn", vec![uid.to_string()]),
        ("uid", vec![uid.to_string()]),
    ]
}

pub fn add_person(dit: &Arc<Dit>, uid: &str) -> LdapResult<Applied> {
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
    add(dit, &format!("uid={uid},{SUFFIX}"), &pairs)
}

pub fn setup() -> Arc<Dit> {
    setup_with(directory())
}

pub fn setup_with(dit: Dit) -> Arc<Dit> {
    let dit = Arc::new(dit);
    add(
        &dit,
        SUFFIX,
        &[
            ("objectClass", &["dcObject", "organization"]),
            ("dc", &["example"]),
            ("o", &["Example"]),
        ],
    )
    .unwrap();
    dit
}

/// Runs `f` as one change in a write job (overlays included).
pub fn change(
    dit: &Arc<Dit>,
    f: impl FnOnce(&Dit, &mut Txn) -> LdapResult<Applied> + Send + 'static,
) -> LdapResult<Applied> {
    let d = dit.clone();
    dit.store
        .write_blocking(move |txn: &mut Txn| write_job(&d, txn, |txn| f(&d, txn)))
        .unwrap()
}

/// The values of `attr_name` in entry `dn`, lowercased and sorted.
pub fn values_of(dit: &Dit, dn: &str, attr_name: &str) -> Vec<String> {
    let schema = dit.schema();
    let v = dit.store.read();
    let e = v.lookup(&norm(&schema, dn)).unwrap();
    let ty = schema.attr_by_name(attr_name).unwrap();
    let mut out: Vec<String> = e
        .attr(ty)
        .map(|a| {
            a.values()
                .map(|v| String::from_utf8_lossy(v).to_lowercase())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}
