//! Bulk import and export, with the server stopped.
//!
//! Import reads LDIF (RFC 2849, e.g. `slapcat` or `linden gen` output), builds and checks each
//! entry exactly as an add operation does (schema, syntax, password hashing) on all cores,
//! places them in a memory-only store in file order (parents before children), and writes one
//! snapshot straight into an empty data directory: no transaction log is written. Operational
//! attributes in the input (createTimestamp, entryUUID, …) are kept.
//!
//! Export recovers a data directory read-only (snapshot + logs, as a start would) and writes
//! every entry, operational attributes included, as LDIF: import → export → import gives the
//! same data. It can run against the directory of a running server: it sees the state of the
//! last batch whose log write had completed.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::ops::add::{self, NewEntry};
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

/// Imports LDIF into the empty data directory of `config`. `progress(entries, bytes_read)` is
/// called after every chunk.
pub fn import(
    config: Config,
    input: impl Read,
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
    let mut records = ldif::Reader::new(reader);
    let mut rejected: Vec<Rejected> = Vec::new();
    let mut imported: u64 = 0;
    let threads = opts.threads.max(1);
    loop {
        // Read a chunk; reader errors are rejected records of their own.
        let mut chunk: Vec<Pending> = Vec::with_capacity(CHUNK);
        for rec in records.by_ref() {
            match rec {
                Ok(ldif::Record::Content { dn, attrs, line }) => chunk.push((line, dn, attrs)),
                Ok(ldif::Record::Change { line, .. }) => rejected.push(Rejected {
                    line,
                    message: "change records are not imported (apply them with ldapmodify)".into(),
                }),
                Err(e) => rejected.push(Rejected {
                    line: e.line,
                    message: e.message.clone(),
                }),
            }
            if (!rejected.is_empty() && !opts.continue_on_error) || chunk.len() >= CHUNK {
                break;
            }
        }
        if !rejected.is_empty() && !opts.continue_on_error {
            return Err(BulkError::Record(rejected.swap_remove(0)));
        }
        if chunk.is_empty() {
            break;
        }
        // Build on all cores, keeping file order.
        let per = chunk.len().div_ceil(threads);
        let built: Vec<(usize, Result<NewEntry, String>)> = std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .chunks(per)
                .map(|part| {
                    let sh = &shared;
                    s.spawn(move || {
                        part.iter()
                            .map(|(line, dn, attrs)| {
                                let input = add::group_values(
                                    attrs.iter().map(|(n, v)| (n.as_bytes(), v.clone())),
                                );
                                let r = add::build(sh, dn.as_bytes(), &input, true)
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
        });
        // Place them in order, in one writer batch.
        let sh = shared.clone();
        let who = admin.clone();
        let keep_going = opts.continue_on_error;
        let (done, errs) = shared
            .store
            .write_blocking(move |txn| {
                let mut done = 0u64;
                let mut errs: Vec<Rejected> = Vec::new();
                for (line, r) in built {
                    let r = r.and_then(|e| add::apply(&sh, txn, &who, e).map_err(|e| e.message));
                    match r {
                        Ok(()) => done += 1,
                        Err(message) => {
                            errs.push(Rejected { line, message });
                            if !keep_going {
                                break;
                            }
                        }
                    }
                }
                Ok::<_, ()>((done, errs))
            })
            .map_err(|e| BulkError::Storage(e.to_string()))?
            .map_err(|()| BulkError::Storage("import batch failed".into()))?;
        imported += done;
        if let Some(first) = errs.first() {
            if !opts.continue_on_error {
                return Err(BulkError::Record(first.clone()));
            }
        }
        rejected.extend(errs);
        progress(imported, read.load(Ordering::Relaxed));
    }
    let v = shared.store.read();
    let info = store::persist::write_snapshot(
        &store::persist::FsIo,
        &dir,
        v.seq,
        v.next_id(),
        v.iter().map(|e| &**e),
        &shared.schema,
    )
    .map_err(|e| BulkError::Storage(e.to_string()))?;
    rejected.sort_by_key(|r| r.line);
    Ok(ImportReport {
        entries: imported,
        rejected,
        snapshot: info.name,
        snapshot_bytes: info.bytes,
        seconds: t.elapsed().as_secs_f64(),
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
            .attrs
            .iter()
            .map(|a| format!("{}{}", schema.attr(a.ty).name(), a.options))
            .collect();
        let pairs = e
            .attrs
            .iter()
            .zip(&names)
            .flat_map(|(a, n)| a.values.iter().map(move |v| (n.as_str(), &**v)));
        w.write_entry(&e.dn, pairs).map_err(io_err)?;
    }
    w.flush().map_err(io_err)?;
    Ok(rec.entries.len() as u64)
}
