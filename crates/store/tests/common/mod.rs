//! Helpers shared by the store's integration tests.
#![allow(dead_code)]

use schema::{Dn, NormDn, Schema};
use store::{Attr, EntryId, StoreError, Txn};

/// A DN normalized against the schema.
pub fn ndn(schema: &Schema, s: &str) -> NormDn {
    Dn::parse(s)
        .expect("dn")
        .normalize(schema)
        .expect("normalize")
}

/// An attribute without options.
pub fn attr(schema: &Schema, name: &str, values: &[&str]) -> Attr {
    let ty = schema.attr_by_name(name).expect("attribute");
    Attr::new(
        schema,
        ty,
        "",
        values.iter().map(|v| v.as_bytes().into()).collect(),
    )
    .expect("values")
}

/// Adds the naming context entry `dc=example,dc=com` (a domain).
pub fn add_suffix(txn: &mut Txn, schema: &Schema) -> Result<EntryId, StoreError> {
    txn.add(
        "dc=example,dc=com".into(),
        ndn(schema, "dc=example,dc=com"),
        vec![
            attr(schema, "objectClass", &["top", "domain"]),
            attr(schema, "dc", &["example"]),
        ],
        true,
    )
}
