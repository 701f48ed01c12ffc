//! The log wired to the real `Store` through its `Journal` hook, the way the writer will use it:
//! every batch's touched entries become one log batch; recovery rebuilds the same directory.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;
mod persist_util;

use common::{add_suffix, attr, ndn};

use std::path::Path;
use std::sync::Arc;

use schema::Schema;
use store::persist::{recover, Io, LogJournal, LogOptions, LogWriter, SimIo, StoredEntry};
use store::{Store, Version};

fn snapshot_of(schema: &Schema, v: &Version) -> Vec<StoredEntry> {
    let mut all: Vec<_> = v
        .iter()
        .map(|e| StoredEntry::from_entry(e, schema))
        .collect();
    all.sort_by_key(|e| e.id);
    all
}

fn open_store(io: &SimIo, schema: &Arc<Schema>) -> Store {
    let dir = Path::new("/data");
    let rec = recover(io, dir, schema).expect("recover");
    let log =
        LogWriter::open_after_recovery(Arc::new(io.clone()), dir, &rec, LogOptions::default())
            .expect("log");
    let _ = schema;
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

fn assert_recovers_to(io: &SimIo, schema: &Schema, live: &Version) {
    let rec = recover(io, Path::new("/data"), schema).expect("recover");
    assert_eq!(rec.last_seq, live.seq);
    let mut got: Vec<_> = rec
        .entries
        .iter()
        .map(|e| StoredEntry::from_entry(e, schema))
        .collect();
    got.sort_by_key(|e| e.id);
    assert_eq!(got, snapshot_of(schema, live));
}

/// Modify and delete through the store, starting from a snapshot, survive a crash and a
/// restart, and the restarted store continues the log.
#[test]
fn store_modify_and_delete_recover_after_restart() {
    let schema = Arc::new(Schema::builtin());
    let io = SimIo::new();
    let dir = Path::new("/data");
    io.create_dir_all(dir).expect("dir");
    // Initial data as an import would write it: a snapshot of batch 0.
    let s = &*schema;
    let mut entries = vec![persist_util::entry(s, &persist_util::root())];
    entries.extend((2..=6).map(|i| persist_util::entry(s, &persist_util::person(i, "x"))));
    let none = store::Tombstones::default();
    store::persist::write_snapshot(&io, dir, 0, 7, entries.iter(), s, &none).expect("snapshot");

    for round in 0..2u32 {
        let store = open_store(&io, &schema);
        let s2 = schema.clone();
        store
            .write_blocking(move |txn| {
                let s = &*s2;
                txn.delete(2 + round)?;
                let mut p = persist_util::person(4 + round, &format!("round {round}"));
                p.attrs
                    .push(persist_util::sattr("description", &["changed"]));
                txn.replace_attrs(4 + round, persist_util::entry(s, &p).to_attrs())
            })
            .expect("writer")
            .expect("batch");
        let live = store.read();
        assert_eq!(live.len(), 5 - round as usize);
        drop(store);
        io.crash();
        assert_recovers_to(&io, &schema, &live);
    }
}

#[test]
fn store_adds_and_renames_recover() {
    let schema = Arc::new(Schema::builtin());
    let io = SimIo::new();
    io.create_dir_all(Path::new("/data")).expect("dir");
    let store = open_store(&io, &schema);
    let s = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s;
            add_suffix(txn, s)?;
            for i in 0..3 {
                let dn = format!("uid=u{i},dc=example,dc=com");
                txn.add(
                    dn.clone(),
                    ndn(s, &dn),
                    vec![
                        attr(s, "objectClass", &["top", "account"]),
                        attr(s, "uid", &[&format!("u{i}")]),
                    ],
                    false,
                )?;
            }
            Ok::<_, store::StoreError>(())
        })
        .expect("writer")
        .expect("adds");
    let s = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s;
            let v = txn.version().clone();
            let u1 = v.lookup(&ndn(s, "uid=u1,dc=example,dc=com")).expect("u1");
            txn.rename(
                u1.id,
                "uid=renamed,dc=example,dc=com".into(),
                ndn(s, "uid=renamed,dc=example,dc=com"),
                u1.parent,
                vec![
                    attr(s, "objectClass", &["top", "account"]),
                    attr(s, "uid", &["renamed"]),
                ],
            )
        })
        .expect("writer")
        .expect("rename");
    let live = store.read();
    assert_recovers_to(&io, &schema, &live);
}

/// Adds `uid=<uid>,dc=example,dc=com` through the store's writer.
fn add_account(store: &Store, schema: &Arc<Schema>, uid: &str) -> Result<(), store::StoreError> {
    let s = schema.clone();
    let uid = uid.to_string();
    store
        .write_blocking(move |txn| {
            let s = &*s;
            let dn = format!("uid={uid},dc=example,dc=com");
            txn.add(
                dn.clone(),
                ndn(s, &dn),
                vec![
                    attr(s, "objectClass", &["top", "account"]),
                    attr(s, "uid", &[&uid]),
                ],
                false,
            )
            .map(|_| ())
        })
        .and_then(|r| r)
}

/// Opens a store whose log reserves nothing ahead, so that every batch needs new space.
fn open_store_exact(io: &SimIo, schema: &Arc<Schema>) -> Store {
    let dir = Path::new("/data");
    let rec = recover(io, dir, schema).expect("recover");
    let opts = LogOptions {
        reserve_bytes: 0,
        ..LogOptions::default()
    };
    let log = LogWriter::open_after_recovery(Arc::new(io.clone()), dir, &rec, opts).expect("log");
    let initial = Version::restore(
        rec.schema,
        &store::Indexes::new(),
        rec.entries,
        rec.next_id,
        rec.last_seq,
    );
    Store::with_journal(initial, Box::new(LogJournal::new(log)))
}

/// A full disk refuses the batch with `DiskFull` (not for good): nothing is published, the
/// batch number is not used up, the writer is not poisoned; once space is freed the next
/// write goes through by itself, and a crash recovers exactly the acknowledged writes.
#[test]
fn a_full_disk_refuses_writes_until_space_is_freed() {
    let schema = Arc::new(Schema::builtin());
    let io = SimIo::new();
    io.create_dir_all(Path::new("/data")).expect("dir");
    let store = open_store_exact(&io, &schema);
    let s = schema.clone();
    store
        .write_blocking(move |txn| add_suffix(txn, &s).map(|_| ()))
        .expect("writer")
        .expect("suffix");
    add_account(&store, &schema, "before").expect("before");
    let seq = store.read().seq;
    let stats = store.stats();
    assert!(!stats.disk_full.load(std::sync::atomic::Ordering::Relaxed));

    io.set_free_space(Some(8));
    for i in 0..3 {
        match add_account(&store, &schema, &format!("refused{i}")) {
            Err(store::StoreError::DiskFull(m)) => {
                assert!(m.contains("/data"), "{m}");
                assert!(m.contains("resume by themselves"), "{m}");
            }
            other => panic!("expected DiskFull, got {other:?}"),
        }
        assert_eq!(store.read().seq, seq, "a refused batch was published");
        assert!(stats.disk_full.load(std::sync::atomic::Ordering::Relaxed));
    }
    assert_eq!(
        stats
            .refused_full
            .load(std::sync::atomic::Ordering::Relaxed),
        3
    );
    let v = store.read();
    assert!(v
        .lookup(&ndn(&schema, "uid=refused0,dc=example,dc=com"))
        .is_none());

    io.set_free_space(None);
    add_account(&store, &schema, "after").expect("accepted again without a restart");
    assert_eq!(
        store.read().seq,
        seq + 1,
        "the refused batches used up numbers"
    );
    assert!(!stats.disk_full.load(std::sync::atomic::Ordering::Relaxed));
    let live = store.read();
    drop(store);
    io.crash();
    assert_recovers_to(&io, &schema, &live);
    let rec = recover(&io, Path::new("/data"), &schema).expect("recover");
    let has = |uid: &str| {
        let n = ndn(&schema, &format!("uid={uid},dc=example,dc=com"));
        rec.entries.iter().any(|e| e.ndn(&schema).norm == n.norm)
    };
    assert!(has("before") && has("after") && !has("refused0"));
}

/// A failed fsync refuses every write from then on, also once the disk is healthy again.
#[test]
fn a_failed_fsync_refuses_writes_for_good() {
    let schema = Arc::new(Schema::builtin());
    let io = SimIo::new();
    io.create_dir_all(Path::new("/data")).expect("dir");
    let store = open_store(&io, &schema);
    let s = schema.clone();
    store
        .write_blocking(move |txn| add_suffix(txn, &s).map(|_| ()))
        .expect("writer")
        .expect("suffix");
    io.fail_sync(true);
    assert!(matches!(
        add_account(&store, &schema, "lost"),
        Err(store::StoreError::Unavailable(_))
    ));
    io.fail_sync(false);
    assert!(matches!(
        add_account(&store, &schema, "still refused"),
        Err(store::StoreError::Unavailable(_))
    ));
}

fn tombstone(uuid: &str, csn: &str) -> store::Tombstone {
    store::Tombstone {
        uuid: uuid.into(),
        dn: format!("uid={uuid},dc=example,dc=com").into(),
        csn: csn.into(),
        seen: "20261127000000.000000Z#000000#002#000000".into(),
    }
}

/// Tombstones change in the writer's batches with the deletes that make them: journaled with
/// them, undone with a failed operation, snapshotted, and recovered after a crash, including
/// batches that change nothing but tombstones (a tombstone forgotten, the floor raised).
#[test]
fn tombstones_are_as_durable_as_their_deletes() {
    let schema = Arc::new(Schema::builtin());
    let io = SimIo::new();
    let dir = Path::new("/data");
    io.create_dir_all(dir).expect("dir");
    let store = open_store(&io, &schema);
    let s = schema.clone();
    store
        .write_blocking(move |txn| {
            let s = &*s;
            add_suffix(txn, s)?;
            for i in 0..3 {
                let dn = format!("uid=u{i},dc=example,dc=com");
                txn.add(
                    dn.clone(),
                    ndn(s, &dn),
                    vec![
                        attr(s, "objectClass", &["top", "account"]),
                        attr(s, "uid", &[&format!("u{i}")]),
                    ],
                    false,
                )?;
            }
            Ok::<_, store::StoreError>(())
        })
        .expect("writer")
        .expect("adds");
    // A delete and its tombstone, in one operation.
    let s = schema.clone();
    store
        .write_blocking(move |txn| {
            let id = txn
                .version()
                .lookup(&ndn(&s, "uid=u0,dc=example,dc=com"))
                .expect("u0")
                .id;
            txn.delete(id)?;
            txn.put_tombstone(tombstone("u0", "20261128000000.000001Z#000000#001#000000"));
            Ok::<_, store::StoreError>(())
        })
        .expect("writer")
        .expect("delete");
    // A failed operation takes its tombstone changes back with the rest.
    let s = schema.clone();
    let failed = store
        .write_blocking(move |txn| {
            let id = txn
                .version()
                .lookup(&ndn(&s, "uid=u1,dc=example,dc=com"))
                .expect("u1")
                .id;
            txn.delete(id)?;
            txn.put_tombstone(tombstone("u1", "20261128000000.000002Z#000000#001#000000"));
            txn.remove_tombstone("u0");
            txn.set_tombstone_floor(vec!["x".into()]);
            Err::<(), _>(store::StoreError::NoSuchEntry)
        })
        .expect("writer");
    assert!(failed.is_err());
    let v = store.read();
    assert!(v.tombstones().get("u0").is_some() && v.tombstones().get("u1").is_none());
    assert!(v.tombstones().floor().is_empty());
    assert!(v
        .lookup(&ndn(&schema, "uid=u1,dc=example,dc=com"))
        .is_some());
    assert_recovers_to(&io, &schema, &v);
    assert_eq!(
        recover(&io, dir, &schema).expect("recover").tombstones,
        *v.tombstones()
    );

    // A snapshot holds them; a batch of tombstones only, after it, is replayed on it.
    let v = store.read();
    store::persist::write_snapshot(
        &io,
        dir,
        v.seq,
        v.next_id(),
        v.iter().map(|e| &**e),
        v.schema(),
        v.tombstones(),
    )
    .expect("snapshot");
    let seq = v.seq;
    store
        .write_blocking(move |txn| {
            txn.put_tombstone(tombstone("u9", "20261128000000.000003Z#000000#001#000000"));
            txn.remove_tombstone("u0");
            txn.set_tombstone_floor(vec!["20261128000000.000001Z#000000#001#000000".into()]);
            Ok::<_, store::StoreError>(())
        })
        .expect("writer")
        .expect("tombstones");
    let live = store.read();
    assert_eq!(live.seq, seq + 1, "a batch of tombstones only is a batch");
    drop(store);
    io.crash();
    let rec = recover(&io, dir, &schema).expect("recover");
    assert_eq!(
        rec.snapshot.as_deref(),
        Some(&*store::persist::snapshot::snapshot_file_name(seq))
    );
    assert_eq!(rec.batches_replayed, 1);
    assert_eq!(rec.tombstones, *live.tombstones());
    assert!(rec.tombstones.get("u0").is_none() && rec.tombstones.get("u9").is_some());
    assert_eq!(
        &*rec.tombstones.floor()[0],
        "20261128000000.000001Z#000000#001#000000"
    );
    // And a store reopened on it goes on from there.
    let store = open_store(&io, &schema);
    assert_eq!(*store.read().tombstones(), *live.tombstones());
}
