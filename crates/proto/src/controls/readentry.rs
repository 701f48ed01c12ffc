//! Pre-read and post-read controls (RFC 4527), OIDs 1.3.6.1.1.13.1 and 1.3.6.1.1.13.2.
//!
//! The request value is an `AttributeSelection ::= SEQUENCE OF selector LDAPString`, as in a
//! search request; the response value is the entry as a SearchResultEntry
//! ([`crate::encode_search_entry_op`]).

use std::borrow::Cow;

use ber::tag::{OCTET_STRING, SEQUENCE};
use ber::Reader;

use crate::DecodeErrorKind;

/// Decodes the attribute selection of a pre-read or post-read request control.
pub fn decode_selection(value: &[u8]) -> Result<Vec<Cow<'_, [u8]>>, DecodeErrorKind> {
    let mut r = Reader::new(value);
    let mut s = r.sub(SEQUENCE)?;
    let mut out = Vec::new();
    while !s.is_empty() {
        out.push(Cow::Borrowed(s.read_octets(OCTET_STRING)?));
    }
    r.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_openldap_selections() {
        // ldapmodify -e preread=cn,sn
        let v = [0x30, 0x08, 0x04, 0x02, b'c', b'n', 0x04, 0x02, b's', b'n'];
        let sel = decode_selection(&v).expect("decodes");
        assert_eq!(
            sel,
            vec![Cow::Borrowed(&b"cn"[..]), Cow::Borrowed(&b"sn"[..])]
        );
        assert!(decode_selection(&[0x30, 0x00]).expect("empty").is_empty());
        assert!(decode_selection(&[0x30, 0x02, 0x02, 0x00]).is_err());
        assert!(decode_selection(&[0x30, 0x00, 0x00]).is_err());
    }
}
