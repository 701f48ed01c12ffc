//! Proxied authorization (RFC 4370): who an operation acts for when it carries the control.
//! Resolved once, before the operation starts; the operation then runs with the result as its
//! effective identity (`Op::who`) for access control, stamps and logs, while `Op::bound`
//! stays the connection's. docs/access-control.md has the user's view.
//!
//! Who may act as whom is the `proxy` right on the target's entry (`acl::Rights::PROXY`);
//! anyone may act as themselves, the administrator as anyone, and any bound client as the
//! anonymous identity (as slapd). Every refusal is authorizationDenied (123).

use std::sync::Arc;

use proto::ResultCode;

use crate::controls::ProxiedAuthz;
use crate::ops::sasl;
use crate::state::Shared;
use dit::acl::Rights;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;

fn denied(why: &str) -> LdapError {
    LdapError::new(ResultCode::AuthorizationDenied, why)
}

/// The identity `bound` asks to act as with `authz`, if it may.
pub(crate) fn resolve(
    shared: &Shared,
    bound: &Identity,
    authz: &ProxiedAuthz,
) -> LdapResult<Arc<Identity>> {
    if bound.is_anonymous() {
        return Err(denied("anonymous proxied authorization not allowed"));
    }
    let ndn = match authz {
        ProxiedAuthz::Anonymous => return Ok(Arc::new(Identity::default())),
        ProxiedAuthz::Dn(dn) if dn.is_empty() => return Ok(Arc::new(Identity::default())),
        ProxiedAuthz::Dn(dn) => {
            shared
                .parse_dn(dn)
                .map_err(|_| denied("authzId mapping failed"))?
                .1
        }
        // `u:` names the one entry with that uid, as SASL PLAIN's authcid does.
        ProxiedAuthz::User(u) => std::str::from_utf8(u)
            .ok()
            .and_then(|u| sasl::entry_by_uid(shared, u))
            .ok_or_else(|| denied("not authorized to assume identity"))?,
    };
    let target = sasl::identity_of(shared, &ndn)
        .ok_or_else(|| denied("not authorized to assume identity"))?;
    if bound.is_admin || bound.ndn.as_ref() == Some(&ndn) {
        return Ok(Arc::new(target));
    }
    let v = shared.store.read();
    let schema = shared.schema();
    let allowed = v.lookup(&ndn).is_some_and(|e| {
        shared
            .acl
            .view(&schema, &v, bound)
            .entry(&schema, e)
            .can(None, Rights::PROXY)
    });
    if allowed {
        Ok(Arc::new(target))
    } else {
        Err(denied("not authorized to assume identity"))
    }
}
