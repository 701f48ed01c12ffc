//! Modify (RFC 4511 §4.6, increment from RFC 4525). All changes of a request apply, in order,
//! to a copy of the entry; the copy is checked as a whole and replaces the entry, or nothing
//! changes.

use std::sync::Arc;

use proto::{tags, ModOp, ModifyRequest, ResultCode};
use schema::{AttrId, NormDn};
use store::{Attr, Txn};

use crate::acl::Rights;
use crate::error::{LdapError, LdapResult};
use crate::op::{Next, Op};
use crate::ops::values::ValueSet;
use crate::ops::{
    authorize, check_assertion, check_attribute_count, check_entry, check_user_modifiable,
    check_value_count, checked_values, early_checks, hash_passwords, on_blocking_pool,
    rdn_values_present, route_write, stamp_modified, structural_of, Applied, Assertion, Change,
};
use crate::state::{resolve_attr, Identity, Shared};

/// One change, resolved and syntax-checked.
pub(crate) struct Mod {
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
pub(crate) fn prepare(shared: &Shared, req: &ModifyRequest<'_>) -> LdapResult<(NormDn, Vec<Mod>)> {
    let schema = &*shared.schema();
    let (_, ndn) = shared.parse_dn(&req.dn)?;
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
fn has_cleartext_password(user_password: AttrId, m: &Mod) -> bool {
    m.ty == user_password
        && matches!(m.op, ModOp::Add | ModOp::Replace)
        && m.values.iter().any(|v| !pwhash::is_hashed(v))
}

/// Stores the clear-text passwords that `mods` add or replace hashed, on the blocking pool;
/// without any (the usual case) nothing moves.
async fn hash_passwords_of(shared: &Arc<Shared>, mods: Vec<Mod>) -> LdapResult<Vec<Mod>> {
    let user_password = shared.known.user_password;
    if !mods
        .iter()
        .any(|m| has_cleartext_password(user_password, m))
    {
        return Ok(mods);
    }
    let sh = shared.clone();
    on_blocking_pool(move || {
        let mut mods = mods;
        for m in &mut mods {
            if has_cleartext_password(user_password, m) {
                hash_passwords(&sh.config.password_hash, &mut m.values);
            }
        }
        mods
    })
    .await
}

fn parse_int(v: &[u8]) -> Option<i128> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

/// Applies the changes to the entry named `ndn`, all or nothing. `permissive` (the permissive
/// modify control) skips values added that exist and values or attributes deleted that do not,
/// instead of refusing the request.
pub(crate) fn apply(
    shared: &Shared,
    txn: &mut Txn,
    who: &str,
    ndn: &NormDn,
    mods: Vec<Mod>,
    assertion: Option<&Assertion>,
    permissive: bool,
) -> LdapResult<Applied> {
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
    let mut attrs = e.to_attrs();
    for m in mods {
        let ctx = context(m.op);
        let pos = attrs
            .iter()
            .position(|a| a.ty == m.ty && *a.options == *m.options);
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
                            if !set.insert(val, norm) && !permissive {
                                return Err(LdapError::new(
                                    ResultCode::AttributeOrValueExists,
                                    format!("{ctx}{}: value #{i} already exists", m.name),
                                ));
                            }
                        }
                        (a.values, a.norm) = set.into_parts();
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
    check_entry(shared, &attrs)?;
    stamp_modified(shared, &mut attrs, who, txn.now());
    txn.replace_attrs(id, attrs)?;
    Ok(Applied {
        before: Some(before),
        after: txn.version().get(id).cloned(),
        ..Default::default()
    })
}

/// Checks the request and hands it to the writer. The read loop awaits this, so writes still
/// reach the writer in arrival order.
pub(crate) async fn handle(mut op: Op, req: &ModifyRequest<'_>) -> Next {
    // A schema change applies no entry: its record is the request's.
    let audit = if super::subschema::targets(op.shared(), &req.dn) {
        op.audit(&req.dn, || crate::audit::modify_change(op.shared(), req))
            .map_or(crate::op::Audit::Off, crate::op::Audit::Record)
    } else {
        op.audit_applied()
    };
    let assertion = crate::ops::take_assertion(&mut op);
    let early = early_checks(&op);
    let permissive = op.controls.permissive_modify;
    let change = match op.may_write() {
        Ok(()) => {
            let (sh, want) = (op.shared().clone(), op.controls.ppolicy);
            match crate::ppolicy::check_modify(&sh, &op.who, req, want, &mut op.response).await {
                Ok(pw) => submit(&sh, &op.who, req, assertion, early, permissive, pw).await,
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    };
    route_write(op, tags::MODIFY_RESPONSE, change, audit).await;
    Next::Continue
}

async fn submit(
    shared: &Arc<Shared>,
    who: &Arc<Identity>,
    req: &ModifyRequest<'_>,
    assertion: Option<Assertion>,
    early: bool,
    permissive: bool,
    pw: crate::ppolicy::Checked,
) -> LdapResult<Change> {
    if super::subschema::targets(shared, &req.dn) {
        return super::subschema::modify(shared, who, req);
    }
    let (ndn, mut mods) = prepare(shared, req)?;
    pw.apply(shared, &mut mods);
    // Write access to every attribute the request changes.
    let needs: Vec<_> = mods.iter().map(|m| (Some(m.ty), Rights::WRITE)).collect();
    if early {
        authorize(
            shared,
            &shared.store.read(),
            who,
            &ndn,
            &needs,
            true,
            "write",
        )?;
    }
    let mods = hash_passwords_of(shared, mods).await?;
    let sh = shared.clone();
    let who = who.clone();
    Ok(Box::new(move |txn: &mut Txn| {
        // Checked again on the version the change applies to: the rules may depend on
        // entries (groups) that changed since.
        authorize(&sh, txn.version(), &who, &ndn, &needs, true, "write")?;
        apply(
            &sh,
            txn,
            &who.dn,
            &ndn,
            mods,
            assertion.as_ref(),
            permissive,
        )
    }))
}
