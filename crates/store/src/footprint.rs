//! Where a version's memory goes: every allocation of its structures counted at the size the
//! server's allocator gives it (jemalloc's size classes, `alloc_size`), per part. Computed by
//! walking the structures, so it does not depend on timing or on what else the process holds;
//! `linden`'s resident memory is this plus the allocator's and the process's own overhead.
//!
//! Shared structure is counted once per version walked: for a single version (after a start)
//! that is what it holds.

use std::mem::size_of;

use roaring::RoaringBitmap;

use crate::entry::Entry;
pub use crate::sizes::{alloc_size, Part};
use crate::sizes::{arc_size, bitmap_size};
use crate::version::{Posting, Version};

/// A version's memory by part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    /// The entries' packed buffers.
    pub packed: Part,
    /// What the packed buffers would take without size-class rounding (bytes only).
    pub packed_exact: u64,
    /// The shared handles the entry table points to (`Arc<Entry>`).
    pub entry_handles: Part,
    /// The entry table (radix array by id).
    pub entry_table: Part,
    /// The DN map.
    pub dn_map: Part,
    /// The equality and substring index: its trie and inline postings.
    pub eq_trie: Part,
    /// The equality and substring index: the bitmaps of keys held by several entries.
    pub eq_bitmaps: Part,
    /// Presence index, children map and ordering index.
    pub other_indexes: Part,
    pub entries: u64,
}

impl Footprint {
    /// Every part with its name, in a fixed order.
    pub fn parts(&self) -> [(&'static str, Part); 8] {
        [
            ("packed entries", self.packed),
            ("entry handles (Arc<Entry>)", self.entry_handles),
            ("entry table", self.entry_table),
            ("DN map", self.dn_map),
            ("equality/substring trie", self.eq_trie),
            ("equality/substring bitmaps", self.eq_bitmaps),
            ("presence, children, ordering", self.other_indexes),
            (
                "size-class rounding of packed entries (in the first line)",
                Part {
                    bytes: self.packed.bytes - self.packed_exact,
                    allocations: 0,
                },
            ),
        ]
    }

    /// All parts but the rounding line (which the packed line includes).
    pub fn total(&self) -> u64 {
        self.parts()[..7].iter().map(|(_, p)| p.bytes).sum()
    }
}

fn posting_size(p: &Posting, part: &mut Part) {
    if let Posting::Many(b) = p {
        part.add(arc_size::<RoaringBitmap>());
        bitmap_size(b, part);
    }
}

impl Version {
    /// What this version's structures take, by part.
    pub fn footprint(&self) -> Footprint {
        let mut f = Footprint {
            entries: self.len() as u64,
            ..Footprint::default()
        };
        for e in self.iter() {
            f.entry_handles.add(arc_size::<Entry>());
            f.packed.add(alloc_size(e.packed().len()));
            f.packed_exact += e.packed().len() as u64;
        }
        self.entries.footprint(&mut f.entry_table);
        let mut dn_bitmaps = Part::default();
        self.by_dn.footprint(&mut f.dn_map, &mut dn_bitmaps);
        f.dn_map.bytes += dn_bitmaps.bytes;
        f.dn_map.allocations += dn_bitmaps.allocations;
        self.eq.footprint(&mut f.eq_trie, &mut f.eq_bitmaps);
        let o = &mut f.other_indexes;
        // imbl's B-tree nodes: counted as one node of 64 keys per 32 items (half full).
        let node = |key: usize, value: usize| alloc_size(16 + 64 * (key + value) + 65 * 8);
        let nodes = |len: usize| len.div_ceil(32).max(1);
        for (map_len, key, value) in [
            (self.pres.len(), size_of::<schema::AttrId>(), 8),
            (self.children.len(), size_of::<u32>(), 8),
            (self.ord.len(), size_of::<(schema::AttrId, Vec<u8>)>(), 16),
        ] {
            for _ in 0..nodes(map_len) {
                o.add(node(key, value));
            }
        }
        for b in self.pres.values().chain(self.children.values()) {
            o.add(arc_size::<RoaringBitmap>());
            bitmap_size(b, o);
        }
        for ((_, k), p) in self.ord.iter() {
            o.add(alloc_size(k.len()));
            posting_size(p, o);
        }
        f
    }
}
