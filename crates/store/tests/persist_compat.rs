//! Format compatibility (style rule 12): files written by each format version are kept in
//! `tests/fixtures/v<N>/` and must load, with exactly this content, in every later Linden.
//! Version 1 has a snapshot and a log; version 2 changed only the snapshot. `v3` holds a
//! version 3 snapshot (schema extensions in its schema section) and a version 2 log (schema
//! records). `v4` holds a version 4 snapshot (packed entries of layout 2: no RDN block,
//! shorter attribute headers) whose entries name an import's stamps by interned number. `v5`
//! holds a version 5 snapshot (a tombstone section) and a version 3 log (tombstone records).
//! `v6` holds a version 4 log (batch times). `v7` is a directory upgraded from version 4 to
//! version 5 logs: `log-…1.lnl` (version 4, made by the code of commit 1093bdf, before
//! version 5 existed: a group of 200 members, then one more, as Puts) and `log-…3.lnl`
//! (version 5, made by `write_v7_fixtures`: the same group and a person changed by the
//! store's writer, as Patch records, on top of the version 4 file).
//!
//! The fixtures were made once by `cargo test -p store --test persist_compat -- --ignored`
//! (`write_v1_fixtures` when version 1 was current, `write_v2_fixtures` for version 2); never
//! regenerate them for an existing version: a format change gets a new version number, a new
//! fixture directory, and keeps loading the old ones.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod persist_util;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use persist_util::*;
use schema::Schema;
use store::persist::{
    recover, verify, write_snapshot_chunked, write_snapshot_with, Change, FileStatus, FsIo, Io,
    LogOptions, LogWriter, StoredAttr, StoredEntry,
};
use store::{Tombstone, Tombstones};

fn v1_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1")
}

fn v2_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2")
}

fn v3_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v3")
}

/// The built-in schema and one with an extra attribute type: a snapshot's packed entries are
/// taken as they are with the first and rebuilt by name with the second.
fn both_schemas() -> [Schema; 2] {
    let mut other = Schema::builtin();
    other
        .load_schema_text(
            "attributetype ( 1.3.6.1.4.1.99999.1 NAME 'lindenTestAttr' \
             SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )",
            "test",
        )
        .expect("extra schema");
    [Schema::builtin(), other]
}

fn v4_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v4")
}

/// The entries of the version 4 fixture snapshot (as of batch 5): those of version 2, one
/// more below an escaped DN, and the stamps an import adds.
fn v4_entries() -> Vec<StoredEntry> {
    let mut all = v2_entries();
    let mut four = person(4, "Four");
    four.parent = Some(2);
    four.dn = "cn=Four\\, Esq.+sn=User,uid=user.2,dc=example,dc=com".into();
    all.push(four);
    for e in &mut all {
        e.attrs.push(sattr("createTimestamp", &["20261127000000Z"]));
        e.attrs.push(sattr(
            "entryCSN",
            &["20261127000000.000000Z#000000#000#000000"],
        ));
    }
    all
}

#[test]
#[ignore = "writes the committed v4 fixtures; run by hand only for a new format version"]
fn write_v4_fixtures() {
    let schema = Schema::builtin();
    store::intern::set_schema_types(&schema);
    let dir = v4_dir();
    let io = FsIo;
    io.create_dir_all(&dir).expect("dir");
    // The stamps interned as an import interns them (`Packer::attr_interned`).
    let ts = schema.attr_by_name("createTimestamp").expect("ts");
    let csn = schema.attr_by_name("entryCSN").expect("csn");
    let entries: Vec<_> = v4_entries()
        .iter()
        .map(|se| {
            let e = entry(&schema, se);
            let mut p = store::entry::Packer::default();
            p.start(e.dn(), e.ndn_str(), e.depth());
            for a in e.attrs() {
                let pairs: Vec<_> = a.pairs().collect();
                if a.ty == ts || a.ty == csn {
                    p.attr_interned(a.ty, a.options, pairs.into_iter());
                } else {
                    p.attr(a.ty, a.options, pairs.into_iter());
                }
            }
            p.finish(e.id, e.parent)
        })
        .collect();
    write_snapshot_with(&io, &dir, 5, 7, entries.iter(), &schema, 2).expect("snapshot");
}

/// Version 4: entries taken as they are (same schema) or rebuilt by name (another), their
/// DNs parsed back, the interned stamps read from the file's table.
#[test]
fn v4_fixtures_load() {
    for schema in &both_schemas() {
        let rec = recover(&FsIo, &v4_dir(), schema).expect("v4 fixture recovers");
        assert_eq!(
            rec.snapshot.as_deref(),
            Some("snap-00000000000000000005.lns")
        );
        assert_eq!((rec.last_seq, rec.next_id), (5, 7));
        assert_eq!(stored(schema, &rec.entries), v4_entries());
        let four = &rec.entries[3];
        assert_eq!(
            four.ndn_str(),
            "cn=four\\, esq.+sn=user,uid=user.2,dc=example,dc=com"
        );
        assert_eq!(four.depth(), 4);
        let ndn = four.ndn(schema);
        assert_eq!(ndn.norm, four.ndn_str());
        assert_eq!(ndn.rdns.len(), 4);
        assert_eq!(ndn.rdns[0].len(), 2, "a two-valued RDN");
        let csn = schema.attr_by_name("entryCSN").expect("csn");
        assert!(four.has_value(csn, b"20261127000000.000000Z#000000#000#000000"));
        let report = verify(&FsIo, &v4_dir(), schema).expect("verify");
        assert!(report.is_ok(), "{report:?}");
    }
}

fn v5_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v5")
}

fn v5_tombstone(n: u32, csn: &str) -> Tombstone {
    Tombstone {
        uuid: format!("00000000-0000-4000-8000-0000000000{n:02}").into(),
        dn: format!("uid=user.{n},dc=example,dc=com").into(),
        csn: csn.into(),
        seen: format!("20261128000000.0000{n:02}Z#000000#002#000000").into(),
    }
}

const V5_FLOOR_1: &str = "20261128000000.000001Z#000000#001#000000";
const V5_FLOOR_2: &str = "20261128000000.000002Z#000000#001#000000";

#[test]
#[ignore = "writes the committed v5 fixtures; run by hand only for a new format version"]
fn write_v5_fixtures() {
    let schema = Schema::builtin();
    store::intern::set_schema_types(&schema);
    let dir = v5_dir();
    let io = FsIo;
    io.create_dir_all(&dir).expect("dir");
    // Snapshot of batch 2 (version 5): two entries, the tombstones of user.3 and user.5.
    let at2 = [root(), person(2, "Two")];
    let entries: Vec<_> = at2.iter().map(|e| entry(&schema, e)).collect();
    let tombs = Tombstones::from_parts(
        [
            v5_tombstone(3, "20261128000001.000000Z#000000#001#000000"),
            v5_tombstone(5, "20261128000002.000000Z#000000#001#000000"),
        ],
        vec![V5_FLOOR_1.into()],
    );
    write_snapshot_chunked(&io, &dir, 2, 6, entries.iter(), &schema, &tombs, 2).expect("snap");
    // Log (version 3) from batch 3: an entry, a tombstone put, one forgotten, a new floor.
    let mut w = LogWriter::open(Arc::new(FsIo), &dir, 3, LogOptions::default()).expect("log");
    w.append_batch(
        3,
        &[
            Change::Put(person(4, "Four")),
            Change::Tombstone(v5_tombstone(6, "20261128000003.000000Z#000000#001#000000")),
            Change::Forget(v5_tombstone(3, "").uuid.to_string()),
            Change::TombstoneFloor(vec![V5_FLOOR_2.into()]),
        ],
    )
    .expect("append");
}

/// Version 5 snapshot and version 3 log: the tombstones and their floor come back, the log's
/// tombstone records replayed on the snapshot's.
#[test]
fn v5_fixtures_load() {
    let schema = Schema::builtin();
    let rec = recover(&FsIo, &v5_dir(), &schema).expect("v5 fixtures recover");
    assert_eq!(
        rec.snapshot.as_deref(),
        Some("snap-00000000000000000002.lns")
    );
    assert_eq!((rec.last_seq, rec.next_id), (3, 6));
    assert_eq!(
        stored(&schema, &rec.entries),
        vec![root(), person(2, "Two"), person(4, "Four")]
    );
    let want = Tombstones::from_parts(
        [
            v5_tombstone(5, "20261128000002.000000Z#000000#001#000000"),
            v5_tombstone(6, "20261128000003.000000Z#000000#001#000000"),
        ],
        vec![V5_FLOOR_2.into()],
    );
    assert_eq!(rec.tombstones, want);
    let report = verify(&FsIo, &v5_dir(), &schema).expect("verify");
    assert!(report.is_ok(), "{report:?}");
    // Older fixtures hold no tombstones.
    for dir in [v1_dir(), v2_dir(), v3_dir(), v4_dir()] {
        let rec = recover(&FsIo, &dir, &schema).expect("older fixtures recover");
        assert!(rec.tombstones.is_empty() && rec.tombstones.floor().is_empty());
    }
}

/// A tombstone record in a log of a version before 3 (which cannot hold one) is corruption.
#[test]
fn a_tombstone_record_in_a_version_2_log_is_corrupt() {
    let mut bytes = std::fs::read(v5_dir().join("log-00000000000000000003.lnl")).expect("read");
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    match store::persist::read_log("log-00000000000000000003.lnl", &bytes) {
        Err(store::persist::PersistError::Corrupt { reason, .. }) => {
            assert!(
                reason.contains("tombstone record in a version 2 log"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
}

const V3_SHOE: &str = "attributetype ( 1.3.6.1.4.1.99999.1.1 NAME 'shoeSize' EQUALITY integerMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 SINGLE-VALUE )\n";
const V3_HAT: &str = "attributetype ( 1.3.6.1.4.1.99999.1.2 NAME 'hatSize' SUP shoeSize )\n";

fn v3_person(id: u32, attr: &str, value: &str) -> StoredEntry {
    let mut e = person(id, &format!("Person {id}"));
    e.attrs.push(StoredAttr {
        name: attr.into(),
        values: vec![value.as_bytes().to_vec()],
    });
    e
}

#[test]
#[ignore = "writes the committed v3 fixtures; run by hand only for a new format version"]
fn write_v3_fixtures() {
    let base = Schema::builtin();
    store::intern::set_schema_types(&base);
    let shoe = base.extend(V3_SHOE, "fixture").expect("shoe");
    let dir = v3_dir();
    let io = FsIo;
    io.create_dir_all(&dir).expect("dir");
    // Snapshot of batch 2 (version 3): the shoeSize extension and an entry using it.
    let at2 = [root(), v3_person(2, "shoeSize", "44")];
    let entries: Vec<_> = at2.iter().map(|e| entry(&shoe, e)).collect();
    write_snapshot_with(&io, &dir, 2, 3, entries.iter(), &shoe, 2).expect("snapshot");
    // Log (version 2) from batch 3: a schema record and an entry using it.
    let hat = shoe.extend(V3_HAT, "fixture").expect("hat");
    let added = hat.extensions()[shoe.extensions().len()..].to_string();
    let mut w = LogWriter::open(Arc::new(FsIo), &dir, 3, LogOptions::default()).expect("log");
    w.append_batch(
        3,
        &[
            Change::Schema(added),
            Change::Put(v3_person(3, "hatSize", "7")),
        ],
    )
    .expect("append");
}

/// Version 3 snapshot and version 2 log: the extensions come back, with the ids they had.
#[test]
fn v3_fixtures_load() {
    let base = Schema::builtin();
    let rec = recover(&FsIo, &v3_dir(), &base).expect("v3 fixtures recover");
    assert_eq!(
        rec.snapshot.as_deref(),
        Some("snap-00000000000000000002.lns")
    );
    assert_eq!((rec.last_seq, rec.next_id), (3, 4));
    let want = base
        .extend(V3_SHOE, "t")
        .and_then(|s| s.extend(V3_HAT, "t"))
        .expect("extensions");
    assert_eq!(rec.schema.extensions(), want.extensions());
    assert_eq!(
        rec.schema.attr_by_name("hatSize"),
        want.attr_by_name("hatSize")
    );
    assert_eq!(
        stored(&rec.schema, &rec.entries),
        vec![
            root(),
            v3_person(2, "shoeSize", "44"),
            v3_person(3, "hatSize", "7")
        ]
    );
    let hat = rec.schema.attr_by_name("hatSize").expect("hatSize");
    assert!(rec.entries[2].has_value(hat, b"7"));
    // Its packed entries (layout 1) were converted: the DN comes back with its RDNs.
    let two = &rec.entries[1];
    assert_eq!(two.depth(), 3);
    assert_eq!(two.ndn(&rec.schema).rdns.len(), 3);
    let report = verify(&FsIo, &v3_dir(), &base).expect("verify");
    assert!(report.is_ok(), "{report:?}");
}

/// The entries of the version 2 fixture snapshot (as of batch 7).
fn v2_entries() -> Vec<StoredEntry> {
    let mut two = person(2, "Two");
    two.attrs.push(StoredAttr {
        name: "telephoneNumber".into(),
        values: vec![b"+1 555 0100".to_vec(), b"+1-555-0101".to_vec()],
    });
    let mut three = with_password(person(3, "Zoë Été"));
    three.parent = Some(2);
    three.dn = "UID=user.3 , uid=user.2,dc=example,dc=com".into();
    vec![root(), two, three]
}

#[test]
#[ignore = "writes the committed v2 fixtures; run by hand only for a new format version"]
fn write_v2_fixtures() {
    let schema = Schema::builtin();
    // As a server does: objectClass values are stored as interned numbers.
    store::intern::set_schema_types(&schema);
    let dir = v2_dir();
    let io = FsIo;
    io.create_dir_all(&dir).expect("dir");
    let entries: Vec<_> = v2_entries().iter().map(|e| entry(&schema, e)).collect();
    write_snapshot_with(&io, &dir, 7, 9, entries.iter(), &schema, 2).expect("snapshot");
}

/// The version 2 fixture loads the same whether its packed entries are taken as they are (the
/// schema it was packed with) or rebuilt by name (any other schema).
#[test]
fn v2_fixtures_load() {
    for schema in &both_schemas() {
        let rec = recover(&FsIo, &v2_dir(), schema).expect("v2 fixture recovers");
        assert_eq!(
            rec.snapshot.as_deref(),
            Some("snap-00000000000000000007.lns")
        );
        assert_eq!((rec.last_seq, rec.next_id), (7, 9));
        assert_eq!(stored(schema, &rec.entries), v2_entries());
        let three = &rec.entries[2];
        assert_eq!(three.ndn_str(), "uid=user.3,uid=user.2,dc=example,dc=com");
        assert_eq!(three.depth(), 4);
        let cn = schema.attr_by_name("cn").expect("cn");
        assert!(three.has_value(cn, "zoë été".as_bytes()));
        let tel = schema.attr_by_name("telephoneNumber").expect("tel");
        assert!(rec.entries[1].has_value(tel, b"+15550101"));
        let report = verify(&FsIo, &v2_dir(), schema).expect("verify");
        assert!(report.is_ok(), "{report:?}");
    }
}

fn with_password(mut e: StoredEntry) -> StoredEntry {
    e.attrs.push(StoredAttr {
        name: "userPassword".into(),
        values: vec![vec![0xff, 0x00, 0x01, b'{']],
    });
    e
}

/// The batches in the fixture log (3 and 4; the snapshot holds batch 2).
fn log_batches() -> Vec<(u64, Vec<Change>)> {
    vec![
        (
            3,
            vec![
                Change::Put(with_password(person(4, "Four"))),
                Change::Delete { id: 2 },
            ],
        ),
        (4, vec![Change::Put(person(3, "Three again"))]),
    ]
}

#[test]
#[ignore = "writes the committed v1 fixtures; run by hand only for a new format version"]
fn write_v1_fixtures() {
    let schema = Schema::builtin();
    let dir = v1_dir();
    let io = FsIo;
    io.create_dir_all(&dir).expect("dir");
    let at2 = [root(), person(2, "Two"), person(3, "Three")];
    let entries: Vec<_> = at2.iter().map(|e| entry(&schema, e)).collect();
    write_snapshot_with(&io, &dir, 2, 4, entries.iter(), &schema, 2).expect("snapshot");
    let mut w = LogWriter::open(Arc::new(FsIo), &dir, 3, LogOptions::default()).expect("log");
    for (seq, changes) in log_batches() {
        w.append_batch(seq, &changes).expect("append");
    }
    // A torn fifth batch: its length and half its checksum, as a crash leaves it.
    let path = dir.join(w.current_file());
    let mut f = io.open_append(&path).expect("append");
    f.write_all(&[40, 0, 0, 0, 0xaa, 0xbb]).expect("torn");
    f.sync().expect("sync");
}

#[test]
fn v1_fixtures_load() {
    let schema = Schema::builtin();
    let dir = v1_dir();
    let rec = recover(&FsIo, &dir, &schema).expect("v1 fixtures recover");
    assert_eq!(
        rec.snapshot.as_deref(),
        Some("snap-00000000000000000002.lns")
    );
    assert_eq!(rec.last_seq, 4);
    assert_eq!(rec.next_id, 5);
    assert_eq!((rec.batches_replayed, rec.log_records_replayed), (2, 3));
    // The torn fifth batch: the last 6 bytes of the 388-byte file.
    assert_eq!(
        rec.torn_tails,
        vec![("log-00000000000000000003.lnl".to_string(), 382)]
    );
    let want = vec![
        root(),
        person(3, "Three again"),
        with_password(person(4, "Four")),
    ];
    assert_eq!(stored(&schema, &rec.entries), want);
    let dns: Vec<_> = rec.entries.iter().map(|e| e.dn()).collect();
    assert_eq!(
        dns,
        [
            "dc=example,dc=com",
            "uid=user.3,dc=example,dc=com",
            "uid=user.4,dc=example,dc=com"
        ]
    );
    // Normalized forms are rebuilt from the schema, not read from the file.
    let uid = schema.attr_by_name("uid").expect("uid");
    assert!(rec.entries[2].has_value(uid, b"user.4"));

    let report = verify(&FsIo, &dir, &schema).expect("verify");
    assert!(report.is_ok(), "{report:?}");
    let statuses: Vec<_> = report
        .files
        .iter()
        .map(|f| (f.name.as_str(), &f.status))
        .collect();
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert!(matches!(
        report.files[1].status,
        FileStatus::TornTail { .. }
    ));
}

fn v6_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v6")
}

/// 2026-11-28T00:00:01Z and 00:00:02Z, the times of the v6 fixture's batches.
const V6_TIMES: [u64; 2] = [1_795_824_001_000_000, 1_795_824_002_000_000];

#[test]
#[ignore = "writes the committed v6 fixtures; run by hand only for a new format version"]
fn write_v6_fixtures() {
    let dir = v6_dir();
    FsIo.create_dir_all(&dir).expect("dir");
    // Log (version 4) from batch 1: each batch with its time.
    let mut w = LogWriter::open(Arc::new(FsIo), &dir, 1, LogOptions::default()).expect("log");
    let at = |m: u64| std::time::UNIX_EPOCH + std::time::Duration::from_micros(m);
    w.append_batch_at(1, at(V6_TIMES[0]), &[Change::Put(root())])
        .expect("append");
    w.append_batch_at(2, at(V6_TIMES[1]), &[Change::Put(person(2, "Two"))])
        .expect("append");
}

/// Version 4 log: batches carry their times; older logs' batches have none.
#[test]
fn v6_fixtures_load() {
    let schema = Schema::builtin();
    let rec = recover(&FsIo, &v6_dir(), &schema).expect("v6 fixtures recover");
    assert_eq!(rec.last_seq, 2);
    assert_eq!(
        stored(&schema, &rec.entries),
        vec![root(), person(2, "Two")]
    );
    let name = "log-00000000000000000001.lnl";
    let bytes = std::fs::read(v6_dir().join(name)).expect("read");
    let log = store::persist::read_log(name, &bytes).expect("log");
    assert_eq!(log.version, 4);
    let times: Vec<_> = log.batches.iter().map(|b| b.time_micros).collect();
    assert_eq!(times, V6_TIMES.map(Some).to_vec());
    let name = "log-00000000000000000003.lnl";
    let bytes = std::fs::read(v5_dir().join(name)).expect("read");
    let log = store::persist::read_log(name, &bytes).expect("v3 log");
    assert!(log.batches.iter().all(|b| b.time_micros.is_none()));
}

fn v7_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v7")
}

fn v7_member(n: u32) -> String {
    format!("uid=user.{n},dc=example,dc=com")
}

/// The group of the v7 fixture with the given members, in this order.
fn v7_group(members: impl Iterator<Item = u32>) -> StoredEntry {
    let m: Vec<String> = members.map(v7_member).collect();
    let refs: Vec<&str> = m.iter().map(String::as_str).collect();
    StoredEntry {
        id: 2,
        parent: Some(1),
        dn: "cn=big,dc=example,dc=com".into(),
        attrs: vec![
            sattr("objectClass", &["top", "groupOfNames"]),
            sattr("cn", &["big"]),
            sattr("member", &refs),
        ],
    }
}

/// Changes entry `id` as a modify does: `attr`'s values at the positions of `gone` (found by
/// value) left out and `added` appended, or the attribute added with `added` if absent.
fn v7_modify(
    store: &store::Store,
    id: u32,
    attr: &'static str,
    added: Vec<String>,
    gone: Vec<String>,
) {
    store
        .write_blocking(move |txn| {
            let s = txn.schema().clone();
            let ty = s.attr_by_name(attr).expect("type");
            let e = txn.version().get(id).cloned().expect("entry");
            let pair = |v: &String| {
                let norm = s.normalize_eq(ty, v.as_bytes()).expect("value");
                (v.as_bytes().into(), norm.into_boxed_slice())
            };
            let add: Vec<store::OwnedPair> = added.iter().map(pair).collect();
            let drop: Vec<usize> = match e.attr(ty) {
                Some(a) => {
                    let mut d: Vec<usize> = gone
                        .iter()
                        .map(|v| a.find(&pair(v).1).expect("held"))
                        .collect();
                    d.sort_unstable();
                    d
                }
                None => Vec::new(),
            };
            let fresh = store::Attr::new(
                &s,
                ty,
                "",
                added.iter().map(|v| v.as_bytes().into()).collect(),
            )
            .expect("values");
            let mut parts: Vec<store::Part<'_>> = e
                .attrs()
                .map(|a| {
                    if a.ty == ty {
                        store::Part::Kept {
                            attr: a,
                            drop: &drop,
                            add: &add,
                        }
                    } else {
                        store::Part::Kept {
                            attr: a,
                            drop: &[],
                            add: &[],
                        }
                    }
                })
                .collect();
            if e.attr(ty).is_none() {
                parts.push(store::Part::New(&fresh));
            }
            txn.replace_parts(id, &parts, &[])
        })
        .expect("writer")
        .expect("modify");
}

#[test]
#[ignore = "writes the committed v7 fixtures (the version 5 log); run by hand only for a new format version"]
fn write_v7_fixtures() {
    let schema = Arc::new(Schema::builtin());
    let dir = v7_dir();
    // The version 4 log of batches 1 and 2 is there already (made by an older Linden).
    let rec = recover(&FsIo, &dir, &schema).expect("the version 4 log");
    assert_eq!(rec.last_seq, 2);
    let log = LogWriter::open_after_recovery(Arc::new(FsIo), &dir, &rec, LogOptions::default())
        .expect("log");
    let initial = store::Version::restore(
        rec.schema,
        &store::Indexes::new(),
        rec.entries,
        rec.next_id,
        rec.last_seq,
    );
    let st = store::Store::with_journal(initial, Box::new(store::persist::LogJournal::new(log)));
    v7_modify(&st, 2, "member", vec![v7_member(1201)], vec![]);
    v7_modify(
        &st,
        2,
        "member",
        vec![],
        vec![v7_member(1000), v7_member(1100)],
    );
    v7_modify(
        &st,
        2,
        "member",
        vec![v7_member(1202)],
        vec![v7_member(1001)],
    );
    v7_modify(&st, 3, "description", vec!["patched".into()], vec![]);
}

/// A directory upgraded from version 4 logs to version 5: the Puts of the version 4 file,
/// then the patches of the version 5 file applied on top, give the entries exactly.
#[test]
fn v7_fixtures_load() {
    let schema = Schema::builtin();
    let rec = recover(&FsIo, &v7_dir(), &schema).expect("v7 fixtures recover");
    assert_eq!(rec.last_seq, 6);
    let members = (1000..=1202).filter(|n| ![1000, 1001, 1100].contains(n));
    let mut three = person(3, "Three");
    three.attrs.push(sattr("description", &["patched"]));
    assert_eq!(
        stored(&schema, &rec.entries),
        vec![root(), v7_group(members), three]
    );
    let read = |name: &str| {
        let bytes = std::fs::read(v7_dir().join(name)).expect("read");
        store::persist::read_log(name, &bytes).expect("log")
    };
    let old = read("log-00000000000000000001.lnl");
    assert_eq!(old.version, 4);
    assert_eq!(old.batches.len(), 2);
    let new = read("log-00000000000000000003.lnl");
    assert_eq!(new.version, 5);
    let patches = new
        .batches
        .iter()
        .flat_map(|b| &b.changes)
        .filter(|c| matches!(c, Change::Patch(_)))
        .count();
    assert_eq!(patches, 4, "every change of the version 5 file is a patch");
    let report = verify(&FsIo, &v7_dir(), &schema).expect("verify");
    assert!(report.is_ok(), "{report:?}");
}
