//! The in-memory, versioned (MVCC) directory store.
//!
//! - `entry`: entries and attributes as kept in memory (raw values plus equality-normalized keys).
//! - `hashtrie`: the persistent hash-keyed map behind the equality index and the DN map.
//! - `idmap`: the persistent radix array of entries by id.
//! - `index`: what is indexed per attribute type (presence, equality, substrings, ordering)
//!   and the index keys of an entry's values.
//! - `version`: one immutable, consistent version of the whole directory, with its DN map,
//!   children map, indexes and schema; readers hold an `Arc<Version>` and never block.
//! - `filter`: the schema-resolved search filter and its three-valued evaluation (RFC 4511 §4.5.1.7).
//! - `plan`: candidate selection over the indexes and scope walking.
//! - `writer`: the single writer thread with group commit; operations run as closures against a
//!   `Txn`, each all-or-nothing, and are acknowledged after their batch is published. A `Txn`
//!   may also extend the schema compatibly (`Txn::extend_schema`), published with the batch.
//!
//! - `footprint`: what a version's structures take in memory, by part, in the allocator's
//!   size classes.
//! - `stats`: the writer's figures for monitoring (batches, operations per batch, commit
//!   latency, queue depth), in relaxed atomics and lock-free histograms.
//! - `tombstone`: what is remembered of deleted entries for replication (entryUUID, DN, CSNs),
//!   in the version, journaled and snapshotted with the deletes that make them.
//! - `feed`: the change feed: each published batch with its entries before and after, queued
//!   for subscribers (`Store::subscribe`); a subscriber that falls behind is cut off.
//!
//! Persistence (transaction log, snapshots) attaches to the writer: every batch ends in one place
//! (`Writer::commit_batch`) where the changed entries are known.

pub mod entry;
pub mod feed;
pub mod filter;
pub mod footprint;
pub mod hashtrie;
pub mod idmap;
pub mod index;
pub mod intern;
mod par;
pub mod persist;
pub mod plan;
mod sizes;
pub mod stats;
pub mod tombstone;
pub mod version;
pub mod writer;

pub use entry::{same_options, Attr, AttrRef, Entry, EntryId, OwnedPair, Part};
pub use feed::{Batch, Change, ChangeKind, FeedEnd, Subscription};
pub use filter::{Filter, Tri};
pub use index::{IndexKinds, Indexes};
pub use roaring::RoaringBitmap;
pub use tombstone::{Tombstone, Tombstones};
pub use version::{ValueDelta, Version};
pub use writer::{Journal, JournalError, SchemaGuard, Store, StoreError, TombstoneChanges, Txn};

/// Search scope (RFC 4511 §4.5.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Base,
    One,
    Subtree,
}
