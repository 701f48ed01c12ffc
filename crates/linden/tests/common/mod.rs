//! Helpers shared by the `linden` binary's tests.
#![allow(dead_code)]

use std::process::Command;

/// Runs the `linden` binary to completion: (exit status, stdout, stderr).
pub fn linden(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args(args)
        .output()
        .expect("run linden");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub mod notify;
pub mod serve;
