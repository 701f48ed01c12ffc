//! `linden`, the one binary of the Linden directory server.
//!
//! - `cli`: the command line (clap).
//! - `config`: the TOML file and its merge with the flags; every error names file and key.
//! - `password`: the administrator password, given or generated (hash kept in the data dir).
//! - `serve`: `linden serve`, from settings to a listening server.
//! - `notify`: systemd notifications (READY, STOPPING, RELOADING, WATCHDOG) for a
//!   `Type=notify` unit.
//! - `man`: `linden man --out DIR`, the manual pages generated from the command line.
//! - `bulk`: `linden import`, `export`, `backup` and `snapshot`.
//! - `verify`: `linden verify`, a read-only check of a data directory.
//! - `migrate`: `linden migrate`, an OpenLDAP slapd configuration as Linden's.
//! - `schema_cmd`: `linden schema list|show`, the schema bundles in the binary.
//! - `gen` and `bench` come from the `bench` crate.
//!
//! Exit status: 0 after a clean shutdown, 2 for unusable settings (flags or file), 1 otherwise.

mod archive_cmd;
mod args;
mod bulk;
mod cli;
mod config;
mod man;
mod migrate;
mod notify;
mod password;
mod schema_cmd;
mod serve;
mod undo;
mod verify;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};
use config::ConfigError;

/// jemalloc instead of the C library's allocator. The store holds millions of small values
/// (most under 32 bytes): jemalloc packs them in size classes without a per-allocation header,
/// and its arenas do not strand freed memory per thread the way glibc's do, which shows in
/// resident memory per entry, start-up and import time (BENCHMARKS.md has the numbers).
/// The version `linden --version` and the first line of `linden serve` show: the package
/// version and the git commit it was built from (`build.rs`), e.g. "0.1.0 (7f0a145)".
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("LINDEN_GIT_COMMIT"),
    ")"
);

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => {
            config::resolve(&args)
                .map_err(anyhow::Error::new)
                .and_then(|config| {
                    init_logging(&config.log_level);
                    serve::run(&args, config)
                })
        }
        Command::CheckConfig(args) => return check_config(&args),
        Command::ConfigReference => {
            print!("{}", config::reference_markdown());
            Ok(())
        }
        Command::Import(args) => {
            init_logging("warn");
            bulk::import(&args)
        }
        Command::Export(args) => bulk::export(&args),
        Command::Backup(args) => bulk::backup(&args),
        Command::Snapshot(args) => bulk::snapshot(&args),
        Command::Reload(args) => bulk::reload(&args),
        Command::Schema(args) => schema_cmd::run(&args),
        Command::Gen(args) => {
            eprintln!("{}", args.note());
            bench::gen::run(&args).map_err(anyhow::Error::new)
        }
        // Verify has its own exit statuses (1 corrupt, 2 no such directory).
        Command::Verify(args) => return verify::run(&args),
        Command::Archive(args) => archive_cmd::list(&args),
        Command::Restore(args) => archive_cmd::restore(&args),
        Command::Bench(cmd) => cmd.run().map_err(anyhow::Error::new),
        Command::Man(args) => man::run(&args),
        Command::Migrate(args) => match migrate::run(&args) {
            Ok(o) if o.problems.is_empty() => {
                if args.check {
                    println!("{}: ok", args.out.display());
                }
                Ok(())
            }
            Ok(o) => {
                for p in &o.problems {
                    eprintln!("linden: error: {p}");
                }
                eprintln!(
                    "{}: {} problem{}",
                    args.out.display(),
                    o.problems.len(),
                    if o.problems.len() == 1 { "" } else { "s" }
                );
                return ExitCode::from(2);
            }
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` keeps the whole cause chain on one line; settings may have several
            // problems, one a line.
            for line in format!("{e:#}").lines() {
                eprintln!("linden: error: {line}");
            }
            if e.downcast_ref::<ConfigError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// `linden check-config`: the settings, then everything a start checks before it opens the
/// data directory. Exit status 0, or 2 with each problem on a line.
fn check_config(args: &cli::ServeArgs) -> ExitCode {
    let what = args
        .config
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "the settings".into());
    let problems = check_problems(args);
    if problems.is_empty() {
        println!("{what}: ok");
        return ExitCode::SUCCESS;
    }
    for p in &problems {
        eprintln!("linden: error: {p}");
    }
    eprintln!(
        "{what}: {} problem{}",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    ExitCode::from(2)
}

/// What `linden check-config` finds wrong with the settings (empty: a start would go on).
pub fn check_problems(args: &cli::ServeArgs) -> Vec<String> {
    match config::resolve(args) {
        Err(e) => e.0.lines().map(str::to_string).collect(),
        Ok(c) => match server::check(&c) {
            Ok(()) => Vec::new(),
            Err(p) => p,
        },
    }
}

/// Changes the log filter of a running server (a reload changed `log_level`).
static LOG_FILTER: std::sync::OnceLock<
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>,
> = std::sync::OnceLock::new();

/// Logs to stderr; `filter` was checked when the settings were read.
fn init_logging(filter: &str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let _ = LOG_FILTER.set(handle);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal()),
        )
        .init();
}

/// Applies a new `log_level` (a reload changed it; it was checked when it was read).
pub fn set_log_filter(filter: &str) {
    if let (Some(h), Ok(f)) = (
        LOG_FILTER.get(),
        tracing_subscriber::EnvFilter::try_new(filter),
    ) {
        if let Err(e) = h.reload(f) {
            tracing::error!("log_level: cannot apply '{filter}': {e}");
        }
    }
}
