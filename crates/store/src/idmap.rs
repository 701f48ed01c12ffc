//! A persistent (structurally shared) map from entry ids to values: the version's entry table.
//!
//! Entry ids are dense small integers, so this is a radix array: four levels of 256 slots,
//! one per byte of the id, with the values in the last. A million entries take ~8 bytes each
//! (the B-tree map it replaces took ~56, its nodes being half full and sized for 64 keys and 65
//! children), lookups are four indexed loads, and a write copies at most four 2 KiB arrays
//! the first time a version changes them (`Arc::make_mut` after that).

use std::sync::Arc;

const FAN: usize = 256;

type Leaf<V> = Arc<Vec<Option<V>>>;
type Level2<V> = Arc<Vec<Option<Leaf<V>>>>;
type Level1<V> = Arc<Vec<Option<Level2<V>>>>;

#[derive(Clone)]
pub struct IdMap<V> {
    root: Arc<Vec<Option<Level1<V>>>>,
    len: usize,
}

fn empty<T>() -> Arc<Vec<Option<T>>> {
    Arc::new((0..FAN).map(|_| None).collect())
}

#[inline]
fn digits(id: u32) -> [usize; 4] {
    id.to_be_bytes().map(usize::from)
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            root: empty(),
            len: 0,
        }
    }
}

impl<V: Clone> IdMap<V> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, id: u32) -> Option<&V> {
        let [a, b, c, d] = digits(id);
        self.root[a].as_ref()?[b].as_ref()?[c].as_ref()?[d].as_ref()
    }

    /// The slot of `id`, made unique to this map (levels are created as needed).
    fn slot(&mut self, id: u32) -> &mut Option<V> {
        let [a, b, c, d] = digits(id);
        let l1 = Arc::make_mut(&mut self.root)[a].get_or_insert_with(empty);
        let l2 = Arc::make_mut(l1)[b].get_or_insert_with(empty);
        let leaf = Arc::make_mut(l2)[c].get_or_insert_with(empty);
        &mut Arc::make_mut(leaf)[d]
    }

    /// Sets the value of `id`; returns the one it replaced.
    pub fn insert(&mut self, id: u32, value: V) -> Option<V> {
        let old = self.slot(id).replace(value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, id: u32) -> Option<V> {
        self.get(id)?;
        let old = self.slot(id).take();
        self.len -= 1;
        // Emptied arrays are left in place: ids are not reused, so a sparse tail of deleted
        // entries costs at most one 2 KiB leaf per 256 ids until the next restart.
        old
    }

    /// Adds this map's arrays to `part` (`footprint`).
    pub(crate) fn footprint(&self, part: &mut crate::sizes::Part) {
        let slot = std::mem::size_of::<Option<V>>();
        let arr = |part: &mut crate::sizes::Part| crate::sizes::arc_vec(FAN, slot, part);
        crate::sizes::arc_vec(FAN, 8, part);
        for l1 in self.root.iter().flatten() {
            crate::sizes::arc_vec(FAN, 8, part);
            for l2 in l1.iter().flatten() {
                crate::sizes::arc_vec(FAN, 8, part);
                for _ in l2.iter().flatten() {
                    arr(part);
                }
            }
        }
    }

    /// All values in id order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        fn some<T>(level: &[Option<T>]) -> impl Iterator<Item = &T> {
            level.iter().flatten()
        }
        some(&self.root)
            .flat_map(|l1| some(l1))
            .flat_map(|l2| some(l2))
            .flat_map(|leaf| some(leaf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #[test]
        fn agrees_with_a_model(ops in proptest::collection::vec(
            (any::<bool>(), prop_oneof![0u32..600, any::<u32>()], any::<u16>()), 0..300)
        ) {
            let mut m: IdMap<u16> = IdMap::new();
            let mut model = BTreeMap::new();
            let mut versions = Vec::new();
            for (add, id, v) in ops {
                if add {
                    prop_assert_eq!(m.insert(id, v), model.insert(id, v));
                } else {
                    prop_assert_eq!(m.remove(id), model.remove(&id));
                }
                versions.push((m.clone(), model.clone()));
            }
            // Every earlier version still holds exactly what it held.
            for (m, model) in versions {
                prop_assert_eq!(m.len(), model.len());
                prop_assert_eq!(m.values().copied().collect::<Vec<_>>(),
                    model.values().copied().collect::<Vec<_>>());
                for (id, v) in &model {
                    prop_assert_eq!(m.get(*id), Some(v));
                }
            }
        }
    }
}
