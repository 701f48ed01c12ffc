//! A persistent (structurally shared) map from 64-bit hashes to values, for the indexes that
//! are looked up by hash: the equality index and the DN map.
//!
//! Why not `imbl::OrdMap`: its B-tree nodes are allocated at their full capacity of 64 keys
//! plus 65 child pointers, and a median split leaves nodes half full, so a map filled in key
//! order cost ~98 bytes per 32-byte item (~65 in random order), and one insert costs ~200 ns
//! even in key order (measured with 2M items). Here the items live in sorted leaf vectors of
//! exactly their size behind two fixed levels of 256 pointers each, chosen by the top 16 bits
//! of the key (the keys are hashes, so leaves fill evenly): ~one item's size per item, a bulk
//! build is one sort, and a write copies two 2 KiB pointer arrays and one leaf (the first
//! time a version changes them; `Arc::make_mut` after that), about what a B-tree path costs.
//!
//! Several items may share a key (hash collisions of the DN map); lookups return all of them.

use std::sync::Arc;

const FAN: usize = 256;

type Leaf<V> = Arc<Vec<(u64, V)>>;
type Mid<V> = Arc<Vec<Option<Leaf<V>>>>;

#[derive(Clone)]
pub struct HashTrie<V> {
    mids: Arc<Vec<Option<Mid<V>>>>,
    len: usize,
}

impl<V> Default for HashTrie<V> {
    fn default() -> Self {
        HashTrie {
            mids: Arc::new((0..FAN).map(|_| None).collect()),
            len: 0,
        }
    }
}

#[inline]
fn slots(key: u64) -> (usize, usize) {
    ((key >> 56) as usize, ((key >> 48) & 0xff) as usize)
}

impl<V: Clone> HashTrie<V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds the map from items sorted by key (items of one key keep their order).
    pub fn from_sorted(items: Vec<(u64, V)>) -> Self {
        let len = items.len();
        let mut mids: Vec<Option<Mid<V>>> = (0..FAN).map(|_| None).collect();
        let mut it = items.into_iter().peekable();
        while let Some(&(key, _)) = it.peek() {
            let (m, l) = slots(key);
            let prefix = key >> 48;
            let mut leaf = Vec::new();
            while let Some(item) = it.next_if(|(k, _)| k >> 48 == prefix) {
                leaf.push(item);
            }
            leaf.shrink_to_fit();
            let mid = mids[m].get_or_insert_with(|| Arc::new((0..FAN).map(|_| None).collect()));
            // Only this builder holds the new vector, so this never copies.
            Arc::make_mut(mid)[l] = Some(Arc::new(leaf));
        }
        HashTrie {
            mids: Arc::new(mids),
            len,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn leaf(&self, key: u64) -> &[(u64, V)] {
        let (m, l) = slots(key);
        match self.mids[m].as_ref().and_then(|mid| mid[l].as_ref()) {
            Some(leaf) => leaf,
            None => &[],
        }
    }

    /// The values stored under `key`.
    pub fn get(&self, key: u64) -> impl Iterator<Item = &V> {
        let leaf = self.leaf(key);
        let from = leaf.partition_point(|(k, _)| *k < key);
        leaf[from..]
            .iter()
            .take_while(move |(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// The leaf that holds (or would hold) `key`, made unique to this map.
    fn leaf_mut(&mut self, key: u64) -> &mut Vec<(u64, V)> {
        let (m, l) = slots(key);
        let mids = Arc::make_mut(&mut self.mids);
        let mid = mids[m].get_or_insert_with(|| Arc::new((0..FAN).map(|_| None).collect()));
        let leaf = Arc::make_mut(mid)[l].get_or_insert_with(|| Arc::new(Vec::new()));
        Arc::make_mut(leaf)
    }

    /// The first value under `key` that `pred` accepts, for changing in place.
    pub fn get_mut(&mut self, key: u64, pred: impl Fn(&V) -> bool) -> Option<&mut V> {
        if !self.get(key).any(&pred) {
            return None;
        }
        let leaf = self.leaf_mut(key);
        let from = leaf.partition_point(|(k, _)| *k < key);
        leaf[from..]
            .iter_mut()
            .take_while(|(k, _)| *k == key)
            .map(|(_, v)| v)
            .find(|v| pred(v))
    }

    /// Adds `value` under `key` (after any values already there).
    pub fn insert(&mut self, key: u64, value: V) {
        let leaf = self.leaf_mut(key);
        let at = leaf.partition_point(|(k, _)| *k <= key);
        leaf.insert(at, (key, value));
        self.len += 1;
    }

    /// Removes and returns the first value under `key` that `pred` accepts.
    pub fn remove(&mut self, key: u64, pred: impl Fn(&V) -> bool) -> Option<V> {
        if !self.get(key).any(&pred) {
            return None;
        }
        let (m, l) = slots(key);
        let leaf = self.leaf_mut(key);
        let from = leaf.partition_point(|(k, _)| *k < key);
        let at = from
            + leaf[from..]
                .iter()
                .take_while(|(k, _)| *k == key)
                .position(|(_, v)| pred(v))?;
        let (_, v) = leaf.remove(at);
        if leaf.is_empty() {
            // `leaf_mut` made both levels unique, so these do not copy.
            if let Some(mid) = Arc::make_mut(&mut self.mids)[m].as_mut() {
                Arc::make_mut(mid)[l] = None;
            }
        }
        self.len -= 1;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn versions_are_independent() {
        let mut a: HashTrie<u32> = HashTrie::from_sorted(vec![(1, 10), (1, 11), (u64::MAX, 12)]);
        let b = a.clone();
        a.insert(1, 13);
        *a.get_mut(u64::MAX, |_| true).expect("present") = 99;
        assert_eq!(a.remove(1, |v| *v == 10), Some(10));
        assert_eq!(a.get(1).copied().collect::<Vec<_>>(), [11, 13]);
        assert_eq!(a.get(u64::MAX).copied().collect::<Vec<_>>(), [99]);
        assert_eq!(b.get(1).copied().collect::<Vec<_>>(), [10, 11]);
        assert_eq!(b.get(u64::MAX).copied().collect::<Vec<_>>(), [12]);
        assert_eq!((a.len(), b.len()), (3, 3));
        assert_eq!(a.remove(7, |_| true), None);
        assert!(a.get_mut(7, |_| true).is_none());
    }

    proptest! {
        /// Any sequence of inserts and removes (keys crowded into few leaves, so that leaves
        /// grow, empty and collide) agrees with a model, and bulk building agrees too.
        #[test]
        fn agrees_with_a_model(ops in proptest::collection::vec(
            (any::<bool>(), 0u64..8, 0u64..4, 0u32..5), 0..300)
        ) {
            let mut t: HashTrie<u32> = HashTrie::new();
            let mut model: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
            for (add, hi, lo, v) in ops {
                let key = (hi << 60) | (hi << 48) | lo;
                if add {
                    t.insert(key, v);
                    model.entry(key).or_default().push(v);
                } else {
                    let got = t.remove(key, |x| *x == v);
                    let want = model.get_mut(&key).and_then(|vs| {
                        let i = vs.iter().position(|x| *x == v)?;
                        Some(vs.remove(i))
                    });
                    prop_assert_eq!(got, want);
                }
            }
            let items: Vec<(u64, u32)> = model
                .iter()
                .flat_map(|(k, vs)| vs.iter().map(move |v| (*k, *v)))
                .collect();
            let built = HashTrie::from_sorted(items.clone());
            prop_assert_eq!(t.len(), items.len());
            prop_assert_eq!(built.len(), items.len());
            for (k, vs) in &model {
                prop_assert_eq!(&t.get(*k).copied().collect::<Vec<_>>(), vs);
                prop_assert_eq!(&built.get(*k).copied().collect::<Vec<_>>(), vs);
            }
        }
    }
}
