//! The LDAP server: listener, sessions, dispatch, one module per operation.
//!
//! The four seams of design.md live here, in `dit` (the directory without sockets) and in
//! `store`:
//! - **One operation context** (`op`): every request becomes an `Op` (message id, reply half,
//!   bound and effective identity, parsed request controls, response controls, access-log line)
//!   handled as `ops::X::handle(op, request) -> Next`. Controls are declared once in
//!   `controls` (OID, operations, parser): it decides criticality and lists supportedControl.
//!   A new control: a codec in `proto::controls`, a `Spec` and a field in `controls`, and the
//!   operations that read the field.
//! - **One write path** (`ops::write::route_write`, `ops::write::submit_write`, then the door
//!   `dit::write::write_job` in the writer's job, the only way to the overlay chain; what the
//!   password policy records on a bind and replicated changes pass `write_job_as`): an
//!   operation prepares an `ops::state::Change`,
//!   submitted alone or queued in a transaction (`ops::txn`, whose commit runs every queued
//!   change in one job); every change is checked and applied against the version it changes,
//!   stamped (entryCSN: `dit::csn`), then run through the overlay chain (`dit::overlays`, e.g.
//!   `overlays::unique`); it returns what it applied (`overlays::Applied`), which feeds
//!   pre/post-read, the audit log (`audit`) and the change feed. A new overlay: implement
//!   `overlays::Overlay` in `dit`, build it in `overlays::chain`.
//! - **The change feed** (`store::feed`): `Store::subscribe`; its consumers are
//!   `ops::psearch` and `ops::syncprov` (the replication provider's session log and sync
//!   searches). A new consumer subscribes, then reads the version, and skips batches the
//!   version already holds.
//! - **Schema in the version** (`store::Version::schema`, `Txn::extend_schema`):
//!   `schema_files` at start, `ops::subschema` for a modify of cn=Subschema.
//!
//! Modules:
//! - `config`: the server's configuration (built by the binary from flags and TOML).
//! - `state`: what all sessions share: `Shared`, which derefs to the directory (`dit::Dit`:
//!   store, naming contexts, access rules, overlays, virtual entries) and adds what belongs to
//!   the protocol server (configuration, TLS, connection limits, logs, lockout, counters).
//! - `session`: one connection's read loop: framing, decoding, dispatch; `reply`: its reply
//!   half (response queue, back-pressure, batched writes, access-log lines).
//! - `incoming`: the memory of requests being received: each connection's read buffer and the
//!   budget all share for large requests (`max_incoming_bytes`); `listen`: TCP listeners with
//!   the configured accept queue (`listen_backlog`).
//! - `op`, `controls`: the operation context and the control registry; `proxy`: proxied
//!   authorization (the effective identity an operation acts for).
//! - `ops/*`: one module per operation (bind, search, compare, add, delete, modify, modrdn,
//!   extended), and what they share: `ops/paged` (paged results cursors), `ops/sort`
//!   (server-side sort and virtual list view, entered from `ops/search`), `ops/psearch` and
//!   `ops/live` (persistent searches), `ops/subschema` (schema changes), `ops/txn` (LDAP
//!   transactions: queued writes committed as one writer job), `ops/cancel` (Cancel of running
//!   searches), `ops/syncprov` (the RFC 4533 replication provider: sync searches, the session
//!   log, and the contextCSN overlay it adds to the write path with `syncprov = true`).
//! - `ppolicy`: the password policy's protocol side (binds under a policy, the checks before a
//!   password change, the connection restriction after a reset, the response control); the
//!   policy itself is `dit::ppolicy`, the state a change leaves `dit::overlays::ppolicy`.
//! - `credcache`: password checks for bind — cheap schemes inline, slow ones through the cache
//!   of verified credentials or on the hashing threads (docs/credential-cache.md).
//! - `lowprio`: threads below the server's CPU priority, for what must not take the cores from
//!   the connections: slow password hashes (of binds and of changes: one pool).
//! - `audit`, `logs`: the audit and access logs (text or JSON lines).
//! - `archive`: the archiver (snapshots and sealed log files copied to `archive`, checked,
//!   retention, the last round at a clean stop), behind `persistence`; `archive::s3`, the
//!   `s3://` target and its settings (`open_target` builds a target for the server and the
//!   `linden archive`/`restore` commands alike).
//! - `monitor`: cn=Monitor (the tree of the server's figures, who may read it);
//!   `metrics`: the HTTP listener with `/metrics` (Prometheus/OpenMetrics), `/healthz` and
//!   `/readyz`. Both read the same figures: `state::Counters`, the listeners, the store's
//!   `stats`, the snapshots, and `dit::monitor::Registry` (what replication adds).
//! - From `dit`, under the names this crate always used: `identity`, `acl` (access control),
//!   `filter` (filter compilation), `overlays`, `csn`, `error` (the LDAP error every
//!   operation returns); `ops` re-exports `dit::write` (checks and stamps of the write path)
//!   and `dit::values`.
//!
//! Use: `Server::start(config)?` builds everything (no sockets), then
//! `server.serve(listener, shutdown).await` serves until `shutdown` resolves.

pub mod archive;
pub mod audit;
pub mod bulk;
pub mod config;
pub mod connlimit;
pub mod console;
mod controls;
pub mod credcache;
pub mod dynlist;
pub mod figures;
pub mod incoming;
pub mod listen;
pub mod lockout;
pub mod logs;
mod lowprio;
pub mod metrics;
pub mod monitor;
mod op;
mod ops;
mod persistence;
mod ppolicy;
mod proxy;
mod reload;
mod replica;
mod reply;
mod session;
pub mod state;
mod synclog;
pub mod tls;

use std::future::Future;
use std::sync::Arc;

use schema::{Dn, NormDn, Schema};
use store::Entry;

pub use persistence::{lock_data_dir, DataLock, SnapshotReport};
pub use reload::{ReloadReport, ReloadStats, Reloader};
use tokio::net::TcpListener;

pub use config::{Config, Durability};
use dit::error::LdapError;
use dit::identity::Identity;
use dit::{acl, overlays};
use state::{Counters, Shared};

/// Request name of Linden's "take a snapshot now" extended operation (administrator only). An
/// OID under the UUID arc (ITU-T X.667), so it needs no registration.
pub const SNAPSHOT_OID: &str = "2.25.191869788585979300750051673775663263593";

/// Request name of Linden's "reload the configuration" extended operation (administrator
/// only): what SIGHUP does, for hosts without signals (`linden reload`). The response value is
/// the reload's summary; an invalid configuration is refused (unwillingToPerform) and changes
/// nothing.
pub const RELOAD_OID: &str = "2.25.129315359754192735693701207322943146290";

/// The demo organisation loaded by `linden serve --demo`.
pub const DEMO_LDIF: &str = include_str!("../demo.ldif");

/// Why the server could not start: one line naming the setting or input at fault.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Config(String),
    #[error("demo data, line {line}: {message}")]
    Demo { line: usize, message: String },
    /// The data directory could not be recovered; nothing in it was changed.
    #[error("{0}")]
    Storage(String),
}

pub struct Server {
    shared: Arc<Shared>,
}

/// How `Server::build` gets its store.
pub(crate) enum Mode {
    /// Recover the data directory (which the lock holds) and journal every change to it.
    Durable(DataLock),
    /// Memory only, nothing read or written (bulk import builds here, then writes a snapshot).
    Memory,
}

impl Server {
    /// Takes the data directory (`lock_data_dir`: its lock, its free space), recovers it,
    /// creates missing naming-context entries, loads the demo data when asked; binds no socket.
    pub fn start(config: Config) -> Result<Server, StartError> {
        let lock = lock_data_dir(&config)?;
        Server::start_locked(config, lock)
    }

    /// `start` with the data directory already taken by `lock_data_dir` (the binary takes it
    /// before it writes the generated administrator password there).
    pub fn start_locked(config: Config, lock: DataLock) -> Result<Server, StartError> {
        let server = Server::build(config, Mode::Durable(lock))?;
        create_suffixes(&server.shared)?;
        if server.shared.config().demo {
            load_demo(&server.shared)?;
        }
        // Recovered and ready to serve (replication may add conditions: `dit::monitor`).
        server.shared.monitor.set_loaded();
        Ok(server)
    }

    pub(crate) fn build(config: Config, mode: Mode) -> Result<Server, StartError> {
        // Everything the configuration alone decides is checked before the data directory is
        // opened (or created): a bad file never leaves a new data directory behind.
        let Prepared {
            schema,
            suffixes,
            admin,
            acl,
            tls,
            authz,
            readers,
            access_log,
            audit_log,
        } = prepare(&config, mode_opens_files(&mode))
            .map_err(|p| StartError::Config(p.join("\n")))?;
        let durable = matches!(mode, Mode::Durable(_));
        let (store, persistence) = match mode {
            Mode::Durable(lock) => {
                // Indexes are resolved against the schema stored with the data, so attribute
                // types added over LDAP (cn=Subschema) can be indexed too.
                let (store, p) = persistence::open(&config, lock, &schema, &|s: &Schema| {
                    configured_indexes(&config, s)
                })?;
                (store, Some(p))
            }
            Mode::Memory => {
                let indexed = configured_indexes(&config, &schema)?;
                (store::Store::with_indexes(schema.clone(), indexed), None)
            }
        };
        let root_dse = root_dse(&schema, &config);
        // The store's schema: the configured one plus the extensions stored in the data.
        let schema = store.schema();
        // Without a configured certificate one is made in the data directory, now open.
        let tls = match tls {
            Some(t) => Some(t),
            None if durable => Some(tls::server_config(&config).map_err(StartError::Config)?),
            None => None,
        };
        let mut overlays = overlays::chain(
            &config.unique,
            &config.memberof_spec(),
            &config.admin_dn,
            &schema,
        )
        .map_err(StartError::Config)?;
        let ppolicy = if config.ppolicy {
            let p = dit::ppolicy::Ppolicy::new(&config.ppolicy_spec(), &schema, admin.clone())
                .map(Arc::new)
                .map_err(StartError::Config)?;
            overlays.push(Box::new(overlays::ppolicy::PpolicyOverlay {
                policy: p.clone(),
            }));
            Some(p)
        } else {
            None
        };
        // The replication provider keeps contextCSN last in the chain, after every change.
        let syncprov = config
            .syncprov
            .then(|| synclog::Provider::new(config.syncprov_sessionlog));
        if syncprov.is_some() {
            overlays.push(Box::new(
                dit::overlays::syncprov::ContextCsn::new(
                    &schema,
                    config.server_id,
                    dit::overlays::syncprov::TombstonePolicy {
                        max: config.syncprov_tombstones,
                        lifetime: std::time::Duration::from_secs(
                            config.syncprov_tombstone_lifetime,
                        ),
                    },
                )
                .map_err(StartError::Config)?,
            ));
        }
        let limits = config.write_limits();
        let dit = dit::Dit::new(
            store,
            suffixes,
            admin,
            acl,
            root_dse,
            overlays,
            config.server_id,
            limits,
        )
        .map_err(StartError::Config)?;
        dit.reconfigure(None, config.password_policy(), limits);
        replica::check(&dit, &config)?;
        // Each consumer publishes its state as a monitor agreement (`cn=Consumer 001`).
        let replication = config
            .syncrepl
            .iter()
            .map(|s| {
                dit.monitor.agreement(
                    dit::monitor::Role::Consumer,
                    &format!("{:03}", s.rid),
                    &s.provider.to_string(),
                )
            })
            .collect();
        let consumer_credentials = config
            .syncrepl
            .iter()
            .map(|s| Arc::new(arc_swap::ArcSwap::from_pointee(s.credentials())))
            .collect();
        let incoming = incoming::Budget::new(config.max_incoming_bytes);
        let dynlist = dynlist::Dynlist::new(&config.dynlist, &schema, config.dynlist_max_entries)
            .map_err(StartError::Config)?;
        let live = reload::live(&config, tls, readers, authz);
        let shared = Arc::new(Shared {
            dit,
            lockout: lockout::Lockout::new(config.lockout()),
            credentials: credcache::Credentials::new(config.credential_cache_entries),
            live: arc_swap::ArcSwap::from_pointee(live),
            reloads: reload::Reloads::default(),
            config: arc_swap::ArcSwap::from_pointee(config),
            connections: Arc::new(connlimit::Connections::default()),
            incoming,
            access_log,
            audit_log,
            counters: Counters::default(),
            figures: figures::ServerFigures::new(),
            persistence,
            ppolicy,
            dynlist,
            replication,
            consumer_credentials,
            syncprov,
        });
        Ok(Server { shared })
    }

    /// Sets how the configuration is read again for a reload asked for over LDAP (the binary
    /// reads its file, environment and flags as at start).
    pub fn set_reloader(&self, r: reload::Reloader) {
        self.shared.reloads.set_reloader(r);
    }

    /// Applies a configuration read again (SIGHUP): its live keys now, the others named in a
    /// log line. An invalid configuration (`Err`, or one a start would refuse) changes nothing.
    pub fn reload_with(&self, new: Result<Config, String>) -> ReloadReport {
        self.shared.reload_with(new)
    }

    /// Opens the access and audit log files again by their names (SIGHUP, after logrotate).
    pub fn reopen_logs(&self) {
        self.shared.reopen_logs();
    }

    /// Reloads since start (cn=Monitor, `/metrics`).
    pub fn reload_stats(&self) -> ReloadStats {
        self.shared.reloads.stats()
    }

    /// How password checks ran since start (cache hits, slow and inline verifications).
    pub fn credential_stats(&self) -> credcache::CredentialStats {
        self.shared.credentials.stats()
    }

    /// Per-operation counters since start.
    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// Connections open now (tests wait on it to see the server close one).
    pub fn open_connections(&self) -> usize {
        self.shared.connections.open()
    }

    /// The state of each replication consumer (`syncrepl`), in configuration order.
    pub fn replication(&self) -> &[Arc<repl::consumer::Status>] {
        &self.shared.replication
    }

    /// The monitor registry: replication registers its agreements and readiness gates here
    /// (`dit::monitor`); they show in cn=Monitor, `/metrics` and `/readyz`.
    pub fn monitor(&self) -> &dit::monitor::Registry {
        &self.shared.monitor
    }

    /// The figures `/metrics` serves, as OpenMetrics text.
    pub fn metrics_text(&self) -> Result<String, std::fmt::Error> {
        metrics::render(&self.shared)
    }

    /// The sequence number of the newest committed write batch (each batch is one log record
    /// and one fsync): tests use it to see how many batches a change took.
    pub fn committed_batches(&self) -> u64 {
        self.shared.store.read().seq
    }

    /// Writes a snapshot of the current version now, as fast as it can (clean shutdown) and
    /// removes the log files it covers. `Ok(None)`: one is already being written, or this
    /// version is already on disk. Not written (and logged) when it would not leave
    /// `log_reserve_bytes` free.
    pub fn snapshot(&self) -> Result<Option<persistence::SnapshotReport>, String> {
        let sh = &self.shared;
        match &sh.persistence {
            Some(p) => p.snapshot(&sh.store, 100, persistence::SnapshotCause::Shutdown),
            None => Ok(None),
        }
    }

    /// At a clean stop, after the last write and the shutdown snapshot: seals the log and
    /// archives what the archive lacks, for at most `archive_shutdown_timeout` seconds
    /// (`archive::Archiver::finish`), and logs the outcome. `None` without an archive, or with
    /// a timeout of 0.
    pub fn finish_archive(&self) -> Option<archive::Finished> {
        let sh = &self.shared;
        let archiver = sh.persistence.as_ref()?.archiver.as_ref()?;
        let timeout = sh.config().archive_shutdown_timeout;
        if timeout == 0 {
            return None;
        }
        let url = archiver.status().url;
        tracing::info!(
            "archiving what {url} lacks before stopping (at most {timeout} s: archive_shutdown_timeout)"
        );
        let done = archiver.finish(std::time::Duration::from_secs(timeout));
        match &done {
            archive::Finished::Complete {
                last_batch,
                seconds,
            } => tracing::info!(
                "the archive {url} holds every batch written (up to batch {last_batch}): archived in {seconds:.2} s"
            ),
            archive::Finished::Incomplete { pending, error } => tracing::warn!(
                "archive_shutdown_timeout ({timeout} s) ran out before the archive {url} held everything: not archived yet: {}{}; these files stay in the data directory and the next start archives them",
                pending.join(", "),
                error
                    .as_deref()
                    .map(|e| format!(" (last failure: {e})"))
                    .unwrap_or_default()
            ),
        }
        Some(done)
    }

    /// Accepts connections until `shutdown` resolves. Snapshots are taken in the background
    /// when the configured interval or log volume calls for one.
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        self.serve_with_ldaps(listener, None, shutdown).await
    }

    /// Like `serve`, with a second listener whose connections start with TLS (LDAPS).
    pub async fn serve_with_ldaps(
        &self,
        listener: TcpListener,
        ldaps: Option<TcpListener>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        let listeners = Listeners {
            ldap: vec![listener],
            ldaps: ldaps.into_iter().collect(),
            ..Listeners::default()
        };
        self.serve_listeners(listeners, shutdown).await
    }

    /// Accepts connections on every listener until `shutdown` resolves. Snapshots are taken
    /// in the background when the configured interval or log volume calls for one.
    pub async fn serve_listeners(
        &self,
        listeners: Listeners,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        let sh = self.shared.clone();
        if let Some(p) = &sh.syncprov {
            ops::syncprov::spawn(p, sh.clone());
        }
        let mut tasks = vec![tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tick.tick().await;
                if sh.persistence.as_ref().is_some_and(|p| p.due(&sh.config())) {
                    let cause = persistence::SnapshotCause::Periodic;
                    // A failure is logged where it happens (`Persistence::snapshot`).
                    if let Ok(Some(rep)) = sh.background_snapshot(cause).await {
                        tracing::info!(
                            "snapshot {} written: {} entries, {} bytes in {:.2} s",
                            rep.file,
                            rep.entries,
                            rep.bytes,
                            rep.seconds
                        )
                    }
                }
            }
        })];
        for (l, tls) in listeners
            .ldap
            .into_iter()
            .map(|l| (l, false))
            .chain(listeners.ldaps.into_iter().map(|l| (l, true)))
        {
            let scheme = if tls { "ldaps" } else { "ldap" };
            let url = match l.local_addr() {
                Ok(a) => format!("{scheme}://{a}/"),
                Err(_) => format!("{scheme}:///"),
            };
            let stats = self.shared.figures.listener(url);
            tasks.push(tokio::spawn(accept_tcp(self.shared.clone(), l, tls, stats)));
        }
        #[cfg(unix)]
        if let Some(l) = listeners.ldapi {
            let url = l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                .unwrap_or_default();
            let stats = self.shared.figures.listener(format!("ldapi://{url}"));
            tasks.push(tokio::spawn(accept_local(self.shared.clone(), l, stats)));
        }
        for l in listeners.metrics {
            tasks.push(tokio::spawn(metrics::serve(self.shared.clone(), l)));
        }
        for l in listeners.console {
            tasks.push(tokio::spawn(console::serve(self.shared.clone(), l)));
        }
        tasks.extend(replica::start(&self.shared));
        shutdown.await;
        for t in tasks {
            t.abort();
        }
        Ok(())
    }
}

/// The sockets a server accepts connections on (`Server::serve_listeners`).
#[derive(Default)]
pub struct Listeners {
    /// LDAP (plain, StartTLS available).
    pub ldap: Vec<TcpListener>,
    /// LDAPS (TLS from the first byte).
    pub ldaps: Vec<TcpListener>,
    /// `ldapi://`: LDAP over a Unix socket, SASL EXTERNAL from the peer's credentials.
    #[cfg(unix)]
    pub ldapi: Option<tokio::net::UnixListener>,
    /// HTTP: `/metrics`, `/healthz`, `/readyz` (`metrics`).
    pub metrics: Vec<TcpListener>,
    /// The web console (`console`): HTTPS, or HTTP with `console_plain_http`.
    pub console: Vec<TcpListener>,
}

/// Out of file descriptors and the like: back off instead of spinning.
pub(crate) async fn accept_failed(e: std::io::Error) {
    tracing::warn!("accept failed: {e}");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}

/// Accepts TCP connections (LDAPS ones when `tls`) under the connection limits.
async fn accept_tcp(
    shared: Arc<Shared>,
    listener: TcpListener,
    tls: bool,
    stats: Arc<figures::ListenerStats>,
) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let c = &shared.config();
                match connlimit::Connections::admit(
                    &shared.connections,
                    peer.ip(),
                    c.max_connections,
                    c.max_connections_per_ip,
                ) {
                    Ok(admitted) => {
                        let shared = shared.clone();
                        let accepted = stats.accepted();
                        tokio::spawn(async move {
                            session::run(shared, stream, peer, tls).await;
                            drop(admitted);
                            drop(accepted);
                        });
                    }
                    Err(why) => {
                        tracing::debug!(%peer, "connection refused: {why:?} limit reached");
                        tokio::spawn(session::refuse_busy(stream, why));
                    }
                }
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

/// Accepts `ldapi://` connections, counted against `max_connections` (all local clients share
/// one "address" for `max_connections_per_ip`: the unspecified one).
#[cfg(unix)]
async fn accept_local(
    shared: Arc<Shared>,
    listener: tokio::net::UnixListener,
    stats: Arc<figures::ListenerStats>,
) {
    let local = std::net::IpAddr::from([0, 0, 0, 0]);
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let c = &shared.config();
                match connlimit::Connections::admit(
                    &shared.connections,
                    local,
                    c.max_connections,
                    c.max_connections,
                ) {
                    Ok(admitted) => {
                        let shared = shared.clone();
                        let accepted = stats.accepted();
                        tokio::spawn(async move {
                            session::run_local(shared, stream).await;
                            drop(admitted);
                            drop(accepted);
                        });
                    }
                    Err(why) => tracing::debug!("ldapi connection refused: {why:?} limit reached"),
                }
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

fn root_dse(schema: &Schema, config: &Config) -> Entry {
    let features = controls::Features::of(config);
    // The Sync Request works only with the provider on (`syncprov`).
    let controls: Vec<&str> = controls::supported(features)
        .filter(|oid| config.syncprov || *oid != proto::oids::SYNC_REQUEST)
        .collect();
    let version = format!("Linden {}", env!("CARGO_PKG_VERSION"));
    dit::entries::root_dse(
        schema,
        &dit::entries::Supported {
            naming_contexts: &config.suffixes,
            controls: &controls,
            extensions: &[
                proto::oids::WHO_AM_I,
                proto::oids::PASSWORD_MODIFY,
                proto::oids::START_TLS,
                proto::oids::CANCEL,
                proto::oids::TXN_START,
                proto::oids::TXN_END,
                SNAPSHOT_OID,
                RELOAD_OID,
            ],
            sasl_mechanisms: &["EXTERNAL", "PLAIN"],
            // All operational attributes (+), absolute true/false filters, modify-increment.
            features: &[
                "1.3.6.1.4.1.4203.1.5.1",
                "1.3.6.1.4.1.4203.1.5.3",
                "1.3.6.1.1.14",
            ],
            version: &version,
        },
    )
}

/// The indexes the configuration asks for (`indexes`, and what the overlays look up by value),
/// resolved against `schema`: the configured one, or for a data directory the one stored with
/// its data (which includes the types added over LDAP).
fn configured_indexes(config: &Config, schema: &Schema) -> Result<store::Indexes, StartError> {
    let mut indexed = store::Indexes::new();
    for spec in &config.indexes {
        let name = &spec.attr;
        let id = schema.attr_by_name(name).ok_or_else(|| {
            StartError::Config(format!("indexes: unknown attribute type '{name}'"))
        })?;
        let at = schema.attr(id);
        if spec.kinds.intersects(store::IndexKinds::SUB) && at.substr.is_none() {
            return Err(StartError::Config(format!(
                "indexes: '{name}' has no SUBSTR matching rule, so it cannot have a substring index"
            )));
        }
        if spec.kinds.contains(store::IndexKinds::ORD) && at.ordering.is_none() {
            return Err(StartError::Config(format!(
                "indexes: '{name}' has no ORDERING matching rule, so it cannot have an ord index"
            )));
        }
        indexed.add(id, spec.kinds);
    }
    // A replica finds replicated entries by entryUUID.
    if !config.syncrepl.is_empty() {
        if let Some(id) = schema.attr_by_name("entryUUID") {
            indexed.add(id, store::IndexKinds::DEFAULT);
        }
    }
    // What the overlays look up by value is indexed too (a name they do not know is
    // reported by `overlays::chain` when the server is built).
    for name in overlays::indexed(&config.unique, &config.memberof_spec()) {
        if let Some(id) = schema.attr_by_name(name) {
            indexed.add(id, store::IndexKinds::DEFAULT);
        }
    }
    Ok(indexed)
}

/// The schema in force at start, before the data directory's extensions: the built-in schema
/// with the bundles named in `bundles` (`Config::schemas`), and then each of `files`
/// (`Config::schema_files`) in order. An unknown or conflicting bundle name, an unreadable or
/// invalid file stops the start with a one-line configuration error naming the key (and the
/// file and line). Every command that reads a data directory builds its schema here.
pub fn configured_schema(
    bundles: &[String],
    files: &[std::path::PathBuf],
) -> Result<Schema, StartError> {
    let mut schema =
        Schema::with_bundles(bundles).map_err(|e| StartError::Config(format!("schemas: {e}")))?;
    for path in files {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| StartError::Config(format!("schema_files: {name}: {e}")))?;
        let ldif = path
            .extension()
            .is_some_and(|x| x.eq_ignore_ascii_case("ldif"));
        schema
            .load_file_text(&text, &name, ldif)
            .map_err(|e| StartError::Config(format!("schema_files: {e}")))?;
    }
    Ok(schema)
}

/// The attributes of a naming context entry created at first start, from its RDN type.
fn suffix_attrs(rdn_attr: &str, value: &[u8]) -> Option<Vec<(&'static str, Vec<u8>)>> {
    let v = value.to_vec();
    Some(match rdn_attr.to_ascii_lowercase().as_str() {
        "dc" => vec![
            ("objectClass", b"top".to_vec()),
            ("objectClass", b"dcObject".to_vec()),
            ("objectClass", b"organization".to_vec()),
            ("o", v),
        ],
        "o" => vec![
            ("objectClass", b"top".to_vec()),
            ("objectClass", b"organization".to_vec()),
        ],
        "ou" => vec![
            ("objectClass", b"top".to_vec()),
            ("objectClass", b"organizationalUnit".to_vec()),
        ],
        "c" => vec![
            ("objectClass", b"top".to_vec()),
            ("objectClass", b"country".to_vec()),
        ],
        "l" => vec![
            ("objectClass", b"top".to_vec()),
            ("objectClass", b"locality".to_vec()),
        ],
        _ => return None,
    })
}

/// What a start makes of the configuration alone, before the data directory is touched.
struct Prepared {
    schema: Arc<Schema>,
    suffixes: Vec<NormDn>,
    admin: NormDn,
    acl: acl::Acl,
    /// With `tls_cert` and `tls_key` configured; otherwise made once the data directory is open.
    tls: Option<Arc<rustls::ServerConfig>>,
    authz: dit::authz::AuthzMap,
    readers: Vec<NormDn>,
    access_log: logs::LogSink,
    audit_log: logs::LogSink,
}

/// Whether a start in `mode` opens the log files (bulk import writes none).
fn mode_opens_files(mode: &Mode) -> bool {
    matches!(mode, Mode::Durable(_))
}

/// Checks everything a start checks before it touches the data directory, without starting
/// anything or opening a file for writing (`linden check-config`, as slaptest): the settings
/// together, the schema (bundles and files), the suffixes and other DNs, access rules, the
/// TLS certificate and key (and that they fit), the password policy and SASL mappings, the
/// replication settings and where the logs go. Every problem found, one a line.
pub fn check(config: &Config) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    for (path, key) in [
        (&config.access_log, "access_log"),
        (&config.audit_log, "audit_log"),
    ] {
        if let logs::LogTarget::File(p) = path {
            if let Err(e) = logs::check_writable(p) {
                problems.push(format!("{key}: {e}"));
            }
        }
    }
    if let Err(mut p) = prepare(config, false) {
        problems.append(&mut p);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Builds what the configuration alone decides, collecting every problem (one a line, each
/// naming its key). `open_logs`: open the log files (a start) or leave them (a check).
fn prepare(config: &Config, open_logs: bool) -> Result<Prepared, Vec<String>> {
    let mut problems = Vec::new();
    if let Err(e) = config.check() {
        problems.push(e);
    }
    if let Err(e) = replica::check_settings(config) {
        problems.push(e);
    }
    let tls = match (&config.tls_cert, &config.tls_key) {
        (None, None) => None,
        _ => match tls::server_config(config) {
            Ok(t) => Some(t),
            Err(e) => {
                problems.push(e);
                None
            }
        },
    };
    let authz = dit::authz::AuthzMap::compile(&config.authz_map)
        .map_err(|e| problems.push(format!("authz_map: {e}")))
        .ok();
    let (access_log, audit_log) = if open_logs {
        let a = logs::LogSink::open(&config.access_log, "access_log")
            .map_err(|e| problems.push(e))
            .ok();
        let b = logs::LogSink::open(&config.audit_log, "audit_log")
            .map_err(|e| problems.push(e))
            .ok();
        (a, b)
    } else {
        (Some(logs::LogSink::off()), Some(logs::LogSink::off()))
    };
    let schema = match configured_schema(&config.schema_bundles(), &config.schema_files) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            problems.push(e.to_string());
            return Err(problems);
        }
    };
    let mut norm_dn = |what: &str, s: &str| -> Option<NormDn> {
        match Dn::parse(s).and_then(|dn| dn.normalize(&schema)) {
            Ok(ndn) => Some(ndn),
            Err(e) => {
                problems.push(format!("{what} '{s}': {e}"));
                None
            }
        }
    };
    let mut suffixes = Vec::new();
    for s in &config.suffixes {
        if let Some(ndn) = norm_dn("suffix", s) {
            suffixes.push(ndn);
        }
    }
    let admin = norm_dn("admin_dn", &config.admin_dn);
    let mut readers = Vec::new();
    for r in &config.monitor_readers {
        if let Some(ndn) = norm_dn("monitor_readers", r) {
            readers.push(ndn);
        }
    }
    if let Some(d) = &config.ppolicy_default {
        norm_dn("ppolicy_default", d);
    }
    if suffixes.iter().any(|s| s.rdns.is_empty()) {
        problems.push("suffix: the empty DN cannot be a naming context".into());
    }
    if config.suffixes.is_empty() {
        problems.push("suffix: at least one naming context is required".into());
    }
    let acl = match &config.access {
        Some(rules) => acl::Acl::compile(&schema, rules),
        None => acl::Acl::compile(&schema, &acl::default_policy()),
    }
    .map_err(|e| problems.push(e.to_string()))
    .ok();
    if let (true, Some(admin)) = (config.ppolicy, &admin) {
        if let Err(e) = dit::ppolicy::Ppolicy::new(&config.ppolicy_spec(), &schema, admin.clone()) {
            problems.push(e);
        }
    }
    if let Err(e) = dynlist::Dynlist::new(&config.dynlist, &schema, config.dynlist_max_entries) {
        problems.push(e);
    }
    match (admin, acl, authz, access_log, audit_log) {
        (Some(admin), Some(acl), Some(authz), Some(access_log), Some(audit_log))
            if problems.is_empty() =>
        {
            Ok(Prepared {
                schema,
                suffixes,
                admin,
                acl,
                tls,
                authz,
                readers,
                access_log,
                audit_log,
            })
        }
        _ => Err(problems),
    }
}

fn create_suffixes(shared: &Arc<Shared>) -> Result<(), StartError> {
    // A naming context stored in the data but not configured would be unreachable (and a
    // configured one new to the data would be added for good): that is a data directory
    // started with the wrong `suffix`, not a change to make silently.
    let v = shared.store.read();
    let stray: Vec<&str> = v
        .iter()
        .filter(|e| e.parent.is_none())
        .filter(|e| !shared.suffixes.iter().any(|s| s.norm == e.ndn_str()))
        .map(|e| e.dn())
        .collect();
    if !stray.is_empty() {
        return Err(StartError::Config(format!(
            "{}: the data holds the naming context '{}', which is not a configured suffix (suffix = {}): add it to `suffix` to serve it, or give this configuration a data directory of its own",
            shared.config().data_dir.display(),
            stray.join("', '"),
            shared.config().suffixes.join("; ")
        )));
    }
    drop(v);
    for (i, s) in shared.config().suffixes.iter().enumerate() {
        let ndn = &shared.suffixes[i];
        if shared.store.read().lookup(ndn).is_some() {
            continue;
        }
        let dn = Dn::parse(s).map_err(|e| StartError::Config(format!("suffix '{s}': {e}")))?;
        let Some(ava) = dn.rdns.first().and_then(|r| r.avas.first()) else {
            continue;
        };
        let Some(pairs) = suffix_attrs(&ava.attr, &ava.value) else {
            tracing::warn!(
                "suffix '{s}': no default entry for RDN type '{}'; add it as the administrator",
                ava.attr
            );
            continue;
        };
        add_as_admin(shared, s, &dit::add::group_values(&pairs))
            .map_err(|e| StartError::Config(format!("suffix '{s}': {e}")))?;
    }
    Ok(())
}

/// Adds one entry at start-up, as the administrator, through the same checks as an add
/// operation, and waits for it to be committed.
fn add_as_admin(
    shared: &Arc<Shared>,
    dn: &str,
    input: &[dit::add::InputAttr<'_>],
) -> Result<(), LdapError> {
    let admin = Identity {
        dn: shared.config().admin_dn.clone(),
        ndn: Some(shared.admin.clone()),
        is_admin: true,
    };
    dit::add::add_now(shared, &admin, dn, input)
}

/// The demo's POSIX group is an RFC 2307 (structural) posixGroup. Under the `rfc2307bis`
/// bundle posixGroup is auxiliary, so such an entry also gets that bundle's structural class
/// groupOfMembers, as rfc2307bis directories write their groups.
fn fit_demo_group(schema: &Schema, attrs: &mut Vec<ldif::AttrValue>) {
    let auxiliary = schema
        .class_by_name("posixGroup")
        .is_some_and(|c| schema.class(c).kind == schema::ClassKind::Auxiliary);
    let is_oc = |(name, _): &ldif::AttrValue| name.eq_ignore_ascii_case("objectClass");
    let posix_group = attrs
        .iter()
        .any(|a| is_oc(a) && a.1.eq_ignore_ascii_case(b"posixGroup"));
    if auxiliary && posix_group && schema.class_by_name("groupOfMembers").is_some() {
        attrs.push(("objectClass".to_string(), b"groupOfMembers".to_vec()));
    }
}

/// Loads the demo organisation, unless the directory already holds more than its suffixes.
fn load_demo(shared: &Arc<Shared>) -> Result<(), StartError> {
    if shared.store.read().len() > shared.suffixes.len() {
        return Ok(());
    }
    for rec in ldif::Reader::new(DEMO_LDIF.as_bytes()) {
        let rec = rec.map_err(|e| StartError::Demo {
            line: e.line,
            message: e.message.clone(),
        })?;
        let ldif::Record::Content {
            dn,
            mut attrs,
            line,
        } = rec
        else {
            continue;
        };
        fit_demo_group(&shared.schema(), &mut attrs);
        add_as_admin(shared, &dn, &dit::add::group_values(&attrs)).map_err(|e| {
            StartError::Demo {
                line,
                message: format!("{dn}: {e}"),
            }
        })?;
    }
    Ok(())
}
