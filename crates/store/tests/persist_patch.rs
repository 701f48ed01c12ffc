//! Patch records (log version 5): a batch that changes a few values of an entry logs those
//! values, not the entry. A group of 100,000 members gaining one logs one member; recovery
//! applies each patch to the entry as it stands at that point of the log and gets the exact
//! entry back; a patch that does not fit is a damaged log, never a different entry.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;
mod persist_util;

use std::path::Path;
use std::sync::Arc;

use common::{add_suffix, attr, ndn};
use persist_util::*;
use schema::Schema;
use store::persist::codec::Reader;
use store::persist::log::{log_file_name, LOG_HEADER_LEN};
use store::persist::patch::{encode_entry_change, entry_change};
use store::persist::{
    read_log, recover, Change, Io, LogJournal, LogOptions, LogWriter, PatchAttr, PersistError,
    SimIo, StoredAttr, StoredEntry, StoredPatch,
};
use store::{Entry, EntryId, OwnedPair, Part, Store, Version};

const DIR: &str = "/data";
const GROUP: &str = "cn=big,dc=example,dc=com";

fn member(n: u32) -> String {
    format!("uid=user.{n},ou=people,dc=example,dc=com")
}

fn dir() -> &'static Path {
    Path::new(DIR)
}

/// A store on `io`, recovered from what `io` holds, journaling to its log.
fn open_store(io: &SimIo, schema: &Arc<Schema>) -> Store {
    let rec = recover(io, dir(), schema).expect("recover");
    let log =
        LogWriter::open_after_recovery(Arc::new(io.clone()), dir(), &rec, LogOptions::default())
            .expect("log");
    let initial = Version::restore(
        rec.schema,
        &store::Indexes::new(),
        rec.entries,
        rec.next_id,
        rec.last_seq,
    )
    .with_tombstones(rec.tombstones);
    Store::with_journal(initial, Box::new(LogJournal::new(log)))
}

/// Bytes of all log files.
fn log_bytes(io: &SimIo) -> u64 {
    io.list(dir())
        .expect("list")
        .iter()
        .filter(|n| n.starts_with("log-"))
        .map(|n| io.read(&dir().join(n)).expect("read").len() as u64)
        .sum()
}

/// Adds the suffix and a group of `members` members; the group's id.
fn add_group(store: &Store, schema: &Arc<Schema>, members: std::ops::Range<u32>) -> EntryId {
    let s = schema.clone();
    store
        .write_blocking(move |txn| {
            add_suffix(txn, &s)?;
            let values: Vec<String> = members.map(member).collect();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            txn.add(
                GROUP.into(),
                ndn(&s, GROUP),
                vec![
                    attr(&s, "objectClass", &["top", "groupOfNames"]),
                    attr(&s, "cn", &["big"]),
                    attr(&s, "description", &["a big group"]),
                    attr(&s, "member", &values),
                ],
                false,
            )
        })
        .expect("writer")
        .expect("add")
}

/// One modify of the group as `dit::modify` makes it: `member` kept as stored with the
/// values `gone` left out and `added` appended; `description` replaced when given.
fn change_members(
    txn: &mut store::Txn,
    id: EntryId,
    added: &[u32],
    gone: &[u32],
    description: Option<&str>,
) -> Result<(), store::StoreError> {
    let schema = txn.schema().clone();
    let e = txn
        .version()
        .get(id)
        .cloned()
        .ok_or(store::StoreError::NoSuchEntry)?;
    let member_ty = schema.attr_by_name("member").expect("member");
    let desc_ty = schema.attr_by_name("description").expect("description");
    let add: Vec<OwnedPair> = added
        .iter()
        .map(|&n| {
            let raw = member(n).into_bytes();
            let norm = schema.normalize_eq(member_ty, &raw).expect("dn");
            (raw.into_boxed_slice(), norm.into_boxed_slice())
        })
        .collect();
    let members = e.attr(member_ty).expect("members");
    let mut drop: Vec<usize> = gone
        .iter()
        .map(|&n| {
            let norm = schema
                .normalize_eq(member_ty, member(n).as_bytes())
                .expect("dn");
            members.find(&norm).expect("a member to remove")
        })
        .collect();
    drop.sort_unstable();
    let new_desc = description.map(|d| attr(&schema, "description", &[d]));
    let mut parts = Vec::new();
    for a in e.attrs() {
        if a.ty == member_ty {
            parts.push(Part::Kept {
                attr: a,
                drop: &drop,
                add: &add,
            });
        } else if a.ty == desc_ty && new_desc.is_some() {
            continue;
        } else {
            parts.push(Part::Kept {
                attr: a,
                drop: &[],
                add: &[],
            });
        }
    }
    // A modify puts the attributes it rewrites at the end.
    if let Some(d) = &new_desc {
        parts.push(Part::New(d));
    }
    txn.replace_parts(id, &parts, &[])
}

fn modify(
    store: &Store,
    id: EntryId,
    added: &[u32],
    gone: &[u32],
    description: Option<&'static str>,
) {
    let (added, gone) = (added.to_vec(), gone.to_vec());
    store
        .write_blocking(move |txn| change_members(txn, id, &added, &gone, description))
        .expect("writer")
        .expect("modify");
}

/// The entry exactly (attribute order, values and their order) as a record.
fn exact(schema: &Schema, e: &Entry) -> StoredEntry {
    StoredEntry::from_entry(e, schema)
}

fn recovered(io: &SimIo, schema: &Schema, id: EntryId) -> StoredEntry {
    let rec = recover(io, dir(), schema).expect("recover");
    let e = rec.entries.iter().find(|e| e.id == id).expect("the group");
    exact(schema, e)
}

/// The acceptance test of issue 33's last row: one member more in a group of 100,000 adds
/// less than a few hundred bytes and the member's DN to the log (it was the whole group,
/// about 4.4 MB, before version 5).
#[test]
fn one_member_more_in_a_100k_group_logs_the_member_not_the_group() {
    let schema = Arc::new(Schema::builtin());
    let io = SimIo::new();
    let store = open_store(&io, &schema);
    let id = add_group(&store, &schema, 0..100_000);
    let group = log_bytes(&io);
    assert!(group > 4_000_000, "the group's Put: {group} bytes");

    let before = log_bytes(&io);
    modify(&store, id, &[100_000], &[], None);
    let grew = log_bytes(&io) - before;
    let value = member(100_000).len() as u64;
    assert!(
        grew < 200 + value,
        "adding one member of {value} bytes grew the log by {grew} bytes"
    );

    let before = log_bytes(&io);
    modify(&store, id, &[], &[50_000], None);
    let grew = log_bytes(&io) - before;
    assert!(
        grew < 200 + value,
        "removing one member grew the log by {grew} bytes"
    );
    let live = exact(&schema, store.read().get(id).expect("group"));
    drop(store);
    io.crash();
    assert_eq!(recovered(&io, &schema, id), live);
}

/// Kill -9 at any point after acknowledged batches (unsynced bytes lost, or a batch cut off
/// mid-write): recovery replays every patch onto the group as it stood and gets it back
/// exactly, attribute order and value order included, across two restarts.
#[test]
fn a_100k_group_gaining_and_losing_members_recovers_exactly_after_a_crash() {
    let schema = Arc::new(Schema::builtin());
    let io = SimIo::new();
    let store = open_store(&io, &schema);
    let id = add_group(&store, &schema, 0..100_000);
    modify(&store, id, &[100_000], &[], None);
    modify(&store, id, &[], &[0, 77_777], None);
    modify(
        &store,
        id,
        &[100_001, 100_002],
        &[99_999],
        Some("changed once"),
    );
    // Two operations on the group in one batch: the log holds what the batch made of it.
    let (tx, rx) = std::sync::mpsc::channel();
    for (added, gone) in [
        (vec![100_003u32], vec![1u32]),
        (vec![100_004], vec![100_003]),
    ] {
        let tx = tx.clone();
        store.write_then(
            move |txn| change_members(txn, id, &added, &gone, None),
            move |r| tx.send(r).expect("send"),
        );
    }
    for _ in 0..2 {
        rx.recv().expect("answer").expect("writer").expect("modify");
    }
    let live = store.read();
    let want = exact(&schema, live.get(id).expect("group"));
    let seq = live.seq;
    drop(store);
    io.crash();
    assert_eq!(recovered(&io, &schema, id), want);

    // Restarted, it goes on patching the recovered group; then a batch is cut off by a power
    // loss in the middle of its write, and never acknowledged.
    let store = open_store(&io, &schema);
    assert_eq!(store.read().seq, seq);
    modify(&store, id, &[200_000], &[2, 3], Some("changed twice"));
    let want = exact(&schema, store.read().get(id).expect("group"));
    io.cut_power_after(0);
    let r = store.write_blocking(move |txn| change_members(txn, id, &[300_000], &[4], None));
    assert!(
        !matches!(r, Ok(Ok(()))),
        "a batch whose write failed is not acknowledged: {r:?}"
    );
    drop(store);
    io.crash_keeping(store::persist::Keep::Half);
    assert_eq!(recovered(&io, &schema, id), want);
}

/// A few entries before and after a batch, each pair as the writer would log it.
fn pairs(schema: &Schema) -> Vec<(&'static str, Entry, Entry)> {
    let p = |se: &StoredEntry| entry(schema, se);
    let base = person(5, "Five");
    let with = |f: &dyn Fn(&mut StoredEntry)| {
        let mut e = base.clone();
        f(&mut e);
        p(&e)
    };
    let big = |n: std::ops::Range<u32>| {
        let m: Vec<String> = n.map(member).collect();
        let m: Vec<&str> = m.iter().map(String::as_str).collect();
        StoredEntry {
            id: 9,
            parent: Some(1),
            dn: "cn=g,dc=example,dc=com".into(),
            attrs: vec![
                sattr("objectClass", &["top", "groupOfNames"]),
                sattr("cn", &["g"]),
                sattr("member", &m),
            ],
        }
    };
    let moved = |f: &dyn Fn(&mut StoredEntry)| {
        let mut e = big(0..300);
        f(&mut e);
        p(&e)
    };
    vec![
        ("unchanged", p(&base), p(&base)),
        (
            "one value replaced",
            p(&base),
            with(&|e| e.attrs[2] = sattr("cn", &["Cinq"])),
        ),
        (
            "an attribute added",
            p(&base),
            with(&|e| e.attrs.push(sattr("description", &["new"]))),
        ),
        (
            "an attribute removed",
            p(&base),
            with(&|e| {
                e.attrs.remove(3);
            }),
        ),
        (
            "attributes reordered",
            p(&base),
            with(&|e| e.attrs.rotate_left(2)),
        ),
        (
            "everything rewritten",
            p(&base),
            p(&StoredEntry {
                attrs: vec![
                    sattr("objectClass", &["top", "person"]),
                    sattr("cn", &["X"]),
                    sattr("sn", &["Y"]),
                ],
                ..base.clone()
            }),
        ),
        (
            "renamed",
            p(&base),
            with(&|e| e.dn = "uid=five,dc=example,dc=com".into()),
        ),
        ("a member added", p(&big(0..300)), p(&big(0..301))),
        (
            "a member removed",
            p(&big(0..300)),
            moved(&|e| {
                e.attrs[2].values.remove(150);
            }),
        ),
        (
            "members added and removed",
            p(&big(0..300)),
            moved(&|e| {
                e.attrs[2].values.remove(0);
                e.attrs[2].values.remove(200);
                e.attrs[2].values.push(member(900).into_bytes());
            }),
        ),
        (
            "members reversed",
            p(&big(0..300)),
            moved(&|e| e.attrs[2].values.reverse()),
        ),
        (
            "a member moved to the front",
            p(&big(0..300)),
            moved(&|e| {
                e.attrs[2].values.rotate_right(1);
            }),
        ),
        (
            "members replaced and the group renamed",
            p(&big(0..300)),
            moved(&|e| {
                e.dn = "cn=h,dc=example,dc=com".into();
                e.attrs[2].values.truncate(10);
            }),
        ),
        (
            "options",
            p(&base),
            with(&|e| e.attrs[3] = sattr("cn;lang-en", &["English name", "Another"])),
        ),
    ]
}

/// The writer's encoding (straight from the entries) is byte for byte the owned record's,
/// decodes back to it, and applied to the entry before gives the entry after, exactly.
#[test]
fn patches_round_trip_and_rebuild_the_entry_exactly() {
    let schema = Schema::builtin();
    store::intern::set_schema_types(&schema);
    let mut kinds = Vec::new();
    for (what, old, new) in pairs(&schema) {
        let owned = entry_change(Some(&old), &new, &schema);
        let mut want = Vec::new();
        owned.encode(&mut want);
        let mut got = Vec::new();
        encode_entry_change(Some(&old), &new, &schema, &mut got);
        assert_eq!(got, want, "{what}: the writer's bytes");
        let mut r = Reader::new(&got);
        assert_eq!(Change::decode(&mut r).expect("decodes"), owned, "{what}");
        assert!(r.is_empty());
        let put = {
            let mut b = Vec::new();
            Change::Put(exact(&schema, &new)).encode(&mut b);
            b
        };
        match &owned {
            Change::Patch(p) => {
                assert!(got.len() < put.len(), "{what}: a patch only when smaller");
                let rebuilt = p.apply(&old, &schema).expect("applies");
                assert_eq!(exact(&schema, &rebuilt), exact(&schema, &new), "{what}");
                kinds.push((what, "patch"));
            }
            Change::Put(e) => {
                assert_eq!(*e, exact(&schema, &new));
                kinds.push((what, "put"));
            }
            other => panic!("{what}: {other:?}"),
        }
        // A new entry is always written whole.
        let mut fresh = Vec::new();
        encode_entry_change(None, &new, &schema, &mut fresh);
        assert_eq!(fresh, put, "{what}: a new entry");
    }
    let kind = |w: &str| kinds.iter().find(|k| k.0 == w).map(|k| k.1);
    assert_eq!(kind("a member added"), Some("patch"));
    assert_eq!(kind("members added and removed"), Some("patch"));
    assert_eq!(kind("one value replaced"), Some("patch"));
    assert_eq!(kind("renamed"), Some("put"));
    assert_eq!(kind("members replaced and the group renamed"), Some("put"));
    // Even every attribute rewritten is smaller as a patch (no DN): only a move is a Put.
    assert_eq!(kind("everything rewritten"), Some("patch"));
}

/// A Patch with each kind of attribute survives the log: written, read back, equal.
#[test]
fn patch_records_round_trip_through_a_log_file() {
    let io = SimIo::new();
    let patch = StoredPatch {
        id: 7,
        before: 4,
        attrs: vec![
            PatchAttr::Keep(0),
            PatchAttr::Delta {
                at: 2,
                name: "member".into(),
                removed: vec![b"uid=a".to_vec(), b"uid=b".to_vec()],
                added: vec![b"uid=c".to_vec()],
            },
            PatchAttr::Keep(3),
            PatchAttr::Set(sattr("cn;lang-en", &["x", "y"])),
        ],
    };
    let changes = vec![
        Change::Put(root()),
        Change::Patch(patch),
        Change::Delete { id: 3 },
    ];
    let mut w =
        LogWriter::open(Arc::new(io.clone()), dir(), 1, LogOptions::default()).expect("open");
    w.append_batch(1, &changes).expect("append");
    let bytes = io.read(&dir().join(log_file_name(1))).expect("read");
    let log = read_log("log", &bytes).expect("reads");
    assert_eq!(log.version, 5);
    assert_eq!(log.batches[0].changes, changes);
}

/// The batch the writer logs from two versions equals `batch_changes` of them: patches for
/// the entries changed in place, Puts for the new and the renamed, deletes.
#[test]
fn a_batch_of_patches_from_the_versions_writes_the_same_bytes_as_its_changes() {
    let schema = Arc::new(Schema::builtin());
    let all = pairs(&schema);
    let idx = store::Indexes::new();
    let mut before: Vec<Entry> = vec![entry(&schema, &root())];
    let mut after: Vec<Entry> = vec![entry(&schema, &root())];
    // Each pair under its own id, from 10 on.
    for (i, (_, old, new)) in all.iter().enumerate() {
        let id = 10 + i as u32;
        let re = |e: &Entry| {
            let mut s = exact(&schema, e);
            s.id = id;
            s.parent = Some(1);
            s.dn =
                s.dn.replacen("dc=example", &format!("ou=n{id},dc=example"), 1);
            entry(&schema, &s)
        };
        before.push(re(old));
        after.push(re(new));
    }
    before.sort_by_key(|e| e.id);
    after.push(entry(&schema, &person(90, "new")));
    after.sort_by_key(|e| e.id);
    before.push(entry(&schema, &person(91, "deleted")));
    let prev = Version::restore(schema.clone(), &idx, before, 100, 0);
    let version = Version::restore(schema.clone(), &idx, after, 100, 1);
    let mut touched: Vec<u32> = (10..10 + all.len() as u32).collect();
    touched.extend([90, 91]);
    let none = store::TombstoneChanges::default();
    let changes = store::persist::batch_changes(&prev, &version, &[], &touched, &none);
    assert!(changes.iter().any(|c| matches!(c, Change::Patch(_))));
    assert!(changes.iter().any(|c| matches!(c, Change::Put(_))));
    let (a, b) = (SimIo::new(), SimIo::new());
    let open = |io: &SimIo| {
        LogWriter::open(Arc::new(io.clone()), dir(), 1, LogOptions::default()).expect("open")
    };
    let when = std::time::SystemTime::now();
    open(&a).append_batch_at(1, when, &changes).expect("append");
    open(&b)
        .append_version_batch(1, when, &prev, &version, &[], &touched, &none)
        .expect("append");
    let read = |io: &SimIo| io.read(&dir().join(log_file_name(1))).expect("read");
    assert_eq!(read(&a), read(&b));
}

/// Recovery of a log whose patch does not fit the entry stops with the file and the batch,
/// and what is wrong.
#[test]
fn a_patch_that_does_not_fit_is_a_damaged_log() {
    let schema = Schema::builtin();
    let group = StoredEntry {
        id: 2,
        parent: Some(1),
        dn: "cn=g,dc=example,dc=com".into(),
        attrs: vec![
            sattr("objectClass", &["top", "groupOfNames"]),
            sattr(
                "member",
                &["uid=a,dc=example,dc=com", "uid=b,dc=example,dc=com"],
            ),
        ],
    };
    let delta_at = |at: usize, id: u32, removed: &[&str], added: &[&str]| {
        Change::Patch(StoredPatch {
            id,
            before: 2,
            attrs: vec![
                PatchAttr::Keep(1 - at),
                PatchAttr::Delta {
                    at,
                    name: "member".into(),
                    removed: removed.iter().map(|v| v.as_bytes().to_vec()).collect(),
                    added: added.iter().map(|v| v.as_bytes().to_vec()).collect(),
                },
            ],
        })
    };
    let delta = |id: u32, removed: &[&str], added: &[&str]| delta_at(1, id, removed, added);
    let cases: Vec<(Change, &str)> = vec![
        (
            delta_at(0, 2, &[], &["uid=c,dc=example,dc=com"]),
            "changes attribute 0 as 'member', but the entry's attribute 0 is 'objectClass'",
        ),
        (
            delta(3, &[], &["uid=c,dc=example,dc=com"]),
            "entry 3, which does not exist",
        ),
        (
            delta(2, &["uid=z,dc=example,dc=com"], &[]),
            "removes from 'member' the value 'uid=z,dc=example,dc=com', which it does not hold",
        ),
        (
            delta(2, &[], &["UID=A,dc=example,dc=com"]),
            "which it holds already",
        ),
        (
            delta(
                2,
                &["uid=a,dc=example,dc=com", "uid=b,dc=example,dc=com"],
                &[],
            ),
            "no values",
        ),
        (
            Change::Patch(StoredPatch {
                id: 2,
                before: 3,
                attrs: vec![PatchAttr::Keep(0)],
            }),
            "the entry has 2 attributes, the patch was made for 3",
        ),
        (
            Change::Patch(StoredPatch {
                id: 2,
                before: 2,
                attrs: vec![PatchAttr::Keep(0), PatchAttr::Keep(0)],
            }),
            "twice",
        ),
        (
            Change::Patch(StoredPatch {
                id: 2,
                before: 2,
                attrs: vec![PatchAttr::Keep(5)],
            }),
            "names attribute 5",
        ),
        (
            Change::Patch(StoredPatch {
                id: 2,
                before: 2,
                attrs: vec![
                    PatchAttr::Keep(1),
                    PatchAttr::Set(sattr("member", &["uid=q"])),
                ],
            }),
            "would hold attribute 'member' twice",
        ),
    ];
    for (bad, says) in cases {
        let io = SimIo::new();
        let mut w =
            LogWriter::open(Arc::new(io.clone()), dir(), 1, LogOptions::default()).expect("open");
        w.append_batch(1, &[Change::Put(root()), Change::Put(group.clone())])
            .expect("append");
        w.append_batch(2, &[Change::Delete { id: 3 }])
            .expect("append");
        w.append_batch(3, &[bad]).expect("append");
        match recover(&io, dir(), &schema) {
            Err(e @ PersistError::Corrupt { .. }) => {
                let m = e.to_string();
                assert!(
                    m.starts_with(&format!("{}: corrupt at byte", log_file_name(1))),
                    "{m}"
                );
                assert!(m.contains("batch 3: "), "{m}");
                assert!(m.contains(says), "{m} (wanted: {says})");
            }
            other => panic!("{says}: expected Corrupt, got {other:?}"),
        }
    }
}

/// A Patch record inside a log of version 4 or older (which no writer of those versions
/// made) is corruption.
#[test]
fn a_patch_record_in_a_version_4_log_is_corrupt() {
    let io = SimIo::new();
    let mut w =
        LogWriter::open(Arc::new(io.clone()), dir(), 1, LogOptions::default()).expect("open");
    w.append_batch(
        1,
        &[Change::Patch(StoredPatch {
            id: 1,
            before: 0,
            attrs: vec![PatchAttr::Set(StoredAttr {
                name: "cn".into(),
                values: vec![b"x".to_vec()],
            })],
        })],
    )
    .expect("append");
    let path = dir().join(log_file_name(1));
    let mut bytes = io.read(&path).expect("read");
    bytes[8..12].copy_from_slice(&4u32.to_le_bytes());
    match read_log("log", &bytes) {
        Err(PersistError::Corrupt { offset, reason, .. }) => {
            assert!(offset > LOG_HEADER_LEN as u64);
            assert!(
                reason.contains("patch record in a version 4 log"),
                "{reason}"
            );
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// A reference entry (`linden gen`'s inetOrgPerson with the server's stamps) before and
/// after an ordinary modify (description replaced, entryCSN and modifyTimestamp stamped; the
/// rewritten attributes go to the end, as `dit::modify` puts them).
fn ordinary_modify(schema: &Schema) -> (Entry, Entry) {
    let mut se = StoredEntry {
        id: 1234,
        parent: Some(3),
        dn: "uid=user.1234,ou=people,dc=example,dc=com".into(),
        attrs: vec![
            sattr(
                "objectClass",
                &["top", "person", "organizationalPerson", "inetOrgPerson"],
            ),
            sattr("uid", &["user.1234"]),
            sattr("cn", &["Aaren Atp"]),
            sattr("sn", &["Atp"]),
            sattr("givenName", &["Aaren"]),
            sattr("mail", &["user.1234@example.com"]),
            sattr("telephoneNumber", &["+1 685 622 6202"]),
            sattr("employeeNumber", &["1234"]),
            sattr(
                "userPassword",
                &["{SSHA}tG8cHJxQ6Xq1ZzFhA8bV0y1bZ5kq3o0aXk2Lw=="],
            ),
            sattr("description", &["before"]),
            sattr("structuralObjectClass", &["inetOrgPerson"]),
            sattr("entryUUID", &["6f1c4ad2-6c0e-4b6a-9f57-0d7c3b1f0a11"]),
            sattr("creatorsName", &["cn=admin,dc=example,dc=com"]),
            sattr("createTimestamp", &["20261128000000Z"]),
            sattr("entryCSN", &["20261128000000.000000Z#000000#000#000000"]),
            sattr("modifiersName", &["cn=admin,dc=example,dc=com"]),
            sattr("modifyTimestamp", &["20261128000000Z"]),
        ],
    };
    let old = entry(schema, &se);
    let rewritten = [
        "description",
        "entryCSN",
        "modifyTimestamp",
        "modifiersName",
    ];
    let mut kept: Vec<_> = se
        .attrs
        .iter()
        .filter(|a| !rewritten.contains(&a.name.as_str()))
        .cloned()
        .collect();
    kept.push(sattr("description", &["after"]));
    kept.push(sattr(
        "entryCSN",
        &["20261128101010.123456Z#000000#000#000000"],
    ));
    kept.push(sattr("modifyTimestamp", &["20261128101010Z"]));
    kept.push(sattr("modifiersName", &["cn=admin,dc=example,dc=com"]));
    se.attrs = kept;
    (old, entry(schema, &se))
}

/// What the log encoding costs per entry, Put against the writer's choice (a Patch here),
/// for an ordinary modify and for one member added to a group of 100,000. Timings; run in
/// release by hand:
///
///     cargo test --release -p store --test persist_patch -- --ignored --nocapture
#[test]
#[ignore = "timings, printed; run by hand in release"]
fn encoding_cost_of_an_ordinary_modify_and_a_big_group() {
    let schema = Schema::builtin();
    store::intern::set_schema_types(&schema);
    let time = |what: &str, n: u32, f: &mut dyn FnMut(&mut Vec<u8>)| {
        let mut out = Vec::with_capacity(1 << 23);
        let mut runs = Vec::new();
        for _ in 0..5 {
            let t = std::time::Instant::now();
            for _ in 0..n {
                out.clear();
                f(&mut out);
            }
            runs.push(t.elapsed().as_nanos() as f64 / f64::from(n));
        }
        runs.sort_by(f64::total_cmp);
        eprintln!(
            "{what}: {} bytes, {:.0} ns (median of 5 runs of {n})",
            out.len(),
            runs[2]
        );
    };
    let (old, new) = ordinary_modify(&schema);
    time("ordinary modify, Put", 200_000, &mut |out| {
        store::persist::codec::encode_put(&new, &schema, out)
    });
    time("ordinary modify, writer's choice", 200_000, &mut |out| {
        encode_entry_change(Some(&old), &new, &schema, out)
    });
    let group = |n: std::ops::Range<u32>| {
        let m: Vec<String> = n.map(member).collect();
        let m: Vec<&str> = m.iter().map(String::as_str).collect();
        entry(
            &schema,
            &StoredEntry {
                id: 9,
                parent: Some(1),
                dn: GROUP.into(),
                attrs: vec![
                    sattr("objectClass", &["top", "groupOfNames"]),
                    sattr("cn", &["big"]),
                    sattr("member", &m),
                ],
            },
        )
    };
    let (old, new) = (group(0..100_000), group(0..100_001));
    time("group of 100,000 + 1, Put", 20, &mut |out| {
        store::persist::codec::encode_put(&new, &schema, out)
    });
    time("group of 100,000 + 1, writer's choice", 20, &mut |out| {
        encode_entry_change(Some(&old), &new, &schema, out)
    });
}
