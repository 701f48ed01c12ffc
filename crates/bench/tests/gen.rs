//! `linden gen`: deterministic, well-formed LDIF with the reference attributes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use base64::Engine;
use bench::gen::{GenArgs, PasswordScheme};
use sha1::{Digest, Sha1};
use std::path::PathBuf;

fn gen(count: u64, seed: u64, scheme: PasswordScheme, name: &str) -> String {
    let path: PathBuf =
        std::env::temp_dir().join(format!("linden-gen-{}-{name}.ldif", std::process::id()));
    let args = GenArgs {
        count,
        seed,
        suffix: "dc=example,dc=com".into(),
        output: Some(path.clone()),
        password: "s3cret".into(),
        password_scheme: scheme,
        strong: false,
    };
    bench::gen::run(&args).expect("gen succeeds");
    let text = std::fs::read_to_string(&path).expect("output file");
    let _ = std::fs::remove_file(&path);
    text
}

/// Entries as (dn, [(attr, value)]).
fn entries(ldif: &str) -> Vec<(String, Vec<(String, String)>)> {
    ldif.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut lines = e.lines().map(|l| {
                let (a, v) = l.split_once(": ").expect("attr: value line");
                (a.to_string(), v.to_string())
            });
            let (dn_attr, dn) = lines.next().expect("dn line");
            assert_eq!(dn_attr, "dn");
            (dn, lines.collect())
        })
        .collect()
}

#[test]
fn deterministic_for_a_seed() {
    let a = gen(50, 7, PasswordScheme::Cleartext, "a");
    let b = gen(50, 7, PasswordScheme::Cleartext, "b");
    let c = gen(50, 8, PasswordScheme::Cleartext, "c");
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn reference_entries() {
    let text = gen(100, 1, PasswordScheme::Cleartext, "ref");
    assert_eq!(text.lines().filter(|l| l.starts_with("dn: ")).count(), 102);
    let es = entries(&text);
    assert_eq!(es.len(), 102);
    assert_eq!(es[0].0, "dc=example,dc=com");
    assert!(es[0].1.contains(&("objectClass".into(), "dcObject".into())));
    assert!(es[0].1.contains(&("dc".into(), "example".into())));
    assert_eq!(es[1].0, "ou=people,dc=example,dc=com");
    for (i, (dn, attrs)) in es[2..].iter().enumerate() {
        assert_eq!(dn, &format!("uid=user.{i},ou=people,dc=example,dc=com"));
        let get = |name: &str| -> Vec<&str> {
            attrs
                .iter()
                .filter(|(a, _)| a == name)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        assert_eq!(
            get("objectClass"),
            ["top", "person", "organizationalPerson", "inetOrgPerson"]
        );
        assert_eq!(get("uid"), [format!("user.{i}").as_str()]);
        assert_eq!(get("employeeNumber"), [i.to_string().as_str()]);
        assert_eq!(get("mail"), [format!("user.{i}@example.com").as_str()]);
        assert_eq!(get("userPassword"), ["s3cret"]);
        let (given, sn) = (get("givenName"), get("sn"));
        assert_eq!(get("cn"), [format!("{} {}", given[0], sn[0]).as_str()]);
        let phone = get("telephoneNumber")[0];
        assert!(phone.starts_with("+1 555 ") && phone.len() == 15, "{phone}");
    }
}

#[test]
fn ssha_passwords_verify() {
    let text = gen(5, 3, PasswordScheme::Ssha, "ssha");
    assert_eq!(text, gen(5, 3, PasswordScheme::Ssha, "ssha2"));
    let es = entries(&text);
    let mut salts = Vec::new();
    for (_, attrs) in &es[2..] {
        let pw = &attrs
            .iter()
            .find(|(a, _)| a == "userPassword")
            .expect("userPassword")
            .1;
        let b64 = pw.strip_prefix("{SSHA}").expect("{SSHA} prefix");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64");
        let (digest, salt) = raw.split_at(20);
        let mut h = Sha1::new();
        h.update(b"s3cret");
        h.update(salt);
        assert_eq!(&h.finalize()[..], digest);
        salts.push(salt.to_vec());
    }
    salts.dedup();
    assert_eq!(salts.len(), 5);
}
