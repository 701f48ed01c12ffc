//! slapd 2.5 (back-mdb with the syncprov overlay) as the provider, a Linden consumer
//! (`[[syncrepl]]`, refreshAndPersist): an initial refresh of a few thousand entries, then a
//! stream of adds, modifies of several attributes, renames with newSuperior and deletes, then a
//! restart of the consumer that resumes from the cookie it kept while more changes were made.
//! After each step both directories are compared entry by entry (DN, attributes, entryUUID and
//! the provider's stamps). Every wait polls observable state (a search) with a deadline.
//!
//! Needs `/usr/sbin/slapd` (Debian's `slapd` package) with its syncprov and back-mdb modules:
//! ignored unless run with `LINDEN_TEST_SLAPD=1 cargo test -p server --test syncrepl_slapd --
//! --ignored`, which scripts/test.sh does after installing slapd
//! (scripts/install-test-deps.sh). Opted in, a missing slapd is a failure.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{TestServer, ADMIN_DN, ADMIN_PW, BASE};
use ldap3::{LdapConn, Mod, Scope, SearchEntry};

use common::slapd::{MODULES, SLAPADD};
const SCHEMA: &str = "/etc/ldap/schema";
/// Entries loaded into the provider before the consumer starts.
const INITIAL: usize = 3000;
/// How long a step may take to converge.
const CONVERGE: Duration = Duration::from_secs(120);

/// slapd in the foreground on a loopback port, killed when dropped.
struct Slapd {
    _process: common::slapd::Slapd,
    url: String,
    /// With TLS: the LDAPS listener's URL.
    ldaps_url: String,
    _dir: tempfile::TempDir,
}

/// A CA and a certificate it issued for 127.0.0.1, as PEM files in `dir`: (ca, cert, key).
fn make_certs(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("{name} CA"));
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let paths = (
        dir.join(format!("{name}-ca.pem")),
        dir.join(format!("{name}-cert.pem")),
        dir.join(format!("{name}-key.pem")),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

fn person_ldif(i: usize) -> String {
    format!(
        "dn: uid=user.{i},ou=people,{BASE}\nobjectClass: inetOrgPerson\nuid: user.{i}\ncn: User {i}\nsn: Number{i}\ngivenName: User\nmail: user.{i}@example.com\ntelephoneNumber: +1 555 {i:04}\nemployeeNumber: {i}\n\n"
    )
}

impl Slapd {
    /// slapd with the initial entries; with `tls`, also an LDAPS listener and StartTLS, with
    /// the certificate and key given.
    fn start(tls: Option<(&Path, &Path)>) -> Slapd {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("data")).unwrap();
        let tls_conf = match tls {
            Some((cert, key)) => format!(
                "TLSCertificateFile {}\nTLSCertificateKeyFile {}\n",
                cert.display(),
                key.display()
            ),
            None => String::new(),
        };
        let conf = format!(
            "{tls_conf}include {SCHEMA}/core.schema
include {SCHEMA}/cosine.schema
include {SCHEMA}/inetorgperson.schema
include {SCHEMA}/nis.schema
pidfile {dir}/slapd.pid
argsfile {dir}/slapd.args
modulepath {MODULES}
moduleload back_mdb
moduleload syncprov
database mdb
maxsize 268435456
suffix \"{BASE}\"
rootdn \"{ADMIN_DN}\"
rootpw {ADMIN_PW}
directory {dir}/data
index objectClass eq
index entryUUID,entryCSN eq
overlay syncprov
syncprov-checkpoint 100 1
syncprov-sessionlog 1000
",
            dir = d.display()
        );
        std::fs::write(d.join("slapd.conf"), conf).unwrap();
        let mut ldif = format!(
            "dn: {BASE}\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n"
        );
        for ou in ["people", "staff", "groups"] {
            ldif.push_str(&format!(
                "dn: ou={ou},{BASE}\nobjectClass: organizationalUnit\nou: {ou}\n\n"
            ));
        }
        for i in 0..INITIAL {
            ldif.push_str(&person_ldif(i));
        }
        ldif.push_str(&format!(
            "dn: cn=team,ou=groups,{BASE}\nobjectClass: groupOfNames\ncn: team\nmember: uid=user.1,ou=people,{BASE}\nmember: uid=user.2,ou=people,{BASE}\n\n"
        ));
        std::fs::write(d.join("data.ldif"), ldif).unwrap();
        let out = Command::new(SLAPADD)
            .arg("-f")
            .arg(d.join("slapd.conf"))
            .arg("-l")
            .arg(d.join("data.ldif"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slapadd: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = common::free_port();
        let url = format!("ldap://127.0.0.1:{port}");
        let ldaps_url = format!("ldaps://127.0.0.1:{}", common::free_port());
        let listeners = if tls.is_some() {
            format!("{url}/ {ldaps_url}/")
        } else {
            format!("{url}/")
        };
        let process = common::slapd::Slapd::start(&d.join("slapd.conf"), &listeners, &url);
        Slapd {
            _process: process,
            url,
            ldaps_url,
            _dir: dir,
        }
    }

    fn admin(&self) -> LdapConn {
        let mut c = LdapConn::new(&self.url).unwrap();
        c.simple_bind(ADMIN_DN, ADMIN_PW)
            .unwrap()
            .success()
            .unwrap();
        c
    }
}

/// Attributes compared: every user attribute, entryUUID and the provider's stamps.
const COMPARED: [&str; 7] = [
    "*",
    "entryUUID",
    "entryCSN",
    "creatorsName",
    "createTimestamp",
    "modifiersName",
    "modifyTimestamp",
];

type Snapshot = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// Every entry under the base: lower-cased DN → attribute (lower-cased) → sorted values.
fn snapshot(c: &mut LdapConn) -> Snapshot {
    let (entries, _) = c
        .search(BASE, Scope::Subtree, "(objectClass=*)", COMPARED.to_vec())
        .unwrap()
        .success()
        .unwrap();
    entries
        .into_iter()
        .map(|e| {
            let e = SearchEntry::construct(e);
            let attrs = e
                .attrs
                .into_iter()
                .map(|(k, mut v)| {
                    v.sort();
                    (k.to_ascii_lowercase(), v)
                })
                .collect();
            (e.dn.to_ascii_lowercase().replace(", ", ","), attrs)
        })
        .collect()
}

/// What differs between the two, in a few lines.
fn diff(provider: &Snapshot, consumer: &Snapshot) -> String {
    let mut out = Vec::new();
    for (dn, a) in provider {
        match consumer.get(dn) {
            None => out.push(format!("missing on the consumer: {dn}")),
            Some(b) if a != b => {
                out.push(format!("differs: {dn}\n  provider {a:?}\n  consumer {b:?}"))
            }
            _ => {}
        }
    }
    for dn in consumer.keys() {
        if !provider.contains_key(dn) {
            out.push(format!("only on the consumer: {dn}"));
        }
    }
    let n = out.len();
    out.truncate(5);
    format!("{n} differences, first: {}", out.join("\n"))
}

/// Polls until the consumer holds exactly what the provider holds.
fn converge(provider: &Slapd, consumer: &TestServer, what: &str) {
    let start = Instant::now();
    let want = snapshot(&mut provider.admin());
    let mut c = consumer.admin();
    loop {
        let got = snapshot(&mut c);
        if got == want {
            eprintln!(
                "{what}: {} entries converged in {:.2} s",
                want.len(),
                start.elapsed().as_secs_f64()
            );
            return;
        }
        if start.elapsed() > CONVERGE {
            let status: Vec<String> = consumer
                .server
                .replication()
                .iter()
                .map(|s| format!("{:?} {}", s.state(), s.last_error()))
                .collect();
            panic!(
                "{what}: no convergence in {CONVERGE:?} ({status:?}): {}",
                diff(&want, &got)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn consumer(provider: &Slapd, data: &Path) -> TestServer {
    consumer_with(provider, data, &provider.url, |_| {})
}

/// A Linden consuming from `url` (one of `provider`'s), its spec adjusted by `tweak`.
fn consumer_with(
    provider: &Slapd,
    data: &Path,
    url: &str,
    tweak: impl FnOnce(&mut repl::consumer::ConsumerSpec) + Send + 'static,
) -> TestServer {
    let (url, updateref) = (url.to_string(), provider.url.clone());
    let data: PathBuf = data.to_path_buf();
    TestServer::start_with(move |c| {
        c.data_dir = data;
        let mut spec = common::consumer_spec(&url);
        tweak(&mut spec);
        c.syncrepl = vec![spec];
        c.updateref = vec![updateref];
    })
}

fn set(values: &[&str]) -> HashSet<String> {
    values.iter().map(|v| v.to_string()).collect()
}

fn add_person(c: &mut LdapConn, dn: &str, uid: &str) {
    let attrs: Vec<(String, HashSet<String>)> = vec![
        ("objectClass".into(), set(&["inetOrgPerson"])),
        ("uid".into(), set(&[uid])),
        ("cn".into(), set(&[uid])),
        ("sn".into(), set(&["Added"])),
        ("mail".into(), set(&[&format!("{uid}@example.com")])),
    ];
    c.add(dn, attrs).unwrap().success().unwrap();
}

/// A stream of changes on the provider: adds, modifies of several attributes, renames with
/// newSuperior (to an existing and to a new parent) and deletes. `round` keeps names apart.
fn changes(p: &mut LdapConn, round: usize) {
    let people = format!("ou=people,{BASE}");
    for i in 0..40 {
        let uid = format!("new.{round}.{i}");
        add_person(p, &format!("uid={uid},{people}"), &uid);
    }
    for i in (round * 100)..(round * 100 + 40) {
        let dn = format!("uid=user.{i},{people}");
        let mods = vec![
            Mod::Replace(
                "mail".to_string(),
                set(&[&format!("changed.{i}@example.com")]),
            ),
            Mod::Add("description".to_string(), set(&["one", "two"])),
            Mod::Delete("telephoneNumber".to_string(), HashSet::new()),
            Mod::Replace("givenName".to_string(), set(&[&format!("Given{round}")])),
        ];
        p.modify(&dn, mods).unwrap().success().unwrap();
    }
    // A new parent, then entries moved under it and under ou=staff, renamed on the way.
    let team = format!("ou=team{round},{BASE}");
    let attrs: Vec<(String, HashSet<String>)> = vec![
        ("objectClass".into(), set(&["organizationalUnit"])),
        ("ou".into(), set(&[&format!("team{round}")])),
    ];
    p.add(&team, attrs).unwrap().success().unwrap();
    for i in (round * 100 + 40)..(round * 100 + 60) {
        let sup = if i % 2 == 0 {
            team.clone()
        } else {
            format!("ou=staff,{BASE}")
        };
        p.modifydn(
            &format!("uid=user.{i},{people}"),
            &format!("uid=moved.{i}"),
            true,
            Some(&sup),
        )
        .unwrap()
        .success()
        .unwrap();
    }
    for i in (round * 100 + 60)..(round * 100 + 90) {
        p.delete(&format!("uid=user.{i},{people}"))
            .unwrap()
            .success()
            .unwrap();
    }
    // A group's members change with the moves.
    let mods = vec![Mod::Add(
        "member".to_string(),
        set(&[&format!("uid=new.{round}.0,{people}")]),
    )];
    p.modify(&format!("cn=team,ou=groups,{BASE}"), mods)
        .unwrap()
        .success()
        .unwrap();
}

#[test]
#[ignore = "needs slapd with syncprov (Debian's slapd); run with LINDEN_TEST_SLAPD=1"]
fn slapd_provider_linden_consumer() {
    if !common::slapd::opted_in(
        "slapd_provider_linden_consumer",
        &["syncprov.so", "back_mdb.so"],
    ) {
        return;
    }
    let provider = Slapd::start(None);
    let data = tempfile::tempdir().unwrap();

    // The initial refresh, then changes as they happen.
    let linden = consumer(&provider, data.path());
    converge(&provider, &linden, "initial refresh");
    let mut p = provider.admin();
    changes(&mut p, 1);
    converge(
        &provider,
        &linden,
        "persist: adds, modifies, renames, deletes",
    );

    // A replica refers writes to its provider.
    let r = linden
        .anon()
        .delete(&format!("uid=user.0,ou=people,{BASE}"))
        .unwrap();
    assert_eq!(r.rc, 10, "{r:?}");
    assert_eq!(r.refs, vec![provider.url.clone()]);

    // The cookie is kept on the suffix entry.
    let (e, _) = linden
        .admin()
        .search(BASE, Scope::Base, "(objectClass=*)", vec!["contextCSN"])
        .unwrap()
        .success()
        .unwrap();
    let e = SearchEntry::construct(e.into_iter().next().unwrap());
    assert!(e.attrs.contains_key("contextCSN"), "{e:?}");

    // Stopped, changes made meanwhile, restarted on the same data: it resumes.
    drop(linden);
    changes(&mut p, 2);
    let linden = consumer(&provider, data.path());
    converge(&provider, &linden, "restart from the kept cookie");
    let status = &linden.server.replication()[0];
    assert_eq!(
        status.resumed.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the restarted consumer sent its kept cookie"
    );
    changes(&mut p, 3);
    converge(&provider, &linden, "persist after the restart");
}

/// refreshOnly polls over StartTLS (critical) with the provider's certificate checked against
/// `tls_ca`; LDAPS with the wrong CA fails the TLS handshake and is retried, never applied.
#[test]
#[ignore = "needs slapd with syncprov (Debian's slapd); run with LINDEN_TEST_SLAPD=1"]
fn refresh_only_over_starttls_and_ldaps_checks_the_ca() {
    if !common::slapd::opted_in(
        "refresh_only_over_starttls_and_ldaps_checks_the_ca",
        &["syncprov.so", "back_mdb.so"],
    ) {
        return;
    }
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = make_certs(certs.path(), "provider");
    let (other_ca, _, _) = make_certs(certs.path(), "other");
    let provider = Slapd::start(Some((&cert, &key)));
    let data = tempfile::tempdir().unwrap();
    let ca2 = ca.clone();
    let linden = consumer_with(&provider, data.path(), &provider.url, move |s| {
        s.mode = repl::consumer::spec::SyncMode::RefreshOnly {
            interval: Duration::from_secs(1),
        };
        s.start_tls = repl::consumer::spec::StartTls::Critical;
        s.tls_ca = Some(ca2);
    });
    converge(&provider, &linden, "refreshOnly over StartTLS");
    changes(&mut provider.admin(), 1);
    converge(&provider, &linden, "the next poll");
    assert!(
        linden.server.replication()[0]
            .refreshes
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 2
    );

    // LDAPS to a provider whose certificate another CA issued: refused, retried.
    let data = tempfile::tempdir().unwrap();
    let ldaps = provider.ldaps_url.clone();
    let wrong = consumer_with(&provider, data.path(), &ldaps, move |s| {
        s.tls_ca = Some(other_ca);
    });
    let status = wrong.server.replication()[0].clone();
    let deadline = Instant::now() + CONVERGE;
    while status.failures.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "no TLS failure reported");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        status.last_error().contains("TLS"),
        "{}",
        status.last_error()
    );
    let got = snapshot(&mut wrong.admin());
    assert!(
        got.len() <= 1,
        "nothing replicated without a trusted certificate: {}",
        got.len()
    );

    // The same LDAPS listener with the right CA.
    let data = tempfile::tempdir().unwrap();
    let right = consumer_with(&provider, data.path(), &ldaps, move |s| {
        s.tls_ca = Some(ca);
    });
    converge(&provider, &right, "refreshAndPersist over LDAPS");
}
