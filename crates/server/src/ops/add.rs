//! Add (RFC 4511 §4.7): the protocol operation. Building and placing the entry is
//! `dit::add`'s.

use std::borrow::Cow;
use std::sync::Arc;

use proto::{tags, AddRequest, ResultCode};
use store::Txn;

use crate::op::{Next, Op};
use crate::ops::state::Change;
use crate::ops::write::{early_checks, route_write};
use crate::state::Shared;
use dit::add::{build_with, has_cleartext_password, root_exists, InputAttr, Trust};
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;
use dit::write::{authorize_new, detached, Assertion};

/// Builds the entry and hands it to the writer. The read loop awaits this, so writes still
/// reach the writer in arrival order.
pub(crate) async fn handle(mut op: Op, req: &AddRequest<'_>) -> Next {
    let audit = op.audit_applied();
    let assertion = op.take_assertion();
    let early = early_checks(&op);
    let change = match precheck(op.shared(), req).and_then(|()| op.may_write()) {
        Ok(()) => {
            let (sh, want) = (op.shared().clone(), op.controls.ppolicy);
            let trust = if op.controls.relax {
                Trust::Relax {
                    admin: op.who.is_admin,
                }
            } else {
                Trust::None
            };
            match crate::ppolicy::check_add(&sh, &op.who, req, want, &mut op.response) {
                Ok(()) => prepare(op.shared(), &op.who, req, assertion, early, trust).await,
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    };
    route_write(op, tags::ADD_RESPONSE, change, audit).await;
    Next::Continue
}

/// What slapd checks of an add before anything else, whoever asks: a request without
/// attributes is a protocolError (after an invalid DN's invalidDNSyntax), and the root DSE
/// exists already.
fn precheck(shared: &Shared, req: &AddRequest<'_>) -> LdapResult<()> {
    if req.attributes.is_empty() {
        shared.parse_dn(&req.dn)?;
        return Err(LdapError::new(
            ResultCode::ProtocolError,
            "no attributes provided",
        ));
    }
    if is_root_dn(&req.dn) {
        return Err(root_exists());
    }
    Ok(())
}

/// Whether a DN as sent names the root DSE (the empty DN, possibly written as spaces).
fn is_root_dn(dn: &[u8]) -> bool {
    dn.iter().all(|b| *b == b' ')
}

async fn prepare(
    shared: &Arc<Shared>,
    who: &Arc<Identity>,
    req: &AddRequest<'_>,
    assertion: Option<Assertion>,
    early: bool,
    trust: Trust,
) -> LdapResult<Change> {
    let input: Vec<InputAttr<'_>> = req
        .attributes
        .iter()
        .map(|a| (a.name.clone(), a.values.clone()))
        .collect();
    let built = if has_cleartext_password(shared, &input) {
        // The whole build moves, not just the hashing: it then sees exactly what it would
        // see here, hashed values included.
        let input: Vec<InputAttr<'static>> = input
            .into_iter()
            .map(|(n, vs)| {
                let vs = vs.into_iter().map(|v| Cow::Owned(v.into_owned())).collect();
                (Cow::Owned(n.into_owned()), vs)
            })
            .collect();
        let (sh, dn) = (shared.clone(), req.dn.to_vec());
        shared
            .credentials
            .hashing_job(move || build_with(&sh, &dn, &input, trust))
            .await
            .and_then(|r| r)
    } else {
        build_with(shared, &req.dn, &input, trust)
    };
    let e = built?;
    if early && !who.is_admin {
        let probe = detached(e.dn.clone(), e.ndn.clone(), e.attrs.clone());
        authorize_new(shared, &shared.store.read(), who, &probe, "add")?;
    }
    let sh = shared.clone();
    let who = who.clone();
    Ok(Box::new(move |txn: &mut Txn| {
        // Access is checked again on the version the change applies to.
        dit::add::apply(&sh, txn, &who, e, assertion.as_ref())
    }))
}
