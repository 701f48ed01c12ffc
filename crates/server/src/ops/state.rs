//! The state some operations keep on a connection between requests — open LDAP transactions,
//! pending Cancels — and the types it holds (what searches keep is `search::state`). Kept apart from the operations so
//! that the connection (`reply::Conn`) owns it without importing them (no import circle).

use std::collections::{HashMap, HashSet};
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
