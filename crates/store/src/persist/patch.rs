//! Patch records (log version 5): what a batch changed of an entry that existed before it,
//! instead of the whole entry (a Put). A modify adding one member to a group of 100,000 logs
//! that member, not the group.
//!
//! A patch lists the entry's attributes after the batch, in order, each as one of:
//!
//! ```text
//! op := 0x00 index                       Keep: attribute `index` of the entry before, unchanged
//!     | 0x01 index, len name, count (len value)*, count (len value)*
//!                                        Delta: attribute `index` of the entry before (of that
//!                                        name), without the first values (each held), with the
//!                                        second appended
//!     | 0x02 len name, count (len value)*
//!                                        Set: an attribute with these values (at least one)
//! patch := id | count attrs before | count ops | op*
//! ```
//!
//! An attribute of the entry before that no op names is gone. Applying a patch rebuilds the
//! entry exactly (attribute order included) with `Entry::with_parts`, copying what it keeps
//! as stored. Which values a changed attribute lost and gained is found by one walk over the
//! values of the two states (`greedy`): the values of the old list that are not the next value
//! of the new one are removed, the rest of the new list is added. That is exact for what a
//! modify does (values dropped in place, new ones appended); for anything else (a reordered
//! list) it is still correct, only larger, and the whole list (Set) is written instead when
//! that is smaller. A patch is written only when it is smaller than the Put of the entry, so
//! an entry rewritten wholesale, or a small entry with most attributes changed, stays a Put.
//!
//! The log writer encodes patches straight from the two entries (`encode_entry_change`, no
//! allocation); `StoredPatch::between` builds the same record as an owned value, the
//! reference the writer's test compares bytes with.

use rustc_hash::FxHashSet;
use schema::{AttrId, Schema};

use super::codec::{
    attr_name, encode_put, put_bytes, put_varint, DecodeError, Reader, StoredAttr, StoredEntry,
    TAG_PATCH,
};
use crate::entry::{same_options, Attr, AttrRef, Entry, EntryId, OwnedPair, Part};

const OP_KEEP: u8 = 0;
const OP_DELTA: u8 = 1;
const OP_SET: u8 = 2;

/// What a batch changed of one entry that existed before it (see the module's notes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPatch {
    pub id: EntryId,
    /// How many attributes the entry had before (checked when the patch is applied).
    pub before: usize,
    /// The entry's attributes after the batch, in order.
    pub attrs: Vec<PatchAttr>,
}

/// One attribute of a patched entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchAttr {
    /// Attribute `i` (stored order, from 0) of the entry before, unchanged.
    Keep(usize),
    /// Attribute `at` of the entry before, whose name (canonical type name and options, as
    /// `StoredAttr::name`) is `name` (the index says which, the name is checked and read by
    /// tools), without the values `removed` (raw, each held), with `added` appended (each held
    /// by none of the values that stay).
    Delta {
        at: usize,
        name: String,
        removed: Vec<Vec<u8>>,
        added: Vec<Vec<u8>>,
    },
    /// An attribute with these values (at least one), whatever the entry before held of it.
    Set(StoredAttr),
}

/// Why a patch does not apply to the entry it names: the log is damaged (or the type or a
/// value does not fit the schema in force). Recovery adds the file and the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchError {
    Damaged(String),
    Schema(String),
}

fn varint_len(v: usize) -> usize {
    let bits = usize::BITS - (v | 1).leading_zeros();
    bits.div_ceil(7) as usize
}

/// Bytes of `bytes` (length and content).
fn bytes_len(b: &[u8]) -> usize {
    varint_len(b.len()) + b.len()
}

/// The greedy walk (module notes) over the values of an attribute before (`old`) and after
/// (`new`): calls `removed` with each old value that goes, and returns how many values of
/// `new` come first in the same order (the rest are added).
fn greedy<'a>(
    old: impl Iterator<Item = &'a [u8]>,
    new: impl Iterator<Item = &'a [u8]>,
    mut removed: impl FnMut(&'a [u8]),
) -> usize {
    let mut new = new.peekable();
    let mut kept = 0;
    for x in old {
        if new.next_if(|y| *y == x).is_some() {
            kept += 1;
        } else {
            removed(x);
        }
    }
    kept
}

impl PatchAttr {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            PatchAttr::Keep(i) => {
                out.push(OP_KEEP);
                put_varint(out, *i as u64);
            }
            PatchAttr::Delta {
                at,
                name,
                removed,
                added,
            } => {
                out.push(OP_DELTA);
                put_varint(out, *at as u64);
                put_bytes(out, name.as_bytes());
                for list in [removed, added] {
                    put_varint(out, list.len() as u64);
                    for v in list {
                        put_bytes(out, v);
                    }
                }
            }
            PatchAttr::Set(a) => {
                out.push(OP_SET);
                put_bytes(out, a.name.as_bytes());
                put_varint(out, a.values.len() as u64);
                for v in &a.values {
                    put_bytes(out, v);
                }
            }
        }
    }

    fn encoded_len(&self) -> usize {
        let mut b = Vec::new();
        self.encode(&mut b);
        b.len()
    }
}

/// The attribute of `old` with type `ty` and `options`, searched from `from` (the attributes
/// after the last one found: a modify keeps them in order) and then from the start; `from`
/// then goes on after it.
fn find_old<'a>(
    old: &'a Entry,
    from: &mut std::iter::Enumerate<crate::entry::Attrs<'a>>,
    ty: AttrId,
    options: &str,
) -> Option<(usize, AttrRef<'a>)> {
    let same = |(_, b): &(usize, AttrRef<'_>)| b.ty == ty && same_options(b.options, options);
    let mut ahead = from.clone();
    if let Some(hit) = ahead.find(same) {
        *from = ahead;
        return Some(hit);
    }
    let mut again = old.attrs().enumerate();
    let hit = again.find(same)?;
    *from = again;
    Some(hit)
}

impl StoredPatch {
    /// What `new` changed of `old` (the same entry at the batch's start), as an owned record;
    /// `None` when its DN or parent changed (then it is written whole). `schema` names the
    /// attributes (the schema of `new`'s version).
    pub fn between(old: &Entry, new: &Entry, schema: &Schema) -> Option<StoredPatch> {
        if old.dn_bytes() != new.dn_bytes() || old.parent != new.parent {
            return None;
        }
        let olds: Vec<AttrRef<'_>> = old.attrs().collect();
        let mut attrs = Vec::new();
        for a in new.attrs() {
            let name = attr_name(a.ty, a.options, schema);
            let whole = || {
                PatchAttr::Set(StoredAttr {
                    name: name.clone(),
                    values: a.values().map(<[u8]>::to_vec).collect(),
                })
            };
            let op = match olds
                .iter()
                .position(|b| b.ty == a.ty && same_options(b.options, a.options))
            {
                Some(j) if a.same_stored(&olds[j]) => PatchAttr::Keep(j),
                Some(j) => {
                    let news: Vec<&[u8]> = a.values().collect();
                    let mut removed = Vec::new();
                    let kept = greedy(olds[j].values(), news.iter().copied(), |x| {
                        removed.push(x.to_vec())
                    });
                    let added: Vec<Vec<u8>> = news[kept..].iter().map(|v| v.to_vec()).collect();
                    if removed.is_empty() && added.is_empty() {
                        PatchAttr::Keep(j)
                    } else {
                        let delta = PatchAttr::Delta {
                            at: j,
                            name: name.clone(),
                            removed,
                            added,
                        };
                        let set = whole();
                        if delta.encoded_len() < set.encoded_len() {
                            delta
                        } else {
                            set
                        }
                    }
                }
                None => whole(),
            };
            attrs.push(op);
        }
        Some(StoredPatch {
            id: new.id,
            before: olds.len(),
            attrs,
        })
    }

    /// Encodes the record, tag included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(TAG_PATCH);
        put_varint(out, u64::from(self.id));
        put_varint(out, self.before as u64);
        put_varint(out, self.attrs.len() as u64);
        for a in &self.attrs {
            a.encode(out);
        }
    }

    /// Decodes the record after its tag.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<StoredPatch, DecodeError> {
        let id = r.u32_varint("entry id")?;
        let before = r.u32_varint("attribute count before")? as usize;
        let n = r.count("attribute count")?;
        let mut attrs = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.pos();
            attrs.push(match r.u8("patch operation")? {
                OP_KEEP => PatchAttr::Keep(r.u32_varint("attribute index")? as usize),
                OP_DELTA => {
                    let at = r.u32_varint("attribute index")? as usize;
                    let name = r.string("attribute name")?;
                    let removed = values(r, "removed value")?;
                    let added = values(r, "added value")?;
                    PatchAttr::Delta {
                        at,
                        name,
                        removed,
                        added,
                    }
                }
                OP_SET => {
                    let name = r.string("attribute name")?;
                    let values = values(r, "value")?;
                    if values.is_empty() {
                        return Err(DecodeError {
                            offset: at,
                            reason: format!("a patch sets attribute '{name}' to no values"),
                        });
                    }
                    PatchAttr::Set(StoredAttr { name, values })
                }
                t => {
                    return Err(DecodeError {
                        offset: at,
                        reason: format!("unknown patch operation {t:#04x}"),
                    })
                }
            });
        }
        Ok(StoredPatch { id, before, attrs })
    }

    /// The entry `old` (this patch's entry as it stands where the patch is replayed) with the
    /// patch applied. Every step is checked: the attribute count, each index, each value
    /// removed (held) and added (not held), no attribute twice, none left empty; a patch that
    /// does not fit is `PatchError::Damaged`, never a different entry.
    pub fn apply(&self, old: &Entry, schema: &Schema) -> Result<Entry, PatchError> {
        let dn = old.dn();
        let damaged =
            |m: String| PatchError::Damaged(format!("patch of entry {} '{dn}': {m}", self.id));
        let olds: Vec<AttrRef<'_>> = old.attrs().collect();
        if olds.len() != self.before {
            return Err(damaged(format!(
                "the entry has {} attributes, the patch was made for {}",
                olds.len(),
                self.before
            )));
        }
        let mut used = vec![false; olds.len()];
        let mut claim = |j: usize, what: &str| -> Result<(), PatchError> {
            match used.get_mut(j) {
                Some(u) if !*u => {
                    *u = true;
                    Ok(())
                }
                Some(_) => Err(damaged(format!("{what} names attribute {j} twice"))),
                None => Err(damaged(format!(
                    "{what} names attribute {j}; the entry has {}",
                    olds.len()
                ))),
            }
        };
        enum Resolved {
            Keep(usize),
            Delta(usize, Vec<usize>, Vec<OwnedPair>),
            New(Attr),
        }
        let mut resolved = Vec::with_capacity(self.attrs.len());
        for op in &self.attrs {
            resolved.push(match op {
                PatchAttr::Keep(i) => {
                    claim(*i, "a kept attribute")?;
                    Resolved::Keep(*i)
                }
                PatchAttr::Delta {
                    at: j,
                    name,
                    removed,
                    added,
                } => {
                    let j = *j;
                    let (ty, options) = resolve(schema, name, dn)?;
                    claim(j, &format!("the change of '{name}'"))?;
                    if olds[j].ty != ty || !same_options(olds[j].options, &options) {
                        return Err(damaged(format!(
                            "changes attribute {j} as '{name}', but the entry's attribute {j} is '{}'",
                            attr_name(olds[j].ty, olds[j].options, schema)
                        )));
                    }
                    let (drop, add) = delta(schema, &olds[j], ty, name, removed, added, dn)
                        .map_err(|e| match e {
                            PatchError::Damaged(m) => damaged(m),
                            other => other,
                        })?;
                    Resolved::Delta(j, drop, add)
                }
                PatchAttr::Set(a) => {
                    let (ty, options) = resolve(schema, &a.name, dn)?;
                    let values = a.values.iter().map(|v| v.as_slice().into()).collect();
                    let attr = Attr::new(schema, ty, &options, values).map_err(|e| {
                        PatchError::Schema(format!("entry '{dn}', attribute '{}': {e}", a.name))
                    })?;
                    Resolved::New(attr)
                }
            });
        }
        let mut keys: Vec<(AttrId, &str)> = resolved
            .iter()
            .map(|r| match r {
                Resolved::Keep(j) | Resolved::Delta(j, ..) => (olds[*j].ty, olds[*j].options),
                Resolved::New(a) => (a.ty, &*a.options),
            })
            .collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(damaged(format!(
                "the entry would hold attribute '{}' twice",
                attr_name(w[0].0, w[0].1, schema)
            )));
        }
        let parts: Vec<Part<'_>> = resolved
            .iter()
            .map(|r| match r {
                Resolved::Keep(j) => Part::Kept {
                    attr: olds[*j],
                    drop: &[],
                    add: &[],
                },
                Resolved::Delta(j, drop, add) => Part::Kept {
                    attr: olds[*j],
                    drop,
                    add,
                },
                Resolved::New(a) => Part::New(a),
            })
            .collect();
        Ok(old.with_parts(&parts))
    }
}

/// The attribute type and options of a record's attribute name.
fn resolve(schema: &Schema, name: &str, dn: &str) -> Result<(AttrId, String), PatchError> {
    let (base, options) = match name.find(';') {
        Some(i) => name.split_at(i),
        None => (name, ""),
    };
    let ty = schema.attr_by_name(base).ok_or_else(|| {
        PatchError::Schema(format!(
            "entry '{dn}': attribute type '{base}' is not defined in the schema in force; \
             load the schema that defines it"
        ))
    })?;
    Ok((ty, options.to_ascii_lowercase()))
}

/// The positions of `attr` a Delta removes (ascending) and the pairs it adds, checked.
fn delta(
    schema: &Schema,
    attr: &AttrRef<'_>,
    ty: AttrId,
    name: &str,
    removed: &[Vec<u8>],
    added: &[Vec<u8>],
    dn: &str,
) -> Result<(Vec<usize>, Vec<OwnedPair>), PatchError> {
    let gone: FxHashSet<&[u8]> = removed.iter().map(Vec::as_slice).collect();
    if gone.len() != removed.len() {
        return Err(PatchError::Damaged(format!(
            "removes a value of '{name}' twice"
        )));
    }
    let mut add = Vec::with_capacity(added.len());
    for v in added {
        let norm = schema
            .normalize_eq(ty, v)
            .map_err(|e| PatchError::Schema(format!("entry '{dn}', attribute '{name}': {e}")))?;
        add.push((Box::<[u8]>::from(v.as_slice()), norm.into_boxed_slice()));
    }
    let new_norms: FxHashSet<&[u8]> = add.iter().map(|(_, n)| &**n).collect();
    if new_norms.len() != add.len() {
        return Err(PatchError::Damaged(format!(
            "adds a value of '{name}' twice"
        )));
    }
    let mut drop = Vec::with_capacity(removed.len());
    for (i, (raw, norm)) in attr.pairs().enumerate() {
        if gone.contains(raw) {
            drop.push(i);
        } else if new_norms.contains(norm) {
            return Err(PatchError::Damaged(format!(
                "adds to '{name}' the value '{}', which it holds already",
                String::from_utf8_lossy(raw)
            )));
        }
    }
    if drop.len() != removed.len() {
        let missing = removed
            .iter()
            .find(|v| !attr.values().any(|x| x == v.as_slice()))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        return Err(PatchError::Damaged(format!(
            "removes from '{name}' the value '{missing}', which it does not hold"
        )));
    }
    if attr.len() - drop.len() + add.len() == 0 {
        return Err(PatchError::Damaged(format!(
            "leaves '{name}' with no values"
        )));
    }
    Ok((drop, add))
}

fn values(r: &mut Reader<'_>, what: &str) -> Result<Vec<Vec<u8>>, DecodeError> {
    let n = r.count(what)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(r.bytes(what)?.to_vec());
    }
    Ok(out)
}

/// Whether the Put of `e` takes more than `limit` bytes (tag included): counted up to the
/// first attribute past the limit, so a large entry is not walked to the end.
fn put_exceeds(e: &Entry, schema: &Schema, limit: usize) -> bool {
    let dn = e.dn_bytes();
    let mut len = 1
        + varint_len(e.id as usize)
        + varint_len(e.parent.map_or(0, |p| p as usize + 1))
        + bytes_len(dn)
        + varint_len(e.attrs().len());
    for a in e.attrs() {
        let name = schema.attr(a.ty).name().len() + a.options.len();
        len += varint_len(name) + name + varint_len(a.len());
        if len > limit {
            return true;
        }
        for v in a.values() {
            len += bytes_len(v);
            if len > limit {
                return true;
            }
        }
    }
    len > limit
}

/// Writes the name of attribute `a` as `bytes` (canonical type name and options).
fn put_name(out: &mut Vec<u8>, a: &AttrRef<'_>, schema: &Schema) {
    let base = schema.attr(a.ty).name();
    put_varint(out, (base.len() + a.options.len()) as u64);
    out.extend_from_slice(base.as_bytes());
    out.extend_from_slice(a.options.as_bytes());
}

/// Appends one attribute of a patch, `a` of the new entry, against its old state `b`
/// (attribute `j` of the entry before), whichever of Keep, Delta and Set is smallest (as
/// `StoredPatch::between` chooses).
fn encode_attr(
    out: &mut Vec<u8>,
    schema: &Schema,
    a: &AttrRef<'_>,
    old: Option<(usize, AttrRef<'_>)>,
) {
    let name = schema.attr(a.ty).name().len() + a.options.len();
    let Some((j, b)) = old else {
        return encode_set(out, schema, a);
    };
    if a.same_stored(&b) {
        out.push(OP_KEEP);
        put_varint(out, j as u64);
        return;
    }
    // One walk (the greedy one, inlined): what goes, what stays, where the added values
    // start; the first few values removed are kept to be written without a second walk.
    let (mut gone, mut gone_bytes, mut kept, mut kept_bytes) = (0usize, 0usize, 0usize, 0usize);
    let mut first_gone: [&[u8]; FEW] = [&[]; FEW];
    let mut new = a.pairs().peekable();
    for (x, _) in b.pairs() {
        if let Some((y, _)) = new.next_if(|(y, _)| *y == x) {
            kept += 1;
            kept_bytes += bytes_len(y);
        } else {
            if let Some(slot) = first_gone.get_mut(gone) {
                *slot = x;
            }
            gone += 1;
            gone_bytes += bytes_len(x);
        }
    }
    let rest = new;
    let added = a.len() - kept;
    if gone == 0 && added == 0 {
        out.push(OP_KEEP);
        put_varint(out, j as u64);
        return;
    }
    let added_bytes: usize = rest.clone().map(|(v, _)| bytes_len(v)).sum();
    let head = 1 + varint_len(name) + name;
    let delta =
        head + varint_len(j) + varint_len(gone) + gone_bytes + varint_len(added) + added_bytes;
    let set = head + varint_len(a.len()) + kept_bytes + added_bytes;
    if delta >= set {
        return encode_set(out, schema, a);
    }
    out.push(OP_DELTA);
    put_varint(out, j as u64);
    put_name(out, a, schema);
    put_varint(out, gone as u64);
    if gone <= FEW {
        for x in &first_gone[..gone] {
            put_bytes(out, x);
        }
    } else {
        greedy(b.values(), a.values(), |x| put_bytes(out, x));
    }
    put_varint(out, added as u64);
    for (v, _) in rest {
        put_bytes(out, v);
    }
}

/// Values removed from one attribute that the encoder keeps from its walk (more are found by
/// walking again).
const FEW: usize = 16;

fn encode_set(out: &mut Vec<u8>, schema: &Schema, a: &AttrRef<'_>) {
    out.push(OP_SET);
    put_name(out, a, schema);
    put_varint(out, a.len() as u64);
    for v in a.values() {
        put_bytes(out, v);
    }
}

/// Appends the record of entry `new` as a batch left it, `old` being the same entry at the
/// batch's start (`None`: it is new): a Patch when that is smaller than a Put, else a Put.
/// The same bytes as `entry_change(old, new, schema).encode()`, without building it.
pub fn encode_entry_change(old: Option<&Entry>, new: &Entry, schema: &Schema, out: &mut Vec<u8>) {
    let start = out.len();
    if let Some(old) = old.filter(|o| o.dn_bytes() == new.dn_bytes() && o.parent == new.parent) {
        out.push(TAG_PATCH);
        put_varint(out, u64::from(new.id));
        put_varint(out, old.attrs().len() as u64);
        put_varint(out, new.attrs().len() as u64);
        let mut from = old.attrs().enumerate();
        for a in new.attrs() {
            let b = find_old(old, &mut from, a.ty, a.options);
            encode_attr(out, schema, &a, b);
        }
        if put_exceeds(new, schema, out.len() - start) {
            return;
        }
        out.truncate(start);
    }
    encode_put(new, schema, out);
}

/// The owned record of entry `new` as a batch left it (see `encode_entry_change`).
pub fn entry_change(old: Option<&Entry>, new: &Entry, schema: &Schema) -> super::Change {
    let put = StoredEntry::from_entry(new, schema);
    if let Some(p) = old.and_then(|o| StoredPatch::between(o, new, schema)) {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        p.encode(&mut a);
        super::Change::Put(put.clone()).encode(&mut b);
        if a.len() < b.len() {
            return super::Change::Patch(p);
        }
    }
    super::Change::Put(put)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_len_matches_put_varint() {
        for v in [0usize, 1, 127, 128, 16_383, 16_384, 1 << 21, (1 << 28) + 5] {
            let mut b = Vec::new();
            put_varint(&mut b, v as u64);
            assert_eq!(varint_len(v), b.len(), "{v}");
        }
    }

    #[test]
    fn greedy_finds_drops_and_appends() {
        let old: Vec<&[u8]> = vec![b"a", b"b", b"c", b"d"];
        let new: Vec<&[u8]> = vec![b"a", b"c", b"d", b"e"];
        let mut gone = Vec::new();
        let kept = greedy(old.iter().copied(), new.iter().copied(), |x| gone.push(x));
        assert_eq!(kept, 3);
        assert_eq!(gone, vec![b"b" as &[u8]]);
    }
}
