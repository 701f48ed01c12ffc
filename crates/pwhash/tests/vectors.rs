//! Known-good values from OpenLDAP 2.5 `slappasswd` (with the `pw-sha2`
//! module for the SHA-2 schemes), so Linden accepts what an OpenLDAP
//! directory stores.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use proptest::prelude::*;
use pwhash::{generate_password, hash, hash_with, is_hashed, verify, Cost, Policy, Scheme};

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
    assert!(
        !is_hashed(b"{MD5}abc"),
        "unknown schemes are not hashes Linden knows"
    );
    assert!(
        is_hashed(b"{CRYPT}abc"),
        "{{CRYPT}} is known (and malformed values never match)"
    );
}

#[test]
fn unknown_scheme_never_matches() {
    assert!(!verify(b"{MD5}secret", b"secret"));
    assert!(!verify(b"{MD5}secret", b"{MD5}secret"));
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
    assert_eq!("argon2".parse(), Ok(Scheme::Argon2));
    assert_eq!("{PBKDF2-SHA512}".parse(), Ok(Scheme::Pbkdf2Sha512));
    assert_eq!("crypt".parse(), Ok(Scheme::Crypt));
    assert_eq!(Scheme::default(), Scheme::Argon2);
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

/// Values written by real tools for the password `correct horse`:
/// - `slappasswd -o module-load=argon2 -h {ARGON2}` (OpenLDAP 2.5.13, libargon2: argon2i),
/// - argon2-cffi 23.1 `PasswordHasher(time_cost=2, memory_cost=19456, parallelism=1)` (argon2id),
/// - passlib 1.7.4 `ldap_pbkdf2_sha512` (the format of OpenLDAP's pw-pbkdf2 and 389-ds),
/// - `slappasswd -h {CRYPT} -c '$6$%.16s'` and `-c '$5$rounds=10000$%.16s'` (glibc crypt),
/// - passlib 1.7.4 `sha512_crypt` and `sha256_crypt(rounds=12000)`.
const TOOL_VECTORS: &[&str] = &[
    "{ARGON2}$argon2i$v=19$m=4096,t=3,p=1$/Lh6LOtZjMhusQNUAhonpg$t83GFEr3pHwsEXUFdNPe2vPEoSIOYzzPpyo9lBO8Rjw",
    "{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$qAfBpcJVjDT7x0/05bQhnw$kewWHQDuCfWQ5qAmZpFy4aZUTxdATPllxrKGWUIxs5c",
    "{PBKDF2-SHA512}25000$xFjL2VvLOQfgvHfufa9VSg$gwSCoUKSA/EMVppK3BqyZl1Kz1O8Gmdsv0qevc/PiMewvclMszhPCyzn6TjKSnJyEAi6FIUgWulBeorbsldZMw",
    "{CRYPT}$6$6BpJ6FHO3t2gxcbC$XnmfTosDuBaU8MqdIN/ObGSB.UQYMilEqgMb9qbPlc.qIKLQWLixdkE3AHTfV4tvCUMikRcoKpmVWYdcN8T7x.",
    "{CRYPT}$5$rounds=10000$dZQO2mDHQYZGIa5$mrG4563JTK58soeoTjNAQohHh3jv78DJDUTvC.1K079",
    "{CRYPT}$6$7OIj9d42AccATN1X$uEl.wBEE7wqoOM0NjRLt7BzAbChjXH5DoJEurtcz.2E70oM5ECFBm2QcHwxKkW9KcIvN.CsTRTG6KAWU3X4RP0",
    "{CRYPT}$5$rounds=12000$zh/z5jgyN8eVn/gv$XvGQmu6tJX/f978O48vn96C0DyuNm4W4Bvc7OSwfna7",
    "{SSHA512}QsJwvohBkD4q76XQ1fvWQQYhQHVyoX6se8MrvtKNlmgrImvotEnlCoUeRCmvKlVW6Gvg9pRKJEYlDTTgrk35smwuyNOyOAXH",
    "{SSHA}4OJGiUaWpTrVTIjkJRuzEB3m5MAcQBcI",
];

#[test]
fn real_tool_values_verify() {
    for v in TOOL_VECTORS {
        assert!(is_hashed(v.as_bytes()), "{v}");
        assert!(verify(v.as_bytes(), b"correct horse"), "{v}");
        assert!(!verify(v.as_bytes(), b"correct horsE"), "{v}");
        assert!(!verify(v.as_bytes(), b""), "{v}");
    }
}

/// Argon2 working memory is pooled and reused (bounded memory); a reused buffer still holds the
/// previous computation's blocks, of another size, and must not change any result.
#[test]
fn argon2_results_do_not_depend_on_reused_memory() {
    let small = Policy {
        scheme: Scheme::Argon2,
        cost: Cost {
            argon2_memory_kib: 64,
            argon2_iterations: 1,
            ..Cost::default()
        },
    };
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..3 {
                    let mine = small.hash(b"pw");
                    assert!(verify(TOOL_VECTORS[1].as_bytes(), b"correct horse"));
                    assert!(verify(&mine, b"pw"));
                    assert!(verify(TOOL_VECTORS[0].as_bytes(), b"correct horse"));
                    assert!(!verify(&mine, b"pW"));
                }
            });
        }
    });
}

#[test]
fn scheme_prefixes_are_case_insensitive_for_new_schemes() {
    let v = TOOL_VECTORS[2].replace("{PBKDF2-SHA512}", "{pbkdf2-sha512}");
    assert!(verify(v.as_bytes(), b"correct horse"));
    let v = TOOL_VECTORS[3].replace("{CRYPT}", "{crypt}");
    assert!(verify(v.as_bytes(), b"correct horse"));
}

#[test]
fn default_is_argon2id_with_owasp_cost() {
    assert_eq!(Scheme::default(), Scheme::Argon2);
    let v = String::from_utf8(hash(Scheme::default(), b"pw")).expect("ascii");
    assert!(
        v.starts_with("{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$"),
        "{v}"
    );
}

#[test]
fn configured_cost_is_written_and_verified() {
    let cost = Cost {
        argon2_memory_kib: 1024,
        argon2_iterations: 1,
        argon2_parallelism: 2,
        pbkdf2_iterations: 5000,
        crypt_rounds: 6000,
    };
    assert_eq!(cost.check(), Ok(()));
    let a = String::from_utf8(hash_with(Scheme::Argon2, &cost, b"pw")).expect("ascii");
    assert!(a.contains("$m=1024,t=1,p=2$"), "{a}");
    let p = String::from_utf8(hash_with(Scheme::Pbkdf2Sha512, &cost, b"pw")).expect("ascii");
    assert!(p.starts_with("{PBKDF2-SHA512}5000$"), "{p}");
    let c = String::from_utf8(hash_with(Scheme::Crypt, &cost, b"pw")).expect("ascii");
    assert!(c.starts_with("{CRYPT}$6$rounds=6000$"), "{c}");
    for v in [a, p, c] {
        assert!(verify(v.as_bytes(), b"pw"), "{v}");
        assert!(!verify(v.as_bytes(), b"pW"), "{v}");
    }
    let policy = Policy {
        scheme: Scheme::Pbkdf2Sha512,
        cost,
    };
    assert!(verify(&policy.hash(b"x"), b"x"));
}

#[test]
fn cost_check_names_the_parameter() {
    let bad = Cost {
        argon2_memory_kib: 1 << 30,
        ..Cost::default()
    };
    let e = bad.check().expect_err("too much memory");
    assert!(e.starts_with("argon2_memory_kib must be between"), "{e}");
    let bad = Cost {
        pbkdf2_iterations: 10,
        ..Cost::default()
    };
    assert!(bad
        .check()
        .expect_err("too few")
        .starts_with("pbkdf2_iterations"));
}

/// A stored value chooses its own cost; values above the limits never verify (they would let
/// whoever can write a userPassword make binds arbitrarily expensive).
#[test]
fn excessive_costs_are_refused() {
    for v in [
        "{ARGON2}$argon2id$v=19$m=4194304,t=2,p=1$qAfBpcJVjDT7x0/05bQhnw$kewWHQDuCfWQ5qAmZpFy4aZUTxdATPllxrKGWUIxs5c",
        "{ARGON2}$argon2id$v=19$m=19456,t=1000,p=1$qAfBpcJVjDT7x0/05bQhnw$kewWHQDuCfWQ5qAmZpFy4aZUTxdATPllxrKGWUIxs5c",
        "{PBKDF2-SHA512}4000000000$xFjL2VvLOQfgvHfufa9VSg$gwSCoUKSA/EMVppK3BqyZl1Kz1O8Gmdsv0qevc/PiMewvclMszhPCyzn6TjKSnJyEAi6FIUgWulBeorbsldZMw",
        "{CRYPT}$6$rounds=999999999$6BpJ6FHO3t2gxcbC$XnmfTosDuBaU8MqdIN/ObGSB.UQYMilEqgMb9qbPlc.qIKLQWLixdkE3AHTfV4tvCUMikRcoKpmVWYdcN8T7x.",
    ] {
        assert!(!verify(v.as_bytes(), b"correct horse"), "{v}");
    }
}

#[test]
fn malformed_new_scheme_values_do_not_match() {
    for v in [
        "{ARGON2}",
        "{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$",
        "{ARGON2}$argon2x$v=19$m=19456,t=2,p=1$qAfB$kewW",
        "{ARGON2}$argon2id$v=99$m=19456,t=2,p=1$qAfBpcJVjDT7x0/05bQhnw$kewWHQDuCfWQ5qAmZpFy4aZUTxdATPllxrKGWUIxs5c",
        "{ARGON2}$argon2id$v=19$m=0,t=0,p=0$qAfBpcJVjDT7x0/05bQhnw$kewWHQDuCfWQ5qAmZpFy4aZUTxdATPllxrKGWUIxs5c",
        "{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$!!$kewW",
        "{PBKDF2-SHA512}",
        "{PBKDF2-SHA512}0$xFjL2VvLOQfgvHfufa9VSg$gwSC",
        "{PBKDF2-SHA512}abc$x$y",
        "{PBKDF2-SHA512}25000$xFjL2VvLOQfgvHfufa9VSg$short",
        "{CRYPT}",
        "{CRYPT}$1$abc$def",
        "{CRYPT}$6$",
        "{CRYPT}$6$rounds=x$salt$hash",
        "{CRYPT}$6$salt$hash$extra",
        "{CRYPT}plain-des-crypt",
    ] {
        assert!(!verify(v.as_bytes(), b"correct horse"), "{v}");
        assert!(!verify(v.as_bytes(), b""), "{v}");
    }
}

proptest! {
    #[test]
    fn new_scheme_tails_never_panic(
        scheme in prop::sample::select(vec!["{ARGON2}", "{PBKDF2-SHA512}", "{CRYPT}"]),
        tail in "[$a-z0-9=,./+]{0,80}",
        pw in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        let v = format!("{scheme}{tail}");
        let _ = verify(v.as_bytes(), &pw);
    }

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
