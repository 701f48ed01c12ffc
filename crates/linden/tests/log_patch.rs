//! Issue 33, memberOf: a modify adding one member to a group of 100,000 members appends to
//! the transaction log a record of the change (the member, the group's stamps and the new
//! member's memberOf), not the group. A real `linden serve` with the memberof overlay, a real
//! client; then SIGKILL, a restart, and the group exactly as it was acknowledged.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use common::linden;
use common::serve::spawn_listening;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use ldap3::{LdapConn, LdapConnSettings, Mod, Scope, SearchEntry};

const ADMIN: &str = "cn=admin,dc=example,dc=com";
const PEOPLE: &str = "ou=people,dc=example,dc=com";
const GROUP: &str = "cn=big,dc=example,dc=com";
const MEMBERS: u32 = 100_000;

/// A running `linden serve`, killed (SIGKILL) when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(data: &Path) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_linden"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(["--admin-password", "secret", "--memberof"]);
        let (child, addr, _) = spawn_listening(&mut cmd, "linden serve");
        Server { child, addr }
    }

    fn admin(&self) -> LdapConn {
        let settings = LdapConnSettings::new().set_conn_timeout(Duration::from_secs(30));
        let mut c =
            LdapConn::with_settings(settings, &format!("ldap://{}", self.addr)).expect("connect");
        c.simple_bind(ADMIN, "secret")
            .expect("bind")
            .success()
            .expect("admin bind");
        c
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn member(n: u32) -> String {
    format!("uid=user.{n},{PEOPLE}")
}

/// Bytes of the data directory's transaction log files.
fn log_bytes(data: &Path) -> u64 {
    std::fs::read_dir(data)
        .expect("data dir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".lnl"))
        .map(|e| e.metadata().expect("metadata").len())
        .sum()
}

fn group_members(c: &mut LdapConn) -> Vec<String> {
    let (rs, _) = c
        .search(GROUP, Scope::Base, "(objectClass=*)", vec!["member"])
        .expect("search")
        .success()
        .expect("group found");
    let e = SearchEntry::construct(rs.into_iter().next().expect("one entry"));
    e.attrs.get("member").cloned().unwrap_or_default()
}

#[test]
fn one_member_more_in_a_100k_group_logs_the_change_not_the_group() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");
    let server = Server::start(&data);
    let mut c = server.admin();
    let set = |v: &'static str| HashSet::from([v]);
    c.add(
        PEOPLE,
        vec![
            ("objectClass", set("organizationalUnit")),
            ("ou", set("people")),
        ],
    )
    .expect("add")
    .success()
    .expect("ou=people");
    let newcomer = member(MEMBERS);
    c.add(
        newcomer.as_str(),
        vec![
            ("objectClass", set("inetOrgPerson")),
            ("uid", HashSet::from(["user.100000"])),
            ("cn", set("New")),
            ("sn", set("Comer")),
        ],
    )
    .expect("add")
    .success()
    .expect("the newcomer");
    let members: Vec<String> = (0..MEMBERS).map(member).collect();
    let members: HashSet<&str> = members.iter().map(String::as_str).collect();
    c.add(
        GROUP,
        vec![
            ("objectClass", set("groupOfNames")),
            ("cn", set("big")),
            ("member", members),
        ],
    )
    .expect("add")
    .success()
    .expect("the group");
    let group_log = log_bytes(&data);
    assert!(
        group_log > 4_000_000,
        "the group's record: {group_log} bytes"
    );
    let before_members = group_members(&mut c);

    // The answer comes after the batch is durable: the log has grown by then.
    let before = log_bytes(&data);
    c.modify(
        GROUP,
        vec![Mod::Add("member", HashSet::from([newcomer.as_str()]))],
    )
    .expect("modify")
    .success()
    .expect("member added");
    let grew = log_bytes(&data) - before;
    eprintln!("adding one member to a group of {MEMBERS}: the log grew by {grew} bytes");
    // The group's patch (the member, entryCSN, modifyTimestamp, modifiersName) and the
    // newcomer's (memberOf and its stamps), with the batch's framing.
    let value = newcomer.len() as u64;
    assert!(
        grew < 600 + 2 * value,
        "one member added grew the log by {grew} bytes"
    );
    let (rs, _) = c
        .search(&newcomer, Scope::Base, "(objectClass=*)", vec!["memberOf"])
        .expect("search")
        .success()
        .expect("newcomer");
    let e = SearchEntry::construct(rs.into_iter().next().expect("entry"));
    assert_eq!(
        e.attrs.get("memberOf"),
        Some(&vec![GROUP.to_string()]),
        "memberof ran"
    );

    let before = log_bytes(&data);
    c.modify(
        GROUP,
        vec![Mod::Delete(
            "member",
            HashSet::from([member(4242).as_str()]),
        )],
    )
    .expect("modify")
    .success()
    .expect("member removed");
    let grew = log_bytes(&data) - before;
    assert!(
        grew < 600 + value,
        "one member removed grew the log by {grew} bytes"
    );

    let mut want = before_members;
    want.retain(|m| *m != member(4242));
    want.push(newcomer.clone());
    assert_eq!(group_members(&mut c), want);
    let _ = c.unbind();

    // SIGKILL: recovery replays the patches onto the group as the log left it.
    drop(server);
    let (rc, out, err) = linden(&["verify", "--data", data.to_str().expect("utf-8 path")]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(
        out.contains(" patch"),
        "verify shows the patch records:\n{out}"
    );
    let server = Server::start(&data);
    let mut c = server.admin();
    assert_eq!(
        group_members(&mut c),
        want,
        "the group after SIGKILL and a restart"
    );
    let _ = c.unbind();
}
