//! Delete (RFC 4511 §4.8): the protocol operation. What a delete does in the writer's job
//! (leaf or, with the subtree delete control, a whole subtree) is `dit::delete`'s.

use std::sync::Arc;

use proto::{tags, ResultCode};
use store::Txn;

use dit::delete::NEEDS;

use crate::op::{Next, Op};
use crate::ops::state::Change;
use crate::ops::write::{early_checks, route_write};
use crate::state::Shared;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;
use dit::write::{authorize, Assertion};

pub(crate) async fn handle(mut op: Op, dn: &[u8]) -> Next {
    let audit = op.audit_applied();
    let assertion = op.take_assertion();
    let subtree = op.controls.subtree_delete;
    let early = early_checks(&op);
    // As slapd, the DN is checked before the requester: an invalid DN is invalidDNSyntax and
    // the root DSE is unwillingToPerform for everyone.
    let change = match op.shared().parse_ndn(dn) {
        Err(e) => Err(e),
        Ok(ndn) if ndn.is_root() => Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "cannot delete the root DSE",
        )),
        Ok(ndn) => op
            .may_write()
            .and_then(|()| prepare(op.shared(), &op.who, ndn, assertion, subtree, early)),
    };
    route_write(op, tags::DEL_RESPONSE, change, audit).await;
    Next::Continue
}

fn prepare(
    shared: &Arc<Shared>,
    who: &Arc<Identity>,
    ndn: schema::NormDn,
    assertion: Option<Assertion>,
    subtree: bool,
    early: bool,
) -> LdapResult<Change> {
    if early {
        authorize(
            shared,
            &shared.store.read(),
            who,
            &ndn,
            &NEEDS,
            true,
            "delete",
        )?;
    }
    let sh = shared.clone();
    let who = who.clone();
    Ok(Box::new(move |txn: &mut Txn| {
        dit::delete::apply(&sh, txn, &who, &ndn, assertion.as_ref(), subtree)
    }))
}
