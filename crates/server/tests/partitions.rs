//! One directory over several servers (design.md "Beyond one machine", docs/scale-out.md):
//! `dc=example,dc=com` split over three Linden servers — the root partition holds the top of
//! the tree and a referral object (RFC 3296) for each of `ou=p1` and `ou=p2`, which two other
//! servers hold as naming contexts of their own, with the root as their default referral.
//!
//! - Through OpenLDAP's `back-meta` (Debian's slapd, one `uri` per partition): a subtree
//!   search from the top returns every partition's entries once; reads, binds and writes reach
//!   the partition that holds the entry.
//! - Without a proxy: a client that chases referrals itself (`ldapsearch -C`) finds the same
//!   entries through the root's continuation references; a partition refers a search above
//!   its naming context to the root.
//!
//! Needs `/usr/sbin/slapd` with back-meta and back-ldap (Debian's `slapd` package) and
//! ldapsearch: ignored unless run with `LINDEN_TEST_SLAPD=1 cargo test -p server --test
//! partitions -- --ignored`, which scripts/test.sh does. Bounded: a few dozen entries, every
//! wait a bounded poll.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::{BTreeSet, HashSet};

use common::{TestServer, ADMIN_DN, ADMIN_PW};
use ldap3::{LdapConn, Mod, Scope};

use common::slapd::MODULES;
const ROOT: &str = "dc=example,dc=com";
/// People per partition.
const PEOPLE: usize = 20;

/// slapd as the proxy, killed when dropped.
struct Proxy {
    _process: common::slapd::Slapd,
    url: String,
    _dir: tempfile::TempDir,
}

/// back-meta over the partitions: the root's target excludes the subtrees the others hold
/// (so that each DN has one target) and drops the root's continuation references (the other
/// targets answer for them); each target binds as the partition's administrator for
/// operations whose client is not bound there (a deployment would use `mode=self` and let
/// the partitions authorize the proxy).
fn proxy(root: &str, parts: &[(&str, &str)]) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let idassert = format!(
        "idassert-bind bindmethod=simple binddn=\"{ADMIN_DN}\" credentials={ADMIN_PW} mode=none\nidassert-authzFrom \"*\"\n"
    );
    let mut conf = format!(
        "include /etc/ldap/schema/core.schema\ninclude /etc/ldap/schema/cosine.schema\ninclude /etc/ldap/schema/inetorgperson.schema\npidfile {d}/slapd.pid\nmodulepath {MODULES}\nmoduleload back_ldap\nmoduleload back_meta\ndatabase meta\nsuffix \"{ROOT}\"\nuri \"{root}/{ROOT}\"\nnorefs yes\n",
        d = d.display()
    );
    for (_, suffix) in parts {
        conf.push_str(&format!("subtree-exclude \"dn.subtree:{suffix}\"\n"));
    }
    conf.push_str(&idassert);
    for (url, suffix) in parts {
        conf.push_str(&format!("uri \"{url}/{suffix}\"\n{idassert}"));
    }
    std::fs::write(d.join("slapd.conf"), conf).unwrap();
    let url = format!("ldap://127.0.0.1:{}", common::free_port());
    let process = common::slapd::Slapd::start(&d.join("slapd.conf"), &format!("{url}/"), &url);
    Proxy {
        _process: process,
        url,
        _dir: dir,
    }
}

fn add(c: &mut LdapConn, dn: &str, attrs: Vec<(&str, HashSet<&str>)>) {
    c.add(dn, attrs).unwrap().success().unwrap();
}

fn person(c: &mut LdapConn, dn: &str, uid: &str) {
    add(
        c,
        dn,
        vec![
            ("objectClass", HashSet::from(["inetOrgPerson"])),
            ("uid", HashSet::from([uid])),
            ("cn", HashSet::from([uid])),
            ("sn", HashSet::from(["P"])),
            ("userPassword", HashSet::from(["pw-of-a-person"])),
        ],
    );
}

/// The DNs (lower case) a subtree search from the top finds through `c`, each as often as
/// it came.
fn all_dns(c: &mut LdapConn) -> Vec<String> {
    let (rc, _, entries) = common::search(c, ROOT, Scope::Subtree, "(objectClass=*)", &["1.1"]);
    assert_eq!(rc, 0);
    let mut dns: Vec<String> = entries.into_iter().map(|e| e.dn.to_lowercase()).collect();
    dns.sort();
    dns
}

#[test]
#[ignore = "needs slapd with back-meta (Debian's slapd) and ldapsearch; run with LINDEN_TEST_SLAPD=1"]
fn partitions_behind_back_meta_and_for_clients_that_chase_referrals() {
    if !common::slapd::opted_in(
        "partitions_behind_back_meta_and_for_clients_that_chase_referrals",
        &["back_meta.so", "back_ldap.so"],
    ) {
        return;
    }
    let root = TestServer::start(false);
    let suffixes = ["ou=p1,dc=example,dc=com", "ou=p2,dc=example,dc=com"];
    let parts: Vec<TestServer> = suffixes
        .iter()
        .map(|s| {
            let (s, up) = (s.to_string(), format!("{}/", root.url));
            TestServer::start_with(move |c| {
                c.suffixes = vec![s];
                c.referral = vec![up];
            })
        })
        .collect();
    // The data: the top and a group on the root, with a referral object for each partition;
    // people on the partitions.
    let mut expected = BTreeSet::from([ROOT.to_string(), format!("ou=groups,{ROOT}")]);
    let mut r = root.admin();
    add(
        &mut r,
        &format!("ou=groups,{ROOT}"),
        vec![
            ("objectClass", HashSet::from(["organizationalUnit"])),
            ("ou", HashSet::from(["groups"])),
        ],
    );
    for (i, (suffix, part)) in suffixes.iter().zip(&parts).enumerate() {
        let name = format!("p{}", i + 1);
        let url = format!("{}/{suffix}", part.url);
        add(
            &mut r,
            suffix,
            vec![
                (
                    "objectClass",
                    HashSet::from(["referral", "extensibleObject"]),
                ),
                ("ou", HashSet::from([name.as_str()])),
                ("ref", HashSet::from([url.as_str()])),
            ],
        );
        let mut c = part.admin();
        let (rc, _, _) = common::search(&mut c, suffix, Scope::Base, "(objectClass=*)", &[]);
        assert_eq!(rc, 0, "the partition holds its naming context's entry");
        expected.insert(suffix.to_string());
        for n in 0..PEOPLE {
            let uid = format!("{name}u{n}");
            let dn = format!("uid={uid},{suffix}");
            person(&mut c, &dn, &uid);
            expected.insert(dn);
        }
    }
    let expected: Vec<String> = expected.into_iter().collect();

    // Through the proxy: every entry once.
    let meta = proxy(
        &root.url,
        &[(&parts[0].url, suffixes[0]), (&parts[1].url, suffixes[1])],
    );
    let mut m = LdapConn::new(&meta.url).unwrap();
    m.simple_bind(ADMIN_DN, ADMIN_PW)
        .unwrap()
        .success()
        .unwrap();
    assert_eq!(
        all_dns(&mut m),
        expected,
        "a subtree search through back-meta"
    );
    let (rc, _, one) = common::search(&mut m, ROOT, Scope::Subtree, "(uid=p2u7)", &["uid"]);
    assert_eq!((rc, one.len()), (0, 1));
    assert_eq!(
        one[0].dn.to_lowercase(),
        format!("uid=p2u7,{}", suffixes[1])
    );

    // A bind reaches the partition holding the entry.
    let mut person_conn = LdapConn::new(&meta.url).unwrap();
    let bound = person_conn
        .simple_bind(&format!("uid=p1u3,{}", suffixes[0]), "pw-of-a-person")
        .unwrap();
    assert_eq!(bound.rc, 0, "a bind through back-meta: {bound:?}");
    let wrong = person_conn
        .simple_bind(&format!("uid=p1u3,{}", suffixes[0]), "wrong")
        .unwrap();
    assert_eq!(wrong.rc, 49);

    // Writes reach the partition holding the entry, and nothing else.
    let target = format!("uid=p1u5,{}", suffixes[0]);
    m.modify(
        &target,
        vec![Mod::Replace(
            "description",
            HashSet::from(["through the proxy"]),
        )],
    )
    .unwrap()
    .success()
    .unwrap();
    let mut p1 = parts[0].admin();
    let (_, _, got) = common::search(
        &mut p1,
        &target,
        Scope::Base,
        "(objectClass=*)",
        &["description"],
    );
    assert_eq!(
        got[0].attrs.get("description"),
        Some(&vec!["through the proxy".to_string()])
    );
    let new = format!("uid=newcomer,{}", suffixes[1]);
    person(&mut m, &new, "newcomer");
    let mut p2 = parts[1].admin();
    let (rc, _, _) = common::search(&mut p2, &new, Scope::Base, "(objectClass=*)", &[]);
    assert_eq!(rc, 0, "an add through the proxy lands on its partition");
    let (rc, _, _) = common::search(&mut r, &new, Scope::Base, "(objectClass=*)", &[]);
    assert_eq!(
        rc, 10,
        "the root refers it, holding only the referral object"
    );
    m.delete(&new).unwrap().success().unwrap();
    let (rc, _, _) = common::search(&mut p2, &new, Scope::Base, "(objectClass=*)", &[]);
    assert_eq!(rc, 32);

    // Without a proxy: the root's continuation references lead a client that chases them
    // to the same entries.
    let (rc, out, err) = common::tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-C",
            "-H",
            &root.url,
            "-b",
            ROOT,
            "(objectClass=*)",
            "1.1",
        ],
        None,
    );
    assert_eq!(rc, 0, "ldapsearch -C: {err}");
    let mut chased: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("dn: "))
        .map(str::to_lowercase)
        .collect();
    chased.sort();
    assert_eq!(chased, expected, "ldapsearch -C from the root");
    // Without -C the root names the partitions instead.
    let (_, out, _) = common::tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-H",
            &root.url,
            "-b",
            ROOT,
            "(objectClass=*)",
            "1.1",
        ],
        None,
    );
    for (suffix, part) in suffixes.iter().zip(&parts) {
        assert!(
            out.contains(&format!("# ref{}/{suffix}??sub", part.url)),
            "continuation reference to {suffix}: {out}"
        );
    }
    // A partition refers what lies above its naming context to the root.
    let mut c = parts[0].admin();
    let ldap3::SearchResult(_, res) = c
        .search(ROOT, Scope::Subtree, "(objectClass=*)", vec!["1.1"])
        .unwrap();
    assert_eq!(
        (res.rc, res.refs),
        (10, vec![format!("{}/{ROOT}??sub", root.url)])
    );
}
