//! One consistent version of the directory.
//!
//! Every map is a persistent (structurally shared) B-tree map from `imbl` (its dense nodes cost
//! far less memory per key than its HAMT `HashMap`), so cloning a version is O(1)
//! and a writer batch copies only the paths it touches. Posting lists are `Arc<RoaringBitmap>` (or one inline id):
//! a batch copies a list the first time it changes it (`Arc::make_mut`) and edits it in place after
//! that, so the copy cost is paid once per list per batch, not per operation.

use std::collections::HashSet;
use std::sync::Arc;

use imbl::OrdMap;
use roaring::RoaringBitmap;
use schema::{AttrId, NormDn};

use crate::entry::{Entry, EntryId};

/// Equality index key: attribute type and a 64-bit hash of the equality-normalized value.
/// Index lookups only propose candidates, and every candidate is checked against the full
/// filter, so a hash collision costs one extra check and never a wrong answer; in exchange a key
/// needs no allocation and compares in one instruction.
pub type IndexKey = (AttrId, u64);

/// The index hash of a normalized value (SipHash with fixed keys: stable within a process).
pub fn value_hash(norm: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    norm.hash(&mut h);
    h.finish()
}

/// The entries holding one indexed value. Most values of the reference attributes (uid, mail,
/// cn, sn) name exactly one entry, so that case is stored inline: a bitmap per value would cost
/// a few hundred bytes per entry and attribute.
#[derive(Clone, Debug)]
pub enum Posting {
    One(EntryId),
    Many(Arc<RoaringBitmap>),
}

impl Posting {
    /// Adds this posting's ids to `out`.
    pub fn union_into(&self, out: &mut RoaringBitmap) {
        match self {
            Posting::One(id) => {
                out.insert(*id);
            }
            Posting::Many(b) => *out |= &**b,
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

#[derive(Clone)]
pub struct Version {
    /// Number of the batch that produced this version.
    pub seq: u64,
    pub(crate) entries: OrdMap<EntryId, Arc<Entry>>,
    pub(crate) by_dn: OrdMap<String, EntryId>,
    pub(crate) children: OrdMap<EntryId, Arc<RoaringBitmap>>,
    pub(crate) eq: OrdMap<IndexKey, Posting>,
    pub(crate) pres: OrdMap<AttrId, Arc<RoaringBitmap>>,
    pub(crate) indexed: Arc<HashSet<AttrId>>,
    pub(crate) next_id: EntryId,
}

impl Version {
    pub(crate) fn empty(indexed: HashSet<AttrId>) -> Version {
        Version {
            seq: 0,
            entries: OrdMap::new(),
            by_dn: OrdMap::new(),
            children: OrdMap::new(),
            eq: OrdMap::new(),
            pres: OrdMap::new(),
            indexed: Arc::new(indexed),
            next_id: 1,
        }
    }

    /// A version holding `entries` (e.g. recovered from disk), as of batch `seq`, allocating
    /// new ids from `next_id`. Each entry's `parent` must be among `entries` (or `None`).
    pub fn restore(
        indexed: &[AttrId],
        entries: impl IntoIterator<Item = Entry>,
        next_id: EntryId,
        seq: u64,
    ) -> Version {
        let mut v = Version::empty(indexed.iter().copied().collect());
        for e in entries {
            v.next_id = v.next_id.max(e.id.saturating_add(1));
            v.put(e);
        }
        v.next_id = v.next_id.max(next_id);
        v.seq = seq;
        v
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
        self.entries.get(&id)
    }

    /// The entry with this normalized DN.
    pub fn lookup(&self, ndn: &NormDn) -> Option<&Arc<Entry>> {
        self.by_dn
            .get(&ndn.norm)
            .and_then(|id| self.entries.get(id))
    }

    pub fn lookup_norm(&self, norm: &str) -> Option<&Arc<Entry>> {
        self.by_dn.get(norm).and_then(|id| self.entries.get(id))
    }

    /// The nearest existing ancestor of a DN that does not exist (for matchedDN), as stored.
    pub fn matched(&self, ndn: &NormDn) -> Option<&Arc<Entry>> {
        let mut cur = ndn.parent();
        while let Some(p) = cur {
            if let Some(e) = self.lookup(&p) {
                return Some(e);
            }
            cur = p.parent();
        }
        None
    }

    pub fn children(&self, id: EntryId) -> Option<&RoaringBitmap> {
        self.children.get(&id).map(|b| &**b)
    }

    pub fn num_children(&self, id: EntryId) -> u64 {
        self.children(id).map_or(0, |b| b.len())
    }

    pub fn is_indexed(&self, ty: AttrId) -> bool {
        self.indexed.contains(&ty)
    }

    pub(crate) fn eq_postings(&self, ty: AttrId, norm: &[u8]) -> Option<&Posting> {
        self.eq.get(&(ty, value_hash(norm)))
    }

    pub(crate) fn pres_postings(&self, ty: AttrId) -> Option<&RoaringBitmap> {
        self.pres.get(&ty).map(|b| &**b)
    }

    /// All entries in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.entries.values()
    }

    // ---- mutation, used only by the writer on its private working copy ----

    fn index_entry(&mut self, e: &Entry, add: bool) {
        let id = e.id;
        for a in &e.attrs {
            if !self.indexed.contains(&a.ty) {
                continue;
            }
            let pres = Arc::make_mut(self.pres.entry(a.ty).or_default());
            if add {
                pres.insert(id);
            } else {
                pres.remove(id);
            }
            for n in &a.norm {
                let key = (a.ty, value_hash(n));
                if add {
                    match self.eq.get_mut(&key) {
                        Some(p) => p.insert(id),
                        None => {
                            self.eq.insert(key, Posting::One(id));
                        }
                    }
                } else if let Some(p) = self.eq.get_mut(&key) {
                    if p.remove(id) {
                        self.eq.remove(&key);
                    }
                }
            }
        }
    }

    pub(crate) fn put(&mut self, entry: Entry) {
        let id = entry.id;
        if let Some(old) = self.entries.get(&id).cloned() {
            self.index_entry(&old, false);
            if old.ndn.norm != entry.ndn.norm {
                self.by_dn.remove(&old.ndn.norm);
            }
            if old.parent != entry.parent {
                if let Some(p) = old.parent {
                    self.unlink_child(p, id);
                }
            }
        }
        self.index_entry(&entry, true);
        self.by_dn.insert(entry.ndn.norm.clone(), id);
        if let Some(p) = entry.parent {
            Arc::make_mut(self.children.entry(p).or_default()).insert(id);
        }
        self.entries.insert(id, Arc::new(entry));
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
        let old = self.entries.remove(&id)?;
        self.index_entry(&old, false);
        self.by_dn.remove(&old.ndn.norm);
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
