//! Deleting an entry (RFC 4511 §4.8), without the protocol: a leaf, or with the subtree delete
//! control (1.2.840.113556.1.4.805) the entry and all its subordinates, in one change: every
//! entry is checked for the delete right and run through the overlay chain, and all of them go
//! or none (`max_subtree_delete` bounds its size).

use proto::ResultCode;
use schema::NormDn;
use store::Txn;

use crate::acl::Rights;
use crate::error::{LdapError, LdapResult};
use crate::overlays::Applied;
use crate::write::{authorize, check_assertion, Assertion};
use crate::{Dit, Identity};

/// The right a delete needs on each entry it removes.
pub const NEEDS: [(Option<schema::AttrId>, Rights); 1] = [(None, Rights::DELETE)];

/// Deletes the entry `ndn` for `who` in the writer's job: the delete right on the version it
/// changes, the assertion, then the entry alone (a leaf) or, with `subtree` (the subtree
/// delete control), the entry and all its subordinates.
pub fn apply(
    shared: &Dit,
    txn: &mut Txn,
    who: &Identity,
    ndn: &NormDn,
    assertion: Option<&Assertion>,
    subtree: bool,
) -> LdapResult<Applied> {
    authorize(shared, txn.version(), who, ndn, &NEEDS, true, "delete")?;
    let v = txn.version();
    let e = v.lookup(ndn).ok_or_else(|| shared.no_such_object(v, ndn))?;
    check_assertion(assertion, shared, v, e)?;
    let id = e.id;
    let also = if v.num_children(id) == 0 {
        Vec::new()
    } else if subtree {
        delete_subordinates(shared, txn, who, id)?
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
        ..Default::default()
    })
}

/// Deletes every subordinate of entry `top`, deepest first, each checked for the delete right
/// and run through the overlay chain; returns what each deletion applied. Any refusal fails
/// the whole operation (the writer rolls it all back).
fn delete_subordinates(
    shared: &Dit,
    txn: &mut Txn,
    who: &Identity,
    top: store::EntryId,
) -> LdapResult<Vec<Applied>> {
    let max = shared.limits().max_subtree_delete;
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
        subordinates.push((d.depth(), d.id, d.ndn(v.schema())));
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
        // Each one through the door, as a delete of its own.
        let a = crate::write::write_job(shared, txn, |txn| {
            authorize(shared, txn.version(), who, &ndn, &NEEDS, true, "delete")?;
            Ok(Applied {
                before: Some(txn.delete(id)?),
                after: None,
                ..Default::default()
            })
        })?;
        applied.push(a);
    }
    Ok(applied)
}
