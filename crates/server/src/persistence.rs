//! Durability glue between the server and the store's `persist` layer: recovery at start, the
//! transaction-log journal behind the writer, and snapshots (on demand, by time, by log volume,
//! and at clean shutdown), written from one consistent version while the server keeps serving.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schema::Schema;
use store::persist::{self, FsIo, Io, LogJournal, LogOptions, LogWriter};
use store::{Store, Version};

use crate::config::{Config, Durability};
use crate::StartError;

pub(crate) struct Persistence {
    pub dir: PathBuf,
    io: Arc<dyn Io>,
    /// Held while a snapshot is written: one at a time.
    busy: Mutex<()>,
    /// When the last snapshot was taken, and the log bytes on disk right after it.
    last: Mutex<(Instant, u64)>,
    /// What the snapshots written since start did, for monitoring.
    pub stats: Mutex<SnapshotStats>,
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

/// Recovers the directory in `config.data_dir` and opens the store on it.
pub(crate) fn open(
    config: &Config,
    schema: &Arc<Schema>,
    indexes: &dyn Fn(&Schema) -> Result<store::Indexes, StartError>,
) -> Result<(Store, Persistence), StartError> {
    let t = Instant::now();
    let dir = config.data_dir.clone();
    let io: Arc<dyn Io> = Arc::new(FsIo);
    let storage = |e: persist::PersistError| StartError::Storage(e.to_string());
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
    let store = Store::with_journal(version, Box::new(LogJournal::new(log)));
    // Log volume counts from zero at start: the logs on disk are all newer than the newest
    // snapshot's covered part (a snapshot prunes the rest), so a server that restarts often
    // still snapshots once they add up.
    let p = Persistence {
        last: Mutex::new((Instant::now(), 0)),
        dir,
        io,
        busy: Mutex::new(()),
        stats: Mutex::new(SnapshotStats::default()),
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
    /// `cpu_share` (percent, 1–100) paces the writer while the server is serving: after each
    /// `PACE_ENTRIES` entries it sleeps so that it uses about that share of one core, leaving
    /// the rest to clients (on a 2-core machine an unpaced snapshot takes a whole core from
    /// them for its duration). 100 writes as fast as it can (shutdown).
    pub fn snapshot(
        &self,
        store: &Store,
        cpu_share: u32,
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
        let written = persist::write_snapshot(
            &*self.io,
            &self.dir,
            v.seq,
            v.next_id(),
            Paced::new(v.iter().map(|e| &**e), cpu_share),
            v.schema(),
            v.tombstones(),
        )
        .map_err(|e| e.to_string());
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        let info = match written {
            Ok(info) => {
                stats.taken += 1;
                stats.last = Some(LastSnapshot {
                    at: std::time::SystemTime::now(),
                    seconds: t.elapsed().as_secs_f64(),
                    bytes: info.bytes,
                    entries: info.entries,
                });
                info
            }
            Err(e) => {
                stats.failed += 1;
                return Err(e);
            }
        };
        drop(stats);
        let removed = persist::prune(&*self.io, &self.dir, v.seq).map_err(|e| e.to_string())?;
        if let Ok(mut last) = self.last.lock() {
            *last = (Instant::now(), log_bytes(&self.dir));
        }
        Ok(Some(SnapshotReport {
            file: info.name,
            entries: info.entries,
            bytes: info.bytes,
            seconds: t.elapsed().as_secs_f64(),
            removed,
        }))
    }

    /// Whether the interval or the log volume since the last snapshot calls for a new one.
    pub fn due(&self, config: &Config) -> bool {
        let Ok(last) = self.last.lock() else {
            return false;
        };
        let by_time = config.snapshot_interval > 0
            && last.0.elapsed() >= Duration::from_secs(config.snapshot_interval);
        let by_volume = config.snapshot_log_bytes > 0
            && log_bytes(&self.dir).saturating_sub(last.1) >= config.snapshot_log_bytes;
        by_time || by_volume
    }
}
