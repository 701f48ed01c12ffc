//! Mapping an authentication identity to a directory entry, as slapd's `authz-regexp`: a TLS
//! client certificate's subject DN, or a local (`ldapi://`) client's
//! `gidNumber=G+uidNumber=U,cn=peercred,cn=external,cn=auth`. Each rule is a regular
//! expression matched against the whole identity (case-insensitively) and a replacement with
//! `$1`…`$9` (`${1}` before a letter or digit) for its groups: either a DN, or an LDAP URL `ldap:///BASE??SCOPE?FILTER` whose
//! search must find exactly one entry. The first rule that matches decides.

use std::sync::Arc;

use schema::NormDn;
use store::{Entry, Scope};

use crate::Dit;

/// One rule as configured (`[[authz_map]]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthzRuleSpec {
    /// A regular expression matched against the whole identity.
    pub pattern: String,
    /// A DN, or `ldap:///BASE??SCOPE?FILTER`, with `$1`…`$9`.
    pub replace: String,
}

/// The compiled rules.
#[derive(Debug, Default)]
pub struct AuthzMap {
    rules: Vec<(regex::Regex, String)>,
}

/// What the rules made of an identity.
#[derive(Debug, PartialEq, Eq)]
pub enum Mapped {
    /// No rule matched.
    Unmapped,
    /// A rule matched and named this entry (or the administrator).
    Dn(NormDn),
    /// A rule matched but its DN or search named no single entry; the reason.
    Nothing(String),
}

impl AuthzMap {
    /// Compiles the rules; an error names the rule (from 1) and what is wrong.
    pub fn compile(specs: &[AuthzRuleSpec]) -> Result<AuthzMap, String> {
        let mut rules = Vec::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            let re = regex::RegexBuilder::new(&format!("^(?:{})$", s.pattern))
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("authz_map rule {}: pattern: {e}", i + 1))?;
            if s.replace.is_empty() {
                return Err(format!("authz_map rule {}: replace is empty", i + 1));
            }
            if let Some(url) = s.replace.strip_prefix("ldap:///") {
                parse_url(url).map_err(|e| format!("authz_map rule {}: replace: {e}", i + 1))?;
            }
            rules.push((re, s.replace.clone()));
        }
        Ok(AuthzMap { rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Maps `identity` through the first matching rule, on the current version.
    pub fn map(&self, dit: &Dit, identity: &str) -> Mapped {
        for (re, replace) in &self.rules {
            let Some(caps) = re.captures(identity) else {
                continue;
            };
            let mut target = String::new();
            caps.expand(replace, &mut target);
            return match target.strip_prefix("ldap:///") {
                Some(url) => search_one(dit, url),
                None => match dit.parse_dn(target.as_bytes()) {
                    Ok((_, ndn)) => Mapped::Dn(ndn),
                    Err(e) => Mapped::Nothing(format!("'{target}': {}", e.message)),
                },
            };
        }
        Mapped::Unmapped
    }
}

/// `BASE??SCOPE?FILTER` (attributes ignored), percent-decoded.
fn parse_url(url: &str) -> Result<(String, Scope, String), String> {
    parse_url_attrs(url).map(|(base, _, scope, filter)| (base, scope, filter))
}

/// The part of an LDAP URL (RFC 4516) after `ldap:///`: `BASE?ATTRS?SCOPE?FILTER`,
/// percent-decoded; the scope is base and the filter `(objectClass=*)` when left out.
pub fn parse_url_attrs(url: &str) -> Result<(String, Vec<String>, Scope, String), String> {
    let mut parts = url.splitn(4, '?');
    let base = decode(parts.next().unwrap_or(""))?;
    let attrs = decode(parts.next().unwrap_or(""))?
        .split(',')
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect();
    let scope = match parts.next().unwrap_or("") {
        "" | "base" => Scope::Base,
        "one" => Scope::One,
        "sub" => Scope::Subtree,
        other => return Err(format!("unknown scope '{other}' (base, one or sub)")),
    };
    let filter = match parts.next() {
        None | Some("") => "(objectClass=*)".to_string(),
        Some(f) => decode(f)?,
    };
    Ok((base, attrs, scope, filter))
}

fn decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape in '{s}'"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("'{s}' is not UTF-8"))
}

/// The one entry a mapping search finds.
fn search_one(dit: &Dit, url: &str) -> Mapped {
    let (base, scope, filter) = match parse_url(url) {
        Ok(p) => p,
        Err(e) => return Mapped::Nothing(e),
    };
    let Ok((_, base_ndn)) = dit.parse_dn(base.as_bytes()) else {
        return Mapped::Nothing(format!("search base '{base}' is not a DN"));
    };
    let Ok(pf) = proto::Filter::parse(&filter) else {
        return Mapped::Nothing(format!("search filter '{filter}' is not a filter"));
    };
    let v = dit.store.read();
    let schema = v.schema().clone();
    let f = crate::filter::compile(&schema, &mut |_| true, &pf);
    let Some(base) = v.lookup(&base_ndn) else {
        return Mapped::Nothing(format!("search base '{base}' does not exist"));
    };
    let mut found: Vec<Arc<Entry>> = Vec::new();
    v.search(
        &schema,
        base,
        scope,
        &f,
        |e| {
            found.push(e.clone());
            if found.len() > 1 {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        },
        || std::ops::ControlFlow::Continue(()),
    );
    match found.as_slice() {
        [e] => Mapped::Dn(e.ndn(&schema)),
        [] => Mapped::Nothing(format!("the search '{filter}' found no entry")),
        _ => Mapped::Nothing(format!("the search '{filter}' found more than one entry")),
    }
}
