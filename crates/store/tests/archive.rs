//! Archive and point-in-time restore (`store::persist::archive`), on files: a data directory
//! of log files with known batch times and CSNs is archived into a `FileTarget`, and restores
//! to a batch, a time, a CSN and the latest point hold exactly the batches up to that point.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod persist_util;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use persist_util::*;
use schema::Schema;
use store::persist::archive::{self, ArchiveTarget, FileTarget, Point};
use store::persist::{read_log, recover, Change, FsIo, LogOptions, LogWriter, StoredEntry};

/// Batch `n`'s time: 2026-11-28T00:00:00Z plus `n` seconds.
fn at(n: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000 + n)
}

fn csn(n: u64) -> String {
    format!("20261128000{n:03}.000000Z#000000#001#000000")
}

/// Person `id` at batch `n`: its description and entryCSN name the batch.
fn person_at(id: u32, n: u64) -> StoredEntry {
    let mut p = person(id, &format!("cn {n}"));
    p.attrs.push(sattr("entryCSN", &[&csn(n)]));
    p
}

/// Batches 1..=9: batch 1 the root, then each batch n puts person (n % 3) + 2. Files start at
/// batches 1, 4 and 7 (rotated), and the files are copied to `archive`.
fn build(data: &Path, archive: &FileTarget) -> Vec<Vec<Change>> {
    let mut batches = vec![vec![Change::Put(root())]];
    for n in 2..=9u64 {
        batches.push(vec![Change::Put(person_at((n % 3) as u32 + 2, n))]);
    }
    let mut w = LogWriter::open(Arc::new(FsIo), data, 1, LogOptions::default()).expect("log");
    for (i, b) in batches.iter().enumerate() {
        let n = i as u64 + 1;
        if n == 4 || n == 7 {
            w.rotate().expect("rotate");
        }
        w.append_batch_at(n, at(n), b).expect("append");
    }
    for e in std::fs::read_dir(data).expect("dir") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        archive
            .put_verified(&name, &std::fs::read(e.path()).expect("read"))
            .expect("archive");
    }
    batches
}

/// The entries after batches 1..=n, as the model says.
fn model(batches: &[Vec<Change>], n: usize) -> Vec<StoredEntry> {
    let mut m = std::collections::BTreeMap::new();
    for b in &batches[..n] {
        apply(&mut m, b);
    }
    m.into_values().collect()
}

fn restored(schema: &Schema, dir: &Path) -> Vec<StoredEntry> {
    let rec = recover(&FsIo, dir, schema).expect("recover");
    stored(schema, &rec.entries)
}

#[test]
fn restores_exactly_the_batches_up_to_the_point() {
    let schema = Schema::builtin();
    store::intern::set_schema_types(&schema);
    let tmp = tempfile::tempdir().expect("tmp");
    let target = FileTarget::new(tmp.path().join("archive"));
    let batches = build(&tmp.path().join("data"), &target);

    let cases = [
        (Point::Batch(5), 5),
        (Point::Latest, 9),
        (
            Point::Time(archive::parse_rfc3339("2026-11-28T00:00:06Z").expect("t")),
            6,
        ),
        // Half a second after batch 6: still batch 6.
        (
            Point::Time(archive::parse_rfc3339("2026-11-28T00:00:06.5Z").expect("t")),
            6,
        ),
        (Point::Csn(csn(7)), 7),
        (Point::Batch(3), 3),
        (Point::Batch(4), 4),
    ];
    for (i, (point, want)) in cases.iter().enumerate() {
        let dest = tmp.path().join(format!("r{i}"));
        let rep = archive::restore(&target, &dest, point, &schema, &Default::default())
            .unwrap_or_else(|e| panic!("{point}: {e}"));
        assert_eq!(rep.last_seq, *want as u64, "{point}");
        assert_eq!(
            restored(&schema, &dest),
            model(&batches, *want),
            "{point}: the state after batch {want}"
        );
    }
    // The catalog sees the range and the times.
    let cat = archive::catalog(&target).expect("catalog");
    assert_eq!((cat.first_point(), cat.last_point()), (Some(0), Some(9)));
    assert_eq!(
        cat.time_of(9),
        archive::parse_rfc3339("2026-11-28T00:00:09Z")
    );

    // A point past the archive, and a directory that is not empty, are refused.
    let e = archive::restore(
        &target,
        &tmp.path().join("x"),
        &Point::Batch(12),
        &schema,
        &Default::default(),
    )
    .expect_err("past the end");
    assert!(e.to_string().contains("holds batches up to 9"), "{e}");
    let e = archive::restore(
        &target,
        &tmp.path().join("r0"),
        &Point::Latest,
        &schema,
        &Default::default(),
    )
    .expect_err("not empty");
    assert!(e.to_string().contains("not empty"), "{e}");
}

/// Batch times are recorded (version 4 logs), strictly increasing even when the clock steps
/// back.
#[test]
fn batch_times_are_recorded_and_increase() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut w = LogWriter::open(Arc::new(FsIo), tmp.path(), 1, LogOptions::default()).expect("log");
    w.append_batch_at(1, at(10), &[Change::Put(root())])
        .expect("1");
    w.append_batch_at(2, at(5), &[Change::Delete { id: 9 }])
        .expect("2");
    let name = w.current_file().to_string();
    let bytes = std::fs::read(tmp.path().join(&name)).expect("read");
    let log = read_log(&name, &bytes).expect("log");
    let t10 = 1_795_824_010_000_000;
    assert_eq!(log.version, 4);
    assert_eq!(
        log.batches
            .iter()
            .map(|b| b.time_micros)
            .collect::<Vec<_>>(),
        vec![Some(t10), Some(t10 + 1)]
    );
}
