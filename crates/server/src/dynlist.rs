//! Dynamic groups and lists, as slapd's dynlist overlay (`[[dynlist]]`, docs/configuration.md
//! "Dynamic groups"). An entry of a configured object class is expanded when it is read: the
//! LDAP URLs in its URL attribute (`ldap:///BASE?ATTRS?SCOPE?FILTER`) are searched on the
//! version being read, as the requester (only the entries the requester sees), and
//!
//! - with a member attribute (a dynamic group): the DNs found are values of it — on read (by
//!   name and with `*`), in compare, and in `(member=DN)` filters on the group (`rewrite`); and
//!   with a memberOf attribute, each entry found names its dynamic groups in it, when that
//!   attribute is asked for by name (as slapd 2.6);
//! - without (a dynamic list): the attributes the URL names (all user attributes when it names
//!   none) of the entries found are added to the entry as it is returned (the requester must
//!   be able to read them there).
//!
//! Nothing is stored: a read of a group costs a search per URL, at most `dynlist_max_entries`
//! entries each. No recursion: an entry found that is itself a group is not expanded.

use std::collections::HashSet;
use std::sync::Arc;

use schema::{AttrId, ClassId, Schema};
use store::{Entry, Filter, Scope, Version};

pub use crate::config::DynlistSpec;

/// One rule, resolved against the schema.
pub(crate) struct Rule {
    class: ClassId,
    class_name: String,
    url: AttrId,
    pub(crate) member: Option<AttrId>,
    pub(crate) member_of: Option<AttrId>,
}

/// The configured rules.
pub struct Dynlist {
    rules: Vec<Rule>,
    object_class: AttrId,
    entry_uuid: Option<AttrId>,
    max: usize,
}

/// One entry a URL found, with the attributes it contributes (dynamic lists: `None` = all
/// user attributes).
pub(crate) struct Found<'v> {
    pub(crate) entry: &'v Arc<Entry>,
    pub(crate) attrs: Option<Arc<[AttrId]>>,
}

impl Dynlist {
    /// Resolves `specs` against `schema`; the message names the table and field at fault.
    pub fn new(specs: &[DynlistSpec], schema: &Schema, max: usize) -> Result<Dynlist, String> {
        let attr = |i: usize, field: &str, name: &str| {
            schema.attr_by_name(name).ok_or_else(|| {
                format!("dynlist[{i}].{field}: attribute type '{name}' is not in the schema")
            })
        };
        let mut rules = Vec::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            let class = schema.class_by_name(&s.object_class).ok_or_else(|| {
                format!(
                    "dynlist[{i}].object_class: object class '{}' is not in the schema \
                     (groupOfURLs is in the dyngroup bundle: schemas = [\"dyngroup\"])",
                    s.object_class
                )
            })?;
            rules.push(Rule {
                class,
                class_name: schema
                    .class(class)
                    .names
                    .first()
                    .cloned()
                    .unwrap_or_default(),
                url: attr(i, "url_attribute", &s.url_attribute)?,
                member: match &s.member_attribute {
                    Some(m) => Some(attr(i, "member_attribute", m)?),
                    None => None,
                },
                member_of: match &s.member_of_attribute {
                    Some(m) => Some(attr(i, "member_of_attribute", m)?),
                    None => None,
                },
            });
        }
        Ok(Dynlist {
            rules,
            object_class: schema
                .attr_by_name("objectClass")
                .ok_or("the schema has no objectClass")?,
            entry_uuid: schema.attr_by_name("entryUUID"),
            max,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether any rule has a memberOf attribute.
    pub(crate) fn member_of_types(&self) -> impl Iterator<Item = AttrId> + '_ {
        self.rules.iter().filter_map(|r| r.member_of)
    }

    /// The rule entry `e` is expanded by: the first whose class (or a subclass) it has.
    pub(crate) fn rule(&self, schema: &Schema, e: &Entry) -> Option<&Rule> {
        if self.rules.is_empty() {
            return None;
        }
        let classes = e.attr(self.object_class)?;
        self.rules.iter().find(|r| {
            let subs = schema.subclasses(r.class);
            classes.values().any(|v| {
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|n| schema.class_by_name(n))
                    .is_some_and(|c| subs.contains(&c))
            })
        })
    }

    /// The entries the URLs of group `g` find on `v` that `sees` lets through, each once, at
    /// most `dynlist_max_entries` per URL.
    pub(crate) fn expand<'v>(
        &self,
        shared: &crate::state::Shared,
        v: &'v Version,
        rule: &Rule,
        g: &Entry,
        sees: &dyn Fn(&Entry) -> bool,
    ) -> Vec<Found<'v>> {
        let schema = v.schema();
        let mut out: Vec<Found<'v>> = Vec::new();
        let mut seen = HashSet::new();
        let Some(urls) = g.attr(rule.url) else {
            return out;
        };
        for url in urls.values() {
            let Some((base, attrs, scope, filter)) = parse(url) else {
                tracing::debug!(
                    "dynlist: {}: '{}' is not an ldap:/// URL",
                    String::from_utf8_lossy(g.dn_bytes()),
                    String::from_utf8_lossy(url)
                );
                continue;
            };
            let Ok((_, ndn)) = shared.parse_dn(base.as_bytes()) else {
                continue;
            };
            let Some(base) = v.lookup(&ndn) else {
                continue;
            };
            let Ok(pf) = proto::Filter::parse(&filter) else {
                continue;
            };
            let f = dit::filter::compile(schema, &mut |_| true, &pf);
            let attrs: Option<Arc<[AttrId]>> = (!attrs.is_empty()).then(|| {
                attrs
                    .iter()
                    .filter_map(|a| schema.attr_by_name(a))
                    .collect::<Vec<_>>()
                    .into()
            });
            let mut n = 0;
            let mut ids = Vec::new();
            v.search(
                schema,
                base,
                scope,
                &f,
                |e| {
                    if n >= self.max {
                        tracing::warn!(
                            "dynlist: {}: a URL finds more than {} entries \
                             (dynlist_max_entries); the rest is left out",
                            String::from_utf8_lossy(g.dn_bytes()),
                            self.max
                        );
                        return std::ops::ControlFlow::Break(());
                    }
                    if sees(e) && seen.insert(e.id) {
                        n += 1;
                        ids.push(e.id);
                    }
                    std::ops::ControlFlow::Continue(())
                },
                || std::ops::ControlFlow::Continue(()),
            );
            out.extend(
                ids.into_iter()
                    .filter_map(|id| v.get(id))
                    .map(|entry| Found {
                        entry,
                        attrs: attrs.clone(),
                    }),
            );
        }
        out
    }

    /// The groups of every rule with a member attribute, found through the objectClass index
    /// when there is one.
    fn groups<'v>(&self, v: &'v Version, rule: &Rule) -> Vec<&'v Arc<Entry>> {
        let schema = v.schema();
        let pf = proto::Filter::Equality(
            b"objectClass".as_slice().into(),
            rule.class_name.as_bytes().into(),
        );
        let f = dit::filter::compile(schema, &mut |_| true, &pf);
        let matches = |e: &Entry| matches!(f.eval(schema, e), store::Tri::True);
        match v.candidates(schema, &f) {
            Some(ids) => ids
                .iter()
                .filter_map(|id| v.get(id))
                .filter(|e| matches(e))
                .collect(),
            None => v.iter().filter(|e| matches(e)).collect(),
        }
    }

    /// The DNs of the dynamic groups (rules with `member_of` = `ty`) entry `e` is a member of,
    /// as the requester (`sees`) finds them.
    pub(crate) fn groups_of(
        &self,
        shared: &crate::state::Shared,
        v: &Version,
        ty: AttrId,
        e: &Entry,
        sees: &dyn Fn(&Entry) -> bool,
    ) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for rule in self.rules.iter().filter(|r| r.member_of == Some(ty)) {
            for g in self.groups(v, rule) {
                if !sees(g) {
                    continue;
                }
                if self
                    .expand(shared, v, rule, g, sees)
                    .iter()
                    .any(|f| f.entry.id == e.id)
                {
                    out.push(g.dn_bytes().to_vec());
                }
            }
        }
        out
    }

    /// `f` with every equality on a dynamic group's member attribute widened to the groups
    /// whose expansion (as the requester, `sees`) holds that DN: `(member=X)` becomes
    /// `(|(member=X)(&(objectClass=G)(|(entryUUID=g1)…)))`, which the indexes still plan.
    pub(crate) fn rewrite(
        &self,
        shared: &crate::state::Shared,
        v: &Version,
        f: Filter,
        sees: &dyn Fn(&Entry) -> bool,
    ) -> Filter {
        if !self.rules.iter().any(|r| r.member.is_some()) {
            return f;
        }
        self.widen(shared, v, f, sees)
    }

    fn widen(
        &self,
        shared: &crate::state::Shared,
        v: &Version,
        f: Filter,
        sees: &dyn Fn(&Entry) -> bool,
    ) -> Filter {
        let schema = v.schema();
        match f {
            Filter::And(fs) => Filter::And(
                fs.into_iter()
                    .map(|f| self.widen(shared, v, f, sees))
                    .collect(),
            ),
            Filter::Or(fs) => Filter::Or(
                fs.into_iter()
                    .map(|f| self.widen(shared, v, f, sees))
                    .collect(),
            ),
            Filter::Not(f) => Filter::Not(Box::new(self.widen(shared, v, *f, sees))),
            Filter::Equality { attr, norm } => {
                let mut alts = Vec::new();
                for rule in self.rules.iter().filter(|r| r.member == Some(attr)) {
                    let mut uuids = Vec::new();
                    for g in self.groups(v, rule) {
                        let holds = self.expand(shared, v, rule, g, sees).iter().any(|m| {
                            schema
                                .normalize_eq(attr, m.entry.dn_bytes())
                                .is_ok_and(|n| n == norm)
                        });
                        let uuid = self
                            .entry_uuid
                            .and_then(|u| g.attr(u))
                            .and_then(|a| a.norm().next().map(<[u8]>::to_vec));
                        if let (true, Some(uuid), Some(u)) = (holds, uuid, self.entry_uuid) {
                            uuids.push(Filter::Equality {
                                attr: u,
                                norm: uuid,
                            });
                        }
                    }
                    if !uuids.is_empty() {
                        let class = proto::Filter::Equality(
                            b"objectClass".as_slice().into(),
                            rule.class_name.as_bytes().into(),
                        );
                        alts.push(Filter::And(vec![
                            dit::filter::compile(schema, &mut |_| true, &class),
                            Filter::Or(uuids),
                        ]));
                    }
                }
                let f = Filter::Equality { attr, norm };
                if alts.is_empty() {
                    f
                } else {
                    alts.insert(0, f);
                    Filter::Or(alts)
                }
            }
            other => other,
        }
    }
}

/// `ldap:///BASE?ATTRS?SCOPE?FILTER` (no host: this server), as slapd's dynlist takes it.
fn parse(url: &[u8]) -> Option<(String, Vec<String>, Scope, String)> {
    let s = std::str::from_utf8(url).ok()?;
    let rest = s
        .get(..8)
        .filter(|p| p.eq_ignore_ascii_case("ldap:///"))
        .map(|_| &s[8..])?;
    dit::authz::parse_url_attrs(rest).ok()
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let (base, attrs, scope, filter) =
            parse(b"ldap:///ou=people,dc=example,dc=com??sub?(objectClass=person)").unwrap();
        assert_eq!(base, "ou=people,dc=example,dc=com");
        assert!(attrs.is_empty());
        assert_eq!(scope, Scope::Subtree);
        assert_eq!(filter, "(objectClass=person)");
        let (_, attrs, scope, filter) = parse(b"LDAP:///dc=example,dc=com?mail,cn").unwrap();
        assert_eq!(attrs, ["mail", "cn"]);
        assert_eq!(scope, Scope::Base);
        assert_eq!(filter, "(objectClass=*)");
        assert!(parse(b"ldap://elsewhere/dc=example,dc=com").is_none());
    }
}
