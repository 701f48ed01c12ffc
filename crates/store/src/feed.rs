//! The change feed (design.md seam 3): every committed batch, after it is durable and
//! published, with each changed entry's state before and after.
//!
//! Consumers (persistent search, the syncrepl provider, metrics) call [`Store::subscribe`]
//! and read [`Batch`]es from the returned [`Subscription`]. Sequence numbers are the version
//! numbers (`Version::seq`): the batch numbered `s` is the difference between versions `s - 1`
//! and `s`, so a consumer that took a version `v` before reading the feed skips every batch
//! with `seq <= v.seq` and misses none after it (see [`Store::subscribe`]).
//!
//! Why a bounded queue per subscriber rather than `tokio::sync::broadcast`: broadcast's ring
//! also drops old items for a slow reader and says `Lagged`, but (1) one capacity is shared by
//! every consumer, while a persistent search and a replication provider want different ones;
//! (2) a lagged broadcast receiver may go on reading after the gap, which is exactly what a
//! consumer must not do (it must resync), so every consumer would have to remember to stop;
//! (3) the ring holds the last `capacity` batches even after all receivers have read them
//! (until overwritten), i.e. entries of old versions stay alive with nobody reading. Here the
//! writer `try_send`s an `Arc<Batch>` to each subscriber's own `tokio::sync::mpsc` queue; a
//! full queue cuts that subscriber off on the spot (its sender is dropped and a flag says why),
//! so the writer never waits, and what a slow subscriber pins is bounded by its own queue.
//! Its receiver reads what was queued before the cut (no gap inside it) and then ends with
//! [`FeedEnd::Lagged`], never silently.
//!
//! Cost when nobody listens: the writer reads one atomic per batch (`active`) and takes an
//! uncontended mutex after publishing; no before-images are collected.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::mpsc;

use crate::entry::{Entry, EntryId};
use crate::tombstone::Tombstone;
use crate::version::Version;

/// One entry changed by a batch: its state in the version before the batch and after it.
/// Add: `None`/`Some`; delete: `Some`/`None`; modify and rename: `Some`/`Some` (a rename
/// changes the DN; an entry renamed and modified in one batch is one rename). An entry that
/// was added and deleted within one batch does not appear. Entries carry their entryUUID (and
/// every other operational attribute) as attributes.
#[derive(Debug, Clone)]
pub struct Change {
    pub id: EntryId,
    pub before: Option<Arc<Entry>>,
    pub after: Option<Arc<Entry>>,
}

/// What kind of change a [`Change`] is (psearch's changeTypes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Add,
    Delete,
    Modify,
    /// The DN changed (modify DN, or a descendant of a renamed entry).
    Rename,
}

impl Change {
    pub fn kind(&self) -> ChangeKind {
        match (&self.before, &self.after) {
            (None, _) => ChangeKind::Add,
            (Some(_), None) => ChangeKind::Delete,
            (Some(b), Some(a)) if b.ndn_str() != a.ndn_str() || b.dn() != a.dn() => {
                ChangeKind::Rename
            }
            _ => ChangeKind::Modify,
        }
    }
}

/// One committed batch.
#[derive(Debug)]
pub struct Batch {
    /// The number of the version this batch produced.
    pub seq: u64,
    /// The batch's clock (`Txn::now`): the time every operation of the batch was stamped with.
    pub time: SystemTime,
    /// The changed entries, in the order the batch first touched them.
    pub changes: Vec<Change>,
    /// The tombstones the batch put (`crate::tombstone`): those of its deletes, and deletes
    /// a server asserts again without an entry changing (replication).
    pub tombstones: Vec<Arc<Tombstone>>,
}

/// Why a subscription ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FeedEnd {
    /// The subscriber fell more than its queue behind and was cut off: batches after the
    /// ones it read are missing, so it must resync (e.g. search again).
    #[error("the change feed subscriber fell behind and was cut off; resync")]
    Lagged,
    /// The store's writer stopped.
    #[error("the store's writer has stopped")]
    Closed,
}

struct Sub {
    id: u64,
    tx: mpsc::Sender<Arc<Batch>>,
    lagged: Arc<AtomicBool>,
}

/// The subscriber list, shared by the store, the writer thread and every subscription.
#[derive(Default)]
pub(crate) struct Feed {
    subs: Mutex<Vec<Sub>>,
    /// `subs.len()`, readable without the lock: the writer's cheap "anyone listening?" hint.
    active: AtomicUsize,
    next_id: AtomicU64,
}

impl Feed {
    pub(crate) fn subscribe(self: &Arc<Self>, capacity: usize) -> Subscription {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let lagged = Arc::new(AtomicBool::new(false));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut subs = self.subs.lock().unwrap_or_else(|p| p.into_inner());
        subs.push(Sub {
            id,
            tx,
            lagged: lagged.clone(),
        });
        self.active.store(subs.len(), Ordering::Relaxed);
        drop(subs);
        Subscription {
            rx,
            lagged,
            id,
            feed: self.clone(),
        }
    }

    fn unsubscribe(&self, id: u64) {
        let mut subs = self.subs.lock().unwrap_or_else(|p| p.into_inner());
        subs.retain(|s| s.id != id);
        self.active.store(subs.len(), Ordering::Relaxed);
    }

    /// Ends every subscription (`FeedEnd::Closed` after what is queued): the writer stopped.
    pub(crate) fn close(&self) {
        let mut subs = self.subs.lock().unwrap_or_else(|p| p.into_inner());
        subs.clear();
        self.active.store(0, Ordering::Relaxed);
    }

    /// Subscribers right now.
    pub(crate) fn len(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// The writer's hint that before-images are worth collecting for the coming batch. A
    /// subscriber that arrives after the hint still gets the batch (see `publish`).
    pub(crate) fn active(&self) -> bool {
        self.len() > 0
    }

    /// Sends batch `seq` to every subscriber, after the writer published version `after`
    /// (`before` is the version the batch started from). `prepared` holds the changes if the
    /// writer collected them (in first-touch order); otherwise they are collected here from
    /// `touched` (sorted by id), which only happens when a subscriber arrived during the batch.
    ///
    /// Must be called after the version is published: a subscriber registered (under the
    /// lock) before this call sees the batch; one registered after it takes a version that
    /// already includes it. The lock orders the two, so no batch is lost or seen twice.
    pub(crate) fn publish(
        &self,
        prepared: Option<Vec<Change>>,
        touched: &[EntryId],
        tombstones: &[Arc<str>],
        before: &Version,
        after: &Version,
        time: SystemTime,
    ) {
        let mut subs = self.subs.lock().unwrap_or_else(|p| p.into_inner());
        if subs.is_empty() {
            return;
        }
        let changes = prepared.unwrap_or_else(|| collect(touched, before, after));
        let ts = after.tombstones();
        let mut once: HashSet<&str> = HashSet::with_capacity(tombstones.len());
        let put: Vec<Arc<Tombstone>> = tombstones
            .iter()
            .filter(|u| once.insert(u))
            .filter_map(|u| ts.get(u).cloned())
            .collect();
        let batch = Arc::new(Batch {
            seq: after.seq,
            time,
            changes,
            tombstones: put,
        });
        subs.retain(|s| match s.tx.try_send(batch.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                // Set before the sender is dropped, so the receiver that sees the end sees why.
                s.lagged.store(true, Ordering::Release);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
        self.active.store(subs.len(), Ordering::Relaxed);
    }
}

/// The changes of a batch from the ids it touched (in any order, repeats allowed), as
/// before/after pairs read from the two versions: O(touched) map lookups and Arc clones.
pub(crate) fn collect(touched: &[EntryId], before: &Version, after: &Version) -> Vec<Change> {
    let mut seen: HashSet<EntryId, rustc_hash::FxBuildHasher> =
        HashSet::with_capacity_and_hasher(touched.len(), rustc_hash::FxBuildHasher);
    let mut out = Vec::with_capacity(touched.len());
    for &id in touched {
        if !seen.insert(id) {
            continue;
        }
        let b = before.get(id).cloned();
        let a = after.get(id).cloned();
        if b.is_none() && a.is_none() {
            continue;
        }
        out.push(Change {
            id,
            before: b,
            after: a,
        });
    }
    out
}

/// One consumer's end of the feed. Dropping it unsubscribes.
pub struct Subscription {
    rx: mpsc::Receiver<Arc<Batch>>,
    lagged: Arc<AtomicBool>,
    id: u64,
    feed: Arc<Feed>,
}

impl Subscription {
    /// The next batch, waiting for it; after the batches queued before a cut-off, the end and
    /// its reason.
    pub async fn recv(&mut self) -> Result<Arc<Batch>, FeedEnd> {
        match self.rx.recv().await {
            Some(b) => Ok(b),
            None => Err(self.end()),
        }
    }

    /// The next batch if one is queued (`Ok(None)`: none yet), without waiting.
    pub fn try_recv(&mut self) -> Result<Option<Arc<Batch>>, FeedEnd> {
        match self.rx.try_recv() {
            Ok(b) => Ok(Some(b)),
            Err(mpsc::error::TryRecvError::Empty) => Ok(None),
            Err(mpsc::error::TryRecvError::Disconnected) => Err(self.end()),
        }
    }

    /// Whether the writer has cut this subscriber off (batches may still be queued).
    pub fn is_lagged(&self) -> bool {
        self.lagged.load(Ordering::Acquire)
    }

    fn end(&self) -> FeedEnd {
        if self.is_lagged() {
            FeedEnd::Lagged
        } else {
            FeedEnd::Closed
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.feed.unsubscribe(self.id);
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("lagged", &self.is_lagged())
            .finish()
    }
}
