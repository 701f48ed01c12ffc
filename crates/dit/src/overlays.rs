//! The overlay chain of the write path (design.md seam 2). Every change — add, delete,
//! modify, modify DN, Password Modify, start-up entries, what the password policy records on a
//! bind, replicated changes — is applied in the writer's job inside `write::write_job` (or
//! `write_job_as`), which then runs each configured overlay, in order, on what was applied.
//! An overlay sees the working version with the change in it and may refuse it (the whole
//! operation is then rolled back, with the overlay's result code) or change more entries in the
//! same transaction: all of it commits together or not at all. Model: OpenLDAP's
//! `slap_overinst` (unique, memberof, refint, ppolicy), which issue separate internal
//! operations instead.
//!
//! Adding an overlay: implement `Overlay`, construct it from the configuration in `chain`.
//!
//! The chain runs behind the write path's door only (`write::write_job`, `write::write_job_as`):
//! `run` and `Dit`'s list of overlays are not reachable from other crates, so no caller can
//! apply a change and run (or skip) the overlays on its own. These do not compile:
//!
//! ```compile_fail,E0603
//! fn side_door(dit: &dit::Dit, txn: &mut store::Txn, a: &dit::overlays::Applied) {
//!     let _ = dit::overlays::run(dit, txn, a);
//! }
//! ```
//!
//! ```compile_fail,E0616
//! fn side_door(dit: &dit::Dit) -> usize {
//!     dit.overlays.len()
//! }
//! ```
//!
//! Overlays: [`unique`] (attribute uniqueness), [`memberof`] (group membership and
//! referential integrity), [`ppolicy`] (password policy state; built by the server, which
//! shares its configuration with the bind path), [`syncprov`] (contextCSN and tombstones for
//! the replication provider; last in the chain).

pub mod memberof;
pub mod ppolicy;
pub mod syncprov;
pub mod unique;

use std::sync::Arc;

use schema::{AttrId, Schema};
use store::{Entry, Filter, Txn, Version};

use crate::error::LdapResult;
use crate::values::ValueSet;
use crate::Dit;

/// What one change did: the entry before and after it (`None` before an add, after a
/// delete). Returned to the operation (pre/post-read controls) and handed to the overlays.
#[derive(Clone, Default)]
pub struct Applied {
    pub before: Option<Arc<Entry>>,
    pub after: Option<Arc<Entry>>,
    /// The other entries the same operation changed, each already run through the overlay
    /// chain: a subtree delete's subordinates, deepest first. Audited before this one.
    pub also: Vec<Applied>,
    /// For a modify (`modify::apply`): what it did to the values of the attribute types an
    /// overlay watches (`Overlay::watches`), and of attributes that held many values, so that
    /// an overlay need not compare `before` and `after` (a group of 100,000 members gaining
    /// one: the change names one value). Every watched type whose values changed is listed.
    /// `None` for other changes, and for changes applied another way (replicated ones):
    /// compare `before` and `after` then.
    pub values: Option<Vec<ValueChange>>,
    /// Where the change comes from: set by the write path's door, for the overlays that treat
    /// some changes differently.
    pub origin: Origin,
}

/// Where a change comes from (`Applied::origin`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Origin {
    /// A client's request (add, delete, modify, modify DN, Password Modify, the operations of
    /// a transaction) or an entry the server creates at start.
    #[default]
    Request,
    /// What the password policy records on an account after a bind (failures, lockout, grace
    /// logins; slapd's ppolicy does it with an internal modify): not a password change, so the
    /// ppolicy overlay leaves it as it is.
    BindRecord,
    /// A change a provider sent (syncrepl): it keeps the provider's entryCSN and stamps, and
    /// the access and policy checks were the provider's.
    Replicated,
}

/// What a modify did to the values of one attribute (type and options), net: the values it
/// added that the entry did not hold, and those it removed that the entry held, by
/// equality-normalized form (a value removed and added back, or added and removed again, is in
/// neither list). Each value is `(raw, normalized)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueChange {
    pub ty: AttrId,
    pub options: Box<str>,
    pub added: Vec<store::OwnedPair>,
    pub removed: Vec<store::OwnedPair>,
}

/// Collects `ValueChange`s as a modify applies its changes in order, netting a value added
/// and removed within the same request. The work is proportional to the values the request
/// names (and to an attribute's values where the request replaces or deletes it whole).
#[derive(Default)]
pub struct ValueChanges {
    attrs: Vec<Recorded>,
}

/// One attribute's values recorded by `ValueChanges`: its type and options, the values, and
/// for each whether it is added (`Some(true)`), removed (`Some(false)`) or back as it was
/// (`None`).
type Recorded = (AttrId, Box<str>, ValueSet, Vec<Option<bool>>);

impl ValueChanges {
    /// Records that `(raw, norm)` was added (`true`) to or removed (`false`) from the
    /// attribute `ty` with `options`: the entry did not, resp. did, hold it just before.
    pub fn record(&mut self, ty: AttrId, options: &str, raw: &[u8], norm: &[u8], added: bool) {
        let i = match self
            .attrs
            .iter()
            .position(|(t, o, _, _)| *t == ty && **o == *options)
        {
            Some(i) => i,
            None => {
                self.attrs
                    .push((ty, options.into(), ValueSet::default(), Vec::new()));
                self.attrs.len() - 1
            }
        };
        let (_, _, set, state) = &mut self.attrs[i];
        match set.find(norm) {
            // The opposite of what was recorded for this value: the two cancel out.
            Some(k) if state[k] == Some(!added) => state[k] = None,
            Some(k) => {
                state[k] = Some(added);
                set.values[k] = raw.into();
            }
            None => {
                set.insert(raw.into(), norm.into());
                state.push(Some(added));
            }
        }
    }

    /// `record`s every value of `a`.
    pub fn record_attr(&mut self, a: &store::Attr, added: bool) {
        for (raw, norm) in a.values.iter().zip(&a.norm) {
            self.record(a.ty, &a.options, raw, norm, added);
        }
    }

    /// The net changes, attributes with none left out.
    pub fn finish(self) -> Vec<ValueChange> {
        let mut out = Vec::with_capacity(self.attrs.len());
        for (ty, options, set, state) in self.attrs {
            let mut change = ValueChange {
                ty,
                options,
                added: Vec::new(),
                removed: Vec::new(),
            };
            let (values, norms) = set.into_parts();
            for ((raw, norm), s) in values.into_iter().zip(norms).zip(state) {
                match s {
                    Some(true) => change.added.push((raw, norm)),
                    Some(false) => change.removed.push((raw, norm)),
                    None => {}
                }
            }
            if !change.added.is_empty() || !change.removed.is_empty() {
                out.push(change);
            }
        }
        out
    }
}

/// One overlay of the chain.
pub trait Overlay: Send + Sync {
    /// The name used in logs and messages.
    fn name(&self) -> &'static str;
    /// Whether the overlay wants a modify's value changes of attribute type `ty` listed in
    /// `Applied::values`.
    fn watches(&self, _ty: AttrId) -> bool {
        false
    }
    /// Runs after `applied` is in `txn`'s working version, before the batch is logged and
    /// published. An error refuses the change.
    fn after(&self, shared: &Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()>;
}

/// What the membership and referential-integrity overlay is asked to do (`memberof`,
/// `memberof_groups`, `refint`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberOfSpec {
    /// Maintain memberOf.
    pub memberof: bool,
    /// `class:attribute` pairs naming the groups and their member attributes.
    pub groups: Vec<String>,
    /// Attributes whose values follow renames and deletes of the entries they name.
    pub refint: Vec<String>,
}

impl MemberOfSpec {
    /// The default group kinds (groupOfNames/member, groupOfUniqueNames/uniqueMember).
    pub fn default_groups() -> Vec<String> {
        vec![
            "groupOfNames:member".into(),
            "groupOfUniqueNames:uniqueMember".into(),
        ]
    }

    fn attrs(&self) -> impl Iterator<Item = &str> {
        let members = self
            .memberof
            .then(|| {
                self.groups
                    .iter()
                    .filter_map(|g| g.split_once(':').map(|(_, m)| m))
            })
            .into_iter()
            .flatten();
        members.chain(self.refint.iter().map(String::as_str))
    }
}

/// The chain the configuration asks for, in order: uniqueness first (it may refuse the
/// change), then membership and referential integrity (they change other entries).
pub fn chain(
    unique_specs: &[unique::UniqueSpec],
    memberof_spec: &MemberOfSpec,
    admin_dn: &str,
    schema: &schema::Schema,
) -> Result<Vec<Box<dyn Overlay>>, String> {
    let mut out: Vec<Box<dyn Overlay>> = Vec::new();
    if !unique_specs.is_empty() {
        let mut rules = Vec::new();
        for (i, spec) in unique_specs.iter().enumerate() {
            let at = format!("unique rule {}", i + 1);
            if spec.attributes.is_empty() {
                return Err(format!(
                    "{at}: attributes: at least one attribute type is required"
                ));
            }
            let mut attrs = Vec::new();
            for name in &spec.attributes {
                let ty = schema
                    .attr_by_name(name)
                    .ok_or_else(|| format!("{at}: attributes: unknown attribute type '{name}'"))?;
                if schema.attr(ty).equality.is_none() {
                    return Err(format!(
                        "{at}: attributes: '{name}' has no equality matching rule"
                    ));
                }
                attrs.push(ty);
            }
            let base = match &spec.base {
                None => None,
                Some(b) => Some(
                    schema::Dn::parse(b)
                        .and_then(|d| d.normalize(schema))
                        .map_err(|e| format!("{at}: base '{b}': {e}"))?,
                ),
            };
            rules.push(unique::Rule { attrs, base });
        }
        out.push(Box::new(unique::Unique { rules }));
    }
    if memberof_spec.memberof || !memberof_spec.refint.is_empty() {
        out.push(Box::new(memberof_overlay(memberof_spec, admin_dn, schema)?));
    }
    Ok(out)
}

/// A kind of group: its normalized objectClass value and its member attribute.
pub type GroupKind = (Box<[u8]>, AttrId);

/// A type named by `key` that values are looked up in: it must exist and have an equality
/// rule.
fn lookup_type(schema: &schema::Schema, key: &str, name: &str) -> Result<AttrId, String> {
    let ty = schema
        .attr_by_name(name)
        .ok_or_else(|| format!("{key}: unknown attribute type '{name}'"))?;
    if schema.attr(ty).equality.is_none() {
        return Err(format!("{key}: '{name}' has no equality matching rule"));
    }
    Ok(ty)
}

impl MemberOfSpec {
    /// The group kinds whose members get memberOf (none unless `memberof`): each class's
    /// normalized objectClass value and its member attribute. An error names the key.
    pub fn group_kinds(&self, schema: &schema::Schema) -> Result<Vec<GroupKind>, String> {
        let oc = schema
            .attr_by_name("objectClass")
            .ok_or("built-in schema lacks objectClass")?;
        let mut groups = Vec::new();
        if self.memberof {
            for g in &self.groups {
                let (class, member) = g.split_once(':').ok_or_else(|| {
                    format!(
                        "memberof_groups: '{g}' is not CLASS:ATTRIBUTE (e.g. groupOfNames:member)"
                    )
                })?;
                if schema.class_by_name(class).is_none() {
                    return Err(format!("memberof_groups: unknown object class '{class}'"));
                }
                let norm = schema
                    .normalize_eq(oc, class.as_bytes())
                    .map_err(|e| format!("memberof_groups: '{class}': {e}"))?;
                groups.push((
                    norm.into_boxed_slice(),
                    lookup_type(schema, "memberof_groups", member)?,
                ));
            }
        }
        Ok(groups)
    }
}

fn memberof_overlay(
    spec: &MemberOfSpec,
    admin_dn: &str,
    schema: &schema::Schema,
) -> Result<memberof::MemberOf, String> {
    let groups = spec.group_kinds(schema)?;
    let mut refint = Vec::new();
    for name in &spec.refint {
        refint.push(lookup_type(schema, "refint", name)?);
    }
    Ok(memberof::MemberOf {
        groups,
        member_of: lookup_type(schema, "memberof", "memberOf")?,
        refint,
        modifier: admin_dn.to_string(),
    })
}

/// The attribute types the overlays look up by value: the server indexes them.
pub fn indexed<'a>(
    unique_specs: &'a [unique::UniqueSpec],
    memberof_spec: &'a MemberOfSpec,
) -> impl Iterator<Item = &'a str> {
    unique_specs
        .iter()
        .flat_map(|u| u.attributes.iter().map(String::as_str))
        .chain(memberof_spec.attrs())
        .chain(memberof_spec.memberof.then_some("memberOf"))
}

/// The entries of `v` holding the equality form `norm` in an attribute of type `ty` (and, when
/// `subtypes`, of a subtype): the candidates of the equality index, each confirmed, or every
/// entry read for a type without an index (one added since start).
pub(crate) fn holders<'v>(
    v: &'v Version,
    schema: &Schema,
    ty: AttrId,
    norm: &[u8],
    subtypes: bool,
) -> Vec<&'v Arc<Entry>> {
    let holds = |e: &Entry| {
        if subtypes {
            e.attrs_of(schema, ty).any(|a| a.find(norm).is_some())
        } else {
            e.has_value(ty, norm)
        }
    };
    let f = Filter::Equality {
        attr: ty,
        norm: norm.to_vec(),
    };
    match v.candidates(schema, &f) {
        Some(ids) => ids
            .iter()
            .filter_map(|id| v.get(id))
            .filter(|e| holds(e))
            .collect(),
        None => v.iter().filter(|e| holds(e)).collect(),
    }
}

/// Runs the chain on one applied change: for the write path's door (`write::write_job`) only.
pub(crate) fn run(shared: &Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()> {
    for o in &shared.overlays {
        o.after(shared, txn, applied)?;
    }
    Ok(())
}
