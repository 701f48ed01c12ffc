//! Simple Paged Results (RFC 2696), OID 1.2.840.113556.1.4.319.
//!
//! ```text
//! realSearchControlValue ::= SEQUENCE {
//!         size            INTEGER (0..maxInt),
//!                                 -- requested page size from client
//!                                 -- result set size estimate from server
//!         cookie          OCTET STRING }
//! ```

use std::borrow::Cow;

use ber::tag::{INTEGER, OCTET_STRING, SEQUENCE};
use ber::{Reader, Writer};

use crate::DecodeErrorKind;

/// The value of a paged results control: in a request the page size and the cookie of the
/// previous page (empty on the first); in a response the server's estimate of the result
/// set's size (0: unknown) and the cookie of the next page (empty after the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagedResults<'a> {
    pub size: i64,
    pub cookie: Cow<'a, [u8]>,
}

impl<'a> PagedResults<'a> {
    pub fn decode(value: &'a [u8]) -> Result<PagedResults<'a>, DecodeErrorKind> {
        let mut r = Reader::new(value);
        let mut s = r.sub(SEQUENCE)?;
        let size = s.read_integer(INTEGER)?;
        let cookie = s.read_octets(OCTET_STRING)?;
        s.finish()?;
        r.finish()?;
        Ok(PagedResults {
            size,
            cookie: Cow::Borrowed(cookie),
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let s = w.start(SEQUENCE);
        w.write_integer(INTEGER, self.size);
        w.write_octets(OCTET_STRING, &self.cookie);
        w.end(s);
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.cookie.len());
        self.encode(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_openldap_bytes() {
        // ldapsearch -E pr=5/noprompt sends SEQUENCE { INTEGER 5, OCTET STRING "" }.
        let first = [0x30, 0x05, 0x02, 0x01, 0x05, 0x04, 0x00];
        let p = PagedResults::decode(&first).expect("decodes");
        assert_eq!(p.size, 5);
        assert!(p.cookie.is_empty());
        assert_eq!(p.to_vec(), first);
        let next = PagedResults {
            size: 0,
            cookie: Cow::Borrowed(&[1, 2, 3, 4, 5, 6, 7, 8]),
        };
        assert_eq!(PagedResults::decode(&next.to_vec()).expect("decodes"), next);
    }

    #[test]
    fn rejects_malformed_values() {
        assert!(PagedResults::decode(&[]).is_err());
        assert!(PagedResults::decode(&[0x30, 0x03, 0x02, 0x01, 0x05]).is_err());
        // Trailing bytes after the SEQUENCE.
        assert!(PagedResults::decode(&[0x30, 0x05, 0x02, 0x01, 0x05, 0x04, 0x00, 0x00]).is_err());
        // An OCTET STRING where the size belongs.
        assert!(PagedResults::decode(&[0x30, 0x04, 0x04, 0x00, 0x04, 0x00]).is_err());
    }
}
