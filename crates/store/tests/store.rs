//! The store against the built-in schema: versions are isolated, indexes follow every change,
//! subtree renames rewrite descendants, filters are three-valued, and an indexed equality
//! search examines only the entries that match.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::ops::ControlFlow;
use std::sync::Arc;

mod common;

use common::{add_suffix, attr, ndn};
use schema::Schema;
use store::{Attr, Entry, Filter, Scope, Store, Tri, Version};

fn person(schema: &Schema, uid: &str) -> Vec<Attr> {
    vec![
        attr(
            schema,
            "objectClass",
            &["top", "person", "organizationalPerson", "inetOrgPerson"],
        ),
        attr(schema, "uid", &[uid]),
        attr(schema, "cn", &[&format!("User {uid}")]),
        attr(schema, "sn", &["User"]),
    ]
}

fn setup(n: usize) -> (Arc<Schema>, Store) {
    let schema = Arc::new(Schema::builtin());
    let idx: Vec<_> = ["objectClass", "uid", "cn", "sn"]
        .iter()
        .map(|n| schema.attr_by_name(n).expect("attr"))
        .collect();
    let store = Store::new(schema.clone(), &idx);
    let s2 = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s2;
            add_suffix(txn, s)?;
            txn.add(
                "ou=people,dc=example,dc=com".into(),
                ndn(s, "ou=people,dc=example,dc=com"),
                vec![
                    attr(s, "objectClass", &["organizationalUnit"]),
                    attr(s, "ou", &["people"]),
                ],
                false,
            )?;
            for i in 0..n {
                let dn = format!("uid=user.{i},ou=people,dc=example,dc=com");
                txn.add(
                    dn.clone(),
                    ndn(s, &dn),
                    person(s, &format!("user.{i}")),
                    false,
                )?;
            }
            Ok::<_, store::StoreError>(())
        })
        .expect("writer")
        .expect("load");
    (schema, store)
}

fn find(schema: &Schema, v: &Version, base: &str, scope: Scope, f: &Filter) -> (Vec<String>, u64) {
    let base = v.lookup(&ndn(schema, base)).expect("base").clone();
    let mut out = Vec::new();
    let examined = v.search(
        schema,
        &base,
        scope,
        f,
        |e: &Arc<Entry>| {
            out.push(e.dn().to_string());
            ControlFlow::Continue(())
        },
        || ControlFlow::Continue(()),
    );
    (out, examined)
}

fn eq(schema: &Schema, name: &str, value: &str) -> Filter {
    let ty = schema.attr_by_name(name).expect("attr");
    Filter::Equality {
        attr: ty,
        norm: schema.normalize_eq(ty, value.as_bytes()).expect("norm"),
    }
}

#[test]
fn indexed_equality_examines_only_matches() {
    let (schema, store) = setup(5000);
    let v = store.read();
    let (found, examined) = find(
        &schema,
        &v,
        "dc=example,dc=com",
        Scope::Subtree,
        &eq(&schema, "uid", "USER.4321"),
    );
    assert_eq!(
        found,
        vec!["uid=user.4321,ou=people,dc=example,dc=com".to_string()]
    );
    assert_eq!(
        examined, 1,
        "an indexed equality search must touch only matching entries"
    );
    // An unindexed attribute falls back to walking the scope.
    let (found, examined) = find(
        &schema,
        &v,
        "dc=example,dc=com",
        Scope::Subtree,
        &eq(&schema, "givenName", "nobody"),
    );
    assert!(found.is_empty());
    assert_eq!(examined, 5002);
}

#[test]
fn scopes() {
    let (schema, store) = setup(10);
    let v = store.read();
    let all = Filter::True;
    assert_eq!(
        find(&schema, &v, "dc=example,dc=com", Scope::Base, &all)
            .0
            .len(),
        1
    );
    assert_eq!(
        find(&schema, &v, "dc=example,dc=com", Scope::One, &all)
            .0
            .len(),
        1
    );
    assert_eq!(
        find(&schema, &v, "dc=example,dc=com", Scope::Subtree, &all)
            .0
            .len(),
        12
    );
    assert_eq!(
        find(&schema, &v, "ou=people,dc=example,dc=com", Scope::One, &all)
            .0
            .len(),
        10
    );
    // Indexed candidates are still restricted to the scope.
    let oc = eq(&schema, "objectClass", "inetOrgPerson");
    assert_eq!(
        find(
            &schema,
            &v,
            "uid=user.3,ou=people,dc=example,dc=com",
            Scope::Subtree,
            &oc
        )
        .0
        .len(),
        1
    );
}

#[test]
fn readers_keep_their_version() {
    let (schema, store) = setup(3);
    let before = store.read();
    let s2 = schema.clone();
    store
        .write_blocking(move |txn| {
            let id = txn
                .version()
                .lookup(&ndn(&s2, "uid=user.1,ou=people,dc=example,dc=com"))
                .expect("e")
                .id;
            txn.delete(id).map(|_| ())
        })
        .expect("writer")
        .expect("delete");
    let after = store.read();
    let f = eq(&schema, "uid", "user.1");
    assert_eq!(
        find(&schema, &before, "dc=example,dc=com", Scope::Subtree, &f)
            .0
            .len(),
        1
    );
    assert_eq!(
        find(&schema, &after, "dc=example,dc=com", Scope::Subtree, &f)
            .0
            .len(),
        0
    );
    assert!(after.seq > before.seq);
}

#[test]
fn failed_operation_changes_nothing() {
    let (schema, store) = setup(3);
    let s2 = schema.clone();
    let r = store
        .write_blocking(move |txn| {
            let s = &*s2;
            let dn = "uid=new,ou=people,dc=example,dc=com";
            txn.add(dn.into(), ndn(s, dn), person(s, "new"), false)?;
            // The second change fails: the first must not be visible either.
            txn.add(dn.into(), ndn(s, dn), person(s, "new"), false)?;
            Ok::<_, store::StoreError>(())
        })
        .expect("writer");
    assert!(r.is_err());
    let v = store.read();
    assert!(v
        .lookup(&ndn(&schema, "uid=new,ou=people,dc=example,dc=com"))
        .is_none());
    assert_eq!(
        find(
            &schema,
            &v,
            "dc=example,dc=com",
            Scope::Subtree,
            &eq(&schema, "uid", "new")
        )
        .0
        .len(),
        0
    );
}

#[test]
fn a_panicking_operation_fails_alone_and_the_writer_lives_on() {
    let (schema, store) = setup(3);
    let s2 = schema.clone();
    let r = store.write_blocking(move |txn| {
        let s = &*s2;
        let dn = "uid=half,ou=people,dc=example,dc=com";
        txn.add(dn.into(), ndn(s, dn), person(s, "half"), false)?;
        if !txn.version().is_empty() {
            panic!("a bug in an operation");
        }
        Ok::<_, store::StoreError>(())
    });
    match r {
        Err(store::StoreError::Failed(why)) => assert!(why.contains("a bug"), "{why}"),
        other => panic!("expected Failed, got {:?}", other.map(|_| ())),
    }
    assert!(store
        .read()
        .lookup(&ndn(&schema, "uid=half,ou=people,dc=example,dc=com"))
        .is_none());
    // The next operation is applied.
    let s2 = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s2;
            let dn = "uid=after,ou=people,dc=example,dc=com";
            txn.add(dn.into(), ndn(s, dn), person(s, "after"), false)
        })
        .expect("writer")
        .expect("added");
    assert!(store
        .read()
        .lookup(&ndn(&schema, "uid=after,ou=people,dc=example,dc=com"))
        .is_some());
}

#[test]
fn delete_refuses_non_leaf_and_indexes_follow_changes() {
    let (schema, store) = setup(3);
    let s2 = schema.clone();
    let r = store
        .write_blocking(move |txn| {
            let id = txn
                .version()
                .lookup(&ndn(&s2, "ou=people,dc=example,dc=com"))
                .expect("e")
                .id;
            txn.delete(id).map(|_| ())
        })
        .expect("writer");
    assert!(matches!(r, Err(store::StoreError::NotLeaf(_))));
    // Replace attributes: the old uid leaves the index, the new one joins it.
    let s2 = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s2;
            let id = txn
                .version()
                .lookup(&ndn(s, "uid=user.2,ou=people,dc=example,dc=com"))
                .expect("e")
                .id;
            let mut attrs = person(s, "user.2");
            attrs.push(attr(s, "cn", &["Renamed Person"]));
            txn.replace_attrs(id, attrs)
        })
        .expect("writer")
        .expect("replace");
    let v = store.read();
    let (found, examined) = find(
        &schema,
        &v,
        "dc=example,dc=com",
        Scope::Subtree,
        &eq(&schema, "cn", "renamed person"),
    );
    assert_eq!(found.len(), 1);
    assert_eq!(examined, 1);
}

#[test]
fn rename_moves_subtree() {
    let (schema, store) = setup(4);
    let s2 = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s2;
            let dn = "ou=staff,dc=example,dc=com";
            txn.add(
                dn.into(),
                ndn(s, dn),
                vec![
                    attr(s, "objectClass", &["organizationalUnit"]),
                    attr(s, "ou", &["staff"]),
                ],
                false,
            )?;
            let people = txn
                .version()
                .lookup(&ndn(s, "ou=people,dc=example,dc=com"))
                .expect("p")
                .clone();
            let staff = txn.version().lookup(&ndn(s, dn)).expect("s").id;
            let new = "ou=people,ou=staff,dc=example,dc=com";
            txn.rename(
                people.id,
                new.into(),
                ndn(s, new),
                Some(staff),
                people.to_attrs(),
            )
        })
        .expect("writer")
        .expect("rename");
    let v = store.read();
    assert!(v
        .lookup(&ndn(&schema, "uid=user.1,ou=people,dc=example,dc=com"))
        .is_none());
    let moved = v
        .lookup(&ndn(
            &schema,
            "uid=user.1,ou=people,ou=staff,dc=example,dc=com",
        ))
        .expect("moved");
    assert_eq!(
        moved.dn(),
        "uid=user.1,ou=people,ou=staff,dc=example,dc=com"
    );
    let all = Filter::True;
    assert_eq!(
        find(
            &schema,
            &v,
            "ou=staff,dc=example,dc=com",
            Scope::Subtree,
            &all
        )
        .0
        .len(),
        6
    );
}

#[test]
fn three_valued_logic() {
    let (schema, store) = setup(1);
    let v = store.read();
    let e = v
        .lookup(&ndn(&schema, "uid=user.0,ou=people,dc=example,dc=com"))
        .expect("e");
    let undefined = Filter::Undefined;
    assert_eq!(
        Filter::Not(Box::new(undefined.clone())).eval(&schema, e),
        Tri::Undefined
    );
    assert_eq!(
        Filter::And(vec![Filter::True, undefined.clone()]).eval(&schema, e),
        Tri::Undefined
    );
    assert_eq!(
        Filter::And(vec![Filter::False, undefined.clone()]).eval(&schema, e),
        Tri::False
    );
    assert_eq!(
        Filter::Or(vec![Filter::True, undefined.clone()]).eval(&schema, e),
        Tri::True
    );
    assert_eq!(
        Filter::Or(vec![Filter::False, undefined]).eval(&schema, e),
        Tri::Undefined
    );
    // `name` is a supertype of cn and sn: an assertion on it matches either.
    let name = schema.attr_by_name("name").expect("name");
    let f = Filter::Equality {
        attr: name,
        norm: schema.normalize_eq(name, b"user").expect("n"),
    };
    assert_eq!(f.eval(&schema, e), Tri::True);
    let (found, _) = find(&schema, &v, "dc=example,dc=com", Scope::Subtree, &f);
    assert_eq!(
        found.len(),
        1,
        "supertype assertions fall back to a scan when subtypes are unindexed"
    );
}

/// After a random mix of adds, attribute changes (indexed and not, with option variants),
/// renames and deletes, every index answer equals a full scan.
/// A repeatable pseudo-random source (xorshift64): `next(n)` is below `n`.
fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

#[test]
fn indexes_agree_with_a_scan_after_random_changes() {
    let (schema, store) = setup(0);
    let mut next = xorshift(0x9e3779b97f4a7c15);
    let values = ["a", "b", "c", "d"];
    for round in 0..40 {
        let ops: Vec<(u64, u64, u64, u64, u64)> = (0..25)
            .map(|_| (next(4), next(30), next(4), next(4), 1000 + next(1 << 40)))
            .collect();
        let s2 = schema.clone();
        store
            .write_blocking(move |txn| {
                for op in ops {
                    random_change(txn, &s2, round, op)?;
                }
                Ok::<_, store::StoreError>(())
            })
            .expect("writer")
            .expect("batch");
        let v = store.read();
        let base = v
            .lookup(&ndn(&schema, "dc=example,dc=com"))
            .expect("base")
            .clone();
        for name in ["mail", "cn", "uid", "objectClass"] {
            let ty = schema.attr_by_name(name).expect("attr");
            let mut filters = vec![Filter::Present(ty)];
            for val in values
                .iter()
                .chain(["inetOrgPerson", "User u1", "u3"].iter())
            {
                if let Ok(norm) = schema.normalize_eq(ty, val.as_bytes()) {
                    filters.push(Filter::Equality { attr: ty, norm });
                }
            }
            for f in filters {
                // Exactly the matching entries: with these few values a 64-bit hash collision
                // (which would only add a candidate) does not happen.
                let via_index: Vec<u32> = match v.candidates(&schema, &f) {
                    Some(c) => c.iter().collect(),
                    None => continue,
                };
                let mut scan = Vec::new();
                let _ = v.walk(&base, &mut |e| {
                    if f.eval(&schema, e) == Tri::True {
                        scan.push(e.id);
                    }
                    ControlFlow::Continue(())
                });
                scan.sort_unstable();
                assert_eq!(via_index, scan, "round {round}, {name}: {f:?}");
            }
        }
    }
}

/// One change of a random mix (`indexes_agree_with_a_scan_after_random_changes`): `op` 0 adds
/// `u<who>` or replaces its attributes (`v1`, `v2` pick values), 1 the same without mail, 2
/// renames it (to a name made of `round` and `who`, with uid `u<fresh>`), 3 deletes it.
fn random_change(
    txn: &mut store::Txn,
    s: &Schema,
    round: u64,
    (op, who, v1, v2, fresh): (u64, u64, u64, u64, u64),
) -> Result<(), store::StoreError> {
    let values = ["a", "b", "c", "d"];
    let dn = format!("uid=u{who},ou=people,dc=example,dc=com");
    let n = ndn(s, &dn);
    let existing = txn.version().lookup(&n).map(|e| e.id);
    let mut attrs = person(s, &format!("u{who}"));
    attrs.push(attr(s, "mail", &[values[v1 as usize]]));
    let cn = s.attr_by_name("cn").expect("cn");
    attrs.push(
        Attr::new(
            s,
            cn,
            ";lang-en",
            vec![values[v2 as usize].as_bytes().into()],
        )
        .expect("cn;lang-en"),
    );
    attrs.push(attr(s, "description", &[values[v2 as usize]]));
    match (op, existing) {
        (0 | 1, None) => {
            txn.add(dn, n, attrs, false)?;
        }
        (0, Some(id)) => txn.replace_attrs(id, attrs)?,
        (1, Some(id)) => {
            // Drop the mail attribute entirely.
            attrs.retain(|a| a.ty != s.attr_by_name("mail").expect("mail"));
            txn.replace_attrs(id, attrs)?
        }
        (2, Some(id)) => {
            let to = format!(
                "uid=u{},ou=people,dc=example,dc=com",
                100 + round * 30 + who
            );
            let mut attrs = attrs;
            attrs.retain(|a| a.ty != s.attr_by_name("uid").expect("uid"));
            attrs.push(attr(s, "uid", &[&format!("u{fresh}")]));
            let parent = txn
                .version()
                .lookup(&ndn(s, "ou=people,dc=example,dc=com"))
                .map(|e| e.id);
            txn.rename(id, to.clone(), ndn(s, &to), parent, attrs)?;
        }
        (3, Some(id)) => {
            txn.delete(id)?;
        }
        _ => {}
    }
    Ok(())
}

/// Runs each of `ops` (changes, then a fate: 0 succeed, 1 fail with an error, 2 panic) as one
/// operation, all in one batch: the writer is held by a first operation until every one is
/// queued.
fn one_batch(store: &Store, schema: &Arc<Schema>, round: u64, ops: Vec<(Vec<Change5>, u8)>) {
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let gate = store.write(move |_| wait.recv().map_err(|_| store::StoreError::NoSuchEntry));
    let pending: Vec<_> = ops
        .into_iter()
        .map(|(changes, fate)| {
            let s = schema.clone();
            store.write(move |txn| {
                for c in changes {
                    random_change(txn, &s, round, c)?;
                }
                match fate {
                    0 => Ok(()),
                    1 => Err(store::StoreError::NoSuchEntry),
                    _ => panic!("an operation failing after its changes"),
                }
            })
        })
        .collect();
    go.send(()).expect("gate");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        gate.await.expect("writer").expect("gate");
        for p in pending {
            let _ = p.await;
        }
    });
}

type Change5 = (u64, u64, u64, u64, u64);

/// Operations that fail in the middle of a batch, with an error or a panic after changing
/// entries (adds, replaced attributes, renames, deletes, several per operation), leave the
/// version exactly as if they had never run: the same entries, ids and index answers as a
/// store that ran only the operations that succeeded.
#[test]
fn failed_operations_in_a_batch_are_undone_exactly() {
    let (schema, all) = setup(0);
    let (_, only_ok) = setup(0);
    let mut next = xorshift(0x2545f4914f6cdd1d);
    for round in 0..30 {
        let ops: Vec<(Vec<Change5>, u8)> = (0..12)
            .map(|_| {
                let changes = (0..1 + next(3))
                    .map(|_| (next(4), next(12), next(4), next(4), 1000 + next(1 << 40)))
                    .collect();
                (changes, next(3) as u8)
            })
            .collect();
        let succeeding = ops.iter().filter(|o| o.1 == 0).cloned().collect();
        one_batch(&all, &schema, round, ops);
        one_batch(&only_ok, &schema, round, succeeding);
        let (a, b) = (all.read(), only_ok.read());
        assert_eq!(a.next_id(), b.next_id(), "round {round}");
        let entries = |v: &Version| -> Vec<_> {
            v.iter()
                .map(|e| {
                    (
                        e.id,
                        e.parent,
                        e.dn().to_string(),
                        e.ndn_str().to_string(),
                        e.to_attrs(),
                    )
                })
                .collect()
        };
        assert_eq!(entries(&a), entries(&b), "round {round}");
        for name in ["mail", "cn", "uid", "objectClass"] {
            let ty = schema.attr_by_name(name).expect("attr");
            let mut filters = vec![Filter::Present(ty)];
            for val in ["a", "b", "c", "d", "inetOrgPerson", "User u1", "u3"] {
                if let Ok(norm) = schema.normalize_eq(ty, val.as_bytes()) {
                    filters.push(Filter::Equality { attr: ty, norm });
                }
            }
            for f in filters {
                let ids = |v: &Version| {
                    v.candidates(&schema, &f)
                        .map(|c| c.iter().collect::<Vec<_>>())
                };
                assert_eq!(ids(&a), ids(&b), "round {round}, {f:?}");
            }
        }
        let people = ndn(&schema, "ou=people,dc=example,dc=com");
        let kids = |v: &Version| v.children(v.lookup(&people).expect("people").id).cloned();
        assert_eq!(kids(&a), kids(&b), "round {round}");
    }
}
