//! Renaming and moving an entry (RFC 4511 §4.9), without the protocol: keep or delete the old
//! RDN values, move a whole subtree under a new superior.

use proto::{ModifyDnRequest, ResultCode};
use schema::{Dn, NormDn};
use store::Txn;

use crate::acl::Rights;
use crate::error::{LdapError, LdapResult};
use crate::overlays::Applied;
use crate::write::{
    authorize, authorize_new, check_assertion, check_entry, detached, join_rdn_value,
    rdn_values_present, stamp_modified, Assertion,
};
use crate::{Dit, Identity};

/// A modify DN request, resolved.
pub struct Rename {
    pub ndn: NormDn,
    pub new_rdn: Dn,
    pub new_rdn_norm: NormDn,
    pub delete_old_rdn: bool,
    pub new_superior: Option<NormDn>,
}

/// Resolves a modify DN request: DNs parsed, the new RDN a single one.
pub fn prepare(shared: &Dit, req: &ModifyDnRequest<'_>) -> LdapResult<Rename> {
    let ndn = shared.parse_ndn(&req.dn)?;
    let (new_rdn, new_rdn_norm) = shared.parse_dn(&req.new_rdn)?;
    if new_rdn.rdns.len() != 1 {
        return Err(LdapError::new(
            ResultCode::InvalidDnSyntax,
            "newrdn must be a single RDN",
        ));
    }
    let new_superior = match &req.new_superior {
        Some(s) => Some(shared.parse_dn(s)?.1),
        None => None,
    };
    Ok(Rename {
        ndn,
        new_rdn,
        new_rdn_norm,
        delete_old_rdn: req.delete_old_rdn,
        new_superior,
    })
}

/// Renames or moves the entry for `who` in the writer's job, after checking the rights a
/// rename needs (`authorize_rename`) on the version it changes.
pub fn apply(
    shared: &Dit,
    txn: &mut Txn,
    who: &Identity,
    r: Rename,
    assertion: Option<&Assertion>,
) -> LdapResult<Applied> {
    authorize_rename(shared, txn.version(), who, &r)?;
    let schema = &*shared.schema();
    let v = txn.version();
    let e = v
        .lookup(&r.ndn)
        .ok_or_else(|| shared.no_such_object(v, &r.ndn))?
        .clone();
    check_assertion(assertion, shared, v, &e)?;
    if shared.is_suffix(e.ndn_str()) {
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "cannot rename a naming context",
        ));
    }
    let parent = match &r.new_superior {
        Some(sup) => {
            let p = v.lookup(sup).ok_or_else(|| {
                LdapError::new(ResultCode::NoSuchObject, "newSuperior does not exist").with_matched(
                    v.matched(sup)
                        .map(|m| m.dn().to_string())
                        .unwrap_or_default(),
                )
            })?;
            if p.id == e.id || schema::norm_is_descendant(p.ndn_str(), e.ndn_str()) {
                return Err(LdapError::new(
                    ResultCode::UnwillingToPerform,
                    "newSuperior is the entry itself or one of its subordinates",
                ));
            }
            p.clone()
        }
        None => {
            let pid = e.parent.ok_or_else(|| {
                LdapError::new(ResultCode::UnwillingToPerform, "entry has no parent")
            })?;
            v.get(pid)
                .ok_or_else(|| LdapError::new(ResultCode::OperationsError, "parent entry missing"))?
                .clone()
        }
    };
    let mut rdns = r.new_rdn_norm.rdns.clone();
    let parent_ndn = parent.ndn(schema);
    rdns.extend(parent_ndn.rdns.iter().cloned());
    let new_ndn = NormDn {
        norm: format!("{},{}", r.new_rdn_norm.norm, parent_ndn.norm),
        rdns,
    };
    if let Some(other) = v.lookup(&new_ndn) {
        if other.id != e.id {
            return Err(LdapError::new(
                ResultCode::EntryAlreadyExists,
                "entry already exists",
            ));
        }
    }
    let mut attrs = e.to_attrs();
    let new_avas = r.new_rdn_norm.rdns.first().cloned().unwrap_or_default();
    let norm_of = |ty, raw: &[u8]| schema.normalize_eq(ty, raw).unwrap_or_default();
    // Old RDN values go first (unless the new RDN keeps them), then new ones join.
    if r.delete_old_rdn {
        if let Some(old) = e.ndn(schema).rdns.first() {
            for (ty, raw) in old {
                let n = norm_of(*ty, raw);
                if new_avas.iter().any(|(t, v)| t == ty && norm_of(*t, v) == n) {
                    continue;
                }
                if let Some(p) = attrs
                    .iter()
                    .position(|a| a.ty == *ty && a.options.is_empty())
                {
                    let a = &mut attrs[p];
                    if let Some(at) = a.find(&n) {
                        a.values.remove(at);
                        a.norm.remove(at);
                    }
                    if a.values.is_empty() {
                        attrs.remove(p);
                    }
                }
            }
        }
    }
    for (ty, raw) in &new_avas {
        schema.validate(*ty, raw).map_err(|_| {
            LdapError::new(
                ResultCode::InvalidAttributeSyntax,
                format!("{}: value invalid per syntax", schema.attr(*ty).name()),
            )
        })?;
        join_rdn_value(schema, &mut attrs, *ty, raw)?;
    }
    rdn_values_present(shared, &new_ndn, &attrs)?;
    check_entry(shared, &attrs)?;
    stamp_modified(shared, &mut attrs, &who.dn, txn.now());
    let dn = format!("{},{}", r.new_rdn.pretty(schema), parent.dn());
    txn.rename(e.id, dn, new_ndn, Some(parent.id), attrs)?;
    Ok(Applied {
        after: txn.version().get(e.id).cloned(),
        before: Some(e),
        ..Default::default()
    })
}

/// A rename is a delete at the old name and an add at the new one: `delete` on the entry as it
/// is, `add` on the entry at its new DN (which also needs a visible new parent).
pub fn authorize_rename(
    shared: &Dit,
    v: &store::Version,
    who: &Identity,
    r: &Rename,
) -> LdapResult<()> {
    if who.is_admin {
        return Ok(());
    }
    let needs = [(None, Rights::DELETE)];
    authorize(shared, v, who, &r.ndn, &needs, true, "delete")?;
    let Some(e) = v.lookup(&r.ndn) else {
        return Ok(());
    };
    let parent = match &r.new_superior {
        Some(p) => p.clone(),
        None => r.ndn.parent().unwrap_or_else(NormDn::root),
    };
    let mut rdns = r.new_rdn_norm.rdns.clone();
    rdns.extend(parent.rdns.iter().cloned());
    let norm = if parent.is_root() {
        r.new_rdn_norm.norm.clone()
    } else {
        format!("{},{}", r.new_rdn_norm.norm, parent.norm)
    };
    let probe = detached(String::new(), NormDn { norm, rdns }, e.to_attrs());
    authorize_new(shared, v, who, &probe, "add")
}
