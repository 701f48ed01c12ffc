//! Compare (RFC 4511 §4.10): does the entry hold this value, by the attribute's equality rule?

use proto::{CompareRequest, ResultCode};

use crate::error::{LdapError, LdapResult};
use crate::state::{resolve_attr, Identity, Shared};

pub fn compare(shared: &Shared, who: &Identity, req: &CompareRequest<'_>) -> LdapResult<bool> {
    let schema = &*shared.schema;
    let (_, ndn) = shared.parse_dn(&req.dn)?;
    let (ty, _) = resolve_attr(schema, &req.attr)?;
    let v = shared.store.read();
    let e = v
        .lookup(&ndn)
        .ok_or_else(|| shared.no_such_object(&v, &ndn))?;
    if ty == shared.known.user_password && !who.is_admin {
        return Err(LdapError::new(
            ResultCode::InsufficientAccessRights,
            "no compare access to userPassword",
        ));
    }
    if schema.attr(ty).equality.is_none() {
        return Err(LdapError::new(
            ResultCode::InappropriateMatching,
            format!(
                "{}: attribute type has no equality matching rule",
                schema.attr(ty).name()
            ),
        ));
    }
    let norm = schema.normalize_eq(ty, &req.value).map_err(|_| {
        LdapError::new(
            ResultCode::InvalidAttributeSyntax,
            format!("{}: value invalid per syntax", schema.attr(ty).name()),
        )
    })?;
    let mut present = false;
    for a in e.attrs_of(schema, ty) {
        present = true;
        if a.find(&norm).is_some() {
            return Ok(true);
        }
    }
    if !present {
        return Err(LdapError::new(
            ResultCode::NoSuchAttribute,
            "attribute not present in entry",
        ));
    }
    Ok(false)
}
