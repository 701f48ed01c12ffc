//! A Linden consumer binding to a real Linden provider with SASL EXTERNAL (issue 18): LDAPS,
//! the provider's certificate checked against the consumer's `tls_ca`, the consumer's client
//! certificate mapped by the provider's `[[authz_map]]` to the identity that replicates.
//! Both servers in this process, over sockets on 127.0.0.1.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{TestServer, BASE};
use ldap3::{Mod, Scope, SearchEntry};

/// A CA; the provider's certificate for 127.0.0.1; the consumer's client certificate, subject
/// `cn=<client>,o=replicas` — all PEM files in `dir`: (ca, server cert, server key, client
/// cert, client key).
fn pki(dir: &Path, client: &str) -> [PathBuf; 5] {
    use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "replication test CA");
    let ca = ca.self_signed(&ca_key).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca, &ca_key)
        .unwrap();
    let client_key = KeyPair::generate().unwrap();
    let mut c = CertificateParams::new(Vec::<String>::new()).unwrap();
    // (The default subject holds a CN already: start from an empty one.)
    c.distinguished_name = DistinguishedName::new();
    c.distinguished_name
        .push(DnType::OrganizationName, "replicas");
    c.distinguished_name.push(DnType::CommonName, client);
    let client_cert = c.signed_by(&client_key, &ca, &ca_key).unwrap();
    let files = [
        ("ca.pem", ca.pem()),
        ("server.pem", server.pem()),
        ("server.key", server_key.serialize_pem()),
        (&*format!("{client}.pem"), client_cert.pem()),
        (&*format!("{client}.key"), client_key.serialize_pem()),
    ]
    .map(|(name, pem)| {
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        p
    });
    files
}

fn consumer(provider_ldaps: &str, ca: &Path, cert: &Path, key: &Path) -> TestServer {
    let (url, ca, cert, key) = (
        provider_ldaps.to_string(),
        ca.to_path_buf(),
        cert.to_path_buf(),
        key.to_path_buf(),
    );
    TestServer::start_with(move |c| {
        let mut spec = common::consumer_spec(&url);
        spec.bind = repl::consumer::spec::BindMethod::SaslExternal;
        spec.tls_ca = Some(ca);
        spec.tls_cert = Some(cert);
        spec.tls_key = Some(key);
        c.syncrepl = vec![spec];
    })
}

/// Every entry of the suffix: DN → entryUUID, entryCSN, description.
fn contents(c: &mut ldap3::LdapConn) -> Vec<(String, Vec<String>)> {
    let (rs, _) = c
        .search(
            BASE,
            Scope::Subtree,
            "(objectClass=*)",
            vec!["entryUUID", "entryCSN", "description"],
        )
        .unwrap()
        .success()
        .unwrap();
    let mut out: Vec<(String, Vec<String>)> = rs
        .into_iter()
        .map(SearchEntry::construct)
        .map(|e| {
            let mut v: Vec<String> = ["entryUUID", "entryCSN", "description"]
                .iter()
                .flat_map(|a| e.attrs.get(*a).cloned().unwrap_or_default())
                .collect();
            v.sort();
            (e.dn.to_ascii_lowercase(), v)
        })
        .collect();
    out.sort();
    out
}

fn converge(p: &TestServer, c: &TestServer, what: &str) {
    let (mut pa, mut ca) = (p.admin(), c.admin());
    for _ in 0..400 {
        if contents(&mut pa) == contents(&mut ca) {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let s = &c.server.replication()[0];
    panic!(
        "{what}: no convergence ({:?}, last error: {})",
        s.state(),
        s.last_error()
    );
}

#[test]
fn a_consumer_binds_with_its_client_certificate_mapped_by_authz_map() {
    let dir = tempfile::tempdir().unwrap();
    let [ca, server_cert, server_key, client_cert, client_key] = pki(dir.path(), "replica1");
    // A client certificate from another CA, which the provider does not trust.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let [_, _, _, stranger_cert, stranger_key] = pki(&other, "replica2");
    let ca2 = ca.clone();
    let provider = TestServer::start_with(move |c| {
        c.demo = true;
        c.syncprov = true;
        c.server_id = 1;
        c.tls_cert = Some(server_cert);
        c.tls_key = Some(server_key);
        c.tls_client_ca = Some(ca2);
        c.authz_map = vec![dit::authz::AuthzRuleSpec {
            pattern: "cn=replica[0-9]+,o=replicas".into(),
            replace: common::ADMIN_DN.into(),
        }];
    });
    let replica = consumer(&provider.ldaps_url, &ca, &client_cert, &client_key);
    converge(
        &provider,
        &replica,
        "initial refresh over LDAPS with EXTERNAL",
    );
    assert!(contents(&mut replica.admin()).len() > 10);
    // The provider saw an EXTERNAL bind as the administrator on a TLS connection.
    let status = replica.server.replication()[0].clone();
    assert_eq!(status.failures.load(Ordering::Relaxed), 0);
    assert_eq!(status.state(), repl::consumer::Phase::Persisting);
    provider
        .admin()
        .modify(
            "uid=alice,ou=people,dc=example,dc=com",
            vec![Mod::Replace("description", ["over TLS"].into())],
        )
        .unwrap()
        .success()
        .unwrap();
    converge(&provider, &replica, "a change while persisting");

    // A client certificate the provider's CA did not issue: the TLS handshake fails, nothing
    // is replicated, and the consumer says why.
    let refused = consumer(&provider.ldaps_url, &ca, &stranger_cert, &stranger_key);
    let s = refused.server.replication()[0].clone();
    for _ in 0..400 {
        if s.failures.load(Ordering::Relaxed) > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(
        s.failures.load(Ordering::Relaxed) > 0,
        "no failure reported"
    );
    assert_ne!(s.state(), repl::consumer::Phase::Persisting);
    assert!(
        contents(&mut refused.admin()).len() <= 1,
        "nothing replicated"
    );
}
