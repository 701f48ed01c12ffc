//! Change records and their compact binary encoding: the transaction log's records, and the
//! entries of version 1 snapshots (version 2 stores packed entries, see `snapshot.rs`).
//!
//! Records name attributes by their canonical type name plus options (`cn;lang-en`) and keep
//! only the raw values: normalized forms, attribute ids and the normalized DN are recomputed
//! from the schema when a record is loaded, so a schema change (new types, other ids, a fixed
//! matching rule) never makes old files unreadable.
//!
//! Encoding (all integers are LEB128 varints unless noted):
//!
//! ```text
//! entry  := id | parent+1 (0 = none) | len dn | count attrs | attr*
//! attr   := len name | count values | (len value)*
//! change := 0x01 entry          (Put: insert or replace by id)
//!         | 0x02 id             (Delete by id)
//!         | 0x03 len text       (Schema: a compatible extension, log version 2 and later)
//!         | 0x04 tombstone      (Tombstone: remember a deleted entry, log version 3 and later)
//!         | 0x05 len uuid       (Forget the tombstone of an entryUUID, version 3 and later)
//!         | 0x06 count (len csn)* (the tombstones' floor, version 3 and later)
//!         | 0x07 patch          (Patch: what a batch changed of an entry, version 5 and
//!                                later; `patch.rs`)
//! tombstone := len uuid | len dn | len csn | len seen
//! ```

use schema::{AttrId, Dn, Schema};

use super::patch::StoredPatch;
use super::PersistError;
use crate::entry::{Attr, Entry, EntryId};
use crate::tombstone::Tombstone;

/// One attribute as stored on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAttr {
    /// Canonical attribute type name followed by its options, e.g. `cn;lang-en`.
    pub name: String,
    pub values: Vec<Vec<u8>>,
}

/// One entry as stored on disk, independent of the schema's internal ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    pub id: EntryId,
    pub parent: Option<EntryId>,
    pub dn: String,
    pub attrs: Vec<StoredAttr>,
}

/// One change of a batch: what the log records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The entry's full new state (insert, or replace the entry with this id).
    Put(StoredEntry),
    /// What the batch changed of an entry that existed before it (`patch`): applied to the
    /// entry as it stands at that point of the log.
    Patch(StoredPatch),
    Delete {
        id: EntryId,
    },
    /// A compatible schema extension (`Schema::extend`): new attribute types and object
    /// classes as `.schema` statements, applied before the batch's entries are read.
    Schema(String),
    /// Remember a deleted entry (`crate::tombstone`), replacing the tombstone of its entryUUID.
    Tombstone(Tombstone),
    /// Forget the tombstone of this entryUUID (no effect if there is none).
    Forget(String),
    /// The tombstones' floor, replacing the previous one.
    TombstoneFloor(Vec<String>),
}

pub(crate) const TAG_PUT: u8 = 1;
pub(crate) const TAG_DELETE: u8 = 2;
pub(crate) const TAG_SCHEMA: u8 = 3;
pub(crate) const TAG_TOMBSTONE: u8 = 4;
pub(crate) const TAG_FORGET: u8 = 5;
pub(crate) const TAG_FLOOR: u8 = 6;
pub(crate) const TAG_PATCH: u8 = 7;

impl StoredEntry {
    pub fn from_entry(entry: &Entry, schema: &Schema) -> StoredEntry {
        StoredEntry {
            id: entry.id,
            parent: entry.parent,
            dn: entry.dn().to_string(),
            attrs: entry
                .attrs()
                .map(|a| StoredAttr {
                    name: attr_name(a.ty, a.options, schema),
                    values: a.values().map(<[u8]>::to_vec).collect(),
                })
                .collect(),
        }
    }

    /// Rebuilds the in-memory entry: resolves attribute names and normalizes the DN and every
    /// value with the schema in force. Errors are `PersistError::Schema` with an empty file
    /// name and offset 0; the readers fill in where the record was.
    pub fn to_entry(&self, schema: &Schema) -> Result<Entry, PersistError> {
        build_entry(
            schema,
            self.id,
            self.parent,
            &self.dn,
            self.attrs.iter().map(|a| {
                (
                    a.name.as_str(),
                    a.values.iter().map(|v| v.as_slice().into()).collect(),
                )
            }),
        )
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        put_ids(out, self.id, self.parent);
        put_bytes(out, self.dn.as_bytes());
        put_varint(out, self.attrs.len() as u64);
        for a in &self.attrs {
            put_bytes(out, a.name.as_bytes());
            put_varint(out, a.values.len() as u64);
            for v in &a.values {
                put_bytes(out, v);
            }
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<StoredEntry, DecodeError> {
        let (id, parent, dn, attrs) = decode_parts(r, <[u8]>::to_vec)?;
        Ok(StoredEntry {
            id,
            parent,
            dn: dn.to_string(),
            attrs: attrs
                .into_iter()
                .map(|(name, values)| StoredAttr {
                    name: name.to_string(),
                    values,
                })
                .collect(),
        })
    }
}

/// The in-memory entry of a record's parts: resolves attribute names and normalizes the DN
/// and every value with the schema in force (errors as `StoredEntry::to_entry`).
pub(crate) fn build_entry<'a>(
    schema: &Schema,
    id: EntryId,
    parent: Option<EntryId>,
    dn: &str,
    attrs: impl Iterator<Item = (&'a str, Vec<Box<[u8]>>)>,
) -> Result<Entry, PersistError> {
    let fail = |message: String| PersistError::Schema {
        file: String::new(),
        offset: 0,
        message,
    };
    let ndn = Dn::parse(dn)
        .and_then(|d| d.normalize(schema))
        .map_err(|e| fail(format!("entry {id} '{dn}': {e}")))?;
    let mut out = Vec::with_capacity(attrs.size_hint().0);
    for (name, values) in attrs {
        let (base, options) = match name.find(';') {
            Some(i) => name.split_at(i),
            None => (name, ""),
        };
        let ty = schema.attr_by_name(base).ok_or_else(|| {
            fail(format!(
                "entry '{dn}': attribute type '{base}' is not defined in the schema in force; \
                 load the schema that defines it"
            ))
        })?;
        let attr = Attr::new(schema, ty, &options.to_ascii_lowercase(), values)
            .map_err(|e| fail(format!("entry '{dn}', attribute '{name}': {e}")))?;
        out.push(attr);
    }
    Ok(Entry::new(id, parent, dn, &ndn, &out))
}

/// Decodes one entry record (as `StoredEntry::decode`) straight into the in-memory entry
/// (as `to_entry`), copying each value once: snapshot loading's hot loop. The outer error is
/// a malformed record, the inner one a record the schema in force cannot take.
pub fn decode_entry(
    r: &mut Reader<'_>,
    schema: &Schema,
) -> Result<Result<Entry, PersistError>, DecodeError> {
    let (id, parent, dn, attrs) = decode_parts(r, Box::<[u8]>::from)?;
    Ok(build_entry(schema, id, parent, dn, attrs.into_iter()))
}

/// An entry record's id and parent (stored as parent id + 1, 0 for none).
pub(crate) fn decode_ids(r: &mut Reader<'_>) -> Result<(EntryId, Option<EntryId>), DecodeError> {
    let id = r.u32_varint("entry id")?;
    let parent = match r.varint("parent id")? {
        0 => None,
        p => Some(
            u32::try_from(p - 1)
                .map_err(|_| r.error(format!("parent id {} out of range", p - 1)))?,
        ),
    };
    Ok((id, parent))
}

/// An entry record's parts, borrowing the DN and names, with each value made by `value`.
#[expect(
    clippy::type_complexity,
    reason = "the record's parts, each used once by the callers"
)]
fn decode_parts<'a, V>(
    r: &mut Reader<'a>,
    value: impl Fn(&'a [u8]) -> V,
) -> Result<(EntryId, Option<EntryId>, &'a str, Vec<(&'a str, Vec<V>)>), DecodeError> {
    let (id, parent) = decode_ids(r)?;
    let dn = r.str("DN")?;
    let n = r.count("attribute count")?;
    let mut attrs = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str("attribute name")?;
        let nv = r.count("value count")?;
        let mut values = Vec::with_capacity(nv);
        for _ in 0..nv {
            values.push(value(r.bytes("value")?));
        }
        attrs.push((name, values));
    }
    Ok((id, parent, dn, attrs))
}

pub(crate) fn attr_name(ty: AttrId, options: &str, schema: &Schema) -> String {
    let base = schema.attr(ty).name();
    let mut s = String::with_capacity(base.len() + options.len());
    s.push_str(base);
    s.push_str(options);
    s
}

/// Encodes an in-memory entry exactly as `StoredEntry::from_entry(e).encode()` would, without
/// building the intermediate record (the snapshot writer's hot loop).
pub fn encode_entry(e: &Entry, schema: &Schema, out: &mut Vec<u8>) {
    put_ids(out, e.id, e.parent);
    put_bytes(out, e.dn().as_bytes());
    put_varint(out, e.attrs().len() as u64);
    for a in e.attrs() {
        let base = schema.attr(a.ty).name();
        put_varint(out, (base.len() + a.options.len()) as u64);
        out.extend_from_slice(base.as_bytes());
        out.extend_from_slice(a.options.as_bytes());
        put_varint(out, a.len() as u64);
        for v in a.values() {
            put_bytes(out, v);
        }
    }
}

/// Encodes a `Change::Put` of the in-memory entry `e` (see `encode_entry`).
pub fn encode_put(e: &Entry, schema: &Schema, out: &mut Vec<u8>) {
    out.push(TAG_PUT);
    encode_entry(e, schema, out);
}

/// Encodes a `Change::Delete`.
pub fn encode_delete(id: EntryId, out: &mut Vec<u8>) {
    out.push(TAG_DELETE);
    put_varint(out, u64::from(id));
}

/// Encodes a `Change::Schema`.
pub fn encode_schema_change(text: &str, out: &mut Vec<u8>) {
    out.push(TAG_SCHEMA);
    put_bytes(out, text.as_bytes());
}

/// Encodes a `Change::Tombstone`.
pub fn encode_tombstone(t: &Tombstone, out: &mut Vec<u8>) {
    out.push(TAG_TOMBSTONE);
    for s in [&t.uuid, &t.dn, &t.csn, &t.seen] {
        put_bytes(out, s.as_bytes());
    }
}

/// Encodes a `Change::Forget`.
pub fn encode_forget(uuid: &str, out: &mut Vec<u8>) {
    out.push(TAG_FORGET);
    put_bytes(out, uuid.as_bytes());
}

/// Encodes a `Change::TombstoneFloor`.
pub fn encode_floor<S: AsRef<str>>(floor: &[S], out: &mut Vec<u8>) {
    out.push(TAG_FLOOR);
    put_varint(out, floor.len() as u64);
    for c in floor {
        put_bytes(out, c.as_ref().as_bytes());
    }
}

/// Decodes the body of a tombstone (after its tag, or in a snapshot's tombstone section).
pub(crate) fn decode_tombstone(r: &mut Reader<'_>) -> Result<Tombstone, DecodeError> {
    Ok(Tombstone {
        uuid: r.str("tombstone entryUUID")?.into(),
        dn: r.str("tombstone DN")?.into(),
        csn: r.str("tombstone CSN")?.into(),
        seen: r.str("tombstone entryCSN")?.into(),
    })
}

/// Decodes a list of strings (`count`, then each as `bytes`): the tombstones' floor.
pub(crate) fn decode_strings(r: &mut Reader<'_>, what: &str) -> Result<Vec<String>, DecodeError> {
    let n = r.count(what)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(r.string(what)?);
    }
    Ok(out)
}

impl Change {
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Change::Put(e) => {
                out.push(TAG_PUT);
                e.encode(out);
            }
            Change::Patch(p) => p.encode(out),
            Change::Delete { id } => encode_delete(*id, out),
            Change::Schema(text) => encode_schema_change(text, out),
            Change::Tombstone(t) => encode_tombstone(t, out),
            Change::Forget(uuid) => encode_forget(uuid, out),
            Change::TombstoneFloor(f) => encode_floor(f, out),
        }
    }

    /// Whether this is one of the tombstone records (log version 3 and later).
    pub fn is_tombstone_record(&self) -> bool {
        matches!(
            self,
            Change::Tombstone(_) | Change::Forget(_) | Change::TombstoneFloor(_)
        )
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Change, DecodeError> {
        match r.u8("change tag")? {
            TAG_PUT => Ok(Change::Put(StoredEntry::decode(r)?)),
            TAG_PATCH => Ok(Change::Patch(StoredPatch::decode(r)?)),
            TAG_DELETE => Ok(Change::Delete {
                id: r.u32_varint("entry id")?,
            }),
            TAG_SCHEMA => Ok(Change::Schema(r.string("schema extension")?)),
            TAG_TOMBSTONE => Ok(Change::Tombstone(decode_tombstone(r)?)),
            TAG_FORGET => Ok(Change::Forget(r.string("tombstone entryUUID")?)),
            TAG_FLOOR => Ok(Change::TombstoneFloor(decode_strings(
                r,
                "tombstone floor",
            )?)),
            t => Err(DecodeError {
                offset: r.pos() - 1,
                reason: format!("unknown change tag {t:#04x}"),
            }),
        }
    }
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// An entry record's id and parent, as `decode_ids` reads them.
pub(crate) fn put_ids(out: &mut Vec<u8>, id: EntryId, parent: Option<EntryId>) {
    put_varint(out, u64::from(id));
    put_varint(out, parent.map_or(0, |p| u64::from(p) + 1));
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A decoding failure at `offset` bytes into the slice being decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: usize,
    pub reason: String,
}

/// A bounds-checked reader over borrowed bytes. Never panics on any input.
pub struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, i: 0 }
    }

    pub fn pos(&self) -> usize {
        self.i
    }

    pub fn is_empty(&self) -> bool {
        self.i >= self.b.len()
    }

    pub fn remaining(&self) -> usize {
        self.b.len().saturating_sub(self.i)
    }

    pub fn error(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError {
            offset: self.i,
            reason: reason.into(),
        }
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "{what}: needs {n} bytes, only {} left",
                self.remaining()
            )));
        }
        let s = &self.b[self.i..self.i + n];
        self.i += n;
        Ok(s)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u32_le(&mut self, what: &str) -> Result<u32, DecodeError> {
        let s = self.take(4, what)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    pub fn u64_le(&mut self, what: &str) -> Result<u64, DecodeError> {
        let s = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }

    pub fn varint(&mut self, what: &str) -> Result<u64, DecodeError> {
        let start = self.i;
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.b.get(self.i) else {
                self.i = start;
                return Err(self.error(format!("{what}: truncated varint")));
            };
            self.i += 1;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                self.i = start;
                return Err(self.error(format!("{what}: varint overflows 64 bits")));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        self.i = start;
        Err(self.error(format!("{what}: varint longer than 10 bytes")))
    }

    pub fn u32_varint(&mut self, what: &str) -> Result<u32, DecodeError> {
        let start = self.i;
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| DecodeError {
            offset: start,
            reason: format!("{what}: {v} does not fit in 32 bits"),
        })
    }

    /// An element count; since every element takes at least one byte, a count larger than the
    /// bytes left is corrupt (and this bounds the allocation it leads to).
    pub fn count(&mut self, what: &str) -> Result<usize, DecodeError> {
        let start = self.i;
        let v = self.varint(what)?;
        if v > self.remaining() as u64 {
            return Err(DecodeError {
                offset: start,
                reason: format!("{what} {v} exceeds the {} bytes left", self.remaining()),
            });
        }
        Ok(v as usize)
    }

    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], DecodeError> {
        let start = self.i;
        let n = self.varint(what)?;
        if n > self.remaining() as u64 {
            let left = self.remaining();
            self.i = start;
            return Err(self.error(format!("{what}: length {n} exceeds the {left} bytes left")));
        }
        self.take(n as usize, what)
    }

    pub fn string(&mut self, what: &str) -> Result<String, DecodeError> {
        self.str(what).map(str::to_string)
    }

    pub fn str(&mut self, what: &str) -> Result<&'a str, DecodeError> {
        let start = self.i;
        let b = self.bytes(what)?;
        std::str::from_utf8(b).map_err(|_| DecodeError {
            offset: start,
            reason: format!("{what} is not valid UTF-8"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_edges() {
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut r = Reader::new(&b);
            assert_eq!(r.varint("v"), Ok(v));
            assert!(r.is_empty());
        }
        // 11 continuation bytes and an overflowing 10th byte are both rejected.
        assert!(Reader::new(&[0xff; 11]).varint("v").is_err());
        let mut b = vec![0xff; 9];
        b.push(0x02);
        assert!(Reader::new(&b).varint("v").is_err());
        assert!(Reader::new(&[0x80]).varint("v").is_err());
    }
}
