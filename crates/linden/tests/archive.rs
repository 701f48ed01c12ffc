//! Point-in-time recovery (issue 30): a server archives its snapshots and sealed transaction
//! logs (`archive`, `archive_interval = 1`), and `linden restore` builds data directories from
//! the archive that a new server then serves.
//!
//! The scenarios run against a `file://` archive and, with `LINDEN_TEST_S3=1`, against an
//! `s3://` one on a real S3-compatible server process (S3Proxy, `common/s3proxy.rs`): one
//! function per scenario, taking the `Archive`.
//!
//! - A restore to the moment before a subtree delete (the moment taken from the server's own
//!   answers: the newest entryCSN before the delete, and that CSN's time) equals the state at
//!   that moment, entry by entry (DN, attributes, entryUUID, entryCSN …).
//! - After kill -9, a restore to the latest point holds every write the archive had taken
//!   (the test waits until cn=Archive,cn=Monitor says no batch waits, then kills).
//! - Retention keeps `archive_keep_snapshots` snapshots and the logs after the oldest.
//! - A clean stop archives what the archive lacks (`archive_shutdown_timeout`), however long
//!   `archive_interval` is.
//! - An S3 endpoint that does not answer stops no write; failures and lag show in cn=Monitor
//!   and /metrics; once it answers, the archive catches up.
//!
//! Nothing waits for a time assumed long enough: the archive's progress is polled from
//! cn=Monitor with a generous deadline.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use cluster::*;
use common::linden;
use common::s3proxy::{self, S3Proxy};
use ldap3::{LdapConn, Scope, SearchEntry};

/// How long the archive may take to catch up (it seals every second).
const ARCHIVE_DEADLINE: Duration = Duration::from_secs(60);

/// Where the scenarios archive: a directory, or a bucket of an S3Proxy the test started.
struct Archive {
    url: String,
    /// The server's settings for it besides `archive` (TOML lines).
    settings: String,
    /// The same settings as flags of `linden archive list` and `linden restore`.
    flags: Vec<String>,
    s3: Option<S3Proxy>,
}

impl Archive {
    /// `root/archive`, a directory.
    fn file(root: &Path) -> Archive {
        Archive {
            url: format!("file://{}", root.join("archive").display()),
            settings: String::new(),
            flags: Vec::new(),
            s3: None,
        }
    }

    /// `s3://linden/<prefix>` on an S3Proxy started now (with its data under `root/s3`).
    fn s3(root: &Path) -> Archive {
        let mut a = Archive::s3_at(root, s3proxy::free_port());
        a.start_s3(root);
        a
    }

    /// The settings of an S3 archive at `port`, where nothing answers yet (`start_s3`). The
    /// server gets the credentials as keys; the commands read them from a credentials file.
    fn s3_at(root: &Path, port: u16) -> Archive {
        let endpoint = S3Proxy::endpoint(port);
        let creds = root.join("s3-credentials");
        std::fs::write(
            &creds,
            format!(
                "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
                s3proxy::KEY_ID,
                s3proxy::SECRET
            ),
        )
        .expect("credentials file");
        Archive {
            url: format!("s3://{}/servers/a", s3proxy::BUCKET),
            settings: format!(
                "archive_s3_endpoint = \"{endpoint}\"\narchive_s3_region = \"us-east-1\"\narchive_s3_access_key_id = \"{}\"\narchive_s3_secret_access_key = \"{}\"\n",
                s3proxy::KEY_ID,
                s3proxy::SECRET
            ),
            flags: vec![
                "--archive-s3-endpoint".into(),
                endpoint,
                "--archive-s3-credentials-file".into(),
                creds.display().to_string(),
            ],
            s3: None,
        }
    }

    /// Starts the S3 server the settings name.
    fn start_s3(&mut self, root: &Path) {
        let port = self
            .flags
            .get(1)
            .and_then(|e| e.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .expect("an s3 archive");
        let dir = root.join("s3");
        std::fs::create_dir_all(&dir).expect("mkdir");
        self.s3 = Some(S3Proxy::start(&dir, port));
    }

    /// `linden archive list`: its output.
    fn list(&self) -> String {
        let mut args = vec!["archive", "list", "--archive", self.url.as_str()];
        args.extend(self.flags.iter().map(String::as_str));
        let (code, out, err) = linden(&args);
        assert_eq!(code, 0, "linden {args:?}: {out}{err}");
        out
    }

    /// The snapshots `linden archive list` shows.
    fn snapshots(&self) -> usize {
        self.list()
            .lines()
            .filter(|l| l.contains("  snapshot  "))
            .count()
    }
}

/// A node archiving to `archive`, sealing its log every second.
fn archiving_node(root: &Path, name: &str, archive: &Archive, extra: &str) -> Node {
    let n = Node::new(root, name);
    n.configure_with(
        1,
        false,
        false,
        &[],
        &format!(
            "archive = \"{}\"\narchive_interval = 1\n{}{extra}",
            archive.url, archive.settings
        ),
    );
    n
}

/// cn=<name>,cn=Archive,cn=Monitor: its monitorCounter.
fn archive_counter(c: &mut LdapConn, name: &str) -> Option<u64> {
    let (found, _) = c
        .search(
            &format!("cn={name},cn=Archive,cn=Monitor"),
            Scope::Base,
            "(objectClass=*)",
            vec!["monitorCounter"],
        )
        .ok()?
        .success()
        .ok()?;
    let e = SearchEntry::construct(found.into_iter().next()?);
    e.attrs.get("monitorCounter")?.first()?.parse().ok()
}

/// Waits until the archive holds every batch written so far (cn=Lag Batches is 0, and the
/// last batch archived is at least `min_batch`): returns the last batch archived.
fn wait_archived(node: &Node, min_batch: u64) -> u64 {
    let mut c = node.admin();
    let start = Instant::now();
    loop {
        let lag = archive_counter(&mut c, "Lag Batches");
        let last = archive_counter(&mut c, "Last Batch").unwrap_or(0);
        if lag == Some(0) && last >= min_batch {
            return last;
        }
        assert!(
            start.elapsed() < ARCHIVE_DEADLINE,
            "the archive did not catch up within {ARCHIVE_DEADLINE:?} (lag {lag:?}, last batch {last}); log:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `linden restore --archive URL --data DIR ARGS…`; panics with its output on failure.
fn restore(archive: &Archive, dir: &Path, args: &[&str]) -> String {
    let d = dir.to_str().expect("path");
    let mut all = vec!["restore", "--archive", archive.url.as_str(), "--data", d];
    all.extend(archive.flags.iter().map(String::as_str));
    all.extend_from_slice(args);
    let (code, out, err) = linden(&all);
    assert_eq!(code, 0, "linden {all:?}: {out}{err}");
    assert!(out.contains("verify: ok"), "{out}");
    assert!(out.contains("restore took"), "prints its timing: {out}");
    out
}

/// Starts a node on a data directory restored into `root/name/data` and reads every entry.
fn serve_restored(root: &Path, name: &str) -> (Node, Contents) {
    let mut n = Node::new(root, name);
    n.configure(1, false, false, &[]);
    n.start();
    let c = n.contents();
    (n, c)
}

/// The newest entryCSN among `contents`.
fn newest_csn(contents: &Contents) -> String {
    contents
        .values()
        .filter_map(|a| a.get("entrycsn"))
        .flatten()
        .max()
        .cloned()
        .expect("an entryCSN")
}

/// The time of a CSN (`20261128101400.123456Z#…`) as RFC 3339.
fn csn_time(csn: &str) -> String {
    let t = &csn[..21];
    format!(
        "{}-{}-{}T{}:{}:{}{}Z",
        &t[0..4],
        &t[4..6],
        &t[6..8],
        &t[8..10],
        &t[10..12],
        &t[12..14],
        &t[14..21]
    )
}

/// Timed writes, a subtree delete, more writes; restores to the moment before the delete
/// (by CSN and by time) hold exactly the entries of that moment; a restore to the latest
/// point holds the final state.
fn scenario_subtree_delete(root: &Path, archive: &Archive) {
    let mut a = archiving_node(root, "a", archive, "");
    a.start();
    let mut c = a.admin();
    base_units(&mut c);
    for i in 0..6 {
        ok(
            add_person(&mut c, &format!("u{i}"), PEOPLE, "v0"),
            "add person",
        );
    }
    for i in 0..3 {
        ok(
            set_desc(&mut c, &format!("uid=u{i},{PEOPLE}"), "v1"),
            "modify",
        );
    }
    // One archived file before the delete, to restore across files.
    wait_archived(&a, 1);
    ok(add_person(&mut c, "g0", GROUPS, "v0"), "add under groups");
    let before = a.contents();
    let csn = newest_csn(&before);
    // The accidental delete of the whole subtree, then life goes on.
    for i in 0..6 {
        ok(c.delete(&format!("uid=u{i},{PEOPLE}")), "delete person");
    }
    ok(c.delete(PEOPLE), "delete ou=people");
    ok(
        add_person(&mut c, "g1", GROUPS, "v0"),
        "add after the delete",
    );
    ok(
        set_desc(&mut c, &format!("uid=g0,{GROUPS}"), "v2"),
        "modify after",
    );
    let after = a.contents();
    assert!(!after.contains_key(&PEOPLE.to_ascii_lowercase()));
    wait_archived(&a, 1);

    let out = restore(archive, &root.join("by-csn/data"), &["--to-csn", &csn]);
    println!("{out}");
    let (_n1, got) = serve_restored(root, "by-csn");
    assert_eq!(got, before, "restore --to-csn {csn}");

    let when = csn_time(&csn);
    restore(archive, &root.join("by-time/data"), &["--to", &when]);
    let (_n2, got) = serve_restored(root, "by-time");
    assert_eq!(got, before, "restore --to {when}");

    restore(archive, &root.join("latest/data"), &[]);
    let (_n3, got) = serve_restored(root, "latest");
    assert_eq!(got, after, "restore to the latest point");

    let list = archive.list();
    assert!(list.contains("restore points: batch 0 to batch"), "{list}");
    assert!(list.contains(&format!("archive {}", archive.url)), "{list}");

    // A directory that is not empty is never written over.
    let latest = root.join("latest/data");
    let mut args = vec![
        "restore",
        "--archive",
        archive.url.as_str(),
        "--data",
        latest.to_str().expect("path"),
    ];
    args.extend(archive.flags.iter().map(String::as_str));
    let (code, _, err) = linden(&args);
    assert_ne!(code, 0);
    assert!(err.contains("not empty"), "{err}");
}

#[test]
fn restore_to_the_moment_before_a_subtree_delete() {
    let tmp = tempfile::tempdir().expect("tempdir");
    scenario_subtree_delete(tmp.path(), &Archive::file(tmp.path()));
}

#[test]
#[ignore = "needs S3Proxy; run with LINDEN_TEST_S3=1 after scripts/install-test-deps.sh"]
fn restore_to_the_moment_before_a_subtree_delete_s3() {
    if !s3proxy::enabled("restore_to_the_moment_before_a_subtree_delete_s3") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    scenario_subtree_delete(tmp.path(), &Archive::s3(tmp.path()));
}

/// kill -9 once the archive holds every write: the latest restore point holds them all.
/// With two snapshots taken and `archive_keep_snapshots = 1`, only the newest stays, with
/// the logs after it, and the restore starts from it.
fn scenario_kill_9(root: &Path, archive: &Archive) {
    let mut a = archiving_node(root, "a", archive, "archive_keep_snapshots = 1\n");
    a.start();
    let mut c = a.admin();
    base_units(&mut c);
    let snapshot = |a: &Node| {
        let (code, out, err) = linden(&[
            "snapshot",
            "--url",
            &a.url(),
            "--bind-dn",
            ADMIN,
            "--password",
            "secret",
        ]);
        assert_eq!(code, 0, "snapshot: {out}{err}");
    };
    for round in 0..3 {
        for i in 0..4 {
            ok(
                add_person(&mut c, &format!("r{round}p{i}"), PEOPLE, "v0"),
                "add",
            );
        }
        if round < 2 {
            snapshot(&a);
        }
    }
    ok(
        set_desc(&mut c, &format!("uid=r0p0,{PEOPLE}"), "last"),
        "modify",
    );
    let want = a.contents();
    wait_archived(&a, 1);
    a.kill();

    assert_eq!(
        archive.snapshots(),
        1,
        "retention keeps one snapshot: {}",
        archive.list()
    );

    let out = restore(archive, &root.join("r/data"), &[]);
    assert!(
        out.contains("snapshot snap-"),
        "starts from the snapshot: {out}"
    );
    let (_r, got) = serve_restored(root, "r");
    assert_eq!(got, want);
}

#[test]
fn restore_after_kill_9_holds_every_archived_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    scenario_kill_9(tmp.path(), &Archive::file(tmp.path()));
}

#[test]
#[ignore = "needs S3Proxy; run with LINDEN_TEST_S3=1 after scripts/install-test-deps.sh"]
fn restore_after_kill_9_holds_every_archived_write_s3() {
    if !s3proxy::enabled("restore_after_kill_9_holds_every_archived_write_s3") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    scenario_kill_9(tmp.path(), &Archive::s3(tmp.path()));
}

/// SIGTERM: the server seals its log and archives what the archive lacks before it exits,
/// although `archive_interval` (an hour) would not have sealed anything yet; the latest
/// restore point holds every write.
fn scenario_clean_stop(root: &Path, archive: &Archive) {
    let a = Node::new(root, "a");
    a.configure_with(
        1,
        false,
        false,
        &[],
        &format!(
            "archive = \"{}\"\narchive_interval = 3600\n{}",
            archive.url, archive.settings
        ),
    );
    let (child, addr, stderr) = spawn(&a);
    let url = format!("ldap://{addr}");
    let mut c = admin(&url);
    base_units(&mut c);
    for i in 0..5 {
        ok(add_person(&mut c, &format!("p{i}"), PEOPLE, "v0"), "add");
    }
    ok(
        set_desc(&mut c, &format!("uid=p0,{PEOPLE}"), "v1"),
        "modify",
    );
    let _ = c.unbind();
    let want = contents_of(&url);
    let (status, log) = terminate(child, &stderr, "holds every batch written");
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("holds every batch written"), "{log}");

    restore(archive, &root.join("r/data"), &[]);
    let (_r, got) = serve_restored(root, "r");
    assert_eq!(got, want);
}

/// Standard error lines of a server process, kept as they come.
type Lines = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// Starts `linden serve` on `node`'s configuration (not as the node's own process, so that
/// the test can stop it with SIGTERM and read its log after).
fn spawn(node: &Node) -> (std::process::Child, std::net::SocketAddr, Lines) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_linden"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(node.config())
        .args(["--admin-password", "secret"]);
    common::serve::spawn_listening(&mut cmd, &node.name)
}

/// SIGTERM, then waits (bounded) for the exit and for a log line holding `last` (the reader
/// of the pipe may be behind the exit): the status and the whole log.
fn terminate(
    mut child: std::process::Child,
    stderr: &Lines,
    last: &str,
) -> (std::process::ExitStatus, String) {
    let st = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > ARCHIVE_DEADLINE {
            let _ = child.kill();
            panic!(
                "no exit after SIGTERM; log:\n{}",
                stderr.lock().expect("lock").join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10)
        && !stderr
            .lock()
            .expect("lock")
            .iter()
            .any(|l| l.contains(last))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    (status, stderr.lock().expect("lock").join("\n"))
}

/// Every entry of the server at `url`, as `Node::contents` reads them.
fn contents_of(url: &str) -> Contents {
    let mut c = admin(url);
    let (found, _) = c
        .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["*", "+"])
        .expect("search")
        .success()
        .expect("search result");
    let mut out = Contents::new();
    for e in found {
        let e = SearchEntry::construct(e);
        let mut attrs = std::collections::BTreeMap::new();
        for (k, mut v) in e.attrs {
            let k = k.to_ascii_lowercase();
            if LOCAL.contains(&k.as_str()) {
                continue;
            }
            v.sort();
            attrs.insert(k, v);
        }
        out.insert(e.dn.to_ascii_lowercase(), attrs);
    }
    out
}

#[test]
fn a_clean_stop_archives_every_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    scenario_clean_stop(tmp.path(), &Archive::file(tmp.path()));
}

#[test]
#[ignore = "needs S3Proxy; run with LINDEN_TEST_S3=1 after scripts/install-test-deps.sh"]
fn a_clean_stop_archives_every_write_s3() {
    if !s3proxy::enabled("a_clean_stop_archives_every_write_s3") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    scenario_clean_stop(tmp.path(), &Archive::s3(tmp.path()));
}

/// A provider restored to an earlier moment: its consumer, whose cookie names changes the
/// restored provider no longer has (an add, a modify and a delete after the point), does a
/// full refresh and converges to the restored content (without the new identity the
/// consumer's cookie is "up to date" and it keeps the entries the provider lost).
#[test]
fn a_consumer_of_a_restored_provider_converges_to_the_restored_content() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let archive = Archive::file(root);
    let mut p = Node::new(root, "p");
    p.configure_with(
        1,
        true,
        false,
        &[],
        &format!("archive = \"{}\"\narchive_interval = 1\n", archive.url),
    );
    p.start();
    let mut c = Node::new(root, "c");
    c.configure(2, false, false, &[(1, &p)]);
    c.start();
    let mut w = p.admin();
    base_units(&mut w);
    for i in 0..4 {
        ok(add_person(&mut w, &format!("u{i}"), PEOPLE, "v0"), "add");
    }
    let before = p.contents();
    let point = newest_csn(&before);
    // After the point: a new entry, a modify, a delete.
    ok(add_person(&mut w, "late", PEOPLE, "v0"), "add late");
    ok(
        set_desc(&mut w, &format!("uid=u1,{PEOPLE}"), "v9"),
        "modify",
    );
    ok(w.delete(&format!("uid=u2,{PEOPLE}")), "delete");
    converge("consumer before the restore", &[&p, &c]);
    wait_archived(&p, 1);
    p.kill();

    // The provider's directory is replaced by the archive's state at the point.
    std::fs::rename(p.dir.join("data"), p.dir.join("data.lost")).expect("move");
    let out = restore(&archive, &p.dir.join("data"), &["--to-csn", &point]);
    assert!(out.contains("new replication identity"), "{out}");
    p.start();
    // The restore stamps every entry anew (entryCSN): the rest is the content at the point.
    let without_csn = |mut c: Contents| {
        for attrs in c.values_mut() {
            attrs.remove("entrycsn");
        }
        c
    };
    let before = without_csn(before);
    assert_eq!(without_csn(p.contents()), before, "the restored provider");
    let (_, got) = converge("consumer after the restore", &[&p, &c]);
    assert_eq!(
        without_csn(got),
        before,
        "the consumer holds the restored content"
    );
}

/// An archive that cannot be written (its path is a file) fails, is counted in cn=Monitor and
/// retried, and the server goes on taking writes; a snapshot meanwhile keeps the log files the
/// archive does not hold; once the path is usable, the archive catches up, and the latest
/// restore point holds every write.
#[test]
fn an_unusable_archive_is_retried_and_nothing_is_lost() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    std::fs::write(root.join("archive"), "not a directory").expect("block the archive");
    let archive = Archive::file(root);
    let mut a = archiving_node(root, "a", &archive, "");
    a.start();
    let mut c = a.admin();
    base_units(&mut c);
    ok(add_person(&mut c, "early", PEOPLE, "v0"), "add");
    let at_early = a.contents();
    let early = newest_csn(&at_early);
    // Failures are counted while writes go on.
    let start = Instant::now();
    while archive_counter(&mut c, "Failures").unwrap_or(0) < 2 {
        assert!(
            start.elapsed() < ARCHIVE_DEADLINE,
            "no failure counted; log:\n{}",
            a.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    ok(
        add_person(&mut c, "during", PEOPLE, "v0"),
        "add while failing",
    );
    // Once the log file holding these writes is sealed (a newer one follows), a snapshot
    // could prune it: it must stay until it is archived.
    let logs = || {
        std::fs::read_dir(a.dir.join("data"))
            .expect("data dir")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".lnl"))
            })
            .count()
    };
    let start = Instant::now();
    while logs() < 2 {
        assert!(start.elapsed() < ARCHIVE_DEADLINE, "no log file sealed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, out, err) = linden(&[
        "snapshot",
        "--url",
        &a.url(),
        "--bind-dn",
        ADMIN,
        "--password",
        "secret",
    ]);
    assert_eq!(code, 0, "snapshot: {out}{err}");
    assert!(a.log().contains("archiving failed"), "{}", a.log());
    std::fs::remove_file(root.join("archive")).expect("unblock the archive");
    ok(add_person(&mut c, "after", PEOPLE, "v0"), "add after");
    let want = a.contents();
    wait_archived(&a, 1);
    a.kill();
    restore(&archive, &root.join("r/data"), &[]);
    let (_r, got) = serve_restored(root, "r");
    assert_eq!(got, want);
    // The batches before the snapshot reached the archive too (the snapshot did not prune
    // them before they were archived).
    restore(&archive, &root.join("e/data"), &["--to-csn", &early]);
    let (_e, got) = serve_restored(root, "e");
    assert_eq!(got, at_early);
}

/// The first value of the /metrics sample whose name starts with `name` (any suffix such as
/// `_total`), read from the metrics listener the node logged.
fn metric(node: &Node, name: &str) -> Option<f64> {
    use std::io::{Read, Write};
    let log = node.log();
    let addr = log
        .lines()
        .find_map(|l| {
            l.split("serving /metrics, /healthz and /readyz on http://")
                .nth(1)
        })?
        .split_whitespace()
        .next()?
        .to_string();
    let mut s = std::net::TcpStream::connect(&addr).ok()?;
    s.set_read_timeout(Some(OP_TIMEOUT)).ok()?;
    s.write_all(
        format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

/// Polls `what` (bounded by `deadline`) until it holds; panics with the node's log.
fn wait_until(node: &Node, what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < deadline,
            "{what}: not within {deadline:?}; log:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An S3 endpoint where nothing answers: writes go on; the failures and the lag show in
/// cn=Monitor and /metrics, and the log names the archive (never the secret); once the S3
/// server starts, the archive catches up, and the latest restore point holds every write.
#[test]
#[ignore = "needs S3Proxy; run with LINDEN_TEST_S3=1 after scripts/install-test-deps.sh"]
fn an_unreachable_s3_endpoint_stops_no_write_and_catches_up() {
    if !s3proxy::enabled("an_unreachable_s3_endpoint_stops_no_write_and_catches_up") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let mut archive = Archive::s3_at(root, s3proxy::free_port());
    let mut a = archiving_node(root, "a", &archive, "metrics_listen = \"127.0.0.1:0\"\n");
    a.start();
    let mut c = a.admin();
    base_units(&mut c);
    for i in 0..3 {
        ok(
            add_person(&mut c, &format!("d{i}"), PEOPLE, "v0"),
            "add while down",
        );
    }
    let mut m = a.admin();
    wait_until(&a, "two failures in cn=Monitor", ARCHIVE_DEADLINE, || {
        archive_counter(&mut m, "Failures").unwrap_or(0) >= 2
    });
    ok(
        add_person(&mut c, "during", PEOPLE, "v0"),
        "add while failing",
    );
    assert!(
        archive_counter(&mut m, "Lag Batches").unwrap_or(0) > 0,
        "the lag shows in cn=Monitor"
    );
    wait_until(&a, "failures and lag in /metrics", ARCHIVE_DEADLINE, || {
        metric(&a, "linden_archive_failures").unwrap_or(0.0) >= 2.0
            && metric(&a, "linden_archive_lag_batches").unwrap_or(0.0) > 0.0
    });
    let log = a.log();
    assert!(
        log.contains("archiving failed: archive s3://linden/servers/a"),
        "{log}"
    );
    // Backing off: the pause doubles after each failure.
    assert!(log.contains("retrying in 1 s"), "{log}");
    assert!(log.contains("retrying in 2 s"), "{log}");
    assert!(
        !log.contains(s3proxy::SECRET),
        "the secret is never logged: {log}"
    );

    // The endpoint answers from now on.
    archive.start_s3(root);
    ok(add_person(&mut c, "after", PEOPLE, "v0"), "add after");
    let want = a.contents();
    // The archiver's pause grows while it fails (1 s, 2 s, 4 s …): a generous deadline.
    wait_until(&a, "the archive caught up", 4 * ARCHIVE_DEADLINE, || {
        archive_counter(&mut m, "Lag Batches") == Some(0)
            && archive_counter(&mut m, "Last Batch").unwrap_or(0) > 0
    });
    assert!(a.log().contains("works again"), "{}", a.log());
    assert_eq!(metric(&a, "linden_archive_lag_batches"), Some(0.0));
    a.kill();
    restore(&archive, &root.join("r/data"), &[]);
    let (_r, got) = serve_restored(root, "r");
    assert_eq!(got, want);
}

/// A clean stop with an archive that cannot be written gives up after
/// `archive_shutdown_timeout` and says which files wait in the data directory.
#[test]
fn a_clean_stop_with_an_unusable_archive_ends_within_the_timeout() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    std::fs::write(root.join("archive"), "not a directory").expect("block the archive");
    let archive = Archive::file(root);
    let a = Node::new(root, "a");
    a.configure_with(
        1,
        false,
        false,
        &[],
        &format!(
            "archive = \"{}\"\narchive_interval = 3600\narchive_shutdown_timeout = 2\n",
            archive.url
        ),
    );
    let (child, addr, stderr) = spawn(&a);
    let mut c = admin(&format!("ldap://{addr}"));
    base_units(&mut c);
    let _ = c.unbind();
    wait_until(&a, "a failure", ARCHIVE_DEADLINE, || {
        stderr
            .lock()
            .expect("lock")
            .iter()
            .any(|l| l.contains("archiving failed"))
    });
    let t = Instant::now();
    let (status, log) = terminate(child, &stderr, "the next start archives them");
    assert!(status.success(), "{status}: {log}");
    assert!(
        log.contains("archive_shutdown_timeout (2 s) ran out before the archive"),
        "{log}"
    );
    assert!(
        log.contains("not archived yet: log-"),
        "names the files: {log}"
    );
    assert!(log.contains("the next start archives them"), "{log}");
    // It gave up after about 2 s (the snapshot and the rest of the stop come on top).
    assert!(t.elapsed() < Duration::from_secs(25), "{:?}", t.elapsed());
}

/// The S3 target itself, on S3Proxy: whole and multipart uploads read back and checked, a
/// listing of the data files directly under the prefix only, reads, deletes (of an absent
/// object too), and errors that name the archive and what to do, never the secret.
#[test]
#[ignore = "needs S3Proxy; run with LINDEN_TEST_S3=1 after scripts/install-test-deps.sh"]
fn the_s3_target_puts_lists_reads_and_deletes() {
    use server::archive::s3::{S3Settings, S3Target};
    use store::persist::archive::ArchiveTarget;
    if !s3proxy::enabled("the_s3_target_puts_lists_reads_and_deletes") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let s3 = S3Proxy::start(&tmp.path().join("s3"), s3proxy::free_port());
    let mut config = server::Config {
        archive: format!("s3://{}/t/", s3proxy::BUCKET),
        archive_s3_endpoint: S3Proxy::endpoint(s3.port),
        archive_s3_access_key_id: s3proxy::KEY_ID.into(),
        archive_s3_secret_access_key: Some(server::config::Hidden(s3proxy::SECRET.into())),
        ..server::Config::default()
    };
    let settings = S3Settings::from_config(&config, &|_| None).expect("settings");
    // Parts of 5 MiB (the least S3 takes), for files over 6 MiB.
    let t = S3Target::new(&settings)
        .expect("target")
        .with_multipart(6 << 20, 5 << 20);
    assert!(t.list().expect("list").is_empty());
    let small = vec![7u8; 500];
    let big: Vec<u8> = (0..(11u32 << 20) + 7).map(|i| (i % 251) as u8).collect();
    let (log, snap) = (
        "log-00000000000000000001.lnl",
        "snap-00000000000000000009.lns",
    );
    t.put_verified(log, &small).expect("put");
    t.put_verified(snap, &big).expect("multipart put");
    // Not data files of this archive: another name, and a file deeper under the prefix.
    t.put("notes.txt", b"x").expect("put");
    t.put("sub/log-00000000000000000002.lnl", b"x")
        .expect("put");
    let listed: Vec<(String, u64)> = t
        .list()
        .expect("list")
        .into_iter()
        .map(|f| (f.name, f.size))
        .collect();
    assert_eq!(
        listed,
        vec![(log.to_string(), 500), (snap.to_string(), big.len() as u64)]
    );
    assert!(t.get(snap).expect("get") == big);
    // More files than one page of a listing holds (S3 and S3Proxy: 1,000 keys).
    let many: Vec<String> = (100..1105u64).map(|n| format!("log-{n:020}.lnl")).collect();
    for name in &many {
        t.put(name, b"x").expect("put");
    }
    assert_eq!(
        t.list().expect("list").len(),
        2 + many.len(),
        "every page read"
    );
    for name in &many {
        t.delete(name).expect("delete");
    }
    t.delete(log).expect("delete");
    t.delete(log).expect("delete of an absent object");
    let e = t.get(log).expect_err("gone");
    assert!(
        e.to_string().contains("s3://linden/t at http://127.0.0.1:"),
        "{e}"
    );
    assert_eq!(t.list().expect("list").len(), 1);

    // A wrong secret: refused, said so, and the secret is not in the message.
    config.archive_s3_secret_access_key = Some(server::config::Hidden("wrong-secret".into()));
    let wrong = S3Target::new(&S3Settings::from_config(&config, &|_| None).expect("settings"))
        .expect("target");
    let e = wrong.list().expect_err("refused").to_string();
    assert!(e.contains("check the credentials"), "{e}");
    assert!(!e.contains("wrong-secret"), "{e}");
}

/// Attributes a put-back entry may have anew: its change is stamped by the server that makes
/// it (entryCSN), and the memberOf overlay stamps the members whose memberOf it sets again.
const RESTAMPED: [&str; 3] = ["entrycsn", "modifiersname", "modifytimestamp"];

fn without_restamps(attrs: &std::collections::BTreeMap<String, Vec<String>>) -> String {
    let mut a = attrs.clone();
    for k in RESTAMPED {
        a.remove(k);
    }
    format!("{a:?}")
}

/// `linden restore --archive … --to-csn POINT --subtree ou=people --into URL …`: exit status,
/// standard output and error.
fn undo(
    root: &Path,
    archive: &Archive,
    point: &str,
    into: &str,
    bind: &str,
    pw: &str,
    more: &[&str],
) -> (i32, String, String) {
    let pw_file = root.join(format!("pw-{}", pw));
    std::fs::write(&pw_file, format!("{pw}\n")).expect("password file");
    let mut all = vec!["restore", "--archive", archive.url.as_str()];
    all.extend(archive.flags.iter().map(String::as_str));
    all.extend([
        "--to-csn",
        point,
        "--subtree",
        PEOPLE,
        "--into",
        into,
        "--bind-dn",
        bind,
        "--password-file",
        pw_file.to_str().expect("path"),
    ]);
    all.extend_from_slice(more);
    let (code, out, err) = linden(&all);
    println!("linden {all:?}:\n{out}{err}");
    (code, out, err)
}

/// The undo of an accidental subtree delete on a running server (memberOf and refint on):
/// people under ou=people (one level deeper too), a group outside the subtree naming some of
/// them. After a subtree delete (refint takes them out of the group), `restore --subtree
/// --into` as the administrator puts every entry back with its DN, attributes and entryUUID,
/// the group's member values back and each person's memberOf with them; a consumer of the
/// server converges to it; a second run finds everything present; a non-administrator is
/// refused with the server's message; a dry run writes nothing.
#[test]
fn a_deleted_subtree_is_put_back_into_the_running_server() {
    let tmp = tempfile::tempdir().expect("tempdir");
    scenario_undo(tmp.path(), &Archive::file(tmp.path()));
}

#[test]
#[ignore = "needs S3Proxy; run with LINDEN_TEST_S3=1 after scripts/install-test-deps.sh"]
fn a_deleted_subtree_is_put_back_into_the_running_server_s3() {
    if !s3proxy::enabled("a_deleted_subtree_is_put_back_into_the_running_server_s3") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    scenario_undo(tmp.path(), &Archive::s3(tmp.path()));
}

fn scenario_undo(root: &Path, archive: &Archive) {
    use ldap3::controls::RawControl;
    let mut p = Node::new(root, "p");
    p.configure_with(
        1,
        true,
        false,
        &[],
        &format!(
            "archive = \"{}\"\n{}archive_interval = 1\nmemberof = true\nrefint = [\"member\"]\n",
            archive.url, archive.settings
        ),
    );
    p.start();
    let mut c = Node::new(root, "c");
    c.configure(2, false, false, &[(1, &p)]);
    c.start();
    let mut w = p.admin();
    base_units(&mut w);
    let staff = format!("ou=staff,{PEOPLE}");
    ok(
        w.add(
            &staff,
            vec![
                ("objectClass", ["organizationalUnit"].into()),
                ("ou", ["staff"].into()),
            ],
        ),
        "add ou=staff",
    );
    for i in 0..3 {
        ok(
            add_person(&mut w, &format!("u{i}"), PEOPLE, "v0"),
            "add person",
        );
    }
    ok(add_person(&mut w, "s0", &staff, "v0"), "add person below");
    ok(add_person(&mut w, "g0", GROUPS, "v0"), "add person outside");
    ok(
        w.modify(
            &format!("uid=g0,{GROUPS}"),
            vec![ldap3::Mod::Replace("userPassword", ["g0-secret"].into())],
        ),
        "password of g0",
    );
    let team = format!("cn=team,{GROUPS}");
    let members = [
        format!("uid=u0,{PEOPLE}"),
        format!("uid=u1,{PEOPLE}"),
        format!("uid=s0,{staff}"),
        format!("uid=g0,{GROUPS}"),
    ];
    ok(
        w.add(
            &team,
            vec![
                ("objectClass", ["groupOfNames"].into()),
                ("cn", ["team"].into()),
                ("member", members.iter().map(String::as_str).collect()),
            ],
        ),
        "add group",
    );
    let before = p.contents();
    let point = newest_csn(&before);
    let u0 = format!("uid=u0,{PEOPLE}").to_ascii_lowercase();
    assert_eq!(
        before[&u0].get("memberof"),
        Some(&vec![team.clone()]),
        "memberOf is on: {:?}",
        before[&u0]
    );

    // The accidental delete (Subtree Delete control), then life goes on.
    let r = w
        .with_controls(RawControl {
            ctype: "1.2.840.113556.1.4.805".into(),
            crit: true,
            val: None,
        })
        .delete(PEOPLE);
    ok(r, "subtree delete");
    ok(
        set_desc(&mut w, &format!("uid=g0,{GROUPS}"), "later"),
        "modify after",
    );
    let after = p.contents();
    assert_eq!(
        after[&team.to_ascii_lowercase()]["member"],
        vec![format!("uid=g0,{GROUPS}")],
        "refint took the deleted people out of the group"
    );
    wait_archived(&p, 1);

    // A non-administrator is refused by the server, with its message.
    let g0 = format!("uid=g0,{GROUPS}");
    let (code, out, _) = undo(root, archive, &point, &p.url(), &g0, "g0-secret", &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("refused {PEOPLE}: insufficientAccessRights (50)"))
            && out.contains("Relax Rules"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "skipped uid=u0,{PEOPLE}: its superior was not put back"
        )),
        "{out}"
    );
    // A dry run writes nothing.
    let (code, out, _) = undo(
        root,
        archive,
        &point,
        &p.url(),
        ADMIN,
        "secret",
        &["--dry-run"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("would add uid=s0,{staff}")), "{out}");
    assert!(
        out.contains(&format!("would re-link {team}: member += ")),
        "{out}"
    );
    assert!(
        out.contains("dry run, nothing written: would add 6 entries"),
        "{out}"
    );
    assert!(!p.contents().contains_key(&u0), "the dry run wrote nothing");

    // The undo, as the administrator.
    let (code, out, err) = undo(root, archive, &point, &p.url(), ADMIN, "secret", &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("added uid=u0,{PEOPLE} (entryUUID ")),
        "{out}"
    );
    assert!(
        out.contains(&format!("re-linked {team}: member += ")),
        "{out}"
    );
    assert!(
        out.contains(
            "added 6 entries, 0 present, re-linked 1 groups (3 values), 0 skipped, 0 refused"
        ),
        "{out}"
    );
    let now = p.contents();
    for (dn, attrs) in before
        .iter()
        .filter(|(dn, _)| dn.ends_with(&PEOPLE.to_ascii_lowercase()))
    {
        let got = now.get(dn).unwrap_or_else(|| panic!("{dn} is back"));
        assert_eq!(without_restamps(got), without_restamps(attrs), "{dn}");
        assert_eq!(got.get("entryuuid"), attrs.get("entryuuid"), "{dn}");
    }
    assert_eq!(
        now[&team.to_ascii_lowercase()]["member"],
        before[&team.to_ascii_lowercase()]["member"],
        "the group's members are back"
    );
    for m in &members {
        assert_eq!(
            now[&m.to_ascii_lowercase()].get("memberof"),
            Some(&vec![team.clone()]),
            "memberOf of {m}"
        );
    }
    // The consumer takes the undo as any change: the same entries, entryUUIDs included.
    let (_, got) = converge("consumer after the undo", &[&p, &c]);
    assert_eq!(got, now);

    // A second run: every entry present, nothing to re-link.
    let (code, out, err) = undo(root, archive, &point, &p.url(), ADMIN, "secret", &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("added 0 entries, 6 present, re-linked 0 groups"),
        "{out}"
    );
    assert!(
        out.contains(&format!("present uid=u0,{PEOPLE}: left as it is")),
        "{out}"
    );
    assert_eq!(p.contents(), now, "the second run changed nothing");
}
