//! Crash safety, proven with `SimIo` (style rule 9): a workload of batches, rotations, a
//! snapshot and a prune is cut off by a power loss at every mutating I/O operation, with
//! unsynced bytes lost, kept, or half kept. After each crash, recovery must hold every
//! acknowledged batch, each batch wholly or not at all, and the workload must then run to the
//! end from the recovered state. Write and fsync failures poison the writer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod persist_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use persist_util::*;
use schema::Schema;
use store::persist::{
    prune, recover, write_snapshot_with, Change, Io, Keep, LogOptions, LogWriter, PersistError,
    SimIo, StoredEntry,
};

const DIR: &str = "/data";
const LAST: u64 = 14;
const SNAPSHOT_AFTER: u64 = 6;

/// The changes of batch `seq`, a function of `seq` alone.
fn batch(seq: u64) -> Vec<Change> {
    if seq == 1 {
        return vec![Change::Put(root())];
    }
    let id = seq as u32;
    let mut c = vec![Change::Put(person(id, &format!("added in {seq}")))];
    if seq >= 4 {
        c.push(Change::Put(person(id - 2, &format!("changed in {seq}"))));
    }
    if [6, 9, 12].contains(&seq) {
        c.push(Change::Delete { id: id - 3 });
    }
    c
}

fn model_at(seq: u64) -> Vec<StoredEntry> {
    let mut m = BTreeMap::new();
    for s in 1..=seq {
        apply(&mut m, &batch(s));
    }
    m.into_values().collect()
}

/// Recovers, then runs the workload on to `LAST`. `acked` is the last batch whose append
/// returned Ok. Stops at the first error (a power cut).
fn run(io: &SimIo, schema: &Schema, acked: &mut u64) -> Result<(), PersistError> {
    let dir = Path::new(DIR);
    let rec = recover(io, dir, schema)?;
    let opts = LogOptions {
        rotate_bytes: 700,
        sync: true,
    };
    let mut w = LogWriter::open_after_recovery(Arc::new(io.clone()), dir, &rec, opts)?;
    for seq in rec.last_seq + 1..=LAST {
        w.append_batch(seq, &batch(seq))?;
        *acked = seq;
        if seq == SNAPSHOT_AFTER {
            w.rotate()?;
            let entries: Vec<_> = model_at(seq).iter().map(|e| entry(schema, e)).collect();
            write_snapshot_with(io, dir, seq, seq as u32 + 1, entries.iter(), schema, 2)?;
            prune(io, dir, seq)?;
        }
    }
    Ok(())
}

fn check(io: &SimIo, schema: &Schema, acked: u64, attempted_max: u64, what: &str) -> u64 {
    let rec = recover(io, Path::new(DIR), schema).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        rec.last_seq >= acked && rec.last_seq <= attempted_max,
        "{what}: recovered batch {} with batch {acked} acknowledged",
        rec.last_seq
    );
    assert_eq!(
        stored(schema, &rec.entries),
        model_at(rec.last_seq),
        "{what}: state is not exactly that after batch {}",
        rec.last_seq
    );
    rec.last_seq
}

#[test]
fn every_acknowledged_batch_survives_a_crash_at_every_operation() {
    let schema = Schema::builtin();
    let total = {
        let io = SimIo::new();
        io.create_dir_all(Path::new(DIR)).expect("dir");
        let mut acked = 0;
        run(&io, &schema, &mut acked).expect("clean run");
        assert_eq!(acked, LAST);
        io.ops()
    };
    assert!(total > 40, "workload too small: {total} operations");
    let mut torn_seen = 0;
    for keep in [Keep::Nothing, Keep::Half, Keep::All] {
        for k in 0..=total {
            let what = format!("crash after {k} operations, keeping {keep:?}");
            let io = SimIo::new();
            io.create_dir_all(Path::new(DIR)).expect("dir");
            io.cut_power_after(k);
            let mut acked = 0;
            let finished = run(&io, &schema, &mut acked).is_ok();
            assert_eq!(finished, k >= total, "{what}");
            io.crash_keeping(keep);
            // The batch being written when the power went may or may not be there.
            check(&io, &schema, acked, (acked + 1).min(LAST), &what);
            if recover(&io, Path::new(DIR), &schema)
                .map(|r| !r.torn_tails.is_empty())
                .unwrap_or(false)
            {
                torn_seen += 1;
            }
            // Restart: the workload completes from the recovered state, and survives a crash.
            let mut acked2 = 0;
            run(&io, &schema, &mut acked2).unwrap_or_else(|e| panic!("{what}: restart: {e}"));
            io.crash();
            let last = check(&io, &schema, LAST, LAST, &format!("{what}, after restart"));
            assert_eq!(last, LAST);
        }
    }
    assert!(
        torn_seen > 0,
        "no crash left a torn tail; the test does not test that rule"
    );
}

#[test]
fn fsync_failure_poisons_the_writer() {
    let io = SimIo::new();
    let dir = Path::new(DIR);
    io.create_dir_all(dir).expect("dir");
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("open");
    w.append_batch(1, &batch(1)).expect("first");
    io.fail_sync(true);
    assert!(matches!(
        w.append_batch(2, &batch(2)),
        Err(PersistError::Io { .. })
    ));
    io.fail_sync(false);
    // Not retryable, even once the disk behaves again.
    match w.append_batch(2, &batch(2)) {
        Err(PersistError::Poisoned(why)) => assert!(why.contains("fsync"), "{why}"),
        other => panic!("expected Poisoned, got {other:?}"),
    }
    assert!(matches!(w.rotate(), Err(PersistError::Poisoned(_))));
    assert!(w.poisoned().is_some());
}

#[test]
fn write_failure_poisons_the_writer_and_loses_nothing_acknowledged() {
    let schema = Schema::builtin();
    let io = SimIo::new();
    let dir = Path::new(DIR);
    io.create_dir_all(dir).expect("dir");
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("open");
    w.append_batch(1, &batch(1)).expect("1");
    w.append_batch(2, &batch(2)).expect("2");
    io.fail_after_bytes(10); // disk full in the middle of batch 3
    assert!(matches!(
        w.append_batch(3, &batch(3)),
        Err(PersistError::Io { .. })
    ));
    assert!(matches!(
        w.append_batch(3, &batch(3)),
        Err(PersistError::Poisoned(_))
    ));
    io.crash_keeping(Keep::All);
    let rec = recover(&io, dir, &schema).expect("recover");
    assert_eq!(rec.last_seq, 2);
    assert_eq!(rec.torn_tails.len(), 1);
    assert_eq!(stored(&schema, &rec.entries), model_at(2));
}
