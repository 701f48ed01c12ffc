//! Delete (RFC 4511 §4.8): leaf entries only.

use std::sync::Arc;

use proto::{tags, ResultCode};

use crate::acl::Rights;
use crate::error::LdapError;
use crate::op::{Next, Op};
use crate::ops::{
    authorize, check_assertion, finish_write, refused, submit_write, Applied, Assertion, Pending,
};
use crate::state::{Identity, Shared};

pub(crate) async fn handle(mut op: Op, dn: &[u8]) -> Next {
    let audit = op.audit_applied();
    let assertion = Assertion::take(&mut op);
    // As slapd, the DN is checked before the requester: an invalid DN is invalidDNSyntax and
    // the root DSE is unwillingToPerform for everyone.
    let fut = match op.shared().parse_dn(dn) {
        Err(e) => refused(e),
        Ok((_, ndn)) if ndn.is_root() => refused(LdapError::new(
            ResultCode::UnwillingToPerform,
            "cannot delete the root DSE",
        )),
        Ok((_, ndn)) => match op.may_write() {
            Ok(()) => submit(op.shared(), &op.who, ndn, assertion),
            Err(e) => refused(e),
        },
    };
    finish_write(op, tags::DEL_RESPONSE, fut, audit).await;
    Next::Continue
}

fn submit(
    shared: &Arc<Shared>,
    who: &Arc<Identity>,
    ndn: schema::NormDn,
    assertion: Option<Assertion>,
) -> Pending {
    let needs = [(None, Rights::DELETE)];
    if let Err(e) = authorize(
        shared,
        &shared.store.read(),
        who,
        &ndn,
        &needs,
        true,
        "delete",
    ) {
        return refused(e);
    }
    let sh = shared.clone();
    let who = who.clone();
    submit_write(shared, move |txn| {
        // Checked again on the version the change applies to.
        authorize(&sh, txn.version(), &who, &ndn, &needs, true, "delete")?;
        let v = txn.version();
        let e = v.lookup(&ndn).ok_or_else(|| sh.no_such_object(v, &ndn))?;
        check_assertion(assertion.as_ref(), &sh, v, e)?;
        if v.num_children(e.id) > 0 {
            return Err(LdapError::new(
                ResultCode::NotAllowedOnNonLeaf,
                "subordinate objects must be deleted first",
            ));
        }
        let id = e.id;
        let before = txn.delete(id)?;
        Ok(Applied {
            before: Some(before),
            after: None,
        })
    })
}
