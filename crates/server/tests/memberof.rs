//! Group membership (memberOf) and referential integrity over real connections, with the demo
//! data's groups (loaded through the same write path, so the start-up entries get memberOf).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use common::{search, TestServer};
use ldap3::Scope;

const ENGINEERING: &str = "cn=engineering,ou=groups,dc=example,dc=com";

fn memberof_server(audit: &std::path::Path) -> TestServer {
    let audit = audit.to_path_buf();
    TestServer::start_with(|c| {
        c.demo = true;
        c.audit_log = server::logs::LogTarget::File(audit);
        c.memberof = true;
        c.refint = vec!["member".into(), "uniqueMember".into(), "owner".into()];
    })
}

fn uids_with(c: &mut ldap3::LdapConn, filter: &str) -> Vec<String> {
    let (rc, _, entries) = search(c, "dc=example,dc=com", Scope::Subtree, filter, &["uid"]);
    assert_eq!(rc, 0, "{filter}");
    let mut uids: Vec<String> = entries
        .iter()
        .filter_map(|e| e.attrs.get("uid").map(|v| v[0].clone()))
        .collect();
    uids.sort();
    uids
}

#[test]
fn memberof_follows_group_changes_and_renames_and_deletes_follow_into_groups() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let srv = memberof_server(&audit);
    let mut admin = srv.admin();
    let filter = format!("(memberOf={ENGINEERING})");
    assert_eq!(
        uids_with(&mut admin, &filter),
        ["alice", "bob", "carol", "dave", "ivan", "judy"]
    );
    // Over ldapmodify: add a member, remove one.
    let (rc, _, err) = common::tool(
        "ldapmodify",
        &["-x", "-H", &srv.url, "-D", common::ADMIN_DN, "-w", common::ADMIN_PW],
        Some(&format!(
            "dn: {ENGINEERING}\nchangetype: modify\nadd: member\nmember: uid=erin,ou=people,dc=example,dc=com\n-\ndelete: member\nmember: uid=judy,ou=people,dc=example,dc=com\n"
        )),
    );
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        uids_with(&mut admin, &filter),
        ["alice", "bob", "carol", "dave", "erin", "ivan"]
    );
    // The audit record of the group says which members came and went, not all of them again.
    let text = common::wait_for(&audit, |t| t.contains("member: uid=erin"));
    let record = text
        .split("\n\n")
        .find(|r| r.contains(&format!("dn: {ENGINEERING}\nchangetype: modify")))
        .unwrap_or_else(|| panic!("no record of the group's change in:\n{text}"));
    for line in [
        "delete: member\nmember: uid=judy,ou=people,dc=example,dc=com\n-",
        "add: member\nmember: uid=erin,ou=people,dc=example,dc=com\n-",
    ] {
        assert!(record.contains(line), "{line:?} missing from:\n{record}");
    }
    assert!(!record.contains("uid=alice"), "{record}");
    // memberOf is operational: only asked for, and not the client's to change.
    let (_, _, e) = search(
        &mut admin,
        "uid=erin,ou=people,dc=example,dc=com",
        Scope::Base,
        "(objectClass=*)",
        &["memberOf"],
    );
    let of = &e[0].attrs["memberOf"];
    assert!(of.iter().any(|g| g == ENGINEERING), "{of:?}");
    let r = admin
        .modify(
            "uid=erin,ou=people,dc=example,dc=com",
            vec![ldap3::Mod::Add("memberOf", ["cn=x"].into())],
        )
        .unwrap();
    assert_eq!(r.rc, 19, "constraintViolation: {}", r.text);
    // Rename a member: the group names the new DN.
    let r = admin
        .modifydn(
            "uid=bob,ou=people,dc=example,dc=com",
            "uid=robert",
            true,
            None,
        )
        .unwrap();
    assert_eq!(r.rc, 0, "{}", r.text);
    let (_, _, g) = search(
        &mut admin,
        ENGINEERING,
        Scope::Base,
        "(objectClass=*)",
        &["member"],
    );
    let members = &g[0].attrs["member"];
    assert!(
        members
            .iter()
            .any(|m| m == "uid=robert,ou=people,dc=example,dc=com"),
        "{members:?}"
    );
    assert!(
        !members.iter().any(|m| m.starts_with("uid=bob")),
        "{members:?}"
    );
    // Delete a member: it leaves the group.
    assert_eq!(
        admin
            .delete("uid=ivan,ou=people,dc=example,dc=com")
            .unwrap()
            .rc,
        0
    );
    assert_eq!(
        uids_with(&mut admin, &filter),
        ["alice", "carol", "dave", "erin", "robert"]
    );
    // Delete the group: nobody is a member any more.
    assert_eq!(admin.delete(ENGINEERING).unwrap().rc, 0);
    assert!(uids_with(&mut admin, &filter).is_empty());
}
