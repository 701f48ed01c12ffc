//! Server-side sort (RFC 2891): the request control (1.2.840.113556.1.4.473) and the sortResult
//! response control (1.2.840.113556.1.4.474).
//!
//! ```text
//! SortKeyList ::= SEQUENCE OF SEQUENCE {
//!         attributeType   AttributeDescription,
//!         orderingRule    [0] MatchingRuleId OPTIONAL,
//!         reverseOrder    [1] BOOLEAN DEFAULT FALSE }
//!
//! SortResult ::= SEQUENCE {
//!         sortResult  ENUMERATED { ... },
//!         attributeType [0] AttributeDescription OPTIONAL }
//! ```

use std::borrow::Cow;

use ber::tag::{ENUMERATED, OCTET_STRING, SEQUENCE};
use ber::{Reader, Writer};

use crate::tags::context;
use crate::DecodeErrorKind;

/// One sort key of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey<'a> {
    /// The attribute description, as sent.
    pub attr: Cow<'a, [u8]>,
    /// The ordering rule by name or OID; absent: the attribute's ORDERING rule.
    pub rule: Option<Cow<'a, [u8]>>,
    pub reverse: bool,
}

impl SortKey<'_> {
    pub fn into_owned(self) -> SortKey<'static> {
        SortKey {
            attr: Cow::Owned(self.attr.into_owned()),
            rule: self.rule.map(|r| Cow::Owned(r.into_owned())),
            reverse: self.reverse,
        }
    }
}

/// Decodes a sort request's value: at least one key (an empty list is malformed, as slapd
/// holds it), each with a non-empty attribute description.
pub fn decode_request(value: &[u8]) -> Result<Vec<SortKey<'_>>, DecodeErrorKind> {
    let mut r = Reader::new(value);
    let mut list = r.sub(SEQUENCE)?;
    r.finish()?;
    let mut keys = Vec::new();
    while !list.is_empty() {
        let mut k = list.sub(SEQUENCE)?;
        let attr = k.read_octets(OCTET_STRING)?;
        if attr.is_empty() {
            return Err(DecodeErrorKind::BadValue {
                field: "sort key attributeType",
                value: 0,
            });
        }
        let rule = k.read_optional(context(0))?;
        let reverse = match k.peek_tag() {
            Some(t) if t == context(1) => k.read_bool(context(1))?,
            _ => false,
        };
        k.finish()?;
        keys.push(SortKey {
            attr: Cow::Borrowed(attr),
            rule: rule.map(Cow::Borrowed),
            reverse,
        });
    }
    if keys.is_empty() {
        return Err(DecodeErrorKind::BadValue {
            field: "sort key list length",
            value: 0,
        });
    }
    Ok(keys)
}

/// Encodes a sort request's value (as clients send it; for tests and tools).
pub fn encode_request(keys: &[SortKey<'_>], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    let list = w.start(SEQUENCE);
    for k in keys {
        let s = w.start(SEQUENCE);
        w.write_octets(OCTET_STRING, &k.attr);
        if let Some(rule) = &k.rule {
            w.write_octets(context(0), rule);
        }
        if k.reverse {
            w.write_bool(context(1), true);
        }
        w.end(s);
    }
    w.end(list);
}

/// The sortResult response control's value: a result code and, optionally, the attribute
/// that caused a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortResult<'a> {
    pub code: u32,
    pub attr: Option<Cow<'a, [u8]>>,
}

impl<'a> SortResult<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let s = w.start(SEQUENCE);
        w.write_integer(ENUMERATED, i64::from(self.code));
        if let Some(a) = &self.attr {
            w.write_octets(context(0), a);
        }
        w.end(s);
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.attr.as_ref().map_or(0, |a| a.len()));
        self.encode(&mut out);
        out
    }

    pub fn decode(value: &'a [u8]) -> Result<SortResult<'a>, DecodeErrorKind> {
        let mut r = Reader::new(value);
        let mut s = r.sub(SEQUENCE)?;
        r.finish()?;
        let code = s.read_enumerated()?;
        let code = u32::try_from(code).map_err(|_| DecodeErrorKind::BadValue {
            field: "sortResult",
            value: code,
        })?;
        let attr = s.read_optional(context(0))?.map(Cow::Borrowed);
        s.finish()?;
        Ok(SortResult { code, attr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_ldapsearch_sends() {
        // ldapsearch -E sss=cn/-sn:2.5.13.3
        let v = [
            0x30, 0x19, 0x30, 0x04, 0x04, 0x02, b'c', b'n', 0x30, 0x11, 0x04, 0x02, b's', b'n',
            0x80, 0x08, b'2', b'.', b'5', b'.', b'1', b'3', b'.', b'3', 0x81, 0x01, 0xff,
        ];
        let keys = decode_request(&v).expect("decodes");
        assert_eq!(keys.len(), 2);
        assert_eq!(&*keys[0].attr, b"cn");
        assert!(keys[0].rule.is_none() && !keys[0].reverse);
        assert_eq!(&*keys[1].attr, b"sn");
        assert_eq!(keys[1].rule.as_deref(), Some(&b"2.5.13.3"[..]));
        assert!(keys[1].reverse);
        let mut out = Vec::new();
        encode_request(&keys, &mut out);
        assert_eq!(out, v);
    }

    #[test]
    fn rejects_malformed_requests() {
        for bad in [
            &[][..],
            // An empty key list.
            &[0x30, 0x00],
            // A key without an attribute.
            &[0x30, 0x02, 0x30, 0x00],
            // An empty attribute.
            &[0x30, 0x04, 0x30, 0x02, 0x04, 0x00],
            // Trailing bytes after the list.
            &[0x30, 0x04, 0x30, 0x02, 0x04, 0x00, 0x00],
            // Unknown element in a key.
            &[0x30, 0x06, 0x30, 0x04, 0x04, 0x01, b'a', 0x82, 0x00],
            // reverseOrder of two bytes.
            &[0x30, 0x08, 0x30, 0x06, 0x04, 0x01, b'a', 0x81, 0x02, 0x00],
            // A truncated list.
            &[0x30, 0x06, 0x30, 0x04, 0x04, 0x02, b'c'],
        ] {
            assert!(decode_request(bad).is_err(), "{bad:02x?}");
        }
    }

    #[test]
    fn sort_result_round_trips() {
        let ok = SortResult {
            code: 0,
            attr: None,
        };
        assert_eq!(ok.to_vec(), [0x30, 0x03, 0x0a, 0x01, 0x00]);
        let bad = SortResult {
            code: 18,
            attr: Some(Cow::Borrowed(b"cn")),
        };
        assert_eq!(SortResult::decode(&bad.to_vec()).expect("decodes"), bad);
        assert!(SortResult::decode(&[0x30, 0x03, 0x02, 0x01, 0x00]).is_err());
    }
}
