//! One door for every change (issue 26): what the password policy records on a bind and a
//! Password Modify go through the write path's door like a modify — stamped, through the
//! overlay chain (contextCSN, ppolicy state), audited from what they applied, on the change
//! feed — and slow password hashes of changes run on the hashing threads binds use.
//!
//! A consumer is a sync search (RFC 4533, refreshOnly) over a real socket: with the cookie of
//! its last refresh it must get every entry changed since, which it does not if contextCSN
//! stays behind an entryCSN the server stamped (the provider then answers "up to date").
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;

use common::raw::{control, RawClient};
use common::{search, wait_for, TestServer, ADMIN_DN, ADMIN_PW, BASE};
use ldap3::exop::PasswordModify;
use ldap3::{LdapConn, Mod, Scope};
use proto::controls::sync::{Mode, SyncDone, SyncRequest};
use proto::{ProtocolOp, ResultCode};

const POLICY: &str = "cn=lockout,dc=example,dc=com";

fn config(c: &mut server::Config) {
    c.server_id = 1;
    c.syncprov = true;
    c.set_ppolicy_spec(dit::ppolicy::PpolicySpec {
        enabled: true,
        default_policy: Some(POLICY.to_string()),
        use_lockout: true,
    });
    // A fast scheme: hashing is not what is looked at here.
    c.set_password_policy(pwhash::Policy {
        scheme: pwhash::Scheme::Ssha,
        cost: pwhash::Cost::default(),
    });
}

fn set<'a>(v: &[&'a str]) -> HashSet<&'a str> {
    v.iter().copied().collect()
}

fn ok(r: ldap3::result::Result<ldap3::LdapResult>, what: &str) {
    let r = r.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(r.rc, 0, "{what}: {r:?}");
}

/// The default policy (three failures lock, five remembered, three old passwords kept) and
/// the users `uids`, each with the password `Initial-pw-1`.
fn populate(admin: &mut LdapConn, uids: &[&str]) {
    let attrs = vec![
        ("objectClass", set(&["organizationalRole", "pwdPolicy"])),
        ("cn", set(&["lockout"])),
        ("pwdAttribute", set(&["userPassword"])),
        ("pwdLockout", set(&["TRUE"])),
        ("pwdMaxFailure", set(&["3"])),
        ("pwdMaxRecordedFailure", set(&["5"])),
        ("pwdInHistory", set(&["3"])),
    ];
    ok(admin.add(POLICY, attrs), "policy");
    for uid in uids {
        let attrs = vec![
            ("objectClass", set(&["inetOrgPerson"])),
            ("uid", set(&[uid])),
            ("cn", set(&[uid])),
            ("sn", set(&["User"])),
            ("userPassword", set(&["Initial-pw-1"])),
        ];
        ok(admin.add(&dn(uid), attrs), "user");
    }
}

fn dn(uid: &str) -> String {
    format!("uid={uid},{BASE}")
}

/// The values of `attr` on `dn`, sorted.
fn values(admin: &mut LdapConn, dn: &str, attr: &str) -> Vec<String> {
    let (rc, _, found) = search(admin, dn, Scope::Base, "(objectClass=*)", &[attr, "+"]);
    assert_eq!(rc, 0, "read {dn}");
    let mut v = found
        .into_iter()
        .next()
        .and_then(|e| e.attrs.get(attr).cloned())
        .unwrap_or_default();
    v.sort();
    v
}

fn entry_csn(admin: &mut LdapConn, dn: &str) -> String {
    values(admin, dn, "entryCSN").pop().expect("an entryCSN")
}

/// This server's (server id 1) contextCSN value.
fn context_csn(admin: &mut LdapConn) -> String {
    values(admin, BASE, "contextCSN")
        .into_iter()
        .find(|c| c.split('#').nth(2) == Some("001"))
        .expect("contextCSN of server id 001")
}

/// A refreshOnly sync search of the whole suffix with `cookie`: the DNs sent and the new
/// cookie.
fn refresh(srv: &TestServer, cookie: Option<&[u8]>) -> (Vec<String>, Vec<u8>) {
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    let mut value = Vec::new();
    SyncRequest {
        mode: Mode::RefreshOnly,
        cookie: cookie.map(Into::into),
        reload_hint: false,
    }
    .encode(&mut value);
    c.send(
        2,
        ProtocolOp::SearchRequest(proto::SearchRequest {
            base: BASE.as_bytes().into(),
            scope: proto::Scope::Subtree,
            deref: proto::DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: proto::Filter::parse("(objectClass=*)").expect("filter"),
            attributes: vec![b"*".as_slice().into(), b"+".as_slice().into()],
        }),
        vec![control(
            proto::oids::SYNC_REQUEST,
            true,
            Some(value.clone()),
        )],
    );
    let mut dns = Vec::new();
    loop {
        let r = c.recv();
        assert_eq!(r.id, 2, "{r:?}");
        match r.tag {
            proto::tags::SEARCH_RESULT_ENTRY => dns.push(r.dn.to_ascii_lowercase()),
            proto::tags::SEARCH_RESULT_DONE => {
                assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
                let done = r
                    .control(proto::oids::SYNC_DONE)
                    .and_then(|v| v.clone())
                    .expect("a Sync Done control");
                let done = SyncDone::decode(&done).expect("Sync Done decodes");
                let cookie = done.cookie.expect("a cookie").into_owned();
                return (dns, cookie);
            }
            // Sync Info messages (deletes) carry nothing looked at here.
            _ => {}
        }
    }
}

/// A failed bind under the password policy is recorded on the account through the write
/// path's door: contextCSN moves with the entryCSN it stamped, and a consumer with an
/// up-to-date cookie receives the change; the same for the lock the third failure sets.
#[test]
fn a_failed_bind_moves_context_csn_and_reaches_a_consumer() {
    let srv = TestServer::start_with(config);
    let mut admin = srv.admin();
    populate(&mut admin, &["ann"]);
    let ann = dn("ann");
    let (_, mut cookie) = refresh(&srv, None);
    for failure in 1..=3 {
        assert_eq!(srv.bind_rc(&ann, "wrong"), 49);
        assert_eq!(
            values(&mut admin, &ann, "pwdFailureTime").len(),
            failure,
            "failure {failure} recorded"
        );
        let (entry, context) = (entry_csn(&mut admin, &ann), context_csn(&mut admin));
        assert!(
            context >= entry,
            "failure {failure}: contextCSN {context} trails the entryCSN {entry} the bind stamped"
        );
        let (sent, next) = refresh(&srv, Some(&cookie));
        assert_eq!(
            sent,
            [ann.to_ascii_lowercase()],
            "failure {failure}: a consumer with the last cookie gets the account"
        );
        cookie = next;
    }
    assert_eq!(values(&mut admin, &ann, "pwdAccountLockedTime").len(), 1);
    assert_eq!(srv.bind_rc(&ann, "Initial-pw-1"), 49, "locked");
}

/// The attributes a modify record of the audit log changes, by name and operation, for the
/// last record about `dn` in `text`.
fn audited(text: &str, dn: &str) -> Vec<(String, String)> {
    let records: Vec<ldif::Record> = ldif::Reader::new(text.as_bytes())
        .collect::<Result<_, _>>()
        .expect("audit log is valid LDIF");
    let mods = records
        .iter()
        .rev()
        .find_map(|r| match r {
            ldif::Record::Change {
                dn: d,
                change: ldif::ChangeRecord::Modify(mods),
                ..
            } if d.eq_ignore_ascii_case(dn) => Some(mods.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no modify record of {dn} in:\n{text}"));
    let mut out: Vec<(String, String)> = mods
        .iter()
        .map(|m| (format!("{:?}", m.op), m.attr.to_ascii_lowercase()))
        .collect();
    out.sort();
    out
}

/// Password Modify is a modify of userPassword through the same door: the ppolicy overlay
/// keeps the history and the change time (it would not if the change skipped the chain),
/// contextCSN follows it, a consumer gets it, and the audit log records what it applied —
/// exactly as for a modify replacing userPassword.
#[test]
fn password_modify_is_a_modify_of_user_password_through_the_door() {
    let dir = tempfile::tempdir().expect("tmp");
    let audit = dir.path().join("audit.log");
    let a2 = audit.clone();
    let srv = TestServer::start_with(move |c| {
        config(c);
        c.audit_log = server::logs::LogTarget::File(a2);
    });
    let mut admin = srv.admin();
    populate(&mut admin, &["mod", "exop"]);
    let (_, cookie) = refresh(&srv, None);
    let before = context_csn(&mut admin);
    // The same change made both ways, by each user on their own entry.
    let mut m = srv.bind_as(&dn("mod"), "Initial-pw-1");
    ok(
        m.modify(
            &dn("mod"),
            vec![
                Mod::Delete("userPassword", set(&["Initial-pw-1"])),
                Mod::Add("userPassword", set(&["Second-pw-2"])),
            ],
        ),
        "modify",
    );
    let mut x = srv.bind_as(&dn("exop"), "Initial-pw-1");
    let res = x
        .extended(PasswordModify {
            user_id: None,
            old_pass: Some("Initial-pw-1"),
            new_pass: Some("Second-pw-2"),
        })
        .expect("exop")
        .1;
    assert_eq!(res.rc, 0, "{res:?}");
    assert_eq!(srv.bind_rc(&dn("exop"), "Second-pw-2"), 0);
    for uid in ["mod", "exop"] {
        let who = dn(uid);
        // The ppolicy overlay ran.
        assert_eq!(values(&mut admin, &who, "pwdHistory").len(), 1, "{uid}");
        assert_eq!(values(&mut admin, &who, "pwdChangedTime").len(), 1, "{uid}");
        assert_eq!(
            values(&mut admin, &who, "modifiersName"),
            std::slice::from_ref(&who),
            "{uid}: stamped as made by the user"
        );
        let (entry, context) = (entry_csn(&mut admin, &who), context_csn(&mut admin));
        assert!(
            entry > before && context >= entry,
            "{uid}: {entry} {context}"
        );
    }
    let (sent, _) = refresh(&srv, Some(&cookie));
    let sent: HashSet<String> = sent.into_iter().collect();
    assert!(
        sent.contains(&dn("exop")) && sent.contains(&dn("mod")),
        "both changes reach a consumer: {sent:?}"
    );
    // Audited the same way: the same attributes, the same operations, no password.
    let text = wait_for(&audit, |t| {
        t.lines()
            .filter(|l| l.eq_ignore_ascii_case(&format!("dn: {}", dn("exop"))))
            .count()
            >= 2
    });
    let by_modify = audited(&text, &dn("mod"));
    let by_exop = audited(&text, &dn("exop"));
    assert_eq!(by_exop, by_modify, "audit records:\n{text}");
    assert!(
        by_exop.iter().any(|(_, a)| a == "entrycsn"),
        "the stamps are audited: {by_exop:?}"
    );
    assert!(
        !text.contains("Second-pw-2"),
        "no password in the audit log"
    );
}

/// Slow password work of every change runs on the hashing threads, where binds' run: an add
/// and a modify with a clear-text password, and a Password Modify (the new password hashed,
/// the old one verified, the policy's checks).
#[test]
fn password_hashes_of_changes_run_on_the_hashing_threads() {
    let srv = TestServer::start_with(config);
    let mut admin = srv.admin();
    populate(&mut admin, &[]);
    let jobs = || srv.server.credential_stats().change_hashing_jobs;
    let start = jobs();
    let attrs = vec![
        ("objectClass", set(&["inetOrgPerson"])),
        ("uid", set(&["hash"])),
        ("cn", set(&["hash"])),
        ("sn", set(&["User"])),
        ("userPassword", set(&["Initial-pw-1"])),
    ];
    ok(admin.add(&dn("hash"), attrs), "add");
    assert_eq!(jobs(), start + 1, "the add's hash");
    ok(
        admin.modify(
            &dn("hash"),
            vec![Mod::Replace("userPassword", set(&["Second-pw-2"]))],
        ),
        "modify",
    );
    assert_eq!(jobs(), start + 2, "the modify's hash");
    let mut u = srv.bind_as(&dn("hash"), "Second-pw-2");
    let res = u
        .extended(PasswordModify {
            user_id: None,
            old_pass: Some("Second-pw-2"),
            new_pass: Some("Third-pw-3"),
        })
        .expect("exop")
        .1;
    assert_eq!(res.rc, 0, "{res:?}");
    assert_eq!(
        jobs(),
        start + 5,
        "Password Modify: the policy's checks, the new hash, the old password's check"
    );
}
