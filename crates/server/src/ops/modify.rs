//! Modify (RFC 4511 §4.6): the protocol operation. Resolving, checking and applying the
//! changes is `dit::modify`'s; a modify of cn=Subschema is `ops::subschema`'s.

use std::sync::Arc;

use dit::modify::{has_cleartext_password, needs, prepare, Mod};
use proto::{tags, ModifyRequest};
use store::Txn;

use crate::op::{Next, Op};
use crate::ops::state::{Audit, Change};
use crate::ops::write::{early_checks, route_write};
use crate::state::Shared;
use dit::error::LdapResult;
use dit::write::{authorize, hash_passwords};

/// Stores the clear-text passwords that `mods` add or replace hashed, on the hashing threads;
/// without any (the usual case) nothing moves.
async fn hash_passwords_of(shared: &Arc<Shared>, mods: Vec<Mod>) -> LdapResult<Vec<Mod>> {
    let user_password = shared.known.user_password;
    if !mods
        .iter()
        .any(|m| has_cleartext_password(user_password, m))
    {
        return Ok(mods);
    }
    let sh = shared.clone();
    shared
        .credentials
        .hashing_job(move || {
            let mut mods = mods;
            for m in &mut mods {
                if has_cleartext_password(user_password, m) {
                    hash_passwords(&sh.password_policy(), &mut m.values);
                }
            }
            mods
        })
        .await
}

/// Checks the request and hands it to the writer. The read loop awaits this, so writes still
/// reach the writer in arrival order.
pub(crate) async fn handle(mut op: Op, req: &ModifyRequest<'_>) -> Next {
    let schema_change = super::subschema::targets(op.shared(), &req.dn);
    // A schema change applies no entry: its record is the request's.
    let audit = if schema_change {
        op.audit(&req.dn, || crate::audit::modify_change(op.shared(), req))
            .map_or(Audit::Off, Audit::Record)
    } else {
        op.audit_applied()
    };
    let change = match op.may_write() {
        Ok(()) if schema_change => super::subschema::modify(op.shared(), &op.who, req),
        Ok(()) => submit(&mut op, req).await,
        Err(e) => Err(e),
    };
    route_write(op, tags::MODIFY_RESPONSE, change, audit).await;
    Next::Continue
}

/// Resolves and checks the changes (schema, the password policy, early access), then makes
/// the change the writer applies.
async fn submit(op: &mut Op, req: &ModifyRequest<'_>) -> LdapResult<Change> {
    let shared = op.shared().clone();
    let assertion = op.take_assertion();
    let early = early_checks(op);
    let permissive = op.controls.permissive_modify;
    let (ndn, mut mods) = prepare(&shared, req)?;
    let want = op.controls.ppolicy;
    let pw =
        crate::ppolicy::check_modify(&shared, &op.who, &ndn, &mods, want, &mut op.response).await?;
    pw.apply(&shared, &mut mods);
    // Write access to every attribute the request changes.
    let needs = needs(&mods);
    if early {
        authorize(
            &shared,
            &shared.store.read(),
            &op.who,
            &ndn,
            &needs,
            true,
            "write",
        )?;
    }
    let mods = hash_passwords_of(&shared, mods).await?;
    let who = op.who.clone();
    Ok(Box::new(move |txn: &mut Txn| {
        dit::modify::apply(
            &shared,
            txn,
            &who,
            &ndn,
            &needs,
            mods,
            assertion.as_ref(),
            permissive,
        )
    }))
}
