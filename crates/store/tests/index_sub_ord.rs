//! Substring and ordering indexes: for random entries, changes and filters, an indexed search
//! finds exactly what a scan finds, the index built in bulk (`Version::restore`) proposes the
//! same candidates as the one kept up to date change by change, and a leading-substring search
//! examines only its candidates.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::ops::ControlFlow;
use std::sync::Arc;

mod common;

use common::{attr, ndn};
use proptest::prelude::*;
use schema::Schema;
use store::{Attr, Entry, Filter, IndexKinds, Indexes, Scope, Store, Tri, Version};

const SUFFIX: &str = "dc=example,dc=com";

fn indexes(schema: &Schema) -> Indexes {
    let mut i = Indexes::new();
    let k = |n: &str| IndexKinds::from_name(n).expect("kind");
    for (name, kinds) in [
        ("objectClass", IndexKinds::DEFAULT),
        ("cn", k("sub") | k("eq")),
        ("sn", k("subinitial")),
        ("mail", k("subany") | k("subfinal")),
        ("telephoneNumber", k("sub")),
        ("uidNumber", k("ord")),
        ("dnQualifier", k("ord") | k("eq")),
        ("modifyTimestamp", k("ord")),
    ] {
        i.add(schema.attr_by_name(name).expect("attr"), kinds);
    }
    i
}

fn store_with_suffix(schema: &Arc<Schema>) -> Store {
    let store = Store::with_indexes(schema.clone(), indexes(schema));
    let s2 = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s2;
            txn.add(
                SUFFIX.into(),
                ndn(s, SUFFIX),
                vec![
                    attr(s, "objectClass", &["top", "domain"]),
                    attr(s, "dc", &["example"]),
                ],
                true,
            )
            .map(|_| ())
        })
        .expect("writer")
        .expect("suffix");
    store
}

/// Short strings over a small alphabet (with case and sometimes spaces), so that pieces
/// often match.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::string::string_regex("[abAB]{1,7}").expect("regex"),
        proptest::string::string_regex("[ab ]{0,6}[ab]").expect("regex"),
    ]
}

/// Random attribute values of one person.
#[derive(Debug, Clone)]
struct Person {
    cn: Vec<String>,
    cn_lang: Option<String>,
    sn: String,
    mail: String,
    phone: String,
    uid_number: i64,
    dnq: String,
    stamp: (u8, u8, Option<u8>),
}

fn person() -> impl Strategy<Value = Person> {
    (
        proptest::collection::btree_set(text(), 1..3),
        proptest::option::of(text()),
        text(),
        proptest::string::string_regex("[ab.]{1,7}@[ab]{1,3}").expect("regex"),
        proptest::string::string_regex("[01 -]{0,8}[01]").expect("regex"),
        -30i64..30,
        text(),
        (1u8..3, 0u8..2, proptest::option::of(0u8..3)),
    )
        .prop_map(
            |(cn, cn_lang, sn, mail, phone, uid_number, dnq, stamp)| Person {
                cn: cn.into_iter().collect(),
                cn_lang,
                sn,
                mail,
                phone,
                uid_number,
                dnq,
                stamp,
            },
        )
}

fn attrs_of(s: &Schema, uid: u32, p: &Person) -> Vec<Attr> {
    let cn: Vec<&str> = p.cn.iter().map(String::as_str).collect();
    let (day, hour, frac) = p.stamp;
    let stamp = match frac {
        Some(f) => format!("202401{day:02}{hour:02}0000.{f}Z"),
        None => format!("202401{day:02}{hour:02}0000Z"),
    };
    let mut a = vec![
        attr(
            s,
            "objectClass",
            &["top", "person", "organizationalPerson", "inetOrgPerson"],
        ),
        attr(s, "uid", &[&format!("u{uid}")]),
        attr(s, "cn", &cn),
        attr(s, "sn", &[&p.sn]),
        attr(s, "mail", &[&p.mail]),
        attr(s, "telephoneNumber", &[&p.phone]),
        attr(s, "uidNumber", &[&p.uid_number.to_string()]),
        attr(s, "dnQualifier", &[&p.dnq]),
        attr(s, "modifyTimestamp", &[&stamp]),
    ];
    if let Some(l) = &p.cn_lang {
        let ty = s.attr_by_name("cn").expect("cn");
        a.push(Attr::new(s, ty, ";lang-en", vec![l.as_bytes().into()]).expect("cn;lang-en"));
    }
    a
}

/// A change: add or replace entry `who`, or delete it.
#[derive(Debug, Clone)]
enum Op {
    Put(u32, Person),
    Delete(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..12, person()).prop_map(|(w, p)| Op::Put(w, p)),
        1 => (0u32..12).prop_map(Op::Delete),
    ]
}

/// A filter component over the indexed (and some unindexed) types.
#[derive(Debug, Clone)]
enum F {
    /// A piece cut from a value the data holds, so that it matches: the value (`Index` into
    /// the values of the type), where the cut starts and its length, and where it goes
    /// (0 initial, 1 final, 2 any, 3 all three).
    Cut(
        &'static str,
        proptest::sample::Index,
        proptest::sample::Index,
        proptest::sample::Index,
        u8,
    ),
    Sub(&'static str, Option<String>, Vec<String>, Option<String>),
    Ge(&'static str, String),
    Le(&'static str, String),
    And(Vec<F>),
    Or(Vec<F>),
    Not(Box<F>),
}

/// Pieces over the values' alphabets, so that long pieces (which use the any keys) match often.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::string::string_regex("[aAb]{0,6}").expect("regex"),
        proptest::string::string_regex("[ab ]{0,6}").expect("regex"),
        proptest::string::string_regex("[ab.@]{0,7}").expect("regex"),
        proptest::string::string_regex("[01 -]{0,7}").expect("regex"),
    ]
}

fn leaf() -> impl Strategy<Value = F> {
    let sub_attr = prop_oneof![
        Just("cn"),
        Just("sn"),
        Just("mail"),
        Just("telephoneNumber"),
        Just("name"),
        Just("givenName"),
    ];
    let ord_value = prop_oneof![
        (-35i64..35).prop_map(|i| ("uidNumber", i.to_string())),
        text().prop_map(|t| ("dnQualifier", t)),
        (1u8..4, 0u8..2, proptest::option::of(0u8..3)).prop_map(|(d, h, f)| (
            "modifyTimestamp",
            match f {
                Some(f) => format!("202401{d:02}{h:02}0000.{f}Z"),
                None => format!("202401{d:02}{h:02}0000Z"),
            }
        )),
        Just(("uidNumber", "not a number".to_string())),
    ];
    let cut_attr = prop_oneof![
        Just("cn"),
        Just("sn"),
        Just("mail"),
        Just("telephoneNumber"),
    ];
    prop_oneof![
        (
            cut_attr,
            any::<proptest::sample::Index>(),
            any::<proptest::sample::Index>(),
            any::<proptest::sample::Index>(),
            0u8..4
        )
            .prop_map(|(a, v, at, len, shape)| F::Cut(a, v, at, len, shape)),
        (
            sub_attr,
            proptest::option::of(piece()),
            proptest::collection::vec(piece(), 0..3),
            proptest::option::of(piece())
        )
            .prop_map(|(a, i, any, f)| F::Sub(a, i, any, f)),
        (any::<bool>(), ord_value).prop_map(|(ge, (a, v))| if ge {
            F::Ge(a, v)
        } else {
            F::Le(a, v)
        }),
    ]
}

fn filter() -> impl Strategy<Value = F> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..3).prop_map(F::And),
            proptest::collection::vec(inner.clone(), 1..3).prop_map(F::Or),
            inner.prop_map(|f| F::Not(Box::new(f))),
        ]
    })
}

fn compile(s: &Schema, v: &Version, f: &F) -> Filter {
    let ty = |n: &str| s.attr_by_name(n).expect("attr");
    let b = |v: &str| v.as_bytes().to_vec();
    match f {
        F::Cut(a, which, at, len, shape) => {
            let values: Vec<Vec<u8>> = v
                .iter()
                .flat_map(|e| {
                    e.attrs_of(s, ty(a))
                        .flat_map(|x| x.values().map(<[u8]>::to_vec).collect::<Vec<_>>())
                        .collect::<Vec<_>>()
                })
                .collect();
            if values.is_empty() {
                return Filter::Present(ty(a));
            }
            let val = which.get(&values);
            let start = at.index(val.len() + 1);
            let end = start + len.index(val.len() - start + 1);
            let piece = val[start..end].to_vec();
            let (initial, any, final_) = match shape {
                0 => (Some(val[..end].to_vec()), vec![], None),
                1 => (None, vec![], Some(val[start..].to_vec())),
                2 => (None, vec![piece], None),
                _ => (
                    Some(val[..start].to_vec()),
                    vec![piece],
                    Some(val[end..].to_vec()),
                ),
            };
            Filter::Substrings {
                attr: ty(a),
                initial,
                any,
                final_,
            }
        }
        F::Sub(a, i, any, fin) => {
            if i.is_none() && any.is_empty() && fin.is_none() {
                return Filter::Present(ty(a));
            }
            Filter::Substrings {
                attr: ty(a),
                initial: i.as_deref().map(b),
                any: any.iter().map(|p| b(p)).collect(),
                final_: fin.as_deref().map(b),
            }
        }
        F::Ge(a, v) => Filter::GreaterOrEqual {
            attr: ty(a),
            value: b(v),
        },
        F::Le(a, v) => Filter::LessOrEqual {
            attr: ty(a),
            value: b(v),
        },
        F::And(fs) => Filter::And(fs.iter().map(|f| compile(s, v, f)).collect()),
        F::Or(fs) => Filter::Or(fs.iter().map(|f| compile(s, v, f)).collect()),
        F::Not(f) => Filter::Not(Box::new(compile(s, v, f))),
    }
}

fn apply(store: &Store, schema: &Arc<Schema>, ops: Vec<Op>) {
    let s2 = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s2;
            let parent = txn.version().lookup(&ndn(s, SUFFIX)).map(|e| e.id);
            assert!(parent.is_some());
            for op in ops {
                let who = match &op {
                    Op::Put(w, _) | Op::Delete(w) => *w,
                };
                let dn = format!("uid=u{who},{SUFFIX}");
                let n = ndn(s, &dn);
                let existing = txn.version().lookup(&n).map(|e| e.id);
                match (op, existing) {
                    (Op::Put(_, p), None) => {
                        txn.add(dn, n, attrs_of(s, who, &p), false)?;
                    }
                    (Op::Put(_, p), Some(id)) => txn.replace_attrs(id, attrs_of(s, who, &p))?,
                    (Op::Delete(_), Some(id)) => {
                        txn.delete(id)?;
                    }
                    (Op::Delete(_), None) => {}
                }
            }
            Ok::<_, store::StoreError>(())
        })
        .expect("writer")
        .expect("batch");
}

/// The ids a full scan finds, and the ids `search` (which plans with the indexes) finds.
fn scan_and_search(s: &Schema, v: &Version, f: &Filter) -> (Vec<u32>, Vec<u32>) {
    let base = v.lookup(&ndn(s, SUFFIX)).expect("base").clone();
    let mut scan = Vec::new();
    let _ = v.walk(&base, &mut |e| {
        if f.eval(s, e) == Tri::True {
            scan.push(e.id);
        }
        ControlFlow::Continue(())
    });
    scan.sort_unstable();
    let mut found = Vec::new();
    v.search(
        s,
        &base,
        Scope::Subtree,
        f,
        |e: &Arc<Entry>| {
            found.push(e.id);
            ControlFlow::Continue(())
        },
        || ControlFlow::Continue(()),
    );
    found.sort_unstable();
    (scan, found)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn indexed_searches_equal_scans(
        batches in proptest::collection::vec(proptest::collection::vec(op(), 1..8), 1..5),
        filters in proptest::collection::vec(filter(), 1..12),
    ) {
        let schema = Arc::new(Schema::builtin());
        let store = store_with_suffix(&schema);
        for ops in batches {
            apply(&store, &schema, ops);
        }
        let v = store.read();
        let rebuilt = Version::restore(
            schema.clone(),
            &indexes(&schema),
            v.iter().map(|e| Entry::clone(e)),
            v.next_id(),
            v.seq,
        );
        for f in &filters {
            let f = compile(&schema, &v, f);
            let (scan, found) = scan_and_search(&schema, &v, &f);
            prop_assert_eq!(&scan, &found, "{:?}", f);
            let (scan2, found2) = scan_and_search(&schema, &rebuilt, &f);
            prop_assert_eq!(&scan, &scan2);
            prop_assert_eq!(&scan2, &found2, "rebuilt: {:?}", f);
            let live = v.candidates(&schema, &f);
            prop_assert_eq!(&live, &rebuilt.candidates(&schema, &f), "{:?}", f);
            if let Some(c) = live {
                for id in &scan {
                    prop_assert!(c.contains(*id), "candidate {} missing for {:?}", id, f);
                }
            }
        }
    }
}

/// Loads `n` people named `User user.N`, indexed for substrings on cn.
fn people(n: u32) -> (Arc<Schema>, Store) {
    let schema = Arc::new(Schema::builtin());
    let store = store_with_suffix(&schema);
    let s2 = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s2;
            for i in 0..n {
                let dn = format!("uid=user.{i},{SUFFIX}");
                txn.add(
                    dn.clone(),
                    ndn(s, &dn),
                    vec![
                        attr(s, "objectClass", &["top", "person", "inetOrgPerson"]),
                        attr(s, "uid", &[&format!("user.{i}")]),
                        attr(s, "cn", &[&format!("User user.{i}")]),
                        attr(s, "sn", &[&format!("Surname{i}")]),
                        attr(s, "uidNumber", &[&i.to_string()]),
                    ],
                    false,
                )?;
            }
            Ok::<_, store::StoreError>(())
        })
        .expect("writer")
        .expect("load");
    (schema, store)
}

fn run(schema: &Schema, v: &Version, f: &Filter) -> (usize, u64) {
    let base = v.lookup(&ndn(schema, SUFFIX)).expect("base").clone();
    let mut found = 0;
    let examined = v.search(
        schema,
        &base,
        Scope::Subtree,
        f,
        |_: &Arc<Entry>| {
            found += 1;
            ControlFlow::Continue(())
        },
        || ControlFlow::Continue(()),
    );
    (found, examined)
}

fn sub(schema: &Schema, a: &str, initial: Option<&str>, any: &[&str], fin: Option<&str>) -> Filter {
    Filter::Substrings {
        attr: schema.attr_by_name(a).expect("attr"),
        initial: initial.map(|s| s.as_bytes().to_vec()),
        any: any.iter().map(|s| s.as_bytes().to_vec()).collect(),
        final_: fin.map(|s| s.as_bytes().to_vec()),
    }
}

#[test]
fn substring_and_ordering_searches_examine_only_candidates() {
    let (schema, store) = people(5000);
    let v = store.read();
    // user.432 and user.4320 to user.4329: the prefix key and the windows of the longer
    // prefix name exactly these.
    let f = sub(&schema, "cn", Some("USER USER.432"), &[], None);
    assert_eq!(run(&schema, &v, &f), (11, 11));
    // A final piece: ...4321 is user.4321 only (the final key is the last 6 bytes,
    // "r.4321", and the windows of the piece).
    let f = sub(&schema, "cn", None, &[], Some("user.4321"));
    assert_eq!(run(&schema, &v, &f), (1, 1));
    // An any piece: every window of "r.432" is in exactly the 11 values above, and user.1432,
    // 2432, 3432, 4432 hold ".432" but not "r.43".
    let f = sub(&schema, "cn", None, &["r.432"], None);
    assert_eq!(run(&schema, &v, &f), (11, 11));
    // sn has only an initial index: its prefix key is the first 6 bytes, so "surname12*"
    // proposes every "surnam" value and the filter does the rest.
    let f = sub(&schema, "sn", Some("surname12"), &[], None);
    let (found, examined) = run(&schema, &v, &f);
    assert_eq!(found, 111);
    assert_eq!(examined, 5000);
    // A piece shorter than every key cannot narrow: the scope is walked.
    let f = sub(&schema, "cn", Some("u"), &[], None);
    assert_eq!(run(&schema, &v, &f), (5000, 5001));
    // ...unless another part of the filter can.
    let f = Filter::And(vec![
        sub(&schema, "cn", Some("u"), &[], None),
        sub(&schema, "cn", None, &["4999"], None),
    ]);
    assert_eq!(run(&schema, &v, &f), (1, 1));
    // Ordering: integers in numeric order, not byte order.
    let ge = |val: &str| Filter::GreaterOrEqual {
        attr: schema.attr_by_name("uidNumber").expect("attr"),
        value: val.as_bytes().to_vec(),
    };
    assert_eq!(run(&schema, &v, &ge("4990")), (10, 10));
    assert_eq!(run(&schema, &v, &ge("-7")), (5000, 5000));
    let le = Filter::LessOrEqual {
        attr: schema.attr_by_name("uidNumber").expect("attr"),
        value: b"9".to_vec(),
    };
    assert_eq!(run(&schema, &v, &le), (10, 10));
    // An unindexed ordering type falls back to a scan.
    let f = Filter::GreaterOrEqual {
        attr: schema.attr_by_name("gidNumber").expect("attr"),
        value: b"1".to_vec(),
    };
    assert_eq!(run(&schema, &v, &f), (0, 5001));
}

#[test]
fn a_modify_touches_only_the_changed_values_keys() {
    let (schema, store) = people(3);
    let s2 = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s2;
            let id = txn
                .version()
                .lookup(&ndn(s, &format!("uid=user.1,{SUFFIX}")))
                .expect("entry")
                .id;
            txn.replace_attrs(
                id,
                vec![
                    attr(s, "objectClass", &["top", "person", "inetOrgPerson"]),
                    attr(s, "uid", &["user.1"]),
                    attr(s, "cn", &["Renamed Person"]),
                    attr(s, "sn", &["Surname1"]),
                    attr(s, "uidNumber", &["77"]),
                ],
            )
        })
        .expect("writer")
        .expect("modify");
    let v = store.read();
    assert_eq!(
        run(
            &schema,
            &v,
            &sub(&schema, "cn", Some("user user.1"), &[], None)
        ),
        (0, 0)
    );
    assert_eq!(
        run(
            &schema,
            &v,
            &sub(&schema, "cn", None, &["named pers"], None)
        ),
        (1, 1)
    );
    let ge = Filter::GreaterOrEqual {
        attr: schema.attr_by_name("uidNumber").expect("attr"),
        value: b"3".to_vec(),
    };
    assert_eq!(run(&schema, &v, &ge), (1, 1));
}
