//! Settings for `linden serve` (and `linden import`): the TOML file, merged with the command
//! line.
//!
//! `Settings` is the file's schema: each key is one field, declared once with the function
//! that reads and checks its value (`de::*`). Serde derives the list of keys from it (unknown
//! keys are refused), and the field is also where the flags are merged in. A key is read from
//! its `toml::Value` by the helpers below, so that every error is one line naming the file,
//! the key and the offending value, which is what a person editing the file needs.
//!
//! Precedence: flag, then environment (only `LINDEN_ADMIN_PASSWORD`, folded into the flag by
//! clap), then file, then default. Defaults are not applied here: a field left `None` takes the value from
//! `server::Config::default()`, so each default is written down in one place.
//!
//! A new key is: its `server::Config` field and default, one field here with its reader, the
//! line of `serve::server_config` that applies it, and its entry in docs/configuration.md (a
//! test checks that every key is documented). A flag, if it has one, is a field of
//! `cli::ServeArgs` and a line of `merge`.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tracing_subscriber::EnvFilter;

use crate::args::{ImportArgs, ServeArgs};

/// A setting that cannot be used. `linden` prints it as one line and exits with status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The log filter used when neither `--log-level` nor `log_level` is given.
pub const DEFAULT_LOG_LEVEL: &str = "info";

/// The configuration file's keys, and the settings after merging the flags over them; `None`
/// means "use the server's default". The fields are in the order the documentation lists them.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default, deserialize_with = "de::listen")]
    pub listen: Option<Vec<SocketAddr>>,
    #[serde(default, deserialize_with = "de::path")]
    pub data: Option<PathBuf>,
    #[serde(rename = "suffix", default, deserialize_with = "de::suffixes")]
    pub suffixes: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de::string")]
    pub admin_dn: Option<String>,
    /// Cleartext, only until it is hashed by `password::resolve`.
    #[serde(default, deserialize_with = "de::string")]
    pub admin_password: Option<String>,
    #[serde(default, deserialize_with = "de::boolean")]
    pub demo: bool,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_pdu_size: Option<usize>,
    /// Smaller would refuse ordinary bind requests.
    #[serde(default, deserialize_with = "de::int::<1024, _, _>")]
    pub max_pdu_size_anonymous: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_incoming_bytes: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_outstanding: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub size_limit: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub time_limit: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub size_limit_anonymous: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub time_limit_anonymous: Option<u64>,
    #[serde(default, deserialize_with = "de::access")]
    pub access: Option<Vec<server::acl::RuleSpec>>,
    #[serde(default, deserialize_with = "de::int::<8, _, _>")]
    pub max_ber_depth: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_filter_depth: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub max_values_per_attribute: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub max_attributes_per_request: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub max_requested_attributes: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub max_controls_per_request: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_paged_searches: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub max_sort_entries: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_sort_keys: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_vlv_contexts: Option<usize>,
    #[serde(default, deserialize_with = "de::server_id")]
    pub server_id: Option<u16>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_connections: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_connections_per_ip: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub listen_backlog: Option<u32>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub idle_timeout: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub idle_timeout_anonymous: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub pdu_timeout_anonymous: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<65536, _, _>")]
    pub max_buffered_bytes: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub write_timeout: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub max_persistent_searches: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub persistent_search_queue: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub max_subtree_delete: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub max_transactions: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub max_transaction_ops: Option<usize>,
    #[serde(default, deserialize_with = "de::log_target")]
    pub access_log: Option<server::logs::LogTarget>,
    #[serde(default, deserialize_with = "de::log_target")]
    pub audit_log: Option<server::logs::LogTarget>,
    #[serde(default, deserialize_with = "de::log_format")]
    pub access_log_format: Option<server::logs::LogFormat>,
    #[serde(default, deserialize_with = "de::ldaps_listen")]
    pub ldaps_listen: Option<Vec<SocketAddr>>,
    #[serde(default, deserialize_with = "de::path")]
    pub ldapi: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::mode")]
    pub ldapi_mode: Option<u32>,
    #[serde(default, deserialize_with = "de::path")]
    pub tls_cert: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::path")]
    pub tls_key: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::path")]
    pub tls_client_ca: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::boolean")]
    pub require_tls_for_bind: bool,
    #[serde(default, deserialize_with = "de::boolean")]
    pub require_tls_for_writes: bool,
    #[serde(default, deserialize_with = "de::password_hash")]
    pub password_hash: Option<pwhash::Scheme>,
    #[serde(default, deserialize_with = "de::int::<8, _, _>")]
    pub argon2_memory_kib: Option<u32>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub argon2_iterations: Option<u32>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub argon2_parallelism: Option<u32>,
    #[serde(default, deserialize_with = "de::int::<1000, _, _>")]
    pub pbkdf2_iterations: Option<u32>,
    #[serde(default, deserialize_with = "de::int::<1000, _, _>")]
    pub crypt_rounds: Option<u32>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub bind_failures_per_dn: Option<u32>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub bind_failures_per_ip: Option<u32>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub bind_lockout_seconds: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub bind_throttle_max_ms: Option<u64>,
    #[serde(default, deserialize_with = "de::networks")]
    pub bind_trusted_addresses: Option<Vec<server::lockout::Network>>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub credential_cache_entries: Option<usize>,
    #[serde(default, deserialize_with = "de::indexes")]
    pub indexes: Option<Vec<server::config::IndexSpec>>,
    #[serde(default, deserialize_with = "de::unique")]
    pub unique: Option<Vec<server::config::UniqueSpec>>,
    #[serde(default, deserialize_with = "de::boolean")]
    pub memberof: bool,
    #[serde(default, deserialize_with = "de::strings")]
    pub memberof_groups: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de::strings")]
    pub refint: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de::boolean")]
    pub ppolicy: bool,
    #[serde(default, deserialize_with = "de::string")]
    pub ppolicy_default: Option<String>,
    #[serde(default, deserialize_with = "de::boolean")]
    pub ppolicy_use_lockout: bool,
    /// The RFC 4533 replication provider (docs/replication.md).
    #[serde(default, deserialize_with = "de::boolean")]
    pub syncprov: bool,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub syncprov_sessionlog: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub syncprov_queue: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub syncprov_tombstones: Option<usize>,
    #[serde(default, deserialize_with = "de::int::<1, _, _>")]
    pub syncprov_tombstone_lifetime: Option<u64>,
    #[serde(default, deserialize_with = "de::authz_map")]
    pub authz_map: Option<Vec<dit::authz::AuthzRuleSpec>>,
    /// Names of schema bundles (`schema::bundles()`).
    #[serde(default, deserialize_with = "de::strings")]
    pub schemas: Option<Vec<String>>,
    /// Relative paths are resolved against the configuration file's directory.
    #[serde(default, deserialize_with = "de::paths")]
    pub schema_files: Option<Vec<PathBuf>>,
    #[serde(default, deserialize_with = "de::durability")]
    pub durability: Option<server::Durability>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub snapshot_interval: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub snapshot_log_bytes: Option<u64>,
    #[serde(default, deserialize_with = "de::percent")]
    pub snapshot_cpu_share: Option<u32>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub log_reserve_bytes: Option<u64>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub min_free_bytes: Option<u64>,
    #[serde(default, deserialize_with = "de::syncrepl")]
    pub syncrepl: Option<Vec<repl::consumer::ConsumerSpec>>,
    #[serde(default, deserialize_with = "de::strings")]
    pub updateref: Option<Vec<String>>,
    /// One of several providers taking writes (slapd's `multiprovider on`).
    #[serde(default, deserialize_with = "de::boolean")]
    pub multi_provider: bool,
    #[serde(default, deserialize_with = "de::strings")]
    pub monitor_readers: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de::metrics_listen")]
    pub metrics_listen: Option<SocketAddr>,
    #[serde(default, deserialize_with = "de::int::<0, _, _>")]
    pub ready_max_lag: Option<u64>,
    /// Empty when not given.
    #[serde(default, deserialize_with = "de::log_level")]
    pub log_level: String,
}

/// How each key's value is read: from its `toml::Value`, by the helpers at the end of this
/// file, with their messages.
mod de {
    use std::net::SocketAddr;
    use std::path::PathBuf;

    use serde::de::{Deserializer, Error as _};
    use serde::Deserialize;

    fn with<'de, D: Deserializer<'de>, T>(
        d: D,
        read: impl FnOnce(&toml::Value) -> Result<T, String>,
    ) -> Result<T, D::Error> {
        let v = toml::Value::deserialize(d)?;
        read(&v).map_err(D::Error::custom)
    }

    /// One address or an array of them.
    fn addresses(v: &toml::Value, example: &str) -> Result<Option<Vec<SocketAddr>>, String> {
        if !v.is_array() {
            // One address: a string, or the message about what else it is.
            super::string(v)?;
        }
        let all = super::strings(v)?;
        if all.is_empty() {
            return Err(format!("at least one address is required (e.g. {example})"));
        }
        all.iter()
            .map(|s| {
                s.parse().map_err(|_| {
                    format!("invalid socket address '{s}' (expected ADDR:PORT, e.g. {example})")
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub fn listen<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<SocketAddr>>, D::Error> {
        with(d, |v| addresses(v, "127.0.0.1:3389"))
    }

    pub fn ldaps_listen<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<SocketAddr>>, D::Error> {
        with(d, |v| addresses(v, "0.0.0.0:636"))
    }

    /// Permission bits written in octal, as a string: "0660".
    pub fn mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        with(d, |v| {
            let s = super::string(v)?;
            match u32::from_str_radix(s.trim_start_matches("0o"), 8) {
                Ok(m) if m <= 0o777 => Ok(Some(m)),
                _ => Err(format!(
                    "invalid permission bits '{s}' (expected octal, e.g. \"0660\")"
                )),
            }
        })
    }

    pub fn authz_map<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<dit::authz::AuthzRuleSpec>>, D::Error> {
        with(d, |v| {
            let rules = super::authz_rules(v)?;
            dit::authz::AuthzMap::compile(&rules)?;
            Ok(Some(rules))
        })
    }

    pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        with(d, |v| super::string(v).map(Some))
    }

    pub fn path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        with(d, |v| super::string(v).map(|s| Some(PathBuf::from(s))))
    }

    pub fn paths<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<PathBuf>>, D::Error> {
        with(d, |v| {
            super::strings(v).map(|v| Some(v.into_iter().map(PathBuf::from).collect()))
        })
    }

    pub fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
        with(d, |v| super::strings(v).map(Some))
    }

    pub fn networks<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<server::lockout::Network>>, D::Error> {
        with(d, |v| {
            super::strings(v)?
                .iter()
                .map(|s| server::lockout::parse_network(s))
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
        })
    }

    pub fn suffixes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
        with(d, |v| match super::strings(v)? {
            s if s.is_empty() => Err("at least one suffix is required".into()),
            s => Ok(Some(s)),
        })
    }

    pub fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        with(d, |v| {
            v.as_bool()
                .ok_or_else(|| format!("expected true or false, found {}", super::show(v)))
        })
    }

    /// An integer of at least `MIN`.
    pub fn int<'de, const MIN: i64, D: Deserializer<'de>, T: TryFrom<i64>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        with(d, |v| super::integer(v, MIN).map(Some))
    }

    pub fn server_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
        with(d, |v| match super::integer::<u16>(v, 0)? {
            n if n > 4095 => Err(format!("a server id: 0 to 4095, found {n}")),
            n => Ok(Some(n)),
        })
    }

    pub fn percent<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        with(d, |v| match super::integer(v, 1)? {
            p if p > 100 => Err(format!("a percentage of one core: 1 to 100, found {p}")),
            p => Ok(Some(p)),
        })
    }

    pub fn log_format<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<server::logs::LogFormat>, D::Error> {
        with(d, |v| {
            let s = super::string(v)?;
            server::logs::LogFormat::parse(&s)
                .map(Some)
                .ok_or_else(|| format!("unknown format '{s}' (expected text or json)"))
        })
    }

    /// One address, e.g. 127.0.0.1:9090.
    pub fn metrics_listen<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        with(d, |v| {
            let s = super::string(v)?;
            s.parse().map(Some).map_err(|_| {
                format!("invalid socket address '{s}' (expected ADDR:PORT, e.g. 127.0.0.1:9090)")
            })
        })
    }

    pub fn log_target<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<server::logs::LogTarget>, D::Error> {
        with(d, |v| {
            super::string(v).map(|s| Some(server::logs::LogTarget::parse(&s)))
        })
    }

    pub fn password_hash<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<pwhash::Scheme>, D::Error> {
        with(d, |v| {
            super::string(v)?
                .parse()
                .map(Some)
                .map_err(|e: pwhash::UnknownScheme| e.to_string())
        })
    }

    pub fn durability<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<server::Durability>, D::Error> {
        with(d, |v| super::parse_durability(&super::string(v)?).map(Some))
    }

    pub fn log_level<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        with(d, |v| {
            let s = super::string(v)?;
            super::check_log_level(&s)?;
            Ok(s)
        })
    }

    /// The `[[access]]` rules, checked as the server will check them. Their messages name the
    /// rule and field themselves (`access[1].dn: ...`).
    pub fn indexes<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<server::config::IndexSpec>>, D::Error> {
        with(d, |v| super::index_specs(v).map(Some))
    }

    pub fn syncrepl<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<repl::consumer::ConsumerSpec>>, D::Error> {
        with(d, |v| super::syncrepl_specs(v).map(Some))
    }

    pub fn unique<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<server::config::UniqueSpec>>, D::Error> {
        with(d, |v| super::unique_rules(v).map(Some))
    }

    pub fn access<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<server::acl::RuleSpec>>, D::Error> {
        with(d, |v| {
            let rules = super::access_rules(v)?;
            server::acl::check(&rules).map_err(|e| e.to_string())?;
            Ok(Some(rules))
        })
    }
}

/// Every key the file may hold, in the order of `Settings`' fields (and of the documentation):
/// the field names serde derived, read back by a deserializer that only asks for them.
pub fn keys() -> &'static [&'static str] {
    use serde::de::{Error as _, Visitor};

    struct Fields(&'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for &mut Fields {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("only the field names are wanted"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields;
            Err(Self::Error::custom("only the field names are wanted"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut f = Fields(&[]);
    let _ = Settings::deserialize(&mut f);
    f.0
}

/// Reads the file named by `--config`, if any, and merges it under the flags.
pub fn resolve(args: &ServeArgs) -> Result<Settings, ConfigError> {
    let file = match &args.config {
        Some(path) => read_file(path)?,
        None => Settings::default(),
    };
    merge(args, file)
}

/// Reads and parses a configuration file.
fn read_file(path: &Path) -> Result<Settings, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError(format!(
            "{}: cannot read configuration file: {e}",
            path.display()
        ))
    })?;
    parse_file(path, &text)
}

/// The schema configured by the `serve` configuration file `config` (built-in schema plus its
/// `schemas` bundles and `schema_files`), for the commands that read a data directory without
/// a server (`export`, `backup`, `verify`); the built-in schema without one.
pub fn configured_schema(config: Option<&Path>) -> Result<schema::Schema, ConfigError> {
    let (bundles, files) = match config {
        Some(path) => {
            let s = read_file(path)?;
            let mut bundles = s.schemas.unwrap_or_default();
            // The password policy brings its schema bundle.
            if s.ppolicy && !bundles.iter().any(|b| b == "ppolicy") {
                bundles.push("ppolicy".to_string());
            }
            (bundles, s.schema_files.unwrap_or_default())
        }
        None => (Vec::new(), Vec::new()),
    };
    server::configured_schema(&bundles, &files).map_err(|e| ConfigError(e.to_string()))
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

/// Applies the flags over the file's settings and checks what the flags alone cannot. Keys
/// without a flag keep the file's value.
pub fn merge(args: &ServeArgs, file: Settings) -> Result<Settings, ConfigError> {
    fn flag<T: Clone>(flag: &Option<T>, setting: &mut Option<T>) {
        if let Some(v) = flag {
            *setting = Some(v.clone());
        }
    }
    let mut s = file;
    s.log_level = match &args.log_level {
        Some(l) => {
            check_log_level(l).map_err(|e| ConfigError(format!("--log-level: {e}")))?;
            l.clone()
        }
        None if s.log_level.is_empty() => DEFAULT_LOG_LEVEL.to_string(),
        None => std::mem::take(&mut s.log_level),
    };
    if !args.listen.is_empty() {
        s.listen = Some(args.listen.clone());
    }
    flag(&args.ldapi, &mut s.ldapi);
    flag(&args.data, &mut s.data);
    if !args.suffixes.is_empty() {
        s.suffixes = Some(args.suffixes.clone());
    }
    flag(&args.admin_dn, &mut s.admin_dn);
    flag(&args.admin_password, &mut s.admin_password);
    s.demo |= args.demo;
    flag(&args.max_pdu_size, &mut s.max_pdu_size);
    flag(&args.max_outstanding, &mut s.max_outstanding);
    flag(&args.size_limit, &mut s.size_limit);
    flag(&args.time_limit, &mut s.time_limit);
    if !args.ldaps_listen.is_empty() {
        s.ldaps_listen = Some(args.ldaps_listen.clone());
    }
    if let Some(d) = &args.durability {
        s.durability =
            Some(parse_durability(d).map_err(|e| ConfigError(format!("--durability: {e}")))?);
    }
    flag(&args.snapshot_interval, &mut s.snapshot_interval);
    flag(&args.snapshot_log_bytes, &mut s.snapshot_log_bytes);
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

/// Parses the text of a configuration file; `path` is used in messages and to resolve the
/// relative paths of `schema_files`.
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
    // Key by key first, so that an error names the key it is about.
    for (key, value) in &table {
        if !keys().contains(&key.as_str()) {
            let at = key_line(text, key)
                .map(|l| format!(":{l}"))
                .unwrap_or_default();
            return Err(ConfigError(format!(
                "{name}{at}: unknown key '{key}' (expected one of: {})",
                keys().join(", ")
            )));
        }
        let one = toml::Table::from_iter([(key.clone(), value.clone())]);
        if let Err(e) = toml::Value::Table(one).try_into::<Settings>() {
            // Access rules name the rule and field themselves.
            let key = if key == "access" {
                String::new()
            } else {
                format!(" key '{key}':")
            };
            return Err(ConfigError(format!("{name}:{key} {}", e.message())));
        }
    }
    let mut s: Settings = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError(format!("{name}: {}", e.message())))?;
    let base = path.parent().unwrap_or(Path::new(""));
    if let Some(files) = &mut s.schema_files {
        for f in files.iter_mut() {
            *f = base.join(&*f);
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
/// `[[unique]]` tables: `attributes = [...]` and an optional `base`.
/// `indexes`: names (presence and equality each), or a table of names to index kinds
/// (`cn = ["eq", "sub"]`; one kind may be a plain string).
fn index_specs(value: &toml::Value) -> Result<Vec<server::config::IndexSpec>, String> {
    let toml::Value::Table(t) = value else {
        return match value {
            toml::Value::String(_) | toml::Value::Array(_) => Ok(strings(value)?
                .iter()
                .map(|n| server::config::IndexSpec::eq_pres(n))
                .collect()),
            _ => Err(format!(
                "expected a string, an array of strings or a table of attribute types, found {}",
                show(value)
            )),
        };
    };
    let mut out = Vec::with_capacity(t.len());
    for (attr, kinds) in t {
        let names = strings(kinds).map_err(|e| format!("'{attr}': {e}"))?;
        let mut k = store::IndexKinds::NONE;
        for n in &names {
            k |= store::IndexKinds::from_name(n).ok_or_else(|| {
                format!(
                    "'{attr}': unknown index '{n}' (expected one of {})",
                    store::IndexKinds::NAMES
                )
            })?;
        }
        if k.is_empty() {
            return Err(format!(
                "'{attr}': no index named (expected one or more of {})",
                store::IndexKinds::NAMES
            ));
        }
        out.push(server::config::IndexSpec {
            attr: attr.clone(),
            kinds: k,
        });
    }
    Ok(out)
}

fn unique_rules(value: &toml::Value) -> Result<Vec<server::config::UniqueSpec>, String> {
    let items = value
        .as_array()
        .ok_or_else(|| format!("expected [[unique]] tables, found {}", show(value)))?;
    let mut rules = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let table = item
            .as_table()
            .ok_or_else(|| format!("unique[{i}]: expected a table, found {}", show(item)))?;
        let mut r = server::config::UniqueSpec::default();
        for (k, v) in table {
            match k.as_str() {
                "attributes" => {
                    r.attributes = strings(v).map_err(|e| format!("unique[{i}].{k}: {e}"))?
                }
                "base" => r.base = Some(string(v).map_err(|e| format!("unique[{i}].{k}: {e}"))?),
                _ => {
                    return Err(format!(
                        "unique[{i}]: unknown field '{k}' (expected attributes, base)"
                    ))
                }
            }
        }
        if r.attributes.is_empty() {
            return Err(format!(
                "unique[{i}].attributes: at least one attribute type is required"
            ));
        }
        rules.push(r);
    }
    Ok(rules)
}

/// `[[syncrepl]]` tables, one per provider (as slapd's `syncrepl` directive): `provider` and
/// `rid` are required; messages name the table and field as `syncrepl[I].FIELD`.
fn syncrepl_specs(value: &toml::Value) -> Result<Vec<repl::consumer::ConsumerSpec>, String> {
    use repl::consumer::spec::{self as rs, BindMethod};
    let items = value
        .as_array()
        .ok_or_else(|| format!("expected [[syncrepl]] tables, found {}", show(value)))?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let table = item
            .as_table()
            .ok_or_else(|| format!("syncrepl[{i}]: expected a table, found {}", show(item)))?;
        let field = |k: &str| table.get(k);
        let text = |k: &str| -> Result<Option<String>, String> {
            field(k)
                .map(|v| string(v).map_err(|e| format!("syncrepl[{i}].{k}: {e}")))
                .transpose()
        };
        let at = |k: &str, e: String| format!("syncrepl[{i}].{k}: {e}");
        for k in table.keys() {
            if !SYNCREPL_FIELDS.contains(&k.as_str()) {
                return Err(format!(
                    "syncrepl[{i}]: unknown field '{k}' (expected one of {})",
                    SYNCREPL_FIELDS.join(", ")
                ));
            }
        }
        let provider = text("provider")?.ok_or_else(|| {
            format!("syncrepl[{i}]: provider is required (e.g. \"ldap://provider:389\")")
        })?;
        let provider = rs::ProviderUrl::parse(&provider).map_err(|e| at("provider", e))?;
        let rid: u16 = match field("rid") {
            Some(v) => integer(v, 1).map_err(|e| at("rid", e))?,
            None => return Err(format!("syncrepl[{i}]: rid is required (1 to 999)")),
        };
        let base = text("search_base")?
            .ok_or_else(|| format!("syncrepl[{i}]: search_base is required"))?;
        let mut spec = repl::consumer::ConsumerSpec::new(rid, provider, base);
        if let Some(s) = text("scope")? {
            spec.scope = rs::parse_scope(&s).map_err(|e| at("scope", e))?;
        }
        if let Some(f) = text("filter")? {
            spec.filter = f;
        }
        if let Some(v) = field("attrs") {
            spec.attrs = strings(v).map_err(|e| at("attrs", e))?;
        }
        let interval = match field("interval") {
            Some(v @ toml::Value::Integer(_)) => {
                let n: u64 = integer(v, 1).map_err(|e| at("interval", e))?;
                std::time::Duration::from_secs(n)
            }
            Some(v) => rs::parse_interval(&string(v).map_err(|e| at("interval", e))?)
                .map_err(|e| at("interval", e))?,
            None => rs::DEFAULT_INTERVAL,
        };
        if let Some(t) = text("type")? {
            spec.mode = rs::SyncMode::parse(&t, interval).map_err(|e| at("type", e))?;
        }
        if let Some(r) = text("retry")? {
            spec.retry = rs::RetrySchedule::parse(&r).map_err(|e| at("retry", e))?;
        }
        if let Some(v) = field("timeout") {
            let n: u64 = integer(v, 1).map_err(|e| at("timeout", e))?;
            spec.timeout = std::time::Duration::from_secs(n);
        }
        let (dn, password) = (text("bind_dn")?, text("bind_password")?);
        spec.bind = match text("bind_method")?
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("simple") if dn.is_some() => BindMethod::Simple {
                dn: dn.unwrap_or_default(),
                password: password
                    .ok_or_else(|| format!("syncrepl[{i}]: bind_dn needs bind_password"))?,
            },
            None | Some("none") | Some("anonymous") => BindMethod::Anonymous,
            Some("simple") => {
                return Err(format!("syncrepl[{i}]: bind_method simple needs bind_dn"))
            }
            Some("external") | Some("sasl_external") => BindMethod::SaslExternal,
            Some(m) => {
                return Err(at(
                    "bind_method",
                    format!("'{m}' is not one of none, simple, external"),
                ))
            }
        };
        if let Some(t) = text("starttls")? {
            spec.start_tls = rs::StartTls::parse(&t).map_err(|e| at("starttls", e))?;
        }
        spec.tls_ca = text("tls_ca")?.map(Into::into);
        spec.tls_cert = text("tls_cert")?.map(Into::into);
        spec.tls_key = text("tls_key")?.map(Into::into);
        spec.check().map_err(|e| format!("syncrepl[{i}]: {e}"))?;
        out.push(spec);
    }
    Ok(out)
}

/// The fields of a `[[syncrepl]]` table (docs/configuration.md and docs/replication.md).
pub const SYNCREPL_FIELDS: &[&str] = &[
    "provider",
    "rid",
    "search_base",
    "scope",
    "filter",
    "attrs",
    "type",
    "interval",
    "retry",
    "timeout",
    "bind_method",
    "bind_dn",
    "bind_password",
    "starttls",
    "tls_ca",
    "tls_cert",
    "tls_key",
];

fn authz_rules(value: &toml::Value) -> Result<Vec<dit::authz::AuthzRuleSpec>, String> {
    let items = value
        .as_array()
        .ok_or_else(|| format!("expected [[authz_map]] tables, found {}", show(value)))?;
    let mut rules = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let table = item
            .as_table()
            .ok_or_else(|| format!("authz_map[{i}]: expected a table, found {}", show(item)))?;
        let mut r = dit::authz::AuthzRuleSpec::default();
        for (k, v) in table {
            let s = string(v).map_err(|e| format!("authz_map[{i}].{k}: {e}"))?;
            match k.as_str() {
                "match" => r.pattern = s,
                "replace" => r.replace = s,
                _ => {
                    return Err(format!(
                        "authz_map[{i}]: unknown field '{k}' (expected match, replace)"
                    ))
                }
            }
        }
        if r.pattern.is_empty() {
            return Err(format!(
                "authz_map[{i}].match: a regular expression is required"
            ));
        }
        rules.push(r);
    }
    Ok(rules)
}

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
            "password_hash = \"pbkdf2-sha512\"\npbkdf2_iterations = 300000\nargon2_memory_kib = 65536\nbind_failures_per_dn = 3\nbind_failures_per_ip = 0\nbind_lockout_seconds = 30\ncredential_cache_entries = 0\n",
        )
        .expect("valid");
        assert_eq!(s.password_hash, Some(pwhash::Scheme::Pbkdf2Sha512));
        assert_eq!(s.pbkdf2_iterations, Some(300000));
        assert_eq!(s.argon2_memory_kib, Some(65536));
        assert_eq!(s.bind_failures_per_dn, Some(3));
        assert_eq!(s.bind_failures_per_ip, Some(0));
        assert_eq!(s.bind_lockout_seconds, Some(30));
        assert_eq!(s.credential_cache_entries, Some(0));
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
        let s = parse(
            "bind_throttle_max_ms = 500\nbind_trusted_addresses = [\"10.0.0.0/8\", \"::1\"]\n",
        )
        .expect("valid");
        assert_eq!(s.bind_throttle_max_ms, Some(500));
        assert_eq!(s.bind_trusted_addresses.map(|v| v.len()), Some(2));
        let e = parse("bind_trusted_addresses = [\"10.0.0.0/40\"]")
            .expect_err("bad network")
            .to_string();
        assert!(
            e.starts_with("linden.toml: key 'bind_trusted_addresses': invalid address or network '10.0.0.0/40'"),
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
    fn syncprov_keys() {
        let s = parse(
            "syncprov = true\nsyncprov_sessionlog = 0\nsyncprov_queue = 4\n\
             syncprov_tombstones = 10\nsyncprov_tombstone_lifetime = 3600\n",
        )
        .expect("valid");
        assert!(s.syncprov);
        assert_eq!(s.syncprov_sessionlog, Some(0));
        assert_eq!(s.syncprov_queue, Some(4));
        assert_eq!(s.syncprov_tombstones, Some(10));
        assert_eq!(s.syncprov_tombstone_lifetime, Some(3600));
        for key in ["syncprov_tombstones", "syncprov_tombstone_lifetime"] {
            let e = parse(&format!("{key} = 0")).expect_err("zero").to_string();
            assert!(
                e.contains(&format!("key '{key}': must be at least 1")),
                "{e}"
            );
        }
        let e = parse("syncprov_queue = 0").expect_err("zero").to_string();
        assert!(
            e.contains("key 'syncprov_queue': must be at least 1"),
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
        assert_eq!(s.listen, Some(vec!["0.0.0.0:389".parse().expect("addr")]));
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
        assert_eq!(
            s.indexes,
            Some(vec![
                server::config::IndexSpec::eq_pres("uid"),
                server::config::IndexSpec::eq_pres("mail")
            ])
        );
        assert_eq!(s.log_level, "debug");
    }

    #[test]
    fn indexes_may_name_kinds_per_type() {
        let s = parse("[indexes]\ncn = [\"eq\", \"sub\"]\nmail = \"subinitial\"\nuidNumber = [\"EQ\", \"ord\", \"pres\"]")
            .expect("valid");
        let k = store::IndexKinds::from_name;
        let spec = |attr: &str, kinds: &[&str]| server::config::IndexSpec {
            attr: attr.to_string(),
            kinds: kinds
                .iter()
                .map(|n| k(n).expect("kind"))
                .fold(store::IndexKinds::NONE, |a, b| a | b),
        };
        assert_eq!(
            s.indexes,
            Some(vec![
                spec("cn", &["eq", "sub"]),
                spec("mail", &["subinitial"]),
                spec("uidNumber", &["eq", "ord", "pres"]),
            ])
        );
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
            listen: vec!["127.0.0.1:2".parse().expect("addr")],
            suffixes: vec!["o=flag".into()],
            admin_password: Some("flag".into()),
            ..ServeArgs::default()
        };
        let s = merge(&args, file).expect("merge");
        assert_eq!(s.listen, Some(vec!["127.0.0.1:2".parse().expect("addr")]));
        assert_eq!(s.data, Some(PathBuf::from("/d")));
        assert_eq!(s.suffixes, Some(vec!["o=flag".to_string()]));
        assert_eq!(s.admin_password.as_deref(), Some("flag"));
        assert_eq!(s.log_level, "warn");

        let s = merge(&ServeArgs::default(), Settings::default()).expect("merge");
        assert_eq!(s.listen, None);
        assert_eq!(s.log_level, DEFAULT_LOG_LEVEL);
        assert!(!s.demo);
    }

    /// The keys come from `Settings`' fields (renamed where the file says otherwise), and each
    /// one is documented.
    #[test]
    fn every_key_is_a_field_and_documented() {
        let keys = keys();
        assert_eq!(&keys[..3], &["listen", "data", "suffix"]);
        assert_eq!(keys.last(), Some(&"log_level"));
        assert_eq!(keys.len(), 91, "{keys:?}");
        let doc = include_str!("../../../docs/configuration.md");
        for k in keys {
            assert!(
                doc.contains(&format!("`{k}`")),
                "docs/configuration.md lacks `{k}`"
            );
        }
    }

    #[test]
    fn every_kind_of_value_names_its_key() {
        for (text, want) in [
            ("tls_cert = 1", "linden.toml: key 'tls_cert': expected a string, found integer 1"),
            ("indexes = 1", "linden.toml: key 'indexes': expected a string, an array of strings or a table of attribute types, found integer 1"),
            ("indexes = { cn = [\"eq\", \"substr\"] }", "linden.toml: key 'indexes': 'cn': unknown index 'substr' (expected one of pres, eq, sub, subinitial, subany, subfinal, ord)"),
            ("indexes = { cn = [] }", "linden.toml: key 'indexes': 'cn': no index named"),
            ("max_buffered_bytes = 1024", "linden.toml: key 'max_buffered_bytes': must be at least 65536, found 1024"),
            ("write_timeout = 1.5", "linden.toml: key 'write_timeout': expected an integer, found float 1.5"),
            (
                "snapshot_cpu_share = 99999999999",
                "linden.toml: key 'snapshot_cpu_share': 99999999999 is too large",
            ),
            ("require_tls_for_bind = 1", "linden.toml: key 'require_tls_for_bind': expected true or false"),
            ("durability = \"fast\"", "linden.toml: key 'durability': invalid value 'fast'"),
            ("ldaps_listen = \"x\"", "linden.toml: key 'ldaps_listen': invalid socket address 'x' (expected ADDR:PORT, e.g. 0.0.0.0:636)"),
            ("listen.port = 1", "linden.toml: key 'listen': expected a string, found a table"),
            ("access_log = []", "linden.toml: key 'access_log': expected a string, found an array"),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.0.starts_with(want), "{text}: got {e}");
            assert!(!e.0.contains('\n'), "{text}: got {e}");
        }
    }

    #[test]
    fn syncrepl_tables() {
        let s = parse(
            "updateref = \"ldap://p:389\"\n[[syncrepl]]\nprovider = \"ldap://p:389\"\nrid = 7\nsearch_base = \"dc=example,dc=com\"\ntype = \"refreshOnly\"\ninterval = \"00:00:01:00\"\nretry = \"5 5 300 +\"\nbind_dn = \"cn=r,dc=example,dc=com\"\nbind_password = \"x\"",
        )
        .expect("valid");
        let specs = s.syncrepl.expect("syncrepl");
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].rid, 7);
        assert_eq!(
            specs[0].mode,
            repl::consumer::spec::SyncMode::RefreshOnly {
                interval: std::time::Duration::from_secs(60)
            }
        );
        assert_eq!(s.updateref, Some(vec!["ldap://p:389".to_string()]));
        for (text, want) in [
            ("[[syncrepl]]\nrid = 1\nsearch_base = \"o=x\"", "syncrepl[0]: provider is required"),
            ("[[syncrepl]]\nprovider = \"x://p\"\nrid = 1\nsearch_base = \"o=x\"", "syncrepl[0].provider: 'x://p' is not"),
            ("[[syncrepl]]\nprovider = \"ldap://p\"\nrid = 1\nsearch_base = \"o=x\"\nretry = \"5\"", "syncrepl[0].retry: invalid retry schedule"),
            ("[[syncrepl]]\nprovider = \"ldaps://p\"\nrid = 1\nsearch_base = \"o=x\"", "syncrepl[0]: tls_ca"),
            ("[[syncrepl]]\nprovider = \"ldap://p\"\nrid = 1\nsearch_base = \"o=x\"\nbogus = 1", "syncrepl[0]: unknown field 'bogus'"),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.0.contains(want), "{text}: got {e}");
        }
        let doc = include_str!("../../../docs/replication.md");
        for f in SYNCREPL_FIELDS {
            assert!(
                doc.contains(&format!("`{f}`")),
                "docs/replication.md lacks `{f}`"
            );
        }
    }

    #[test]
    fn space_keys_are_byte_counts() {
        let s = parse("log_reserve_bytes = 1048576\nmin_free_bytes = 0").expect("valid");
        assert_eq!(s.log_reserve_bytes, Some(1 << 20));
        assert_eq!(s.min_free_bytes, Some(0));
        let e = parse("min_free_bytes = -1").expect_err("negative").0;
        assert!(e.contains("key 'min_free_bytes'"), "{e}");
        let e = parse("log_reserve_bytes = \"64M\"")
            .expect_err("a string")
            .0;
        assert!(e.contains("key 'log_reserve_bytes'"), "{e}");
    }

    #[test]
    fn keys_without_a_flag_keep_the_file_value() {
        let file =
            parse("max_connections = 7\nrequire_tls_for_writes = true\naccess_log = \"stdout\"")
                .expect("valid");
        let s = merge(&ServeArgs::default(), file.clone()).expect("merge");
        assert_eq!(s.max_connections, Some(7));
        assert!(s.require_tls_for_writes);
        assert_eq!(s.access_log, file.access_log);
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
