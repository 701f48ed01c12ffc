//! Application tag numbers of the protocolOp CHOICE (RFC 4511 §4.2 – §4.12).
//!
//! These are tag *numbers* (0..=25), the form [`crate::encode_result`] takes. The tag byte on the
//! wire adds the class and form: [`constructed`] for SEQUENCE-shaped operations, [`primitive`]
//! for UnbindRequest, DelRequest and AbandonRequest.

pub const BIND_REQUEST: u8 = 0;
pub const BIND_RESPONSE: u8 = 1;
pub const UNBIND_REQUEST: u8 = 2;
pub const SEARCH_REQUEST: u8 = 3;
pub const SEARCH_RESULT_ENTRY: u8 = 4;
pub const SEARCH_RESULT_DONE: u8 = 5;
pub const MODIFY_REQUEST: u8 = 6;
pub const MODIFY_RESPONSE: u8 = 7;
pub const ADD_REQUEST: u8 = 8;
pub const ADD_RESPONSE: u8 = 9;
pub const DEL_REQUEST: u8 = 10;
pub const DEL_RESPONSE: u8 = 11;
pub const MODIFY_DN_REQUEST: u8 = 12;
pub const MODIFY_DN_RESPONSE: u8 = 13;
pub const COMPARE_REQUEST: u8 = 14;
pub const COMPARE_RESPONSE: u8 = 15;
pub const ABANDON_REQUEST: u8 = 16;
pub const SEARCH_RESULT_REFERENCE: u8 = 19;
pub const EXTENDED_REQUEST: u8 = 23;
pub const EXTENDED_RESPONSE: u8 = 24;
pub const INTERMEDIATE_RESPONSE: u8 = 25;

/// Tag byte of a constructed `[APPLICATION n]` element.
pub const fn constructed(n: u8) -> u8 {
    0x60 | (n & 0x1f)
}

/// Tag byte of a primitive `[APPLICATION n]` element.
pub const fn primitive(n: u8) -> u8 {
    0x40 | (n & 0x1f)
}

/// Tag byte of a primitive `[n]` context-specific element.
pub const fn context(n: u8) -> u8 {
    0x80 | (n & 0x1f)
}

/// Tag byte of a constructed `[n]` context-specific element.
pub const fn context_constructed(n: u8) -> u8 {
    0xa0 | (n & 0x1f)
}

/// Whether tag number `n` names a request sent by clients.
pub const fn is_request(n: u8) -> bool {
    matches!(n, 0 | 2 | 3 | 6 | 8 | 10 | 12 | 14 | 16 | 23)
}

/// The response tag number for request tag number `n`; `None` for requests without a response
/// (unbind, abandon) and for anything that is not a request.
pub const fn response_for(n: u8) -> Option<u8> {
    match n {
        BIND_REQUEST => Some(BIND_RESPONSE),
        SEARCH_REQUEST => Some(SEARCH_RESULT_DONE),
        MODIFY_REQUEST => Some(MODIFY_RESPONSE),
        ADD_REQUEST => Some(ADD_RESPONSE),
        DEL_REQUEST => Some(DEL_RESPONSE),
        MODIFY_DN_REQUEST => Some(MODIFY_DN_RESPONSE),
        COMPARE_REQUEST => Some(COMPARE_RESPONSE),
        EXTENDED_REQUEST => Some(EXTENDED_RESPONSE),
        _ => None,
    }
}
