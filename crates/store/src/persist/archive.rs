//! Continuous archiving and point-in-time restore (docs/backup-and-restore.md).
//!
//! An *archive* holds copies of a data directory's snapshots and *sealed* transaction-log
//! files (those a newer log file follows: the writer never appends to them again), under
//! their own names. Every archived file is read back and compared (CRC-32C of the whole file)
//! with the local one before it counts as archived. A restore takes the newest archived
//! snapshot at or before the point asked for, then the archived log batches after it up to
//! the point, into a new data directory, and checks that directory as `verify` does.
//!
//! - `ArchiveTarget`: where the files go (`FileTarget`, a directory: `file:///path`).
//! - `Point`: a moment to restore to (a batch, a time, a CSN, or the latest).
//! - `catalog`: what an archive holds and the range it can restore (`linden archive list`).
//! - `restore`: builds the data directory of a point.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use schema::Schema;

use super::codec::Change;
use super::log::{parse_log_name, read_log, Batch, LogContents};
use super::patch::PatchAttr;
use super::snapshot::parse_snapshot_name;
use super::{crc, FsIo, Io, PersistError};

/// Why an archive operation failed. Each says which archive and file.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The archive URL cannot be used.
    #[error("archive {url}: {reason}")]
    Url { url: String, reason: String },
    /// Reading or writing the archive failed (unreachable, permissions, full).
    #[error("archive {archive}: {file}: {source}")]
    Io {
        archive: String,
        file: String,
        source: std::io::Error,
    },
    /// A file read back from the archive is not the one written.
    #[error("archive {archive}: {file}: read back {got} bytes with CRC-32C {got_crc:#010x}, but {want} bytes with CRC-32C {want_crc:#010x} were written")]
    Mismatch {
        archive: String,
        file: String,
        want: usize,
        want_crc: u32,
        got: usize,
        got_crc: u32,
    },
    /// An archived file is damaged, or the archive cannot give the point asked for.
    #[error("{0}")]
    Persist(#[from] PersistError),
    #[error("{0}")]
    Restore(String),
}

/// One file in an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedFile {
    pub name: String,
    pub size: u64,
    /// When it was archived (retention by age goes by it).
    pub modified: SystemTime,
}

/// Where archived files go. Names are plain file names (`snap-….lns`, `log-….lnl`); a
/// target keeps them flat under its location. Implementations must make `put` atomic: a
/// file is either absent or whole under its name.
pub trait ArchiveTarget: Send + Sync {
    /// The archive as its URL says (no secrets).
    fn describe(&self) -> String;
    /// The data files (snapshots and logs) the archive holds.
    fn list(&self) -> Result<Vec<ArchivedFile>, ArchiveError>;
    fn put(&self, name: &str, data: &[u8]) -> Result<(), ArchiveError>;
    fn get(&self, name: &str) -> Result<Vec<u8>, ArchiveError>;
    fn delete(&self, name: &str) -> Result<(), ArchiveError>;

    /// `put`, then reads the file back and checks it is the same bytes (length and CRC-32C).
    fn put_verified(&self, name: &str, data: &[u8]) -> Result<(), ArchiveError> {
        self.put(name, data)?;
        let back = self.get(name)?;
        let (want_crc, got_crc) = (crc(data), crc(&back));
        if back.len() != data.len() || want_crc != got_crc {
            return Err(ArchiveError::Mismatch {
                archive: self.describe(),
                file: name.to_string(),
                want: data.len(),
                want_crc,
                got: back.len(),
                got_crc,
            });
        }
        Ok(())
    }
}

/// Whether `name` is a file an archive holds (a snapshot or a log file).
pub fn is_data_file(name: &str) -> bool {
    parse_snapshot_name(name).is_some() || parse_log_name(name).is_some()
}

/// An archive in a directory of this machine (or a mounted one): `file:///path`.
pub struct FileTarget {
    dir: PathBuf,
}

impl FileTarget {
    pub fn new(dir: impl Into<PathBuf>) -> FileTarget {
        FileTarget { dir: dir.into() }
    }

    fn err(&self, file: &str, source: std::io::Error) -> ArchiveError {
        ArchiveError::Io {
            archive: self.describe(),
            file: file.to_string(),
            source,
        }
    }
}

impl ArchiveTarget for FileTarget {
    fn describe(&self) -> String {
        format!("file://{}", self.dir.display())
    }

    fn list(&self) -> Result<Vec<ArchivedFile>, ArchiveError> {
        // A directory not made yet is an empty archive (the first `put` makes it).
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.err(".", e)),
        };
        let mut out = Vec::new();
        for e in rd {
            let e = e.map_err(|e| self.err(".", e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if !is_data_file(&name) {
                continue;
            }
            let m = e.metadata().map_err(|err| self.err(&name, err))?;
            out.push(ArchivedFile {
                name,
                size: m.len(),
                modified: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn put(&self, name: &str, data: &[u8]) -> Result<(), ArchiveError> {
        let io = FsIo;
        io.create_dir_all(&self.dir)
            .map_err(|e| self.err(name, e))?;
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let path = self.dir.join(name);
        let written = (|| {
            let mut f = io.create(&tmp)?;
            f.write_all(data)?;
            f.sync()?;
            io.rename(&tmp, &path)?;
            io.sync_dir(&self.dir)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(self.err(name, e));
        }
        Ok(())
    }

    fn get(&self, name: &str) -> Result<Vec<u8>, ArchiveError> {
        std::fs::read(self.dir.join(name)).map_err(|e| self.err(name, e))
    }

    fn delete(&self, name: &str) -> Result<(), ArchiveError> {
        match std::fs::remove_file(self.dir.join(name)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err(name, e)),
        }
    }
}

/// Opens the archive an URL names: `file:///absolute/path` (a directory, created when first
/// written).
pub fn open_file_url(url: &str) -> Result<FileTarget, ArchiveError> {
    let bad = |reason: &str| ArchiveError::Url {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let path = url
        .strip_prefix("file://")
        .ok_or_else(|| bad("not a file:// URL"))?;
    if !path.starts_with('/') {
        return Err(bad(
            "a file:// archive needs an absolute path (file:///var/backups/linden)",
        ));
    }
    Ok(FileTarget::new(path))
}

/// The moment a restore goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Point {
    /// The newest archived batch.
    Latest,
    /// Every batch up to and including this one.
    Batch(u64),
    /// Every batch committed at or before this time (microseconds since the Unix epoch).
    Time(u64),
    /// Every batch up to the first that holds a change with a later CSN: the state right
    /// after the change stamped with this CSN (and before any later one).
    Csn(String),
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::Latest => f.write_str("the latest archived batch"),
            Point::Batch(n) => write!(f, "batch {n}"),
            Point::Time(t) => write!(f, "{}", rfc3339_micros(*t)),
            Point::Csn(c) => write!(f, "CSN {c}"),
        }
    }
}

/// The CSNs a batch's changes carry: the entryCSN of each entry it wrote (whole, or the
/// entryCSN a patch sets or adds), the CSN of each delete it remembered.
pub fn batch_csns(b: &Batch) -> impl Iterator<Item = &str> {
    let is_csn = |name: &str| name.eq_ignore_ascii_case("entryCSN");
    b.changes
        .iter()
        .flat_map(move |c| -> Box<dyn Iterator<Item = &str>> {
            match c {
                Change::Put(e) => Box::new(
                    e.attrs
                        .iter()
                        .filter(move |a| is_csn(&a.name))
                        .flat_map(|a| a.values.iter())
                        .filter_map(|v| std::str::from_utf8(v).ok()),
                ),
                Change::Patch(p) => Box::new(
                    p.attrs
                        .iter()
                        .flat_map(move |a| match a {
                            PatchAttr::Set(a) if is_csn(&a.name) => &a.values[..],
                            PatchAttr::Delta { name, added, .. } if is_csn(name) => &added[..],
                            _ => &[],
                        })
                        .filter_map(|v| std::str::from_utf8(v).ok()),
                ),
                Change::Tombstone(t) => Box::new(std::iter::once(&*t.csn)),
                _ => Box::new(std::iter::empty()),
            }
        })
}

/// The newest CSN of a log's batches (CSNs sort as text).
pub fn newest_csn(log: &LogContents) -> Option<String> {
    log.batches
        .iter()
        .flat_map(batch_csns)
        .max()
        .map(str::to_string)
}

/// `t` (microseconds since the epoch) as RFC 3339 UTC with microseconds.
pub fn rfc3339_micros(t: u64) -> String {
    let secs = t / 1_000_000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        t % 1_000_000
    )
}

/// Parses RFC 3339 (`2026-11-28T10:15:00Z`, `2026-11-28T11:15:00.25+01:00`) into
/// microseconds since the epoch.
pub fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &s[start..i.min(start + 6)];
        micros = frac.parse::<i64>().ok()? * 10i64.pow(6 - frac.len() as u32);
    }
    let offset = match &s[i..] {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let v = oh * 3600 + om * 60;
            if o.starts_with('-') {
                -v
            } else {
                v
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset;
    u64::try_from(secs * 1_000_000 + micros).ok()
}

// Howard Hinnant's civil calendar algorithms.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// One archived log file, summarized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSummary {
    pub name: String,
    pub first_seq: u64,
    /// Its last batch (`None`: it holds none).
    pub last_seq: Option<u64>,
    pub first_time: Option<u64>,
    pub last_time: Option<u64>,
    pub batches: u64,
    pub newest_csn: Option<String>,
}

/// What an archive holds.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// (batch, name, bytes), oldest first.
    pub snapshots: Vec<(u64, String, u64)>,
    pub logs: Vec<LogSummary>,
}

impl Catalog {
    /// The oldest batch a restore can reach: the oldest snapshot's, or 0 (empty) when the
    /// logs start at batch 1; `None` when the archive can restore nothing.
    pub fn first_point(&self) -> Option<u64> {
        let snap = self.snapshots.first().map(|s| s.0);
        let from_start = self.logs.first().is_some_and(|l| l.first_seq <= 1);
        match (snap, from_start) {
            (_, true) => Some(0),
            (s, false) => s,
        }
    }

    /// The newest batch a restore can reach (contiguous logs from a snapshot or batch 1).
    pub fn last_point(&self) -> Option<u64> {
        let mut last = self.first_point()?;
        for s in &self.snapshots {
            last = last.max(s.0);
        }
        for l in &self.logs {
            if l.first_seq > last + 1 {
                // A gap: batches after it cannot be reached unless a snapshot follows.
                if let Some(s) = self.snapshots.iter().find(|s| s.0 + 1 >= l.first_seq) {
                    last = last.max(s.0);
                } else {
                    break;
                }
            }
            if let Some(ls) = l.last_seq {
                last = last.max(ls);
            }
        }
        Some(last)
    }

    /// When batch `seq` was committed, if an archived log says.
    pub fn time_of(&self, seq: u64) -> Option<u64> {
        self.logs.iter().find_map(|l| {
            if l.first_seq == seq {
                l.first_time
            } else if l.last_seq == Some(seq) {
                l.last_time
            } else {
                None
            }
        })
    }
}

/// Archived files by batch number: a snapshot's batch, or a log file's first batch.
type Numbered<'a> = Vec<(u64, &'a ArchivedFile)>;

/// The snapshots and the log files of a listing, each in batch order.
fn split(files: &[ArchivedFile]) -> (Numbered<'_>, Numbered<'_>) {
    let mut snaps: Vec<_> = files
        .iter()
        .filter_map(|f| parse_snapshot_name(&f.name).map(|s| (s, f)))
        .collect();
    let mut logs: Vec<_> = files
        .iter()
        .filter_map(|f| parse_log_name(&f.name).map(|s| (s, f)))
        .collect();
    snaps.sort_by_key(|s| s.0);
    logs.sort_by_key(|s| s.0);
    (snaps, logs)
}

fn read_archived_log(target: &dyn ArchiveTarget, name: &str) -> Result<LogContents, ArchiveError> {
    let bytes = target.get(name)?;
    let log = read_log(&format!("{}/{name}", target.describe()), &bytes)?;
    Ok(log)
}

/// Reads every log file of the archive (checking each) and lists what it holds.
pub fn catalog(target: &dyn ArchiveTarget) -> Result<Catalog, ArchiveError> {
    let files = target.list()?;
    let (snaps, logs) = split(&files);
    let mut out = Catalog {
        snapshots: snaps
            .iter()
            .map(|(s, f)| (*s, f.name.clone(), f.size))
            .collect(),
        logs: Vec::new(),
    };
    for (_, f) in logs {
        let log = read_archived_log(target, &f.name)?;
        out.logs.push(LogSummary {
            name: f.name.clone(),
            first_seq: log.first_seq,
            last_seq: log.batches.last().map(|b| b.seq),
            first_time: log.batches.first().and_then(|b| b.time_micros),
            last_time: log.batches.last().and_then(|b| b.time_micros),
            batches: log.batches.len() as u64,
            newest_csn: newest_csn(&log),
        });
    }
    Ok(out)
}

/// How a restore is done.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Give the restored data a new replication identity (`mark_restored`).
    pub new_identity: bool,
}

/// What a restore did.
#[derive(Debug, Clone)]
pub struct RestoreReport {
    /// With `RestoreOptions::new_identity`, when the data held replication state: the CSNs
    /// it was marked with (one per server id), in one more batch after the point.
    pub marked: Option<Vec<String>>,
    pub snapshot: Option<String>,
    /// The last batch the restored directory holds.
    pub last_seq: u64,
    /// When that batch was committed, if its log says.
    pub last_time: Option<u64>,
    /// Log batches copied after the snapshot.
    pub batches: u64,
    /// Entries after recovery of the restored directory.
    pub entries: usize,
    /// Seconds spent fetching files from the archive, writing them, and verifying.
    pub fetch_seconds: f64,
    pub verify_seconds: f64,
}

/// Whether `b` lies at or before `point` (for Time and Csn points; Batch and Latest are
/// decided by number). A batch without a time cannot be placed against a time.
fn within(point: &Point, b: &Batch, file: &str) -> Result<bool, ArchiveError> {
    Ok(match point {
        Point::Latest => true,
        Point::Batch(n) => b.seq <= *n,
        Point::Time(t) => match b.time_micros {
            Some(bt) => bt <= *t,
            None => {
                return Err(ArchiveError::Restore(format!(
                    "{file}: batch {} was written by an older Linden whose log records no batch times; restore to it with --to-batch or --to-csn",
                    b.seq
                )))
            }
        },
        Point::Csn(c) => !matches!(csn_step(b, c), Step::Past),
    })
}

/// Where a batch stands against a point, in log order.
enum Step {
    /// At or before the point.
    Within,
    /// The last batch of the point (the one holding its CSN).
    Last,
    /// After the point: this batch and every later one are left out.
    Past,
    /// Not placed by itself (a batch with no CSN, for a CSN point): in if a later batch is.
    Unknown,
}

/// A batch against the point "right after the change stamped `c`": the batch holding `c` is
/// the last; one holding a later CSN is past it; one with only earlier CSNs is before it; one
/// with no CSN at all (a delete without a tombstone) is in only if a later batch is (log
/// order is the order the writer applied them).
fn csn_step(b: &Batch, c: &str) -> Step {
    let mut step = Step::Unknown;
    for x in batch_csns(b) {
        if x > c {
            return Step::Past;
        }
        if x == c {
            step = Step::Last;
        } else if !matches!(step, Step::Last) {
            step = Step::Within;
        }
    }
    step
}

/// The CSN of server id `sid` (three hex digits) at `micros` since the epoch.
fn csn_at(micros: u64, sid: &str) -> String {
    let t: String = rfc3339_micros(micros)
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    format!("{t}Z#000000#{sid}#000000")
}

/// Gives the restored data in `dir` (whose last batch is `last`) a new replication identity,
/// so that a consumer holding a cookie from before the restore, which may name changes this
/// data no longer has, does a full refresh (present phase) instead of keeping entries the
/// restored provider does not hold: one more batch raises the contextCSN of every naming
/// context that has one, and the tombstones' floor, to the restore's time, for every server
/// id the data knows. A cookie older than the floor means "deletes since may have been
/// forgotten" to the provider (docs/replication.md), and a restore forgets exactly those.
/// Data without replication state (no contextCSN, no floor) is left as it is (`None`).
fn mark_restored(
    dir: &Path,
    last: u64,
    schema: &Schema,
) -> Result<Option<Vec<String>>, ArchiveError> {
    let rec = super::recover(&FsIo, dir, schema)?;
    let names = &rec.schema;
    let roots: Vec<super::StoredEntry> = rec
        .entries
        .iter()
        .filter(|e| e.parent.is_none())
        .map(|e| super::StoredEntry::from_entry(e, names))
        .filter(|e| {
            e.attrs
                .iter()
                .any(|a| a.name.eq_ignore_ascii_case("contextCSN"))
        })
        .collect();
    let floor: Vec<String> = rec
        .tombstones
        .floor()
        .iter()
        .map(|f| f.to_string())
        .collect();
    let mut known: Vec<String> = floor.clone();
    for r in &roots {
        for a in r
            .attrs
            .iter()
            .filter(|a| a.name.eq_ignore_ascii_case("contextCSN"))
        {
            known.extend(
                a.values
                    .iter()
                    .filter_map(|v| String::from_utf8(v.clone()).ok()),
            );
        }
    }
    let sid = |c: &str| c.split('#').nth(2).map(str::to_string);
    let mut sids: Vec<String> = known.iter().filter_map(|c| sid(c)).collect();
    sids.sort();
    sids.dedup();
    if sids.is_empty() {
        return Ok(None);
    }
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    // One CSN per server id: the restore's time, or just after the newest CSN of that id the
    // data holds if that is later (a clock behind).
    let marks: Vec<String> = sids
        .iter()
        .map(|s| {
            let newest = known
                .iter()
                .filter(|c| sid(c).as_deref() == Some(s.as_str()))
                .max()
                .cloned()
                .unwrap_or_default();
            let mut m = csn_at(now, s);
            if newest >= m {
                let t = newest.get(..21).and_then(parse_csn_time).unwrap_or(now);
                m = csn_at(t.saturating_add(1), s);
            }
            m
        })
        .collect();
    // Every entry is stamped with the mark of its entryCSN's server id: consumers resolve
    // conflicts by entryCSN and keep a copy newer than what they are sent, so the restored
    // entries must be newer than anything they saw before the restore.
    let mark_of = |csn: &[u8]| -> Option<&String> {
        let csn = std::str::from_utf8(csn).ok()?;
        let s = sid(csn)?;
        marks.iter().find(|m| sid(m).as_deref() == Some(s.as_str()))
    };
    let mut changes = Vec::new();
    let root_ids: Vec<_> = roots.iter().map(|r| r.id).collect();
    for mut r in roots {
        for a in r.attrs.iter_mut() {
            if a.name.eq_ignore_ascii_case("contextCSN") {
                a.values = marks.iter().map(|m| m.as_bytes().to_vec()).collect();
            }
        }
        restamp(&mut r, &mark_of);
        changes.push(Change::Put(r));
    }
    for e in rec.entries.iter().filter(|e| !root_ids.contains(&e.id)) {
        let mut se = super::StoredEntry::from_entry(e, names);
        if restamp(&mut se, &mark_of) {
            changes.push(Change::Put(se));
        }
    }
    let opts = super::LogOptions::default();
    let mut w = super::LogWriter::open(std::sync::Arc::new(FsIo), dir, last + 1, opts)?;
    // In batches of `MARK_BATCH` entries; the floor comes with the last.
    let mut seq = last + 1;
    let mut rest = changes;
    loop {
        let tail = rest.split_off(rest.len().min(MARK_BATCH));
        let done = tail.is_empty();
        if done {
            rest.push(Change::TombstoneFloor(marks.clone()));
        }
        w.append_batch(seq, &rest)?;
        if done {
            break;
        }
        rest = tail;
        seq += 1;
    }
    Ok(Some(marks))
}

/// Entries per batch of the restore's mark.
const MARK_BATCH: usize = 10_000;

/// Replaces the entryCSN of `e` by the mark of its server id; whether it had one.
fn restamp<'m>(e: &mut super::StoredEntry, mark_of: &dyn Fn(&[u8]) -> Option<&'m String>) -> bool {
    let mut did = false;
    for a in e.attrs.iter_mut() {
        if a.name.eq_ignore_ascii_case("entryCSN") {
            if let Some(m) = a.values.first().and_then(|v| mark_of(v)) {
                a.values = vec![m.as_bytes().to_vec()];
                did = true;
            }
        }
    }
    did
}

/// `YYYYmmddHHMMSS.ffffff` (a CSN's time without its `Z`) as microseconds since the epoch.
fn parse_csn_time(t: &str) -> Option<u64> {
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        t.get(0..4)?,
        t.get(4..6)?,
        t.get(6..8)?,
        t.get(8..10)?,
        t.get(10..12)?,
        t.get(12..)?
    );
    parse_rfc3339(&iso)
}

/// Writes `data` to `path` and makes it durable.
fn write_durably(path: &Path, data: &[u8]) -> Result<(), ArchiveError> {
    let io = FsIo;
    let w = (|| {
        let mut f = io.create(path)?;
        f.write_all(data)?;
        f.sync()
    })();
    w.map_err(|e| ArchiveError::Persist(PersistError::io(path, e)))
}

/// Builds in `dest` (absent or empty) the data directory of `point`: the newest archived
/// snapshot at or before it, and the archived log batches after that snapshot up to the
/// point, then checks it as `verify` does (with `schema`, the configured schema).
pub fn restore(
    target: &dyn ArchiveTarget,
    dest: &Path,
    point: &Point,
    schema: &Schema,
    opts: &RestoreOptions,
) -> Result<RestoreReport, ArchiveError> {
    let t = Instant::now();
    let io = FsIo;
    let dest_err = |e: std::io::Error| ArchiveError::Persist(PersistError::io(dest, e));
    if dest.exists() {
        let mut rd = std::fs::read_dir(dest).map_err(dest_err)?;
        if rd.next().is_some() {
            return Err(ArchiveError::Restore(format!(
                "{}: the directory is not empty; restore into a new directory (a running server's directory is never overwritten)",
                dest.display()
            )));
        }
    }
    let arch = target.describe();
    let files = target.list()?;
    let (snaps, logs) = split(&files);
    if snaps.is_empty() && logs.is_empty() {
        return Err(ArchiveError::Restore(format!(
            "archive {arch} holds no snapshot and no transaction log: nothing to restore (is it the right URL, and has the server archived yet?)"
        )));
    }

    // 1. Which batch the point is: walk the archived logs in order, stopping at the first
    //    batch past the point. Logs are read once here and kept for step 3 only while they
    //    may be needed (the ones at or before the point).
    let mut wanted: Vec<(String, LogContents)> = Vec::new();
    let mut last: Option<u64> = None; // the newest batch within the point
    let mut first_past: Option<(u64, String)> = None;
    'files: for (_, f) in &logs {
        let log = read_archived_log(target, &f.name)?;
        let name = f.name.clone();
        for b in &log.batches {
            let step = match point {
                Point::Batch(n) if b.seq > *n => Step::Past,
                Point::Csn(c) => csn_step(b, c),
                Point::Time(_) if !within(point, b, &name)? => Step::Past,
                _ => Step::Within,
            };
            match step {
                Step::Past => {
                    first_past = Some((b.seq, name.clone()));
                    wanted.push((name, log));
                    break 'files;
                }
                Step::Within => last = Some(b.seq),
                Step::Unknown => {}
                Step::Last => {
                    last = Some(b.seq);
                    first_past = Some((b.seq + 1, name.clone()));
                    wanted.push((name, log));
                    break 'files;
                }
            }
        }
        wanted.push((name, log));
    }
    // The newest batch a snapshot alone may give (a snapshot newer than every log).
    let newest_snap = snaps.last().map(|s| s.0);
    let target_seq = match point {
        Point::Batch(n) => *n,
        Point::Latest => last.max(newest_snap).unwrap_or(0),
        // A snapshot newer than every logged batch has no known time: a time or CSN point
        // goes to the last logged batch within it.
        _ => match (last, &first_past) {
            (Some(l), _) => l,
            // The point is before the first archived batch: only the empty start can be
            // placed before it (a snapshot of the batch before has no known time).
            (None, Some((1, _))) => 0,
            (None, Some((s, _))) => {
                return Err(ArchiveError::Restore(format!(
                    "{point} is before batch {s}, the oldest archived batch whose time is known: this archive cannot restore to it (the oldest restore points are batch {} with --to-batch, and the times of `linden archive list`)",
                    snaps.first().map_or(*s, |x| x.0)
                )))
            }
            (None, None) => newest_snap.unwrap_or(0),
        },
    };

    // 2. The snapshot: the newest at or before the batch.
    let snap = snaps.iter().rev().find(|s| s.0 <= target_seq);
    let base = snap.map_or(0, |s| s.0);
    if base == 0 && logs.first().is_none_or(|l| l.0 > 1) && target_seq > 0 {
        return Err(ArchiveError::Restore(format!(
            "archive {arch} has no snapshot at or before batch {target_seq} ({point}), and its logs do not start at batch 1: the oldest restore point is batch {}",
            snaps.first().map_or(0, |s| s.0)
        )));
    }
    if base == 0 && target_seq == 0 {
        if let Some((s, _)) = &first_past {
            if *s > 1 {
                return Err(ArchiveError::Restore(format!(
                    "{point} is before the oldest archived batch this archive can place in time (batch {s}); the oldest restore point is batch {} (use --to-batch)",
                    snaps.first().map_or(0, |s| s.0)
                )));
            }
        }
    }

    // 3. Write the directory: the snapshot, then each log file holding batches in
    //    (base, target_seq], cut after batch target_seq.
    io.create_dir_all(dest).map_err(dest_err)?;
    let mut copied = 0u64;
    let mut have = base;
    if let Some((_, f)) = snap {
        let bytes = target.get(&f.name)?;
        write_durably(&dest.join(&f.name), &bytes)?;
    }
    let mut last_time = None;
    for (name, log) in &wanted {
        let Some(last_in_file) = log.batches.last().map(|b| b.seq) else {
            continue;
        };
        if last_in_file <= base || log.first_seq > target_seq {
            continue;
        }
        if log.first_seq > have + 1 {
            return Err(ArchiveError::Restore(format!(
                "archive {arch}: {name} starts at batch {} but the restored data ends at batch {have}: batches {}..{} are missing from the archive",
                log.first_seq,
                have + 1,
                log.first_seq - 1
            )));
        }
        let bytes = target.get(name)?;
        let keep: Vec<&Batch> = log.batches.iter().filter(|b| b.seq <= target_seq).collect();
        let end = keep.last().map_or(0, |b| b.end) as usize;
        let cut = if last_in_file <= target_seq {
            &bytes[..]
        } else {
            &bytes[..end.min(bytes.len())]
        };
        write_durably(&dest.join(name), cut)?;
        for b in keep {
            if b.seq > have {
                copied += 1;
                have = b.seq;
                last_time = b.time_micros.or(last_time);
            }
        }
    }
    if have < target_seq {
        return Err(ArchiveError::Restore(format!(
            "archive {arch} holds batches up to {have} only; {point} asks for batch {target_seq}"
        )));
    }
    io.sync_dir(dest).map_err(dest_err)?;
    let marked = if opts.new_identity {
        mark_restored(dest, have, schema)?
    } else {
        None
    };
    let fetch_seconds = t.elapsed().as_secs_f64();

    // 4. Check it as `linden verify` does.
    let t2 = Instant::now();
    let report = super::verify(&io, dest, schema)?;
    if !report.is_ok() {
        let why = report
            .files
            .iter()
            .find_map(|f| match &f.status {
                super::FileStatus::Corrupt(m) => Some(format!("{}: {m}", f.name)),
                _ => None,
            })
            .or_else(|| report.recovery.as_ref().err().cloned())
            .unwrap_or_default();
        return Err(ArchiveError::Restore(format!(
            "{}: the restored directory does not verify: {why}",
            dest.display()
        )));
    }
    let entries = report.recovery.as_ref().map_or(0, |r| r.0);
    Ok(RestoreReport {
        marked,
        snapshot: snap.map(|s| s.1.name.clone()),
        last_seq: have,
        last_time,
        batches: copied,
        entries,
        fetch_seconds,
        verify_seconds: t2.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip() {
        let t = parse_rfc3339("2026-11-28T10:15:30.123456Z").expect("parses");
        assert_eq!(rfc3339_micros(t), "2026-11-28T10:15:30.123456Z");
        assert_eq!(parse_rfc3339("2026-11-28T11:15:30.123456+01:00"), Some(t));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:01Z"), Some(1_000_000));
        assert_eq!(parse_rfc3339("2026-11-28 10:15"), None);
        assert_eq!(parse_rfc3339("2026-13-28T10:15:30Z"), None);
    }
}
