//! `linden serve`: settings → `server::Config` → listener → serve until Ctrl-C or SIGTERM.

use std::time::Duration;

use anyhow::Context;

use crate::config::{ConfigError, Settings};
use crate::password::{self, Source};

/// How long shutdown waits for connections still being served before the process exits.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Builds the server's configuration; the defaults are `server::Config::default()`'s.
pub fn server_config(s: Settings, admin_password_hash: Vec<u8>) -> server::Config {
    let mut c = server::Config::default();
    if let Some(v) = s.listen {
        c.listen = v;
    }
    if let Some(v) = s.data {
        c.data_dir = v;
    }
    if let Some(v) = s.suffixes {
        c.suffixes = v;
    }
    if let Some(v) = s.admin_dn {
        c.admin_dn = v;
    }
    c.admin_password_hash = admin_password_hash;
    c.demo = s.demo;
    if let Some(v) = s.max_pdu_size {
        c.max_pdu_size = v;
    }
    if let Some(v) = s.max_pdu_size_anonymous {
        c.max_pdu_size_anonymous = v;
    }
    if let Some(v) = s.max_incoming_bytes {
        c.max_incoming_bytes = v;
    }
    if let Some(v) = s.max_outstanding {
        c.max_outstanding = v;
    }
    if let Some(v) = s.size_limit {
        c.size_limit = v;
    }
    if let Some(v) = s.time_limit {
        c.time_limit = v;
    }
    if let Some(v) = s.size_limit_anonymous {
        c.size_limit_anonymous = v;
    }
    if let Some(v) = s.time_limit_anonymous {
        c.time_limit_anonymous = v;
    }
    if s.access.is_some() {
        c.access = s.access;
    }
    if let Some(v) = s.max_ber_depth {
        c.max_ber_depth = v;
    }
    if let Some(v) = s.max_filter_depth {
        c.max_filter_depth = v;
    }
    if let Some(v) = s.max_values_per_attribute {
        c.max_values_per_attribute = v;
    }
    if let Some(v) = s.max_attributes_per_request {
        c.max_attributes_per_request = v;
    }
    if let Some(v) = s.max_requested_attributes {
        c.max_requested_attributes = v;
    }
    if let Some(v) = s.max_controls_per_request {
        c.max_controls_per_request = v;
    }
    if let Some(v) = s.max_paged_searches {
        c.max_paged_searches = v;
    }
    if let Some(v) = s.max_sort_entries {
        c.max_sort_entries = v;
    }
    if let Some(v) = s.max_sort_keys {
        c.max_sort_keys = v;
    }
    if let Some(v) = s.max_vlv_contexts {
        c.max_vlv_contexts = v;
    }
    if let Some(v) = s.server_id {
        c.server_id = v;
    }
    if let Some(v) = s.unique {
        c.unique = v;
    }
    if let Some(v) = s.syncrepl {
        c.syncrepl = v;
    }
    if let Some(v) = s.updateref {
        c.updateref = v;
    }
    c.multi_provider = s.multi_provider;
    if let Some(v) = s.max_connections {
        c.max_connections = v;
    }
    if let Some(v) = s.max_connections_per_ip {
        c.max_connections_per_ip = v;
    }
    if let Some(v) = s.listen_backlog {
        c.listen_backlog = v;
    }
    if let Some(v) = s.idle_timeout {
        c.idle_timeout = v;
    }
    if let Some(v) = s.idle_timeout_anonymous {
        c.idle_timeout_anonymous = v;
    }
    if let Some(v) = s.pdu_timeout_anonymous {
        c.pdu_timeout_anonymous = v;
    }
    if let Some(v) = s.max_buffered_bytes {
        c.max_buffered_bytes = v;
    }
    if let Some(v) = s.write_timeout {
        c.write_timeout = v;
    }
    if let Some(v) = s.max_persistent_searches {
        c.max_persistent_searches = v;
    }
    if let Some(v) = s.persistent_search_queue {
        c.persistent_search_queue = v;
    }
    if let Some(v) = s.max_subtree_delete {
        c.max_subtree_delete = v;
    }
    if let Some(v) = s.max_transactions {
        c.max_transactions = v;
    }
    if let Some(v) = s.max_transaction_ops {
        c.max_transaction_ops = v;
    }
    if let Some(v) = s.access_log {
        c.access_log = v;
    }
    if let Some(v) = s.audit_log {
        c.audit_log = v;
    }
    if let Some(v) = s.ldaps_listen {
        c.ldaps_listen = v;
    }
    c.ldapi = s.ldapi.or(c.ldapi);
    if let Some(v) = s.ldapi_mode {
        c.ldapi_mode = v;
    }
    if let Some(v) = s.authz_map {
        c.authz_map = v;
    }
    c.memberof.memberof = s.memberof;
    c.syncprov = s.syncprov;
    if let Some(v) = s.syncprov_sessionlog {
        c.syncprov_sessionlog = v;
    }
    if let Some(v) = s.syncprov_queue {
        c.syncprov_queue = v;
    }
    if let Some(v) = s.syncprov_tombstones {
        c.syncprov_tombstones = v;
    }
    if let Some(v) = s.syncprov_tombstone_lifetime {
        c.syncprov_tombstone_lifetime = v;
    }
    if let Some(v) = s.memberof_groups {
        c.memberof.groups = v;
    }
    if let Some(v) = s.refint {
        c.memberof.refint = v;
    }
    c.tls_cert = s.tls_cert.or(c.tls_cert);
    c.tls_key = s.tls_key.or(c.tls_key);
    c.tls_client_ca = s.tls_client_ca.or(c.tls_client_ca);
    c.require_tls_for_bind |= s.require_tls_for_bind;
    c.require_tls_for_writes |= s.require_tls_for_writes;
    if let Some(v) = s.password_hash {
        c.password_hash.scheme = v;
    }
    let cost = &mut c.password_hash.cost;
    if let Some(v) = s.argon2_memory_kib {
        cost.argon2_memory_kib = v;
    }
    if let Some(v) = s.argon2_iterations {
        cost.argon2_iterations = v;
    }
    if let Some(v) = s.argon2_parallelism {
        cost.argon2_parallelism = v;
    }
    if let Some(v) = s.pbkdf2_iterations {
        cost.pbkdf2_iterations = v;
    }
    if let Some(v) = s.crypt_rounds {
        cost.crypt_rounds = v;
    }
    if let Some(v) = s.bind_failures_per_dn {
        c.lockout.failures_per_dn = v;
    }
    if let Some(v) = s.bind_failures_per_ip {
        c.lockout.failures_per_ip = v;
    }
    if let Some(v) = s.bind_lockout_seconds {
        c.lockout.window = std::time::Duration::from_secs(v);
    }
    if let Some(v) = s.bind_throttle_max_ms {
        c.lockout.max_delay = std::time::Duration::from_millis(v);
    }
    if let Some(v) = s.bind_trusted_addresses {
        c.lockout.trusted = v;
    }
    if let Some(v) = s.credential_cache_entries {
        c.credential_cache_entries = v;
    }
    if let Some(v) = s.indexes {
        c.indexes = v;
    }
    if let Some(v) = s.schemas {
        c.schemas = v;
    }
    c.ppolicy = dit::ppolicy::PpolicySpec {
        enabled: s.ppolicy,
        default_policy: s.ppolicy_default,
        use_lockout: s.ppolicy_use_lockout,
    };
    if c.ppolicy.enabled && !c.schemas.iter().any(|b| b == "ppolicy") {
        c.schemas.push("ppolicy".to_string());
    }
    if let Some(v) = s.schema_files {
        c.schema_files = v;
    }
    if let Some(v) = s.durability {
        c.durability = v;
    }
    if let Some(v) = s.snapshot_interval {
        c.snapshot_interval = v;
    }
    if let Some(v) = s.snapshot_log_bytes {
        c.snapshot_log_bytes = v;
    }
    if let Some(v) = s.snapshot_cpu_share {
        c.snapshot_cpu_share = v;
    }
    if let Some(v) = s.log_reserve_bytes {
        c.log_reserve_bytes = v;
    }
    if let Some(v) = s.min_free_bytes {
        c.min_free_bytes = v;
    }
    if let Some(v) = s.access_log_format {
        c.access_log_format = v;
    }
    if let Some(v) = s.monitor_readers {
        c.monitor_readers = v;
    }
    c.metrics_listen = s.metrics_listen.or(c.metrics_listen);
    if let Some(v) = s.ready_max_lag {
        c.ready_max_lag = v;
    }
    c
}

pub fn run(mut settings: Settings) -> anyhow::Result<()> {
    tracing::info!("Linden {} starting", crate::VERSION);
    let data_dir = settings
        .data
        .clone()
        .unwrap_or_else(|| server::Config::default().data_dir);
    let admin_dn = settings
        .admin_dn
        .clone()
        .unwrap_or_else(|| server::Config::default().admin_dn);
    let given = settings.admin_password.take();
    let unlocked = server_config(settings.clone(), Vec::new());
    // Limits that depend on each other, before the data directory is touched.
    unlocked.check().map_err(ConfigError)?;
    // The data directory is this process's before anything in it is read or written (the
    // generated password's hash included): a second server stops here.
    let lock = server::lock_data_dir(&unlocked).map_err(anyhow::Error::new)?;
    let policy = unlocked.password_hash;
    let (hash, source) = password::resolve(given.as_deref(), &data_dir, &policy)?;
    drop(given);
    match &source {
        Source::Given => {}
        Source::Stored(file) => {
            tracing::info!("administrator password: using the generated one whose hash is in {}", file.display())
        }
        Source::Generated { password, file } => println!(
            "Generated administrator password for {admin_dn}: {password} (stored hashed in {}; set --admin-password to choose one)",
            file.display()
        ),
    }
    drop(source);

    let config = server_config(settings, hash);
    let listen = config.listen.clone();
    let ldaps_listen = config.ldaps_listen.clone();
    let metrics_listen = config.metrics_listen;
    let backlog = config.listen_backlog;
    if let Some(w) = server::listen::backlog_warning(backlog) {
        tracing::warn!("{w}");
    }
    let ldapi = config.ldapi.clone().map(|p| (p, config.ldapi_mode));
    let suffixes = config.suffixes.join("; ");
    let data = config.data_dir.display().to_string();
    // Start-up problems (a suffix that is not a DN, an unknown index attribute) are settings
    // errors: exit status 2 like any other.
    let server = server::Server::start_locked(config, lock).map_err(|e| match e {
        server::StartError::Config(m) => anyhow::Error::new(ConfigError(m)),
        other => anyhow::Error::new(other),
    })?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("linden")
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        // Before the port is announced: whoever reads that line may signal at once.
        let signal = shutdown_signal()?;
        let shutdown = async {
            signal.await;
            crate::notify::stopping();
        };
        let mut listeners = server::Listeners::default();
        let mut bound = Vec::new();
        // Every URL served, for `systemctl status` (READY's STATUS).
        let mut urls = Vec::new();
        for addr in &listen {
            let (l, a) = bind(*addr, backlog, "")?;
            listeners.ldap.push(l);
            bound.push(a.to_string());
            urls.push(format!("ldap://{a}"));
        }
        for addr in &ldaps_listen {
            let (l, a) = bind(*addr, backlog, " (ldaps)")?;
            tracing::info!("listening for ldaps on {a}");
            listeners.ldaps.push(l);
            urls.push(format!("ldaps://{a}"));
        }
        if let Some(addr) = metrics_listen {
            let (l, a) = bind(addr, backlog, " (metrics)")?;
            tracing::info!("serving /metrics, /healthz and /readyz on http://{a}");
            listeners.metrics.push(l);
        }
        #[cfg(unix)]
        if let Some((path, mode)) = &ldapi {
            listeners.ldapi = Some(bind_local(path, *mode)?);
            tracing::info!("listening for ldapi on {}", path.display());
            urls.push(format!("ldapi://{}", path.display()));
        }
        // Tests and scripts read the port from this line when started with port 0.
        tracing::info!(
            "listening on {}, suffixes: {suffixes}, data directory: {data}",
            bound.join(", ")
        );
        // Every listener is bound and listening, so a client connecting from now on is
        // accepted: tell systemd (Type=notify) the service is up.
        crate::notify::ready(&format!("serving {}", urls.join(", ")));
        if let Some(period) = crate::notify::watchdog_period() {
            tracing::info!("systemd watchdog: pinging every {} ms", period.as_millis());
            tokio::spawn(crate::notify::watchdog(period));
        }
        server
            .serve_listeners(listeners, shutdown)
            .await
            .context("serving")?;
        tracing::info!("shutting down");
        #[cfg(unix)]
        if let Some((path, _)) = &ldapi {
            let _ = std::fs::remove_file(path);
        }
        anyhow::Ok(())
    });
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    // A clean stop leaves a snapshot, so the next start replays no log; one that would not
    // leave the log its reserve of space is skipped (and logged, as every failure is, by the
    // server).
    if let Ok(Some(r)) = server.snapshot() {
        tracing::info!(
            "snapshot {} written: {} entries, {} bytes in {:.2} s",
            r.file,
            r.entries,
            r.bytes,
            r.seconds
        )
    }
    result
}

/// Binds one TCP listener with an accept queue of `backlog` (`listen_backlog`); the error
/// names the address.
fn bind(
    addr: std::net::SocketAddr,
    backlog: u32,
    what: &str,
) -> anyhow::Result<(tokio::net::TcpListener, std::net::SocketAddr)> {
    let l = server::listen::tcp(addr, backlog)
        .with_context(|| format!("cannot listen{what} on {addr}"))?;
    let a = l
        .local_addr()
        .with_context(|| format!("cannot listen{what} on {addr}"))?;
    Ok((l, a))
}

/// Binds the ldapi socket at `path` with permission bits `mode`. A socket file left by a
/// server that is gone is replaced; one a running server answers on is not.
#[cfg(unix)]
fn bind_local(path: &std::path::Path, mode: u32) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let shown = path.display();
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            anyhow::bail!("ldapi: {shown} exists and is not a socket");
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            anyhow::bail!("ldapi: {shown} is in use by a running server");
        }
        std::fs::remove_file(path).with_context(|| format!("ldapi: cannot replace {shown}"))?;
    }
    let l = tokio::net::UnixListener::bind(path)
        .with_context(|| format!("ldapi: cannot listen on {shown}"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("ldapi: cannot set the permissions of {shown}"))?;
    Ok(l)
}

/// Registers the SIGINT and SIGTERM handlers now (a signal that arrives before the returned
/// future is first polled is kept, not fatal) and returns the future that resolves on either.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
        let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        Ok(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
