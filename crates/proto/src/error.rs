//! Error types of this crate. Each one says what was wrong in words a person can act on.

use crate::tags;
use thiserror::Error;

/// Why the byte stream cannot be split into PDUs. Either is fatal for the connection.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("LDAP message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("malformed LDAP message framing: {0}")]
    Malformed(#[from] ber::Error),
    #[error("LDAP message must start with a SEQUENCE (0x30), found 0x{0:02x}")]
    NotASequence(u8),
}

/// What was wrong inside a message whose envelope could be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeErrorKind {
    #[error("{0}")]
    Ber(#[from] ber::Error),
    #[error("unknown protocolOp tag 0x{0:02x}")]
    UnknownOp(u8),
    #[error("{field} has invalid value {value}")]
    BadValue { field: &'static str, value: i64 },
    #[error("unknown authentication choice tag 0x{0:02x} (expected simple [0] or sasl [3])")]
    UnknownAuth(u8),
    #[error("unknown filter choice tag 0x{0:02x}")]
    UnknownFilter(u8),
    #[error("filter nested deeper than the limit of {0}")]
    FilterTooDeep(usize),
    #[error("BER elements nested deeper than the limit of {0}")]
    BerTooDeep(usize),
    #[error("invalid substrings filter: {0}")]
    BadSubstrings(&'static str),
    #[error("{0}")]
    Invalid(&'static str),
}

/// A PDU that is not a valid LDAPMessage.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The envelope (SEQUENCE, messageID) could not be read: the id is unknown.
    #[error("malformed LDAP message: {0}")]
    Envelope(ber::Error),
    /// The messageID is outside 0..=2^31-1.
    #[error("message id {0} is outside 0..=2147483647")]
    BadMessageId(i64),
    /// The id is known; the protocolOp tag too when `op` is `Some` (tag number, not byte).
    #[error("message {id}{}: {kind}", op_name(*.op))]
    Message {
        id: i32,
        op: Option<u8>,
        kind: DecodeErrorKind,
    },
}

fn op_name(op: Option<u8>) -> String {
    match op {
        Some(n) => format!(" (operation tag {n})"),
        None => String::new(),
    }
}

impl DecodeError {
    /// The message id, when it could be read, so the server can answer with the right id.
    pub fn message_id(&self) -> Option<i32> {
        match self {
            DecodeError::Message { id, .. } => Some(*id),
            _ => None,
        }
    }

    /// The application tag number of the protocolOp, when it could be read.
    pub fn op_tag(&self) -> Option<u8> {
        match self {
            DecodeError::Message { op, .. } => *op,
            _ => None,
        }
    }

    /// Whether the failed message was a client request.
    pub fn is_request_op(&self) -> bool {
        self.op_tag().is_some_and(tags::is_request)
    }

    /// The response tag number a server should use to report this error to the client, if the
    /// request has one (RFC 4511 §4.1.1: answer protocolError in the operation's response when
    /// the id and operation are known; otherwise send a Notice of Disconnection).
    pub fn response_tag(&self) -> Option<u8> {
        self.op_tag().and_then(tags::response_for)
    }
}

/// Why an RFC 4515 filter string could not be parsed. `pos` is a byte offset into the input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FilterParseError {
    #[error("empty filter")]
    Empty,
    #[error("unexpected end of filter at byte {0}: missing ')'?")]
    UnexpectedEnd(usize),
    #[error("unexpected character {ch:?} at byte {pos}")]
    Unexpected { pos: usize, ch: char },
    #[error("invalid escape at byte {0}: '\\' must be followed by two hex digits")]
    BadEscape(usize),
    #[error("invalid attribute description at byte {0}")]
    BadAttribute(usize),
    #[error("missing filter type (=, ~=, >=, <=, :=) at byte {0}")]
    MissingOperator(usize),
    #[error("invalid extensible match at byte {0}: expected attr[:dn][:rule]:=value")]
    BadExtensible(usize),
    #[error("'*' is only allowed in equality filters (substrings), at byte {0}")]
    UnexpectedStar(usize),
    #[error("filter nested deeper than the limit of {0}")]
    TooDeep(usize),
    #[error("{0} unexpected bytes after the filter")]
    Trailing(usize),
}
