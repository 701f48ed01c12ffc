//! Proxied Authorization v2 (RFC 4370), OID 2.16.840.1.113730.3.4.18.
//!
//! The control value is the authorization identity itself (RFC 4513 §5.2.1.8), not BER:
//! `dn:<DN>`, `u:<user name>`, or empty for the anonymous identity. The server decides whether
//! the requester may act for it.

use crate::DecodeErrorKind;

pub const OID: &str = "2.16.840.1.113730.3.4.18";

/// An authorization identity (RFC 4513 §5.2.1.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthzId<'a> {
    /// The empty authzId: act anonymously.
    Anonymous,
    /// `dn:` with the DN as sent (not yet parsed).
    Dn(&'a [u8]),
    /// `u:` with the user name.
    User(&'a [u8]),
}

impl<'a> AuthzId<'a> {
    pub fn decode(value: &'a [u8]) -> Result<AuthzId<'a>, DecodeErrorKind> {
        if value.is_empty() {
            Ok(AuthzId::Anonymous)
        } else if let Some(dn) = value.strip_prefix(b"dn:") {
            Ok(AuthzId::Dn(dn))
        } else if let Some(u) = value.strip_prefix(b"u:") {
            Ok(AuthzId::User(u))
        } else {
            Err(DecodeErrorKind::Invalid(
                "authzId must be empty, dn:<DN> or u:<user name>",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_each_form() {
        assert_eq!(AuthzId::decode(b""), Ok(AuthzId::Anonymous));
        assert_eq!(
            AuthzId::decode(b"dn:uid=a,dc=x"),
            Ok(AuthzId::Dn(b"uid=a,dc=x"))
        );
        // An empty DN names the anonymous identity too; the server resolves it.
        assert_eq!(AuthzId::decode(b"dn:"), Ok(AuthzId::Dn(b"")));
        assert_eq!(AuthzId::decode(b"u:alice"), Ok(AuthzId::User(b"alice")));
    }

    #[test]
    fn rejects_other_forms() {
        for v in [&b"bogus"[..], b"DN:x", b"uid=a,dc=x", b"\x04\x00"] {
            assert!(AuthzId::decode(v).is_err(), "{v:?}");
        }
    }
}
