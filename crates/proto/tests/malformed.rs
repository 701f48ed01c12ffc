//! Malformed input: every case must be an error (never a panic), with the message id exposed
//! whenever the envelope was readable.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use proto::*;

/// Wraps an operation element into an LDAPMessage with id 5.
fn msg(op: &[u8]) -> Vec<u8> {
    let mut body = vec![0x02, 0x01, 0x05];
    body.extend_from_slice(op);
    let mut out = vec![0x30];
    assert!(body.len() < 128, "test helper handles short forms only");
    out.push(body.len() as u8);
    out.extend(body);
    out
}

/// A search request for `(objectClass=*)`-like `filter` bytes.
fn search(filter: &[u8]) -> Vec<u8> {
    let mut body = vec![
        0x04, 0x00, 0x0a, 0x01, 0x02, 0x0a, 0x01, 0x00, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00, 0x01,
        0x01, 0x00,
    ];
    body.extend_from_slice(filter);
    body.extend_from_slice(&[0x30, 0x00]);
    let mut op = vec![0x63];
    ber_len(&mut op, body.len());
    op.extend(body);
    op
}

fn ber_len(out: &mut Vec<u8>, n: usize) {
    if n < 128 {
        out.push(n as u8);
    } else {
        out.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
    }
}

fn big_msg(op: &[u8]) -> Vec<u8> {
    let mut body = vec![0x02, 0x01, 0x05];
    body.extend_from_slice(op);
    let mut out = vec![0x30];
    ber_len(&mut out, body.len());
    out.extend(body);
    out
}

fn err(pdu: &[u8]) -> DecodeError {
    match LdapMessage::decode(pdu) {
        Ok(m) => panic!("decoded malformed PDU {pdu:02x?} as {m:?}"),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            e
        }
    }
}

#[test]
fn envelope_errors_have_no_id() {
    for pdu in [
        &[][..],
        &[0x30],
        &[0x30, 0x00],                                           // empty everything
        &[0x30, 0x80, 0x02, 0x01, 0x01, 0x42, 0x00, 0x00, 0x00], // indefinite length
        &[0x31, 0x05, 0x02, 0x01, 0x01, 0x42, 0x00],             // SET, not SEQUENCE
        &[0x30, 0x05, 0x04, 0x01, 0x01, 0x42, 0x00],             // id is not an INTEGER
        &[0x30, 0x04, 0x02, 0x00, 0x42, 0x00],                   // empty INTEGER
        &[0x30, 0x06, 0x02, 0x01, 0x01, 0x42, 0x00],             // truncated
        &[0x30, 0x85, 0x00, 0x00, 0x00, 0x00, 0x05],             // 5 length octets
        &[0x3f, 0x05, 0x02, 0x01, 0x01, 0x42, 0x00],             // multi-byte tag
    ] {
        let e = err(pdu);
        assert_eq!(e.message_id(), None, "{pdu:02x?}: {e}");
    }
}

#[test]
fn message_id_range() {
    // -1, 2^31 and a 9-byte integer.
    let e = err(&[0x30, 0x05, 0x02, 0x01, 0xff, 0x42, 0x00]);
    assert_eq!(e, DecodeError::BadMessageId(-1));
    let e = err(&[
        0x30, 0x09, 0x02, 0x05, 0x00, 0x80, 0x00, 0x00, 0x00, 0x42, 0x00,
    ]);
    assert_eq!(e, DecodeError::BadMessageId(1 << 31));
    let e = err(&[
        0x30, 0x0d, 0x02, 0x09, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x42, 0x00,
    ]);
    assert!(
        matches!(e, DecodeError::Envelope(ber::Error::BadInteger(9))),
        "{e}"
    );
    // The largest id is fine.
    let ok = LdapMessage::decode(&[0x30, 0x08, 0x02, 0x04, 0x7f, 0xff, 0xff, 0xff, 0x42, 0x00]);
    assert_eq!(ok.map(|m| m.id), Ok(i32::MAX));
}

#[test]
fn operation_errors_carry_id_and_tag() {
    let cases: Vec<(Vec<u8>, Option<u8>)> = vec![
        (msg(&[]), None),                          // no protocolOp
        (msg(&[0x42, 0x01, 0x00]), Some(2)),       // unbind with content
        (msg(&[0x7f - 0x1e, 0x00]), Some(1)),      // 0x61 bind response, empty
        (msg(&[0x57, 0x00]), Some(23)),            // extended request primitive
        (msg(&[0x63, 0x00]), Some(3)),             // empty search
        (msg(&[0x66, 0x02, 0x04, 0x00]), Some(6)), // modify without changes
        (msg(&[0x50, 0x00]), Some(16)),            // abandon with empty integer
        (msg(&[0x50, 0x01, 0xff]), Some(16)),      // abandon -1
        (
            msg(&[0x60, 0x07, 0x02, 0x01, 0x03, 0x04, 0x00, 0x81, 0x00]),
            Some(0),
        ), // auth [1]
        (
            msg(&[0x60, 0x07, 0x02, 0x01, 0x00, 0x04, 0x00, 0x80, 0x00]),
            Some(0),
        ), // version 0
        (
            msg(&[
                0x60, 0x09, 0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00, 0x05, 0x00,
            ]),
            Some(0),
        ), // trailing in op
        (
            msg(&[0x65, 0x07, 0x0a, 0x01, 0x09, 0x04, 0x00, 0x04, 0x00]),
            Some(5),
        ), // unknown result code 9
        (
            msg(&[
                0x65, 0x09, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00, 0xa3, 0x00,
            ]),
            Some(5),
        ), // empty referral
        (msg(&[0x73, 0x00]), Some(19)),            // reference without URIs
        (
            msg(&[0x6e, 0x06, 0x04, 0x00, 0x30, 0x02, 0x04, 0x00]),
            Some(14),
        ), // AVA without value
        (
            msg(&[0x6c, 0x09, 0x04, 0x00, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00]),
            Some(12),
        ), // 2-byte BOOLEAN
        (msg(&[0x77, 0x02, 0x81, 0x00]), Some(23)), // extended request without name
        (
            msg(&[0x64, 0x08, 0x04, 0x00, 0x30, 0x04, 0x30, 0x02, 0x04, 0x00]),
            Some(4),
        ), // attr without SET
        (msg(&[0x42, 0x00, 0xa0, 0x02, 0x30, 0x00]), Some(2)), // control without OID
        (msg(&[0x42, 0x00, 0xa0, 0x02, 0x04, 0x00]), Some(2)), // control not a SEQUENCE
        (msg(&[0x42, 0x00, 0x04, 0x00]), Some(2)), // trailing element in message
        (
            msg(&[
                0x63, 0x10, 0x04, 0x00, 0x0a, 0x01, 0x03, 0x0a, 0x01, 0x00, 0x02, 0x01, 0x00, 0x02,
                0x01, 0x00, 0x01, 0x01, 0x00,
            ]),
            Some(3),
        ), // scope 3
    ];
    for (pdu, op) in cases {
        let e = err(&pdu);
        assert_eq!(e.message_id(), Some(5), "{pdu:02x?}: {e}");
        assert_eq!(e.op_tag(), op, "{pdu:02x?}: {e}");
    }
    // Unknown application tag 30, and a universal tag where the op should be.
    let e = err(&msg(&[0x7e, 0x00]));
    assert!(
        matches!(
            e,
            DecodeError::Message {
                id: 5,
                kind: DecodeErrorKind::UnknownOp(0x7e),
                ..
            }
        ),
        "{e}"
    );
    let e = err(&msg(&[0x04, 0x00]));
    assert_eq!((e.message_id(), e.op_tag()), (Some(5), None));
    // A bad search names the response the server should use.
    let e = err(&msg(&[0x63, 0x00]));
    assert!(e.is_request_op());
    assert_eq!(e.response_tag(), Some(tags::SEARCH_RESULT_DONE));
}

#[test]
fn trailing_bytes_after_message() {
    let mut pdu = msg(&[0x42, 0x00]);
    assert!(LdapMessage::decode(&pdu).is_ok());
    pdu.push(0x00);
    let e = err(&pdu);
    assert_eq!(e.message_id(), Some(5));
}

#[test]
fn filters() {
    let ok = |f: &[u8]| LdapMessage::decode(&big_msg(&search(f))).map(|_| ());
    // (objectClass=*) and absolute true/false are fine.
    assert_eq!(ok(&[0x87, 0x01, b'o']), Ok(()));
    assert_eq!(ok(&[0xa0, 0x00]), Ok(()));
    assert_eq!(ok(&[0xa1, 0x00]), Ok(()));
    let bad: &[&[u8]] = &[
        &[0xa2, 0x00],                                                 // not without a filter
        &[0xa2, 0x04, 0x87, 0x00, 0x87, 0x00],                         // not with two filters
        &[0xa3, 0x02, 0x04, 0x00],                                     // equality without value
        &[0xa4, 0x04, 0x04, 0x00, 0x30, 0x00],                         // substrings without parts
        &[0xa4, 0x08, 0x04, 0x00, 0x30, 0x04, 0x81, 0x00, 0x80, 0x00], // initial after any
        &[0xa4, 0x08, 0x04, 0x00, 0x30, 0x04, 0x80, 0x00, 0x80, 0x00], // two initials
        &[0xa4, 0x08, 0x04, 0x00, 0x30, 0x04, 0x82, 0x00, 0x82, 0x00], // two finals
        &[0xa4, 0x08, 0x04, 0x00, 0x30, 0x04, 0x82, 0x00, 0x81, 0x00], // any after final
        &[0xa4, 0x06, 0x04, 0x00, 0x30, 0x02, 0x83, 0x00],             // unknown part tag
        &[0xa9, 0x02, 0x83, 0x00], // extensible without rule/type
        &[0xa9, 0x05, 0x82, 0x00, 0x83, 0x00, 0x00], // extensible trailing byte
        &[0xaa, 0x00],             // unknown choice [10]
        &[0x87, 0x80],             // indefinite length
        &[0xa3, 0x05, 0x04, 0x00, 0x04, 0x00, 0x00], // trailing byte in AVA
    ];
    for f in bad {
        let e = ok(f).expect_err("malformed filter decoded");
        assert_eq!(e.message_id(), Some(5), "{f:02x?}");
    }
}

/// `(!(!(!...(x=*))))` nested `n` deep.
fn nested_not(n: usize) -> Vec<u8> {
    let mut f = vec![0x87, 0x01, b'x'];
    for _ in 1..n {
        let mut outer = vec![0xa2];
        ber_len(&mut outer, f.len());
        outer.extend(f);
        f = outer;
    }
    f
}

#[test]
fn deep_nesting() {
    let limits = DecodeLimits::default();
    let at_limit = big_msg(&search(&nested_not(limits.max_filter_depth)));
    assert!(LdapMessage::decode(&at_limit).is_ok());
    let over = big_msg(&search(&nested_not(limits.max_filter_depth + 1)));
    let e = err(&over);
    assert!(
        matches!(
            e,
            DecodeError::Message {
                kind: DecodeErrorKind::FilterTooDeep(32),
                ..
            }
        ),
        "{e}"
    );
    // A tighter BER limit stops the same filter earlier.
    let tight = DecodeLimits {
        max_ber_depth: 10,
        max_filter_depth: 100,
    };
    let e = LdapMessage::decode_with(&at_limit, &tight).expect_err("too deep");
    assert!(
        matches!(
            e,
            DecodeError::Message {
                kind: DecodeErrorKind::BerTooDeep(10),
                ..
            }
        ),
        "{e}"
    );
    // Thousands of levels: an error, not a stack overflow.
    let mut f = vec![0x87, 0x00];
    for _ in 0..5000 {
        let mut outer = vec![0xa2, 0x84];
        outer.extend_from_slice(&(f.len() as u32).to_be_bytes());
        outer.extend(f);
        f = outer;
    }
    let mut body = vec![
        0x04, 0x00, 0x0a, 0x01, 0x02, 0x0a, 0x01, 0x00, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00, 0x01,
        0x01, 0x00,
    ];
    body.extend(f);
    body.extend_from_slice(&[0x30, 0x00]);
    let mut op = vec![0x63, 0x84];
    op.extend_from_slice(&(body.len() as u32).to_be_bytes());
    op.extend(body);
    let mut inner = vec![0x02, 0x01, 0x05];
    inner.extend(op);
    let mut pdu = vec![0x30, 0x84];
    pdu.extend_from_slice(&(inner.len() as u32).to_be_bytes());
    pdu.extend(inner);
    assert!(LdapMessage::decode(&pdu).is_err());
}

#[test]
fn every_prefix_of_a_real_pdu_is_an_error() {
    let pdu = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/vectors/search_filters.1_search.bin"
    ))
    .expect("vector");
    assert!(LdapMessage::decode(&pdu).is_ok());
    for n in 0..pdu.len() {
        assert!(
            LdapMessage::decode(&pdu[..n]).is_err(),
            "prefix of {n} bytes decoded"
        );
        assert_eq!(frame(&pdu[..n], 1 << 20), Ok(None));
    }
}

#[test]
fn huge_integers() {
    // sizeLimit as a 9-byte integer, and one beyond maxInt.
    let mut body = vec![
        0x04, 0x00, 0x0a, 0x01, 0x02, 0x0a, 0x01, 0x00, 0x02, 0x09, 1, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    body.extend_from_slice(&[0x02, 0x01, 0x00, 0x01, 0x01, 0x00, 0x87, 0x00, 0x30, 0x00]);
    let mut op = vec![0x63, body.len() as u8];
    op.extend(body);
    let e = err(&msg(&op));
    assert!(
        matches!(
            e,
            DecodeError::Message {
                kind: DecodeErrorKind::Ber(ber::Error::BadInteger(9)),
                ..
            }
        ),
        "{e}"
    );
    let mut body = vec![
        0x04, 0x00, 0x0a, 0x01, 0x02, 0x0a, 0x01, 0x00, 0x02, 0x05, 0, 0x80, 0, 0, 0,
    ];
    body.extend_from_slice(&[0x02, 0x01, 0x00, 0x01, 0x01, 0x00, 0x87, 0x00, 0x30, 0x00]);
    let mut op = vec![0x63, body.len() as u8];
    op.extend(body);
    let e = err(&msg(&op));
    assert!(
        matches!(
            e,
            DecodeError::Message {
                kind: DecodeErrorKind::BadValue {
                    field: "sizeLimit",
                    ..
                },
                ..
            }
        ),
        "{e}"
    );
}
