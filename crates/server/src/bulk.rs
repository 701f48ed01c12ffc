//! Bulk import and export, with the server stopped.
//!
//! Import reads LDIF (RFC 2849, e.g. `slapcat` or `linden gen` output), builds and checks each
//! entry exactly as an add operation does (schema, syntax, password hashing) on all cores,
//! places them in file order (parents before children) with the add operation's placement
//! checks, and writes one snapshot straight into an empty data directory: no transaction log
//! is written. Operational attributes in the input (createTimestamp, entryUUID, …) are kept.
//!
//! Export recovers a data directory read-only (snapshot + logs, as a start would) and writes
//! every entry, operational attributes included, as LDIF: import → export → import gives the
//! same data. It can run against the directory of a running server: it sees the state of the
//! last batch whose log write had completed.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use proto::ResultCode;
use schema::NormDn;
use store::{Entry, EntryId};

use crate::error::{LdapError, LdapResult};
use crate::ops::add;
use crate::state::Shared;
use crate::{Config, Mode, Server};

/// Records built and applied together; also the progress granularity.
const CHUNK: usize = 20_000;

#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Skip bad records (and list them) instead of stopping at the first.
    pub continue_on_error: bool,
    /// Threads that build entries. Default: all cores.
    pub threads: usize,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            continue_on_error: false,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
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
}

#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    #[error("{0}")]
    Setup(String),
    /// Import stopped at a bad record (without `continue_on_error`); nothing was written.
    #[error("line {}: {}", .0.line, .0.message)]
    Record(Rejected),
    #[error("{0}")]
    Storage(String),
}

/// A content record waiting to be built: first line, DN, attributes.
type Pending = (usize, String, Vec<(String, Vec<u8>)>);

/// Counts the bytes read through it, for progress by file position.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

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
    by_dn: HashMap<String, usize>,
}

impl ImportTree {
    /// The id the next placed entry gets.
    fn next_id(&self) -> EntryId {
        // Ids are 32-bit by design; an LDIF file of four billion entries does not fit in memory.
        EntryId::try_from(self.entries.len() + 1).unwrap_or(EntryId::MAX)
    }

    /// Places a built entry (`add::locate`, then its id, parent and stored DN).
    fn place(&mut self, shared: &Shared, b: Prepared) -> LdapResult<()> {
        let mut e = b.entry;
        match add::locate(shared, self, &b.ndn)? {
            add::Site::Root => {}
            add::Site::Under(pid, pdn) => {
                e.parent = Some(pid);
                let dn = e.dn();
                // Built with the DN as parsed; the parent's stored spelling may differ.
                let (rdn, rest) = dn.split_at(b.rdn_len.min(dn.len()));
                if rest.strip_prefix(',') != Some(pdn) {
                    let dn = add::stored_dn(rdn, pdn);
                    e = e.renamed(&dn, &b.ndn, Some(pid));
                }
            }
        }
        e.id = self.next_id();
        self.by_dn.insert(b.ndn.norm, self.entries.len());
        self.entries.push(e);
        Ok(())
    }
}

impl add::Tree for ImportTree {
    fn find(&self, ndn: &str) -> Option<(EntryId, &str)> {
        let e = &self.entries[*self.by_dn.get(ndn)?];
        Some((e.id, e.dn()))
    }

    fn missing_parent(&self, _shared: &Shared, _ndn: &NormDn) -> LdapError {
        LdapError::new(
            ResultCode::NoSuchObject,
            "the parent entry does not exist (in LDIF a parent comes before its children)",
        )
    }
}

/// What the LDIF reading thread hands over: the records of one chunk and the bad ones.
struct ReadChunk {
    records: Vec<Pending>,
    rejected: Vec<Rejected>,
}

/// Imports LDIF into the empty data directory of `config`. `progress(entries, bytes_read)` is
/// called after every chunk.
///
/// Three stages overlap: one thread parses the LDIF into chunks, the chunks are built and
/// schema-checked, stamped and packed on all cores, and each is placed in file order
/// (existence, parent, stored DN) against a DN table. The store's writer and its indexes are not involved: the snapshot is
/// written straight from the placed entries, and indexes are built when a server loads it.
pub fn import(
    config: Config,
    input: impl Read + Send,
    opts: &ImportOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ImportReport, BulkError> {
    let t = Instant::now();
    let dir = config.data_dir.clone();
    if has_store_files(&dir) {
        return Err(BulkError::Setup(format!(
            "{} already holds a directory (snap-*/log-* files): import writes into an empty data directory; move those files away or choose another --data",
            dir.display()
        )));
    }
    let admin = config.admin_dn.clone();
    let server =
        Server::build(config, Mode::Memory).map_err(|e| BulkError::Setup(e.to_string()))?;
    let shared = server.shared.clone();
    let read = Arc::new(AtomicU64::new(0));
    let reader = std::io::BufReader::with_capacity(
        1 << 20,
        Counting {
            inner: input,
            read: read.clone(),
        },
    );
    let mut rejected: Vec<Rejected> = Vec::new();
    let threads = opts.threads.max(1);
    let keep_going = opts.continue_on_error;
    let mut tree = ImportTree::default();
    // One time for the whole import (it is one batch), stamped while entries are built.
    let stamp_time = crate::ops::generalized_time(SystemTime::now());
    let (tx, rx) = std::sync::mpsc::sync_channel::<ReadChunk>(2);
    let (btx, brx) = std::sync::mpsc::sync_channel::<(Vec<Built>, Vec<Rejected>)>(1);
    let outcome = std::thread::scope(|s| -> Result<(), BulkError> {
        s.spawn(move || {
            let mut records = ldif::Reader::new(reader);
            loop {
                let mut chunk = ReadChunk {
                    records: Vec::with_capacity(CHUNK),
                    rejected: Vec::new(),
                };
                for rec in records.by_ref() {
                    match rec {
                        Ok(ldif::Record::Content { dn, attrs, line }) => {
                            chunk.records.push((line, dn, attrs))
                        }
                        Ok(ldif::Record::Change { line, .. }) => chunk.rejected.push(Rejected {
                            line,
                            message: "change records are not imported (apply them with ldapmodify)"
                                .into(),
                        }),
                        Err(e) => chunk.rejected.push(Rejected {
                            line: e.line,
                            message: e.message.clone(),
                        }),
                    }
                    if (!chunk.rejected.is_empty() && !keep_going) || chunk.records.len() >= CHUNK {
                        break;
                    }
                }
                let last = chunk.records.is_empty() && chunk.rejected.is_empty();
                // The receiver is gone when the import stopped at an error.
                if last || tx.send(chunk).is_err() {
                    break;
                }
            }
        });
        // Chunks are built (on all cores) while the previous one is placed.
        let (sh, stamps) = (&shared, add::Stamps::new(&shared, &admin, &stamp_time));
        s.spawn(move || {
            for chunk in rx {
                let built = build_all(sh, &chunk.records, threads, &stamps);
                // The receiver is gone when the import stopped at an error.
                if btx.send((built, chunk.rejected)).is_err() {
                    break;
                }
            }
        });
        for (built, chunk_rejected) in brx {
            rejected.extend(chunk_rejected);
            if !rejected.is_empty() && !keep_going {
                return Err(BulkError::Record(rejected.swap_remove(0)));
            }
            // Place them in file order.
            for (line, r) in built {
                let r = r.and_then(|b| tree.place(&shared, b).map_err(|e| e.message));
                match r {
                    Ok(()) => {}
                    Err(message) if keep_going => rejected.push(Rejected { line, message }),
                    Err(message) => return Err(BulkError::Record(Rejected { line, message })),
                }
            }
            progress(tree.entries.len() as u64, read.load(Ordering::Relaxed));
        }
        Ok(())
    });
    outcome?;
    let info = store::persist::write_snapshot(
        &store::persist::FsIo,
        &dir,
        IMPORT_SEQ,
        tree.next_id(),
        tree.entries.iter(),
        &shared.schema,
    )
    .map_err(|e| BulkError::Storage(e.to_string()))?;
    rejected.sort_by_key(|r| r.line);
    Ok(ImportReport {
        entries: tree.entries.len() as u64,
        rejected,
        snapshot: info.name,
        snapshot_bytes: info.bytes,
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// The batch number an imported snapshot holds: the import counts as the directory's first
/// batch, and the transaction log of the first server on it continues from the next.
const IMPORT_SEQ: u64 = 1;

/// Builds (schema-checks) the records of one chunk on `threads` threads, in file order.
/// An LDIF record built into an entry (or why not), with its line number.
type Built = (usize, Result<Prepared, String>);

/// An entry built and packed, waiting to be placed: id 0, no parent, stored under its DN as
/// parsed (`Dn`'s RFC 4514 form), whose first `rdn_len` bytes are its RDN.
struct Prepared {
    entry: Entry,
    ndn: NormDn,
    rdn_len: usize,
}

/// Builds and schema-checks the records of a chunk on `threads` threads, and stamps the
/// server-kept attributes (`add::stamp_new`) so that placing them in order has less to do.
fn build_all(
    shared: &Shared,
    chunk: &[Pending],
    threads: usize,
    stamps: &add::Stamps,
) -> Vec<Built> {
    let per = chunk.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = chunk
            .chunks(per)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|(line, dn, attrs)| {
                            let input = add::group_values(
                                attrs.iter().map(|(n, v)| (n.as_bytes(), v.clone())),
                            );
                            let r = add::build(shared, dn.as_bytes(), &input, true)
                                .map(|mut e| {
                                    add::stamp_new(shared, &mut e.attrs, stamps);
                                    let full = e.dn.to_string();
                                    Prepared {
                                        entry: Entry::new(0, None, &full, &e.ndn, &e.attrs),
                                        ndn: e.ndn,
                                        rdn_len: add::rdn_string(&e.dn).len(),
                                    }
                                })
                                .map_err(|e| format!("{dn}: {}", e.message));
                            (*line, r)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// Writes every entry of the data directory `dir` as LDIF (parents before children, with
/// operational attributes). Returns the number of entries.
pub fn export(dir: &Path, out: impl Write) -> Result<u64, BulkError> {
    let schema = schema::Schema::builtin();
    let rec = store::persist::recover(&store::persist::FsIo, dir, &schema)
        .map_err(|e| BulkError::Storage(e.to_string()))?;
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
