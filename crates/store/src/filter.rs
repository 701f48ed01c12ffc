//! Search filters resolved against the schema, and their evaluation.
//!
//! The server compiles a wire filter into this form once per search: attribute names become
//! `AttrId`s, equality assertion values are normalized once, and anything that can never be
//! True (unknown attribute, value invalid for the syntax, no matching rule) becomes `Undefined`,
//! as RFC 4511 §4.5.1.7 asks, so `(!(unknownAttr=x))` matches nothing.

use std::cmp::Ordering;

use schema::{AttrId, RuleId, RuleKind, Schema};

use crate::entry::Entry;

/// Three-valued logic of RFC 4511 §4.5.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tri {
    True,
    False,
    Undefined,
}

impl Tri {
    fn from_bool(b: bool) -> Tri {
        if b {
            Tri::True
        } else {
            Tri::False
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// `(&)`, and `(objectClass=*)`, which every entry satisfies.
    True,
    /// `(|)`.
    False,
    Undefined,
    And(Vec<Filter>),
    Or(Vec<Filter>),
    Not(Box<Filter>),
    /// Equality (and approximate match on types without a phonetic one): `norm` is the
    /// assertion normalized with the asserted type's equality rule.
    Equality {
        attr: AttrId,
        norm: Vec<u8>,
    },
    /// Approximate match that sounds words out (`schema::Approx`), over the values' equality
    /// normalized forms, as slapd compares them. Not indexed: every candidate is checked.
    Approx {
        attr: AttrId,
        assertion: schema::Approx,
    },
    Substrings {
        attr: AttrId,
        initial: Option<Vec<u8>>,
        any: Vec<Vec<u8>>,
        final_: Option<Vec<u8>>,
    },
    GreaterOrEqual {
        attr: AttrId,
        value: Vec<u8>,
    },
    LessOrEqual {
        attr: AttrId,
        value: Vec<u8>,
    },
    Present(AttrId),
    /// Extensible match. `attr: None` applies the rule to every attribute it can; `norm` is the
    /// assertion normalized with `rule` (for equality rules). `dn` also matches the DN's AVAs.
    Extensible {
        rule: Option<RuleId>,
        attr: Option<AttrId>,
        value: Vec<u8>,
        dn: bool,
    },
}

impl Filter {
    /// Evaluates the filter against an entry.
    pub fn eval(&self, schema: &Schema, e: &Entry) -> Tri {
        match self {
            Filter::True => Tri::True,
            Filter::False => Tri::False,
            Filter::Undefined => Tri::Undefined,
            Filter::And(fs) => {
                let mut r = Tri::True;
                for f in fs {
                    match f.eval(schema, e) {
                        Tri::False => return Tri::False,
                        Tri::Undefined => r = Tri::Undefined,
                        Tri::True => {}
                    }
                }
                r
            }
            Filter::Or(fs) => {
                let mut r = Tri::False;
                for f in fs {
                    match f.eval(schema, e) {
                        Tri::True => return Tri::True,
                        Tri::Undefined => r = Tri::Undefined,
                        Tri::False => {}
                    }
                }
                r
            }
            Filter::Not(f) => match f.eval(schema, e) {
                Tri::True => Tri::False,
                Tri::False => Tri::True,
                Tri::Undefined => Tri::Undefined,
            },
            Filter::Equality { attr, norm } => {
                Tri::from_bool(e.attrs_of(schema, *attr).any(|a| a.find(norm).is_some()))
            }
            Filter::Present(attr) => Tri::from_bool(e.attrs_of(schema, *attr).next().is_some()),
            Filter::Approx { attr, assertion } => Tri::from_bool(
                e.attrs_of(schema, *attr)
                    .any(|a| a.norm().any(|v| assertion.matches(v))),
            ),
            Filter::Substrings {
                attr,
                initial,
                any,
                final_,
            } => {
                let any: Vec<&[u8]> = any.iter().map(Vec::as_slice).collect();
                let mut r = Tri::False;
                for a in e.attrs_of(schema, *attr) {
                    for v in a.values() {
                        match schema.substrings_match(
                            a.ty,
                            v,
                            initial.as_deref(),
                            &any,
                            final_.as_deref(),
                        ) {
                            Some(true) => return Tri::True,
                            Some(false) => {}
                            None => r = Tri::Undefined,
                        }
                    }
                }
                r
            }
            Filter::GreaterOrEqual { attr, value } => {
                ordering(schema, e, *attr, value, |o| o != Ordering::Less)
            }
            Filter::LessOrEqual { attr, value } => {
                ordering(schema, e, *attr, value, |o| o != Ordering::Greater)
            }
            Filter::Extensible {
                rule,
                attr,
                value,
                dn,
            } => extensible(schema, e, *rule, *attr, value, *dn),
        }
    }
}

impl Filter {
    /// Whether one value `v` of an attribute of type `ty` matches a simple filter item, as a
    /// matched values filter (RFC 3876) applies it: the item's attribute must be `ty` or a
    /// supertype of it, and the value must satisfy the assertion. And, or, not, the absolute
    /// filters and Undefined match no value.
    pub fn matches_value(&self, schema: &Schema, ty: AttrId, v: &[u8]) -> bool {
        match self {
            Filter::Equality { attr, norm } => {
                schema.is_subtype(ty, *attr) && schema.normalize_eq(ty, v).is_ok_and(|n| n == *norm)
            }
            Filter::Present(attr) => schema.is_subtype(ty, *attr),
            Filter::Approx { attr, assertion } => {
                schema.is_subtype(ty, *attr)
                    && schema
                        .normalize_eq(ty, v)
                        .is_ok_and(|n| assertion.matches(&n))
            }
            Filter::Substrings {
                attr,
                initial,
                any,
                final_,
            } => {
                let any: Vec<&[u8]> = any.iter().map(Vec::as_slice).collect();
                schema.is_subtype(ty, *attr)
                    && schema.substrings_match(ty, v, initial.as_deref(), &any, final_.as_deref())
                        == Some(true)
            }
            Filter::GreaterOrEqual { attr, value } => {
                schema.is_subtype(ty, *attr)
                    && schema
                        .compare_ord(ty, v, value)
                        .is_some_and(|o| o != Ordering::Less)
            }
            Filter::LessOrEqual { attr, value } => {
                schema.is_subtype(ty, *attr)
                    && schema
                        .compare_ord(ty, v, value)
                        .is_some_and(|o| o != Ordering::Greater)
            }
            Filter::Extensible {
                rule, attr, value, ..
            } => {
                let applies = match attr {
                    Some(t) => schema.is_subtype(ty, *t),
                    None => !schema.attr(ty).is_operational(),
                };
                applies
                    && rule
                        .or(schema.attr(ty).equality)
                        .and_then(|r| rule_matches(schema, r, v, value))
                        == Some(true)
            }
            Filter::True
            | Filter::False
            | Filter::Undefined
            | Filter::And(_)
            | Filter::Or(_)
            | Filter::Not(_) => false,
        }
    }
}

fn ordering(
    schema: &Schema,
    e: &Entry,
    attr: AttrId,
    value: &[u8],
    ok: impl Fn(Ordering) -> bool,
) -> Tri {
    let mut r = Tri::False;
    for a in e.attrs_of(schema, attr) {
        for v in a.values() {
            match schema.compare_ord(a.ty, v, value) {
                Some(o) if ok(o) => return Tri::True,
                Some(_) => {}
                None => r = Tri::Undefined,
            }
        }
    }
    r
}

/// Applies a matching rule to one attribute value: equality rules compare normalized forms,
/// ordering rules hold when the value is less than the assertion (X.501 semantics).
fn rule_matches(schema: &Schema, rule: RuleId, v: &[u8], assertion: &[u8]) -> Option<bool> {
    match schema.rule(rule).kind {
        RuleKind::Equality => {
            let a = schema.normalize_with(rule, assertion).ok()?;
            let b = schema.normalize_with(rule, v).ok()?;
            Some(a == b)
        }
        RuleKind::Ordering => {
            let a = schema.normalize_with(rule, assertion).ok()?;
            let b = schema.normalize_with(rule, v).ok()?;
            Some(b < a)
        }
        RuleKind::Substring => None,
    }
}

fn extensible(
    schema: &Schema,
    e: &Entry,
    rule: Option<RuleId>,
    attr: Option<AttrId>,
    value: &[u8],
    dn: bool,
) -> Tri {
    let mut r = Tri::False;
    let mut check = |ty: AttrId, v: &[u8]| -> bool {
        let rule = match rule.or(schema.attr(ty).equality) {
            Some(rule) => rule,
            None => {
                r = Tri::Undefined;
                return false;
            }
        };
        match rule_matches(schema, rule, v, value) {
            Some(true) => true,
            Some(false) => false,
            None => {
                if attr.is_some() {
                    r = Tri::Undefined;
                }
                false
            }
        }
    };
    for a in e.attrs() {
        if let Some(t) = attr {
            if !schema.is_subtype(a.ty, t) {
                continue;
            }
        } else if schema.attr(a.ty).is_operational()
            // Over all attributes, the rule applies to those it is usable with (slapd).
            || rule.is_some_and(|r| !schema.rule_applies(r, a.ty))
        {
            continue;
        }
        for v in a.values() {
            if check(a.ty, v) {
                return Tri::True;
            }
        }
    }
    if dn {
        for rdn in &e.ndn(schema).rdns {
            for (ty, v) in rdn {
                if attr.is_some_and(|t| !schema.is_subtype(*ty, t))
                    || (attr.is_none() && rule.is_some_and(|r| !schema.rule_applies(r, *ty)))
                {
                    continue;
                }
                if check(*ty, v) {
                    return Tri::True;
                }
            }
        }
    }
    r
}
