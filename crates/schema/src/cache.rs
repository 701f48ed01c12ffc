//! Per-thread caches of values derived from one set of schema definitions.
//!
//! Start-up, import and add normalize the same few DNs and check the same few object class
//! combinations over and over; each thread keeps what it derived last, tagged with the
//! schema's `generation` so that a value derived under other definitions is never served.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

pub(crate) struct GenCache<K, V> {
    generation: u64,
    map: HashMap<K, V>,
}

impl<K, V> Default for GenCache<K, V> {
    fn default() -> Self {
        GenCache {
            generation: 0,
            map: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq, V> GenCache<K, V> {
    /// `f` of the value cached for `key` under `generation`.
    pub(crate) fn get<Q, R>(&self, generation: u64, key: &Q, f: impl FnOnce(&V) -> R) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        (self.generation == generation)
            .then(|| self.map.get(key).map(f))
            .flatten()
    }

    /// Caches `value` for `key` under `generation`; another generation's values, or `max`
    /// entries already there, are dropped first (bounded, and recent values win).
    pub(crate) fn insert(&mut self, generation: u64, key: K, value: V, max: usize) {
        if self.generation != generation || self.map.len() >= max {
            self.generation = generation;
            self.map.clear();
        }
        self.map.insert(key, value);
    }
}
