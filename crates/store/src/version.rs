//! One consistent version of the directory.
//!
//! Every map is persistent (structurally shared), so cloning a version is O(1) and a writer
//! batch copies only the paths it touches: the entries are a radix array by id (`IdMap`), the
//! equality index and the DN map are hash tries (`HashTrie`), and the small maps (children,
//! presence) are `imbl` B-tree maps. Posting lists are `Arc<RoaringBitmap>` (or one inline
//! id): a batch copies a list the first time it changes it (`Arc::make_mut`) and edits it in
//! place after that, so the copy cost is paid once per list per batch, not per operation.

use std::ops::Bound;
use std::sync::Arc;

use imbl::OrdMap;
use roaring::RoaringBitmap;
use schema::{AttrId, NormDn, Schema};

use crate::entry::{AttrRef, Entry, EntryId};
use crate::hashtrie::{key_of, Buckets, HashTrie, PostingRef};
use crate::idmap::IdMap;
use crate::index::{each_key, entry_keys, type_keys, IndexKinds, Indexes, Key, Keys};
use crate::tombstone::Tombstones;

/// Equality index key: a 64-bit hash of the attribute type and the equality-normalized value
/// (`index_key`). Index lookups only propose candidates, and every candidate is checked against
/// the full filter, so a hash collision costs one extra check and never a wrong answer; in
/// exchange a key needs no allocation and compares in one instruction.
pub type IndexKey = u64;

/// SipHash with keys drawn at random once per process (stable within it; never stored), so
/// that no client can choose values that collide.
pub(crate) fn hasher() -> &'static std::hash::RandomState {
    static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    KEYS.get_or_init(std::hash::RandomState::new)
}

/// The DN map's key of a normalized DN.
fn dn_key(norm: &str) -> u64 {
    use std::hash::BuildHasher;
    key_of(hasher().hash_one(norm.as_bytes()))
}

/// The equality index key of a normalized value of type `ty`.
pub fn index_key(ty: AttrId, norm: &[u8]) -> IndexKey {
    use std::hash::BuildHasher;
    key_of(hasher().hash_one((ty.0, norm)))
}

/// The entries holding one ordering key. Most values name exactly one entry, so that case is
/// stored inline: a bitmap per value would cost a few hundred bytes per entry and attribute.
/// (The hashed keys keep theirs in `HashTrie`, more compactly.)
#[derive(Clone, Debug)]
pub enum Posting {
    One(EntryId),
    Many(Arc<RoaringBitmap>),
}

impl Posting {
    pub fn as_ref(&self) -> PostingRef<'_> {
        match self {
            Posting::One(id) => PostingRef::One(*id),
            Posting::Many(b) => PostingRef::Many(b),
        }
    }

    fn insert(&mut self, id: EntryId) {
        match self {
            Posting::One(old) if *old == id => {}
            Posting::One(old) => {
                let mut b = RoaringBitmap::new();
                b.insert(*old);
                b.insert(id);
                *self = Posting::Many(Arc::new(b));
            }
            Posting::Many(b) => {
                Arc::make_mut(b).insert(id);
            }
        }
    }

    /// Removes `id`; true when nothing is left.
    fn remove(&mut self, id: EntryId) -> bool {
        match self {
            Posting::One(old) => *old == id,
            Posting::Many(b) => {
                let b = Arc::make_mut(b);
                b.remove(id);
                match b.len() {
                    0 => true,
                    1 => {
                        if let Some(last) = b.min() {
                            *self = Posting::One(last);
                        }
                        false
                    }
                    _ => false,
                }
            }
        }
    }
}

/// The values a change added to one attribute type (without options), by equality-normalized
/// form, exactly (none was held before), when every other value it changed was one it removed:
/// `Txn::replace_attrs_with` then updates the equality index by the added values alone.
///
/// The keys of the values removed stay in the index: finding out whether a value that stays
/// shares a removed value's 48-bit key (`hashtrie::key_of`) would mean hashing every value
/// that stays, and removing the key without that check would, once in about 10^10 removals
/// from an attribute of 100,000 values, make a search miss this entry. A key left behind only
/// proposes this entry as a candidate that the filter then rejects (every index user checks
/// its candidates: `plan`), and `Version::may_hold` then answers "maybe". Such keys last until
/// the server restarts (indexes are built at start), one posting per value removed. The
/// callers use it for attributes with many values (`dit::modify`).
#[derive(Debug, Clone)]
pub struct ValueDelta<'a> {
    pub ty: AttrId,
    pub added: Vec<&'a [u8]>,
}

/// The items of sorted `a` that sorted `b` lacks.
fn only_in<'k, K: Ord + Clone>(a: &'k [K], b: &'k [K]) -> impl Iterator<Item = K> + 'k {
    a.iter().filter(|k| b.binary_search(k).is_err()).cloned()
}

#[derive(Clone)]
pub struct Version {
    /// Number of the batch that produced this version.
    pub seq: u64,
    pub(crate) entries: IdMap<Arc<Entry>>,
    /// Entries by the hash of their normalized DN (`dn_key`), with the id to tell apart
    /// the DNs of one hash: a lookup checks the entry's own DN, so a collision costs a
    /// comparison. A map keyed by the DN strings cost ~90 bytes per entry; this costs ~20.
    pub(crate) by_dn: HashTrie,
    pub(crate) children: OrdMap<EntryId, Arc<RoaringBitmap>>,
    /// Equality and substring keys (`index`): hashes of the type, kind and bytes.
    pub(crate) eq: HashTrie,
    pub(crate) pres: OrdMap<AttrId, Arc<RoaringBitmap>>,
    /// The ordering index: by type and `Schema::ord_key`, so a range of keys is a range of
    /// values in the ordering rule's order.
    pub(crate) ord: OrdMap<(AttrId, Vec<u8>), Posting>,
    pub(crate) indexes: Arc<Indexes>,
    pub(crate) next_id: EntryId,
    /// The schema this version's entries are read with (design.md seam 4). The writer
    /// replaces it only by a compatible extension (`Schema::extend`: ids are appended, never
    /// changed), so an entry, an index key or a cached attribute id of an older version means
    /// the same under every newer schema.
    pub(crate) schema: Arc<Schema>,
    /// What is remembered of deleted entries, for replication (`tombstone`).
    pub(crate) tombstones: Tombstones,
}

/// One posting per run of equal keys in `pairs` (sorted by key, then id).
fn posting_runs<K: Clone + PartialEq>(
    pairs: &[(K, EntryId)],
) -> impl Iterator<Item = (K, Posting)> + '_ {
    pairs.chunk_by(|a, b| a.0 == b.0).map(|run| {
        let posting = if run.len() == 1 {
            Posting::One(run[0].1)
        } else {
            Posting::Many(Arc::new(
                RoaringBitmap::from_sorted_iter(run.iter().map(|p| p.1)).unwrap_or_default(),
            ))
        };
        (run[0].0.clone(), posting)
    })
}

/// Bitmaps of ids by key, for one range of entries; the bitmaps of the ranges are joined
/// with `|=`.
struct IdRuns<K> {
    runs: Vec<(K, RoaringBitmap)>,
    at: rustc_hash::FxHashMap<K, usize>,
    /// The run pushed to last, tried first (entries come in runs under one parent).
    last: usize,
}

impl<K> Default for IdRuns<K> {
    fn default() -> Self {
        IdRuns {
            runs: Vec::new(),
            at: Default::default(),
            last: 0,
        }
    }
}

impl<K: std::hash::Hash + Eq + Copy> IdRuns<K> {
    #[inline]
    fn push(&mut self, key: K, id: EntryId) {
        let i = match self.runs.get(self.last) {
            Some((k, _)) if *k == key => self.last,
            _ => {
                let runs = &mut self.runs;
                *self.at.entry(key).or_insert_with(|| {
                    runs.push((key, RoaringBitmap::new()));
                    runs.len() - 1
                })
            }
        };
        self.last = i;
        // Not `push`: it finds a bitset container's maximum by scanning its words from the end
        // (up to 1,024 for each id, measured as a fifth of a start's time). A repeat within
        // the entry is ignored.
        self.runs[i].1.insert(id);
    }
}

/// What one thread of a bulk build gathers from a range of entries (in id order).
struct RangeKeys {
    hashed: Buckets,
    /// The keys of `Hot` (many entries hold each), as bitmaps.
    hot: IdRuns<IndexKey>,
    pres: IdRuns<AttrId>,
    /// Children by parent. Most entries share their parent with the one before, so the last
    /// parent's place is tried first.
    kids: IdRuns<EntryId>,
    ordered: Vec<((AttrId, Vec<u8>), EntryId)>,
}

/// The index keys that many entries hold, found in a sample of them before a bulk build:
/// they are gathered as bitmaps (a few bytes an entry) instead of (key, id) pairs (16 bytes),
/// which at 50 million entries is the difference between a start-up that fits in memory and
/// one that does not. Also the number of other keys per entry, to size the pairs' buckets.
struct Hot {
    keys: rustc_hash::FxHashSet<IndexKey>,
    /// Keys outside `keys` per sampled entry.
    cold_per_entry: f64,
}

/// Entries sampled (evenly over all of them) to find the `Hot` keys.
const HOT_SAMPLE: usize = 1 << 16;
/// A key held by at least this many sampled entries is hot (at 50 million entries: one in
/// 16,384, some 3,000 entries).
const HOT_MIN: u32 = 4;

fn hot_keys(all: &[Arc<Entry>], indexes: &Indexes, schema: &Schema) -> Hot {
    let step = (all.len() / HOT_SAMPLE).max(1);
    let mut counts: rustc_hash::FxHashMap<IndexKey, u32> = Default::default();
    let mut sampled = 0usize;
    for e in all.iter().step_by(step) {
        sampled += 1;
        each_key(indexes, schema, e, &mut |k| {
            if let Key::Hashed(h) = k {
                *counts.entry(h).or_default() += 1;
            }
        });
    }
    let mut cold = 0u64;
    let mut keys = rustc_hash::FxHashSet::default();
    for (k, n) in counts {
        if n >= HOT_MIN {
            keys.insert(k);
        } else {
            cold += u64::from(n);
        }
    }
    Hot {
        keys,
        cold_per_entry: cold as f64 / sampled.max(1) as f64,
    }
}

fn range_keys(entries: &[Arc<Entry>], indexes: &Indexes, schema: &Schema, hot: &Hot) -> RangeKeys {
    let cold = (entries.len() as f64 * hot.cold_per_entry) as usize;
    let mut r = RangeKeys {
        hashed: Buckets::with_capacity(cold),
        hot: IdRuns::default(),
        pres: IdRuns::default(),
        kids: IdRuns::default(),
        ordered: Vec::new(),
    };
    for e in entries {
        let id = e.id;
        if let Some(p) = e.parent {
            r.kids.push(p, id);
        }
        each_key(indexes, schema, e, &mut |k| match k {
            Key::Pres(ty) => r.pres.push(ty, id),
            Key::Hashed(h) if hot.keys.contains(&h) => r.hot.push(h, id),
            Key::Hashed(h) => r.hashed.push(h, id),
            Key::Ord(ty, o) => r.ordered.push(((ty, o), id)),
        });
    }
    r
}

/// Joins the bitmaps of consecutive ranges, by key.
fn join_bitmaps<K: Ord + Copy>(
    parts: impl Iterator<Item = IdRuns<K>>,
) -> std::collections::BTreeMap<K, RoaringBitmap> {
    let mut all: std::collections::BTreeMap<K, RoaringBitmap> = Default::default();
    for part in parts {
        for (k, b) in part.runs {
            *all.entry(k).or_default() |= b;
        }
    }
    all
}

/// `join_bitmaps`, shared.
fn join_runs<K: Ord + Copy>(
    parts: impl Iterator<Item = IdRuns<K>>,
) -> OrdMap<K, Arc<RoaringBitmap>> {
    join_bitmaps(parts)
        .into_iter()
        .map(|(k, b)| (k, Arc::new(b)))
        .collect()
}

impl Version {
    pub(crate) fn empty(indexes: Indexes, schema: Arc<Schema>) -> Version {
        Version {
            seq: 0,
            entries: IdMap::new(),
            by_dn: HashTrie::new(),
            children: OrdMap::new(),
            eq: HashTrie::new(),
            pres: OrdMap::new(),
            ord: OrdMap::new(),
            indexes: Arc::new(indexes),
            next_id: 1,
            schema,
            tombstones: Tombstones::default(),
        }
    }

    /// The tombstones of deleted entries (`tombstone`).
    pub fn tombstones(&self) -> &Tombstones {
        &self.tombstones
    }

    /// This version with `tombstones` (recovered from disk with the entries).
    pub fn with_tombstones(mut self, tombstones: Tombstones) -> Version {
        self.tombstones = tombstones;
        self
    }

    /// A version holding `entries` (e.g. recovered from disk), as of batch `seq`, allocating
    /// new ids from `next_id`. Each entry's `parent` must be among `entries` (or `None`).
    ///
    /// Built in bulk rather than entry by entry (start-up time is this plus reading the files),
    /// on every core: each thread collects the index keys of a range of entries, sorted into
    /// buckets by the tries' first level (the keys many entries hold straight into bitmaps:
    /// `Hot`); then each thread sorts and builds whole first-level slots of the trie
    /// (`HashTrie::from_buckets`); then the same for the DNs. Bitmaps (presence, children)
    /// are appended to in id order and joined across ranges.
    pub fn restore(
        schema: Arc<Schema>,
        indexes: &Indexes,
        entries: impl IntoIterator<Item = Entry>,
        next_id: EntryId,
        seq: u64,
    ) -> Version {
        let mut v = Version::empty(indexes.clone(), schema);
        let mut all: Vec<Arc<Entry>> = entries.into_iter().map(Arc::new).collect();
        if !all.windows(2).all(|w| w[0].id < w[1].id) {
            // A repeated id: the last one wins, as successive puts would have it (the sort is
            // stable, so after reversing, the first of a run of equal ids is the last given).
            all.reverse();
            all.sort_by_key(|e| e.id);
            all.dedup_by_key(|e| e.id);
        }
        let last = all.last().map_or(0, |e| e.id.saturating_add(1));
        v.next_id = v.next_id.max(last).max(next_id);
        v.seq = seq;

        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 64);
        let per = all.len().div_ceil(threads).max(1);
        let (indexes, schema) = (&*v.indexes, &*v.schema);
        let hot = hot_keys(&all, indexes, schema);
        let hot = &hot;
        let parts = crate::par::map(all.chunks(per).collect(), |range| {
            range_keys(range, indexes, schema, hot)
        });
        let mut hashed = Vec::with_capacity(parts.len());
        let mut pres = Vec::with_capacity(parts.len());
        let mut kids = Vec::with_capacity(parts.len());
        let mut held = Vec::with_capacity(parts.len());
        let mut ordered = Vec::new();
        for p in parts {
            hashed.push(p.hashed);
            held.push(p.hot);
            pres.push(p.pres);
            kids.push(p.kids);
            ordered.extend(p.ordered);
        }
        let held = join_bitmaps(held.into_iter()).into_iter().collect();
        v.eq = HashTrie::from_buckets(hashed, held, threads);
        // The DN map in a second pass, once the index keys' pairs are gone: at 50 million
        // entries the two sets of pairs together were 2.4 GB at the peak of a start-up.
        let names = crate::par::map(all.chunks(per).collect(), |range: &[Arc<Entry>]| {
            let mut b = Buckets::with_capacity(range.len());
            for e in range {
                b.push(dn_key(e.ndn_str()), e.id);
            }
            b
        });
        v.by_dn = HashTrie::from_buckets(names, Vec::new(), threads);
        v.pres = join_runs(pres.into_iter());
        v.children = join_runs(kids.into_iter());
        ordered.sort_unstable();
        ordered.dedup();
        v.ord = posting_runs(&ordered).collect();
        let mut ents = IdMap::new();
        for e in all {
            ents.insert(e.id, e);
        }
        v.entries = ents;
        v
    }

    /// The schema of this version: every attribute id its entries hold is defined in it.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The id the next new entry will get.
    pub fn next_id(&self) -> EntryId {
        self.next_id
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, id: EntryId) -> Option<&Arc<Entry>> {
        self.entries.get(id)
    }

    /// The entry with this normalized DN.
    pub fn lookup(&self, ndn: &NormDn) -> Option<&Arc<Entry>> {
        self.lookup_norm(&ndn.norm)
    }

    pub fn lookup_norm(&self, norm: &str) -> Option<&Arc<Entry>> {
        self.by_dn
            .get(dn_key(norm))?
            .iter()
            .filter_map(|id| self.entries.get(id))
            .find(|e| e.ndn_str() == norm)
    }

    /// The nearest existing ancestor of a DN that does not exist (for matchedDN), as stored.
    pub fn matched(&self, ndn: &NormDn) -> Option<&Arc<Entry>> {
        self.matched_norm(&ndn.norm)
    }

    /// `matched` for a normalized DN string.
    pub fn matched_norm(&self, norm: &str) -> Option<&Arc<Entry>> {
        let mut cur = schema::norm_parent(norm);
        while let Some(p) = cur {
            if let Some(e) = self.lookup_norm(p) {
                return Some(e);
            }
            cur = schema::norm_parent(p);
        }
        None
    }

    pub fn children(&self, id: EntryId) -> Option<&RoaringBitmap> {
        self.children.get(&id).map(|b| &**b)
    }

    pub fn num_children(&self, id: EntryId) -> u64 {
        self.children(id).map_or(0, |b| b.len())
    }

    /// Whether `ty` has an equality index.
    pub fn is_indexed(&self, ty: AttrId) -> bool {
        self.index_kinds(ty).contains(IndexKinds::EQ)
    }

    /// The kinds of index kept for `ty`.
    pub fn index_kinds(&self, ty: AttrId) -> IndexKinds {
        self.indexes.kinds(ty)
    }

    /// The postings of hashed key `key` (equality or substring).
    pub(crate) fn hashed_postings(&self, key: IndexKey) -> Option<PostingRef<'_>> {
        self.eq.get(key)
    }

    /// Adds to `out` the entries with an ordering key of `ty` within `lo..=hi` (`None`:
    /// unbounded on that side).
    pub(crate) fn ord_range_into(
        &self,
        ty: AttrId,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        out: &mut RoaringBitmap,
    ) {
        let from = match lo {
            Some(k) => Bound::Included((ty, k.to_vec())),
            None => Bound::Included((ty, Vec::new())),
        };
        let to = match hi {
            Some(k) => Bound::Included((ty, k.to_vec())),
            None => match ty.0.checked_add(1) {
                Some(next) => Bound::Excluded((AttrId(next), Vec::new())),
                None => Bound::Unbounded,
            },
        };
        if let (Bound::Included(a), Bound::Included(b)) = (&from, &to) {
            if a > b {
                return;
            }
        }
        for (_, p) in self.ord.range((from, to)) {
            p.as_ref().union_into(out);
        }
    }

    /// Whether entry `id` may hold a value of type `ty` (with any options) whose equality form
    /// is `norm`, by the equality index alone: `Some(false)` is certain, `Some(true)` is
    /// almost certain (two values may share a 48-bit key); `None` when `ty` has no equality
    /// index. Lets a change adding a value to an attribute of 100,000 values skip comparing it
    /// with each of them.
    pub fn may_hold(&self, id: EntryId, ty: AttrId, norm: &[u8]) -> Option<bool> {
        self.is_indexed(ty)
            .then(|| self.eq_postings(ty, norm).is_some_and(|p| p.contains(id)))
    }

    /// Whether any entry may hold a value of type `ty` whose equality form is `norm`, by the
    /// equality index alone (`true` when `ty` has none): one lookup, no allocation.
    pub fn may_hold_any(&self, ty: AttrId, norm: &[u8]) -> bool {
        !self.is_indexed(ty) || self.eq_postings(ty, norm).is_some_and(|p| p.count() > 0)
    }

    /// The entries that may hold a value of type `ty` whose equality form is `norm`, by the
    /// equality index (a superset: keys may collide); `None` when `ty` has none.
    pub fn holders(&self, ty: AttrId, norm: &[u8]) -> Option<RoaringBitmap> {
        if !self.is_indexed(ty) {
            return None;
        }
        let mut out = RoaringBitmap::new();
        if let Some(p) = self.eq_postings(ty, norm) {
            p.union_into(&mut out);
        }
        Some(out)
    }

    pub(crate) fn eq_postings(&self, ty: AttrId, norm: &[u8]) -> Option<PostingRef<'_>> {
        self.eq.get(index_key(ty, norm))
    }

    pub(crate) fn pres_postings(&self, ty: AttrId) -> Option<&RoaringBitmap> {
        self.pres.get(&ty).map(|b| &**b)
    }

    /// All entries in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.entries.values()
    }

    // ---- mutation, used only by the writer on its private working copy ----

    fn index_keys(&self, e: &Entry) -> Keys {
        entry_keys(&self.indexes, &self.schema, e)
    }

    fn index_add(
        &mut self,
        id: EntryId,
        pres: &[AttrId],
        eq: &[IndexKey],
        ord: &[(AttrId, Vec<u8>)],
    ) {
        for key in ord {
            match self.ord.get_mut(key) {
                Some(p) => p.insert(id),
                None => {
                    self.ord.insert(key.clone(), Posting::One(id));
                }
            }
        }
        for ty in pres {
            Arc::make_mut(self.pres.entry(*ty).or_default()).insert(id);
        }
        for key in eq {
            self.eq.insert(*key, id);
        }
    }

    fn index_remove(
        &mut self,
        id: EntryId,
        pres: &[AttrId],
        eq: &[IndexKey],
        ord: &[(AttrId, Vec<u8>)],
    ) {
        for key in ord {
            if let Some(p) = self.ord.get_mut(key) {
                if p.remove(id) {
                    self.ord.remove(key);
                }
            }
        }
        for ty in pres {
            if let Some(b) = self.pres.get_mut(ty) {
                Arc::make_mut(b).remove(id);
            }
        }
        for key in eq {
            self.eq.remove(*key, id);
        }
    }

    /// Inserts or replaces an entry, touching only the index keys, DN and parent links that
    /// change: every path copied in these persistent maps is memory copied once per batch, so a
    /// modify of an unindexed attribute must not rewrite the indexes.
    pub(crate) fn put(&mut self, entry: Entry) {
        self.put_with(entry, &[]);
    }

    /// `put` of an entry already shared (the writer's undo log puts back the very entry it
    /// replaced).
    pub(crate) fn put_arc(&mut self, entry: Arc<Entry>) {
        self.put_arc_with(entry, &[]);
    }

    /// `put`, with what the caller knows of the change (`deltas`, see `ValueDelta`).
    ///
    /// Only the types whose attributes changed (stored bytes compared) have their keys worked
    /// out, in the old entry and the new. For a type named in `deltas` whose index is
    /// equality and presence only and that is one attribute without options before and after,
    /// the keys come from the values the change added alone (those of the values it removed
    /// stay: see `ValueDelta`): a group of 100,000 members gaining one hashes one value instead
    /// of 200,000. (Substring and ordering keys are
    /// shared between values, so they are always worked out from the whole type.)
    pub(crate) fn put_with(&mut self, entry: Entry, deltas: &[ValueDelta<'_>]) {
        self.put_arc_with(Arc::new(entry), deltas);
    }

    /// `put_with` of an entry already shared.
    fn put_arc_with(&mut self, entry: Arc<Entry>, deltas: &[ValueDelta<'_>]) {
        let id = entry.id;
        match self.entries.get(id).cloned() {
            Some(old_entry) => {
                let (gone, came) = self.changed_keys(&old_entry, &entry, deltas);
                self.index_remove(id, &gone.pres, &gone.hashed, &gone.ord);
                self.index_add(id, &came.pres, &came.hashed, &came.ord);
                let old = old_entry;
                if old.ndn_str() != entry.ndn_str() {
                    self.by_dn.remove(dn_key(old.ndn_str()), id);
                    self.by_dn.insert(dn_key(entry.ndn_str()), id);
                }
                if old.parent != entry.parent {
                    if let Some(p) = old.parent {
                        self.unlink_child(p, id);
                    }
                    if let Some(p) = entry.parent {
                        Arc::make_mut(self.children.entry(p).or_default()).insert(id);
                    }
                }
            }
            None => {
                let new = self.index_keys(&entry);
                self.index_add(id, &new.pres, &new.hashed, &new.ord);
                self.by_dn.insert(dn_key(entry.ndn_str()), id);
                if let Some(p) = entry.parent {
                    Arc::make_mut(self.children.entry(p).or_default()).insert(id);
                }
            }
        }
        self.entries.insert(id, entry);
    }

    /// The index keys `old` has and `new` lacks, and those `new` has and `old` lacks.
    fn changed_keys(&self, old: &Entry, new: &Entry, deltas: &[ValueDelta<'_>]) -> (Keys, Keys) {
        // The indexed types with an attribute that is not stored the same in both.
        let mut types: Vec<AttrId> = Vec::new();
        let (olds, news): (Vec<AttrRef<'_>>, Vec<AttrRef<'_>>) =
            (old.attrs().collect(), new.attrs().collect());
        for (from, to) in [(&olds, &news), (&news, &olds)] {
            // The attributes are mostly in the same order in both (a modify moves the ones it
            // rewrites to the end), so each search starts after the last match.
            let mut at = 0;
            for a in from {
                if types.contains(&a.ty) || self.indexes.kinds(a.ty).is_empty() {
                    continue;
                }
                let same = |b: &AttrRef<'_>| {
                    b.ty == a.ty
                        && crate::entry::same_options(b.options, a.options)
                        && a.same_stored(b)
                };
                match (at..to.len()).chain(0..at).find(|&j| same(&to[j])) {
                    Some(j) => at = j + 1,
                    None => types.push(a.ty),
                }
            }
        }
        let (mut gone, mut came) = (Keys::default(), Keys::default());
        for ty in types {
            let kinds = self.indexes.kinds(ty);
            let single = |e: &Entry| {
                let mut of_type = e.attrs().filter(|a| a.ty == ty);
                match (of_type.next(), of_type.next()) {
                    (None, _) => true,
                    (Some(a), None) => a.options.is_empty(),
                    _ => false,
                }
            };
            let delta = deltas.iter().find(|d| d.ty == ty).filter(|_| {
                !kinds.intersects(IndexKinds::SUB | IndexKinds::ORD) && single(old) && single(new)
            });
            match delta {
                Some(d) => {
                    // The removed values' keys stay (see `ValueDelta`).
                    if kinds.contains(IndexKinds::EQ) {
                        came.hashed.extend(d.added.iter().map(|n| index_key(ty, n)));
                    }
                    if kinds.contains(IndexKinds::PRES) {
                        match (old.attr(ty).is_some(), new.attr(ty).is_some()) {
                            (true, false) => gone.pres.push(ty),
                            (false, true) => came.pres.push(ty),
                            _ => {}
                        }
                    }
                }
                None => {
                    let o = type_keys(&self.indexes, &self.schema, old, ty);
                    let n = type_keys(&self.indexes, &self.schema, new, ty);
                    gone.pres.extend(only_in(&o.pres, &n.pres));
                    gone.hashed.extend(only_in(&o.hashed, &n.hashed));
                    gone.ord.extend(only_in(&o.ord, &n.ord));
                    came.pres.extend(only_in(&n.pres, &o.pres));
                    came.hashed.extend(only_in(&n.hashed, &o.hashed));
                    came.ord.extend(only_in(&n.ord, &o.ord));
                }
            }
        }
        gone.finish();
        came.finish();
        // A key both removed and added (two values of one hash) stays as it is.
        let both: Vec<IndexKey> = gone
            .hashed
            .iter()
            .copied()
            .filter(|k| came.hashed.binary_search(k).is_ok())
            .collect();
        gone.hashed.retain(|k| both.binary_search(k).is_err());
        came.hashed.retain(|k| both.binary_search(k).is_err());
        (gone, came)
    }

    fn unlink_child(&mut self, parent: EntryId, id: EntryId) {
        if let Some(b) = self.children.get_mut(&parent) {
            let b = Arc::make_mut(b);
            b.remove(id);
            if b.is_empty() {
                self.children.remove(&parent);
            }
        }
    }

    pub(crate) fn remove(&mut self, id: EntryId) -> Option<Arc<Entry>> {
        let old = self.entries.remove(id)?;
        let k = self.index_keys(&old);
        self.index_remove(id, &k.pres, &k.hashed, &k.ord);
        self.by_dn.remove(dn_key(old.ndn_str()), id);
        if let Some(p) = old.parent {
            self.unlink_child(p, id);
        }
        self.children.remove(&id);
        Some(old)
    }

    pub(crate) fn alloc_id(&mut self) -> EntryId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}
