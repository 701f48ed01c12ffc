//! Group membership and referential integrity, maintained inside the change that causes them
//! (OpenLDAP's `memberof` and `refint` overlays, which issue separate internal operations
//! after the change instead).
//!
//! - **memberOf**: when a group (an entry of a configured class, e.g. groupOfNames) gains or
//!   loses a member value (e.g. `member`), the member entry's `memberOf` gains or loses the
//!   group's DN; a group added, deleted or renamed updates all its members; an entry added
//!   while groups already name it gets their DNs.
//! - **Referential integrity**: when an entry is deleted or renamed, the values that name it in
//!   the configured attributes (member, uniqueMember, owner, manager, seeAlso …) of other
//!   entries are removed or renamed — for a renamed subtree, the values naming any entry in it.
//!
//! Cost: the entries changed are the ones whose values change. Values naming an entry are
//! found through the equality index of each attribute (the attributes are always indexed),
//! so adding one member to a group of 100,000 touches the group and that one member; working
//! out which members a change added or removed compares the group's values before and after
//! (linear in the group's size, hashing only, no entry is read for unchanged members).

use std::collections::HashSet;
use std::sync::Arc;

use schema::AttrId;
use store::{Attr, Entry, EntryId, Txn};

use super::{Applied, Overlay};
use crate::error::LdapResult;
use crate::Dit;

pub struct MemberOf {
    /// Groups whose members get `memberOf`: the normalized objectClass value of each group
    /// class and its member attribute (empty: memberOf is not maintained).
    pub groups: Vec<super::GroupKind>,
    /// `memberOf`.
    pub member_of: AttrId,
    /// Attributes whose values follow the entries they name (referential integrity).
    pub refint: Vec<AttrId>,
    /// Who the stamps of the entries changed on a change's behalf name (modifiersName).
    pub modifier: String,
}

/// An attribute value: its equality form (the key) and the value as stored.
type Keyed = (Box<[u8]>, Box<[u8]>);

/// A change to make to one entry's attribute values: remove `remove`, then add `add` (raw
/// DNs; keys are their equality forms).
#[derive(Default)]
struct Edit {
    remove: Vec<Box<[u8]>>,
    add: Vec<Box<[u8]>>,
}

impl MemberOf {
    /// The member attribute values (normalized → raw) of `e` when it is a group of `class`.
    fn members(
        &self,
        dit: &Dit,
        e: Option<&Arc<Entry>>,
        class: &[u8],
        member: AttrId,
    ) -> Vec<Keyed> {
        let Some(e) = e else { return Vec::new() };
        if !e.has_value(dit.known.object_class, class) {
            return Vec::new();
        }
        e.attr(member)
            .map(|a| {
                a.pairs()
                    .map(|(raw, norm)| (Box::from(norm), Box::from(raw)))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Applies `edits` (entry → attribute → edit) to the working version, stamping each entry.
fn apply_edits(
    dit: &Dit,
    txn: &mut Txn,
    modifier: &str,
    edits: Vec<(EntryId, AttrId, Edit)>,
) -> LdapResult<()> {
    let now = txn.now();
    for (id, ty, edit) in edits {
        let Some(e) = txn.version().get(id).cloned() else {
            continue;
        };
        let schema = txn.schema().clone();
        let mut attrs = e.to_attrs();
        let norm = |v: &[u8]| schema.normalize_eq(ty, v).unwrap_or_else(|_| v.to_vec());
        let remove: HashSet<Vec<u8>> = edit.remove.iter().map(|v| norm(v)).collect();
        let mut values: Vec<Box<[u8]>> = Vec::new();
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        if let Some(a) = attrs.iter().find(|a| a.ty == ty && a.options.is_empty()) {
            for (raw, n) in a.values.iter().zip(&a.norm) {
                if !remove.contains(&**n) && seen.insert(n.to_vec()) {
                    values.push(raw.clone());
                }
            }
        }
        for v in edit.add {
            if seen.insert(norm(&v)) {
                values.push(v);
            }
        }
        attrs.retain(|a| !(a.ty == ty && a.options.is_empty()));
        if !values.is_empty() {
            if let Ok(a) = Attr::new(&schema, ty, "", values) {
                attrs.push(a);
            }
        }
        crate::write::stamp_modified(dit, &mut attrs, modifier, now);
        txn.replace_attrs(id, attrs)?;
    }
    Ok(())
}

impl Overlay for MemberOf {
    fn name(&self) -> &'static str {
        "memberof"
    }

    fn after(&self, dit: &Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()> {
        let (before, after) = (applied.before.as_ref(), applied.after.as_ref());
        let schema = txn.schema().clone();
        let mut edits: Vec<(EntryId, AttrId, Edit)> = Vec::new();
        let renamed = match (before, after) {
            (Some(b), Some(a)) => b.ndn_str() != a.ndn_str(),
            _ => false,
        };
        // 1. memberOf of the members of a group that changed.
        for (class, member) in &self.groups {
            let old = self.members(dit, before, class, *member);
            let new = self.members(dit, after, class, *member);
            if old.is_empty() && new.is_empty() {
                continue;
            }
            let (gone, came): (Vec<_>, Vec<_>) = if renamed {
                (old, new)
            } else {
                let old_keys: HashSet<&[u8]> = old.iter().map(|(n, _)| &**n).collect();
                let new_keys: HashSet<&[u8]> = new.iter().map(|(n, _)| &**n).collect();
                (
                    old.iter()
                        .filter(|(n, _)| !new_keys.contains(&**n))
                        .cloned()
                        .collect(),
                    new.iter()
                        .filter(|(n, _)| !old_keys.contains(&**n))
                        .cloned()
                        .collect(),
                )
            };
            let v = txn.version();
            for (list, group, add) in [(gone, before, false), (came, after, true)] {
                let Some(group) = group else { continue };
                let dn: Box<[u8]> = group.dn().as_bytes().into();
                for (norm, _) in list {
                    let Ok(norm) = std::str::from_utf8(&norm) else {
                        continue;
                    };
                    let Some(m) = v.lookup_norm(norm) else {
                        continue;
                    };
                    let mut edit = Edit::default();
                    if add {
                        edit.add.push(dn.clone());
                    } else {
                        edit.remove.push(dn.clone());
                    }
                    edits.push((m.id, self.member_of, edit));
                }
            }
        }
        // 2. An entry added while groups already name it.
        if let (None, Some(a)) = (before, after) {
            let v = txn.version();
            let key = a.ndn_str().as_bytes();
            let mut groups = Vec::new();
            for (class, member) in &self.groups {
                for g in super::holders(v, &schema, *member, key, false) {
                    if g.has_value(dit.known.object_class, class) {
                        groups.push(Box::<[u8]>::from(g.dn().as_bytes()));
                    }
                }
            }
            if !groups.is_empty() {
                edits.push((
                    a.id,
                    self.member_of,
                    Edit {
                        remove: Vec::new(),
                        add: groups,
                    },
                ));
            }
        }
        // 3. Referential integrity: values naming a deleted or renamed entry (or an entry of a
        //    renamed subtree).
        if let Some(b) = before {
            if after.is_none() || renamed {
                let old_base = b.ndn_str().to_string();
                let new_base = after.map(|a| (a.ndn_str().to_string(), a.dn().to_string()));
                let v = txn.version();
                let subtree = renamed && v.num_children(after.map_or(b.id, |a| a.id)) > 0;
                for &ty in &self.refint {
                    // (entry, raw value naming the old DN, normalized old DN)
                    let mut found: Vec<(EntryId, Box<[u8]>, String)> = Vec::new();
                    if subtree {
                        // Every value naming the base or an entry under it: no index finds
                        // DNs by suffix, so the entries holding the attribute are read.
                        let suffix = format!(",{old_base}");
                        for e in v.iter() {
                            if let Some(a) = e.attr(ty) {
                                for (raw, norm) in a.pairs() {
                                    let n = String::from_utf8_lossy(norm);
                                    if n == old_base || n.ends_with(&suffix) {
                                        found.push((e.id, raw.into(), n.into_owned()));
                                    }
                                }
                            }
                        }
                    } else {
                        let key = old_base.as_bytes();
                        for e in super::holders(v, &schema, ty, key, false) {
                            if let Some(a) = e.attr(ty) {
                                for (raw, norm) in a.pairs() {
                                    if norm == key {
                                        found.push((e.id, raw.into(), old_base.clone()));
                                    }
                                }
                            }
                        }
                    }
                    for (id, raw, old_norm) in found {
                        let mut edit = Edit {
                            remove: vec![raw],
                            add: Vec::new(),
                        };
                        if let Some((new_norm, new_dn)) = &new_base {
                            // The renamed entry's new DN, or its descendant's under it.
                            let moved = if old_norm == old_base {
                                new_dn.clone()
                            } else {
                                v.lookup_norm(&format!(
                                    "{}{new_norm}",
                                    &old_norm[..old_norm.len() - old_base.len()]
                                ))
                                .map(|e| e.dn().to_string())
                                .unwrap_or_default()
                            };
                            if !moved.is_empty() {
                                edit.add.push(moved.into_bytes().into());
                            }
                        }
                        edits.push((id, ty, edit));
                    }
                }
            }
        }
        apply_edits(dit, txn, &self.modifier, edits)
    }
}
