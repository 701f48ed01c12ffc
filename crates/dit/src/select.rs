//! Attribute selection (RFC 4511 §4.5.1.8): which attributes, with which options, and —
//! with a matched values filter (RFC 3876) — which of their values a search or a read entry
//! control returns.

use std::borrow::Cow;

use schema::{AttrId, Schema};
use store::Filter;

/// Which attributes a search returns (RFC 4511 §4.5.1.8).
pub struct Selection {
    /// Attribute names only, no values.
    pub types_only: bool,
    pub all_user: bool,
    pub all_operational: bool,
    /// Named types with the options asked for (`;opt` each, lower case, as
    /// `filter::split_description` gives them).
    pub named: Vec<(AttrId, String)>,
    /// A matched values filter (RFC 3876, `filter::compile_values`): only the values some item
    /// matches are returned, and attributes left with none are left out (as slapd).
    pub values: Option<Vec<Filter>>,
}

impl Selection {
    pub fn parse(schema: &Schema, attrs: &[Cow<'_, [u8]>], types_only: bool) -> Selection {
        let mut s = Selection {
            types_only,
            all_user: attrs.is_empty(),
            all_operational: false,
            named: Vec::new(),
            values: None,
        };
        for a in attrs {
            match &**a {
                b"*" => s.all_user = true,
                b"+" => s.all_operational = true,
                b"1.1" => {}
                raw => {
                    if let Ok(name) = std::str::from_utf8(raw) {
                        let (name, options) = crate::filter::split_description(name);
                        if let Some(id) = schema.attr_by_name(name) {
                            s.named.push((id, options));
                        }
                    }
                }
            }
        }
        s
    }

    /// Whether a value of an attribute of type `ty` is returned: every value, or with a
    /// matched values filter those some item of it matches.
    pub fn keeps(&self, schema: &Schema, ty: AttrId, value: &[u8]) -> bool {
        match &self.values {
            None => true,
            Some(items) => items.iter().any(|f| f.matches_value(schema, ty, value)),
        }
    }

    pub fn wants(&self, schema: &Schema, ty: AttrId) -> bool {
        self.wants_with(schema, ty, "")
    }

    /// Whether the selection asks for an attribute of type `ty` with the options `options`
    /// (RFC 4512 §2.5: a description with options names the attributes that have at least
    /// those options, so `cn;lang-en` does not name a plain `cn`).
    pub fn wants_with(&self, schema: &Schema, ty: AttrId, options: &str) -> bool {
        let all = if schema.attr(ty).is_operational() {
            self.all_operational
        } else {
            self.all_user
        };
        let has = |want: &str| {
            options
                .split(';')
                .any(|o| !o.is_empty() && o.eq_ignore_ascii_case(want))
        };
        all || self.named.iter().any(|(n, wanted)| {
            schema.is_subtype(ty, *n) && wanted.split(';').filter(|w| !w.is_empty()).all(has)
        })
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]
mod tests {
    use super::*;

    fn sel(schema: &Schema, attrs: &[&str]) -> Selection {
        let attrs: Vec<Cow<'_, [u8]>> = attrs.iter().map(|a| Cow::from(a.as_bytes())).collect();
        Selection::parse(schema, &attrs, false)
    }

    #[test]
    fn names_options_and_the_special_selectors() {
        let schema = Schema::builtin();
        let ty = |n: &str| schema.attr_by_name(n).unwrap();
        let none = sel(&schema, &[]);
        assert!(none.wants(&schema, ty("cn")) && !none.wants(&schema, ty("entryUUID")));
        let plus = sel(&schema, &["+"]);
        assert!(!plus.wants(&schema, ty("cn")) && plus.wants(&schema, ty("entryUUID")));
        assert!(!sel(&schema, &["1.1"]).wants(&schema, ty("cn")));
        // `name` selects its subtypes; `cn;lang-en` only attributes carrying that option.
        assert!(sel(&schema, &["name"]).wants(&schema, ty("cn")));
        let lang = sel(&schema, &["cn;lang-en"]);
        assert!(!lang.wants(&schema, ty("cn")));
        assert!(lang.wants_with(&schema, ty("cn"), ";lang-en"));
        assert!(sel(&schema, &["CN"]).wants_with(&schema, ty("cn"), ";lang-en"));
    }
}
