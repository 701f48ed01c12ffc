//! Persistence formats and recovery rules: codec round trips, log batches read back, torn tails
//! cut at every byte, corruption reported with file and offset, snapshots in parallel chunks,
//! sequence gaps refused, `verify` and `prune`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod persist_util;

use std::path::Path;
use std::sync::Arc;

use persist_util::*;
use proptest::prelude::*;
use schema::Schema;
use store::persist::codec::Reader;
use store::persist::log::{log_file_name, LOG_HEADER_LEN};
use store::persist::snapshot::snapshot_file_name;
use store::persist::{
    prune, read_log, read_log_last, read_snapshot, recover, verify, write_snapshot_bulk,
    write_snapshot_with, Change, FileStatus, FsIo, Io, LogOptions, LogWriter, PersistError, SimIo,
    StoredAttr, StoredEntry,
};

const DIR: &str = "/data";

fn sim() -> SimIo {
    let io = SimIo::new();
    io.create_dir_all(Path::new(DIR)).expect("dir");
    io
}

fn arb_entry() -> impl Strategy<Value = StoredEntry> {
    let attr = (
        "[a-zA-Z][a-zA-Z0-9;-]{0,12}",
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..4),
    )
        .prop_map(|(name, values)| StoredAttr { name, values });
    (
        any::<u32>(),
        prop::option::of(any::<u32>()),
        ".{0,40}",
        prop::collection::vec(attr, 0..6),
    )
        .prop_map(|(id, parent, dn, attrs)| StoredEntry {
            id,
            parent,
            dn,
            attrs,
        })
}

proptest! {
    #[test]
    fn codec_round_trips(e in arb_entry(), del in any::<u32>()) {
        for c in [Change::Put(e.clone()), Change::Delete { id: del }] {
            let mut b = Vec::new();
            c.encode(&mut b);
            let mut r = Reader::new(&b);
            prop_assert_eq!(Change::decode(&mut r), Ok(c));
            prop_assert!(r.is_empty());
            // Every strict prefix is an error, never a panic or a wrong record.
            for cut in 0..b.len() {
                let mut r = Reader::new(&b[..cut]);
                prop_assert!(Change::decode(&mut r).is_err());
            }
        }
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut log = b"LNDNLOG\0\x01\0\0\0\x01\0\0\0\0\0\0\0".to_vec();
        log.extend_from_slice(&bytes);
        let _ = read_log("fuzz", &log);
        let schema = Schema::builtin();
        let mut snap = b"LNDNSNAP\x01\0\0\0".to_vec();
        snap.extend_from_slice(&bytes);
        let _ = read_snapshot("fuzz", &snap, &schema);
    }
}

#[test]
fn entries_convert_through_the_schema() {
    let schema = Schema::builtin();
    let se = person(7, "Seven");
    let e = se.to_entry(&schema).expect("entry");
    assert_eq!(e.ndn_str(), entry(&schema, &se).ndn_str());
    let cn = schema.attr_by_name("cn").expect("cn");
    assert!(e.attrs().any(|a| a.ty == cn && a.options == ";lang-en"));
    assert_eq!(StoredEntry::from_entry(&e, &schema), se);

    let mut bad = se.clone();
    bad.attrs.push(sattr("noSuchAttribute", &["x"]));
    let err = bad.to_entry(&schema).expect_err("unknown type");
    assert!(
        matches!(&err, PersistError::Schema { message, .. } if message.contains("noSuchAttribute")),
        "{err}"
    );
}

/// Writes batches 1..=n (each: one put, and a delete from batch 3 on) and returns the log
/// file's bytes and the changes of each batch.
fn write_log(io: &SimIo, n: u64) -> (Vec<u8>, Vec<Vec<Change>>) {
    let mut w = LogWriter::open(
        Arc::new(io.clone()),
        Path::new(DIR),
        1,
        LogOptions::default(),
    )
    .expect("open");
    let mut all = Vec::new();
    for seq in 1..=n {
        let mut changes = vec![Change::Put(person(seq as u32 + 1, &format!("v{seq}")))];
        if seq >= 3 {
            changes.push(Change::Delete { id: seq as u32 - 1 });
        }
        w.append_batch(seq, &changes).expect("append");
        all.push(changes);
    }
    let bytes = io
        .read(&Path::new(DIR).join(log_file_name(1)))
        .expect("read");
    (bytes, all)
}

#[test]
fn log_round_trip() {
    let io = sim();
    let (bytes, all) = write_log(&io, 5);
    let log = read_log("log", &bytes).expect("read");
    assert_eq!(log.first_seq, 1);
    assert_eq!(log.torn_tail, None);
    let got: Vec<_> = log
        .batches
        .iter()
        .map(|b| (b.seq, b.changes.clone()))
        .collect();
    let want: Vec<_> = (1..=5).zip(all).collect();
    assert_eq!(got, want);
    assert_eq!(log.batches[0].offset, LOG_HEADER_LEN as u64);
}

/// `read_log_last` checks the same batches as `read_log` and gives the same numbers and
/// times, with the records of the last batch only; damage in an earlier batch is still found.
#[test]
fn read_log_last_decodes_only_the_last_batch() {
    let io = sim();
    let (bytes, all) = write_log(&io, 5);
    let full = read_log("log", &bytes).expect("read");
    let last = read_log_last("log", &bytes).expect("read");
    assert_eq!(last.batches.len(), 5);
    for (a, b) in full.batches.iter().zip(&last.batches) {
        assert_eq!(
            (a.seq, a.time_micros, a.offset, a.end),
            (b.seq, b.time_micros, b.offset, b.end)
        );
    }
    assert!(last.batches[..4].iter().all(|b| b.changes.is_empty()));
    assert_eq!(last.batches[4].changes, all[4]);
    let mut damaged = bytes.clone();
    let at = full.batches[1].offset as usize + 20;
    damaged[at] ^= 0xff;
    assert!(read_log_last("log", &damaged).is_err());
}

#[test]
fn torn_tail_is_cut_at_every_byte() {
    let io = sim();
    let (bytes, _) = write_log(&io, 3);
    let full = read_log("log", &bytes).expect("read");
    let last = full.batches[2].offset as usize;
    for cut in last..bytes.len() {
        let log = read_log("log", &bytes[..cut]).expect("torn tail accepted");
        assert_eq!(log.batches.len(), 2, "cut at {cut}");
        assert_eq!(log.batches, full.batches[..2]);
        let torn = log.torn_tail.map(|t| t.offset);
        assert_eq!(torn, (cut > last).then_some(last as u64), "cut at {cut}");
    }
    // Zeros after the last batch (a file system that extended the file but lost the data).
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0; 100]);
    let log = read_log("log", &padded).expect("zero tail");
    assert_eq!(log.batches.len(), 3);
    assert_eq!(log.torn_tail.map(|t| t.offset), Some(bytes.len() as u64));
    // A damaged last batch is a torn tail too.
    let mut flipped = bytes.clone();
    let n = flipped.len();
    flipped[n - 1] ^= 0x40;
    let log = read_log("log", &flipped).expect("bad last batch");
    assert_eq!(log.torn_tail.map(|t| t.offset), Some(last as u64));
}

#[test]
fn damage_before_intact_batches_is_corruption() {
    let io = sim();
    let (bytes, _) = write_log(&io, 3);
    let full = read_log("log", &bytes).expect("read");
    let (b2, b3) = (
        full.batches[1].offset as usize,
        full.batches[2].offset as usize,
    );
    for i in b2..b3 {
        let mut bad = bytes.clone();
        bad[i] ^= 0x01;
        match read_log("log-x.lnl", &bad) {
            Err(PersistError::Corrupt { file, offset, .. }) => {
                assert_eq!(file, "log-x.lnl");
                assert_eq!(offset, b2 as u64, "byte {i}");
            }
            other => panic!("byte {i}: expected Corrupt, got {other:?}"),
        }
    }
    // A bad header is corruption at offset 0 (or the version field).
    for i in 0..8 {
        let mut bad = bytes.clone();
        bad[i] ^= 0x01;
        assert!(matches!(
            read_log("l", &bad),
            Err(PersistError::Corrupt { offset: 0, .. })
        ));
    }
    let mut v9 = bytes.clone();
    v9[8] = 9;
    let err = read_log("l", &v9).expect_err("version 9");
    assert!(err.to_string().contains("version 9"), "{err}");
}

#[test]
fn writer_refuses_out_of_sequence_batches() {
    let io = sim();
    let mut w = LogWriter::open(
        Arc::new(io.clone()),
        Path::new(DIR),
        1,
        LogOptions::default(),
    )
    .expect("open");
    assert!(matches!(
        w.append_batch(2, &[]),
        Err(PersistError::Usage(_))
    ));
    w.append_batch(1, &[]).expect("in sequence");
    assert_eq!(w.next_seq(), 2);
}

#[test]
fn log_rotates_by_size_and_recovery_follows_files() {
    let io = sim();
    let schema = Schema::builtin();
    let opts = LogOptions {
        rotate_bytes: 400,
        sync: true,
        ..LogOptions::default()
    };
    let mut w = LogWriter::open(Arc::new(io.clone()), Path::new(DIR), 1, opts).expect("open");
    w.append_batch(1, &[Change::Put(root())]).expect("root");
    for seq in 2..=20u64 {
        w.append_batch(seq, &[Change::Put(person(seq as u32, "x"))])
            .expect("append");
    }
    let logs = io.list(Path::new(DIR)).expect("list");
    assert!(logs.len() > 3, "{logs:?}");
    let rec = recover(&io, Path::new(DIR), &schema).expect("recover");
    assert_eq!(rec.last_seq, 20);
    assert_eq!(rec.entries.len(), 20);
    assert_eq!(rec.entries[0].id, 1, "parents first");
    assert_eq!(rec.next_id, 21);
    assert_eq!(rec.log_records_replayed, 20);

    // Losing a middle file is a gap, named with the file after it.
    let names: Vec<_> = logs.iter().filter(|n| n.ends_with(".lnl")).collect();
    io.remove(&Path::new(DIR).join(names[1])).expect("rm");
    match recover(&io, Path::new(DIR), &schema) {
        Err(PersistError::Corrupt { file, reason, .. }) => {
            assert_eq!(&file, names[2]);
            assert!(reason.contains("missing"), "{reason}");
        }
        other => panic!("expected a gap, got {other:?}"),
    }
}

fn snapshot_entries(schema: &Schema, n: u32) -> Vec<store::Entry> {
    let mut v = vec![entry(schema, &root())];
    v.extend((2..=n).map(|i| entry(schema, &person(i, &format!("P{i}")))));
    v
}

#[test]
fn snapshot_round_trip_in_parallel_chunks() {
    let io = sim();
    let schema = Schema::builtin();
    let entries = snapshot_entries(&schema, 50);
    let info =
        write_snapshot_with(&io, Path::new(DIR), 9, 77, entries.iter(), &schema, 7).expect("write");
    assert_eq!(info.chunks, 8);
    assert_eq!(info.entries, 50);
    assert_eq!(
        io.list(Path::new(DIR)).expect("list"),
        vec![snapshot_file_name(9)]
    );
    let bytes = io.read(&Path::new(DIR).join(&info.name)).expect("read");
    let snap = read_snapshot(&info.name, &bytes, &schema).expect("decode");
    assert_eq!((snap.seq, snap.next_id, snap.chunks), (9, 77, 8));
    assert_eq!(stored(&schema, &snap.entries), stored(&schema, &entries));

    // Empty snapshot.
    let info = write_snapshot_with(&io, Path::new(DIR), 10, 1, [].iter(), &schema, 7)
        .expect("write empty");
    let bytes = io.read(&Path::new(DIR).join(&info.name)).expect("read");
    let snap = read_snapshot("s", &bytes, &schema).expect("empty");
    assert_eq!((snap.entries.len(), snap.chunks), (0, 0));
}

/// The bulk writer (chunks encoded on a second thread, one sync) writes the very bytes of the
/// sequential one, in the simulated and the real file system.
#[test]
fn bulk_snapshot_writes_the_same_bytes() {
    let schema = Schema::builtin();
    let entries = snapshot_entries(&schema, 20_000);
    let io = sim();
    let dir = Path::new(DIR);
    let one = write_snapshot_with(
        &io,
        &dir.join("one"),
        5,
        20_001,
        entries.iter(),
        &schema,
        store::persist::snapshot::DEFAULT_CHUNK_ENTRIES,
    )
    .expect("sequential");
    let bulk =
        write_snapshot_bulk(&io, &dir.join("bulk"), 5, 20_001, &entries, &schema).expect("bulk");
    assert_eq!(one, bulk);
    assert_eq!(bulk.chunks, 3);
    let read = |d: &str| io.read(&dir.join(d).join(&one.name)).expect("read");
    assert!(read("one") == read("bulk"), "the files differ");
    let tmp = tempfile::tempdir().expect("tempdir");
    let real = write_snapshot_bulk(&FsIo, tmp.path(), 5, 20_001, &entries, &schema).expect("real");
    assert_eq!(real, one);
    assert!(std::fs::read(tmp.path().join(&one.name)).expect("read") == read("one"));
    // Nothing at all.
    let empty = write_snapshot_bulk(&io, &dir.join("empty"), 1, 1, &[], &schema).expect("empty");
    let bytes = io.read(&dir.join("empty").join(&empty.name)).expect("read");
    let snap = read_snapshot("s", &bytes, &schema).expect("decode");
    assert_eq!((snap.entries.len(), snap.chunks), (0, 0));
}

#[test]
fn every_damaged_or_truncated_snapshot_is_refused() {
    let io = sim();
    let schema = Schema::builtin();
    let entries = snapshot_entries(&schema, 6);
    let info =
        write_snapshot_with(&io, Path::new(DIR), 3, 7, entries.iter(), &schema, 2).expect("write");
    let bytes = io.read(&Path::new(DIR).join(&info.name)).expect("read");
    for cut in 0..bytes.len() {
        assert!(
            matches!(
                read_snapshot("s", &bytes[..cut], &schema),
                Err(PersistError::Corrupt { .. })
            ),
            "truncated to {cut}"
        );
    }
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x10;
        assert!(
            read_snapshot("s", &bad, &schema).is_err(),
            "flipped byte {i}"
        );
    }
}

#[test]
fn recovery_uses_newest_snapshot_then_later_batches() {
    let io = sim();
    let schema = Schema::builtin();
    let dir = Path::new(DIR);
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("open");
    w.append_batch(1, &[Change::Put(root())]).expect("1");
    w.append_batch(
        2,
        &[Change::Put(person(2, "a")), Change::Put(person(3, "b"))],
    )
    .expect("2");
    // Snapshot of batch 2, then more batches in a new file.
    w.rotate().expect("rotate");
    let at2 = [
        entry(&schema, &root()),
        entry(&schema, &person(2, "a")),
        entry(&schema, &person(3, "b")),
    ];
    write_snapshot_with(&io, dir, 2, 4, at2.iter(), &schema, 2).expect("snap");
    w.append_batch(3, &[Change::Delete { id: 2 }, Change::Put(person(3, "b2"))])
        .expect("3");
    w.append_batch(4, &[Change::Put(person(4, "c"))])
        .expect("4");

    let rec = recover(&io, dir, &schema).expect("recover");
    assert_eq!(
        rec.snapshot.as_deref(),
        Some(snapshot_file_name(2).as_str())
    );
    assert_eq!(
        (rec.last_seq, rec.batches_replayed, rec.log_records_replayed),
        (4, 2, 3)
    );
    assert_eq!(
        stored(&schema, &rec.entries),
        vec![root(), person(3, "b2"), person(4, "c")]
    );
    assert_eq!(rec.next_id, 5);

    // Pruning removes the log the snapshot covers, and recovery gives the same state.
    let gone = prune(&io, dir, 2).expect("prune");
    assert_eq!(gone, vec![log_file_name(1)]);
    let again = recover(&io, dir, &schema).expect("recover after prune");
    assert_eq!(
        stored(&schema, &again.entries),
        stored(&schema, &rec.entries)
    );

    let report = verify(&io, dir, &schema).expect("verify");
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(report.recovery, Ok((3, 4)));

    // A damaged newest snapshot stops recovery with its name, even with an older one present.
    write_snapshot_with(&io, dir, 1, 2, at2[..1].iter(), &schema, 2).expect("older snap");
    let p = dir.join(snapshot_file_name(2));
    let mut bytes = io.read(&p).expect("read");
    bytes[40] ^= 0xff;
    io.put_file(&p, bytes);
    match recover(&io, dir, &schema) {
        Err(PersistError::Corrupt { file, .. }) => assert_eq!(file, snapshot_file_name(2)),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let report = verify(&io, dir, &schema).expect("verify");
    assert!(!report.is_ok());
    let bad: Vec<_> = report
        .files
        .iter()
        .filter(|f| matches!(f.status, FileStatus::Corrupt(_)))
        .map(|f| f.name.clone())
        .collect();
    assert_eq!(bad, vec![snapshot_file_name(2)]);
}

#[test]
fn empty_or_missing_directory_is_an_empty_store() {
    let io = SimIo::new();
    let schema = Schema::builtin();
    let rec = recover(&io, Path::new("/nowhere"), &schema).expect("missing dir");
    assert_eq!((rec.entries.len(), rec.last_seq, rec.next_id), (0, 0, 1));
}

#[test]
fn real_files_round_trip_and_leftovers_are_ignored() {
    use store::persist::FsIo;
    let schema = Schema::builtin();
    let dir = std::env::temp_dir().join(format!("linden-persist-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let io = FsIo;
    let mut w = LogWriter::open(Arc::new(FsIo), &dir, 1, LogOptions::default()).expect("open");
    w.append_batch(1, &[Change::Put(root())]).expect("1");
    w.append_batch(2, &[Change::Put(person(2, "a"))])
        .expect("2");
    let at2 = [entry(&schema, &root()), entry(&schema, &person(2, "a"))];
    write_snapshot_with(&io, &dir, 2, 3, at2.iter(), &schema, 1).expect("snapshot");
    w.append_batch(3, &[Change::Put(person(3, "b"))])
        .expect("3");
    // An unfinished snapshot from a crash is not data.
    std::fs::write(dir.join("snap-00000000000000000003.lns.tmp"), b"LNDNSNAP").expect("tmp");

    let rec = recover(&io, &dir, &schema).expect("recover");
    assert_eq!((rec.last_seq, rec.batches_replayed), (3, 1));
    assert_eq!(
        stored(&schema, &rec.entries),
        vec![root(), person(2, "a"), person(3, "b")]
    );
    let report = verify(&io, &dir, &schema).expect("verify");
    assert!(report.is_ok(), "{report:?}");
    assert!(report
        .files
        .iter()
        .any(|f| f.name.ends_with(".tmp") && f.status == FileStatus::Ignored));
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a real file system the log reserves space ahead of its data (fallocate, keeping the
/// size), and readers see only the data: the file's size is its header and batches, and
/// recovery and `verify` read it as before. Where the file system cannot reserve, the log
/// writes all the same.
#[test]
fn reserved_space_is_not_part_of_a_real_log_file() {
    let schema = Schema::builtin();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let mut w = LogWriter::open(Arc::new(FsIo), dir, 1, LogOptions::default()).expect("open");
    let mut expected = LOG_HEADER_LEN as u64;
    for seq in 1..=20u64 {
        let changes = if seq == 1 {
            vec![Change::Put(root())]
        } else {
            vec![Change::Put(person(seq as u32, "x"))]
        };
        let before = std::fs::metadata(dir.join(w.current_file()))
            .expect("metadata")
            .len();
        w.append_batch(seq, &changes).expect("append");
        let after = std::fs::metadata(dir.join(w.current_file()))
            .expect("metadata")
            .len();
        assert!(after > before);
        expected = after;
    }
    let file = dir.join(w.current_file());
    let meta = std::fs::metadata(&file).expect("metadata");
    assert_eq!(meta.len(), expected);
    assert_eq!(std::fs::read(&file).expect("read").len() as u64, expected);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        // Allocated past the data (unless this file system cannot reserve: then exactly it).
        let allocated = meta.blocks() * 512;
        println!("{expected} bytes of data, {allocated} bytes allocated");
    }
    let rec = recover(&FsIo, dir, &schema).expect("recover");
    assert_eq!(rec.last_seq, 20);
    assert!(rec.torn_tails.is_empty());
    assert!(verify(&FsIo, dir, &schema).expect("verify").is_ok());
}

#[test]
fn opening_the_log_over_existing_data_is_refused() {
    let io = sim();
    let dir = Path::new(DIR);
    let schema = Schema::builtin();
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("open");
    w.append_batch(1, &[Change::Put(root())]).expect("1");
    drop(w);
    let again = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default());
    assert!(matches!(again, Err(PersistError::Usage(_))));
    // After recovery it continues in a new file, and both files recover.
    let rec = recover(&io, dir, &schema).expect("recover");
    let mut w =
        LogWriter::open_after_recovery(Arc::new(io.clone()), dir, &rec, LogOptions::default())
            .expect("reopen");
    assert_eq!(w.current_file(), log_file_name(2));
    w.append_batch(2, &[Change::Put(person(2, "a"))])
        .expect("2");
    let rec = recover(&io, dir, &schema).expect("recover");
    assert_eq!((rec.last_seq, rec.entries.len()), (2, 2));
}

#[test]
#[ignore = "timing, run by hand: cargo test -p store --test persist -- --ignored --nocapture"]
fn snapshot_and_log_timing_100k() {
    use std::time::Instant;
    let io = sim();
    let schema = Schema::builtin();
    let n = 100_000u32;
    let entries: Vec<_> = std::iter::once(entry(&schema, &root()))
        .chain((2..=n).map(|i| entry(&schema, &person(i, &format!("Person {i}")))))
        .collect();
    let t = Instant::now();
    let info = write_snapshot_with(
        &io,
        Path::new(DIR),
        1,
        n + 1,
        entries.iter(),
        &schema,
        65_536,
    )
    .expect("write");
    let write = t.elapsed();
    let bytes = io.read(&Path::new(DIR).join(&info.name)).expect("read");
    let t = Instant::now();
    let snap = read_snapshot(&info.name, &bytes, &schema).expect("read");
    let read = t.elapsed();
    assert_eq!(snap.entries.len(), n as usize);
    let stored_all: Vec<_> = entries
        .iter()
        .map(|e| StoredEntry::from_entry(e, &schema))
        .collect();
    let t = Instant::now();
    for se in &stored_all {
        se.to_entry(&schema).expect("entry");
    }
    println!("to_entry alone, one thread: {:?}", t.elapsed());
    let mut w = LogWriter::open(
        Arc::new(io.clone()),
        Path::new(DIR),
        2,
        LogOptions::default(),
    )
    .expect("log");
    let t = Instant::now();
    for seq in 2..1002u64 {
        let changes: Vec<_> = (0..10)
            .map(|k| Change::Put(person((seq * 10 + k) as u32 % n + 2, "modified")))
            .collect();
        w.append_batch(seq, &changes).expect("append");
    }
    let append = t.elapsed();
    let t = Instant::now();
    let rec = recover(&io, Path::new(DIR), &schema).expect("recover");
    let recover_t = t.elapsed();
    println!(
        "{n} entries, {} bytes ({} per entry): snapshot write {write:?}, read {read:?}; \
         1000 batches x 10 puts appended (SimIo) in {append:?}; recover {recover_t:?} ({} records)",
        bytes.len(),
        bytes.len() / n as usize,
        rec.log_records_replayed
    );
}

#[test]
fn overlapping_log_files_are_corruption() {
    let io = sim();
    let dir = Path::new(DIR);
    let schema = Schema::builtin();
    let mut w = LogWriter::open(Arc::new(io.clone()), dir, 1, LogOptions::default()).expect("open");
    for seq in 1..=3 {
        w.append_batch(seq, &[Change::Put(root())]).expect("append");
    }
    // The writer refuses to start where existing batches are...
    let again = LogWriter::open(Arc::new(io.clone()), dir, 2, LogOptions::default());
    assert!(matches!(again, Err(PersistError::Usage(_))));
    // ...and recovery refuses a file that repeats batch numbers.
    let log1 = io.read(&dir.join(log_file_name(1))).expect("read");
    let mut log2 = log1.clone();
    log2[12] = 2; // header first seq 2; its first batch still says 1
    io.put_file(&dir.join(log_file_name(2)), log2);
    assert!(matches!(
        recover(&io, dir, &schema),
        Err(PersistError::Corrupt { .. })
    ));
    // A well-formed file starting at batch 3 overlaps log 1 (which holds 1..=3).
    let mut w3 = Vec::new();
    w3.extend_from_slice(&log1[..LOG_HEADER_LEN]);
    w3[12] = 3;
    io.remove(&dir.join(log_file_name(2))).expect("rm");
    io.put_file(&dir.join(log_file_name(3)), w3);
    match recover(&io, dir, &schema) {
        Err(PersistError::Corrupt { file, reason, .. }) => {
            assert_eq!(file, log_file_name(3));
            assert!(reason.contains("previous log file"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// The writer's journal encodes a batch straight from the version's entries: the very bytes of
/// `append_batch` of the owned changes (`batch_changes`) it used to build.
#[test]
fn a_batch_from_the_version_writes_the_same_bytes_as_its_changes() {
    let schema = Arc::new(Schema::builtin());
    let tomb = |u: &str| store::Tombstone {
        uuid: u.into(),
        dn: format!("uid={u},dc=example,dc=com").into(),
        csn: "20261128000000.000000Z#000000#001#000000".into(),
        seen: "20261127000000.000000Z#000000#002#000000".into(),
    };
    let version = store::Version::restore(
        schema.clone(),
        &store::Indexes::new(),
        snapshot_entries(&schema, 30),
        31,
        0,
    )
    .with_tombstones(store::Tombstones::from_parts(
        [tomb("u1"), tomb("u2")],
        vec!["20261126000000.000000Z#000000#001#000000".into()],
    ));
    let ext = vec!["attributetype ( 1.3.6.1.4.1.99999.9 NAME 'x' SUP name )".to_string()];
    // The batch started from an empty version: every entry is new (patches: persist_patch.rs).
    let empty = store::Version::restore(schema.clone(), &store::Indexes::new(), [], 1, 0);
    // Entries written whole, and ids the version no longer holds (deletes); tombstones put
    // (u1, u2) and forgotten (u3), and the floor.
    let touched: Vec<u32> = vec![1, 2, 7, 30, 40, 41];
    let tombstones = store::TombstoneChanges {
        touched: vec!["u1".into(), "u2".into(), "u3".into()],
        floor: true,
    };
    let (a, b) = (sim(), sim());
    let open = |io: &SimIo| {
        LogWriter::open(
            Arc::new(io.clone()),
            Path::new(DIR),
            1,
            LogOptions::default(),
        )
        .expect("open")
    };
    let when = std::time::SystemTime::now();
    open(&a)
        .append_batch_at(
            1,
            when,
            &store::persist::batch_changes(&empty, &version, &ext, &touched, &tombstones),
        )
        .expect("append");
    open(&b)
        .append_version_batch(1, when, &empty, &version, &ext, &touched, &tombstones)
        .expect("append");
    let read = |io: &SimIo| {
        io.read(&Path::new(DIR).join(log_file_name(1)))
            .expect("read")
    };
    assert_eq!(read(&a), read(&b));
}
