//! Delete (RFC 4511 §4.8): leaf entries only, unless the subtree delete control
//! (1.2.840.113556.1.4.805) asks for the entry and all its subordinates. A subtree delete is
//! one change in the writer's job: every entry is checked for the delete right and run through
//! the overlay chain, and all of them go or none (`max_subtree_delete` bounds its size).

use std::sync::Arc;

use proto::{tags, ResultCode};
use store::Txn;

use crate::acl::Rights;
use crate::error::{LdapError, LdapResult};
use crate::op::{Next, Op};
use crate::ops::{
    authorize, check_assertion, early_checks, route_write, Applied, Assertion, Change,
};
use crate::state::{Identity, Shared};

pub(crate) async fn handle(mut op: Op, dn: &[u8]) -> Next {
    let audit = op.audit_applied();
    let assertion = crate::ops::take_assertion(&mut op);
    let subtree = op.controls.subtree_delete;
    let early = early_checks(&op);
    // As slapd, the DN is checked before the requester: an invalid DN is invalidDNSyntax and
    // the root DSE is unwillingToPerform for everyone.
    let change = match op.shared().parse_dn(dn) {
        Err(e) => Err(e),
        Ok((_, ndn)) if ndn.is_root() => Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "cannot delete the root DSE",
        )),
        Ok((_, ndn)) => op
            .may_write()
            .and_then(|()| prepare(op.shared(), &op.who, ndn, assertion, subtree, early)),
    };
    route_write(op, tags::DEL_RESPONSE, change, audit).await;
    Next::Continue
}

const NEEDS: [(Option<schema::AttrId>, Rights); 1] = [(None, Rights::DELETE)];

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
        // Checked again on the version the change applies to.
        authorize(&sh, txn.version(), &who, &ndn, &NEEDS, true, "delete")?;
        let v = txn.version();
        let e = v.lookup(&ndn).ok_or_else(|| sh.no_such_object(v, &ndn))?;
        check_assertion(assertion.as_ref(), &sh, v, e)?;
        let id = e.id;
        let also = if v.num_children(id) == 0 {
            Vec::new()
        } else if subtree {
            delete_subordinates(&sh, txn, &who, id)?
        } else {
            return Err(LdapError::new(
                ResultCode::NotAllowedOnNonLeaf,
                "subordinate objects must be deleted first",
            ));
        };
        let before = txn.delete(id)?;
        Ok(Applied {
            before: Some(before),
            after: None,
            also,
        })
    }))
}

/// Deletes every subordinate of entry `top`, deepest first, each checked for the delete right
/// and run through the overlay chain; returns what each deletion applied. Any refusal fails
/// the whole operation (the writer rolls it all back).
fn delete_subordinates(
    shared: &Shared,
    txn: &mut Txn,
    who: &Identity,
    top: store::EntryId,
) -> LdapResult<Vec<Applied>> {
    let max = shared.config.max_subtree_delete;
    let v = txn.version();
    let Some(e) = v.get(top) else {
        return Ok(Vec::new());
    };
    let mut subordinates = Vec::new();
    let mut too_many = false;
    let _ = v.walk(e, &mut |d| {
        if d.id == top {
            return std::ops::ControlFlow::Continue(());
        }
        // The entry itself counts too.
        if max > 0 && subordinates.len() + 1 >= max {
            too_many = true;
            return std::ops::ControlFlow::Break(());
        }
        subordinates.push((d.depth(), d.id, d.ndn()));
        std::ops::ControlFlow::Continue(())
    });
    if too_many {
        return Err(LdapError::new(
            ResultCode::AdminLimitExceeded,
            format!(
                "the subtree holds more entries than one subtree delete may remove ({max}, max_subtree_delete)"
            ),
        ));
    }
    // Deepest first: each entry is a leaf when its turn comes.
    subordinates.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut applied = Vec::with_capacity(subordinates.len());
    for (_, id, ndn) in subordinates {
        authorize(shared, txn.version(), who, &ndn, &NEEDS, true, "delete")?;
        let before = txn.delete(id)?;
        let a = Applied {
            before: Some(before),
            after: None,
            also: Vec::new(),
        };
        crate::overlays::run(shared, txn, &a)?;
        applied.push(a);
    }
    Ok(applied)
}
