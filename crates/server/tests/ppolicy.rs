#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]
//! The password policy (`ppolicy = true`) over real sockets: lockout and its response control,
//! the checks of a password change (quality, history, minimum age, safe modify), must-change
//! after an administrator's reset, and the account state surviving a restart.

mod common;

use std::collections::HashSet;

use common::raw::{base_search, control, RawClient, Response};
use common::{search, TestServer, BASE};
use ldap3::{LdapConn, Mod, Scope};
use proto::{BindAuth, BindRequest, ProtocolOp, ResultCode};

const PP: &str = "1.3.6.1.4.1.42.2.27.8.5.1";
const DEFAULT_POLICY: &str = "cn=default,dc=example,dc=com";

fn config(c: &mut server::Config) {
    c.set_ppolicy_spec(dit::ppolicy::PpolicySpec {
        enabled: true,
        default_policy: Some(DEFAULT_POLICY.to_string()),
        use_lockout: true,
    });
    // A fast scheme: the tests verify many passwords.
    c.set_password_policy(pwhash::Policy {
        scheme: pwhash::Scheme::Ssha,
        cost: pwhash::Cost::default(),
    });
}

fn set<'a>(v: &[&'a str]) -> HashSet<&'a str> {
    v.iter().copied().collect()
}

fn add_policy(admin: &mut LdapConn, cn: &str, settings: &[(&str, &str)]) -> String {
    let dn = format!("cn={cn},{BASE}");
    let mut attrs = vec![
        ("objectClass", set(&["organizationalRole", "pwdPolicy"])),
        ("cn", set(&[cn])),
        ("pwdAttribute", set(&["userPassword"])),
    ];
    for (k, v) in settings {
        attrs.push((k, set(&[v])));
    }
    assert_eq!(admin.add(&dn, attrs).expect("add").rc, 0, "policy {dn}");
    dn
}

fn add_user(admin: &mut LdapConn, uid: &str, policy: Option<&str>) -> String {
    let dn = format!("uid={uid},{BASE}");
    let mut attrs = vec![
        ("objectClass", set(&["inetOrgPerson"])),
        ("uid", set(&[uid])),
        ("cn", set(&[uid])),
        ("sn", set(&["User"])),
        ("userPassword", set(&["Initial-pw-1"])),
    ];
    if let Some(p) = policy {
        attrs.push(("pwdPolicySubentry", set(&[p])));
    }
    assert_eq!(admin.add(&dn, attrs).expect("add").rc, 0, "user {dn}");
    dn
}

/// A bind with the password policy request control on `c`.
fn bind_pp(c: &mut RawClient, id: i32, dn: &str, pw: &str) -> Response {
    c.send(
        id,
        ProtocolOp::BindRequest(BindRequest {
            version: 3,
            name: dn.as_bytes().into(),
            auth: BindAuth::Simple(pw.as_bytes().into()),
        }),
        vec![control(PP, false, None)],
    );
    c.recv()
}

fn modify_pp(c: &mut RawClient, id: i32, dn: &str, changes: Vec<proto::Change<'_>>) -> Response {
    c.send(
        id,
        ProtocolOp::ModifyRequest(proto::ModifyRequest {
            dn: dn.as_bytes().into(),
            changes,
        }),
        vec![control(PP, false, None)],
    );
    c.recv()
}

fn replace_pw(pw: &str) -> Vec<proto::Change<'_>> {
    vec![proto::Change {
        op: proto::ModOp::Replace,
        attr: proto::PartialAttribute {
            name: b"userPassword".as_slice().into(),
            values: vec![pw.as_bytes().into()],
        },
    }]
}

/// The response control's value.
fn pp_value(r: &Response) -> Vec<u8> {
    r.control(PP)
        .cloned()
        .flatten()
        .unwrap_or_else(|| panic!("no password policy control in {r:?}"))
}

fn values(c: &mut LdapConn, dn: &str, attr: &str) -> Vec<String> {
    let (rc, _, es) = search(c, dn, Scope::Base, "(objectClass=*)", &[attr]);
    assert_eq!(rc, 0);
    es[0]
        .attrs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(attr))
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

#[test]
fn lockout_records_failures_and_survives_a_restart() {
    let data = tempfile::tempdir().expect("data directory");
    let dir = data.path().to_path_buf();
    let dn;
    {
        let srv = TestServer::start_with(|c| {
            config(c);
            c.data_dir = dir.clone();
        });
        let mut admin = srv.admin();
        let pol = add_policy(
            &mut admin,
            "lock",
            &[("pwdMaxFailure", "2"), ("pwdLockout", "TRUE")],
        );
        dn = add_user(&mut admin, "locked", Some(&pol));
        let mut c = RawClient::connect(srv.addr);
        let r = bind_pp(&mut c, 1, &dn, "wrong");
        assert_eq!(r.code, Some(ResultCode::InvalidCredentials));
        // A control without warning or error.
        assert_eq!(pp_value(&r), [0x30, 0x00]);
        assert_eq!(values(&mut admin, &dn, "pwdFailureTime").len(), 1);
        let r = bind_pp(&mut c, 2, &dn, "wrong again");
        assert_eq!(r.code, Some(ResultCode::InvalidCredentials));
        assert_eq!(values(&mut admin, &dn, "pwdFailureTime").len(), 2);
        assert_eq!(values(&mut admin, &dn, "pwdAccountLockedTime").len(), 1);
        // Locked: the right password fails too, with accountLocked.
        let r = bind_pp(&mut c, 3, &dn, "Initial-pw-1");
        assert_eq!(r.code, Some(ResultCode::InvalidCredentials));
        assert_eq!(pp_value(&r), [0x30, 0x03, 0x81, 0x01, 0x01]);
        // The per-address throttle never locks: another account still binds.
        srv.bind_as(common::ADMIN_DN, common::ADMIN_PW);
    }
    let srv = TestServer::start_with(|c| {
        config(c);
        c.data_dir = dir.clone();
    });
    assert_eq!(srv.bind_rc(&dn, "Initial-pw-1"), 49, "still locked");
    let mut admin = srv.admin();
    assert_eq!(values(&mut admin, &dn, "pwdFailureTime").len(), 2);
    // Unlocking forgets the failures; then the account binds and records nothing.
    let r = admin
        .modify(
            &dn,
            vec![Mod::Delete("pwdAccountLockedTime", HashSet::new())],
        )
        .expect("modify");
    assert_eq!(r.rc, 0);
    assert!(values(&mut admin, &dn, "pwdFailureTime").is_empty());
    let batches = srv.server.committed_batches();
    assert_eq!(srv.bind_rc(&dn, "Initial-pw-1"), 0);
    assert_eq!(
        srv.server.committed_batches(),
        batches,
        "a plain successful bind writes nothing"
    );
}

#[test]
fn password_changes_are_checked_and_leave_their_state() {
    let srv = TestServer::start_with(config);
    let mut admin = srv.admin();
    let pol = add_policy(
        &mut admin,
        "strict",
        &[
            ("pwdCheckQuality", "1"),
            ("pwdMinLength", "8"),
            ("pwdInHistory", "3"),
        ],
    );
    let dn = add_user(&mut admin, "changer", Some(&pol));
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, &dn, "Initial-pw-1");
    let r = modify_pp(&mut c, 2, &dn, replace_pw("short"));
    assert_eq!(r.code, Some(ResultCode::ConstraintViolation));
    assert_eq!(pp_value(&r), [0x30, 0x03, 0x81, 0x01, 0x06]);
    let r = modify_pp(&mut c, 3, &dn, replace_pw("Second-pw-2"));
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    assert!(r.control(PP).is_none(), "no control on success");
    let changed = values(&mut admin, &dn, "pwdChangedTime");
    assert_eq!(changed.len(), 1);
    let history = values(&mut admin, &dn, "pwdHistory");
    assert_eq!(history.len(), 1);
    assert!(
        history[0].contains("#1.3.6.1.4.1.1466.115.121.1.40#") && history[0].contains("#{SSHA}"),
        "{history:?}"
    );
    // The old password is in the history, the current one is the current one.
    for pw in ["Initial-pw-1", "Second-pw-2"] {
        let r = modify_pp(&mut c, 4, &dn, replace_pw(pw));
        assert_eq!(r.code, Some(ResultCode::ConstraintViolation), "{pw}");
        assert_eq!(pp_value(&r), [0x30, 0x03, 0x81, 0x01, 0x08]);
    }
    // Password Modify goes through the same checks.
    let mut user = srv.bind_as(&dn, "Second-pw-2");
    let res = user
        .extended(ldap3::exop::PasswordModify {
            user_id: None,
            old_pass: None,
            new_pass: Some("Initial-pw-1"),
        })
        .expect("exop")
        .1;
    assert_eq!(res.rc, 19);
    assert_eq!(srv.bind_rc(&dn, "Second-pw-2"), 0);
}

#[test]
fn min_age_and_safe_modify() {
    let srv = TestServer::start_with(config);
    let mut admin = srv.admin();
    let young = add_policy(&mut admin, "young", &[("pwdMinAge", "3600")]);
    let safe = add_policy(&mut admin, "safe", &[("pwdSafeModify", "TRUE")]);
    let a = add_user(&mut admin, "young", Some(&young));
    let b = add_user(&mut admin, "safe", Some(&safe));
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, &a, "Initial-pw-1");
    let r = modify_pp(&mut c, 2, &a, replace_pw("Second-pw-2"));
    assert_eq!(r.code, Some(ResultCode::ConstraintViolation));
    assert_eq!(pp_value(&r), [0x30, 0x03, 0x81, 0x01, 0x07]);
    c.bind(3, &b, "Initial-pw-1");
    let r = modify_pp(&mut c, 4, &b, replace_pw("Second-pw-2"));
    assert_eq!(r.code, Some(ResultCode::InsufficientAccessRights));
    assert_eq!(pp_value(&r), [0x30, 0x03, 0x81, 0x01, 0x04]);
    let del_add = |old: &'static str| {
        vec![
            proto::Change {
                op: proto::ModOp::Delete,
                attr: proto::PartialAttribute {
                    name: b"userPassword".as_slice().into(),
                    values: vec![old.as_bytes().into()],
                },
            },
            proto::Change {
                op: proto::ModOp::Add,
                attr: proto::PartialAttribute {
                    name: b"userPassword".as_slice().into(),
                    values: vec![b"Second-pw-2".as_slice().into()],
                },
            },
        ]
    };
    let r = modify_pp(&mut c, 5, &b, del_add("not-it"));
    assert_eq!(r.code, Some(ResultCode::UnwillingToPerform));
    let r = modify_pp(&mut c, 6, &b, del_add("Initial-pw-1"));
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    assert_eq!(srv.bind_rc(&b, "Second-pw-2"), 0);
    assert_eq!(srv.bind_rc(&b, "Initial-pw-1"), 49);
}

#[test]
fn must_change_after_an_administrator_reset() {
    let srv = TestServer::start_with(config);
    let mut admin = srv.admin();
    // The default policy governs entries without pwdPolicySubentry.
    add_policy(&mut admin, "default", &[("pwdMustChange", "TRUE")]);
    let dn = add_user(&mut admin, "reset", None);
    let r = admin
        .modify(
            &dn,
            vec![Mod::Replace("userPassword", set(&["By-admin-1"]))],
        )
        .expect("modify");
    assert_eq!(r.rc, 0);
    assert_eq!(values(&mut admin, &dn, "pwdReset"), ["TRUE"]);
    let mut c = RawClient::connect(srv.addr);
    let r = bind_pp(&mut c, 1, &dn, "By-admin-1");
    assert_eq!(r.code, Some(ResultCode::Success));
    assert_eq!(pp_value(&r), [0x30, 0x03, 0x81, 0x01, 0x02]);
    c.send(2, base_search(&dn, &[]), vec![control(PP, false, None)]);
    let r = c.recv_until_done(2).pop().expect("result");
    assert_eq!(r.code, Some(ResultCode::InsufficientAccessRights), "{r:?}");
    // The control is not one of a search's (slapd: bind, add, modify): ignored there.
    assert!(r.control(PP).is_none());
    let description = vec![proto::Change {
        op: proto::ModOp::Replace,
        attr: proto::PartialAttribute {
            name: b"description".as_slice().into(),
            values: vec![b"x".as_slice().into()],
        },
    }];
    let r = modify_pp(&mut c, 3, &dn, description);
    assert_eq!(r.code, Some(ResultCode::InsufficientAccessRights), "{r:?}");
    assert_eq!(pp_value(&r), [0x30, 0x03, 0x81, 0x01, 0x02]);
    let r = modify_pp(&mut c, 3, &dn, replace_pw("Mine-now-2"));
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    assert!(values(&mut admin, &dn, "pwdReset").is_empty());
    let mut user = srv.bind_as(&dn, "Mine-now-2");
    let (rc, _, _) = search(&mut user, &dn, Scope::Base, "(objectClass=*)", &["cn"]);
    assert_eq!(rc, 0);
}

#[test]
fn the_control_is_supported_only_with_the_policy() {
    for on in [false, true] {
        let srv = TestServer::start_with(|c| {
            if on {
                config(c);
            }
        });
        let mut anon = srv.anon();
        let (_, _, es) = search(
            &mut anon,
            "",
            Scope::Base,
            "(objectClass=*)",
            &["supportedControl"],
        );
        let listed = es[0]
            .attrs
            .get("supportedControl")
            .is_some_and(|v| v.iter().any(|o| o == PP));
        assert_eq!(listed, on);
    }
}
