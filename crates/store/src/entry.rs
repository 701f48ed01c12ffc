//! Entries as kept in memory.
//!
//! Each attribute keeps its values as the client sent them (`values`, returned verbatim) and the
//! equality-normalized form of each (`norm`, used for matching, duplicate detection and index
//! keys), so matching never re-normalizes stored data.

use schema::{AttrId, NormDn, Schema, ValueError};

pub type EntryId = u32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub ty: AttrId,
    /// Attribute options in lower case, each with its leading `;` (e.g. `;lang-en`), or empty.
    pub options: Box<str>,
    pub values: Vec<Box<[u8]>>,
    pub norm: Vec<Box<[u8]>>,
}

impl Attr {
    /// Builds an attribute from raw values, normalizing each with the type's equality rule.
    pub fn new(
        schema: &Schema,
        ty: AttrId,
        options: &str,
        values: Vec<Box<[u8]>>,
    ) -> Result<Attr, ValueError> {
        let mut norm = Vec::with_capacity(values.len());
        for v in &values {
            norm.push(schema.normalize_eq(ty, v)?.into_boxed_slice());
        }
        Ok(Attr {
            ty,
            options: options.into(),
            values,
            norm,
        })
    }

    /// Position of a value with the same normalized form.
    pub fn find(&self, norm: &[u8]) -> Option<usize> {
        self.norm.iter().position(|n| &**n == norm)
    }
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub id: EntryId,
    /// The DN in the form the client gave it (RFC 4514 string).
    pub dn: String,
    pub ndn: NormDn,
    pub parent: Option<EntryId>,
    pub attrs: Vec<Attr>,
}

impl Entry {
    /// The attribute of exactly this type and no options.
    pub fn attr(&self, ty: AttrId) -> Option<&Attr> {
        self.attrs
            .iter()
            .find(|a| a.ty == ty && a.options.is_empty())
    }

    pub fn attr_mut(&mut self, ty: AttrId, options: &str) -> Option<&mut Attr> {
        self.attrs
            .iter_mut()
            .find(|a| a.ty == ty && &*a.options == options)
    }

    /// All attributes of this type or a subtype, with any options.
    pub fn attrs_of<'a>(
        &'a self,
        schema: &'a Schema,
        ty: AttrId,
    ) -> impl Iterator<Item = &'a Attr> + 'a {
        self.attrs
            .iter()
            .filter(move |a| schema.is_subtype(a.ty, ty))
    }

    /// Whether the entry holds a value (by normalized form) of exactly this type (any options).
    pub fn has_value(&self, ty: AttrId, norm: &[u8]) -> bool {
        self.attrs
            .iter()
            .any(|a| a.ty == ty && a.find(norm).is_some())
    }
}
