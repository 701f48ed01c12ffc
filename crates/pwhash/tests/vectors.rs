//! Known-good values from OpenLDAP 2.5 `slappasswd` (with the `pw-sha2`
//! module for the SHA-2 schemes), so Linden accepts what an OpenLDAP
//! directory stores.

use proptest::prelude::*;
use pwhash::{generate_password, hash, is_hashed, verify, Scheme};

/// (stored value, password) pairs produced by `slappasswd -h {X} -s PW`.
const SLAPPASSWD: &[(&str, &str)] = &[
    ("{SSHA}BUMa4alBw0RBDmBoGBSyeKpiQqstmppw", "secret"),
    ("{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=", "secret"),
    ("{SSHA256}u6wzY2cJl4mc19S2LsW0l4QKeh9p9mOPSry9QKREQf7onO989Nw4Aw==", "secret"),
    ("{SSHA384}2+/IjJ3tIiQWg6IOV4kqOasnob4ntLfPqunrVKlHIJ2Rv2m8K8/R0JGiA6McGjuRdn5zXwkuqhM=", "secret"),
    ("{SSHA512}jmuYTMBpkk1bkdnuPOczUdoPbUrSSeO3XqBDNnsWCwyHDkTAupbCXlgw71mBneLYc9E8IB5zVYHCvod5mFbm2gXU77W5Zgnf", "secret"),
    ("{SHA256}K7gNU3sdo+OL0wNhqoVWhr3g6s1xYv72ol/pe/Unols=", "secret"),
    ("{SHA384}WKd1ukESvjAFrkQHznV9iP2nHUBJe7gCbsrFTU4//HIyzo3jq1rLMK45dg/ufFPt", "secret"),
    ("{SHA512}vSsar3708Jvp9Szi2NWZZ02Bqp1qRCFpbcTZPdBhnWgs5WtNZKnvCXdhztmeD2cmW192CF5bDufKRpayrW/isg==", "secret"),
    ("{SSHA}UQ2X+vq1gO0piWjDLJkYDoUk5V46gBIx", "correct horse"),
    ("{SSHA256}6asMtJs8Tipk8dvuAKK8gfSNG49sPxUKEHdY4hkOH2UWauoTV3Yn6A==", "pässwörd"),
    ("{SSHA512}9TsxNDuq5YaRQnQTAd6jaTZHvftxW3XHXo3EpZnsUoaKsizGYtvp+UobI8I5acYvn0JNUowrC7m8r5IinpzPb3PnDQfngsb9", "correct horse"),
];

#[test]
fn accepts_slappasswd_values() {
    for (stored, pw) in SLAPPASSWD {
        assert!(verify(stored.as_bytes(), pw.as_bytes()), "{stored} / {pw}");
        assert!(is_hashed(stored.as_bytes()), "{stored}");
    }
}

#[test]
fn rejects_wrong_password_for_slappasswd_values() {
    for (stored, pw) in SLAPPASSWD {
        assert!(!verify(stored.as_bytes(), b"Secret"), "{stored}");
        assert!(!verify(stored.as_bytes(), b""), "{stored}");
        let longer = format!("{pw}x");
        assert!(!verify(stored.as_bytes(), longer.as_bytes()), "{stored}");
    }
}

#[test]
fn scheme_names_are_case_insensitive() {
    assert!(verify(b"{ssha}BUMa4alBw0RBDmBoGBSyeKpiQqstmppw", b"secret"));
    assert!(verify(
        b"{Sha256}K7gNU3sdo+OL0wNhqoVWhr3g6s1xYv72ol/pe/Unols=",
        b"secret"
    ));
    assert!(is_hashed(b"{sSHa512}x"));
}

#[test]
fn python_hashlib_vectors() {
    // base64(sha256(b"secret" + b"saltsalt") + b"saltsalt"), via hashlib.
    assert!(verify(
        b"{SSHA256}oBmrdHcA6OZEkkCLeXh71YAerbvhXz1qqwjrPsXmEtNzYWx0c2FsdA==",
        b"secret"
    ));
}

#[test]
fn hash_then_verify_every_scheme() {
    for scheme in Scheme::all() {
        let stored = hash(scheme, b"hunter2");
        assert!(verify(&stored, b"hunter2"), "{scheme}");
        assert!(!verify(&stored, b"hunter3"), "{scheme}");
        assert_eq!(is_hashed(&stored), scheme != Scheme::Cleartext, "{scheme}");
    }
}

#[test]
fn hash_layout_matches_openldap() {
    use base64::Engine as _;
    let cases = [
        (Scheme::Ssha, "{SSHA}", 20 + 16),
        (Scheme::Ssha256, "{SSHA256}", 32 + 16),
        (Scheme::Ssha384, "{SSHA384}", 48 + 16),
        (Scheme::Ssha512, "{SSHA512}", 64 + 16),
        (Scheme::Sha, "{SHA}", 20),
        (Scheme::Sha256, "{SHA256}", 32),
        (Scheme::Sha384, "{SHA384}", 48),
        (Scheme::Sha512, "{SHA512}", 64),
    ];
    for (scheme, prefix, raw_len) in cases {
        let stored = String::from_utf8(hash(scheme, b"secret")).expect("ascii");
        let b64 = stored.strip_prefix(prefix).expect("prefix");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("padded standard base64");
        assert_eq!(raw.len(), raw_len, "{scheme}");
    }
    // Unsalted values are deterministic and equal slappasswd's.
    assert_eq!(
        hash(Scheme::Sha, b"secret"),
        b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="
    );
    assert_eq!(hash(Scheme::Cleartext, b"secret"), b"secret");
}

#[test]
fn salts_differ() {
    assert_ne!(hash(Scheme::Ssha512, b"a"), hash(Scheme::Ssha512, b"a"));
}

#[test]
fn cleartext_values() {
    assert!(verify(b"password", b"password"));
    assert!(!verify(b"password", b"passwor"));
    assert!(!verify(b"password", b"password "));
    assert!(verify(b"", b""));
    // A brace without a closing brace is not a scheme prefix.
    assert!(verify(b"{notascheme", b"{notascheme"));
    assert!(!is_hashed(b"password"));
    assert!(!is_hashed(b"{CRYPT}abc"));
}

#[test]
fn unknown_scheme_never_matches() {
    assert!(!verify(b"{CRYPT}secret", b"secret"));
    assert!(!verify(b"{CRYPT}secret", b"{CRYPT}secret"));
    assert!(!verify(b"{}secret", b"secret"));
}

#[test]
fn malformed_values_do_not_match() {
    let malformed: &[&[u8]] = &[
        b"{SSHA}",
        b"{SSHA}!!!!",
        b"{SSHA}BUMa4alBw0RBDmBoGBSyeKpiQqst", // digest only, no salt
        b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=AAAA", // too long
        b"{SHA}5en6G6MezRroT3XKqkdPOmY/Bf",    // too short
        b"{SSHA512}\xff\xfe",
        b"{SHA512}",
        b"{",
        b"{}",
    ];
    for m in malformed {
        assert!(!verify(m, b"secret"), "{:?}", String::from_utf8_lossy(m));
        assert!(!verify(m, b""), "{:?}", String::from_utf8_lossy(m));
    }
}

#[test]
fn unpadded_base64_is_accepted() {
    assert!(verify(b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ", b"secret"));
}

#[test]
fn scheme_from_str() {
    assert_eq!("SSHA512".parse(), Ok(Scheme::Ssha512));
    assert_eq!("ssha".parse(), Ok(Scheme::Ssha));
    assert_eq!("{SHA256}".parse(), Ok(Scheme::Sha256));
    assert_eq!("cleartext".parse(), Ok(Scheme::Cleartext));
    assert!("md5".parse::<Scheme>().is_err());
    assert!("".parse::<Scheme>().is_err());
    assert_eq!(Scheme::default(), Scheme::Ssha512);
    for s in Scheme::all() {
        assert_eq!(s.name().parse(), Ok(s));
    }
}

#[test]
fn generated_passwords() {
    let p = generate_password(24);
    assert_eq!(p.len(), 24);
    assert!(p
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    assert_ne!(generate_password(24), p);
    assert_eq!(generate_password(0), "");
}

proptest! {
    #[test]
    fn verify_never_panics(stored in proptest::collection::vec(any::<u8>(), 0..120),
                           pw in proptest::collection::vec(any::<u8>(), 0..20)) {
        let _ = verify(&stored, &pw);
        let _ = is_hashed(&stored);
    }

    #[test]
    fn round_trip(pw in proptest::collection::vec(any::<u8>(), 0..64)) {
        let stored = hash(Scheme::Ssha256, &pw);
        prop_assert!(verify(&stored, &pw));
    }
}
