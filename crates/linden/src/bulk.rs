//! `linden import`, `linden export` and `linden backup`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;

use crate::args::ImportArgs;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The `linden serve` configuration file whose `schema_files` define attribute types the
    /// data uses (schema added over LDAP is kept in the data directory itself).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory to read (of a stopped or running server; it is only read).
    /// [default: ./linden-data]
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Where to write the LDIF. [default: standard output]
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The `linden serve` configuration file whose `schema_files` define attribute types the
    /// data uses (schema added over LDAP is kept in the data directory itself).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory of the (running or stopped) server. [default: ./linden-data]
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Directory to create with the copy; restoring is starting a server with `--data DEST`.
    #[arg(value_name = "DEST")]
    pub dest: PathBuf,
}

/// How an administrative command reaches a running server: from its configuration file
/// (the first `listen` address, `admin_dn`, `admin_password`), or given here.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The running server's configuration file: where it listens and who its administrator
    /// is. Flags given here override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The running server. [default: the first `listen` address of --config, or
    /// ldap://127.0.0.1:3389]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The administrator's DN. [default: `admin_dn` of --config, or cn=admin,dc=example,dc=com]
    #[arg(long, value_name = "DN")]
    pub bind_dn: Option<String>,
    /// The administrator's password (or LINDEN_ADMIN_PASSWORD, or `admin_password` of
    /// --config).
    #[arg(long, value_name = "PW", hide_env_values = true)]
    pub password: Option<String>,
}

impl AdminArgs {
    /// Connects and binds as the administrator.
    fn connect(&self) -> anyhow::Result<ldap3::LdapConn> {
        let config = crate::config::from_file(self.config.as_deref())?;
        let url = match &self.url {
            Some(u) => u.clone(),
            None => {
                let mut a = config
                    .listen
                    .first()
                    .copied()
                    .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 3389)));
                // A server listening on every address is reached on loopback.
                if a.ip().is_unspecified() {
                    a.set_ip(match a {
                        std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                        std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                    });
                }
                format!("ldap://{a}")
            }
        };
        let dn = self.bind_dn.clone().unwrap_or(config.admin_dn);
        let password = self
            .password
            .clone()
            .or(config.admin_password.map(|p| p.0))
            .context(
                "no administrator password: give --password, LINDEN_ADMIN_PASSWORD, or a --config with admin_password",
            )?;
        let mut conn =
            ldap3::LdapConn::new(&url).with_context(|| format!("cannot connect to {url}"))?;
        conn.simple_bind(&dn, &password)
            .and_then(|r| r.success())
            .with_context(|| format!("cannot bind as {dn}"))?;
        Ok(conn)
    }

    /// Sends Linden's extended operation `oid` and returns the response value as text.
    fn extended(&self, oid: &str, what: &str) -> anyhow::Result<String> {
        let mut conn = self.connect()?;
        let exop = ldap3::exop::Exop {
            name: Some(oid.to_string()),
            val: None,
        };
        let ldap3::result::ExopResult(resp, result) = conn
            .extended(exop)
            .with_context(|| format!("{what} request failed"))?;
        let _ = conn.unbind();
        if result.rc != 0 {
            bail!(
                "the server refused the {what} (result code {}): {}",
                result.rc,
                result.text
            );
        }
        Ok(resp
            .val
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default())
    }
}

/// Asks a running server to read its configuration again and apply what may change while it
/// runs (what SIGHUP does; Linden's reload extended operation). An invalid configuration is
/// refused by the server and changes nothing: the answer says why.
pub fn reload(args: &AdminArgs) -> anyhow::Result<()> {
    let summary = args.extended(server::RELOAD_OID, "reload")?;
    println!("{summary}");
    Ok(())
}

/// Asks a running server for a snapshot now (Linden's snapshot extended operation).
pub fn snapshot(args: &AdminArgs) -> anyhow::Result<()> {
    let name = args.extended(server::SNAPSHOT_OID, "snapshot")?;
    if name.is_empty() {
        println!(
            "no snapshot needed: the current state is already on disk (or one is being written)"
        );
    } else {
        println!("snapshot {name} written");
    }
    Ok(())
}

pub fn import(args: &ImportArgs) -> anyhow::Result<()> {
    // The server configuration `serve` would build from the same file and flags; no
    // administrator password is needed to write a snapshot.
    let config = crate::config::resolve_import(args)?;
    let file = std::fs::File::open(&args.file)
        .with_context(|| format!("cannot open {}", args.file.display()))?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut opts = server::bulk::ImportOptions {
        continue_on_error: args.continue_on_error,
        input_bytes: (total > 0).then_some(total),
        ..Default::default()
    };
    if let Some(t) = args.threads {
        opts.threads = t.max(1);
    }
    let start = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut progress = |entries: u64, bytes: u64| {
        let secs = start.elapsed().as_secs_f64().max(1e-3);
        let rate = entries as f64 / secs;
        let (pct, eta) = if total > 0 && bytes > 0 {
            let frac = (bytes as f64 / total as f64).min(1.0);
            (frac * 100.0, secs / frac - secs)
        } else {
            (0.0, 0.0)
        };
        let line = format!(
            "imported {entries} entries, {rate:.0} entries/s, {pct:.0}% of file, ETA {eta:.0} s"
        );
        if tty {
            eprint!("\r{line}   ");
        } else {
            eprintln!("{line}");
        }
    };
    let name = args.file.display().to_string();
    let r = server::bulk::import(config, file, &opts, &mut progress);
    if tty {
        eprintln!();
    }
    let report = match r {
        Ok(r) => r,
        // Settings the server could not start with either: exit status 2, as for `serve`.
        Err(server::bulk::BulkError::Config(m)) => {
            return Err(anyhow::Error::new(crate::config::ConfigError(m)))
        }
        Err(server::bulk::BulkError::Record(rej)) => {
            // Data from another directory usually needs its own suffix.
            let hint = if rej.message.starts_with("no global superior knowledge") {
                "; give the data's naming context with --suffix DN (or the server's --config)"
            } else {
                ""
            };
            bail!(
                "{name}:{}: {}{hint} (nothing was written; --continue-on-error skips bad records)",
                rej.line,
                rej.message
            )
        }
        Err(e) => return Err(anyhow::Error::new(e)).with_context(|| format!("importing {name}")),
    };
    for r in &report.rejected {
        eprintln!("{name}:{}: skipped: {}", r.line, r.message);
    }
    println!(
        "imported {} entries in {:.2} s ({:.0} entries/s) into {} ({} bytes, written in {:.2} s){}",
        report.entries,
        report.seconds,
        report.entries as f64 / report.seconds.max(1e-9),
        report.snapshot,
        report.snapshot_bytes,
        report.snapshot_seconds,
        if report.rejected.is_empty() {
            String::new()
        } else {
            format!("; {} records skipped", report.rejected.len())
        }
    );
    Ok(())
}

pub fn export(args: &ExportArgs) -> anyhow::Result<()> {
    let config = crate::config::from_file(args.config.as_deref())?;
    let dir = args.data.clone().unwrap_or_else(|| config.data_dir.clone());
    let schema = crate::config::configured_schema(&config)?;
    let n = match &args.file {
        Some(f) => {
            let out = std::fs::File::create(f)
                .with_context(|| format!("cannot create {}", f.display()))?;
            server::bulk::export(&dir, &schema, out)?
        }
        None => server::bulk::export(&dir, &schema, std::io::stdout().lock())?,
    };
    eprintln!("exported {n} entries from {}", dir.display());
    Ok(())
}

/// Names of the store files of `dir`: snapshots first, then logs, each in sequence order (the
/// names are zero-padded, so name order is sequence order).
fn store_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            (n.starts_with("snap-") && n.ends_with(".lns"))
                || (n.starts_with("log-") && n.ends_with(".lnl"))
        })
        .collect();
    names.sort_by_key(|n| (n.starts_with("log-"), n.clone()));
    Ok(names)
}

/// Copies the data directory file by file: snapshots are immutable and logs only grow, so the
/// copy holds a consistent state (at most a torn last batch, which recovery leaves out). If a
/// snapshot removed a log during the copy, the copy fails verification and is taken again. A
/// backup that fails leaves no DEST behind (it had to be absent or empty), so it can be retried
/// as it was typed.
pub fn backup(args: &BackupArgs) -> anyhow::Result<()> {
    let config = crate::config::from_file(args.config.as_deref())?;
    let dir = args.data.clone().unwrap_or_else(|| config.data_dir.clone());
    let dest = &args.dest;
    if dest.exists()
        && std::fs::read_dir(dest)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!(
            "{}: the backup destination must not exist or be empty",
            dest.display()
        );
    }
    if !dir.is_dir() {
        bail!("{}: no such data directory", dir.display());
    }
    let schema = crate::config::configured_schema(&config)?;
    let r = copy_consistent(&dir, dest, &schema);
    if r.is_err() && dest.exists() {
        if let Err(e) = std::fs::remove_dir_all(dest) {
            eprintln!(
                "linden: cannot remove the failed backup {}: {e}",
                dest.display()
            );
        }
    }
    r
}

fn copy_consistent(dir: &Path, dest: &Path, schema: &schema::Schema) -> anyhow::Result<()> {
    for attempt in 1..=3 {
        if dest.exists() {
            std::fs::remove_dir_all(dest)
                .with_context(|| format!("cannot clear {}", dest.display()))?;
        }
        std::fs::create_dir_all(dest)
            .with_context(|| format!("cannot create {}", dest.display()))?;
        let mut copied = 0u64;
        for name in store_files(dir)? {
            let from = dir.join(&name);
            match std::fs::copy(&from, dest.join(&name)) {
                Ok(n) => copied += n,
                // Pruned by a snapshot since it was listed: the verification below decides.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).with_context(|| format!("cannot copy {}", from.display())),
            }
            std::fs::File::open(dest.join(&name))
                .and_then(|f| f.sync_all())
                .with_context(|| format!("cannot sync {}", dest.join(&name).display()))?;
        }
        std::fs::File::open(dest).and_then(|d| d.sync_all()).ok();
        match store::persist::recover(&store::persist::FsIo, dest, schema) {
            Ok(r) => {
                println!(
                    "backup of {} in {}: {} entries up to batch {}, {copied} bytes",
                    dir.display(),
                    dest.display(),
                    r.entries.len(),
                    r.last_seq
                );
                return Ok(());
            }
            Err(e) if attempt < 3 => {
                eprintln!("backup attempt {attempt} not consistent ({e}); copying again")
            }
            Err(e) => bail!(
                "backup of {} is not consistent after 3 attempts: {e} (the schema the data uses: \
                 give the server's --config; nothing was left in {})",
                dir.display(),
                dest.display()
            ),
        }
        std::io::stderr().flush().ok();
    }
    Ok(())
}
