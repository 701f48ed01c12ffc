//! `linden serve`: the configuration, checked; the listeners, bound; the data directory,
//! recovered; then serve until SIGTERM or Ctrl-C, reloading on SIGHUP.
//!
//! The order is what an operator needs on a bad day: a setting that cannot work is reported
//! before a port is bound, and a port in use before the data directory is opened or created.

use std::time::Duration;

use anyhow::Context;

use crate::args::ServeArgs;
use crate::config::ConfigError;
use crate::password::{self, Source};

/// How long shutdown waits for connections still being served before the process exits.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub fn run(args: &ServeArgs, mut config: server::Config) -> anyhow::Result<()> {
    // Everything the configuration names (schema, DNs, rules, TLS files, …), before anything
    // is bound or opened. Each problem on its line: exit status 2 (and nothing else on stderr).
    server::check(&config).map_err(|p| ConfigError(p.join("\n")))?;
    tracing::info!("Linden {} starting", crate::VERSION);
    let backlog = config.listen_backlog;
    if let Some(w) = server::listen::backlog_warning(backlog) {
        tracing::warn!("{w}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("linden")
        .build()
        .context("cannot start the async runtime")?;
    let bound = runtime.block_on(async { bind_all(&config) })?;

    // The data directory is this process's before anything in it is read or written (the
    // generated password's hash included): a second server stops here.
    let lock = server::lock_data_dir(&config).map_err(anyhow::Error::new)?;
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
    let suffixes = config.suffixes.join("; ");
    let data = config.data_dir.display().to_string();
    let ldapi = config.ldapi.clone();
    // Start-up problems found with the data (a naming context the configuration does not
    // serve, an index on a type the data's schema lacks) are settings errors: exit status 2.
    let server = server::Server::start_locked(config, lock).map_err(|e| match e {
        server::StartError::Config(m) => anyhow::Error::new(ConfigError(m)),
        other => anyhow::Error::new(other),
    })?;
    // Reloads asked for over LDAP read the configuration as SIGHUP does.
    let again = args.clone();
    server.set_reloader(server::Reloader {
        read: Box::new(move || read_again(&again)),
        log_level: Box::new(crate::set_log_filter),
    });

    let result = runtime.block_on(async {
        // Before the port is announced: whoever reads that line may signal at once.
        let signals = Signals::new()?;
        let Bound {
            listeners,
            urls,
            ldap,
        } = bound;
        // Tests and scripts read the port from this line when started with port 0.
        tracing::info!(
            "listening on {}, suffixes: {suffixes}, data directory: {data}",
            ldap.join(", ")
        );
        // Every listener is bound and the data is loaded, so a client connecting from now on
        // is answered: tell systemd (Type=notify) the service is up.
        let status = format!("serving {}", urls.join(", "));
        crate::notify::ready(&status);
        if let Some(period) = crate::notify::watchdog_period() {
            tracing::info!("systemd watchdog: pinging every {} ms", period.as_millis());
            tokio::spawn(crate::notify::watchdog(period));
        }
        let Signals {
            mut interrupt,
            mut terminate,
            mut hangup,
        } = signals;
        let stop = async {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            crate::notify::stopping();
        };
        let serving = server.serve_listeners(listeners, stop);
        tokio::pin!(serving);
        loop {
            tokio::select! {
                r = &mut serving => {
                    r.context("serving")?;
                    break;
                }
                Some(()) = hangup.recv() => {
                    crate::notify::reloading();
                    tokio::task::block_in_place(|| sighup(&server, args));
                    crate::notify::reloaded(&status);
                }
            }
        }
        tracing::info!("shutting down");
        #[cfg(unix)]
        if let Some(path) = &ldapi {
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
    // Then the archive gets what it lacks (the log sealed, the shutdown snapshot), bounded by
    // archive_shutdown_timeout: a clean stop loses nothing from the archive.
    server.finish_archive();
    result
}

/// The configuration as a start would read it now (the file, the environment, the flags the
/// server was started with), for a reload. The administrator password is only read at start.
fn read_again(args: &ServeArgs) -> Result<server::Config, String> {
    let mut c = crate::config::resolve(args).map_err(|e| e.0)?;
    c.admin_password = None;
    Ok(c)
}

/// SIGHUP: log files reopened (logrotate moved them), then the configuration read again and
/// its live keys applied (`Server::reload`, which logs what it did).
fn sighup(server: &server::Server, args: &ServeArgs) {
    tracing::info!("SIGHUP: reopening the log files and reading the configuration again");
    server.reopen_logs();
    let _ = server.reload_with(read_again(args));
}

/// The listeners of a start, bound before the data directory is opened.
struct Bound {
    listeners: server::Listeners,
    /// Every URL served (READY's STATUS, for `systemctl status`).
    urls: Vec<String>,
    /// The LDAP addresses actually bound (port 0 chosen by the system).
    ldap: Vec<String>,
}

fn bind_all(config: &server::Config) -> anyhow::Result<Bound> {
    let backlog = config.listen_backlog;
    let mut listeners = server::Listeners::default();
    let mut ldap = Vec::new();
    let mut urls = Vec::new();
    for addr in &config.listen {
        let (l, a) = bind(*addr, backlog, "")?;
        listeners.ldap.push(l);
        ldap.push(a.to_string());
        urls.push(format!("ldap://{a}"));
    }
    for addr in &config.ldaps_listen {
        let (l, a) = bind(*addr, backlog, " (ldaps)")?;
        tracing::info!("listening for ldaps on {a}");
        listeners.ldaps.push(l);
        urls.push(format!("ldaps://{a}"));
    }
    if let Some(addr) = config.metrics_listen {
        let (l, a) = bind(addr, backlog, " (metrics)")?;
        tracing::info!("serving /metrics, /healthz and /readyz on http://{a}");
        listeners.metrics.push(l);
    }
    if let Some(addr) = config.console_listen {
        let (l, a) = bind(addr, backlog, " (console)")?;
        let scheme = if config.console_plain_http {
            "http"
        } else {
            "https"
        };
        tracing::info!("serving the web console on {scheme}://{a}/");
        listeners.console.push(l);
    }
    #[cfg(unix)]
    if let Some(path) = &config.ldapi {
        listeners.ldapi = Some(bind_local(path, config.ldapi_mode)?);
        tracing::info!("listening for ldapi on {}", path.display());
        urls.push(format!("ldapi://{}", path.display()));
    }
    Ok(Bound {
        listeners,
        urls,
        ldap,
    })
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

/// The signals `serve` answers, registered at once (a signal that arrives before the loop
/// first waits is kept, not fatal): SIGINT and SIGTERM stop, SIGHUP reloads.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
            terminate: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
            hangup: signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?,
        })
    }
}
