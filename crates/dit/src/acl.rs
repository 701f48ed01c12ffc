//! Access control: rules from the configuration, compiled once at start, evaluated on every
//! operation (and every search result entry).
//!
//! Semantics (docs/access-control.md has the user's view):
//! - Rules are tried in order; the **first rule whose target matches** the entry and attribute
//!   decides, as in OpenLDAP's `access to` directives. Within it the first `by` clause whose
//!   subject matches the requester gives the rights; if none matches, access is denied (no
//!   fall-through to later rules). No rule matching at all also means denied.
//! - Rights are a set, not levels: `read` does not imply `search` or `compare`; `all` names all.
//! - The pseudo-attribute `entry` stands for the entry itself: reading it is what makes the
//!   entry visible at all; `add` and `delete` are checked on it.
//! - The administrator (`admin_dn`) is never subject to the rules.
//!
//! Cost: `View::new` resolves the subjects for one requester once per operation (including
//! group membership against the operation's store version), leaving per entry only the target
//! checks. When no rule has a DN or filter target (the default policy) even those are skipped.

use std::fmt;
use std::sync::Arc;

use schema::{AttrId, NormDn, Schema};
use store::{Entry, Filter, Tri, Version};

use crate::identity::Identity;

/// A set of access rights.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Rights(u8);

impl Rights {
    pub const NONE: Rights = Rights(0);
    /// Use the entry's userPassword to bind.
    pub const AUTH: Rights = Rights(1);
    pub const COMPARE: Rights = Rights(2);
    /// Use the attribute in a search filter (otherwise that assertion is Undefined).
    pub const SEARCH: Rights = Rights(4);
    pub const READ: Rights = Rights(8);
    pub const WRITE: Rights = Rights(16);
    pub const ADD: Rights = Rights(32);
    pub const DELETE: Rights = Rights(64);
    /// Act as the entry's identity with proxied authorization (RFC 4370), granted on the
    /// entry itself (the `entry` pseudo-attribute). Not part of `all`: acting as someone is
    /// more than any right over their entry, so it is only ever granted by name.
    pub const PROXY: Rights = Rights(128);
    pub const ALL: Rights = Rights(127);

    const NAMES: &'static [(&'static str, Rights)] = &[
        ("auth", Rights::AUTH),
        ("compare", Rights::COMPARE),
        ("search", Rights::SEARCH),
        ("read", Rights::READ),
        ("write", Rights::WRITE),
        ("add", Rights::ADD),
        ("delete", Rights::DELETE),
        ("proxy", Rights::PROXY),
        ("all", Rights::ALL),
        ("none", Rights::NONE),
    ];

    pub fn has(self, r: Rights) -> bool {
        self.0 & r.0 == r.0
    }

    pub fn parse(name: &str) -> Option<Rights> {
        Rights::NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, r)| *r)
    }
}

impl std::ops::BitOr for Rights {
    type Output = Rights;
    fn bitor(self, o: Rights) -> Rights {
        Rights(self.0 | o.0)
    }
}

impl fmt::Debug for Rights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Rights::NAMES[..8]
            .iter()
            .filter(|(_, r)| self.has(*r))
            .map(|(n, _)| *n)
            .collect();
        write!(f, "[{}]", names.join(","))
    }
}

/// One `by` clause as written: who, and what they may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClauseSpec {
    /// `*`, `anonymous`, `users`, `self`, `dn:<DN>`, `subtree:<DN>` or `group:<DN>`.
    pub who: String,
    pub rights: Vec<String>,
}

/// One access rule as written in the configuration file, before compilation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuleSpec {
    /// Base of the target; none means every entry.
    pub dn: Option<String>,
    /// `base`, `one`, `subtree` (default) or `children` (the subtree without its base).
    pub scope: Option<String>,
    /// An RFC 4515 filter the entry must match.
    pub filter: Option<String>,
    /// Attributes the rule covers (`entry` is the entry itself); none means all and the entry.
    pub attrs: Option<Vec<String>>,
    pub by: Vec<ClauseSpec>,
}

/// A rule that cannot be compiled: which rule, which field, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclError {
    /// Position in the rule list, from 0 (the `[[access]]` table's index in the file).
    pub rule: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "access[{}].{}: {}", self.rule, self.field, self.message)
    }
}

impl std::error::Error for AclError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DnScope {
    Base,
    One,
    Subtree,
    Children,
}

#[derive(Debug)]
enum Subject {
    Anyone,
    Anonymous,
    Users,
    SelfEntry,
    Dn(NormDn),
    Subtree(NormDn),
    Group(NormDn),
}

#[derive(Debug)]
struct Rule {
    dn: Option<(NormDn, DnScope)>,
    filter: Option<Filter>,
    /// `None`: every attribute and the entry.
    attrs: Option<Vec<AttrId>>,
    /// Whether `attrs` lists the `entry` pseudo-attribute.
    entry: bool,
    by: Vec<(Subject, Rights)>,
}

impl Rule {
    /// Whether the rule's DN and filter select `e`.
    fn selects(&self, schema: &Schema, e: &Entry) -> bool {
        if let Some((base, scope)) = &self.dn {
            let ok = match scope {
                DnScope::Base => e.ndn_str() == base.norm,
                DnScope::One => schema::norm_parent(e.ndn_str()) == Some(base.norm.as_str()),
                DnScope::Subtree => {
                    e.ndn_str() == base.norm || schema::norm_is_descendant(e.ndn_str(), &base.norm)
                }
                DnScope::Children => schema::norm_is_descendant(e.ndn_str(), &base.norm),
            };
            if !ok {
                return false;
            }
        }
        match &self.filter {
            Some(f) => f.eval(schema, e) == Tri::True,
            None => true,
        }
    }

    /// Whether the rule covers attribute `ty` (`None`: the entry itself).
    fn covers(&self, schema: &Schema, ty: Option<AttrId>) -> bool {
        match (&self.attrs, ty) {
            (None, _) => true,
            (Some(_), None) => self.entry,
            (Some(list), Some(ty)) => list.iter().any(|a| schema.is_subtype(ty, *a)),
        }
    }

    fn entry_independent(&self) -> bool {
        self.dn.is_none() && self.filter.is_none()
    }
}

/// The compiled rules.
#[derive(Debug)]
pub struct Acl {
    rules: Vec<Rule>,
    /// No rule has a DN or filter target: which rules select an entry never depends on it.
    uniform: bool,
    member: Option<AttrId>,
    unique_member: Option<AttrId>,
}

/// The policy used when the configuration has no `[[access]]` rule: anonymous may bind (and
/// read the root DSE and schema, which are outside the rules); users read and search
/// everything but userPassword; everyone may change their own password.
pub fn default_policy() -> Vec<RuleSpec> {
    let clause = |who: &str, rights: &[&str]| ClauseSpec {
        who: who.to_string(),
        rights: rights.iter().map(|r| r.to_string()).collect(),
    };
    vec![
        RuleSpec {
            attrs: Some(vec!["userPassword".to_string()]),
            by: vec![clause("self", &["write"]), clause("anonymous", &["auth"])],
            ..RuleSpec::default()
        },
        RuleSpec {
            by: vec![clause("users", &["read", "search", "compare"])],
            ..RuleSpec::default()
        },
    ]
}

/// Checks rules against the built-in schema, for configuration tools that want to report a
/// bad rule before starting a server.
pub fn check(specs: &[RuleSpec]) -> Result<(), AclError> {
    Acl::compile(&Schema::builtin(), specs).map(drop)
}

impl Acl {
    /// Compiles rules against the schema: DNs normalized, filters compiled, attributes resolved.
    pub fn compile(schema: &Schema, specs: &[RuleSpec]) -> Result<Acl, AclError> {
        let mut rules = Vec::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            let err = |field: &str, message: String| AclError {
                rule: i,
                field: field.to_string(),
                message,
            };
            let dn_of = |field: &str, raw: &str| -> Result<NormDn, AclError> {
                schema::Dn::parse(raw)
                    .map_err(|e| e.to_string())
                    .and_then(|d| d.normalize(schema).map_err(|e| e.to_string()))
                    .map_err(|e| err(field, format!("invalid DN '{raw}': {e}")))
            };
            let scope = match s.scope.as_deref() {
                None | Some("subtree") | Some("sub") => DnScope::Subtree,
                Some("base") => DnScope::Base,
                Some("one") | Some("onelevel") => DnScope::One,
                Some("children") => DnScope::Children,
                Some(other) => {
                    return Err(err(
                        "scope",
                        format!(
                            "invalid scope '{other}' (expected base, one, subtree or children)"
                        ),
                    ))
                }
            };
            if s.scope.is_some() && s.dn.is_none() {
                return Err(err("scope", "a scope needs a dn".into()));
            }
            let dn = match &s.dn {
                Some(raw) => Some((dn_of("dn", raw)?, scope)),
                None => None,
            };
            let filter = match &s.filter {
                Some(raw) => {
                    let f = proto::Filter::parse(raw)
                        .map_err(|e| err("filter", format!("invalid filter '{raw}': {e}")))?;
                    Some(crate::filter::compile(schema, &mut |_| true, &f))
                }
                None => None,
            };
            let (attrs, entry) = match &s.attrs {
                None => (None, true),
                Some(names) => {
                    if names.is_empty() {
                        return Err(err("attrs", "an empty list covers nothing".into()));
                    }
                    let mut ids = Vec::new();
                    let mut entry = false;
                    for n in names {
                        if n.eq_ignore_ascii_case("entry") {
                            entry = true;
                        } else {
                            match schema.attr_by_name(n) {
                                Some(id) => ids.push(id),
                                None => {
                                    return Err(err(
                                        "attrs",
                                        format!("unknown attribute type '{n}'"),
                                    ))
                                }
                            }
                        }
                    }
                    (Some(ids), entry)
                }
            };
            if s.by.is_empty() {
                return Err(err("by", "at least one clause is required".into()));
            }
            let mut by = Vec::with_capacity(s.by.len());
            for (j, c) in s.by.iter().enumerate() {
                let field = format!("by[{j}]");
                let who = c.who.trim();
                let (kind, arg) = match who.split_once(':') {
                    Some((k, a)) => (k.trim(), Some(a.trim())),
                    None => (who, None),
                };
                let subject = match (kind.to_ascii_lowercase().as_str(), arg) {
                    ("*" | "anyone", None) => Subject::Anyone,
                    ("anonymous", None) => Subject::Anonymous,
                    ("users", None) => Subject::Users,
                    ("self", None) => Subject::SelfEntry,
                    ("dn", Some(a)) => Subject::Dn(dn_of(&format!("{field}.who"), a)?),
                    ("subtree", Some(a)) => Subject::Subtree(dn_of(&format!("{field}.who"), a)?),
                    ("group", Some(a)) => Subject::Group(dn_of(&format!("{field}.who"), a)?),
                    _ => {
                        return Err(err(
                            &format!("{field}.who"),
                            format!("invalid subject '{who}' (expected *, anonymous, users, self, dn:<DN>, subtree:<DN> or group:<DN>)"),
                        ))
                    }
                };
                let mut rights = Rights::NONE;
                for r in &c.rights {
                    rights = rights
                        | Rights::parse(r.trim()).ok_or_else(|| {
                            err(
                                &format!("{field}.rights"),
                                format!("invalid right '{r}' (expected auth, compare, search, read, write, add, delete, proxy, all or none)"),
                            )
                        })?;
                }
                by.push((subject, rights));
            }
            rules.push(Rule {
                dn,
                filter,
                attrs,
                entry,
                by,
            });
        }
        Ok(Acl {
            uniform: rules.iter().all(Rule::entry_independent),
            rules,
            member: schema.attr_by_name("member"),
            unique_member: schema.attr_by_name("uniqueMember"),
        })
    }

    /// Resolves the subjects of every rule for `who`, against version `v` for groups. The
    /// view keeps these rules: a reload in the middle of an operation does not change them
    /// under it.
    pub fn view(self: &Arc<Self>, schema: &Schema, v: &Version, who: &Identity) -> View {
        if who.is_admin {
            return View {
                acl: self.clone(),
                admin: true,
                me: None,
                rights: Vec::new(),
            };
        }
        let me = who.ndn.as_ref();
        let rights = self
            .rules
            .iter()
            .map(|r| {
                // The clause that applies when the entry is the requester's own, and otherwise.
                let pick = |is_self: bool| {
                    r.by.iter()
                        .find(|(s, _)| self.subject_matches(schema, v, s, me, is_self))
                        .map(|(_, r)| *r)
                        .unwrap_or(Rights::NONE)
                };
                (pick(true), pick(false))
            })
            .collect();
        View {
            acl: self.clone(),
            admin: false,
            me: me.map(|n| n.norm.clone()),
            rights,
        }
    }

    fn subject_matches(
        &self,
        schema: &Schema,
        v: &Version,
        s: &Subject,
        me: Option<&NormDn>,
        is_self: bool,
    ) -> bool {
        match (s, me) {
            (Subject::Anyone, _) => true,
            (Subject::Anonymous, me) => me.is_none(),
            (_, None) => false,
            (Subject::Users, Some(_)) => true,
            (Subject::SelfEntry, Some(_)) => is_self,
            (Subject::Dn(d), Some(me)) => d == me,
            (Subject::Subtree(d), Some(me)) => d == me || me.is_descendant_of(d),
            (Subject::Group(g), Some(me)) => {
                let Some(group) = v.lookup(g) else {
                    return false;
                };
                [self.member, self.unique_member]
                    .into_iter()
                    .flatten()
                    .any(|ty| match schema.normalize_eq(ty, me.norm.as_bytes()) {
                        Ok(norm) => group.has_value(ty, &norm),
                        Err(_) => false,
                    })
            }
        }
    }
}

/// The rules in force: replaced whole by a reload (`replace`). Each operation's `View` holds
/// the rules it was made with.
pub struct AclCell(arc_swap::ArcSwap<Acl>);

impl AclCell {
    pub fn new(acl: Acl) -> AclCell {
        AclCell(arc_swap::ArcSwap::from_pointee(acl))
    }

    /// The rules as they apply to `who` (`Acl::view`) with the rules in force now.
    pub fn view(&self, schema: &Schema, v: &Version, who: &Identity) -> View {
        self.0.load_full().view(schema, v, who)
    }

    /// New rules for the operations that start from now on.
    pub fn replace(&self, acl: Acl) {
        self.0.store(Arc::new(acl));
    }
}

/// The rules as they apply to one requester during one operation.
#[derive(Debug)]
pub struct View {
    /// The rules the view was made from (`rights` is per rule of these).
    acl: Arc<Acl>,
    admin: bool,
    /// The requester's normalized DN (only the string: cloning a whole `NormDn` per operation
    /// would cost more than the rest of the evaluation).
    me: Option<String>,
    /// Per rule: rights when the entry is the requester's own entry, and otherwise.
    rights: Vec<(Rights, Rights)>,
}

/// Whether an attribute may be used in a filter, before looking at any entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Searchable {
    Always,
    Never,
    /// Depends on the entry: check each matching entry.
    Depends,
}

impl View {
    pub fn is_admin(&self) -> bool {
        self.admin
    }

    /// The requester's access to entry `e` as what reads it needs: `None` for the
    /// administrator, who sees every entry and reads every attribute (nothing to check).
    pub fn reader<'a>(&'a self, schema: &'a Schema, e: &Entry) -> Option<EntryAccess<'a>> {
        (!self.admin).then(|| self.entry(schema, e))
    }

    /// The requester's access to one entry.
    pub fn entry<'a>(&'a self, schema: &'a Schema, e: &Entry) -> EntryAccess<'a> {
        let acl: &'a Acl = &self.acl;
        let selected = if self.admin || acl.uniform {
            None
        } else {
            Some(
                acl.rules
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.selects(schema, e))
                    .map(|(i, _)| i)
                    .collect(),
            )
        };
        EntryAccess {
            view: self,
            acl,
            schema,
            is_self: self.me.as_deref() == Some(e.ndn_str()),
            selected,
        }
    }

    /// Shorthand: the rights on one attribute (`None`: the entry itself) of one entry.
    pub fn rights(&self, schema: &Schema, e: &Entry, ty: Option<AttrId>) -> Rights {
        self.entry(schema, e).rights(ty)
    }

    /// Whether `ty` may be used in filters on every entry, none, or some.
    pub fn searchable(&self, schema: &Schema, ty: AttrId) -> Searchable {
        if self.admin {
            return Searchable::Always;
        }
        let acl = &self.acl;
        let mut any = false;
        let mut all_so_far = true;
        for (r, (own, other)) in acl.rules.iter().zip(&self.rights) {
            if !r.covers(schema, Some(ty)) {
                continue;
            }
            let (a, b) = (own.has(Rights::SEARCH), other.has(Rights::SEARCH));
            any |= a || b;
            all_so_far &= a && b;
            if r.entry_independent() {
                // This rule decides for every entry no earlier rule selected.
                return if all_so_far {
                    Searchable::Always
                } else if any {
                    Searchable::Depends
                } else {
                    Searchable::Never
                };
            }
        }
        if any {
            Searchable::Depends
        } else {
            Searchable::Never
        }
    }
}

/// One requester's access to one entry.
pub struct EntryAccess<'a> {
    view: &'a View,
    acl: &'a Acl,
    schema: &'a Schema,
    is_self: bool,
    /// Indexes of the rules whose DN and filter select the entry; `None`: all of them.
    selected: Option<Vec<usize>>,
}

impl EntryAccess<'_> {
    /// The rights on attribute `ty`, or on the entry itself for `None`.
    pub fn rights(&self, ty: Option<AttrId>) -> Rights {
        if self.view.admin {
            return Rights::ALL;
        }
        let pick = |i: usize| {
            let (own, other) = self.view.rights[i];
            if self.is_self {
                own
            } else {
                other
            }
        };
        let covering = |i: &usize| self.acl.rules[*i].covers(self.schema, ty);
        let first = match &self.selected {
            None => (0..self.acl.rules.len()).find(covering),
            Some(list) => list.iter().copied().find(covering),
        };
        first.map(pick).unwrap_or(Rights::NONE)
    }

    /// The same requester's access to another entry.
    pub fn other(&self, other: &Entry) -> EntryAccess<'_> {
        self.view.entry(self.schema, other)
    }

    /// Whether the same requester can see another entry.
    pub fn sees(&self, other: &Entry) -> bool {
        self.view.entry(self.schema, other).visible()
    }

    /// Whether the entry exists for this requester (read on the entry itself).
    pub fn visible(&self) -> bool {
        self.rights(None).has(Rights::READ)
    }

    pub fn can(&self, ty: Option<AttrId>, r: Rights) -> bool {
        self.rights(ty).has(r)
    }
}

/// Copies `f` with every assertion on an attribute for which `hide` holds made Undefined.
/// Three-valued logic is monotone in this: an entry the full filter rejects is never accepted
/// by the masked copy, so masking only ever removes matches.
pub fn mask_filter(f: &Filter, hide: &dyn Fn(AttrId) -> bool) -> Filter {
    match f {
        Filter::And(v) => Filter::And(v.iter().map(|f| mask_filter(f, hide)).collect()),
        Filter::Or(v) => Filter::Or(v.iter().map(|f| mask_filter(f, hide)).collect()),
        Filter::Not(f) => Filter::Not(Box::new(mask_filter(f, hide))),
        Filter::Equality { attr, .. }
        | Filter::Substrings { attr, .. }
        | Filter::GreaterOrEqual { attr, .. }
        | Filter::LessOrEqual { attr, .. }
        | Filter::Present(attr)
            if hide(*attr) =>
        {
            Filter::Undefined
        }
        Filter::Extensible { attr: Some(a), .. } if hide(*a) => Filter::Undefined,
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(who: &str, rights: &[&str]) -> ClauseSpec {
        ClauseSpec {
            who: who.into(),
            rights: rights.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn errors_name_rule_and_field() {
        let schema = Schema::builtin();
        let bad = |s: RuleSpec| {
            Acl::compile(&schema, &[default_policy()[1].clone(), s])
                .unwrap_err()
                .to_string()
        };
        let e = bad(RuleSpec {
            dn: Some("not a dn".into()),
            by: vec![spec("*", &["read"])],
            ..Default::default()
        });
        assert!(e.starts_with("access[1].dn: invalid DN 'not a dn'"), "{e}");
        let e = bad(RuleSpec {
            filter: Some("(cn=x".into()),
            by: vec![spec("*", &["read"])],
            ..Default::default()
        });
        assert!(e.starts_with("access[1].filter: invalid filter"), "{e}");
        let e = bad(RuleSpec {
            by: vec![spec("*", &["read"]), spec("somebody", &["read"])],
            ..Default::default()
        });
        assert!(
            e.starts_with("access[1].by[1].who: invalid subject 'somebody'"),
            "{e}"
        );
        let e = bad(RuleSpec {
            by: vec![spec("*", &["reed"])],
            ..Default::default()
        });
        assert!(
            e.starts_with("access[1].by[0].rights: invalid right 'reed'"),
            "{e}"
        );
        let e = bad(RuleSpec {
            attrs: Some(vec!["noSuchAttr".into()]),
            by: vec![spec("*", &["read"])],
            ..Default::default()
        });
        assert_eq!(e, "access[1].attrs: unknown attribute type 'noSuchAttr'");
        let e = bad(RuleSpec {
            scope: Some("one".into()),
            by: vec![spec("*", &["read"])],
            ..Default::default()
        });
        assert_eq!(e, "access[1].scope: a scope needs a dn");
    }

    #[test]
    fn rights_are_a_set() {
        let r = Rights::parse("read").unwrap() | Rights::parse("SEARCH").unwrap();
        assert!(r.has(Rights::READ) && r.has(Rights::SEARCH) && !r.has(Rights::COMPARE));
        assert!(Rights::ALL.has(Rights::DELETE | Rights::AUTH));
        assert!(!Rights::ALL.has(Rights::PROXY));
        assert_eq!(format!("{:?}", Rights::parse("proxy").unwrap()), "[proxy]");
        assert_eq!(format!("{r:?}"), "[search,read]");
    }
}
