//! The fuzz targets' bodies. Each takes arbitrary bytes and panics only on a real bug: a
//! decoder that panics, or a round trip that does not give back what went in.
//!
//! `fuzz/` (cargo-fuzz, nightly) calls these from libFuzzer; `tests/corpus.rs` replays the
//! corpus in `fuzz/corpus/<target>/` and runs a short seeded mutation loop on stable, so every
//! `cargo test` exercises them.
#![allow(
    clippy::panic,
    reason = "a fuzz target reports a broken invariant by panicking, which is what libFuzzer and \
              tests/corpus.rs catch; this crate is test support, not part of the server"
)]

use std::sync::OnceLock;

use schema::{Dn, Schema};

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// Every target, by name (the directory of its corpus).
pub const TARGETS: &[(&str, Target)] = &[
    ("decode_message", decode_message),
    ("parse_filter", parse_filter),
    ("parse_dn", parse_dn),
    ("ldif_reader", ldif_reader),
    ("log_recovery", log_recovery),
    ("control_values", control_values),
];

fn schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(Schema::builtin)
}

/// Framing and decoding never panic; whatever decodes re-encodes to a PDU that decodes to the
/// same message.
pub fn decode_message(data: &[u8]) {
    let framed = proto::frame(data, 1 << 20);
    let _ = ber::element_len(data);
    if let Ok(msg) = proto::LdapMessage::decode(data) {
        assert_eq!(framed, Ok(Some(data.len())));
        let mut out = Vec::new();
        msg.encode(&mut out);
        assert_eq!(proto::LdapMessage::decode(&out).as_ref(), Ok(&msg));
    }
}

/// The control value codecs never panic, and what decodes re-encodes to bytes that decode to
/// the same value. The first byte picks the codec: 0 matched values, 1 dereference request,
/// 2 dereference response, anything else proxied authorization.
pub fn control_values(data: &[u8]) {
    use proto::controls::{deref, matchedvalues, proxyauthz};
    let Some((&which, v)) = data.split_first() else {
        return;
    };
    let limits = proto::DecodeLimits::default();
    match which {
        0 => {
            if let Ok(items) = matchedvalues::decode(v, &limits) {
                // `and`/`or`/`not` items decode to None and cannot be re-encoded.
                if let Some(simple) = items.iter().cloned().collect::<Option<Vec<_>>>() {
                    let mut out = Vec::new();
                    matchedvalues::encode(&simple, &mut out);
                    let again = matchedvalues::decode(&out, &limits);
                    if again.as_ref() != Ok(&items) {
                        panic!("matched values round trip: {items:?} -> {again:?}");
                    }
                }
            }
        }
        1 => {
            if let Ok(specs) = deref::decode(v) {
                let mut out = Vec::new();
                deref::encode_specs(&specs, &mut out);
                if deref::decode(&out).as_ref() != Ok(&specs) {
                    panic!("deref specs round trip: {specs:?}");
                }
            }
        }
        2 => {
            if let Ok(res) = deref::decode_response(v) {
                let mut out = Vec::new();
                deref::encode_response(&res, &mut out);
                if deref::decode_response(&out).as_ref() != Ok(&res) {
                    panic!("deref response round trip: {res:?}");
                }
            }
        }
        _ => {
            let _ = proxyauthz::AuthzId::decode(v);
        }
    }
}

/// The RFC 4515 parser never panics and its output survives Display and the wire.
pub fn parse_filter(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(f) = proto::Filter::parse(s) {
        assert_eq!(proto::Filter::parse(&f.to_string()).as_ref(), Ok(&f));
        let mut wire = Vec::new();
        f.encode(&mut wire);
        assert_eq!(
            proto::Filter::decode(&wire, &proto::DecodeLimits::default()).as_ref(),
            Ok(&f)
        );
    }
}

/// The RFC 4514 parser never panics; a parsed DN prints to a string that parses back to a DN
/// with the same normalized form.
pub fn parse_dn(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(dn) = Dn::parse(s) else {
        return;
    };
    let again = Dn::parse(&dn.to_string()).unwrap_or_else(|e| {
        panic!(
            "{s:?} printed as {:?}, which does not parse: {e}",
            dn.to_string()
        )
    });
    let a = dn.normalize(schema());
    let b = again.normalize(schema());
    match (a, b) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{s:?}"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("{s:?}: normalizing the original gave {a:?}, the reprint {b:?}"),
    }
}

/// The LDIF reader never panics; every record it accepts is written by the LDIF writer and
/// read back as the same record.
pub fn ldif_reader(data: &[u8]) {
    let reader = ldif::Reader::new(data).max_record_len(1 << 20);
    for (i, rec) in reader.enumerate() {
        if i > 1000 {
            break;
        }
        let Ok(rec) = rec else {
            // A bad record may be followed by good ones; the reader must keep going safely.
            continue;
        };
        let mut w = ldif::Writer::new(Vec::new());
        if w.write_record(&rec).is_err() {
            continue;
        }
        let out = w.into_inner();
        let back: Vec<_> = ldif::Reader::new(out.as_slice()).collect();
        assert_eq!(
            back.len(),
            1,
            "one record written, {} read: {out:?}",
            back.len()
        );
        match &back[0] {
            Ok(b) => assert!(same_record(&rec, b), "{rec:?} became {b:?}"),
            Err(e) => panic!(
                "{rec:?} was written as {:?}, which reads as {e}",
                String::from_utf8_lossy(&out)
            ),
        }
    }
}

fn same_record(a: &ldif::Record, b: &ldif::Record) -> bool {
    use ldif::Record::*;
    match (a, b) {
        (
            Content {
                dn: d1, attrs: a1, ..
            },
            Content {
                dn: d2, attrs: a2, ..
            },
        ) => d1 == d2 && a1 == a2,
        (
            Change {
                dn: d1,
                change: c1,
                controls: k1,
                ..
            },
            Change {
                dn: d2,
                change: c2,
                controls: k2,
                ..
            },
        ) => d1 == d2 && c1 == c2 && k1 == k2,
        _ => false,
    }
}

/// Reading a transaction log or a snapshot file never panics, whatever the bytes: damage is a
/// typed error naming the offset (or a torn tail), never a crash of the recovering server.
pub fn log_recovery(data: &[u8]) {
    let _ = store::persist::read_log("log-fuzz", data);
    let _ = store::persist::read_snapshot("snap-fuzz", data, schema());
}
