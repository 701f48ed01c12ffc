//! The Debian package, installed on this machine: `packaging/build-deb.sh --debug --no-build`
//! packages the binary under test, `dpkg -i` installs it, the server is started the way its
//! unit would start it (PID 1 here is not systemd), answers LDAP searches over TCP and ldapi,
//! stops cleanly, and `dpkg --purge` removes the package.
//!
//! It changes the machine (a package, a system user, /var/lib/linden for a while), so it runs
//! only when asked: `LINDEN_TEST_PACKAGE=1 cargo test -p linden --test package -- --ignored`,
//! as root, where scripts/test-packaging.sh runs it. Everything it adds is removed at the end,
//! also when it fails; it refuses to start where a linden package, user or data directory
//! already exists.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::notify::NotifySocket;

const DEADLINE: Duration = Duration::from_secs(120);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &mut Command) -> Output {
    let shown = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{shown}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd`, fails the test unless it succeeds; its stdout and stderr.
fn ok(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{shown}: {}\n{}",
        out.status,
        text(&out)
    );
    text(&out)
}

fn exists(what: &str, name: &str) -> bool {
    run(Command::new("getent").args([what, name]))
        .status
        .success()
}

/// The `[Service]` settings of a unit file: key -> values, in order.
fn service_section(unit: &str) -> HashMap<String, Vec<String>> {
    let mut section = "";
    let mut keys: HashMap<String, Vec<String>> = HashMap::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[Service]" && !line.starts_with('#') {
            if let Some((k, v)) = line.split_once('=') {
                keys.entry(k.to_string()).or_default().push(v.to_string());
            }
        }
    }
    keys
}

/// What the test installed, removed when dropped (also after a failure): the server it
/// started, the package, the data, logs and runtime directories and, if the package created
/// it, the user.
struct Installed {
    server: Option<Child>,
    user_existed: bool,
}

impl Drop for Installed {
    fn drop(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = run(Command::new("dpkg")
            .args(["--purge", "linden"])
            .env("DEBIAN_FRONTEND", "noninteractive"));
        for dir in ["/var/lib/linden", "/var/log/linden", "/run/linden"] {
            let _ = std::fs::remove_dir_all(dir);
        }
        if !self.user_existed {
            let _ = run(Command::new("deluser").args(["--system", "--quiet", "linden"]));
            let _ = run(Command::new("delgroup").args(["--system", "--quiet", "linden"]));
        }
    }
}

#[test]
#[ignore = "installs a Debian package: run with LINDEN_TEST_PACKAGE=1 (scripts/test-packaging.sh)"]
fn the_debian_package_installs_serves_and_purges() {
    if std::env::var("LINDEN_TEST_PACKAGE").as_deref() != Ok("1") {
        eprintln!("SKIPPED: installs a Debian package; set LINDEN_TEST_PACKAGE=1 to run it");
        return;
    }
    let uid = ok(Command::new("id").arg("-u"));
    assert_eq!(uid.trim(), "0", "installing a package needs root");
    let installed = run(Command::new("dpkg-query").args(["-W", "-f", "${Status}", "linden"]));
    assert!(
        !String::from_utf8_lossy(&installed.stdout).contains("installed"),
        "a linden package is installed on this machine: the test would replace it"
    );
    assert!(
        !Path::new("/var/lib/linden").exists(),
        "/var/lib/linden exists: the test would use (and remove) its data"
    );

    // The package of the binary under test (target/debug/linden, built by cargo test).
    let bin = Path::new(env!("CARGO_BIN_EXE_linden"));
    assert!(
        bin.parent().is_some_and(|d| d.ends_with("debug")),
        "build-deb.sh --debug packages target/debug/linden, not {}",
        bin.display()
    );
    let started = Instant::now();
    let out =
        ok(Command::new(repo_root().join("packaging/build-deb.sh"))
            .args(["--debug", "--no-build"]));
    let deb = out
        .lines()
        .map(str::trim)
        .find(|l| l.ends_with(".deb"))
        .unwrap_or_else(|| panic!("no .deb in the output of build-deb.sh:\n{out}"))
        .to_string();
    eprintln!("built {deb} in {:.1} s", started.elapsed().as_secs_f64());

    let mut guard = Installed {
        server: None,
        user_existed: exists("passwd", "linden"),
    };
    let out = ok(Command::new("dpkg")
        .args(["-i", &deb])
        .env("DEBIAN_FRONTEND", "noninteractive"));
    eprintln!("dpkg -i:\n{out}");
    // The first installation says where the generated password will be.
    assert!(out.contains("journalctl -u linden"), "{out}");

    // What the package put in place.
    let pw = ok(Command::new("getent").args(["passwd", "linden"]));
    let fields: Vec<&str> = pw.trim().split(':').collect();
    assert_eq!(fields[5], "/var/lib/linden", "{pw}");
    assert!(fields[6].ends_with("nologin"), "{pw}");
    let linden_uid: u32 = fields[2].parse().unwrap();
    assert!(linden_uid < 1000, "a system user: {pw}");
    assert!(exists("group", "linden"));
    let stat = |path: &str| ok(Command::new("stat").args(["-c", "%U:%G %a", path]));
    assert_eq!(stat("/var/lib/linden").trim(), "linden:linden 750");
    assert_eq!(stat("/var/log/linden").trim(), "linden:linden 750");
    assert_eq!(stat("/etc/linden/linden.toml").trim(), "root:linden 640");
    let depends = ok(Command::new("dpkg-query").args(["-W", "-f", "${Depends}", "linden"]));
    assert!(
        depends.contains("libc6 (>= 2."),
        "libc6 is versioned: {depends}"
    );
    let conffiles = ok(Command::new("dpkg-query").args(["-W", "-f", "${Conffiles}", "linden"]));
    assert!(conffiles.contains("/etc/linden/linden.toml"), "{conffiles}");
    assert!(conffiles.contains("/etc/logrotate.d/linden"), "{conffiles}");
    let version = ok(Command::new("/usr/bin/linden").arg("--version"));
    assert!(
        version.starts_with("linden 0.") && version.contains(" ("),
        "{version}"
    );
    let files = ok(Command::new("dpkg").args(["-L", "linden"]));
    for want in [
        "/usr/share/man/man8/linden.8.gz",
        "/usr/share/man/man8/linden-serve.8.gz",
        "/usr/share/linden/grafana/linden-dashboard.json",
        "/usr/share/linden/prometheus/linden-alerts.yml",
    ] {
        assert!(files.contains(want), "{want} not in the package:\n{files}");
    }
    if Command::new("man").arg("--version").output().is_ok() {
        let page = ok(Command::new("man").args(["-w", "linden-serve"]));
        assert_eq!(page.trim(), "/usr/share/man/man8/linden-serve.8.gz");
    }
    // Enabled for the next boot (deb-systemd-helper), not started: PID 1 is not systemd.
    assert!(
        Path::new("/etc/systemd/system/multi-user.target.wants/linden.service").exists(),
        "linden.service is not enabled"
    );
    if Command::new("logrotate").arg("--version").output().is_ok() {
        let out = ok(Command::new("logrotate").args(["-d", "/etc/logrotate.d/linden"]));
        assert!(!out.to_lowercase().contains("error"), "{out}");
    } else {
        eprintln!("logrotate is not installed: /etc/logrotate.d/linden not checked");
    }

    // Start the server the way linden.service would: as its user, with its capabilities,
    // umask, working and runtime directory, environment and ExecStart.
    let unit_path = [
        "/usr/lib/systemd/system/linden.service",
        "/lib/systemd/system/linden.service",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("the package installs linden.service");
    let unit = std::fs::read_to_string(unit_path).unwrap();
    assert_eq!(
        unit,
        std::fs::read_to_string(repo_root().join("packaging/systemd/linden.service")).unwrap()
    );
    let service = service_section(&unit);
    let one = |k: &str| -> String {
        let v = service
            .get(k)
            .unwrap_or_else(|| panic!("{k} missing from the unit"));
        v.last().unwrap().clone()
    };
    assert_eq!(one("Type"), "notify");
    let user = one("User");
    let group = one("Group");
    let caps: Vec<String> = one("AmbientCapabilities")
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_lowercase())
        .collect();
    assert_eq!(caps, ["net_bind_service"]);
    let caps = caps
        .iter()
        .map(|c| format!("+{c}"))
        .collect::<Vec<_>>()
        .join(",");
    let runtime = Path::new("/run").join(one("RuntimeDirectory"));
    std::fs::create_dir_all(&runtime).unwrap();
    ok(Command::new("chown")
        .arg(format!("{user}:{group}"))
        .arg(&runtime));
    ok(Command::new("chmod")
        .arg(one("RuntimeDirectoryMode"))
        .arg(&runtime));
    let mut exec: Vec<String> = one("ExecStart")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    // The package listens on 127.0.0.1:389; where that is taken on this machine (a slapd),
    // the test server takes a free port instead (a flag beats the file).
    if std::net::TcpListener::bind("127.0.0.1:389").is_err() {
        eprintln!("127.0.0.1:389 is in use here: the installed server listens on a free port");
        exec.extend(["--listen".to_string(), "127.0.0.1:0".to_string()]);
    }
    let tmp = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut notify = NotifySocket::bind(tmp.path(), true);
    let mut child = Command::new("sh")
        .args([
            "-c",
            "umask \"$1\"; shift; exec \"$@\"",
            "sh",
            &one("UMask"),
        ])
        .arg("setpriv")
        .arg(format!("--reuid={user}"))
        .arg(format!("--regid={group}"))
        .arg("--init-groups")
        .arg(format!("--inh-caps={caps}"))
        .arg(format!("--ambient-caps={caps}"))
        .arg(format!("--bounding-set=-all,{caps}"))
        .arg("--no-new-privs")
        .arg("--")
        .args(&exec)
        .current_dir(one("WorkingDirectory"))
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("NOTIFY_SOCKET", &notify.path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server as the unit would");
    let pid = child.id();
    // The journal, as systemd would collect it: stdout and stderr.
    let (tx, journal) = mpsc::channel::<String>();
    for pipe in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                eprintln!("journal: {line}");
                let _ = tx.send(line);
            }
        });
    }
    guard.server = Some(child);
    let child = guard.server.as_mut().unwrap();
    let ready = notify.wait_for("READY=1", child, DEADLINE);
    assert!(ready.contains("ldapi:///run/linden/ldapi"), "{ready}");

    // Before READY=1 the server printed the generated password and its addresses.
    let mut lines = Vec::new();
    let until = Instant::now() + DEADLINE;
    let (password, addr) = loop {
        let left = until.saturating_duration_since(Instant::now());
        let line = journal
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no password and address in the journal: {lines:#?}"));
        lines.push(line);
        let password = lines.iter().find_map(|l| {
            let rest = l
                .split("Generated administrator password for cn=admin,dc=example,dc=com: ")
                .nth(1)?;
            Some(rest.split(' ').next()?.to_string())
        });
        let addr = lines.iter().find_map(|l| {
            let rest = l.split("listening on ").nth(1)?;
            Some(rest.split([',', ' ']).next()?.to_string())
        });
        if let (Some(p), Some(a)) = (password, addr) {
            break (p, a);
        }
    };
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Linden 0.") && l.contains("starting")),
        "{lines:#?}"
    );

    // It runs as linden, with only the capability to bind low ports.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(field("Uid:"), linden_uid.to_string(), "{status}");
    assert_eq!(
        field("CapEff:"),
        "0000000000000400",
        "CAP_NET_BIND_SERVICE only: {status}"
    );

    // An LDAP search over TCP as the administrator, with the password from the journal.
    let url = format!("ldap://{addr}");
    let out = ok(Command::new("ldapsearch").args([
        "-x",
        "-LLL",
        "-H",
        &url,
        "-D",
        "cn=admin,dc=example,dc=com",
        "-w",
        &password,
        "-b",
        "dc=example,dc=com",
        "-s",
        "base",
        "objectClass",
    ]));
    assert!(out.contains("dn: dc=example,dc=com"), "{out}");
    // And over ldapi as root, who is the administrator there without a password.
    let out = ok(Command::new("ldapwhoami").args([
        "-Q",
        "-Y",
        "EXTERNAL",
        "-H",
        "ldapi://%2Frun%2Flinden%2Fldapi",
    ]));
    assert_eq!(out.trim(), "dn:cn=admin,dc=example,dc=com");

    // SIGTERM (systemctl stop): STOPPING=1, a clean exit, a snapshot owned by linden.
    ok(Command::new("kill").args(["-TERM", &pid.to_string()]));
    notify.wait_for("STOPPING=1", child, DEADLINE);
    let until = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < until, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    guard.server = None;
    let data = ok(Command::new("ls").args(["-ln", "/var/lib/linden"]));
    assert!(data.contains(".lns"), "no snapshot: {data}");
    for line in data.lines().skip(1) {
        let owner = line.split_whitespace().nth(2).unwrap_or_default();
        assert_eq!(owner, linden_uid.to_string(), "{data}");
    }

    // Purge: the package, its configuration and logs go; the data stays, and it says so.
    let out = ok(Command::new("dpkg")
        .args(["--purge", "linden"])
        .env("DEBIAN_FRONTEND", "noninteractive"));
    assert!(out.contains("/var/lib/linden"), "{out}");
    for gone in [
        "/usr/bin/linden",
        "/etc/linden/linden.toml",
        "/etc/logrotate.d/linden",
        "/var/log/linden",
        "/etc/systemd/system/multi-user.target.wants/linden.service",
    ] {
        assert!(!Path::new(gone).exists(), "{gone} left after purge");
    }
    assert!(Path::new("/var/lib/linden")
        .join("admin-password.hash")
        .exists());
    drop(guard);
    assert!(!Path::new("/var/lib/linden").exists());
}
