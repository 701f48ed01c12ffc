//! Puts the git commit the binary is built from in `LINDEN_GIT_COMMIT` (for `linden --version`
//! and the first line `linden serve` logs): `git rev-parse --short HEAD` when the source is a
//! git checkout, the `LINDEN_GIT_COMMIT` environment variable when set (a build from a source
//! tarball can name its commit), "unknown" otherwise; and the commit's date in
//! `LINDEN_GIT_DATE` (the date of the manual pages).
//!
//! Reruns only when the commit can have changed: when HEAD, the branch it points to, the packed
//! refs or HEAD's reflog change (all inside the git directory, so editing sources does not rerun
//! it), or when `LINDEN_GIT_COMMIT` or `LINDEN_GIT_DATE` changes.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=LINDEN_GIT_COMMIT");
    println!("cargo::rerun-if-env-changed=LINDEN_GIT_DATE");
    let given = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let commit = given("LINDEN_GIT_COMMIT")
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo::rustc-env=LINDEN_GIT_COMMIT={}", commit.trim());
    // The commit's date (YYYY-MM-DD) dates the manual pages; empty when unknown.
    let date = given("LINDEN_GIT_DATE")
        .or_else(|| git(&["log", "-1", "--format=%cs", "HEAD"]))
        .unwrap_or_default();
    println!("cargo::rustc-env=LINDEN_GIT_DATE={}", date.trim());
}

/// The short hash of HEAD, and the files whose change means HEAD moved (printed as
/// rerun-if-changed); `None` outside a git checkout or without git.
fn git_commit() -> Option<String> {
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    // HEAD itself (checkout of another branch or commit), HEAD's reflog (every commit, reset
    // and checkout in this worktree), the branch's own ref and the packed refs. Only files that
    // exist: Cargo reruns a script every time for a missing one.
    let mut watched = vec![
        "HEAD".to_string(),
        "logs/HEAD".to_string(),
        "packed-refs".to_string(),
    ];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]) {
            if PathBuf::from(&path).is_file() {
                println!("cargo::rerun-if-changed={path}");
            }
        }
    }
    Some(commit)
}

/// Runs git in this crate's directory; its trimmed stdout if it succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}
