//! Access control over real connections: the default policy, a matrix of subjects × targets ×
//! operations under configured rules, the search-filter oracle, hidden entries answering
//! exactly like absent ones, and size limits per identity.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;

use common::{search, TestServer, ADMIN_DN, ADMIN_PW};
use dit::acl::{ClauseSpec, RuleSpec};
use ldap3::{LdapConn, Mod, Scope, SearchEntry};

const PEOPLE: &str = "ou=people,dc=example,dc=com";
const GROUPS: &str = "ou=groups,dc=example,dc=com";
const ROBOT: &str = "cn=robot,ou=services,dc=example,dc=com";

fn user(uid: &str) -> String {
    format!("uid={uid},{PEOPLE}")
}

fn dns(entries: &[SearchEntry]) -> HashSet<String> {
    entries.iter().map(|e| e.dn.clone()).collect()
}

fn has(e: &SearchEntry, attr: &str) -> bool {
    e.attrs.keys().any(|k| k.eq_ignore_ascii_case(attr))
        || e.bin_attrs.keys().any(|k| k.eq_ignore_ascii_case(attr))
}

fn by(who: &str, rights: &[&str]) -> ClauseSpec {
    ClauseSpec {
        who: who.into(),
        rights: rights.iter().map(|r| r.to_string()).collect(),
    }
}

/// The matrix policy (first match wins):
/// 0. userPassword of grace: only her own changes, no binds (no `auth` for anonymous).
/// 1. every userPassword: owner writes, anonymous binds.
/// 2. judy's entry (base): only the engineering group sees it.
/// 3. mail of people (one level): owner reads/searches/writes, engineering reads/searches/compares.
/// 4. people below ou=people matching (objectClass=inetOrgPerson): owner writes; engineering
///    adds and deletes; all users read/search/compare.
/// 5. everything under ou=groups: the service accounts' subtree manages it, users read.
/// 6. everything else: users read and search.
fn matrix_policy() -> Vec<RuleSpec> {
    vec![
        RuleSpec {
            dn: Some(user("grace")),
            scope: Some("base".into()),
            attrs: Some(vec!["userPassword".into()]),
            by: vec![by("self", &["write"])],
            ..RuleSpec::default()
        },
        RuleSpec {
            attrs: Some(vec!["userPassword".into()]),
            by: vec![by("self", &["write"]), by("anonymous", &["auth"])],
            ..RuleSpec::default()
        },
        RuleSpec {
            dn: Some(user("judy")),
            scope: Some("base".into()),
            by: vec![by(
                "group:cn=engineering,ou=groups,dc=example,dc=com",
                &["read", "search", "compare"],
            )],
            ..RuleSpec::default()
        },
        RuleSpec {
            dn: Some(PEOPLE.into()),
            scope: Some("one".into()),
            attrs: Some(vec!["mail".into()]),
            by: vec![
                by("self", &["read", "search", "write"]),
                by(
                    "group:cn=engineering,ou=groups,dc=example,dc=com",
                    &["read", "search", "compare"],
                ),
            ],
            ..RuleSpec::default()
        },
        RuleSpec {
            dn: Some(PEOPLE.into()),
            scope: Some("children".into()),
            filter: Some("(objectClass=inetOrgPerson)".into()),
            by: vec![
                by("self", &["read", "search", "compare", "write"]),
                by(
                    "group:cn=engineering,ou=groups,dc=example,dc=com",
                    &["read", "search", "compare", "add", "delete"],
                ),
                by("users", &["read", "search", "compare"]),
            ],
            ..RuleSpec::default()
        },
        RuleSpec {
            dn: Some(GROUPS.into()),
            by: vec![
                by(
                    "subtree:ou=services,dc=example,dc=com",
                    &["read", "search", "write", "add", "delete"],
                ),
                by("users", &["read", "search"]),
            ],
            ..RuleSpec::default()
        },
        RuleSpec {
            by: vec![by("users", &["read", "search"])],
            ..RuleSpec::default()
        },
    ]
}

fn matrix_server() -> TestServer {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.access = Some(matrix_policy());
    });
    let mut admin = srv.admin();
    admin
        .add(
            ROBOT,
            vec![
                ("objectClass", HashSet::from(["inetOrgPerson"])),
                ("cn", HashSet::from(["robot"])),
                ("sn", HashSet::from(["Robot"])),
                ("userPassword", HashSet::from(["robot-pw"])),
            ],
        )
        .expect("add")
        .success()
        .expect("robot added");
    srv
}

/// Who × what, with the expected result code, against the matrix policy.
#[test]
fn access_matrix() {
    let srv = matrix_server();
    let alice_dn = user("alice"); // engineering
    let erin_dn = user("erin"); // sales
    let mut alice = srv.bind_as(&alice_dn, "password");
    let mut erin = srv.bind_as(&erin_dn, "password");
    let mut robot = srv.bind_as(ROBOT, "robot-pw");
    let mut anon = srv.anon();
    let mut admin = srv.admin();

    // --- bind (auth) ---
    assert_eq!(
        srv.bind_rc(&user("grace"), "password"),
        49,
        "no auth right: like a wrong password"
    );
    assert_eq!(srv.bind_rc(&user("grace"), "wrong"), 49);
    assert_eq!(srv.bind_rc(&user("frank"), "password"), 0);

    // --- base target: judy is visible to engineering only ---
    let (rc, _, es) = search(
        &mut alice,
        &user("judy"),
        Scope::Base,
        "(objectClass=*)",
        &["cn", "mail"],
    );
    assert_eq!((rc, es.len()), (0, 1), "engineering sees judy");
    assert!(
        has(&es[0], "mail"),
        "rule 2 covers all of judy's attributes"
    );
    let (rc, matched, es) = search(
        &mut erin,
        &user("judy"),
        Scope::Base,
        "(objectClass=*)",
        &[],
    );
    assert_eq!((rc, es.len()), (32, 0), "hidden base entry is noSuchObject");
    assert_eq!(
        matched.to_lowercase(),
        PEOPLE,
        "matchedDN stops at what erin sees"
    );
    let below_judy = format!("cn=x,{}", user("judy"));
    let (rc, matched, _) = search(&mut erin, &below_judy, Scope::Base, "(objectClass=*)", &[]);
    assert_eq!(rc, 32);
    assert_eq!(
        matched.to_lowercase(),
        PEOPLE,
        "matchedDN never names a hidden entry"
    );
    let (rc, matched, _) = search(&mut alice, &below_judy, Scope::Base, "(objectClass=*)", &[]);
    assert_eq!((rc, matched.to_lowercase()), (32, user("judy")));
    // Absent and hidden look the same to erin.
    let (rc_absent, matched_absent, _) = search(
        &mut erin,
        &user("nobody"),
        Scope::Base,
        "(objectClass=*)",
        &[],
    );
    assert_eq!(
        (rc_absent, matched_absent.to_lowercase()),
        (32, PEOPLE.to_string())
    );
    let (_, _, es) = search(&mut erin, PEOPLE, Scope::OneLevel, "(uid=judy)", &[]);
    assert!(es.is_empty(), "hidden entries are not returned by searches");
    let (_, _, es) = search(&mut erin, PEOPLE, Scope::OneLevel, "(objectClass=*)", &[]);
    assert_eq!(es.len(), 9, "ten people but judy");
    let (_, _, es) = search(&mut alice, PEOPLE, Scope::OneLevel, "(objectClass=*)", &[]);
    assert_eq!(es.len(), 10);
    // Counts of children do not reveal hidden ones either.
    let count = |c: &mut LdapConn| {
        let (_, _, es) = search(
            c,
            PEOPLE,
            Scope::Base,
            "(objectClass=*)",
            &["numSubordinates"],
        );
        es[0].attrs["numSubordinates"][0].clone()
    };
    assert_eq!(count(&mut erin), "9");
    assert_eq!(count(&mut alice), "10");

    // --- attribute target: mail ---
    let (_, _, es) = search(
        &mut alice,
        &user("bob"),
        Scope::Base,
        "(objectClass=*)",
        &["mail", "cn"],
    );
    assert!(
        has(&es[0], "mail") && has(&es[0], "cn"),
        "engineering reads mail"
    );
    let (_, _, es) = search(
        &mut erin,
        &user("bob"),
        Scope::Base,
        "(objectClass=*)",
        &["mail", "cn"],
    );
    assert!(
        !has(&es[0], "mail") && has(&es[0], "cn"),
        "sales does not: the entry comes without it"
    );
    let (_, _, es) = search(
        &mut erin,
        &erin_dn,
        Scope::Base,
        "(objectClass=*)",
        &["mail"],
    );
    assert!(has(&es[0], "mail"), "own mail");
    // userPassword is never returned, not even to its owner.
    let (_, _, es) = search(
        &mut erin,
        &erin_dn,
        Scope::Base,
        "(objectClass=*)",
        &["*", "+"],
    );
    assert!(!has(&es[0], "userPassword"));
    let (_, _, es) = search(
        &mut admin,
        &erin_dn,
        Scope::Base,
        "(objectClass=*)",
        &["userPassword"],
    );
    assert!(
        has(&es[0], "userPassword"),
        "the administrator reads everything"
    );

    // --- search filter oracle: an attribute one may not search is Undefined ---
    let (_, _, es) = search(
        &mut erin,
        PEOPLE,
        Scope::OneLevel,
        "(mail=alice@example.com)",
        &["1.1"],
    );
    assert!(es.is_empty(), "erin may not search alice's mail");
    let (_, _, es) = search(
        &mut erin,
        PEOPLE,
        Scope::OneLevel,
        "(!(mail=alice@example.com))",
        &["1.1"],
    );
    assert_eq!(
        dns(&es),
        HashSet::from([erin_dn.clone()]),
        "NOT of Undefined is Undefined; her own mail she may search"
    );
    let (_, _, es) = search(
        &mut erin,
        PEOPLE,
        Scope::OneLevel,
        "(mail=erin@example.com)",
        &["1.1"],
    );
    assert_eq!(es.len(), 1, "own mail is searchable");
    let (_, _, es) = search(
        &mut alice,
        PEOPLE,
        Scope::OneLevel,
        "(mail=bob@example.com)",
        &["1.1"],
    );
    assert_eq!(es.len(), 1, "engineering searches mail");
    let (_, _, es) = search(
        &mut alice,
        PEOPLE,
        Scope::OneLevel,
        "(userPassword=*)",
        &["1.1"],
    );
    assert!(
        es.is_empty(),
        "userPassword is searchable by nobody but the administrator"
    );
    let (_, _, es) = search(
        &mut admin,
        PEOPLE,
        Scope::OneLevel,
        "(userPassword=*)",
        &["1.1"],
    );
    assert!(es.len() >= 10);
    let (_, _, es) = search(
        &mut erin,
        PEOPLE,
        Scope::OneLevel,
        "(:caseIgnoreIA5Match:=alice@example.com)",
        &["1.1"],
    );
    assert!(
        es.is_empty(),
        "an extensible match over all attributes skips those one may not search"
    );
    let (_, _, es) = search(
        &mut alice,
        PEOPLE,
        Scope::OneLevel,
        "(:caseIgnoreIA5Match:=alice@example.com)",
        &["1.1"],
    );
    assert_eq!(es.len(), 1);

    // --- compare ---
    let cmp =
        |c: &mut LdapConn, dn: &str, a: &str, v: &str| c.compare(dn, a, v).expect("compare").0.rc;
    assert_eq!(
        cmp(&mut alice, &user("bob"), "mail", "bob@example.com"),
        6,
        "compareTrue"
    );
    assert_eq!(
        cmp(&mut erin, &user("bob"), "mail", "bob@example.com"),
        50,
        "visible entry, no compare right"
    );
    assert_eq!(
        cmp(&mut erin, &user("bob"), "cn", "Bob Brown"),
        cmp(&mut alice, &user("bob"), "cn", "Bob Brown")
    );
    assert_eq!(
        cmp(&mut erin, &user("judy"), "cn", "Judy Jones"),
        32,
        "hidden entry: noSuchObject"
    );
    assert_eq!(
        cmp(&mut alice, &user("bob"), "userPassword", "password"),
        50
    );
    assert_eq!(
        cmp(&mut anon, &user("bob"), "cn", "Bob Brown"),
        32,
        "anonymous sees nothing"
    );
    assert_eq!(
        cmp(&mut admin, &user("judy"), "mail", "judy@example.com"),
        6
    );

    // --- modify (write on each attribute) ---
    let modify = |c: &mut LdapConn, dn: &str, attr: &str, v: &str| {
        c.modify(dn, vec![Mod::Replace(attr, HashSet::from([v]))])
            .expect("modify")
            .rc
    };
    assert_eq!(
        modify(&mut erin, &erin_dn, "mail", "erin@new.example.com"),
        0,
        "own mail"
    );
    assert_eq!(
        modify(&mut erin, &erin_dn, "title", "Head of Sales"),
        0,
        "self write (rule 4)"
    );
    assert_eq!(
        modify(&mut erin, &alice_dn, "title", "x"),
        50,
        "someone else's entry"
    );
    assert_eq!(
        modify(&mut erin, &user("judy"), "title", "x"),
        32,
        "hidden entry: noSuchObject"
    );
    assert_eq!(
        modify(&mut alice, &user("bob"), "title", "x"),
        50,
        "engineering reads, does not write"
    );
    assert_eq!(
        modify(&mut anon, &user("bob"), "title", "x"),
        8,
        "anonymous writes: strongerAuthRequired"
    );
    assert_eq!(
        modify(&mut erin, &erin_dn, "userPassword", "erin-new"),
        0,
        "own password"
    );
    assert_eq!(srv.bind_rc(&erin_dn, "erin-new"), 0);
    assert_eq!(modify(&mut alice, &erin_dn, "userPassword", "x"), 50);
    assert_eq!(
        modify(
            &mut robot,
            "cn=sales,ou=groups,dc=example,dc=com",
            "description",
            "Sales!"
        ),
        0,
        "subtree subject manages groups"
    );
    assert_eq!(
        modify(
            &mut alice,
            "cn=sales,ou=groups,dc=example,dc=com",
            "description",
            "x"
        ),
        50
    );

    // --- add (the add right on the new entry) and delete ---
    let zed = user("zed");
    let person = |uid: &'static str| {
        vec![
            ("objectClass", HashSet::from(["inetOrgPerson"])),
            ("cn", HashSet::from([uid])),
            ("sn", HashSet::from([uid])),
        ]
    };
    assert_eq!(
        erin.add(&zed, person("zed")).expect("add").rc,
        50,
        "sales may not add people"
    );
    assert_eq!(anon.add(&zed, person("zed")).expect("add").rc, 8);
    assert_eq!(
        alice.add(&zed, person("zed")).expect("add").rc,
        0,
        "engineering adds people"
    );
    let group = |cn: &'static str| {
        vec![
            ("objectClass", HashSet::from(["groupOfNames"])),
            ("cn", HashSet::from([cn])),
            (
                "member",
                HashSet::from(["uid=alice,ou=people,dc=example,dc=com"]),
            ),
        ]
    };
    let ops_group = format!("cn=ops,{GROUPS}");
    assert_eq!(alice.add(&ops_group, group("ops")).expect("add").rc, 50);
    assert_eq!(robot.add(&ops_group, group("ops")).expect("add").rc, 0);
    let under_judy = format!("cn=note,{}", user("judy"));
    assert_eq!(
        erin.add(&under_judy, group("note")).expect("add").rc,
        32,
        "adding below a hidden entry is noSuchObject"
    );
    assert_eq!(erin.delete(&zed).expect("delete").rc, 50);
    assert_eq!(alice.delete(&ops_group).expect("delete").rc, 50);
    assert_eq!(robot.delete(&ops_group).expect("delete").rc, 0);
    assert_eq!(
        erin.delete(&user("judy")).expect("delete").rc,
        32,
        "hidden: noSuchObject"
    );

    // --- modrdn: delete at the old name, add at the new one ---
    assert_eq!(
        erin.modifydn(&zed, "uid=zed2", true, None)
            .expect("modrdn")
            .rc,
        50
    );
    assert_eq!(
        alice
            .modifydn(&zed, "uid=zed2", true, None)
            .expect("modrdn")
            .rc,
        0
    );
    assert_eq!(
        alice
            .modifydn(&user("zed2"), "uid=zed2", true, Some(GROUPS))
            .expect("modrdn")
            .rc,
        50,
        "engineering may not add under ou=groups"
    );
    assert_eq!(alice.delete(&user("zed2")).expect("delete").rc, 0);

    // --- password modify extended operation (write on userPassword) ---
    let pm = |c: &mut LdapConn, target: &str| {
        let req = ldap3::exop::PasswordModify {
            user_id: Some(target),
            old_pass: None,
            new_pass: Some("pm-new"),
        };
        c.extended(req).expect("exop").1.rc
    };
    assert_eq!(pm(&mut alice, &user("bob")), 50, "someone else's password");
    assert_eq!(pm(&mut alice, &alice_dn), 0, "own password");
    assert_eq!(pm(&mut erin, &user("judy")), 32, "hidden entry");
    assert_eq!(srv.bind_rc(&alice_dn, "pm-new"), 0);

    // The administrator is never refused.
    assert_eq!(modify(&mut admin, &user("judy"), "title", "Editor"), 0);
    let _ = ADMIN_DN;
}

/// The policy of a server started without rules.
#[test]
fn default_policy() {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.access = None;
    });
    let alice_dn = user("alice");
    let mut anon = srv.anon();
    // Anonymous: root DSE and schema, and binds; nothing else.
    let (rc, _, es) = search(
        &mut anon,
        "",
        Scope::Base,
        "(objectClass=*)",
        &["namingContexts"],
    );
    assert_eq!((rc, es.len()), (0, 1), "root DSE");
    let (rc, _, es) = search(
        &mut anon,
        "cn=Subschema",
        Scope::Base,
        "(objectClass=*)",
        &["attributeTypes"],
    );
    assert_eq!((rc, es.len()), (0, 1), "schema");
    let (rc, matched, es) = search(&mut anon, PEOPLE, Scope::OneLevel, "(objectClass=*)", &[]);
    assert_eq!(
        (rc, matched.as_str(), es.len()),
        (32, "", 0),
        "entries are hidden from anonymous clients"
    );
    let (rc, _, es) = search(
        &mut anon,
        "dc=example,dc=com",
        Scope::Subtree,
        "(objectClass=*)",
        &[],
    );
    assert_eq!((rc, es.len()), (32, 0));
    assert_eq!(srv.bind_rc(&alice_dn, "password"), 0, "anonymous may bind");
    assert_eq!(srv.bind_rc(&alice_dn, "wrong"), 49);

    // Users read and search everything but userPassword.
    let mut alice = srv.bind_as(&alice_dn, "password");
    let (rc, _, es) = search(
        &mut alice,
        "dc=example,dc=com",
        Scope::Subtree,
        "(objectClass=*)",
        &["*", "+"],
    );
    assert_eq!(rc, 0);
    assert!(es.len() >= 16, "the whole demo tree: {}", es.len());
    assert!(es.iter().all(|e| !has(e, "userPassword")));
    let (_, _, es) = search(
        &mut alice,
        PEOPLE,
        Scope::OneLevel,
        "(userPassword=password)",
        &["1.1"],
    );
    assert!(es.is_empty(), "no userPassword oracle");
    let (_, _, es) = search(
        &mut alice,
        PEOPLE,
        Scope::OneLevel,
        "(mail=bob@example.com)",
        &["1.1"],
    );
    assert_eq!(es.len(), 1);
    assert_eq!(
        alice
            .compare(&user("bob"), "cn", "Bob Brown")
            .expect("compare")
            .0
            .rc,
        6
    );
    assert_eq!(
        alice
            .compare(&user("bob"), "userPassword", "password")
            .expect("compare")
            .0
            .rc,
        50
    );

    // Users change their own password and nothing else.
    let rc = alice
        .modify(
            &alice_dn,
            vec![Mod::Replace("userPassword", HashSet::from(["new-pw"]))],
        )
        .expect("modify")
        .rc;
    assert_eq!(rc, 0, "own password");
    assert_eq!(srv.bind_rc(&alice_dn, "new-pw"), 0);
    let rc = alice
        .modify(
            &alice_dn,
            vec![Mod::Replace("title", HashSet::from(["Boss"]))],
        )
        .expect("modify")
        .rc;
    assert_eq!(rc, 50, "own other attributes: no");
    let rc = alice
        .modify(
            &user("bob"),
            vec![Mod::Replace("userPassword", HashSet::from(["x"]))],
        )
        .expect("modify")
        .rc;
    assert_eq!(rc, 50);
    assert_eq!(alice.delete(&user("bob")).expect("delete").rc, 50);

    // The administrator does everything.
    let mut admin = srv.admin();
    let (_, _, es) = search(
        &mut admin,
        &alice_dn,
        Scope::Base,
        "(objectClass=*)",
        &["userPassword"],
    );
    assert!(has(&es[0], "userPassword"));
    assert_eq!(admin.delete(&user("bob")).expect("delete").rc, 0);
    let _ = ADMIN_PW;
}

#[test]
fn size_limits_per_identity() {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.size_limit_anonymous = 2;
        c.size_limit = 5;
    });
    let mut anon = srv.anon();
    let (rc, _, es) = search(
        &mut anon,
        PEOPLE,
        Scope::OneLevel,
        "(objectClass=*)",
        &["1.1"],
    );
    assert_eq!((rc, es.len()), (4, 2), "anonymous limit");
    let mut alice = srv.bind_as(&user("alice"), "password");
    let (rc, _, es) = search(
        &mut alice,
        PEOPLE,
        Scope::OneLevel,
        "(objectClass=*)",
        &["1.1"],
    );
    assert_eq!((rc, es.len()), (4, 5), "users' limit");
    let mut admin = srv.admin();
    let (rc, _, es) = search(
        &mut admin,
        PEOPLE,
        Scope::OneLevel,
        "(objectClass=*)",
        &["1.1"],
    );
    assert_eq!((rc, es.len()), (0, 10), "the administrator has none");
}

/// The same through OpenLDAP's tools: ldapsearch as a user never shows userPassword, and
/// ldapmodify of someone else's entry is refused with the right code.
#[test]
fn ldap_utils_see_the_policy() {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.access = None;
    });
    let alice_dn = user("alice");
    let (rc, out, _) = common::tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-H",
            &srv.url,
            "-D",
            &alice_dn,
            "-w",
            "password",
            "-b",
            PEOPLE,
            "(uid=bob)",
            "*",
        ],
        None,
    );
    assert_eq!(rc, 0);
    assert!(
        out.contains("dn: uid=bob,ou=people,dc=example,dc=com"),
        "{out}"
    );
    assert!(!out.to_lowercase().contains("userpassword"), "{out}");
    let (rc, _, err) = common::tool(
        "ldapmodify",
        &["-x", "-H", &srv.url, "-D", &alice_dn, "-w", "password"],
        Some("dn: uid=bob,ou=people,dc=example,dc=com\nchangetype: modify\nreplace: title\ntitle: x\n"),
    );
    assert_eq!(rc, 50, "{err}");
    assert!(err.contains("Insufficient access"), "{err}");
    let (rc, out, _) = common::tool(
        "ldapsearch",
        &["-x", "-LLL", "-H", &srv.url, "-b", PEOPLE, "(uid=bob)"],
        None,
    );
    assert_eq!(rc, 32, "anonymous: {out}");
}
