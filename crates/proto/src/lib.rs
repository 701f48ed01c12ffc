//! LDAPv3 messages (RFC 4511): types, decoding from borrowed bytes, one-pass encoding, framing,
//! filters (wire form and RFC 4515 string form), controls and result codes.
//!
//! CONTRACT (used by `server`, `linden bench` and tests; keep these names and shapes):
//! - `frame(buf, max_pdu) -> Result<Option<usize>, FrameError>`: length of the first complete PDU
//!   in `buf`, `None` when more bytes are needed; `announced_len(buf, max_pdu)`: the length its
//!   header announces, as soon as the header is complete.
//! - `LdapMessage::decode(pdu) -> Result<LdapMessage<'_>, DecodeError>` for exactly one PDU
//!   (trailing bytes are an error).
//! - `LdapMessage::encode(&self, out: &mut Vec<u8>)` appends one PDU.
//! - `encode_search_entry(out, msg_id, dn, attrs)` streams an entry without building a message;
//!   `encode_search_entry_with_controls` does the same with response controls; `EntryWriter`
//!   writes one attribute at a time, for callers that choose them as they go.
//! - `Filter::parse(&str) -> Result<Filter<'static>, FilterParseError>` (RFC 4515) and
//!   `Display for Filter` writes the string form.
//!
//! Module map:
//! - `frame`: find the length of the next PDU from its header alone.
//! - `client`: [`ClientConn`], a client's end without I/O: request ids and encoding, response
//!   PDUs framed from the bytes read (the console's client and the replication consumer).
//! - `decode`: `LdapMessage::decode` (borrows from the PDU; limits from [`DecodeLimits`]).
//! - `encode`: `LdapMessage::encode` plus the hot-path streaming encoders
//!   ([`encode_search_entry`], [`encode_result`], [`encode_extended_response`]).
//! - `filter`: filters on the wire; `filter_str`: the RFC 4515 string form.
//! - `error`: [`DecodeError`], [`FrameError`], [`FilterParseError`].
//! - `result`: [`ResultCode`] numbers and names.
//! - [`tags`], [`oids`]: protocol constants.
//! - [`controls`]: request and response control values, one module per control.
//! - [`passwd`]: the Password Modify extended operation values (RFC 3062).
//! - [`txn`]: the Start/End Transaction (RFC 5805) and Cancel (RFC 3909) values.
//! - [`controls`]: control values, one module per control; response controls are encoded by
//!   [`encode_result_with`] and [`encode_extended_response_with`].
//!
//! Tests: `tests/vectors/` holds PDUs captured from OpenLDAP's clients (re-run
//! `tests/vectors/capture.py` to refresh them); `fuzz/` (outside the workspace) fuzzes the
//! decoder and the filter parser.
//!
//! Decoding never copies: every `Cow` in a decoded message is `Borrowed` from the input PDU.

use std::borrow::Cow;

mod client;
pub mod controls;
mod decode;
mod encode;
mod error;
mod filter;
mod filter_str;
mod frame;
pub mod oids;
pub mod passwd;
mod result;
pub mod tags;
pub mod txn;

pub use client::ClientConn;
pub use encode::{
    encode_extended_response, encode_extended_response_with, encode_intermediate_response,
    encode_result, encode_result_with, encode_search_entry, encode_search_entry_op,
    encode_search_entry_with_controls, EntryWriter,
};
pub use error::{DecodeError, DecodeErrorKind, FilterParseError, FrameError};
pub use frame::{announced_len, frame};
pub use passwd::{encode_passwd_modify_response, PasswdModifyRequest, PasswdModifyResponse};

/// Result codes of RFC 4511 §4.1.9 (plus the ones OpenLDAP uses for extensions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ResultCode {
    Success = 0,
    OperationsError = 1,
    ProtocolError = 2,
    TimeLimitExceeded = 3,
    SizeLimitExceeded = 4,
    CompareFalse = 5,
    CompareTrue = 6,
    AuthMethodNotSupported = 7,
    StrongerAuthRequired = 8,
    Referral = 10,
    AdminLimitExceeded = 11,
    UnavailableCriticalExtension = 12,
    ConfidentialityRequired = 13,
    SaslBindInProgress = 14,
    NoSuchAttribute = 16,
    UndefinedAttributeType = 17,
    InappropriateMatching = 18,
    ConstraintViolation = 19,
    AttributeOrValueExists = 20,
    InvalidAttributeSyntax = 21,
    NoSuchObject = 32,
    AliasProblem = 33,
    InvalidDnSyntax = 34,
    AliasDereferencingProblem = 36,
    InappropriateAuthentication = 48,
    InvalidCredentials = 49,
    InsufficientAccessRights = 50,
    Busy = 51,
    Unavailable = 52,
    UnwillingToPerform = 53,
    LoopDetect = 54,
    NamingViolation = 64,
    ObjectClassViolation = 65,
    NotAllowedOnNonLeaf = 66,
    NotAllowedOnRdn = 67,
    EntryAlreadyExists = 68,
    ObjectClassModsProhibited = 69,
    AffectsMultipleDsas = 71,
    /// draft-ietf-ldapext-ldapv3-vlv-09 (OpenLDAP's LDAP_VLV_ERROR)
    VirtualListViewError = 76,
    Other = 80,
    /// RFC 3909
    Canceled = 118,
    NoSuchOperation = 119,
    TooLate = 120,
    CannotCancel = 121,
    /// RFC 4528
    AssertionFailed = 122,
    /// RFC 4370: the requester may not act for the proxied authorization identity.
    AuthorizationDenied = 123,
    /// RFC 4533 §2.2: the sync consumer must refresh (`e-syncRefreshRequired`).
    SyncRefreshRequired = 4096,
    /// An unknown or ended transaction identifier (RFC 5805), with OpenLDAP's number
    /// (`LDAP_TXN_ID_INVALID`): the RFC assigns none.
    TxnIdInvalid = 0x4121,
}

/// The LDAPResult components of every response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdapResult<'a> {
    pub code: ResultCode,
    pub matched_dn: Cow<'a, [u8]>,
    pub message: Cow<'a, [u8]>,
    pub referral: Vec<Cow<'a, [u8]>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control<'a> {
    pub oid: Cow<'a, [u8]>,
    pub critical: bool,
    pub value: Option<Cow<'a, [u8]>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdapMessage<'a> {
    pub id: i32,
    pub op: ProtocolOp<'a>,
    pub controls: Vec<Control<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Base = 0,
    One = 1,
    Subtree = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DerefAliases {
    Never = 0,
    InSearching = 1,
    FindingBase = 2,
    Always = 3,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindAuth<'a> {
    Simple(Cow<'a, [u8]>),
    Sasl {
        mechanism: Cow<'a, [u8]>,
        credentials: Option<Cow<'a, [u8]>>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindRequest<'a> {
    pub version: i64,
    pub name: Cow<'a, [u8]>,
    pub auth: BindAuth<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest<'a> {
    pub base: Cow<'a, [u8]>,
    pub scope: Scope,
    pub deref: DerefAliases,
    pub size_limit: i64,
    pub time_limit: i64,
    pub types_only: bool,
    pub filter: Filter<'a>,
    pub attributes: Vec<Cow<'a, [u8]>>,
}

/// An attribute description with its values (PartialAttribute / Attribute of RFC 4511).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialAttribute<'a> {
    pub name: Cow<'a, [u8]>,
    pub values: Vec<Cow<'a, [u8]>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModOp {
    Add = 0,
    Delete = 1,
    Replace = 2,
    /// RFC 4525
    Increment = 3,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change<'a> {
    pub op: ModOp,
    pub attr: PartialAttribute<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModifyRequest<'a> {
    pub dn: Cow<'a, [u8]>,
    pub changes: Vec<Change<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddRequest<'a> {
    pub dn: Cow<'a, [u8]>,
    pub attributes: Vec<PartialAttribute<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModifyDnRequest<'a> {
    pub dn: Cow<'a, [u8]>,
    pub new_rdn: Cow<'a, [u8]>,
    pub delete_old_rdn: bool,
    pub new_superior: Option<Cow<'a, [u8]>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompareRequest<'a> {
    pub dn: Cow<'a, [u8]>,
    pub attr: Cow<'a, [u8]>,
    pub value: Cow<'a, [u8]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedRequest<'a> {
    pub oid: Cow<'a, [u8]>,
    pub value: Option<Cow<'a, [u8]>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedResponse<'a> {
    pub result: LdapResult<'a>,
    pub oid: Option<Cow<'a, [u8]>>,
    pub value: Option<Cow<'a, [u8]>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolOp<'a> {
    BindRequest(BindRequest<'a>),
    /// serverSaslCreds omitted unless present.
    BindResponse(LdapResult<'a>, Option<Cow<'a, [u8]>>),
    UnbindRequest,
    SearchRequest(SearchRequest<'a>),
    SearchResultEntry {
        dn: Cow<'a, [u8]>,
        attributes: Vec<PartialAttribute<'a>>,
    },
    SearchResultDone(LdapResult<'a>),
    SearchResultReference(Vec<Cow<'a, [u8]>>),
    ModifyRequest(ModifyRequest<'a>),
    ModifyResponse(LdapResult<'a>),
    AddRequest(AddRequest<'a>),
    AddResponse(LdapResult<'a>),
    DelRequest(Cow<'a, [u8]>),
    DelResponse(LdapResult<'a>),
    ModifyDnRequest(ModifyDnRequest<'a>),
    ModifyDnResponse(LdapResult<'a>),
    CompareRequest(CompareRequest<'a>),
    CompareResponse(LdapResult<'a>),
    AbandonRequest(i32),
    ExtendedRequest(ExtendedRequest<'a>),
    ExtendedResponse(ExtendedResponse<'a>),
    IntermediateResponse {
        oid: Option<Cow<'a, [u8]>>,
        value: Option<Cow<'a, [u8]>>,
    },
}

/// A search filter (RFC 4511 §4.5.1). Attribute descriptions and assertion values are bytes;
/// values parsed from the RFC 4515 string form are unescaped (hence `Cow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter<'a> {
    And(Vec<Filter<'a>>),
    Or(Vec<Filter<'a>>),
    Not(Box<Filter<'a>>),
    Equality(Cow<'a, [u8]>, Cow<'a, [u8]>),
    Substrings {
        attr: Cow<'a, [u8]>,
        initial: Option<Cow<'a, [u8]>>,
        any: Vec<Cow<'a, [u8]>>,
        final_: Option<Cow<'a, [u8]>>,
    },
    GreaterOrEqual(Cow<'a, [u8]>, Cow<'a, [u8]>),
    LessOrEqual(Cow<'a, [u8]>, Cow<'a, [u8]>),
    Present(Cow<'a, [u8]>),
    Approx(Cow<'a, [u8]>, Cow<'a, [u8]>),
    Extensible {
        rule: Option<Cow<'a, [u8]>>,
        attr: Option<Cow<'a, [u8]>>,
        value: Cow<'a, [u8]>,
        dn_attributes: bool,
    },
}

/// Named limits on what the network may make the decoder do (style.md rule 6).
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Maximum nesting of BER constructed elements, counting the LDAPMessage SEQUENCE as 1.
    /// Default 40: a filter nested `max_filter_depth` (32) deep sits under the message and the
    /// SearchRequest (2 levels) and a substrings filter adds one more, so 35 is the deepest a
    /// default-valid request goes; the rest is headroom for controls that embed filters.
    pub max_ber_depth: usize,
    /// Maximum nesting of and/or/not in a filter. Default 32.
    pub max_filter_depth: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_ber_depth: 40,
            max_filter_depth: 32,
        }
    }
}
