//! `linden --version` and the first line `linden serve` logs name the version and the git
//! commit the binary was built from (crates/linden/build.rs).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::process::Command;

/// What the binary should say: the package version and `git rev-parse --short HEAD` of this
/// checkout ("unknown" where git or the repository is missing).
fn expected() -> String {
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    format!("{} ({commit})", env!("CARGO_PKG_VERSION"))
}

#[test]
fn version_names_the_git_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_linden"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("linden {}", expected())
    );
}

#[test]
fn the_first_line_serve_logs_is_the_version() {
    // A port already in use stops the start after the first line (the configuration itself
    // is valid: a settings error is reported alone, before this line).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args([
            "serve",
            "--listen",
            &addr,
            "--admin-password",
            "x",
            "--data",
        ])
        .arg(tmp.path().join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.ends_with(&format!("Linden {} starting", expected())),
        "{stderr}"
    );
    drop(taken);
}
