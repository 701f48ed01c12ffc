//! The fuzz targets on stable Rust, as part of `cargo test`: every input in
//! `fuzz/corpus/<target>/` (seeds from the test vectors, plus what cargo-fuzz runs found), then a
//! short seeded mutation run over them (bit flips, byte inserts and deletes, truncation,
//! splicing, length-byte tweaks), bounded in count.
//!
//! `cargo test -p fuzzing -- --ignored write_seeds` rewrites the seed files from the vectors
//! below; `scripts/fuzz.sh` runs the real fuzzer (cargo-fuzz, nightly) and grows the corpus.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::{Path, PathBuf};

/// Mutated inputs tried per target on each `cargo test` (deterministic: the seed is fixed).
const MUTATIONS: usize = 100_000;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir(corpus_dir(target)) {
        let mut paths: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if let Ok(b) = std::fs::read(&p) {
                out.push(b);
            }
        }
    }
    out
}

/// A tiny xorshift generator: reproducible runs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(v.len() + 1);
                v.insert(i, rng.next() as u8);
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                v.remove(i);
            }
            3 => {
                let n = rng.below(v.len() + 1);
                v.truncate(n);
            }
            4 => {
                // Splice: a piece of another input.
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = a + rng.below(other.len() - a + 1);
                    let i = rng.below(v.len() + 1);
                    v.splice(i..i, other[a..b].iter().copied());
                }
            }
            5 if !v.is_empty() => {
                // Interesting bytes: BER length forms and delimiters.
                const SPECIAL: &[u8] = &[
                    0x00, 0x80, 0x81, 0x84, 0x89, 0xff, 0x7f, b'(', b')', b',', b'=', b'\\', b'\n',
                    b':', b'*',
                ];
                let i = rng.below(v.len());
                v[i] = SPECIAL[rng.below(SPECIAL.len())];
            }
            _ if !v.is_empty() => {
                let i = rng.below(v.len());
                let n = 1 + rng.below(8);
                let piece: Vec<u8> = v[i..(i + n).min(v.len())].to_vec();
                v.splice(i..i, piece);
            }
            _ => v.push(rng.next() as u8),
        }
    }
    v
}

fn run_target(name: &str, f: fn(&[u8])) {
    let mut inputs = corpus(name);
    assert!(
        !inputs.is_empty(),
        "no corpus for {name} in {}: run `cargo test -p fuzzing -- --ignored write_seeds`",
        corpus_dir(name).display()
    );
    for i in &inputs {
        f(i);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    let n = inputs.len();
    for k in 0..MUTATIONS {
        let a = rng.below(n);
        let b = rng.below(n);
        let m = mutate(&mut rng, &inputs[a], &inputs[b]);
        let outcome = std::panic::catch_unwind(|| f(&m));
        if outcome.is_err() {
            panic!(
                "{name}: mutation {k} panicked on input {:02x?} ({:?})",
                m,
                String::from_utf8_lossy(&m)
            );
        }
        // Keep some mutants as parents so that mutations stack up.
        if k % 16 == 0 && inputs.len() < n + 512 {
            inputs.push(m);
        }
    }
}

#[test]
fn decode_message() {
    run_target("decode_message", fuzzing::decode_message);
}

#[test]
fn parse_filter() {
    run_target("parse_filter", fuzzing::parse_filter);
}

#[test]
fn parse_dn() {
    run_target("parse_dn", fuzzing::parse_dn);
}

#[test]
fn ldif_reader() {
    run_target("ldif_reader", fuzzing::ldif_reader);
}

#[test]
fn log_recovery() {
    run_target("log_recovery", fuzzing::log_recovery);
}

#[test]
fn control_values() {
    run_target("control_values", fuzzing::control_values);
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Seeds from the test vectors of each crate.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let s = |v: &[&str]| v.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
    match target {
        // PDUs captured from OpenLDAP clients (crates/server/tests/wire.rs) and encoded requests.
        "decode_message" => {
            let mut v: Vec<Vec<u8>> = [
                "302c0201016027020103041a636e3d61646d696e2c64633d6578616d706c652c64633d636f6d8006736563726574",
                "301e02010277198017312e332e362e312e342e312e343230332e312e31312e33",
                "300c020101600702010304008000",
                "30360201026331041164633d6578616d706c652c64633d636f6d0a01000a0100020100020100010100870b6f626a656374436c6173733000",
                "30050201024200",
                "3006020103500102",
            ]
            .iter()
            .map(|h| hex(h))
            .collect();
            for f in [
                "(&(objectClass=person)(|(uid=a*b*c)(!(cn~=x))))",
                "(cn:caseExactMatch:=Foo)",
                "(uidNumber>=10)",
            ] {
                let filter = proto::Filter::parse(f).expect("filter");
                let msg = proto::LdapMessage {
                    id: 7,
                    op: proto::ProtocolOp::SearchRequest(proto::SearchRequest {
                        base: b"ou=people,dc=example,dc=com".as_slice().into(),
                        scope: proto::Scope::Subtree,
                        deref: proto::DerefAliases::Never,
                        size_limit: 10,
                        time_limit: 5,
                        types_only: false,
                        filter,
                        attributes: vec![b"cn".as_slice().into(), b"+".as_slice().into()],
                    }),
                    controls: vec![],
                };
                let mut out = Vec::new();
                msg.encode(&mut out);
                v.push(out);
            }
            v
        }
        "parse_filter" => s(&[
            "(objectClass=*)",
            "(&(uid=alice)(|(cn=A*)(sn=*son))(!(mail=x@y)))",
            "(cn:dn:2.5.13.5:=John)",
            "(:caseIgnoreMatch:=x)",
            "(cn=a\\2a\\28b\\29)",
            "(uidNumber>=1000)",
            "(sn~=smith)",
            "(&)",
            "(|)",
            "uid=bare",
        ]),
        "parse_dn" => s(&[
            "uid=alice,ou=people,dc=example,dc=com",
            "cn=a\\,b+sn=c,o=x",
            "cn=#04024869,o=y",
            "CN=  spaced  ,O=Test",
            "cn=\\20lead\\20,dc=x",
            "cn=\"quoted, value\",o=z",
            "1.2.3.4=x,ou=y",
            "",
        ]),
        "ldif_reader" => {
            let mut v = s(&[
                "version: 1\ndn: uid=a,dc=example,dc=com\nobjectClass: person\ncn: A\nsn:: QQ==\n\n",
                "dn: uid=b,dc=example,dc=com\nchangetype: modify\nreplace: mail\nmail: b@x\n-\nadd: cn\ncn: B\n-\n\n",
                "dn: uid=c,dc=example,dc=com\nchangetype: modrdn\nnewrdn: uid=d\ndeleteoldrdn: 1\nnewsuperior: ou=x,dc=example,dc=com\n\n",
                "dn: uid=e,dc=example,dc=com\ncontrol: 1.2.840.113556.1.4.805 true\nchangetype: delete\n\n",
                "# comment\ndn: cn=long,dc=example,dc=com\ndescription: a long line that\n  continues here\n\n",
            ]);
            v.push(include_bytes!("../../server/demo.ldif").to_vec());
            v
        }
        // The storage format fixtures (crates/store/tests/fixtures/v1).
        "log_recovery" => vec![
            include_bytes!("../../store/tests/fixtures/v1/log-00000000000000000003.lnl").to_vec(),
            include_bytes!("../../store/tests/fixtures/v1/snap-00000000000000000002.lns").to_vec(),
        ],
        // Control values as OpenLDAP's clients and slapd send them, behind the codec selector.
        "control_values" => {
            let tagged = |which: u8, v: &[u8]| [&[which][..], v].concat();
            let mut mv = Vec::new();
            let items: Vec<proto::Filter<'_>> = [
                "(mail=*.org)",
                "(cn=Al*)",
                "(uid>=a)",
                "(cn:caseExactMatch:=Ally)",
                "(sn~=x)",
                "(uid=*)",
            ]
            .iter()
            .map(|f| proto::Filter::parse(f).expect("filter"))
            .collect();
            proto::controls::matchedvalues::encode(&items, &mut mv);
            use proto::controls::deref::{encode_response, DerefRes};
            let mut deref_response = Vec::new();
            encode_response(
                &[
                    DerefRes {
                        attr: b"member",
                        value: b"uid=b,dc=x",
                        attrs: vec![(b"uid", vec![b"b"]), (b"cn", vec![b"B", b"Bee"])],
                    },
                    DerefRes {
                        attr: b"member",
                        value: b"uid=n,dc=x",
                        attrs: vec![],
                    },
                ],
                &mut deref_response,
            );
            vec![
                tagged(0, &mv),
                tagged(0, &hex("300ea00ca30a0402636e0404416c6c79")),
                tagged(
                    1,
                    b"\x30\x15\x30\x13\x04\x06member\x30\x09\x04\x03uid\x04\x02cn",
                ),
                tagged(2, &deref_response),
                tagged(3, b"dn:uid=alice,ou=people,dc=example,dc=com"),
                tagged(3, b"u:alice"),
            ]
        }
        _ => Vec::new(),
    }
}

#[test]
#[ignore = "rewrites fuzz/corpus/*/seed-*; run by hand when the vectors change"]
fn write_seeds() {
    for (name, _) in fuzzing::TARGETS {
        let dir = corpus_dir(name);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (i, s) in seeds(name).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), s).expect("write seed");
        }
    }
}
