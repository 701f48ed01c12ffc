//! Crash safety, proven with `SimIo` (style rule 9): a workload of batches, rotations, a
//! snapshot and a prune is cut off by a power loss at every mutating I/O operation, with
//! unsynced bytes lost, kept, or half kept. After each crash, recovery must hold every
//! acknowledged batch, each batch wholly or not at all, and the workload must then run to the
//! end from the recovered state. Fsync failures poison the writer; a full disk refuses a batch
//! without poisoning it, and the writer goes on once space is freed.
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
use store::persist::log::log_file_name;
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
        ..LogOptions::default()
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

/// The log files and temporary files of the directory, for checking what a failure left.
fn names(io: &SimIo) -> Vec<String> {
    io.list(Path::new(DIR)).expect("list")
}

/// Disk full in the middle of batch 3, on a file system that reserves space (the batch is
/// refused before any byte of it is written) and on one that cannot (its bytes are cut off
/// again): the batch is refused without poisoning the log, batch number 3 is not used up, the
/// same batch goes through once space is freed, and a crash then recovers exactly the batches
/// acknowledged.
#[test]
fn disk_full_refuses_the_batch_and_space_coming_back_lets_it_through() {
    let schema = Schema::builtin();
    for reserve in [true, false] {
        for keep in [Keep::Nothing, Keep::Half, Keep::All] {
            let what = format!("reserve {reserve}, crash keeping {keep:?}");
            let io = SimIo::new();
            io.without_reserve(!reserve);
            let dir = Path::new(DIR);
            io.create_dir_all(dir).expect("dir");
            // Nothing reserved ahead of each batch, so that batch 3 needs new space.
            let opts = LogOptions {
                reserve_bytes: 0,
                ..LogOptions::default()
            };
            let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, opts).expect("open");
            w.append_batch(1, &batch(1)).expect("1");
            w.append_batch(2, &batch(2)).expect("2");
            let file = dir.join(w.current_file());
            let before = io.read(&file).expect("read").len();
            // Room for a few bytes past what the file holds (or has reserved): not a batch.
            io.set_free_space(Some(10));
            let reserved = io.used_space();
            for attempt in 0..3 {
                match w.append_batch(3, &batch(3)) {
                    Err(PersistError::NoSpace { dir: d, .. }) => assert_eq!(d, dir, "{what}"),
                    other => panic!("{what}, attempt {attempt}: expected NoSpace, got {other:?}"),
                }
                assert!(w.poisoned().is_none(), "{what}: poisoned by a full disk");
                assert_eq!(
                    w.next_seq(),
                    3,
                    "{what}: the refused batch used up its number"
                );
                assert_eq!(
                    io.read(&file).expect("read").len(),
                    before,
                    "{what}: bytes of the refused batch were left in the log"
                );
                assert_eq!(io.used_space(), reserved, "{what}: space leaked");
            }
            assert_eq!(
                names(&io).iter().filter(|n| n.ends_with(".tmp")).count(),
                0,
                "{what}"
            );
            // Space comes back: the same batch number goes through, and the next.
            io.set_free_space(Some(1 << 20));
            w.append_batch(3, &batch(3))
                .unwrap_or_else(|e| panic!("{what}: after space was freed: {e}"));
            w.append_batch(4, &batch(4)).expect("4");
            io.crash_keeping(keep);
            let rec = recover(&io, dir, &schema).expect("recover");
            assert_eq!(rec.last_seq, 4, "{what}");
            assert!(rec.torn_tails.is_empty(), "{what}: {:?}", rec.torn_tails);
            assert_eq!(stored(&schema, &rec.entries), model_at(4), "{what}");
        }
    }
}

/// Space is reserved a step ahead where the disk has it, and only what the batch needs where
/// it has no more: a nearly full disk still takes the batches that fit. Reserving never
/// changes the file's size, which is what readers and recovery go by.
#[test]
fn reservation_falls_back_to_what_the_batch_needs() {
    let schema = Schema::builtin();
    let io = SimIo::new();
    let dir = Path::new(DIR);
    io.create_dir_all(dir).expect("dir");
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("open");
    w.append_batch(1, &batch(1)).expect("1");
    let file = dir.join(w.current_file());
    let size = io.read(&file).expect("read").len() as u64;
    assert!(
        io.used_space() >= size + (1 << 20),
        "no step reserved ahead: {} bytes used for a {size}-byte file",
        io.used_space()
    );
    // Fill the reservation with batches, then allow only a few bytes more than one needs.
    let mut seq = 2;
    while io.read(&file).expect("read").len() < (1 << 20) - 4096 {
        w.append_batch(seq, &batch(seq))
            .expect("batch within the reservation");
        seq += 1;
    }
    let used = io.used_space();
    io.set_free_space(Some(4096));
    while io.used_space() <= used {
        w.append_batch(seq, &batch(seq))
            .expect("batch within the reservation");
        seq += 1;
    }
    // The batch that went past the reservation got exactly its room, not a whole step.
    assert!(
        io.used_space() < used + 4096,
        "{} > {used} + 4096",
        io.used_space()
    );
    let data = io.read(&file).expect("read").len() as u64;
    assert!(io.used_space() - data < 4096);
    io.crash();
    let rec = recover(&io, dir, &schema).expect("recover");
    assert_eq!(rec.last_seq, seq - 1);
    assert_eq!(stored(&schema, &rec.entries), model_at(seq - 1));
}

/// A new log file that cannot be started for space (its header does not fit) leaves no
/// `.tmp` behind and poisons nothing: the batch that needed it is refused, the next one
/// starts the file once there is room.
#[test]
fn a_log_file_that_cannot_be_started_for_space_is_tried_again() {
    let schema = Schema::builtin();
    let io = SimIo::new();
    let dir = Path::new(DIR);
    io.create_dir_all(dir).expect("dir");
    let opts = LogOptions {
        rotate_bytes: 300,
        // Nothing reserved ahead: the first file holds exactly its data.
        reserve_bytes: 0,
        ..LogOptions::default()
    };
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, opts).expect("open");
    let mut seq = 1;
    while w.current_file() == "log-00000000000000000001.lnl" {
        // Full just when the next batch needs a new file.
        let full = {
            let f = io.read(&dir.join(w.current_file())).expect("read");
            f.len() as u64 >= 300
        };
        if full {
            io.set_free_space(Some(5));
            match w.append_batch(seq, &batch(seq)) {
                Err(PersistError::NoSpace { path, .. }) => {
                    assert!(path.to_string_lossy().ends_with(".lnl.tmp"), "{path:?}")
                }
                other => panic!("expected NoSpace starting a file, got {other:?}"),
            }
            assert!(w.poisoned().is_none());
            assert!(
                !names(&io).iter().any(|n| n.ends_with(".tmp")),
                "{:?}",
                names(&io)
            );
            assert_eq!(w.current_file(), "log-00000000000000000001.lnl");
            io.set_free_space(None);
        }
        w.append_batch(seq, &batch(seq)).expect("batch");
        seq += 1;
    }
    assert_eq!(w.current_file(), log_file_name(seq - 1));
    io.crash();
    let rec = recover(&io, dir, &schema).expect("recover");
    assert_eq!(rec.last_seq, seq - 1);
    assert_eq!(stored(&schema, &rec.entries), model_at(seq - 1));
}

/// A failed fsync is never retried, even when it says the disk is full: the log stays
/// poisoned after space comes back (fsyncgate: the kernel may have dropped the pages).
#[test]
fn fsync_failure_poisons_even_once_space_is_back() {
    let io = SimIo::new();
    let dir = Path::new(DIR);
    io.create_dir_all(dir).expect("dir");
    let opts = LogOptions {
        reserve_bytes: 0,
        ..LogOptions::default()
    };
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, opts).expect("open");
    w.append_batch(1, &batch(1)).expect("1");
    io.set_free_space(Some(0));
    assert!(matches!(
        w.append_batch(2, &batch(2)),
        Err(PersistError::NoSpace { .. })
    ));
    io.set_free_space(None);
    io.fail_sync(true);
    assert!(matches!(
        w.append_batch(2, &batch(2)),
        Err(PersistError::Io { .. })
    ));
    io.fail_sync(false);
    assert!(matches!(
        w.append_batch(2, &batch(2)),
        Err(PersistError::Poisoned(_))
    ));
}

/// A snapshot that runs out of space, or reaches the room kept for the log, removes its
/// temporary file and leaves the log writing: a snapshot may fail for space, the log not.
#[test]
fn a_snapshot_out_of_space_leaves_no_tmp_and_writes_go_on() {
    let schema = Schema::builtin();
    for keep_free in [0u64, 4096] {
        let io = SimIo::new();
        let dir = Path::new(DIR);
        io.create_dir_all(dir).expect("dir");
        let mut w =
            LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("open");
        for seq in 1..=8 {
            w.append_batch(seq, &batch(seq)).expect("batch");
        }
        // The log's file has ~1 MiB reserved ahead; the snapshot gets 1,500 bytes more (and
        // must leave `keep_free` of them).
        io.set_free_space(Some(1_500 + keep_free));
        let entries: Vec<_> = model_at(8).iter().map(|e| entry(&schema, e)).collect();
        let r = store::persist::write_snapshot_keeping(
            &io,
            dir,
            8,
            9,
            entries.iter(),
            &schema,
            &store::Tombstones::default(),
            1,
            keep_free,
        );
        match (keep_free, r) {
            (0, Err(PersistError::NoSpace { .. })) => {}
            (_, Err(PersistError::KeptFree { keep, .. })) if keep == keep_free => {}
            (_, other) => {
                panic!("keep_free {keep_free}: expected a failure for space, got {other:?}")
            }
        }
        assert!(
            !names(&io).iter().any(|n| n.ends_with(".tmp")),
            "keep_free {keep_free}: {:?}",
            names(&io)
        );
        // Writes go on: the log has its reservation, and the snapshot's space came back.
        for seq in 9..=12 {
            w.append_batch(seq, &batch(seq))
                .unwrap_or_else(|e| panic!("keep_free {keep_free}: batch {seq}: {e}"));
        }
        io.crash();
        let rec = recover(&io, dir, &schema).expect("recover");
        assert_eq!(rec.last_seq, 12);
        assert!(rec.snapshot.is_none());
        assert_eq!(stored(&schema, &rec.entries), model_at(12));
    }
}

/// Temporary files are removed at start (with the lock held), and only they: a crash during
/// a snapshot or while starting a log file leaves one, which nothing reads.
#[test]
fn stale_tmp_files_are_removed_and_nothing_else() {
    let schema = Schema::builtin();
    let io = SimIo::new();
    let dir = Path::new(DIR);
    io.create_dir_all(dir).expect("dir");
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("open");
    for seq in 1..=3 {
        w.append_batch(seq, &batch(seq)).expect("batch");
    }
    drop(w);
    io.put_file(&dir.join("snap-00000000000000000002.lns.tmp"), vec![7; 300]);
    io.put_file(&dir.join("log-00000000000000000004.lnl.tmp"), vec![1; 20]);
    io.put_file(&dir.join("notes.tmp"), b"an operator's file".to_vec());
    io.put_file(&dir.join("linden.lock"), b"123\n".to_vec());
    let removed = store::persist::remove_stale_tmp(&io, dir).expect("remove");
    let mut got: Vec<(String, u64)> = removed.into_iter().map(|t| (t.name, t.bytes)).collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("log-00000000000000000004.lnl.tmp".to_string(), 20),
            ("snap-00000000000000000002.lns.tmp".to_string(), 300),
        ]
    );
    io.crash();
    assert_eq!(
        names(&io),
        vec![
            "linden.lock".to_string(),
            "log-00000000000000000001.lnl".to_string(),
            "notes.tmp".to_string(),
        ]
    );
    assert_eq!(recover(&io, dir, &schema).expect("recover").last_seq, 3);
}
