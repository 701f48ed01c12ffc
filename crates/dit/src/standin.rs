//! Entries that stand for something else: aliases (RFC 4512 §2.6, `alias` with
//! `aliasedObjectName`) and referral objects (RFC 3296, `referral` with `ref` URLs). Both are
//! found on the way to an operation's target and during a search's walk over its scope; this
//! module is the one place that decides, per entry, whether it stands in (`Dit::stand_in`),
//! follows an alias to the entry it names (`Dit::deref`, `Dit::find`), and writes the URLs a
//! referral answers with (`rewrite`), as slapd's `referral_rewrite` does:
//!
//! - a referral result (an operation at or below a referral object, or outside every naming
//!   context with the default referral): the URL's DN with the referral object's DN swapped
//!   for it in the target DN (the target DN itself when the URL has none), and the search's
//!   scope;
//! - a continuation reference (a referral object met by a one-level or subtree search): the
//!   URL's DN, or the referral object's DN when it has none, and scope `base` for a one-level
//!   search, `sub` for a subtree search.
//!
//! Nothing here runs for operations that do not ask: whether a version holds any alias or
//! referral at all is one lookup in the objectClass index (`Dit::holds`).

use std::sync::Arc;

use proto::ResultCode;
use schema::Dn;
use store::{Entry, Version};

use crate::error::{LdapError, LdapResult};
use crate::Dit;

/// The longest chain of aliases followed to find one entry (slapd's default
/// `be_max_deref_depth`): beyond it, aliasDereferencingProblem.
pub const MAX_DEREF_DEPTH: usize = 15;

/// What an entry stands for.
pub enum StandIn<'e> {
    /// An alias, with the normalized DN it names (`None`: it names none, or not a DN).
    Alias(Option<&'e str>),
    /// A referral object, with its `ref` URLs.
    Referral(Vec<&'e [u8]>),
}

/// Which kinds of stand-in an operation treats as such (the others are plain entries).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kinds {
    /// Aliases are followed (the search's derefAliases asks for it).
    pub alias: bool,
    /// Referral objects answer referral (no ManageDsaIT control).
    pub referral: bool,
}

impl Kinds {
    pub fn any(self) -> bool {
        self.alias || self.referral
    }
}

/// Why the entry an operation names was not found.
pub enum Miss {
    /// A referral object at or above it answers: the referral error, ready to send.
    Referred(LdapError),
    /// An alias could not be followed (aliasProblem, aliasDereferencingProblem).
    Alias(LdapError),
    /// No entry: `matched` is the nearest existing ancestor as the store holds it.
    Absent,
}

/// Where a referral's URLs point.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// A referral result for the request DN `dn`; `base` is the referral object's DN (`None`
    /// for the default referral), `scope` a search's scope.
    Result {
        base: Option<&'a str>,
        dn: &'a str,
        scope: Option<proto::Scope>,
    },
    /// A continuation reference for the referral object named `base`, met by a search of
    /// scope `scope`.
    Continuation { base: &'a str, scope: proto::Scope },
}

impl Dit {
    /// Whether version `v` may hold entries of these kinds (by the objectClass index; `true`
    /// when objectClass is not indexed). Narrows `kinds` to those it may hold.
    pub fn holds(&self, v: &Version, kinds: Kinds) -> Kinds {
        let k = &self.known;
        Kinds {
            alias: kinds.alias && v.may_hold_any(k.object_class, &k.alias_class),
            referral: kinds.referral && v.may_hold_any(k.object_class, &k.referral_class),
        }
    }

    /// What entry `e` stands for, among `kinds`.
    pub fn stand_in<'e>(&self, e: &'e Entry, kinds: Kinds) -> Option<StandIn<'e>> {
        let k = &self.known;
        if kinds.referral && e.has_value(k.object_class, &k.referral_class) {
            let urls = e
                .attr(k.ref_)
                .map(|a| a.values().collect())
                .unwrap_or_default();
            return Some(StandIn::Referral(urls));
        }
        if kinds.alias && e.has_value(k.object_class, &k.alias_class) {
            let target = e
                .attr(k.aliased_object_name)
                .and_then(|a| a.norm().next())
                .and_then(|n| std::str::from_utf8(n).ok());
            return Some(StandIn::Alias(target));
        }
        None
    }

    /// Follows alias `e` (and the aliases it names) to the entry that is not one.
    /// aliasProblem for a loop or a name that does not exist, aliasDereferencingProblem past
    /// `MAX_DEREF_DEPTH`; the matched DN is the last alias looked at, as slapd says.
    pub fn deref(&self, v: &Version, e: &Arc<Entry>) -> LdapResult<Arc<Entry>> {
        let kinds = Kinds {
            alias: true,
            referral: false,
        };
        let mut seen: Vec<store::EntryId> = Vec::new();
        let mut at = e.clone();
        loop {
            let Some(StandIn::Alias(target)) = self.stand_in(&at, kinds) else {
                return Ok(at);
            };
            let fail = |code, msg: &str| Err(LdapError::new(code, msg).with_matched(at.dn()));
            if seen.len() >= MAX_DEREF_DEPTH {
                return fail(
                    ResultCode::AliasDereferencingProblem,
                    "maximum deref depth exceeded",
                );
            }
            if seen.contains(&at.id) {
                return fail(ResultCode::AliasProblem, "circular alias");
            }
            seen.push(at.id);
            let Some(target) = target else {
                return fail(ResultCode::AliasProblem, "alias missing aliasedObjectName");
            };
            match v.lookup_norm(target) {
                Some(next) => at = next.clone(),
                None => return fail(ResultCode::AliasProblem, "aliasedObject not found"),
            }
        }
    }

    /// The entry normalized DN `norm` names for an operation treating `kinds` as stand-ins:
    /// aliases on the way to it followed (`kinds.alias`: a search dereferencing in finding
    /// its base), a referral object at it or at its nearest existing ancestor answering
    /// referral (`kinds.referral`) for the request DN `dn` (and a search's `scope`).
    pub fn find(
        &self,
        v: &Version,
        norm: &str,
        dn: &str,
        scope: Option<proto::Scope>,
        kinds: Kinds,
    ) -> Result<Arc<Entry>, Miss> {
        let refer = |e: &Entry, urls: &[&[u8]]| {
            let target = Target::Result {
                base: Some(e.dn()),
                dn,
                scope,
            };
            let urls: Vec<String> = urls.iter().filter_map(|u| rewrite(u, target)).collect();
            Miss::Referred(if urls.is_empty() {
                LdapError::new(ResultCode::Other, "bad referral object").with_matched(e.dn())
            } else {
                LdapError::referral(urls).with_matched(e.dn())
            })
        };
        let mut norm = std::borrow::Cow::Borrowed(norm);
        for _ in 0..=MAX_DEREF_DEPTH {
            if let Some(e) = v.lookup_norm(&norm) {
                let e = match self.stand_in(e, kinds) {
                    Some(StandIn::Alias(_)) => self.deref(v, e).map_err(Miss::Alias)?,
                    _ => e.clone(),
                };
                if let Some(StandIn::Referral(urls)) = self.stand_in(&e, kinds) {
                    return Err(refer(&e, &urls));
                }
                return Ok(e);
            }
            let Some(m) = v.matched_norm(&norm) else {
                return Err(Miss::Absent);
            };
            match self.stand_in(m, kinds) {
                Some(StandIn::Referral(urls)) => return Err(refer(m, &urls)),
                Some(StandIn::Alias(_)) => {
                    // An alias on the way: the rest of the name is looked for below the entry
                    // it names.
                    let t = self.deref(v, m).map_err(Miss::Alias)?;
                    let below = &norm[..norm.len() - m.ndn_str().len()];
                    norm = std::borrow::Cow::Owned(format!("{below}{}", t.ndn_str()));
                }
                None => return Err(Miss::Absent),
            }
        }
        Err(Miss::Alias(LdapError::new(
            ResultCode::AliasDereferencingProblem,
            "maximum deref depth exceeded",
        )))
    }
}

/// One URL of a referral rewritten for `target` (slapd's `referral_rewrite`). URLs of other
/// schemes than ldap, ldaps and ldapi go as they are; one that does not parse is dropped.
pub fn rewrite(url: &[u8], target: Target<'_>) -> Option<String> {
    let url = std::str::from_utf8(url).ok()?.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(url.to_string());
    };
    if !["ldap", "ldaps", "ldapi"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(scheme))
    {
        return Some(url.to_string());
    }
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (dn, extra) = path.split_once('?').unwrap_or((path, ""));
    let dn = percent_decode(dn)?;
    let mut parts: Vec<&str> = if extra.is_empty() {
        Vec::new()
    } else {
        extra.split('?').collect()
    };
    let (new_dn, scope) = match target {
        Target::Continuation { base, scope } => {
            let dn = if dn.is_empty() { base.to_string() } else { dn };
            let scope = match scope {
                proto::Scope::One => proto::Scope::Base,
                _ => proto::Scope::Subtree,
            };
            (dn, Some(scope))
        }
        Target::Result {
            base,
            dn: req,
            scope,
        } => {
            let dn = match base {
                Some(base) if !dn.is_empty() => swap_suffix(req, base, &dn),
                _ => req.to_string(),
            };
            (dn, scope)
        }
    };
    if let Some(scope) = scope {
        while parts.len() < 2 {
            parts.push("");
        }
        if parts[1].is_empty() {
            parts[1] = match scope {
                proto::Scope::Base => "base",
                proto::Scope::One => "one",
                proto::Scope::Subtree => "sub",
            };
        }
    }
    let mut out = format!("{scheme}://{host}/{}", percent_encode(&new_dn));
    for p in parts {
        out.push('?');
        out.push_str(p);
    }
    Some(out)
}

/// `req` with its ancestor `base` replaced by `to` (the RDNs of `req` below `base`, then
/// `to`); `to` when `req` does not parse or is not below `base`.
fn swap_suffix(req: &str, base: &str, to: &str) -> String {
    let (Ok(r), Ok(b)) = (Dn::parse(req), Dn::parse(base)) else {
        return to.to_string();
    };
    let Some(keep) = r.rdns.len().checked_sub(b.rdns.len()) else {
        return to.to_string();
    };
    if keep == 0 {
        return to.to_string();
    }
    let head = Dn {
        rdns: r.rdns[..keep].to_vec(),
    };
    format!("{head},{to}")
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Escapes what may not stand in the DN part of an LDAP URL (RFC 4516): `?`, `%`, spaces,
/// controls and bytes beyond ASCII.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if c.is_ascii_graphic() && c != b'?' && c != b'%' {
            out.push(char::from(c));
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_urls_swap_the_referral_objects_dn_for_the_urls() {
        let t = Target::Result {
            base: Some("ou=ref,ou=r,dc=example,dc=com"),
            dn: "cn=x,ou=ref,ou=r,dc=example,dc=com",
            scope: Some(proto::Scope::Subtree),
        };
        assert_eq!(
            rewrite(b"ldap://other.example:389/ou=elsewhere,dc=other", t).as_deref(),
            Some("ldap://other.example:389/cn=x,ou=elsewhere,dc=other??sub")
        );
        assert_eq!(
            rewrite(b"ldap://nodn.example:389/", t).as_deref(),
            Some("ldap://nodn.example:389/cn=x,ou=ref,ou=r,dc=example,dc=com??sub")
        );
        let modify = Target::Result {
            base: Some("ou=ref,ou=r,dc=example,dc=com"),
            dn: "ou=ref,ou=r,dc=example,dc=com",
            scope: None,
        };
        assert_eq!(
            rewrite(b"ldap://other.example:389/ou=elsewhere,dc=other", modify).as_deref(),
            Some("ldap://other.example:389/ou=elsewhere,dc=other")
        );
    }

    #[test]
    fn continuation_urls_keep_their_dn_or_take_the_entrys() {
        let one = Target::Continuation {
            base: "ou=refnodn,ou=r,dc=example,dc=com",
            scope: proto::Scope::One,
        };
        assert_eq!(
            rewrite(b"ldap://nodn.example:389/", one).as_deref(),
            Some("ldap://nodn.example:389/ou=refnodn,ou=r,dc=example,dc=com??base")
        );
        let sub = Target::Continuation {
            base: "ou=ref,ou=r,dc=example,dc=com",
            scope: proto::Scope::Subtree,
        };
        assert_eq!(
            rewrite(b"ldap://h/ou=a%20b,dc=x", sub).as_deref(),
            Some("ldap://h/ou=a%20b,dc=x??sub")
        );
        assert_eq!(
            rewrite(b"http://example.com/x", sub).as_deref(),
            Some("http://example.com/x")
        );
    }

    #[test]
    fn the_default_referral_takes_the_request_dn() {
        let t = Target::Result {
            base: None,
            dn: "dc=elsewhere",
            scope: Some(proto::Scope::One),
        };
        assert_eq!(
            rewrite(b"ldap://root.example/", t).as_deref(),
            Some("ldap://root.example/dc=elsewhere??one")
        );
    }
}
