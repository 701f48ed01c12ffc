//! The one door to the disk (style rule 9).
//!
//! Persistence code never calls `std::fs`; it goes through `Io`, so tests can swap in `SimIo`,
//! which keeps files in memory, knows which bytes and which directory entries are durable, and
//! can cut the power at any write or inject write and fsync failures.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// Everything persistence does to files and directories.
pub trait Io: Send + Sync {
    /// Creates the file, or truncates it if it exists, for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn IoFile>>;
    /// Opens an existing file for appending.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn IoFile>>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Opens an existing file for reading pieces of it (a snapshot is read chunk by chunk, on
    /// several threads, instead of into one buffer the size of the file).
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn IoRead>>;
    /// Names (not paths) of the files in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Atomically replaces `to` with `from`. Durable only after `sync_dir` of the directory.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
}

/// A file open for writing.
pub trait IoFile: Send {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes every byte written so far durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
}

/// A file open for reading at any offset, from several threads at once.
pub trait IoRead: Send + Sync {
    /// The file's size in bytes.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `buf` with the file's bytes from `offset` (an error if the file ends first).
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

/// Bytes in memory read as a file (`read_snapshot` of a buffer).
pub struct MemRead<'a>(pub &'a [u8]);

impl IoRead for MemRead<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let from = usize::try_from(offset).unwrap_or(usize::MAX);
        match from
            .checked_add(buf.len())
            .and_then(|end| self.0.get(from..end))
        {
            Some(b) => {
                buf.copy_from_slice(b);
                Ok(())
            }
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{} bytes at {offset} run past the end", buf.len()),
            )),
        }
    }
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsIo;

struct FsFile(fs::File);

/// A file read with positioned reads (`pread`), which need no shared cursor.
struct FsRead {
    file: fs::File,
    len: u64,
    #[cfg(not(unix))]
    cursor: Mutex<()>,
}

impl IoRead for FsRead {
    fn len(&self) -> u64 {
        self.len
    }
    #[cfg(unix)]
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }
    #[cfg(not(unix))]
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        use std::io::{Read, Seek};
        // Without positioned reads the cursor is shared: one reader at a time.
        let _one = self.cursor.lock().unwrap_or_else(|p| p.into_inner());
        let mut f = &self.file;
        f.seek(io::SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}

impl IoFile for FsFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl Io for FsIo {
    fn create(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(FsFile(f)))
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let f = fs::OpenOptions::new().append(true).open(path)?;
        Ok(Box::new(FsFile(f)))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn IoRead>> {
        let file = fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Box::new(FsRead {
            file,
            len,
            #[cfg(not(unix))]
            cursor: Mutex::new(()),
        }))
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for e in fs::read_dir(dir)? {
            names.push(e?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        #[cfg(unix)]
        {
            fs::File::open(dir)?.sync_all()
        }
        #[cfg(not(unix))]
        {
            let _ = dir;
            Ok(())
        }
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }
}

/// What survives of the bytes written but not yet synced when `SimIo::crash_keeping` cuts power.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Only synced bytes survive (the usual outcome).
    Nothing,
    /// Every written byte reached the disk although no fsync said so.
    All,
    /// The first half of each file's unsynced bytes survives: a torn write.
    Half,
}

/// An in-memory file system for tests, with crash and failure injection. Cloning shares it.
///
/// Model: each file has its bytes and how many of them are durable (files are only appended to
/// after `create`, so the durable part is a prefix). Names live in two maps: the current one and
/// the durable one; `sync_dir(d)` copies the current names of `d` into the durable map. A crash
/// restores the durable names, drops unsynced bytes (per `Keep`) and invalidates open handles.
#[derive(Clone, Default)]
pub struct SimIo {
    state: Arc<Mutex<SimState>>,
}

#[derive(Default)]
struct SimFile {
    data: Vec<u8>,
    synced: usize,
}

#[derive(Default)]
struct SimState {
    files: HashMap<u64, SimFile>,
    names: BTreeMap<PathBuf, u64>,
    durable_names: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    next_file: u64,
    /// Bumped by every crash; handles opened before it fail.
    epoch: u64,
    /// Mutating operations (create, write, sync, rename, remove, sync_dir) done so far.
    ops: u64,
    /// Power is cut when `ops` reaches this: that operation and all later ones fail.
    cut_at: Option<u64>,
    power_off: bool,
    /// Bytes that may still be written before writes fail (disk full).
    bytes_left: Option<u64>,
    fail_sync: bool,
}

fn sim_err(msg: &str) -> io::Error {
    io::Error::other(msg.to_string())
}

impl SimState {
    /// Counts one mutating operation; fails if the power is (or now goes) off.
    fn tick(&mut self) -> io::Result<()> {
        if self.power_off {
            return Err(sim_err("simulated power loss"));
        }
        if self.cut_at == Some(self.ops) {
            self.power_off = true;
            return Err(sim_err("simulated power loss"));
        }
        self.ops += 1;
        Ok(())
    }

    fn check_dir(&self, path: &Path) -> io::Result<()> {
        let parent = path.parent().unwrap_or(Path::new(""));
        if self.dirs.contains(parent) {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no directory {}", parent.display()),
            ))
        }
    }
}

struct SimHandle {
    sim: SimIo,
    id: u64,
    epoch: u64,
}

impl IoFile for SimHandle {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut st = self.sim.lock();
        if st.epoch != self.epoch {
            return Err(sim_err("file handle from before a crash"));
        }
        let was_off = st.power_off;
        if let Err(e) = st.tick() {
            // The write that the power cut interrupts lands in part (still unsynced).
            if !was_off {
                let half = &buf[..buf.len() / 2];
                if let Some(f) = st.files.get_mut(&self.id) {
                    f.data.extend_from_slice(half);
                }
            }
            return Err(e);
        }
        let mut n = buf.len();
        let mut full = false;
        if let Some(left) = st.bytes_left {
            if (n as u64) > left {
                n = left as usize;
                full = true;
            }
            st.bytes_left = Some(left - n as u64);
        }
        if let Some(f) = st.files.get_mut(&self.id) {
            f.data.extend_from_slice(&buf[..n]);
        }
        if full {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "simulated disk full",
            ));
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut st = self.sim.lock();
        if st.epoch != self.epoch {
            return Err(sim_err("file handle from before a crash"));
        }
        st.tick()?;
        if st.fail_sync {
            return Err(sim_err("simulated fsync failure"));
        }
        if let Some(f) = st.files.get_mut(&self.id) {
            f.synced = f.data.len();
        }
        Ok(())
    }
}

impl SimIo {
    pub fn new() -> SimIo {
        SimIo::default()
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        // A test thread that panicked while holding the lock leaves consistent data behind.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Mutating operations done so far (the crash points a workload passes through).
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Cuts the power once `k` more mutating operations have succeeded: operation `k+1` (a write
    /// lands half) and every later one fail until `crash`.
    pub fn cut_power_after(&self, k: u64) {
        let mut st = self.lock();
        st.cut_at = Some(st.ops + k);
    }

    pub fn power_is_off(&self) -> bool {
        self.lock().power_off
    }

    /// Writes fail once `n` more bytes have been written (the crossing write lands in part).
    pub fn fail_after_bytes(&self, n: u64) {
        self.lock().bytes_left = Some(n);
    }

    /// Every file sync fails while `on`.
    pub fn fail_sync(&self, on: bool) {
        self.lock().fail_sync = on;
    }

    /// Simulates a power loss and restart: only durable names and synced bytes remain.
    pub fn crash(&self) {
        self.crash_keeping(Keep::Nothing);
    }

    /// Simulates a power loss and restart, keeping unsynced bytes as `keep` says. The restart
    /// also clears every injected failure and pending power cut.
    pub fn crash_keeping(&self, keep: Keep) {
        let mut st = self.lock();
        st.names = st.durable_names.clone();
        let live: BTreeSet<u64> = st.names.values().copied().collect();
        st.files.retain(|id, _| live.contains(id));
        for f in st.files.values_mut() {
            let unsynced = f.data.len() - f.synced;
            let kept = match keep {
                Keep::Nothing => 0,
                Keep::All => unsynced,
                Keep::Half => unsynced / 2,
            };
            f.data.truncate(f.synced + kept);
            f.synced = f.data.len();
        }
        st.epoch += 1;
        st.power_off = false;
        st.cut_at = None;
        st.bytes_left = None;
        st.fail_sync = false;
    }

    /// Replaces a file's whole content, durably (for corruption tests).
    pub fn put_file(&self, path: &Path, data: Vec<u8>) {
        let mut st = self.lock();
        if let Some(parent) = path.parent() {
            st.dirs.insert(parent.to_path_buf());
        }
        let id = st.next_file;
        st.next_file += 1;
        let synced = data.len();
        st.files.insert(id, SimFile { data, synced });
        st.names.insert(path.to_path_buf(), id);
        st.durable_names.insert(path.to_path_buf(), id);
    }
}

/// A `SimIo` file opened for reading.
struct SimRead(Vec<u8>);

impl IoRead for SimRead {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        MemRead(&self.0).read_exact_at(buf, offset)
    }
}

impl Io for SimIo {
    fn create(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let mut st = self.lock();
        st.check_dir(path)?;
        st.tick()?;
        let id = st.next_file;
        st.next_file += 1;
        st.files.insert(id, SimFile::default());
        st.names.insert(path.to_path_buf(), id);
        Ok(Box::new(SimHandle {
            sim: self.clone(),
            id,
            epoch: st.epoch,
        }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let st = self.lock();
        let id = *st.names.get(path).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{}", path.display()))
        })?;
        Ok(Box::new(SimHandle {
            sim: self.clone(),
            id,
            epoch: st.epoch,
        }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let st = self.lock();
        st.names
            .get(path)
            .and_then(|id| st.files.get(id))
            .map(|f| f.data.clone())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{}", path.display())))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn IoRead>> {
        // The bytes as they are now: a later write to the file is not seen, as with `read`.
        Ok(Box::new(SimRead(self.read(path)?)))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.lock();
        if !st.dirs.contains(dir) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no directory {}", dir.display()),
            ));
        }
        Ok(st
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.check_dir(to)?;
        if !st.names.contains_key(from) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}", from.display()),
            ));
        }
        st.tick()?;
        if let Some(id) = st.names.remove(from) {
            st.names.insert(to.to_path_buf(), id);
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        if !st.names.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}", path.display()),
            ));
        }
        st.tick()?;
        st.names.remove(path);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.tick()?;
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        st.durable_names.retain(|p, _| !in_dir(p));
        let current: Vec<(PathBuf, u64)> = st
            .names
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, id)| (p.clone(), *id))
            .collect();
        st.durable_names.extend(current);
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.lock();
        // Directories are durable at once: the model tracks file names only.
        let mut d = Some(dir);
        while let Some(p) = d {
            st.dirs.insert(p.to_path_buf());
            d = p.parent();
        }
        Ok(())
    }
}
