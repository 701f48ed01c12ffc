//! A persistent (structurally shared) map from entry ids to values: the version's entry table.
//!
//! Entry ids are dense small integers, so this is a radix array of seven levels, one per bit
//! group of the id (8, 8, 4, 3, 3, 3 and 3 bits from the top), with the values in the last.
//! Each level is one fixed-size array behind an `Arc` (one load per level, no length to
//! check). A million entries take ~11 bytes each (the B-tree map it replaces took ~56), and
//! a write copies the arrays on its path the first time a version changes them
//! (`Arc::make_mut` after that). The low levels are small on purpose: a batch of modifies
//! changes entries far apart, and the copy of an array clones (and the old version's drop
//! releases) every pointer in it, each a reference count in its own cache line. With
//! 256-slot leaves that was ~16 % of the writer's time per modify at 100,000 entries; at 50
//! million entries, where those counts are not in any cache, arrays of 64, 32 and 32 slots
//! still cost a quarter of it. Eight slots a level touch a few dozen counts per modify; the
//! extra levels are the top ones, which stay in cache.

use std::sync::Arc;

type Node<T, const N: usize> = Arc<[Option<T>; N]>;
type Leaf<V> = Node<V, 16>;
type Level4<V> = Node<Leaf<V>, 16>;
type Level3<V> = Node<Level4<V>, 16>;
type Level2<V> = Node<Level3<V>, 16>;
type Level1<V> = Node<Level2<V>, 256>;

#[derive(Clone)]
pub struct IdMap<V> {
    root: Node<Level1<V>, 256>,
    len: usize,
}

fn empty<T, const N: usize>() -> Node<T, N> {
    Arc::new(std::array::from_fn(|_| None))
}

/// The slot of `id` at each level; each is below its level's size.
#[inline]
fn digits(id: u32) -> [usize; 6] {
    let id = id as usize;
    [
        id >> 24,
        (id >> 16) & 0xff,
        (id >> 12) & 0xf,
        (id >> 8) & 0xf,
        (id >> 4) & 0xf,
        id & 0xf,
    ]
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

    #[inline]
    pub fn get(&self, id: u32) -> Option<&V> {
        let [a, b, c, d, e, f] = digits(id);
        self.root[a].as_ref()?[b].as_ref()?[c].as_ref()?[d].as_ref()?[e].as_ref()?[f].as_ref()
    }

    /// The slot of `id`, made unique to this map (levels are created as needed).
    fn slot(&mut self, id: u32) -> &mut Option<V> {
        let [a, b, c, d, e, f] = digits(id);
        let l1 = Arc::make_mut(&mut self.root)[a].get_or_insert_with(empty);
        let l2 = Arc::make_mut(l1)[b].get_or_insert_with(empty);
        let l3 = Arc::make_mut(l2)[c].get_or_insert_with(empty);
        let l4 = Arc::make_mut(l3)[d].get_or_insert_with(empty);
        let leaf = Arc::make_mut(l4)[e].get_or_insert_with(empty);
        &mut Arc::make_mut(leaf)[f]
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
        // entries costs at most one small leaf per 16 ids until the next restart.
        old
    }

    /// Adds this map's arrays to `part` (`footprint`).
    pub(crate) fn footprint(&self, part: &mut crate::sizes::Part) {
        fn node<T, const N: usize>(part: &mut crate::sizes::Part) {
            part.add(crate::sizes::arc_size::<[Option<T>; N]>());
        }
        node::<Level1<V>, 256>(part);
        for l1 in self.root.iter().flatten() {
            node::<Level2<V>, 256>(part);
            for l2 in l1.iter().flatten() {
                node::<Level3<V>, 16>(part);
                for l3 in l2.iter().flatten() {
                    node::<Level4<V>, 16>(part);
                    for l4 in l3.iter().flatten() {
                        node::<Leaf<V>, 16>(part);
                        for _ in l4.iter().flatten() {
                            node::<V, 16>(part);
                        }
                    }
                }
            }
        }
    }

    /// All values in id order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        fn some<T>(level: &[Option<T>]) -> impl Iterator<Item = &T> {
            level.iter().flatten()
        }
        some(&self.root[..])
            .flat_map(|l1| some(&l1[..]))
            .flat_map(|l2| some(&l2[..]))
            .flat_map(|l3| some(&l3[..]))
            .flat_map(|l4| some(&l4[..]))
            .flat_map(|leaf| some(&leaf[..]))
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
