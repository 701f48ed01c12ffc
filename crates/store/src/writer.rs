//! The single writer and its transactions.
//!
//! All changes go through one thread. It takes every operation waiting in its queue (a batch),
//! runs each as a closure against a private working copy of the newest version, publishes the
//! resulting version once for the whole batch, and only then answers the operations. Each
//! operation is all-or-nothing: every entry it changes is recorded in an undo log as it was
//! (`Txn::undo`), and put back, newest first, if it returns an error or panics. (The working
//! copy was once saved whole per operation, an O(1) clone of the persistent maps; but a saved
//! clone shares every node, so each operation then copied its paths through them again instead
//! of once per batch: about a third of a modify's writer time.) The durable log attaches between
//! applying the batch and publishing it (`Journal::commit`); the change feed (`feed`) gets the
//! batch after it is published and before any of its operations is answered.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use schema::{AttrId, NormDn, Schema, SchemaError};
use tokio::sync::oneshot;

use crate::entry::{Attr, Entry, EntryId, Part};
use crate::feed::{Feed, Subscription};
use crate::index::Indexes;
use crate::stats::WriterStats;
use crate::tombstone::Tombstone;
use crate::version::{ValueDelta, Version};

/// Failures of the store itself (not of an operation's own checks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the writer has stopped; no further changes are accepted")]
    WriterStopped,
    /// The journal could not make a batch durable; the writer refuses all further changes
    /// (a failed fsync is not retryable) while reads go on.
    #[error("changes are refused: {0}")]
    Unavailable(String),
    /// The journal had no room for this batch (the disk is full): the batch changed nothing,
    /// and the writer takes the next one as if this one had not been tried, so writes resume
    /// by themselves once space is freed.
    #[error("{0}")]
    DiskFull(String),
    #[error("entry '{0}' already exists")]
    AlreadyExists(String),
    #[error("parent of '{0}' does not exist")]
    NoParent(String),
    #[error("entry '{0}' has subordinates")]
    NotLeaf(String),
    #[error("no such entry")]
    NoSuchEntry,
    /// The operation's own code panicked in the writer: it changed nothing and the writer
    /// goes on with the next operation.
    #[error("the server failed while applying this change ({0}); nothing was changed")]
    Failed(String),
}

/// Where a batch becomes durable. The writer calls `commit` once per batch, after applying it
/// and before publishing it or answering any of its operations.
pub trait Journal: Send {
    /// Makes the changes of batch `seq` durable: `schema` lists the schema extensions the
    /// batch applied, in order (`Txn::extend_schema`; `version.schema()` includes them);
    /// `touched` lists every entry the batch changed; those present in `version` were added or
    /// modified (from their state in `prev`, the version the batch started from: a journal
    /// may record only the difference), the others deleted. `tombstones` says what the batch did to the tombstones
    /// (`Txn::put_tombstone` …), read from `version` likewise. `time` is the batch's time (the
    /// one its operations were stamped with, `Txn::now`).
    #[expect(
        clippy::too_many_arguments,
        reason = "one batch's parts, each read by the journal once"
    )]
    fn commit(
        &mut self,
        seq: u64,
        time: SystemTime,
        prev: &Version,
        version: &Version,
        schema: &[String],
        touched: &[EntryId],
        tombstones: &TombstoneChanges,
    ) -> Result<(), JournalError>;
}

/// Why a journal did not make a batch durable, and whether that is for good.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    /// No room (the disk is full). Nothing of the batch is in the journal, which expects the
    /// same batch number next: the writer refuses this batch and tries the next one.
    #[error("{0}")]
    Full(String),
    /// Anything else (an I/O error, a failed fsync): the journal takes nothing more, and the
    /// writer refuses every change from now on.
    #[error("{0}")]
    Failed(String),
}

/// What one batch did to the tombstones (`crate::tombstone`): the entryUUIDs whose tombstone it
/// put or removed (each once, sorted: those `version.tombstones()` holds were put, the others
/// removed), and whether it changed their floor.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TombstoneChanges {
    pub touched: Vec<Arc<str>>,
    pub floor: bool,
}

impl TombstoneChanges {
    pub fn is_empty(&self) -> bool {
        self.touched.is_empty() && !self.floor
    }
}

/// The reply of one operation, sent once its batch is published, or with the reason the batch
/// could not be made durable. Runs on the writer thread (see `Store::write_then`).
type Reply = Box<dyn FnOnce(Option<StoreError>) + Send>;

/// Operations handed to the writer thread: run against the working version, return the reply.
type Job = Box<dyn FnOnce(&mut Txn) -> Reply + Send>;

/// Most operations applied in one batch before it is published.
const MAX_BATCH: usize = 4096;

pub struct Store {
    current: Arc<ArcSwap<Version>>,
    jobs: mpsc::Sender<Job>,
    feed: Arc<Feed>,
    stats: Arc<WriterStats>,
}

/// An operation's callback, called exactly once: with its outcome, or with `WriterStopped` when
/// it is dropped uncalled (the job never reached the writer, or the writer stopped first).
struct Done<T, D: FnOnce(Result<T, StoreError>)>(Option<D>, std::marker::PhantomData<fn(T)>);

impl<T, D: FnOnce(Result<T, StoreError>)> Done<T, D> {
    fn call(mut self, r: Result<T, StoreError>) {
        if let Some(d) = self.0.take() {
            d(r);
        }
    }
}

impl<T, D: FnOnce(Result<T, StoreError>)> Drop for Done<T, D> {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            d(Err(StoreError::WriterStopped));
        }
    }
}

/// Wraps an operation so that it is all-or-nothing and answers through `send` (once, whatever
/// happens: see `Done`).
fn make_job<R, E, F>(
    f: F,
    send: impl FnOnce(Result<Result<R, E>, StoreError>) + Send + 'static,
) -> Job
where
    R: Send + 'static,
    E: Send + 'static,
    F: FnOnce(&mut Txn) -> Result<R, E> + Send + 'static,
{
    let send = Done(Some(send), std::marker::PhantomData);
    Box::new(move |txn: &mut Txn| {
        let saved = txn.savepoint();
        // A panic in one operation fails that operation only: the working copy is restored
        // as for an error, and the writer thread lives on for the others.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(txn)));
        let r = match r {
            Ok(r) => Ok(r),
            Err(p) => {
                let why = panic_message(&*p);
                tracing::error!(
                    "a write operation panicked in the writer and was rolled back: {why}"
                );
                Err(StoreError::Failed(why))
            }
        };
        if !matches!(r, Ok(Ok(_))) {
            txn.roll_back(saved);
        }
        Box::new(move |failed: Option<StoreError>| match (failed, r) {
            (None, r) => send.call(r),
            (Some(e), _) => send.call(Err(e)),
        })
    })
}

impl Store {
    /// A new, empty, memory-only store indexing `indexed` attribute types (equality and presence).
    pub fn new(schema: Arc<Schema>, indexed: &[AttrId]) -> Store {
        Store::with_indexes(schema, Indexes::eq_pres(indexed))
    }

    /// A new, empty, memory-only store keeping `indexes`.
    pub fn with_indexes(schema: Arc<Schema>, indexes: Indexes) -> Store {
        Store::open(Version::empty(indexes, schema), None)
    }

    /// A store starting from `initial` (e.g. recovered from disk, with the schema recovery
    /// gave), whose batches are made durable by `journal` before they are published.
    pub fn with_journal(initial: Version, journal: Box<dyn Journal>) -> Store {
        Store::open(initial, Some(journal))
    }

    fn open(initial: Version, journal: Option<Box<dyn Journal>>) -> Store {
        crate::intern::set_schema_types(&initial.schema);
        let current = Arc::new(ArcSwap::from_pointee(initial));
        let (tx, rx) = mpsc::channel::<Job>();
        let cur = current.clone();
        let feed = Arc::new(Feed::default());
        let fd = feed.clone();
        let stats = Arc::new(WriterStats::default());
        let st = stats.clone();
        std::thread::Builder::new()
            .name("linden-writer".into())
            .spawn(move || {
                writer_loop(rx, cur, journal, &fd, &st);
                fd.close();
            })
            .map(|_| ())
            .unwrap_or_else(|e| tracing::error!("cannot start the writer thread: {e}"));
        Store {
            current,
            jobs: tx,
            feed,
            stats,
        }
    }

    /// The writer's figures (batches, operations per batch, commit latency, queue depth).
    pub fn stats(&self) -> &WriterStats {
        &self.stats
    }

    /// Subscribes to the change feed (see `feed`): every batch published after this call is
    /// queued for the subscription, up to `capacity` batches not yet read; beyond that the
    /// subscription is cut off and ends with `FeedEnd::Lagged` after the queued batches.
    ///
    /// To follow a consistent state without losing or repeating a change, subscribe first,
    /// then take `read()`, and skip every batch whose `seq` is at most that version's `seq`.
    pub fn subscribe(&self, capacity: usize) -> Subscription {
        self.feed.subscribe(capacity)
    }

    /// How many subscriptions are open (for tests and monitoring).
    pub fn subscribers(&self) -> usize {
        self.feed.len()
    }

    /// The schema of the newest published version. Code that works on a version should use
    /// that version's `schema()` instead: a newer schema only adds definitions, but an older
    /// one may lack types a newer version's entries hold.
    pub fn schema(&self) -> Arc<Schema> {
        self.current.load().schema.clone()
    }

    /// The schema of the newest published version, borrowed without touching its reference
    /// count (the hot paths ask for it per entry encoded: a shared counter would bounce
    /// between cores). Hold it briefly, as a `load` guard.
    pub fn current_schema(&self) -> SchemaGuard {
        SchemaGuard(self.current.load())
    }

    /// The newest published version. Never blocks.
    pub fn read(&self) -> Arc<Version> {
        self.current.load_full()
    }

    /// Hands `f` to the writer as one all-or-nothing operation, now (so operations queued in
    /// order run in that order); the returned future resolves after the batch holding it is
    /// durable and published.
    pub fn write<R, E, F>(
        &self,
        f: F,
    ) -> impl Future<Output = Result<Result<R, E>, StoreError>> + Send + 'static
    where
        R: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&mut Txn) -> Result<R, E> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.write_then(f, move |r| {
            let _ = tx.send(r);
        });
        async move { rx.await.map_err(|_| StoreError::WriterStopped)? }
    }

    /// `write` with a callback instead of a future: `done` gets the outcome on the writer
    /// thread, right after the batch is published (before the next batch starts), in the order
    /// the operations were queued. For answers that cost about as little as waking a task to
    /// give them (the server queues a write's response on its connection from here: one task
    /// woken per connection and batch instead of one per operation); anything that may block
    /// must move elsewhere. A panic in `done` is caught and logged. `done` is called exactly
    /// once: with `WriterStopped`, on this thread, if the writer has stopped.
    pub fn write_then<R, E, F>(
        &self,
        f: F,
        done: impl FnOnce(Result<Result<R, E>, StoreError>) + Send + 'static,
    ) where
        R: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&mut Txn) -> Result<R, E> + Send + 'static,
    {
        self.stats.queued();
        // A job the writer cannot take is dropped here, which answers it (`Done`).
        let _ = self.jobs.send(make_job(f, done));
    }

    /// Blocking variant of `write` for start-up code outside an async context.
    pub fn write_blocking<R, E, F>(&self, f: F) -> Result<Result<R, E>, StoreError>
    where
        R: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&mut Txn) -> Result<R, E> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel();
        self.write_then(f, move |r| {
            let _ = tx.send(r);
        });
        rx.recv().map_err(|_| StoreError::WriterStopped)?
    }
}

/// The schema of a published version, borrowed (`Store::current_schema`).
pub struct SchemaGuard(arc_swap::Guard<Arc<Version>>);

impl std::ops::Deref for SchemaGuard {
    type Target = Schema;

    fn deref(&self) -> &Schema {
        &self.0.schema
    }
}

fn writer_loop(
    rx: mpsc::Receiver<Job>,
    current: Arc<ArcSwap<Version>>,
    mut journal: Option<Box<dyn Journal>>,
    feed: &Feed,
    stats: &WriterStats,
) {
    let mut replies: Vec<Reply> = Vec::new();
    let mut poisoned: Option<String> = None;
    while let Ok(first) = rx.recv() {
        // Kept for the feed's before-images (the working copy shares its structure anyway).
        let prev = current.load_full();
        let work = (*prev).clone();
        let mut txn = Txn {
            work,
            now: SystemTime::now(),
            touched: Vec::new(),
            schema_changes: Vec::new(),
            tombstones: TombstoneChanges::default(),
            undo: Vec::new(),
        };
        replies.push(first(&mut txn));
        while replies.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => replies.push(job(&mut txn)),
                Err(_) => break,
            }
        }
        let ran = replies.len() as u64;
        stats.taken(ran);
        stats.operations.fetch_add(ran, Ordering::Relaxed);
        stats.batch_size.record(ran);
        let Txn {
            mut work,
            mut touched,
            schema_changes,
            mut tombstones,
            now: txn_now,
            ..
        } = txn;
        // Batch numbers count the batches that changed something, without gaps: recovery
        // uses them to prove no batch is missing.
        let changed = !touched.is_empty() || !schema_changes.is_empty() || !tombstones.is_empty();
        if changed {
            work.seq += 1;
        }
        let mut failed = poisoned.clone().map(StoreError::Unavailable);
        // The feed's changes in the order the batch made them, taken before the journal sorts
        // `touched`; only when someone listens.
        let prepared = (failed.is_none() && changed && feed.active())
            .then(|| crate::feed::collect(&touched, &prev, &work));
        if failed.is_none() && changed {
            if let Some(j) = journal.as_mut() {
                touched.sort_unstable();
                touched.dedup();
                tombstones.touched.sort_unstable();
                tombstones.touched.dedup();
                let t = std::time::Instant::now();
                let r = j.commit(
                    work.seq,
                    txn_now,
                    &prev,
                    &work,
                    &schema_changes,
                    &touched,
                    &tombstones,
                );
                stats
                    .commit_micros
                    .record(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
                match r {
                    Ok(()) => {
                        if stats.disk_full.swap(false, Ordering::Relaxed) {
                            tracing::info!(
                                "writes are accepted again: the transaction log has room (space was freed)"
                            );
                        }
                    }
                    // Not published, so the next batch starts from the same version and
                    // takes the same batch number.
                    Err(JournalError::Full(e)) => {
                        stats.refused_full.fetch_add(1, Ordering::Relaxed);
                        if !stats.disk_full.swap(true, Ordering::Relaxed) {
                            tracing::error!("writes refused until space is freed: {e}");
                        }
                        failed = Some(StoreError::DiskFull(e));
                    }
                    Err(JournalError::Failed(e)) => {
                        tracing::error!("writes refused from now on: {e}");
                        stats.disk_full.store(false, Ordering::Relaxed);
                        poisoned = Some(e.clone());
                        failed = Some(StoreError::Unavailable(e));
                    }
                }
            }
        }
        if failed.is_none() && changed {
            stats.batches.fetch_add(1, Ordering::Relaxed);
            let now = Arc::new(work);
            current.store(now.clone());
            // Before the replies: once a write is acknowledged, its batch is already queued
            // for every subscriber.
            feed.publish(
                prepared,
                &touched,
                &tombstones.touched,
                &prev,
                &now,
                txn_now,
            );
        }
        for r in replies.drain(..) {
            let f = failed.clone();
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r(f))) {
                tracing::error!(
                    "answering a committed write panicked; its client gets no answer: {}",
                    panic_message(&*p)
                );
            }
        }
        // After the replies: the last reference to the previous version may be this one, and
        // dropping it frees every node the batch copied.
        drop(prev);
    }
}

/// What a caught panic said.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

/// The view an operation has on the writer: the working version and the means to change it.
pub struct Txn {
    work: Version,
    now: SystemTime,
    /// Entries changed by this batch, for the journal.
    touched: Vec<EntryId>,
    /// Schema extensions applied by this batch, in order, for the journal.
    schema_changes: Vec<String>,
    /// What this batch did to the tombstones, for the journal.
    tombstones: TombstoneChanges,
    /// What the running operation changed, oldest first, to undo it if it fails.
    undo: Vec<Undo>,
}

/// How to take back one change to the working version's entries. `Version::put` of an entry's
/// earlier state is the exact inverse of a `put` or `remove` of it (the index, DN and parent
/// changes are computed from the two states), and `remove` that of an `add`. Every `Undo` is
/// recorded before the change it takes back starts, and the index keys a `put` needs are
/// computed before it changes anything, so a panicking operation is undone as well.
enum Undo {
    Put(Arc<Entry>),
    Remove(EntryId),
    /// The tombstone of an entryUUID as it was (`None`: there was none).
    Tombstone(Arc<str>, Option<Arc<Tombstone>>),
    TombstoneFloor(Arc<[Box<str>]>),
}

/// Where an operation started (`Txn::savepoint`), to return there if it fails.
struct Savepoint {
    touched: usize,
    schema_changes: usize,
    tombstones: (usize, bool),
    next_id: EntryId,
    schema: Arc<Schema>,
}

impl Txn {
    /// Starts an operation: the undo log of the previous one (which succeeded) is dropped.
    fn savepoint(&mut self) -> Savepoint {
        self.undo.clear();
        Savepoint {
            touched: self.touched.len(),
            schema_changes: self.schema_changes.len(),
            tombstones: (self.tombstones.touched.len(), self.tombstones.floor),
            next_id: self.work.next_id,
            schema: self.work.schema.clone(),
        }
    }

    /// Takes back everything the running operation did, newest first.
    fn roll_back(&mut self, to: Savepoint) {
        while let Some(u) = self.undo.pop() {
            match u {
                Undo::Put(e) => self.work.put_arc(e),
                Undo::Remove(id) => {
                    self.work.remove(id);
                }
                Undo::Tombstone(uuid, Some(t)) => {
                    debug_assert_eq!(uuid, t.uuid);
                    self.work.tombstones.put(t);
                }
                Undo::Tombstone(uuid, None) => {
                    self.work.tombstones.remove(&uuid);
                }
                Undo::TombstoneFloor(f) => self.work.tombstones.set_floor_arc(f),
            }
        }
        self.tombstones.touched.truncate(to.tombstones.0);
        self.tombstones.floor = to.tombstones.1;
        self.work.next_id = to.next_id;
        self.work.schema = to.schema;
        self.touched.truncate(to.touched);
        self.schema_changes.truncate(to.schema_changes);
    }

    /// The working version, with the changes of earlier operations of this batch.
    pub fn version(&self) -> &Version {
        &self.work
    }

    /// The working version's schema, with the extensions of earlier operations of this batch.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.work.schema
    }

    /// Extends the working version's schema compatibly (`Schema::extend`: new attribute types
    /// and object classes only, existing ids unchanged). The new schema is published with this
    /// batch's version, and journaled as one schema record ahead of the batch's entries; if
    /// the operation fails, it is rolled back with the rest. Returns the definitions added
    /// (canonical `.schema` statements).
    pub fn extend_schema(&mut self, text: &str, origin: &str) -> Result<String, SchemaError> {
        let next = self.work.schema.extend(text, origin)?;
        let added = next
            .extensions()
            .get(self.work.schema.extensions().len()..)
            .unwrap_or("")
            .to_string();
        if !added.is_empty() {
            self.work.schema = Arc::new(next);
            self.schema_changes.push(added.clone());
        }
        Ok(added)
    }

    /// The batch's clock, so every operation of a batch carries one timestamp.
    pub fn now(&self) -> SystemTime {
        self.now
    }

    /// Adds a new entry under its existing parent (or as a naming context root when
    /// `root` is true). Assigns and returns its id.
    pub fn add(
        &mut self,
        dn: String,
        ndn: NormDn,
        attrs: Vec<Attr>,
        root: bool,
    ) -> Result<EntryId, StoreError> {
        if self.work.lookup(&ndn).is_some() {
            return Err(StoreError::AlreadyExists(dn));
        }
        let parent = if root {
            None
        } else {
            let p = ndn
                .parent()
                .and_then(|p| self.work.lookup(&p).map(|e| e.id));
            Some(p.ok_or_else(|| StoreError::NoParent(dn.clone()))?)
        };
        let id = self.work.alloc_id();
        self.undo.push(Undo::Remove(id));
        self.work.put(Entry::new(id, parent, &dn, &ndn, &attrs));
        self.touched.push(id);
        Ok(id)
    }

    /// Replaces the attributes of an entry (DN unchanged).
    pub fn replace_attrs(&mut self, id: EntryId, attrs: Vec<Attr>) -> Result<(), StoreError> {
        self.replace_attrs_with(id, attrs, &[])
    }

    /// `replace_attrs`, with the values the change added for some types (`ValueDelta`, exact),
    /// so that their index keys are worked out from those values only.
    pub fn replace_attrs_with(
        &mut self,
        id: EntryId,
        attrs: Vec<Attr>,
        deltas: &[ValueDelta<'_>],
    ) -> Result<(), StoreError> {
        let old = self.work.get(id).ok_or(StoreError::NoSuchEntry)?;
        let e = old.with_attrs(&attrs);
        self.replace_entry(e, deltas)
    }

    /// Replaces the attributes of an entry (DN unchanged) by `parts`, some of them kept from
    /// the entry as stored (`Entry::with_parts`), with the value changes `deltas` as in
    /// `replace_attrs_with`.
    pub fn replace_parts(
        &mut self,
        id: EntryId,
        parts: &[Part<'_>],
        deltas: &[ValueDelta<'_>],
    ) -> Result<(), StoreError> {
        let old = self.work.get(id).ok_or(StoreError::NoSuchEntry)?;
        let e = old.with_parts(parts);
        self.replace_entry(e, deltas)
    }

    /// Replaces the entry of `e`'s id by `e`, a new state of it, recording the old state for
    /// the undo log.
    fn replace_entry(&mut self, e: Entry, deltas: &[ValueDelta<'_>]) -> Result<(), StoreError> {
        let id = e.id;
        let old = self.work.get(id).ok_or(StoreError::NoSuchEntry)?;
        self.undo.push(Undo::Put(old.clone()));
        self.work.put_with(e, deltas);
        self.touched.push(id);
        Ok(())
    }

    /// Deletes a leaf entry.
    pub fn delete(&mut self, id: EntryId) -> Result<Arc<Entry>, StoreError> {
        let e = self.work.get(id).ok_or(StoreError::NoSuchEntry)?;
        if self.work.num_children(id) > 0 {
            return Err(StoreError::NotLeaf(e.dn().to_string()));
        }
        self.undo.push(Undo::Put(e.clone()));
        self.touched.push(id);
        self.work.remove(id).ok_or(StoreError::NoSuchEntry)
    }

    /// Remembers a deleted entry (`crate::tombstone`), replacing the tombstone of its
    /// entryUUID if there is one. Journaled with the batch, undone with the operation.
    pub fn put_tombstone(&mut self, t: Tombstone) {
        let uuid = t.uuid.clone();
        let old = self.work.tombstones.put(Arc::new(t));
        self.undo.push(Undo::Tombstone(uuid.clone(), old));
        self.tombstones.touched.push(uuid);
    }

    /// Forgets the tombstone of entryUUID `uuid`; returns it (`None`: there was none).
    pub fn remove_tombstone(&mut self, uuid: &str) -> Option<Arc<Tombstone>> {
        let old = self.work.tombstones.remove(uuid)?;
        self.undo
            .push(Undo::Tombstone(old.uuid.clone(), Some(old.clone())));
        self.tombstones.touched.push(old.uuid.clone());
        Some(old)
    }

    /// Sets the tombstones' floor (`Tombstones::floor`).
    pub fn set_tombstone_floor(&mut self, floor: Vec<String>) {
        let old = self.work.tombstones.floor_arc();
        if old.len() == floor.len() && old.iter().zip(&floor).all(|(a, b)| **a == **b) {
            return;
        }
        self.work.tombstones.set_floor(floor);
        self.undo.push(Undo::TombstoneFloor(old));
        self.tombstones.floor = true;
    }

    /// Renames and/or moves an entry and its whole subtree: the entry gets `dn`/`ndn`, its
    /// new parent and attributes; every descendant's DN is rewritten under the new name.
    pub fn rename(
        &mut self,
        id: EntryId,
        dn: String,
        ndn: NormDn,
        new_parent: Option<EntryId>,
        attrs: Vec<Attr>,
    ) -> Result<(), StoreError> {
        if let Some(other) = self.work.lookup(&ndn) {
            if other.id != id {
                return Err(StoreError::AlreadyExists(dn));
            }
        }
        let old = self.work.get(id).ok_or(StoreError::NoSuchEntry)?.clone();
        // Collect descendants before changing anything.
        let mut descendants = Vec::new();
        let _ = self.work.walk(&old, &mut |e| {
            if e.id != id {
                descendants.push(e.clone());
            }
            std::ops::ControlFlow::Continue(())
        });
        let (old_dn_len, old_norm_len, old_depth) =
            (old.dn().len(), old.ndn_str().len(), old.depth());
        self.undo.push(Undo::Put(old));
        self.work.put(Entry::new(id, new_parent, &dn, &ndn, &attrs));
        self.touched.push(id);
        for d in descendants {
            // A descendant's DN ends with the old DN: keep its own leading part, swap the rest.
            let (d_dn, d_ndn) = (d.dn(), d.ndn(&self.work.schema));
            let keep = d_dn.len().saturating_sub(old_dn_len);
            let keep_norm = d_ndn.norm.len().saturating_sub(old_norm_len);
            let new_dn = format!("{}{}", d_dn.get(..keep).unwrap_or(""), dn);
            let depth = d_ndn.rdns.len() - old_depth;
            let mut rdns: Vec<_> = d_ndn.rdns[..depth].to_vec();
            rdns.extend(ndn.rdns.iter().cloned());
            let new_ndn = NormDn {
                norm: format!("{}{}", d_ndn.norm.get(..keep_norm).unwrap_or(""), ndn.norm),
                rdns,
            };
            let e = d.renamed(&new_dn, &new_ndn, d.parent);
            self.touched.push(e.id);
            self.undo.push(Undo::Put(d));
            self.work.put(e);
        }
        Ok(())
    }
}
