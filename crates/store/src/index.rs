//! What is indexed, and the keys an entry's values give each kind of index.
//!
//! Kinds, per attribute type (slapd's `index` names): presence, equality, substrings
//! (initial, any, final: `sub` is all three) and ordering. Presence and ordering keys are
//! kept in ordered maps of the version; equality and substring keys are 64-bit hashes in one
//! hash trie (`Version::eq`), told apart by a tag hashed with the bytes. A hash collision only
//! adds a candidate: every candidate is checked against the full filter.
//!
//! Substring keys are cut from the value prepared with the type's SUBSTR rule
//! (`Schema::substr_value`), as slapd's are:
//! - initial: the value's first `n` bytes for every `n` in
//!   `SUBSTR_IF_MIN_LEN..=SUBSTR_IF_MAX_LEN` (values shorter than `n` give no key of that
//!   length); final: the same from the end;
//! - any: every `SUBSTR_ANY_LEN`-byte window of the value.
//!
//! A filter's initial piece of `n >= SUBSTR_IF_MIN_LEN` bytes looks up the key of its first
//! `min(n, SUBSTR_IF_MAX_LEN)` bytes; a longer piece, and each any piece, also looks up its
//! `SUBSTR_ANY_LEN`-byte windows when the type has an any index. Pieces shorter than the key
//! lengths give no key: the other parts of the filter, or a scan, narrow the search instead.
//! Bytes, not characters: a window may cut a UTF-8 character, which only makes keys that
//! filters cut the same way.

use schema::{AttrId, Schema};

use crate::entry::{AttrRef, Entry};

/// Shortest initial/final key (slapd's `index_substr_if_minlen`, default 2).
pub const SUBSTR_IF_MIN_LEN: usize = 2;
/// Longest initial/final key (slapd's `index_substr_if_maxlen`, default 4; longer here so
/// that a leading-substring search names fewer candidates).
pub const SUBSTR_IF_MAX_LEN: usize = 6;
/// Length of the any keys (slapd's `index_substr_any_len`, default 4).
pub const SUBSTR_ANY_LEN: usize = 4;
/// Step between the windows a filter's piece looks up (slapd's `index_substr_any_step`):
/// every window is indexed, but a piece need not look up all of its overlapping windows.
pub const SUBSTR_ANY_STEP: usize = 2;

/// The kinds of index kept for one attribute type (a small bit set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct IndexKinds(u8);

impl IndexKinds {
    pub const NONE: IndexKinds = IndexKinds(0);
    pub const PRES: IndexKinds = IndexKinds(1);
    pub const EQ: IndexKinds = IndexKinds(2);
    pub const SUB_INITIAL: IndexKinds = IndexKinds(4);
    pub const SUB_ANY: IndexKinds = IndexKinds(8);
    pub const SUB_FINAL: IndexKinds = IndexKinds(16);
    pub const ORD: IndexKinds = IndexKinds(32);
    /// `sub`: initial, any and final.
    pub const SUB: IndexKinds = IndexKinds(4 | 8 | 16);
    /// What a plain name in `indexes` gets: presence and equality.
    pub const DEFAULT: IndexKinds = IndexKinds(1 | 2);

    /// The kind named as in slapd's `index` directive (`pres`, `eq`, `sub`, `subinitial`,
    /// `subany`, `subfinal`) or `ord` (Linden's ordering index), case-insensitively.
    pub fn from_name(name: &str) -> Option<IndexKinds> {
        Some(match name.to_ascii_lowercase().as_str() {
            "pres" => IndexKinds::PRES,
            "eq" => IndexKinds::EQ,
            "sub" => IndexKinds::SUB,
            "subinitial" => IndexKinds::SUB_INITIAL,
            "subany" => IndexKinds::SUB_ANY,
            "subfinal" => IndexKinds::SUB_FINAL,
            "ord" => IndexKinds::ORD,
            _ => return None,
        })
    }

    /// The names `from_name` accepts, for messages.
    pub const NAMES: &'static str = "pres, eq, sub, subinitial, subany, subfinal, ord";

    /// The names of the kinds in this set (`sub` for all three substring kinds).
    pub fn names(self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for (k, n) in [
            (IndexKinds::PRES, "pres"),
            (IndexKinds::EQ, "eq"),
            (IndexKinds::SUB, "sub"),
        ] {
            if self.contains(k) {
                out.push(n);
            }
        }
        if !self.contains(IndexKinds::SUB) {
            for (k, n) in [
                (IndexKinds::SUB_INITIAL, "subinitial"),
                (IndexKinds::SUB_ANY, "subany"),
                (IndexKinds::SUB_FINAL, "subfinal"),
            ] {
                if self.contains(k) {
                    out.push(n);
                }
            }
        }
        if self.contains(IndexKinds::ORD) {
            out.push("ord");
        }
        out
    }

    pub fn contains(self, other: IndexKinds) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn intersects(self, other: IndexKinds) -> bool {
        self.0 & other.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for IndexKinds {
    type Output = IndexKinds;
    fn bitor(self, o: IndexKinds) -> IndexKinds {
        IndexKinds(self.0 | o.0)
    }
}

impl std::ops::BitOrAssign for IndexKinds {
    fn bitor_assign(&mut self, o: IndexKinds) {
        self.0 |= o.0;
    }
}

/// The indexes of a store: the kinds kept per attribute type. Fixed for the life of a store
/// (they are rebuilt from the entries at every start).
///
/// Indexed by attribute id (ids are small and dense): `kinds` is asked for every attribute of
/// every entry a write or a start-up indexes, where a hash map's lookup cost more than the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Indexes(Vec<IndexKinds>);

impl Indexes {
    pub fn new() -> Indexes {
        Indexes::default()
    }

    /// Presence and equality indexes on each of `types`.
    pub fn eq_pres(types: &[AttrId]) -> Indexes {
        let mut i = Indexes::new();
        for t in types {
            i.add(*t, IndexKinds::DEFAULT);
        }
        i
    }

    /// Adds `kinds` to what is kept for `ty`.
    pub fn add(&mut self, ty: AttrId, kinds: IndexKinds) {
        if !kinds.is_empty() {
            let i = ty.0 as usize;
            if self.0.len() <= i {
                self.0.resize(i + 1, IndexKinds::NONE);
            }
            self.0[i] |= kinds;
        }
    }

    #[inline]
    pub fn kinds(&self, ty: AttrId) -> IndexKinds {
        self.0.get(ty.0 as usize).copied().unwrap_or_default()
    }
}

/// Tags of the hashed keys, hashed with the bytes so that kinds never share a key by design.
const TAG_INITIAL: u8 = 1;
const TAG_ANY: u8 = 2;
const TAG_FINAL: u8 = 3;

/// The hash of a substring key.
pub(crate) fn sub_key(ty: AttrId, tag: u8, bytes: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    crate::hashtrie::key_of(crate::version::hasher().hash_one((ty.0, tag, bytes)))
}

/// The index keys of an entry, each list sorted and without duplicates (option variants of a
/// type share keys).
#[derive(Debug, Default)]
pub(crate) struct Keys {
    pub pres: Vec<AttrId>,
    /// Equality and substring keys (hashes).
    pub hashed: Vec<u64>,
    /// Ordering keys: the type and the value's `Schema::ord_key`.
    pub ord: Vec<(AttrId, Vec<u8>)>,
}

/// One index key of an entry (`each_key`).
pub(crate) enum Key {
    Pres(AttrId),
    /// An equality or substring key (a hash).
    Hashed(u64),
    /// An ordering key: the type and the value's `Schema::ord_key`.
    Ord(AttrId, Vec<u8>),
}

/// Calls `f` with every index key of `e`, in the order of its attributes; a key may come more
/// than once (option variants of a type share keys).
pub(crate) fn each_key(indexes: &Indexes, schema: &Schema, e: &Entry, f: &mut impl FnMut(Key)) {
    let mut hashed = Vec::new();
    for a in e.attrs() {
        attr_each_key(indexes, schema, &a, &mut hashed, f);
    }
}

/// Calls `f` with the index keys of one attribute's values (`hashed`: scratch).
fn attr_each_key(
    indexes: &Indexes,
    schema: &Schema,
    a: &AttrRef<'_>,
    hashed: &mut Vec<u64>,
    f: &mut impl FnMut(Key),
) {
    let kinds = indexes.kinds(a.ty);
    if kinds.is_empty() {
        return;
    }
    if kinds.contains(IndexKinds::PRES) {
        f(Key::Pres(a.ty));
    }
    if kinds.contains(IndexKinds::EQ) {
        for n in a.norm() {
            f(Key::Hashed(crate::version::index_key(a.ty, n)));
        }
    }
    if kinds.intersects(IndexKinds::SUB) {
        for v in a.values() {
            if let Some(s) = schema.substr_value(a.ty, v) {
                value_sub_keys(a.ty, kinds, &s, hashed);
                for k in hashed.drain(..) {
                    f(Key::Hashed(k));
                }
            }
        }
    }
    if kinds.contains(IndexKinds::ORD) {
        for v in a.values() {
            if let Some(o) = schema.ord_key(a.ty, v) {
                f(Key::Ord(a.ty, o));
            }
        }
    }
}

pub(crate) fn entry_keys(indexes: &Indexes, schema: &Schema, e: &Entry) -> Keys {
    let mut k = Keys::default();
    each_key(indexes, schema, e, &mut |key| k.push(key));
    k.finish();
    k
}

/// The index keys of the attributes of `e` of type `ty` (any options), as `entry_keys` gives
/// them.
pub(crate) fn type_keys(indexes: &Indexes, schema: &Schema, e: &Entry, ty: AttrId) -> Keys {
    let mut k = Keys::default();
    let mut hashed = Vec::new();
    for a in e.attrs().filter(|a| a.ty == ty) {
        attr_each_key(indexes, schema, &a, &mut hashed, &mut |key| k.push(key));
    }
    k.finish();
    k
}

impl Keys {
    fn push(&mut self, key: Key) {
        match key {
            Key::Pres(ty) => self.pres.push(ty),
            Key::Hashed(h) => self.hashed.push(h),
            Key::Ord(ty, o) => self.ord.push((ty, o)),
        }
    }

    /// Sorts each list and drops repeats.
    pub(crate) fn finish(&mut self) {
        self.pres.sort_unstable();
        self.pres.dedup();
        self.hashed.sort_unstable();
        self.hashed.dedup();
        self.ord.sort_unstable();
        self.ord.dedup();
    }
}

/// The substring keys of one prepared value.
fn value_sub_keys(ty: AttrId, kinds: IndexKinds, s: &[u8], out: &mut Vec<u64>) {
    let longest = s.len().min(SUBSTR_IF_MAX_LEN);
    if kinds.contains(IndexKinds::SUB_INITIAL) {
        for n in SUBSTR_IF_MIN_LEN..=longest {
            out.push(sub_key(ty, TAG_INITIAL, &s[..n]));
        }
    }
    if kinds.contains(IndexKinds::SUB_FINAL) {
        for n in SUBSTR_IF_MIN_LEN..=longest {
            out.push(sub_key(ty, TAG_FINAL, &s[s.len() - n..]));
        }
    }
    if kinds.contains(IndexKinds::SUB_ANY) {
        out.extend(s.windows(SUBSTR_ANY_LEN).map(|w| sub_key(ty, TAG_ANY, w)));
    }
}

/// The keys a substring filter's prepared pieces look up in type `ty`'s index, every one of
/// which a matching value holds; empty when no piece is long enough for a key the type has.
pub(crate) fn filter_sub_keys(
    ty: AttrId,
    kinds: IndexKinds,
    initial: Option<&[u8]>,
    any: &[Vec<u8>],
    final_: Option<&[u8]>,
) -> Vec<u64> {
    let mut out = Vec::new();
    let windows = |piece: &[u8], out: &mut Vec<u64>| {
        if kinds.contains(IndexKinds::SUB_ANY) && piece.len() >= SUBSTR_ANY_LEN {
            let last = piece.len() - SUBSTR_ANY_LEN;
            let mut at = 0;
            loop {
                out.push(sub_key(ty, TAG_ANY, &piece[at..at + SUBSTR_ANY_LEN]));
                if at == last {
                    break;
                }
                at = (at + SUBSTR_ANY_STEP).min(last);
            }
        }
    };
    for (piece, tag, kind) in [
        (initial, TAG_INITIAL, IndexKinds::SUB_INITIAL),
        (final_, TAG_FINAL, IndexKinds::SUB_FINAL),
    ] {
        let Some(p) = piece else { continue };
        if kinds.contains(kind) && p.len() >= SUBSTR_IF_MIN_LEN {
            let n = p.len().min(SUBSTR_IF_MAX_LEN);
            let key = if tag == TAG_INITIAL {
                &p[..n]
            } else {
                &p[p.len() - n..]
            };
            out.push(sub_key(ty, tag, key));
        }
        if p.len() > SUBSTR_IF_MAX_LEN || !kinds.contains(kind) {
            windows(p, &mut out);
        }
    }
    for p in any {
        windows(p, &mut out);
    }
    out.sort_unstable();
    out.dedup();
    out
}
