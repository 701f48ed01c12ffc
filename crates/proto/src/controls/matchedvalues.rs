//! Matched Values (RFC 3876), OID 1.2.826.0.1.3344810.2.3.
//!
//! ```text
//! ValuesReturnFilter ::= SEQUENCE OF SimpleFilterItem
//! SimpleFilterItem ::= CHOICE {
//!         equalityMatch   [3] AttributeValueAssertion,
//!         substrings      [4] SubstringFilter,
//!         greaterOrEqual  [5] AttributeValueAssertion,
//!         lessOrEqual     [6] AttributeValueAssertion,
//!         present         [7] AttributeDescription,
//!         approxMatch     [8] AttributeValueAssertion,
//!         extensibleMatch [9] SimpleMatchingAssertion }
//! ```
//!
//! An `and`, `or` or `not` item is not a SimpleFilterItem; as slapd, it is accepted and
//! matches no value (`None`), while any other tag is a decoding error.

use ber::tag::SEQUENCE;
use ber::{Reader, Writer};

use crate::tags::{context, context_constructed};
use crate::{DecodeErrorKind, DecodeLimits, Filter};

pub const OID: &str = "1.2.826.0.1.3344810.2.3";

/// The items of a ValuesReturnFilter, in order; `None` for an item that matches nothing.
pub type ValuesReturnFilter<'a> = Vec<Option<Filter<'a>>>;

pub fn decode<'a>(
    value: &'a [u8],
    limits: &DecodeLimits,
) -> Result<ValuesReturnFilter<'a>, DecodeErrorKind> {
    let mut r = Reader::new(value);
    let mut s = r.sub(SEQUENCE)?;
    r.finish()?;
    let mut out = Vec::new();
    while !s.is_empty() {
        let (tag, body) = s.read_element()?;
        let item = match tag {
            t if (context_constructed(0)..=context_constructed(2)).contains(&t) => None,
            t if (context_constructed(3)..=context_constructed(6)).contains(&t)
                || t == context(7)
                || t == context_constructed(8)
                || t == context_constructed(9) =>
            {
                // The items are one level below the control value's SEQUENCE.
                Some(crate::filter::decode_filter(tag, body, 1, 2, limits)?)
            }
            t => return Err(DecodeErrorKind::UnknownFilter(t)),
        };
        out.push(item);
    }
    Ok(out)
}

/// Encodes a ValuesReturnFilter of simple items (a client's request; used by tests).
pub fn encode(items: &[Filter<'_>], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    let s = w.start(SEQUENCE);
    for f in items {
        crate::filter::encode_filter(&mut w, f);
    }
    w.end(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> DecodeLimits {
        DecodeLimits::default()
    }

    #[test]
    fn decodes_openldap_request() {
        // ldapsearch -E 'mv=((mail=*.org)(cn=Al*))'
        let items = [
            Filter::parse("(mail=*.org)").expect("filter"),
            Filter::parse("(cn>=Al)").expect("filter"),
            Filter::parse("(uid=*)").expect("filter"),
        ];
        let mut v = Vec::new();
        encode(&items, &mut v);
        let got = decode(&v, &limits()).expect("decodes");
        assert_eq!(got.len(), 3);
        for (g, want) in got.iter().zip(&items) {
            assert_eq!(g.as_ref(), Some(want));
        }
        assert!(decode(&[0x30, 0x00], &limits()).expect("empty").is_empty());
    }

    #[test]
    fn and_or_not_items_match_nothing() {
        // SEQUENCE { and { (cn=zz) } }
        let v = [
            0x30, 0x0c, 0xa0, 0x0a, 0xa3, 0x08, 0x04, 0x02, b'c', b'n', 0x04, 0x02, b'z', b'z',
        ];
        assert_eq!(decode(&v, &limits()).expect("decodes"), vec![None]);
    }

    #[test]
    fn rejects_malformed_values() {
        let eq = [0xa3, 0x08, 0x04, 0x02, b'c', b'n', 0x04, 0x02, b'z', b'z'];
        // Not a SEQUENCE.
        assert!(decode(&eq, &limits()).is_err());
        assert!(decode(&[], &limits()).is_err());
        assert!(decode(&[0x04, 0x00], &limits()).is_err());
        // Trailing bytes after the SEQUENCE.
        let mut v = vec![0x30, eq.len() as u8];
        v.extend_from_slice(&eq);
        v.push(0);
        assert!(decode(&v, &limits()).is_err());
        // An OCTET STRING as an item; a truncated item.
        assert!(decode(&[0x30, 0x02, 0x04, 0x00], &limits()).is_err());
        assert!(decode(&[0x30, 0x04, 0xa3, 0x04, 0x04, 0x02], &limits()).is_err());
    }
}
