//! The server's configuration, declared once.
//!
//! Every key is one entry of the `keys!` table below: its name, type, default, value kind
//! (how it is read and shown: `kind`), one line of documentation, and whether it may change
//! while the server runs (`Reload`). From that one entry come the field of `Config`, its
//! default, the reading of the TOML file, the flag (`--max-pdu-size`) and the environment
//! variable (`LINDEN_MAX_PDU_SIZE`) of the binary, `linden check-config`, what a reload may
//! apply, `--help`, the man page and the reference table in docs/configuration.md (the
//! binary produces these from `KEYS`; a test checks the docs hold the table).
//!
//! A new key is one entry here, and the code that reads `config.the_key`. If it is `Live`, a
//! reload must be able to apply it: read it from `Shared::config()` at the time of use, or
//! rebuild what is made of it in `Shared::reload`.
//!
//! This crate reads no files: the binary reads the file and hands each key's TOML value to
//! `Key::set`.

pub mod kind;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kind::Kind;
pub use kind::{Ctx, Hidden, SYNCREPL_FIELDS};

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

/// One `[[dynlist]]` table, as configured (resolved against the schema when the server starts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynlistSpec {
    pub object_class: String,
    pub url_attribute: String,
    pub member_attribute: Option<String>,
    pub member_of_attribute: Option<String>,
}

/// Default of `credential_cache_entries`: 100,000 verified credentials, about 10 MB.
pub const DEFAULT_CREDENTIAL_CACHE_ENTRIES: usize = 100_000;

/// Default of `listen_backlog`. OpenLDAP's source listens with 1024 (`SLAPD_LISTEN_BACKLOG`,
/// raised at build time by some packagers); twice that absorbs a burst of reconnecting
/// clients (every server of a farm restarting its pool at once) without SYN retries.
pub const DEFAULT_LISTEN_BACKLOG: u32 = 2048;

/// Default of `log_reserve_bytes`: 64 MiB, one transaction log file (`LogOptions`'s
/// `rotate_bytes`). A snapshot that leaves this much lets the log fill the file it is in and
/// start the next while the snapshot is written, and keeps taking writes until a later
/// snapshot, once space is freed, prunes the files it covers.
pub const DEFAULT_LOG_RESERVE_BYTES: u64 = 64 << 20;

/// Default of `min_free_bytes`: 64 MiB, the room of one transaction log file: a server that
/// starts can take writes for a while before a full disk refuses them.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 64 << 20;

/// Whether a key's new value can be applied to a running server (SIGHUP, `linden reload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Applied by a reload: to new connections and operations from then on.
    Live,
    /// Read at start only: a reload that finds it changed says so and keeps the running value.
    Restart,
}

impl Reload {
    pub fn name(self) -> &'static str {
        match self {
            Reload::Live => "live",
            Reload::Restart => "restart",
        }
    }
}

/// One configuration key: everything known about it, from its declaration.
pub struct Key {
    /// The TOML key; the flag is `--` and the name with `-` for `_`, the environment variable
    /// `LINDEN_` and the name in capitals.
    pub name: &'static str,
    /// The group it is listed under (docs, `--help`, man page).
    pub section: &'static str,
    /// Its documentation, one line split where the declaration wraps it.
    doc: &'static [&'static str],
    pub reload: Reload,
    /// The flag's value name (`BYTES`), or `None` when the key is only set in the file or the
    /// environment (tables such as `[[access]]`).
    pub value_name: Option<&'static str>,
    set: fn(&mut Config, &toml::Value, &Ctx<'_>) -> Result<(), String>,
    show: fn(&Config) -> String,
    same: fn(&Config, &Config) -> bool,
    take: fn(&mut Config, &Config),
    text: fn(&str) -> toml::Value,
    repeats: fn() -> bool,
    switch: fn() -> bool,
}

impl Key {
    /// Reads the key's value into `c`. The message names the value, not the key.
    pub fn set(&self, c: &mut Config, v: &toml::Value, ctx: &Ctx<'_>) -> Result<(), String> {
        (self.set)(c, v, ctx)
    }

    /// The key's value in `c`, as a person would write it.
    pub fn show(&self, c: &Config) -> String {
        (self.show)(c)
    }

    /// The default, as shown.
    pub fn default_shown(&self) -> String {
        (self.show)(&Config::default())
    }

    /// Whether `a` and `b` hold the same value of this key.
    pub fn same(&self, a: &Config, b: &Config) -> bool {
        (self.same)(a, b)
    }

    /// Copies this key's value from `from` into `to`.
    pub fn take(&self, to: &mut Config, from: &Config) {
        (self.take)(to, from)
    }

    /// The TOML value a flag's or environment variable's text stands for.
    pub fn parse_text(&self, s: &str) -> toml::Value {
        (self.text)(s)
    }

    /// The flag may be repeated, each time adding a value.
    pub fn repeats(&self) -> bool {
        (self.repeats)()
    }

    /// The flag takes no value (`--demo`).
    pub fn is_switch(&self) -> bool {
        (self.switch)()
    }

    /// The flag, without its dashes (`max-pdu-size`).
    pub fn flag(&self) -> Option<String> {
        self.value_name.map(|_| self.name.replace('_', "-"))
    }

    /// The environment variable (`LINDEN_MAX_PDU_SIZE`).
    pub fn env(&self) -> String {
        format!("LINDEN_{}", self.name.to_ascii_uppercase())
    }

    /// The documentation as one line.
    pub fn doc(&self) -> String {
        self.doc
            .iter()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The key named `name`.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The key a misspelt `name` most likely meant (`lisen` → `listen`), if one is close.
pub fn suggest(name: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|k| (distance(name, k.name), k.name))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| k)
}

/// Edit distance (insertions, deletions, substitutions) between two short strings.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// The key's name: the field's, unless the declaration renames it.
macro_rules! key_name {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident, $key:literal) => {
        $key
    };
}

macro_rules! flag_of {
    () => {
        None
    };
    ($vn:literal) => {
        Some($vn)
    };
}

macro_rules! keys {
    ($(
        section $section:literal;
        $(
            $(#[doc = $doc:literal])+
            $field:ident $(as $key:literal)? : $ty:ty = $default:expr,
                $kind:expr, $reload:ident $(, flag $vn:literal)?;
        )*
    )*) => {
        /// Everything `Server::start` needs: one field per configuration key (see `KEYS`), and
        /// what the binary made of `admin_password`.
        #[derive(Debug, Clone)]
        pub struct Config {
            $($(
                $(#[doc = $doc])+
                pub $field: $ty,
            )*)*
            /// The administrator's password as a stored userPassword value (`{ARGON2}...`),
            /// never cleartext: what the binary made of `admin_password`.
            pub admin_password_hash: Vec<u8>,
        }

        impl Default for Config {
            fn default() -> Self {
                Config {
                    $($( $field: $default, )*)*
                    admin_password_hash: Vec::new(),
                }
            }
        }

        /// Every key, in the order of the documentation.
        pub static KEYS: &[Key] = &[
            $($(
                Key {
                    name: key_name!($field $(, $key)?),
                    section: $section,
                    doc: &[$($doc),+],
                    reload: Reload::$reload,
                    value_name: flag_of!($($vn)?),
                    set: |c, v, ctx| {
                        c.$field = Kind::<$ty>::parse(&$kind, v, ctx)?;
                        Ok(())
                    },
                    show: |c| Kind::<$ty>::show(&$kind, &c.$field),
                    same: |a, b| a.$field == b.$field,
                    take: |to, from| to.$field = from.$field.clone(),
                    text: |s| Kind::<$ty>::parse_text(&$kind, s),
                    repeats: || Kind::<$ty>::repeats(&$kind),
                    switch: || Kind::<$ty>::switch(&$kind),
                },
            )*)*
        ];
    };
}

use kind::{
    Access, Address, Addresses, AuthzMap, Bool, DurabilityKind, Dynlist, FilePaths, Indexes, Int,
    LogFormatKind, LogLevel, LogTargetKind, Millis, Mode, Networks, NonEmpty, Opt, PasswordScheme,
    PathKind, Percent, Range, Seconds, Secret, SomeAddresses, Str, Strings, Syncrepl, Unique,
};

keys! {
    section "Listeners and data";

    /// Addresses and ports to listen on (IPv4:PORT or [IPv6]:PORT; port 0 lets the system
    /// choose, and the bound address is logged).
    listen: Vec<SocketAddr> = vec![SocketAddr::from(([127, 0, 0, 1], 3389))],
        SomeAddresses("127.0.0.1:3389"), Restart, flag "ADDR:PORT";
    /// Addresses to listen on for LDAPS (TLS from the first byte).
    ldaps_listen: Vec<SocketAddr> = Vec::new(),
        Addresses("0.0.0.0:636"), Restart, flag "ADDR:PORT";
    /// A Unix socket to serve LDAP on (ldapi://), where SASL EXTERNAL binds as the connecting
    /// user.
    ldapi: Option<PathBuf> = None, Opt(PathKind), Restart, flag "PATH";
    /// The ldapi socket's permission bits, in octal.
    ldapi_mode: u32 = 0o660, Mode, Restart, flag "MODE";
    /// The data directory (snapshots, transaction logs, the generated administrator password).
    data_dir as "data": PathBuf = PathBuf::from("./linden-data"), PathKind, Restart, flag "DIR";
    /// Naming contexts served; a missing suffix entry is created at start.
    suffixes as "suffix": Vec<String> = vec!["dc=example,dc=com".to_string()],
        NonEmpty("suffix"), Restart, flag "DN";
    /// DN of the administrator, who may do anything; it is not an entry in the tree.
    admin_dn: String = "cn=admin,dc=example,dc=com".to_string(), Str, Restart, flag "DN";
    /// The administrator's password (hashed at once, never written; a {SCHEME} hash, as
    /// slapd's rootpw, is used as it is); generated at first start and its hash kept in the
    /// data directory when none is given.
    admin_password: Option<Hidden> = None, Opt(Secret), Restart, flag "PW";
    /// Load the demo organisation into an empty directory.
    demo: bool = false, Bool, Restart, flag "BOOL";
    /// This server's id in entryCSN values (0 to 4095), unique among servers that replicate
    /// with each other (OpenLDAP's serverID).
    server_id: u16 = 0, Range::<0, 4095>("a server id"), Restart, flag "ID";

    section "Storage";

    /// When a write is acknowledged: "sync" after its batch is fsynced, "nosync" without
    /// fsync (benchmarks only: a crash of the machine can lose acknowledged writes).
    durability: Durability = Durability::Sync, DurabilityKind, Restart, flag "sync|nosync";
    /// Seconds between background snapshots (0: none by time).
    snapshot_interval: u64 = 86_400, Int::<0>, Live, flag "SECONDS";
    /// Transaction-log bytes written since the last snapshot that call for a new one (0: none
    /// by volume).
    snapshot_log_bytes: u64 = 1 << 30, Int::<0>, Live, flag "BYTES";
    /// Percent of one core a snapshot written while serving may use (the shutdown snapshot is
    /// not paced).
    snapshot_cpu_share: u32 = 25, Percent, Live, flag "PERCENT";
    /// Bytes of the data directory's file system that snapshots leave free for the
    /// transaction log: a snapshot that would leave less is not started, or stops and removes
    /// its file.
    log_reserve_bytes: u64 = DEFAULT_LOG_RESERVE_BYTES, Int::<0>, Restart, flag "BYTES";
    /// The server does not start, nor an import begin, while the data directory's file system
    /// has less free space than this (0: no check).
    min_free_bytes: u64 = DEFAULT_MIN_FREE_BYTES, Int::<0>, Restart, flag "BYTES";

    section "Archive";

    /// Where snapshots and sealed transaction-log files are copied (and verified) in the
    /// background, for point-in-time restore: `file:///path` or `s3://bucket/prefix` ("": no
    /// archive).
    archive: String = String::new(), Str, Restart, flag "URL";
    /// Seconds after which the transaction-log file holding a batch is sealed and archived
    /// (the most a lost machine loses).
    archive_interval: u64 = 60, Int::<1>, Restart, flag "SECONDS";
    /// Snapshots kept in the archive, the newest ones (0: no limit by count); logs older
    /// than the oldest kept snapshot go with them.
    archive_keep_snapshots: u64 = 7, Int::<0>, Restart, flag "COUNT";
    /// Seconds an archived snapshot is kept (0: no limit by age); the newest is always kept.
    archive_keep_seconds: u64 = 0, Int::<0>, Restart, flag "SECONDS";
    /// /readyz answers "not ready" while the archive lags more than this many seconds behind
    /// the newest write (0: the archive does not count for readiness).
    archive_ready_max_lag: u64 = 0, Int::<0>, Live, flag "SECONDS";
    /// At a clean stop, the most seconds spent sealing the log and archiving what the archive
    /// lacks (0: no final archiving); what is left is logged and archived by the next start.
    archive_shutdown_timeout: u64 = 30, Int::<0>, Live, flag "SECONDS";
    /// The endpoint of an S3-compatible server for an s3:// archive (https://host:port;
    /// "": AWS, or AWS_ENDPOINT_URL).
    archive_s3_endpoint: String = String::new(), Str, Restart, flag "URL";
    /// The region of an s3:// archive ("": AWS_REGION, AWS_DEFAULT_REGION, else us-east-1).
    archive_s3_region: String = String::new(), Str, Restart, flag "REGION";
    /// The access key id of an s3:// archive (with archive_s3_secret_access_key; else
    /// archive_s3_credentials_file, else AWS_ACCESS_KEY_ID).
    archive_s3_access_key_id: String = String::new(), Str, Restart, flag "ID";
    /// The secret access key of an s3:// archive (never logged or shown).
    archive_s3_secret_access_key: Option<Hidden> = None, Opt(Secret), Restart, flag "SECRET";
    /// A file holding the s3:// archive's aws_access_key_id and aws_secret_access_key (AWS's
    /// credentials file, [default] or AWS_PROFILE, or plain key = value lines).
    archive_s3_credentials_file: Option<PathBuf> = None, Opt(PathKind), Restart, flag "FILE";
    /// Allow a plain http:// archive_s3_endpoint that is not a loopback address.
    archive_s3_allow_http: bool = false, Bool, Restart, flag "BOOL";

    section "Schema and indexes";

    /// Schema bundles shipped in the binary, enabled by name (`linden schema list`).
    schemas: Vec<String> = Vec::new(), Strings, Restart, flag "NAME";
    /// OpenLDAP .schema or LDIF schema files loaded after the built-in schema (relative to
    /// the configuration file).
    schema_files: Vec<PathBuf> = Vec::new(), FilePaths, Restart, flag "FILE";
    /// Indexed attribute types: names (presence and equality), or a table of names to kinds
    /// (pres, eq, sub, subinitial, subany, subfinal, ord).
    indexes: Vec<IndexSpec> = ["objectClass", "uid", "cn", "sn", "mail"]
            .iter()
            .map(|s| IndexSpec::eq_pres(s))
            .collect(),
        Indexes, Restart, flag "ATTRS";

    section "Limits";

    /// Largest request accepted, in bytes; a larger one ends the connection with a Notice of
    /// Disconnection (protocolError).
    max_pdu_size: usize = 16 * 1024 * 1024, Int::<1>, Live, flag "BYTES";
    /// Largest request accepted from a connection that has not bound (the bind request itself
    /// must fit), as slapd's sockbuf_max_incoming; larger ones get a Notice of Disconnection as
    /// soon as their header arrives.
    max_pdu_size_anonymous: usize = 256 * 1024, Int::<1024>, Live, flag "BYTES";
    /// Bytes of partly received large requests all connections together may hold (beyond
    /// 16 KiB each); a connection whose request needs more waits, its reads paused.
    max_incoming_bytes: usize = 256 << 20, Int::<1>, Restart, flag "BYTES";
    /// Requests one connection may have in progress before the server stops reading from it
    /// (new connections).
    max_outstanding: usize = 256, Int::<1>, Live, flag "N";
    /// Most entries one search returns for bound users (0: no limit); a client's smaller limit
    /// wins, and the administrator has none.
    size_limit: u64 = 0, Int::<0>, Live, flag "N";
    /// Most seconds one search runs for bound users (0: no limit).
    time_limit: u64 = 3600, Int::<0>, Live, flag "SECONDS";
    /// Most entries one search returns for anonymous clients (0: no limit).
    size_limit_anonymous: u64 = 500, Int::<0>, Live, flag "N";
    /// Most seconds one search runs for anonymous clients (0: no limit).
    time_limit_anonymous: u64 = 60, Int::<0>, Live, flag "SECONDS";
    /// Deepest BER nesting of a request; deeper requests get a Notice of Disconnection.
    max_ber_depth: usize = proto::DecodeLimits::default().max_ber_depth,
        Int::<8>, Live, flag "N";
    /// Deepest and/or/not nesting of a search filter; deeper filters get a Notice of
    /// Disconnection.
    max_filter_depth: usize = proto::DecodeLimits::default().max_filter_depth,
        Int::<1>, Live, flag "N";
    /// Values one attribute of an add or modify may carry (0: no limit; more:
    /// adminLimitExceeded).
    max_values_per_attribute: usize = 1_000_000, Int::<0>, Live, flag "N";
    /// Attributes of an add, or changes of a modify, in one request (0: no limit).
    max_attributes_per_request: usize = 10_000, Int::<0>, Live, flag "N";
    /// Attribute names one search may request (0: no limit).
    max_requested_attributes: usize = 1_000, Int::<0>, Live, flag "N";
    /// Controls one request may carry (0: no limit).
    max_controls_per_request: usize = 32, Int::<0>, Live, flag "N";
    /// Paged searches one connection may keep open between pages; one more drops the oldest.
    max_paged_searches: usize = 8, Int::<1>, Live, flag "N";
    /// Entries a server-side sort or virtual list view may hold in memory (0: no limit).
    max_sort_entries: usize = 100_000, Int::<0>, Live, flag "N";
    /// Keys one sort request may name (slapd's sssvlv-maxkeys).
    max_sort_keys: usize = 5, Int::<1>, Live, flag "N";
    /// Virtual list views one connection keeps (slapd's sssvlv-maxperconn).
    max_vlv_contexts: usize = 5, Int::<1>, Live, flag "N";
    /// Connections open at once; more are refused with a Notice of Disconnection (busy).
    max_connections: usize = 10_000, Int::<1>, Live, flag "N";
    /// Connections open at once from one client address.
    max_connections_per_ip: usize = 1_000, Int::<1>, Live, flag "N";
    /// Seconds a connection with nothing in progress may stay silent before it is closed
    /// (0: never, as slapd).
    idle_timeout: u64 = 0, Int::<0>, Live, flag "SECONDS";
    /// The same for connections that have not bound (0: only idle_timeout applies); the
    /// smaller of the two applies to them.
    idle_timeout_anonymous: u64 = 300, Int::<0>, Live, flag "SECONDS";
    /// Seconds a connection that has not bound may take to send one request, from its first
    /// byte to its last (0: no limit); then it gets a Notice of Disconnection.
    pdu_timeout_anonymous: u64 = 30, Int::<0>, Live, flag "SECONDS";
    /// The accept queue of each TCP listener (listen(2) backlog), capped by the kernel's
    /// net.core.somaxconn.
    listen_backlog: u32 = DEFAULT_LISTEN_BACKLOG, Range::<1, 2147483647>("a backlog"), Restart,
        flag "N";
    /// Response bytes queued for one connection before producers wait (new connections).
    max_buffered_bytes: usize = 8 << 20, Int::<65536>, Live, flag "BYTES";
    /// Seconds a client may leave queued responses unread before it is disconnected (0:
    /// never).
    write_timeout: u64 = 60, Int::<0>, Live, flag "SECONDS";
    /// Persistent searches one connection may have open.
    max_persistent_searches: usize = 16, Int::<0>, Live, flag "N";
    /// Committed write batches a persistent search may fall behind before it ends with
    /// adminLimitExceeded.
    persistent_search_queue: usize = 1024, Int::<1>, Live, flag "N";
    /// Entries one subtree delete may remove (0: no limit).
    max_subtree_delete: usize = 100_000, Int::<0>, Live, flag "N";
    /// Transactions (RFC 5805) one connection may have open.
    max_transactions: usize = 1, Int::<0>, Live, flag "N";
    /// Operations one transaction may queue.
    max_transaction_ops: usize = 1000, Int::<1>, Live, flag "N";

    section "Security";

    /// Access rules, in order, first match wins (docs/access-control.md); none: the default
    /// policy.
    access: Option<Vec<dit::acl::RuleSpec>> = None, Access, Live;
    /// SASL EXTERNAL identity mapping rules (match, replace), in order.
    authz_map: Vec<dit::authz::AuthzRuleSpec> = Vec::new(), AuthzMap, Live;
    /// PEM certificate chain for LDAPS and StartTLS (new connections get a new one on
    /// reload); none: a self-signed one created in the data directory.
    tls_cert: Option<PathBuf> = None, Opt(PathKind), Live, flag "FILE";
    /// PEM private key of tls_cert.
    tls_key: Option<PathBuf> = None, Opt(PathKind), Live, flag "FILE";
    /// PEM CA certificates client certificates must chain to (SASL EXTERNAL); none: clients
    /// are not asked for one.
    tls_client_ca: Option<PathBuf> = None, Opt(PathKind), Live, flag "FILE";
    /// Refuse simple binds and SASL PLAIN without TLS (confidentialityRequired).
    require_tls_for_bind: bool = false, Bool, Live, flag "BOOL";
    /// Refuse writes and Password Modify without TLS (confidentialityRequired).
    require_tls_for_writes: bool = false, Bool, Live, flag "BOOL";
    /// Scheme for passwords the server hashes (ARGON2, PBKDF2-SHA512, CRYPT, SSHA512, …).
    password_hash: pwhash::Scheme = pwhash::Scheme::default(), PasswordScheme, Live,
        flag "SCHEME";
    /// Argon2 memory, in KiB.
    argon2_memory_kib: u32 = pwhash::Cost::default().argon2_memory_kib, Int::<8>, Live,
        flag "KIB";
    /// Argon2 passes over memory.
    argon2_iterations: u32 = pwhash::Cost::default().argon2_iterations, Int::<1>, Live,
        flag "N";
    /// Argon2 lanes.
    argon2_parallelism: u32 = pwhash::Cost::default().argon2_parallelism, Int::<1>, Live,
        flag "N";
    /// PBKDF2-HMAC-SHA512 iterations.
    pbkdf2_iterations: u32 = pwhash::Cost::default().pbkdf2_iterations, Int::<1000>, Live,
        flag "N";
    /// SHA-512-crypt rounds.
    crypt_rounds: u32 = pwhash::Cost::default().crypt_rounds, Int::<1000>, Live, flag "N";
    /// Failed binds for one DN within bind_lockout_seconds after which its failures are
    /// answered late (0: never).
    bind_failures_per_dn: u32 = 5, Int::<0>, Live, flag "N";
    /// Failed binds from one address within bind_lockout_seconds after which its failures are
    /// answered late (0: never).
    bind_failures_per_ip: u32 = 50, Int::<0>, Live, flag "N";
    /// The window, in seconds, failed binds are counted in.
    bind_lockout_seconds: Duration = Duration::from_secs(60), Seconds::<1>, Live,
        flag "SECONDS";
    /// The longest a failed bind is held back, in milliseconds.
    bind_throttle_max_ms: Duration = Duration::from_millis(2000), Millis, Live, flag "MS";
    /// Addresses or networks never throttled by address (e.g. a login proxy).
    bind_trusted_addresses: Vec<ipnet::IpNet> = Vec::new(), Networks, Live, flag "NET";
    /// Verified credentials remembered for repeat binds against slow schemes (0: off;
    /// docs/credential-cache.md).
    credential_cache_entries: usize = DEFAULT_CREDENTIAL_CACHE_ENTRIES, Int::<0>, Restart,
        flag "N";

    section "Overlays";

    /// Attribute uniqueness rules ([[unique]]: attributes, base), as slapd's unique overlay.
    unique: Vec<UniqueSpec> = Vec::new(), Unique, Restart;
    /// Dynamic groups and lists ([[dynlist]]: object_class, url_attribute, member_attribute,
    /// member_of_attribute), as slapd's dynlist overlay (docs/configuration.md, Overlays).
    dynlist: Vec<DynlistSpec> = Vec::new(), Dynlist, Restart;
    /// The entries one URL of a dynamic group or list may expand to; beyond, the rest is left
    /// out (and a warning logged).
    dynlist_max_entries: usize = 10_000, Int::<1>, Restart, flag "N";
    /// Maintain memberOf on the members of groups (slapd's memberof overlay).
    memberof: bool = false, Bool, Restart, flag "BOOL";
    /// The groups memberof follows, as objectClass:memberAttribute pairs.
    memberof_groups: Vec<String> = dit::overlays::MemberOfSpec::default_groups(), Strings,
        Restart, flag "CLASS:ATTR";
    /// Attributes whose DN values follow renames and deletes of the entries they name
    /// (slapd's refint overlay).
    refint: Vec<String> = Vec::new(), Strings, Restart, flag "ATTR";
    /// The password policy overlay (draft-behera-ldap-password-policy, slapd's ppolicy).
    ppolicy: bool = false, Bool, Restart, flag "BOOL";
    /// DN of the policy for entries without pwdPolicySubentry.
    ppolicy_default: Option<String> = None, Opt(Str), Restart, flag "DN";
    /// A locked account's bind carries the accountLocked error in the response control.
    ppolicy_use_lockout: bool = false, Bool, Restart, flag "BOOL";

    section "Replication";

    /// Serve RFC 4533 sync searches as a replication provider (slapd's syncprov).
    syncprov: bool = false, Bool, Restart, flag "BOOL";
    /// Changed entries the provider's session log keeps for incremental refreshes.
    syncprov_sessionlog: usize = 10_000, Int::<0>, Restart, flag "N";
    /// Committed write batches a refreshAndPersist consumer may fall behind before it must
    /// refresh again.
    syncprov_queue: usize = 1024, Int::<1>, Restart, flag "N";
    /// Deleted entries the provider remembers (tombstones: entryUUID, DN, CSNs, kept with the
    /// data), so that an older copy of a deleted entry is refused and consumers learn of
    /// deletes after restarts; the oldest are forgotten beyond this count.
    syncprov_tombstones: usize = 100_000, Int::<1>, Restart, flag "N";
    /// Seconds a tombstone is kept at least (unless syncprov_tombstones is reached first); a
    /// consumer away longer gets a full refresh.
    syncprov_tombstone_lifetime: u64 = 7 * 24 * 3600, Int::<1>, Restart, flag "SECONDS";
    /// Replication consumers ([[syncrepl]], as slapd's syncrepl directive); a reload applies
    /// a change of their credentials only (bind_method, bind_dn, bind_password, tls_*).
    syncrepl: Vec<repl::consumer::ConsumerSpec> = Vec::new(), Syncrepl, Restart;
    /// LDAP URLs a read-only replica refers writes to.
    updateref: Vec<String> = Vec::new(), Strings, Live, flag "URL";
    /// Default referral (slapd's global referral): LDAP URLs an operation on a DN outside
    /// every naming context is referred to, with its DN (and a search's scope) put in.
    referral: Vec<String> = Vec::new(), Strings, Live, flag "URL";
    /// Take writes although this server has consumers, resolving conflicts by CSN (slapd's
    /// multiprovider); needs syncprov and a non-zero server_id.
    multi_provider: bool = false, Bool, Restart, flag "BOOL";

    section "Logs and monitoring";

    /// One line per operation: off, stdout, or a file (appended to; reopened on reload).
    access_log: crate::logs::LogTarget = crate::logs::LogTarget::Off, LogTargetKind, Live,
        flag "off|stdout|FILE";
    /// How access-log lines are written: text or json.
    access_log_format: crate::logs::LogFormat = crate::logs::LogFormat::Text, LogFormatKind,
        Live, flag "text|json";
    /// Every change as an LDIF change record with who and when: off, stdout, or a file.
    audit_log: crate::logs::LogTarget = crate::logs::LogTarget::Off, LogTargetKind, Live,
        flag "off|stdout|FILE";
    /// What the server logs to stderr: a level or a filter such as "info,server=debug".
    log_level: String = "info".to_string(), LogLevel, Live, flag "LEVEL";
    /// DNs besides the administrator that may read cn=Monitor.
    monitor_readers: Vec<String> = Vec::new(), Strings, Live, flag "DN";
    /// Address of the HTTP listener for /metrics, /healthz and /readyz (off unless set).
    metrics_listen: Option<SocketAddr> = None, Opt(Address("127.0.0.1:9090")), Restart,
        flag "ADDR:PORT";
    /// Seconds a replication consumer may be behind its provider for /readyz to answer
    /// ready.
    ready_max_lag: u64 = 30, Int::<0>, Live, flag "SECONDS";

    section "Web console";

    /// Address of the web console (docs/console.md; off unless set): HTTPS with the server's
    /// certificate (tls_cert, or the generated one).
    console_listen: Option<SocketAddr> = None, Opt(Address("127.0.0.1:8443")), Restart,
        flag "ADDR:PORT";
    /// Serve the console over plain HTTP instead, allowed only when console_listen is a
    /// loopback address.
    console_plain_http: bool = false, Bool, Restart, flag "BOOL";
    /// Seconds a console session may stay unused before it ends (and its LDAP connection is
    /// closed).
    console_idle_timeout: u64 = 900, Int::<1>, Live, flag "SECONDS";
    /// Console sessions open at once; a new login beyond it ends the one idle longest.
    console_max_sessions: usize = 100, Int::<1>, Live, flag "N";
}

impl Config {
    /// What the settings say together that no key says alone; the message names the keys.
    pub fn check(&self) -> Result<(), String> {
        self.password_policy()
            .cost
            .check()
            .map_err(|e| format!("key {e}"))?;
        for url in &self.referral {
            let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
            if !matches!(scheme.as_deref(), Some("ldap" | "ldaps" | "ldapi")) {
                return Err(format!(
                    "referral: '{url}' is not an LDAP URL (ldap://host[:port]/, ldaps:// or ldapi://)"
                ));
            }
        }
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
        if let Some(a) = self.console_listen {
            if self.console_plain_http && !a.ip().is_loopback() {
                return Err(format!(
                    "console_listen: {a} is not a loopback address, and console_plain_http \
                     would send passwords and session cookies in clear over the network: \
                     serve HTTPS (remove console_plain_http) or listen on a loopback address \
                     such as 127.0.0.1"
                ));
            }
        }
        if !self.archive.is_empty() {
            crate::archive::check_settings(self).map_err(|e| e.to_string())?;
        }
        if self.max_incoming_bytes > tokio::sync::Semaphore::MAX_PERMITS {
            return Err(format!(
                "max_incoming_bytes: at most {} bytes, found {}",
                tokio::sync::Semaphore::MAX_PERMITS,
                self.max_incoming_bytes
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
    pub fn idle_limit(&self, anonymous: bool) -> Option<Duration> {
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
        Some(Duration::from_secs(secs))
    }

    /// The schema bundles to load: `schemas`, and `ppolicy` when the password policy is on
    /// (it needs its schema).
    pub fn schema_bundles(&self) -> Vec<String> {
        let mut bundles = self.schemas.clone();
        if self.ppolicy && !bundles.iter().any(|b| b == "ppolicy") {
            bundles.push("ppolicy".to_string());
        }
        bundles
    }

    /// How new passwords are hashed (`password_hash` and the cost keys).
    pub fn password_policy(&self) -> pwhash::Policy {
        pwhash::Policy {
            scheme: self.password_hash,
            cost: pwhash::Cost {
                argon2_memory_kib: self.argon2_memory_kib,
                argon2_iterations: self.argon2_iterations,
                argon2_parallelism: self.argon2_parallelism,
                pbkdf2_iterations: self.pbkdf2_iterations,
                crypt_rounds: self.crypt_rounds,
            },
        }
    }

    /// Sets `password_hash` and the cost keys.
    pub fn set_password_policy(&mut self, p: pwhash::Policy) {
        self.password_hash = p.scheme;
        self.argon2_memory_kib = p.cost.argon2_memory_kib;
        self.argon2_iterations = p.cost.argon2_iterations;
        self.argon2_parallelism = p.cost.argon2_parallelism;
        self.pbkdf2_iterations = p.cost.pbkdf2_iterations;
        self.crypt_rounds = p.cost.crypt_rounds;
    }

    /// Sets `ppolicy`, `ppolicy_default` and `ppolicy_use_lockout`.
    pub fn set_ppolicy_spec(&mut self, p: dit::ppolicy::PpolicySpec) {
        self.ppolicy = p.enabled;
        self.ppolicy_default = p.default_policy;
        self.ppolicy_use_lockout = p.use_lockout;
    }

    /// Failed-bind throttling (`bind_*`).
    pub fn lockout(&self) -> crate::lockout::LockoutConfig {
        crate::lockout::LockoutConfig {
            failures_per_dn: self.bind_failures_per_dn,
            failures_per_ip: self.bind_failures_per_ip,
            window: self.bind_lockout_seconds,
            max_delay: self.bind_throttle_max_ms,
            trusted: self.bind_trusted_addresses.clone(),
        }
    }

    /// What the write path limits on one request (`max_values_per_attribute`,
    /// `max_attributes_per_request`, `max_subtree_delete`).
    pub fn write_limits(&self) -> dit::WriteLimits {
        dit::WriteLimits {
            max_values_per_attribute: self.max_values_per_attribute,
            max_attributes_per_request: self.max_attributes_per_request,
            max_subtree_delete: self.max_subtree_delete,
        }
    }

    /// Group membership and referential integrity (`memberof`, `memberof_groups`, `refint`).
    pub fn memberof_spec(&self) -> dit::overlays::MemberOfSpec {
        dit::overlays::MemberOfSpec {
            memberof: self.memberof,
            groups: self.memberof_groups.clone(),
            refint: self.refint.clone(),
        }
    }

    /// The password policy (`ppolicy`, `ppolicy_default`, `ppolicy_use_lockout`).
    pub fn ppolicy_spec(&self) -> dit::ppolicy::PpolicySpec {
        dit::ppolicy::PpolicySpec {
            enabled: self.ppolicy,
            default_policy: self.ppolicy_default.clone(),
            use_lockout: self.ppolicy_use_lockout,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_referral_takes_ldap_urls_only() {
        let mut c = Config {
            referral: vec![
                "ldap://root.example.com/".into(),
                "LDAPS://r.example:636".into(),
            ],
            ..Config::default()
        };
        assert_eq!(c.check(), Ok(()));
        c.referral = vec!["root.example.com".into()];
        assert_eq!(
            c.check(),
            Err("referral: 'root.example.com' is not an LDAP URL (ldap://host[:port]/, ldaps:// or ldapi://)".into())
        );
    }

    #[test]
    fn every_key_once_and_shown() {
        let mut names: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a key is declared twice");
        for k in KEYS {
            assert!(!k.doc().is_empty(), "{} has no documentation", k.name);
            assert!(!k.default_shown().is_empty(), "{}", k.name);
        }
        assert_eq!(
            key("max_pdu_size").map(Key::default_shown).as_deref(),
            Some("16777216")
        );
        assert_eq!(
            key("password_hash").map(Key::default_shown).as_deref(),
            Some("ARGON2")
        );
        assert_eq!(
            key("admin_password").map(Key::default_shown).as_deref(),
            Some("none")
        );
        assert_eq!(key("data").map(|k| k.env()).as_deref(), Some("LINDEN_DATA"));
        assert_eq!(
            key("max_pdu_size").and_then(Key::flag).as_deref(),
            Some("max-pdu-size")
        );
        assert!(key("access").is_some_and(|k| k.flag().is_none()));
    }

    #[test]
    fn set_show_same_take() {
        let k = key("max_connections").expect("declared");
        let mut a = Config::default();
        let b = Config::default();
        k.set(&mut a, &toml::Value::Integer(7), &Ctx::default())
            .expect("valid");
        assert_eq!(a.max_connections, 7);
        assert_eq!(k.show(&a), "7");
        assert!(!k.same(&a, &b));
        let mut c = Config::default();
        k.take(&mut c, &a);
        assert!(k.same(&a, &c));
        let e = k
            .set(&mut a, &toml::Value::Integer(0), &Ctx::default())
            .expect_err("below the floor");
        assert_eq!(e, "must be at least 1, found 0");
    }

    #[test]
    fn misspelt_keys_find_their_key() {
        assert_eq!(suggest("lisen"), Some("listen"));
        assert_eq!(suggest("sufix"), Some("suffix"));
        assert_eq!(suggest("max_pdu"), None);
        assert_eq!(suggest("max_pdu_szie"), Some("max_pdu_size"));
        assert_eq!(suggest("zzzzzzzz"), None);
    }
}
