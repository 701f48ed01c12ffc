//! Writer output: what it looks like, and that reading it gives back what
//! was written.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use ldif::{ChangeRecord, Control, Mod, ModOp, Reader, Record, Writer};
use proptest::collection::vec;
use proptest::prelude::*;

fn write(records: &[Record]) -> Vec<u8> {
    let mut w = Writer::new(Vec::new());
    w.write_version().expect("version");
    for r in records {
        w.write_record(r).expect("write");
    }
    w.into_inner()
}

/// Reads `bytes`, forgetting line numbers.
fn read(bytes: &[u8]) -> Vec<Record> {
    Reader::new(bytes)
        .map(|r| {
            let mut r =
                r.unwrap_or_else(|e| panic!("{e}\n---\n{}", String::from_utf8_lossy(bytes)));
            match &mut r {
                Record::Content { line, .. } | Record::Change { line, .. } => *line = 0,
            }
            r
        })
        .collect()
}

#[test]
fn writes_safe_values_plainly_and_others_in_base64() {
    let mut w = Writer::new(Vec::new());
    let attrs: [(&str, &[u8]); 8] = [
        ("cn", b"Barbara Jensen"),
        ("description", b" leading space"),
        ("description", b"trailing space "),
        ("description", b":colon"),
        ("description", b"<angle"),
        ("description", "Zürich".as_bytes()),
        ("description", b"tab\there"),
        ("title", b""),
    ];
    w.write_entry("cn=Barbara Jensen,dc=example,dc=com", attrs)
        .expect("write");
    let out = String::from_utf8(w.into_inner()).expect("ascii");
    assert_eq!(
        out,
        "dn: cn=Barbara Jensen,dc=example,dc=com\n\
         cn: Barbara Jensen\n\
         description:: IGxlYWRpbmcgc3BhY2U=\n\
         description:: dHJhaWxpbmcgc3BhY2Ug\n\
         description:: OmNvbG9u\n\
         description:: PGFuZ2xl\n\
         description:: WsO8cmljaA==\n\
         description:: dGFiCWhlcmU=\n\
         title:\n\
         \n"
    );
}

#[test]
fn folds_long_lines_at_76_columns() {
    let mut w = Writer::new(Vec::new());
    let long = "x".repeat(200);
    w.write_entry("dc=a", [("description", long.as_bytes())])
        .expect("write");
    let out = String::from_utf8(w.into_inner()).expect("ascii");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.iter().all(|l| l.len() <= 76), "{out}");
    assert_eq!(lines[1].len(), 76);
    assert!(lines[2].starts_with(' '));
    assert_eq!(
        read(out.as_bytes())[0],
        Record::Content {
            dn: "dc=a".into(),
            attrs: vec![("description".into(), long.into_bytes())],
            line: 0,
        }
    );
}

#[test]
fn base64_dn() {
    let mut w = Writer::new(Vec::new());
    w.write_entry("ou=Zürich,dc=example,dc=com", [("ou", "Zürich".as_bytes())])
        .expect("write");
    let out = String::from_utf8(w.into_inner()).expect("ascii");
    assert!(
        out.starts_with("dn:: b3U9WsO8cmljaCxkYz1leGFtcGxlLGRjPWNvbQ==\n"),
        "{out}"
    );
}

#[test]
fn rejects_what_could_not_be_read_back() {
    let mut w = Writer::new(Vec::new());
    let bad: [(&str, &[u8]); 1] = [("bad name", b"x")];
    assert!(w.write_entry("dc=a", bad).is_err());
    assert!(w
        .write_entry("dc=a", [("changetype", &b"add"[..])])
        .is_err());
    assert!(w.write_entry("dc=a", std::iter::empty()).is_err());
    let ctl = Control {
        oid: "manageDSAit".into(),
        critical: true,
        value: None,
    };
    assert!(w
        .write_change("dc=a", &ChangeRecord::Delete, &[ctl])
        .is_err());
    assert!(w.into_inner().is_empty());
}

#[test]
fn change_records_round_trip() {
    let records = vec![
        Record::Change {
            dn: "cn=m,dc=example,dc=com".into(),
            change: ChangeRecord::Modify(vec![
                Mod {
                    op: ModOp::Add,
                    attr: "mail".into(),
                    values: vec![b"a@b".to_vec()],
                },
                Mod {
                    op: ModOp::Delete,
                    attr: "description".into(),
                    values: vec![],
                },
                Mod {
                    op: ModOp::Increment,
                    attr: "uidNumber".into(),
                    values: vec![b"1".to_vec()],
                },
            ]),
            controls: vec![Control {
                oid: "1.2.3".into(),
                critical: true,
                value: Some(vec![]),
            }],
            line: 0,
        },
        Record::Change {
            dn: "cn=r,dc=example,dc=com".into(),
            change: ChangeRecord::ModRdn {
                new_rdn: "cn=s".into(),
                delete_old_rdn: true,
                new_superior: Some("ou=x,dc=example,dc=com".into()),
            },
            controls: vec![],
            line: 0,
        },
    ];
    let out = write(&records);
    let text = String::from_utf8(out.clone()).expect("ascii");
    assert!(
        text.contains("changetype: modify\nadd: mail\nmail: a@b\n-\ndelete: description\n-\n"),
        "{text}"
    );
    assert_eq!(read(&out), records);
}

fn attr_name() -> impl Strategy<Value = String> {
    "[a-zA-Z][a-zA-Z0-9-]{0,12}(;[a-z0-9-]{1,8})?".prop_filter("not a keyword", |n| {
        !n.eq_ignore_ascii_case("changetype") && !n.eq_ignore_ascii_case("control")
    })
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..200),
        "[ -~]{0,100}".prop_map(String::into_bytes),
        any::<String>().prop_map(String::into_bytes),
    ]
}

fn attrs() -> impl Strategy<Value = Vec<(String, Vec<u8>)>> {
    vec((attr_name(), value()), 1..6)
}

fn control() -> impl Strategy<Value = Control> {
    (
        "[0-9]{1,3}(\\.[0-9]{1,5}){0,6}",
        any::<bool>(),
        proptest::option::of(value()),
    )
        .prop_map(|(oid, critical, value)| Control {
            oid,
            critical,
            value,
        })
}

fn record() -> impl Strategy<Value = Record> {
    let modification = (
        prop_oneof![
            Just(ModOp::Add),
            Just(ModOp::Delete),
            Just(ModOp::Replace),
            Just(ModOp::Increment)
        ],
        attr_name(),
        vec(value(), 0..4),
    )
        .prop_map(|(op, attr, values)| Mod { op, attr, values });
    let change = prop_oneof![
        attrs().prop_map(ChangeRecord::Add),
        Just(ChangeRecord::Delete),
        vec(modification, 0..4).prop_map(ChangeRecord::Modify),
        (
            any::<String>(),
            any::<bool>(),
            proptest::option::of(any::<String>())
        )
            .prop_map(
                |(new_rdn, delete_old_rdn, new_superior)| ChangeRecord::ModRdn {
                    new_rdn,
                    delete_old_rdn,
                    new_superior
                }
            ),
    ];
    prop_oneof![
        (any::<String>(), attrs()).prop_map(|(dn, attrs)| Record::Content { dn, attrs, line: 0 }),
        (any::<String>(), change, vec(control(), 0..3)).prop_map(|(dn, change, controls)| {
            Record::Change {
                dn,
                change,
                controls,
                line: 0,
            }
        }),
    ]
}

proptest! {
    #[test]
    fn write_then_read_gives_the_same_records(records in vec(record(), 0..5)) {
        let out = write(&records);
        prop_assert!(out.is_ascii());
        prop_assert!(out.split(|&b| b == b'\n').all(|l| l.len() <= 76));
        prop_assert_eq!(read(&out), records);
    }

    #[test]
    fn reader_never_panics(bytes in vec(any::<u8>(), 0..400)) {
        for r in Reader::new(&bytes[..]) {
            let _ = r;
        }
    }

    #[test]
    fn reader_never_panics_on_ldif_like_text(
        lines in vec(prop_oneof![
            Just("dn: dc=a".to_string()),
            Just("changetype: modify".to_string()),
            Just("changetype: modrdn".to_string()),
            Just("-".to_string()),
            Just(String::new()),
            Just(" folded".to_string()),
            Just("control: 1.2.3 true:: AA==".to_string()),
            "[a-z:<# -]{0,12}",
        ], 0..30)
    ) {
        let text = lines.join("\n");
        for r in Reader::new(text.as_bytes()) {
            let _ = r;
        }
    }
}
