//! Virtual list view (draft-ietf-ldapext-ldapv3-vlv-09): the request control
//! (2.16.840.1.113730.3.4.9) and the response control (2.16.840.1.113730.3.4.10).
//!
//! ```text
//! VirtualListViewRequest ::= SEQUENCE {
//!         beforeCount    INTEGER (0..maxInt),
//!         afterCount     INTEGER (0..maxInt),
//!         target       CHOICE {
//!                        byOffset        [0] SEQUENCE {
//!                             offset          INTEGER (1 .. maxInt),
//!                             contentCount    INTEGER (0 .. maxInt) },
//!                        greaterThanOrEqual [1] AssertionValue },
//!         contextID     OCTET STRING OPTIONAL }
//!
//! VirtualListViewResponse ::= SEQUENCE {
//!         targetPosition    INTEGER (0 .. maxInt),
//!         contentCount     INTEGER (0 .. maxInt),
//!         virtualListViewResult ENUMERATED { ... },
//!         contextID     OCTET STRING OPTIONAL }
//! ```

use std::borrow::Cow;

use ber::tag::{ENUMERATED, INTEGER, OCTET_STRING, SEQUENCE};
use ber::{Reader, Writer};

use crate::tags::{context, context_constructed};
use crate::DecodeErrorKind;

/// Where the client wants the list to be centred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<'a> {
    /// The `offset`th of the client's estimate of `content_count` entries.
    ByOffset { offset: i64, content_count: i64 },
    /// The first entry whose first sort key is at least this value.
    GreaterThanOrEqual(Cow<'a, [u8]>),
}

/// A VLV request's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlvRequest<'a> {
    pub before: i64,
    pub after: i64,
    pub target: Target<'a>,
    pub context: Option<Cow<'a, [u8]>>,
}

impl<'a> VlvRequest<'a> {
    pub fn decode(value: &'a [u8]) -> Result<VlvRequest<'a>, DecodeErrorKind> {
        let mut r = Reader::new(value);
        let mut s = r.sub(SEQUENCE)?;
        r.finish()?;
        let before = s.read_integer(INTEGER)?;
        let after = s.read_integer(INTEGER)?;
        for (field, v) in [("beforeCount", before), ("afterCount", after)] {
            if v < 0 {
                return Err(DecodeErrorKind::BadValue { field, value: v });
            }
        }
        let target = match s.peek_tag() {
            Some(t) if t == context_constructed(0) => {
                let mut o = s.sub(context_constructed(0))?;
                let offset = o.read_integer(INTEGER)?;
                let content_count = o.read_integer(INTEGER)?;
                o.finish()?;
                Target::ByOffset {
                    offset,
                    content_count,
                }
            }
            Some(t) if t == context(1) => {
                Target::GreaterThanOrEqual(Cow::Borrowed(s.read_octets(context(1))?))
            }
            other => {
                return Err(DecodeErrorKind::BadValue {
                    field: "virtual list view target",
                    value: other.map_or(-1, i64::from),
                })
            }
        };
        let context = s.read_optional(OCTET_STRING)?.map(Cow::Borrowed);
        s.finish()?;
        Ok(VlvRequest {
            before,
            after,
            target,
            context,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let s = w.start(SEQUENCE);
        w.write_integer(INTEGER, self.before);
        w.write_integer(INTEGER, self.after);
        match &self.target {
            Target::ByOffset {
                offset,
                content_count,
            } => {
                let o = w.start(context_constructed(0));
                w.write_integer(INTEGER, *offset);
                w.write_integer(INTEGER, *content_count);
                w.end(o);
            }
            Target::GreaterThanOrEqual(v) => w.write_octets(context(1), v),
        }
        if let Some(c) = &self.context {
            w.write_octets(OCTET_STRING, c);
        }
        w.end(s);
    }

    pub fn into_owned(self) -> VlvRequest<'static> {
        VlvRequest {
            before: self.before,
            after: self.after,
            target: match self.target {
                Target::ByOffset {
                    offset,
                    content_count,
                } => Target::ByOffset {
                    offset,
                    content_count,
                },
                Target::GreaterThanOrEqual(v) => {
                    Target::GreaterThanOrEqual(Cow::Owned(v.into_owned()))
                }
            },
            context: self.context.map(|c| Cow::Owned(c.into_owned())),
        }
    }
}

/// A VLV response's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlvResponse<'a> {
    pub target_position: i64,
    pub content_count: i64,
    pub result: u32,
    pub context: Option<Cow<'a, [u8]>>,
}

impl<'a> VlvResponse<'a> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let s = w.start(SEQUENCE);
        w.write_integer(INTEGER, self.target_position);
        w.write_integer(INTEGER, self.content_count);
        w.write_integer(ENUMERATED, i64::from(self.result));
        if let Some(c) = &self.context {
            w.write_octets(OCTET_STRING, c);
        }
        w.end(s);
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24);
        self.encode(&mut out);
        out
    }

    pub fn decode(value: &'a [u8]) -> Result<VlvResponse<'a>, DecodeErrorKind> {
        let mut r = Reader::new(value);
        let mut s = r.sub(SEQUENCE)?;
        r.finish()?;
        let target_position = s.read_integer(INTEGER)?;
        let content_count = s.read_integer(INTEGER)?;
        let result = s.read_enumerated()?;
        let result = u32::try_from(result).map_err(|_| DecodeErrorKind::BadValue {
            field: "virtualListViewResult",
            value: result,
        })?;
        let context = s.read_optional(OCTET_STRING)?.map(Cow::Borrowed);
        s.finish()?;
        Ok(VlvResponse {
            target_position,
            content_count,
            result,
            context,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_ldapsearch_sends() {
        // ldapsearch -E vlv=1/2/3/0: before 1, after 2, byOffset { 3, 0 }.
        let v = [
            0x30, 0x0e, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02, 0xa0, 0x06, 0x02, 0x01, 0x03, 0x02,
            0x01, 0x00,
        ];
        let r = VlvRequest::decode(&v).expect("decodes");
        assert_eq!((r.before, r.after), (1, 2));
        assert_eq!(
            r.target,
            Target::ByOffset {
                offset: 3,
                content_count: 0
            }
        );
        assert!(r.context.is_none());
        let mut out = Vec::new();
        r.encode(&mut out);
        assert_eq!(out, v);
        // By value, with a context.
        let by_value = VlvRequest {
            before: 0,
            after: 5,
            target: Target::GreaterThanOrEqual(Cow::Borrowed(b"Bob")),
            context: Some(Cow::Borrowed(&[1, 2, 3, 4, 5, 6, 7, 8])),
        };
        let mut out = Vec::new();
        by_value.encode(&mut out);
        assert_eq!(VlvRequest::decode(&out).expect("decodes"), by_value);
    }

    #[test]
    fn rejects_malformed_requests() {
        for bad in [
            &[][..],
            &[0x30, 0x00],
            // No target.
            &[0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01],
            // A target of an unknown kind ([2]).
            &[0x30, 0x08, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0x82, 0x00],
            // A negative beforeCount.
            &[0x30, 0x08, 0x02, 0x01, 0xff, 0x02, 0x01, 0x01, 0x81, 0x00],
            // byOffset without contentCount.
            &[
                0x30, 0x0b, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0xa0, 0x03, 0x02, 0x01, 0x01,
            ],
            // Trailing bytes inside the SEQUENCE.
            &[
                0x30, 0x0a, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0x81, 0x00, 0x05, 0x00,
            ],
            // Trailing bytes after it.
            &[
                0x30, 0x08, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0x81, 0x00, 0x00,
            ],
        ] {
            assert!(VlvRequest::decode(bad).is_err(), "{bad:02x?}");
        }
    }

    #[test]
    fn response_matches_slapd_bytes() {
        // slapd's answer to an offset past the end: target 0, count 5, offsetRangeError (77 in
        // OpenLDAP's numbering), an 8-byte context.
        let v = [
            0x30, 0x13, 0x02, 0x01, 0x00, 0x02, 0x01, 0x05, 0x0a, 0x01, 0x4d, 0x04, 0x08, 0xc0,
            0x65, 0x10, 0x24, 0x53, 0x7f, 0x00, 0x00,
        ];
        let r = VlvResponse::decode(&v).expect("decodes");
        assert_eq!((r.target_position, r.content_count, r.result), (0, 5, 77));
        assert_eq!(r.to_vec(), v);
        assert!(VlvResponse::decode(&v[..v.len() - 1]).is_err());
    }
}
