//! Result code numbers and RFC 4511 names.

use crate::ResultCode;
use std::fmt;

/// Every code with its RFC name, in numeric order.
const TABLE: &[(ResultCode, &str)] = &[
    (ResultCode::Success, "success"),
    (ResultCode::OperationsError, "operationsError"),
    (ResultCode::ProtocolError, "protocolError"),
    (ResultCode::TimeLimitExceeded, "timeLimitExceeded"),
    (ResultCode::SizeLimitExceeded, "sizeLimitExceeded"),
    (ResultCode::CompareFalse, "compareFalse"),
    (ResultCode::CompareTrue, "compareTrue"),
    (ResultCode::AuthMethodNotSupported, "authMethodNotSupported"),
    (ResultCode::StrongerAuthRequired, "strongerAuthRequired"),
    (ResultCode::Referral, "referral"),
    (ResultCode::AdminLimitExceeded, "adminLimitExceeded"),
    (
        ResultCode::UnavailableCriticalExtension,
        "unavailableCriticalExtension",
    ),
    (
        ResultCode::ConfidentialityRequired,
        "confidentialityRequired",
    ),
    (ResultCode::SaslBindInProgress, "saslBindInProgress"),
    (ResultCode::NoSuchAttribute, "noSuchAttribute"),
    (ResultCode::UndefinedAttributeType, "undefinedAttributeType"),
    (ResultCode::InappropriateMatching, "inappropriateMatching"),
    (ResultCode::ConstraintViolation, "constraintViolation"),
    (ResultCode::AttributeOrValueExists, "attributeOrValueExists"),
    (ResultCode::InvalidAttributeSyntax, "invalidAttributeSyntax"),
    (ResultCode::NoSuchObject, "noSuchObject"),
    (ResultCode::AliasProblem, "aliasProblem"),
    (ResultCode::InvalidDnSyntax, "invalidDNSyntax"),
    (
        ResultCode::AliasDereferencingProblem,
        "aliasDereferencingProblem",
    ),
    (
        ResultCode::InappropriateAuthentication,
        "inappropriateAuthentication",
    ),
    (ResultCode::InvalidCredentials, "invalidCredentials"),
    (
        ResultCode::InsufficientAccessRights,
        "insufficientAccessRights",
    ),
    (ResultCode::Busy, "busy"),
    (ResultCode::Unavailable, "unavailable"),
    (ResultCode::UnwillingToPerform, "unwillingToPerform"),
    (ResultCode::LoopDetect, "loopDetect"),
    (ResultCode::NamingViolation, "namingViolation"),
    (ResultCode::ObjectClassViolation, "objectClassViolation"),
    (ResultCode::NotAllowedOnNonLeaf, "notAllowedOnNonLeaf"),
    (ResultCode::NotAllowedOnRdn, "notAllowedOnRDN"),
    (ResultCode::EntryAlreadyExists, "entryAlreadyExists"),
    (
        ResultCode::ObjectClassModsProhibited,
        "objectClassModsProhibited",
    ),
    (ResultCode::AffectsMultipleDsas, "affectsMultipleDSAs"),
    (ResultCode::VirtualListViewError, "virtualListViewError"),
    (ResultCode::Other, "other"),
    (ResultCode::Canceled, "canceled"),
    (ResultCode::NoSuchOperation, "noSuchOperation"),
    (ResultCode::TooLate, "tooLate"),
    (ResultCode::CannotCancel, "cannotCancel"),
    (ResultCode::AssertionFailed, "assertionFailed"),
    (ResultCode::AuthorizationDenied, "authorizationDenied"),
    (ResultCode::SyncRefreshRequired, "e-syncRefreshRequired"),
    (ResultCode::TxnIdInvalid, "txnIdInvalid"),
];

impl ResultCode {
    /// All known codes, in numeric order.
    pub fn all() -> impl Iterator<Item = ResultCode> {
        TABLE.iter().map(|&(c, _)| c)
    }

    /// The code for a number; `None` for numbers this server does not know.
    pub fn from_u32(v: u32) -> Option<ResultCode> {
        TABLE.iter().find(|(c, _)| *c as u32 == v).map(|&(c, _)| c)
    }

    /// The RFC 4511 name, e.g. "noSuchObject".
    pub fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|(c, _)| *c == self)
            .map_or("other", |&(_, n)| n)
    }

    /// The numeric value sent on the wire.
    pub fn as_u32(self) -> u32 {
        self as u32
    }
}

/// `noSuchObject (32)`.
impl fmt::Display for ResultCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), *self as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names() {
        for c in ResultCode::all() {
            assert_eq!(ResultCode::from_u32(c as u32), Some(c));
        }
        assert_eq!(ResultCode::all().count(), 48);
        assert_eq!(
            ResultCode::from_u32(4096),
            Some(ResultCode::SyncRefreshRequired)
        );
        assert_eq!(
            ResultCode::AssertionFailed.to_string(),
            "assertionFailed (122)"
        );
        assert_eq!(ResultCode::from_u32(9), None);
        assert_eq!(ResultCode::NoSuchObject.name(), "noSuchObject");
        assert_eq!(
            ResultCode::InvalidDnSyntax.to_string(),
            "invalidDNSyntax (34)"
        );
    }
}
