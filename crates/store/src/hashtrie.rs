//! A persistent (structurally shared) map from hashed keys to posting lists (the ids of the
//! entries holding the key), for what is looked up by hash: the equality and substring index
//! and the DN map.
//!
//! Why not `imbl::OrdMap`: its B-tree nodes are allocated at their full capacity of 64 keys
//! plus 65 child pointers, and a median split leaves nodes half full, so a map filled in key
//! order cost ~98 bytes per 32-byte item (~65 in random order), and one insert costs ~200 ns
//! even in key order (measured with 2M items). Here the keys live in sorted leaf vectors of
//! exactly their size behind three fixed levels of pointers (256, 16 and 16 slots), chosen by
//! the top 16 bits of the key (the keys are hashes, so leaves fill evenly): a bulk build is one
//! sort per top-level slot (`from_buckets`, on every core), and a write copies the top array
//! once per batch, then two 16-slot arrays and one leaf (the first time a version changes
//! them; `Arc::make_mut` after that). The lower levels are small because the keys a batch
//! writes are spread at random: with one 256-slot level below the top, an add copied (and the
//! old version's drop released) ~4 arrays of 256 shared pointers, about a fifth of the
//! writer's time per add.
//!
//! A key is the top 48 bits of a 64-bit hash (`key_of`): the leaf holds the 32 bits below
//! the 16 that chose it. Most keys name one entry (a uid, a mail address, a DN), and such a key
//! costs 8 bytes, its 32 bits and the id (a leaf's `ones`); a key of several entries keeps a
//! shared bitmap (`many`). Before, every key took a 64-bit hash and a 16-byte posting: 24
//! bytes, and 16 in the DN map. With 48 bits, a lookup of an absent key among 10 million finds
//! one by chance once in about 28 million lookups, and every user of this map checks what it
//! finds (a DN lookup compares the entry's DN, an index candidate is checked against the whole
//! filter), so a collision costs one check, never a wrong answer.

use std::sync::Arc;

use roaring::RoaringBitmap;

use crate::entry::EntryId;

const FAN: usize = 256;
/// The slots of each of the two lower levels of pointers.
const LOW: usize = 16;

/// The part of a 64-bit hash this map keys on: its top 48 bits. Keys are made with this, so
/// two keys the map cannot tell apart are equal (and an entry's list of keys, deduplicated,
/// holds each once).
#[inline]
pub fn key_of(hash: u64) -> u64 {
    hash & !0xffff
}

/// The slots of a key in the three levels, and the bits the leaf keeps.
#[inline]
fn split(key: u64) -> (usize, usize, usize, u32) {
    (
        (key >> 56) as usize,
        ((key >> 52) & 0xf) as usize,
        ((key >> 48) & 0xf) as usize,
        (key >> 16) as u32,
    )
}

/// The entries holding one key (never none: a key whose last entry goes is removed).
#[derive(Clone, Copy, Debug)]
pub enum PostingRef<'a> {
    One(EntryId),
    Many(&'a RoaringBitmap),
}

impl<'a> PostingRef<'a> {
    /// Adds these ids to `out`.
    pub fn union_into(self, out: &mut RoaringBitmap) {
        match self {
            PostingRef::One(id) => {
                out.insert(id);
            }
            PostingRef::Many(b) => *out |= b,
        }
    }

    /// How many entries hold the key.
    pub fn count(self) -> u64 {
        match self {
            PostingRef::One(_) => 1,
            PostingRef::Many(b) => b.len(),
        }
    }

    /// Whether `id` holds the key.
    pub fn contains(self, id: EntryId) -> bool {
        match self {
            PostingRef::One(one) => one == id,
            PostingRef::Many(b) => b.contains(id),
        }
    }

    /// Keeps in `acc` only the ids this posting also holds.
    pub fn retain_in(self, acc: &mut RoaringBitmap) {
        match self {
            PostingRef::One(id) => {
                let keep = acc.contains(id);
                acc.clear();
                if keep {
                    acc.insert(id);
                }
            }
            PostingRef::Many(b) => *acc &= b,
        }
    }

    /// The ids, in order.
    pub fn iter(self) -> impl Iterator<Item = EntryId> + 'a {
        let (one, many) = match self {
            PostingRef::One(id) => (Some(id), None),
            PostingRef::Many(b) => (None, Some(b.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

/// Where `k` is in `ones` (sorted by key), as `binary_search_by_key` answers.
///
/// The keys are hash bits, spread evenly over `u32`, so the place is first guessed from the
/// key's value and then searched outward from there in growing steps: at 50 million entries
/// a leaf holds ~1,500 keys (12 KB), where a binary search touched 7 or 8 cache lines far
/// apart and this touches one to three next to each other.
#[inline]
fn find(ones: &[(u32, EntryId)], k: u32) -> Result<usize, usize> {
    let n = ones.len();
    if n < 16 {
        return ones.binary_search_by_key(&k, |p| p.0);
    }
    let guess = ((u64::from(k) * n as u64) >> 32) as usize;
    // Bracket [lo, hi) around the key, galloping from the guess.
    let (mut lo, mut hi);
    if ones[guess].0 < k {
        let mut step = 1;
        lo = guess + 1;
        hi = lo;
        while hi < n && ones[hi].0 < k {
            lo = hi + 1;
            hi = (hi + step).min(n);
            step *= 2;
        }
        hi = (hi + 1).min(n);
    } else {
        let mut step = 1;
        hi = guess + 1;
        lo = guess;
        while lo > 0 && ones[lo - 1].0 >= k {
            hi = lo;
            lo = lo.saturating_sub(step);
            step *= 2;
        }
    }
    ones[lo..hi]
        .binary_search_by_key(&k, |p| p.0)
        .map(|i| lo + i)
        .map_err(|i| lo + i)
}

/// The keys of one 16-bit prefix: each in exactly one of the two vectors, both sorted by key.
#[derive(Clone, Default)]
struct Leaf {
    /// Keys held by one entry: (key bits 16..48, id).
    ones: Vec<(u32, EntryId)>,
    /// Keys held by several entries.
    many: Vec<(u32, Arc<RoaringBitmap>)>,
}

impl Leaf {
    fn get(&self, k: u32) -> Option<PostingRef<'_>> {
        if let Ok(i) = find(&self.ones, k) {
            return Some(PostingRef::One(self.ones[i].1));
        }
        let i = self.many.binary_search_by_key(&k, |p| p.0).ok()?;
        Some(PostingRef::Many(&self.many[i].1))
    }

    /// Adds `id` under `k`; true when `k` is a new key.
    fn insert(&mut self, k: u32, id: EntryId) -> bool {
        match find(&self.ones, k) {
            Ok(i) => {
                let other = self.ones[i].1;
                if other != id {
                    self.ones.remove(i);
                    let b: RoaringBitmap = [other, id].into_iter().collect();
                    let at = self.many.partition_point(|p| p.0 < k);
                    self.many.insert(at, (k, Arc::new(b)));
                }
                false
            }
            Err(i) => match self.many.binary_search_by_key(&k, |p| p.0) {
                Ok(j) => {
                    Arc::make_mut(&mut self.many[j].1).insert(id);
                    false
                }
                Err(_) => {
                    self.ones.insert(i, (k, id));
                    true
                }
            },
        }
    }

    /// Removes `id` from `k`; true when `k` is gone (no entry holds it any more).
    fn remove(&mut self, k: u32, id: EntryId) -> bool {
        if let Ok(i) = find(&self.ones, k) {
            if self.ones[i].1 == id {
                self.ones.remove(i);
                return true;
            }
            return false;
        }
        let Ok(j) = self.many.binary_search_by_key(&k, |p| p.0) else {
            return false;
        };
        let b = Arc::make_mut(&mut self.many[j].1);
        b.remove(id);
        match (b.len(), b.min()) {
            (0, _) => {
                self.many.remove(j);
                true
            }
            (1, Some(last)) => {
                self.many.remove(j);
                let at = self.ones.partition_point(|p| p.0 < k);
                self.ones.insert(at, (k, last));
                false
            }
            _ => false,
        }
    }

    fn is_empty(&self) -> bool {
        self.ones.is_empty() && self.many.is_empty()
    }

    /// Adds the entries `b` under `k` (a leaf being built); true when `k` is a new key.
    fn add_many(&mut self, k: u32, mut b: RoaringBitmap) -> bool {
        let mut new = true;
        if let Ok(i) = find(&self.ones, k) {
            b.insert(self.ones.remove(i).1);
            new = false;
        }
        match self.many.binary_search_by_key(&k, |p| p.0) {
            Ok(j) => {
                *Arc::make_mut(&mut self.many[j].1) |= b;
                false
            }
            Err(j) => {
                self.many.insert(j, (k, Arc::new(b)));
                new
            }
        }
    }

    /// A leaf from (key, id) pairs of one 16-bit prefix, sorted and without repeats; returns
    /// it with its number of keys.
    fn from_sorted(pairs: &[(u64, EntryId)]) -> (Leaf, usize) {
        let mut leaf = Leaf::default();
        for run in pairs.chunk_by(|a, b| a.0 == b.0) {
            let k = split(run[0].0).3;
            match run {
                [(_, id)] => leaf.ones.push((k, *id)),
                _ => {
                    let b = RoaringBitmap::from_sorted_iter(run.iter().map(|p| p.1))
                        .unwrap_or_default();
                    leaf.many.push((k, Arc::new(b)));
                }
            }
        }
        leaf.ones.shrink_to_fit();
        leaf.many.shrink_to_fit();
        let keys = leaf.ones.len() + leaf.many.len();
        (leaf, keys)
    }
}

type Leaves = Arc<[Option<Arc<Leaf>>; LOW]>;
type Mid = Arc<[Option<Leaves>; LOW]>;

fn empty<T, const N: usize>() -> Arc<[Option<T>; N]> {
    Arc::new(std::array::from_fn(|_| None))
}

#[derive(Clone)]
pub struct HashTrie {
    mids: Arc<[Option<Mid>; FAN]>,
    /// The number of keys.
    len: usize,
}

impl Default for HashTrie {
    fn default() -> Self {
        HashTrie {
            mids: empty(),
            len: 0,
        }
    }
}

/// (key, id) pairs gathered by the top byte of the key (the first level's slot), for
/// `HashTrie::from_buckets`: each thread of a bulk build fills its own.
///
/// A pair is one `u64`: the key (its low 16 bits are zero, `key_of`) with the id's distance
/// from the bucket's previous id in those 16 bits. A bulk build pushes in id order, and a
/// bucket gets a pair every few hundred ids, so the distance fits; when it does not (or ids
/// go backwards), the low bits are all ones and the next `u64` is the id. At 50 million
/// entries the pairs were 16 bytes each, 2.4 GB at the peak of a start-up; now about half.
pub(crate) struct Buckets {
    slots: Vec<Vec<u64>>,
    last: Vec<EntryId>,
}

/// The low bits of a pair whose id follows in the next `u64`.
const FAR: u64 = 0xffff;

impl Default for Buckets {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl Buckets {
    /// Buckets for about `pairs` pairs in all. Sized up front: at 50 million entries a
    /// bulk build gathers hundreds of millions of pairs, and vectors grown by doubling would
    /// hold about half as much again in spare capacity at the peak of a start-up's memory.
    pub fn with_capacity(pairs: usize) -> Self {
        let each = if pairs == 0 {
            0
        } else {
            pairs / FAN + pairs / FAN / 16 + 16
        };
        Buckets {
            slots: (0..FAN).map(|_| Vec::with_capacity(each)).collect(),
            last: vec![0; FAN],
        }
    }

    /// Adds a pair; `key` is made with `key_of`.
    #[inline]
    pub fn push(&mut self, key: u64, id: EntryId) {
        let m = (key >> 56) as usize;
        let key = key_of(key);
        let step = u64::from(id.wrapping_sub(self.last[m]));
        if id >= self.last[m] && step < FAR {
            self.slots[m].push(key | step);
        } else {
            self.slots[m].push(key | FAR);
            self.slots[m].push(u64::from(id));
        }
        self.last[m] = id;
    }
}

/// Appends the (key, id) pairs of one bucket (`Buckets::push`'s encoding) to `out`.
fn unpack(bucket: &[u64], out: &mut Vec<(u64, EntryId)>) {
    let mut last: EntryId = 0;
    let mut words = bucket.iter();
    while let Some(&w) = words.next() {
        let id = if w & FAR == FAR {
            // Written by `push` itself, so the id is there and fits.
            words.next().map_or(0, |&id| id as EntryId)
        } else {
            last + (w & FAR) as EntryId
        };
        last = id;
        out.push((key_of(w), id));
    }
}

/// One first-level slot of a bulk build: its number, the pairs each part gathered for it, and
/// its keys already gathered as bitmaps.
type SlotWork = (usize, Vec<Vec<u64>>, Vec<(u64, RoaringBitmap)>);

impl HashTrie {
    pub fn new() -> Self {
        Self::default()
    }

    /// The map of (key, id) pairs sorted by key, then id (repeats are ignored).
    pub fn from_sorted(pairs: &[(u64, EntryId)]) -> Self {
        let mut b = Buckets::default();
        for &(k, id) in pairs {
            b.push(key_of(k), id);
        }
        Self::from_buckets(vec![b], Vec::new(), 1)
    }

    /// The map of all the pairs in `parts`, in any order (repeats are ignored), and of the
    /// keys in `bitmaps` (made with `key_of`, each once, sorted by key), built on `threads`
    /// threads: each sorts and builds whole first-level slots. (A bulk build gathers the keys
    /// that many entries hold as bitmaps: at 16 bytes a pair, the four objectClass values of
    /// 50 million entries alone took 3.2 GB.)
    pub(crate) fn from_buckets(
        mut parts: Vec<Buckets>,
        bitmaps: Vec<(u64, RoaringBitmap)>,
        threads: usize,
    ) -> Self {
        let threads = threads.clamp(1, FAN);
        let mut bitmaps = bitmaps.into_iter().peekable();
        // Slot m goes to thread m % threads: hashes fill the slots evenly.
        let mut work: Vec<Vec<SlotWork>> = (0..threads).map(|_| Vec::new()).collect();
        for m in 0..FAN {
            let runs: Vec<_> = parts
                .iter_mut()
                .map(|p| std::mem::take(&mut p.slots[m]))
                .collect();
            let mut held = Vec::new();
            while let Some(b) = bitmaps.next_if(|(k, _)| split(*k).0 == m) {
                held.push(b);
            }
            work[m % threads].push((m, runs, held));
        }
        drop(parts);
        let build = |slots: Vec<SlotWork>| {
            let mut out = Vec::with_capacity(slots.len());
            for (m, runs, held) in slots {
                let mut pairs: Vec<(u64, EntryId)> =
                    Vec::with_capacity(runs.iter().map(Vec::len).sum());
                for r in runs {
                    unpack(&r, &mut pairs);
                }
                if pairs.is_empty() && held.is_empty() {
                    continue;
                }
                pairs.sort_unstable();
                pairs.dedup();
                let mut mid: [Option<[Option<Leaf>; LOW]>; LOW] = std::array::from_fn(|_| None);
                let mut keys = 0;
                fn place(
                    mid: &mut [Option<[Option<Leaf>; LOW]>; LOW],
                    key: u64,
                ) -> &mut Option<Leaf> {
                    let (_, b, c, _) = split(key);
                    &mut mid[b].get_or_insert_with(|| std::array::from_fn(|_| None))[c]
                }
                for run in pairs.chunk_by(|a, b| a.0 >> 48 == b.0 >> 48) {
                    let (leaf, n) = Leaf::from_sorted(run);
                    keys += n;
                    *place(&mut mid, run[0].0) = Some(leaf);
                }
                for (key, b) in held {
                    if place(&mut mid, key)
                        .get_or_insert_with(Leaf::default)
                        .add_many(split(key).3, b)
                    {
                        keys += 1;
                    }
                }
                let mid = mid.map(|l| l.map(|l| Arc::new(l.map(|l| l.map(Arc::new)))));
                out.push((m, Arc::new(mid), keys));
            }
            out
        };
        let built = crate::par::map(work, build).into_iter().flatten();
        let mut mids: [Option<Mid>; FAN] = std::array::from_fn(|_| None);
        let mut len = 0;
        for (m, mid, keys) in built {
            mids[m] = Some(mid);
            len += keys;
        }
        HashTrie {
            mids: Arc::new(mids),
            len,
        }
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries holding `key` (made with `key_of`).
    #[inline]
    pub fn get(&self, key: u64) -> Option<PostingRef<'_>> {
        let (a, b, c, k) = split(key);
        self.mids[a].as_ref()?[b].as_ref()?[c].as_ref()?.get(k)
    }

    /// The leaf that holds (or would hold) `key`, made unique to this map.
    fn leaf_mut(&mut self, key: u64) -> &mut Leaf {
        let (a, b, c, _) = split(key);
        let mid = Arc::make_mut(&mut self.mids)[a].get_or_insert_with(empty);
        let leaves = Arc::make_mut(mid)[b].get_or_insert_with(empty);
        let leaf = Arc::make_mut(leaves)[c].get_or_insert_with(Default::default);
        Arc::make_mut(leaf)
    }

    /// Adds `id` to the entries holding `key`.
    pub fn insert(&mut self, key: u64, id: EntryId) {
        if self.leaf_mut(key).insert(split(key).3, id) {
            self.len += 1;
        }
    }

    /// Removes `id` from the entries holding `key` (if it is there).
    pub fn remove(&mut self, key: u64, id: EntryId) {
        let holds = self.get(key).is_some_and(|p| match p {
            PostingRef::One(one) => one == id,
            PostingRef::Many(b) => b.contains(id),
        });
        if !holds {
            return;
        }
        let (a, b, c, k) = split(key);
        let leaf = self.leaf_mut(key);
        if !leaf.remove(k, id) {
            return;
        }
        let emptied = leaf.is_empty();
        self.len -= 1;
        if emptied {
            // `leaf_mut` made every level unique, so these do not copy.
            if let Some(mid) = Arc::make_mut(&mut self.mids)[a].as_mut() {
                if let Some(leaves) = Arc::make_mut(mid)[b].as_mut() {
                    Arc::make_mut(leaves)[c] = None;
                }
            }
        }
    }

    /// Adds this map's arrays and leaves to `part` (`footprint`), and its bitmaps to
    /// `bitmaps`.
    pub(crate) fn footprint(
        &self,
        part: &mut crate::sizes::Part,
        bitmaps: &mut crate::sizes::Part,
    ) {
        use crate::sizes::{alloc_size, arc_size, bitmap_size};
        use std::mem::size_of;
        part.add(arc_size::<[Option<Mid>; FAN]>());
        for mid in self.mids.iter().flatten() {
            part.add(arc_size::<[Option<Leaves>; LOW]>());
            let leaves = mid.iter().flatten();
            for _ in leaves.clone() {
                part.add(arc_size::<[Option<Arc<Leaf>>; LOW]>());
            }
            for leaf in leaves.flat_map(|l| l.iter().flatten()) {
                part.add(arc_size::<Leaf>());
                part.add(alloc_size(
                    leaf.ones.capacity() * size_of::<(u32, EntryId)>(),
                ));
                part.add(alloc_size(
                    leaf.many.capacity() * size_of::<(u32, Arc<RoaringBitmap>)>(),
                ));
                for (_, b) in &leaf.many {
                    bitmaps.add(arc_size::<RoaringBitmap>());
                    bitmap_size(b, bitmaps);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn ids(t: &HashTrie, key: u64) -> Vec<EntryId> {
        t.get(key).map(|p| p.iter().collect()).unwrap_or_default()
    }

    #[test]
    fn versions_are_independent() {
        let k = |x: u64| key_of(x << 16);
        let mut a = HashTrie::from_sorted(&[(k(1), 10), (k(1), 11), (k(u64::MAX >> 16), 12)]);
        let b = a.clone();
        a.insert(k(1), 13);
        a.insert(k(u64::MAX >> 16), 99);
        a.remove(k(u64::MAX >> 16), 12);
        a.remove(k(1), 10);
        assert_eq!(ids(&a, k(1)), [11, 13]);
        assert_eq!(ids(&a, k(u64::MAX >> 16)), [99]);
        assert_eq!(ids(&b, k(1)), [10, 11]);
        assert_eq!(ids(&b, k(u64::MAX >> 16)), [12]);
        assert_eq!((a.len(), b.len()), (2, 2));
        a.remove(k(7), 1);
        assert!(a.get(k(7)).is_none());
        // The low 16 bits of a hash are not part of the key.
        assert_eq!(ids(&a, k(1) | 0xffff), [11, 13]);
    }

    proptest! {
        /// `find` answers as a binary search does, keys present or not.
        #[test]
        fn find_is_a_binary_search(mut keys in proptest::collection::vec(any::<u32>(), 0..400),
            probes in proptest::collection::vec(any::<u32>(), 0..50)) {
            keys.sort_unstable();
            keys.dedup();
            let ones: Vec<(u32, EntryId)> = keys.iter().map(|&k| (k, k)).collect();
            for k in probes.iter().chain(&keys).chain(&[0, u32::MAX]) {
                prop_assert_eq!(find(&ones, *k), ones.binary_search_by_key(k, |p| p.0));
            }
        }

        /// Buckets give back every pair pushed, in order, whatever the distance between ids.
        #[test]
        fn buckets_keep_pairs(pairs in proptest::collection::vec(
            (0u64..4, prop_oneof![0u32..100, 60_000u32..70_000, any::<u32>()]), 0..200)
        ) {
            let mut b = Buckets::with_capacity(pairs.len());
            let key = |k: u64| key_of(k << 60 | k << 20);
            for (k, id) in &pairs {
                b.push(key(*k), *id);
            }
            let mut got = Vec::new();
            for slot in &b.slots {
                unpack(slot, &mut got);
            }
            let mut want: Vec<(u64, EntryId)> = pairs.iter().map(|(k, id)| (key(*k), *id)).collect();
            // Slots are by the top byte; within one, the order pushed.
            want.sort_by_key(|p| p.0 >> 56);
            prop_assert_eq!(got, want);
        }

        /// Any sequence of inserts and removes (keys crowded into few leaves, so that leaves
        /// grow, empty and share keys) agrees with a model, and bulk building agrees too.
        #[test]
        fn agrees_with_a_model(ops in proptest::collection::vec(
            (any::<bool>(), 0u64..8, 0u64..4, 0u32..5), 0..300)
        ) {
            let mut t = HashTrie::new();
            let mut model: BTreeMap<u64, BTreeSet<EntryId>> = BTreeMap::new();
            for (add, hi, lo, v) in ops {
                let key = key_of((hi << 60) | (hi << 48) | (lo << 16));
                if add {
                    t.insert(key, v);
                    model.entry(key).or_default().insert(v);
                } else {
                    t.remove(key, v);
                    if let Some(s) = model.get_mut(&key) {
                        s.remove(&v);
                        if s.is_empty() {
                            model.remove(&key);
                        }
                    }
                }
            }
            let pairs: Vec<(u64, EntryId)> = model
                .iter()
                .flat_map(|(k, vs)| vs.iter().map(move |v| (*k, *v)))
                .collect();
            let built = HashTrie::from_sorted(&pairs);
            let mut parts = vec![Buckets::default(), Buckets::default()];
            for (i, (k, v)) in pairs.iter().rev().enumerate() {
                parts[i % 2].push(*k, *v);
                parts[0].push(*k, *v);
            }
            let parallel = HashTrie::from_buckets(parts, Vec::new(), 3);
            // Half the keys given as bitmaps, their first id also as a pair (merged).
            let mut part = Buckets::with_capacity(pairs.len());
            let mut held = Vec::new();
            for (k, vs) in &model {
                let first = *vs.iter().next().unwrap();
                if (k >> 60) & 1 == 0 {
                    held.push((*k, vs.iter().copied().collect::<RoaringBitmap>()));
                    part.push(*k, first);
                } else {
                    for v in vs {
                        part.push(*k, *v);
                    }
                }
            }
            let mixed = HashTrie::from_buckets(vec![part], held, 2);
            for m in [&t, &built, &parallel, &mixed] {
                prop_assert_eq!(m.len(), model.len());
                for (k, vs) in &model {
                    let want: Vec<EntryId> = vs.iter().copied().collect();
                    prop_assert_eq!(ids(m, *k), want);
                    prop_assert_eq!(m.get(*k).map_or(0, |p| p.count()), vs.len() as u64);
                }
            }
        }
    }
}
