//! Password Modify extended operation values (RFC 3062).
//!
//! ```text
//! PasswdModifyRequestValue ::= SEQUENCE {
//!     userIdentity    [0]  OCTET STRING OPTIONAL
//!     oldPasswd       [1]  OCTET STRING OPTIONAL
//!     newPasswd       [2]  OCTET STRING OPTIONAL }
//! PasswdModifyResponseValue ::= SEQUENCE {
//!     genPasswd       [0]     OCTET STRING OPTIONAL }
//! ```

use crate::error::DecodeErrorKind;
use crate::tags::context;
use ber::tag::SEQUENCE;
use ber::{Reader, Writer};
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PasswdModifyRequest<'a> {
    pub user_identity: Option<Cow<'a, [u8]>>,
    pub old_passwd: Option<Cow<'a, [u8]>>,
    pub new_passwd: Option<Cow<'a, [u8]>>,
}

impl<'a> PasswdModifyRequest<'a> {
    /// Decodes the requestValue. When the request has no value at all, RFC 3062 means all
    /// three fields are absent: use `PasswdModifyRequest::default()`.
    pub fn decode(value: &'a [u8]) -> Result<Self, DecodeErrorKind> {
        let mut outer = Reader::new(value);
        let mut r = outer.sub(SEQUENCE)?;
        outer.finish()?;
        let user_identity = r.read_optional(context(0))?.map(Cow::Borrowed);
        let old_passwd = r.read_optional(context(1))?.map(Cow::Borrowed);
        let new_passwd = r.read_optional(context(2))?.map(Cow::Borrowed);
        r.finish()?;
        Ok(PasswdModifyRequest {
            user_identity,
            old_passwd,
            new_passwd,
        })
    }

    /// Appends the requestValue (for clients and tests).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let m = w.start(SEQUENCE);
        for (tag, v) in [
            (0, &self.user_identity),
            (1, &self.old_passwd),
            (2, &self.new_passwd),
        ] {
            if let Some(v) = v {
                w.write_octets(context(tag), v);
            }
        }
        w.end(m);
    }
}

/// The responseValue carrying a generated password, as a fresh buffer.
pub fn encode_passwd_modify_response(gen_passwd: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(gen_passwd.len() + 4);
    PasswdModifyResponse {
        gen_passwd: Some(Cow::Borrowed(gen_passwd)),
    }
    .encode(&mut out);
    out
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PasswdModifyResponse<'a> {
    pub gen_passwd: Option<Cow<'a, [u8]>>,
}

impl PasswdModifyResponse<'_> {
    /// Appends the responseValue. RFC 3062 says to omit the whole responseValue when there is
    /// no generated password; callers decide that, this always writes the SEQUENCE.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let m = w.start(SEQUENCE);
        if let Some(p) = &self.gen_passwd {
            w.write_octets(context(0), p);
        }
        w.end(m);
    }

    /// Decodes a responseValue.
    pub fn decode(value: &[u8]) -> Result<PasswdModifyResponse<'_>, DecodeErrorKind> {
        let mut outer = Reader::new(value);
        let mut r = outer.sub(SEQUENCE)?;
        outer.finish()?;
        let gen_passwd = r.read_optional(context(0))?.map(Cow::Borrowed);
        r.finish()?;
        Ok(PasswdModifyResponse { gen_passwd })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_errors() {
        let req = PasswdModifyRequest {
            user_identity: Some(Cow::Borrowed(b"uid=u,dc=x")),
            old_passwd: None,
            new_passwd: Some(Cow::Borrowed(b"new")),
        };
        let mut buf = Vec::new();
        req.encode(&mut buf);
        assert_eq!(PasswdModifyRequest::decode(&buf), Ok(req));
        // An empty SEQUENCE: every field absent.
        assert_eq!(
            PasswdModifyRequest::decode(&[0x30, 0x00]),
            Ok(PasswdModifyRequest::default())
        );
        // Out of order ([2] before [0]) leaves [0] unread: trailing bytes.
        assert!(
            PasswdModifyRequest::decode(&[0x30, 0x06, 0x82, 0x01, b'a', 0x80, 0x01, b'b']).is_err()
        );
        assert!(PasswdModifyRequest::decode(&[0x30, 0x00, 0x00]).is_err());
        let resp = PasswdModifyResponse {
            gen_passwd: Some(Cow::Borrowed(b"s3cret")),
        };
        let mut buf = Vec::new();
        resp.encode(&mut buf);
        assert_eq!(
            buf,
            [0x30, 0x08, 0x80, 0x06, b's', b'3', b'c', b'r', b'e', b't']
        );
        assert_eq!(PasswdModifyResponse::decode(&buf), Ok(resp));
        assert_eq!(encode_passwd_modify_response(b"s3cret"), buf);
    }
}
