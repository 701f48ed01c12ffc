//! Tombstones: what the store remembers of deleted entries, for replication.
//!
//! A delete leaves no entry behind, so without a trace a server cannot tell "deleted here"
//! from "never seen": a peer's older copy of the entry, sent again (an echo of a change it had
//! replicated from here, a full refresh, a restart), would put it back. A tombstone keeps the
//! deleted entry's entryUUID, DN, the CSN of the delete and the entryCSN the entry had when it
//! was deleted (the newest change of it the delete had seen). They live in the version, beside
//! the entries, change in the same writer batches as the deletes that make them, and are
//! journaled and snapshotted with them (`docs/storage-format.md`), so a tombstone is exactly
//! as durable as its delete: both or neither survive a crash.
//!
//! The store gives the strings no meaning: the replication code decides what they hold (CSNs,
//! the entryUUID's equality form) and when tombstones are forgotten. The *floor* is a list of
//! strings it keeps beside them: the CSNs (one per server id) up to which tombstones may have
//! been forgotten, so that a provider knows which cookies its tombstones still cover.
//!
//! Three persistent maps (cloned in O(1) with the version): by entryUUID; by (delete CSN,
//! entryUUID), to forget the oldest first and to find the deletes after a cookie; and by
//! (entryCSN seen, entryUUID), to find the deletes of changes a cookie now covers.

use std::sync::Arc;

use imbl::OrdMap;

/// A deleted entry, remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    /// The entry's entryUUID (its equality form).
    pub uuid: Arc<str>,
    /// Its DN when it was deleted.
    pub dn: Arc<str>,
    /// The CSN of the delete.
    pub csn: Arc<str>,
    /// The entry's entryCSN when it was deleted.
    pub seen: Arc<str>,
}

/// The tombstones of a version, and their floor.
#[derive(Clone, Default)]
pub struct Tombstones {
    by_uuid: OrdMap<Arc<str>, Arc<Tombstone>>,
    by_csn: OrdMap<(Arc<str>, Arc<str>), ()>,
    by_seen: OrdMap<(Arc<str>, Arc<str>), ()>,
    floor: Arc<[Box<str>]>,
}

impl std::fmt::Debug for Tombstones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tombstones")
            .field("len", &self.len())
            .field("floor", &self.floor)
            .finish()
    }
}

impl PartialEq for Tombstones {
    fn eq(&self, other: &Tombstones) -> bool {
        self.floor == other.floor && self.by_uuid == other.by_uuid
    }
}

impl Tombstones {
    /// Tombstones holding `items` (a later one of the same entryUUID replaces an earlier one)
    /// with the floor `floor`.
    pub fn from_parts(items: impl IntoIterator<Item = Tombstone>, floor: Vec<String>) -> Self {
        let mut t = Tombstones::default();
        for x in items {
            t.put(Arc::new(x));
        }
        t.set_floor(floor);
        t
    }

    pub fn len(&self) -> usize {
        self.by_uuid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_uuid.is_empty()
    }

    /// The tombstone of the entry whose entryUUID is `uuid`, if there is one.
    pub fn get(&self, uuid: &str) -> Option<&Arc<Tombstone>> {
        self.by_uuid.get(uuid)
    }

    /// Every tombstone, oldest delete first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Tombstone>> + '_ {
        self.by_csn
            .keys()
            .filter_map(|(_, uuid)| self.by_uuid.get(uuid))
    }

    /// The tombstones whose delete CSN is at or after `from` (a string bound), oldest first.
    pub fn since<'t>(&'t self, from: &str) -> impl Iterator<Item = &'t Arc<Tombstone>> + 't {
        let start: (Arc<str>, Arc<str>) = (from.into(), "".into());
        self.by_csn
            .range(start..)
            .filter_map(|((_, uuid), ())| self.by_uuid.get(uuid))
    }

    /// The tombstones whose `seen` entryCSN is after `after` and at most `upto` (string
    /// order), in that order.
    pub fn seen_between<'t>(
        &'t self,
        after: &str,
        upto: &str,
    ) -> impl Iterator<Item = &'t Arc<Tombstone>> + 't {
        use std::ops::Bound;
        // (after, "") sorts before every key whose seen is `after`: start past all of them.
        let lo: (Arc<str>, Arc<str>) = (format!("{after}\u{0}").into(), "".into());
        let hi: (Arc<str>, Arc<str>) = (format!("{upto}\u{0}").into(), "".into());
        self.by_seen
            .range((Bound::Included(lo), Bound::Excluded(hi)))
            .filter_map(|((_, uuid), ())| self.by_uuid.get(uuid))
    }

    /// The oldest tombstone (smallest delete CSN).
    pub fn oldest(&self) -> Option<&Arc<Tombstone>> {
        let ((_, uuid), ()) = self.by_csn.get_min()?;
        self.by_uuid.get(uuid)
    }

    /// The floor: the CSNs up to which tombstones may have been forgotten.
    pub fn floor(&self) -> &[Box<str>] {
        &self.floor
    }

    /// Inserts `t`, replacing the tombstone of its entryUUID; returns the one replaced.
    pub(crate) fn put(&mut self, t: Arc<Tombstone>) -> Option<Arc<Tombstone>> {
        let old = self.by_uuid.insert(t.uuid.clone(), t.clone());
        if let Some(o) = &old {
            self.by_csn.remove(&(o.csn.clone(), o.uuid.clone()));
            self.by_seen.remove(&(o.seen.clone(), o.uuid.clone()));
        }
        self.by_csn.insert((t.csn.clone(), t.uuid.clone()), ());
        self.by_seen.insert((t.seen.clone(), t.uuid.clone()), ());
        old
    }

    /// Removes the tombstone of `uuid`; returns it.
    pub(crate) fn remove(&mut self, uuid: &str) -> Option<Arc<Tombstone>> {
        let old = self.by_uuid.remove(uuid)?;
        self.by_csn.remove(&(old.csn.clone(), old.uuid.clone()));
        self.by_seen.remove(&(old.seen.clone(), old.uuid.clone()));
        Some(old)
    }

    pub(crate) fn set_floor(&mut self, floor: Vec<String>) {
        self.floor = floor.into_iter().map(String::into_boxed_str).collect();
    }

    pub(crate) fn set_floor_arc(&mut self, floor: Arc<[Box<str>]>) {
        self.floor = floor;
    }

    pub(crate) fn floor_arc(&self) -> Arc<[Box<str>]> {
        self.floor.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(uuid: &str, csn: &str) -> Tombstone {
        Tombstone {
            uuid: uuid.into(),
            dn: format!("uid={uuid},dc=x").into(),
            csn: csn.into(),
            seen: format!("s{csn}").into(),
        }
    }

    #[test]
    fn by_uuid_and_oldest_first() {
        let mut ts = Tombstones::from_parts([t("b", "2"), t("a", "3"), t("c", "1")], vec![]);
        assert_eq!(ts.len(), 3);
        let order: Vec<&str> = ts.iter().map(|x| &*x.uuid).collect();
        assert_eq!(order, ["c", "b", "a"]);
        assert_eq!(ts.oldest().map(|x| &*x.uuid), Some("c"));
        // Replacing moves it in the CSN order.
        ts.put(Arc::new(t("c", "4")));
        assert_eq!(ts.len(), 3);
        assert_eq!(ts.oldest().map(|x| &*x.uuid), Some("b"));
        let since: Vec<&str> = ts.since("3").map(|x| &*x.uuid).collect();
        assert_eq!(since, ["a", "c"]);
        assert!(ts.remove("a").is_some());
        assert!(ts.get("a").is_none());
        assert_eq!(ts.iter().count(), 2);
        let seen: Vec<&str> = ts.seen_between("s2", "s4").map(|x| &*x.uuid).collect();
        assert_eq!(seen, ["c"], "after s2 (exclusive), up to s4 (inclusive)");
        let seen: Vec<&str> = ts.seen_between("s1", "s4").map(|x| &*x.uuid).collect();
        assert_eq!(seen, ["b", "c"]);
        let copy = ts.clone();
        ts.remove("b");
        assert_eq!(copy.len(), 2, "a clone is a version of its own");
    }
}
