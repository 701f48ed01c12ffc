//! Real files: `slapcat` output and the server's demo data.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use ldif::{Reader, Record};

fn read_file(path: &str) -> Vec<Record> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Reader::new(std::io::BufReader::new(file))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn values<'a>(r: &'a Record, attr: &str) -> Vec<&'a [u8]> {
    let Record::Content { attrs, .. } = r else {
        panic!("not a content record: {r:?}");
    };
    attrs
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(attr))
        .map(|(_, v)| v.as_slice())
        .collect()
}

#[test]
fn reads_slapcat_output() {
    let recs = read_file("tests/fixtures/slapcat.ldif");
    assert_eq!(recs.len(), 20);
    assert_eq!(recs[0].dn(), "dc=example,dc=com");
    assert_eq!(recs[0].line(), 3);
    // Operational attributes with empty values.
    assert_eq!(values(&recs[0], "creatorsName"), vec![&b""[..]]);

    let jose = &recs[18];
    assert_eq!(jose.dn(), "uid=jose,ou=people,dc=example,dc=com");
    assert_eq!(values(jose, "cn"), vec!["José Müller".as_bytes()]);
    assert_eq!(
        values(jose, "description"),
        vec![
            &b"A deliberately long description line so that slapcat has to fold it across several physical lines of output, which readers must join again."[..],
            &b" leading space and trailing "[..],
        ]
    );
    assert_eq!(
        values(jose, "userPassword"),
        vec![&b"{SSHA}BUMa4alBw0RBDmBoGBSyeKpiQqstmppw"[..]]
    );
    let photo: Vec<u8> = (0..=255).collect();
    assert_eq!(values(jose, "jpegPhoto"), vec![photo.as_slice()]);

    assert_eq!(recs[19].dn(), "ou=Zürich,dc=example,dc=com");
    assert_eq!(values(&recs[19], "ou"), vec!["Zürich".as_bytes()]);
}

#[test]
fn slapcat_output_survives_a_rewrite() {
    let recs = read_file("tests/fixtures/slapcat.ldif");
    let mut w = ldif::Writer::new(Vec::new());
    for r in &recs {
        w.write_record(r).expect("write");
    }
    let out = w.into_inner();
    let again: Vec<Record> = Reader::new(&out[..])
        .collect::<Result<_, _>>()
        .expect("reread");
    assert_eq!(recs.len(), again.len());
    for (a, b) in recs.iter().zip(&again) {
        let (
            Record::Content {
                dn: d1, attrs: a1, ..
            },
            Record::Content {
                dn: d2, attrs: a2, ..
            },
        ) = (a, b)
        else {
            panic!("content records expected");
        };
        assert_eq!((d1, a1), (d2, a2));
    }
}

#[test]
fn reads_server_demo_data() {
    let recs = read_file("../server/demo.ldif");
    // 3 OUs, 10 people, 3 groups, 1 service.
    assert_eq!(recs.len(), 17);
    assert!(recs.iter().all(|r| matches!(r, Record::Content { .. })));
    assert!(recs.iter().all(|r| r.dn().ends_with(",dc=example,dc=com")));
    let people: Vec<_> = recs
        .iter()
        .filter(|r| r.dn().ends_with(",ou=people,dc=example,dc=com"))
        .collect();
    assert_eq!(people.len(), 10);
    for p in &people {
        assert_eq!(values(p, "userPassword"), vec![&b"password"[..]]);
        let uid = String::from_utf8(values(p, "uid")[0].to_vec()).expect("utf-8");
        assert_eq!(
            values(p, "mail"),
            vec![format!("{uid}@example.com").as_bytes()]
        );
    }
    let posix = people
        .iter()
        .filter(|p| values(p, "objectClass").contains(&&b"posixAccount"[..]))
        .count();
    assert_eq!(posix, 2);
    // Every group member exists.
    let dns: Vec<_> = recs.iter().map(Record::dn).collect();
    for r in &recs {
        for m in values(r, "member") {
            let m = std::str::from_utf8(m).expect("utf-8");
            assert!(dns.contains(&m), "{m}");
        }
    }
}
