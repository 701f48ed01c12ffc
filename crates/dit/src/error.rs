//! The error every operation returns: an LDAP result code, the matched DN where RFC 4511 asks
//! for one (noSuchObject and friends), and a message a person can act on.

use proto::ResultCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdapError {
    pub code: ResultCode,
    pub matched: String,
    pub message: String,
    /// LDAP URLs of a referral (result code referral): where a replica sends writes. Boxed:
    /// rare, and errors travel in `Result`s that should stay small.
    pub referral: Option<Box<Vec<String>>>,
}

impl LdapError {
    pub fn new(code: ResultCode, message: impl Into<String>) -> LdapError {
        LdapError {
            code,
            matched: String::new(),
            message: message.into(),
            referral: None,
        }
    }

    /// A referral (result code referral) to `urls`.
    pub fn referral(urls: Vec<String>) -> LdapError {
        LdapError {
            referral: Some(Box::new(urls)),
            ..LdapError::new(ResultCode::Referral, "")
        }
    }

    pub fn with_matched(mut self, matched: impl Into<String>) -> LdapError {
        self.matched = matched.into();
        self
    }
}

impl std::fmt::Display for LdapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl std::error::Error for LdapError {}

impl From<schema::SchemaViolation> for LdapError {
    fn from(v: schema::SchemaViolation) -> LdapError {
        use schema::ViolationKind as K;
        let code = match v.kind {
            K::ObjectClassViolation => ResultCode::ObjectClassViolation,
            K::UndefinedAttributeType => ResultCode::UndefinedAttributeType,
            K::InvalidAttributeSyntax => ResultCode::InvalidAttributeSyntax,
            K::ConstraintViolation => ResultCode::ConstraintViolation,
            K::NamingViolation => ResultCode::NamingViolation,
        };
        LdapError::new(code, v.message)
    }
}

impl From<store::StoreError> for LdapError {
    fn from(e: store::StoreError) -> LdapError {
        use store::StoreError as S;
        let code = match e {
            S::WriterStopped | S::Unavailable(_) | S::DiskFull(_) => ResultCode::Unavailable,
            S::AlreadyExists(_) => ResultCode::EntryAlreadyExists,
            S::NoParent(_) | S::NoSuchEntry => ResultCode::NoSuchObject,
            S::NotLeaf(_) => ResultCode::NotAllowedOnNonLeaf,
            S::Failed(_) => ResultCode::Other,
        };
        LdapError::new(code, e.to_string())
    }
}

pub type LdapResult<T> = Result<T, LdapError>;

/// The LDAPResult a response carries: success, or the error's code, matched DN and message.
pub fn wire_result(r: Result<(), &LdapError>) -> proto::LdapResult<'_> {
    let (code, matched, message, referral) = match r {
        Ok(()) => (ResultCode::Success, "", "", &[][..]),
        Err(e) => (
            e.code,
            e.matched.as_str(),
            e.message.as_str(),
            e.referral.as_deref().map_or(&[][..], |r| &r[..]),
        ),
    };
    proto::LdapResult {
        code,
        matched_dn: matched.as_bytes().into(),
        message: message.as_bytes().into(),
        referral: referral.iter().map(|u| u.as_bytes().into()).collect(),
    }
}
