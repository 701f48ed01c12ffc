//! What every session shares: the directory (`dit::Dit`: store, schema, naming contexts,
//! access rules, overlays, virtual entries), which `Shared` derefs to, and what belongs to
//! the protocol server: configuration, TLS, connection limits, logs, lockout, counters and
//! persistence.
//!
//! It is one `Arc<Shared>`, immutable after start: sessions read it without locks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proto::{tags, ProtocolOp};

use crate::config::Config;

/// Per-operation counters, for monitoring and for checking load generators against the server.
///
/// Relaxed atomics bumped on the hot path: one per operation initiated and one per operation
/// completed, one per read and per write on a socket. The completed and traffic counters sit
/// on cache lines of their own, apart from the initiated ones that the read loops bump.
#[derive(Default)]
pub struct Counters {
    /// Operations initiated (as dispatched), by `OpType as usize`.
    pub initiated: [AtomicU64; OpType::COUNT],
    /// Connections accepted since start.
    pub connections: AtomicU64,
    /// Operations completed (their context ended: result sent, abandoned or connection
    /// gone), by `OpType as usize`.
    pub completed: Padded<[AtomicU64; OpType::COUNT]>,
    pub traffic: Padded<Traffic>,
    /// Microseconds from a request's dispatch to its result ready to be queued, by `OpType as usize`
    /// (types without a result keep none). The same two clock readings the access log's
    /// `etime_us` is made of; each histogram on cache lines of its own.
    pub latency: [Padded<store::stats::Histogram>; OpType::COUNT],
}

/// Bytes and entries on the wire.
#[derive(Default)]
pub struct Traffic {
    pub bytes_received: AtomicU64,
    pub bytes_sent: AtomicU64,
    /// Search result entries sent.
    pub entries_sent: AtomicU64,
    /// Operations waiting now for room in their connection's response buffer
    /// (`max_buffered_bytes`): clients that leave their responses unread. A gauge.
    pub write_waits: AtomicU64,
}

/// A value on a cache line of its own, so that counters bumped by different threads do not
/// bounce one line between cores.
#[derive(Default)]
#[repr(align(64))]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// What a request is: decided once per request (`OpType::of`), it gives the response's tag,
/// the operations a control applies to (`bit`, the control registry's mask), the counters
/// (cn=Operations,cn=Monitor and `/metrics`, indexed by it) and the access log's keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpType {
    Bind,
    Unbind,
    Search,
    Compare,
    Modify,
    Modrdn,
    Add,
    Delete,
    Abandon,
    Extended,
}

impl OpType {
    pub const COUNT: usize = 10;
    pub const ALL: [OpType; OpType::COUNT] = [
        OpType::Bind,
        OpType::Unbind,
        OpType::Search,
        OpType::Compare,
        OpType::Modify,
        OpType::Modrdn,
        OpType::Add,
        OpType::Delete,
        OpType::Abandon,
        OpType::Extended,
    ];

    /// The type of a request; `None` for a PDU no client may send (a response).
    pub fn of(op: &ProtocolOp<'_>) -> Option<OpType> {
        Some(match op {
            ProtocolOp::BindRequest(_) => OpType::Bind,
            ProtocolOp::UnbindRequest => OpType::Unbind,
            ProtocolOp::SearchRequest(_) => OpType::Search,
            ProtocolOp::CompareRequest(_) => OpType::Compare,
            ProtocolOp::ModifyRequest(_) => OpType::Modify,
            ProtocolOp::ModifyDnRequest(_) => OpType::Modrdn,
            ProtocolOp::AddRequest(_) => OpType::Add,
            ProtocolOp::DelRequest(_) => OpType::Delete,
            ProtocolOp::AbandonRequest(_) => OpType::Abandon,
            ProtocolOp::ExtendedRequest(_) => OpType::Extended,
            _ => return None,
        })
    }

    /// The tag of the response that ends an operation of this type; `None` for unbind and
    /// abandon, which have none.
    pub fn response_tag(self) -> Option<u8> {
        Some(match self {
            OpType::Bind => tags::BIND_RESPONSE,
            OpType::Search => tags::SEARCH_RESULT_DONE,
            OpType::Compare => tags::COMPARE_RESPONSE,
            OpType::Modify => tags::MODIFY_RESPONSE,
            OpType::Modrdn => tags::MODIFY_DN_RESPONSE,
            OpType::Add => tags::ADD_RESPONSE,
            OpType::Delete => tags::DEL_RESPONSE,
            OpType::Extended => tags::EXTENDED_RESPONSE,
            OpType::Unbind | OpType::Abandon => return None,
        })
    }

    /// Its bit in a mask of operation types (the control registry's `Spec::ops`).
    pub const fn bit(self) -> u16 {
        1 << self as u16
    }

    /// As slapd names them under cn=Operations,cn=Monitor.
    pub fn name(self) -> &'static str {
        match self {
            OpType::Bind => "Bind",
            OpType::Unbind => "Unbind",
            OpType::Search => "Search",
            OpType::Compare => "Compare",
            OpType::Modify => "Modify",
            OpType::Modrdn => "Modrdn",
            OpType::Add => "Add",
            OpType::Delete => "Delete",
            OpType::Abandon => "Abandon",
            OpType::Extended => "Extended",
        }
    }

    /// The keyword of its access-log lines.
    pub fn keyword(self) -> &'static str {
        match self {
            OpType::Bind => "BIND",
            OpType::Unbind => "UNBIND",
            OpType::Search => "SEARCH",
            OpType::Compare => "COMPARE",
            OpType::Modify => "MODIFY",
            OpType::Modrdn => "MODRDN",
            OpType::Add => "ADD",
            OpType::Delete => "DELETE",
            OpType::Abandon => "ABANDON",
            OpType::Extended => "EXTENDED",
        }
    }
}

impl Counters {
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The initiated counter of `t`.
    pub fn initiated(&self, t: OpType) -> &AtomicU64 {
        &self.initiated[t as usize]
    }

    /// The completed counter of `t`.
    pub fn completed(&self, t: OpType) -> &AtomicU64 {
        &self.completed.0[t as usize]
    }

    /// The latency histogram of `t` (microseconds, request dispatched to result queued).
    pub fn latency(&self, t: OpType) -> &store::stats::Histogram {
        &self.latency[t as usize].0
    }
}

pub struct Shared {
    /// The directory itself; `Shared` derefs to it.
    pub dit: dit::Dit,
    /// The configuration in force: a reload swaps it whole (`Shared::config`).
    pub(crate) config: arc_swap::ArcSwap<Config>,
    pub lockout: crate::lockout::Lockout,
    /// Password checks: inline for cheap schemes, cached or on the hashing threads for slow
    /// ones; the hashing threads also take the slow password work of changes.
    pub credentials: crate::credcache::Credentials,
    /// What a reload replaces whole: TLS, SASL mappings, monitor readers (`reload::Live`).
    pub(crate) live: arc_swap::ArcSwap<crate::reload::Live>,
    pub(crate) reloads: crate::reload::Reloads,
    pub connections: Arc<crate::connlimit::Connections>,
    /// Bytes of large requests being received, shared by all connections
    /// (`max_incoming_bytes`).
    pub incoming: crate::incoming::Budget,
    pub access_log: crate::logs::LogSink,
    pub audit_log: crate::logs::LogSink,
    pub counters: Counters,
    /// Listeners, start time and the rest of what cn=Monitor and `/metrics` show beside the
    /// counters (`monitor`).
    pub figures: crate::figures::ServerFigures,
    /// `None` for a memory-only server (bulk import).
    pub(crate) persistence: Option<crate::persistence::Persistence>,
    /// The password policy (`ppolicy = true`), shared with its overlay in the write path.
    pub ppolicy: Option<Arc<dit::ppolicy::Ppolicy>>,
    /// Dynamic groups and lists (`[[dynlist]]`), resolved at start.
    pub dynlist: crate::dynlist::Dynlist,
    /// The state of each replication consumer (`syncrepl`), in configuration order.
    pub replication: Vec<Arc<repl::consumer::Status>>,
    /// How each consumer authenticates, in the same order: a reload may replace them (the
    /// consumer takes them at its next connection).
    pub(crate) consumer_credentials: Vec<Arc<arc_swap::ArcSwap<repl::consumer::spec::Credentials>>>,
    /// The replication provider (`syncprov`): its session log. `None` when off.
    pub(crate) syncprov: Option<Arc<crate::synclog::Provider>>,
}

impl Shared {
    /// The configuration in force. An operation reads the keys it needs once, so a reload
    /// in between changes the next operation, not half of one.
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }

    /// A paced snapshot (`snapshot_cpu_share`) of the newest version, written on the blocking
    /// pool while the server keeps serving: the periodic ones and those the administrator asks
    /// for. `Ok(None)` when another one is being written, the version is on disk already, or
    /// the server keeps nothing on disk.
    ///
    /// A lower CPU priority for this thread (ten nice steps, as the hashing threads have) was
    /// measured and left out: it made snapshots under full load twice as long and did not
    /// change what modifies lose meanwhile, which is the disk's (BENCHMARKS.md, "snapshot
    /// impact").
    /// Failures are logged (`Persistence::snapshot`) before they are returned.
    pub(crate) async fn background_snapshot(
        self: &Arc<Self>,
        cause: crate::persistence::SnapshotCause,
    ) -> Result<Option<crate::SnapshotReport>, String> {
        let sh = self.clone();
        tokio::task::spawn_blocking(move || match &sh.persistence {
            Some(p) => p.snapshot(&sh.store, sh.config().snapshot_cpu_share, cause),
            None => Ok(None),
        })
        .await
        .map_err(|e| format!("snapshot task failed: {e}"))?
    }
}

impl std::ops::Deref for Shared {
    type Target = dit::Dit;

    fn deref(&self) -> &dit::Dit {
        &self.dit
    }
}

impl std::borrow::Borrow<dit::Dit> for Shared {
    fn borrow(&self) -> &dit::Dit {
        &self.dit
    }
}
