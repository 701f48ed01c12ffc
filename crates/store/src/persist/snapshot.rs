//! Snapshots: `snap-<seq, 20 digits>.lns`, the whole directory as of batch `seq`, in
//! checksummed chunks that decode in parallel. Format in `docs/storage-format.md`.
//!
//! The entry count of a snapshot is not known until its last entry is written and files are
//! written strictly in order (no seeking), so the chunk index lives in a footer at the end,
//! guarded by a checksum over the header and the index: a truncated file has no valid footer.

use std::path::Path;

use schema::Schema;

use super::codec::{
    decode_entry, decode_strings, decode_tombstone, put_bytes, put_ids, put_varint, Reader,
};
use super::io::{Io, IoRead, MemRead};
use super::{crc, parse_seq_name, PersistError};
use crate::entry::{Entry, EntryId, Pair};
use crate::tombstone::Tombstones;

pub const SNAP_MAGIC: [u8; 8] = *b"LNDNSNAP";
pub const SNAP_END_MAGIC: [u8; 8] = *b"LNDNSEND";
/// The version written. Version 1 (raw values named by type name, re-normalized on load),
/// version 2 (packed entries, no schema extensions), version 3 (packed entries of layout 1)
/// and version 4 (no tombstone section) are still read.
pub const SNAP_VERSION: u32 = 5;
/// magic, u32 version, u64 seq, u64 next_id.
pub const SNAP_HEADER_LEN: usize = 28;
/// u32 crc, u32 footer length, end magic.
const TRAILER_LEN: usize = 16;
/// u64 offset, u32 length, u32 entry count.
const INDEX_ENTRY_LEN: usize = 16;
pub const DEFAULT_CHUNK_ENTRIES: usize = 8_192;
/// A chunk is closed early at this size, whatever its entry count.
const MAX_CHUNK_BYTES: usize = 64 << 20;

pub fn snapshot_file_name(seq: u64) -> String {
    format!("snap-{seq:020}.lns")
}

pub fn parse_snapshot_name(name: &str) -> Option<u64> {
    parse_seq_name(name, "snap-", ".lns")
}

/// Bumped whenever a change to the code makes some value normalize differently, so snapshots
/// holding the old normalized forms are rebuilt from their raw values instead of trusted.
const NORMALIZATION_REVISION: u32 = 1;

/// What a version 2 snapshot's packed entries depend on: every attribute type definition in
/// id order (ids, names, matching rules, syntaxes) and the normalization code's revision.
pub fn schema_fingerprint(schema: &Schema) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(NORMALIZATION_REVISION.to_le_bytes());
    for (_, a) in schema.attrs() {
        h.update((a.definition.len() as u64).to_le_bytes());
        h.update(a.definition.as_bytes());
    }
    h.finalize().into()
}

/// The schema section of a version 2 snapshot (after the header, before the chunks): the
/// fingerprint of the schema the entries were packed with and the canonical name of each
/// attribute id, so that a snapshot packed under another schema can still be read (by name),
/// and the interned value pairs its entries refer to by number (`crate::intern`).
fn schema_section(schema: &Schema) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&schema_fingerprint(schema));
    put_varint(&mut payload, schema.attr_count() as u64);
    for (_, a) in schema.attrs() {
        put_bytes(&mut payload, a.name().as_bytes());
    }
    // Every entry being written was made before this call, so it refers only to ids below
    // the table's length now.
    let n = crate::intern::len();
    put_varint(&mut payload, u64::from(n));
    for id in 0..n {
        let (raw, norm) = crate::intern::get(id).unwrap_or((&[], &[]));
        put_bytes(&mut payload, raw);
        put_bytes(&mut payload, norm);
    }
    // Version 3: the schema extensions the entries may use, applied on load before them.
    put_bytes(&mut payload, schema.extensions().as_bytes());
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// The tombstone section of a version 5 snapshot (after the schema section, before the
/// chunks): the floor, then every tombstone, oldest delete first.
fn tombstone_section(t: &Tombstones) -> Vec<u8> {
    let mut payload = Vec::new();
    put_varint(&mut payload, t.floor().len() as u64);
    for c in t.floor() {
        put_bytes(&mut payload, c.as_bytes());
    }
    put_varint(&mut payload, t.len() as u64);
    for x in t.iter() {
        for s in [&x.uuid, &x.dn, &x.csn, &x.seen] {
            put_bytes(&mut payload, s.as_bytes());
        }
    }
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Encodes one version 2 entry record.
fn encode_packed(e: &Entry, out: &mut Vec<u8>) {
    put_ids(out, e.id, e.parent);
    put_bytes(out, e.packed());
}

/// A snapshot read back.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The last batch whose changes it includes.
    pub seq: u64,
    pub next_id: EntryId,
    pub entries: Vec<Entry>,
    pub chunks: usize,
    /// The schema the entries were read with when the snapshot carries schema extensions
    /// (version 3): the given schema plus those extensions. `None`: the given schema.
    pub extended: Option<Schema>,
    /// The tombstones of deleted entries (version 5; none before).
    pub tombstones: Tombstones,
}

/// What `write_snapshot` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub name: String,
    pub entries: u64,
    pub chunks: usize,
    pub bytes: u64,
}

/// Writes a snapshot of `entries` and `tombstones` as of batch `seq`, durably and atomically:
/// to `snap-<seq>.lns.tmp`, fsync, rename, fsync of the directory.
pub fn write_snapshot<'a>(
    io: &dyn Io,
    dir: &Path,
    seq: u64,
    next_id: EntryId,
    entries: impl Iterator<Item = &'a Entry>,
    schema: &Schema,
    tombstones: &Tombstones,
) -> Result<SnapshotInfo, PersistError> {
    write_snapshot_chunked(
        io,
        dir,
        seq,
        next_id,
        entries,
        schema,
        tombstones,
        DEFAULT_CHUNK_ENTRIES,
    )
}

/// Bytes written to a snapshot between intermediate fsyncs (a chunk is written in pieces of
/// this size). Frequent syncs spread the snapshot's disk writes over its (paced) duration
/// instead of sending ~26 MB at a time in front of the transaction log's fsyncs (measured:
/// modifies during a 1M snapshot −9 % median over four runs with 2 MiB, against −11 % with
/// 65,536-entry chunks); at 256 KiB a log fsync queued behind a piece waits for under a
/// millisecond of this disk's writing (BENCHMARKS.md, "snapshot impact").
const SYNC_EVERY_BYTES: usize = 256 << 10;

/// `write_snapshot` with `chunk_entries` entries per chunk and no tombstones.
pub fn write_snapshot_with<'a>(
    io: &dyn Io,
    dir: &Path,
    seq: u64,
    next_id: EntryId,
    entries: impl Iterator<Item = &'a Entry>,
    schema: &Schema,
    chunk_entries: usize,
) -> Result<SnapshotInfo, PersistError> {
    let none = Tombstones::default();
    write_snapshot_keeping(
        io,
        dir,
        seq,
        next_id,
        entries,
        schema,
        &none,
        chunk_entries,
        0,
    )
}

/// `write_snapshot` with `chunk_entries` entries per chunk.
#[expect(
    clippy::too_many_arguments,
    reason = "write_snapshot's parts, and the chunk size tests set"
)]
pub fn write_snapshot_chunked<'a>(
    io: &dyn Io,
    dir: &Path,
    seq: u64,
    next_id: EntryId,
    entries: impl Iterator<Item = &'a Entry>,
    schema: &Schema,
    tombstones: &Tombstones,
    chunk_entries: usize,
) -> Result<SnapshotInfo, PersistError> {
    write_snapshot_keeping(
        io,
        dir,
        seq,
        next_id,
        entries,
        schema,
        tombstones,
        chunk_entries,
        0,
    )
}

/// `write_snapshot_chunked` that leaves at least `keep_free` bytes free on the disk: before
/// each piece it writes, it asks the file system for its free space, and stops with
/// `PersistError::KeptFree` (its temporary file removed) where the piece would leave less. This
/// is the room the transaction log keeps: a snapshot may fail for space, the log must not.
#[expect(
    clippy::too_many_arguments,
    reason = "write_snapshot's parts, and the room to keep"
)]
pub fn write_snapshot_keeping<'a>(
    io: &dyn Io,
    dir: &Path,
    seq: u64,
    next_id: EntryId,
    mut entries: impl Iterator<Item = &'a Entry>,
    schema: &Schema,
    tombstones: &Tombstones,
    chunk_entries: usize,
    keep_free: u64,
) -> Result<SnapshotInfo, PersistError> {
    // One buffer serves every chunk: a fresh one per chunk would grow (and fault in) ~400 MB
    // over a snapshot of a million entries, on the cores the server is answering with.
    let spare = std::cell::RefCell::new(Vec::new());
    let chunks = std::iter::from_fn(|| {
        let mut buf = spare.take();
        (encode_chunk(&mut entries, chunk_entries, &mut buf) > 0).then_some(buf)
    });
    let file = SnapshotFile {
        io,
        dir,
        seq,
        next_id,
        schema,
        keep_free,
        tombstones,
    };
    write_chunks(
        file,
        chunks,
        |buf| *spare.borrow_mut() = buf,
        Some(SYNC_EVERY_BYTES),
    )
}

/// Entries encoded to estimate a snapshot's size (`estimate_snapshot_bytes`).
const ESTIMATE_SAMPLE: usize = 1024;

/// About how many bytes a snapshot of `count` entries takes, `entries` being (the first of)
/// them: the first `ESTIMATE_SAMPLE` are encoded and their mean size scaled to `count`, plus
/// the header, the schema section, the chunk framing and the footer. For the free-space check
/// before a snapshot starts; the snapshot itself checks as it goes (`write_snapshot_keeping`).
pub fn estimate_snapshot_bytes<'a>(
    entries: impl Iterator<Item = &'a Entry>,
    count: usize,
    schema: &Schema,
) -> u64 {
    let mut buf = Vec::new();
    let mut sampled = 0u64;
    for e in entries.take(ESTIMATE_SAMPLE) {
        encode_packed(e, &mut buf);
        sampled += 1;
    }
    let body = (buf.len() as u64)
        .saturating_mul(count as u64)
        .checked_div(sampled)
        .unwrap_or(0);
    let chunks = (count as u64).div_ceil(DEFAULT_CHUNK_ENTRIES as u64);
    let framing =
        SNAP_HEADER_LEN as u64 + chunks * (12 + INDEX_ENTRY_LEN as u64) + 12 + TRAILER_LEN as u64;
    body + framing + schema_section(schema).len() as u64
}

/// Writes a snapshot of `entries` as `write_snapshot` does, for a bulk load that has all of
/// them at hand and the machine to itself: a second thread encodes the chunks while this one
/// writes them, and the file is synced once, at the end (a load has no transaction log to
/// keep responsive).
pub fn write_snapshot_bulk(
    io: &dyn Io,
    dir: &Path,
    seq: u64,
    next_id: EntryId,
    entries: &[Entry],
    schema: &Schema,
) -> Result<SnapshotInfo, PersistError> {
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
        // Written buffers go back to the encoding thread.
        let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        s.spawn(move || {
            let mut it = entries.iter();
            loop {
                let mut buf = back_rx.try_recv().unwrap_or_default();
                // Stops when the writer is gone (it failed) or the entries are done.
                if encode_chunk(&mut it, DEFAULT_CHUNK_ENTRIES, &mut buf) == 0
                    || tx.send(buf).is_err()
                {
                    break;
                }
            }
        });
        let recycle = |buf| {
            let _ = back_tx.send(buf);
        };
        let none = Tombstones::default();
        let file = SnapshotFile {
            io,
            dir,
            seq,
            next_id,
            schema,
            keep_free: 0,
            tombstones: &none,
        };
        write_chunks(file, rx.into_iter(), recycle, None)
    })
}

/// Encodes the next chunk of at most `max_entries` entries (fewer if it reaches
/// `MAX_CHUNK_BYTES`) into `out`, framed: `len, crc, count, entries`. Returns the count; 0
/// when `entries` is done.
fn encode_chunk<'a>(
    entries: &mut impl Iterator<Item = &'a Entry>,
    max_entries: usize,
    out: &mut Vec<u8>,
) -> u32 {
    out.clear();
    out.extend_from_slice(&[0; 12]);
    let mut count: u32 = 0;
    while (count as usize) < max_entries.max(1) && out.len() < MAX_CHUNK_BYTES {
        let Some(e) = entries.next() else { break };
        encode_packed(e, out);
        count += 1;
    }
    let len = out.len() - 8;
    out[8..12].copy_from_slice(&count.to_le_bytes());
    let sum = crc(&out[8..]);
    out[..4].copy_from_slice(&(len as u32).to_le_bytes());
    out[4..8].copy_from_slice(&sum.to_le_bytes());
    count
}

/// Where a snapshot goes and what its header, schema and tombstone sections say.
struct SnapshotFile<'a> {
    io: &'a dyn Io,
    dir: &'a Path,
    seq: u64,
    next_id: EntryId,
    schema: &'a Schema,
    /// Bytes to leave free on the disk (`write_snapshot_keeping`); 0: no check.
    keep_free: u64,
    tombstones: &'a Tombstones,
}

/// Writes a snapshot file from framed chunks (`encode_chunk`), handing each buffer to
/// `recycle` once written, then makes it durable and visible; with `sync_every`, syncs whenever
/// that many bytes were written since the last. A snapshot that fails, whatever the reason,
/// removes its temporary file (only the one it was writing: the caller holds the directory).
fn write_chunks(
    file: SnapshotFile<'_>,
    chunks: impl Iterator<Item = Vec<u8>>,
    recycle: impl FnMut(Vec<u8>),
    sync_every: Option<usize>,
) -> Result<SnapshotInfo, PersistError> {
    let (io, dir) = (file.io, file.dir);
    let tmp = dir.join(format!("{}.tmp", snapshot_file_name(file.seq)));
    let r = write_chunks_to(file, &tmp, chunks, recycle, sync_every);
    if r.is_err() {
        // Already gone after a failed rename's retry or a failed create: nothing to do.
        let _ = io.remove(&tmp);
    }
    r
}

fn write_chunks_to(
    file: SnapshotFile<'_>,
    tmp: &Path,
    chunks: impl Iterator<Item = Vec<u8>>,
    mut recycle: impl FnMut(Vec<u8>),
    sync_every: Option<usize>,
) -> Result<SnapshotInfo, PersistError> {
    let SnapshotFile {
        io,
        dir,
        seq,
        next_id,
        schema,
        keep_free,
        tombstones,
    } = file;
    let name = snapshot_file_name(seq);
    let path = dir.join(&name);
    let err = |e: std::io::Error| {
        if super::io::is_no_space(&e) {
            PersistError::NoSpace {
                dir: dir.to_path_buf(),
                path: tmp.to_path_buf(),
                source: e,
            }
        } else {
            PersistError::io(tmp, e)
        }
    };
    // Whether `n` more bytes leave `keep_free` free. A file system that cannot say is not
    // checked (the write itself still fails when the disk is full).
    let mut written: u64 = 0;
    let room = |n: usize, written: u64| -> Result<(), PersistError> {
        if keep_free == 0 {
            return Ok(());
        }
        match io.free_space(dir) {
            Ok(free) if free < (n as u64).saturating_add(keep_free) => {
                Err(PersistError::KeptFree {
                    dir: dir.to_path_buf(),
                    path: tmp.to_path_buf(),
                    written,
                    free,
                    keep: keep_free,
                })
            }
            _ => Ok(()),
        }
    };
    io.create_dir_all(dir)
        .map_err(|e| PersistError::io(dir, e))?;
    let section = schema_section(schema);
    let tombs = tombstone_section(tombstones);
    room(SNAP_HEADER_LEN + section.len() + tombs.len(), 0)?;
    let mut f = io.create(tmp).map_err(err)?;

    let mut head = Vec::with_capacity(SNAP_HEADER_LEN);
    head.extend_from_slice(&SNAP_MAGIC);
    head.extend_from_slice(&SNAP_VERSION.to_le_bytes());
    head.extend_from_slice(&seq.to_le_bytes());
    head.extend_from_slice(&u64::from(next_id).to_le_bytes());
    f.write_all(&head).map_err(err)?;
    f.write_all(&section).map_err(err)?;
    f.write_all(&tombs).map_err(err)?;
    written += (head.len() + section.len() + tombs.len()) as u64;

    let mut offset = (SNAP_HEADER_LEN + section.len() + tombs.len()) as u64;
    let mut index: Vec<(u64, u32, u32)> = Vec::new();
    let mut total: u64 = 0;
    let mut unsynced: usize = 0;
    for chunk in chunks {
        let count = u32::from_le_bytes([chunk[8], chunk[9], chunk[10], chunk[11]]);
        room(chunk.len(), written)?;
        written += chunk.len() as u64;
        // Hand the data to the disk as it goes instead of leaving hundreds of megabytes dirty
        // for the final fsync: a burst that size stalls the transaction log's fsyncs (and so
        // every write acknowledgement) while it drains. The pieces are smaller than a chunk,
        // so a log fsync queued behind one waits for at most that much.
        for piece in chunk.chunks(sync_every.unwrap_or(usize::MAX).max(1)) {
            f.write_all(piece).map_err(err)?;
            unsynced += piece.len();
            if sync_every.is_some_and(|n| unsynced >= n) {
                f.sync().map_err(err)?;
                unsynced = 0;
            }
        }
        index.push((offset, (chunk.len() - 8) as u32, count));
        offset += chunk.len() as u64;
        total += u64::from(count);
        recycle(chunk);
    }

    let mut foot = Vec::with_capacity(12 + index.len() * INDEX_ENTRY_LEN + TRAILER_LEN);
    foot.extend_from_slice(&(index.len() as u32).to_le_bytes());
    for (off, len, n) in &index {
        foot.extend_from_slice(&off.to_le_bytes());
        foot.extend_from_slice(&len.to_le_bytes());
        foot.extend_from_slice(&n.to_le_bytes());
    }
    foot.extend_from_slice(&total.to_le_bytes());
    let mut guarded = head.clone();
    guarded.extend_from_slice(&foot);
    foot.extend_from_slice(&crc(&guarded).to_le_bytes());
    let footer_len = foot.len() as u32;
    foot.extend_from_slice(&footer_len.to_le_bytes());
    foot.extend_from_slice(&SNAP_END_MAGIC);
    room(foot.len(), written)?;
    f.write_all(&foot).map_err(err)?;
    f.sync().map_err(|e| PersistError::io(tmp, e))?;
    drop(f);
    io.rename(tmp, &path)
        .map_err(|e| PersistError::io(&path, e))?;
    io.sync_dir(dir).map_err(|e| PersistError::io(dir, e))?;
    Ok(SnapshotInfo {
        name,
        entries: total,
        chunks: index.len(),
        bytes: offset + foot.len() as u64,
    })
}

/// Reads a snapshot from its bytes in memory (`read_snapshot_from`). `name` is used in error
/// messages.
pub fn read_snapshot(name: &str, bytes: &[u8], schema: &Schema) -> Result<Snapshot, PersistError> {
    read_snapshot_from(name, &MemRead(bytes), schema)
}

/// Reads a snapshot file, decoding its chunks on all available cores, each thread reading
/// its chunks into one reused buffer: the file is never held whole (at 10 million entries it
/// is 4.5 GB, and a buffer that size cost as many page faults as the entries themselves).
/// `name` is used in error messages.
pub fn read_snapshot_from(
    name: &str,
    file: &dyn IoRead,
    schema: &Schema,
) -> Result<Snapshot, PersistError> {
    let corrupt = |offset: usize, reason: String| PersistError::Corrupt {
        file: name.to_string(),
        offset: offset as u64,
        reason,
    };
    let at = |base: usize| move |e: super::codec::DecodeError| corrupt(base + e.offset, e.reason);
    let read = |offset: usize, n: usize| -> Result<Vec<u8>, PersistError> {
        let mut buf = vec![0; n];
        file.read_exact_at(&mut buf, offset as u64)
            .map_err(|e| PersistError::io(name, e))?;
        Ok(buf)
    };
    let len = usize::try_from(file.len()).unwrap_or(usize::MAX);
    if len < SNAP_HEADER_LEN {
        return Err(corrupt(0, format!("header truncated ({len} bytes)")));
    }
    let head = read(0, SNAP_HEADER_LEN)?;
    if head[..8] != SNAP_MAGIC {
        return Err(corrupt(0, "not a Linden snapshot (bad magic)".into()));
    }
    let mut r = Reader::new(&head[8..]);
    let version = r.u32_le("version").map_err(at(8))?;
    let seq = r.u64_le("seq").map_err(at(8))?;
    let next_id = r.u64_le("next id").map_err(at(8))?;
    if !(1..=SNAP_VERSION).contains(&version) {
        return Err(corrupt(
            8,
            format!(
                "snapshot format version {version}; this Linden reads versions 1 to {SNAP_VERSION}"
            ),
        ));
    }
    let next_id = EntryId::try_from(next_id)
        .map_err(|_| corrupt(20, format!("next entry id {next_id} out of range")))?;

    // Trailer and footer.
    let trailer = if len >= SNAP_HEADER_LEN + TRAILER_LEN {
        read(len - 12, 12)?
    } else {
        Vec::new()
    };
    if trailer.len() < 12 || trailer[4..] != SNAP_END_MAGIC {
        return Err(corrupt(
            len,
            "no end marker: the file is truncated or was never finished".into(),
        ));
    }
    let mut t = Reader::new(&trailer[..4]);
    let footer_len = t.u32_le("footer length").map_err(at(len - 12))? as usize;
    if footer_len < 16 || footer_len > len - SNAP_HEADER_LEN - 12 {
        return Err(corrupt(
            len - 12,
            format!("impossible footer length {footer_len}"),
        ));
    }
    let foot_start = len - 12 - footer_len;
    let foot = read(foot_start, footer_len)?;
    let stored = &foot[foot.len() - 4..];
    let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    let mut guarded = head.clone();
    guarded.extend_from_slice(&foot[..foot.len() - 4]);
    if crc(&guarded) != stored {
        return Err(corrupt(
            foot_start,
            "header or chunk index fails its checksum".into(),
        ));
    }
    let mut f = Reader::new(&foot[..foot.len() - 4]);
    let n = f.u32_le("chunk count").map_err(at(foot_start))? as usize;
    if n.saturating_mul(INDEX_ENTRY_LEN) > f.remaining() {
        return Err(corrupt(
            foot_start,
            format!("chunk count {n} exceeds the footer"),
        ));
    }
    // The schema section of versions 2 and up: read whole (it is small), kept while the
    // entries are decoded (the interned pairs are borrowed from it).
    let section = if version >= 2 {
        let mut h = Reader::new(&head[..0]);
        let lead = if foot_start >= SNAP_HEADER_LEN + 8 {
            read(SNAP_HEADER_LEN, 8)?
        } else {
            Vec::new()
        };
        if lead.len() == 8 {
            h = Reader::new(&lead);
        }
        let plen = h
            .u32_le("schema section length")
            .map_err(at(SNAP_HEADER_LEN))? as usize;
        if plen > foot_start - SNAP_HEADER_LEN - 8 {
            return Err(corrupt(
                SNAP_HEADER_LEN,
                format!("schema section length {plen} runs past the chunks"),
            ));
        }
        read(SNAP_HEADER_LEN, 8 + plen)?
    } else {
        Vec::new()
    };
    let (packing, mut chunks_start, extended) = if version >= 2 {
        let (p, end, ext) = read_schema_section(name, &section, version, schema)?;
        (Some(p), end, ext)
    } else {
        (None, SNAP_HEADER_LEN, None)
    };
    // Version 5: the tombstone section, between the schema section and the chunks.
    let tombstones = if version >= 5 {
        let lead = if foot_start >= chunks_start + 8 {
            read(chunks_start, 8)?
        } else {
            return Err(corrupt(
                chunks_start,
                "no room for the tombstone section before the chunks".into(),
            ));
        };
        let mut h = Reader::new(&lead);
        let plen = h
            .u32_le("tombstone section length")
            .map_err(at(chunks_start))? as usize;
        let sum = h
            .u32_le("tombstone section crc")
            .map_err(at(chunks_start))?;
        if plen > foot_start - chunks_start - 8 {
            return Err(corrupt(
                chunks_start,
                format!("tombstone section length {plen} runs past the chunks"),
            ));
        }
        let payload = read(chunks_start + 8, plen)?;
        if crc(&payload) != sum {
            return Err(corrupt(
                chunks_start,
                "tombstone section fails its checksum".into(),
            ));
        }
        let base = chunks_start + 8;
        let mut p = Reader::new(&payload);
        let floor = decode_strings(&mut p, "tombstone floor").map_err(at(base))?;
        let n = p.count("tombstone count").map_err(at(base))?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(decode_tombstone(&mut p).map_err(at(base))?);
        }
        if !p.is_empty() {
            return Err(corrupt(
                base + p.pos(),
                "bytes after the last tombstone".into(),
            ));
        }
        chunks_start = base + plen;
        Tombstones::from_parts(items, floor)
    } else {
        Tombstones::default()
    };
    let schema: &Schema = extended.as_ref().unwrap_or(schema);
    let mut chunks = Vec::with_capacity(n);
    let mut expect = chunks_start as u64;
    let mut total_in_index: u64 = 0;
    for i in 0..n {
        let off = f.u64_le("chunk offset").map_err(at(foot_start))?;
        let clen = f.u32_le("chunk length").map_err(at(foot_start))?;
        let count = f.u32_le("chunk entries").map_err(at(foot_start))?;
        if off != expect {
            return Err(corrupt(
                foot_start,
                format!("chunk {i} at byte {off}, expected at {expect}"),
            ));
        }
        expect = off + 8 + u64::from(clen);
        total_in_index += u64::from(count);
        chunks.push((off as usize, clen as usize, count));
    }
    let total = f.u64_le("entry count").map_err(at(foot_start))?;
    if expect != foot_start as u64 || !f.is_empty() || total != total_in_index {
        return Err(corrupt(
            foot_start,
            "chunk index does not match the file's layout".into(),
        ));
    }

    // One chunk, read into `buf` (the thread's, reused), checked and decoded into `out`.
    let decode_chunk = |&(off, clen, count): &(usize, usize, u32),
                        buf: &mut Vec<u8>,
                        out: &mut Vec<Entry>|
     -> Result<(), PersistError> {
        buf.resize(8 + clen, 0);
        file.read_exact_at(buf, off as u64)
            .map_err(|e| PersistError::io(name, e))?;
        let mut h = Reader::new(&buf[..8]);
        let hl = h.u32_le("chunk length").map_err(at(off))? as usize;
        let hc = h.u32_le("chunk crc").map_err(at(off))?;
        if hl != clen {
            return Err(corrupt(
                off,
                format!("chunk length {hl}, index says {clen}"),
            ));
        }
        let payload = &buf[8..];
        if crc(payload) != hc {
            return Err(corrupt(off, "chunk fails its checksum".into()));
        }
        let base = off + 8;
        let mut p = Reader::new(payload);
        let c = p.u32_le("entry count").map_err(at(base))?;
        if c != count {
            return Err(corrupt(
                base,
                format!("chunk holds {c} entries, index says {count}"),
            ));
        }
        out.reserve((c as usize).min(payload.len()));
        for _ in 0..c {
            let rec = base + p.pos();
            let e = match &packing {
                None => decode_entry(&mut p, schema).map_err(at(base))?,
                Some(packing) => decode_packed(&mut p, packing, schema).map_err(at(base))?,
            };
            out.push(e.map_err(|e| e.located(name, rec as u64))?);
        }
        if !p.is_empty() {
            return Err(corrupt(
                base + p.pos(),
                "bytes after the chunk's last entry".into(),
            ));
        }
        Ok(())
    };
    let decode_group = |group: &[(usize, usize, u32)]| -> Result<Vec<Entry>, PersistError> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for c in group {
            decode_chunk(c, &mut buf, &mut out)?;
        }
        Ok(out)
    };

    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, chunks.len().max(1));
    let per = chunks.len().div_ceil(threads).max(1);
    let parts: Vec<Result<Vec<Entry>, PersistError>> = if threads <= 1 {
        vec![decode_group(&chunks)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = chunks
                .chunks(per)
                .map(|group| s.spawn(|| decode_group(group)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(PersistError::Usage(
                            "a snapshot decoding thread panicked".into(),
                        ))
                    })
                })
                .collect()
        })
    };
    let mut entries = Vec::with_capacity((total as usize).min(len));
    for part in parts {
        entries.extend(part?);
    }
    Ok(Snapshot {
        seq,
        next_id,
        entries,
        chunks: chunks.len(),
        extended,
        tombstones,
    })
}

/// How a version 2 snapshot's entries were packed.
struct Packing<'b> {
    /// Packed with the schema in force: entries are taken as they are.
    same_schema: bool,
    /// The canonical attribute type name of each id they use.
    names: Vec<String>,
    /// The interned pairs they refer to, by the file's numbers.
    interned: Vec<Pair<'b>>,
    /// The file's numbers are this process's (the usual case at start-up, the table being
    /// filled from the file in its order), so packed entries need no renumbering.
    same_ids: bool,
    /// The entries' packed layout (`Entry::from_packed`): 1 in versions 2 and 3, 2 since 4.
    layout: u8,
}

/// Reads and checks the schema section (`section`: the file's bytes from byte 28 to the
/// section's end); returns it, where the chunks start and, when the section carries schema
/// extensions (version 3), `schema` extended by them.
fn read_schema_section<'b>(
    name: &str,
    section: &'b [u8],
    version: u32,
    schema: &Schema,
) -> Result<(Packing<'b>, usize, Option<Schema>), PersistError> {
    let (p, end, ext) =
        schema_section_parts(section, version).map_err(|(o, r)| PersistError::Corrupt {
            file: name.to_string(),
            offset: o as u64,
            reason: r,
        })?;
    let extended = match ext {
        Some((at, text)) if !text.is_empty() => Some(schema.replay_extension(text, name).map_err(
            |e| PersistError::Schema {
                file: name.to_string(),
                offset: at as u64,
                message: format!(
                    "the schema extensions it holds do not fit the configured schema: {}",
                    e.message
                ),
            },
        )?),
        _ => None,
    };
    let same_schema = p.1 == schema_fingerprint(extended.as_ref().unwrap_or(schema));
    let packing = Packing { same_schema, ..p.0 };
    Ok((packing, end, extended))
}

/// The parts of a schema section (`section`: the file's bytes from byte 28, at least the
/// whole section): the packing (`same_schema` unset) with the fingerprint, where the chunks
/// start, and the extension text with its offset. Offsets are the file's; errors are
/// (offset, reason).
#[expect(
    clippy::type_complexity,
    reason = "the section's parts, each used once by the caller"
)]
fn schema_section_parts(
    section: &[u8],
    version: u32,
) -> Result<((Packing<'_>, [u8; 32]), usize, Option<(usize, &str)>), (usize, String)> {
    let start = SNAP_HEADER_LEN;
    let fail = |o: usize| move |e: super::codec::DecodeError| (o + e.offset, e.reason);
    let mut h = Reader::new(section);
    let len = h.u32_le("schema section length").map_err(fail(start))? as usize;
    let sum = h.u32_le("schema section crc").map_err(fail(start))?;
    if len > h.remaining() {
        return Err((
            start,
            format!("schema section length {len} runs past the chunks"),
        ));
    }
    let payload = &section[8..8 + len];
    if crc(payload) != sum {
        return Err((start, "schema section fails its checksum".into()));
    }
    let base = start + 8;
    let mut p = Reader::new(payload);
    let fp = p.take(32, "schema fingerprint").map_err(fail(base))?;
    let n = p.count("attribute type count").map_err(fail(base))?;
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        names.push(p.string("attribute type name").map_err(fail(base))?);
    }
    let k = p.count("interned value count").map_err(fail(base))?;
    let mut interned = Vec::with_capacity(k);
    let mut same_ids = true;
    for i in 0..k {
        let raw = p.bytes("interned value").map_err(fail(base))?;
        let norm = p.bytes("interned value").map_err(fail(base))?;
        same_ids &= crate::intern::intern(raw, norm) == u32::try_from(i).ok();
        interned.push((raw, norm));
    }
    let ext = if version >= 3 {
        let at = base + p.pos();
        Some((at, p.str("schema extensions").map_err(fail(base))?))
    } else {
        None
    };
    if !p.is_empty() {
        return Err((
            base + p.pos(),
            "bytes after the schema section's values".into(),
        ));
    }
    let mut fingerprint = [0u8; 32];
    fingerprint.copy_from_slice(fp);
    Ok((
        (
            Packing {
                same_schema: false,
                names,
                interned,
                same_ids,
                layout: if version >= 4 { 2 } else { 1 },
            },
            fingerprint,
        ),
        base + len,
        ext,
    ))
}

/// Decodes one version 2 entry record. Packed with the schema in force, the entry is checked
/// and taken as it is; otherwise it is rebuilt from its raw values by attribute name, as a
/// version 1 record would be. Errors as `decode_entry`.
fn decode_packed(
    r: &mut Reader<'_>,
    packing: &Packing<'_>,
    schema: &Schema,
) -> Result<Result<Entry, PersistError>, super::codec::DecodeError> {
    let (id, parent) = super::codec::decode_ids(r)?;
    let at = r.pos();
    let packed = r.bytes("packed entry")?;
    let e = Entry::from_packed(
        id,
        parent,
        packed,
        packing.layout,
        packing.names.len(),
        &packing.interned,
        packing.same_ids,
    )
    .map_err(|reason| super::codec::DecodeError {
        offset: at,
        reason: format!("entry {id}: {reason}"),
    })?;
    if packing.same_schema {
        return Ok(Ok(e));
    }
    let names: Vec<String> = e
        .attrs()
        .map(|a| format!("{}{}", packing.names[a.ty.0 as usize], a.options))
        .collect();
    Ok(super::codec::build_entry(
        schema,
        id,
        parent,
        e.dn(),
        e.attrs()
            .zip(&names)
            .map(|(a, n)| (n.as_str(), a.values().map(Box::from).collect())),
    ))
}
