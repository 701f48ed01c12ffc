//! Startup recovery and whole-directory verification.
//!
//! State at startup = the newest snapshot + every log batch numbered after it, in order.
//! Rules (style rule 8): a torn last batch of a log file is left out (it was never
//! acknowledged: the next file, or the end of the log, proves nothing was built on it); any
//! other defect — a corrupt newest snapshot, a checksum error before intact data, a missing
//! batch — stops recovery with the file and byte offset. Recovery only reads: it never deletes,
//! truncates or rewrites a file.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use schema::Schema;

use super::codec::Change;
use super::io::{Io, IoRead};
use super::log::{parse_log_name, read_log};
use super::patch::PatchError;
use super::snapshot::{parse_snapshot_name, read_snapshot_from};
use super::PersistError;
use crate::entry::{Entry, EntryId};
use crate::tombstone::Tombstones;

/// The state recovered from a data directory.
#[derive(Debug, Clone)]
pub struct Recovered {
    /// Every entry, parents before children (by DN depth, then id), ready for
    /// `Version::restore`.
    pub entries: Vec<Entry>,
    /// Smallest id never used (at least one more than every recovered id).
    pub next_id: EntryId,
    /// The last batch applied (0 for an empty directory). The next batch is `last_seq + 1`.
    pub last_seq: u64,
    /// The snapshot loaded, if any.
    pub snapshot: Option<String>,
    pub batches_replayed: u64,
    pub log_records_replayed: u64,
    /// Torn last batches left out: (file, byte offset). Normal after a crash.
    pub torn_tails: Vec<(String, u64)>,
    /// The schema the entries were read with: the given one plus the schema extensions of the
    /// snapshot and of the replayed log, in order (the schema of the recovered version).
    pub schema: Arc<Schema>,
    /// The tombstones of deleted entries: the snapshot's, with the log's records replayed
    /// (`Version::with_tombstones`).
    pub tombstones: Tombstones,
}

struct Files {
    snapshots: Vec<(u64, String)>,
    logs: Vec<(u64, String)>,
    other: Vec<String>,
}

fn list_files(io: &dyn Io, dir: &Path) -> Result<Files, PersistError> {
    let names = match io.list(dir) {
        Ok(n) => n,
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(PersistError::io(dir, e)),
    };
    let mut f = Files {
        snapshots: Vec::new(),
        logs: Vec::new(),
        other: Vec::new(),
    };
    for n in names {
        if let Some(s) = parse_snapshot_name(&n) {
            f.snapshots.push((s, n));
        } else if let Some(s) = parse_log_name(&n) {
            f.logs.push((s, n));
        } else {
            f.other.push(n);
        }
    }
    f.snapshots.sort();
    f.logs.sort();
    f.other.sort();
    Ok(f)
}

fn read(io: &dyn Io, dir: &Path, name: &str) -> Result<Vec<u8>, PersistError> {
    let p = dir.join(name);
    io.read(&p).map_err(|e| PersistError::io(p, e))
}

fn open(io: &dyn Io, dir: &Path, name: &str) -> Result<Box<dyn IoRead>, PersistError> {
    let p = dir.join(name);
    io.open_read(&p).map_err(|e| PersistError::io(p, e))
}

/// Recovers the state stored in `dir` (an absent or empty directory is an empty store).
/// `schema` is the schema configured at start (built-in and configured files); the schema
/// extensions stored in the directory are applied to it (`Recovered::schema`). An extension
/// that clashes with the configured schema, or an entry using a type neither defines, stops
/// recovery with a `PersistError::Schema` naming the file, offset and definition or type.
pub fn recover(io: &dyn Io, dir: &Path, schema: &Schema) -> Result<Recovered, PersistError> {
    crate::intern::set_schema_types(schema);
    let mut current: Option<Schema> = None;
    let files = list_files(io, dir)?;
    // Entries by id, sorted: a snapshot holds them in id order, and log replay adds new ids
    // (always above every older one) at the end. Those the log deleted are in `deleted` until
    // the end (a later Put of the same id takes it out again).
    let mut map: Vec<Entry> = Vec::new();
    let mut deleted = roaring::RoaringBitmap::new();
    let mut next_id: EntryId = 1;
    let mut last: u64 = 0;
    let mut snapshot = None;
    let mut tombstones = Tombstones::default();
    if let Some((seq, name)) = files.snapshots.last() {
        let mut snap = read_snapshot_from(name, &*open(io, dir, name)?, schema)?;
        current = snap.extended.take();
        tombstones = std::mem::take(&mut snap.tombstones);
        if snap.seq != *seq {
            return Err(PersistError::Corrupt {
                file: name.clone(),
                offset: 12,
                reason: format!("holds batch {} but is named for batch {seq}", snap.seq),
            });
        }
        map = snap.entries;
        if !map.is_sorted_by_key(|e| e.id) {
            map.sort_by_key(|e| e.id);
        }
        if let Some(w) = map.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(PersistError::Corrupt {
                file: name.clone(),
                offset: 0,
                reason: format!("entry id {} appears twice", w[0].id),
            });
        }
        next_id = snap.next_id;
        last = snap.seq;
        snapshot = Some(name.clone());
    }

    let mut batches_replayed = 0;
    let mut records = 0;
    let mut torn_tails = Vec::new();
    // Last batch of the previous log file read: files must not overlap.
    let mut replayed_through: Option<u64> = None;
    for (i, (first, name)) in files.logs.iter().enumerate() {
        // Skip files whose every batch the snapshot (or an earlier file) already holds.
        if files
            .logs
            .get(i + 1)
            .is_some_and(|(next, _)| *next <= last + 1)
        {
            continue;
        }
        let bytes = read(io, dir, name)?;
        let log = read_log(name, &bytes)?;
        if log.first_seq != *first {
            return Err(PersistError::Corrupt {
                file: name.clone(),
                offset: 12,
                reason: format!(
                    "starts at batch {} but is named for batch {first}",
                    log.first_seq
                ),
            });
        }
        if replayed_through.is_some_and(|r| log.first_seq <= r) {
            return Err(PersistError::Corrupt {
                file: name.clone(),
                offset: 12,
                reason: format!(
                    "starts at batch {} but the previous log file already holds batches up to {}",
                    log.first_seq,
                    replayed_through.unwrap_or(0)
                ),
            });
        }
        if log.first_seq > last + 1 {
            return Err(PersistError::Corrupt {
                file: name.clone(),
                offset: 12,
                reason: format!(
                    "starts at batch {} but the data before it ends at batch {last}: batches {}..{} are missing",
                    log.first_seq,
                    last + 1,
                    log.first_seq - 1
                ),
            });
        }
        let file_last = log.batches.last().map(|b| b.seq);
        for b in log.batches {
            if b.seq <= last {
                continue;
            }
            // read_log guarantees consecutive numbers within a file; with the check above the
            // first new batch is `last + 1`.
            for c in b.changes {
                records += 1;
                let schema = current.as_ref().unwrap_or(schema);
                match c {
                    Change::Schema(text) => {
                        let next = schema.replay_extension(&text, name).map_err(|e| {
                            PersistError::Schema {
                                file: name.clone(),
                                offset: b.offset,
                                message: format!(
                                    "schema extension of batch {} does not fit the configured schema: {}",
                                    b.seq, e.message
                                ),
                            }
                        })?;
                        current = Some(next);
                    }
                    Change::Put(se) => {
                        let e = se.to_entry(schema).map_err(|e| e.located(name, b.offset))?;
                        next_id = next_id.max(e.id.saturating_add(1));
                        deleted.remove(e.id);
                        match map.binary_search_by_key(&e.id, |s| s.id) {
                            Ok(i) => map[i] = e,
                            Err(i) => map.insert(i, e),
                        }
                    }
                    Change::Patch(p) => {
                        let at = map
                            .binary_search_by_key(&p.id, |s| s.id)
                            .ok()
                            .filter(|_| !deleted.contains(p.id));
                        let Some(i) = at else {
                            return Err(PersistError::Corrupt {
                                file: name.clone(),
                                offset: b.offset,
                                reason: format!(
                                    "batch {}: a patch of entry {}, which does not exist at this point of the log",
                                    b.seq, p.id
                                ),
                            });
                        };
                        map[i] = p.apply(&map[i], schema).map_err(|e| match e {
                            PatchError::Damaged(m) => PersistError::Corrupt {
                                file: name.clone(),
                                offset: b.offset,
                                reason: format!("batch {}: {m}", b.seq),
                            },
                            PatchError::Schema(m) => PersistError::Schema {
                                file: name.clone(),
                                offset: b.offset,
                                message: format!("batch {}: {m}", b.seq),
                            },
                        })?;
                    }
                    Change::Delete { id } => {
                        if map.binary_search_by_key(&id, |s| s.id).is_ok() {
                            deleted.insert(id);
                        }
                    }
                    Change::Tombstone(t) => {
                        tombstones.put(Arc::new(t));
                    }
                    Change::Forget(uuid) => {
                        tombstones.remove(&uuid);
                    }
                    Change::TombstoneFloor(floor) => tombstones.set_floor(floor),
                }
            }
            batches_replayed += 1;
            last = b.seq;
        }
        replayed_through = file_last.or(replayed_through);
        if let Some(t) = log.torn_tail {
            torn_tails.push((name.clone(), t.offset));
        }
    }

    let mut entries = map;
    if !deleted.is_empty() {
        entries.retain(|e| !deleted.contains(e.id));
    }
    let mut parents_first = true;
    // Entries come in runs under one parent: the last parent found is not looked up again.
    let mut found = None;
    for e in &entries {
        next_id = next_id.max(e.id.saturating_add(1));
        if let Some(p) = e.parent {
            parents_first &= p < e.id;
            if found == Some(p) {
                continue;
            }
            found = Some(p);
            if entries.binary_search_by_key(&p, |e| e.id).is_err() {
                return Err(PersistError::Corrupt {
                    file: dir.display().to_string(),
                    offset: 0,
                    reason: format!(
                        "after replaying up to batch {last}, entry {} '{}' names parent {p}, which does not exist",
                        e.id, e.dn()
                    ),
                });
            }
        }
    }
    // In id order, parents come first unless an entry was moved under a newer one.
    if !parents_first {
        entries.sort_by_key(|e| (e.depth(), e.id));
    }
    Ok(Recovered {
        entries,
        next_id,
        last_seq: last,
        snapshot,
        batches_replayed,
        log_records_replayed: records,
        torn_tails,
        schema: Arc::new(current.unwrap_or_else(|| schema.clone())),
        tombstones,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Snapshot,
    Log,
    /// A `.tmp` file: an unfinished snapshot or log header, ignored by recovery.
    Temporary,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileStatus {
    Ok,
    /// A torn last batch at this offset (normal after a crash; left out by recovery).
    TornTail {
        offset: u64,
        reason: String,
    },
    Corrupt(String),
    /// Not part of the data (temporary or unknown file).
    Ignored,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReport {
    pub name: String,
    pub kind: FileKind,
    pub status: FileStatus,
    /// Batch range (logs) or the batch a snapshot holds (both ends equal).
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub batches: u64,
    /// Change records (logs) or entries (snapshots).
    pub records: u64,
    /// The log records by kind (zero for snapshots).
    pub kinds: RecordKinds,
}

/// How many records of each kind a log file holds (`linden verify` shows them).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecordKinds {
    /// Entries written whole.
    pub puts: u64,
    /// Entries written as what their batch changed (log version 5).
    pub patches: u64,
    pub deletes: u64,
    /// Schema extensions and tombstone records.
    pub other: u64,
}

impl RecordKinds {
    fn count(&mut self, c: &Change) {
        match c {
            Change::Put(_) => self.puts += 1,
            Change::Patch(_) => self.patches += 1,
            Change::Delete { .. } => self.deletes += 1,
            _ => self.other += 1,
        }
    }
}

#[derive(Debug)]
pub struct VerifyReport {
    pub files: Vec<FileReport>,
    /// What a startup would do with this directory: entries and last batch, or why it stops.
    pub recovery: Result<(usize, u64), String>,
}

impl VerifyReport {
    /// Whether every file is intact (a torn tail counts as intact) and recovery succeeds.
    pub fn is_ok(&self) -> bool {
        self.recovery.is_ok()
            && self
                .files
                .iter()
                .all(|f| !matches!(f.status, FileStatus::Corrupt(_)))
    }
}

/// Checks every file of `dir`, not just those recovery needs, and then recovery as a whole.
pub fn verify(io: &dyn Io, dir: &Path, schema: &Schema) -> Result<VerifyReport, PersistError> {
    let files = list_files(io, dir)?;
    let mut out = Vec::new();
    for (seq, name) in &files.snapshots {
        let file = open(io, dir, name)?;
        let mut r = FileReport {
            name: name.clone(),
            kind: FileKind::Snapshot,
            status: FileStatus::Ok,
            first_seq: Some(*seq),
            last_seq: Some(*seq),
            batches: 0,
            records: 0,
            kinds: RecordKinds::default(),
        };
        match read_snapshot_from(name, &*file, schema) {
            Ok(s) if s.seq != *seq => {
                r.status = FileStatus::Corrupt(format!(
                    "holds batch {} but is named for batch {seq}",
                    s.seq
                ));
            }
            Ok(s) => r.records = s.entries.len() as u64,
            Err(e) => r.status = FileStatus::Corrupt(e.to_string()),
        }
        out.push(r);
    }
    for (seq, name) in &files.logs {
        let bytes = read(io, dir, name)?;
        let mut r = FileReport {
            name: name.clone(),
            kind: FileKind::Log,
            status: FileStatus::Ok,
            first_seq: Some(*seq),
            last_seq: None,
            batches: 0,
            records: 0,
            kinds: RecordKinds::default(),
        };
        match read_log(name, &bytes) {
            Ok(l) => {
                r.batches = l.batches.len() as u64;
                r.records = l.batches.iter().map(|b| b.changes.len() as u64).sum();
                for c in l.batches.iter().flat_map(|b| &b.changes) {
                    r.kinds.count(c);
                }
                r.last_seq = l.batches.last().map(|b| b.seq);
                if l.first_seq != *seq {
                    r.status = FileStatus::Corrupt(format!(
                        "starts at batch {} but is named for batch {seq}",
                        l.first_seq
                    ));
                } else if let Some(t) = l.torn_tail {
                    r.status = FileStatus::TornTail {
                        offset: t.offset,
                        reason: t.reason,
                    };
                }
            }
            Err(e) => r.status = FileStatus::Corrupt(e.to_string()),
        }
        out.push(r);
    }
    for name in &files.other {
        let kind = if name.ends_with(".tmp") {
            FileKind::Temporary
        } else {
            FileKind::Other
        };
        out.push(FileReport {
            name: name.clone(),
            kind,
            status: FileStatus::Ignored,
            first_seq: None,
            last_seq: None,
            batches: 0,
            records: 0,
            kinds: RecordKinds::default(),
        });
    }
    let recovery = recover(io, dir, schema)
        .map(|r| (r.entries.len(), r.last_seq))
        .map_err(|e| e.to_string());
    Ok(VerifyReport {
        files: out,
        recovery,
    })
}

/// After the snapshot of batch `snapshot_seq` is durable: removes the log files it covers
/// entirely and older snapshots, then syncs the directory. Returns the names removed. The log
/// file being appended to is never covered (no later file starts), see `LogWriter::rotate`.
pub fn prune(io: &dyn Io, dir: &Path, snapshot_seq: u64) -> Result<Vec<String>, PersistError> {
    prune_keeping(io, dir, snapshot_seq, &|_| false)
}

/// `prune`, but the files for which `keep` says true stay (files not archived yet, when an
/// archive is configured: a later prune removes them once they are).
pub fn prune_keeping(
    io: &dyn Io,
    dir: &Path,
    snapshot_seq: u64,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<String>, PersistError> {
    let files = list_files(io, dir)?;
    let have = files.snapshots.iter().any(|(s, _)| *s == snapshot_seq);
    if !have {
        return Err(PersistError::Usage(format!(
            "no snapshot of batch {snapshot_seq} in {}; nothing removed",
            dir.display()
        )));
    }
    let mut gone = Vec::new();
    for (s, name) in &files.snapshots {
        if *s < snapshot_seq {
            gone.push(name.clone());
        }
    }
    for (i, (_, name)) in files.logs.iter().enumerate() {
        if files
            .logs
            .get(i + 1)
            .is_some_and(|(next, _)| *next <= snapshot_seq + 1)
        {
            gone.push(name.clone());
        }
    }
    gone.retain(|n| !keep(n));
    for name in &gone {
        let p = dir.join(name);
        io.remove(&p).map_err(|e| PersistError::io(p, e))?;
    }
    if !gone.is_empty() {
        io.sync_dir(dir).map_err(|e| PersistError::io(dir, e))?;
    }
    Ok(gone)
}
