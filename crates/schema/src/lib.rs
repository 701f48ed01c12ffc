//! Directory schema (RFC 4512): attribute types, object classes, syntaxes, matching rules,
//! value normalization, and distinguished names (RFC 4514).
//!
//! Module map:
//! - `lib.rs`: the public types and `Schema` with its lookups (this file).
//! - `parse`: the RFC 4512 description parser and the OpenLDAP `.schema` file reader
//!   (`objectidentifier` macros, comments, continuation lines) behind `load_schema_text`.
//! - `builtin`: the built-in schema as `.schema` text (core, cosine, inetOrgPerson, nis,
//!   operational), loaded through the same parser on every start.
//! - `syntax`: the RFC 4517 syntaxes and their value checks (`validate`).
//! - `rules`: the RFC 4517 matching rules: equality keys, ordering, substrings.
//! - `dn`: DN parsing and RFC 4514 string form, schema normalization (`NormDn`).
//! - `check`: the add/modify entry check (`check_entry`): object classes, MUST/MAY,
//!   single-valued attributes.
//! - `tests` (test builds only): API tests against the built-in schema, including proptests;
//!   unit tests of internals sit at the end of each module.
//!
//! CONTRACT (used by `store` and `server`; keep these names and shapes, add freely):
//!
//! ```ignore
//! Schema::builtin() -> Schema                         // core, cosine, inetOrgPerson, nis
//! Schema::load_schema_text(&mut self, text, origin) -> Result<(), SchemaError>  // OpenLDAP .schema
//! schema.attr_by_name(&str) -> Option<AttrId>          // name or numeric OID, case-insensitive
//! schema.attr(AttrId) -> &AttributeType
//! schema.class_by_name(&str) -> Option<ClassId>; schema.class(ClassId) -> &ObjectClass
//! schema.rule_by_name(&str) -> Option<RuleId>; schema.rule(RuleId) -> &MatchingRule
//! schema.validate(AttrId, &[u8]) -> Result<(), ValueError>          // syntax check
//! schema.normalize_eq(AttrId, &[u8]) -> Result<Vec<u8>, ValueError>  // equality key: equal iff bytes equal
//! schema.normalize_with(RuleId, &[u8]) -> Result<Vec<u8>, ValueError>
//! schema.compare_ord(AttrId, a, b) -> Option<Ordering>   // raw values, ordering rule (None: no rule / invalid)
//! schema.substrings_match(AttrId, value, initial, any, final_) -> Option<bool>  // None: no rule
//! schema.is_subtype(AttrId, of: AttrId) -> bool       // reflexive
//! schema.subtypes(AttrId) -> &[AttrId]                 // reflexive closure, e.g. name -> [name, cn, sn, ...]
//! schema.class_closure(&[ClassId]) -> Vec<ClassId>     // with all superclasses
//! schema.check_entry(&[&[u8]] objectClass values, &[(AttrId, usize)]) -> Result<ClassId, SchemaViolation>
//!     // MUST/MAY, one structural chain; returns structural class
//! schema.subschema() -> Subschema                      // value strings for cn=Subschema
//! schema.load_file_text(text, origin, ldif) -> Result<(), SchemaError>  // configured files
//! schema.extend(text, origin) -> Result<Schema, SchemaError>  // compatible extension, ids kept
//! schema.replay_extension(text, origin); schema.extensions() -> &str; schema.generation()
//! Dn::parse(&str) -> Result<Dn, DnError>; dn.normalize(&Schema) -> Result<NormDn, DnError>
//! ```
//!
//! Also provided: `schema.attrs()`, `schema.classes()`, `schema.syntax(SyntaxId)`,
//! `schema.syntax_by_oid(&str)`, `schema.compare_with(RuleId, a, b)`,
//! `schema.substrings_with(RuleId, value, initial, any, final_)`; `Dn::is_root`, `Dn::rdn`,
//! `Dn::parent`, `impl Display for Dn` (RFC 4514 form); `NormDn::root`, `NormDn::is_root`,
//! `NormDn::parent`, `NormDn::is_descendant_of` (strict), `impl Display for NormDn`.
//! `NormDn` equality and hash compare `norm` only. `substrings_match` also answers `None` when
//! the value or an assertion component cannot be prepared (e.g. invalid UTF-8).

use std::collections::HashMap;

mod approx;
pub use approx::{metaphone, Approx};
mod builtin;
mod bundles;
pub use bundles::{bundle, bundles, Bundle, BundleError};
mod cache;
mod check;
mod dn;
pub use dn::{norm_is_descendant, norm_is_descendant_bytes, norm_parent, NewDn};
mod parse;
mod rules;
mod syntax;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttrId(pub u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClassId(pub u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SyntaxId(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    UserApplications,
    DirectoryOperation,
    DistributedOperation,
    DsaOperation,
}

#[derive(Debug, Clone)]
pub struct AttributeType {
    pub oid: String,
    /// First name is the canonical one returned to clients.
    pub names: Vec<String>,
    pub desc: Option<String>,
    pub obsolete: bool,
    pub sup: Option<AttrId>,
    pub equality: Option<RuleId>,
    pub ordering: Option<RuleId>,
    pub substr: Option<RuleId>,
    pub syntax: Option<SyntaxId>,
    pub syntax_len: Option<u32>,
    pub single_value: bool,
    pub collective: bool,
    pub no_user_modification: bool,
    pub usage: Usage,
    /// The RFC 4512 description string, as published in cn=Subschema.
    pub definition: String,
}

impl AttributeType {
    pub fn name(&self) -> &str {
        self.names.first().map(String::as_str).unwrap_or(&self.oid)
    }
    pub fn is_operational(&self) -> bool {
        self.usage != Usage::UserApplications
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassKind {
    Abstract,
    Structural,
    Auxiliary,
}

#[derive(Debug, Clone)]
pub struct ObjectClass {
    pub oid: String,
    pub names: Vec<String>,
    pub desc: Option<String>,
    pub obsolete: bool,
    pub sup: Vec<ClassId>,
    pub kind: ClassKind,
    pub must: Vec<AttrId>,
    pub may: Vec<AttrId>,
    pub definition: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    Equality,
    Ordering,
    Substring,
}

#[derive(Debug, Clone)]
pub struct MatchingRule {
    pub oid: String,
    pub names: Vec<String>,
    pub kind: RuleKind,
    pub syntax: SyntaxId,
    pub definition: String,
}

#[derive(Debug, Clone)]
pub struct Syntax {
    pub oid: String,
    pub desc: String,
    pub definition: String,
}

/// Value strings for the subschema subentry (cn=Subschema).
#[derive(Debug, Clone, Default)]
pub struct Subschema {
    pub attribute_types: Vec<String>,
    pub object_classes: Vec<String>,
    pub ldap_syntaxes: Vec<String>,
    pub matching_rules: Vec<String>,
    /// `matchingRuleUse` values: for each rule, the attribute types that use it.
    pub matching_rule_uses: Vec<String>,
}

/// A value that does not conform to its syntax or cannot be normalized by a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ValueError(pub String);

/// Which LDAP result an entry-level schema check failed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViolationKind {
    ObjectClassViolation,
    UndefinedAttributeType,
    InvalidAttributeSyntax,
    ConstraintViolation,
    NamingViolation,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SchemaViolation {
    pub kind: ViolationKind,
    /// A message a person can act on, in the words slapd uses where possible.
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}:{line}: {message}")]
pub struct SchemaError {
    pub origin: String,
    pub line: usize,
    pub message: String,
    pub kind: SchemaErrorKind,
}

/// What kind of fault a `SchemaError` is, for callers that answer with a result code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaErrorKind {
    /// The text is not a well-formed definition (or statement).
    Syntax,
    /// A definition with this OID exists already, the same apart from its DESC.
    Exists,
    /// Well formed, but does not fit the schema: a clashing OID or name, an undefined
    /// reference, a statement not allowed here.
    Conflict,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid DN: {0}")]
pub struct DnError(pub String);

/// One attribute value assertion of an RDN, as written by the user (value unescaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ava {
    pub attr: String,
    pub value: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rdn {
    pub avas: Vec<Ava>,
}

/// A parsed DN (RFC 4514), most specific RDN first. Not yet schema-aware.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dn {
    pub rdns: Vec<Rdn>,
}

/// A schema-normalized DN. `norm` is a canonical string: each AVA as `<attr oid or lowercased
/// canonical name>=<normalized value, RFC 4514-escaped>`, multi-valued RDN AVAs sorted and joined by
/// `+`, RDNs joined by `,`. Two DNs name the same entry iff their `norm` strings are equal, and
/// `a` is below `b` iff `a.norm` ends with `,` + `b.norm` (or `b` is the root "").
/// `rdns` keeps the resolved attribute ids and raw values for RDN checks.
///
/// Equality and hashing look at `norm` only: two spellings of one DN are equal `NormDn`s even
/// though their raw `rdns` values differ.
#[derive(Debug, Clone)]
pub struct NormDn {
    pub norm: String,
    pub rdns: Vec<Vec<(AttrId, Vec<u8>)>>,
}

impl PartialEq for NormDn {
    fn eq(&self, other: &NormDn) -> bool {
        self.norm == other.norm
    }
}

impl Eq for NormDn {}

impl std::hash::Hash for NormDn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.norm.hash(state);
    }
}

/// The schema in force: every definition, the name indexes, and precomputed subtype lists.
///
/// Built once at startup (`Schema::builtin` plus any `load_schema_text`) and then shared
/// read-only (`Arc<Schema>`), so lookups take `&self` and never lock.
#[derive(Debug, Clone)]
pub struct Schema {
    attrs: Vec<AttributeType>,
    classes: Vec<ObjectClass>,
    rules: Vec<MatchingRule>,
    /// Implementation of each rule, parallel to `rules`.
    rule_impls: Vec<rules::Family>,
    syntaxes: Vec<Syntax>,
    /// Value check of each syntax, parallel to `syntaxes`.
    syntax_checks: Vec<syntax::Check>,
    /// Lowercased names and numeric OIDs.
    attr_index: NameIndex<AttrId>,
    class_index: NameIndex<ClassId>,
    rule_index: NameIndex<RuleId>,
    syntax_index: NameIndex<SyntaxId>,
    /// `objectidentifier` macros, lowercased name to numeric OID.
    macros: HashMap<String, String>,
    /// For each attribute: itself and all its descendants.
    subtypes: Vec<Vec<AttrId>>,
    /// For each object class: itself and every class that has it among its superclasses.
    subclasses: Vec<Vec<ClassId>>,
    /// The objectClass attribute type, looked up once (filters and writes ask per value).
    object_class: Option<AttrId>,
    /// How definitions are being taken in (set only while a load runs).
    mode: LoadOptions,
    /// The definitions added by `extend` (beyond the built-in and configured files), as
    /// `.schema` statements in canonical form, one a line, in the order they were added.
    extensions: String,
    /// Names this set of definitions for per-thread caches of derived values (see
    /// `rules::dn_key`): a new number from `GENERATIONS` whenever definitions change.
    generation: u64,
}

/// What `Schema::attr` answers for an id it does not define.
pub static UNKNOWN_ATTR: AttributeType = AttributeType {
    oid: String::new(),
    names: Vec::new(),
    desc: None,
    obsolete: false,
    sup: None,
    equality: None,
    ordering: None,
    substr: None,
    syntax: None,
    syntax_len: None,
    single_value: false,
    collective: false,
    no_user_modification: false,
    usage: Usage::UserApplications,
    definition: String::new(),
};

/// What `Schema::class` answers for an id it does not define.
pub static UNKNOWN_CLASS: ObjectClass = ObjectClass {
    oid: String::new(),
    names: Vec::new(),
    desc: None,
    obsolete: false,
    sup: Vec::new(),
    kind: ClassKind::Abstract,
    must: Vec::new(),
    may: Vec::new(),
    definition: String::new(),
};

/// How a load takes definitions in.
#[derive(Debug, Clone, Copy, Default)]
struct LoadOptions {
    /// A definition equal to one already there (same OID, same canonical form) is skipped.
    skip_identical: bool,
    /// Only attribute types and object classes (no syntaxes, no OID macros).
    types_and_classes_only: bool,
    /// Added definitions are appended to `extensions`.
    record: bool,
}

/// Source of `Schema::generation`.
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Schema {
    /// An empty schema with only the built-in syntaxes and matching rules.
    fn with_rules() -> Schema {
        let mut s = Schema {
            attrs: Vec::new(),
            classes: Vec::new(),
            rules: Vec::new(),
            rule_impls: Vec::new(),
            syntaxes: Vec::new(),
            syntax_checks: Vec::new(),
            attr_index: NameIndex::default(),
            class_index: NameIndex::default(),
            rule_index: NameIndex::default(),
            syntax_index: NameIndex::default(),
            macros: HashMap::new(),
            subtypes: Vec::new(),
            subclasses: Vec::new(),
            object_class: None,
            mode: LoadOptions::default(),
            extensions: String::new(),
            generation: 0,
        };
        for (oid, desc, check) in syntax::SYNTAXES {
            s.add_syntax(oid, desc, *check);
        }
        for r in rules::RULES {
            let syntax = s.syntax_index.get(r.syntax).copied().unwrap_or(SyntaxId(0));
            let id = RuleId(s.rules.len() as u32);
            let definition = format!("( {} NAME '{}' SYNTAX {} )", r.oid, r.name, r.syntax);
            s.rules.push(MatchingRule {
                oid: r.oid.to_string(),
                names: vec![r.name.to_string()],
                kind: r.kind,
                syntax,
                definition,
            });
            s.rule_impls.push(r.family);
            s.rule_index.insert(r.oid.to_string(), id);
            s.rule_index.insert(r.name.to_ascii_lowercase(), id);
        }
        s
    }

    fn add_syntax(&mut self, oid: &str, desc: &str, check: syntax::Check) -> SyntaxId {
        let id = SyntaxId(self.syntaxes.len() as u32);
        self.syntaxes.push(Syntax {
            oid: oid.to_string(),
            desc: desc.to_string(),
            definition: format!("( {oid} DESC '{}' )", parse::escape_qdstring(desc)),
        });
        self.syntax_checks.push(check);
        self.syntax_index.insert(oid.to_string(), id);
        id
    }

    /// The built-in schema: core (RFC 4512, RFC 4519), cosine (RFC 4524), inetOrgPerson
    /// (RFC 2798), nis (RFC 2307) and the server's operational attributes.
    pub fn builtin() -> Schema {
        let mut s = Schema::with_rules();
        for (origin, text) in builtin::FILES {
            if let Err(e) = s.load_inner(text, origin) {
                // The built-in text is part of the program and covered by tests; a failure
                // here is a build defect, not input a user controls.
                unreachable!("built-in schema does not load: {e}");
            }
        }
        s.finish();
        s
    }

    /// Adds the definitions of an OpenLDAP `.schema` file (or bare RFC 4512 descriptions).
    /// All or nothing: on error the schema is unchanged.
    pub fn load_schema_text(&mut self, text: &str, origin: &str) -> Result<(), SchemaError> {
        let mut next = self.clone();
        next.load_inner(text, origin)?;
        next.finish();
        *self = next;
        Ok(())
    }

    /// Adds the definitions of a schema file: OpenLDAP `.schema` text or, when `ldif`, an LDIF
    /// file of `cn=schema` entries (`olcAttributeTypes`, `olcObjectClasses`,
    /// `olcObjectIdentifier`, `olcLdapSyntaxes`) or of a subschema entry (`attributeTypes`,
    /// `objectClasses`, `ldapSyntaxes`). A definition that repeats one already present exactly
    /// (same OID, same canonical definition, e.g. `core.schema` over the built-in one) is
    /// skipped; one that differs is an error. All or nothing.
    pub fn load_file_text(
        &mut self,
        text: &str,
        origin: &str,
        ldif: bool,
    ) -> Result<(), SchemaError> {
        let mut next = self.clone();
        next.mode = LoadOptions {
            skip_identical: true,
            ..LoadOptions::default()
        };
        if ldif {
            next.load_ldif_inner(text, origin)?;
        } else {
            next.load_inner(text, origin)?;
        }
        next.mode = LoadOptions::default();
        next.finish();
        *self = next;
        Ok(())
    }

    /// A *compatible extension* of this schema: the same definitions with the same ids, plus
    /// the new attribute types and object classes of `text` (`.schema` statements, or bare
    /// RFC 4512 descriptions), appended. Refused: anything but attribute types and object
    /// classes, an OID or name already defined, an undefined superior, matching rule or syntax.
    /// The new definitions are recorded in `extensions`, so that they can be logged and
    /// snapshotted and `replay_extension` gives the same schema again.
    pub fn extend(&self, text: &str, origin: &str) -> Result<Schema, SchemaError> {
        self.extend_with(
            text,
            origin,
            LoadOptions {
                types_and_classes_only: true,
                ..LoadOptions::default()
            },
        )
    }

    /// Applies extension text recorded by `extend` (from a log record or a snapshot) again.
    /// Definitions that are already present exactly are skipped (the configured schema files
    /// may have taken them in since); one that clashes is an error naming it.
    pub fn replay_extension(&self, text: &str, origin: &str) -> Result<Schema, SchemaError> {
        self.extend_with(
            text,
            origin,
            LoadOptions {
                types_and_classes_only: true,
                skip_identical: true,
                ..LoadOptions::default()
            },
        )
    }

    fn extend_with(
        &self,
        text: &str,
        origin: &str,
        mode: LoadOptions,
    ) -> Result<Schema, SchemaError> {
        let mut next = self.clone();
        next.mode = LoadOptions {
            record: true,
            ..mode
        };
        next.load_inner(text, origin)?;
        next.mode = LoadOptions::default();
        next.finish();
        Ok(next)
    }

    /// The definitions added by `extend` and `replay_extension`, as `.schema` text.
    pub fn extensions(&self) -> &str {
        &self.extensions
    }

    /// Names this set of definitions: a new number whenever definitions change, so that a
    /// value derived from one schema (a cached entry, a cached subschema entry) can tell.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Recomputes derived tables after definitions were added.
    fn finish(&mut self) {
        self.generation = GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = self.attrs.len();
        let mut subtypes: Vec<Vec<AttrId>> = (0..n).map(|i| vec![AttrId(i as u32)]).collect();
        for i in 0..n {
            let mut cur = self.attrs[i].sup;
            let mut guard = 0;
            while let Some(sup) = cur {
                if let Some(list) = subtypes.get_mut(sup.0 as usize) {
                    list.push(AttrId(i as u32));
                }
                cur = self.attrs.get(sup.0 as usize).and_then(|a| a.sup);
                guard += 1;
                if guard > n {
                    break;
                }
            }
        }
        self.subtypes = subtypes;
        let mut subclasses: Vec<Vec<ClassId>> = vec![Vec::new(); self.classes.len()];
        for i in 0..self.classes.len() {
            let c = ClassId(i as u32);
            for sup in self.class_closure(&[c]) {
                if let Some(list) = subclasses.get_mut(sup.0 as usize) {
                    list.push(c);
                }
            }
        }
        self.subclasses = subclasses;
        self.object_class = self.attr_by_name("objectClass");
    }

    /// Whether `attr` is objectClass.
    pub fn is_object_class(&self, attr: AttrId) -> bool {
        self.object_class == Some(attr)
    }

    /// An attribute type by any of its names or its numeric OID, case-insensitively.
    /// Options (`;binary`, `;lang-en`) must be stripped by the caller.
    pub fn attr_by_name(&self, name: &str) -> Option<AttrId> {
        lookup(&self.attr_index, name)
    }

    /// The attribute type with this id. An id this schema does not define (one from a newer,
    /// extended schema, read with an older one) is answered with `UNKNOWN_ATTR`, a nameless
    /// type without rules, never with a panic.
    pub fn attr(&self, id: AttrId) -> &AttributeType {
        self.attrs.get(id.0 as usize).unwrap_or(&UNKNOWN_ATTR)
    }

    /// The number of attribute types (ids run from 0 to this, exclusive).
    pub fn attr_count(&self) -> usize {
        self.attrs.len()
    }

    /// All attribute types in definition order.
    pub fn attrs(&self) -> impl Iterator<Item = (AttrId, &AttributeType)> {
        self.attrs
            .iter()
            .enumerate()
            .map(|(i, a)| (AttrId(i as u32), a))
    }

    pub fn class_by_name(&self, name: &str) -> Option<ClassId> {
        lookup(&self.class_index, name)
    }

    /// The object class with this id; `UNKNOWN_CLASS` for an id this schema does not define.
    pub fn class(&self, id: ClassId) -> &ObjectClass {
        self.classes.get(id.0 as usize).unwrap_or(&UNKNOWN_CLASS)
    }

    /// All object classes in definition order.
    pub fn classes(&self) -> impl Iterator<Item = (ClassId, &ObjectClass)> {
        self.classes
            .iter()
            .enumerate()
            .map(|(i, c)| (ClassId(i as u32), c))
    }

    /// A matching rule by name or numeric OID, case-insensitively.
    pub fn rule_by_name(&self, name: &str) -> Option<RuleId> {
        lookup(&self.rule_index, name)
    }

    pub fn rule(&self, id: RuleId) -> &MatchingRule {
        &self.rules[id.0 as usize]
    }

    pub fn syntax(&self, id: SyntaxId) -> &Syntax {
        &self.syntaxes[id.0 as usize]
    }

    /// A syntax by numeric OID.
    pub fn syntax_by_oid(&self, oid: &str) -> Option<SyntaxId> {
        self.syntax_index.get(oid.trim()).copied()
    }

    /// Whether `a` is `of` or one of its descendants (via SUP).
    pub fn is_subtype(&self, a: AttrId, of: AttrId) -> bool {
        let mut cur = Some(a);
        let mut steps = 0;
        while let Some(c) = cur {
            if c == of {
                return true;
            }
            cur = self.attrs.get(c.0 as usize).and_then(|t| t.sup);
            steps += 1;
            if steps > self.attrs.len() {
                return false;
            }
        }
        false
    }

    /// The attribute and all its descendants, e.g. `name` → `name, cn, sn, givenName, ...`.
    pub fn subtypes(&self, a: AttrId) -> &[AttrId] {
        self.subtypes
            .get(a.0 as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The class and every class below it (that has it among its superclasses), e.g.
    /// `person` → `person, organizationalPerson, inetOrgPerson, ...`; the class itself first.
    pub fn subclasses(&self, c: ClassId) -> &[ClassId] {
        self.subclasses
            .get(c.0 as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The given classes and all their superclasses, each once, given ones first.
    pub fn class_closure(&self, classes: &[ClassId]) -> Vec<ClassId> {
        let mut out: Vec<ClassId> = Vec::new();
        let mut stack: Vec<ClassId> = classes.iter().rev().copied().collect();
        while let Some(c) = stack.pop() {
            if out.contains(&c) {
                continue;
            }
            out.push(c);
            if let Some(oc) = self.classes.get(c.0 as usize) {
                stack.extend(oc.sup.iter().rev().copied());
            }
        }
        out
    }

    /// The values of the subschema subentry (cn=Subschema).
    pub fn subschema(&self) -> Subschema {
        Subschema {
            attribute_types: self.attrs.iter().map(|a| a.definition.clone()).collect(),
            object_classes: self.classes.iter().map(|c| c.definition.clone()).collect(),
            ldap_syntaxes: self.syntaxes.iter().map(|s| s.definition.clone()).collect(),
            matching_rules: self.rules.iter().map(|r| r.definition.clone()).collect(),
            matching_rule_uses: self.matching_rule_uses(),
        }
    }
}

impl Schema {
    /// Whether matching rule `rule` may be used with values of `attr` in an extensible match
    /// (and so is listed for it in `matchingRuleUse`). slapd's rule (`mr_usable_with_at`):
    /// a rule meant for extensible matching applies to the types of its own syntax and to the
    /// types whose equality rule it is; besides, a few rules name compatible syntaxes they also
    /// take (the caseIgnore/caseExact family: country, printable and telephone number strings;
    /// the first-component rules: the descriptions whose first component they read).
    /// Substring rules, the UUID and CSN rules and directoryStringFirstComponentMatch are not
    /// meant for extensible matching in slapd (or not there at all), so they apply only
    /// through compatible syntaxes. objectClass and structuralObjectClass are matched by
    /// slapd's own internal rules (subclass matching), so no published rule lists them.
    pub fn rule_applies(&self, rule: RuleId, attr: AttrId) -> bool {
        let r = self.rule(rule);
        let at = self.attr(attr);
        let Some(syntax) = at.syntax else {
            return false;
        };
        if at.names.iter().any(|n| {
            n.eq_ignore_ascii_case("objectClass") || n.eq_ignore_ascii_case("structuralObjectClass")
        }) {
            return false;
        }
        let extensible = r.kind != RuleKind::Substring && !rules::not_extensible(&r.oid);
        if extensible && (r.syntax == syntax || at.equality == Some(rule)) {
            return true;
        }
        let syntax_oid = self.syntax(syntax).oid.as_str();
        rules::compatible_syntaxes(&r.oid).contains(&syntax_oid)
    }

    /// `matchingRuleUse` values: for each rule that applies to at least one attribute type
    /// (`rule_applies`), the types it applies to, by their first names.
    fn matching_rule_uses(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            let id = RuleId(i as u32);
            let users: Vec<&str> = self
                .attrs()
                .filter(|(a, _)| self.rule_applies(id, *a))
                .map(|(_, a)| a.name())
                .collect();
            if users.is_empty() {
                continue;
            }
            let applies = if users.len() == 1 {
                users[0].to_string()
            } else {
                format!("( {} )", users.join(" $ "))
            };
            let name = r
                .names
                .first()
                .map(|n| format!(" NAME '{n}'"))
                .unwrap_or_default();
            out.push(format!("( {}{name} APPLIES {applies} )", r.oid));
        }
        out
    }
}

/// Names and OIDs to ids. Looked up for every attribute a request names, so hashed with FxHash
/// (the tables are built from schema files, never from clients, so a hostile key can only miss).
pub(crate) type NameIndex<T> =
    HashMap<String, T, std::hash::BuildHasherDefault<rustc_hash::FxHasher>>;

fn lookup<T: Copy>(index: &NameIndex<T>, name: &str) -> Option<T> {
    let name = name.trim();
    if let Some(v) = index.get(name) {
        return Some(*v);
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return index.get(&name.to_ascii_lowercase()).copied();
    }
    None
}

#[cfg(test)]
mod tests;
