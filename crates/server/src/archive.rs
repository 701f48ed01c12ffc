//! The archiver: a background thread that copies every snapshot and every sealed
//! transaction-log file of the data directory to the archive (`archive`), reads each back to
//! check it, and applies retention there (docs/backup-and-restore.md).
//!
//! It never holds up a write: it reads sealed files only (the writer never appends to them
//! again), and it seals the file being written, once it holds a batch `archive_interval`
//! old, by starting the next one (`store::persist::LogSeal`, a file creation every interval
//! at most). Files not archived yet are kept in the data directory by the snapshots' pruning
//! (`Archiver::keeps`) until they are. A failure is logged with what to do, counted, and
//! retried with a growing pause; the server goes on.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use store::persist::archive::{self, ArchiveError, ArchiveTarget};
use store::persist::log::{parse_log_name, read_log_last, LOG_HEADER_LEN, LOG_VERSION_TIMED};
use store::persist::snapshot::parse_snapshot_name;
use store::persist::LogSeal;

pub mod s3;

/// How often the archiver looks for files to copy and logs to seal.
const TICK: Duration = Duration::from_secs(1);
/// The first pause after a failure; each further failure doubles it, up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// What the archiver has done, for cn=Archive,cn=Monitor, /metrics and /readyz.
#[derive(Debug, Clone, Default)]
pub struct ArchiveStatus {
    /// The archive, as its URL says.
    pub url: String,
    /// The newest batch the archive holds (in a log file or a snapshot).
    pub last_batch: u64,
    /// The newest CSN of the last batch of each archived log file (the newest of all).
    pub last_csn: Option<String>,
    /// Files archived (and checked) since start, and their bytes.
    pub files: u64,
    pub bytes: u64,
    /// Files removed from the archive by retention since start.
    pub removed: u64,
    /// Failed attempts since start, and the last failure's message.
    pub failures: u64,
    pub last_error: Option<String>,
    /// When the last file was archived.
    pub last_success: Option<SystemTime>,
    /// When the oldest batch not yet archived was written (`None`: none waits).
    pub oldest_pending: Option<SystemTime>,
}

impl ArchiveStatus {
    /// Seconds the archive is behind the newest write: the age of the oldest batch not yet
    /// archived (0 when none waits).
    pub fn lag_seconds(&self, now: SystemTime) -> f64 {
        self.oldest_pending.map_or(0.0, |t| {
            now.duration_since(t).unwrap_or_default().as_secs_f64()
        })
    }
}

struct Inner {
    dir: PathBuf,
    target: Box<dyn ArchiveTarget>,
    seal: LogSeal,
    interval: Duration,
    keep_snapshots: u64,
    keep_age: Option<Duration>,
    /// Names the archive holds (as listed at start, then as copied).
    archived: Mutex<Option<HashSet<String>>>,
    status: Mutex<ArchiveStatus>,
    stop: AtomicBool,
    wake: (Mutex<bool>, Condvar),
    /// Set by `finish` (clean stop): rounds follow each other without the failure backoff.
    finishing: AtomicBool,
    /// What the last round left: for `finish` to wait on.
    rounds: (Mutex<Round>, Condvar),
}

/// The outcome of the archiver's rounds so far.
#[derive(Default)]
struct Round {
    /// Rounds done (each ends with `pending` counted afresh).
    done: u64,
    /// Local files (sealed logs, snapshots) the archive does not hold after the last round.
    pending: Vec<String>,
    /// The last round's failure, if it failed.
    error: Option<String>,
}

/// What the archiving at a clean stop did (`Archiver::finish`).
#[derive(Debug, Clone)]
pub enum Finished {
    /// The archive holds every batch written: up to this batch.
    Complete { last_batch: u64, seconds: f64 },
    /// The time ran out: these files are not archived yet (they stay in the data directory,
    /// and the next start archives them); the last failure, if one.
    Incomplete {
        pending: Vec<String>,
        error: Option<String>,
    },
}

/// The running archiver. Dropping it stops the thread (at its next tick).
pub struct Archiver {
    inner: Arc<Inner>,
}

impl Drop for Archiver {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        self.inner.wake.1.notify_all();
    }
}

/// Archive settings that cannot be used: the key to change, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct SettingsError {
    pub key: &'static str,
    pub message: String,
}

/// Checks the archive settings of `config` (`archive` and, for `s3://`, the `archive_s3_*`
/// keys and AWS_* variables) without connecting anywhere: what `linden check-config` and
/// every start report, naming the key.
pub fn check_settings(config: &crate::Config) -> Result<(), SettingsError> {
    check_with_env(config, &|k| std::env::var(k).ok())
}

fn check_with_env(
    config: &crate::Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), SettingsError> {
    let url = config.archive.as_str();
    if url.starts_with("file://") {
        archive::open_file_url(url).map_err(|e| SettingsError {
            key: "archive",
            message: e.to_string(),
        })?;
        Ok(())
    } else if url.starts_with("s3://") {
        s3::S3Settings::from_config(config, env).map(|_| ())
    } else {
        Err(SettingsError {
            key: "archive",
            message: format!(
                "'{url}' is not an archive URL this Linden knows: use file:///path or s3://bucket/prefix"
            ),
        })
    }
}

/// Opens the archive `config` names (`archive`, and for `s3://` the `archive_s3_*` keys and
/// AWS_* variables): the one way the server and the `linden archive`/`restore` commands
/// build a target from settings.
pub fn open_target(config: &crate::Config) -> Result<Box<dyn ArchiveTarget>, SettingsError> {
    check_settings(config)?;
    let url = config.archive.as_str();
    if url.starts_with("s3://") {
        let settings = s3::S3Settings::from_config(config, &|k| std::env::var(k).ok())?;
        tracing::debug!(
            "archive {}: credentials from {}",
            settings.describe(),
            settings.credentials_from
        );
        return Ok(Box::new(s3::S3Target::new(&settings)?));
    }
    archive::open_file_url(url)
        .map(|t| Box::new(t) as Box<dyn ArchiveTarget>)
        .map_err(|e| SettingsError {
            key: "archive",
            message: e.to_string(),
        })
}

impl Archiver {
    /// Starts archiving `dir` to `config.archive`. The message of a failure names the key
    /// (or says the thread could not start).
    pub fn start(config: &crate::Config, dir: &Path, seal: LogSeal) -> Result<Archiver, String> {
        let target = open_target(config).map_err(|e| e.to_string())?;
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            status: Mutex::new(ArchiveStatus {
                url: target.describe(),
                ..ArchiveStatus::default()
            }),
            target,
            seal,
            interval: Duration::from_secs(config.archive_interval.max(1)),
            keep_snapshots: config.archive_keep_snapshots,
            keep_age: (config.archive_keep_seconds > 0)
                .then(|| Duration::from_secs(config.archive_keep_seconds)),
            archived: Mutex::new(None),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(false), Condvar::new()),
            finishing: AtomicBool::new(false),
            rounds: (Mutex::new(Round::default()), Condvar::new()),
        });
        let run = inner.clone();
        std::thread::Builder::new()
            .name("linden-archiver".into())
            .spawn(move || run.run())
            .map_err(|e| {
                format!(
                    "archive {}: cannot start the archiver thread: {e}",
                    inner.target.describe()
                )
            })?;
        tracing::info!(
            "archiving snapshots and transaction logs to {} (a log file is sealed and archived at most {} s after its first batch)",
            inner.target.describe(),
            inner.interval.as_secs()
        );
        Ok(Archiver { inner })
    }

    /// Whether the snapshots' pruning must keep `name` in the data directory: it is not
    /// archived yet (or the archive has not been listed yet).
    pub fn keeps(&self, name: &str) -> bool {
        self.inner
            .archived
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_none_or(|a| !a.contains(name))
    }

    pub fn status(&self) -> ArchiveStatus {
        self.inner
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Asks the thread to look now (after a snapshot).
    pub fn nudge(&self) {
        *self.inner.wake.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.inner.wake.1.notify_all();
    }

    /// At a clean stop (writes are over): seals the log file being written and waits, at most
    /// `timeout`, until the archive holds every local snapshot and sealed log file, retrying
    /// failures every second meanwhile instead of backing off.
    pub fn finish(&self, timeout: Duration) -> Finished {
        let start = Instant::now();
        let deadline = start + timeout;
        let inner = &self.inner;
        if let Err(e) = inner.seal.seal_if_due(Duration::ZERO) {
            tracing::warn!(
                "the transaction log file could not be sealed for the archive at shutdown: {e}; the batches in it are archived after the next start"
            );
        }
        inner.finishing.store(true, Ordering::Relaxed);
        let (lock, cv) = &inner.rounds;
        let mut round = lock.lock().unwrap_or_else(|p| p.into_inner());
        // A round that ends after this point counts local files afresh: the file just sealed
        // and the shutdown snapshot included.
        let after = round.done;
        self.nudge();
        loop {
            if round.done > after && round.pending.is_empty() && round.error.is_none() {
                let last_batch = self.status().last_batch;
                return Finished::Complete {
                    last_batch,
                    seconds: start.elapsed().as_secs_f64(),
                };
            }
            let now = Instant::now();
            if now >= deadline {
                // No round ended since the seal: count the files now.
                let pending = if round.done > after {
                    round.pending.clone()
                } else {
                    inner.pending_files()
                };
                return Finished::Incomplete {
                    pending,
                    error: round.error.clone(),
                };
            }
            round = cv
                .wait_timeout(round, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

/// Data files by batch number (a log file's first batch, a snapshot's batch), in order.
type Numbered = Vec<(u64, String)>;

/// The local data files: (log files, snapshots).
fn local_files(dir: &Path) -> std::io::Result<(Numbered, Numbered)> {
    let mut logs = Vec::new();
    let mut snaps = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if let Some(s) = parse_log_name(&name) {
            logs.push((s, name));
        } else if let Some(s) = parse_snapshot_name(&name) {
            snaps.push((s, name));
        }
    }
    logs.sort();
    snaps.sort();
    Ok((logs, snaps))
}

/// The time of the first batch of a log file of version 4 or later, read from its first
/// bytes (header, batch length and checksum, seq, time).
fn first_batch_time(path: &Path) -> Option<SystemTime> {
    use std::io::Read;
    let mut head = [0u8; LOG_HEADER_LEN + 8 + 16];
    let mut f = std::fs::File::open(path).ok()?;
    f.read_exact(&mut head).ok()?;
    let version = u32::from_le_bytes(head[8..12].try_into().ok()?);
    if version < LOG_VERSION_TIMED {
        return None;
    }
    let at = LOG_HEADER_LEN + 8 + 8;
    let micros = u64::from_le_bytes(head[at..at + 8].try_into().ok()?);
    Some(SystemTime::UNIX_EPOCH + Duration::from_micros(micros))
}

impl Inner {
    fn run(&self) {
        let mut backoff: Option<(Instant, Duration)> = None;
        while !self.stop.load(Ordering::Relaxed) {
            match self.seal.seal_if_due(self.interval) {
                Ok(true) => tracing::debug!("sealed the transaction log file for the archive"),
                Ok(false) => {}
                Err(e) => tracing::warn!(
                    "the transaction log file could not be sealed for the archive: {e}; it is tried again in a second (the writer itself is not affected unless the log says so)"
                ),
            }
            let finishing = self.finishing.load(Ordering::Relaxed);
            let waiting = !finishing && backoff.is_some_and(|(at, pause)| at.elapsed() < pause);
            if !waiting {
                let result = self.pass();
                self.round_done(result.as_ref().err().map(ToString::to_string));
                match result {
                    Ok(()) => {
                        if backoff.take().is_some() {
                            tracing::info!("archiving to {} works again", self.target.describe());
                        }
                    }
                    Err(e) => {
                        let pause =
                            backoff.map_or(FIRST_BACKOFF, |(_, p)| (p * 2).min(MAX_BACKOFF));
                        backoff = Some((Instant::now(), pause));
                        let msg = e.to_string();
                        {
                            let mut s = self.status.lock().unwrap_or_else(|p| p.into_inner());
                            s.failures += 1;
                            s.last_error = Some(msg.clone());
                        }
                        let retry = if finishing { TICK } else { pause };
                        tracing::warn!(
                            "archiving failed: {msg}; retrying in {} s. Check that the archive is reachable and writable (and the archive settings); the server goes on serving and keeps the files until they are archived",
                            retry.as_secs()
                        );
                    }
                }
            }
            self.update_pending();
            let (lock, cv) = &self.wake;
            let mut woken = lock.lock().unwrap_or_else(|p| p.into_inner());
            if !*woken {
                woken = cv
                    .wait_timeout(woken, TICK)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            *woken = false;
        }
    }

    /// Counts what a round left (the local files the archive does not hold yet), for
    /// `Archiver::finish`.
    fn round_done(&self, error: Option<String>) {
        let pending = self.pending_files();
        let (lock, cv) = &self.rounds;
        let mut r = lock.lock().unwrap_or_else(|p| p.into_inner());
        r.done += 1;
        r.pending = pending;
        r.error = error;
        cv.notify_all();
    }

    /// The local files (sealed logs, snapshots) the archive does not hold yet.
    fn pending_files(&self) -> Vec<String> {
        match local_files(&self.dir) {
            Ok((logs, snaps)) => {
                let sealed = logs.len().saturating_sub(1);
                logs[..sealed]
                    .iter()
                    .chain(snaps.iter())
                    .map(|(_, n)| n.clone())
                    .filter(|n| self.keeps(n))
                    .collect()
            }
            Err(e) => vec![format!("(the data directory cannot be read: {e})")],
        }
    }

    /// Records the time of the oldest batch not archived yet: the first batch of the oldest
    /// log file not archived.
    fn update_pending(&self) {
        let Ok((logs, _)) = local_files(&self.dir) else {
            return;
        };
        let archived = self.archived.lock().unwrap_or_else(|p| p.into_inner());
        let Some(archived) = archived.as_ref() else {
            return;
        };
        let oldest = logs
            .iter()
            .filter(|(_, n)| !archived.contains(n))
            .find_map(|(_, n)| first_batch_time(&self.dir.join(n)));
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .oldest_pending = oldest;
    }

    /// One round: list the archive (the first time), copy what is missing, apply retention.
    fn pass(&self) -> Result<(), ArchiveError> {
        let listed = self
            .archived
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        if !listed {
            self.first_listing()?;
        }
        let io_err = |file: &str, e: std::io::Error| ArchiveError::Io {
            archive: format!("data directory {}", self.dir.display()),
            file: file.to_string(),
            source: e,
        };
        let (logs, snaps) = local_files(&self.dir).map_err(|e| io_err(".", e))?;
        // Every log file but the last is sealed: the writer appends to the newest only.
        let sealed = logs.len().saturating_sub(1);
        let mut copied_snapshot = false;
        for (_, name) in &logs[..sealed] {
            if !self.keeps(name) {
                continue;
            }
            let bytes = match std::fs::read(self.dir.join(name)) {
                Ok(b) => b,
                // Pruned meanwhile by a snapshot (one that covers it).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(name, e)),
            };
            // Checked whole (checksums, numbering), but only the last batch decoded: its
            // number and stamps are all the status needs.
            let log = read_log_last(name, &bytes)?;
            self.target.put_verified(name, &bytes)?;
            self.archived_one(name, bytes.len(), |s| {
                if let Some(b) = log.batches.last() {
                    s.last_batch = s.last_batch.max(b.seq);
                }
                if let Some(c) = archive::newest_csn(&log) {
                    if s.last_csn.as_ref().is_none_or(|old| *old < c) {
                        s.last_csn = Some(c);
                    }
                }
            });
        }
        for (seq, name) in &snaps {
            if !self.keeps(name) {
                continue;
            }
            let bytes = match std::fs::read(self.dir.join(name)) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(name, e)),
            };
            self.target.put_verified(name, &bytes)?;
            self.archived_one(name, bytes.len(), |s| s.last_batch = s.last_batch.max(*seq));
            copied_snapshot = true;
        }
        if copied_snapshot {
            self.retention()?;
        }
        Ok(())
    }

    fn keeps(&self, name: &str) -> bool {
        self.archived
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_none_or(|a| !a.contains(name))
    }

    fn archived_one(&self, name: &str, bytes: usize, update: impl FnOnce(&mut ArchiveStatus)) {
        if let Some(a) = self
            .archived
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            a.insert(name.to_string());
        }
        let mut s = self.status.lock().unwrap_or_else(|p| p.into_inner());
        s.files += 1;
        s.bytes += bytes as u64;
        s.last_success = Some(SystemTime::now());
        update(&mut s);
        tracing::debug!("archived {name} ({bytes} bytes) to {}", s.url);
    }

    /// Lists the archive, and learns from its newest files where it stands.
    fn first_listing(&self) -> Result<(), ArchiveError> {
        let files = self.target.list()?;
        let mut last_batch = 0;
        let mut last_csn = None;
        if let Some(f) = files
            .iter()
            .rev()
            .find(|f| parse_log_name(&f.name).is_some())
        {
            let bytes = self.target.get(&f.name)?;
            let log = read_log_last(&f.name, &bytes)?;
            last_batch = log.batches.last().map_or(0, |b| b.seq);
            last_csn = archive::newest_csn(&log);
        }
        for f in &files {
            if let Some(s) = parse_snapshot_name(&f.name) {
                last_batch = last_batch.max(s);
            }
        }
        {
            let mut s = self.status.lock().unwrap_or_else(|p| p.into_inner());
            s.last_batch = last_batch;
            s.last_csn = last_csn;
        }
        *self.archived.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(files.into_iter().map(|f| f.name).collect());
        Ok(())
    }

    /// Removes the snapshots retention lets go (beyond `archive_keep_snapshots`, or older
    /// than `archive_keep_seconds`; never the newest), and the log files that end before the
    /// oldest snapshot kept.
    fn retention(&self) -> Result<(), ArchiveError> {
        if self.keep_snapshots == 0 && self.keep_age.is_none() {
            return Ok(());
        }
        let files = self.target.list()?;
        let mut snaps: Vec<_> = files
            .iter()
            .filter_map(|f| parse_snapshot_name(&f.name).map(|s| (s, f)))
            .collect();
        snaps.sort_by_key(|s| s.0);
        let now = SystemTime::now();
        let n = snaps.len();
        let mut gone = Vec::new();
        for (i, (_, f)) in snaps.iter().enumerate() {
            if i + 1 == n {
                break;
            }
            let too_many = self.keep_snapshots > 0 && (n - i) as u64 > self.keep_snapshots;
            let too_old = self
                .keep_age
                .is_some_and(|a| now.duration_since(f.modified).unwrap_or_default() > a);
            if too_many || too_old {
                gone.push(f.name.clone());
            } else {
                break;
            }
        }
        let Some(oldest_kept) = snaps
            .iter()
            .map(|s| s.0)
            .find(|s| !gone.iter().any(|g| parse_snapshot_name(g) == Some(*s)))
        else {
            return Ok(());
        };
        let mut logs: Vec<_> = files
            .iter()
            .filter_map(|f| parse_log_name(&f.name).map(|s| (s, f)))
            .collect();
        logs.sort_by_key(|s| s.0);
        // The log file holding the snapshot's own batch stays: it gives the batch's time,
        // so that a restore to a time or CSN can start from that snapshot.
        for (i, (_, f)) in logs.iter().enumerate() {
            if logs
                .get(i + 1)
                .is_some_and(|(next, _)| *next <= oldest_kept)
            {
                gone.push(f.name.clone());
            }
        }
        for name in &gone {
            self.target.delete(name)?;
            tracing::info!(
                "removed {name} from the archive {} (retention: archive_keep_snapshots, archive_keep_seconds)",
                self.target.describe()
            );
        }
        self.status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .removed += gone.len() as u64;
        Ok(())
    }
}
