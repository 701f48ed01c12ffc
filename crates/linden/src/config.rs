//! Settings for `linden serve` (and `linden import`): the TOML file, merged with the command
//! line.
//!
//! The file is read as a plain TOML table and each key converted by hand rather than through
//! `#[derive(Deserialize)]`, so that every error is one line naming the file, the key and the
//! offending value, which is what a person editing the file needs.
//!
//! Precedence: flag, then environment (only `LINDEN_ADMIN_PASSWORD`, folded into the flag by
//! clap), then file, then default. Defaults are not applied here: a field left `None` takes the value from
//! `server::Config::default()`, so each default is written down in one place.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tracing_subscriber::EnvFilter;

use crate::bulk::ImportArgs;
use crate::cli::ServeArgs;

/// A setting that cannot be used. `linden` prints it as one line and exits with status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Every key the file may hold, in the order the documentation lists them.
pub const KEYS: &[&str] = &[
    "listen",
    "data",
    "suffix",
    "admin_dn",
    "admin_password",
    "demo",
    "max_pdu_size",
    "max_outstanding",
    "size_limit",
    "time_limit",
    "size_limit_anonymous",
    "time_limit_anonymous",
    "access",
    "max_ber_depth",
    "max_filter_depth",
    "max_connections",
    "max_connections_per_ip",
    "idle_timeout",
    "max_buffered_bytes",
    "write_timeout",
    "max_persistent_searches",
    "persistent_search_queue",
    "access_log",
    "audit_log",
    "ldaps_listen",
    "tls_cert",
    "tls_key",
    "tls_client_ca",
    "require_tls_for_bind",
    "require_tls_for_writes",
    "password_hash",
    "argon2_memory_kib",
    "argon2_iterations",
    "argon2_parallelism",
    "pbkdf2_iterations",
    "crypt_rounds",
    "bind_failures_per_dn",
    "bind_failures_per_ip",
    "bind_lockout_seconds",
    "indexes",
    "durability",
    "snapshot_interval",
    "snapshot_log_bytes",
    "snapshot_cpu_share",
    "log_level",
];

/// The log filter used when neither `--log-level` nor `log_level` is given.
pub const DEFAULT_LOG_LEVEL: &str = "info";

/// Settings after merging; `None` means "use the server's default".
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Settings {
    pub listen: Option<SocketAddr>,
    pub data: Option<PathBuf>,
    pub suffixes: Option<Vec<String>>,
    pub admin_dn: Option<String>,
    /// Cleartext, only until it is hashed by `password::resolve`.
    pub admin_password: Option<String>,
    pub demo: bool,
    pub max_pdu_size: Option<usize>,
    pub max_outstanding: Option<usize>,
    pub size_limit: Option<u64>,
    pub time_limit: Option<u64>,
    pub size_limit_anonymous: Option<u64>,
    pub time_limit_anonymous: Option<u64>,
    pub access: Option<Vec<server::acl::RuleSpec>>,
    pub max_ber_depth: Option<usize>,
    pub max_filter_depth: Option<usize>,
    pub max_connections: Option<usize>,
    pub max_connections_per_ip: Option<usize>,
    pub idle_timeout: Option<u64>,
    pub max_buffered_bytes: Option<usize>,
    pub write_timeout: Option<u64>,
    pub max_persistent_searches: Option<usize>,
    pub persistent_search_queue: Option<usize>,
    pub access_log: Option<server::logs::LogTarget>,
    pub audit_log: Option<server::logs::LogTarget>,
    pub ldaps_listen: Option<SocketAddr>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_client_ca: Option<PathBuf>,
    pub require_tls_for_bind: bool,
    pub require_tls_for_writes: bool,
    pub password_hash: Option<pwhash::Scheme>,
    pub argon2_memory_kib: Option<u32>,
    pub argon2_iterations: Option<u32>,
    pub argon2_parallelism: Option<u32>,
    pub pbkdf2_iterations: Option<u32>,
    pub crypt_rounds: Option<u32>,
    pub bind_failures_per_dn: Option<u32>,
    pub bind_failures_per_ip: Option<u32>,
    pub bind_lockout_seconds: Option<u64>,
    pub indexes: Option<Vec<String>>,
    pub durability: Option<server::Durability>,
    pub snapshot_interval: Option<u64>,
    pub snapshot_log_bytes: Option<u64>,
    pub snapshot_cpu_share: Option<u32>,
    pub log_level: String,
}

/// Reads the file named by `--config`, if any, and merges it under the flags.
pub fn resolve(args: &ServeArgs) -> Result<Settings, ConfigError> {
    let file = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                ConfigError(format!(
                    "{}: cannot read configuration file: {e}",
                    path.display()
                ))
            })?;
            parse_file(path, &text)?
        }
        None => Settings::default(),
    };
    merge(args, file)
}

/// The settings of `linden import`: its `--config` file read and merged exactly as `serve`
/// does, under the flags the two commands share (`--data`, `--suffix`), so that an import
/// stores entries as the server on the same file would (password hashing, suffixes, admin
/// DN, indexes).
pub fn resolve_import(args: &ImportArgs) -> Result<Settings, ConfigError> {
    resolve(&ServeArgs {
        config: args.config.clone(),
        data: args.data.clone(),
        suffixes: args.suffixes.clone(),
        ..ServeArgs::default()
    })
}

/// Applies the flags over the file's settings and checks what the flags alone cannot.
pub fn merge(args: &ServeArgs, file: Settings) -> Result<Settings, ConfigError> {
    let log_level = match &args.log_level {
        Some(l) => {
            check_log_level(l).map_err(|e| ConfigError(format!("--log-level: {e}")))?;
            l.clone()
        }
        None if file.log_level.is_empty() => DEFAULT_LOG_LEVEL.to_string(),
        None => file.log_level,
    };
    let s = Settings {
        listen: args.listen.or(file.listen),
        data: args.data.clone().or(file.data),
        suffixes: if args.suffixes.is_empty() {
            file.suffixes
        } else {
            Some(args.suffixes.clone())
        },
        admin_dn: args.admin_dn.clone().or(file.admin_dn),
        admin_password: args.admin_password.clone().or(file.admin_password),
        demo: args.demo || file.demo,
        max_pdu_size: args.max_pdu_size.or(file.max_pdu_size),
        max_outstanding: args.max_outstanding.or(file.max_outstanding),
        size_limit: args.size_limit.or(file.size_limit),
        time_limit: args.time_limit.or(file.time_limit),
        size_limit_anonymous: file.size_limit_anonymous,
        time_limit_anonymous: file.time_limit_anonymous,
        access: file.access,
        max_ber_depth: file.max_ber_depth,
        max_filter_depth: file.max_filter_depth,
        max_connections: file.max_connections,
        max_connections_per_ip: file.max_connections_per_ip,
        idle_timeout: file.idle_timeout,
        max_buffered_bytes: file.max_buffered_bytes,
        write_timeout: file.write_timeout,
        max_persistent_searches: file.max_persistent_searches,
        persistent_search_queue: file.persistent_search_queue,
        access_log: file.access_log,
        audit_log: file.audit_log,
        ldaps_listen: args.ldaps_listen.or(file.ldaps_listen),
        tls_cert: file.tls_cert,
        tls_key: file.tls_key,
        tls_client_ca: file.tls_client_ca,
        require_tls_for_bind: file.require_tls_for_bind,
        require_tls_for_writes: file.require_tls_for_writes,
        password_hash: file.password_hash,
        argon2_memory_kib: file.argon2_memory_kib,
        argon2_iterations: file.argon2_iterations,
        argon2_parallelism: file.argon2_parallelism,
        pbkdf2_iterations: file.pbkdf2_iterations,
        crypt_rounds: file.crypt_rounds,
        bind_failures_per_dn: file.bind_failures_per_dn,
        bind_failures_per_ip: file.bind_failures_per_ip,
        bind_lockout_seconds: file.bind_lockout_seconds,
        indexes: file.indexes,
        durability: match &args.durability {
            Some(d) => {
                Some(parse_durability(d).map_err(|e| ConfigError(format!("--durability: {e}")))?)
            }
            None => file.durability,
        },
        snapshot_interval: args.snapshot_interval.or(file.snapshot_interval),
        snapshot_log_bytes: args.snapshot_log_bytes.or(file.snapshot_log_bytes),
        snapshot_cpu_share: file.snapshot_cpu_share,
        log_level,
    };
    if s.max_pdu_size == Some(0) {
        return Err(ConfigError("--max-pdu-size: must be at least 1".into()));
    }
    if s.max_outstanding == Some(0) {
        return Err(ConfigError("--max-outstanding: must be at least 1".into()));
    }
    if s.admin_password.as_deref() == Some("") {
        return Err(ConfigError(
            "administrator password: must not be empty".into(),
        ));
    }
    Ok(s)
}

/// Parses the text of a configuration file; `path` is only used in messages.
pub fn parse_file(path: &Path, text: &str) -> Result<Settings, ConfigError> {
    let name = path.display().to_string();
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let at = e
            .span()
            .map(|s| format!(":{}", line_of(text, s.start)))
            .unwrap_or_default();
        let message: Vec<&str> = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        ConfigError(format!("{name}{at}: invalid TOML: {}", message.join("; ")))
    })?;
    let mut s = Settings::default();
    for (key, value) in &table {
        let bad = |what: String| ConfigError(format!("{name}: key '{key}': {what}"));
        match key.as_str() {
            "listen" => {
                let v = string(value).map_err(bad)?;
                let addr = v.parse::<SocketAddr>().map_err(|_| {
                    bad(format!(
                        "invalid socket address '{v}' (expected ADDR:PORT, e.g. 127.0.0.1:3389)"
                    ))
                })?;
                s.listen = Some(addr);
            }
            "data" => s.data = Some(PathBuf::from(string(value).map_err(bad)?)),
            "suffix" => {
                let v = strings(value).map_err(bad)?;
                if v.is_empty() {
                    return Err(bad("at least one suffix is required".into()));
                }
                s.suffixes = Some(v);
            }
            "admin_dn" => s.admin_dn = Some(string(value).map_err(bad)?),
            "admin_password" => s.admin_password = Some(string(value).map_err(bad)?),
            "demo" => {
                s.demo = value
                    .as_bool()
                    .ok_or_else(|| bad(format!("expected true or false, found {}", show(value))))?
            }
            "max_pdu_size" => s.max_pdu_size = Some(integer(value, 1).map_err(bad)?),
            "max_outstanding" => s.max_outstanding = Some(integer(value, 1).map_err(bad)?),
            "size_limit" => s.size_limit = Some(integer(value, 0).map_err(bad)?),
            "time_limit" => s.time_limit = Some(integer(value, 0).map_err(bad)?),
            "size_limit_anonymous" => {
                s.size_limit_anonymous = Some(integer(value, 0).map_err(bad)?)
            }
            "time_limit_anonymous" => {
                s.time_limit_anonymous = Some(integer(value, 0).map_err(bad)?)
            }
            "max_ber_depth" => s.max_ber_depth = Some(integer(value, 8).map_err(bad)?),
            "max_filter_depth" => s.max_filter_depth = Some(integer(value, 1).map_err(bad)?),
            "max_connections" => s.max_connections = Some(integer(value, 1).map_err(bad)?),
            "max_connections_per_ip" => {
                s.max_connections_per_ip = Some(integer(value, 1).map_err(bad)?)
            }
            "idle_timeout" => s.idle_timeout = Some(integer(value, 0).map_err(bad)?),
            "max_buffered_bytes" => {
                s.max_buffered_bytes = Some(integer(value, 65536).map_err(bad)?)
            }
            "write_timeout" => s.write_timeout = Some(integer(value, 0).map_err(bad)?),
            "max_persistent_searches" => {
                s.max_persistent_searches = Some(integer(value, 0).map_err(bad)?)
            }
            "persistent_search_queue" => {
                s.persistent_search_queue = Some(integer(value, 1).map_err(bad)?)
            }
            "access_log" => {
                s.access_log = Some(server::logs::LogTarget::parse(&string(value).map_err(bad)?))
            }
            "audit_log" => {
                s.audit_log = Some(server::logs::LogTarget::parse(&string(value).map_err(bad)?))
            }
            "ldaps_listen" => {
                let v = string(value).map_err(bad)?;
                s.ldaps_listen = Some(v.parse::<SocketAddr>().map_err(|_| {
                    bad(format!(
                        "invalid socket address '{v}' (expected ADDR:PORT, e.g. 0.0.0.0:636)"
                    ))
                })?);
            }
            "tls_cert" => s.tls_cert = Some(PathBuf::from(string(value).map_err(bad)?)),
            "tls_key" => s.tls_key = Some(PathBuf::from(string(value).map_err(bad)?)),
            "tls_client_ca" => s.tls_client_ca = Some(PathBuf::from(string(value).map_err(bad)?)),
            "require_tls_for_bind" => {
                s.require_tls_for_bind = value
                    .as_bool()
                    .ok_or_else(|| bad(format!("expected true or false, found {}", show(value))))?
            }
            "require_tls_for_writes" => {
                s.require_tls_for_writes = value
                    .as_bool()
                    .ok_or_else(|| bad(format!("expected true or false, found {}", show(value))))?
            }
            "password_hash" => {
                let v = string(value).map_err(bad)?;
                s.password_hash = Some(
                    v.parse()
                        .map_err(|e: pwhash::UnknownScheme| bad(e.to_string()))?,
                );
            }
            "argon2_memory_kib" => s.argon2_memory_kib = Some(integer(value, 8).map_err(bad)?),
            "argon2_iterations" => s.argon2_iterations = Some(integer(value, 1).map_err(bad)?),
            "argon2_parallelism" => s.argon2_parallelism = Some(integer(value, 1).map_err(bad)?),
            "pbkdf2_iterations" => s.pbkdf2_iterations = Some(integer(value, 1000).map_err(bad)?),
            "crypt_rounds" => s.crypt_rounds = Some(integer(value, 1000).map_err(bad)?),
            "bind_failures_per_dn" => {
                s.bind_failures_per_dn = Some(integer(value, 0).map_err(bad)?)
            }
            "bind_failures_per_ip" => {
                s.bind_failures_per_ip = Some(integer(value, 0).map_err(bad)?)
            }
            "bind_lockout_seconds" => {
                s.bind_lockout_seconds = Some(integer(value, 1).map_err(bad)?)
            }
            "access" => {
                let rules = access_rules(value).map_err(|e| ConfigError(format!("{name}: {e}")))?;
                server::acl::check(&rules).map_err(|e| ConfigError(format!("{name}: {e}")))?;
                s.access = Some(rules);
            }
            "indexes" => s.indexes = Some(strings(value).map_err(bad)?),
            "durability" => {
                let v = string(value).map_err(bad)?;
                s.durability = Some(parse_durability(&v).map_err(bad)?);
            }
            "snapshot_interval" => s.snapshot_interval = Some(integer(value, 0).map_err(bad)?),
            "snapshot_log_bytes" => s.snapshot_log_bytes = Some(integer(value, 0).map_err(bad)?),
            "snapshot_cpu_share" => {
                let v: u32 = integer(value, 1).map_err(bad)?;
                if v > 100 {
                    return Err(bad(format!(
                        "a percentage of one core: 1 to 100, found {v}"
                    )));
                }
                s.snapshot_cpu_share = Some(v);
            }
            "log_level" => {
                let v = string(value).map_err(bad)?;
                check_log_level(&v).map_err(bad)?;
                s.log_level = v;
            }
            _ => {
                let at = key_line(text, key)
                    .map(|l| format!(":{l}"))
                    .unwrap_or_default();
                return Err(ConfigError(format!(
                    "{name}{at}: unknown key '{key}' (expected one of: {})",
                    KEYS.join(", ")
                )));
            }
        }
    }
    // The cost parameters depend on each other (memory at least 8 KiB per lane).
    let d = pwhash::Cost::default();
    pwhash::Cost {
        argon2_memory_kib: s.argon2_memory_kib.unwrap_or(d.argon2_memory_kib),
        argon2_iterations: s.argon2_iterations.unwrap_or(d.argon2_iterations),
        argon2_parallelism: s.argon2_parallelism.unwrap_or(d.argon2_parallelism),
        pbkdf2_iterations: s.pbkdf2_iterations.unwrap_or(d.pbkdf2_iterations),
        crypt_rounds: s.crypt_rounds.unwrap_or(d.crypt_rounds),
    }
    .check()
    .map_err(|e| ConfigError(format!("{name}: key {e}")))?;
    Ok(s)
}

/// `sync` (every batch fsynced before it is acknowledged) or `nosync` (benchmarks only).
pub fn parse_durability(s: &str) -> Result<server::Durability, String> {
    match s {
        "sync" => Ok(server::Durability::Sync),
        "nosync" => Ok(server::Durability::NoSync),
        other => Err(format!(
            "invalid value '{other}' (expected \"sync\" or \"nosync\")"
        )),
    }
}

/// Accepts a level or a list of `target=level` directives (what `EnvFilter` accepts), except
/// that a bare word must be a level: EnvFilter would read `verbose` as "everything from the
/// target named verbose" and silently log nothing else.
pub fn check_log_level(s: &str) -> Result<(), String> {
    const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];
    let bad = |why: String| {
        format!("invalid log level '{s}' ({why}; expected error, warn, info, debug, trace or a filter like 'info,server=debug')")
    };
    for d in s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if !d.contains('=') && !d.contains('[') && !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(d))
        {
            return Err(bad(format!("'{d}' is not a level")));
        }
    }
    EnvFilter::try_new(s)
        .map(drop)
        .map_err(|e| bad(e.to_string()))
}

/// The `[[access]]` tables: `dn`, `scope`, `filter`, `attrs` and `by = [{ who, rights }]`.
/// Messages name the rule and field as `access[I].FIELD`, from 0 like the rule list.
fn access_rules(value: &toml::Value) -> Result<Vec<server::acl::RuleSpec>, String> {
    let items = value.as_array().ok_or_else(|| {
        format!(
            "key 'access': expected [[access]] tables, found {}",
            show(value)
        )
    })?;
    let mut rules = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = |field: &str, what: String| format!("access[{i}].{field}: {what}");
        let table = item
            .as_table()
            .ok_or_else(|| at("", format!("expected a table, found {}", show(item))))?;
        let mut r = server::acl::RuleSpec::default();
        for (k, v) in table {
            match k.as_str() {
                "dn" => r.dn = Some(string(v).map_err(|e| at(k, e))?),
                "scope" => r.scope = Some(string(v).map_err(|e| at(k, e))?),
                "filter" => r.filter = Some(string(v).map_err(|e| at(k, e))?),
                "attrs" => r.attrs = Some(strings(v).map_err(|e| at(k, e))?),
                "by" => {
                    let clauses = v.as_array().ok_or_else(|| {
                        at(
                            k,
                            format!(
                                "expected an array of {{ who, rights }} tables, found {}",
                                show(v)
                            ),
                        )
                    })?;
                    for (j, c) in clauses.iter().enumerate() {
                        let field = format!("by[{j}]");
                        let t = c.as_table().ok_or_else(|| {
                            at(
                                &field,
                                format!(
                                    "expected {{ who = ..., rights = [...] }}, found {}",
                                    show(c)
                                ),
                            )
                        })?;
                        let mut who = None;
                        let mut rights = None;
                        for (ck, cv) in t {
                            match ck.as_str() {
                                "who" => {
                                    who = Some(
                                        string(cv).map_err(|e| at(&format!("{field}.who"), e))?,
                                    )
                                }
                                "rights" => {
                                    rights = Some(
                                        strings(cv)
                                            .map_err(|e| at(&format!("{field}.rights"), e))?,
                                    )
                                }
                                other => {
                                    return Err(at(
                                        &format!("{field}.{other}"),
                                        "unknown key (expected who or rights)".into(),
                                    ))
                                }
                            }
                        }
                        r.by.push(server::acl::ClauseSpec {
                            who: who
                                .ok_or_else(|| at(&format!("{field}.who"), "missing".into()))?,
                            rights: rights
                                .ok_or_else(|| at(&format!("{field}.rights"), "missing".into()))?,
                        });
                    }
                }
                other => {
                    return Err(at(
                        other,
                        "unknown key (expected dn, scope, filter, attrs or by)".into(),
                    ))
                }
            }
        }
        rules.push(r);
    }
    Ok(rules)
}

fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("string '{s}'"),
        toml::Value::Integer(i) => format!("integer {i}"),
        toml::Value::Float(f) => format!("float {f}"),
        toml::Value::Boolean(b) => format!("boolean {b}"),
        toml::Value::Datetime(d) => format!("date {d}"),
        toml::Value::Array(_) => "an array".into(),
        toml::Value::Table(_) => "a table".into(),
    }
}

fn string(v: &toml::Value) -> Result<String, String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("expected a string, found {}", show(v)))
}

/// One string or an array of strings.
fn strings(v: &toml::Value) -> Result<Vec<String>, String> {
    match v {
        toml::Value::String(s) => Ok(vec![s.clone()]),
        toml::Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("expected strings, found {}", show(i)))
            })
            .collect(),
        _ => Err(format!(
            "expected a string or an array of strings, found {}",
            show(v)
        )),
    }
}

fn integer<T: TryFrom<i64>>(v: &toml::Value, min: i64) -> Result<T, String> {
    let i = v
        .as_integer()
        .ok_or_else(|| format!("expected an integer, found {}", show(v)))?;
    if i < min {
        return Err(format!("must be at least {min}, found {i}"));
    }
    T::try_from(i).map_err(|_| format!("{i} is too large"))
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The line where a top-level key is set, for messages; `None` if it cannot be told simply
/// (quoted or dotted keys).
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            l.trim_start().strip_prefix(key).is_some_and(|rest| {
                let rest = rest.trim_start();
                rest.starts_with('=') || rest.starts_with('.')
            })
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        parse_file(Path::new("linden.toml"), text)
    }

    /// The example in docs/configuration.md is a valid file.
    #[test]
    fn documented_example_parses() {
        let doc = include_str!("../../../docs/configuration.md");
        let start = doc.find("## Example file").expect("example section");
        let block = &doc[start..];
        let block = &block[block.find("```toml\n").expect("toml block") + 8..];
        let block = &block[..block.find("```").expect("end of block")];
        let s = parse(block).expect("documented example");
        assert_eq!(s.access.map(|a| a.len()), Some(2));
        assert_eq!(s.password_hash, Some(pwhash::Scheme::Argon2));
    }

    #[test]
    fn password_and_lockout_keys() {
        let s = parse(
            "password_hash = \"pbkdf2-sha512\"\npbkdf2_iterations = 300000\nargon2_memory_kib = 65536\nbind_failures_per_dn = 3\nbind_failures_per_ip = 0\nbind_lockout_seconds = 30\n",
        )
        .expect("valid");
        assert_eq!(s.password_hash, Some(pwhash::Scheme::Pbkdf2Sha512));
        assert_eq!(s.pbkdf2_iterations, Some(300000));
        assert_eq!(s.argon2_memory_kib, Some(65536));
        assert_eq!(s.bind_failures_per_dn, Some(3));
        assert_eq!(s.bind_failures_per_ip, Some(0));
        assert_eq!(s.bind_lockout_seconds, Some(30));
        assert_eq!(
            parse("snapshot_cpu_share = 40")
                .expect("valid")
                .snapshot_cpu_share,
            Some(40)
        );
        let e = parse("snapshot_cpu_share = 150")
            .expect_err("over 100")
            .to_string();
        assert!(
            e.contains("key 'snapshot_cpu_share': a percentage of one core"),
            "{e}"
        );
        let e = parse("password_hash = \"md5\"")
            .expect_err("unknown scheme")
            .to_string();
        assert!(
            e.starts_with("linden.toml: key 'password_hash': unknown password scheme \"md5\""),
            "{e}"
        );
        let e = parse("argon2_memory_kib = 99999999")
            .expect_err("too big")
            .to_string();
        assert!(
            e.starts_with("linden.toml: key argon2_memory_kib must be between"),
            "{e}"
        );
        let e = parse("bind_lockout_seconds = 0")
            .expect_err("zero")
            .to_string();
        assert!(
            e.starts_with("linden.toml: key 'bind_lockout_seconds': must be at least 1"),
            "{e}"
        );
    }

    #[test]
    fn persistent_search_limits() {
        let s = parse("max_persistent_searches = 0\npersistent_search_queue = 8\n").expect("valid");
        assert_eq!(s.max_persistent_searches, Some(0));
        assert_eq!(s.persistent_search_queue, Some(8));
        let e = parse("persistent_search_queue = 0")
            .expect_err("zero")
            .to_string();
        assert!(
            e.contains("key 'persistent_search_queue': must be at least 1"),
            "{e}"
        );
    }

    #[test]
    fn access_rules_and_anonymous_limits() {
        let s = parse(
            r#"
size_limit_anonymous = 10
time_limit_anonymous = 5

[[access]]
dn = "ou=people,dc=example,dc=com"
scope = "children"
filter = "(objectClass=person)"
attrs = ["userPassword", "entry"]
by = [
  { who = "self", rights = ["write"] },
  { who = "group:cn=admins,ou=groups,dc=example,dc=com", rights = "all" },
]

[[access]]
by = [{ who = "users", rights = ["read", "search"] }]
"#,
        )
        .expect("valid file");
        assert_eq!(s.size_limit_anonymous, Some(10));
        assert_eq!(s.time_limit_anonymous, Some(5));
        let rules = s.access.expect("rules");
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].scope.as_deref(), Some("children"));
        assert_eq!(rules[0].by[1].rights, vec!["all".to_string()]);
        assert_eq!(rules[1].by[0].who, "users");
    }

    #[test]
    fn bad_access_rules_name_rule_and_field() {
        for (text, wants) in [
            ("access = 3", "linden.toml: key 'access': expected [[access]] tables"),
            (
                "[[access]]\nby = [{ who = \"*\", rights = [\"read\"] }]\n[[access]]\ndn = \"bogus\"\nby = [{ who = \"*\", rights = [\"read\"] }]",
                "linden.toml: access[1].dn: invalid DN 'bogus'",
            ),
            (
                "[[access]]\nby = [{ who = \"everyone\", rights = [\"read\"] }]",
                "linden.toml: access[0].by[0].who: invalid subject 'everyone'",
            ),
            (
                "[[access]]\nby = [{ who = \"*\", rights = [\"fly\"] }]",
                "linden.toml: access[0].by[0].rights: invalid right 'fly'",
            ),
            (
                "[[access]]\nby = [{ who = \"*\" }]",
                "linden.toml: access[0].by[0].rights: missing",
            ),
            (
                "[[access]]\nto = \"x\"\nby = []",
                "linden.toml: access[0].to: unknown key",
            ),
            (
                "[[access]]\nfilter = \"(cn=\"\nby = [{ who = \"*\", rights = [\"read\"] }]",
                "linden.toml: access[0].filter: invalid filter '(cn='",
            ),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.starts_with(wants), "{e}\nwanted: {wants}");
        }
    }

    #[test]
    fn full_file() {
        let s = parse(
            r#"
listen = "0.0.0.0:389"
data = "/var/lib/linden"
suffix = ["dc=example,dc=com", "o=test"]
admin_dn = "cn=root,dc=example,dc=com"
admin_password = "pw"
demo = true
max_pdu_size = 1048576
max_outstanding = 32
size_limit = 500
time_limit = 60
indexes = ["uid", "mail"]
log_level = "debug"
"#,
        )
        .expect("valid file");
        assert_eq!(s.listen, Some("0.0.0.0:389".parse().expect("addr")));
        assert_eq!(s.data, Some(PathBuf::from("/var/lib/linden")));
        assert_eq!(
            s.suffixes,
            Some(vec!["dc=example,dc=com".to_string(), "o=test".to_string()])
        );
        assert_eq!(s.admin_dn.as_deref(), Some("cn=root,dc=example,dc=com"));
        assert_eq!(s.admin_password.as_deref(), Some("pw"));
        assert!(s.demo);
        assert_eq!(s.max_pdu_size, Some(1048576));
        assert_eq!(s.max_outstanding, Some(32));
        assert_eq!(s.size_limit, Some(500));
        assert_eq!(s.time_limit, Some(60));
        assert_eq!(s.indexes, Some(vec!["uid".to_string(), "mail".to_string()]));
        assert_eq!(s.log_level, "debug");
    }

    #[test]
    fn suffix_may_be_one_string() {
        let s = parse("suffix = \"o=one\"").expect("valid");
        assert_eq!(s.suffixes, Some(vec!["o=one".to_string()]));
    }

    #[test]
    fn unknown_key_names_file_key_line_and_choices() {
        let e = parse("demo = true\nlisen = \"127.0.0.1:1\"\n").expect_err("unknown key");
        assert!(
            e.0.starts_with("linden.toml:2: unknown key 'lisen' (expected one of: listen, data,"),
            "{e}"
        );
        assert!(!e.0.contains('\n'));
    }

    #[test]
    fn bad_values_name_the_key() {
        let cases = [
            (
                "listen = \"abc\"",
                "linden.toml: key 'listen': invalid socket address 'abc'",
            ),
            (
                "listen = 3389",
                "linden.toml: key 'listen': expected a string, found integer 3389",
            ),
            (
                "demo = \"yes\"",
                "linden.toml: key 'demo': expected true or false, found string 'yes'",
            ),
            (
                "size_limit = -1",
                "linden.toml: key 'size_limit': must be at least 0, found -1",
            ),
            (
                "max_pdu_size = 0",
                "linden.toml: key 'max_pdu_size': must be at least 1",
            ),
            (
                "suffix = [1]",
                "linden.toml: key 'suffix': expected strings, found integer 1",
            ),
            (
                "suffix = []",
                "linden.toml: key 'suffix': at least one suffix is required",
            ),
            (
                "log_level = \"verbose\"",
                "linden.toml: key 'log_level': invalid log level 'verbose'",
            ),
            (
                "log_level = \"info,server=loud\"",
                "linden.toml: key 'log_level': invalid log level",
            ),
        ];
        for (text, want) in cases {
            let e = parse(text).expect_err(text);
            assert!(e.0.starts_with(want), "{text}: got {e}");
            assert!(!e.0.contains('\n'), "{text}: got {e}");
        }
    }

    #[test]
    fn syntax_error_is_one_line_with_line_number() {
        let e = parse("listen = \"a\"\ndata = \n").expect_err("syntax");
        assert!(e.0.starts_with("linden.toml:2: invalid TOML: "), "{e}");
        assert!(!e.0.contains('\n'), "{e}");
    }

    #[test]
    fn flags_override_file_and_file_overrides_defaults() {
        let file = parse("listen = \"127.0.0.1:1\"\ndata = \"/d\"\nsuffix = \"o=file\"\nlog_level = \"warn\"\nadmin_password = \"f\"")
            .expect("valid");
        let args = ServeArgs {
            listen: Some("127.0.0.1:2".parse().expect("addr")),
            suffixes: vec!["o=flag".into()],
            admin_password: Some("flag".into()),
            ..ServeArgs::default()
        };
        let s = merge(&args, file).expect("merge");
        assert_eq!(s.listen, Some("127.0.0.1:2".parse().expect("addr")));
        assert_eq!(s.data, Some(PathBuf::from("/d")));
        assert_eq!(s.suffixes, Some(vec!["o=flag".to_string()]));
        assert_eq!(s.admin_password.as_deref(), Some("flag"));
        assert_eq!(s.log_level, "warn");

        let s = merge(&ServeArgs::default(), Settings::default()).expect("merge");
        assert_eq!(s.listen, None);
        assert_eq!(s.log_level, DEFAULT_LOG_LEVEL);
        assert!(!s.demo);
    }

    #[test]
    fn empty_password_is_refused() {
        let args = ServeArgs {
            admin_password: Some(String::new()),
            ..ServeArgs::default()
        };
        assert!(merge(&args, Settings::default()).is_err());
    }
}
