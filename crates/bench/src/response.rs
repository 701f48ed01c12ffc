//! The hot-path response decoder: message id, op tag, result code and (for entries) the DN,
//! borrowed from the read buffer. A full `LdapMessage::decode` would build vectors for every
//! entry's attributes; the generator only needs these four things.

use ber::Reader;

/// Tag bytes of the responses the generator acts on.
pub(crate) mod tag {
    pub const BIND: u8 = 0x61;
    pub const SEARCH_ENTRY: u8 = 0x64;
    pub const SEARCH_DONE: u8 = 0x65;
    pub const MODIFY: u8 = 0x67;
    pub const ADD: u8 = 0x69;
    pub const DELETE: u8 = 0x6b;
    pub const MODIFY_DN: u8 = 0x6d;
    pub const COMPARE: u8 = 0x6f;
    pub const SEARCH_REFERENCE: u8 = 0x73;
    pub const EXTENDED: u8 = 0x78;
    pub const INTERMEDIATE: u8 = 0x79;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Response<'a> {
    pub id: i32,
    pub tag: u8,
    /// The resultCode for LDAPResult-shaped responses.
    pub code: Option<u32>,
    /// The objectName of a SearchResultEntry, empty otherwise.
    pub dn: &'a [u8],
}

/// Decodes the head of one framed PDU.
pub(crate) fn parse(pdu: &[u8]) -> Result<Response<'_>, ber::Error> {
    let mut msg = Reader::new(pdu).sub(ber::tag::SEQUENCE)?;
    let id = msg.read_integer(ber::tag::INTEGER)?;
    let id = i32::try_from(id).map_err(|_| ber::Error::BadInteger(8))?;
    let (op_tag, contents) = msg.read_element()?;
    let mut body = Reader::new(contents);
    let mut resp = Response {
        id,
        tag: op_tag,
        code: None,
        dn: &[],
    };
    match op_tag {
        tag::SEARCH_ENTRY => resp.dn = body.read_octets(ber::tag::OCTET_STRING)?,
        tag::BIND
        | tag::SEARCH_DONE
        | tag::MODIFY
        | tag::ADD
        | tag::DELETE
        | tag::MODIFY_DN
        | tag::COMPARE
        | tag::EXTENDED => {
            let code = body.read_enumerated()?;
            resp.code = Some(u32::try_from(code).unwrap_or(u32::MAX));
        }
        _ => {}
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::{LdapMessage, LdapResult, ProtocolOp, ResultCode};
    use std::borrow::Cow;

    fn result(code: ResultCode) -> LdapResult<'static> {
        LdapResult {
            code,
            matched_dn: Cow::Borrowed(b""),
            message: Cow::Borrowed(b""),
            referral: vec![],
        }
    }

    #[test]
    fn reads_what_proto_writes() {
        let mut buf = Vec::new();
        LdapMessage {
            id: 9,
            op: ProtocolOp::CompareResponse(result(ResultCode::CompareTrue)),
            controls: vec![],
        }
        .encode(&mut buf);
        let r = parse(&buf).ok();
        assert_eq!(
            r.map(|r| (r.id, r.tag, r.code)),
            Some((9, tag::COMPARE, Some(6)))
        );

        buf.clear();
        LdapMessage {
            id: 3,
            op: ProtocolOp::SearchResultEntry {
                dn: Cow::Borrowed(b"uid=a,dc=x"),
                attributes: vec![],
            },
            controls: vec![],
        }
        .encode(&mut buf);
        let r = parse(&buf).ok();
        assert_eq!(
            r.map(|r| (r.id, r.tag, r.dn)),
            Some((3, tag::SEARCH_ENTRY, &b"uid=a,dc=x"[..]))
        );
        assert!(parse(&buf[..buf.len() - 1]).is_err());
    }
}
