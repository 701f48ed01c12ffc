//! The CSN clock against what the directory holds: a directory whose stored CSNs are ahead of
//! the system clock (a server restarted with its clock set back) stamps every change after
//! them, and a replicated change from a server whose clock is ahead moves the clock, so the
//! next local change sorts after it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::sync::Arc;

use common::*;

use dit::modify::Mod;
use dit::overlays::{Applied, Origin};
use dit::{Dit, WriteLimits};
use proto::ModOp;
use store::{Attr, Store, Txn};

/// CSNs of the year 2100: far ahead of any system clock running these tests.
const AHEAD: &str = "21000101000000.000000Z#000003#002#000000";
const CONTEXT_AHEAD: &str = "21010101000000.000000Z#000000#003#000000";

fn limits() -> WriteLimits {
    WriteLimits {
        max_values_per_attribute: 100,
        max_attributes_per_request: 100,
        max_subtree_delete: 100,
    }
}

fn csn_of(dit: &Dit, a: &Applied) -> String {
    let e = a.after.as_ref().expect("an entry after the change");
    let v = e.attr(dit.known.entry_csn).unwrap().first().unwrap();
    String::from_utf8(v.to_vec()).unwrap()
}

fn attrs(store: &Store, pairs: &[(&str, &str)]) -> Vec<Attr> {
    let schema = store.schema();
    pairs
        .iter()
        .map(|(n, v)| {
            let ty = schema.attr_by_name(n).unwrap();
            Attr::new(&schema, ty, "", vec![v.as_bytes().into()]).unwrap()
        })
        .collect()
}

/// A store holding the suffix entry and one person, as a data directory recovered at start
/// would: written straight into the store, with the CSNs given.
fn stored(suffix_csn: &str, person_csn: &str, context_csn: Option<&str>) -> Store {
    let store = empty_store();
    let schema = store.schema();
    let mut top = attrs(
        &store,
        &[
            ("objectClass", "organization"),
            ("o", "Example"),
            ("dc", "example"),
            ("entryCSN", suffix_csn),
        ],
    );
    if let Some(c) = context_csn {
        top.extend(attrs(&store, &[("contextCSN", c)]));
    }
    let person = attrs(
        &store,
        &[
            ("objectClass", "inetOrgPerson"),
            ("uid", "old"),
            ("cn", "old"),
            ("sn", "old"),
            ("entryCSN", person_csn),
        ],
    );
    let (s, p) = (
        norm(&schema, SUFFIX),
        norm(&schema, &format!("uid=old,{SUFFIX}")),
    );
    store
        .write_blocking(move |txn: &mut Txn| {
            txn.add(SUFFIX.into(), s, top, true)?;
            txn.add(format!("uid=old,{SUFFIX}"), p, person, false)
        })
        .unwrap()
        .unwrap();
    store
}

#[test]
fn changes_are_stamped_after_the_newest_stored_csn_whatever_the_clock_says() {
    let store = stored("20200101000000.000000Z#000000#007#000000", AHEAD, None);
    let dit = Arc::new(directory_on(
        store,
        &dit::overlays::MemberOfSpec::default(),
        limits(),
    ));
    let a = csn_of(&dit, &add_person(&dit, "alice").unwrap());
    assert!(a.as_str() > AHEAD, "{a} sorts after the stored {AHEAD}");
    // The stored CSN's time, its counter passed, this server's id.
    assert_eq!(a, "21000101000000.000000Z#000004#007#000000");
    let b = csn_of(&dit, &add_person(&dit, "bob").unwrap());
    assert!(b > a, "{b} after {a}");
}

#[test]
fn a_suffix_entrys_context_csn_counts_too() {
    // A delete's CSN, or a provider's cookie, lives in contextCSN only.
    let store = stored(
        "20200101000000.000000Z#000000#007#000000",
        "20200101000001.000000Z#000000#007#000000",
        Some(CONTEXT_AHEAD),
    );
    let dit = Arc::new(directory_on(
        store,
        &dit::overlays::MemberOfSpec::default(),
        limits(),
    ));
    let a = csn_of(&dit, &add_person(&dit, "alice").unwrap());
    assert!(a.as_str() > CONTEXT_AHEAD, "{a} after {CONTEXT_AHEAD}");
}

#[test]
fn a_replicated_change_ahead_of_the_clock_is_followed_by_later_local_csns() {
    let dit = setup();
    add_person(&dit, "alice").unwrap();
    // A provider whose clock is far ahead sent a new version of alice: applied through the
    // door as a replicated change, with its CSN kept.
    let d = dit.clone();
    let replicated = dit
        .store
        .write_blocking(move |txn: &mut Txn| {
            dit::write::write_job_as(&d, txn, Origin::Replicated, |txn| {
                let schema = txn.schema().clone();
                let ndn = norm(&schema, &format!("uid=alice,{SUFFIX}"));
                let e = txn.version().lookup(&ndn).unwrap().clone();
                let mut attrs = e.to_attrs();
                let ty = d.known.entry_csn;
                attrs.retain(|a| a.ty != ty);
                attrs.push(Attr::new(&schema, ty, "", vec![AHEAD.as_bytes().into()]).unwrap());
                txn.replace_attrs(e.id, attrs)?;
                Ok(Some(Applied {
                    after: txn.version().get(e.id).cloned(),
                    before: Some(e),
                    ..Default::default()
                }))
            })
        })
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(replicated.origin, Origin::Replicated);
    assert_eq!(
        csn_of(&dit, &replicated),
        AHEAD,
        "the provider's CSN is kept"
    );
    // A local modify of the same entry right after: its CSN sorts after the replicated one,
    // so every server keeps it as the later change.
    let who = admin(&dit);
    let local = change(&dit, move |d, txn| {
        let schema = txn.schema().clone();
        let ndn = norm(&schema, &format!("uid=alice,{SUFFIX}"));
        let mods = vec![Mod {
            op: ModOp::Replace,
            ty: schema.attr_by_name("description").unwrap(),
            options: String::new(),
            name: "description".into(),
            values: vec![b"local".as_slice().into()],
        }];
        let needs = dit::modify::needs(&mods);
        dit::modify::apply(d, txn, &who, &ndn, &needs, mods, None, false)
    })
    .unwrap();
    let c = csn_of(&dit, &local);
    assert!(
        c.as_str() > AHEAD,
        "the local change {c} sorts after {AHEAD}"
    );
}
