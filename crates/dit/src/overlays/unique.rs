//! Attribute uniqueness (the behaviour of OpenLDAP's `unique` overlay): for each configured
//! rule, no two entries under its base may share a value of one of its attributes. A change
//! that would make a value appear twice — an add, a modify that adds or replaces values, a
//! modify DN that moves an entry under the base — is refused with constraintViolation (19),
//! "non-unique attributes found with (|(uid=…)(mail=…))", as slapd answers, and nothing of it
//! is applied.
//!
//! Cost is proportional to the change: only the values the change brings in are looked up,
//! each through the attribute's equality index (the server indexes every unique attribute).

use std::sync::Arc;

use proto::ResultCode;
use schema::{AttrId, NormDn, Schema};
use store::{Entry, Txn};

use super::{Applied, Overlay};
use crate::error::{LdapError, LdapResult};
use crate::Dit;

/// One `[[unique]]` rule as configured: attribute type names and an optional base DN.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UniqueSpec {
    pub attributes: Vec<String>,
    pub base: Option<String>,
}

/// One rule: these attributes are unique under `base` (or under every naming context).
pub struct Rule {
    pub attrs: Vec<AttrId>,
    pub base: Option<NormDn>,
}

pub struct Unique {
    pub rules: Vec<Rule>,
}

impl Rule {
    fn covers(&self, ndn: &str) -> bool {
        match &self.base {
            None => true,
            Some(b) => ndn == b.norm || schema::norm_is_descendant(ndn, &b.norm),
        }
    }
}

/// The (raw, normalized) values of `ty` (and its subtypes) in `e` that `before` did not have.
fn new_values(
    schema: &Schema,
    ty: AttrId,
    e: &Entry,
    before: Option<&Entry>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for a in e.attrs_of(schema, ty) {
        for (raw, n) in a.pairs() {
            if before.is_none_or(|b| !b.has_value(a.ty, n)) {
                out.push((raw.to_vec(), n.to_vec()));
            }
        }
    }
    out
}

impl Overlay for Unique {
    fn name(&self) -> &'static str {
        "unique"
    }

    fn after(&self, _: &Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()> {
        let Some(e) = &applied.after else {
            return Ok(());
        };
        let v = txn.version();
        let schema = v.schema();
        for rule in &self.rules {
            if !rule.covers(e.ndn_str()) {
                continue;
            }
            // An entry that moved into the rule's base brings all its values.
            let before = applied
                .before
                .as_ref()
                .filter(|b| rule.covers(b.ndn_str()))
                .map(Arc::as_ref);
            let mut checked: Vec<proto::Filter<'static>> = Vec::new();
            let mut clash = false;
            for &ty in &rule.attrs {
                for (raw, norm) in new_values(schema, ty, e, before) {
                    checked.push(proto::Filter::Equality(
                        schema.attr(ty).name().as_bytes().to_vec().into(),
                        raw.into(),
                    ));
                    if clash {
                        continue;
                    }
                    // Unique attributes are indexed at start; without an index (a type added
                    // since), every entry is looked at.
                    let taken = super::holders(v, schema, ty, &norm, true)
                        .iter()
                        .any(|o| o.id != e.id && rule.covers(o.ndn_str()));
                    clash |= taken;
                }
            }
            if clash {
                // slapd's words, with the values the change brought in.
                let filter = match checked.len() {
                    1 => checked.remove(0),
                    _ => proto::Filter::Or(checked),
                };
                return Err(LdapError::new(
                    ResultCode::ConstraintViolation,
                    format!("non-unique attributes found with {filter}"),
                ));
            }
        }
        Ok(())
    }
}
