//! Reader behaviour: accepted syntax, and every error with its line number.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use ldif::{ChangeRecord, Control, ErrorKind, LdifError, Mod, ModOp, Reader, Record};

fn read_all(text: &str) -> Vec<Result<Record, LdifError>> {
    Reader::new(text.as_bytes()).collect()
}

fn records(text: &str) -> Vec<Record> {
    read_all(text)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("valid LDIF")
}

fn first_error(text: &str) -> LdifError {
    read_all(text)
        .into_iter()
        .find_map(Result::err)
        .expect("an error")
}

fn attrs(pairs: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_vec()))
        .collect()
}

#[test]
fn content_records_with_version_comments_folding_and_base64() {
    let text = "version: 1\n\
                # a comment\n\
                #  that is folded\n\
                \n\
                dn: cn=Barbara Jensen,ou=Product Development,dc=airius,\n dc=com\n\
                objectClass: person\n\
                # comment inside a record\n\
                cn:Barbara Jensen\n\
                description:: V2hhdCBhIGNhcmVmdWwgcmVhZGVyIHlvdSBhcmUh\n\
                sn: Je\n nsen\n\
                title;lang-en:\n\
                \n\
                \n\
                dn:: dWlkPWpvc8OpLGRjPWV4YW1wbGUsZGM9Y29t\n\
                uid: jos\u{e9}\n";
    let recs = records(text);
    assert_eq!(recs.len(), 2);
    assert_eq!(
        recs[0],
        Record::Content {
            dn: "cn=Barbara Jensen,ou=Product Development,dc=airius,dc=com".into(),
            attrs: attrs(&[
                ("objectClass", b"person"),
                ("cn", b"Barbara Jensen"),
                ("description", b"What a careful reader you are!"),
                ("sn", b"Jensen"),
                ("title;lang-en", b""),
            ]),
            line: 5,
        }
    );
    assert_eq!(recs[1].dn(), "uid=jos\u{e9},dc=example,dc=com");
    assert_eq!(recs[1].line(), 16);
}

#[test]
fn crlf_line_endings_and_no_final_newline() {
    let recs = records("version: 1\r\ndn: dc=a\r\ndc: a\r\n b\r\n\r\ndn: dc=c\r\ndc: c");
    assert_eq!(recs.len(), 2);
    assert_eq!(
        recs[0],
        Record::Content {
            dn: "dc=a".into(),
            attrs: attrs(&[("dc", b"ab")]),
            line: 2
        }
    );
    assert_eq!(recs[1].line(), 6);
}

#[test]
fn version_line_directly_followed_by_record() {
    let recs = records("version: 1\ndn: dc=a\ndc: a\n");
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].line(), 2);
}

#[test]
fn empty_input_and_only_comments() {
    assert!(records("").is_empty());
    assert!(records("\n\n# nothing\n\n").is_empty());
    assert!(records("version: 1\n").is_empty());
}

#[test]
fn change_records() {
    let text = "\
version: 1

dn: cn=new,dc=example,dc=com
control: 1.2.840.113556.1.4.805 true
control: 1.3.6.1.4.1.4203.1.10.1 false:: AAE=
control: 1.2.3:no criticality
changetype: add
objectClass: device
cn: new

dn: cn=old,dc=example,dc=com
changetype: delete

dn: cn=m,dc=example,dc=com
changetype: modify
add: mail
mail: a@example.com
mail: b@example.com
-
delete: description
-
replace: telephoneNumber
telephoneNumber: +1 555 0100
-
increment: uidNumber
uidNumber: 1
-
replace: seeAlso
-
delete: mail
mail: a@example.com

dn: cn=r,dc=example,dc=com
changetype: modrdn
newrdn: cn=s
deleteoldrdn: 1

dn: cn=s,dc=example,dc=com
changetype: moddn
newrdn:: Y249dMOp
deleteoldrdn: 0
newsuperior: ou=moved,dc=example,dc=com
";
    let recs = records(text);
    assert_eq!(recs.len(), 5);
    assert_eq!(
        recs[0],
        Record::Change {
            dn: "cn=new,dc=example,dc=com".into(),
            change: ChangeRecord::Add(attrs(&[("objectClass", b"device"), ("cn", b"new")])),
            controls: vec![
                Control {
                    oid: "1.2.840.113556.1.4.805".into(),
                    critical: true,
                    value: None
                },
                Control {
                    oid: "1.3.6.1.4.1.4203.1.10.1".into(),
                    critical: false,
                    value: Some(vec![0, 1])
                },
                Control {
                    oid: "1.2.3".into(),
                    critical: false,
                    value: Some(b"no criticality".to_vec())
                },
            ],
            line: 3,
        }
    );
    assert!(matches!(
        &recs[1],
        Record::Change {
            change: ChangeRecord::Delete,
            line: 11,
            ..
        }
    ));
    let Record::Change {
        change: ChangeRecord::Modify(mods),
        ..
    } = &recs[2]
    else {
        panic!("expected modify, got {:?}", recs[2]);
    };
    let m = |op, attr: &str, values: &[&[u8]]| Mod {
        op,
        attr: attr.into(),
        values: values.iter().map(|v| v.to_vec()).collect(),
    };
    assert_eq!(
        mods,
        &vec![
            m(ModOp::Add, "mail", &[b"a@example.com", b"b@example.com"]),
            m(ModOp::Delete, "description", &[]),
            m(ModOp::Replace, "telephoneNumber", &[b"+1 555 0100"]),
            m(ModOp::Increment, "uidNumber", &[b"1"]),
            m(ModOp::Replace, "seeAlso", &[]),
            // The final '-' may be left out.
            m(ModOp::Delete, "mail", &[b"a@example.com"]),
        ]
    );
    assert!(matches!(
        &recs[3],
        Record::Change {
            change: ChangeRecord::ModRdn { new_rdn, delete_old_rdn: true, new_superior: None },
            ..
        } if new_rdn == "cn=s"
    ));
    assert!(matches!(
        &recs[4],
        Record::Change {
            change: ChangeRecord::ModRdn { new_rdn, delete_old_rdn: false, new_superior: Some(sup) },
            ..
        } if new_rdn == "cn=t\u{e9}" && sup == "ou=moved,dc=example,dc=com"
    ));
}

#[test]
fn file_urls() {
    let dir = std::env::temp_dir().join(format!("ldif-url-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("photo one.bin");
    std::fs::write(&path, [0u8, 1, 2, 255]).expect("write");
    let url_path = path.to_str().expect("utf-8 temp path").replace(' ', "%20");
    let text = format!("dn: cn=a\njpegPhoto:< file://{url_path}\n");
    let recs = records(&text);
    assert_eq!(
        recs[0],
        Record::Content {
            dn: "cn=a".into(),
            attrs: attrs(&[("jpegPhoto", &[0, 1, 2, 255])]),
            line: 1
        }
    );
    let e = Reader::new(text.as_bytes())
        .allow_file_urls(false)
        .find_map(Result::err)
        .expect("disabled");
    assert_eq!((e.line, e.kind), (2, ErrorKind::Url));
    std::fs::remove_dir_all(&dir).ok();
}

#[track_caller]
fn assert_error(text: &str, line: usize, kind: ErrorKind, needle: &str) {
    let e = first_error(text);
    assert_eq!((e.line, e.kind), (line, kind), "{e}");
    assert!(e.message.contains(needle), "{e:?} lacks {needle:?}");
    assert_eq!(e.to_string(), format!("line {line}: {}", e.message));
}

#[test]
fn error_kinds_and_line_numbers() {
    use ErrorKind::*;
    assert_error("version: 2\ndn: dc=a\ndc: a\n", 1, Version, "version");
    assert_error("# c\n\ncn: a\n", 3, MissingDn, "expected 'dn:'");
    assert_error(
        "dn: dc=a\ndc: a\n\n dc: b\n",
        4,
        Syntax,
        "starts with a space",
    );
    assert_error("dn: dc=a\ndc a\n", 2, Syntax, "no ':'");
    assert_error("dn: dc=a\nd_c: a\n", 2, Syntax, "attribute description");
    assert_error("dn: dc=a\n: a\n", 2, Syntax, "attribute description");
    assert_error("dn: dc=a\ndc: a\n-\n", 3, Structure, "'-'");
    assert_error("dn: dc=a\ndc: a\nx:: !!!\n", 3, Base64, "base64");
    assert_error("dn:: !!\ndc: a\n", 1, Base64, "base64");
    assert_error("dn:: /w==\ndc: a\n", 1, Utf8, "UTF-8");
    assert_error(
        "dn: dc=a\njpegPhoto:< http://example.com/a.jpg\n",
        2,
        Url,
        "only file",
    );
    assert_error("dn: dc=a\njpegPhoto:< file://host/a.jpg\n", 2, Url, "local");
    assert_error(
        "dn: dc=a\njpegPhoto:< file:///nonexistent/linden/x\n",
        2,
        Url,
        "cannot read",
    );
    assert_error("dn: dc=a\njpegPhoto:< file:///a%zz\n", 2, Url, "%-escape");
    assert_error("\n\ndn: dc=a\n\n", 3, Structure, "no attributes");
    assert_error(
        "dn: dc=a\nchangetype: rename\n",
        2,
        ChangeType,
        "unknown changetype",
    );
    assert_error("dn: dc=a\nchangetype: add\n", 2, Structure, "no attributes");
    assert_error(
        "dn: dc=a\nchangetype: delete\ndc: a\n",
        3,
        Structure,
        "delete",
    );
    assert_error(
        "dn: dc=a\nchangetype: modify\nadd: mail\nmail: x\ncn: y\n",
        5,
        Structure,
        "'-' line missing",
    );
    assert_error(
        "dn: dc=a\nchangetype: modify\nfrob: mail\n",
        3,
        Structure,
        "'add:'",
    );
    assert_error(
        "dn: dc=a\nchangetype: modify\nadd: m ail\n",
        3,
        Syntax,
        "attribute",
    );
    assert_error("dn: dc=a\nchangetype: modrdn\n", 2, Structure, "newrdn");
    assert_error(
        "dn: dc=a\nchangetype: modrdn\nnewrdn: dc=b\n",
        3,
        Structure,
        "deleteoldrdn",
    );
    assert_error(
        "dn: dc=a\nchangetype: modrdn\nnewrdn: dc=b\ndeleteoldrdn: yes\n",
        4,
        Structure,
        "0 or 1",
    );
    assert_error(
        "dn: dc=a\nchangetype: modrdn\nnewrdn: dc=b\ndeleteoldrdn: 1\nfoo: bar\n",
        5,
        Structure,
        "newsuperior",
    );
    assert_error(
        "dn: dc=a\ncontrol: 1.2.3\ndc: a\n",
        3,
        Structure,
        "changetype",
    );
    assert_error(
        "dn: dc=a\ncontrol: manageDSAit\nchangetype: delete\n",
        2,
        Control,
        "numeric OID",
    );
    assert_error(
        "dn: dc=a\ncontrol: 1.2.3 maybe\nchangetype: delete\n",
        2,
        Control,
        "maybe",
    );
}

#[test]
fn line_numbers_count_folded_lines() {
    let text = "dn: dc=a\ndescription: a\n long\n folded\n value\nx y\n";
    assert_error(text, 6, ErrorKind::Syntax, "no ':'");
}

#[test]
fn reading_continues_after_a_bad_record() {
    let out = read_all("dn: dc=a\nbad line\n\ndn: dc=b\ndc: b\n");
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].as_ref().map_err(|e| e.line), Err(2));
    assert_eq!(out[1].as_ref().map(Record::dn).ok(), Some("dc=b"));
}

#[test]
fn oversized_record_stops_the_reader() {
    let text = format!(
        "dn: dc=a\ndescription: {}\n\ndn: dc=b\ndc: b\n",
        "x".repeat(200)
    );
    let out: Vec<_> = Reader::new(text.as_bytes()).max_record_len(100).collect();
    assert_eq!(out.len(), 1);
    let e = out[0].as_ref().expect_err("too long");
    assert_eq!((e.line, e.kind), (2, ErrorKind::TooLong));
}

#[test]
fn io_error_stops_the_reader() {
    struct Failing;
    impl std::io::Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    let out: Vec<_> = Reader::new(std::io::BufReader::new(Failing)).collect();
    assert_eq!(out.len(), 1);
    let e = out[0].as_ref().expect_err("io");
    assert_eq!((e.line, e.kind), (1, ErrorKind::Io));
    assert!(e.message.contains("disk on fire"));
}

#[test]
fn tiny_buffers_give_the_same_records() {
    let text = std::fs::read("tests/fixtures/slapcat.ldif").expect("fixture");
    let whole: Vec<_> = Reader::new(&text[..]).collect();
    let tiny: Vec<_> = Reader::new(std::io::BufReader::with_capacity(1, &text[..])).collect();
    assert_eq!(whole, tiny);
}
