//! `linden serve` as a systemd `Type=notify` service: the notifications it sends on the socket
//! named by NOTIFY_SOCKET (a Unix datagram socket this test makes, standing in for systemd),
//! and the unit file in packaging/systemd, checked by `systemd-analyze verify`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::notify::NotifySocket;

/// Generous: CI is a busy 2-core machine. Every wait below polls for a condition until this.
const DEADLINE: Duration = Duration::from_secs(60);

/// A `linden serve` started with NOTIFY_SOCKET pointing at a socket of this test; killed when
/// dropped.
struct Service {
    child: Child,
    notify: NotifySocket,
    /// The address of the "listening on" line, once logged.
    addr: mpsc::Receiver<SocketAddr>,
}

impl Service {
    fn start(dir: &Path, env: &[(&str, &str)]) -> Service {
        let notify = NotifySocket::bind(dir, false);
        let mut child = Command::new(env!("CARGO_BIN_EXE_linden"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--admin-password",
                "secret",
            ])
            .arg("--data")
            .arg(dir.join("data"))
            .env("NOTIFY_SOCKET", &notify.path)
            // Not inherited from a test run that is itself a service with a watchdog.
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start linden serve");
        let pipe = child.stderr.take().expect("stderr");
        let (tx, addr) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                eprintln!("server: {line}");
                if let Some(rest) = line.split("listening on ").nth(1) {
                    if let Ok(a) = rest.split([',', ' ']).next().unwrap_or("").parse() {
                        let _ = tx.send(a);
                    }
                }
            }
        });
        Service {
            child,
            notify,
            addr,
        }
    }

    /// Waits for a notification with the line `line`; returns the whole datagram.
    fn wait_for(&mut self, line: &str) -> String {
        self.notify.wait_for(line, &mut self.child, DEADLINE)
    }

    fn addr(&self) -> SocketAddr {
        self.addr
            .recv_timeout(DEADLINE)
            .expect("the server logs its address")
    }

    fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill {sig} failed");
    }

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "server did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// READY=1 comes once the listener accepts: a client connecting right after it gets an answer
/// to a search. SIGTERM sends STOPPING=1 before the clean exit. No watchdog pings without
/// WATCHDOG_USEC.
#[test]
fn ready_once_listening_and_stopping_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let mut svc = Service::start(tmp.path(), &[]);
    let ready = svc.wait_for("READY=1");
    assert!(
        ready
            .lines()
            .any(|l| l.starts_with("STATUS=serving ldap://127.0.0.1:")),
        "{ready}"
    );
    // The address line is logged before READY=1 is sent, so it is there now.
    let addr = svc.addr();
    let mut ldap = ldap3::LdapConn::new(&format!("ldap://{addr}")).expect("connect after READY=1");
    let (entries, _) = ldap
        .search(
            "",
            ldap3::Scope::Base,
            "(objectClass=*)",
            vec!["vendorVersion"],
        )
        .expect("search the root DSE")
        .success()
        .expect("search succeeds");
    assert_eq!(entries.len(), 1);
    drop(ldap);

    svc.signal("-TERM");
    svc.wait_for("STOPPING=1");
    let status = svc.wait_exit();
    assert!(status.success(), "{status}");
    svc.notify.drain();
    let n = &svc.notify;
    assert_eq!(n.count("READY=1"), 1, "{:?}", n.received);
    assert_eq!(n.count("STOPPING=1"), 1, "{:?}", n.received);
    assert_eq!(n.count("WATCHDOG=1"), 0, "{:?}", n.received);
}

/// With WATCHDOG_USEC (systemd's WatchdogSec) the server pings WATCHDOG=1 after READY=1,
/// again and again while it runs.
#[test]
fn watchdog_pings_while_serving() {
    let tmp = tempfile::tempdir().unwrap();
    // 200 ms: pings every 100 ms. WATCHDOG_PID names this server (systemd sets it to the main
    // process); the child's pid is not known before it starts, so it is left out, which
    // sd_notify(3) treats as "this process".
    let mut svc = Service::start(tmp.path(), &[("WATCHDOG_USEC", "200000")]);
    svc.wait_for("READY=1");
    for _ in 0..3 {
        svc.wait_for("WATCHDOG=1");
    }
    let received = &svc.notify.received;
    let first_ping = received.iter().position(|l| l == "WATCHDOG=1").unwrap();
    let ready = received.iter().position(|l| l == "READY=1").unwrap();
    assert!(ready < first_ping, "{received:?}");
    svc.signal("-TERM");
    svc.wait_for("STOPPING=1");
    assert!(svc.wait_exit().success());
}

/// A WATCHDOG_USEC meant for another process (WATCHDOG_PID names someone else) is ignored.
#[test]
fn watchdog_of_another_process_is_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let mut svc = Service::start(
        tmp.path(),
        &[("WATCHDOG_USEC", "200000"), ("WATCHDOG_PID", "1")],
    );
    svc.wait_for("READY=1");
    svc.signal("-TERM");
    svc.wait_for("STOPPING=1");
    assert!(svc.wait_exit().success());
    svc.notify.drain();
    assert_eq!(
        svc.notify.count("WATCHDOG=1"),
        0,
        "{:?}",
        svc.notify.received
    );
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// packaging/systemd/linden.service passes `systemd-analyze verify` without a single warning.
/// Verify needs the ExecStart binary and the Documentation= manual pages to exist: a copy of
/// the unit points at the binary under test, whose `linden man` writes the pages. Skipped (with a message) where systemd-analyze is not installed.
#[test]
fn the_unit_file_verifies_cleanly() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: systemd-analyze is not installed (Debian package systemd)");
        return;
    }
    let unit = std::fs::read_to_string(repo_root().join("packaging/systemd/linden.service"))
        .expect("packaging/systemd/linden.service");
    assert!(
        unit.contains("ExecStart=/usr/bin/linden serve --config /etc/linden/linden.toml"),
        "{unit}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("linden.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/bin/linden", env!("CARGO_BIN_EXE_linden")),
    )
    .unwrap();
    // Verify also runs `man` on each Documentation= page: the pages the binary generates.
    let man8 = tmp.path().join("man/man8");
    let out = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args(["man", "--out"])
        .arg(&man8)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .env("MANPATH", tmp.path().join("man"))
        .output()
        .expect("systemd-analyze verify");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    // verify exits 0 on unknown keys and unsafe settings too; it says so on stderr.
    let about_ours: Vec<&str> = text.lines().filter(|l| l.contains("linden")).collect();
    assert!(about_ours.is_empty(), "systemd-analyze verify:\n{text}");
}
