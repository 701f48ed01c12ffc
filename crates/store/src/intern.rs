//! Interned attribute values: a process-wide table of the (raw, normalized) value pairs that
//! recur across entries, so that a packed entry names them by number instead of carrying them.
//!
//! In the reference data every entry carries the same four objectClass values, the same
//! structuralObjectClass and the same creatorsName and modifiersName: about 150 of the ~560
//! bytes of a packed entry. Values are interned only for the attribute types `set_types` names
//! (`set_schema_types`, called wherever a store or a load starts, names those four: types
//! whose values repeat by nature, drawn from the schema or from the few identities that
//! write), at most `MAX_LEN` bytes long, and at most `CAPACITY` of them. The table only grows
//! (a value interned stays until the process ends; a restart keeps only the values the data
//! still uses), so those limits bound what it can hold. Beyond them values are simply stored
//! in the entry. Interning never changes what an entry holds:
//! readers see the same bytes either way.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use schema::AttrId;

/// The most values the table holds.
pub const CAPACITY: usize = 1 << 16;
/// The longest value (raw or normalized) that is interned.
pub const MAX_LEN: usize = 128;

const PAGE: usize = 1024;

type Pair = crate::entry::Pair<'static>;

struct Table {
    /// Slots in pages of `PAGE`, each written once.
    pages: Vec<OnceLock<Box<[OnceLock<Pair>]>>>,
    /// Ids by the hash of their pair, and the next id; writers only.
    index: Mutex<(HashMap<u64, Vec<u32>>, u32)>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        pages: (0..CAPACITY / PAGE).map(|_| OnceLock::new()).collect(),
        index: Mutex::new((HashMap::new(), 0)),
    })
}

/// Attribute types whose values are interned: a bitset over the first 4096 ids.
static TYPES: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// Interns the values of these attribute types from now on (in addition to any set before).
pub fn set_types(types: impl IntoIterator<Item = AttrId>) {
    for t in types {
        if let Some(word) = TYPES.get(t.0 as usize / 64) {
            word.fetch_or(1 << (t.0 % 64), Ordering::Relaxed);
        }
    }
}

/// The attribute types the server interns, by name.
pub const TYPES_INTERNED: [&str; 4] = [
    "objectClass",
    "structuralObjectClass",
    "creatorsName",
    "modifiersName",
];

/// Interns the values of `TYPES_INTERNED` as this schema numbers them.
pub fn set_schema_types(schema: &schema::Schema) {
    set_types(TYPES_INTERNED.iter().filter_map(|n| schema.attr_by_name(n)));
}

/// Whether values of `ty` are interned.
#[inline]
pub fn is_interned_type(ty: AttrId) -> bool {
    TYPES
        .get(ty.0 as usize / 64)
        .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (ty.0 % 64)) != 0)
}

/// The pair with this id.
#[inline]
pub fn get(id: u32) -> Option<Pair> {
    let id = id as usize;
    table().pages.get(id / PAGE)?.get()?[id % PAGE]
        .get()
        .copied()
}

/// The number of ids handed out so far (ids run from 0 to this, exclusive).
pub fn len() -> u32 {
    table().index.lock().map_or(0, |g| g.1)
}

/// Slots of each thread's cache of recent ids (`intern`).
const RECENT_SLOTS: usize = 1024;

/// The id of this pair, interning it if there is room; `None` when the value is too long or
/// the table is full.
pub fn intern(raw: &[u8], norm: &[u8]) -> Option<u32> {
    if raw.len() > MAX_LEN || norm.len() > MAX_LEN {
        return None;
    }
    thread_local! {
        /// Ids this thread interned or looked up last, in slots by a cheap hash of the pair
        /// (FxHash: a slot's id is checked against the pair, so a collision only costs a
        /// miss), so that bulk loads on several threads neither meet at the lock nor compute
        /// the keyed hash for every value.
        static RECENT: std::cell::RefCell<Box<[u32]>> =
            std::cell::RefCell::new(vec![u32::MAX; RECENT_SLOTS].into_boxed_slice());
    }
    let is = |id: u32| get(id) == Some((raw, norm));
    let slot = {
        use std::hash::{BuildHasher, BuildHasherDefault};
        BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one((raw, norm)) as usize
            % RECENT_SLOTS
    };
    let id = RECENT.with(|r| r.borrow()[slot]);
    if id != u32::MAX && is(id) {
        return Some(id);
    }
    let h = {
        use std::hash::BuildHasher;
        static KEYS: OnceLock<std::hash::RandomState> = OnceLock::new();
        KEYS.get_or_init(std::hash::RandomState::new)
            .hash_one((raw, norm))
    };
    let t = table();
    let mut guard = t.index.lock().ok()?;
    let (index, next) = &mut *guard;
    let ids = index.entry(h).or_default();
    let id = match ids.iter().copied().find(|id| is(*id)) {
        Some(id) => id,
        None => {
            let id = *next;
            if id as usize >= CAPACITY {
                return None;
            }
            let pair: Pair = (Box::leak(raw.into()), Box::leak(norm.into()));
            let page = t.pages[id as usize / PAGE]
                .get_or_init(|| (0..PAGE).map(|_| OnceLock::new()).collect());
            let _ = page[id as usize % PAGE].set(pair);
            ids.push(id);
            *next += 1;
            id
        }
    };
    drop(guard);
    RECENT.with(|r| r.borrow_mut()[slot] = id);
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_get_one_id_each() {
        let a = intern(b"Intern-Test-A", b"intern-test-a").expect("room");
        let b = intern(b"Intern-Test-B", b"intern-test-b").expect("room");
        assert_ne!(a, b);
        assert_eq!(intern(b"Intern-Test-A", b"intern-test-a"), Some(a));
        let other_thread = std::thread::spawn(|| intern(b"Intern-Test-A", b"intern-test-a"));
        assert_eq!(other_thread.join().expect("thread"), Some(a));
        assert_eq!(get(a), Some((&b"Intern-Test-A"[..], &b"intern-test-a"[..])));
        assert!(len() > a.max(b));
        assert_eq!(intern(&[b'x'; MAX_LEN + 1], b"x"), None);
        assert_eq!(get(u32::MAX), None);
    }
}
