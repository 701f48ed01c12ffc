//! Bulk import and export, with the server stopped (the server's `bulk` module builds the
//! directory an import checks against from the configuration).
//!
//! Import reads LDIF (RFC 2849, e.g. `slapcat` or `linden gen` output), builds and checks each
//! entry exactly as an add operation does (schema, syntax, password hashing) on all cores,
//! places them in file order (parents before children) with the add operation's placement
//! checks, and writes one snapshot straight into an empty data directory: no transaction log
//! is written. Operational attributes in the input (createTimestamp, entryUUID, …) are kept.
//!
//! The pipeline: one thread reads the file and cuts it at blank lines into blocks of whole
//! records (`cut_blocks`); every core parses blocks (values borrowed from the reader, no
//! allocation per value) and builds their entries, the common record through `fast` and any
//! other through `add::build` (which hashes clear-text passwords: blocks holding them are cut
//! short, `cleartext`, so that hashing runs on every core); this thread places the blocks in file order against a DN table
//! (`ImportTree`), then writes the snapshot (`store::persist::write_snapshot_bulk`). Memory is
//! bounded by `BLOCKS_AHEAD` blocks per core in flight, whatever the file's size.
//!
//! Export recovers a data directory read-only (snapshot + logs, as a start would) and writes
//! every entry, operational attributes included, as LDIF: import → export → import gives the
//! same data. It can run against the directory of a running server: it sees the state of the
//! last batch whose log write had completed.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use proto::ResultCode;
use store::{Entry, EntryId};

use crate::add;
use crate::error::{LdapError, LdapResult};
use crate::overlays::MemberOfSpec;
use crate::Dit;

mod cleartext;
mod fast;

/// Entries between progress reports.
const CHUNK: usize = 20_000;

#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Skip bad records (and list them) instead of stopping at the first.
    pub continue_on_error: bool,
    /// Threads that build entries. Default: all cores.
    pub threads: usize,
    /// The input's size in bytes, when known: the DN table is sized for it after the first
    /// block instead of growing (and rehashing) as it fills.
    pub input_bytes: Option<u64>,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            continue_on_error: false,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            input_bytes: None,
        }
    }
}

/// A record that was not imported: its first LDIF line and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub line: usize,
    pub message: String,
}

#[derive(Debug)]
pub struct ImportReport {
    pub entries: u64,
    pub rejected: Vec<Rejected>,
    pub snapshot: String,
    pub snapshot_bytes: u64,
    pub seconds: f64,
    /// Of `seconds`, writing and syncing the snapshot (after the last entry was placed).
    pub snapshot_seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    /// A setting the import's server configuration cannot use (suffix, admin DN, index, …).
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Setup(String),
    /// Import stopped at a bad record (without `continue_on_error`); nothing was written.
    #[error("line {}: {}", .0.line, .0.message)]
    Record(Rejected),
    #[error("{0}")]
    Storage(String),
}

/// Bytes of LDIF handed to a building thread at a time (cut at a record boundary).
const BLOCK: usize = 2 << 20;

/// Blocks read ahead of the one being placed, per building thread: bounds the memory of an
/// import whatever the file's size.
const BLOCKS_AHEAD: usize = 4;

fn has_store_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.filter_map(Result::ok).any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("snap-") || n.starts_with("log-")
        })
    })
}

/// The entries an import has placed, in file order with ids 1, 2, …, and their positions by
/// normalized DN: what `add::locate` needs to know of the tree so far.
#[derive(Default)]
struct ImportTree {
    entries: Vec<Entry>,
    /// Positions in `entries` by the hash of their normalized DN (32 bits of it kept beside
    /// each position, so growing the table reads no entry); a match is confirmed against the
    /// entry's own normalized DN, so no DN is stored twice. FxHash rather than the server's
    /// keyed SipHash: the input is the administrator's own file, and this table is the part
    /// of an import that runs on one thread. 8 bytes a slot rather than 16: inserting into a
    /// table of millions is a cache miss per entry, and a smaller table misses less.
    by_dn: hashbrown::HashTable<(u32, u32)>,
    /// The last parent found (normalized DN, position): entries come in runs under one parent.
    last_parent: std::cell::RefCell<(String, u32)>,
}

/// The 32 bits of a normalized DN's hash kept in `ImportTree::by_dn`.
fn dn_hash(norm: &str) -> u32 {
    use std::hash::BuildHasher;
    let h = std::hash::BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(norm);
    (h >> 32) as u32
}

/// The table's hash of a slot with these 32 bits: spread over 64 (an odd multiplier is a
/// bijection), so that the table's control bytes, taken from the top bits, still tell slots
/// apart.
fn slot_hash(h: u32) -> u64 {
    u64::from(h).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl ImportTree {
    /// The id the next placed entry gets.
    fn next_id(&self) -> EntryId {
        // Ids are 32-bit by design; an LDIF file of four billion entries does not fit in memory.
        EntryId::try_from(self.entries.len() + 1).unwrap_or(EntryId::MAX)
    }

    fn reserve(&mut self, entries: usize) {
        self.entries.reserve(entries);
        self.by_dn.reserve(entries, |&(h, _)| slot_hash(h));
    }

    /// The position of the entry with this normalized DN.
    fn position(&self, norm: &str, hash: u32) -> Option<u32> {
        self.by_dn
            .find(slot_hash(hash), |&(h, at)| {
                h == hash && self.entries[at as usize].ndn_str() == norm
            })
            .map(|&(_, at)| at)
    }

    /// Places a built entry (`add::locate`, then its id, parent and stored DN).
    fn place(&mut self, shared: &Dit, b: Prepared) -> LdapResult<()> {
        let mut e = b.entry;
        match add::locate(shared, self, &b.norm)? {
            add::Site::Root => {}
            add::Site::Under(pid, pdn) => {
                e.parent = Some(pid);
                let dn = e.dn();
                // Built with the DN as parsed; the parent's stored spelling may differ.
                let (rdn, rest) = dn.split_at(b.rdn_len.min(dn.len()));
                if rest.strip_prefix(',') != Some(pdn) {
                    let dn = add::stored_dn(rdn, pdn);
                    e = e.renamed(&dn, &e.ndn(&shared.schema()), Some(pid));
                }
            }
        }
        e.id = self.next_id();
        let at = u32::try_from(self.entries.len()).unwrap_or(u32::MAX);
        let h = dn_hash(&b.norm);
        self.by_dn
            .insert_unique(slot_hash(h), (h, at), |&(h, _)| slot_hash(h));
        self.entries.push(e);
        Ok(())
    }
}

impl add::Tree for ImportTree {
    fn find(&self, ndn: &str) -> Option<(EntryId, &str)> {
        let mut last = self.last_parent.borrow_mut();
        let at = if last.0 == ndn {
            last.1
        } else {
            let at = self.position(ndn, dn_hash(ndn))?;
            // Only entries that were found (parents: a new entry's own DN is not there).
            last.0.clear();
            last.0.push_str(ndn);
            last.1 = at;
            at
        };
        let e = &self.entries[at as usize];
        Some((e.id, e.dn()))
    }

    fn missing_parent(&self, _shared: &Dit, _norm: &str) -> LdapError {
        LdapError::new(
            ResultCode::NoSuchObject,
            "the parent entry does not exist (in LDIF a parent comes before its children)",
        )
    }
}

/// A piece of the LDIF file holding whole records, as the reading thread cut it.
struct Block {
    /// Position in the file (0, 1, …): blocks are placed in this order.
    seq: usize,
    /// Lines of the file before this block.
    lines_before: usize,
    /// Whether this block may hold the `version:` line (nothing but blank lines and comments
    /// came before it).
    at_start: bool,
    text: Vec<u8>,
    /// Reading the file failed after this block: the import stops here.
    error: Option<Rejected>,
}

/// A block's records built into entries (or why not), in file order.
struct BuiltBlock {
    seq: usize,
    /// The block's size in the file.
    bytes: usize,
    records: Vec<Built>,
    /// The LDIF reader stopped in this block (I/O error, record over the size limit): nothing
    /// after it is imported.
    fatal: bool,
}

/// Imports LDIF into `dir`, which must hold no directory yet, as the directory `dit` (an
/// empty one in memory, built from the configuration by the caller) would take it: its schema,
/// naming contexts and memberOf configuration (`memberof`); entries are stamped as added by
/// `admin_dn`. `progress(entries, bytes_read)` is called every `CHUNK` entries or so.
///
/// One thread reads the file and cuts it into blocks of whole records (`BLOCK` bytes, at a
/// blank line); every core parses blocks and builds, schema-checks, stamps and packs their
/// entries; this thread places them in file order (existence, parent, stored DN) against a DN
/// table. The store's writer and its indexes are not involved: the snapshot is written
/// straight from the placed entries, and indexes are built when a server loads it.
pub fn import(
    dit: &Dit,
    memberof: &MemberOfSpec,
    admin_dn: &str,
    dir: &Path,
    input: impl Read + Send,
    opts: &ImportOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ImportReport, BulkError> {
    let t = Instant::now();
    if has_store_files(dir) {
        return Err(BulkError::Setup(format!(
            "{} already holds a directory (snap-*/log-* files): import writes into an empty data directory; move those files away or choose another --data",
            dir.display()
        )));
    }
    let shared = dit;
    let read = Arc::new(AtomicU64::new(0));
    let mut rejected: Vec<Rejected> = Vec::new();
    let threads = opts.threads.max(1);
    let keep_going = opts.continue_on_error;
    let mut tree = ImportTree::default();
    // One time and one entryCSN for the whole import (it is one batch), stamped while entries
    // are built; entries that carry their own (slapcat output) keep them.
    let now = SystemTime::now();
    let stamp_time = crate::write::generalized_time(now);
    let stamps = add::Stamps::new(shared, admin_dn, &stamp_time, &shared.csn.next(now));
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<BuiltBlock>(threads);
    // A block may be read only when fewer than `BLOCKS_AHEAD * threads` await placing.
    let (slot_tx, slot_rx) = std::sync::mpsc::sync_channel::<()>(BLOCKS_AHEAD * threads);
    for _ in 0..BLOCKS_AHEAD * threads {
        let _ = slot_tx.send(());
    }
    // The work queue holds every block that may be in flight, so the reading thread never
    // blocks on it and stops as soon as the slots' sender is gone.
    let (work_tx, work_rx) = std::sync::mpsc::sync_channel::<Block>(BLOCKS_AHEAD * threads);
    let work_rx = Mutex::new(work_rx);
    let outcome = std::thread::scope(|s| -> Result<(), BulkError> {
        // Owned here, so that returning early (at an error) stops the other threads.
        let (done_rx, slot_tx) = (done_rx, slot_tx);
        let counter = read.clone();
        s.spawn(move || cut_blocks(input, &counter, &work_tx, &slot_rx));
        for _ in 0..threads {
            let (rx, tx, sh, stamps) = (&work_rx, done_tx.clone(), shared, &stamps);
            s.spawn(move || {
                let mut fast = fast::FastBuild::default();
                loop {
                    // The lock is held only to take the next block.
                    let next = rx.lock().map_or(None, |r| r.recv().ok());
                    let Some(block) = next else { break };
                    // The receiver is gone when the import stopped at an error.
                    if tx.send(build_block(sh, block, stamps, &mut fast)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        let mut waiting: BTreeMap<usize, BuiltBlock> = BTreeMap::new();
        let mut next = 0;
        let mut reported = 0;
        for b in done_rx.iter() {
            waiting.insert(b.seq, b);
            while let Some(b) = waiting.remove(&next) {
                next += 1;
                if let (1, Some(total)) = (next, opts.input_bytes) {
                    // As many entries per byte as in the first block, and a little more.
                    let per = b.records.len() as f64 / b.bytes.max(1) as f64;
                    tree.reserve((total as f64 * per * 1.05) as usize);
                }
                for (line, r) in b.records {
                    match r.and_then(|b| tree.place(shared, b).map_err(|e| e.message)) {
                        Ok(()) => {}
                        Err(message) if keep_going => rejected.push(Rejected { line, message }),
                        Err(message) => return Err(BulkError::Record(Rejected { line, message })),
                    }
                }
                if b.fatal {
                    return Ok(());
                }
                let _ = slot_tx.send(());
                if tree.entries.len() >= reported + CHUNK {
                    reported = tree.entries.len();
                    progress(reported as u64, read.load(Ordering::Relaxed));
                }
            }
        }
        Ok(())
    });
    // Returning (at an error) dropped the receivers: the other threads have stopped.
    outcome?;
    progress(tree.entries.len() as u64, read.load(Ordering::Relaxed));
    compute_member_of(shared, memberof, &mut tree);
    let placed = t.elapsed().as_secs_f64();
    let info = store::persist::write_snapshot_bulk(
        &store::persist::FsIo,
        dir,
        IMPORT_SEQ,
        tree.next_id(),
        &tree.entries,
        &shared.schema(),
    )
    .map_err(|e| BulkError::Storage(e.to_string()))?;
    rejected.sort_by_key(|r| r.line);
    Ok(ImportReport {
        entries: tree.entries.len() as u64,
        rejected,
        snapshot: info.name,
        snapshot_bytes: info.bytes,
        seconds: t.elapsed().as_secs_f64(),
        snapshot_seconds: t.elapsed().as_secs_f64() - placed,
    })
}

/// memberOf for the imported entries when the configuration maintains it (`memberof`). The
/// write path keeps it change by change (`overlays::memberof`); an import runs no overlay, so
/// it is worked out once here from the groups imported, in one pass over them. Values an entry
/// already carries (slapcat output of a slapd with the memberof overlay) are kept.
fn compute_member_of(shared: &Dit, spec: &MemberOfSpec, tree: &mut ImportTree) {
    if !spec.memberof {
        return;
    }
    let schema = shared.schema();
    let Some(member_of) = schema.attr_by_name("memberOf") else {
        return;
    };
    let oc = shared.known.object_class;
    // The classes and member attributes were checked when the server was built.
    let groups = spec.group_kinds(&schema).unwrap_or_default();
    let mut of: std::collections::HashMap<u32, Vec<Box<[u8]>>> = Default::default();
    for e in &tree.entries {
        for (class, member) in &groups {
            if !e.has_value(oc, class) {
                continue;
            }
            let Some(a) = e.attr(*member) else { continue };
            for norm in a.norm() {
                let Ok(n) = std::str::from_utf8(norm) else {
                    continue;
                };
                if let Some(at) = tree.position(n, dn_hash(n)) {
                    of.entry(at).or_default().push(e.dn().as_bytes().into());
                }
            }
        }
    }
    for (at, dns) in of {
        let Some(e) = tree.entries.get(at as usize) else {
            continue;
        };
        let mut attrs = e.to_attrs();
        let mut values: Vec<Box<[u8]>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let old = attrs
            .iter()
            .filter(|a| a.ty == member_of && a.options.is_empty())
            .flat_map(|a| a.values.iter().cloned());
        for v in old.collect::<Vec<_>>().into_iter().chain(dns) {
            if seen.insert(
                schema
                    .normalize_eq(member_of, &v)
                    .unwrap_or_else(|_| v.to_vec()),
            ) {
                values.push(v);
            }
        }
        attrs.retain(|a| !(a.ty == member_of && a.options.is_empty()));
        if let Ok(a) = store::Attr::new(&schema, member_of, "", values) {
            attrs.push(a);
        }
        let rebuilt = Entry::new(e.id, e.parent, e.dn(), &e.ndn(&schema), &attrs);
        tree.entries[at as usize] = rebuilt;
    }
}

/// The batch number an imported snapshot holds: the import counts as the directory's first
/// batch, and the transaction log of the first server on it continues from the next.
const IMPORT_SEQ: u64 = 1;

/// Reads `input` and cuts it into blocks of whole records, each ending at a blank line, for
/// the building threads; waits for a free slot (`slots`) before each block.
fn cut_blocks(
    mut input: impl Read,
    read: &AtomicU64,
    out: &SyncSender<Block>,
    slots: &Receiver<()>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(2 * BLOCK);
    let mut lines = 0;
    let mut at_start = true;
    for seq in 0.. {
        if slots.recv().is_err() {
            return;
        }
        // Fill up to BLOCK bytes, or more until a record ends (a record may be long).
        let mut error = None;
        let mut eof = false;
        let cut = loop {
            if buf.len() >= BLOCK {
                if let Some(cut) = record_boundary(&buf[BLOCK / 2..]) {
                    break BLOCK / 2 + cut;
                }
                // No record ends in reach: the reader will stop at the record's size limit.
                if buf.len() > ldif::DEFAULT_MAX_RECORD_LEN + BLOCK {
                    break buf.len();
                }
            }
            let have = buf.len();
            buf.resize(have + BLOCK, 0);
            match input.read(&mut buf[have..]) {
                Ok(0) => {
                    buf.truncate(have);
                    eof = true;
                    break have;
                }
                Ok(n) => {
                    buf.truncate(have + n);
                    read.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(have),
                Err(e) => {
                    buf.truncate(have);
                    error = Some(e);
                    break have;
                }
            }
        };
        // Clear-text passwords: a shorter block, so that every core hashes (`cleartext`).
        let (cut, eof) = match error
            .is_none()
            .then(|| cleartext::cut(&buf[..cut], cleartext::HASHED_PER_BLOCK))
        {
            Some(Some(short)) => (short, false),
            _ => (cut, eof),
        };
        let rest = buf.split_off(cut);
        let text = std::mem::replace(&mut buf, rest);
        let block_lines = text.iter().filter(|&&b| b == b'\n').count();
        let error = error.map(|e| Rejected {
            line: lines + block_lines + 1,
            message: format!("read error: {e}"),
        });
        let last = eof || error.is_some();
        let block = Block {
            seq,
            lines_before: lines,
            at_start,
            error,
            text,
        };
        at_start = at_start && !has_record_line(&block.text);
        lines += block_lines;
        // The receiver is gone when the import stopped at an error.
        if out.send(block).is_err() || last {
            return;
        }
    }
}

/// Where the last blank line of `text` ends (so that a block cut there holds whole records).
fn record_boundary(text: &[u8]) -> Option<usize> {
    let mut end = text.len();
    while let Some(i) = text[..end].iter().rposition(|&b| b == b'\n') {
        let before = &text[..i];
        if before.ends_with(b"\n") || before.ends_with(b"\n\r") {
            return Some(i + 1);
        }
        end = i;
    }
    None
}

/// Whether `text` has a line that is neither blank, a comment nor a continuation: one that
/// starts a record (or is `version:`).
fn has_record_line(text: &[u8]) -> bool {
    text.split(|&b| b == b'\n')
        .any(|l| !matches!(l.first(), None | Some(b'#' | b' ' | b'\r')))
}

/// Parses one block and builds its entries, in file order; LDIF errors come as failed records.
fn build_block(
    shared: &Dit,
    block: Block,
    stamps: &add::Stamps,
    fast: &mut fast::FastBuild,
) -> BuiltBlock {
    let mut records: Vec<Built> = Vec::with_capacity(block.text.len() / 256);
    let mut fatal = false;
    let mut reader =
        ldif::Reader::new(&block.text[..]).part_of_file(block.lines_before, block.at_start);
    while let Some(rec) = reader.next_borrowed() {
        match rec {
            Ok(ldif::RecordRef::Content(e)) => {
                let built = match fast.build(shared, &e.dn, &e.attrs, stamps) {
                    Some(p) => Ok(p),
                    None => build_one(shared, &e.dn, &e.attrs, stamps),
                };
                records.push((e.line, built));
            }
            Ok(ldif::RecordRef::Change(r)) => records.push((
                r.line(),
                Err("change records are not imported (apply them with ldapmodify)".into()),
            )),
            Err(e) => {
                fatal |= matches!(e.kind, ldif::ErrorKind::Io | ldif::ErrorKind::TooLong);
                records.push((e.line, Err(e.message)));
            }
        }
    }
    if let Some(e) = block.error {
        records.push((e.line, Err(e.message)));
        fatal = true;
    }
    BuiltBlock {
        seq: block.seq,
        bytes: block.text.len(),
        records,
        fatal,
    }
}

/// An LDIF record built into an entry (or why not), with its line number.
type Built = (usize, Result<Prepared, String>);

/// An entry built and packed, waiting to be placed: id 0, no parent, stored under its DN as
/// parsed (RFC 4514 form), whose first `rdn_len` bytes are its RDN; `norm` is its normalized
/// DN.
struct Prepared {
    entry: Entry,
    norm: String,
    rdn_len: usize,
}

/// Builds and schema-checks one record as an add would (`add::build`, trusting server-kept
/// attributes), stamps the server-kept attributes it lacks (`add::stamp_new`) and packs it.
fn build_one(
    shared: &Dit,
    dn: &str,
    attrs: &[ldif::AttrRef<'_>],
    stamps: &add::Stamps,
) -> Result<Prepared, String> {
    let input = add::group_values(attrs);
    let mut e = add::build(shared, dn.as_bytes(), &input, true)
        .map_err(|e| format!("{dn}: {}", e.message))?;
    add::stamp_new(shared, &mut e.attrs, stamps);
    Ok(Prepared {
        entry: Entry::new(0, None, &e.dn, &e.ndn, &e.attrs),
        norm: e.ndn.norm,
        rdn_len: e.rdn_len,
    })
}

/// Writes every entry of the data directory `dir` as LDIF (parents before children, with
/// operational attributes). `schema` is the configured one (`configured_schema`); the
/// extensions stored in `dir` are applied to it. Returns the number of entries.
pub fn export(dir: &Path, schema: &schema::Schema, out: impl Write) -> Result<u64, BulkError> {
    let rec = store::persist::recover(&store::persist::FsIo, dir, schema)
        .map_err(|e| BulkError::Storage(e.to_string()))?;
    // Named with the recovered schema: it includes the extensions stored in `dir`.
    let schema = &*rec.schema;
    let mut w = ldif::Writer::new(std::io::BufWriter::with_capacity(1 << 20, out));
    let io_err = |e: std::io::Error| BulkError::Storage(format!("writing LDIF: {e}"));
    w.write_version().map_err(io_err)?;
    for e in &rec.entries {
        let names: Vec<String> = e
            .attrs()
            .map(|a| format!("{}{}", schema.attr(a.ty).name(), a.options))
            .collect();
        let pairs = e
            .attrs()
            .zip(&names)
            .flat_map(|(a, n)| a.values().map(move |v| (n.as_str(), v)));
        w.write_entry(e.dn(), pairs).map_err(io_err)?;
    }
    w.flush().map_err(io_err)?;
    Ok(rec.entries.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks holding clear-text passwords are cut short so that the building threads (every
    /// core) share the hashing; the blocks still hold the whole input, in order, at record
    /// boundaries.
    #[test]
    fn cleartext_records_are_spread_over_many_blocks() {
        let record = |i: usize, pw: &str| {
            format!("dn: uid=u{i},dc=x\nobjectClass: account\nuid: u{i}\nuserPassword: {pw}\n\n")
        };
        let clear: String = (0..200).map(|i| record(i, "secret")).collect();
        let hashed: String = (0..200).map(|i| record(i, "{SSHA}abcd")).collect();
        for (text, least, most) in [
            (&clear, 200 / cleartext::HASHED_PER_BLOCK, usize::MAX),
            (&hashed, 1, 1),
        ] {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Block>(1000);
            let (slot_tx, slot_rx) = std::sync::mpsc::sync_channel::<()>(1000);
            for _ in 0..1000 {
                slot_tx.send(()).expect("slot");
            }
            cut_blocks(text.as_bytes(), &AtomicU64::new(0), &tx, &slot_rx);
            drop(tx);
            let blocks: Vec<Block> = rx.iter().collect();
            assert!(
                (least..=most).contains(&blocks.len()),
                "{} blocks",
                blocks.len()
            );
            let joined: Vec<u8> = blocks.iter().flat_map(|b| b.text.clone()).collect();
            assert_eq!(joined, text.as_bytes());
            for b in &blocks {
                assert!(
                    b.text.ends_with(b"\n\n"),
                    "a block ends at a record boundary"
                );
            }
        }
    }
}
