//! A real `linden serve` killed with SIGKILL while clients write, then restarted: every
//! acknowledged write must be there afterwards (issue 4), and `linden verify` as a user runs it.
//!
//! Each client thread owns its own entries, so it keeps an exact model of them: a write whose
//! success response arrived is applied to the model; a write sent but not answered (the server
//! died) is "in doubt" and may or may not be applied — but only wholly. Every loop is bounded by
//! a count and a deadline. Set LINDEN_CRASH_SEED to replay a run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use common::linden;
use common::serve::spawn_listening;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldap3::{LdapConn, LdapConnSettings, LdapResult, Mod, Scope, SearchEntry};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ADMIN: &str = "cn=admin,dc=example,dc=com";
const PEOPLE: &str = "ou=people,dc=example,dc=com";
const CLIENTS: u64 = 4;
const ROUNDS: u64 = 5;
/// Per client and round; the kill normally ends the loop long before.
const MAX_OPS: u64 = 2_000;
const ROUND_DEADLINE: Duration = Duration::from_secs(3);
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between snapshot requests in the rounds that ask for snapshots while clients write.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(40);

/// A running `linden serve`; killed (SIGKILL) when dropped, so a failing test leaves no process.
struct Server {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(data: &Path) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_linden"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(["--admin-password", "secret"]);
        let (child, addr, stderr) = spawn_listening(&mut cmd, "linden serve");
        Server {
            child,
            addr,
            stderr,
        }
    }

    fn url(&self) -> String {
        format!("ldap://{}", self.addr)
    }

    /// SIGKILL (what `Child::kill` sends on Unix): no shutdown code runs.
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("wait");
    }

    /// SIGTERM, then wait (bounded) for the clean exit, which writes a snapshot.
    fn terminate(mut self) -> std::process::ExitStatus {
        let st = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not stop after SIGTERM; stderr:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        self.stderr.lock().expect("lock").join("\n")
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
    c.simple_bind(ADMIN, "secret")
        .expect("bind")
        .success()
        .expect("admin bind succeeds");
    c
}

fn data_files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read data dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// One client's entry as the model (and the server) sees it: `uid=c<t>-<n>` or, after a
/// modrdn, `uid=r<t>-<n>`; `description` and `title` always hold the same counter value
/// because every modify replaces both at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ent {
    renamed: bool,
    value: u64,
}

fn uid(t: u64, n: u64, renamed: bool) -> String {
    format!("{}{t}-{n}", if renamed { 'r' } else { 'c' })
}

fn dn(t: u64, n: u64, renamed: bool) -> String {
    format!("uid={},{PEOPLE}", uid(t, n, renamed))
}

#[derive(Debug, Clone)]
struct Pending {
    n: u64,
    before: Option<Ent>,
    after: Option<Ent>,
    what: String,
}

/// What one client knows for sure about its entries.
#[derive(Debug, Default)]
struct Model {
    t: u64,
    /// Entries n < next_n that are absent from `live` are deleted (or were never added).
    next_n: u64,
    live: HashMap<u64, Ent>,
    counter: u64,
    /// The one write that was sent but not answered when the server died.
    pending: Option<Pending>,
    /// Every write per entry, for the failure report.
    history: HashMap<u64, Vec<String>>,
    acked: u64,
    in_doubt: u64,
    /// In-doubt writes found applied after the restart.
    in_doubt_applied: u64,
}

impl Model {
    fn note(&mut self, n: u64, s: String) {
        self.history.entry(n).or_default().push(s);
    }
}

enum Outcome {
    Acked,
    InDoubt(String),
    Refused(LdapResult),
}

fn outcome(r: ldap3::result::Result<LdapResult>) -> Outcome {
    match r {
        Ok(res) if res.rc == 0 => Outcome::Acked,
        Ok(res) => Outcome::Refused(res),
        Err(e) => Outcome::InDoubt(e.to_string()),
    }
}

fn set(v: &str) -> HashSet<&str> {
    HashSet::from([v])
}

/// One client for one round: writes until the server dies, the op count or the deadline.
/// Returns errors that are failures by themselves (a write refused by a live server).
fn client(url: String, model: &mut Model, seed: u64, round: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let t = model.t;
    let deadline = Instant::now() + ROUND_DEADLINE;
    let mut failures = Vec::new();
    let settings = LdapConnSettings::new().set_conn_timeout(Duration::from_secs(2));
    let Ok(mut c) = LdapConn::with_settings(settings, &url) else {
        return failures; // killed before we connected: nothing sent, nothing in doubt
    };
    match c.with_timeout(OP_TIMEOUT).simple_bind(ADMIN, "secret") {
        Ok(r) if r.rc == 0 => {}
        Ok(r) => {
            failures.push(format!("client {t}: bind refused: {r:?}"));
            return failures;
        }
        Err(_) => return failures,
    }
    for _ in 0..MAX_OPS {
        if Instant::now() > deadline {
            break;
        }
        let live: Vec<u64> = {
            let mut v: Vec<u64> = model.live.keys().copied().collect();
            v.sort_unstable();
            v
        };
        let roll: f64 = rng.gen();
        let (n, before, after, what, result) = if live.len() < 3 || roll < 0.35 {
            let n = model.next_n;
            model.next_n += 1;
            let u = uid(t, n, false);
            let cn = format!("Client {t} number {n}");
            let attrs = vec![
                ("objectClass", set("inetOrgPerson")),
                ("uid", set(&u)),
                ("cn", set(&cn)),
                ("sn", set("Crash")),
                ("description", set("0")),
                ("title", set("0")),
            ];
            let r = c.with_timeout(OP_TIMEOUT).add(&dn(t, n, false), attrs);
            let after = Ent {
                renamed: false,
                value: 0,
            };
            (n, None, Some(after), format!("add {u}"), r)
        } else {
            let n = live[rng.gen_range(0..live.len())];
            let e = model.live[&n];
            let d = dn(t, n, e.renamed);
            let roll: f64 = rng.gen();
            if roll < 0.6 || (roll < 0.8 && e.renamed) {
                model.counter += 1;
                let v = model.counter.to_string();
                let mods = vec![
                    Mod::Replace("description", set(&v)),
                    Mod::Replace("title", set(&v)),
                ];
                let r = c.with_timeout(OP_TIMEOUT).modify(&d, mods);
                let after = Ent {
                    renamed: e.renamed,
                    value: model.counter,
                };
                (n, Some(e), Some(after), format!("modify {d} to {v}"), r)
            } else if roll < 0.8 {
                let rdn = format!("uid={}", uid(t, n, true));
                let r = c.with_timeout(OP_TIMEOUT).modifydn(&d, &rdn, true, None);
                let after = Ent {
                    renamed: true,
                    value: e.value,
                };
                (n, Some(e), Some(after), format!("modrdn {d} to {rdn}"), r)
            } else {
                let r = c.with_timeout(OP_TIMEOUT).delete(&d);
                (n, Some(e), None, format!("delete {d}"), r)
            }
        };
        match outcome(result) {
            Outcome::Acked => {
                model.acked += 1;
                model.note(n, format!("round {round}: {what}: acknowledged"));
                match after {
                    Some(a) => model.live.insert(n, a),
                    None => model.live.remove(&n),
                };
            }
            Outcome::InDoubt(e) => {
                model.in_doubt += 1;
                model.note(n, format!("round {round}: {what}: in doubt ({e})"));
                model.pending = Some(Pending {
                    n,
                    before,
                    after,
                    what,
                });
                return failures;
            }
            Outcome::Refused(r) => {
                // The server was alive and said no: the model is wrong or the server is.
                model.note(n, format!("round {round}: {what}: refused {r:?}"));
                failures.push(format!("client {t}: {what} refused: {r:?}"));
                return failures;
            }
        }
    }
    let _ = c.unbind();
    failures
}

/// Asks for snapshots (Linden's extended operation) until the server dies or the deadline,
/// so that kills also land while a snapshot is written and old files are pruned. Returns how
/// many were written.
fn snapshotter(url: String) -> u64 {
    let deadline = Instant::now() + ROUND_DEADLINE;
    let settings = LdapConnSettings::new().set_conn_timeout(Duration::from_secs(2));
    let Ok(mut c) = LdapConn::with_settings(settings, &url) else {
        return 0;
    };
    if !matches!(c.with_timeout(OP_TIMEOUT).simple_bind(ADMIN, "secret"), Ok(r) if r.rc == 0) {
        return 0;
    }
    let mut written = 0;
    while Instant::now() < deadline {
        let exop = ldap3::exop::Exop {
            name: Some(server::SNAPSHOT_OID.to_string()),
            val: None,
        };
        match c.with_timeout(OP_TIMEOUT).extended(exop) {
            Ok(ldap3::result::ExopResult(resp, res)) if res.rc == 0 => {
                written += u64::from(resp.val.is_some_and(|v| !v.is_empty()));
            }
            _ => break,
        }
        std::thread::sleep(SNAPSHOT_EVERY);
    }
    written
}

/// Reads every client entry from the server and checks it against the models; the in-doubt
/// write of each client is settled to whatever the server shows (before or after, nothing
/// else). Returns the violations.
fn check(url: &str, models: &mut [Model], when: &str) -> Vec<String> {
    let mut c = admin(url);
    let (entries, _) = c
        .search(
            PEOPLE,
            Scope::OneLevel,
            "(objectClass=inetOrgPerson)",
            vec!["uid", "description", "title"],
        )
        .expect("search")
        .success()
        .expect("search succeeds");
    let _ = c.unbind();
    let mut bad = Vec::new();
    let mut found: HashMap<(u64, u64), Ent> = HashMap::new();
    for re in entries {
        let e = SearchEntry::construct(re);
        let one = |a: &str| -> Option<String> {
            match e.attrs.get(a).map(Vec::as_slice) {
                Some([v]) => Some(v.clone()),
                _ => None,
            }
        };
        let (Some(u), Some(desc), Some(title)) = (one("uid"), one("description"), one("title"))
        else {
            bad.push(format!("{when}: {} is malformed: {:?}", e.dn, e.attrs));
            continue;
        };
        if desc != title {
            bad.push(format!(
                "{when}: {} is half-modified: description {desc}, title {title}",
                e.dn
            ));
        }
        let parsed = (|| {
            let renamed = match u.as_bytes().first()? {
                b'c' => false,
                b'r' => true,
                _ => return None,
            };
            let (t, n) = u[1..].split_once('-')?;
            Some((t.parse().ok()?, n.parse().ok()?, renamed))
        })();
        let Some((t, n, renamed)) = parsed else {
            bad.push(format!("{when}: unexpected entry {}", e.dn));
            continue;
        };
        if !e.dn.eq_ignore_ascii_case(&dn(t, n, renamed)) {
            bad.push(format!("{when}: entry {} has uid {u}", e.dn));
        }
        let value = desc.parse().unwrap_or(u64::MAX);
        if found.insert((t, n), Ent { renamed, value }).is_some() {
            bad.push(format!("{when}: client {t} entry {n} is there twice"));
        }
    }
    for m in models.iter_mut() {
        let t = m.t;
        let pending = m.pending.take();
        for n in 0..m.next_n {
            let actual = found.remove(&(t, n));
            let expected = m.live.get(&n).copied();
            match &pending {
                Some(p) if p.n == n => {
                    if actual == p.before || actual == p.after {
                        let how = if actual == p.after {
                            "applied"
                        } else {
                            "not applied"
                        };
                        m.in_doubt_applied += u64::from(actual == p.after);
                        m.note(n, format!("{when}: in-doubt {}: {how}", p.what));
                        match actual {
                            Some(a) => m.live.insert(n, a),
                            None => m.live.remove(&n),
                        };
                    } else {
                        bad.push(format!(
                            "{when}: client {t} entry {n}: in-doubt {} left {actual:?}, neither {:?} nor {:?}; history: {:?}",
                            p.what, p.before, p.after, m.history.get(&n)
                        ));
                    }
                }
                _ => {
                    if actual != expected {
                        bad.push(format!(
                            "{when}: client {t} entry {n}: server has {actual:?}, acknowledged state is {expected:?}; history: {:?}",
                            m.history.get(&n)
                        ));
                        // Go on from what the server has, so one loss is reported once.
                        match actual {
                            Some(a) => m.live.insert(n, a),
                            None => m.live.remove(&n),
                        };
                    }
                }
            }
        }
    }
    for ((t, n), e) in found {
        bad.push(format!(
            "{when}: client {t} entry {n} ({e:?}) exists but was never written"
        ));
    }
    bad
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let started = Instant::now();
    let seed: u64 = std::env::var("LINDEN_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x11DE_2026);
    eprintln!("crash test seed {seed} (set LINDEN_CRASH_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");

    let server = Server::start(&data);
    {
        let mut c = admin(&server.url());
        c.add(
            PEOPLE,
            vec![
                ("objectClass", set("organizationalUnit")),
                ("ou", set("people")),
            ],
        )
        .expect("add ou=people")
        .success()
        .expect("ou=people added");
        let _ = c.unbind();
    }
    let mut server = Some(server);
    let mut models: Vec<Model> = (0..CLIENTS)
        .map(|t| Model {
            t,
            ..Model::default()
        })
        .collect();
    let mut violations = Vec::new();
    for round in 0..ROUNDS {
        let s = match server.take() {
            Some(s) => s,
            None => Server::start(&data),
        };
        if round > 0 {
            violations.extend(check(&s.url(), &mut models, &format!("after kill {round}")));
        }
        let delay = Duration::from_millis(rng.gen_range(150..=600));
        let url = s.url();
        let results: Vec<(Model, Vec<String>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = models
                .drain(..)
                .map(|mut m| {
                    let url = url.clone();
                    let cseed = seed ^ (round * 100 + m.t + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    scope.spawn(move || {
                        let f = client(url, &mut m, cseed, round);
                        (m, f)
                    })
                })
                .collect();
            let snaps = (round % 2 == 1).then(|| {
                let url = url.clone();
                scope.spawn(move || snapshotter(url))
            });
            std::thread::sleep(delay);
            s.kill();
            if let Some(h) = snaps {
                let n = h.join().expect("snapshot thread");
                eprintln!("round {round}: {n} snapshots written while clients wrote");
            }
            handles
                .into_iter()
                .map(|h| h.join().expect("client thread"))
                .collect()
        });
        for (m, f) in results {
            violations.extend(f);
            models.push(m);
        }
        eprintln!(
            "round {round}: killed after {delay:?}; acknowledged so far {}, in doubt {}",
            models.iter().map(|m| m.acked).sum::<u64>(),
            models.iter().map(|m| m.in_doubt).sum::<u64>()
        );
    }

    // A directory left by SIGKILL is usable: at most a torn last batch, never corruption.
    let (rc, out, err) = linden(&["verify", "--data", data.to_str().expect("utf-8 path")]);
    eprintln!("verify after the last kill:\n{out}");
    assert_eq!(rc, 0, "verify after SIGKILL:\n{out}{err}");

    // Restart after the last kill, check, then stop cleanly.
    let s = Server::start(&data);
    violations.extend(check(&s.url(), &mut models, "after the last kill"));
    let log = s.log();
    let status = s.terminate();
    assert!(status.success(), "clean stop failed: {status:?}\n{log}");
    assert!(
        violations.is_empty(),
        "seed {seed}: {} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
    let acked: u64 = models.iter().map(|m| m.acked).sum();
    assert!(
        acked >= 20,
        "only {acked} writes were acknowledged: the test tested too little"
    );
    assert!(
        !data_files(&data, ".lns").is_empty(),
        "no snapshot after a clean stop"
    );
    let (rc, out, err) = linden(&["verify", "--data", data.to_str().expect("utf-8 path")]);
    assert_eq!(rc, 0, "verify after a clean stop:\n{out}{err}");
    assert!(out.contains("snap-"), "{out}");

    // The snapshot alone must give the same state.
    let s = Server::start(&data);
    let v = check(&s.url(), &mut models, "after the clean stop");
    let status = s.terminate();
    assert!(v.is_empty(), "seed {seed}:\n{}", v.join("\n"));
    assert!(status.success());
    eprintln!(
        "crash test: {acked} acknowledged writes, {} in doubt ({} of them applied), {:?}",
        models.iter().map(|m| m.in_doubt).sum::<u64>(),
        models.iter().map(|m| m.in_doubt_applied).sum::<u64>(),
        started.elapsed()
    );
}

#[test]
fn verify_accepts_a_fresh_data_directory() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");
    let s = Server::start(&data);
    // (Its SIGTERM handler is in place before it announces its port; see the test below.)
    let _ = admin(&s.url()).unbind();
    let log = s.log();
    let status = s.terminate();
    assert!(status.success(), "clean stop: {status:?}\n{log}");
    let (rc, out, err) = linden(&["verify", "--data", data.to_str().expect("utf-8 path")]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("recovery: "), "{out}");
    assert!(out.contains("verify: ok"), "{out}");
}

#[test]
fn verify_reports_a_missing_directory_as_a_usage_error() {
    let tmp = tempfile::tempdir().expect("tmp");
    let missing = tmp.path().join("nope");
    let (rc, out, err) = linden(&["verify", "--data", missing.to_str().expect("utf-8 path")]);
    assert_eq!(rc, 2, "{out}{err}");
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn verify_names_file_and_offset_of_a_flipped_byte() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");
    let s = Server::start(&data);
    {
        let mut c = admin(&s.url());
        // One batch per write, so a flip in the middle of the log has intact batches after it.
        for i in 0..40 {
            let desc = format!("entry {i}");
            c.add(
                &format!("ou=u{i},dc=example,dc=com"),
                vec![
                    ("objectClass", set("organizationalUnit")),
                    ("ou", set(&format!("u{i}"))),
                    ("description", set(&desc)),
                ],
            )
            .expect("add")
            .success()
            .expect("added");
        }
        let _ = c.unbind();
    }
    s.kill();
    let (rc, out, err) = linden(&["verify", "--data", data.to_str().expect("utf-8 path")]);
    assert_eq!(rc, 0, "intact before the flip:\n{out}{err}");

    let logs = data_files(&data, ".lnl");
    let log = logs.last().expect("a transaction log file");
    let mut bytes = std::fs::read(log).expect("read log");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(log, &bytes).expect("write log");
    let name = log
        .file_name()
        .expect("file name")
        .to_string_lossy()
        .into_owned();

    let (rc, out, err) = linden(&["verify", "--data", data.to_str().expect("utf-8 path")]);
    assert_eq!(rc, 1, "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("no line for {name}:\n{out}"));
    let offset: u64 = line
        .split("CORRUPT at byte ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {line:?}"));
    assert!(
        offset <= at as u64 && offset > 0,
        "offset {offset} for a flip at {at}: {line}"
    );

    // The server refuses to start on it and names the file too (style rule 8). Bounded: a
    // server that starts anyway is killed.
    let errfile = tmp.path().join("serve.err");
    let mut child = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(&data)
        .args(["--admin-password", "secret"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errfile).expect("create"))
        .spawn()
        .expect("run serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = std::fs::read_to_string(&errfile).unwrap_or_default();
    assert!(
        matches!(status, Some(st) if !st.success()),
        "server started on a corrupt log: {status:?}\n{err}"
    );
    assert!(err.contains(&name), "{err}");
}

/// A script that reads the port and stops the server at once gets a clean stop with a snapshot:
/// the signal handlers are installed before "listening on" is logged (this once killed the
/// server by the default action about half the time).
#[test]
fn sigterm_right_after_listening_is_a_clean_stop() {
    for _ in 0..10 {
        let tmp = tempfile::tempdir().expect("tmp");
        let data = tmp.path().join("data");
        let s = Server::start(&data);
        let log = s.log();
        let status = s.terminate();
        assert!(
            status.success(),
            "SIGTERM right after start: {status:?}\n{log}"
        );
        assert!(!data_files(&data, ".lns").is_empty(), "no snapshot");
    }
}
