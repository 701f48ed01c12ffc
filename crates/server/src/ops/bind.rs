//! Bind (RFC 4511 §4.2, RFC 4513 §5): anonymous and simple.
//!
//! A wrong password and an unknown DN give the same answer (invalidCredentials) after the same
//! work: an unknown DN is checked against a dummy hash of the default scheme.

use std::sync::OnceLock;

use proto::{BindAuth, BindRequest, ResultCode};

use crate::acl::Rights;
use crate::error::{LdapError, LdapResult};
use crate::state::{Identity, Shared};

fn dummy_hash() -> &'static [u8] {
    static H: OnceLock<Vec<u8>> = OnceLock::new();
    H.get_or_init(|| pwhash::hash(pwhash::Scheme::default(), b"linden-dummy-password"))
}

fn invalid() -> LdapError {
    LdapError::new(ResultCode::InvalidCredentials, "invalid credentials")
}

pub fn bind(shared: &Shared, req: &BindRequest<'_>) -> LdapResult<Identity> {
    if req.version != 3 {
        return Err(LdapError::new(
            ResultCode::ProtocolError,
            "requested protocol version not supported",
        ));
    }
    let password = match &req.auth {
        BindAuth::Simple(p) => p,
        BindAuth::Sasl { mechanism, .. } => {
            return Err(LdapError::new(
                ResultCode::AuthMethodNotSupported,
                format!(
                    "SASL mechanism '{}' is not supported",
                    String::from_utf8_lossy(mechanism)
                ),
            ))
        }
    };
    if req.name.is_empty() {
        if password.is_empty() {
            return Ok(Identity::default());
        }
        // A password without a name names nobody (slapd answers the same).
        return Err(invalid());
    }
    let (dn, ndn) = shared.parse_dn(&req.name)?;
    if password.is_empty() {
        // RFC 4513 §5.1.2: unauthenticated binds are refused.
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "unauthenticated bind (DN with no password) disallowed",
        ));
    }
    let ok = if ndn == shared.admin {
        pwhash::verify(&shared.config.admin_password_hash, password)
    } else {
        let v = shared.store.read();
        // The entry's password counts only where the rules let an anonymous client use it
        // (`auth`); otherwise the bind fails like a wrong password.
        let anonymous = shared.acl.view(&shared.schema, &v, &Identity::default());
        match v
            .lookup(&ndn)
            .filter(|e| {
                anonymous
                    .entry(&shared.acl, &shared.schema, e)
                    .can(Some(shared.known.user_password), Rights::AUTH)
            })
            .and_then(|e| e.attr(shared.known.user_password))
        {
            Some(a) => {
                let mut ok = false;
                for stored in &a.values {
                    ok |= pwhash::verify(stored, password);
                }
                ok
            }
            None => {
                let _ = pwhash::verify(dummy_hash(), password);
                false
            }
        }
    };
    if !ok {
        return Err(invalid());
    }
    let is_admin = ndn == shared.admin;
    Ok(Identity {
        dn: dn.to_string(),
        ndn: Some(ndn),
        is_admin,
    })
}
