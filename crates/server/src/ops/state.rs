//! The state some operations keep on a connection between requests — VLV lists, open LDAP
//! transactions, pending Cancels — and the types it holds. Kept apart from the operations so
//! that the connection (`reply::Conn`) owns it without importing them (no import circle).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use store::Txn;
use tokio::sync::oneshot;

use dit::error::LdapResult;
use dit::identity::Identity;
use dit::overlays::Applied;

/// A change checked as far as it can be outside the writer, to be applied in the writer's job
/// (`write_job`) against the newest version: alone (`submit_write`) or with the other
/// operations of an LDAP transaction (`txn`).
pub(crate) type Change = Box<dyn FnOnce(&mut Txn) -> LdapResult<Applied> + Send>;

/// What the audit log gets once a change succeeds.
pub(crate) enum Audit {
    Off,
    /// A record made from the request (a rename).
    Record(Vec<u8>),
    /// A record made from what the change applied.
    Applied,
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

/// The open transactions of one connection (a field of `Conn`).
#[derive(Default)]
pub(crate) struct Transactions {
    pub(crate) inner: Mutex<Inner>,
}

#[derive(Default)]
pub(crate) struct Inner {
    /// Numbers the connection's transactions; identifiers are never reused on a connection.
    pub(crate) started: u64,
    pub(crate) open: HashMap<Vec<u8>, Vec<Queued>>,
}

/// One operation waiting in a transaction.
pub(crate) struct Queued {
    /// Its message id, named in the End Transaction response if it fails the commit.
    pub(crate) msg_id: i32,
    pub(crate) change: Change,
    pub(crate) audit: Audit,
    /// Whom it acts for (its audit records name them).
    pub(crate) who: Arc<Identity>,
}

/// The Cancel requests of one connection (a field of `Conn`).
#[derive(Default)]
pub(crate) struct Cancels {
    /// Searches a Cancel is waiting for, by message id: told whether they ended cancelled.
    pub(crate) waiting: Mutex<HashMap<i32, oneshot::Sender<bool>>>,
    /// Operations in progress that cannot be cancelled: writes in the writer's hands, Cancels.
    pub(crate) uncancellable: Mutex<HashSet<i32>>,
}
