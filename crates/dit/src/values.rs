//! Sets of attribute values with distinct normalized forms, built in linear time.
//!
//! A request may carry hundreds of thousands of values for one attribute (a big group's
//! members) or repeat one attribute type thousands of times. Comparing each new value with
//! every earlier one is quadratic, and a single anonymous PDU once kept the server busy for
//! minutes that way. Small sets (the usual case: a handful of values) are still compared
//! pairwise, which is cheaper than hashing; past `INDEX_FROM` values an index of positions,
//! keyed by a per-set random hash of the normalized form, takes over — once it pays: a set
//! made of an attribute's existing values (`from_parts`, e.g. a group of 100,000 members)
//! is scanned for the first `LINEAR_FINDS` lookups (a modify adding or removing one member
//! looks up one value, and hashing every member would cost more than one pass of byte
//! comparisons).

use std::hash::BuildHasher;

/// Values up to which a linear scan is used instead of the hash index.
const INDEX_FROM: usize = 16;

/// Lookups in a larger set answered by a scan before the index is built.
const LINEAR_FINDS: usize = 8;

/// Raw values and their normalized forms, position by position.
pub type Parts = (Vec<Box<[u8]>>, Vec<Box<[u8]>>);

/// Raw values with their equality-normalized forms, no two normalized forms equal.
#[derive(Default)]
pub struct ValueSet {
    pub values: Vec<Box<[u8]>>,
    pub norms: Vec<Box<[u8]>>,
    /// Positions in `norms`, once there are more than `INDEX_FROM` values and more than
    /// `LINEAR_FINDS` lookups were made.
    index: Option<(hashbrown::HashTable<usize>, std::hash::RandomState)>,
    /// Lookups made without the index.
    scans: usize,
}

impl ValueSet {
    /// A set holding an attribute's existing values (which are distinct already).
    pub fn from_parts(values: Vec<Box<[u8]>>, norms: Vec<Box<[u8]>>) -> ValueSet {
        ValueSet {
            values,
            norms,
            index: None,
            scans: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.norms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.norms.is_empty()
    }

    fn build_index(&mut self) {
        if self.index.is_some() || self.norms.len() <= INDEX_FROM {
            return;
        }
        let state = std::hash::RandomState::new();
        let mut table = hashbrown::HashTable::with_capacity(self.norms.len() * 2);
        for (i, n) in self.norms.iter().enumerate() {
            let h = state.hash_one(&**n);
            table.insert_unique(h, i, |&j| state.hash_one(&*self.norms[j]));
        }
        self.index = Some((table, state));
    }

    /// Position of the value whose normalized form is `norm`.
    pub fn find(&mut self, norm: &[u8]) -> Option<usize> {
        if self.index.is_none() {
            self.scans += 1;
            if self.scans > LINEAR_FINDS {
                self.build_index();
            }
        }
        match &self.index {
            None => self.norms.iter().position(|n| &**n == norm),
            Some((table, state)) => table
                .find(state.hash_one(norm), |&i| &*self.norms[i] == norm)
                .copied(),
        }
    }

    /// Adds a value unless one with the same normalized form is there; false if it was.
    pub fn insert(&mut self, raw: Box<[u8]>, norm: Box<[u8]>) -> bool {
        if self.find(&norm).is_some() {
            return false;
        }
        let i = self.norms.len();
        if let Some((table, state)) = &mut self.index {
            let norms = &self.norms;
            table.insert_unique(state.hash_one(&*norm), i, |&j| state.hash_one(&*norms[j]));
        }
        self.values.push(raw);
        self.norms.push(norm);
        true
    }

    /// Removes the values whose positions are marked in `gone` (one pass, order kept).
    pub fn remove_marked(&mut self, gone: &[bool]) {
        let mut i = 0;
        self.values.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
        let mut i = 0;
        self.norms.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
        self.index = None;
    }

    pub fn into_parts(self) -> Parts {
        (self.values, self.norms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Box<[u8]> {
        s.as_bytes().into()
    }

    #[test]
    fn finds_repeats_below_and_above_the_index_threshold() {
        let mut s = ValueSet::default();
        for i in 0..1000 {
            assert!(s.insert(b(&format!("V{i}")), b(&format!("v{i}"))));
            // The first value, every earlier one, is found whatever the size.
            assert_eq!(s.find(b"v0"), Some(0));
            assert!(!s.insert(b("again"), b(&format!("v{}", i / 2))));
        }
        assert_eq!(s.len(), 1000);
        assert_eq!(s.find(b"v999"), Some(999));
        assert_eq!(s.find(b"v1000"), None);
        let mut gone = vec![false; 1000];
        for g in gone.iter_mut().step_by(2) {
            *g = true;
        }
        s.remove_marked(&gone);
        assert_eq!(s.len(), 500);
        assert_eq!(s.find(b"v0"), None);
        assert_eq!(s.find(b"v1"), Some(0));
        assert_eq!(s.find(b"v999"), Some(499));
        let (values, norms) = s.into_parts();
        assert_eq!(&*values[0], b"V1");
        assert_eq!(&*norms[499], b"v999");
    }
}
