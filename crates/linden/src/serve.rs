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
    if let Some(v) = s.server_id {
        c.server_id = v;
    }
    if let Some(v) = s.unique {
        c.unique = v;
    }
    if let Some(v) = s.max_connections {
        c.max_connections = v;
    }
    if let Some(v) = s.max_connections_per_ip {
        c.max_connections_per_ip = v;
    }
    if let Some(v) = s.idle_timeout {
        c.idle_timeout = v;
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
    if let Some(v) = s.access_log {
        c.access_log = v;
    }
    if let Some(v) = s.audit_log {
        c.audit_log = v;
    }
    c.ldaps_listen = s.ldaps_listen.or(c.ldaps_listen);
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
    if let Some(v) = s.indexes {
        c.indexes = v;
    }
    if let Some(v) = s.schemas {
        c.schemas = v;
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
    c
}

pub fn run(mut settings: Settings) -> anyhow::Result<()> {
    let data_dir = settings
        .data
        .clone()
        .unwrap_or_else(|| server::Config::default().data_dir);
    let admin_dn = settings
        .admin_dn
        .clone()
        .unwrap_or_else(|| server::Config::default().admin_dn);
    let given = settings.admin_password.take();
    let policy = server_config(settings.clone(), Vec::new()).password_hash;
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
    let listen = config.listen;
    let ldaps_listen = config.ldaps_listen;
    let suffixes = config.suffixes.join("; ");
    let data = config.data_dir.display().to_string();
    // Start-up problems (a suffix that is not a DN, an unknown index attribute) are settings
    // errors: exit status 2 like any other.
    let server = server::Server::start(config).map_err(|e| match e {
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
        let shutdown = shutdown_signal()?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let bound = listener
            .local_addr()
            .with_context(|| format!("cannot listen on {listen}"))?;
        let ldaps = match ldaps_listen {
            Some(addr) => {
                let l = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("cannot listen (ldaps) on {addr}"))?;
                let a = l
                    .local_addr()
                    .with_context(|| format!("cannot listen (ldaps) on {addr}"))?;
                tracing::info!("listening for ldaps on {a}");
                Some(l)
            }
            None => None,
        };
        // Tests and scripts read the port from this line when started with port 0.
        tracing::info!("listening on {bound}, suffixes: {suffixes}, data directory: {data}");
        server
            .serve_with_ldaps(listener, ldaps, shutdown)
            .await
            .context("serving")?;
        tracing::info!("shutting down");
        anyhow::Ok(())
    });
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    // A clean stop leaves a snapshot, so the next start replays no log.
    match server.snapshot() {
        Ok(Some(r)) => tracing::info!(
            "snapshot {} written: {} entries, {} bytes in {:.2} s",
            r.file,
            r.entries,
            r.bytes,
            r.seconds
        ),
        Ok(None) => {}
        Err(e) => tracing::error!(
            "snapshot at shutdown failed: {e}; the transaction log still holds every change"
        ),
    }
    result
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
