//! Dynamic groups (`[[dynlist]]` with a member attribute, slapd's `dynlist-attrset groupOfURLs
//! memberURL member+memberOf`) and dynamic lists (without one) over a real socket: members on
//! read (by name and with `*`), compare, `(member=…)` filters, memberOf asked for by name, and
//! the URL's search done as the requester. The same cases run against slapd in
//! tests/conformance/test_dynlist.py.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;

use common::{search, TestServer};
use ldap3::Scope;
use server::dynlist::DynlistSpec;

const BASE: &str = "ou=dyn,dc=example,dc=com";

fn start() -> TestServer {
    TestServer::start_with(|c| {
        c.demo = true;
        c.schemas = vec!["dyngroup".into()];
        c.dynlist = vec![
            DynlistSpec {
                object_class: "groupOfURLs".into(),
                url_attribute: "memberURL".into(),
                member_attribute: Some("member".into()),
                member_of_attribute: Some("memberOf".into()),
            },
            // A dynamic list: an entry of this class gets the attributes its URLs name.
            DynlistSpec {
                object_class: "labeledURIObject".into(),
                url_attribute: "labeledURI".into(),
                ..DynlistSpec::default()
            },
        ];
        // uid=hidden is invisible to anonymous clients; everything else as usual.
        let mut access = vec![dit::acl::RuleSpec {
            dn: Some(format!("uid=hidden,{BASE}")),
            scope: Some("base".into()),
            by: vec![dit::acl::ClauseSpec {
                who: "users".into(),
                rights: vec!["read".into(), "search".into(), "compare".into()],
            }],
            ..dit::acl::RuleSpec::default()
        }];
        access.extend(common::open_read_policy());
        c.access = Some(access);
    })
}

fn populate(srv: &TestServer) {
    let mut admin = srv.admin();
    let add = |c: &mut ldap3::LdapConn, dn: &str, attrs: Vec<(&str, HashSet<&str>)>| {
        c.add(dn, attrs).expect("add").success().expect(dn);
    };
    add(
        &mut admin,
        BASE,
        vec![
            ("objectClass", ["organizationalUnit"].into()),
            ("ou", ["dyn"].into()),
        ],
    );
    for (uid, ou) in [
        ("alice", "eng"),
        ("bob", "eng"),
        ("hidden", "eng"),
        ("carol", "ops"),
    ] {
        add(
            &mut admin,
            &format!("uid={uid},{BASE}"),
            vec![
                ("objectClass", ["inetOrgPerson"].into()),
                ("uid", [uid].into()),
                ("cn", [uid].into()),
                ("sn", [uid].into()),
                ("ou", [ou].into()),
                ("mail", [format!("{uid}@example.com").as_str()].into()),
            ],
        );
    }
    add(
        &mut admin,
        &format!("cn=engineers,{BASE}"),
        vec![
            ("objectClass", ["groupOfURLs"].into()),
            ("cn", ["engineers"].into()),
            (
                "memberURL",
                [format!("ldap:///{BASE}??one?(&(objectClass=inetOrgPerson)(ou=eng))").as_str()]
                    .into(),
            ),
        ],
    );
    add(
        &mut admin,
        &format!("cn=mails,{BASE}"),
        vec![
            ("objectClass", ["device", "labeledURIObject"].into()),
            ("cn", ["mails"].into()),
            (
                "labeledURI",
                [format!("ldap:///{BASE}?mail?one?(ou=ops)").as_str()].into(),
            ),
        ],
    );
}

fn values(e: &ldap3::SearchEntry, attr: &str) -> Vec<String> {
    let mut v = e.attrs.get(attr).cloned().unwrap_or_default();
    v.sort();
    v
}

fn dn(uid: &str) -> String {
    format!("uid={uid},{BASE}")
}

#[test]
fn dynamic_groups_expand_on_read_compare_and_filters() {
    let srv = start();
    populate(&srv);
    let group = format!("cn=engineers,{BASE}");
    let mut admin = srv.admin();
    let mut anon = srv.anon();

    // Read, by name and with `*`: the URL's entries as the requester sees them.
    for attrs in [&["member"][..], &["*"][..]] {
        let (rc, _, es) = search(&mut admin, &group, Scope::Base, "(objectClass=*)", attrs);
        assert_eq!(rc, 0);
        assert_eq!(
            values(&es[0], "member"),
            [dn("alice"), dn("bob"), dn("hidden")],
            "{attrs:?}"
        );
        let (_, _, es) = search(&mut anon, &group, Scope::Base, "(objectClass=*)", attrs);
        assert_eq!(
            values(&es[0], "member"),
            [dn("alice"), dn("bob")],
            "{attrs:?}"
        );
    }
    // Not asked for: not computed.
    let (_, _, es) = search(&mut admin, &group, Scope::Base, "(objectClass=*)", &["cn"]);
    assert!(!es[0].attrs.contains_key("member"));

    // Compare: TRUE and FALSE, not noSuchAttribute; as the requester.
    let cmp =
        |c: &mut ldap3::LdapConn, who: &str| c.compare(&group, "member", dn(who)).unwrap().0.rc;
    assert_eq!(cmp(&mut admin, "alice"), 6);
    assert_eq!(cmp(&mut admin, "carol"), 5);
    assert_eq!(cmp(&mut admin, "hidden"), 6);
    assert_eq!(cmp(&mut anon, "hidden"), 5);

    // Filters on the group.
    let found = |c: &mut ldap3::LdapConn, f: &str| -> Vec<String> {
        let (rc, _, es) = search(c, BASE, Scope::Subtree, f, &["1.1"]);
        assert_eq!(rc, 0, "{f}");
        es.into_iter().map(|e| e.dn).collect()
    };
    assert_eq!(
        found(&mut admin, &format!("(member={})", dn("bob"))),
        [group.as_str()]
    );
    assert_eq!(
        found(
            &mut admin,
            &format!("(&(cn=engineers)(member={}))", dn("hidden"))
        ),
        [group.as_str()]
    );
    assert!(found(&mut anon, &format!("(member={})", dn("hidden"))).is_empty());
    assert!(found(&mut admin, &format!("(member={})", dn("carol"))).is_empty());

    // memberOf of a dynamic member: asked for by name only.
    let (_, _, es) = search(
        &mut admin,
        &dn("alice"),
        Scope::Base,
        "(objectClass=*)",
        &["memberOf"],
    );
    assert_eq!(values(&es[0], "memberOf"), [group.as_str()]);
    for attrs in [&["*"][..], &["+"][..]] {
        let (_, _, es) = search(
            &mut admin,
            &dn("alice"),
            Scope::Base,
            "(objectClass=*)",
            attrs,
        );
        assert!(
            !es[0].attrs.contains_key("memberOf"),
            "{attrs:?}: {:?}",
            es[0].attrs
        );
    }
    let (_, _, es) = search(
        &mut admin,
        &dn("carol"),
        Scope::Base,
        "(objectClass=*)",
        &["memberOf"],
    );
    assert!(!es[0].attrs.contains_key("memberOf"));

    // Membership follows the data: no stored member values to maintain.
    admin
        .modify(
            &dn("carol"),
            vec![ldap3::Mod::Replace("ou", ["eng"].into())],
        )
        .unwrap()
        .success()
        .unwrap();
    assert_eq!(cmp(&mut admin, "carol"), 6);
}

#[test]
fn dynamic_lists_merge_the_attributes_their_urls_name() {
    let srv = start();
    populate(&srv);
    let list = format!("cn=mails,{BASE}");
    let mut admin = srv.admin();
    let (_, _, es) = search(
        &mut admin,
        &list,
        Scope::Base,
        "(objectClass=*)",
        &["mail", "cn"],
    );
    assert_eq!(values(&es[0], "mail"), ["carol@example.com"]);
    assert_eq!(
        values(&es[0], "cn"),
        ["mails"],
        "only the attributes the URL names"
    );
}
