//! Helpers shared by the persistence tests.
#![allow(dead_code)]

use schema::{Dn, Schema};
use store::persist::{Change, StoredAttr, StoredEntry};
use store::Entry;

pub fn sattr(name: &str, values: &[&str]) -> StoredAttr {
    StoredAttr {
        name: name.into(),
        values: values.iter().map(|v| v.as_bytes().to_vec()).collect(),
    }
}

pub fn root() -> StoredEntry {
    StoredEntry {
        id: 1,
        parent: None,
        dn: "dc=example,dc=com".into(),
        attrs: vec![
            sattr("objectClass", &["top", "domain"]),
            sattr("dc", &["example"]),
        ],
    }
}

pub fn person(id: u32, cn: &str) -> StoredEntry {
    StoredEntry {
        id,
        parent: Some(1),
        dn: format!("uid=user.{id},dc=example,dc=com"),
        attrs: vec![
            sattr(
                "objectClass",
                &["top", "person", "organizationalPerson", "inetOrgPerson"],
            ),
            sattr("uid", &[&format!("user.{id}")]),
            sattr("cn", &[cn]),
            sattr("cn;lang-en", &["English name"]),
            sattr("sn", &["User"]),
        ],
    }
}

pub fn entry(schema: &Schema, se: &StoredEntry) -> Entry {
    se.to_entry(schema).expect("valid test entry")
}

/// Recovered entries as stored records, sorted by id, for comparison with a model.
pub fn stored(schema: &Schema, entries: &[Entry]) -> Vec<StoredEntry> {
    let mut v: Vec<StoredEntry> = entries
        .iter()
        .map(|e| StoredEntry::from_entry(e, schema))
        .collect();
    v.sort_by_key(|e| e.id);
    v
}

/// Applies changes to a model keyed by id.
pub fn apply(model: &mut std::collections::BTreeMap<u32, StoredEntry>, changes: &[Change]) {
    for c in changes {
        match c {
            Change::Put(e) => {
                model.insert(e.id, e.clone());
            }
            Change::Delete { id } => {
                model.remove(id);
            }
            Change::Patch(p) => panic!("the model takes no patches (entry {})", p.id),
            Change::Schema(_)
            | Change::Tombstone(_)
            | Change::Forget(_)
            | Change::TombstoneFloor(_) => {}
        }
    }
}

pub fn ndn_ok(schema: &Schema, dn: &str) -> bool {
    Dn::parse(dn).and_then(|d| d.normalize(schema)).is_ok()
}
