//! LDAP transactions (RFC 5805) and Cancel (RFC 3909): the values of their extended
//! operations.
//!
//! ```text
//! txnEndReq ::= SEQUENCE {
//!      commit         BOOLEAN DEFAULT TRUE,
//!      identifier     OCTET STRING }
//! txnEndRes ::= SEQUENCE {
//!      messageID MessageID OPTIONAL,
//!           -- msgid associated with non-success resultCode
//!      updatesControls SEQUENCE OF updateControls SEQUENCE {
//!           messageID MessageID,
//!           controls  Controls } OPTIONAL }
//! cancelRequestValue ::= SEQUENCE {
//!      cancelID        MessageID }
//! ```
//! The Start Transaction response value and the Transaction Specification control value are
//! the bare identifier (an OCTET STRING's contents).

use ber::tag::{BOOLEAN, INTEGER, OCTET_STRING, SEQUENCE};
use ber::{Reader, Writer};

use crate::error::DecodeErrorKind;

/// An End Transaction request: commit (true) or abort the transaction `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnEndRequest<'a> {
    pub commit: bool,
    pub id: &'a [u8],
}

impl<'a> TxnEndRequest<'a> {
    pub fn decode(value: &'a [u8]) -> Result<TxnEndRequest<'a>, DecodeErrorKind> {
        let mut r = Reader::new(value);
        let mut s = r.sub(SEQUENCE)?;
        let commit = if s.peek_tag() == Some(BOOLEAN) {
            s.read_bool(BOOLEAN)?
        } else {
            true
        };
        let id = s.read_octets(OCTET_STRING)?;
        s.finish()?;
        r.finish()?;
        Ok(TxnEndRequest { commit, id })
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.id.len());
        let mut w = Writer::new(&mut out);
        let s = w.start(SEQUENCE);
        if !self.commit {
            w.write_bool(BOOLEAN, false);
        }
        w.write_octets(OCTET_STRING, self.id);
        w.end(s);
        out
    }
}

/// The End Transaction response value naming the operation that failed the commit.
pub fn encode_txn_end_failed(message_id: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    let mut w = Writer::new(&mut out);
    let s = w.start(SEQUENCE);
    w.write_integer(INTEGER, i64::from(message_id));
    w.end(s);
    out
}

/// The message id in an End Transaction response value, if it names one (updatesControls,
/// which follow it, are not read).
pub fn decode_txn_end_response(value: &[u8]) -> Result<Option<i64>, DecodeErrorKind> {
    let mut r = Reader::new(value);
    let mut s = r.sub(SEQUENCE)?;
    let id = if s.peek_tag() == Some(INTEGER) {
        Some(s.read_integer(INTEGER)?)
    } else {
        None
    };
    r.finish()?;
    Ok(id)
}

/// The message id a Cancel request names.
pub fn decode_cancel(value: &[u8]) -> Result<i64, DecodeErrorKind> {
    let mut r = Reader::new(value);
    let mut s = r.sub(SEQUENCE)?;
    let id = s.read_integer(INTEGER)?;
    s.finish()?;
    r.finish()?;
    Ok(id)
}

/// A Cancel request value naming message `id`.
pub fn encode_cancel(id: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    let mut w = Writer::new(&mut out);
    let s = w.start(SEQUENCE);
    w.write_integer(INTEGER, i64::from(id));
    w.end(s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_request_round_trips_and_commit_defaults_to_true() {
        let r = TxnEndRequest {
            commit: false,
            id: b"7",
        };
        assert_eq!(TxnEndRequest::decode(&r.to_vec()).unwrap(), r);
        let c = TxnEndRequest {
            commit: true,
            id: b"7",
        };
        let v = c.to_vec();
        assert_eq!(v, [0x30, 0x03, 0x04, 0x01, b'7']);
        assert_eq!(TxnEndRequest::decode(&v).unwrap(), c);
        assert!(TxnEndRequest::decode(&[0x30, 0x00]).is_err());
        assert!(TxnEndRequest::decode(&[0x30, 0x03, 0x04, 0x01, b'7', 0]).is_err());
    }

    #[test]
    fn end_response_and_cancel_values() {
        assert_eq!(
            decode_txn_end_response(&encode_txn_end_failed(300)).unwrap(),
            Some(300)
        );
        assert_eq!(decode_txn_end_response(&[0x30, 0x00]).unwrap(), None);
        assert_eq!(decode_cancel(&encode_cancel(5)).unwrap(), 5);
        assert!(decode_cancel(&[0x30, 0x00]).is_err());
    }
}
