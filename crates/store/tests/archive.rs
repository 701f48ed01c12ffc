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
use store::persist::{
    read_log, recover, Change, FsIo, LogJournal, LogOptions, LogWriter, StoredEntry,
};

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
    assert!(log.version >= 4, "version {}", log.version);
    assert_eq!(
        log.batches
            .iter()
            .map(|b| b.time_micros)
            .collect::<Vec<_>>(),
        vec![Some(t10), Some(t10 + 1)]
    );
}

/// A group gaining a member per batch, each batch stamping it with a new entryCSN, as the
/// store's writer logs it (Patch records, log version 5), archived and restored to a batch,
/// to a CSN (found in the patches) and to the latest point: the group exactly as it was.
#[test]
fn an_archived_log_of_patches_restores_exactly() {
    let schema = Arc::new(Schema::builtin());
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");
    let target = FileTarget::new(tmp.path().join("archive"));
    let log = LogWriter::open(Arc::new(FsIo), &data, 1, LogOptions::default()).expect("log");
    let journal = LogJournal::new(log);
    let seal = journal.seal_handle();
    let empty = store::Version::restore(schema.clone(), &store::Indexes::new(), [], 1, 0);
    let st = store::Store::with_journal(empty, Box::new(journal));
    let s = schema.clone();
    let member = |n: u64| format!("uid=user.{n},dc=example,dc=com");
    let id = st
        .write_blocking(move |txn| {
            let a = |name: &str, v: &[&str]| {
                let ty = s.attr_by_name(name).expect("type");
                store::Attr::new(&s, ty, "", v.iter().map(|v| v.as_bytes().into()).collect())
                    .expect("values")
            };
            let root = root();
            let dn = |d: &str| {
                schema::Dn::parse(d)
                    .and_then(|d| d.normalize(&s))
                    .expect("dn")
            };
            txn.add(
                root.dn.clone(),
                dn(&root.dn),
                vec![a("objectClass", &["top", "domain"]), a("dc", &["example"])],
                true,
            )?;
            let members: Vec<String> = (0..1000).map(member).collect();
            let members: Vec<&str> = members.iter().map(String::as_str).collect();
            txn.add(
                "cn=g,dc=example,dc=com".into(),
                dn("cn=g,dc=example,dc=com"),
                vec![
                    a("objectClass", &["top", "groupOfNames"]),
                    a("cn", &["g"]),
                    a("member", &members),
                    a("entryCSN", &[&csn(1)]),
                ],
                false,
            )
        })
        .expect("writer")
        .expect("add");
    let mut states = vec![None];
    let group =
        |st: &store::Store| StoredEntry::from_entry(st.read().get(id).expect("group"), &schema);
    states.push(Some(group(&st)));
    for n in 2..=6u64 {
        let s = schema.clone();
        st.write_blocking(move |txn| {
            let e = txn
                .version()
                .get(id)
                .cloned()
                .ok_or(store::StoreError::NoSuchEntry)?;
            let member_ty = s.attr_by_name("member").expect("member");
            let csn_ty = s.attr_by_name("entryCSN").expect("entryCSN");
            let raw = member(1000 + n).into_bytes();
            let norm = s.normalize_eq(member_ty, &raw).expect("dn");
            let add = vec![(raw.into_boxed_slice(), norm.into_boxed_slice())];
            let stamp =
                store::Attr::new(&s, csn_ty, "", vec![csn(n).into_bytes().into()]).expect("csn");
            let mut parts = Vec::new();
            for a in e.attrs() {
                match a.ty {
                    t if t == csn_ty => {}
                    t if t == member_ty => parts.push(store::Part::Kept {
                        attr: a,
                        drop: &[],
                        add: &add,
                    }),
                    _ => parts.push(store::Part::Kept {
                        attr: a,
                        drop: &[],
                        add: &[],
                    }),
                }
            }
            parts.push(store::Part::New(&stamp));
            txn.replace_parts(id, &parts, &[])
        })
        .expect("writer")
        .expect("modify");
        states.push(Some(group(&st)));
        if n == 3 {
            assert!(
                seal.seal_if_due(Duration::ZERO).expect("seal"),
                "a new log file"
            );
        }
    }
    drop(st);
    let mut patches = 0;
    for e in std::fs::read_dir(&data).expect("dir") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read(e.path()).expect("read");
        let log = read_log(&name, &bytes).expect("log");
        patches += log
            .batches
            .iter()
            .flat_map(|b| &b.changes)
            .filter(|c| matches!(c, Change::Patch(_)))
            .count();
        target.put_verified(&name, &bytes).expect("archive");
    }
    assert_eq!(patches, 5, "each modify is a patch");
    for (i, (point, want)) in [
        (Point::Batch(4), 4usize),
        (Point::Csn(csn(5)), 5),
        (Point::Latest, 6),
        (Point::Batch(2), 2),
    ]
    .into_iter()
    .enumerate()
    {
        let dest = tmp.path().join(format!("p{i}"));
        let rep = archive::restore(&target, &dest, &point, &schema, &Default::default())
            .unwrap_or_else(|e| panic!("{point}: {e}"));
        assert_eq!(rep.last_seq, want as u64, "{point}");
        let rec = recover(&FsIo, &dest, &schema).expect("recover");
        let got = rec.entries.iter().find(|e| e.id == id).expect("group");
        assert_eq!(
            Some(StoredEntry::from_entry(got, &schema)),
            states[want],
            "{point}"
        );
    }
}
