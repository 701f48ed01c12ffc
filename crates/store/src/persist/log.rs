//! The transaction log: `log-<first batch seq, 20 digits>.lnl` files of checksummed,
//! self-delimiting batches (style rule 8). Format in `docs/storage-format.md`.
//!
//! One batch is one group commit of the writer: it is written with one `write_all` and made
//! durable with one fsync before any of its operations is acknowledged.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::codec::{Change, Reader};
use super::io::{is_no_space, Io, IoFile};
use super::{crc, parse_seq_name, PersistError};

pub const LOG_MAGIC: [u8; 8] = *b"LNDNLOG\0";
/// The version written. Version 2 added the schema record (tag 0x03), version 3 the tombstone
/// records (tags 0x04 to 0x06), version 4 the batch's time (what a point-in-time restore goes
/// by), version 5 the Patch record (tag 0x07, `patch`); files of versions 1 to 4 are still
/// read (batches of versions 1 to 3 have no time).
pub const LOG_VERSION: u32 = 5;
/// The first version that may hold Patch records.
pub const LOG_VERSION_PATCH: u32 = 5;
/// The first version whose batches carry their time.
pub const LOG_VERSION_TIMED: u32 = 4;
/// magic, u32 version, u64 first batch seq.
pub const LOG_HEADER_LEN: usize = 20;
/// u32 payload length, u32 crc32c of the payload.
pub const BATCH_HEADER_LEN: usize = 8;
/// The smallest payload: u64 seq and u32 record count.
const MIN_PAYLOAD: usize = 12;
/// Largest batch payload accepted; a length field above it is damage, not a batch.
pub const MAX_BATCH_BYTES: usize = 1 << 30;

pub fn log_file_name(first_seq: u64) -> String {
    format!("log-{first_seq:020}.lnl")
}

/// The first batch seq named by a log file name, if `name` is one.
pub fn parse_log_name(name: &str) -> Option<u64> {
    parse_seq_name(name, "log-", ".lnl")
}

/// One batch read back from a log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub seq: u64,
    /// When the writer committed it: microseconds since the Unix epoch (version 4 and
    /// later; strictly increasing within a file), `None` in older files.
    pub time_micros: Option<u64>,
    /// Byte offset of the batch's length field in its file.
    pub offset: u64,
    /// Byte offset just after the batch (where the next one starts).
    pub end: u64,
    pub changes: Vec<Change>,
}

/// An incomplete or unreadable last batch, with no valid batch after it: the trace of a crash
/// during a write that was therefore never acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    pub offset: u64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogContents {
    /// Seq of the file's first batch, from its header.
    pub first_seq: u64,
    /// The file's format version.
    pub version: u32,
    pub batches: Vec<Batch>,
    pub torn_tail: Option<TornTail>,
}

/// The shape of the batch at an offset, if it is intact: (payload range, end offset).
fn batch_at(bytes: &[u8], o: usize) -> Result<(usize, usize), String> {
    let left = bytes.len().saturating_sub(o);
    if left < BATCH_HEADER_LEN {
        return Err(format!("incomplete batch header ({left} bytes)"));
    }
    let word = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let len = word(o) as usize;
    let want = word(o + 4);
    if !(MIN_PAYLOAD..=MAX_BATCH_BYTES).contains(&len) {
        return Err(format!("impossible batch length {len}"));
    }
    let start = o + BATCH_HEADER_LEN;
    if len > bytes.len() - start {
        return Err(format!(
            "incomplete batch: {len} bytes announced, {} present",
            bytes.len() - start
        ));
    }
    let got = crc(&bytes[start..start + len]);
    if got != want {
        return Err(format!(
            "checksum mismatch (stored {want:#010x}, computed {got:#010x})"
        ));
    }
    Ok((start, start + len))
}

/// Whether an intact batch numbered `min_seq` or later starts anywhere at or after `from`:
/// if so, damage before it is not a torn tail but corruption.
///
/// Every position is tried, but the checksum is computed only where a plausible batch number
/// (at most one more batch than bytes in the file) is found, so scanning a damaged file stays
/// linear in practice.
fn intact_batch_after(bytes: &[u8], from: usize, min_seq: u64) -> bool {
    let end = bytes.len().saturating_sub(BATCH_HEADER_LEN + MIN_PAYLOAD);
    let max_seq = min_seq.saturating_add(bytes.len() as u64);
    (from..=end).any(|p| {
        let s = p + BATCH_HEADER_LEN;
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&bytes[s..s + 8]);
        let seq = u64::from_le_bytes(seq);
        (min_seq..=max_seq).contains(&seq) && batch_at(bytes, p).is_ok()
    })
}

/// Reads a whole log file. `name` is used in error messages.
///
/// A damaged last batch (incomplete, or failing its checksum, with no intact batch after it)
/// is returned as `torn_tail`; every other defect is `PersistError::Corrupt` with its offset.
pub fn read_log(name: &str, bytes: &[u8]) -> Result<LogContents, PersistError> {
    read_log_with(name, bytes, true)
}

/// `read_log` that checks every batch (checksum, number, framing) but decodes the records of
/// the batch that ends the file only: the others come back with no `changes`. For the archiver, which
/// needs a sealed file's batch range and newest stamps, not its entries (decoding every
/// record was most of its CPU).
pub fn read_log_last(name: &str, bytes: &[u8]) -> Result<LogContents, PersistError> {
    read_log_with(name, bytes, false)
}

fn read_log_with(name: &str, bytes: &[u8], decode_all: bool) -> Result<LogContents, PersistError> {
    let corrupt = |offset: usize, reason: String| PersistError::Corrupt {
        file: name.to_string(),
        offset: offset as u64,
        reason,
    };
    let mut r = Reader::new(bytes);
    let head = r
        .take(LOG_HEADER_LEN, "log header")
        .map_err(|e| corrupt(0, e.reason))?;
    if head[..8] != LOG_MAGIC {
        return Err(corrupt(
            0,
            "not a Linden transaction log (bad magic)".into(),
        ));
    }
    let mut r = Reader::new(&head[8..]);
    let version = r.u32_le("version").map_err(|e| corrupt(8, e.reason))?;
    let first_seq = r.u64_le("first seq").map_err(|e| corrupt(12, e.reason))?;
    if !(1..=LOG_VERSION).contains(&version) {
        return Err(corrupt(
            8,
            format!("log format version {version}; this Linden reads versions 1 to {LOG_VERSION}"),
        ));
    }
    let mut batches = Vec::new();
    let mut expected = first_seq;
    let mut o = LOG_HEADER_LEN;
    while o < bytes.len() {
        let (start, end) = match batch_at(bytes, o) {
            Ok(x) => x,
            Err(reason) => {
                if intact_batch_after(bytes, o + 1, expected) {
                    return Err(corrupt(o, format!("{reason}, and intact batches follow")));
                }
                return Ok(LogContents {
                    first_seq,
                    version,
                    batches,
                    torn_tail: Some(TornTail {
                        offset: o as u64,
                        reason,
                    }),
                });
            }
        };
        let mut p = Reader::new(&bytes[start..end]);
        let at = |e: super::codec::DecodeError| corrupt(start + e.offset, e.reason);
        let seq = p.u64_le("batch seq").map_err(at)?;
        if seq != expected {
            return Err(corrupt(
                start,
                format!("batch {seq} where batch {expected} was expected"),
            ));
        }
        let time_micros = if version >= LOG_VERSION_TIMED {
            Some(p.u64_le("batch time").map_err(at)?)
        } else {
            None
        };
        let count = p.u32_le("record count").map_err(at)? as usize;
        if !decode_all && end < bytes.len() {
            batches.push(Batch {
                seq,
                time_micros,
                offset: o as u64,
                end: end as u64,
                changes: Vec::new(),
            });
            expected += 1;
            o = end;
            continue;
        }
        let mut changes = Vec::with_capacity(count.min(p.remaining()));
        for _ in 0..count {
            let c_at = p.pos();
            let c = Change::decode(&mut p).map_err(at)?;
            if version < 2 && matches!(c, Change::Schema(_)) {
                return Err(corrupt(
                    start + c_at,
                    "schema record in a version 1 log (which cannot hold one)".into(),
                ));
            }
            if version < LOG_VERSION_PATCH && matches!(c, Change::Patch(_)) {
                return Err(corrupt(
                    start + c_at,
                    format!("patch record in a version {version} log (which cannot hold one)"),
                ));
            }
            if version < 3 && c.is_tombstone_record() {
                return Err(corrupt(
                    start + c_at,
                    format!("tombstone record in a version {version} log (which cannot hold one)"),
                ));
            }
            changes.push(c);
        }
        if !p.is_empty() {
            return Err(corrupt(
                start + p.pos(),
                format!("{} bytes after the batch's {count} records", p.remaining()),
            ));
        }
        batches.push(Batch {
            seq,
            time_micros,
            offset: o as u64,
            end: end as u64,
            changes,
        });
        expected += 1;
        o = end;
    }
    Ok(LogContents {
        first_seq,
        version,
        batches,
        torn_tail: None,
    })
}

/// How the log writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOptions {
    /// A new file is started when the current one holds at least this many bytes.
    pub rotate_bytes: u64,
    /// fsync after every batch. `false` is `durability = "nosync"`: for benchmarks only, an
    /// acknowledged write can be lost.
    pub sync: bool,
    /// Disk space reserved ahead of the data of the file being appended to, so that a batch
    /// finds its space allocated before any of its bytes is written (`IoFile::reserve`). The
    /// step only saves calls: a batch that does not fit in what is reserved reserves its own
    /// length (and this much more, where the disk has it) first.
    pub reserve_bytes: u64,
}

/// Default of `LogOptions::reserve_bytes`: 1 MiB, a few thousand typical batches per call.
pub const LOG_RESERVE_BYTES: u64 = 1 << 20;

impl Default for LogOptions {
    fn default() -> LogOptions {
        LogOptions {
            rotate_bytes: 64 << 20,
            sync: true,
            reserve_bytes: LOG_RESERVE_BYTES,
        }
    }
}

/// Appends batches to the log. Owned by the writer thread.
///
/// A full disk is not a failure of the log: a batch that finds no room is refused with
/// `PersistError::NoSpace` before any of its bytes is written (the space is reserved first),
/// or, where the file system cannot reserve, its bytes are cut off again (they were neither
/// synced nor acknowledged); it does not consume its batch number, and the next batch tries
/// again. Every other failure (a write that failed otherwise, any failed fsync) poisons it.
pub struct LogWriter {
    io: Arc<dyn Io>,
    dir: PathBuf,
    file: Box<dyn IoFile>,
    name: String,
    /// Bytes of the current file that hold its header and whole batches.
    size: u64,
    /// Bytes of the current file allocated by `IoFile::reserve` (0: none).
    reserved: u64,
    /// False once the file system said it cannot reserve space.
    can_reserve: bool,
    next_seq: u64,
    opts: LogOptions,
    /// Set by the first failed write or sync; from then on every append is refused.
    poisoned: Option<String>,
    buf: Vec<u8>,
    /// Time of the last batch written (microseconds since the epoch): each batch's time is
    /// after it, so times are strictly increasing even when the clock steps back.
    last_time: u64,
    /// When the first batch of the current file was written (`seal_due`).
    first_in_file: Option<std::time::Instant>,
}

impl LogWriter {
    /// Starts a new log file whose first batch will be `next_seq`. An existing file of that
    /// name can only hold no intact batch (recovery would otherwise have numbered past it) and
    /// is replaced atomically.
    pub fn open(
        io: Arc<dyn Io>,
        dir: &Path,
        next_seq: u64,
        opts: LogOptions,
    ) -> Result<LogWriter, PersistError> {
        io.create_dir_all(dir)
            .map_err(|e| PersistError::io(dir, e))?;
        check_fresh(&*io, dir, next_seq)?;
        let (file, name) = start_file(&*io, dir, next_seq)?;
        Ok(LogWriter {
            io,
            dir: dir.to_path_buf(),
            file,
            name,
            size: LOG_HEADER_LEN as u64,
            reserved: 0,
            can_reserve: true,
            next_seq,
            opts,
            poisoned: None,
            buf: Vec::new(),
            last_time: 0,
            first_in_file: None,
        })
    }

    /// Continues after `recover`: a new file from the batch after the last one recovered, so
    /// a torn tail left by a crash stays untouched where it is.
    pub fn open_after_recovery(
        io: Arc<dyn Io>,
        dir: &Path,
        recovered: &super::recover::Recovered,
        opts: LogOptions,
    ) -> Result<LogWriter, PersistError> {
        LogWriter::open(io, dir, recovered.last_seq + 1, opts)
    }

    /// The seq the next batch must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Name of the file being appended to.
    pub fn current_file(&self) -> &str {
        &self.name
    }

    /// Why the log refuses writes, if it does.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Writes batch `seq` (which must be `next_seq()`) with one write and, unless `nosync`,
    /// one fsync. When this returns `Ok` the batch is durable and may be acknowledged.
    /// `PersistError::NoSpace`: the disk is full; nothing of the batch is in the log and the
    /// same `seq` may be tried again. Any other write or sync failure poisons the writer: this
    /// and every later call fail.
    pub fn append_batch(&mut self, seq: u64, changes: &[Change]) -> Result<(), PersistError> {
        self.append_batch_at(seq, std::time::SystemTime::now(), changes)
    }

    /// `append_batch` with the batch's time given (or just after the previous batch's).
    pub fn append_batch_at(
        &mut self,
        seq: u64,
        time: std::time::SystemTime,
        changes: &[Change],
    ) -> Result<(), PersistError> {
        self.append_with(seq, time, changes.len(), |out| {
            for c in changes {
                c.encode(out);
            }
        })
    }

    /// Appends what one writer batch changed, read from its result `version` and the version
    /// it started from, `prev`: the schema extensions it applied (`schema`, in order), then
    /// every entry of `touched` (each id once): when `version` holds it, a Patch against its
    /// state in `prev` where that is smaller (`patch::encode_entry_change`), else the entry
    /// whole (named with `version`'s schema); deleted otherwise; then the tombstones of
    /// `tombstones.touched` (put when `version` holds one, forgotten otherwise) and the floor
    /// if it changed. The same bytes as `append_batch` of those changes
    /// (`super::batch_changes`), encoded straight from the entries without an owned copy of
    /// each.
    #[expect(
        clippy::too_many_arguments,
        reason = "one batch's parts, as `Journal::commit` gets them"
    )]
    pub fn append_version_batch(
        &mut self,
        seq: u64,
        time: std::time::SystemTime,
        prev: &crate::Version,
        version: &crate::Version,
        schema: &[String],
        touched: &[crate::EntryId],
        tombstones: &crate::TombstoneChanges,
    ) -> Result<(), PersistError> {
        let names = version.schema();
        let count =
            schema.len() + touched.len() + tombstones.touched.len() + usize::from(tombstones.floor);
        self.append_with(seq, time, count, |out| {
            for text in schema {
                super::codec::encode_schema_change(text, out);
            }
            for &id in touched {
                match version.get(id) {
                    Some(e) => {
                        super::patch::encode_entry_change(prev.get(id).map(|o| &**o), e, names, out)
                    }
                    None => super::codec::encode_delete(id, out),
                }
            }
            let ts = version.tombstones();
            for uuid in &tombstones.touched {
                match ts.get(uuid) {
                    Some(t) => super::codec::encode_tombstone(t, out),
                    None => super::codec::encode_forget(uuid, out),
                }
            }
            if tombstones.floor {
                super::codec::encode_floor(ts.floor(), out);
            }
        })
    }

    /// Frames and appends one batch of `count` changes, which `body` encodes, stamped with
    /// `time` (or just after the previous batch's time, if that is later).
    fn append_with(
        &mut self,
        seq: u64,
        time: std::time::SystemTime,
        count: usize,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), PersistError> {
        if let Some(why) = &self.poisoned {
            return Err(PersistError::Poisoned(why.clone()));
        }
        if seq != self.next_seq {
            return Err(PersistError::Usage(format!(
                "batch {seq} is out of sequence: the log expects batch {}",
                self.next_seq
            )));
        }
        let count = u32::try_from(count)
            .map_err(|_| PersistError::Usage(format!("{count} changes in one batch")))?;
        self.buf.clear();
        self.buf.extend_from_slice(&[0; BATCH_HEADER_LEN]);
        let micros = time
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .unwrap_or(0)
            .max(self.last_time.saturating_add(1));
        self.buf.extend_from_slice(&seq.to_le_bytes());
        self.buf.extend_from_slice(&micros.to_le_bytes());
        self.buf.extend_from_slice(&count.to_le_bytes());
        body(&mut self.buf);
        let len = self.buf.len() - BATCH_HEADER_LEN;
        if len > MAX_BATCH_BYTES {
            return Err(PersistError::Usage(format!(
                "batch {seq} is {len} bytes; the largest is {MAX_BATCH_BYTES}"
            )));
        }
        let sum = crc(&self.buf[BATCH_HEADER_LEN..]);
        self.buf[..4].copy_from_slice(&(len as u32).to_le_bytes());
        self.buf[4..8].copy_from_slice(&sum.to_le_bytes());

        if self.size >= self.opts.rotate_bytes && self.size > LOG_HEADER_LEN as u64 {
            self.switch_file(seq)?;
        }
        let len = self.buf.len() as u64;
        self.make_room(len)?;
        let path = self.dir.join(&self.name);
        if let Err(e) = self.file.write_all(&self.buf) {
            if !is_no_space(&e) {
                return Err(self.poison(path, "write", e));
            }
            // Out of space where none could be reserved: the bytes that landed were neither
            // synced nor acknowledged; cut them off, and the file is as it was.
            return Err(match self.file.truncate(self.size) {
                Ok(()) => {
                    self.reserved = self.reserved.min(self.size);
                    self.no_space(path, e)
                }
                Err(t) => {
                    self.poisoned = Some(format!(
                        "a write to {} failed ({e}), and cutting it off again failed too: {t}",
                        path.display()
                    ));
                    PersistError::io(path, t)
                }
            });
        }
        if self.opts.sync {
            if let Err(e) = self.file.sync() {
                return Err(self.poison(path, "fsync", e));
            }
        }
        self.size += len;
        self.next_seq += 1;
        self.last_time = micros;
        if self.first_in_file.is_none() {
            self.first_in_file = Some(std::time::Instant::now());
        }
        Ok(())
    }

    /// Whether the current file holds a batch written `interval` ago or earlier: then
    /// `rotate` seals it so that it can be archived (`archive_interval`).
    pub fn seal_due(&self, interval: std::time::Duration) -> bool {
        self.first_in_file.is_some_and(|t| t.elapsed() >= interval)
    }

    /// Makes sure the current file has space allocated for `len` more bytes after `size`,
    /// before any of them is written: `reserve_bytes` ahead if the disk has it, else just
    /// `len`. `NoSpace` if not even that fits. Other failures to reserve (a file system that
    /// cannot) leave the batch to its write, which is cut off again if the disk is full.
    fn make_room(&mut self, len: u64) -> Result<(), PersistError> {
        let end = self.size.saturating_add(len);
        if !self.can_reserve || end <= self.reserved {
            return Ok(());
        }
        let ahead = end.saturating_add(self.opts.reserve_bytes);
        for want in [ahead, end] {
            match self.file.reserve(want) {
                Ok(()) => {
                    self.reserved = want;
                    return Ok(());
                }
                Err(e) if is_no_space(&e) => {
                    if want == end {
                        let path = self.dir.join(&self.name);
                        return Err(self.no_space(path, e));
                    }
                }
                Err(e) => {
                    if e.kind() == std::io::ErrorKind::Unsupported {
                        self.can_reserve = false;
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Starts a new file at the next batch now, so that every earlier file holds only batches
    /// a snapshot of the current version covers (see `prune`). `NoSpace` leaves the current
    /// file in use, and may be tried again.
    pub fn rotate(&mut self) -> Result<(), PersistError> {
        if let Some(why) = &self.poisoned {
            return Err(PersistError::Poisoned(why.clone()));
        }
        if self.size > LOG_HEADER_LEN as u64 {
            self.switch_file(self.next_seq)?;
        }
        Ok(())
    }

    fn switch_file(&mut self, seq: u64) -> Result<(), PersistError> {
        match start_file(&*self.io, &self.dir, seq) {
            Ok((file, name)) => {
                let mut sealed = std::mem::replace(&mut self.file, file);
                // The sealed file keeps the space of its data only. Its bytes are all synced,
                // and this does not change them; if it fails, the space stays reserved until
                // the file is pruned.
                if self.reserved > self.size {
                    let _ = sealed.truncate(self.size);
                }
                self.name = name;
                self.size = LOG_HEADER_LEN as u64;
                self.reserved = 0;
                self.first_in_file = None;
                Ok(())
            }
            // `start_file` removed what it had created: nothing changed.
            Err(e @ PersistError::NoSpace { .. }) => Err(e),
            Err(e) => {
                let why = e.to_string();
                self.poisoned = Some(why);
                Err(e)
            }
        }
    }

    fn poison(&mut self, path: PathBuf, what: &str, e: std::io::Error) -> PersistError {
        self.poisoned = Some(format!("{what} of {} failed: {e}", path.display()));
        PersistError::io(path, e)
    }

    fn no_space(&self, path: PathBuf, source: std::io::Error) -> PersistError {
        PersistError::NoSpace {
            dir: self.dir.clone(),
            path,
            source,
        }
    }
}

/// Refuses to start writing at `next_seq` where that would mix with data already there: a
/// snapshot or log file at or past `next_seq` (other than a file of that very name holding no
/// intact batch, i.e. only a torn tail or nothing). Guards against opening without recovering.
fn check_fresh(io: &dyn Io, dir: &Path, next_seq: u64) -> Result<(), PersistError> {
    let names = io.list(dir).map_err(|e| PersistError::io(dir, e))?;
    // The newest earlier log file must end before `next_seq`.
    let earlier = names
        .iter()
        .filter_map(|n| parse_log_name(n).map(|s| (s, n)))
        .filter(|(s, _)| *s < next_seq)
        .max();
    if let Some((_, n)) = earlier {
        let p = dir.join(n);
        let bytes = io.read(&p).map_err(|e| PersistError::io(p, e))?;
        let last = read_log(n, &bytes)?.batches.last().map(|b| b.seq);
        if last.is_some_and(|l| l >= next_seq) {
            return Err(PersistError::Usage(format!(
                "{}: {n} already holds batch {next_seq} or later; recover before opening the log",
                dir.display()
            )));
        }
    }
    for n in names {
        let later_snapshot =
            super::snapshot::parse_snapshot_name(&n).is_some_and(|s| s >= next_seq);
        let log = parse_log_name(&n);
        let replaceable = log == Some(next_seq) && {
            let p = dir.join(&n);
            let bytes = io.read(&p).map_err(|e| PersistError::io(p, e))?;
            read_log(&n, &bytes).is_ok_and(|l| l.batches.is_empty())
        };
        if later_snapshot || (log.is_some_and(|s| s >= next_seq) && !replaceable) {
            return Err(PersistError::Usage(format!(
                "{}: {n} already holds batch {next_seq} or later; recover before opening the log",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Creates `log-<seq>.lnl` durably with its header: written to a temporary name, synced,
/// renamed, directory synced. A log file therefore always has a whole header.
///
/// A full disk (at the creation, the header's write or the rename) is `NoSpace`, with the
/// temporary file removed again: nothing changed, and the caller may try again later. Any
/// other failure is `Io` (the temporary file is removed too where it can be).
fn start_file(
    io: &dyn Io,
    dir: &Path,
    first_seq: u64,
) -> Result<(Box<dyn IoFile>, String), PersistError> {
    let name = log_file_name(first_seq);
    let path = dir.join(&name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut head = Vec::with_capacity(LOG_HEADER_LEN);
    head.extend_from_slice(&LOG_MAGIC);
    head.extend_from_slice(&LOG_VERSION.to_le_bytes());
    head.extend_from_slice(&first_seq.to_le_bytes());
    let failed = |at: &Path, e: std::io::Error| {
        if is_no_space(&e) {
            PersistError::NoSpace {
                dir: dir.to_path_buf(),
                path: at.to_path_buf(),
                source: e,
            }
        } else {
            PersistError::io(at, e)
        }
    };
    let mut f = io.create(&tmp).map_err(|e| failed(&tmp, e))?;
    if let Err(e) = f.write_all(&head) {
        let _ = io.remove(&tmp);
        return Err(failed(&tmp, e));
    }
    if let Err(e) = f.sync() {
        let _ = io.remove(&tmp);
        // Never `NoSpace`: a failed fsync is not retried, whatever it says.
        return Err(PersistError::io(&tmp, e));
    }
    if let Err(e) = io.rename(&tmp, &path) {
        let _ = io.remove(&tmp);
        return Err(failed(&path, e));
    }
    io.sync_dir(dir).map_err(|e| PersistError::io(dir, e))?;
    Ok((f, name))
}
