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
//! so adding one member to a group of 100,000 touches the group and that one member. Which
//! members a modify added or removed comes from the modify itself (`Applied::values`, the
//! values it named), not from comparing the group before and after; only a group added,
//! deleted or renamed (all its members change) or a change that comes without its values (a
//! replicated one) is compared whole.

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

/// A change to make to one entry's attribute values: remove `remove`, then add `add` (raw
/// DNs; keys are their equality forms).
#[derive(Default)]
struct Edit {
    remove: Vec<Box<[u8]>>,
    add: Vec<Box<[u8]>>,
}

/// The normalized member values of `e` (in attribute `member`, no options) when it is a group
/// of `class`.
fn members<'e>(
    dit: &Dit,
    e: Option<&'e Arc<Entry>>,
    class: &[u8],
    member: AttrId,
) -> Vec<&'e [u8]> {
    match e {
        Some(e) if e.has_value(dit.known.object_class, class) => e
            .attr(member)
            .map(|a| a.norm().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The member values (normalized) a change took away from a group and those it brought:
/// from the modify's own changes when it names them (`Applied::values`: the cost is the
/// values the request named, whatever the group's size), else by comparing the group before
/// and after (a group added, deleted or renamed, or becoming or ceasing to be a group, whose
/// members all change; or a change applied without its values, e.g. replicated).
fn membership_change<'a>(
    dit: &Dit,
    applied: &'a Applied,
    class: &[u8],
    member: AttrId,
) -> (Vec<&'a [u8]>, Vec<&'a [u8]>) {
    let (before, after) = (applied.before.as_ref(), applied.after.as_ref());
    let group =
        |e: Option<&Arc<Entry>>| e.is_some_and(|e| e.has_value(dit.known.object_class, class));
    let same_name = match (before, after) {
        (Some(b), Some(a)) => b.ndn_str() == a.ndn_str(),
        _ => false,
    };
    if let Some(values) = &applied.values {
        if same_name && group(before) && group(after) {
            let Some(c) = values
                .iter()
                .find(|c| c.ty == member && c.options.is_empty())
            else {
                return (Vec::new(), Vec::new());
            };
            let norms = |l: &'a [store::OwnedPair]| l.iter().map(|(_, n)| &**n).collect();
            return (norms(&c.removed), norms(&c.added));
        }
    }
    let old = members(dit, before, class, member);
    let new = members(dit, after, class, member);
    if !same_name {
        // Every member leaves the old name and joins the new one.
        return (old, new);
    }
    let old_keys: HashSet<&[u8]> = old.iter().copied().collect();
    let new_keys: HashSet<&[u8]> = new.iter().copied().collect();
    (
        old.into_iter().filter(|n| !new_keys.contains(n)).collect(),
        new.into_iter().filter(|n| !old_keys.contains(n)).collect(),
    )
}

/// Applies `edits` (entry → attribute → edit) to the working version, stamping each entry.
/// The values kept keep their normalized forms, and the values removed or added are looked
/// for one by one (edits name a few values; the attribute may hold 100,000).
///
/// An edit that would leave the entry against its schema (the last member of a groupOfNames,
/// which requires one) is not made: the value stays, as it does in slapd, whose overlays' own
/// modification of the entry fails then (objectClassViolation) while the change that caused
/// it stands.
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
        let norm = |v: &[u8]| schema.normalize_eq(ty, v).unwrap_or_else(|_| v.to_vec());
        let mut attrs = e.to_attrs();
        let mut a = match attrs
            .iter()
            .position(|a| a.ty == ty && a.options.is_empty())
        {
            Some(p) => attrs.remove(p),
            None => Attr {
                ty,
                options: "".into(),
                values: Vec::new(),
                norm: Vec::new(),
            },
        };
        if !edit.remove.is_empty() {
            let remove: Vec<Vec<u8>> = edit.remove.iter().map(|v| norm(v)).collect();
            let keep: Vec<bool> = a
                .norm
                .iter()
                .map(|n| !remove.iter().any(|r| **r == **n))
                .collect();
            let mut k = keep.iter();
            a.values.retain(|_| k.next().copied().unwrap_or(true));
            let mut k = keep.iter();
            a.norm.retain(|_| k.next().copied().unwrap_or(true));
        }
        for v in edit.add {
            let n = norm(&v);
            if a.find(&n).is_none() {
                a.values.push(v);
                a.norm.push(n.into_boxed_slice());
            }
        }
        if !a.values.is_empty() {
            attrs.push(a);
        }
        if let Err(err) = crate::write::check_entry(dit, &attrs) {
            tracing::warn!(
                "{}: not changed on behalf of a change to another entry: {}",
                e.dn(),
                err.message
            );
            continue;
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

    fn watches(&self, ty: AttrId) -> bool {
        self.groups.iter().any(|(_, member)| *member == ty)
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
            let (gone, came) = membership_change(dit, applied, class, *member);
            let v = txn.version();
            for (list, group, add) in [(gone, before, false), (came, after, true)] {
                let Some(group) = group else { continue };
                let dn: Box<[u8]> = group.dn().as_bytes().into();
                for norm in list {
                    let Ok(norm) = std::str::from_utf8(norm) else {
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
                // memberOf values name groups, which step 1 follows when they are deleted or
                // renamed themselves; a renamed subtree moves the groups under it too, and
                // their members' memberOf follows whether or not `refint` lists memberOf
                // (slapd's memberof overlay leaves those values naming the old DNs).
                let maintained = !self.groups.is_empty();
                let member_of = (maintained && subtree && !self.refint.contains(&self.member_of))
                    .then_some(self.member_of);
                let types = self
                    .refint
                    .iter()
                    .copied()
                    .filter(|&ty| subtree || !maintained || ty != self.member_of)
                    .chain(member_of);
                for ty in types {
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
