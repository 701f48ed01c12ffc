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
        P::Equality(a, v) => match attr(a) {
            Some(ty) => equality(schema, ty, v),
            None => Filter::Undefined,
        },
        // As slapd: phonetic for the string types, equality for the others.
        P::Approx(a, v) => match attr(a) {
            Some(ty) if schema.has_approx(ty) && !is_object_class(schema, ty) => {
                match schema.validate(ty, v) {
                    Ok(()) => Filter::Approx {
                        attr: ty,
                        assertion: schema::Approx::new(v),
                    },
                    Err(_) => Filter::Undefined,
                }
            }
            Some(ty) => equality(schema, ty, v),
            None => Filter::Undefined,
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
            Some(ty) if is_object_class(schema, ty) => Filter::True,
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
            // As slapd: a rule that is not for extensible matching (every substring rule), or
            // not usable with the asserted type (`matchingRuleUse`), makes the whole assertion
            // Undefined, for every entry, whether it holds the type or not.
            if let Some(r) = rule {
                let usable = schema.rule(r).kind != schema::RuleKind::Substring
                    && ty.is_none_or(|t| schema.rule_applies(r, t));
                if !usable {
                    return Filter::Undefined;
                }
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

/// `(attr=v)` on a type the requester may search.
fn equality(schema: &Schema, ty: AttrId, v: &[u8]) -> Filter {
    if is_object_class(schema, ty) {
        return object_class(schema, ty, v);
    }
    if schema.attr(ty).equality.is_none() {
        return Filter::Undefined;
    }
    match schema.normalize_eq(ty, v) {
        Ok(norm) => Filter::Equality { attr: ty, norm },
        Err(_) => Filter::Undefined,
    }
}

fn is_object_class(schema: &Schema, ty: AttrId) -> bool {
    schema.is_object_class(ty)
}

/// `(objectClass=C)`: an entry belongs to C's superclasses too (RFC 4512 §2.4.1), though only
/// the classes given are stored (as slapd stores them). The assertion is widened here, once
/// per search, to "any of C and its subclasses", each an equality on the stored values: the
/// equality index answers each, and nothing changes for any other filter or for storing.
/// (The other way, indexing every superclass of each entry at write time, would make every
/// entry's objectClass postings longer and still need this widening in evaluation.)
/// `top`, every class's superclass, is every entry, as `(objectClass=*)` is.
fn object_class(schema: &Schema, ty: AttrId, v: &[u8]) -> Filter {
    let Ok(norm) = schema.normalize_eq(ty, v) else {
        return Filter::Undefined;
    };
    let class = std::str::from_utf8(v)
        .ok()
        .and_then(|n| schema.class_by_name(n.trim()));
    let Some(class) = class else {
        return Filter::Equality { attr: ty, norm };
    };
    if schema.class(class).sup.is_empty() && schema.class(class).oid == "2.5.6.0" {
        return Filter::True;
    }
    match schema.subclasses(class) {
        [_] | [] => Filter::Equality { attr: ty, norm },
        subs => Filter::Or(
            subs.iter()
                .map(|c| Filter::Equality {
                    attr: ty,
                    norm: schema.class(*c).oid.as_bytes().to_vec(),
                })
                .collect(),
        ),
    }
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
