//! The server's own figures that are not counters of operations: when it started, its
//! listeners with their connections, and who may read cn=Monitor. `Shared` holds them;
//! `monitor` (cn=Monitor) and `metrics` (/metrics) show them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// One listener's connections.
#[derive(Debug)]
pub struct ListenerStats {
    /// `ldap://127.0.0.1:389/`, `ldaps://…`, `ldapi://…`.
    pub url: String,
    pub current: AtomicU64,
    pub total: AtomicU64,
}

/// A connection accepted on a listener; gives its place back when dropped.
pub(crate) struct Accepted(Arc<ListenerStats>);

impl ListenerStats {
    pub(crate) fn accepted(self: &Arc<Self>) -> Accepted {
        self.total.fetch_add(1, Ordering::Relaxed);
        self.current.fetch_add(1, Ordering::Relaxed);
        Accepted(self.clone())
    }
}

impl Drop for Accepted {
    fn drop(&mut self) {
        self.0.current.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What cn=Monitor shows beside the counters and the directory: start time, listeners, and
/// who may read it.
pub struct ServerFigures {
    pub started: SystemTime,
    listeners: Mutex<Vec<Arc<ListenerStats>>>,
}

impl ServerFigures {
    pub(crate) fn new() -> ServerFigures {
        ServerFigures {
            started: SystemTime::now(),
            listeners: Mutex::new(Vec::new()),
        }
    }

    /// Registers a listener (when serving starts).
    pub(crate) fn listener(&self, url: String) -> Arc<ListenerStats> {
        let l = Arc::new(ListenerStats {
            url,
            current: AtomicU64::new(0),
            total: AtomicU64::new(0),
        });
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(l.clone());
        l
    }

    pub fn listeners(&self) -> Vec<Arc<ListenerStats>> {
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
