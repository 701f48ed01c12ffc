//! Compare (RFC 4511 §4.10): does the entry hold this value, by the attribute's equality rule?

use proto::{tags, CompareRequest, ResultCode};

use crate::op::{Next, Op};
use dit::write::{check_assertion, Assertion};

use crate::state::Shared;
use dit::acl::Rights;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;
use dit::resolve_attr;

pub(crate) async fn handle(mut op: Op, req: &CompareRequest<'_>) -> Next {
    let assertion = op.take_assertion();
    let e = match compare(op.shared(), &op.who, req, assertion.as_ref()) {
        Ok(true) => LdapError::new(ResultCode::CompareTrue, ""),
        Ok(false) => LdapError::new(ResultCode::CompareFalse, ""),
        Err(e) => e,
    };
    op.finish(tags::COMPARE_RESPONSE, Err(&e), None).await;
    Next::Continue
}

fn compare(
    shared: &Shared,
    who: &Identity,
    req: &CompareRequest<'_>,
    assertion: Option<&Assertion>,
) -> LdapResult<bool> {
    let schema = &*shared.schema();
    let (_, ndn) = shared.parse_dn(&req.dn)?;
    let (ty, _) = resolve_attr(schema, &req.attr)?;
    let v = shared.store.read();
    let needs = [(Some(ty), Rights::COMPARE)];
    dit::write::authorize(shared, &v, who, &ndn, &needs, false, "compare")?;
    let e = v
        .lookup(&ndn)
        .ok_or_else(|| shared.no_such_object(&v, &ndn))?;
    check_assertion(assertion, shared, &v, e)?;
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
    // A dynamic group's member attribute holds the DNs its URLs find, as the requester.
    let mut present = false;
    if let Some(rule) = shared.dynlist.rule(schema, e) {
        if rule.member == Some(ty) {
            present = true;
            let view = shared.acl.view(schema, &v, who);
            let sees = |t: &store::Entry| view.reader(schema, t).is_none_or(|a| a.visible());
            let found = shared.dynlist.expand(shared, &v, rule, e, &sees);
            if found.iter().any(|f| {
                schema
                    .normalize_eq(ty, f.entry.dn_bytes())
                    .is_ok_and(|n| n == norm)
            }) {
                return Ok(true);
            }
        }
    }
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
