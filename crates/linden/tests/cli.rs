//! The `linden` binary as a user runs it: help text, configuration errors, and a real server on
//! `127.0.0.1:0` checked with real clients (OpenLDAP's `ldapwhoami`, the `ldap3` crate).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_linden");
const ADMIN: &str = "cn=admin,dc=example,dc=com";

fn linden(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("LINDEN_ADMIN_PASSWORD")
        .output()
        .expect("run linden")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn help_explains_every_serve_option() {
    let out = linden(&["serve", "--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for flag in [
        "--listen <ADDR:PORT>",
        "--data <DIR>",
        "--suffix <DN>",
        "--admin-dn <DN>",
        "--admin-password <PW>",
        "LINDEN_ADMIN_PASSWORD",
        "--config <FILE>",
        "--demo",
        "--max-pdu-size <BYTES>",
        "--max-outstanding <N>",
        "--size-limit <N>",
        "--time-limit <SECONDS>",
        "--log-level <LEVEL>",
    ] {
        assert!(help.contains(flag), "serve --help lacks {flag}:\n{help}");
    }
    let top = text(&linden(&["--help"]).stdout);
    assert!(top.contains("serve"), "{top}");
}

#[test]
fn help_does_not_show_the_password_from_the_environment() {
    let out = Command::new(BIN)
        .args(["serve", "--help"])
        .env("LINDEN_ADMIN_PASSWORD", "s3cr3t-in-env")
        .output()
        .expect("run linden");
    assert!(!text(&out.stdout).contains("s3cr3t-in-env"));
}

fn with_config(contents: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("linden-config.toml");
    std::fs::write(&path, contents).expect("write config");
    let path = path.to_str().expect("utf-8 temp path").to_string();
    (dir, path)
}

fn assert_config_error(out: &Output, wants: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    for w in wants {
        assert!(err.contains(w), "stderr lacks {w:?}: {err}");
    }
    assert!(out.stdout.is_empty(), "stdout: {}", text(&out.stdout));
}

#[test]
fn unknown_config_key_names_file_and_key() {
    let (_dir, path) = with_config("listen = \"127.0.0.1:0\"\nlisen = \"127.0.0.1:3389\"\n");
    let out = linden(&["serve", "--config", &path]);
    assert_config_error(
        &out,
        &[
            &format!("{path}:2: unknown key 'lisen'"),
            "did you mean 'listen'?",
        ],
    );
}

#[test]
fn bad_listen_value_names_the_key() {
    let (_dir, path) = with_config("listen = \"abc\"\n");
    let out = linden(&["serve", "--config", &path]);
    assert_config_error(
        &out,
        &[&path, "key 'listen'", "invalid socket address 'abc'"],
    );
}

#[test]
fn bad_values_of_other_keys_are_errors() {
    for (contents, key) in [
        ("demo = \"yes\"", "key 'demo'"),
        ("size_limit = -5", "key 'size_limit'"),
        ("suffix = 7", "key 'suffix'"),
        ("log_level = \"verbose\"", "key 'log_level'"),
        (
            "max_pdu_size_anonymous = 100",
            "key 'max_pdu_size_anonymous'",
        ),
        ("listen_backlog = 0", "key 'listen_backlog'"),
        (
            "idle_timeout_anonymous = -1",
            "key 'idle_timeout_anonymous'",
        ),
        ("listen = ", "invalid TOML"),
    ] {
        let (_dir, path) = with_config(contents);
        let out = linden(&["serve", "--config", &path]);
        assert_config_error(&out, &[&path, key]);
    }
}

/// A budget for requests being received smaller than the largest request could never let that
/// request in: refused before the data directory is touched.
#[test]
fn a_request_budget_below_the_largest_request_is_a_config_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let (_dir, path) = with_config(&format!(
        "listen = \"127.0.0.1:0\"\ndata = \"{}\"\nmax_pdu_size = 2000000\nmax_incoming_bytes = 1000000\n",
        data.display()
    ));
    let out = linden(&["serve", "--config", &path]);
    assert_config_error(
        &out,
        &["max_incoming_bytes (1000000) must be at least max_pdu_size (2000000)"],
    );
    assert!(!data.exists(), "the data directory was touched");
}

#[test]
fn missing_config_file_is_a_config_error() {
    let out = linden(&["serve", "--config", "/nonexistent/linden.toml"]);
    assert_config_error(&out, &["/nonexistent/linden.toml", "cannot read"]);
}

#[test]
fn bad_flag_values_exit_2() {
    let out = linden(&["serve", "--listen", "abc"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--listen"));
    let out = linden(&["serve", "--log-level", "verbose", "--admin-password", "x"]);
    assert_config_error(&out, &["--log-level", "'verbose'"]);
}

/// A running `linden serve`, killed when dropped.
struct Running {
    child: Child,
    addr: SocketAddr,
    /// Everything the server printed on stdout before it reported its address.
    stdout: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    fn url(&self) -> String {
        format!("ldap://{}", self.addr)
    }

    /// Sends SIGTERM and returns the exit status, to check the server stops cleanly.
    #[cfg(unix)]
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(killed.success());
        self.child.wait().expect("wait for linden")
    }
}

/// Starts `linden serve --listen 127.0.0.1:0 --data DATA ARGS` and waits for "listening on".
fn start(data: &Path, args: &[&str]) -> Running {
    start_with(data, args, &[])
}

/// Like `start`, with environment variables set for the server.
fn start_with(data: &Path, args: &[&str], envs: &[(&str, &str)]) -> Running {
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(args)
        .env_remove("LINDEN_ADMIN_PASSWORD")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start linden");
    let mut stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            seen.push_str(&line);
            seen.push('\n');
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest.split([' ', ',']).next().unwrap_or("").to_string();
                let _ = tx.send(Ok(addr));
            }
        }
        let _ = tx.send(Err(seen));
    });
    let addr = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(addr)) => addr
            .parse()
            .unwrap_or_else(|e| panic!("bad address {addr:?} in log: {e}")),
        Ok(Err(log)) => {
            let _ = child.kill();
            panic!("linden exited before listening; stderr:\n{log}");
        }
        Err(_) => {
            let _ = child.kill();
            panic!("linden did not report its address within 30 s");
        }
    };
    // The generated-password line, if any, is printed before the server listens; stdout is
    // line-buffered, so everything up to here has been written. Read what is there without
    // blocking on the open pipe.
    let (otx, orx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut acc = Vec::new();
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            acc.extend_from_slice(&buf[..n]);
            if acc.contains(&b'\n') {
                let _ = otx.send(acc.clone());
            }
        }
    });
    let stdout = orx
        .recv_timeout(Duration::from_millis(500))
        .map(|b| text(&b))
        .unwrap_or_default();
    Running {
        child,
        addr,
        stdout,
    }
}

fn have_ldapwhoami() -> bool {
    Command::new("ldapwhoami")
        .arg("-VV")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Binds with the ldap3 crate; `Ok(())` if the server accepted the credentials.
fn ldap3_bind(url: &str, dn: &str, pw: &str) -> Result<(), String> {
    let mut conn = ldap3::LdapConn::new(url).map_err(|e| e.to_string())?;
    let r = conn
        .simple_bind(dn, pw)
        .map_err(|e| e.to_string())?
        .success()
        .map(drop)
        .map_err(|e| e.to_string());
    let _ = conn.unbind();
    r
}

#[test]
fn serve_accepts_the_given_admin_password() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = start(&data, &["--admin-password", "secret"]);
    assert!(
        server.stdout.is_empty(),
        "no password is printed when one is given: {}",
        server.stdout
    );
    assert!(
        !data.join("admin-password.hash").exists(),
        "a given password is not written"
    );

    assert_eq!(ldap3_bind(&server.url(), ADMIN, "secret"), Ok(()));
    assert!(
        ldap3_bind(&server.url(), ADMIN, "wrong").is_err(),
        "a wrong password must be refused"
    );

    // OpenLDAP's client, as the rest of the suite requires it (scripts/install-test-deps.sh).
    assert!(
        have_ldapwhoami(),
        "ldapwhoami is not installed: install Debian's ldap-utils (scripts/install-test-deps.sh)"
    );
    let out = Command::new("ldapwhoami")
        .args(["-x", "-H", &server.url(), "-D", ADMIN, "-w", "secret"])
        .output()
        .expect("run ldapwhoami");
    assert!(
        out.status.success(),
        "ldapwhoami failed: {}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout).trim(), format!("dn:{ADMIN}"));
    let out = Command::new("ldapwhoami")
        .args(["-x", "-H", &server.url(), "-D", ADMIN, "-w", "wrong"])
        .output()
        .expect("run ldapwhoami");
    assert_eq!(
        out.status.code(),
        Some(49),
        "invalidCredentials expected: {}",
        text(&out.stderr)
    );

    #[cfg(unix)]
    assert!(server.terminate().success(), "SIGTERM is a clean shutdown");
}

#[test]
fn password_precedence_flag_then_environment_then_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let config = dir.path().join("linden.toml");
    std::fs::write(&config, "admin_password = \"from-file\"\n").expect("write config");
    let config = config.to_str().expect("utf-8 path");

    let server = start_with(&data, &["--config", config], &[]);
    assert_eq!(ldap3_bind(&server.url(), ADMIN, "from-file"), Ok(()));
    drop(server);

    let server = start_with(
        &data,
        &["--config", config],
        &[("LINDEN_ADMIN_PASSWORD", "from-env")],
    );
    assert_eq!(ldap3_bind(&server.url(), ADMIN, "from-env"), Ok(()));
    assert!(ldap3_bind(&server.url(), ADMIN, "from-file").is_err());
    drop(server);

    let server = start_with(
        &data,
        &["--config", config, "--admin-password", "from-flag"],
        &[("LINDEN_ADMIN_PASSWORD", "from-env")],
    );
    assert_eq!(ldap3_bind(&server.url(), ADMIN, "from-flag"), Ok(()));
    assert!(ldap3_bind(&server.url(), ADMIN, "from-env").is_err());
    drop(server);

    assert!(
        !data.join("admin-password.hash").exists(),
        "a given password is never written"
    );
}

#[test]
fn config_file_settings_reach_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("linden.toml");
    std::fs::write(
        &config,
        "demo = true\nsize_limit = 2\nadmin_dn = \"cn=root,dc=example,dc=com\"\nadmin_password = \"pw\"\n",
    )
    .expect("write config");
    let server = start(
        &dir.path().join("data"),
        &["--config", config.to_str().expect("utf-8 path")],
    );
    assert_eq!(
        ldap3_bind(&server.url(), "cn=root,dc=example,dc=com", "pw"),
        Ok(())
    );
    assert!(
        ldap3_bind(&server.url(), ADMIN, "pw").is_err(),
        "admin_dn from the file replaces the default"
    );

    // The default access policy: anonymous clients see no entries at all.
    let mut anon = ldap3::LdapConn::new(&server.url()).expect("connect");
    let ldap3::SearchResult(entries, result) = anon
        .search(
            "ou=people,dc=example,dc=com",
            ldap3::Scope::OneLevel,
            "(objectClass=*)",
            vec!["uid"],
        )
        .expect("search");
    assert_eq!(result.rc, 32, "hidden base is noSuchObject: {result:?}");
    assert!(entries.is_empty());

    // A bound user: the server's size limit applies to the ten demo people.
    let mut conn = ldap3::LdapConn::new(&server.url()).expect("connect");
    conn.simple_bind("uid=alice,ou=people,dc=example,dc=com", "password")
        .expect("bind")
        .success()
        .expect("alice binds");
    let ldap3::SearchResult(entries, result) = conn
        .search(
            "ou=people,dc=example,dc=com",
            ldap3::Scope::OneLevel,
            "(objectClass=inetOrgPerson)",
            vec!["uid"],
        )
        .expect("search");
    assert_eq!(result.rc, 4, "sizeLimitExceeded expected: {result:?}");
    assert_eq!(entries.len(), 2);
    let _ = conn.unbind();
}

fn generated_password(stdout: &str) -> Option<String> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Generated administrator password for "))?;
    let rest = line.split(": ").nth(1)?;
    rest.split(' ').next().map(str::to_string)
}

#[test]
fn generated_password_is_printed_once_and_survives_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");

    let first = start(&data, &[]);
    let pw = generated_password(&first.stdout)
        .unwrap_or_else(|| panic!("no generated password on stdout: {:?}", first.stdout));
    assert!(pw.len() >= 16, "generated password too short: {pw}");
    assert!(first.stdout.contains(ADMIN), "{}", first.stdout);
    let hash_file = data.join("admin-password.hash");
    let stored = std::fs::read_to_string(&hash_file).expect("hash file written");
    assert!(!stored.contains(&pw), "the cleartext must not be stored");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&hash_file)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert_eq!(ldap3_bind(&first.url(), ADMIN, &pw), Ok(()));
    drop(first);

    let second = start(&data, &[]);
    assert_eq!(
        generated_password(&second.stdout),
        None,
        "printed again: {}",
        second.stdout
    );
    assert_eq!(ldap3_bind(&second.url(), ADMIN, &pw), Ok(()));
    assert_eq!(
        std::fs::read_to_string(&hash_file).expect("hash file"),
        stored
    );
}

#[test]
fn port_in_use_is_reported_with_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            &addr,
            "--admin-password",
            "x",
            "--data",
        ])
        .arg(dir.path())
        .output()
        .expect("run linden");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
}

#[test]
fn bad_suffix_is_a_config_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--suffix",
            "not a dn",
            "--admin-password",
            "x",
            "--data",
        ])
        .arg(dir.path())
        .output()
        .expect("run linden");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("suffix"),
        "{}",
        text(&out.stderr)
    );
}
