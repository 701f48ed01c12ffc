//! The fast path of building an imported entry.
//!
//! The common record (a plain first RDN under a parent seen before; known attribute types
//! without options, each listed in one run of lines; valid, distinct values; passwords already
//! hashed) is checked and packed straight from its LDIF values into the entry `add::build`,
//! `add::stamp_new` and `Entry::new` would make of it, without their owned intermediate forms
//! (a `Dn`, an `Attr` with two vectors of boxed values per attribute, the stamps cloned):
//! those cost more than half of an import's time.
//!
//! Anything else returns `None` and goes the general way, which also writes the error
//! messages: the fast path only has to recognise what it can do, never explain what is wrong.
//! A test builds the same records both ways and compares the entries.

use std::rc::Rc;

use rustc_hash::FxHashMap;
use schema::{AttrId, Schema};
use store::entry::{PackedAttrs, Packer};

use super::Prepared;
use crate::{add, Dit};

/// Descriptions and parents remembered per thread: enough for any real file's attribute
/// names, and for the parents of a file in slapcat order (children follow their parent).
const MAX_NAMES: usize = 128;
const MAX_PARENTS: usize = 4096;

/// A parent DN as the fast path needs it, parsed once per thread.
struct Parent {
    /// As stored (`Dn::pretty`).
    text: String,
    norm: String,
    /// Its number of RDNs.
    depth: usize,
}

/// What one building thread has resolved so far, and its buffers.
#[derive(Default)]
pub(super) struct FastBuild {
    packer: Packer,
    /// Attribute descriptions as spelled in the file, with their type if the fast path takes
    /// them (no options, known).
    names: Vec<(Box<[u8]>, Option<AttrId>)>,
    /// The descriptions of the last record's attributes, in order (`resolve_at`).
    layout: Vec<(Box<[u8]>, AttrId)>,
    /// objectClass values as spelled in the file, valid and naming a class, and their
    /// normalized forms.
    classes: Vec<ValuePair>,
    /// Parent DNs as spelled in the file; `None` for those the fast path leaves alone.
    parents: FxHashMap<Box<str>, Option<Rc<Parent>>>,
    /// Normalized values of the record being built, back to back.
    norms: Vec<u8>,
    /// Attributes of interned types packed before (`pack_recurring`).
    recurring: Vec<Recurring>,
    /// The last structuralObjectClass value and its normalized form (`structural_norm`).
    structural: Option<ValuePair>,
    /// The import's stamps, packed (`build`).
    all_stamps: Option<PackedAttrs>,
}

/// The values of an attribute of an interned type as spelled in the file, and the attribute
/// packed.
struct Recurring {
    ty: AttrId,
    raws: Vec<Box<[u8]>>,
    packed: PackedAttrs,
}

/// Sets of values of interned types remembered per thread (`pack_recurring`).
const MAX_RECURRING: usize = 64;

/// A byte a first-RDN value may hold for the fast path: one that `Dn::parse` takes as it is
/// and RFC 4514 escaping leaves alone, so the DN's string form is the input's.
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b' ' | b'.' | b'-' | b'_' | b'@')
}

fn plain_value(v: &[u8]) -> bool {
    !v.is_empty() && v[0] != b' ' && v[v.len() - 1] != b' ' && v.iter().all(|&b| plain(b))
}

/// A value and its normalized form.
type ValuePair = (Box<[u8]>, Box<[u8]>);

/// One value: raw bytes and where its normalized form is in `FastBuild::norms`.
type Value<'a> = (&'a [u8], usize, usize);

impl FastBuild {
    /// `resolve` for the description of the `i`th attribute of a record: records of one file
    /// mostly list the same attributes in the same order, so the previous record's `i`th
    /// description is tried first.
    fn resolve_at(&mut self, schema: &Schema, i: usize, desc: &[u8]) -> Option<AttrId> {
        if let Some((n, ty)) = self.layout.get(i) {
            if **n == *desc {
                return Some(*ty);
            }
        }
        let ty = self.resolve(schema, desc)?;
        if i < self.layout.len() {
            self.layout[i] = (desc.into(), ty);
        } else if i == self.layout.len() && i < MAX_NAMES {
            self.layout.push((desc.into(), ty));
        }
        Some(ty)
    }

    fn resolve(&mut self, schema: &Schema, desc: &[u8]) -> Option<AttrId> {
        if let Some((_, ty)) = self.names.iter().find(|(n, _)| **n == *desc) {
            return *ty;
        }
        let ty = std::str::from_utf8(desc)
            .ok()
            .filter(|d| !d.contains(';'))
            .and_then(|d| schema.attr_by_name(d));
        if self.names.len() < MAX_NAMES {
            self.names.push((desc.into(), ty));
        }
        ty
    }

    fn parent(&mut self, schema: &Schema, dn: &str) -> Option<Rc<Parent>> {
        if let Some(p) = self.parents.get(dn) {
            return p.clone();
        }
        let p = schema
            .parse_new_dn(dn)
            .ok()
            .filter(|p| !p.ndn.is_root())
            .map(|p| {
                Rc::new(Parent {
                    text: p.text,
                    norm: p.ndn.norm,
                    depth: p.ndn.rdns.len(),
                })
            });
        if self.parents.len() >= MAX_PARENTS {
            self.parents.clear();
        }
        self.parents.insert(dn.into(), p.clone());
        p
    }

    /// An objectClass value (`ty`) normalized into `norms`, as `norm` and `checked_values` take
    /// it: valid, and naming a known class.
    fn class_value(&mut self, schema: &Schema, ty: AttrId, v: &[u8]) -> Option<(usize, usize)> {
        let start = self.norms.len();
        if let Some((_, n)) = self.classes.iter().find(|(raw, _)| **raw == *v) {
            self.norms.extend_from_slice(n);
            return Some((start, self.norms.len()));
        }
        let c = std::str::from_utf8(v)
            .ok()
            .and_then(|n| schema.class_by_name(n.trim()))?;
        // Stored as the schema spells the class (`Schema::pretty_value`).
        if schema.class(c).names.first().map(String::as_bytes) != Some(v) {
            return None;
        }
        let (s, e) = self.norm(schema, ty, v)?;
        if self.classes.len() < MAX_NAMES {
            self.classes.push((v.into(), self.norms[s..e].into()));
        }
        Some((s, e))
    }

    /// Packs an attribute of a type whose values are interned (objectClass,
    /// structuralObjectClass): the same few sets of values recur on every entry, so each set
    /// is packed once (its interned ids looked up once) and its bytes reused.
    fn pack_recurring(&mut self, ty: AttrId, values: &[Value<'_>]) {
        let same = |m: &Recurring| {
            m.ty == ty
                && m.raws.len() == values.len()
                && m.raws.iter().zip(values).all(|(a, v)| **a == *v.0)
        };
        if let Some(m) = self.recurring.iter().find(|m| same(m)) {
            self.packer.append(&m.packed);
            return;
        }
        let norms = &self.norms;
        let mut packed = PackedAttrs::default();
        let pairs = values.iter().map(|&(raw, s, e)| (raw, &norms[s..e]));
        packed.push(ty, "", pairs, false);
        self.packer.append(&packed);
        if self.recurring.len() >= MAX_RECURRING {
            self.recurring.clear();
        }
        self.recurring.push(Recurring {
            ty,
            raws: values.iter().map(|v| v.0.into()).collect(),
            packed,
        });
    }

    /// `norm` of a structuralObjectClass value (`ty`): the same class on nearly every entry,
    /// so the last one's normalized form is kept.
    fn structural_norm(&mut self, schema: &Schema, ty: AttrId, v: &[u8]) -> Option<(usize, usize)> {
        let start = self.norms.len();
        match &self.structural {
            Some((raw, n)) if **raw == *v => self.norms.extend_from_slice(n),
            _ => {
                let (s, e) = self.norm(schema, ty, v)?;
                self.structural = Some((v.into(), self.norms[s..e].into()));
            }
        }
        Some((start, self.norms.len()))
    }

    /// Normalizes `v` as a value of `ty` into `norms`; `None` if it is not valid.
    fn norm(&mut self, schema: &Schema, ty: AttrId, v: &[u8]) -> Option<(usize, usize)> {
        schema.validate(ty, v).ok()?;
        let start = self.norms.len();
        schema.normalize_eq_into(ty, v, &mut self.norms).ok()?;
        Some((start, self.norms.len()))
    }

    /// The entry `add::build(.., trusted)` and `add::stamp_new` make of this record, packed;
    /// `None` when the record is not one the fast path takes.
    pub(super) fn build(
        &mut self,
        shared: &Dit,
        dn: &str,
        attrs: &[ldif::AttrRef<'_>],
        stamps: &add::Stamps,
    ) -> Option<Prepared> {
        let schema = &*shared.schema();
        let k = &shared.known;
        self.norms.clear();

        // The DN: a plain `type=value` first RDN under a parent seen before.
        let (first, rest) = dn.split_once(',')?;
        let (rname, rval) = first.split_once('=')?;
        let rval = rval.as_bytes();
        if !rname.starts_with(|c: char| c.is_ascii_alphabetic())
            || !rname
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            || !plain_value(rval)
        {
            return None;
        }
        let rty = self.resolve(schema, rname.as_bytes())?;
        let rtype = schema.attr(rty);
        rtype.equality?;
        // The stored DN spells the type as the schema does (`Dn::pretty`).
        if rtype.name() != rname {
            return None;
        }
        let (rs, re) = self.norm(schema, rty, rval)?;
        if !plain_value(&self.norms[rs..re]) {
            return None;
        }
        let parent = self.parent(schema, rest)?;

        // The attributes, one run of lines per type (its description spelled in any case), as
        // `group_values` and `checked_values` take them: `groups` holds each type and where
        // its values start in `vals`.
        let mut vals: Vec<Value<'_>> = Vec::with_capacity(attrs.len() + 2);
        let mut groups: Vec<(AttrId, usize)> = Vec::with_capacity(attrs.len() + 4);
        let mut last: &[u8] = &[];
        for (name, v) in attrs {
            let name = name.as_bytes();
            if !name.eq_ignore_ascii_case(last) || groups.is_empty() {
                let ty = self.resolve_at(schema, groups.len(), name)?;
                if groups.iter().any(|(t, _)| *t == ty) {
                    return None;
                }
                groups.push((ty, vals.len()));
                last = name;
            }
            let &(ty, from) = groups.last()?;
            let (s, e) = if ty == k.object_class {
                // A handful of class names recur on every entry: checked and normalized once.
                self.class_value(schema, ty, v)?
            } else {
                if ty == k.user_password && !pwhash::is_hashed(v) {
                    return None;
                }
                // A value stored in another form than given (a DN to prettify).
                if schema.pretty_value(ty, v).is_some() {
                    return None;
                }
                self.norm(schema, ty, v)?
            };
            let n = &self.norms[s..e];
            if vals[from..].iter().any(|&(_, a, b)| self.norms[a..b] == *n) {
                return None;
            }
            vals.push((v, s, e));
        }
        let group_end = |i: usize, groups: &[(AttrId, usize)], vals: &[Value<'_>]| {
            groups.get(i + 1).map_or(vals.len(), |g| g.1)
        };

        // RDN values join the entry (RFC 4511 §4.7): here only when their type is absent.
        match groups.iter().position(|(t, _)| *t == rty) {
            Some(i) => {
                let n = &self.norms[rs..re];
                let values = &vals[groups[i].1..group_end(i, &groups, &vals)];
                if !values.iter().any(|&(_, a, b)| self.norms[a..b] == *n) {
                    return None;
                }
            }
            None => {
                groups.push((rty, vals.len()));
                vals.push((rval, rs, re));
            }
        }

        // Schema check, structuralObjectClass and the server-kept attributes.
        let mut oc: Vec<&[u8]> = Vec::with_capacity(8);
        let mut counts: Vec<(AttrId, usize)> = Vec::with_capacity(groups.len());
        for (i, &(t, from)) in groups.iter().enumerate() {
            let values = &vals[from..group_end(i, &groups, &vals)];
            if t == k.object_class {
                oc.extend(values.iter().map(|v| v.0));
            }
            counts.push((t, values.len()));
        }
        let structural = schema.check_entry(&oc, &counts).ok()?;
        let class = schema.class(structural);
        let structural = class.names.first().unwrap_or(&class.oid).as_bytes();
        if !groups.iter().any(|(t, _)| *t == k.structural_object_class) {
            let (s, e) = self.structural_norm(schema, k.structural_object_class, structural)?;
            groups.push((k.structural_object_class, vals.len()));
            vals.push((structural, s, e));
        }
        let mut uuid = [0u8; uuid::fmt::Hyphenated::LENGTH];
        if !groups.iter().any(|(t, _)| *t == k.entry_uuid) {
            // Written in lower case, a UUID is its own normalized form (`uuidMatch`).
            let uuid = uuid::Uuid::new_v4()
                .hyphenated()
                .encode_lower(&mut uuid)
                .as_bytes();
            let s = self.norms.len();
            self.norms.extend_from_slice(uuid);
            groups.push((k.entry_uuid, vals.len()));
            vals.push((uuid, s, self.norms.len()));
        }

        // Pack: the name part from the first RDN and the parent's, then the attributes.
        let mut text = String::with_capacity(first.len() + 1 + parent.text.len());
        text.push_str(first);
        text.push(',');
        text.push_str(&parent.text);
        let mut norm = String::with_capacity(text.len() + parent.norm.len());
        norm.push_str(rtype.name());
        norm.make_ascii_lowercase();
        norm.push('=');
        norm.push_str(std::str::from_utf8(&self.norms[rs..re]).ok()?);
        norm.push(',');
        norm.push_str(&parent.norm);
        self.packer.start(&text, &norm, parent.depth + 1);
        for (i, &(ty, from)) in groups.iter().enumerate() {
            let values = &vals[from..group_end(i, &groups, &vals)];
            if store::intern::is_interned_type(ty) {
                self.pack_recurring(ty, values);
                continue;
            }
            let norms = &self.norms;
            self.packer.attr(
                ty,
                "",
                values.iter().map(|&(raw, s, e)| (raw, &norms[s..e])),
            );
        }
        // The import's stamps are the same on every entry it stamps (one time, one entryCSN:
        // the import is one batch), so they are interned: ~70 bytes less per entry. Entries
        // that carry none of them (nearly all) get them packed once per thread.
        if groups
            .iter()
            .all(|(t, _)| stamps.attrs().iter().all(|a| a.ty != *t))
        {
            let all = self.all_stamps.get_or_insert_with(|| {
                let mut p = PackedAttrs::default();
                for a in stamps.attrs() {
                    let pairs = a.values.iter().zip(&a.norm).map(|(r, n)| (&**r, &**n));
                    p.push(a.ty, &a.options, pairs, true);
                }
                p
            });
            self.packer.append(all);
        } else {
            for a in stamps.attrs() {
                if !groups.iter().any(|(t, _)| *t == a.ty) {
                    let pairs = a.values.iter().zip(&a.norm).map(|(r, n)| (&**r, &**n));
                    self.packer.attr_interned(a.ty, &a.options, pairs);
                }
            }
        }
        Some(Prepared {
            entry: self.packer.finish(0, None),
            norm,
            rdn_len: first.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bulk::build_one;
    use std::sync::Arc;
    use store::Attr;

    /// An empty directory in memory under dc=example,dc=com, as an import starts from.
    fn directory() -> Dit {
        let schema = Arc::new(Schema::builtin());
        let norm = |dn: &str| {
            schema::Dn::parse(dn)
                .expect("dn")
                .normalize(&schema)
                .expect("normalize")
        };
        Dit::new(
            store::Store::new(schema.clone(), &[]),
            vec![norm("dc=example,dc=com")],
            norm("cn=admin,dc=example,dc=com"),
            crate::acl::Acl::compile(&schema, &crate::acl::default_policy()).expect("acl"),
            store::Entry::new(0, None, "", &schema::NormDn::root(), &[]),
            Vec::new(),
            1,
            crate::WriteLimits {
                max_values_per_attribute: 0,
                max_attributes_per_request: 0,
                max_subtree_delete: 0,
            },
        )
        .expect("directory")
    }

    /// The attributes of an entry with a generated entryUUID (random, and its own normalized
    /// form) replaced by a marker.
    fn attrs_without_uuid(shared: &Dit, e: &store::Entry) -> Vec<Attr> {
        let mut attrs = e.to_attrs();
        for a in attrs.iter_mut().filter(|a| a.ty == shared.known.entry_uuid) {
            if a.values != a.norm {
                continue;
            }
            a.values = vec![b"uuid"[..].into()];
            a.norm = a.values.clone();
        }
        attrs
    }

    /// Builds `ldif`'s records both ways; returns how many took the fast path. Every record the
    /// fast path takes must come out exactly as the general path makes it.
    fn compare(ldif: &str) -> (usize, usize) {
        let dit = directory();
        let shared = &dit;
        let stamps = add::Stamps::new(
            shared,
            "cn=admin,dc=example,dc=com",
            "20261124000000Z",
            "20261124000000.000000Z#000000#000#000000",
        );
        let mut fast = FastBuild::default();
        let (mut taken, mut total) = (0, 0);
        for rec in ldif::Reader::new(ldif.as_bytes()) {
            let Ok(ldif::Record::Content { dn, attrs, .. }) = rec else {
                panic!("test LDIF: {rec:?}");
            };
            let attrs: Vec<ldif::AttrRef<'_>> = attrs
                .iter()
                .map(|(n, v)| (n.as_str(), std::borrow::Cow::Borrowed(&v[..])))
                .collect();
            total += 1;
            // Twice, so that the second build reads what the first one cached.
            for _ in 0..2 {
                let Some(f) = fast.build(shared, &dn, &attrs, &stamps) else {
                    continue;
                };
                taken += 1;
                let s = build_one(shared, &dn, &attrs, &stamps)
                    .unwrap_or_else(|e| panic!("fast path took {dn}, general path: {e}"));
                assert_eq!(f.entry.dn(), s.entry.dn(), "{dn}");
                assert_eq!(f.entry.ndn_str(), s.entry.ndn_str(), "{dn}");
                assert_eq!(f.entry.depth(), s.entry.depth(), "{dn}");
                let schema = shared.schema();
                assert_eq!(f.entry.ndn(&schema), s.entry.ndn(&schema), "{dn}");
                assert_eq!(f.norm, s.norm, "{dn}");
                assert_eq!(f.rdn_len, s.rdn_len, "{dn}");
                assert_eq!(
                    attrs_without_uuid(shared, &f.entry),
                    attrs_without_uuid(shared, &s.entry),
                    "{dn}"
                );
                // The import's own stamps are interned, not carried by every entry.
                let csn = b"20261124000000.000000Z#000000#000#000000";
                assert!(
                    !f.entry.packed().windows(csn.len()).any(|w| w == csn),
                    "{dn}"
                );
            }
        }
        (taken / 2, total)
    }

    #[test]
    fn generated_entries_take_the_fast_path_and_come_out_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("gen.ldif");
        bench::gen::run(&bench::gen::GenArgs {
            count: 300,
            seed: 7,
            suffix: "dc=example,dc=com".into(),
            output: Some(path.clone()),
            password: "secret".into(),
            password_scheme: bench::gen::PasswordScheme::Ssha,
            strong: false,
        })
        .expect("gen");
        let text = std::fs::read_to_string(&path).expect("read");
        let (taken, total) = compare(&text);
        assert_eq!((taken, total), (302, 302));
    }

    #[test]
    fn variants_come_out_the_same_or_take_the_general_path() {
        let taken = "\
dn: uid=a,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
cn: A
sn: A

dn: UID=B,OU=People,dc=Example,DC=com
objectclass: TOP
objectClass: Person
objectClass: organizationalPerson
objectClass: inetOrgPerson
uid: b
CN: Bee Bee
cn: B
sn:  Spaced  Out 
mail: B@Example.COM
telephoneNumber: +1 555 0100
userPassword: {SSHA}d2qnTmr7DgI2sHgRjp30o0vaG6xU4jvB7KjHZg==
description:: w6lsw6h2ZQ==

dn: cn=Group One,ou=groups,dc=example,dc=com
objectClass: groupOfNames
cn: group one
member: uid=a,ou=people,dc=example,dc=com
member: UID=B, OU=people,dc=example,dc=com

dn: ou=sub,ou=people,dc=example,dc=com
objectClass: organizationalUnit
ou: sub
entryUUID: 0C2A5DE0-1111-4222-8333-444455556666
createTimestamp: 20200101000000Z
creatorsName: cn=someone,dc=example,dc=com
structuralObjectClass: organizationalUnit

dn: uid=c,ou=people,dc=example,dc=com
objectClass: account
uid: c

dn: dc=example,dc=com
objectClass: domain
dc: example
";
        // The second and third records spell a DN's types, classes and a member DN otherwise
        // than they are stored (`Schema::pretty_value`): they take the general path, and
        // still come out the same.
        assert_eq!(compare(taken), (4, 6));
        let general = "\
dn: uid=d,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
cn: D
sn: D
userPassword: clear text

dn: uid=e,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
cn;lang-en: E
sn: E

dn: cn=a\\,b,ou=people,dc=example,dc=com
objectClass: person
sn: x

dn: cn=a+sn=b,ou=people,dc=example,dc=com
objectClass: person
cn: a
sn: b

dn: uid=f,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
cn: F
sn: F
cn: G

dn: uid=g,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: other
cn: G
sn: G

dn: uid=h,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
cn: H
cn: h
sn: H

dn: uid=i,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
cn: I

dn: uid=j,ou=people,dc=example,dc=com
objectClass: noSuchClass
cn: J
sn: J

dn: uid=k,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
noSuchAttribute: K
cn: K
sn: K

dn: dc=com
objectClass: domain
dc: com

dn: cn=\u{e9}t\u{e9},ou=people,dc=example,dc=com
objectClass: person
sn: x
";
        assert_eq!(compare(general), (0, 12));
    }
}
