//! The arguments of `linden serve` and `linden import`: what the command line may say about
//! the settings (`config` merges them with the file). Kept apart from the command-line parser
//! (`cli`) so that the configuration can name them without depending on the commands.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Default, Args)]
pub struct ServeArgs {
    /// Read settings from this TOML file. Flags given on the command line override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address and port to listen on (repeat for several, e.g. 127.0.0.1:389 and [::1]:389).
    /// Port 0 lets the system choose one; each address actually bound is logged as
    /// "listening on ADDR:PORT". [default: 127.0.0.1:3389] [key: listen]
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Vec<SocketAddr>,

    /// Also listen for LDAPS (TLS from the first byte) on this address, e.g. 0.0.0.0:636
    /// (repeat for several). [default: none] [key: ldaps_listen]
    #[arg(long, value_name = "ADDR:PORT")]
    pub ldaps_listen: Vec<SocketAddr>,

    /// Also serve LDAP on this Unix socket (ldapi://), where SASL EXTERNAL binds as the
    /// connecting user. [default: none] [key: ldapi]
    #[arg(long, value_name = "PATH")]
    pub ldapi: Option<PathBuf>,

    /// Data directory. Holds admin-password.hash when the administrator password is generated.
    /// [default: ./linden-data] [key: data]
    #[arg(long = "data", value_name = "DIR")]
    pub data: Option<PathBuf>,

    /// A naming context to serve; repeat for several. Its entry is created at start if missing.
    /// [default: dc=example,dc=com] [key: suffix]
    #[arg(long = "suffix", value_name = "DN")]
    pub suffixes: Vec<String>,

    /// DN of the administrator, who may do anything. It is not an entry in the tree.
    /// [default: cn=admin,dc=example,dc=com] [key: admin_dn]
    #[arg(long, value_name = "DN")]
    pub admin_dn: Option<String>,

    /// Administrator password (kept hashed in memory, never written). If no password is given
    /// anywhere, one is generated at first start, printed once, and its hash stored in
    /// DIR/admin-password.hash. [key: admin_password]
    #[arg(
        long,
        value_name = "PW",
        env = "LINDEN_ADMIN_PASSWORD",
        hide_env_values = true
    )]
    pub admin_password: Option<String>,

    /// Load the demo organisation (people, groups, services under dc=example,dc=com) into an
    /// empty directory. [key: demo]
    #[arg(long)]
    pub demo: bool,

    /// Largest request accepted, in bytes; a larger one ends the connection with a Notice of
    /// Disconnection (protocolError). [default: 16777216] [key: max_pdu_size]
    #[arg(long, value_name = "BYTES")]
    pub max_pdu_size: Option<usize>,

    /// Requests one connection may have in progress before the server stops reading from it.
    /// [default: 256] [key: max_outstanding]
    #[arg(long, value_name = "N")]
    pub max_outstanding: Option<usize>,

    /// Most entries one search returns, 0 for no limit; a client's smaller limit wins. Beyond it
    /// the search ends with sizeLimitExceeded (4). [default: 0] [key: size_limit]
    #[arg(long, value_name = "N")]
    pub size_limit: Option<u64>,

    /// Most seconds one search may run, 0 for no limit; a client's smaller limit wins. Beyond it
    /// the search ends with timeLimitExceeded (3). [default: 3600] [key: time_limit]
    #[arg(long, value_name = "SECONDS")]
    pub time_limit: Option<u64>,

    /// When a write is acknowledged: "sync" after its batch is fsynced to the transaction
    /// log; "nosync" without fsync, so a crash of the machine can lose acknowledged writes
    /// (benchmarks only). [default: sync] [key: durability]
    #[arg(long, value_name = "sync|nosync")]
    pub durability: Option<String>,

    /// Seconds between background snapshots, 0 for none by time. [default: 86400]
    /// [key: snapshot_interval]
    #[arg(long, value_name = "SECONDS")]
    pub snapshot_interval: Option<u64>,

    /// Transaction-log bytes written since the last snapshot that trigger a new one, 0 for
    /// none by volume. [default: 1073741824] [key: snapshot_log_bytes]
    #[arg(long, value_name = "BYTES")]
    pub snapshot_log_bytes: Option<u64>,

    /// What to log to stderr: a level (error, warn, info, debug, trace) or a tracing filter such
    /// as "info,server=debug". [default: info] [key: log_level]
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Take the settings that shape the stored data (password_hash and its cost keys, suffix,
    /// admin_dn, indexes, data) from this `linden serve` TOML file. Flags given here override
    /// it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory to create (it must hold no snapshot or log files). [default: ./linden-data]
    /// [key: data]
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Naming context(s) of the data (repeatable). [default: dc=example,dc=com] [key: suffix]
    #[arg(long = "suffix", value_name = "DN")]
    pub suffixes: Vec<String>,
    /// Skip bad records and list them at the end, instead of stopping at the first.
    #[arg(long)]
    pub continue_on_error: bool,
    /// Threads that parse and check entries. [default: all cores]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// The LDIF file (RFC 2849), e.g. from slapcat or `linden gen`.
    #[arg(value_name = "FILE.ldif")]
    pub file: PathBuf,
}
