//! Durability: the transaction log, snapshots and recovery (design.md, "In memory, durable on
//! disk"; formats byte by byte in `docs/storage-format.md`).
//!
//! - `dir`: the data directory's lock (one process at a time) and the removal of the
//!   temporary files a dead process left.
//! - `io`: the `Io` trait every disk access goes through; `FsIo` (real files) and `SimIo`
//!   (in memory, with power cuts and injected failures, for tests).
//! - `codec`: schema-independent change records (`Change`, `StoredEntry`) and their encoding.
//! - `patch`: the Patch record (log version 5): what a batch changed of an entry, not the
//!   whole entry; made from the entry's two states, applied on replay.
//! - `log`: `log-<first seq>.lnl` files of checksummed, self-delimiting batches; `LogWriter`
//!   appends one batch with one write and one fsync, and refuses everything after a failure.
//! - `snapshot`: `snap-<seq>.lns` files of checksummed chunks that decode in parallel.
//! - `recover`: newest snapshot plus the log batches after it gives the state at startup;
//!   `verify` checks every file for `linden verify`.
//!
//! Nothing here deletes or rewrites a file that recovery would need: a torn last batch is
//! reported and left in place, and the writer continues in a new log file.

pub mod archive;
pub mod codec;
pub mod dir;
pub mod io;
pub mod log;
pub mod patch;
pub mod recover;
pub mod snapshot;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use codec::{Change, StoredAttr, StoredEntry};
pub use dir::{remove_stale_tmp, DirLock, StaleTmp, LOCK_FILE};
pub use io::{is_no_space, FsIo, Io, IoFile, IoRead, Keep, MemRead, SimIo};
pub use log::{read_log, read_log_last, Batch, LogContents, LogOptions, LogWriter, TornTail};
pub use patch::{PatchAttr, PatchError, StoredPatch};
pub use recover::{
    prune, prune_keeping, recover, verify, FileKind, FileReport, FileStatus, RecordKinds,
    Recovered, VerifyReport,
};
pub use snapshot::{
    estimate_snapshot_bytes, read_snapshot, read_snapshot_from, write_snapshot,
    write_snapshot_bulk, write_snapshot_chunked, write_snapshot_keeping, write_snapshot_with,
    Snapshot, SnapshotInfo,
};

/// Why persistence failed. Every variant names the file (and, for contents, the byte offset)
/// so a person can find and judge the damage.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: corrupt at byte {offset}: {reason}; nothing was changed on disk — inspect or restore this file before starting again")]
    Corrupt {
        file: String,
        offset: u64,
        reason: String,
    },
    /// The file system holding `dir` has no room (ENOSPC, or EDQUOT) for what was being
    /// written to `path`. What was written of it was taken back (or never started), so nothing
    /// of it will be read back and nothing acknowledged is affected: the same operation may
    /// succeed once space is freed.
    #[error("the disk of {} is full ({}: {source})", dir.display(), path.display())]
    NoSpace {
        dir: PathBuf,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Another process holds the data directory (`dir::DirLock`).
    #[error("{}: the data directory is in use by {} (it holds the lock {}): stop that process first, or give this one another data directory", dir.display(), holder(*pid), lock.display())]
    Locked {
        dir: PathBuf,
        lock: PathBuf,
        pid: Option<u32>,
    },
    /// A snapshot stopped before the rest of it would have eaten into the space kept free
    /// for the transaction log (`keep` bytes); its temporary file `path` was removed.
    #[error("{}: snapshot stopped after {written} bytes: the disk of {} has {free} bytes free and {keep} of them are kept for the transaction log; its temporary file was removed", path.display(), dir.display())]
    KeptFree {
        dir: PathBuf,
        path: PathBuf,
        written: u64,
        free: u64,
        keep: u64,
    },
    /// An earlier write or fsync failed; the log accepts nothing more (a failed fsync cannot be
    /// retried: the kernel may have dropped the dirty pages).
    #[error("the transaction log refuses writes after an earlier failure: {0}")]
    Poisoned(String),
    /// A record that is well-formed but does not fit the schema in force.
    #[error("{file}: record at byte {offset}: {message}")]
    Schema {
        file: String,
        offset: u64,
        message: String,
    },
    /// A caller broke the log's contract (e.g. a batch number out of sequence); nothing was written.
    #[error("{0}")]
    Usage(String),
}

/// Who holds a lock, as `PersistError::Locked` says it.
fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(p) if p == std::process::id() => format!("this very process (PID {p})"),
        Some(p) => format!("another process, PID {p}"),
        None => "another process (its PID is not in the lock file)".to_string(),
    }
}

impl PersistError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> PersistError {
        PersistError::Io {
            path: path.into(),
            source,
        }
    }

    /// Fills in where a schema error from `StoredEntry::to_entry` came from.
    pub(crate) fn located(self, file: &str, at: u64) -> PersistError {
        match self {
            PersistError::Schema { message, .. } => PersistError::Schema {
                file: file.to_string(),
                offset: at,
                message,
            },
            other => other,
        }
    }
}

/// Width of the zero-padded sequence number in file names, so names sort in sequence order.
pub(crate) const SEQ_DIGITS: usize = 20;

pub(crate) fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Parses `<prefix><20 digits><suffix>`.
pub(crate) fn parse_seq_name(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.len() != SEQ_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The changes of one writer batch as owned records (what `LogWriter::append_version_batch`
/// encodes without them, and the reference its test compares with): first the schema
/// extensions the batch applied (`schema`, in order), then the entries: `touched` lists every
/// entry the batch changed; those present in `version` (the batch's result) are written as a
/// Patch against their state in `prev` (the version the batch started from) when they were
/// there with the same DN and parent and the Patch is smaller, else whole (Put), named with
/// `version`'s schema; the others are deleted; then the tombstones the batch put or forgot
/// and, if it changed, their floor. Pass each id once (sorted and deduplicated, as the writer
/// does).
pub fn batch_changes(
    prev: &crate::Version,
    version: &crate::Version,
    schema: &[String],
    touched: &[crate::EntryId],
    tombstones: &crate::TombstoneChanges,
) -> Vec<Change> {
    let names = version.schema();
    let ts = version.tombstones();
    schema
        .iter()
        .map(|text| Change::Schema(text.clone()))
        .chain(touched.iter().map(|&id| match version.get(id) {
            Some(e) => patch::entry_change(prev.get(id).map(|o| &**o), e, names),
            None => Change::Delete { id },
        }))
        .chain(tombstones.touched.iter().map(|u| match ts.get(u) {
            Some(t) => Change::Tombstone((**t).clone()),
            None => Change::Forget(u.to_string()),
        }))
        .chain(
            tombstones.floor.then(|| {
                Change::TombstoneFloor(ts.floor().iter().map(|c| c.to_string()).collect())
            }),
        )
        .collect()
}

/// The writer's journal backed by the transaction log: each batch is appended with one write
/// and (with `LogOptions::sync`) one fsync before the writer publishes it.
///
/// The log writer is shared with a `LogSeal` (under a mutex that only the archiver's sealing,
/// at most once per `archive_interval`, takes besides the writer thread) so that a file can be
/// sealed while no write comes.
pub struct LogJournal {
    log: Arc<Mutex<LogWriter>>,
}

impl LogJournal {
    pub fn new(log: LogWriter) -> LogJournal {
        LogJournal {
            log: Arc::new(Mutex::new(log)),
        }
    }

    /// A handle that seals the log file being written (for the archiver).
    pub fn seal_handle(&self) -> LogSeal {
        LogSeal {
            log: self.log.clone(),
        }
    }
}

/// Seals the transaction log file being written, so that it can be archived.
#[derive(Clone)]
pub struct LogSeal {
    log: Arc<Mutex<LogWriter>>,
}

impl LogSeal {
    /// Starts a new log file if the current one holds a batch written `interval` ago or
    /// earlier. `Ok(true)` when a file was sealed.
    pub fn seal_if_due(&self, interval: std::time::Duration) -> Result<bool, PersistError> {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if !log.seal_due(interval) {
            return Ok(false);
        }
        log.rotate()?;
        Ok(true)
    }
}

impl crate::writer::Journal for LogJournal {
    fn commit(
        &mut self,
        seq: u64,
        time: std::time::SystemTime,
        prev: &crate::Version,
        version: &crate::Version,
        schema: &[String],
        touched: &[crate::EntryId],
        tombstones: &crate::TombstoneChanges,
    ) -> Result<(), crate::JournalError> {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .append_version_batch(seq, time, prev, version, schema, touched, tombstones)
            .map_err(|e| match e {
                PersistError::NoSpace { .. } => crate::JournalError::Full(format!(
                    "{e}; writes resume by themselves once space is freed"
                )),
                other => crate::JournalError::Failed(other.to_string()),
            })
    }
}
