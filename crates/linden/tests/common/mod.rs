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

/// The contextCSN values of the naming context `suffix`, read over `c` (which is unbound).
pub fn context_csn(mut c: ldap3::LdapConn, suffix: &str) -> Vec<String> {
    let (found, _) = c
        .search(
            suffix,
            ldap3::Scope::Base,
            "(objectClass=*)",
            vec!["contextCSN"],
        )
        .expect("search")
        .success()
        .expect("search result");
    let _ = c.unbind();
    found
        .into_iter()
        .next()
        .map(ldap3::SearchEntry::construct)
        .and_then(|e| e.attrs.get("contextCSN").cloned())
        .unwrap_or_default()
}

/// The value of server id `sid` (three hex digits) among contextCSN values.
pub fn csn_of_sid(csns: &[String], sid: &str) -> Option<String> {
    csns.iter()
        .find(|c| c.split('#').nth(2) == Some(sid))
        .cloned()
}

pub mod notify;
pub mod s3proxy;
pub mod serve;
