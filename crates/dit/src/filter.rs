//! Filter compilation: a filter from the wire, resolved against the schema into the store's
//! evaluable form (`store::Filter`), with the attributes a requester may not search made
//! Undefined. Used by searches, the assertion control and access rules' filters.

use schema::{AttrId, Schema};
use store::Filter;

/// Compiles a wire filter against the schema (see `store::filter` for the Undefined rules).
/// An assertion on an attribute `allowed` refuses (one the requester may not search) is
/// Undefined, so results cannot be used to learn its values. (An extensible match over all
/// attributes is checked per entry: see `searchable_here`.)
pub fn compile(
    schema: &Schema,
    allowed: &mut dyn FnMut(AttrId) -> bool,
    f: &proto::Filter<'_>,
) -> Filter {
    use proto::Filter as P;
    let mut attr = |raw: &[u8]| -> Option<AttrId> {
        let s = std::str::from_utf8(raw).ok()?;
        let (name, _) = split_description(s);
        let id = schema.attr_by_name(name)?;
        allowed(id).then_some(id)
    };
    match f {
        P::And(v) if v.is_empty() => Filter::True,
        P::Or(v) if v.is_empty() => Filter::False,
        P::And(v) => Filter::And(v.iter().map(|f| compile(schema, allowed, f)).collect()),
        P::Or(v) => Filter::Or(v.iter().map(|f| compile(schema, allowed, f)).collect()),
        P::Not(f) => Filter::Not(Box::new(compile(schema, allowed, f))),
        P::Equality(a, v) | P::Approx(a, v) => match attr(a) {
            Some(ty) if schema.attr(ty).equality.is_some() => match schema.normalize_eq(ty, v) {
                Ok(norm) => Filter::Equality { attr: ty, norm },
                Err(_) => Filter::Undefined,
            },
            _ => Filter::Undefined,
        },
        P::Substrings {
            attr: a,
            initial,
            any,
            final_,
        } => match attr(a) {
            Some(ty) if schema.attr(ty).substr.is_some() => Filter::Substrings {
                attr: ty,
                initial: initial.as_ref().map(|c| c.to_vec()),
                any: any.iter().map(|c| c.to_vec()).collect(),
                final_: final_.as_ref().map(|c| c.to_vec()),
            },
            _ => Filter::Undefined,
        },
        P::GreaterOrEqual(a, v) => match attr(a) {
            Some(ty) if schema.attr(ty).ordering.is_some() => Filter::GreaterOrEqual {
                attr: ty,
                value: v.to_vec(),
            },
            _ => Filter::Undefined,
        },
        P::LessOrEqual(a, v) => match attr(a) {
            Some(ty) if schema.attr(ty).ordering.is_some() => Filter::LessOrEqual {
                attr: ty,
                value: v.to_vec(),
            },
            _ => Filter::Undefined,
        },
        P::Present(a) => match attr(a) {
            Some(ty)
                if schema
                    .attr(ty)
                    .names
                    .iter()
                    .any(|n| n.eq_ignore_ascii_case("objectClass")) =>
            {
                Filter::True
            }
            Some(ty) => Filter::Present(ty),
            None => Filter::Undefined,
        },
        P::Extensible {
            rule,
            attr: a,
            value,
            dn_attributes,
        } => {
            let rule = match rule {
                Some(r) => match std::str::from_utf8(r)
                    .ok()
                    .and_then(|r| schema.rule_by_name(r))
                {
                    Some(r) => Some(r),
                    None => return Filter::Undefined,
                },
                None => None,
            };
            let ty = match a {
                Some(a) => match attr(a) {
                    Some(t) => Some(t),
                    None => return Filter::Undefined,
                },
                None => None,
            };
            if rule.is_none() && ty.is_none() {
                return Filter::Undefined;
            }
            Filter::Extensible {
                rule,
                attr: ty,
                value: value.to_vec(),
                dn: *dn_attributes,
            }
        }
    }
}

/// Compiles a matched values filter (RFC 3876) into one store filter per item, each applied
/// to single values with `Filter::matches_value`. As slapd: an item that is not a simple one
/// (`None`), names an undefined type, or is an approximate match (no attribute type Linden
/// knows has an approximate matching rule) matches no value.
pub fn compile_values(schema: &Schema, items: &[Option<proto::Filter<'_>>]) -> Vec<Filter> {
    items
        .iter()
        .map(|item| match item {
            None | Some(proto::Filter::Approx(..)) => Filter::Undefined,
            // Not `compile`'s shortcut of `(objectClass=*)` to True: here it selects values.
            Some(proto::Filter::Present(a)) => std::str::from_utf8(a)
                .ok()
                .and_then(|a| schema.attr_by_name(split_description(a).0))
                .map_or(Filter::Undefined, Filter::Present),
            Some(f) => compile(schema, &mut |_| true, f),
        })
        .collect()
}

/// Splits an attribute description `name;opt1;opt2` into the type and its options, lower-cased
/// and sorted (RFC 4512 §2.5: options are case-insensitive and unordered).
pub fn split_description(desc: &str) -> (&str, String) {
    let mut parts = desc.split(';');
    let name = parts.next().unwrap_or("");
    let mut opts: Vec<String> = parts
        .filter(|p| !p.is_empty())
        .map(|p| p.to_ascii_lowercase())
        .collect();
    opts.sort();
    opts.dedup();
    let options = opts.iter().map(|o| format!(";{o}")).collect::<String>();
    (name, options)
}
