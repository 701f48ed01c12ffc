//! What searches keep on a connection between requests (fields of `Conn`), apart from how
//! they run, so that the connection owns it without importing them (no import circle):
//!
//! - **Paged results** (RFC 2696): a paged search is bound to the version its first page ran
//!   on: that version is kept, with the ids of the entries the whole search matches (a
//!   compressed bitmap). Each page takes the lowest ids left, so walking all pages returns
//!   every entry exactly once, however the directory changes meanwhile. A sorted paged search
//!   (RFC 2891 with RFC 2696) keeps its ids in sorted order instead, sorted once on the first
//!   page. Each page gets a new cookie: an older one (a page already answered, or a search
//!   dropped to make room) is refused as slapd refuses it.
//! - **Virtual list views**: the sorted lists kept under their context ids (`sorted`).
//! - **Long-lived searches** (persistent and sync searches): how Abandon and the connection's
//!   end stop them, and the per-connection limit.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use proto::ResultCode;
use store::{RoaringBitmap, Version};
use tokio::sync::Notify;

use dit::error::LdapError;

/// A paged search between two pages.
pub(crate) struct Cursor {
    /// Fingerprint of the request (all but the control): a cookie serves only its own search.
    pub key: u64,
    pub version: Arc<Version>,
    /// Entries still to send.
    pub left: Left,
    /// Entries sent by earlier pages (for the size limit, which bounds the whole walk).
    pub sent: u64,
}

/// The entries a paged search has still to send.
pub(crate) enum Left {
    /// In id order (an unsorted search).
    Ids(RoaringBitmap),
    /// In the order of a server-side sort.
    Sorted(VecDeque<u32>),
}

impl Left {
    pub fn len(&self) -> u64 {
        match self {
            Left::Ids(b) => b.len(),
            Left::Sorted(v) => v.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids in the order they are to be sent.
    pub fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match self {
            Left::Ids(b) => Box::new(b.iter()),
            Left::Sorted(v) => Box::new(v.iter().copied()),
        }
    }

    /// Drops the first `n` ids (those a page sent).
    pub fn drop_first(&mut self, n: usize) {
        match self {
            Left::Ids(b) => {
                if let Some(last) = b.iter().nth(n.saturating_sub(1)).filter(|_| n > 0) {
                    b.remove_range(..=last);
                }
            }
            Left::Sorted(v) => {
                v.drain(..n.min(v.len()));
            }
        }
    }
}

/// The open paged searches of a connection, oldest first.
#[derive(Default)]
pub(crate) struct PagedSearches {
    open: VecDeque<(u64, Cursor)>,
    /// The cookie the next page gets; cookies are never reused on a connection.
    next_cookie: u64,
}

impl PagedSearches {
    /// Takes the cursor a cookie names, for the search with fingerprint `key`.
    pub fn take(&mut self, cookie: &[u8], key: u64) -> Result<Cursor, LdapError> {
        let invalid =
            || LdapError::new(ResultCode::ProtocolError, "paged results cookie is invalid");
        let n = u64::from_be_bytes(cookie.try_into().map_err(|_| invalid())?);
        if n >= self.next_cookie {
            return Err(invalid());
        }
        let Some(at) = self.open.iter().position(|(c, _)| *c == n) else {
            return Err(LdapError::new(
                ResultCode::UnwillingToPerform,
                "paged results cookie is invalid or old",
            ));
        };
        if self.open[at].1.key != key {
            return Err(LdapError::new(
                ResultCode::UnwillingToPerform,
                "paged results cookie belongs to a different search (base, scope, filter and attributes must not change between pages)",
            ));
        }
        self.open.remove(at).map(|(_, c)| c).ok_or_else(invalid)
    }

    /// Keeps a cursor for its next page and returns the cookie naming it. With `max` searches
    /// open already, the oldest is dropped (`max_paged_searches`).
    pub fn keep(&mut self, cursor: Cursor, max: usize) -> Vec<u8> {
        while self.open.len() >= max.max(1) {
            self.open.pop_front();
        }
        let n = self.next_cookie;
        self.next_cookie += 1;
        self.open.push_back((n, cursor));
        n.to_be_bytes().to_vec()
    }
}

/// A sorted result set: entry ids in order, with the first key's value of each (for
/// greaterThanOrEqual targets).
pub(crate) struct List {
    pub ids: Vec<u32>,
    pub(crate) first: Vec<Option<Vec<u8>>>,
    pub(crate) version: Arc<store::Version>,
    /// The search (request and order) it answers.
    pub(crate) key: u64,
}

/// The VLV lists one connection keeps, oldest first.
#[derive(Default)]
pub(crate) struct VlvContexts {
    pub(crate) open: VecDeque<(u64, Arc<List>)>,
    pub(crate) next: u64,
}

impl VlvContexts {
    pub(crate) fn find(&self, id: u64, key: u64) -> Option<Arc<List>> {
        self.open
            .iter()
            .find(|(c, l)| *c == id && l.key == key)
            .map(|(_, l)| l.clone())
    }

    pub(crate) fn keep(&mut self, list: Arc<List>, max: usize) -> u64 {
        while self.open.len() >= max.max(1) {
            self.open.pop_front();
        }
        self.next += 1;
        self.open.push_back((self.next, list));
        self.next
    }
}

/// The long-lived searches (persistent and sync) open on one connection (a field of `Conn`).
#[derive(Default)]
pub(crate) struct Open {
    map: Mutex<HashMap<i32, Arc<Stop>>>,
    /// The connection is closing: no new persistent search starts.
    closed: AtomicBool,
}

/// How a long-lived search is told to end without a response.
pub(crate) struct Stop {
    /// Also in `Conn::running`, so Abandon sets it and the initial walk sees it.
    pub(crate) flag: Arc<AtomicBool>,
    /// Wakes the task waiting on the feed.
    pub(crate) wake: Notify,
}

impl Stop {
    fn stop(&self) {
        self.flag.store(true, Ordering::Relaxed);
        // A stored permit if the task is not waiting right now: no wake-up is lost.
        self.wake.notify_one();
    }

    pub(crate) fn stopped(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

impl Open {
    /// Abandon of message `id`: ends its persistent search, if it is one. Its place counts
    /// as free at once (the client may start another right after the Abandon).
    pub(crate) fn abandon(&self, id: i32) {
        if let Some(s) = self.lock().remove(&id) {
            s.stop();
        }
    }

    /// The connection is closing (unbind, client gone): ends them all, without responses.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        for s in self.lock().values() {
            s.stop();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Arc<Stop>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn register(&self, id: i32, max: usize) -> Result<Arc<Stop>, LdapError> {
        let mut m = self.lock();
        if self.closed.load(Ordering::Relaxed) {
            return Err(LdapError::new(
                ResultCode::Unavailable,
                "the connection is closing",
            ));
        }
        if m.len() >= max {
            return Err(LdapError::new(
                ResultCode::AdminLimitExceeded,
                format!(
                    "too many persistent searches on this connection (max_persistent_searches = {max})"
                ),
            ));
        }
        let stop = Arc::new(Stop {
            flag: Arc::new(AtomicBool::new(false)),
            wake: Notify::new(),
        });
        m.insert(id, stop.clone());
        Ok(stop)
    }

    /// Removes `stop`'s entry, unless Abandon already did (its id may be in use again).
    pub(crate) fn unregister(&self, id: i32, stop: &Arc<Stop>) {
        let mut m = self.lock();
        if m.get(&id).is_some_and(|s| Arc::ptr_eq(s, stop)) {
            m.remove(&id);
        }
    }
}
