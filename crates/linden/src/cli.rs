//! The command line: `linden <command> [options]`, parsed with clap.
//!
//! Every `serve` option is a configuration key (`--max-pdu-size` is `max_pdu_size`, `--suffix`
//! is `suffix`, `--data` is `data`), made from its declaration in `server::config`; see
//! docs/configuration.md.

use clap::{Parser, Subcommand};

pub use crate::args::ServeArgs;

/// Linden, an LDAPv3 directory server.
///
/// Precedence for every setting: command-line flag, then environment (LINDEN_<KEY>, e.g.
/// LINDEN_ADMIN_PASSWORD), then the --config file, then the built-in default.
#[derive(Debug, Parser)]
#[command(name = "linden", version = crate::VERSION, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve LDAP on a TCP port until Ctrl-C or SIGTERM.
    ///
    /// Every acknowledged change is in the transaction log of the data directory; a clean stop
    /// also writes a snapshot.
    Serve(Box<ServeArgs>),
    /// Check a configuration as a start would, without touching the data (as slaptest):
    /// keys and values, schema files, DNs, access rules, TLS files and that the key fits
    /// the certificate, overlays and replication settings. Exit status 0 when it would start,
    /// 2 with each problem on a line.
    CheckConfig(Box<ServeArgs>),
    /// Write a Linden configuration from an OpenLDAP slapd.conf or slapd.d (cn=config), and
    /// report every directive not carried over as it was (file, line, why).
    Migrate(crate::migrate::MigrateArgs),
    /// Print the configuration keys as the Markdown table of docs/configuration.md.
    #[command(hide = true)]
    ConfigReference,
    /// Load an LDIF file into a new data directory (server stopped), writing a snapshot.
    Import(crate::args::ImportArgs),
    /// Write every entry of a data directory as LDIF.
    Export(crate::bulk::ExportArgs),
    /// Copy a (running) server's data directory consistently.
    Backup(crate::bulk::BackupArgs),
    /// Ask a running server to write a snapshot now (administrator).
    Snapshot(crate::bulk::AdminArgs),
    /// Ask a running server to reload its configuration (administrator; what SIGHUP does).
    Reload(crate::bulk::AdminArgs),
    /// List the schema bundles in the binary, or print one (`schemas` in the configuration
    /// enables them by name).
    Schema(crate::schema_cmd::SchemaArgs),
    /// Write the reference data set (N inetOrgPerson entries) as LDIF.
    Gen(bench::gen::GenArgs),
    /// Load-test an LDAP server (Linden or any other) and report throughput and latency; or,
    /// with `sweep`, draw latency against offered load for several servers.
    Bench(Box<bench::BenchCommand>),
    /// Check every file of a data directory (snapshots, transaction logs) without changing it.
    ///
    /// Exit status 0 when usable (a torn last batch after a crash is normal), 1 when corrupt.
    Verify(crate::verify::VerifyArgs),
    /// What a point-in-time archive holds (`archive list`): snapshots, log files, the range
    /// of moments it can restore.
    Archive(crate::archive_cmd::ArchiveArgs),
    /// Build a new data directory from an archive as of a moment (--to TIME, --to-csn CSN,
    /// --to-batch N; by default the latest archived), checked as `verify` does.
    ///
    /// Start a server on the new directory to serve it; it prints how long each step took.
    Restore(crate::archive_cmd::RestoreArgs),
    /// Write the manual pages (linden(8), linden-serve(8), …) to a directory.
    #[command(hide = true)]
    Man(crate::man::ManArgs),
}
