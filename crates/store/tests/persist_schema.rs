//! Schema extensions are data in the version (design.md seam 4): applied by the writer, logged
//! as schema records, carried by snapshots, and replayed by recovery so that the extended types
//! exist again with the same ids. Crash safety is proven as in `persist_crash.rs`: a workload of
//! extensions and entries using them is cut off at every mutating I/O operation.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;
mod persist_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{attr, ndn};
use persist_util::*;
use schema::{Schema, SchemaErrorKind};
use store::persist::{
    prune, read_log, recover, write_snapshot_with, Change, Io, Keep, LogJournal, LogOptions,
    LogWriter, PersistError, SimIo, StoredEntry,
};
use store::{Store, StoreError, Version};

const DIR: &str = "/data";
const LAST: u64 = 8;
const SNAPSHOT_AFTER: u64 = 5;

const SHOE: &str = "attributetype ( 1.3.6.1.4.1.99999.1.1 NAME 'shoeSize' EQUALITY integerMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 SINGLE-VALUE )\n\
objectclass ( 1.3.6.1.4.1.99999.2.1 NAME 'shoeWearer' SUP top AUXILIARY MAY shoeSize )\n";
const HAT: &str = "attributetype ( 1.3.6.1.4.1.99999.1.2 NAME 'hatSize' SUP shoeSize )\n";

/// The canonical extension texts, as `Schema::extend` records them.
fn extensions(base: &Schema) -> (String, String) {
    let one = base.extend(SHOE, "t").expect("shoe");
    let two = one.extend(HAT, "t").expect("hat");
    let first = one.extensions().to_string();
    let second = two.extensions()[first.len()..].to_string();
    (first, second)
}

fn wearer(id: u32, size: &str, extra: Option<(&str, &str)>) -> StoredEntry {
    let mut e = person(id, &format!("wearer {id}"));
    e.attrs[0].values.push(b"shoeWearer".to_vec());
    e.attrs.push(sattr("shoeSize", &[size]));
    if let Some((name, value)) = extra {
        e.attrs.push(sattr(name, &[value]));
    }
    e
}

/// The changes of batch `seq`: extensions in batches 2 and 6 (the second together with an
/// entry using it), entries using them in between and after.
fn batch(seq: u64, ext: &(String, String)) -> Vec<Change> {
    match seq {
        1 => vec![Change::Put(root())],
        2 => vec![Change::Schema(ext.0.clone())],
        3 => vec![Change::Put(wearer(3, "44", None))],
        4 => vec![Change::Put(person(4, "plain"))],
        5 => vec![Change::Put(wearer(3, "45", None))],
        6 => vec![
            Change::Schema(ext.1.clone()),
            Change::Put(wearer(6, "40", Some(("hatSize", "7")))),
        ],
        7 => vec![Change::Delete { id: 4 }],
        _ => vec![Change::Put(wearer(8, "38", Some(("hatSize", "6"))))],
    }
}

/// The schema after batch `seq`.
fn schema_at(base: &Schema, seq: u64, ext: &(String, String)) -> Schema {
    let mut s = base.clone();
    if seq >= 2 {
        s = s.replay_extension(&ext.0, "t").expect("ext 1");
    }
    if seq >= 6 {
        s = s.replay_extension(&ext.1, "t").expect("ext 2");
    }
    s
}

fn model_at(seq: u64, ext: &(String, String)) -> Vec<StoredEntry> {
    let mut m = BTreeMap::new();
    for s in 1..=seq {
        apply(&mut m, &batch(s, ext));
    }
    m.into_values().collect()
}

fn run(io: &SimIo, base: &Schema, acked: &mut u64) -> Result<(), PersistError> {
    let ext = extensions(base);
    let dir = Path::new(DIR);
    let rec = recover(io, dir, base)?;
    let opts = LogOptions {
        rotate_bytes: 600,
        sync: true,
        ..LogOptions::default()
    };
    let mut w = LogWriter::open_after_recovery(Arc::new(io.clone()), dir, &rec, opts)?;
    for seq in rec.last_seq + 1..=LAST {
        w.append_batch(seq, &batch(seq, &ext))?;
        *acked = seq;
        if seq == SNAPSHOT_AFTER {
            w.rotate()?;
            let schema = schema_at(base, seq, &ext);
            let entries: Vec<_> = model_at(seq, &ext)
                .iter()
                .map(|e| entry(&schema, e))
                .collect();
            write_snapshot_with(io, dir, seq, seq as u32 + 1, entries.iter(), &schema, 2)?;
            prune(io, dir, seq)?;
        }
    }
    Ok(())
}

/// Recovery gives exactly the state and the schema after some batch in `acked..=max`.
fn check(io: &SimIo, base: &Schema, acked: u64, max: u64, what: &str) -> u64 {
    let ext = extensions(base);
    let rec = recover(io, Path::new(DIR), base).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        rec.last_seq >= acked && rec.last_seq <= max,
        "{what}: recovered batch {} with batch {acked} acknowledged",
        rec.last_seq
    );
    let want = schema_at(base, rec.last_seq, &ext);
    assert_eq!(rec.schema.extensions(), want.extensions(), "{what}");
    for name in ["shoeSize", "hatSize"] {
        assert_eq!(
            rec.schema.attr_by_name(name),
            want.attr_by_name(name),
            "{what}: {name} must have the same id"
        );
    }
    assert_eq!(
        stored(&rec.schema, &rec.entries),
        model_at(rec.last_seq, &ext),
        "{what}"
    );
    rec.last_seq
}

#[test]
fn extensions_and_entries_using_them_survive_a_crash_at_every_operation() {
    let base = Schema::builtin();
    let total = {
        let io = SimIo::new();
        io.create_dir_all(Path::new(DIR)).expect("dir");
        let mut acked = 0;
        run(&io, &base, &mut acked).expect("clean run");
        assert_eq!(acked, LAST);
        check(&io, &base, LAST, LAST, "clean run");
        io.ops()
    };
    for keep in [Keep::Nothing, Keep::Half, Keep::All] {
        for k in 0..=total {
            let what = format!("crash after {k} operations, keeping {keep:?}");
            let io = SimIo::new();
            io.create_dir_all(Path::new(DIR)).expect("dir");
            io.cut_power_after(k);
            let mut acked = 0;
            let _ = run(&io, &base, &mut acked);
            io.crash_keeping(keep);
            check(&io, &base, acked, (acked + 1).min(LAST), &what);
            let mut again = 0;
            run(&io, &base, &mut again).unwrap_or_else(|e| panic!("{what}: restart: {e}"));
            io.crash();
            assert_eq!(check(&io, &base, LAST, LAST, &what), LAST);
        }
    }
}

fn open_store(io: &SimIo, base: &Schema) -> Store {
    let dir = Path::new(DIR);
    let rec = recover(io, dir, base).expect("recover");
    let log =
        LogWriter::open_after_recovery(Arc::new(io.clone()), dir, &rec, LogOptions::default())
            .expect("log");
    let initial = Version::restore(
        rec.schema,
        &store::Indexes::new(),
        rec.entries,
        rec.next_id,
        rec.last_seq,
    );
    Store::with_journal(initial, Box::new(LogJournal::new(log)))
}

/// The writer's path: an extension is published with its batch, is rolled back with a failed
/// operation, is one schema record in the log, and comes back after a crash.
#[test]
fn the_writer_applies_logs_and_rolls_back_extensions() {
    let base = Schema::builtin();
    let io = SimIo::new();
    io.create_dir_all(Path::new(DIR)).expect("dir");
    let store = open_store(&io, &base);
    let before = store.schema();
    let old_reader = store.read();

    // A failing operation takes its extension with it.
    let r = store
        .write_blocking(|txn| {
            txn.extend_schema(SHOE, "test").expect("extends");
            assert!(txn.schema().attr_by_name("shoeSize").is_some());
            Err::<(), _>(StoreError::NoSuchEntry)
        })
        .expect("writer");
    assert!(r.is_err());
    assert!(store.schema().attr_by_name("shoeSize").is_none());
    assert_eq!(store.read().seq, 0, "nothing was committed");

    // An incompatible extension is refused with its kind.
    let r = store
        .write_blocking(|txn| {
            txn.extend_schema(
                "attributetype ( 2.5.4.3 NAME ( 'cn' 'commonName' ) SUP name )",
                "test",
            )
            .map(|_| ())
        })
        .expect("writer");
    assert_eq!(r.map_err(|e| e.kind), Err(SchemaErrorKind::Exists));

    // Extend, then add an entry using the new types in the next operation of the batch.
    let r = store
        .write_blocking(|txn| {
            txn.extend_schema(SHOE, "test").map(|_| ())?;
            let s = txn.schema().clone();
            txn.add(
                "dc=example,dc=com".into(),
                ndn(&s, "dc=example,dc=com"),
                vec![
                    attr(&s, "objectClass", &["top", "domain"]),
                    attr(&s, "dc", &["example"]),
                ],
                true,
            )
            .map_err(|e| panic!("{e}"))?;
            txn.add(
                "uid=sam,dc=example,dc=com".into(),
                ndn(&s, "uid=sam,dc=example,dc=com"),
                vec![
                    attr(&s, "objectClass", &["top", "account", "shoeWearer"]),
                    attr(&s, "uid", &["sam"]),
                    attr(&s, "shoeSize", &["44"]),
                ],
                false,
            )
            .map_err(|e| panic!("{e}"))?;
            Ok::<(), schema::SchemaError>(())
        })
        .expect("writer");
    assert!(r.is_ok());
    let live = store.read();
    let shoe = live.schema().attr_by_name("shoeSize").expect("published");
    assert_eq!(
        shoe.0 as usize,
        before.attr_count(),
        "appended after every old id"
    );
    assert!(
        old_reader.schema().attr_by_name("shoeSize").is_none(),
        "a reader of an older version keeps its schema"
    );
    assert_ne!(live.schema().generation(), before.generation());

    // One batch: a schema record first, then the two entries.
    let logs = io.list(Path::new(DIR)).expect("list");
    let name = logs.iter().find(|n| n.ends_with(".lnl")).expect("a log");
    let bytes = io.read(&Path::new(DIR).join(name)).expect("read");
    let log = read_log(name, &bytes).expect("log");
    assert_eq!(log.batches.len(), 1);
    assert!(
        matches!(&log.batches[0].changes[0], Change::Schema(t) if t.contains("shoeSize")),
        "{:?}",
        log.batches[0].changes[0]
    );
    assert_eq!(log.batches[0].changes.len(), 3);

    drop(store);
    io.crash();
    let rec = recover(&io, Path::new(DIR), &base).expect("recover");
    assert_eq!(rec.schema.attr_by_name("shoeSize"), Some(shoe));
    assert_eq!(
        stored(&rec.schema, &rec.entries),
        stored(
            live.schema(),
            &live.iter().map(|e| (**e).clone()).collect::<Vec<_>>()
        )
    );
}

/// A configured schema that changed since the data was written: an extension that now
/// clashes, or an entry whose type is no longer defined, stops recovery with a message naming
/// the definition or the type; a configured file that now holds the extension identically is
/// fine.
#[test]
fn recovery_names_what_no_longer_fits_the_configured_schema() {
    let base = Schema::builtin();
    let ext = extensions(&base);
    let io = SimIo::new();
    let dir = Path::new(DIR);
    io.create_dir_all(dir).expect("dir");
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("log");
    for seq in 1..=3 {
        w.append_batch(seq, &batch(seq, &ext)).expect("append");
    }
    drop(w);

    // The configured files now define shoeSize differently.
    let mut clash = base.clone();
    clash
        .load_file_text(
            "attributetype ( 1.3.6.1.4.1.99999.1.1 NAME 'shoeSize' SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )",
            "shoes.schema",
            false,
        )
        .expect("file");
    match recover(&io, dir, &clash) {
        Err(PersistError::Schema { file, message, .. }) => {
            assert!(file.starts_with("log-"), "{file}");
            assert!(message.contains("1.3.6.1.4.1.99999.1.1"), "{message}");
        }
        other => panic!("expected a schema error, got {other:?}"),
    }

    // The configured files now hold the same definitions: skipped, entries load.
    let mut same = base.clone();
    same.load_file_text(SHOE, "shoes.schema", false)
        .expect("file");
    let rec = recover(&io, dir, &same).expect("identical definitions are fine");
    assert_eq!(rec.entries.len(), 2);
    assert!(rec.schema.extensions().is_empty(), "nothing left to extend");

    // Data written with a type from a configured file that is no longer configured.
    let io = SimIo::new();
    io.create_dir_all(dir).expect("dir");
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("log");
    w.append_batch(1, &batch(1, &ext)).expect("append");
    w.append_batch(2, &batch(3, &ext)).expect("append");
    drop(w);
    assert!(recover(&io, dir, &same).is_ok());
    let err = recover(&io, dir, &base).expect_err("shoeSize is gone");
    assert!(err.to_string().contains("shoeSize"), "{err}");
}
