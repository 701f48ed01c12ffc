//! contextCSN and tombstones (the write-path half of OpenLDAP's `syncprov` overlay; the server
//! turns it on with `syncprov = true` and serves the sync searches itself):
//!
//! - every change raises the `contextCSN` value of its server id on the suffix entry of its
//!   naming context, in the same transaction as the change, so it is as durable as the change
//!   (journal and snapshots) and readable as in slapd (`ldapsearch -b dc=example,dc=com -s base
//!   contextCSN`). A change's CSN is the entryCSN it stamped; a delete takes a fresh CSN. Only
//!   this server's own CSNs raise it here; another server's rise with its provider's cookie.
//! - every delete leaves a tombstone (`store::tombstone`): the entry's entryUUID, DN, the
//!   delete's CSN and the entryCSN it had, in the same batch, bounded by a `TombstonePolicy`
//!   (`expire_tombstones`; the floor says up to where they may have been forgotten).

use proto::controls::sync::{csn_sid, SyncCookie};
use proto::ResultCode;
use schema::{AttrId, Schema};
use store::{Attr, Entry, Txn};

use super::{Applied, Overlay};
use crate::error::{LdapError, LdapResult};
use crate::Dit;

/// contextCSN's type, if the schema has it (openldap.schema).
pub fn context_csn_type(schema: &Schema) -> Option<AttrId> {
    schema.attr_by_name("contextCSN")
}

/// The `contextCSN` values of an entry (one per server id); `ty` is the contextCSN type.
pub fn context_csns(ty: AttrId, e: &Entry) -> Vec<String> {
    e.attr(ty)
        .map(|a| {
            a.values()
                .filter_map(|v| std::str::from_utf8(v).ok())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Raises each server id's CSN in `set` to the one in `more`, if newer.
pub fn merge(set: &mut Vec<String>, more: &[String]) {
    set.extend(more.iter().cloned());
    let mut c = SyncCookie {
        csns: std::mem::take(set),
        ..SyncCookie::default()
    };
    c.normalize();
    *set = c.csns;
}

/// How long and how many deletes are remembered (`syncprov_tombstone_lifetime`,
/// `syncprov_tombstones`).
#[derive(Debug, Clone, Copy)]
pub struct TombstonePolicy {
    pub max: usize,
    pub lifetime: std::time::Duration,
}

/// The write-path overlay that keeps contextCSN on the suffix entries (see the module
/// comment) and the tombstones of deleted entries (`store::tombstone`). Runs last in the
/// chain, so it sees every change the others made as well.
///
/// contextCSN is raised only by this server's own CSNs (its client changes, and the fresh CSN
/// of every delete): a replicated change of another server raises the value of that server
/// when its provider's cookie comes (`repl::consumer::apply::store_cookie`), which vouches
/// for every change before it. Raising it here, entry by entry, claimed too much while a
/// refresh was under way (a full refresh sends entries in tree order, not CSN order): a
/// consumer cut off in the middle resumed from a cookie past entries it never got.
pub struct ContextCsn {
    ty: AttrId,
    sid: u16,
    tombstones: TombstonePolicy,
}

impl ContextCsn {
    pub fn new(
        schema: &Schema,
        sid: u16,
        tombstones: TombstonePolicy,
    ) -> Result<ContextCsn, String> {
        let ty = context_csn_type(schema).ok_or("the schema lacks contextCSN (openldap.schema)")?;
        Ok(ContextCsn {
            ty,
            sid,
            tombstones,
        })
    }

    /// Raises the contextCSN value of `csn`'s server id on the suffix entry holding `ndn`.
    fn raise(&self, dit: &Dit, txn: &mut Txn, ndn: &str, csn: String) -> LdapResult<()> {
        let Some(sid) = csn_sid(&csn) else {
            return Ok(());
        };
        let Some(suffix) = dit.suffix_of(ndn) else {
            return Ok(());
        };
        // A deleted suffix entry has nowhere to keep it.
        let Some(s) = txn.version().lookup(suffix).cloned() else {
            return Ok(());
        };
        let mut values = context_csns(self.ty, &s);
        if values
            .iter()
            .any(|v| csn_sid(v) == Some(sid) && v.as_str() >= csn.as_str())
        {
            return Ok(());
        }
        values.retain(|v| csn_sid(v) != Some(sid));
        values.push(csn);
        values.sort_by_key(|v| csn_sid(v));
        let schema = txn.schema().clone();
        let mut attrs = s.to_attrs();
        attrs.retain(|a| a.ty != self.ty);
        let values = values
            .into_iter()
            .map(|v| v.into_bytes().into_boxed_slice())
            .collect();
        let a = Attr::new(&schema, self.ty, "", values)
            .map_err(|e| LdapError::new(ResultCode::Other, format!("contextCSN: {e}")))?;
        attrs.push(a);
        txn.replace_attrs(s.id, attrs)?;
        Ok(())
    }

    /// Remembers deleted entry `e` (its delete stamped `csn`), then forgets the oldest
    /// tombstones beyond the policy.
    fn bury(&self, dit: &Dit, txn: &mut Txn, e: &Entry, csn: &str) {
        let Some(uuid) = uuid_norm_of(dit, e) else {
            return;
        };
        txn.put_tombstone(store::Tombstone {
            uuid: uuid.into(),
            dn: e.dn().into(),
            csn: csn.into(),
            seen: entry_csn(dit, e).unwrap_or_default().into(),
        });
        expire_tombstones(txn, self.tombstones);
    }
}

/// An entry's entryCSN.
fn entry_csn(dit: &Dit, e: &Entry) -> Option<String> {
    e.attr(dit.known.entry_csn)
        .and_then(|a| a.first())
        .and_then(|v| std::str::from_utf8(v).ok())
        .map(str::to_owned)
}

/// An entry's entryUUID in its equality form: the key of its tombstone.
fn uuid_norm_of<'e>(dit: &Dit, e: &'e Entry) -> Option<&'e str> {
    e.attr(dit.known.entry_uuid)
        .and_then(|a| a.norm().next())
        .and_then(|v| std::str::from_utf8(v).ok())
}

/// Forgets the tombstones older than the policy's lifetime, and the oldest beyond its count
/// (down to 15/16 of it, so that this happens once every so many deletes, not at each); the
/// floor rises to the newest CSN forgotten of each server id (`synclog::Provider::plan`).
pub fn expire_tombstones(txn: &mut Txn, policy: TombstonePolicy) {
    let ts = txn.version().tombstones();
    let over = ts.len().saturating_sub(policy.max);
    let drop = if over > 0 { over + policy.max / 16 } else { 0 };
    let cutoff = txn
        .now()
        .checked_sub(policy.lifetime)
        .map(|t| crate::csn::Clock::new(0).next(t));
    let mut gone: Vec<(std::sync::Arc<str>, String)> = Vec::new();
    for (i, t) in ts.iter().enumerate() {
        let expired = cutoff.as_deref().is_some_and(|c| *t.csn < *c);
        if i >= drop && !expired {
            break;
        }
        gone.push((t.uuid.clone(), t.csn.to_string()));
    }
    if gone.is_empty() {
        return;
    }
    let mut floor: Vec<String> = ts.floor().iter().map(|c| c.to_string()).collect();
    merge(
        &mut floor,
        &gone.iter().map(|(_, c)| c.clone()).collect::<Vec<_>>(),
    );
    for (u, _) in &gone {
        txn.remove_tombstone(u);
    }
    txn.set_tombstone_floor(floor);
}

impl Overlay for ContextCsn {
    fn name(&self) -> &'static str {
        "syncprov"
    }

    fn after(&self, dit: &Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()> {
        self.raise_for(dit, txn, applied)?;
        // The overlays before this one may have stamped other entries on the change's behalf
        // (memberOf, referential integrity) after it, replicated changes included: this
        // server's own value also covers the newest CSN its clock issued, so contextCSN never
        // trails an entryCSN stamped here.
        let ndn = match (&applied.before, &applied.after) {
            (_, Some(a)) => a.ndn_str(),
            (Some(b), None) => b.ndn_str(),
            (None, None) => return Ok(()),
        };
        match dit.csn.last_issued() {
            Some(last) if csn_sid(&last) == Some(self.sid) => self.raise(dit, txn, ndn, last),
            _ => Ok(()),
        }
    }
}

impl ContextCsn {
    /// What the change itself does to contextCSN and the tombstones.
    fn raise_for(&self, dit: &Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()> {
        match (&applied.before, &applied.after) {
            (before, Some(a)) => {
                let uuid = uuid_norm_of(dit, a);
                // Back after a delete (a change the delete had not seen won): no tombstone.
                if let Some(u) = uuid {
                    if txn.version().tombstones().get(u).is_some() {
                        txn.remove_tombstone(u);
                    }
                }
                // Another entry took this one's place (the later of two adds of one DN): the
                // one it replaced is gone, as if deleted.
                if let Some(b) = before {
                    if uuid_norm_of(dit, b).is_some_and(|bu| Some(bu) != uuid) {
                        let csn = dit.csn.next(txn.now());
                        self.bury(dit, txn, b, &csn);
                        self.raise(dit, txn, a.ndn_str(), csn)?;
                    }
                }
                match entry_csn(dit, a) {
                    Some(csn) if csn_sid(&csn) == Some(self.sid) => {
                        self.raise(dit, txn, a.ndn_str(), csn)
                    }
                    // A replicated change: raised by its provider's cookie.
                    Some(_) => Ok(()),
                    None => {
                        let csn = dit.csn.next(txn.now());
                        self.raise(dit, txn, a.ndn_str(), csn)
                    }
                }
            }
            (Some(b), None) => {
                // A delete stamps no entry: it takes a fresh CSN of this server, which its
                // tombstone keeps.
                let csn = dit.csn.next(txn.now());
                self.bury(dit, txn, b, &csn);
                self.raise(dit, txn, b.ndn_str(), csn)
            }
            (None, None) => Ok(()),
        }
    }
}
