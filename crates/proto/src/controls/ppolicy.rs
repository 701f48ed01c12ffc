//! Password policy request and response controls (draft-behera-ldap-password-policy-10),
//! OID 1.3.6.1.4.1.42.2.27.8.5.1 for both. The request has no value; the response value is
//!
//! ```text
//! PasswordPolicyResponseValue ::= SEQUENCE {
//!     warning [0] CHOICE {
//!         timeBeforeExpiration [0] INTEGER (0 .. maxInt),
//!         graceAuthNsRemaining [1] INTEGER (0 .. maxInt) } OPTIONAL,
//!     error   [1] ENUMERATED { ... } OPTIONAL }
//! ```
//!
//! encoded as OpenLDAP's slapd encodes it (the warning's CHOICE as a constructed [0] holding a
//! primitive [0] or [1]; the error as a primitive [1]).

use ber::tag::SEQUENCE;
use ber::Writer;

use crate::DecodeErrorKind;

pub const OID: &str = "1.3.6.1.4.1.42.2.27.8.5.1";

/// The response's error (its ENUMERATED values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyError {
    PasswordExpired = 0,
    AccountLocked = 1,
    ChangeAfterReset = 2,
    PasswordModNotAllowed = 3,
    MustSupplyOldPassword = 4,
    InsufficientPasswordQuality = 5,
    PasswordTooShort = 6,
    PasswordTooYoung = 7,
    PasswordInHistory = 8,
    PasswordTooLong = 9,
}

/// The response's warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyWarning {
    /// Seconds until the password expires.
    TimeBeforeExpiration(u32),
    /// Binds still allowed with the expired password.
    GraceAuthNsRemaining(u32),
}

/// Checks a request control: it has no value.
pub fn check_request(value: Option<&[u8]>) -> Result<(), DecodeErrorKind> {
    if value.is_some() {
        return Err(DecodeErrorKind::Invalid(
            "passwordPolicyRequest control value not absent",
        ));
    }
    Ok(())
}

/// Encodes a response value (an empty SEQUENCE when there is neither warning nor error).
pub fn encode_response(warning: Option<PolicyWarning>, error: Option<PolicyError>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    let mut w = Writer::new(&mut out);
    let s = w.start(SEQUENCE);
    if let Some(warn) = warning {
        let c = w.start(0xa0);
        match warn {
            PolicyWarning::TimeBeforeExpiration(n) => w.write_integer(0x80, i64::from(n)),
            PolicyWarning::GraceAuthNsRemaining(n) => w.write_integer(0x81, i64::from(n)),
        }
        w.end(c);
    }
    if let Some(e) = error {
        w.write_integer(0x81, e as i64);
    }
    w.end(s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_slapd() {
        assert_eq!(encode_response(None, None), [0x30, 0x00]);
        assert_eq!(
            encode_response(None, Some(PolicyError::AccountLocked)),
            [0x30, 0x03, 0x81, 0x01, 0x01]
        );
        assert_eq!(
            encode_response(Some(PolicyWarning::GraceAuthNsRemaining(2)), None),
            [0x30, 0x05, 0xa0, 0x03, 0x81, 0x01, 0x02]
        );
        assert_eq!(
            encode_response(Some(PolicyWarning::TimeBeforeExpiration(300)), None),
            [0x30, 0x06, 0xa0, 0x04, 0x80, 0x02, 0x01, 0x2c]
        );
        assert!(check_request(None).is_ok());
        assert!(check_request(Some(b"")).is_err());
    }
}
