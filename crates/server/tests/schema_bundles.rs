//! Schema bundles over a real socket: a server started with
//! `schemas = ["rfc2307bis", "openssh-lpk", "sudo"]` stores an rfc2307bis group (groupOfNames
//! with the auxiliary posixGroup), a user with SSH keys and a sudo rule, answers searches on
//! them, and publishes the bundles' definitions in its subschema entry; without them the same
//! entries are refused.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;

use common::{search, TestServer, BASE};
use ldap3::Scope;

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@example";

fn bundled() -> TestServer {
    TestServer::start_with(|c| {
        c.schemas = vec!["rfc2307bis".into(), "openssh-lpk".into(), "sudo".into()];
    })
}

/// The three entries of the test, under ou=people / ou=groups / ou=sudoers.
fn add_entries(c: &mut ldap3::LdapConn) -> Vec<u32> {
    for name in ["people", "groups", "sudoers"] {
        let dn = format!("ou={name},{BASE}");
        let attrs = vec![
            ("objectClass", HashSet::from(["organizationalUnit"])),
            ("ou", HashSet::from([name])),
        ];
        let r = c.add(&dn, attrs).unwrap();
        assert_eq!(r.rc, 0, "{dn}: {r:?}");
    }
    let alice = format!("uid=alice,ou=people,{BASE}");
    let mut rcs = Vec::new();
    let r = c
        .add(
            &alice,
            vec![
                (
                    "objectClass",
                    HashSet::from(["inetOrgPerson", "posixAccount", "ldapPublicKey"]),
                ),
                ("uid", HashSet::from(["alice"])),
                ("cn", HashSet::from(["Alice"])),
                ("sn", HashSet::from(["Liddell"])),
                ("uidNumber", HashSet::from(["10001"])),
                ("gidNumber", HashSet::from(["10001"])),
                ("homeDirectory", HashSet::from(["/home/alice"])),
                ("sshPublicKey", HashSet::from([KEY])),
            ],
        )
        .unwrap();
    rcs.push(r.rc);
    let r = c
        .add(
            &format!("cn=admins,ou=groups,{BASE}"),
            vec![
                ("objectClass", HashSet::from(["groupOfNames", "posixGroup"])),
                ("cn", HashSet::from(["admins"])),
                ("gidNumber", HashSet::from(["20000"])),
                ("member", HashSet::from([alice.as_str()])),
            ],
        )
        .unwrap();
    rcs.push(r.rc);
    let r = c
        .add(
            &format!("cn=admins-all,ou=sudoers,{BASE}"),
            vec![
                ("objectClass", HashSet::from(["sudoRole"])),
                ("cn", HashSet::from(["admins-all"])),
                ("sudoUser", HashSet::from(["alice", "%admins"])),
                ("sudoHost", HashSet::from(["ALL"])),
                ("sudoCommand", HashSet::from(["ALL"])),
                ("sudoRunAsUser", HashSet::from(["root"])),
                ("sudoOption", HashSet::from(["!authenticate"])),
                ("sudoOrder", HashSet::from(["10"])),
            ],
        )
        .unwrap();
    rcs.push(r.rc);
    rcs
}

fn dns(c: &mut ldap3::LdapConn, filter: &str) -> Vec<String> {
    let (rc, _, entries) = search(c, BASE, Scope::Subtree, filter, &["1.1"]);
    assert_eq!(rc, 0, "{filter}");
    let mut v: Vec<String> = entries.into_iter().map(|e| e.dn).collect();
    v.sort();
    v
}

#[test]
fn bundled_types_are_stored_and_searched() {
    let srv = bundled();
    let mut c = srv.admin();
    assert_eq!(add_entries(&mut c), vec![0, 0, 0]);

    let sudo = format!("cn=admins-all,ou=sudoers,{BASE}");
    let group = format!("cn=admins,ou=groups,{BASE}");
    let alice = format!("uid=alice,ou=people,{BASE}");
    assert_eq!(dns(&mut c, "(sudoUser=alice)"), vec![sudo.clone()]);
    // caseExactIA5Match, as the sudo schema says: user names are case sensitive.
    assert!(dns(&mut c, "(sudoUser=Alice)").is_empty());
    assert_eq!(dns(&mut c, "(sudoUser=%adm*)"), vec![sudo.clone()]);
    assert_eq!(
        dns(&mut c, "(&(objectClass=sudoRole)(sudoOrder>=5))"),
        vec![sudo]
    );
    assert_eq!(dns(&mut c, "(objectClass=posixGroup)"), vec![group.clone()]);
    assert_eq!(
        dns(
            &mut c,
            "(&(objectClass=posixGroup)(member=uid=alice,ou=people,dc=example,dc=com))"
        ),
        vec![group]
    );
    assert_eq!(
        dns(&mut c, "(objectClass=ldapPublicKey)"),
        vec![alice.clone()]
    );

    let (rc, _, entries) = search(
        &mut c,
        &alice,
        Scope::Base,
        "(objectClass=*)",
        &["sshPublicKey"],
    );
    assert_eq!(rc, 0);
    assert_eq!(entries[0].attrs["sshPublicKey"], vec![KEY.to_string()]);

    // A posixGroup is auxiliary under rfc2307bis: alone it has no structural class.
    let r = c
        .add(
            &format!("cn=lonely,ou=groups,{BASE}"),
            vec![
                ("objectClass", HashSet::from(["posixGroup"])),
                ("cn", HashSet::from(["lonely"])),
                ("gidNumber", HashSet::from(["20001"])),
            ],
        )
        .unwrap();
    assert_eq!(r.rc, 65, "{r:?}");
}

#[test]
fn the_subschema_entry_publishes_the_bundles() {
    let srv = bundled();
    let mut c = srv.anon();
    let (rc, _, entries) = search(
        &mut c,
        "cn=Subschema",
        Scope::Base,
        "(objectClass=subschema)",
        &["objectClasses", "attributeTypes"],
    );
    assert_eq!(rc, 0);
    let e = &entries[0];
    let find = |attr: &str, name: &str| -> String {
        e.attrs[attr]
            .iter()
            .find(|d| d.contains(&format!("NAME '{name}'")))
            .unwrap_or_else(|| panic!("{attr}: no {name}"))
            .clone()
    };
    let pg = find("objectClasses", "posixGroup");
    assert!(
        pg.starts_with("( 1.3.6.1.1.1.2.2 ") && pg.contains("AUXILIARY"),
        "{pg}"
    );
    assert!(find("objectClasses", "groupOfMembers").starts_with("( 1.3.6.1.1.1.2.18 "));
    assert!(find("objectClasses", "ldapPublicKey").starts_with("( 1.3.6.1.4.1.24552.500.1.1.2.0 "));
    assert!(find("objectClasses", "sudoRole").starts_with("( 1.3.6.1.4.1.15953.9.2.1 "));
    let su = find("attributeTypes", "sudoUser");
    assert!(su.contains("EQUALITY caseExactIA5Match"), "{su}");
    assert!(find("attributeTypes", "sshPublicKey").contains("EQUALITY octetStringMatch"));
}

#[test]
fn without_the_bundles_the_same_entries_are_refused() {
    let srv = TestServer::start(false);
    let mut c = srv.admin();
    // objectClassViolation (65) for the structural-only RFC 2307 posixGroup next to
    // groupOfNames; undefinedAttributeType / objectClassViolation for the others.
    let rcs = add_entries(&mut c);
    assert!(rcs.iter().all(|&rc| rc != 0), "{rcs:?}");
}

#[test]
fn nis_and_rfc2307bis_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = server::Config {
        data_dir: dir.path().to_path_buf(),
        schemas: vec!["nis".into(), "rfc2307bis".into()],
        ..server::Config::default()
    };
    let e = match server::Server::start(config) {
        Ok(_) => panic!("started with nis and rfc2307bis"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("schemas: ") && e.contains("'nis'") && e.contains("'rfc2307bis'"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}
