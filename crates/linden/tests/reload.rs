//! Reloading a running server (docs/operations.md): SIGHUP after logrotate moved the access
//! log, a renewed certificate, a changed access rule, a changed restart-only key, and a broken
//! file; and the same over LDAP with `linden reload`. Each outcome is checked over real
//! connections to a real `linden serve`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::path::Path;
use std::process::Command;

use common::serve::Running;
use ldap3::{LdapConn, Mod, Scope, SearchEntry};

const PEOPLE: &str = "ou=people,dc=example,dc=com";
const BOB: &str = "uid=bob,ou=people,dc=example,dc=com";

/// A self-signed certificate and key for `cn` (openssl, as an operator would renew one).
fn certificate(dir: &Path, cn: &str) -> (String, String) {
    let cert = dir.join(format!("{cn}-cert.pem"));
    let key = dir.join(format!("{cn}-key.pem"));
    let st = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-subj", &format!("/CN={cn}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl req");
    assert!(
        st.status.success(),
        "openssl req: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    (
        std::fs::read_to_string(cert).expect("cert"),
        std::fs::read_to_string(key).expect("key"),
    )
}

/// The CN of the certificate the server presents after StartTLS.
fn served_cn(addr: std::net::SocketAddr) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {addr} -starttls ldap </dev/null 2>/dev/null | openssl x509 -noout -subject"
        ))
        .output()
        .expect("run openssl s_client");
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.rsplit("CN")
        .next()
        .unwrap_or("")
        .trim_start_matches([' ', '='])
        .trim()
        .to_string()
}

/// The file's text once it contains `needle` (the access log is written by its own thread a
/// few milliseconds after the operation): polled, with a deadline.
fn once_contains(path: &Path, needle: &str) -> String {
    let deadline = std::time::Instant::now() + common::serve::WAIT;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} never held '{needle}': {text}",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn config(dir: &Path, who: &str, extra: &str) -> String {
    format!(
        r#"listen = "127.0.0.1:0"
data = "{d}/data"
admin_password = "secret"
demo = true
access_log = "{d}/access.log"
tls_cert = "{d}/cert.pem"
tls_key = "{d}/key.pem"
server_id = 1
{extra}
[[access]]
attrs = ["userPassword"]
by = [{{ who = "anonymous", rights = ["auth"] }}]

[[access]]
dn = "{PEOPLE}"
by = [{{ who = "{who}", rights = ["read", "search"] }}]
"#,
        d = dir.display()
    )
}

/// Whether an anonymous search finds bob.
fn anonymous_finds_bob(url: &str) -> bool {
    let mut c = LdapConn::new(url).expect("connect");
    let found = c
        .search(PEOPLE, Scope::Subtree, "(uid=bob)", vec!["1.1"])
        .map(|r| !r.0.is_empty())
        .unwrap_or(false);
    let _ = c.unbind();
    found
}

fn admin(url: &str) -> LdapConn {
    let mut c = LdapConn::new(url).expect("connect");
    c.simple_bind("cn=admin,dc=example,dc=com", "secret")
        .expect("bind")
        .success()
        .expect("admin bind");
    c
}

fn entry_csn(c: &mut LdapConn, dn: &str) -> String {
    let (r, _) = c
        .search(dn, Scope::Base, "(objectClass=*)", vec!["entryCSN"])
        .expect("search")
        .success()
        .expect("found");
    let e = SearchEntry::construct(r.into_iter().next().expect("entry"));
    e.attrs["entryCSN"][0].clone()
}

fn monitor_counter(c: &mut LdapConn, cn: &str) -> String {
    let (r, _) = c
        .search(
            &format!("cn={cn},cn=Reloads,cn=Monitor"),
            Scope::Base,
            "(objectClass=*)",
            vec!["monitorCounter"],
        )
        .expect("search")
        .success()
        .expect("found");
    let e = SearchEntry::construct(r.into_iter().next().expect("entry"));
    e.attrs["monitorCounter"][0].clone()
}

#[test]
fn sighup_reopens_logs_and_applies_live_keys_and_a_broken_file_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (cert_a, key_a) = certificate(d, "first");
    let (cert_b, key_b) = certificate(d, "second");
    std::fs::write(d.join("cert.pem"), &cert_a).expect("cert");
    std::fs::write(d.join("key.pem"), &key_a).expect("key");
    let file = d.join("linden.toml");
    std::fs::write(&file, config(d, "*", "")).expect("config");
    let srv = Running::start(&file, &[]);
    let url = srv.url();
    assert!(anonymous_finds_bob(&url), "the first rule lets anyone read");
    assert_eq!(served_cn(srv.addr), "first");
    let mut a = admin(&url);
    a.modify(BOB, vec![Mod::Replace("description", ["before"].into())])
        .expect("modify")
        .success()
        .expect("ok");
    let before = once_contains(&d.join("access.log"), "MODIFY");

    // logrotate moves the log; the certificate is renewed in place; the rule and a
    // restart-only key change.
    std::fs::rename(d.join("access.log"), d.join("access.log.1")).expect("rotate");
    std::fs::write(d.join("cert.pem"), &cert_b).expect("cert");
    std::fs::write(d.join("key.pem"), &key_b).expect("key");
    let text = config(d, "users", "").replace("server_id = 1", "server_id = 2");
    std::fs::write(&file, text).expect("config");
    srv.signal("HUP");
    srv.wait_for("configuration reloaded", 1);
    let log = srv.log();
    let line = log
        .lines()
        .find(|l| l.contains("configuration reloaded"))
        .expect("summary");
    assert!(line.contains("access applied"), "{line}");
    assert!(
        line.contains("kept until a restart: server_id"),
        "a restart-only key is named and kept: {line}"
    );

    assert!(!anonymous_finds_bob(&url), "the new rule: bound users only");
    let mut a = admin(&url);
    a.modify(BOB, vec![Mod::Replace("description", ["after"].into())])
        .expect("modify")
        .success()
        .expect("ok");
    assert!(
        entry_csn(&mut a, BOB).contains("#001#"),
        "server_id is read at start only"
    );
    assert_eq!(
        served_cn(srv.addr),
        "second",
        "new connections get the new certificate"
    );
    // The reopened log has what came after the reload, the moved one what came before.
    once_contains(&d.join("access.log"), "MODIFY");
    let moved = std::fs::read_to_string(d.join("access.log.1")).expect("moved log");
    assert_eq!(
        moved.matches("MODIFY").count(),
        before.matches("MODIFY").count(),
        "nothing new in the moved file"
    );

    // A broken file changes nothing, and says why.
    std::fs::write(&file, config(d, "*", "max_connections = \"lots\"")).expect("config");
    srv.signal("HUP");
    srv.wait_for("configuration not reloaded", 1);
    assert!(
        srv.log()
            .contains("key 'max_connections': expected an integer"),
        "{}",
        srv.log()
    );
    assert!(!anonymous_finds_bob(&url), "the rule in force is kept");
    assert_eq!(served_cn(srv.addr), "second");

    // Over LDAP, as the administrator: what SIGHUP does.
    std::fs::write(&file, config(d, "*", "")).expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args(["reload", "--url", &url, "--password", "secret"])
        .output()
        .expect("linden reload");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("configuration reloaded: access applied"),
        "{said}"
    );
    assert!(anonymous_finds_bob(&url));
    // Not for anyone else.
    let mut bob = LdapConn::new(&url).expect("connect");
    bob.simple_bind(BOB, "password")
        .expect("bind")
        .success()
        .expect("bob");
    let r = bob.extended(ldap3::exop::Exop {
        name: Some(server::RELOAD_OID.to_string()),
        val: None,
    });
    let rc = r
        .map(|ldap3::result::ExopResult(_, res)| res.rc)
        .expect("answered");
    assert_eq!(rc, 50, "insufficientAccessRights");

    let mut a = admin(&url);
    assert_eq!(monitor_counter(&mut a, "Applied"), "2");
    assert_eq!(monitor_counter(&mut a, "Refused"), "1");
    assert!(srv.terminate().success());
}
