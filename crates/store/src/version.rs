//! One consistent version of the directory.
//!
//! Every map is a persistent (structurally shared) map from `imbl`, so cloning a version is O(1)
//! and a writer batch copies only the paths it touches. Posting lists are `Arc<RoaringBitmap>`:
//! a batch copies a list the first time it changes it (`Arc::make_mut`) and edits it in place after
//! that, so the copy cost is paid once per list per batch, not per operation.

use std::collections::HashSet;
use std::sync::Arc;

use imbl::HashMap;
use roaring::RoaringBitmap;
use schema::{AttrId, NormDn};

use crate::entry::{Entry, EntryId};

/// Equality index key: attribute type and equality-normalized value.
pub type IndexKey = (AttrId, Box<[u8]>);

#[derive(Clone)]
pub struct Version {
    /// Number of the batch that produced this version.
    pub seq: u64,
    pub(crate) entries: HashMap<EntryId, Arc<Entry>>,
    pub(crate) by_dn: HashMap<String, EntryId>,
    pub(crate) children: HashMap<EntryId, Arc<RoaringBitmap>>,
    pub(crate) eq: HashMap<IndexKey, Arc<RoaringBitmap>>,
    pub(crate) pres: HashMap<AttrId, Arc<RoaringBitmap>>,
    pub(crate) indexed: Arc<HashSet<AttrId>>,
    pub(crate) next_id: EntryId,
}

impl Version {
    pub(crate) fn empty(indexed: HashSet<AttrId>) -> Version {
        Version {
            seq: 0,
            entries: HashMap::new(),
            by_dn: HashMap::new(),
            children: HashMap::new(),
            eq: HashMap::new(),
            pres: HashMap::new(),
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

    pub(crate) fn eq_postings(&self, ty: AttrId, norm: &[u8]) -> Option<&RoaringBitmap> {
        // The key type owns its bytes; a borrowed lookup would need a custom Borrow impl, and this
        // allocation is small next to the bitmap work that follows.
        self.eq.get(&(ty, Box::<[u8]>::from(norm))).map(|b| &**b)
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
                let key = (a.ty, n.clone());
                if add {
                    Arc::make_mut(self.eq.entry(key).or_default()).insert(id);
                } else if let Some(b) = self.eq.get_mut(&key) {
                    let b = Arc::make_mut(b);
                    b.remove(id);
                    if b.is_empty() {
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
