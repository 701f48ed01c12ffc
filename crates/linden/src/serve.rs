//! `linden serve`: settings → `server::Config` → listener → serve until Ctrl-C or SIGTERM.

use std::time::Duration;

use anyhow::Context;

use crate::config::ConfigError;
use crate::password::{self, Source};

/// How long shutdown waits for connections still being served before the process exits.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub fn run(mut config: server::Config) -> anyhow::Result<()> {
    let data_dir = config.data_dir.clone();
    let admin_dn = config.admin_dn.clone();
    let given = config.admin_password.take();
    let policy = config.password_policy();
    let (hash, source) =
        password::resolve(given.as_ref().map(|p| p.0.as_str()), &data_dir, &policy)?;
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

    config.admin_password_hash = hash;
    let listen = config.listen.clone();
    let ldaps_listen = config.ldaps_listen.clone();
    let metrics_listen = config.metrics_listen;
    let ldapi = config.ldapi.clone().map(|p| (p, config.ldapi_mode));
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
        let mut listeners = server::Listeners::default();
        let mut bound = Vec::new();
        for addr in &listen {
            let (l, a) = bind(*addr, "").await?;
            listeners.ldap.push(l);
            bound.push(a.to_string());
        }
        for addr in &ldaps_listen {
            let (l, a) = bind(*addr, " (ldaps)").await?;
            tracing::info!("listening for ldaps on {a}");
            listeners.ldaps.push(l);
        }
        if let Some(addr) = metrics_listen {
            let (l, a) = bind(addr, " (metrics)").await?;
            tracing::info!("serving /metrics, /healthz and /readyz on http://{a}");
            listeners.metrics.push(l);
        }
        #[cfg(unix)]
        if let Some((path, mode)) = &ldapi {
            listeners.ldapi = Some(bind_local(path, *mode)?);
            tracing::info!("listening for ldapi on {}", path.display());
        }
        // Tests and scripts read the port from this line when started with port 0.
        tracing::info!(
            "listening on {}, suffixes: {suffixes}, data directory: {data}",
            bound.join(", ")
        );
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

/// Binds one TCP listener; the error names the address.
async fn bind(
    addr: std::net::SocketAddr,
    what: &str,
) -> anyhow::Result<(tokio::net::TcpListener, std::net::SocketAddr)> {
    let l = tokio::net::TcpListener::bind(addr)
        .await
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
