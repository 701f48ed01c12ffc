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

/// A CA, and a client certificate it issued for `CERT_USER`, as PEM files in `dir`.
fn client_pki(dir: &Path) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("key");
    let mut ca = CertificateParams::new(vec![]).expect("params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "Linden test CA");
    ca.distinguished_name = dn;
    let ca_cert = ca.self_signed(&ca_key).expect("ca");

    let key = KeyPair::generate().expect("key");
    let mut p = CertificateParams::new(vec![]).expect("params");
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "linden");
    dn.push(DnType::CommonName, "alice");
    p.distinguished_name = dn;
    let cert = p.signed_by(&key, &ca_cert, &ca_key).expect("client cert");

    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).expect("write pem");
        path.to_str().expect("utf-8").to_string()
    };
    (
        write("ca.pem", ca_cert.pem()),
        write("client.pem", cert.pem()),
        write("client.key", key.serialize_pem()),
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
    let (rc, out, err) = tool_env(
        "ldapwhoami",
        &["-Y", "EXTERNAL", "-ZZ", "-H", &srv.url],
        None,
        &env,
    );
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
    assert_eq!(rc, 49, "{err}");
}
