//! Access and audit logs written by a real server for operations from a real client.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;

use common::{wait_for, TestServer, ADMIN_DN};
use ldap3::{Mod, Scope};

#[test]
fn access_and_audit_logs_record_operations() {
    let dir = tempfile::tempdir().expect("tmp");
    let access = dir.path().join("access.log");
    let audit = dir.path().join("audit.log");
    let (a2, b2) = (access.clone(), audit.clone());
    let srv = TestServer::start_with(move |c| {
        c.demo = true;
        c.access_log = server::logs::LogTarget::File(a2);
        c.audit_log = server::logs::LogTarget::File(b2);
    });
    let mut admin = srv.admin();
    let ldap3::SearchResult(rs, _) = admin
        .search(
            "ou=people,dc=example,dc=com",
            Scope::OneLevel,
            "(|(uid=alice)(uid=bob))",
            vec!["cn"],
        )
        .expect("search");
    assert_eq!(rs.len(), 2);
    admin
        .add(
            "uid=zoe,ou=people,dc=example,dc=com",
            vec![
                ("objectClass", HashSet::from(["inetOrgPerson"])),
                ("cn", HashSet::from(["Zoe"])),
                ("sn", HashSet::from(["Z"])),
                ("userPassword", HashSet::from(["zoe-secret"])),
            ],
        )
        .expect("add")
        .success()
        .expect("added");
    admin
        .modify(
            "uid=zoe,ou=people,dc=example,dc=com",
            vec![Mod::Replace("mail", HashSet::from(["zoe@example.com"]))],
        )
        .expect("modify")
        .success()
        .expect("modified");
    let rc = admin
        .delete("uid=nobody,ou=people,dc=example,dc=com")
        .expect("delete")
        .rc;
    assert_eq!(rc, 32);
    admin
        .modifydn(
            "uid=zoe,ou=people,dc=example,dc=com",
            "uid=zoe2",
            true,
            None,
        )
        .expect("modrdn")
        .success()
        .expect("renamed");
    admin
        .delete("uid=zoe2,ou=people,dc=example,dc=com")
        .expect("delete")
        .success()
        .expect("deleted");
    let mut alice = srv.anon();
    assert_eq!(
        alice
            .simple_bind("uid=alice,ou=people,dc=example,dc=com", "wrong")
            .expect("bind")
            .rc,
        49
    );
    drop(admin);

    let log = wait_for(&access, |t| {
        t.contains(" DELETE dn=\"uid=zoe2") && t.contains("result=49")
    });
    let line = |needle: &str| -> String {
        log.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no access line with {needle:?} in:\n{log}"))
            .to_string()
    };
    let search = line(" SEARCH ");
    for part in [
        "bound=\"cn=admin,dc=example,dc=com\"",
        "base=\"ou=people,dc=example,dc=com\"",
        "scope=one",
        "filter=\"(|(uid=alice)(uid=bob))\"",
        "attrs=\"cn\"",
        "result=0",
        "entries=2",
        "etime_us=",
    ] {
        assert!(search.contains(part), "{part} missing: {search}");
    }
    assert!(search.starts_with("20"), "timestamp first: {search}");
    assert!(
        search.contains(" conn=")
            && search.contains(" op=")
            && search.contains(" client=127.0.0.1:")
    );
    assert!(line(" BIND dn=\"cn=admin,dc=example,dc=com\"").contains("result=0"));
    assert!(line(" BIND dn=\"uid=alice").contains("result=49"));
    assert!(line(" ADD dn=\"uid=zoe,").contains("result=0"));
    assert!(line(" MODIFY dn=\"uid=zoe,").contains("result=0"));
    assert!(line(" DELETE dn=\"uid=nobody").contains("result=32"));
    assert!(line(" MODRDN dn=\"uid=zoe,").contains("newrdn=\"uid=zoe2\""));
    assert!(log.contains(" CONNECT tls=no"));
    assert!(
        !log.contains("zoe-secret"),
        "passwords never reach the access log"
    );

    let text = wait_for(&audit, |t| t.contains("changetype: delete"));
    assert!(
        !text.contains("zoe-secret"),
        "passwords never reach the audit log"
    );
    // The audit log is LDIF: every change reads back as a change record.
    let records: Vec<ldif::Record> = ldif::Reader::new(text.as_bytes())
        .collect::<Result<_, _>>()
        .expect("audit log is valid LDIF");
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| match r {
            ldif::Record::Change { change, .. } => match change {
                ldif::ChangeRecord::Add(_) => "add",
                ldif::ChangeRecord::Delete => "delete",
                ldif::ChangeRecord::Modify(_) => "modify",
                ldif::ChangeRecord::ModRdn { .. } => "modrdn",
            },
            ldif::Record::Content { .. } => "content",
        })
        .collect();
    assert_eq!(
        kinds,
        ["add", "modify", "modrdn", "delete"],
        "failed changes are not audited:\n{text}"
    );
    assert!(text.contains("userPassword: {REDACTED}"), "{text}");
    // Records say what was applied: the add carries the server's stamps, the modify the
    // stamps it changed besides the client's change.
    assert!(text.contains("createTimestamp: "), "{text}");
    assert!(text.contains("entryUUID: "), "{text}");
    assert!(text.contains("replace: entryCSN"), "{text}");
    let comments: Vec<&str> = text.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(comments.len(), 4);
    assert!(comments
        .iter()
        .all(|c| c.contains(&format!("by=\"{ADMIN_DN}\"")) && c.contains("client=127.0.0.1:")));
}
