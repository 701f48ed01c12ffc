//! Changing a big attribute without unpacking it: `Txn::replace_parts` keeps an attribute's
//! stored bytes with some values dropped and some added (`Part::Kept`), and updates the
//! equality index by the values changed alone (`ValueDelta`). Checked against the plain way:
//! the entry reads back with the values an unpacked edit gives, and every equality and
//! presence lookup answers as in a version rebuilt from the entries.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::collections::BTreeSet;
use std::sync::Arc;

mod common;

use common::{add_suffix, attr, ndn};
use proptest::prelude::*;
use schema::Schema;
use store::{Entry, Filter, IndexKinds, Indexes, Part, Store, ValueDelta, Version};

const GROUP: &str = "cn=g,dc=example,dc=com";

fn member(i: u32) -> String {
    format!("uid=m{i},dc=example,dc=com")
}

fn indexes(s: &Schema) -> Indexes {
    let mut i = Indexes::new();
    for (name, kinds) in [
        ("objectClass", IndexKinds::DEFAULT),
        ("member", IndexKinds::DEFAULT),
        // A substring index: its keys are shared between values, so the delta is not used.
        ("description", IndexKinds::DEFAULT | IndexKinds::SUB),
    ] {
        i.add(s.attr_by_name(name).expect("attr"), kinds);
    }
    i
}

/// A store holding the suffix and the group, whose members are `members` and descriptions
/// `descriptions`.
fn group(s: &Arc<Schema>, members: &BTreeSet<u32>, descriptions: &BTreeSet<u32>) -> Store {
    let store = Store::with_indexes(s.clone(), indexes(s));
    let (s2, members, descriptions) = (s.clone(), members.clone(), descriptions.clone());
    store
        .write_blocking(move |txn| {
            let s = &*s2;
            add_suffix(txn, s)?;
            txn.add(
                GROUP.into(),
                ndn(s, GROUP),
                group_attrs(s, &members, &descriptions),
                false,
            )?;
            Ok::<_, store::StoreError>(())
        })
        .expect("writer")
        .expect("setup");
    store
}

fn group_attrs(
    s: &Schema,
    members: &BTreeSet<u32>,
    descriptions: &BTreeSet<u32>,
) -> Vec<store::Attr> {
    let m: Vec<String> = members.iter().map(|&i| member(i)).collect();
    let d: Vec<String> = descriptions.iter().map(|i| format!("text {i}")).collect();
    let mut attrs = vec![
        attr(s, "objectClass", &["groupOfNames"]),
        attr(s, "cn", &["g"]),
    ];
    for (name, values) in [("member", m), ("description", d)] {
        if !values.is_empty() {
            let v: Vec<&str> = values.iter().map(String::as_str).collect();
            attrs.push(attr(s, name, &v));
        }
    }
    attrs
}

fn norm_of(s: &Schema, name: &str, v: &str) -> Vec<u8> {
    s.normalize_eq(s.attr_by_name(name).expect("attr"), v.as_bytes())
        .expect("value")
}

/// The ids the equality (or presence) index proposes, and those a scan finds.
fn lookup(s: &Schema, v: &Version, f: &Filter) -> (Option<Vec<u32>>, Vec<u32>) {
    let cand = v.candidates(s, f).map(|b| b.iter().collect());
    let scan = v
        .iter()
        .filter(|e| f.eval(s, e) == store::Tri::True)
        .map(|e| e.id)
        .collect();
    (cand, scan)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn kept_attributes_read_and_index_as_unpacked_ones(
        before in proptest::collection::btree_set(0u32..40, 0..30),
        descriptions in proptest::collection::btree_set(0u32..8, 0..4),
        removed in proptest::collection::btree_set(0u32..40, 0..6),
        added in proptest::collection::btree_set(0u32..60, 0..6),
        new_descriptions in proptest::collection::btree_set(0u32..8, 0..4),
    ) {
        let schema = Arc::new(Schema::builtin());
        let store = group(&schema, &before, &descriptions);
        // Only values held can be removed, and only values not held (or removed) added.
        let removed: BTreeSet<u32> = removed.intersection(&before).copied().collect();
        let added: BTreeSet<u32> = added
            .iter()
            .copied()
            .filter(|i| !before.contains(i) || removed.contains(i))
            .filter(|i| !removed.contains(i))
            .collect();
        let after: BTreeSet<u32> = before
            .difference(&removed)
            .chain(added.iter())
            .copied()
            .collect();
        let s2 = schema.clone();
        let (b2, r2, a2, nd) = (before.clone(), removed.clone(), added.clone(), new_descriptions.clone());
        store
            .write_blocking(move |txn| {
                let s = &*s2;
                let old = txn.version().lookup(&ndn(s, GROUP)).expect("group").clone();
                let ty = s.attr_by_name("member").expect("attr");
                let desc = s.attr_by_name("description").expect("attr");
                // Positions of the members removed, in the stored order (ascending ids).
                let drop: Vec<usize> = b2
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| r2.contains(i))
                    .map(|(p, _)| p)
                    .collect();
                let add: Vec<store::OwnedPair> = a2
                    .iter()
                    .map(|&i| {
                        let raw = member(i);
                        (raw.as_bytes().into(), norm_of(s, "member", &raw).into())
                    })
                    .collect();
                let mut owned: Vec<store::Attr> = old
                    .attrs()
                    .filter(|a| a.ty != ty && a.ty != desc)
                    .map(|a| a.to_attr())
                    .collect();
                // description is rewritten whole (its keys come from the whole type).
                if !nd.is_empty() {
                    let d: Vec<String> = nd.iter().map(|i| format!("text {i}")).collect();
                    let d: Vec<&str> = d.iter().map(String::as_str).collect();
                    owned.push(attr(s, "description", &d));
                }
                // Without a member attribute before, the added members are a new one.
                let fresh = store::Attr {
                    ty,
                    options: "".into(),
                    values: add.iter().map(|(r, _)| r.clone()).collect(),
                    norm: add.iter().map(|(_, n)| n.clone()).collect(),
                };
                let mut parts: Vec<Part<'_>> = owned.iter().map(Part::New).collect();
                match old.attr(ty) {
                    Some(attr) => parts.push(Part::Kept { attr, drop: &drop, add: &add }),
                    None if !add.is_empty() => parts.push(Part::New(&fresh)),
                    None => {}
                }
                let deltas = [ValueDelta {
                    ty,
                    added: add.iter().map(|(_, n)| &**n).collect(),
                }];
                txn.replace_parts(old.id, &parts, &deltas)
            })
            .expect("writer")
            .expect("change");
        let v = store.read();
        let s = &*schema;
        let g = v.lookup(&ndn(s, GROUP)).expect("group");
        // The entry holds what an unpacked edit would.
        let expected = Entry::new(g.id, g.parent, GROUP, &ndn(s, GROUP), &group_attrs(s, &after, &new_descriptions));
        let ty = s.attr_by_name("member").expect("attr");
        let got: BTreeSet<Vec<u8>> = g.attr(ty).map(|a| a.values().map(<[u8]>::to_vec).collect()).unwrap_or_default();
        let want: BTreeSet<Vec<u8>> = expected.attr(ty).map(|a| a.values().map(<[u8]>::to_vec).collect()).unwrap_or_default();
        prop_assert_eq!(got, want);
        prop_assert_eq!(g.attr(ty).map_or(0, |a| a.len()), after.len());
        // Every lookup answers as in a version built afresh from the same entries.
        let rebuilt = Version::restore(schema.clone(), &indexes(s), v.iter().map(|e| Entry::clone(e)), v.next_id(), v.seq);
        let desc = s.attr_by_name("description").expect("attr");
        let mut filters = vec![Filter::Present(ty), Filter::Present(desc)];
        for i in 0..60 {
            filters.push(Filter::Equality { attr: ty, norm: norm_of(s, "member", &member(i)) });
        }
        for i in 0..8 {
            filters.push(Filter::Equality { attr: desc, norm: norm_of(s, "description", &format!("text {i}")) });
        }
        for f in &filters {
            let (cand, scan) = lookup(s, &v, f);
            let (cand2, scan2) = lookup(s, &rebuilt, f);
            prop_assert_eq!(&scan, &scan2);
            // The index proposes what a fresh build does, plus the group for a member it
            // lost (a removed value's key stays: `store::ValueDelta`), and never misses one.
            match (&cand, &cand2) {
                (Some(c), Some(c2)) => {
                    let extra: Vec<u32> = c.iter().copied().filter(|id| !c2.contains(id)).collect();
                    prop_assert!(extra.iter().all(|&id| id == g.id), "{:?}: {:?}", f, extra);
                    prop_assert!(c2.iter().all(|id| c.contains(id)), "{:?}", f);
                }
                _ => prop_assert_eq!(&cand, &cand2, "{:?}", f),
            }
            if let Some(c) = cand {
                for id in &scan {
                    prop_assert!(c.contains(id), "{:?}", f);
                }
            }
        }
    }
}
