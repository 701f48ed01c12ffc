//! Modifying an entry (RFC 4511 §4.6, increment from RFC 4525), without the protocol: the
//! changes of a request are resolved and checked (`prepare`), then in the writer's job applied
//! in order to a copy of the entry, which is checked as a whole and replaces the entry, or
//! nothing changes (`apply`).

use proto::{ModOp, ModifyRequest, ResultCode};
use schema::{AttrId, NormDn};
use store::{same_options, Attr, AttrRef, EntryId, Part, Txn, ValueDelta, Version};

use crate::acl::Rights;
use crate::error::{LdapError, LdapResult};
use crate::overlays::{Applied, ValueChanges};
use crate::values::ValueSet;
use crate::write::{
    authorize, check_assertion, check_attribute_count, check_entry_with, check_user_modifiable,
    check_value_count, checked_values, rdn_values_present, stamp_modified, structural_of,
    Assertion,
};
use crate::{resolve_attr, Dit, Identity};

/// An attribute with more values than this (a big group's members) has what a modify does to
/// it recorded value by value (`Applied::values`), so that its index keys are updated by the
/// values changed rather than worked out again from all of them.
const MANY_VALUES: usize = 64;

/// One change, resolved and syntax-checked.
pub struct Mod {
    pub op: ModOp,
    pub ty: AttrId,
    pub options: String,
    pub name: String,
    pub values: Vec<Box<[u8]>>,
}

fn context(op: ModOp) -> &'static str {
    match op {
        ModOp::Add => "modify/add: ",
        ModOp::Delete => "modify/delete: ",
        ModOp::Replace => "modify/replace: ",
        ModOp::Increment => "modify/increment: ",
    }
}

/// Resolves and checks the changes of a request. Clear-text passwords are left for
/// `hash_passwords_of`.
pub fn prepare(shared: &Dit, req: &ModifyRequest<'_>) -> LdapResult<(NormDn, Vec<Mod>)> {
    let schema = &*shared.schema();
    let ndn = shared.parse_ndn(&req.dn)?;
    check_attribute_count(shared, "changes", req.changes.len())?;
    let mut mods = Vec::with_capacity(req.changes.len());
    for ch in &req.changes {
        let (ty, options) = resolve_attr(schema, &ch.attr.name)?;
        let name = schema.attr(ty).name().to_string();
        let ctx = context(ch.op);
        check_user_modifiable(schema, ty, &name)?;
        if ch.op == ModOp::Add && ch.attr.values.is_empty() {
            return Err(LdapError::new(
                ResultCode::ProtocolError,
                format!("{ctx}{name}: no values given"),
            ));
        }
        if ch.op == ModOp::Increment && ch.attr.values.len() != 1 {
            return Err(LdapError::new(
                ResultCode::ProtocolError,
                format!("{ctx}{name}: exactly one value required"),
            ));
        }
        let values = if ch.op == ModOp::Increment {
            ch.attr
                .values
                .iter()
                .map(|v| Box::<[u8]>::from(&**v))
                .collect()
        } else {
            checked_values(shared, ty, &name, &ch.attr.values, ctx)?.0
        };
        mods.push(Mod {
            op: ch.op,
            ty,
            options,
            name,
            values,
        });
    }
    Ok((ndn, mods))
}

/// Whether `m` adds or replaces userPassword values that are to be hashed.
pub fn has_cleartext_password(user_password: AttrId, m: &Mod) -> bool {
    m.ty == user_password
        && matches!(m.op, ModOp::Add | ModOp::Replace)
        && m.values.iter().any(|v| !pwhash::is_hashed(v))
}

fn parse_int(v: &[u8]) -> Option<i128> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

/// The rights a modify needs: write access to every attribute it changes.
pub fn needs(mods: &[Mod]) -> Vec<(Option<AttrId>, Rights)> {
    mods.iter().map(|m| (Some(m.ty), Rights::WRITE)).collect()
}

/// Values a request may name for an attribute it keeps as stored (`KeptAttr`): each is looked
/// for among the attribute's values (by the equality index when there is one, else one pass).
const FEW_VALUES: usize = 16;

/// Whether the request `mods` leaves the attribute `a` of the entry `ndn` as stored but for a
/// few values added or named values removed (`KeptAttr`): it has more than `MANY_VALUES`
/// values, is not objectClass nor a naming attribute (whose values the checks read), and
/// every change to it adds values or deletes named values, `FEW_VALUES` at most in all.
fn keeps(shared: &Dit, ndn: &NormDn, mods: &[Mod], a: &AttrRef<'_>) -> bool {
    if a.len() <= MANY_VALUES
        || a.ty == shared.known.object_class
        || ndn
            .rdns
            .first()
            .is_some_and(|r| r.iter().any(|(t, _)| *t == a.ty))
    {
        return false;
    }
    let mut named = 0;
    for m in mods
        .iter()
        .filter(|m| m.ty == a.ty && same_options(&m.options, a.options))
    {
        match m.op {
            ModOp::Add => {}
            ModOp::Delete if !m.values.is_empty() => {}
            _ => return false,
        }
        named += m.values.len();
    }
    named <= FEW_VALUES
}

/// An attribute a modify changes without unpacking it (`Part::Kept`): a group of 100,000
/// members gaining one is one value looked up and the stored bytes copied once.
struct KeptAttr<'e> {
    attr: AttrRef<'e>,
    /// Positions of the stored values removed.
    drop: Vec<usize>,
    /// Values added, `(raw, normalized)`.
    add: Vec<store::OwnedPair>,
}

impl KeptAttr<'_> {
    fn is(&self, ty: AttrId, options: &str) -> bool {
        self.attr.ty == ty && same_options(self.attr.options, options)
    }

    /// The values it holds after the changes so far.
    fn len(&self) -> usize {
        (self.attr.len() + self.add.len()).saturating_sub(self.drop.len())
    }

    /// The position of the stored value `norm`, unless it was removed: the equality index of
    /// version `v` (where entry `id` is as stored) rules most values out without a look at
    /// the values.
    fn stored(&self, v: &Version, id: EntryId, norm: &[u8]) -> Option<(usize, Box<[u8]>)> {
        if v.may_hold(id, self.attr.ty, norm) == Some(false) {
            return None;
        }
        self.attr
            .pairs()
            .enumerate()
            .find(|(_, (_, n))| *n == norm)
            .filter(|(p, _)| !self.drop.contains(p))
            .map(|(p, (raw, _))| (p, raw.into()))
    }

    /// Applies one change (an add, or a delete of named values) as `apply` would to the
    /// unpacked attribute, recording the values in `changes`.
    fn apply(
        &mut self,
        shared: &Dit,
        v: &Version,
        id: EntryId,
        m: Mod,
        permissive: bool,
        changes: &mut ValueChanges,
    ) -> LdapResult<()> {
        let schema = v.schema();
        let ctx = context(m.op);
        if m.op == ModOp::Add {
            let new = Attr::new(schema, m.ty, &m.options, m.values).map_err(|e| {
                LdapError::new(ResultCode::InvalidAttributeSyntax, format!("{ctx}{e}"))
            })?;
            check_value_count(shared, &m.name, self.len() + new.values.len())?;
            for (i, (raw, norm)) in new.values.into_iter().zip(new.norm).enumerate() {
                let held =
                    self.add.iter().any(|(_, n)| *n == norm) || self.stored(v, id, &norm).is_some();
                if held {
                    if permissive {
                        continue;
                    }
                    return Err(LdapError::new(
                        ResultCode::AttributeOrValueExists,
                        format!("{ctx}{}: value #{i} already exists", m.name),
                    ));
                }
                changes.record(m.ty, &m.options, &raw, &norm, true);
                self.add.push((raw, norm));
            }
            return Ok(());
        }
        for (i, val) in m.values.iter().enumerate() {
            let norm = schema.normalize_eq(m.ty, val).unwrap_or_default();
            if let Some(j) = self.add.iter().position(|(_, n)| **n == *norm) {
                let (raw, n) = self.add.remove(j);
                changes.record(m.ty, &m.options, &raw, &n, false);
            } else if let Some((p, raw)) = self.stored(v, id, &norm) {
                changes.record(m.ty, &m.options, &raw, &norm, false);
                self.drop.push(p);
            } else if !permissive {
                return Err(LdapError::new(
                    ResultCode::NoSuchAttribute,
                    format!("{ctx}{}: value #{i} not found", m.name),
                ));
            }
        }
        Ok(())
    }
}

/// Applies the changes to the entry named `ndn` for `who`, all or nothing, after checking
/// `needs` (the rights `needs(&mods)` lists) on the version it changes: the rules may depend
/// on entries (groups) that changed since the request was read. `permissive` (the permissive
/// modify control) skips values added that exist and values or attributes deleted that do not,
/// instead of refusing the request.
#[expect(
    clippy::too_many_arguments,
    reason = "the parts of one prepared request"
)]
pub fn apply(
    shared: &Dit,
    txn: &mut Txn,
    who: &Identity,
    ndn: &NormDn,
    needs: &[(Option<AttrId>, Rights)],
    mods: Vec<Mod>,
    assertion: Option<&Assertion>,
    permissive: bool,
) -> LdapResult<Applied> {
    authorize(shared, txn.version(), who, ndn, needs, true, "write")?;
    let schema = &*shared.schema();
    let k = &shared.known;
    let v = txn.version();
    let e = v.lookup(ndn).ok_or_else(|| shared.no_such_object(v, ndn))?;
    check_assertion(assertion, shared, v, e)?;
    let before = e.clone();
    let id = e.id;
    let old_structural = e
        .attr(k.structural_object_class)
        .and_then(|a| a.first().map(Box::<[u8]>::from));
    // Attributes with many values that the request only adds a few values to or removes a
    // few named values from stay as stored (`KeptAttr`); the others are unpacked to be edited.
    let mut kept: Vec<KeptAttr<'_>> = before
        .attrs()
        .filter(|a| keeps(shared, ndn, &mods, a))
        .map(|attr| KeptAttr {
            attr,
            drop: Vec::new(),
            add: Vec::new(),
        })
        .collect();
    // So do the attributes no change names and no check reads (most of an entry: a modify
    // usually changes one attribute of twenty), copied as they are stored instead of unpacked
    // (two allocations per attribute and two per value) and packed again. The stamps no
    // change names are left out: `stamp_modified` sets them afresh.
    let named = |ty: AttrId| mods.iter().any(|m| m.ty == ty);
    let restamped = |ty: AttrId| {
        [k.entry_csn, k.modifiers_name, k.modify_timestamp].contains(&ty) && !named(ty)
    };
    let untouched = |a: &AttrRef<'_>| {
        !kept.iter().any(|k| k.is(a.ty, a.options))
            && !named(a.ty)
            && a.ty != k.object_class
            && !ndn
                .rdns
                .first()
                .is_some_and(|r| r.iter().any(|(t, _)| *t == a.ty))
    };
    let stored: Vec<(AttrRef<'_>, bool)> = before
        .attrs()
        .filter(|a| !restamped(a.ty))
        .map(|a| (a, untouched(&a)))
        .collect();
    let mut attrs: Vec<Attr> = stored
        .iter()
        .filter(|(a, same)| !same && !kept.iter().any(|k| k.is(a.ty, a.options)))
        .map(|(a, _)| a.to_attr())
        .collect();
    // What the changes do to the values of the types an overlay watches, and of the
    // attributes with many values (`Applied::values`): the overlays read it, and the indexes
    // are updated by those values only (`Txn::replace_attrs_with`).
    let mut changes = ValueChanges::default();
    let recorded = |ty: AttrId| {
        shared.overlays.iter().any(|o| o.watches(ty))
            || before.attrs().any(|a| a.ty == ty && a.len() > MANY_VALUES)
    };
    for m in mods {
        let ctx = context(m.op);
        let pos = attrs
            .iter()
            .position(|a| a.ty == m.ty && same_options(&a.options, &m.options));
        let watched = recorded(m.ty);
        if let Some(k) = kept.iter_mut().find(|k| k.is(m.ty, &m.options)) {
            k.apply(shared, txn.version(), id, m, permissive, &mut changes)?;
            continue;
        }
        // The values of the attribute as it is before this change (replace, increment and a
        // delete of the whole attribute remove them all).
        if watched && matches!(m.op, ModOp::Replace | ModOp::Increment)
            || watched && m.op == ModOp::Delete && m.values.is_empty()
        {
            if let Some(p) = pos {
                changes.record_attr(&attrs[p], false);
            }
        }
        match m.op {
            ModOp::Add => {
                let new = Attr::new(schema, m.ty, &m.options, m.values).map_err(|e| {
                    LdapError::new(ResultCode::InvalidAttributeSyntax, format!("{ctx}{e}"))
                })?;
                match pos {
                    Some(p) => {
                        let a = &mut attrs[p];
                        check_value_count(shared, &m.name, a.values.len() + new.values.len())?;
                        let mut set = ValueSet::from_parts(
                            std::mem::take(&mut a.values),
                            std::mem::take(&mut a.norm),
                        );
                        for (i, (val, norm)) in new.values.into_iter().zip(new.norm).enumerate() {
                            if watched && set.find(&norm).is_none() {
                                changes.record(m.ty, &m.options, &val, &norm, true);
                            }
                            if !set.insert(val, norm) && !permissive {
                                return Err(LdapError::new(
                                    ResultCode::AttributeOrValueExists,
                                    format!("{ctx}{}: value #{i} already exists", m.name),
                                ));
                            }
                        }
                        (a.values, a.norm) = set.into_parts();
                    }
                    None => {
                        if watched {
                            changes.record_attr(&new, true);
                        }
                        attrs.push(new)
                    }
                }
            }
            ModOp::Delete => {
                let Some(p) = pos else {
                    if permissive {
                        continue;
                    }
                    return Err(LdapError::new(
                        ResultCode::NoSuchAttribute,
                        format!("{ctx}{}: no such attribute", m.name),
                    ));
                };
                if m.values.is_empty() {
                    attrs.remove(p);
                } else {
                    let a = &mut attrs[p];
                    let mut set = ValueSet::from_parts(
                        std::mem::take(&mut a.values),
                        std::mem::take(&mut a.norm),
                    );
                    // Marked, then removed in one pass: a value named twice is not found the
                    // second time, as when values were removed one by one.
                    let mut gone = vec![false; set.len()];
                    for (i, val) in m.values.iter().enumerate() {
                        let norm = schema.normalize_eq(m.ty, val).unwrap_or_default();
                        match set.find(&norm) {
                            Some(at) if !gone[at] => {
                                gone[at] = true;
                                if watched {
                                    changes.record(m.ty, &m.options, &set.values[at], &norm, false);
                                }
                            }
                            _ if permissive => {}
                            _ => {
                                return Err(LdapError::new(
                                    ResultCode::NoSuchAttribute,
                                    format!("{ctx}{}: value #{i} not found", m.name),
                                ))
                            }
                        }
                    }
                    set.remove_marked(&gone);
                    (a.values, a.norm) = set.into_parts();
                    if a.values.is_empty() {
                        attrs.remove(p);
                    }
                }
            }
            ModOp::Replace => {
                if let Some(p) = pos {
                    attrs.remove(p);
                }
                if !m.values.is_empty() {
                    let new = Attr::new(schema, m.ty, &m.options, m.values).map_err(|e| {
                        LdapError::new(ResultCode::InvalidAttributeSyntax, format!("{ctx}{e}"))
                    })?;
                    if watched {
                        changes.record_attr(&new, true);
                    }
                    attrs.push(new);
                }
            }
            ModOp::Increment => {
                let Some(p) = pos else {
                    return Err(LdapError::new(
                        ResultCode::NoSuchAttribute,
                        format!("{ctx}{}: no such attribute", m.name),
                    ));
                };
                let delta = m.values.first().and_then(|d| parse_int(d)).ok_or_else(|| {
                    LdapError::new(
                        ResultCode::InvalidAttributeSyntax,
                        format!("{ctx}{}: increment value is not an integer", m.name),
                    )
                })?;
                let mut out = Vec::with_capacity(attrs[p].values.len());
                for val in &attrs[p].values {
                    let n = parse_int(val).ok_or_else(|| {
                        LdapError::new(
                            ResultCode::ConstraintViolation,
                            format!("{ctx}{}: value is not an integer", m.name),
                        )
                    })?;
                    out.push((n + delta).to_string().into_bytes().into_boxed_slice());
                }
                let new = Attr::new(schema, m.ty, &m.options, out).map_err(|e| {
                    LdapError::new(ResultCode::ConstraintViolation, format!("{ctx}{e}"))
                })?;
                if watched {
                    changes.record_attr(&new, true);
                }
                attrs[p] = new;
            }
        }
    }
    rdn_values_present(shared, ndn, &attrs)?;
    // Changing the structural class is refused before the entry is checked as a whole (slapd).
    if let (Some(old), Some(new)) = (old_structural, structural_of(shared, &attrs)) {
        let old_id = std::str::from_utf8(&old)
            .ok()
            .and_then(|o| schema.class_by_name(o));
        if old_id != Some(new) {
            return Err(LdapError::new(
                ResultCode::ObjectClassModsProhibited,
                format!(
                    "structural object class modification from '{}' to '{}' not allowed",
                    String::from_utf8_lossy(&old),
                    schema
                        .class(new)
                        .names
                        .first()
                        .map_or(schema.class(new).oid.as_str(), String::as_str)
                ),
            ));
        }
    }
    let kept_counts: Vec<(AttrId, usize)> = kept
        .iter()
        .map(|k| (k.attr.ty, k.len()))
        .chain(
            stored
                .iter()
                .filter(|(_, same)| *same)
                .map(|(a, _)| (a.ty, a.len())),
        )
        .collect();
    check_entry_with(shared, &attrs, &kept_counts)?;
    stamp_modified(shared, &mut attrs, &who.dn, txn.now());
    let changes = changes.finish();
    let deltas: Vec<ValueDelta<'_>> = changes
        .iter()
        .filter(|c| c.options.is_empty())
        .map(|c| ValueDelta {
            ty: c.ty,
            added: c.added.iter().map(|(_, n)| &**n).collect(),
        })
        .collect();
    for k in &mut kept {
        k.drop.sort_unstable();
    }
    // In stored order: an attribute stays where it was, whether kept or rewritten; the
    // attributes the changes added come last.
    let mut used = vec![false; attrs.len()];
    let mut parts: Vec<Part<'_>> = Vec::with_capacity(stored.len() + 3);
    for (a, same) in &stored {
        if *same {
            parts.push(Part::Kept {
                attr: *a,
                drop: &[],
                add: &[],
            });
        } else if let Some(k) = kept.iter().find(|k| k.is(a.ty, a.options)) {
            parts.push(Part::Kept {
                attr: k.attr,
                drop: &k.drop,
                add: &k.add,
            });
        } else if let Some(p) = (0..attrs.len()).find(|&p| {
            !used[p] && attrs[p].ty == a.ty && same_options(&attrs[p].options, a.options)
        }) {
            used[p] = true;
            parts.push(Part::New(&attrs[p]));
        }
    }
    parts.extend(
        attrs
            .iter()
            .zip(&used)
            .filter(|(_, u)| !**u)
            .map(|(a, _)| Part::New(a)),
    );
    txn.replace_parts(id, &parts, &deltas)?;
    drop(parts);
    drop(deltas);
    Ok(Applied {
        before: Some(before),
        after: txn.version().get(id).cloned(),
        values: Some(changes),
        ..Default::default()
    })
}
