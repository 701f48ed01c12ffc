//! The one door to the disk (style rule 9).
//!
//! Persistence code never calls `std::fs`; it goes through `Io`, so tests can swap in `SimIo`,
//! which keeps files in memory, knows which bytes and which directory entries are durable, and
//! can cut the power at any write, inject fsync failures, and run out of space (a disk of a
//! given size, with reservations and truncation, so that a full disk and the space coming back
//! are tested as the real file system behaves).

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
    /// Bytes an unprivileged process may still allocate on the file system holding `dir`
    /// (`statvfs`: available blocks times fragment size).
    fn free_space(&self, dir: &Path) -> io::Result<u64>;
}

/// Whether an I/O error says the file system has no room (ENOSPC, or EDQUOT: the user's quota
/// is used up), as opposed to a failing device or a broken file system.
pub fn is_no_space(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// A file open for writing.
pub trait IoFile: Send {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes every byte written so far durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Allocates disk space for the file's first `len` bytes without changing its size
    /// (`fallocate` with `FALLOC_FL_KEEP_SIZE`), so that writing up to `len` needs no more
    /// space: a full disk shows here, before any byte is written. `ErrorKind::Unsupported`
    /// where the file system cannot (the caller then meets a full disk at the write).
    fn reserve(&mut self, len: u64) -> io::Result<()>;
    /// Cuts the file back to its first `len` bytes, releasing the space allocated past them
    /// (reserved or written); the next write goes at `len`.
    fn truncate(&mut self, len: u64) -> io::Result<()>;
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
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn reserve(&mut self, len: u64) -> io::Result<()> {
        use rustix::fs::{fallocate, FallocateFlags};
        use rustix::io::Errno;
        if len == 0 {
            return Ok(());
        }
        match fallocate(&self.0, FallocateFlags::KEEP_SIZE, 0, len) {
            Ok(()) => Ok(()),
            Err(e) if e == Errno::OPNOTSUPP || e == Errno::NOSYS => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the file system cannot reserve space (fallocate)",
            )),
            Err(e) => Err(e.into()),
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn reserve(&mut self, _len: u64) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "reserving space is implemented on Linux only",
        ))
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        use std::io::Seek;
        self.0.set_len(len)?;
        // A file opened for appending writes at its end anyway; one opened with `create`
        // has a cursor that must not stay past the new end (the next write would leave a
        // hole of zeros).
        self.0.seek(io::SeekFrom::Start(len)).map(|_| ())
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
    #[cfg(unix)]
    fn free_space(&self, dir: &Path) -> io::Result<u64> {
        let s = rustix::fs::statvfs(dir)?;
        Ok(s.f_bavail.saturating_mul(s.f_frsize))
    }
    #[cfg(not(unix))]
    fn free_space(&self, _dir: &Path) -> io::Result<u64> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "free space is known on Unix only",
        ))
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
/// Model: each file has its bytes, how many of them are durable (files are only appended to
/// after `create`, or cut back by `truncate`, so the durable part is a prefix) and the space
/// allocated to it (its size, or more after `reserve`). Names live in two maps: the current one
/// and the durable one; `sync_dir(d)` copies the current names of `d` into the durable map. A
/// crash restores the durable names, drops unsynced bytes (per `Keep`) and invalidates open
/// handles.
///
/// Space: by default the disk is endless. `set_free_space(Some(n))` gives it room for `n` more
/// bytes than the named files hold now; allocations (writes past a file's allocation,
/// reservations) then take from it, and removing or truncating files gives it back, as on a
/// real file system. A write that does not fit lands in part (as many bytes as fit) and fails
/// with `StorageFull`; a reservation that does not fit allocates nothing and fails.
#[derive(Clone, Default)]
pub struct SimIo {
    state: Arc<Mutex<SimState>>,
}

#[derive(Default)]
struct SimFile {
    data: Vec<u8>,
    synced: usize,
    /// Bytes allocated: at least `data.len()`, more after `reserve`.
    alloc: u64,
}

impl SimFile {
    fn allocated(&self) -> u64 {
        self.alloc.max(self.data.len() as u64)
    }
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
    /// Mutating operations (create, write, sync, reserve, truncate, rename, remove, sync_dir)
    /// done so far.
    ops: u64,
    /// Power is cut when `ops` reaches this: that operation and all later ones fail.
    cut_at: Option<u64>,
    power_off: bool,
    /// The disk's size in bytes; `None`: endless.
    capacity: Option<u64>,
    fail_sync: bool,
    /// `reserve` answers `Unsupported`, as on a file system without fallocate.
    no_reserve: bool,
}

/// What `SimIo::free_space` reports for an endless disk.
const SIM_ENDLESS: u64 = 1 << 50;

fn sim_err(msg: &str) -> io::Error {
    io::Error::other(msg.to_string())
}

fn sim_full() -> io::Error {
    io::Error::new(io::ErrorKind::StorageFull, "simulated disk full")
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

    /// Space held by the files that have a name (an unnamed file's space is not counted: the
    /// model keeps it until the next crash, a real file system until its last handle closes).
    fn used(&self) -> u64 {
        let named: BTreeSet<u64> = self.names.values().copied().collect();
        named
            .iter()
            .filter_map(|id| self.files.get(id))
            .map(SimFile::allocated)
            .sum()
    }

    fn free(&self) -> u64 {
        match self.capacity {
            Some(c) => c.saturating_sub(self.used()),
            None => SIM_ENDLESS,
        }
    }
}

struct SimHandle {
    sim: SimIo,
    id: u64,
    epoch: u64,
}

impl SimHandle {
    /// The shared state, if this handle is still valid (not from before a crash).
    fn state(&self) -> io::Result<MutexGuard<'_, SimState>> {
        let st = self.sim.lock();
        if st.epoch != self.epoch {
            return Err(sim_err("file handle from before a crash"));
        }
        Ok(st)
    }
}

impl IoFile for SimHandle {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut st = self.state()?;
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
        let free = st.free();
        let Some(f) = st.files.get_mut(&self.id) else {
            return Ok(());
        };
        // Bytes within the allocation (reserved or cut back) need no new space.
        let room = f.allocated() - f.data.len() as u64 + free;
        let n = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        f.data.extend_from_slice(&buf[..n]);
        if n < buf.len() {
            return Err(sim_full());
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut st = self.state()?;
        st.tick()?;
        if st.fail_sync {
            return Err(sim_err("simulated fsync failure"));
        }
        if let Some(f) = st.files.get_mut(&self.id) {
            f.synced = f.data.len();
        }
        Ok(())
    }

    fn reserve(&mut self, len: u64) -> io::Result<()> {
        let mut st = self.state()?;
        if st.no_reserve {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "simulated file system without fallocate",
            ));
        }
        st.tick()?;
        let free = st.free();
        if let Some(f) = st.files.get_mut(&self.id) {
            let more = len.saturating_sub(f.allocated());
            if more > free {
                return Err(sim_full());
            }
            f.alloc = f.alloc.max(len);
        }
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let mut st = self.state()?;
        st.tick()?;
        if let Some(f) = st.files.get_mut(&self.id) {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            f.data.resize(len, 0);
            f.synced = f.synced.min(len);
            // As ext4 and tmpfs do: space reserved past the new end is released too.
            f.alloc = len as u64;
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

    /// Sizes the disk so that `n` more bytes fit beside what the named files hold now
    /// (`None`: an endless disk again). Freeing space is calling it again with more.
    pub fn set_free_space(&self, n: Option<u64>) {
        let mut st = self.lock();
        st.capacity = n.map(|n| st.used().saturating_add(n));
    }

    /// Bytes the named files hold (written or reserved).
    pub fn used_space(&self) -> u64 {
        self.lock().used()
    }

    /// While `on`, `reserve` answers `Unsupported` (a file system without fallocate).
    pub fn without_reserve(&self, on: bool) {
        self.lock().no_reserve = on;
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
    /// also clears the injected fsync failures and pending power cut; the disk keeps its size
    /// and the files their reserved space.
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
        st.files.insert(
            id,
            SimFile {
                data,
                synced,
                alloc: 0,
            },
        );
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

    fn free_space(&self, dir: &Path) -> io::Result<u64> {
        let st = self.lock();
        if !st.dirs.contains(dir) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no directory {}", dir.display()),
            ));
        }
        Ok(st.free())
    }
}
