//! TLS over real connections: StartTLS and LDAPS with the generated self-signed certificate,
//! `require_tls_for_bind` / `require_tls_for_writes`, SASL EXTERNAL with a client certificate
//! and SASL PLAIN, with ldap3 and with OpenLDAP's tools.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;
use std::path::Path;

use common::pki::{subject, TestCa};
use common::{tool, tool_env, TestServer, ADMIN_DN, ADMIN_PW};
use ldap3::{LdapConn, LdapConnSettings, Mod, Scope, SearchEntry};

const ALICE: &str = "uid=alice,ou=people,dc=example,dc=com";

fn starttls(url: &str) -> LdapConn {
    let s = LdapConnSettings::new()
        .set_starttls(true)
        .set_no_tls_verify(true);
    LdapConn::with_settings(s, url).expect("StartTLS connection")
}

fn ldaps(url: &str) -> LdapConn {
    let s = LdapConnSettings::new().set_no_tls_verify(true);
    LdapConn::with_settings(s, url).expect("LDAPS connection")
}

fn whoami(c: &mut LdapConn) -> String {
    let (exop, res) = c
        .extended(ldap3::exop::WhoAmI)
        .expect("whoami")
        .success()
        .expect("whoami ok");
    let _ = res;
    String::from_utf8(exop.val.unwrap_or_default()).expect("utf-8")
}

#[test]
fn starttls_and_ldaps_with_the_generated_certificate() {
    let srv = TestServer::start(true);
    assert!(
        srv.data.path().join(server::tls::GENERATED_CERT).exists(),
        "a self-signed certificate is created in the data directory"
    );
    for mut c in [starttls(&srv.url), ldaps(&srv.ldaps_url)] {
        c.simple_bind(ALICE, "password")
            .expect("bind")
            .success()
            .expect("bound over TLS");
        assert_eq!(whoami(&mut c), format!("dn:{ALICE}"));
        let ldap3::SearchResult(rs, res) = c
            .search(ALICE, Scope::Base, "(objectClass=*)", vec!["cn"])
            .expect("search");
        assert_eq!(res.rc, 0);
        assert_eq!(
            SearchEntry::construct(rs[0].clone()).attrs["cn"],
            vec!["Alice Anderson"]
        );
    }
    // OpenLDAP's tools: -ZZ (StartTLS, required) and ldaps://, with LDAPTLS_REQCERT=never.
    let (rc, out, err) = tool(
        "ldapwhoami",
        &["-x", "-ZZ", "-H", &srv.url, "-D", ALICE, "-w", "password"],
        None,
    );
    assert_eq!(
        (rc, out.trim()),
        (0, format!("dn:{ALICE}").as_str()),
        "{err}"
    );
    let (rc, out, err) = tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-H",
            &srv.ldaps_url,
            "-D",
            ALICE,
            "-w",
            "password",
            "-b",
            ALICE,
            "-s",
            "base",
            "cn",
        ],
        None,
    );
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("cn: Alice Anderson"), "{out}");
}

#[test]
fn starttls_is_refused_twice_and_advertised() {
    let srv = TestServer::start(false);
    let mut c = starttls(&srv.url);
    let r = c
        .extended(ldap3::exop::Exop {
            name: Some("1.3.6.1.4.1.1466.20037".into()),
            val: None,
        })
        .expect("second StartTLS gets an answer");
    assert_eq!(r.1.rc, 1, "operationsError: {:?}", r.1);
    // The connection is still usable.
    assert_eq!(whoami(&mut c), "");
    let mut anon = srv.anon();
    let ldap3::SearchResult(rs, _) = anon
        .search(
            "",
            Scope::Base,
            "(objectClass=*)",
            vec!["supportedExtension", "supportedSASLMechanisms"],
        )
        .expect("root DSE");
    let e = SearchEntry::construct(rs[0].clone());
    assert!(e.attrs["supportedExtension"].contains(&"1.3.6.1.4.1.1466.20037".to_string()));
    let mechs: HashSet<&str> = e.attrs["supportedSASLMechanisms"]
        .iter()
        .map(|s| s.as_str())
        .collect();
    assert_eq!(mechs, HashSet::from(["EXTERNAL", "PLAIN"]));
}

#[test]
fn tls_can_be_required_for_binds_and_writes() {
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.require_tls_for_bind = true;
        c.require_tls_for_writes = true;
    });
    let mut plain = srv.anon();
    let r = plain.simple_bind(ADMIN_DN, ADMIN_PW).expect("bind");
    assert_eq!(r.rc, 13, "confidentialityRequired: {r:?}");
    assert!(r.text.contains("require TLS"), "{r:?}");
    // Anonymous binds need no password and stay allowed; so do reads.
    assert_eq!(plain.simple_bind("", "").expect("bind").rc, 0);
    let (rc, _, err) = tool(
        "ldapwhoami",
        &["-x", "-H", &srv.url, "-D", ADMIN_DN, "-w", ADMIN_PW],
        None,
    );
    assert_eq!(rc, 13, "{err}");

    let mut secure = starttls(&srv.url);
    secure
        .simple_bind(ADMIN_DN, ADMIN_PW)
        .expect("bind")
        .success()
        .expect("bound");
    secure
        .modify(ALICE, vec![Mod::Replace("title", HashSet::from(["Chief"]))])
        .expect("modify")
        .success()
        .expect("write over TLS");

    // An administrator bound on a plain connection (before the setting) cannot write: use a
    // server that requires TLS for writes only.
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.require_tls_for_writes = true;
    });
    let mut admin = srv.admin();
    let r = admin
        .modify(ALICE, vec![Mod::Replace("title", HashSet::from(["x"]))])
        .expect("modify");
    assert_eq!(r.rc, 13, "{r:?}");
    assert_eq!(admin.delete(ALICE).expect("delete").rc, 13);
}

/// The entry the client certificate names. (rcgen keeps one value per attribute type in a
/// subject, so the test uses a naming context with a single-component DN.)
const CERT_USER: &str = "cn=alice,o=linden";

/// Writes `pem` to `dir/name` and returns the path.
fn write_pem(dir: &Path, name: &str, pem: String) -> String {
    let path = dir.join(name);
    std::fs::write(&path, pem).expect("write pem");
    path.to_str().expect("utf-8").to_string()
}

/// A CA, and a client certificate it issued for `CERT_USER`, as PEM files in `dir`.
fn client_pki(dir: &Path) -> (String, String, String) {
    use rcgen::DnType;
    let ca = TestCa::new(subject(&[(DnType::CommonName, "Linden test CA")]));
    let (cert, key) = ca.issue(
        subject(&[
            (DnType::OrganizationName, "linden"),
            (DnType::CommonName, "alice"),
        ]),
        Vec::new(),
    );
    (
        write_pem(dir, "ca.pem", ca.cert.pem()),
        write_pem(dir, "client.pem", cert.pem()),
        write_pem(dir, "client.key", key.serialize_pem()),
    )
}

/// `ldapwhoami -Y EXTERNAL -ZZ` against `url` with the client certificate `cert` and its key.
fn external_whoami(url: &str, cert: &str, key: &str) -> (i32, String, String) {
    tool_env(
        "ldapwhoami",
        &["-Y", "EXTERNAL", "-ZZ", "-H", url],
        None,
        &[("LDAPTLS_CERT", cert), ("LDAPTLS_KEY", key)],
    )
}

#[test]
fn sasl_external_maps_the_client_certificate_to_its_entry() {
    let pki = tempfile::tempdir().expect("tmp");
    let (ca, cert, key) = client_pki(pki.path());
    let ca_path = ca.clone();
    let srv = TestServer::start_with(move |c| {
        c.suffixes = vec!["dc=example,dc=com".into(), "o=linden".into()];
        c.tls_client_ca = Some(ca_path.into());
    });
    let mut admin = srv.admin();
    admin
        .add(
            CERT_USER,
            vec![
                ("objectClass", HashSet::from(["inetOrgPerson"])),
                ("cn", HashSet::from(["alice"])),
                ("sn", HashSet::from(["Alice"])),
            ],
        )
        .expect("add")
        .success()
        .expect("added");
    let env = [
        ("LDAPTLS_CERT", cert.as_str()),
        ("LDAPTLS_KEY", key.as_str()),
    ];
    let (rc, out, err) = external_whoami(&srv.url, &cert, &key);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim(), format!("dn:{CERT_USER}"));
    let (rc, out, err) = tool_env(
        "ldapwhoami",
        &["-Y", "EXTERNAL", "-H", &srv.ldaps_url],
        None,
        &env,
    );
    assert_eq!(
        (rc, out.trim()),
        (0, format!("dn:{CERT_USER}").as_str()),
        "{err}"
    );
    // Without a client certificate, or without TLS: refused.
    let (rc, _, err) = tool(
        "ldapwhoami",
        &["-Y", "EXTERNAL", "-ZZ", "-H", &srv.url],
        None,
    );
    assert_ne!(rc, 0, "{err}");
    let mut plain = srv.anon();
    assert_eq!(
        plain.sasl_external_bind().expect("bind").rc,
        48,
        "inappropriateAuthentication"
    );
    // A certificate whose subject has no entry: invalidCredentials.
    admin
        .delete(CERT_USER)
        .expect("delete")
        .success()
        .expect("deleted");
    let (rc, _, err) = tool_env(
        "ldapwhoami",
        &["-Y", "EXTERNAL", "-ZZ", "-H", &srv.url],
        None,
        &env,
    );
    assert_eq!(rc, 49, "{err}");
    let _ = ca;
}

#[test]
fn sasl_plain_by_uid_and_by_dn() {
    let srv = TestServer::start(true);
    let (rc, out, err) = tool(
        "ldapwhoami",
        &[
            "-Y", "PLAIN", "-ZZ", "-H", &srv.url, "-U", "alice", "-w", "password",
        ],
        None,
    );
    assert_eq!(
        (rc, out.trim()),
        (0, format!("dn:{ALICE}").as_str()),
        "{err}"
    );
    let dn_authcid = format!("dn:{ALICE}");
    let (rc, out, err) = tool(
        "ldapwhoami",
        &[
            "-Y",
            "PLAIN",
            "-ZZ",
            "-H",
            &srv.url,
            "-U",
            &dn_authcid,
            "-w",
            "password",
        ],
        None,
    );
    assert_eq!(
        (rc, out.trim()),
        (0, format!("dn:{ALICE}").as_str()),
        "{err}"
    );
    let (rc, _, err) = tool(
        "ldapwhoami",
        &[
            "-Y", "PLAIN", "-ZZ", "-H", &srv.url, "-U", "alice", "-w", "wrong",
        ],
        None,
    );
    assert_eq!(rc, 49, "{err}");
    let (rc, _, err) = tool(
        "ldapwhoami",
        &[
            "-Y", "PLAIN", "-ZZ", "-H", &srv.url, "-U", "nobody", "-w", "password",
        ],
        None,
    );
    assert_eq!(rc, 49, "unknown users look like wrong passwords: {err}");
    // Acting as someone else is refused.
    let (rc, _, err) = tool(
        "ldapwhoami",
        &[
            "-Y", "PLAIN", "-ZZ", "-H", &srv.url, "-U", "alice", "-w", "password", "-X", "u:bob",
        ],
        None,
    );
    assert_eq!(rc, 50, "insufficientAccessRights, as slapd: {err}");
}

/// The subject of the client certificate python-ldap's test suite binds with
/// (`Lib/slapdtest/certs/client.pem`: `C=DE, O=python-ldap, OU=slapd-test, CN=client`), as an
/// LDAP DN.
const PYTHON_LDAP_SUBJECT: &str = "cn=client,ou=slapd-test,o=python-ldap,c=DE";

/// python-ldap's own PKI, made afresh: a CA, a server certificate for 127.0.0.1 and
/// localhost, and the client certificate with python-ldap's subject, as PEM files in `dir`:
/// (ca, server cert, server key, client cert, client key).
fn python_ldap_pki(dir: &Path) -> [String; 5] {
    use rcgen::{DnType, SanType};
    let org = |cn: &'static str| {
        subject(&[
            (DnType::CountryName, "DE"),
            (DnType::OrganizationName, "python-ldap"),
            (DnType::OrganizationalUnitName, "slapd-test"),
            (DnType::CommonName, cn),
        ])
    };
    let ca = TestCa::new(org("Python LDAP Test CA"));
    let (server_cert, server_key) = ca.issue(
        subject(&[(DnType::CommonName, "server cert for localhost")]),
        vec![
            SanType::DnsName("localhost".try_into().expect("name")),
            SanType::IpAddress("127.0.0.1".parse().expect("ip")),
        ],
    );
    let (client_cert, client_key) = ca.issue(org("client"), Vec::new());
    [
        write_pem(dir, "ca.pem", ca.cert.pem()),
        write_pem(dir, "server.pem", server_cert.pem()),
        write_pem(dir, "server.key", server_key.serialize_pem()),
        write_pem(dir, "client.pem", client_cert.pem()),
        write_pem(dir, "client.key", client_key.serialize_pem()),
    ]
}

/// python-ldap's `TestSasl.test_external_tlscert` (Tests/t_ldap_sasl.py), run by python-ldap
/// itself: StartTLS with the client certificate, the CA and certificate checking required,
/// an EXTERNAL bind with no authorization identity, then Who am I? — whose answer it prints.
/// Then the same bind naming another identity, which python-ldap's test expects refused with
/// INSUFFICIENT_ACCESS (its ldapi case), printed as the exception's name.
const PYTHON_LDAP_EXTERNAL: &str = r#"
import sys
import ldap, ldap.sasl
from ldap.ldapobject import SimpleLDAPObject

uri, ca, cert, key = sys.argv[1:5]

def connect():
    conn = SimpleLDAPObject(uri)
    conn.set_option(ldap.OPT_X_TLS_CACERTFILE, ca)
    conn.set_option(ldap.OPT_X_TLS_CERTFILE, cert)
    conn.set_option(ldap.OPT_X_TLS_KEYFILE, key)
    conn.set_option(ldap.OPT_X_TLS_REQUIRE_CERT, ldap.OPT_X_TLS_HARD)
    conn.set_option(ldap.OPT_X_TLS_NEWCTX, 0)
    conn.start_tls_s()
    return conn

conn = connect()
conn.sasl_interactive_bind_s("", ldap.sasl.external())
print(conn.whoami_s())
conn = connect()
try:
    conn.sasl_interactive_bind_s("", ldap.sasl.external("some invalid user"))
    print("bound as", conn.whoami_s())
except ldap.LDAPError as e:
    print(type(e).__name__)
"#;

#[test]
fn python_ldaps_external_test_case_with_certificate_mapping() {
    let pki = tempfile::tempdir().expect("tmp");
    let [ca, server_cert, server_key, cert, key] = python_ldap_pki(pki.path());
    let entry = "uid=client,ou=people,dc=example,dc=com";
    let other = "uid=bob,ou=people,dc=example,dc=com";
    // (rule, the DN the certificate binds as): the DN form, the search form, and no rule at
    // all with an entry whose DN is the subject (what python-ldap's test expects of slapd,
    // whose rule does not match: the subject itself).
    let cases = [
        (
            Some(dit::authz::AuthzRuleSpec {
                pattern: "cn=([^,]+),ou=slapd-test,o=python-ldap,c=de".into(),
                replace: "uid=$1,ou=people,dc=example,dc=com".into(),
            }),
            entry,
        ),
        (
            Some(dit::authz::AuthzRuleSpec {
                pattern: "(.+,ou=slapd-test,o=python-ldap,c=de)".into(),
                replace: "ldap:///ou=people,dc=example,dc=com??sub?(seeAlso=$1)".into(),
            }),
            other,
        ),
        (None, PYTHON_LDAP_SUBJECT),
    ];
    for (rule, expected) in cases {
        let ca_path = ca.clone();
        let (sc, sk) = (server_cert.clone(), server_key.clone());
        let srv = TestServer::start_with(move |c| {
            c.demo = true;
            c.suffixes = vec!["dc=example,dc=com".into(), "o=python-ldap,c=de".into()];
            c.tls_client_ca = Some(ca_path.into());
            c.tls_cert = Some(sc.into());
            c.tls_key = Some(sk.into());
            c.authz_map = rule.into_iter().collect();
        });
        let mut admin = srv.admin();
        let person = |cn: &'static str| {
            vec![
                ("objectClass", HashSet::from(["inetOrgPerson"])),
                ("cn", HashSet::from([cn])),
                ("sn", HashSet::from([cn])),
            ]
        };
        let mut client = person("client");
        client.push(("uid", HashSet::from(["client"])));
        admin
            .add(entry, client)
            .expect("add")
            .success()
            .expect("added");
        // The search form finds bob through his seeAlso naming the certificate's subject.
        admin
            .modify(
                other,
                vec![Mod::Add("seeAlso", HashSet::from([PYTHON_LDAP_SUBJECT]))],
            )
            .expect("modify")
            .success()
            .expect("seeAlso added");
        // The naming context's own entry is made at start; the subject's entry under it.
        for (dn, attrs) in [
            (
                "ou=slapd-test,o=python-ldap,c=de",
                vec![
                    ("objectClass", HashSet::from(["organizationalUnit"])),
                    ("ou", HashSet::from(["slapd-test"])),
                ],
            ),
            (PYTHON_LDAP_SUBJECT, person("client")),
        ] {
            admin.add(dn, attrs).expect("add").success().expect("added");
        }

        // python-ldap's test case, verifying the server's certificate against the CA.
        let out = std::process::Command::new("python3")
            .args(["-c", PYTHON_LDAP_EXTERNAL])
            .args([
                format!("ldap://127.0.0.1:{}", srv.addr.port()),
                ca.clone(),
                cert.clone(),
                key.clone(),
            ])
            .env("LDAPNOINIT", "1")
            .output()
            .expect("python3 runs (scripts/install-test-deps.sh installs python-ldap)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // python-ldap's test compares in lower case (slapd answers with the normalized DN).
        let lines: Vec<String> = text.lines().map(str::to_lowercase).collect();
        assert_eq!(
            lines,
            [
                format!("dn:{expected}").to_lowercase(),
                "insufficient_access".into()
            ],
            "python-ldap's EXTERNAL test case, expecting {expected}"
        );

        // OpenLDAP's ldapwhoami shows the same DN.
        let (rc, out, err) = external_whoami(&srv.url, &cert, &key);
        assert_eq!(
            (rc, out.trim().to_lowercase()),
            (0, format!("dn:{expected}").to_lowercase()),
            "{err}"
        );
    }
}
