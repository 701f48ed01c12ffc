//! The password policy overlay (OpenLDAP 2.5's `ppolicy`, state side): after a change, keeps
//! the account state a password change leaves — `pwdChangedTime`, `pwdHistory`, `pwdReset`,
//! failures, grace logins and locks cleared — in the same transaction as the change
//! (`ppolicy::Ppolicy::after_change`). What a change may do is checked before it is made (the
//! protocol layer's `check_change`, which verifies passwords off the writer); what a bind
//! records (`Ppolicy::record_bind_change`, `Origin::BindRecord`) passes the chain untouched.

use std::sync::Arc;

use store::Txn;

use super::{Applied, Overlay};
use crate::error::LdapResult;
use crate::ppolicy::Ppolicy;
use crate::Dit;

pub struct PpolicyOverlay {
    pub policy: Arc<Ppolicy>,
}

impl Overlay for PpolicyOverlay {
    fn name(&self) -> &'static str {
        "ppolicy"
    }

    fn after(&self, _dit: &Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()> {
        // What a bind records is the policy's own bookkeeping, not a password change (a
        // failure recorded after a run-out lock was removed must stay).
        if applied.origin == super::Origin::BindRecord {
            return Ok(());
        }
        let Some(after) = &applied.after else {
            return Ok(());
        };
        // A rename keeps the password: only adds and modifies of the same entry count.
        if applied
            .before
            .as_ref()
            .is_some_and(|b| b.id != after.id || b.ndn_str() != after.ndn_str())
        {
            return Ok(());
        }
        let schema = txn.schema().clone();
        let v = txn.version();
        let Some(current) = v.get(after.id) else {
            return Ok(());
        };
        if let Some(before) = &applied.before {
            // A modify that leaves the password and the lock as they were changes no
            // password state (`after_change` would say so too, after unpacking the entry: a
            // group of 100,000 members gaining one is not a password change).
            let t = &self.policy.types;
            fn pw(e: &store::Entry, ty: schema::AttrId) -> Option<Vec<&[u8]>> {
                e.attr(ty).map(|a| a.values().collect())
            }
            let unlocked = before.attr(t.account_locked_time).is_some()
                && current.attr(t.account_locked_time).is_none();
            if pw(before, t.user_password) == pw(current, t.user_password) && !unlocked {
                return Ok(());
            }
        }
        let policy = self.policy.policy_of(v, current);
        let mut attrs = current.to_attrs();
        let changed = self.policy.after_change(
            &schema,
            policy.as_ref(),
            applied.before.as_deref(),
            &mut attrs,
            txn.now(),
        );
        if changed {
            txn.replace_attrs(after.id, attrs)?;
        }
        Ok(())
    }
}
