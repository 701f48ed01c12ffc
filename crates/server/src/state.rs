//! What every session shares: the directory (`dit::Dit`: store, schema, naming contexts,
//! access rules, overlays, virtual entries), which `Shared` derefs to, and what belongs to
//! the protocol server: configuration, TLS, connection limits, logs, lockout, counters and
//! persistence.
//!
//! It is one `Arc<Shared>`, immutable after start: sessions read it without locks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use dit::{resolve_attr, split_description, Known, SubschemaRef};

use crate::config::Config;
pub use crate::identity::Identity;

/// Per-operation counters, for monitoring and for checking load generators against the server.
#[derive(Default)]
pub struct Counters {
    pub bind: AtomicU64,
    pub search: AtomicU64,
    pub compare: AtomicU64,
    pub add: AtomicU64,
    pub delete: AtomicU64,
    pub modify: AtomicU64,
    pub modrdn: AtomicU64,
    pub extended: AtomicU64,
    pub abandon: AtomicU64,
    pub connections: AtomicU64,
}

impl Counters {
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

pub struct Shared {
    /// The directory itself; `Shared` derefs to it.
    pub dit: dit::Dit,
    pub config: Config,
    pub lockout: crate::lockout::Lockout,
    /// `authz_map`: SASL EXTERNAL identities (certificate subjects, ldapi peers) to entries.
    pub authz: dit::authz::AuthzMap,
    /// A hash of the configured scheme and cost, verified for binds to DNs without a
    /// password so that they take as long as binds to DNs with one.
    pub(crate) dummy_password: Vec<u8>,
    /// For LDAPS and StartTLS; `None` for a memory-only server.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub connections: Arc<crate::connlimit::Connections>,
    pub access_log: crate::logs::LogSink,
    pub audit_log: crate::logs::LogSink,
    pub counters: Counters,
    /// `None` for a memory-only server (bulk import).
    pub(crate) persistence: Option<crate::persistence::Persistence>,
    /// The replication provider (`syncprov`): its session log. `None` when off.
    pub(crate) syncprov: Option<Arc<crate::ops::syncprov::Provider>>,
}

impl std::ops::Deref for Shared {
    type Target = dit::Dit;

    fn deref(&self) -> &dit::Dit {
        &self.dit
    }
}
