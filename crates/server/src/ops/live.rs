//! The long-lived searches of one connection (persistent searches): how Abandon and the
//! connection's end stop them, and the per-connection limit. A field of `Conn`; it knows
//! nothing of how the searches run (`ops::psearch`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use proto::ResultCode;
use tokio::sync::Notify;

use dit::error::LdapError;

/// The persistent searches open on one connection (a field of `Conn`).
#[derive(Default)]
pub(crate) struct Open {
    map: Mutex<HashMap<i32, Arc<Stop>>>,
    /// The connection is closing: no new persistent search starts.
    closed: AtomicBool,
}

/// How a persistent search is told to end without a response.
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
