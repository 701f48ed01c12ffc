//! Request controls through the registry, over a real socket: Simple Paged Results (RFC 2696)
//! and the assertion control (RFC 4528), with OpenLDAP's tools and raw PDUs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;

use common::raw::{control, RawClient, Response};
use common::{tool, TestServer, ADMIN_DN, ADMIN_PW, BASE};
use proto::{oids, ProtocolOp, ResultCode};

fn search(base: &str, filter: &str) -> ProtocolOp<'static> {
    ProtocolOp::SearchRequest(proto::SearchRequest {
        base: Cow::Owned(base.as_bytes().to_vec()),
        scope: proto::Scope::Subtree,
        deref: proto::DerefAliases::Never,
        size_limit: 0,
        time_limit: 0,
        types_only: false,
        filter: proto::Filter::parse(filter).expect("filter"),
        attributes: vec![Cow::Borrowed(b"1.1")],
    })
}

fn paged(size: i64, cookie: &[u8]) -> proto::Control<'static> {
    let v = proto::controls::PagedResults {
        size,
        cookie: Cow::Owned(cookie.to_vec()),
    };
    control(oids::PAGED_RESULTS, true, Some(v.to_vec()))
}

/// The paged results response control of a SearchResultDone: (size, cookie).
fn page_of(done: &Response) -> (i64, Vec<u8>) {
    let v = done
        .control(oids::PAGED_RESULTS)
        .and_then(|v| v.clone())
        .expect("paged results response control");
    let p = proto::controls::PagedResults::decode(&v).expect("decodes");
    (p.size, p.cookie.to_vec())
}

fn add_people(srv: &TestServer, n: usize) {
    let mut ldif = String::from(
        "dn: ou=many,dc=example,dc=com\nobjectClass: organizationalUnit\nou: many\n\n",
    );
    for i in 0..n {
        ldif.push_str(&format!(
            "dn: uid=m{i},ou=many,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: m{i}\ncn: m{i}\nsn: m\n\n"
        ));
    }
    let (rc, out, err) = tool(
        "ldapadd",
        &["-x", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW],
        Some(&ldif),
    );
    assert_eq!(rc, 0, "{out}{err}");
}

#[test]
fn ldapsearch_pages_and_every_entry_comes_once() {
    let srv = TestServer::start(false);
    add_people(&srv, 25);
    let (rc, out, err) = tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-H",
            &srv.url,
            "-D",
            ADMIN_DN,
            "-w",
            ADMIN_PW,
            "-b",
            "ou=many,dc=example,dc=com",
            "-E",
            "!pr=7/noprompt",
            "(uid=*)",
            "1.1",
        ],
        None,
    );
    assert_eq!(rc, 0, "{err}");
    let mut dns: Vec<&str> = out.lines().filter(|l| l.starts_with("dn: ")).collect();
    assert_eq!(dns.len(), 25, "{out}");
    dns.sort();
    dns.dedup();
    assert_eq!(dns.len(), 25, "no entry twice");
    // Four pages: 7 + 7 + 7 + 4, each ending with the control (ldapsearch prints it).
    assert_eq!(out.matches("pagedresults: estimate=25").count(), 4, "{out}");
}

#[test]
fn the_size_limit_bounds_the_whole_paged_walk_and_cookies_stay_with_their_search() {
    let srv = TestServer::start_with(|c| {
        c.size_limit = 10;
        c.max_paged_searches = 2;
    });
    add_people(&srv, 25);
    let bob = "uid=m1,ou=many,dc=example,dc=com";
    // A user to search as (the administrator has no server limit).
    let (rc, _, err) = tool(
        "ldapmodify",
        &["-x", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW],
        Some(&format!(
            "dn: {bob}\nchangetype: modify\nadd: userPassword\nuserPassword: pw\n"
        )),
    );
    assert_eq!(rc, 0, "{err}");
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, bob, "pw");
    let base = "ou=many,dc=example,dc=com";
    let mut cookie = Vec::new();
    let mut seen = 0;
    let mut id = 2;
    let last = loop {
        c.send(id, search(base, "(uid=*)"), vec![paged(4, &cookie)]);
        let rs = c.recv_until_done(id);
        id += 1;
        let done = rs.last().expect("done");
        seen += rs.len() - 1;
        if done.code != Some(ResultCode::Success) {
            break done.code;
        }
        cookie = page_of(done).1;
        assert!(
            !cookie.is_empty(),
            "the walk ends by the limit, not by running out"
        );
    };
    assert_eq!(last, Some(ResultCode::SizeLimitExceeded));
    assert_eq!(seen, 10, "4 + 4 + 2 entries, then sizeLimitExceeded");

    // Three paged searches open on one connection with max_paged_searches = 2: the oldest
    // is dropped and its cookie refused as old; the others go on.
    let mut a = RawClient::connect(srv.addr);
    a.bind(1, ADMIN_DN, ADMIN_PW);
    let mut cookies = Vec::new();
    for (i, f) in ["(cn=m1*)", "(cn=m2*)", "(uid=*)"].iter().enumerate() {
        let id = 10 + i as i32;
        a.send(id, search(base, f), vec![paged(1, &[])]);
        let rs = a.recv_until_done(id);
        cookies.push(page_of(rs.last().expect("done")).1);
    }
    a.send(20, search(base, "(cn=m1*)"), vec![paged(1, &cookies[0])]);
    let r = a.recv_until_done(20);
    assert_eq!(r[0].code, Some(ResultCode::UnwillingToPerform), "{r:?}");
    // A cookie used with another search's request.
    a.send(21, search(base, "(cn=m1*)"), vec![paged(1, &cookies[1])]);
    let r = a.recv_until_done(21);
    assert_eq!(r[0].code, Some(ResultCode::UnwillingToPerform), "{r:?}");
    assert!(r[0].message.contains("different search"), "{r:?}");
    // A cookie the connection never issued.
    a.send(
        22,
        search(base, "(uid=*)"),
        vec![paged(1, &[0, 0, 0, 0, 0, 0, 1, 0])],
    );
    let r = a.recv_until_done(22);
    assert_eq!(r[0].code, Some(ResultCode::ProtocolError), "{r:?}");
    // The third search goes on to its end: 26 entries (ou=many and 25 people), one per page.
    let mut cookie = cookies[2].clone();
    let mut pages = 1;
    let mut id = 30;
    while !cookie.is_empty() {
        a.send(id, search(base, "(uid=*)"), vec![paged(10, &cookie)]);
        let rs = a.recv_until_done(id);
        id += 1;
        pages += 1;
        let (size, next) = page_of(rs.last().expect("done"));
        assert_eq!(size, 25);
        cookie = next;
    }
    assert_eq!(pages, 4, "1 + 10 + 10 + 4");
}

#[test]
fn assertion_control_with_ldap_tools() {
    let srv = TestServer::start(true);
    let alice = "uid=alice,ou=people,dc=example,dc=com";
    let modify = |assert: &str| {
        tool(
            "ldapmodify",
            &[
                "-x", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW, "-e", assert,
            ],
            Some(&format!(
                "dn: {alice}\nchangetype: modify\nreplace: description\ndescription: checked\n"
            )),
        )
    };
    let (rc, _, err) = modify("assert=(uid=bob)");
    assert_eq!(rc, 122, "assertionFailed: {err}");
    let (rc, _, err) = modify("assert=(uid=alice)");
    assert_eq!(rc, 0, "{err}");
    let (rc, out, _) = tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-H",
            &srv.url,
            "-D",
            ADMIN_DN,
            "-w",
            ADMIN_PW,
            "-b",
            alice,
            "-s",
            "base",
            "-e",
            "assert=(description=checked)",
            "description",
        ],
        None,
    );
    assert_eq!(rc, 0);
    assert!(out.contains("description: checked"), "{out}");
    let (rc, _, _) = tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-H",
            &srv.url,
            "-D",
            ADMIN_DN,
            "-w",
            ADMIN_PW,
            "-b",
            BASE,
            "-e",
            "assert=(description=other)",
            "(uid=alice)",
        ],
        None,
    );
    assert_eq!(rc, 122);
}
