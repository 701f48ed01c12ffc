//! Server configuration as the listener and sessions see it. The binary (`linden`) builds it
//! from flags, environment and the TOML file; this crate never reads files.

use std::net::SocketAddr;
use std::path::PathBuf;

/// When an acknowledged write is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every batch of writes is fsynced before any of them is acknowledged (the default).
    Sync,
    /// Batches are written but not fsynced: an acknowledged write can be lost in a crash of
    /// the machine. For benchmarks only; the startup log line says so.
    NoSync,
}

pub use dit::overlays::unique::UniqueSpec;

/// Default of `log_reserve_bytes`: 64 MiB, one transaction log file (`LogOptions`'s
/// `rotate_bytes`). A snapshot that leaves this much lets the log fill the file it is in and
/// start the next while the snapshot is written, and keeps taking writes until a later
/// snapshot, once space is freed, prunes the files it covers.
pub const DEFAULT_LOG_RESERVE_BYTES: u64 = 64 << 20;

/// Default of `min_free_bytes`: 64 MiB, the room of one transaction log file: a server that
/// starts can take writes for a while before a full disk refuses them.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 64 << 20;

/// Default of `credential_cache_entries`: 100,000 verified credentials, about 10 MB.
pub const DEFAULT_CREDENTIAL_CACHE_ENTRIES: usize = 100_000;

/// Default of `listen_backlog`. OpenLDAP's source listens with 1024 (`SLAPD_LISTEN_BACKLOG`,
/// raised at build time by some packagers); twice that absorbs a burst of reconnecting
/// clients (every server of a farm restarting its pool at once) without SYN retries.
pub const DEFAULT_LISTEN_BACKLOG: u32 = 2048;

/// Everything `server::run` needs. Field defaults are documented on `Default`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on. Default `127.0.0.1:3389`.
    pub listen: Vec<SocketAddr>,
    /// Data directory. Default `./linden-data`.
    pub data_dir: PathBuf,
    /// Naming contexts served; each suffix entry is created at first start. Default `dc=example,dc=com`.
    pub suffixes: Vec<String>,
    /// Administrator (root) DN, not stored in the tree. Default `cn=admin,dc=example,dc=com`.
    pub admin_dn: String,
    /// The administrator's password as a stored userPassword value (`{ARGON2}...`), never cleartext.
    pub admin_password_hash: Vec<u8>,
    /// Load the demo organisation into an empty directory at start.
    pub demo: bool,
    /// Largest PDU accepted, in bytes. Default 16 MiB (`max_pdu_size`).
    pub max_pdu_size: usize,
    /// Largest PDU accepted from a connection that has not bound (anonymous, or before its
    /// bind: the bind request itself must fit), in bytes; larger ones get a Notice of
    /// Disconnection as soon as their header arrives. Default 256 KiB, as slapd's
    /// `sockbuf_max_incoming` (slapd's bound limit, `sockbuf_max_incoming_auth`, is 16 MiB as
    /// `max_pdu_size`).
    pub max_pdu_size_anonymous: usize,
    /// Bytes of partly received requests all connections together may hold beyond the first
    /// [`crate::incoming::FREE_BYTES`] of each (`max_incoming_bytes`): a connection whose
    /// request needs more waits (its reads pause) until others complete theirs. Default 256 MiB.
    pub max_incoming_bytes: usize,
    /// Requests a connection may have in progress before the server stops reading from it. Default 256.
    pub max_outstanding: usize,
    /// Cap on entries per search for bound users (0 = none); a client's smaller limit wins.
    /// The administrator has no cap. Default 0.
    pub size_limit: u64,
    /// Cap on seconds per search for bound users (0 = none). Default 3600.
    pub time_limit: u64,
    /// Cap on entries per search for anonymous clients (0 = none). Default 500, as slapd.
    pub size_limit_anonymous: u64,
    /// Cap on seconds per search for anonymous clients (0 = none). Default 60.
    pub time_limit_anonymous: u64,
    /// Scheme and cost for passwords the server hashes (add, modify, Password Modify).
    /// Default Argon2id, 19 MiB, 2 passes, 1 lane.
    pub password_hash: pwhash::Policy,
    /// Failed-bind lockout. Default 5 failures per DN, 50 per address, 60 s.
    pub lockout: crate::lockout::LockoutConfig,
    /// Verified credentials remembered for repeat binds against slow schemes
    /// (`credential_cache_entries`, docs/credential-cache.md); 0 turns the cache off.
    /// Default [`DEFAULT_CREDENTIAL_CACHE_ENTRIES`].
    pub credential_cache_entries: usize,
    /// LDAPS (TLS from the first byte) listener addresses; none by default.
    pub ldaps_listen: Vec<SocketAddr>,
    /// LDAP over a Unix socket (`ldapi://`) at this path; none by default.
    pub ldapi: Option<PathBuf>,
    /// The ldapi socket's permission bits. Default 0o660: the server's user and group.
    pub ldapi_mode: u32,
    /// PEM certificate chain and private key for LDAPS and StartTLS. Without them a
    /// self-signed certificate is created in the data directory at first start.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates that client certificates (for SASL EXTERNAL) must chain to; without
    /// it clients are not asked for certificates.
    pub tls_client_ca: Option<PathBuf>,
    /// Refuse simple binds and SASL PLAIN over connections without TLS
    /// (confidentialityRequired). Default false.
    pub require_tls_for_bind: bool,
    /// Refuse add, delete, modify, modify DN and Password Modify over connections without TLS
    /// (confidentialityRequired). Default false.
    pub require_tls_for_writes: bool,
    /// Deepest BER nesting a request may have (constructed elements, the message counting as
    /// one); deeper requests get a Notice of Disconnection. Default 40.
    pub max_ber_depth: usize,
    /// Deepest and/or/not nesting of a search filter; deeper filters get a Notice of
    /// Disconnection (protocolError). Default 32.
    pub max_filter_depth: usize,
    /// Values one attribute of an add or modify request may carry (0 = no limit); more are
    /// refused with adminLimitExceeded. Default 1,000,000.
    pub max_values_per_attribute: usize,
    /// Attributes of an add, or changes of a modify, in one request (0 = no limit); more are
    /// refused with adminLimitExceeded. Default 10,000.
    pub max_attributes_per_request: usize,
    /// Attribute names a search may request (0 = no limit); more: adminLimitExceeded.
    /// Default 1,000.
    pub max_requested_attributes: usize,
    /// Paged searches (RFC 2696) one connection may have open between pages; opening one more
    /// drops the oldest (its cookie is then refused). Default 8.
    pub max_paged_searches: usize,
    /// Entries a server-side sort (RFC 2891) or virtual list view may hold in memory (0 = no
    /// limit); a search matching more ends with adminLimitExceeded. Default 100,000.
    pub max_sort_entries: usize,
    /// Keys one sort request may name; more: unwillingToPerform (slapd's `sssvlv-maxkeys`).
    /// Default 5.
    pub max_sort_keys: usize,
    /// Virtual list views one connection keeps for their context ids; one more drops the
    /// oldest. Default 5 (slapd's `sssvlv-maxperconn`).
    pub max_vlv_contexts: usize,
    /// This server's id in entryCSN values (0–4095), unique among servers that replicate
    /// with each other, as OpenLDAP's `serverID`. Default 0.
    pub server_id: u16,
    /// Attribute uniqueness rules (`[[unique]]`); none by default.
    pub unique: Vec<UniqueSpec>,
    /// Group membership (memberOf) and referential integrity (`memberof`, `memberof_groups`,
    /// `refint`).
    pub memberof: dit::overlays::MemberOfSpec,
    /// Password policy (`ppolicy`, `ppolicy_default`, `ppolicy_use_lockout`); off by default.
    pub ppolicy: dit::ppolicy::PpolicySpec,
    /// SASL EXTERNAL identity mapping rules (`[[authz_map]]`), in order.
    pub authz_map: Vec<dit::authz::AuthzRuleSpec>,
    /// Controls one request may carry (0 = no limit); more: adminLimitExceeded. Default 32.
    pub max_controls_per_request: usize,
    /// Connections open at once; more are refused with a Notice of Disconnection (busy).
    /// Default 10000.
    pub max_connections: usize,
    /// Connections open at once from one client address. Default 1000.
    pub max_connections_per_ip: usize,
    /// Seconds a connection with nothing in progress may stay silent before it is closed
    /// (0 = never, as slapd's default). Default 0.
    pub idle_timeout: u64,
    /// The same for connections that have not bound (0 = only `idle_timeout` applies); the
    /// smaller of the two applies to them. Default 300.
    pub idle_timeout_anonymous: u64,
    /// Seconds a connection that has not bound may take to send one request, from its first
    /// byte to its last (0 = no limit); then it gets a Notice of Disconnection. Default 30.
    pub pdu_timeout_anonymous: u64,
    /// The accept queue of each TCP listener (`listen(2)` backlog): connections the kernel
    /// completes before the server accepts them. Capped by `net.core.somaxconn`. Default
    /// [`DEFAULT_LISTEN_BACKLOG`].
    pub listen_backlog: u32,
    /// Response bytes queued for one connection; producers wait beyond it (back-pressure).
    /// Default 8 MiB.
    pub max_buffered_bytes: usize,
    /// Seconds a client may leave queued responses unread (the server's writes stall) before
    /// it is disconnected (0 = never). Default 60.
    pub write_timeout: u64,
    /// Persistent searches one connection may have open; more are refused with
    /// adminLimitExceeded. Default 16.
    pub max_persistent_searches: usize,
    /// Committed write batches a persistent search may fall behind (queued, not yet sent to
    /// its client); beyond it the search ends with adminLimitExceeded. Default 1024.
    pub persistent_search_queue: usize,
    /// Serve RFC 4533 sync searches as a replication provider (OpenLDAP's syncprov overlay):
    /// the Sync Request control is supported and contextCSN is kept on each suffix entry.
    /// Default false.
    pub syncprov: bool,
    /// Changed entries the provider's session log keeps (deletes included), for incremental
    /// refreshes; a consumer whose cookie is older gets a full refresh (slapd's
    /// `syncprov-sessionlog`). Default 10,000.
    pub syncprov_sessionlog: usize,
    /// Committed write batches a refreshAndPersist consumer may fall behind (queued, not yet
    /// sent); beyond it its search ends with e-syncRefreshRequired (4096). Default 1024.
    pub syncprov_queue: usize,
    /// Deleted entries the provider remembers (tombstones: entryUUID, DN, CSNs), kept with the
    /// data, so that a peer's older copy of a deleted entry is refused, not added back, and
    /// consumers learn of deletes after restarts; the oldest are forgotten beyond this count.
    /// Default 100,000.
    pub syncprov_tombstones: usize,
    /// Seconds a tombstone is kept at least (unless `syncprov_tombstones` is reached first).
    /// A consumer that was away longer gets a full refresh. Default 604,800 (7 days).
    pub syncprov_tombstone_lifetime: u64,
    /// Entries one subtree delete may remove (0 = no limit); a larger subtree is refused with
    /// adminLimitExceeded and nothing is deleted. Default 100,000.
    pub max_subtree_delete: usize,
    /// Transactions (RFC 5805) a connection may have open at once. Default 1, as slapd.
    pub max_transactions: usize,
    /// Operations one transaction may queue; more are refused with adminLimitExceeded.
    /// Default 1,000.
    pub max_transaction_ops: usize,
    /// One line per operation: off (default), stdout, or a file (appended to).
    pub access_log: crate::logs::LogTarget,
    /// Every change as an LDIF change record with who and when: off (default), stdout, or a file.
    pub audit_log: crate::logs::LogTarget,
    /// Access rules, in order (see `acl`); `None` is the default policy.
    pub access: Option<Vec<crate::acl::RuleSpec>>,
    /// The indexed attribute types and the kinds of index each gets. Default objectClass, uid,
    /// cn, sn, mail with presence and equality.
    pub indexes: Vec<IndexSpec>,
    /// Schema bundles shipped in the binary (`schema::bundles()`) enabled by name, loaded
    /// with the built-in schema before `schema_files`. Default none.
    pub schemas: Vec<String>,
    /// Schema files loaded at start after the built-in schema, in order: OpenLDAP `.schema`
    /// files, or LDIF (`.ldif`: `cn=schema,cn=config` entries or a subschema entry).
    /// Default none.
    pub schema_files: Vec<PathBuf>,
    /// Default `Sync`.
    pub durability: Durability,
    /// Seconds between snapshots (0 = never by time). Default 86400 (daily).
    pub snapshot_interval: u64,
    /// Log bytes written since the last snapshot that trigger a new one (0 = never by volume).
    /// Default 1 GiB.
    pub snapshot_log_bytes: u64,
    /// Percent of one core a snapshot written while serving (by time, by log volume, or on
    /// request) may use; the shutdown snapshot is never paced. Default 25.
    pub snapshot_cpu_share: u32,
    /// Bytes of the data directory's file system that snapshots leave free for the
    /// transaction log: a snapshot that would leave less is not started, or stops and removes
    /// its file. Default [`DEFAULT_LOG_RESERVE_BYTES`].
    pub log_reserve_bytes: u64,
    /// The server does not start while the data directory's file system has less free space
    /// than this (0: no check). Default [`DEFAULT_MIN_FREE_BYTES`].
    pub min_free_bytes: u64,
    /// Replication consumers (`[[syncrepl]]`), each a task that keeps part of this server in
    /// step with a provider (RFC 4533). With any, this server is a read-only replica: writes by
    /// anyone but the administrator are referred to `updateref`. None by default.
    pub syncrepl: Vec<repl::consumer::ConsumerSpec>,
    /// LDAP URLs a replica refers writes to (result referral), as slapd's `updateref`.
    /// Without them a replica refuses writes (unwillingToPerform). None by default.
    pub updateref: Vec<String>,
    /// Multi-provider replication (slapd's `multiprovider on`, formerly `mirrormode`): this
    /// server takes writes although it has `[[syncrepl]]` consumers, and resolves conflicts
    /// with the other providers by CSN (docs/replication.md). Needs `syncprov` and a
    /// non-zero `server_id`. Default false.
    pub multi_provider: bool,
    /// How access-log lines are written: `text` (default) or `json` (one object per line).
    pub access_log_format: crate::logs::LogFormat,
    /// DNs, besides the administrator, that may read cn=Monitor (exact match of the bound or
    /// proxied identity). Default none.
    pub monitor_readers: Vec<String>,
    /// Address of the HTTP listener serving `/metrics`, `/healthz` and `/readyz`; off by
    /// default.
    pub metrics_listen: Option<SocketAddr>,
    /// How far (seconds) a consumer replication agreement may be behind its provider for
    /// `/readyz` to answer ready. Default 30.
    pub ready_max_lag: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 3389))],
            data_dir: PathBuf::from("./linden-data"),
            suffixes: vec!["dc=example,dc=com".to_string()],
            admin_dn: "cn=admin,dc=example,dc=com".to_string(),
            admin_password_hash: Vec::new(),
            demo: false,
            max_pdu_size: 16 * 1024 * 1024,
            max_pdu_size_anonymous: 256 * 1024,
            max_incoming_bytes: 256 << 20,
            max_outstanding: 256,
            size_limit: 0,
            time_limit: 3600,
            size_limit_anonymous: 500,
            time_limit_anonymous: 60,
            access: None,
            max_ber_depth: proto::DecodeLimits::default().max_ber_depth,
            max_filter_depth: proto::DecodeLimits::default().max_filter_depth,
            max_values_per_attribute: 1_000_000,
            max_attributes_per_request: 10_000,
            max_requested_attributes: 1_000,
            max_controls_per_request: 32,
            max_paged_searches: 8,
            max_sort_entries: 100_000,
            max_sort_keys: 5,
            max_vlv_contexts: 5,
            server_id: 0,
            unique: Vec::new(),
            memberof: dit::overlays::MemberOfSpec {
                memberof: false,
                groups: dit::overlays::MemberOfSpec::default_groups(),
                refint: Vec::new(),
            },
            ppolicy: dit::ppolicy::PpolicySpec::default(),
            authz_map: Vec::new(),
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            idle_timeout: 0,
            idle_timeout_anonymous: 300,
            pdu_timeout_anonymous: 30,
            listen_backlog: DEFAULT_LISTEN_BACKLOG,
            max_buffered_bytes: 8 << 20,
            write_timeout: 60,
            max_persistent_searches: 16,
            persistent_search_queue: 1024,
            syncprov: false,
            syncprov_sessionlog: 10_000,
            syncprov_queue: 1024,
            syncprov_tombstones: 100_000,
            syncprov_tombstone_lifetime: 7 * 24 * 3600,
            max_subtree_delete: 100_000,
            max_transactions: 1,
            max_transaction_ops: 1000,
            access_log: crate::logs::LogTarget::Off,
            audit_log: crate::logs::LogTarget::Off,
            ldaps_listen: Vec::new(),
            ldapi: None,
            ldapi_mode: 0o660,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            require_tls_for_bind: false,
            require_tls_for_writes: false,
            password_hash: pwhash::Policy::default(),
            lockout: crate::lockout::LockoutConfig::default(),
            credential_cache_entries: DEFAULT_CREDENTIAL_CACHE_ENTRIES,
            indexes: ["objectClass", "uid", "cn", "sn", "mail"]
                .iter()
                .map(|s| IndexSpec::eq_pres(s))
                .collect(),
            schemas: Vec::new(),
            schema_files: Vec::new(),
            durability: Durability::Sync,
            snapshot_interval: 86_400,
            snapshot_log_bytes: 1 << 30,
            snapshot_cpu_share: 25,
            log_reserve_bytes: DEFAULT_LOG_RESERVE_BYTES,
            min_free_bytes: DEFAULT_MIN_FREE_BYTES,
            syncrepl: Vec::new(),
            updateref: Vec::new(),
            multi_provider: false,
            access_log_format: crate::logs::LogFormat::Text,
            monitor_readers: Vec::new(),
            metrics_listen: None,
            ready_max_lag: 30,
        }
    }
}

impl Config {
    /// Checks the limits that depend on each other; the message names the keys. The binary
    /// calls it before touching the data directory, `Server::start` again.
    pub fn check(&self) -> Result<(), String> {
        // The budget counts bytes in a semaphore, one request taking at most u32::MAX.
        if self.max_pdu_size > u32::MAX as usize {
            return Err(format!(
                "max_pdu_size: at most {} bytes, found {}",
                u32::MAX,
                self.max_pdu_size
            ));
        }
        if self.max_incoming_bytes < self.max_pdu_size {
            return Err(format!(
                "max_incoming_bytes ({}) must be at least max_pdu_size ({}): a request of the \
                 largest size allowed could never be received",
                self.max_incoming_bytes, self.max_pdu_size
            ));
        }
        if self.max_incoming_bytes > tokio::sync::Semaphore::MAX_PERMITS {
            return Err(format!(
                "max_incoming_bytes: at most {} bytes, found {}",
                tokio::sync::Semaphore::MAX_PERMITS,
                self.max_incoming_bytes
            ));
        }
        if self.listen_backlog == 0 || self.listen_backlog > i32::MAX as u32 {
            return Err(format!(
                "listen_backlog: 1 to {}, found {}",
                i32::MAX,
                self.listen_backlog
            ));
        }
        Ok(())
    }

    /// The largest request a connection may send (`anonymous`: it has not bound), and the
    /// key that sets it.
    pub fn pdu_limit(&self, anonymous: bool) -> (usize, &'static str) {
        if anonymous && self.max_pdu_size_anonymous < self.max_pdu_size {
            (self.max_pdu_size_anonymous, "max_pdu_size_anonymous")
        } else {
            (self.max_pdu_size, "max_pdu_size")
        }
    }

    /// How long a connection with nothing in progress may stay silent (`None`: for ever):
    /// `idle_timeout`, and for one that has not bound the smaller of it and
    /// `idle_timeout_anonymous` (0 = off, for either).
    pub fn idle_limit(&self, anonymous: bool) -> Option<std::time::Duration> {
        let secs = [
            self.idle_timeout,
            if anonymous {
                self.idle_timeout_anonymous
            } else {
                0
            },
        ]
        .into_iter()
        .filter(|&s| s > 0)
        .min()?;
        Some(std::time::Duration::from_secs(secs))
    }
}

/// One attribute type's entry in `indexes`: its name and the kinds of index it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    pub attr: String,
    pub kinds: store::IndexKinds,
}

impl IndexSpec {
    /// Presence and equality, what a plain name in `indexes` gets.
    pub fn eq_pres(attr: &str) -> IndexSpec {
        IndexSpec {
            attr: attr.to_string(),
            kinds: store::IndexKinds::DEFAULT,
        }
    }
}
