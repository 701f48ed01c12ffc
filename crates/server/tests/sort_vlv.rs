//! Server-side sort (RFC 2891) and virtual list view (draft-ietf-ldapext-ldapv3-vlv-09) over a
//! real socket, with OpenLDAP's ldapsearch (`-E sss=…`, `-E vlv=…`) and raw PDUs. The expected
//! orders and codes are slapd's (sssvlv overlay) for the same data and requests.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;

use common::raw::{control, RawClient, Response};
use common::{tool, TestServer, ADMIN_DN, ADMIN_PW};
use proto::controls::sort::SortKey;
use proto::controls::vlv::{Target, VlvRequest, VlvResponse};
use proto::{oids, ProtocolOp, ResultCode};

const SV: &str = "ou=sv,dc=example,dc=com";

/// Five people; by cn (caseIgnoreOrderingMatch), then sn reversed: a2 alice, a3 Bob Smith,
/// a5 Bob Brown, a1 Carol, a4 dave. a5 has no uidNumber.
const DATA: &str = "dn: ou=sv,dc=example,dc=com\nobjectClass: organizationalUnit\nou: sv\n\n\
dn: uid=a1,ou=sv,dc=example,dc=com\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\nuid: a1\ncn: Carol\nsn: Smith\nuidNumber: 30\ngidNumber: 1\nhomeDirectory: /h\n\n\
dn: uid=a2,ou=sv,dc=example,dc=com\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\nuid: a2\ncn: alice\nsn: Jones\nuidNumber: 100\ngidNumber: 1\nhomeDirectory: /h\n\n\
dn: uid=a3,ou=sv,dc=example,dc=com\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\nuid: a3\ncn: Bob\nsn: Smith\nuidNumber: 9\ngidNumber: 1\nhomeDirectory: /h\n\n\
dn: uid=a4,ou=sv,dc=example,dc=com\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\nuid: a4\ncn: dave\nsn: Adams\nuidNumber: 2000\ngidNumber: 1\nhomeDirectory: /h\n\n\
dn: uid=a5,ou=sv,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: a5\ncn: Bob\nsn: Brown\n";

fn server_with(tweak: impl FnOnce(&mut server::Config)) -> TestServer {
    let srv = TestServer::start_with(tweak);
    let (rc, out, err) = tool(
        "ldapadd",
        &["-x", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW],
        Some(DATA),
    );
    assert_eq!(rc, 0, "{out}{err}");
    srv
}

/// ldapsearch under ou=sv with extra arguments: (exit code, uids in order, all output).
fn ldapsearch(srv: &TestServer, extra: &[&str], stdin: Option<&str>) -> (i32, Vec<String>, String) {
    let mut args = vec![
        "-x", "-LLL", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW, "-b", SV,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["(uid=*)", "1.1"]);
    let (rc, out, err) = tool("ldapsearch", &args, stdin);
    let uids = out
        .lines()
        .filter_map(|l| l.strip_prefix("dn: uid="))
        .map(|l| l.split(',').next().unwrap_or("").to_owned())
        .collect();
    (rc, uids, format!("{out}{err}"))
}

#[test]
fn ldapsearch_sorts_by_several_keys_reversed_with_rules_by_oid_and_name() {
    let srv = server_with(|_| {});
    let (rc, uids, out) = ldapsearch(
        &srv,
        &["-E", "!sss=cn:2.5.13.3/-sn:caseIgnoreOrderingMatch"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert_eq!(uids, ["a2", "a3", "a5", "a1", "a4"], "{out}");
    assert!(out.contains("# sortResult: (0) Success"), "{out}");
    // The attribute's own ORDERING rule (integerOrderingMatch); a missing value sorts last,
    // and first when reversed.
    let (_, uids, out) = ldapsearch(&srv, &["-E", "sss=uidNumber"], None);
    assert_eq!(uids, ["a3", "a1", "a2", "a4", "a5"], "{out}");
    let (_, uids, out) = ldapsearch(&srv, &["-E", "sss=-uidNumber"], None);
    assert_eq!(uids, ["a5", "a4", "a2", "a1", "a3"], "{out}");
}

#[test]
fn ldapsearch_sort_refusals_match_slapd() {
    let srv = server_with(|_| {});
    // cn has no ORDERING rule: critical, inappropriateMatching (18).
    let (rc, uids, out) = ldapsearch(&srv, &["-E", "!sss=cn"], None);
    assert_eq!(rc, 18, "{out}");
    assert!(uids.is_empty());
    // Non-critical: the entries, unsorted, with sortResult 18 (RFC 2891; slapd refuses).
    let (rc, uids, out) = ldapsearch(&srv, &["-E", "sss=cn"], None);
    assert_eq!(rc, 0, "{out}");
    assert_eq!(uids.len(), 5, "{out}");
    assert!(out.contains("sortResult: (18)"), "{out}");
    // An unknown ordering rule and an undefined type, whatever the criticality.
    let (rc, _, out) = ldapsearch(&srv, &["-E", "sss=cn:noSuchMatch"], None);
    assert_eq!(rc, 18, "{out}");
    for e in ["sss=noSuchType", "!sss=noSuchType"] {
        let (rc, _, out) = ldapsearch(&srv, &["-E", e], None);
        assert_eq!(rc, 16, "{e}: {out}");
    }
    // More keys than max_sort_keys (5).
    let (rc, _, out) = ldapsearch(&srv, &["-E", "sss=uid/uid/uid/uid/uid/uid"], None);
    assert_eq!(rc, 53, "{out}");
}

#[test]
fn ldapsearch_pages_through_the_sorted_list() {
    let srv = server_with(|_| {});
    let (rc, uids, out) = ldapsearch(
        &srv,
        &["-E", "sss=cn:2.5.13.3/-sn:2.5.13.3", "-E", "!pr=2/noprompt"],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    assert_eq!(uids, ["a2", "a3", "a5", "a1", "a4"], "{out}");
    assert_eq!(out.matches("# sortResult: (0) Success").count(), 3, "{out}");
    assert_eq!(out.matches("pagedresults:").count(), 3, "{out}");
}

#[test]
fn ldapsearch_vlv_windows_by_offset_and_value_continue_by_context() {
    let srv = server_with(|_| {});
    // A window around the 3rd entry, then (typed at ldapsearch's prompt) one around the 5th
    // of the same list, then an invalid answer that ends ldapsearch (exit 1).
    let (rc, uids, out) = ldapsearch(
        &srv,
        &["-E", "sss=cn:2.5.13.3/-sn:2.5.13.3", "-E", "vlv=1/1/3/0"],
        Some("1/1/5/0\nq\n"),
    );
    assert_eq!(rc, 1, "{out}");
    assert_eq!(uids, ["a3", "a5", "a1", "a1", "a4"], "{out}");
    let ctx: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("# vlvResult"))
        .collect();
    assert_eq!(ctx.len(), 2, "{out}");
    assert!(
        ctx[0].starts_with("# vlvResultpos=3 count=5 context="),
        "{out}"
    );
    assert!(
        ctx[1].starts_with("# vlvResultpos=5 count=5 context="),
        "{out}"
    );
    assert_eq!(
        ctx[0].split("context=").nth(1),
        ctx[1].split("context=").nth(1),
        "the second window reads the same list"
    );
    // By value: the first entry at or after "b", then "Carol".
    let (_, uids, out) = ldapsearch(
        &srv,
        &["-E", "sss=cn:2.5.13.3/-sn:2.5.13.3", "-E", "vlv=1/0:b"],
        Some("0/0:Carol\nq\n"),
    );
    assert_eq!(uids, ["a2", "a3", "a1"], "{out}");
    assert!(out.contains("# vlvResultpos=2 count=5"), "{out}");
    assert!(out.contains("# vlvResultpos=4 count=5"), "{out}");
}

fn search(base: &str) -> ProtocolOp<'static> {
    ProtocolOp::SearchRequest(proto::SearchRequest {
        base: Cow::Owned(base.as_bytes().to_vec()),
        scope: proto::Scope::One,
        deref: proto::DerefAliases::Never,
        size_limit: 0,
        time_limit: 0,
        types_only: false,
        filter: proto::Filter::parse("(uid=*)").expect("filter"),
        attributes: vec![Cow::Borrowed(b"1.1")],
    })
}

fn sort(keys: &[(&str, Option<&str>, bool)]) -> proto::Control<'static> {
    let keys: Vec<SortKey<'_>> = keys
        .iter()
        .map(|(a, r, rev)| SortKey {
            attr: Cow::Borrowed(a.as_bytes()),
            rule: r.map(|r| Cow::Borrowed(r.as_bytes())),
            reverse: *rev,
        })
        .collect();
    let mut v = Vec::new();
    proto::controls::sort::encode_request(&keys, &mut v);
    control(oids::SORT_REQUEST, true, Some(v))
}

const BY_CN: &[(&str, Option<&str>, bool)] = &[
    ("cn", Some("2.5.13.3"), false),
    ("sn", Some("2.5.13.3"), true),
];

fn vlv(
    before: i64,
    after: i64,
    offset: i64,
    count: i64,
    ctx: Option<&[u8]>,
) -> proto::Control<'static> {
    let r = VlvRequest {
        before,
        after,
        target: Target::ByOffset {
            offset,
            content_count: count,
        },
        context: ctx.map(|c| Cow::Owned(c.to_vec())),
    };
    let mut v = Vec::new();
    r.encode(&mut v);
    control(oids::VLV_REQUEST, true, Some(v))
}

fn vlv_of(done: &Response) -> (i64, i64, u32, Vec<u8>) {
    let v = done
        .control(oids::VLV_RESPONSE)
        .and_then(|v| v.clone())
        .expect("VLV response control");
    let r = VlvResponse::decode(&v).expect("decodes");
    (
        r.target_position,
        r.content_count,
        r.result,
        r.context.map(|c| c.to_vec()).unwrap_or_default(),
    )
}

fn uids(rs: &[Response]) -> Vec<String> {
    rs.iter()
        .filter(|r| r.tag == proto::tags::SEARCH_RESULT_ENTRY)
        .map(|r| {
            r.dn.split(',')
                .next()
                .unwrap_or("")
                .trim_start_matches("uid=")
                .to_owned()
        })
        .collect()
}

#[test]
fn vlv_refusals_and_range_errors_match_slapd() {
    let srv = server_with(|_| {});
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    // Without a sort control: virtualListViewError (76), VLV result 76 (slapd's numbering).
    c.send(2, search(SV), vec![vlv(1, 1, 1, 0, None)]);
    let rs = c.recv_until_done(2);
    let done = rs.last().unwrap();
    assert_eq!(done.code, Some(ResultCode::VirtualListViewError), "{rs:?}");
    let (pos, count, result, _) = vlv_of(done);
    assert_eq!((pos, count, result), (0, 0, 76));
    // With paged results: unwillingToPerform.
    let paged = proto::controls::PagedResults {
        size: 2,
        cookie: Cow::Borrowed(&[]),
    };
    c.send(
        3,
        search(SV),
        vec![
            sort(BY_CN),
            vlv(1, 1, 1, 0, None),
            control(oids::PAGED_RESULTS, true, Some(paged.to_vec())),
        ],
    );
    let rs = c.recv_until_done(3);
    assert_eq!(rs[0].code, Some(ResultCode::UnwillingToPerform), "{rs:?}");
    // Past the end: offsetRangeError (77), target 0, the real count.
    c.send(4, search(SV), vec![sort(BY_CN), vlv(1, 1, 6, 0, None)]);
    let rs = c.recv_until_done(4);
    let done = rs.last().unwrap();
    assert_eq!(done.code, Some(ResultCode::VirtualListViewError), "{rs:?}");
    let (pos, count, result, _) = vlv_of(done);
    assert_eq!((pos, count, result), (0, 5, 77));
    assert!(uids(&rs).is_empty());
    // The client's estimate of the count scales its offset: 9 of 10 is the 4th of 5.
    c.send(5, search(SV), vec![sort(BY_CN), vlv(1, 1, 9, 10, None)]);
    let rs = c.recv_until_done(5);
    assert_eq!(uids(&rs), ["a5", "a1", "a4"]);
    assert_eq!(vlv_of(rs.last().unwrap()).0, 4);
}

#[test]
fn vlv_contexts_are_bounded_per_connection() {
    let srv = server_with(|c| c.max_vlv_contexts = 1);
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    c.send(2, search(SV), vec![sort(BY_CN), vlv(0, 0, 1, 0, None)]);
    let first = vlv_of(c.recv_until_done(2).last().unwrap()).3;
    // Continuing it works while it is the connection's only list.
    c.send(
        3,
        search(SV),
        vec![sort(BY_CN), vlv(0, 0, 2, 5, Some(&first))],
    );
    let rs = c.recv_until_done(3);
    assert_eq!(uids(&rs), ["a3"]);
    assert_eq!(vlv_of(rs.last().unwrap()).3, first);
    // Another list (another sort) drops it: its context then starts a new list.
    c.send(
        4,
        search(SV),
        vec![sort(&[("uidNumber", None, false)]), vlv(0, 0, 1, 0, None)],
    );
    let second = vlv_of(c.recv_until_done(4).last().unwrap()).3;
    assert_ne!(second, first);
    c.send(
        5,
        search(SV),
        vec![sort(BY_CN), vlv(0, 0, 2, 5, Some(&first))],
    );
    let rs = c.recv_until_done(5);
    assert_eq!(uids(&rs), ["a3"], "a new list, the same answer");
    let again = vlv_of(rs.last().unwrap()).3;
    assert_ne!(again, first);
    assert_ne!(again, second);
}

#[test]
fn sorting_more_than_max_sort_entries_is_an_admin_limit() {
    let srv = server_with(|c| c.max_sort_entries = 3);
    let (rc, got, out) = ldapsearch(&srv, &["-E", "sss=uidNumber"], None);
    assert_eq!(rc, 11, "{out}");
    assert!(got.is_empty(), "{out}");
    assert!(out.contains("max_sort_entries"), "{out}");
    // A search matching fewer is sorted as usual.
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    let mut req = search(SV);
    if let ProtocolOp::SearchRequest(s) = &mut req {
        s.filter = proto::Filter::parse("(|(uid=a1)(uid=a3))").unwrap();
    }
    c.send(2, req, vec![sort(&[("uidNumber", None, true)])]);
    let rs = c.recv_until_done(2);
    assert_eq!(uids(&rs), ["a1", "a3"]);
}

#[test]
fn values_the_requester_may_not_search_sort_as_missing() {
    use dit::acl::{ClauseSpec, RuleSpec};
    let srv = server_with(|c| {
        let by = |who: &str, rights: &[&str]| ClauseSpec {
            who: who.into(),
            rights: rights.iter().map(|r| r.to_string()).collect(),
        };
        // description: the administrator's and its entry's own.
        c.access = Some(vec![
            RuleSpec {
                attrs: Some(vec!["description".into()]),
                by: vec![by("self", &["read"])],
                ..RuleSpec::default()
            },
            RuleSpec {
                by: vec![by("*", &["read", "search", "compare"])],
                ..RuleSpec::default()
            },
        ]);
    });
    let mut mods = String::new();
    for (uid, d) in [("a1", "d"), ("a2", "c"), ("a3", "b"), ("a4", "a")] {
        mods.push_str(&format!(
            "dn: uid={uid},{SV}\nchangetype: modify\nadd: description\ndescription: {d}\n\n"
        ));
    }
    let (rc, out, err) = tool(
        "ldapmodify",
        &["-x", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW],
        Some(&mods),
    );
    assert_eq!(rc, 0, "{out}{err}");
    let key: &[(&str, Option<&str>, bool)] = &[("description", Some("2.5.13.3"), false)];
    let mut admin = RawClient::connect(srv.addr);
    admin.bind(1, ADMIN_DN, ADMIN_PW);
    admin.send(2, search(SV), vec![sort(key)]);
    assert_eq!(
        uids(&admin.recv_until_done(2)),
        ["a4", "a3", "a2", "a1", "a5"]
    );
    // Anonymous may not search description: every entry lacks the key, so the walk's order
    // stands and reveals nothing.
    let mut anon = RawClient::connect(srv.addr);
    anon.send(1, search(SV), vec![sort(key)]);
    assert_eq!(
        uids(&anon.recv_until_done(1)),
        ["a1", "a2", "a3", "a4", "a5"]
    );
}
