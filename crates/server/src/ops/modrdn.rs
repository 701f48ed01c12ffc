//! Modify DN (RFC 4511 §4.9): the protocol operation. What a rename does in the writer's job
//! is `dit::modrdn`'s.

use std::sync::Arc;

use dit::modrdn::{authorize_rename, prepare};
use proto::{tags, ModifyDnRequest};

use crate::op::{Next, Op};
use crate::ops::state::{Audit, Change};
use crate::ops::write::{early_checks, route_write};
use crate::state::Shared;
use dit::error::LdapResult;
use dit::identity::Identity;
use dit::write::Assertion;

fn submit(
    shared: &Arc<Shared>,
    who: &Arc<Identity>,
    req: &ModifyDnRequest<'_>,
    assertion: Option<Assertion>,
    early: bool,
) -> LdapResult<Change> {
    let r = prepare(shared, req)?;
    if early {
        authorize_rename(shared, &shared.store.read(), who, &r)?;
    }
    let sh = shared.clone();
    let who = who.clone();
    Ok(Box::new(move |txn: &mut store::Txn| {
        // The rights are checked again on the version the change applies to.
        dit::modrdn::apply(&sh, txn, &who, r, assertion.as_ref())
    }))
}

pub(crate) async fn handle(mut op: Op, req: &ModifyDnRequest<'_>) -> Next {
    let audit = op
        .audit(&req.dn, || crate::audit::modrdn_change(req))
        .map_or(Audit::Off, Audit::Record);
    let assertion = op.take_assertion();
    let early = early_checks(&op);
    let change = op
        .may_write()
        .and_then(|()| submit(op.shared(), &op.who, req, assertion, early));
    route_write(op, tags::MODIFY_DN_RESPONSE, change, audit).await;
    Next::Continue
}
