//! Delete (RFC 4511 §4.8): leaf entries only.

use std::sync::Arc;

use proto::ResultCode;

use crate::acl::Rights;
use crate::error::LdapError;
use crate::ops::{authorize, ready, submit_write, Pending};
use crate::state::{Identity, Shared};

pub(crate) fn submit(shared: &Arc<Shared>, who: &Identity, dn: &[u8]) -> Pending {
    let ndn = match shared.parse_dn(dn) {
        Ok((_, ndn)) => ndn,
        Err(e) => return ready(Err(e)),
    };
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
        return ready(Err(e));
    }
    let sh = shared.clone();
    submit_write(shared, move |txn| {
        let v = txn.version();
        let e = v.lookup(&ndn).ok_or_else(|| sh.no_such_object(v, &ndn))?;
        if v.num_children(e.id) > 0 {
            return Err(LdapError::new(
                ResultCode::NotAllowedOnNonLeaf,
                "subordinate objects must be deleted first",
            ));
        }
        let id = e.id;
        txn.delete(id)?;
        Ok(())
    })
}
