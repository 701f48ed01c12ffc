//! What an operator meets first (issue 28's rough edges): `linden check-config`, checks made
//! before the data directory is touched, a data directory started with the wrong suffix,
//! `backup` and `snapshot` taking the server's `--config`, import outside the suffix, and
//! settings from the environment.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::serve::Running;
use ldap3::LdapConn;

const BIN: &str = env!("CARGO_BIN_EXE_linden");

fn linden(args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("LINDEN_ADMIN_PASSWORD")
        .envs(envs.iter().copied())
        .output()
        .expect("run linden")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write(path: &Path, contents: &str) -> String {
    std::fs::write(path, contents).expect("write");
    path.display().to_string()
}

#[test]
fn check_config_lists_every_problem_and_touches_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let good = write(
        &dir.path().join("good.toml"),
        &format!(
            "listen = \"127.0.0.1:0\"\ndata = \"{}\"\nschemas = [\"openssh-lpk\"]\n",
            data.display()
        ),
    );
    let out = linden(&["check-config", "--config", &good], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), format!("{good}: ok"));

    let bad = write(
        &dir.path().join("bad.toml"),
        &format!(
            "data = \"{}\"\nlisen = \"127.0.0.1:1\"\nmax_pdu_size = 0\n",
            data.display()
        ),
    );
    let out = linden(&["check-config", "--config", &bad], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{bad}:2: unknown key 'lisen' (did you mean 'listen'?)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{bad}:3: key 'max_pdu_size': must be at least 1")),
        "{err}"
    );
    assert!(err.contains("2 problems"), "{err}");

    // What the keys name: each problem on its line, the data directory untouched.
    let named = write(
        &dir.path().join("named.toml"),
        &format!(
            "data = \"{}\"\ntls_cert = \"{d}/none.pem\"\ntls_key = \"{d}/none.key\"\nschemas = [\"nosuch\"]\nsuffix = \"not a dn\"\naccess_log = \"{d}/no/dir/access.log\"\n",
            data.display(),
            d = dir.path().display()
        ),
    );
    let out = linden(&["check-config", "--config", &named], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    for want in [
        "none.pem: cannot read",
        "unknown schema bundle 'nosuch'",
        "access_log: cannot create",
    ] {
        assert!(err.contains(want), "{want} missing: {err}");
    }
    assert!(!data.exists(), "check-config created the data directory");
    assert!(!dir.path().join("no").exists());
}

#[test]
fn a_start_checks_the_tls_files_and_the_port_before_the_data_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = linden(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-password",
            "x",
            "--tls-cert",
            "/nonexistent/cert.pem",
            "--tls-key",
            "/nonexistent/key.pem",
            "--data",
            &data.display().to_string(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("/nonexistent/cert.pem"));
    assert!(!data.exists(), "the data directory was created");

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = linden(
        &[
            "serve",
            "--listen",
            &addr,
            "--admin-password",
            "x",
            "--data",
            &data.display().to_string(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(&format!("cannot listen on {addr}")));
    assert!(!data.exists(), "the data directory was created");
}

#[test]
fn a_data_directory_with_another_naming_context_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = write(
        &dir.path().join("linden.toml"),
        &format!(
            "listen = \"127.0.0.1:0\"\ndata = \"{}/data\"\nadmin_password = \"secret\"\n",
            dir.path().display()
        ),
    );
    let srv = Running::start(Path::new(&cfg), &[]);
    assert!(srv.terminate().success());
    let out = linden(
        &["serve", "--config", &cfg, "--suffix", "dc=acme,dc=test"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("the data holds the naming context 'dc=example,dc=com', which is not a configured suffix"),
        "{err}"
    );
    // Both served: the new suffix is added.
    let srv = Running::start(
        Path::new(&cfg),
        &[
            "--suffix",
            "dc=example,dc=com",
            "--suffix",
            "dc=acme,dc=test",
        ],
    );
    assert!(srv.terminate().success());
}

#[test]
fn backup_and_snapshot_take_the_servers_configuration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = write(
        &dir.path().join("linden.toml"),
        &format!(
            "listen = \"127.0.0.1:0\"\ndata = \"{}/data\"\nadmin_password = \"secret\"\nschemas = [\"openssh-lpk\"]\nsnapshot_interval = 0\n",
            dir.path().display()
        ),
    );
    let srv = Running::start(Path::new(&cfg), &[]);
    let mut c = LdapConn::new(&srv.url()).expect("connect");
    c.simple_bind("cn=admin,dc=example,dc=com", "secret")
        .expect("bind")
        .success()
        .expect("admin");
    c.add(
        "uid=kim,dc=example,dc=com",
        vec![
            ("objectClass", ["account", "ldapPublicKey"].into()),
            ("uid", ["kim"].into()),
            ("sshPublicKey", ["ssh-ed25519 AAAA kim"].into()),
        ],
    )
    .expect("add")
    .success()
    .expect("added");
    // `snapshot` finds the server and its administrator in the file (the password too).
    let url = srv.url();
    let out = linden(&["snapshot", "--config", &cfg, "--url", &url], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("snapshot snap-"),
        "{}",
        text(&out.stdout)
    );

    // Without the schema the data uses, a backup cannot be checked: it fails and leaves
    // nothing, so the same command can be run again.
    let dest = dir.path().join("backup");
    let data = dir.path().join("data").display().to_string();
    let out = linden(
        &["backup", "--data", &data, &dest.display().to_string()],
        &[],
    );
    assert!(!out.status.success());
    assert!(!dest.exists(), "a failed backup left {}", dest.display());
    // With the server's file alone: its data directory and its schema.
    let out = linden(
        &["backup", "--config", &cfg, &dest.display().to_string()],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("backup of"),
        "{}",
        text(&out.stdout)
    );
    assert!(srv.terminate().success());
}

#[test]
fn import_outside_the_suffix_names_the_suffixes_and_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ldif = write(
        &dir.path().join("acme.ldif"),
        "dn: dc=acme,dc=test\nobjectClass: domain\ndc: acme\n",
    );
    let data = dir.path().join("data").display().to_string();
    let out = linden(&["import", "--data", &data, &ldif], &[]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("dc=example,dc=com"), "{err}");
    assert!(err.contains("--suffix"), "{err}");
    let out = linden(
        &[
            "import",
            "--data",
            &data,
            "--suffix",
            "dc=acme,dc=test",
            &ldif,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn every_key_can_come_from_the_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data").display().to_string();
    let out = linden(
        &["check-config"],
        &[("LINDEN_DATA", &data), ("LINDEN_MAX_CONNECTIONS", "many")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "environment LINDEN_MAX_CONNECTIONS: expected an integer, found string 'many'"
        ),
        "{}",
        text(&out.stderr)
    );
    // A server configured by its environment only, as in a container.
    let mut child = Command::new(BIN)
        .arg("serve")
        .env("LINDEN_LISTEN", "127.0.0.1:0")
        .env("LINDEN_DATA", &data)
        .env("LINDEN_ADMIN_PASSWORD", "from-env")
        .env("LINDEN_SUFFIX", "o=env")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start");
    let stderr = child.stderr.take().expect("stderr");
    let line = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .find(|l| l.contains("listening on"))
        .expect("listening line");
    assert!(line.contains("suffixes: o=env"), "{line}");
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split([',', ' ']).next())
        .expect("address")
        .to_string();
    let mut c = LdapConn::new(&format!("ldap://{addr}")).expect("connect");
    c.simple_bind("cn=admin,dc=example,dc=com", "from-env")
        .expect("bind")
        .success()
        .expect("the password from LINDEN_ADMIN_PASSWORD");
    let _ = child.kill();
    let _ = child.wait();
}
