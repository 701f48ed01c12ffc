//! The overlay chain of the write path (design.md seam 2). Every change — add, delete,
//! modify, modify DN, Password Modify, start-up entries — is applied in the writer's job by
//! `ops::submit_write`, which then runs each configured overlay, in order, on what was applied.
//! An overlay sees the working version with the change in it and may refuse it (the whole
//! operation is then rolled back, with the overlay's result code) or change more entries in the
//! same transaction: all of it commits together or not at all. Model: OpenLDAP's
//! `slap_overinst` (unique, memberof, refint, ppolicy), which issue separate internal
//! operations instead.
//!
//! Adding an overlay: implement `Overlay`, construct it from the configuration in `chain`.
//!
//! Overlays: [`unique`] (attribute uniqueness).

pub mod unique;

use std::sync::Arc;

use store::{Entry, Txn};

use crate::error::LdapResult;
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
}

/// One overlay of the chain.
pub trait Overlay: Send + Sync {
    /// The name used in logs and messages.
    fn name(&self) -> &'static str;
    /// Runs after `applied` is in `txn`'s working version, before the batch is logged and
    /// published. An error refuses the change.
    fn after(&self, shared: &Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()>;
}

/// The chain the configuration asks for, in order.
pub fn chain(
    unique_specs: &[unique::UniqueSpec],
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
    Ok(out)
}

/// The attribute types the overlays look up by value: the server indexes them.
pub fn indexed(unique_specs: &[unique::UniqueSpec]) -> impl Iterator<Item = &str> {
    unique_specs
        .iter()
        .flat_map(|u| u.attributes.iter().map(String::as_str))
}

/// Runs the chain on one applied change.
pub fn run(shared: &Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()> {
    for o in &shared.overlays {
        o.after(shared, txn, applied)?;
    }
    Ok(())
}
