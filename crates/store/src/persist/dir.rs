//! The data directory as a whole: the lock that makes it one process's, and the removal of the
//! temporary files a process that died while writing them left behind.
//!
//! The lock is a file, `linden.lock`, locked with `flock` (exclusive, without waiting) for as
//! long as the returned `DirLock` lives, and holding the owner's PID as text so that a second
//! process can say who has the directory. The kernel drops the lock when its process ends,
//! however it ends, so a lock file left by a killed process stops nobody. It is the one file
//! here that is not a data file, and it goes to the file system directly rather than through
//! `Io`: `SimIo` models one process's view of a disk, where there is nobody to exclude.

use std::fs;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use super::io::Io;
use super::log::parse_log_name;
use super::snapshot::parse_snapshot_name;
use super::PersistError;

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "linden.lock";

/// How often a process that finds the directory locked re-reads the lock file for the PID,
/// which its owner writes just after taking the lock (5 ms apart: at most 0.1 s).
const PID_READS: u32 = 20;

/// The exclusive lock on a data directory; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    // Held open for the lock's life: closing it releases the lock.
    _file: fs::File,
}

impl DirLock {
    /// Takes the exclusive lock on `dir` (created if missing, with nothing else in it), or
    /// fails at once with `PersistError::Locked` naming the process that holds it.
    pub fn exclusive(dir: &Path) -> Result<DirLock, PersistError> {
        fs::create_dir_all(dir).map_err(|e| PersistError::io(dir, e))?;
        let path = dir.join(LOCK_FILE);
        let mut file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| PersistError::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(PersistError::Locked {
                    dir: dir.to_path_buf(),
                    lock: path.clone(),
                    pid: holder(&mut file),
                })
            }
            Err(fs::TryLockError::Error(e)) => return Err(PersistError::io(&path, e)),
        }
        // The PID only serves the message a second process prints: the lock holds without it
        // (a full disk may refuse even these few bytes; the start checks the space next). It
        // is written over the previous one, padded to a fixed width, so that an existing lock
        // file needs no new space.
        let pid = format!("{:<10}\n", std::process::id());
        let written = file
            .rewind()
            .and_then(|()| file.write_all(pid.as_bytes()))
            .and_then(|()| file.set_len(pid.len() as u64));
        if let Err(e) = written {
            tracing::warn!(
                "{}: locked, but the PID could not be written into it: {e}",
                path.display()
            );
        }
        Ok(DirLock {
            dir: dir.to_path_buf(),
            _file: file,
        })
    }

    /// The directory this lock holds.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The PID written in a lock file that another process holds, if it says one.
fn holder(file: &mut fs::File) -> Option<u32> {
    for _ in 0..PID_READS {
        let mut text = String::new();
        let read = file.rewind().and_then(|()| file.read_to_string(&mut text));
        if read.is_ok() {
            if let Ok(pid) = text.trim().parse() {
                return Some(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    None
}

/// A temporary file found at start and removed (`remove_stale_tmp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleTmp {
    pub name: String,
    pub bytes: u64,
}

/// Whether `name` is a temporary file of a snapshot or a log file being started.
pub fn is_tmp_name(name: &str) -> bool {
    name.strip_suffix(".tmp")
        .is_some_and(|n| parse_snapshot_name(n).is_some() || parse_log_name(n).is_some())
}

/// Removes every `snap-<seq>.lns.tmp` and `log-<seq>.lnl.tmp` of `dir`, then syncs the
/// directory. Call it only with the directory's lock held (`DirLock`): then no other process
/// is writing any of them, so each was left by a process that stopped while writing it (a
/// kill or a crash), and was never renamed into place, so nothing reads it. Returns what was
/// removed.
pub fn remove_stale_tmp(io: &dyn Io, dir: &Path) -> Result<Vec<StaleTmp>, PersistError> {
    let mut removed = Vec::new();
    for name in io.list(dir).map_err(|e| PersistError::io(dir, e))? {
        if !is_tmp_name(&name) {
            continue;
        }
        let path = dir.join(&name);
        let bytes = io.open_read(&path).map(|f| f.len()).unwrap_or(0);
        io.remove(&path).map_err(|e| PersistError::io(&path, e))?;
        removed.push(StaleTmp { name, bytes });
    }
    if !removed.is_empty() {
        io.sync_dir(dir).map_err(|e| PersistError::io(dir, e))?;
    }
    Ok(removed)
}
