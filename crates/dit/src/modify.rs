//! Modifying an entry (RFC 4511 §4.6, increment from RFC 4525), without the protocol: the
//! changes of a request are resolved and checked (`prepare`), then in the writer's job applied
//! in order to a copy of the entry, which is checked as a whole and replaces the entry, or
//! nothing changes (`apply`).

use proto::{ModOp, ModifyRequest, ResultCode};
use schema::{AttrId, NormDn};
use store::{Attr, AttrView, Txn};

use crate::acl::Rights;
use crate::error::{LdapError, LdapResult};
use crate::overlays::Applied;
use crate::values::ValueSet;
use crate::write::{
    authorize, check_assertion, check_attribute_count, check_entry, check_user_modifiable,
    check_value_count, checked_values, rdn_values_present, stamp_modified, structural_of,
    Assertion,
};
use crate::{resolve_attr, Dit, Identity};

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

/// Applies the changes to the entry named `ndn` for `who`, all or nothing, after checking
/// `needs` (the rights `needs(&mods)` lists) on the version it changes: the rules may depend
/// on entries (groups) that changed since the request was read. `permissive` (the permissive
/// modify control) skips values added that exist and values or attributes deleted that do not,
/// instead of refusing the request.
#[allow(
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
    let old_structural = before
        .attr(k.structural_object_class)
        .and_then(|a| a.first().map(Box::<[u8]>::from));
    // The attributes the changes leave alone stay packed, and are copied as they are.
    let mut attrs = before.edit();
    for m in mods {
        let ctx = context(m.op);
        let pos = attrs.position(m.ty, &m.options);
        match m.op {
            ModOp::Add => {
                let new = Attr::new(schema, m.ty, &m.options, m.values).map_err(|e| {
                    LdapError::new(ResultCode::InvalidAttributeSyntax, format!("{ctx}{e}"))
                })?;
                match pos {
                    Some(p) => {
                        let mut a = attrs.take(p);
                        check_value_count(shared, &m.name, a.values.len() + new.values.len())?;
                        let mut set = ValueSet::from_parts(
                            std::mem::take(&mut a.values),
                            std::mem::take(&mut a.norm),
                        );
                        for (i, (val, norm)) in new.values.into_iter().zip(new.norm).enumerate() {
                            if !set.insert(val, norm) && !permissive {
                                return Err(LdapError::new(
                                    ResultCode::AttributeOrValueExists,
                                    format!("{ctx}{}: value #{i} already exists", m.name),
                                ));
                            }
                        }
                        (a.values, a.norm) = set.into_parts();
                        attrs.replace(p, a);
                    }
                    None => attrs.push(new),
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
                    let mut a = attrs.take(p);
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
                            Some(at) if !gone[at] => gone[at] = true,
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
                    } else {
                        attrs.replace(p, a);
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
                let mut out = Vec::with_capacity(attrs.slots()[p].value_count());
                for val in attrs.slots()[p].raw_values() {
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
                attrs.replace(p, new);
            }
        }
    }
    rdn_values_present(shared, ndn, attrs.slots())?;
    // Changing the structural class is refused before the entry is checked as a whole (slapd).
    if let (Some(old), Some(new)) = (old_structural, structural_of(shared, attrs.slots())) {
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
    check_entry(shared, attrs.slots())?;
    stamp_modified(shared, &mut attrs, &who.dn, txn.now());
    let id = before.id;
    txn.replace_entry(attrs.finish())?;
    Ok(Applied {
        before: Some(before),
        after: txn.version().get(id).cloned(),
        ..Default::default()
    })
}
