//! Matched values (RFC 3876), proxied authorization v2 (RFC 4370), dontUseCopy (RFC 6171) and
//! the dereference control (draft-masarati-ldap-deref) over a real socket, sent by OpenLDAP's
//! own clients (`ldapsearch -E mv=… / deref=…`, `-e '!authzid=…'`). The same requests are
//! checked against slapd 2.5 in tests/conformance/test_controls_more.py. The Relax Rules control
//! (draft-zeilenga-ldap-relax) lets the administrator add an entry with its entryUUID and
//! creation stamps (tests/conformance/test_relax.py).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::path::Path;

use common::{open_read_policy, tool, TestServer, ADMIN_DN, ADMIN_PW};
use dit::acl::{ClauseSpec, RuleSpec};

const ALICE: &str = "uid=alice,ou=people,dc=example,dc=com";
const BOB: &str = "uid=bob,ou=people,dc=example,dc=com";
const CAROL: &str = "uid=carol,ou=people,dc=example,dc=com";
const DAVE: &str = "uid=dave,ou=people,dc=example,dc=com";
const ENGINEERING: &str = "cn=engineering,ou=groups,dc=example,dc=com";
const PW: &str = "password";

/// The conformance policy, plus: bob may act for alice; carol's entry is hidden from everyone
/// but the administrator.
fn policy() -> Vec<RuleSpec> {
    let by = |who: &str, rights: &[&str]| ClauseSpec {
        who: who.into(),
        rights: rights.iter().map(|r| r.to_string()).collect(),
    };
    let mut rules = open_read_policy();
    let last = rules.pop().expect("catch-all rule");
    rules.push(RuleSpec {
        dn: Some(CAROL.into()),
        scope: Some("base".into()),
        by: vec![by("*", &["none"])],
        ..RuleSpec::default()
    });
    rules.push(RuleSpec {
        dn: Some(ALICE.into()),
        scope: Some("base".into()),
        attrs: Some(vec!["entry".into()]),
        by: vec![
            by(
                &format!("dn:{BOB}"),
                &["read", "search", "compare", "proxy"],
            ),
            by("*", &["read", "search", "compare"]),
        ],
        ..RuleSpec::default()
    });
    rules.push(last);
    rules
}

fn start(access_log: Option<&Path>) -> TestServer {
    let log = access_log.map(Path::to_path_buf);
    TestServer::start_with(move |c| {
        c.demo = true;
        c.access = Some(policy());
        if let Some(l) = log {
            c.access_log = server::logs::LogTarget::File(l);
        }
    })
}

/// Runs `name -x -H url -D dn -w pw <args>`.
fn run_as(
    srv: &TestServer,
    name: &str,
    dn: &str,
    pw: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> (i32, String, String) {
    let mut all = vec!["-x", "-H", srv.url.as_str(), "-D", dn, "-w", pw];
    all.extend_from_slice(args);
    tool(name, &all, stdin)
}

fn search_as(srv: &TestServer, dn: &str, pw: &str, args: &[&str]) -> String {
    let mut all = vec!["-LLL", "-o", "ldif-wrap=no"];
    all.extend_from_slice(args);
    let (code, out, err) = run_as(srv, "ldapsearch", dn, pw, &all, None);
    assert_eq!(code, 0, "ldapsearch {args:?}: {err}");
    out
}

#[test]
fn root_dse_lists_the_new_controls() {
    let srv = start(None);
    let (code, out, err) = tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-H",
            &srv.url,
            "-b",
            "",
            "-s",
            "base",
            "supportedControl",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    for oid in [
        "1.2.826.0.1.3344810.2.3",
        "2.16.840.1.113730.3.4.18",
        "1.3.6.1.1.22",
        "1.3.6.1.4.1.4203.666.5.16",
    ] {
        assert!(
            out.contains(&format!("supportedControl: {oid}")),
            "{oid}: {out}"
        );
    }
}

#[test]
fn matched_values_returns_only_matching_values() {
    let srv = start(None);
    let out = search_as(
        &srv,
        BOB,
        PW,
        &["-b", ALICE, "-s", "base", "-E", "!mv=(mail=*@example.com)"],
    );
    assert!(out.contains("mail: alice@example.com"), "{out}");
    // Attributes without a matching value are left out.
    assert!(!out.contains("cn:") && !out.contains("uid:"), "{out}");

    // Several kinds of item: substrings, ordering, presence, extensible.
    let out = search_as(
        &srv,
        BOB,
        PW,
        &[
            "-b",
            ALICE,
            "-s",
            "base",
            "-E",
            "!mv=((cn=Alice*)(uidNumber>=10000)(uid=*)(sn:caseExactMatch:=nobody))",
        ],
    );
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with("dn:")).collect();
    let mut lines: Vec<&str> = lines.into_iter().filter(|l| !l.is_empty()).collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["cn: Alice Anderson", "uid: alice", "uidNumber: 10001"],
        "{out}"
    );

    // An undefined attribute matches nothing and is no error.
    let out = search_as(
        &srv,
        BOB,
        PW,
        &["-b", ALICE, "-s", "base", "-E", "!mv=(noSuchAttr=x)", "cn"],
    );
    assert_eq!(out.trim(), format!("dn: {ALICE}"));
}

#[test]
fn proxied_authorization_acts_as_the_proxied_identity() {
    let dir = tempfile::tempdir().expect("tmp");
    let access = dir.path().join("access.log");
    let srv = start(Some(&access));
    let whoami = |dn: &str, authzid: &str| {
        let ext = format!("!authzid={authzid}");
        run_as(&srv, "ldapwhoami", dn, PW, &["-e", &ext], None)
    };
    // Bob holds the proxy right on alice's entry: both forms name her.
    for authzid in [format!("dn:{ALICE}"), "u:alice".to_string()] {
        let (code, out, err) = whoami(BOB, &authzid);
        assert_eq!(code, 0, "{authzid}: {err}");
        assert_eq!(
            out.trim().to_lowercase(),
            format!("dn:{ALICE}"),
            "{authzid}"
        );
    }
    // The empty authzId is the anonymous identity.
    let (code, out, err) = whoami(BOB, "");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "anonymous");
    // Dave holds no such right; nobody may act for an entry that does not exist.
    for (who, authzid) in [
        (DAVE, format!("dn:{ALICE}")),
        (DAVE, "u:alice".to_string()),
        (BOB, "dn:uid=ghost,ou=people,dc=example,dc=com".to_string()),
        (BOB, "u:ghost".to_string()),
        (BOB, "bogus".to_string()),
    ] {
        let (code, _, err) = whoami(who, &authzid);
        assert_ne!(code, 0, "{who} as {authzid}");
        assert!(
            err.contains("Proxied Authorization Denied (123)"),
            "{who} as {authzid}: {err}"
        );
    }

    // Access control uses the proxied identity: alice may change her own password, bob may
    // not; as alice he may, and the change is stamped with her name.
    let change = format!(
        "dn: {ALICE}\nchangetype: modify\nreplace: userPassword\nuserPassword: changed-pw\n"
    );
    let (code, _, err) = run_as(&srv, "ldapmodify", BOB, PW, &[], Some(&change));
    assert_eq!(code, 50, "{err}");
    let (code, _, err) = run_as(
        &srv,
        "ldapmodify",
        BOB,
        PW,
        &["-e", &format!("!authzid=dn:{ALICE}")],
        Some(&change),
    );
    assert_eq!(code, 0, "{err}");
    let out = search_as(
        &srv,
        ADMIN_DN,
        ADMIN_PW,
        &["-b", ALICE, "-s", "base", "modifiersName"],
    );
    assert!(
        out.to_lowercase()
            .contains(&format!("modifiersname: {ALICE}")),
        "{out}"
    );
    let (code, _, err) = run_as(&srv, "ldapwhoami", ALICE, "changed-pw", &[], None);
    assert_eq!(code, 0, "alice binds with her new password: {err}");

    // The access log shows both identities.
    let log = common::wait_for(&access, |t| t.contains(" MODIFY "));
    let line = log
        .lines()
        .find(|l| l.contains(" MODIFY ") && l.contains("authzid="))
        .unwrap_or_else(|| panic!("a proxied MODIFY line: {log}"));
    assert!(line.contains(&format!("bound=\"{BOB}\"")), "{line}");
    assert!(line.contains(&format!("authzid=\"{ALICE}\"")), "{line}");
}

#[test]
fn proxied_authorization_must_be_critical() {
    let srv = start(None);
    // ldapwhoami refuses to send it non-critical; ldapsearch's generic -E sends it as asked.
    let (code, _, err) = run_as(
        &srv,
        "ldapsearch",
        BOB,
        PW,
        &[
            "-b",
            ALICE,
            "-s",
            "base",
            "-E",
            &format!("2.16.840.1.113730.3.4.18=:dn:{ALICE}"),
        ],
        None,
    );
    assert_eq!(code, 2, "protocolError: {err}");
}

#[test]
fn dont_use_copy_is_accepted_when_critical() {
    let srv = start(None);
    let out = search_as(
        &srv,
        BOB,
        PW,
        &["-b", ALICE, "-s", "base", "-E", "!1.3.6.1.1.22", "uid"],
    );
    assert!(out.contains("uid: alice"), "{out}");
    let (code, _, err) = run_as(
        &srv,
        "ldapsearch",
        BOB,
        PW,
        &["-b", ALICE, "-s", "base", "-E", "1.3.6.1.1.22", "uid"],
        None,
    );
    assert_eq!(code, 2, "non-critical: protocolError: {err}");
}

#[test]
fn deref_returns_members_the_requester_may_see() {
    let srv = start(None);
    let out = search_as(
        &srv,
        BOB,
        PW,
        &[
            "-b",
            ENGINEERING,
            "-s",
            "base",
            "-E",
            "!deref=member:uid,cn,userPassword",
            "cn",
        ],
    );
    // ldapsearch prints the control as comments: `# member: <attr=value>;…;DN`.
    assert!(
        out.contains(&format!(
            "# member: <uid=alice>;<cn=Alice Anderson>;{ALICE}"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("# member: <uid=bob>;<cn=Bob Brown>;{BOB}")),
        "{out}"
    );
    // Carol's entry is hidden from bob: her DN (a value he may read) without attributes.
    assert!(out.contains(&format!("# member: {CAROL}\n")), "{out}");
    assert!(!out.contains("userPassword"), "{out}");

    // The administrator sees everything.
    let out = search_as(
        &srv,
        ADMIN_DN,
        ADMIN_PW,
        &[
            "-b",
            ENGINEERING,
            "-s",
            "base",
            "-E",
            "!deref=member:uid",
            "1.1",
        ],
    );
    assert!(
        out.contains(&format!("# member: <uid=carol>;{CAROL}")),
        "{out}"
    );

    // A non-DN attribute is a protocolError when critical.
    let (code, _, err) = run_as(
        &srv,
        "ldapsearch",
        BOB,
        PW,
        &["-b", ENGINEERING, "-s", "base", "-E", "!deref=cn:uid"],
        None,
    );
    assert_eq!(code, 2, "{err}");
}

const RELAX: &str = "1.3.6.1.4.1.4203.666.5.12";

fn relax(critical: bool) -> ldap3::controls::RawControl {
    ldap3::controls::RawControl {
        ctype: RELAX.into(),
        crit: critical,
        val: None,
    }
}

/// The attributes of a person put back as it was: its entryUUID and creation stamps with it.
fn kept_person(uid: &str, uuid: &str) -> Vec<(String, std::collections::HashSet<String>)> {
    let one = |v: &str| std::iter::once(v.to_string()).collect();
    vec![
        ("objectClass".into(), one("inetOrgPerson")),
        ("uid".into(), one(uid)),
        ("cn".into(), one("Kept Person")),
        ("sn".into(), one("Person")),
        ("entryUUID".into(), one(uuid)),
        ("createTimestamp".into(), one("20240102030405Z")),
        ("creatorsName".into(), one("cn=someone,dc=example,dc=com")),
        ("modifyTimestamp".into(), one("20240203040506Z")),
        ("modifiersName".into(), one("cn=other,dc=example,dc=com")),
    ]
}

/// Relax Rules: the administrator's add keeps the entryUUID and stamps it carries (the
/// server's entryCSN is its own); without the control they are refused; an entryUUID that
/// another entry has, or that is no UUID, is refused; anyone else is insufficientAccessRights;
/// a value is protocolError; the control is advertised.
#[test]
fn relax_rules_lets_the_administrator_add_an_entry_with_its_entry_uuid() {
    use ldap3::{Scope, SearchEntry};
    let srv = start(None);
    let mut admin = srv.admin();
    let (dse, _) = admin
        .search("", Scope::Base, "(objectClass=*)", vec!["supportedControl"])
        .expect("root DSE")
        .success()
        .expect("root DSE");
    let dse = SearchEntry::construct(dse.into_iter().next().expect("root DSE"));
    assert!(
        dse.attrs["supportedControl"].iter().any(|o| o == RELAX),
        "{dse:?}"
    );

    const UUID: &str = "0b7f3a52-1c4e-4d8e-9a39-5f2d8c1e7a10";
    let dn = "uid=kept,ou=people,dc=example,dc=com";
    let r = admin.add(dn, kept_person("kept", UUID)).expect("add");
    assert_eq!(r.rc, 19, "without the control: {r:?}");
    assert!(r.text.contains("no user modification"), "{r:?}");

    let r = admin
        .with_controls(relax(true))
        .add(dn, kept_person("kept", UUID))
        .expect("add");
    assert_eq!(r.rc, 0, "{r:?}");
    let (found, _) = admin
        .search(dn, Scope::Base, "(objectClass=*)", vec!["+"])
        .expect("search")
        .success()
        .expect("search");
    let e = SearchEntry::construct(found.into_iter().next().expect("the entry"));
    let one = |a: &str| e.attrs.get(a).and_then(|v| v.first()).cloned();
    assert_eq!(one("entryUUID").as_deref(), Some(UUID));
    assert_eq!(one("createTimestamp").as_deref(), Some("20240102030405Z"));
    assert_eq!(
        one("creatorsName").as_deref(),
        Some("cn=someone,dc=example,dc=com")
    );
    assert_eq!(one("modifyTimestamp").as_deref(), Some("20240203040506Z"));
    assert_eq!(
        one("modifiersName").as_deref(),
        Some("cn=other,dc=example,dc=com")
    );
    assert!(one("entryCSN").is_some(), "{e:?}");

    // One entry per entryUUID (in upper case it is the same UUID).
    let r = admin
        .with_controls(relax(false))
        .add(
            "uid=twin,ou=people,dc=example,dc=com",
            kept_person("twin", &UUID.to_ascii_uppercase()),
        )
        .expect("add");
    assert_eq!(r.rc, 19, "{r:?}");
    assert!(
        r.text.contains(&format!("already the entryUUID of '{dn}'")),
        "{r:?}"
    );
    let r = admin
        .with_controls(relax(false))
        .add(
            "uid=twin,ou=people,dc=example,dc=com",
            kept_person("twin", "not-a-uuid"),
        )
        .expect("add");
    assert_eq!(r.rc, 21, "{r:?}");

    // Only the administrator.
    let mut bob = srv.bind_as(BOB, PW);
    let r = bob
        .with_controls(relax(true))
        .add(
            "uid=bobs,ou=people,dc=example,dc=com",
            kept_person("bobs", "5d1d8e3c-9a1f-4b7e-8c2d-3e4f5a6b7c8d"),
        )
        .expect("add");
    assert_eq!(r.rc, 50, "{r:?}");
    assert!(r.text.contains("Relax Rules"), "{r:?}");

    // No value; and an add is what it applies to.
    let mut with_value = relax(true);
    with_value.val = Some(b"x".to_vec());
    let r = admin
        .with_controls(with_value)
        .add(
            "uid=other,ou=people,dc=example,dc=com",
            kept_person("other", "6d1d8e3c-9a1f-4b7e-8c2d-3e4f5a6b7c8d"),
        )
        .expect("add");
    assert_eq!(r.rc, 2, "{r:?}");
    let r = admin
        .with_controls(relax(true))
        .modify(dn, vec![ldap3::Mod::Replace("description", ["x"].into())])
        .expect("modify");
    assert_eq!(r.rc, 12, "{r:?}");
}
