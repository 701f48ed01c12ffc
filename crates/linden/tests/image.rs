//! The container image: `packaging/build-image.sh --debug --no-build` builds it offline (no
//! base image) from the binary under test, with podman; the test checks what is in it, then
//! runs it: as its non-root user, with the data in a mounted directory, /healthz answering,
//! LDAP served with the password from the environment, a clean stop; and with a mounted
//! configuration file.
//!
//! Containers need root and podman (Debian package), so it runs only when asked:
//! `LINDEN_TEST_IMAGE=1 cargo test -p linden --test image -- --ignored`, as
//! scripts/test-packaging.sh does. Podman's storage is a temporary directory (vfs driver),
//! removed at the end with everything the test created.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(120);
/// The image's user (packaging/build-image.sh).
const UID: u32 = 10389;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Podman (and the build script) on the test's own storage.
struct Podman {
    storage_conf: PathBuf,
    /// Container names and images to remove at the end.
    containers: Vec<String>,
    image: String,
}

impl Podman {
    fn cmd(&self) -> Command {
        let mut c = Command::new("podman");
        c.env("CONTAINERS_STORAGE_CONF", &self.storage_conf)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run podman")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "podman {args:?}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `podman run -d` of the image with `extra` options and `args` after the image name;
    /// publishes 3389 and 9090 on free loopback ports: (LDAP address, HTTP address).
    fn start(&mut self, name: &str, extra: &[String], args: &[&str]) -> (String, String) {
        let mut all: Vec<String> = vec!["run".into(), "-d".into(), "--name".into(), name.into()];
        all.extend(runtime_options());
        all.extend(
            ["-p", "127.0.0.1::3389", "-p", "127.0.0.1::9090"]
                .iter()
                .map(|s| s.to_string()),
        );
        all.extend(extra.iter().cloned());
        all.push(self.image.clone());
        all.extend(args.iter().map(|s| s.to_string()));
        self.containers.push(name.to_string());
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        self.ok(&refs);
        let port = |p: &str| self.ok(&["port", name, p]).trim().to_string();
        (port("3389/tcp"), port("9090/tcp"))
    }

    fn logs(&self, name: &str) -> String {
        let out = self.run(&["logs", name]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = self.run(&["rm", "--force", c]);
        }
        let _ = self.run(&["rmi", "--force", &self.image]);
        // The storage itself is in the test's temporary directory, removed after this.
    }
}

/// Options this machine needs to run a container, and that do no harm elsewhere: limits no
/// higher than the test's own hard limits (podman's default of 1048576 open files fails where
/// the host's hard limit is lower), and runc where the control groups are the hybrid v1/v2
/// layout crun refuses.
fn runtime_options() -> Vec<String> {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let hard = |name: &str, cap: u64| -> u64 {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l[name.len()..].split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .map_or(cap, |v: u64| v.min(cap))
    };
    let files = hard("Max open files", 65536);
    let procs = hard("Max processes", 4096);
    let mut opts = vec![
        "--ulimit".to_string(),
        format!("nofile={files}:{files}"),
        "--ulimit".to_string(),
        format!("nproc={procs}:{procs}"),
    ];
    let hybrid = Path::new("/sys/fs/cgroup/unified").exists();
    if hybrid && Command::new("runc").arg("--version").output().is_ok() {
        opts.extend(["--runtime".to_string(), "runc".to_string()]);
    }
    opts
}

/// GET `path` over HTTP/1.0: (status code, body); `None` while nothing answers.
fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let code = resp.split_whitespace().nth(1)?.parse().ok()?;
    let body = resp
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    Some((code, body))
}

/// Polls `/healthz` until it answers 200 (published ports accept before the server inside
/// does, so a refused or empty answer means "not yet").
fn wait_healthy(podman: &Podman, name: &str, http: &str) {
    let until = Instant::now() + DEADLINE;
    loop {
        if let Some((200, body)) = http_get(http, "/healthz") {
            assert_eq!(body.trim(), "ok");
            return;
        }
        let state = podman.ok(&["inspect", "--format", "{{.State.Status}}", name]);
        assert!(
            state.trim() == "running",
            "container {name} is {state}:\n{}",
            podman.logs(name)
        );
        assert!(
            Instant::now() < until,
            "/healthz never answered:\n{}",
            podman.logs(name)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ldapsearch(url: &str, bind: &str, password: &str, base: &str) -> Output {
    Command::new("ldapsearch")
        .args([
            "-x", "-LLL", "-H", url, "-D", bind, "-w", password, "-b", base,
        ])
        .args(["-s", "base", "objectClass"])
        .output()
        .expect("ldapsearch (scripts/install-test-deps.sh installs ldap-utils)")
}

/// A directory the image's user owns, mounted as its data volume.
fn data_dir(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(UID), Some(UID)).unwrap();
    dir
}

#[test]
#[ignore = "builds and runs a container image as root: run with LINDEN_TEST_IMAGE=1 (scripts/test-packaging.sh)"]
fn the_container_image_serves_as_a_non_root_user() {
    if std::env::var("LINDEN_TEST_IMAGE").as_deref() != Ok("1") {
        eprintln!("SKIPPED: builds and runs a container; set LINDEN_TEST_IMAGE=1 to run it");
        return;
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_linden"));
    assert!(
        bin.parent().is_some_and(|d| d.ends_with("debug")),
        "build-image.sh --debug uses target/debug/linden, not {}",
        bin.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let storage_conf = tmp.path().join("storage.conf");
    std::fs::write(
        &storage_conf,
        format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = \"{0}/graph\"\nrunroot = \"{0}/run\"\n",
            tmp.path().display()
        ),
    )
    .unwrap();
    let image = format!("localhost/linden-test:{}", std::process::id());
    let mut podman = Podman {
        storage_conf: storage_conf.clone(),
        containers: Vec::new(),
        image: image.clone(),
    };

    // Build.
    let started = Instant::now();
    let out = Command::new(repo_root().join("packaging/build-image.sh"))
        .args(["--debug", "--no-build", "--tag", &image])
        .env("CONTAINERS_STORAGE_CONF", &storage_conf)
        .stdin(Stdio::null())
        .output()
        .expect("run build-image.sh");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "build-image.sh: {said}");
    eprintln!(
        "build-image.sh in {:.1} s: {said}",
        started.elapsed().as_secs_f64()
    );
    assert!(said.contains(&image) && said.contains(" MB)"), "{said}");

    // What the image is: the user, the volume, the ports, the command.
    let config = podman.ok(&["image", "inspect", "--format", "{{json .Config}}", &image]);
    assert!(config.contains(r#""User":"10389:10389""#), "{config}");
    assert!(config.contains(r#""/var/lib/linden":{}"#), "{config}");
    assert!(
        config.contains(r#""3389/tcp":{}"#) && config.contains(r#""9090/tcp":{}"#),
        "{config}"
    );
    assert!(
        config.contains(r#""Entrypoint":["/usr/bin/linden"]"#),
        "{config}"
    );
    // What is in it: the binary, the libraries ldd names for it, and nothing else.
    let probe = "linden-test-files";
    podman.containers.push(probe.to_string());
    podman.ok(&["create", "--name", probe, &image]);
    let tar = podman.cmd().args(["export", probe]).output().unwrap();
    assert!(tar.status.success());
    let mut list = Command::new("tar")
        .arg("-t")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = list.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&tar.stdout));
    let files = list.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let files: Vec<String> = String::from_utf8_lossy(&files.stdout)
        .lines()
        .filter(|l| !l.ends_with('/'))
        .map(|l| format!("/{}", l.trim_start_matches("./")))
        .collect();
    let ldd = Command::new("ldd").arg(bin).output().unwrap();
    let mut want: Vec<String> = String::from_utf8_lossy(&ldd.stdout)
        .lines()
        .filter_map(|l| {
            let path = l.split("=> ").nth(1).unwrap_or(l.trim());
            let path = path.split(" (").next()?.trim();
            path.starts_with('/').then(|| path.to_string())
        })
        .collect();
    want.extend(
        [
            "/usr/bin/linden",
            "/etc/passwd",
            "/etc/group",
            "/etc/linden/linden.toml",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let mut got = files.clone();
    got.retain(|f| !f.starts_with("/var/lib/linden"));
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "the image holds other files than the binary needs"
    );

    // Run the image as it is: the password from the environment, the data in a mounted
    // directory.
    let data = data_dir(tmp.path(), "data");
    let name = format!("linden-test-{}", std::process::id());
    let (ldap, http) = podman.start(
        &name,
        &[
            "-e".into(),
            "LINDEN_ADMIN_PASSWORD=secret".into(),
            "-v".into(),
            format!("{}:/var/lib/linden", data.display()),
        ],
        &[],
    );
    wait_healthy(&podman, &name, &http);
    let url = format!("ldap://{ldap}");
    let out = ldapsearch(
        &url,
        "cn=admin,dc=example,dc=com",
        "secret",
        "dc=example,dc=com",
    );
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).contains("dn: dc=example,dc=com"),
        "{out:?}\n{}",
        podman.logs(&name)
    );
    let pid = podman.ok(&["inspect", "--format", "{{.State.Pid}}", &name]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(
        uid_line.split_whitespace().nth(1),
        Some(UID.to_string().as_str()),
        "{uid_line}"
    );
    // `podman stop` sends SIGTERM: a clean exit, with the shutdown snapshot in the volume.
    podman.ok(&["stop", "--time", "60", &name]);
    let code = podman.ok(&["inspect", "--format", "{{.State.ExitCode}}", &name]);
    assert_eq!(code.trim(), "0", "{}", podman.logs(&name));
    let logs = podman.logs(&name);
    assert!(
        logs.contains("Linden 0.") && logs.contains("starting"),
        "{logs}"
    );
    let snapshots: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".lns"))
        .collect();
    assert_eq!(snapshots.len(), 1, "{logs}");
    {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(snapshots[0].metadata().unwrap().uid(), UID);
    }

    // A mounted configuration replaces the image's; no password anywhere: one is generated and
    // printed once on stdout (`podman logs`).
    let conf = tmp.path().join("linden.toml");
    std::fs::write(
        &conf,
        "listen = [\"0.0.0.0:3389\"]\nmetrics_listen = \"0.0.0.0:9090\"\n\
         suffix = [\"o=mounted\"]\nadmin_dn = \"cn=manager,o=mounted\"\ndata = \"/var/lib/linden\"\n",
    )
    .unwrap();
    let data = data_dir(tmp.path(), "data2");
    let name = format!("linden-test-conf-{}", std::process::id());
    let (ldap, http) = podman.start(
        &name,
        &[
            "-v".into(),
            format!("{}:/etc/linden/linden.toml:ro", conf.display()),
            "-v".into(),
            format!("{}:/var/lib/linden", data.display()),
        ],
        &[],
    );
    wait_healthy(&podman, &name, &http);
    let logs = podman.logs(&name);
    let password = logs
        .split("Generated administrator password for cn=manager,o=mounted: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no generated password in the logs:\n{logs}"));
    let out = ldapsearch(
        &format!("ldap://{ldap}"),
        "cn=manager,o=mounted",
        password,
        "o=mounted",
    );
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("dn: o=mounted"),
        "{out:?}\n{logs}"
    );
    podman.ok(&["stop", "--time", "60", &name]);
}
