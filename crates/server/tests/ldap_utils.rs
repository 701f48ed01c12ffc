//! OpenLDAP's command-line clients against a real Linden server: what an administrator would
//! type, checked by exit code and output. The tools are required (scripts/install-test-deps.sh);
//! a missing one fails the test with a pointer to the installer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use common::{tool, TestServer, ADMIN_DN, ADMIN_PW, BASE};

const ALICE: &str = "uid=alice,ou=people,dc=example,dc=com";
const PEOPLE: &str = "ou=people,dc=example,dc=com";

/// Runs `name -x -H url <args>`.
fn run(srv: &TestServer, name: &str, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut all = vec!["-x", "-H", srv.url.as_str()];
    all.extend_from_slice(args);
    tool(name, &all, stdin)
}

/// Same, bound as the administrator.
fn run_admin(
    srv: &TestServer,
    name: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> (i32, String, String) {
    let mut all = vec!["-D", ADMIN_DN, "-w", ADMIN_PW];
    all.extend_from_slice(args);
    run(srv, name, &all, stdin)
}

/// `ldapsearch -LLL` output, asserting exit code 0.
fn search(srv: &TestServer, base: &str, scope: &str, filter: &str, attrs: &[&str]) -> String {
    let mut args = vec![
        "-LLL",
        "-o",
        "ldif-wrap=no",
        "-b",
        base,
        "-s",
        scope,
        filter,
    ];
    args.extend_from_slice(attrs);
    let (code, out, err) = run_admin(srv, "ldapsearch", &args, None);
    assert_eq!(code, 0, "ldapsearch -b {base} {filter}: {err}");
    out
}

fn dn_lines(ldif: &str) -> Vec<String> {
    ldif.lines()
        .filter(|l| l.starts_with("dn:"))
        .map(|l| l.to_lowercase())
        .collect()
}

fn base_exists(srv: &TestServer, dn: &str) -> bool {
    let (code, _, err) = run_admin(
        srv,
        "ldapsearch",
        &["-LLL", "-b", dn, "-s", "base", "(objectClass=*)", "1.1"],
        None,
    );
    match code {
        0 => true,
        32 => false,
        c => panic!("ldapsearch -b {dn}: exit {c}: {err}"),
    }
}

#[test]
fn ldapsearch_finds_entries_and_reports_limits() {
    let srv = TestServer::start(true);
    let (code, out, err) = run(
        &srv,
        "ldapsearch",
        &[
            "-LLL",
            "-o",
            "ldif-wrap=no",
            "-b",
            BASE,
            "(uid=alice)",
            "cn",
            "mail",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("dn: {ALICE}")), "{out}");
    assert!(out.contains("cn: Alice Anderson"), "{out}");
    assert!(out.contains("mail: alice@example.com"), "{out}");
    assert!(!out.contains("sn:"), "only the requested attributes: {out}");
    assert_eq!(dn_lines(&out).len(), 1);

    // plain (non -LLL) output ends with the result summary
    let (code, out, _) = run(
        &srv,
        "ldapsearch",
        &["-b", PEOPLE, "-s", "one", "(objectClass=*)", "1.1"],
        None,
    );
    assert_eq!(code, 0);
    assert!(out.contains("result: 0 Success"), "{out}");
    assert!(out.contains("# numEntries: 10"), "{out}");

    // size limit 1 on a multi-entry search: exit code 4 and one entry
    let (code, out, err) = run(
        &srv,
        "ldapsearch",
        &[
            "-LLL",
            "-z",
            "1",
            "-b",
            PEOPLE,
            "-s",
            "one",
            "(objectClass=*)",
            "1.1",
        ],
        None,
    );
    assert_eq!(code, 4, "sizeLimitExceeded: {err}");
    assert_eq!(dn_lines(&out).len(), 1, "{out}");
    assert!(err.contains("Size limit exceeded"), "{err}");

    // missing base
    let (code, _, err) = run(
        &srv,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "uid=ghost,ou=people,dc=example,dc=com",
            "-s",
            "base",
        ],
        None,
    );
    assert_eq!(code, 32, "{err}");
    assert!(err.contains("No such object"), "{err}");
    assert!(
        err.to_lowercase()
            .contains(&format!("matched dn: {PEOPLE}")),
        "matched DN reported: {err}"
    );

    // userPassword: hidden from anonymous, visible (hashed) to the admin
    let (_, out, _) = run(
        &srv,
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            ALICE,
            "-s",
            "base",
            "(objectClass=*)",
            "userPassword",
        ],
        None,
    );
    assert!(
        !out.contains("userPassword"),
        "anonymous sees userPassword: {out}"
    );
    let out = search(&srv, ALICE, "base", "(objectClass=*)", &["userPassword"]);
    // ldapsearch prints userPassword base64-encoded ("userPassword:: e1...", "{" = 0x7b → "e1")
    assert!(
        out.contains("userPassword:: e"),
        "admin sees userPassword, hashed ({{...}} → base64 e...): {out}"
    );

    // operational attributes with +
    let out = search(&srv, ALICE, "base", "(objectClass=*)", &["+"]);
    assert!(out.contains("entryUUID: "), "{out}");
    assert!(
        out.contains("structuralObjectClass: inetOrgPerson"),
        "{out}"
    );
    assert!(!out.contains("mail:"), "{out}");

    // root DSE as ldapsearch -s base -b "" shows it
    let (code, out, err) = run(
        &srv,
        "ldapsearch",
        &["-LLL", "-b", "", "-s", "base", "+"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("namingContexts: dc=example,dc=com"), "{out}");
    assert!(
        out.contains("supportedExtension: 1.3.6.1.4.1.4203.1.11.3"),
        "{out}"
    );
}

#[test]
fn ldapadd_ldapmodify_ldapdelete() {
    let srv = TestServer::start(true);
    let ldif = "\
dn: ou=contractors,dc=example,dc=com
objectClass: organizationalUnit
ou: contractors

dn: uid=kim,ou=contractors,dc=example,dc=com
objectClass: inetOrgPerson
uid: kim
cn: Kim Kowalski
sn: Kowalski
mail: kim@example.com
description: temporary
";
    let (code, out, err) = run_admin(&srv, "ldapadd", &[], Some(ldif));
    assert_eq!(code, 0, "ldapadd: {out} {err}");
    assert!(
        out.contains("adding new entry \"uid=kim,ou=contractors,dc=example,dc=com\""),
        "{out}"
    );
    let found = search(&srv, BASE, "sub", "(uid=kim)", &["cn"]);
    assert!(
        found.contains("dn: uid=kim,ou=contractors,dc=example,dc=com")
            && found.contains("cn: Kim Kowalski"),
        "{found}"
    );

    // adding again: entryAlreadyExists
    let (code, _, err) = run_admin(&srv, "ldapadd", &[], Some(ldif));
    assert_eq!(code, 68, "{err}");
    // anonymous add: strongerAuthRequired
    let anon_ldif = "dn: cn=x,dc=example,dc=com\nobjectClass: device\ncn: x\n";
    let (code, _, err) = run(&srv, "ldapadd", &[], Some(anon_ldif));
    assert_eq!(code, 8, "{err}");
    assert!(
        err.contains("modifications require authentication"),
        "{err}"
    );

    let change = "\
dn: uid=kim,ou=contractors,dc=example,dc=com
changetype: modify
add: telephoneNumber
telephoneNumber: +1 555 0199
-
replace: mail
mail: kim@example.org
-
delete: description
-
";
    let (code, out, err) = run_admin(&srv, "ldapmodify", &[], Some(change));
    assert_eq!(code, 0, "ldapmodify: {out} {err}");
    assert!(
        out.contains("modifying entry \"uid=kim,ou=contractors,dc=example,dc=com\""),
        "{out}"
    );
    let got = search(
        &srv,
        "uid=kim,ou=contractors,dc=example,dc=com",
        "base",
        "(objectClass=*)",
        &[],
    );
    assert!(got.contains("telephoneNumber: +1 555 0199"), "{got}");
    assert!(
        got.contains("mail: kim@example.org") && !got.contains("kim@example.com"),
        "{got}"
    );
    assert!(!got.contains("description:"), "{got}");

    // a change that fails reports the LDAP code as the exit code
    let bad = "dn: uid=kim,ou=contractors,dc=example,dc=com\nchangetype: modify\ndelete: sn\n-\n";
    let (code, _, err) = run_admin(&srv, "ldapmodify", &[], Some(bad));
    assert_eq!(code, 65, "delete MUST attribute: {err}");

    // modrdn change record with a new superior
    let modrdn = "\
dn: uid=kim,ou=contractors,dc=example,dc=com
changetype: modrdn
newrdn: uid=kimk
deleteoldrdn: 1
newsuperior: ou=people,dc=example,dc=com
";
    let (code, out, err) = run_admin(&srv, "ldapmodify", &[], Some(modrdn));
    assert_eq!(code, 0, "modrdn: {out} {err}");
    assert!(!base_exists(
        &srv,
        "uid=kim,ou=contractors,dc=example,dc=com"
    ));
    let got = search(
        &srv,
        "uid=kimk,ou=people,dc=example,dc=com",
        "base",
        "(objectClass=*)",
        &["uid"],
    );
    assert!(
        got.contains("uid: kimk") && !got.contains("uid: kim\n"),
        "old RDN value deleted: {got}"
    );

    // add + delete change records in one ldapmodify run
    let records = "\
dn: cn=printer,dc=example,dc=com
changetype: add
objectClass: device
cn: printer

dn: cn=printer,dc=example,dc=com
changetype: delete
";
    let (code, _, err) = run_admin(&srv, "ldapmodify", &[], Some(records));
    assert_eq!(code, 0, "{err}");
    assert!(!base_exists(&srv, "cn=printer,dc=example,dc=com"));

    // ldapdelete: non-leaf refused, leaf removed, missing reported
    let (code, _, err) = run_admin(&srv, "ldapdelete", &[PEOPLE], None);
    assert_eq!(code, 66, "{err}");
    let (code, _, err) = run_admin(
        &srv,
        "ldapdelete",
        &["ou=contractors,dc=example,dc=com"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(!base_exists(&srv, "ou=contractors,dc=example,dc=com"));
    let (code, _, err) = run_admin(
        &srv,
        "ldapdelete",
        &["ou=contractors,dc=example,dc=com"],
        None,
    );
    assert_eq!(code, 32, "{err}");
    // -r deletes a subtree (the tool searches and deletes leaves first)
    let (code, _, err) = run_admin(
        &srv,
        "ldapdelete",
        &["-r", "ou=groups,dc=example,dc=com"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(!base_exists(&srv, "ou=groups,dc=example,dc=com"));
    assert!(!base_exists(&srv, "cn=sales,ou=groups,dc=example,dc=com"));
}

#[test]
fn ldapmodrdn_renames() {
    let srv = TestServer::start(true);
    // -r: remove the old RDN value
    let (code, _, err) = run_admin(
        &srv,
        "ldapmodrdn",
        &["-r", "uid=bob,ou=people,dc=example,dc=com", "uid=robert"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(!base_exists(&srv, "uid=bob,ou=people,dc=example,dc=com"));
    let got = search(
        &srv,
        "uid=robert,ou=people,dc=example,dc=com",
        "base",
        "(objectClass=*)",
        &["uid", "cn"],
    );
    assert!(
        got.contains("uid: robert") && !got.contains("uid: bob"),
        "{got}"
    );
    assert!(got.contains("cn: Bob Brown"), "{got}");

    // without -r the old value stays
    let (code, _, err) = run_admin(
        &srv,
        "ldapmodrdn",
        &["uid=carol,ou=people,dc=example,dc=com", "uid=caroline"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let got = search(
        &srv,
        "uid=caroline,ou=people,dc=example,dc=com",
        "base",
        "(objectClass=*)",
        &["uid"],
    );
    assert!(
        got.contains("uid: caroline") && got.contains("uid: carol\n"),
        "{got}"
    );

    // -s: new superior
    let (code, _, err) = run_admin(
        &srv,
        "ldapmodrdn",
        &[
            "-r",
            "-s",
            "ou=services,dc=example,dc=com",
            "uid=dave,ou=people,dc=example,dc=com",
            "uid=dave",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(base_exists(&srv, "uid=dave,ou=services,dc=example,dc=com"));
    assert!(!base_exists(&srv, "uid=dave,ou=people,dc=example,dc=com"));

    // onto an existing name
    let (code, _, err) = run_admin(
        &srv,
        "ldapmodrdn",
        &["-r", "uid=erin,ou=people,dc=example,dc=com", "uid=alice"],
        None,
    );
    assert_eq!(code, 68, "{err}");
    // as anonymous
    let (code, _, err) = run(
        &srv,
        "ldapmodrdn",
        &["-r", "uid=erin,ou=people,dc=example,dc=com", "uid=erin2"],
        None,
    );
    assert_eq!(code, 8, "{err}");
}

#[test]
fn ldapcompare_true_and_false() {
    let srv = TestServer::start(true);
    let (code, out, err) = run(&srv, "ldapcompare", &[ALICE, "sn:Anderson"], None);
    assert_eq!(code, 6, "compareTrue: {out} {err}");
    assert!(out.trim() == "TRUE", "{out}");
    let (code, out, err) = run(&srv, "ldapcompare", &[ALICE, "sn:Brown"], None);
    assert_eq!(code, 5, "compareFalse: {out} {err}");
    assert!(out.trim() == "FALSE", "{out}");
    // base64 value form
    let (code, _, _) = run(
        &srv,
        "ldapcompare",
        &[ALICE, "cn::QWxpY2UgQW5kZXJzb24="],
        None,
    );
    assert_eq!(code, 6, "cn:: base64 'Alice Anderson'");
    let (code, _, err) = run(
        &srv,
        "ldapcompare",
        &["uid=ghost,ou=people,dc=example,dc=com", "sn:x"],
        None,
    );
    assert_eq!(code, 32, "{err}");
    let (code, _, err) = run(&srv, "ldapcompare", &[ALICE, "userPassword:password"], None);
    assert_eq!(code, 50, "anonymous compare of userPassword: {err}");
}

#[test]
fn ldapwhoami_identities() {
    let srv = TestServer::start(true);
    let (code, out, err) = run_admin(&srv, "ldapwhoami", &[], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "dn:cn=admin,dc=example,dc=com");
    let (code, out, err) = run(&srv, "ldapwhoami", &["-D", ALICE, "-w", "password"], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("dn:{ALICE}"));
    let (code, out, err) = run(&srv, "ldapwhoami", &[], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "anonymous");
    let (code, _, err) = run(&srv, "ldapwhoami", &["-D", ALICE, "-w", "wrong"], None);
    assert_eq!(code, 49, "{err}");
    assert!(err.contains("Invalid credentials"), "{err}");
}

#[test]
fn ldappasswd_sets_and_generates_passwords() {
    let srv = TestServer::start(true);
    let bob = "uid=bob,ou=people,dc=example,dc=com";
    let (code, out, err) = run_admin(&srv, "ldappasswd", &["-s", "newpw", bob], None);
    assert_eq!(code, 0, "ldappasswd: {out} {err}");
    let (code, out, err) = run(&srv, "ldapwhoami", &["-D", bob, "-w", "newpw"], None);
    assert_eq!(code, 0, "bind with the new password: {err}");
    assert_eq!(out.trim(), format!("dn:{bob}"));
    let (code, _, _) = run(&srv, "ldapwhoami", &["-D", bob, "-w", "password"], None);
    assert_eq!(code, 49, "old password still works");

    // no -s: the server generates one and ldappasswd prints it
    let (code, out, err) = run_admin(&srv, "ldappasswd", &[bob], None);
    assert_eq!(code, 0, "{err}");
    let generated = out
        .lines()
        .find_map(|l| l.strip_prefix("New password: "))
        .unwrap_or_else(|| panic!("no generated password in ldappasswd output: {out:?}"))
        .to_string();
    let (code, out, err) = run(&srv, "ldapwhoami", &["-D", bob, "-w", &generated], None);
    assert_eq!(code, 0, "bind with the generated password: {err}");
    assert_eq!(out.trim(), format!("dn:{bob}"));

    // a user changes their own password with the old one (-a), then binds with the new one
    let (code, _, err) = run(
        &srv,
        "ldappasswd",
        &[
            "-D", ALICE, "-w", "password", "-a", "password", "-s", "mine",
        ],
        None,
    );
    assert_eq!(code, 0, "self change: {err}");
    let (code, out, _) = run(&srv, "ldapwhoami", &["-D", ALICE, "-w", "mine"], None);
    assert_eq!((code, out.trim()), (0, format!("dn:{ALICE}").as_str()));
    // but not someone else's
    // (ldappasswd exits 1 on any failed result and prints the LDAP result)
    let (code, out, err) = run(
        &srv,
        "ldappasswd",
        &["-D", ALICE, "-w", "mine", "-s", "x", bob],
        None,
    );
    assert_ne!(code, 0, "user set another user's password: {out} {err}");
    assert!(
        format!("{out}{err}").contains("Insufficient access (50)"),
        "{out} {err}"
    );
    let (code, _, _) = run(&srv, "ldapwhoami", &["-D", bob, "-w", "x"], None);
    assert_eq!(code, 49, "bob's password was changed by alice");
}
