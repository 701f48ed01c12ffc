//! Durability glue between the server and the store's `persist` layer: the data directory's
//! lock and free space at start, recovery, the transaction-log journal behind the writer, and
//! snapshots (on demand, by time, by log volume, and at clean shutdown), written from one
//! consistent version while the server keeps serving, leaving the log its reserve of space.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schema::Schema;
use store::persist::{self, DirLock, FsIo, Io, LogJournal, LogOptions, LogWriter, PersistError};
use store::{Store, Version};

use crate::config::{Config, Durability};
use crate::StartError;

/// The exclusive lock on a data directory, taken before anything in it is read or written
/// (`lock_data_dir`) and held by the server for its life.
#[derive(Debug)]
pub struct DataLock(DirLock);

/// After a snapshot failed, the periodic ones wait this long before trying again (one log
/// line a minute rather than one per tick while the disk stays full).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(60);

pub(crate) struct Persistence {
    pub dir: PathBuf,
    io: Arc<dyn Io>,
    /// The directory is this process's while it is held.
    _lock: DirLock,
    /// Bytes snapshots leave free for the log (`log_reserve_bytes`).
    log_reserve: u64,
    /// Held while a snapshot is written: one at a time.
    busy: Mutex<()>,
    /// When the last snapshot was taken, and the log bytes on disk right after it.
    last: Mutex<(Instant, u64)>,
    /// When the last snapshot failed, if one did since.
    failed_at: Mutex<Option<Instant>>,
    /// What the snapshots written since start did, for monitoring.
    pub stats: Mutex<SnapshotStats>,
    /// Copies snapshots and sealed log files to the archive (`archive`), if one is set.
    pub archiver: Option<crate::archive::Archiver>,
}

/// Why a snapshot is written, as its log lines say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SnapshotCause {
    /// By time or by log volume (`snapshot_interval`, `snapshot_log_bytes`).
    Periodic,
    /// The administrator asked (`linden snapshot`, the snapshot extended operation).
    Requested,
    /// Clean shutdown.
    Shutdown,
}

impl std::fmt::Display for SnapshotCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SnapshotCause::Periodic => "periodic snapshot",
            SnapshotCause::Requested => "requested snapshot",
            SnapshotCause::Shutdown => "snapshot at shutdown",
        })
    }
}

/// A byte count as people read it: `67108864 bytes (64.0 MiB)`.
pub(crate) fn size(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut unit = None;
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = Some(u);
    }
    match unit {
        Some(u) => format!("{n} bytes ({v:.1} {u})"),
        None => format!("{n} bytes"),
    }
}

/// Takes the data directory of `config` for this process (created if missing, and nothing
/// else in it yet) and checks that its file system has `min_free_bytes` free: before anything
/// else in the directory is read or written. A second server, or an import, on the same
/// directory stops here with the PID of the one that has it.
pub fn lock_data_dir(config: &Config) -> Result<DataLock, StartError> {
    let dir = &config.data_dir;
    let lock = DirLock::exclusive(dir).map_err(|e| StartError::Storage(e.to_string()))?;
    if config.min_free_bytes > 0 {
        match FsIo.free_space(dir) {
            Ok(free) if free < config.min_free_bytes => {
                return Err(StartError::Storage(format!(
                    "{}: only {} free on its file system, and a start needs {} (min_free_bytes): free some space, or lower min_free_bytes, and start again",
                    dir.display(),
                    size(free),
                    size(config.min_free_bytes)
                )))
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(
                "{}: cannot tell the free space of its file system ({e}); min_free_bytes is not checked",
                dir.display()
            ),
        }
    }
    Ok(DataLock(lock))
}

/// Snapshots written since start (cn=Snapshots,cn=Monitor).
#[derive(Debug, Clone, Default)]
pub struct SnapshotStats {
    pub taken: u64,
    pub failed: u64,
    /// The last one written: when it ended, how long it took, its size and entries.
    pub last: Option<LastSnapshot>,
}

#[derive(Debug, Clone)]
pub struct LastSnapshot {
    pub at: std::time::SystemTime,
    pub seconds: f64,
    pub bytes: u64,
    pub entries: u64,
}

/// What one snapshot did, for the log line.
pub struct SnapshotReport {
    pub file: String,
    pub entries: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub removed: Vec<String>,
}

/// Recovers the directory in `config.data_dir`, which `lock` holds, and opens the store on it.
pub(crate) fn open(
    config: &Config,
    lock: DataLock,
    schema: &Arc<Schema>,
    indexes: &dyn Fn(&Schema) -> Result<store::Indexes, StartError>,
) -> Result<(Store, Persistence), StartError> {
    let t = Instant::now();
    let dir = config.data_dir.clone();
    if lock.0.dir() != dir {
        return Err(StartError::Storage(format!(
            "{}: the lock given holds {} instead",
            dir.display(),
            lock.0.dir().display()
        )));
    }
    let io: Arc<dyn Io> = Arc::new(FsIo);
    let storage = |e: persist::PersistError| StartError::Storage(e.to_string());
    for stale in persist::remove_stale_tmp(&*io, &dir).map_err(storage)? {
        tracing::info!(
            "removed {} ({}): a snapshot or log file a process stopped writing (killed or crashed) and never renamed into place; this server holds the directory's lock, so no process was writing it",
            dir.join(&stale.name).display(),
            size(stale.bytes)
        );
    }
    let rec = persist::recover(&*io, &dir, schema).map_err(storage)?;
    for (file, offset) in &rec.torn_tails {
        tracing::warn!(
            "{}: ignored an incomplete last batch at byte {offset} (a crash cut it before it was acknowledged)",
            dir.join(file).display()
        );
    }
    let opts = LogOptions {
        sync: config.durability == Durability::Sync,
        ..LogOptions::default()
    };
    let log = LogWriter::open_after_recovery(io.clone(), &dir, &rec, opts).map_err(storage)?;
    let entries = rec.entries.len();
    let replayed = rec.log_records_replayed;
    let read_secs = t.elapsed().as_secs_f64();
    let indexed = indexes(&rec.schema)?;
    let version = Version::restore(
        rec.schema.clone(),
        &indexed,
        rec.entries,
        rec.next_id,
        rec.last_seq,
    )
    .with_tombstones(rec.tombstones);
    tracing::info!(
        "loaded {entries} entries from {} (snapshot {}, {replayed} log records replayed) in {:.2} s ({read_secs:.2} s reading files, {:.2} s building indexes)",
        dir.display(),
        rec.snapshot.as_deref().unwrap_or("none"),
        t.elapsed().as_secs_f64(),
        t.elapsed().as_secs_f64() - read_secs,
    );
    if config.durability == Durability::NoSync {
        tracing::warn!(
            "durability = \"nosync\": writes are acknowledged before they reach the disk and can be lost in a crash (for benchmarks only)"
        );
    }
    let journal = LogJournal::new(log);
    let archiver = if config.archive.is_empty() {
        None
    } else {
        Some(
            crate::archive::Archiver::start(config, &dir, journal.seal_handle())
                .map_err(StartError::Config)?,
        )
    };
    let store = Store::with_journal(version, Box::new(journal));
    // Log volume counts from zero at start: the logs on disk are all newer than the newest
    // snapshot's covered part (a snapshot prunes the rest), so a server that restarts often
    // still snapshots once they add up.
    let p = Persistence {
        last: Mutex::new((Instant::now(), 0)),
        dir,
        io,
        _lock: lock.0,
        log_reserve: config.log_reserve_bytes,
        busy: Mutex::new(()),
        failed_at: Mutex::new(None),
        stats: Mutex::new(SnapshotStats::default()),
        archiver,
    };
    Ok((store, p))
}

/// Total size of the transaction log files in `dir`.
fn log_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .filter(|e| persist::log::parse_log_name(&e.file_name().to_string_lossy()).is_some())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Entries written between two pacing pauses.
const PACE_ENTRIES: usize = 4096;

/// An iterator that sleeps between batches so that the loop consuming it (encoding and
/// writing the snapshot) uses about `share` percent of a core.
struct Paced<I> {
    inner: I,
    share: u32,
    n: usize,
    since: Instant,
}

impl<I> Paced<I> {
    fn new(inner: I, share: u32) -> Self {
        Paced {
            inner,
            share: share.clamp(1, 100),
            n: 0,
            since: Instant::now(),
        }
    }
}

impl<I: Iterator> Iterator for Paced<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        self.n += 1;
        if self.share < 100 && self.n.is_multiple_of(PACE_ENTRIES) {
            let worked = self.since.elapsed();
            // work / (work + pause) = share
            let pause = worked.mul_f64(f64::from(100 - self.share) / f64::from(self.share));
            std::thread::sleep(pause.min(std::time::Duration::from_secs(1)));
            self.since = Instant::now();
        }
        self.inner.next()
    }
}

impl Persistence {
    /// Writes a snapshot of the newest version and removes the files it makes unnecessary.
    /// `Ok(None)` when another snapshot is being written or this version is already on disk.
    ///
    /// It leaves `log_reserve_bytes` free for the transaction log: it is not started when its
    /// estimated size would leave less, and it stops (removing its file) when the disk fills
    /// faster than estimated. Every failure is logged here, with `cause`, and counted.
    ///
    /// `cpu_share` (percent, 1–100) paces the writer while the server is serving: after each
    /// `PACE_ENTRIES` entries it sleeps so that it uses about that share of one core, leaving
    /// the rest to clients (on a 2-core machine an unpaced snapshot takes a whole core from
    /// them for its duration). 100 writes as fast as it can (shutdown).
    pub fn snapshot(
        &self,
        store: &Store,
        cpu_share: u32,
        cause: SnapshotCause,
    ) -> Result<Option<SnapshotReport>, String> {
        let Ok(_guard) = self.busy.try_lock() else {
            return Ok(None);
        };
        let t = Instant::now();
        let v = store.read();
        let name = persist::snapshot::snapshot_file_name(v.seq);
        if self.dir.join(&name).exists() {
            return Ok(None);
        }
        let r = self.write(&v, cpu_share, cause, t);
        if let Err(e) = &r {
            self.stats.lock().unwrap_or_else(|p| p.into_inner()).failed += 1;
            if let Ok(mut at) = self.failed_at.lock() {
                *at = Some(Instant::now());
            }
            match e {
                Failure::Space(m) => tracing::warn!("{m}"),
                Failure::Other(m) => tracing::error!("{m}"),
            }
        }
        r.map(Some).map_err(Failure::into_message)
    }

    /// `snapshot` once the version is known to need one.
    fn write(
        &self,
        v: &Version,
        cpu_share: u32,
        cause: SnapshotCause,
        t: Instant,
    ) -> Result<SnapshotReport, Failure> {
        let dir = self.dir.display();
        let nothing_lost = match cause {
            SnapshotCause::Shutdown => {
                "nothing is lost: the next start replays the transaction log"
            }
            _ => "writes go on, and the transaction log holds every change",
        };
        if let Ok(free) = self.io.free_space(&self.dir) {
            let needed =
                persist::estimate_snapshot_bytes(v.iter().map(|e| &**e), v.len(), v.schema());
            if free < needed.saturating_add(self.log_reserve) {
                return Err(Failure::Space(format!(
                    "{cause} skipped: it needs about {} and {dir} has {} free, {} of which stay free for the transaction log (log_reserve_bytes); {nothing_lost}",
                    size(needed),
                    size(free),
                    size(self.log_reserve)
                )));
            }
        }
        let written = persist::write_snapshot_keeping(
            &*self.io,
            &self.dir,
            v.seq,
            v.next_id(),
            Paced::new(v.iter().map(|e| &**e), cpu_share),
            v.schema(),
            v.tombstones(),
            persist::snapshot::DEFAULT_CHUNK_ENTRIES,
            self.log_reserve,
        );
        let info = match written {
            Ok(info) => info,
            Err(e @ (PersistError::NoSpace { .. } | PersistError::KeptFree { .. })) => {
                return Err(Failure::Space(format!(
                    "{cause} stopped: {e}; {nothing_lost}"
                )))
            }
            Err(e) => {
                return Err(Failure::Other(format!(
                    "{cause} failed: {e}; {nothing_lost}"
                )))
            }
        };
        {
            let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
            stats.taken += 1;
            stats.last = Some(LastSnapshot {
                at: std::time::SystemTime::now(),
                seconds: t.elapsed().as_secs_f64(),
                bytes: info.bytes,
                entries: info.entries,
            });
        }
        // Files the archive does not hold yet stay until it does (a later snapshot prunes
        // them).
        let keep = |name: &str| self.archiver.as_ref().is_some_and(|a| a.keeps(name));
        if let Some(a) = &self.archiver {
            a.nudge();
        }
        let removed = persist::prune_keeping(&*self.io, &self.dir, v.seq, &keep).map_err(|e| {
            Failure::Other(format!(
                "{cause}: {} written, but removing the files it covers failed: {e}",
                info.name
            ))
        })?;
        if let Ok(mut last) = self.last.lock() {
            *last = (Instant::now(), log_bytes(&self.dir));
        }
        Ok(SnapshotReport {
            file: info.name,
            entries: info.entries,
            bytes: info.bytes,
            seconds: t.elapsed().as_secs_f64(),
            removed,
        })
    }

    /// Whether the interval or the log volume since the last snapshot calls for a new one
    /// (not within `RETRY_AFTER_FAILURE` of a failed one).
    pub fn due(&self, config: &Config) -> bool {
        let recently_failed = self
            .failed_at
            .lock()
            .ok()
            .and_then(|at| *at)
            .is_some_and(|at| at.elapsed() < RETRY_AFTER_FAILURE);
        if recently_failed {
            return false;
        }
        let Ok(last) = self.last.lock() else {
            return false;
        };
        let by_time = config.snapshot_interval > 0
            && last.0.elapsed() >= Duration::from_secs(config.snapshot_interval);
        let by_volume = config.snapshot_log_bytes > 0
            && log_bytes(&self.dir).saturating_sub(last.1) >= config.snapshot_log_bytes;
        by_time || by_volume
    }

    /// Bytes free on the data directory's file system now; `None` where it cannot be told.
    pub fn free_space(&self) -> Option<u64> {
        self.io.free_space(&self.dir).ok()
    }

    /// Bytes snapshots leave free for the transaction log (`log_reserve_bytes`).
    pub fn log_reserve(&self) -> u64 {
        self.log_reserve
    }
}

/// Why a snapshot was not written, as logged and answered.
enum Failure {
    /// The disk has no room for it beside the log's reserve.
    Space(String),
    Other(String),
}

impl Failure {
    fn into_message(self) -> String {
        match self {
            Failure::Space(m) | Failure::Other(m) => m,
        }
    }
}
