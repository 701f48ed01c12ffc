//! Subtree delete, permissive modify, LDAP transactions (RFC 5805) and Cancel (RFC 3909) over
//! real sockets: OpenLDAP's `ldapdelete -e` / `ldapmodify -e` / `ldapexop` where they can send
//! the request, raw BER (`common::raw`) where they cannot.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;
use std::collections::HashSet;

use common::raw::{control, RawClient, Response};
use common::{tool, TestServer, ADMIN_DN, ADMIN_PW};
use proto::{oids, ProtocolOp, ResultCode};

const SUBTREE_DELETE: &str = "1.2.840.113556.1.4.805";
const PERMISSIVE_MODIFY: &str = "1.2.840.113556.1.4.1413";

fn b(s: &str) -> Cow<'static, [u8]> {
    Cow::Owned(s.as_bytes().to_vec())
}

fn add_op(dn: &str, attrs: &[(&str, &[&str])]) -> ProtocolOp<'static> {
    ProtocolOp::AddRequest(proto::AddRequest {
        dn: b(dn),
        attributes: attrs
            .iter()
            .map(|(n, vs)| proto::PartialAttribute {
                name: b(n),
                values: vs.iter().map(|v| b(v)).collect(),
            })
            .collect(),
    })
}

fn ou_op(dn: &str) -> ProtocolOp<'static> {
    let name = dn
        .split(',')
        .next()
        .and_then(|r| r.strip_prefix("ou="))
        .unwrap();
    add_op(
        dn,
        &[("objectClass", &["organizationalUnit"]), ("ou", &[name])],
    )
}

fn replace_op(dn: &str, attr: &str, value: &str) -> ProtocolOp<'static> {
    ProtocolOp::ModifyRequest(proto::ModifyRequest {
        dn: b(dn),
        changes: vec![proto::Change {
            op: proto::ModOp::Replace,
            attr: proto::PartialAttribute {
                name: b(attr),
                values: vec![b(value)],
            },
        }],
    })
}

fn ext(oid: &str, value: Option<Vec<u8>>) -> ProtocolOp<'static> {
    ProtocolOp::ExtendedRequest(proto::ExtendedRequest {
        oid: b(oid),
        value: value.map(Cow::Owned),
    })
}

fn search_op(base: &str) -> ProtocolOp<'static> {
    ProtocolOp::SearchRequest(proto::SearchRequest {
        base: b(base),
        scope: proto::Scope::Subtree,
        deref: proto::DerefAliases::Never,
        size_limit: 0,
        time_limit: 0,
        types_only: false,
        filter: proto::Filter::parse("(objectClass=*)").unwrap(),
        attributes: vec![b("1.1")],
    })
}

/// A raw client bound as the administrator; request ids from 2.
fn admin_raw(srv: &TestServer) -> RawClient {
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    c
}

fn call(c: &mut RawClient, id: i32, op: ProtocolOp<'_>, ctls: Vec<proto::Control<'_>>) -> Response {
    c.send(id, op, ctls);
    let r = c.recv();
    assert_eq!(r.id, id, "{r:?}");
    r
}

fn exists(srv: &TestServer, dn: &str) -> bool {
    let mut a = srv.admin();
    let r = a
        .search(dn, ldap3::Scope::Base, "(objectClass=*)", vec!["1.1"])
        .unwrap();
    r.1.rc == 0
}

fn add_tree(srv: &TestServer, dns: &[&str]) {
    let mut a = srv.admin();
    for dn in dns {
        let name = dn
            .split(',')
            .next()
            .and_then(|r| r.split_once('='))
            .unwrap()
            .1;
        let attrs = vec![
            ("objectClass", HashSet::from(["organizationalUnit"])),
            ("ou", HashSet::from([name])),
        ];
        a.add(dn, attrs).unwrap().success().unwrap();
    }
}

const TREE: [&str; 5] = [
    "ou=t,dc=example,dc=com",
    "ou=a,ou=t,dc=example,dc=com",
    "ou=leaf,ou=a,ou=t,dc=example,dc=com",
    "ou=b,ou=t,dc=example,dc=com",
    "ou=leaf,ou=b,ou=t,dc=example,dc=com",
];

#[test]
fn ldapdelete_with_subtree_delete_removes_the_tree_in_one_batch_and_audits_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let a2 = audit.clone();
    let srv = TestServer::start_with(move |c| {
        c.demo = false;
        c.audit_log = server::logs::LogTarget::File(a2);
    });
    add_tree(&srv, &TREE);
    let args = |ctl: Option<&'static str>| {
        let mut v = vec!["-x", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW];
        if let Some(c) = ctl {
            v.extend(["-e", c]);
        }
        v.push(TREE[0]);
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        tool("ldapdelete", &a, None)
    };
    let (rc, _, err) = run(args(None));
    assert_eq!(rc, 66, "without the control: notAllowedOnNonLeaf ({err})");
    // A persistent search (changes only) follows the change feed.
    let mut watch = admin_raw(&srv);
    watch.send(2, search_op(TREE[0]), vec![changes_only()]);
    let who = call(&mut watch, 3, ext(oids::WHO_AM_I, None), vec![]);
    assert_eq!(who.code, Some(ResultCode::Success), "the search is open");
    let before = srv.server.committed_batches();
    let (rc, _, err) = run(args(Some("!1.2.840.113556.1.4.805")));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(srv.server.committed_batches(), before + 1, "one batch");
    for dn in TREE {
        assert!(!exists(&srv, dn), "{dn} is gone");
    }
    // Every deleted entry reached the change feed, in the batch published before the answer.
    let mut notified: Vec<String> = (0..TREE.len())
        .map(|_| {
            let r = watch.recv();
            assert_eq!(
                (r.id, r.tag),
                (2, proto::tags::SEARCH_RESULT_ENTRY),
                "{r:?}"
            );
            r.dn.to_lowercase()
        })
        .collect();
    notified.sort();
    let mut want: Vec<String> = TREE.iter().map(|d| d.to_string()).collect();
    want.sort();
    assert_eq!(notified, want);
    // Every deleted entry has its audit record, subordinates first. The audit log is written
    // by a background task: wait (bounded) until the last record is there.
    let mut text = String::new();
    for _ in 0..500 {
        text = std::fs::read_to_string(&audit).unwrap_or_default();
        if text.contains(&format!("dn: {}\nchangetype: delete", TREE[0])) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let deleted: Vec<&str> = text
        .split("\n\n")
        .filter(|r| r.contains("changetype: delete"))
        .filter_map(|r| r.lines().find_map(|l| l.strip_prefix("dn: ")))
        .collect();
    assert_eq!(deleted.len(), TREE.len(), "{text}");
    assert_eq!(deleted.last(), Some(&TREE[0]));
    for dn in TREE {
        assert!(deleted.contains(&dn), "{dn} audited: {text}");
    }
}

#[test]
fn subtree_delete_needs_the_delete_right_on_every_entry() {
    use dit::acl::{ClauseSpec, RuleSpec};
    let alice = "uid=alice,dc=example,dc=com";
    let by = |who: &str, rights: &[&str]| ClauseSpec {
        who: who.into(),
        rights: rights.iter().map(|r| r.to_string()).collect(),
    };
    let srv = TestServer::start_with(move |c| {
        c.demo = false;
        let mut rules = vec![
            RuleSpec {
                dn: Some("ou=leaf,ou=b,ou=t,dc=example,dc=com".into()),
                by: vec![by("*", &["read", "search"])],
                ..RuleSpec::default()
            },
            RuleSpec {
                dn: Some("ou=t,dc=example,dc=com".into()),
                by: vec![
                    by(&format!("dn:{alice}"), &["read", "search", "delete"]),
                    by("*", &["read", "search"]),
                ],
                ..RuleSpec::default()
            },
        ];
        rules.extend(common::open_read_policy());
        c.access = Some(rules);
    });
    let mut a = srv.admin();
    a.add(
        alice,
        vec![
            ("objectClass", HashSet::from(["inetOrgPerson"])),
            ("uid", HashSet::from(["alice"])),
            ("cn", HashSet::from(["Alice"])),
            ("sn", HashSet::from(["A"])),
            ("userPassword", HashSet::from(["alice-pw"])),
        ],
    )
    .unwrap()
    .success()
    .unwrap();
    add_tree(&srv, &TREE);
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, alice, "alice-pw");
    let del = |dn: &str| ProtocolOp::DelRequest(b(dn));
    let r = call(
        &mut c,
        2,
        del(TREE[0]),
        vec![control(SUBTREE_DELETE, true, None)],
    );
    assert_eq!(r.code, Some(ResultCode::InsufficientAccessRights), "{r:?}");
    for dn in TREE {
        assert!(exists(&srv, dn), "nothing was deleted: {dn}");
    }
    // A subtree where she may delete every entry goes.
    let r = call(
        &mut c,
        3,
        del(TREE[1]),
        vec![control(SUBTREE_DELETE, true, None)],
    );
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    assert!(!exists(&srv, TREE[2]) && !exists(&srv, TREE[1]));
    assert!(exists(&srv, TREE[4]));
}

#[test]
fn subtree_delete_beyond_the_limit_names_it_and_deletes_nothing() {
    let srv = TestServer::start_with(|c| {
        c.demo = false;
        c.max_subtree_delete = 4;
    });
    add_tree(&srv, &TREE);
    let mut c = admin_raw(&srv);
    let r = call(
        &mut c,
        2,
        ProtocolOp::DelRequest(b(TREE[0])),
        vec![control(SUBTREE_DELETE, true, None)],
    );
    assert_eq!(r.code, Some(ResultCode::AdminLimitExceeded), "{r:?}");
    assert!(r.message.contains("max_subtree_delete"), "{}", r.message);
    assert!(exists(&srv, TREE[4]));
    // Within the limit (three entries), the same request succeeds.
    let r = call(
        &mut c,
        3,
        ProtocolOp::DelRequest(b(TREE[1])),
        vec![control(SUBTREE_DELETE, true, None)],
    );
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
}

#[test]
fn ldapmodify_with_permissive_modify_skips_existing_and_missing_values() {
    let srv = TestServer::start(false);
    add_tree(&srv, &TREE[..1]);
    let ldif = "dn: ou=t,dc=example,dc=com\nchangetype: modify\nadd: ou\nou: t\n-\ndelete: description\ndescription: none\n-\ndelete: seeAlso\n";
    let base = ["-x", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW];
    let (rc, _, _) = tool("ldapmodify", &base, Some(ldif));
    assert_eq!(rc, 20, "without the control: attributeOrValueExists");
    let mut args = base.to_vec();
    args.extend(["-e", "!1.2.840.113556.1.4.1413"]);
    let (rc, _, err) = tool("ldapmodify", &args, Some(ldif));
    assert_eq!(rc, 0, "{err}");
}

fn start_txn(c: &mut RawClient, id: i32) -> Vec<u8> {
    let r = call(c, id, ext(oids::TXN_START, None), vec![]);
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    let tid = r.value.expect("a transaction identifier");
    assert!(!tid.is_empty());
    tid
}

fn spec(tid: &[u8]) -> Vec<proto::Control<'static>> {
    vec![control(oids::TXN_SPEC, true, Some(tid.to_vec()))]
}

fn end_txn(tid: &[u8], commit: bool) -> ProtocolOp<'static> {
    ext(
        oids::TXN_END,
        Some(proto::txn::TxnEndRequest { commit, id: tid }.to_vec()),
    )
}

#[test]
fn a_committed_transaction_applies_every_operation_in_one_batch() {
    let srv = TestServer::start(false);
    add_tree(&srv, &TREE[..1]);
    let mut c = admin_raw(&srv);
    let tid = start_txn(&mut c, 2);
    let ops = [
        ou_op("ou=n,dc=example,dc=com"),
        ou_op("ou=child,ou=n,dc=example,dc=com"),
        replace_op(TREE[0], "description", "changed in a transaction"),
        ProtocolOp::DelRequest(b("ou=child,ou=n,dc=example,dc=com")),
    ];
    for (i, op) in ops.into_iter().enumerate() {
        let r = call(&mut c, 3 + i as i32, op, spec(&tid));
        assert_eq!(r.code, Some(ResultCode::Success), "queued: {r:?}");
    }
    assert!(
        !exists(&srv, "ou=n,dc=example,dc=com"),
        "not before the commit"
    );
    let before = srv.server.committed_batches();
    let r = call(&mut c, 10, end_txn(&tid, true), vec![]);
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    assert_eq!(r.value, None);
    assert_eq!(srv.server.committed_batches(), before + 1, "one batch");
    assert!(exists(&srv, "ou=n,dc=example,dc=com"));
    assert!(!exists(&srv, "ou=child,ou=n,dc=example,dc=com"));
    let (_, _, rs) = common::search(
        &mut srv.admin(),
        TREE[0],
        ldap3::Scope::Base,
        "(description=changed in a transaction)",
        &["1.1"],
    );
    assert_eq!(rs.len(), 1);
    // Ended: the identifier is no longer valid.
    let r = call(&mut c, 11, end_txn(&tid, true), vec![]);
    assert_eq!(r.code, Some(ResultCode::TxnIdInvalid), "{r:?}");
}

#[test]
fn a_failing_operation_fails_the_commit_names_its_message_id_and_applies_nothing() {
    let srv = TestServer::start(false);
    add_tree(&srv, &TREE[..1]);
    let mut c = admin_raw(&srv);
    let tid = start_txn(&mut c, 2);
    for (id, op) in [
        (3, ou_op("ou=n,dc=example,dc=com")),
        (4, replace_op(TREE[0], "description", "never")),
        // Exists by then: the commit fails here.
        (5, ou_op("ou=n,dc=example,dc=com")),
        (6, ou_op("ou=m,dc=example,dc=com")),
    ] {
        let r = call(&mut c, id, op, spec(&tid));
        assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    }
    let before = srv.server.committed_batches();
    let r = call(&mut c, 7, end_txn(&tid, true), vec![]);
    assert_eq!(r.code, Some(ResultCode::EntryAlreadyExists), "{r:?}");
    let named = proto::txn::decode_txn_end_response(&r.value.expect("txnEndRes")).unwrap();
    assert_eq!(named, Some(5));
    assert_eq!(srv.server.committed_batches(), before, "nothing committed");
    assert!(!exists(&srv, "ou=n,dc=example,dc=com"));
    assert!(!exists(&srv, "ou=m,dc=example,dc=com"));
    let (_, _, rs) = common::search(
        &mut srv.admin(),
        TREE[0],
        ldap3::Scope::Base,
        "(description=*)",
        &["1.1"],
    );
    assert!(rs.is_empty());
}

#[test]
fn abort_close_and_limits() {
    let srv = TestServer::start_with(|c| {
        c.demo = false;
        c.max_transactions = 2;
        c.max_transaction_ops = 2;
    });
    let mut c = admin_raw(&srv);
    let t1 = start_txn(&mut c, 2);
    let t2 = start_txn(&mut c, 3);
    assert_ne!(t1, t2);
    let r = call(&mut c, 4, ext(oids::TXN_START, None), vec![]);
    assert_eq!(r.code, Some(ResultCode::Busy), "{r:?}");
    assert!(r.message.contains("max_transactions"), "{}", r.message);
    for id in [5, 6] {
        let dn = format!("ou=x{id},dc=example,dc=com");
        let r = call(&mut c, id, ou_op(&dn), spec(&t1));
        assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    }
    let r = call(&mut c, 7, ou_op("ou=x7,dc=example,dc=com"), spec(&t1));
    assert_eq!(r.code, Some(ResultCode::AdminLimitExceeded), "{r:?}");
    assert!(r.message.contains("max_transaction_ops"), "{}", r.message);
    // Abort: success, nothing applied.
    let r = call(&mut c, 8, end_txn(&t1, false), vec![]);
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    assert!(!exists(&srv, "ou=x5,dc=example,dc=com"));
    // The control must be critical, and name an open transaction.
    let r = call(
        &mut c,
        9,
        ou_op("ou=y,dc=example,dc=com"),
        vec![control(oids::TXN_SPEC, false, Some(t2.clone()))],
    );
    assert_eq!(r.code, Some(ResultCode::ProtocolError), "{r:?}");
    let r = call(&mut c, 10, ou_op("ou=y,dc=example,dc=com"), spec(&t1));
    assert_eq!(r.code, Some(ResultCode::TxnIdInvalid), "{r:?}");
    // Pre-read and post-read cannot be answered inside a transaction (as slapd).
    // SEQUENCE OF AttributeDescription: "ou".
    let post = vec![0x30, 0x04, 0x04, 0x02, b'o', b'u'];
    let mut ctls = spec(&t2);
    ctls.push(control(oids::POST_READ, true, Some(post)));
    let r = call(&mut c, 11, ou_op("ou=y,dc=example,dc=com"), ctls);
    assert_eq!(r.code, Some(ResultCode::UnwillingToPerform), "{r:?}");
    // A transaction left open ends with its connection.
    let r = call(&mut c, 12, ou_op("ou=y,dc=example,dc=com"), spec(&t2));
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    c.send(13, ProtocolOp::UnbindRequest, vec![]);
    drop(c);
    let mut c = admin_raw(&srv);
    let r = call(&mut c, 2, end_txn(&t2, true), vec![]);
    assert_eq!(r.code, Some(ResultCode::TxnIdInvalid), "{r:?}");
    assert!(!exists(&srv, "ou=y,dc=example,dc=com"));
}

#[test]
fn ldapexop_cancel_of_an_unknown_operation_is_no_such_operation() {
    let srv = TestServer::start(false);
    // ldapexop has no Cancel syntax of its own; the raw form carries the value base64'd.
    let value = proto::txn::encode_cancel(42);
    let arg = format!("1.3.6.1.1.8::{}", base64_encode(&value));
    let (rc, _, err) = tool(
        "ldapexop",
        &["-x", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW, &arg],
        None,
    );
    // ldapexop reports the result code in its message (its exit status is not the code).
    assert_ne!(rc, 0);
    assert!(err.contains("(119)"), "noSuchOperation: {err}");
}

fn base64_encode(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.len();
        let v = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= n {
                out.push(T[((v >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn changes_only() -> proto::Control<'static> {
    let mut ps = Vec::new();
    proto::controls::psearch::PersistentSearch {
        change_types: 15,
        changes_only: true,
        return_ecs: true,
    }
    .encode(&mut ps);
    control(oids::PERSISTENT_SEARCH, true, Some(ps))
}

#[test]
fn cancel_ends_a_persistent_search_with_canceled_then_answers() {
    let srv = TestServer::start(false);
    add_tree(&srv, &TREE[..1]);
    let mut c = admin_raw(&srv);
    c.send(2, search_op(TREE[0]), vec![changes_only()]);
    // The persistent search stays open until something ends it: it is running when the
    // Cancel arrives, whatever the timing.
    c.send(
        3,
        ext(oids::CANCEL, Some(proto::txn::encode_cancel(2))),
        vec![],
    );
    let done = c.recv();
    assert_eq!(
        (done.id, done.tag),
        (2, proto::tags::SEARCH_RESULT_DONE),
        "{done:?}"
    );
    assert_eq!(done.code, Some(ResultCode::Canceled), "{done:?}");
    let answer = c.recv();
    assert_eq!(answer.id, 3, "the Cancel's answer comes after: {answer:?}");
    assert_eq!(answer.code, Some(ResultCode::Success), "{answer:?}");
    // Now it has ended: unknown.
    let r = call(
        &mut c,
        4,
        ext(oids::CANCEL, Some(proto::txn::encode_cancel(2))),
        vec![],
    );
    assert_eq!(r.code, Some(ResultCode::NoSuchOperation), "{r:?}");
    // A finished search, a Cancel naming itself, a malformed request.
    let rs = {
        c.send(5, search_op(TREE[0]), vec![]);
        c.recv_until_done(5)
    };
    assert_eq!(rs.last().unwrap().code, Some(ResultCode::Success));
    let r = call(
        &mut c,
        6,
        ext(oids::CANCEL, Some(proto::txn::encode_cancel(5))),
        vec![],
    );
    assert_eq!(r.code, Some(ResultCode::NoSuchOperation), "{r:?}");
    let r = call(
        &mut c,
        7,
        ext(oids::CANCEL, Some(proto::txn::encode_cancel(7))),
        vec![],
    );
    assert_eq!(r.code, Some(ResultCode::CannotCancel), "{r:?}");
    let r = call(&mut c, 8, ext(oids::CANCEL, None), vec![]);
    assert_eq!(r.code, Some(ResultCode::ProtocolError), "{r:?}");
}

#[test]
fn the_root_dse_lists_what_works() {
    let srv = TestServer::start(false);
    let (_, _, rs) = common::search(
        &mut srv.anon(),
        "",
        ldap3::Scope::Base,
        "(objectClass=*)",
        &["supportedControl", "supportedExtension"],
    );
    let dse = &rs[0].attrs;
    for oid in [SUBTREE_DELETE, PERMISSIVE_MODIFY, oids::TXN_SPEC] {
        assert!(dse["supportedControl"].iter().any(|v| v == oid), "{oid}");
    }
    for oid in [oids::CANCEL, oids::TXN_START, oids::TXN_END] {
        assert!(dse["supportedExtension"].iter().any(|v| v == oid), "{oid}");
    }
}
