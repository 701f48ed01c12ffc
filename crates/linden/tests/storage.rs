//! The data directory over real `linden` processes (issue 26): it belongs to one process (a
//! second `serve` or an `import` stops at once, naming the PID that has it), a start removes
//! the temporary files a killed process left, and a full disk is survivable: writes are
//! refused while the transaction log cannot grow and accepted again by themselves once space
//! is freed, snapshots leave the log its reserve (the shutdown one is skipped when it would not
//! fit), every snapshot failure is logged, and a start below `min_free_bytes` is refused.
//!
//! The full-disk tests mount a small tmpfs, which needs root: they are ignored unless run with
//! `LINDEN_TEST_MOUNTS=1 cargo test -p linden --test storage -- --ignored` (scripts/test.sh
//! does where it can mount one). Every wait is bounded by a deadline and polls a condition.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use common::linden;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldap3::{LdapConn, LdapConnSettings, Mod, Scope, SearchEntry};

const ADMIN: &str = "cn=admin,dc=example,dc=com";
const BASE: &str = "dc=example,dc=com";
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a process may take to start listening, or to exit.
const DEADLINE: Duration = Duration::from_secs(30);

/// A `linden serve` process; killed (SIGKILL) when dropped, so a failing test leaves none.
struct Server {
    child: Child,
    /// The address once it reported one.
    addr: Option<SocketAddr>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `linden serve` on `data` with `extra` arguments; does not wait.
    fn spawn(data: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_linden"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(["--admin-password", "secret"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start linden serve");
        let pipe = child.stderr.take().expect("stderr piped");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&stderr);
        // Drains stderr for the process's whole life, so it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.lock().expect("lock").push(line);
            }
        });
        Server {
            child,
            addr: None,
            stderr,
        }
    }

    /// Starts `linden serve` and waits (bounded) until it listens.
    fn start(data: &Path, extra: &[&str]) -> Server {
        let mut s = Server::spawn(data, extra);
        let deadline = Instant::now() + DEADLINE;
        loop {
            let addr = s.log_lines().iter().find_map(|l| {
                let rest = l.split("listening on ").nth(1)?;
                rest.split([',', ' ']).next()?.parse::<SocketAddr>().ok()
            });
            if let Some(a) = addr {
                s.addr = Some(a);
                return s;
            }
            if let Some(st) = s.child.try_wait().expect("try_wait") {
                panic!("server exited ({st}) before listening:\n{}", s.log());
            }
            assert!(
                Instant::now() < deadline,
                "server did not report its port:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn url(&self) -> String {
        format!("ldap://{}", self.addr.expect("listening"))
    }

    fn log_lines(&self) -> Vec<String> {
        self.stderr.lock().expect("lock").clone()
    }

    fn log(&self) -> String {
        self.log_lines().join("\n")
    }

    /// Waits (bounded) until a log line contains `what`.
    fn wait_log(&self, what: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(l) = self.log_lines().into_iter().find(|l| l.contains(what)) {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no log line with '{what}':\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (bounded) for the process to exit by itself; its status and everything it logged.
    fn wait_exit(mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                // The reader thread may still hold the last lines: wait for the pipe to end.
                let end = Instant::now() + DEADLINE;
                while Arc::strong_count(&self.stderr) > 1 && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return (st, self.log());
            }
            assert!(
                Instant::now() < deadline,
                "process {} is still running; it logged:\n{}",
                self.pid(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then wait (bounded) for the clean exit.
    fn terminate(self) -> (ExitStatus, String) {
        let st = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -TERM failed");
        self.wait_exit()
    }

    /// SIGKILL: no shutdown code runs.
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("wait");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn admin(url: &str) -> LdapConn {
    let settings = LdapConnSettings::new().set_conn_timeout(Duration::from_secs(5));
    let mut c = LdapConn::with_settings(settings, url).expect("connect");
    c.with_timeout(OP_TIMEOUT)
        .simple_bind(ADMIN, "secret")
        .expect("bind")
        .success()
        .expect("admin bind succeeds");
    c
}

fn set(v: &str) -> HashSet<&str> {
    HashSet::from([v])
}

fn dn(uid: &str) -> String {
    format!("uid={uid},{BASE}")
}

/// Adds `uid=<uid>` with `description`; the result code and message.
fn add(c: &mut LdapConn, uid: &str, description: &str) -> (u32, String) {
    let r = c
        .with_timeout(OP_TIMEOUT)
        .add(
            &dn(uid),
            vec![
                ("objectClass", set("account")),
                ("uid", set(uid)),
                ("description", set(description)),
            ],
        )
        .expect("add answered");
    (r.rc, r.text)
}

/// Replaces the description of `uid=<uid>`; the result code and message.
fn modify(c: &mut LdapConn, uid: &str, description: &str) -> (u32, String) {
    let r = c
        .with_timeout(OP_TIMEOUT)
        .modify(
            &dn(uid),
            vec![Mod::Replace("description", set(description))],
        )
        .expect("modify answered");
    (r.rc, r.text)
}

/// The description of every `account` under the base, by uid.
fn accounts(url: &str) -> std::collections::BTreeMap<String, String> {
    let mut c = admin(url);
    let (entries, _) = c
        .with_timeout(OP_TIMEOUT)
        .search(
            BASE,
            Scope::OneLevel,
            "(objectClass=account)",
            vec!["uid", "description"],
        )
        .expect("search")
        .success()
        .expect("search succeeds");
    entries
        .into_iter()
        .map(SearchEntry::construct)
        .map(|e| {
            let one = |a: &str| {
                e.attrs
                    .get(a)
                    .and_then(|v| v.first())
                    .cloned()
                    .unwrap_or_default()
            };
            (one("uid"), one("description"))
        })
        .collect()
}

/// One attribute of one cn=Monitor entry (read as the administrator).
fn monitor(url: &str, entry: &str, attr: &str) -> Option<String> {
    let mut c = admin(url);
    let (entries, _) = c
        .with_timeout(OP_TIMEOUT)
        .search(entry, Scope::Base, "(objectClass=*)", vec![attr])
        .ok()?
        .success()
        .ok()?;
    let e = SearchEntry::construct(entries.into_iter().next()?);
    e.attrs.get(attr).and_then(|v| v.first()).cloned()
}

/// Asks the server for a snapshot with `linden snapshot`: (exit status, stdout, stderr).
fn request_snapshot(s: &Server) -> (i32, String, String) {
    linden(&["snapshot", "--url", &s.url(), "--password", "secret"])
}

/// A configuration file in `dir` with `text`; its path.
fn config(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("linden.toml");
    std::fs::write(&p, text).expect("write config");
    p
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A second `serve`, and an `import`, on the directory of a running server stop at once with
/// a message naming the directory and the PID that has it; the first server serves on and
/// loses nothing; once it has stopped, the second one starts.
#[test]
fn a_second_server_or_import_on_the_same_directory_stops_at_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let first = Server::start(&data, &[]);
    let url = first.url();
    let mut c = admin(&url);
    assert_eq!(add(&mut c, "before", "1").0, 0);

    let (st, log) = Server::spawn(&data, &[]).wait_exit();
    assert!(
        !st.success(),
        "a second server on {} started:\n{log}",
        data.display()
    );
    let shown = data.display().to_string();
    let pid = format!("PID {}", first.pid());
    assert!(
        log.contains(&shown) && log.contains(&pid) && log.contains("in use"),
        "the refusal names neither the directory nor the PID:\n{log}"
    );
    // The version line a start logs first, then the one line of the refusal.
    assert_eq!(
        log.lines().filter(|l| !l.ends_with(" starting")).count(),
        1,
        "not one line:\n{log}"
    );

    let ldif = tmp.path().join("import.ldif");
    std::fs::write(
        &ldif,
        "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n",
    )
    .expect("ldif");
    let (rc, _, err) = linden(&[
        "import",
        "--data",
        data.to_str().expect("utf-8"),
        ldif.to_str().expect("utf-8"),
    ]);
    assert_ne!(
        rc, 0,
        "an import into a running server's directory ran:\n{err}"
    );
    assert!(err.contains(&shown) && err.contains(&pid), "{err}");

    // The first server goes on, and keeps what it acknowledged.
    assert_eq!(add(&mut c, "after", "2").0, 0);
    assert_eq!(modify(&mut c, "before", "3").0, 0);
    let _ = c.unbind();
    let (st, log) = first.terminate();
    assert!(st.success(), "{log}");

    let second = Server::start(&data, &[]);
    let got = accounts(&second.url());
    let want: std::collections::BTreeMap<String, String> = [("after", "2"), ("before", "3")]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(got, want, "an acknowledged write is missing");
    let lock = std::fs::read_to_string(data.join("linden.lock")).expect("lock file");
    assert_eq!(lock.trim(), second.pid().to_string());
}

/// Temporary files left by a process killed while writing them (a snapshot, a log file being
/// started) are removed at the next start, which says so; the data is intact.
#[test]
fn stale_tmp_files_left_by_a_kill_are_removed_at_start() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let s = Server::start(&data, &[]);
    let mut c = admin(&s.url());
    assert_eq!(add(&mut c, "kept", "1").0, 0);
    let _ = c.unbind();
    s.kill();
    // What a kill -9 during a snapshot, and during the start of a log file, leaves.
    let snap = data.join("snap-00000000000000000001.lns.tmp");
    let mut f = std::fs::File::create(&snap).expect("create");
    f.write_all(b"LNDNSNAP\x04\x00\x00\x00").expect("write");
    f.write_all(&[0x5a; 100_000]).expect("write");
    drop(f);
    let log_tmp = data.join("log-00000000000000000077.lnl.tmp");
    std::fs::write(&log_tmp, b"LNDNLOG\x00\x02\x00\x00\x00").expect("write");
    let other = data.join("notes.tmp");
    std::fs::write(&other, b"not Linden's").expect("write");

    let s = Server::start(&data, &[]);
    assert!(!snap.exists(), "{} is still there", snap.display());
    assert!(!log_tmp.exists(), "{} is still there", log_tmp.display());
    assert!(other.exists(), "a file that is not Linden's was removed");
    let line = s.wait_log("snap-00000000000000000001.lns.tmp");
    assert!(line.contains("removed") && line.contains("lock"), "{line}");
    s.wait_log("log-00000000000000000077.lnl.tmp");
    assert_eq!(
        accounts(&s.url()).get("kept").map(String::as_str),
        Some("1")
    );
}

/// A start with less free space than `min_free_bytes` stops with one line naming the directory,
/// what is free and what is needed, and writes nothing into it but the lock.
#[test]
fn a_start_below_min_free_bytes_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let cfg = config(tmp.path(), "min_free_bytes = 1152921504606846976\n");
    let (st, log) = Server::spawn(&data, &["--config", cfg.to_str().expect("utf-8")]).wait_exit();
    assert!(!st.success(), "{log}");
    // The version line a start logs first, then the one line of the refusal.
    assert_eq!(
        log.lines().filter(|l| !l.ends_with(" starting")).count(),
        1,
        "not one line:\n{log}"
    );
    assert!(
        log.contains(&data.display().to_string())
            && log.contains("free")
            && log.contains("1152921504606846976 bytes")
            && log.contains("min_free_bytes"),
        "{log}"
    );
    assert_eq!(names(&data), vec!["linden.lock".to_string()]);
}

/// An import checks the free space as a start does: below `min_free_bytes` it stops before it
/// reads the LDIF, naming the directory and the key, and leaves nothing but the lock.
#[test]
fn an_import_below_min_free_bytes_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let cfg = config(tmp.path(), "min_free_bytes = 1152921504606846976\n");
    let ldif = tmp.path().join("import.ldif");
    std::fs::write(
        &ldif,
        "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n",
    )
    .expect("ldif");
    let (rc, _, err) = linden(&[
        "import",
        "--config",
        cfg.to_str().expect("utf-8"),
        "--data",
        data.to_str().expect("utf-8"),
        ldif.to_str().expect("utf-8"),
    ]);
    assert_ne!(rc, 0, "an import without the free space ran:\n{err}");
    assert!(
        err.contains(&data.display().to_string())
            && err.contains("1152921504606846976 bytes")
            && err.contains("min_free_bytes"),
        "{err}"
    );
    assert_eq!(names(&data), vec!["linden.lock".to_string()]);
}

/// A snapshot that does not fit beside the log's reserve is not written, and says so in the
/// server's log, also when the administrator asked for it; writes go on.
#[test]
fn a_snapshot_without_room_is_logged_and_writes_go_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // A reserve no disk has: every snapshot is refused for space.
    let cfg = config(tmp.path(), "log_reserve_bytes = 1152921504606846976\n");
    let s = Server::start(&data, &["--config", cfg.to_str().expect("utf-8")]);
    let mut c = admin(&s.url());
    assert_eq!(add(&mut c, "a", "1").0, 0);
    let (rc, out, err) = request_snapshot(&s);
    assert_ne!(rc, 0, "{out}{err}");
    assert!(err.contains("log_reserve_bytes"), "{err}");
    let line = s.wait_log("requested snapshot skipped");
    assert!(line.contains("log_reserve_bytes"), "{line}");
    assert!(!names(&data)
        .iter()
        .any(|n| n.ends_with(".tmp") || n.starts_with("snap-")));
    assert_eq!(
        modify(&mut c, "a", "2").0,
        0,
        "a failed snapshot stopped writes"
    );
    let _ = c.unbind();
    let (st, log) = s.terminate();
    assert!(st.success(), "{log}");
    assert!(log.contains("snapshot at shutdown skipped"), "{log}");
    let s = Server::start(&data, &[]);
    assert_eq!(accounts(&s.url()).get("a").map(String::as_str), Some("2"));
}

// ---- On a small tmpfs (root only) ----

/// Whether the mount tests may run; says why not when they may not.
fn mounts_allowed(test: &str) -> bool {
    if std::env::var("LINDEN_TEST_MOUNTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: {test} mounts a tmpfs (needs root): run with LINDEN_TEST_MOUNTS=1");
    false
}

/// A tmpfs of a given size mounted on a temporary directory; unmounted when dropped.
struct Tmpfs {
    mnt: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().expect("tempdir");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).expect("mount point");
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mnt)
            .status()
            .expect("run mount");
        assert!(
            st.success(),
            "mount -t tmpfs failed (LINDEN_TEST_MOUNTS=1 needs root)"
        );
        Tmpfs { mnt, _dir: dir }
    }

    /// Fills the file system with `filler` until it is full, then frees `leave` bytes of it.
    fn fill(&self, leave: u64) -> PathBuf {
        let path = self.mnt.join("filler");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("filler");
        let block = vec![0xa5u8; 64 << 10];
        // Bounded by the file system's size: at most size / 64 KiB writes before it is full.
        loop {
            match f.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                Err(e) => panic!("filling {}: {e}", path.display()),
            }
        }
        let len = f.metadata().expect("metadata").len();
        f.set_len(len.saturating_sub(leave)).expect("truncate");
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

/// The disk fills while the server takes writes: writes are refused with unavailable (52) and
/// a message saying the disk of the data directory is full and writes resume by themselves,
/// cn=Monitor says so; once space is freed, the next write is accepted without a restart. A
/// restart then finds every acknowledged write.
#[test]
#[ignore = "mounts a tmpfs (needs root): run with LINDEN_TEST_MOUNTS=1"]
fn a_full_disk_refuses_writes_and_space_coming_back_lets_them_in() {
    if !mounts_allowed("a_full_disk_refuses_writes_and_space_coming_back_lets_them_in") {
        return;
    }
    let fs = Tmpfs::mount("16m");
    let data = fs.mnt.join("data");
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = config(
        tmp.path(),
        "min_free_bytes = 1048576\nlog_reserve_bytes = 2097152\nsnapshot_interval = 0\nsnapshot_log_bytes = 0\n",
    );
    let cfg = cfg.to_str().expect("utf-8");
    let s = Server::start(&data, &["--config", cfg]);
    let url = s.url();
    let mut c = admin(&url);
    assert_eq!(add(&mut c, "w", "0").0, 0);
    let filler = fs.fill(0);

    // Big values use up what the log had reserved ahead; then the disk is full for it.
    let big = "x".repeat(60_000);
    let mut acked = 0;
    let (rc, text) = loop {
        let (rc, text) = modify(&mut c, "w", &format!("{acked} {big}"));
        if rc != 0 {
            break (rc, text);
        }
        acked += 1;
        assert!(acked < 500, "the log never ran out of space");
    };
    assert_eq!(rc, 52, "{text}");
    assert!(
        text.contains("full")
            && text.contains(&data.display().to_string())
            && text.contains("resume by themselves"),
        "{text}"
    );
    s.wait_log("writes refused until space is freed");
    assert_eq!(
        monitor(&url, "cn=Writes,cn=Disk,cn=Monitor", "monitoredInfo").as_deref(),
        Some("refused: the disk is full")
    );
    // Refused again (a batch that needs the room; a small one may still fit in what the log
    // has left of its reservation), and reads go on.
    assert_eq!(modify(&mut c, "w", &format!("refused {big}")).0, 52);
    assert!(accounts(&url)["w"].starts_with(&format!("{} ", acked - 1)));

    // Space comes back: the very next write goes through, without a restart.
    std::fs::remove_file(&filler).expect("free space");
    assert_eq!(modify(&mut c, "w", "after").0, 0);
    assert_eq!(add(&mut c, "more", "1").0, 0);
    s.wait_log("writes are accepted again");
    assert_eq!(
        monitor(&url, "cn=Writes,cn=Disk,cn=Monitor", "monitoredInfo").as_deref(),
        Some("accepted")
    );
    let free: u64 = monitor(&url, "cn=Free,cn=Disk,cn=Monitor", "monitorCounter")
        .expect("free space in cn=Monitor")
        .parse()
        .expect("a number");
    assert!(free > 1 << 20 && free <= 16 << 20, "{free}");
    let _ = c.unbind();
    s.kill();

    let s = Server::start(&data, &["--config", cfg]);
    let got = accounts(&s.url());
    assert_eq!(got.get("w").map(String::as_str), Some("after"));
    assert_eq!(got.get("more").map(String::as_str), Some("1"));
}

/// SIGTERM with too little room for the shutdown snapshot beside the log's reserve: it is
/// skipped with a log line saying how much it needed, no `.tmp` is left, and the next start
/// works and has everything. A start with less than `min_free_bytes` is refused, naming the
/// directory, what is free and what is needed.
#[test]
#[ignore = "mounts a tmpfs (needs root): run with LINDEN_TEST_MOUNTS=1"]
fn the_shutdown_snapshot_is_skipped_without_room_and_the_next_start_works() {
    if !mounts_allowed("the_shutdown_snapshot_is_skipped_without_room_and_the_next_start_works") {
        return;
    }
    let fs = Tmpfs::mount("16m");
    let data = fs.mnt.join("data");
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = config(
        tmp.path(),
        "min_free_bytes = 1048576\nlog_reserve_bytes = 4194304\nsnapshot_interval = 0\nsnapshot_log_bytes = 0\n",
    );
    let cfg = cfg.to_str().expect("utf-8");
    let s = Server::start(&data, &["--config", cfg]);
    let mut c = admin(&s.url());
    for i in 0..50 {
        assert_eq!(add(&mut c, &format!("u{i}"), &"y".repeat(1000)).0, 0);
    }
    let _ = c.unbind();
    // 2 MiB free: enough to start and write, not for a snapshot beside a 4 MiB reserve.
    let filler = fs.fill(2 << 20);
    let (st, log) = s.terminate();
    assert!(st.success(), "{log}");
    let line = log
        .lines()
        .find(|l| l.contains("snapshot at shutdown skipped"))
        .unwrap_or_else(|| panic!("no line about the skipped snapshot:\n{log}"));
    assert!(
        line.contains("needs about") && line.contains("log_reserve_bytes"),
        "{line}"
    );
    assert!(
        !names(&data)
            .iter()
            .any(|n| n.ends_with(".tmp") || n.starts_with("snap-")),
        "{:?}",
        names(&data)
    );

    let s = Server::start(&data, &["--config", cfg]);
    assert_eq!(accounts(&s.url()).len(), 50);
    let mut c = admin(&s.url());
    assert_eq!(add(&mut c, "next", "1").0, 0);
    let _ = c.unbind();
    s.kill();

    // Full to the last byte: below min_free_bytes, the start is refused.
    std::fs::remove_file(&filler).expect("remove filler");
    fs.fill(0);
    let (st, log) = Server::spawn(&data, &["--config", cfg]).wait_exit();
    assert!(!st.success(), "{log}");
    assert!(
        log.contains(&data.display().to_string())
            && log.contains("free on its file system")
            && log.contains("1048576 bytes")
            && log.contains("min_free_bytes"),
        "{log}"
    );
}
