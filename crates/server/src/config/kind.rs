//! How each configuration key's value is read and shown: one `Kind` per shape of value
//! (an integer with a floor, addresses, a path, the `[[access]]` tables …). A key names its
//! kind in the declaration (`super::keys`), and the same kind reads it from the TOML file, from
//! a flag and from the environment, and shows its default in `--help`, the reference table and
//! the man page.
//!
//! Messages are one line and name the value; the caller prefixes the file and key.

use std::fmt::Display;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a value came from, for what depends on it: relative `schema_files` are resolved
/// against the configuration file's directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ctx<'a> {
    /// The directory of the file being read; `None` for flags and the environment (paths
    /// are then relative to the working directory).
    pub base: Option<&'a Path>,
}

/// One shape of value.
pub trait Kind<T> {
    fn parse(&self, v: &toml::Value, ctx: &Ctx<'_>) -> Result<T, String>;
    /// The value as a person would write it (defaults in `--help` and the docs).
    fn show(&self, v: &T) -> String;
    /// A flag may be given several times (each adds one value).
    fn repeats(&self) -> bool {
        false
    }
    /// A flag without a value (`--demo`).
    fn switch(&self) -> bool {
        false
    }
    /// The TOML value a flag's or an environment variable's text stands for: the text as a
    /// string, or an array or table written in TOML (`[ "a", "b" ]`, `{ cn = ["eq"] }`).
    fn parse_text(&self, s: &str) -> toml::Value {
        inline_toml(s).unwrap_or_else(|| toml::Value::String(s.to_string()))
    }
}

/// `s` read as an inline TOML array or table, if it is one.
fn inline_toml(s: &str) -> Option<toml::Value> {
    let t = s.trim_start();
    if !(t.starts_with('[') || t.starts_with('{')) {
        return None;
    }
    let table: toml::Table = format!("v = {s}").parse().ok()?;
    table.get("v").cloned()
}

pub fn show_value(v: &toml::Value) -> String {
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

pub fn string(v: &toml::Value) -> Result<String, String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("expected a string, found {}", show_value(v)))
}

/// One string or an array of strings.
pub fn strings(v: &toml::Value) -> Result<Vec<String>, String> {
    match v {
        toml::Value::String(s) => Ok(vec![s.clone()]),
        toml::Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("expected strings, found {}", show_value(i)))
            })
            .collect(),
        _ => Err(format!(
            "expected a string or an array of strings, found {}",
            show_value(v)
        )),
    }
}

pub fn integer<T: TryFrom<i64>>(v: &toml::Value, min: i64) -> Result<T, String> {
    let i = v
        .as_integer()
        .ok_or_else(|| format!("expected an integer, found {}", show_value(v)))?;
    if i < min {
        return Err(format!("must be at least {min}, found {i}"));
    }
    T::try_from(i).map_err(|_| format!("{i} is too large"))
}

/// A flag's text as an integer, or as the string it is (which the kind then refuses by name).
fn integer_text(s: &str) -> toml::Value {
    s.trim()
        .parse::<i64>()
        .map(toml::Value::Integer)
        .unwrap_or_else(|_| toml::Value::String(s.to_string()))
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// An integer of at least `MIN`.
pub struct Int<const MIN: i64>;

impl<const MIN: i64, T: TryFrom<i64> + Display> Kind<T> for Int<MIN> {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<T, String> {
        integer(v, MIN)
    }
    fn show(&self, v: &T) -> String {
        v.to_string()
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        integer_text(s)
    }
}

/// An integer from `MIN` to `MAX`; `what` says what it is in the message.
pub struct Range<const MIN: i64, const MAX: i64>(pub &'static str);

impl<const MIN: i64, const MAX: i64, T: TryFrom<i64> + Display> Kind<T> for Range<MIN, MAX> {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<T, String> {
        let i: i64 = integer(v, i64::MIN)?;
        if !(MIN..=MAX).contains(&i) {
            return Err(format!("{}: {MIN} to {MAX}, found {i}", self.0));
        }
        T::try_from(i).map_err(|_| format!("{i} is too large"))
    }
    fn show(&self, v: &T) -> String {
        v.to_string()
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        integer_text(s)
    }
}

/// Seconds, kept as a `Duration`, of at least `MIN`.
pub struct Seconds<const MIN: i64>;

impl<const MIN: i64> Kind<Duration> for Seconds<MIN> {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<Duration, String> {
        integer(v, MIN).map(Duration::from_secs)
    }
    fn show(&self, v: &Duration) -> String {
        v.as_secs().to_string()
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        integer_text(s)
    }
}

/// Milliseconds, kept as a `Duration`.
pub struct Millis;

impl Kind<Duration> for Millis {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<Duration, String> {
        integer(v, 0).map(Duration::from_millis)
    }
    fn show(&self, v: &Duration) -> String {
        v.as_millis().to_string()
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        integer_text(s)
    }
}

pub struct Bool;

impl Kind<bool> for Bool {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<bool, String> {
        v.as_bool()
            .ok_or_else(|| format!("expected true or false, found {}", show_value(v)))
    }
    fn show(&self, v: &bool) -> String {
        v.to_string()
    }
    fn switch(&self) -> bool {
        true
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        match s.trim() {
            "true" | "1" | "yes" | "on" => toml::Value::Boolean(true),
            "false" | "0" | "no" | "off" => toml::Value::Boolean(false),
            _ => toml::Value::String(s.to_string()),
        }
    }
}

pub struct Str;

impl Kind<String> for Str {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<String, String> {
        string(v)
    }
    fn show(&self, v: &String) -> String {
        if v.is_empty() {
            "none".into()
        } else {
            v.clone()
        }
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        toml::Value::String(s.to_string())
    }
}

/// A string that is never shown (the administrator password).
pub struct Secret;

/// A value kept out of `Debug` output and logs.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Hidden(pub String);

impl std::fmt::Debug for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(hidden)")
    }
}

impl Kind<Hidden> for Secret {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<Hidden, String> {
        match string(v)? {
            s if s.is_empty() => Err("must not be empty".into()),
            s => Ok(Hidden(s)),
        }
    }
    fn show(&self, _: &Hidden) -> String {
        "(hidden)".into()
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        toml::Value::String(s.to_string())
    }
}

/// One string or an array of strings.
pub struct Strings;

impl Kind<Vec<String>> for Strings {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<Vec<String>, String> {
        strings(v)
    }
    fn show(&self, v: &Vec<String>) -> String {
        list(v)
    }
    fn repeats(&self) -> bool {
        true
    }
}

/// At least one string (`suffix`).
pub struct NonEmpty(pub &'static str);

impl Kind<Vec<String>> for NonEmpty {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<Vec<String>, String> {
        match strings(v)? {
            s if s.is_empty() => Err(format!("at least one {} is required", self.0)),
            s => Ok(s),
        }
    }
    fn show(&self, v: &Vec<String>) -> String {
        list(v)
    }
    fn repeats(&self) -> bool {
        true
    }
}

pub struct PathKind;

impl Kind<PathBuf> for PathKind {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<PathBuf, String> {
        string(v).map(PathBuf::from)
    }
    fn show(&self, v: &PathBuf) -> String {
        v.display().to_string()
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        toml::Value::String(s.to_string())
    }
}

/// Paths; relative ones in a file are relative to the file's directory.
pub struct FilePaths;

impl Kind<Vec<PathBuf>> for FilePaths {
    fn parse(&self, v: &toml::Value, ctx: &Ctx<'_>) -> Result<Vec<PathBuf>, String> {
        let base = ctx.base.unwrap_or(Path::new(""));
        Ok(strings(v)?.into_iter().map(|s| base.join(s)).collect())
    }
    fn show(&self, v: &Vec<PathBuf>) -> String {
        let shown: Vec<String> = v.iter().map(|p| p.display().to_string()).collect();
        list(&shown)
    }
    fn repeats(&self) -> bool {
        true
    }
}

/// `None` unless given; `K` reads the value.
pub struct Opt<K>(pub K);

impl<T, K: Kind<T>> Kind<Option<T>> for Opt<K> {
    fn parse(&self, v: &toml::Value, ctx: &Ctx<'_>) -> Result<Option<T>, String> {
        self.0.parse(v, ctx).map(Some)
    }
    fn show(&self, v: &Option<T>) -> String {
        match v {
            Some(v) => self.0.show(v),
            None => "none".into(),
        }
    }
    fn repeats(&self) -> bool {
        self.0.repeats()
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        self.0.parse_text(s)
    }
}

/// One `ADDR:PORT` or an array of them; the example is shown in messages.
pub struct Addresses(pub &'static str);

impl Kind<Vec<SocketAddr>> for Addresses {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<Vec<SocketAddr>, String> {
        if !v.is_array() {
            // One address: a string, or the message about what else it is.
            string(v)?;
        }
        let all = strings(v)?;
        all.iter()
            .map(|s| parse_address(s, self.0))
            .collect::<Result<Vec<_>, _>>()
    }
    fn show(&self, v: &Vec<SocketAddr>) -> String {
        let shown: Vec<String> = v.iter().map(ToString::to_string).collect();
        list(&shown)
    }
    fn repeats(&self) -> bool {
        true
    }
}

/// At least one address (`listen`).
pub struct SomeAddresses(pub &'static str);

impl Kind<Vec<SocketAddr>> for SomeAddresses {
    fn parse(&self, v: &toml::Value, ctx: &Ctx<'_>) -> Result<Vec<SocketAddr>, String> {
        match Addresses(self.0).parse(v, ctx)? {
            a if a.is_empty() => Err(format!(
                "at least one address is required (e.g. {})",
                self.0
            )),
            a => Ok(a),
        }
    }
    fn show(&self, v: &Vec<SocketAddr>) -> String {
        Addresses(self.0).show(v)
    }
    fn repeats(&self) -> bool {
        true
    }
}

/// One `ADDR:PORT`.
pub struct Address(pub &'static str);

impl Kind<SocketAddr> for Address {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<SocketAddr, String> {
        parse_address(&string(v)?, self.0)
    }
    fn show(&self, v: &SocketAddr) -> String {
        v.to_string()
    }
}

fn parse_address(s: &str, example: &str) -> Result<SocketAddr, String> {
    s.parse()
        .map_err(|_| format!("invalid socket address '{s}' (expected ADDR:PORT, e.g. {example})"))
}

/// Permission bits written in octal, as a string: "0660".
pub struct Mode;

impl Kind<u32> for Mode {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<u32, String> {
        let s = string(v)?;
        match u32::from_str_radix(s.trim_start_matches("0o"), 8) {
            Ok(m) if m <= 0o777 => Ok(m),
            _ => Err(format!(
                "invalid permission bits '{s}' (expected octal, e.g. \"0660\")"
            )),
        }
    }
    fn show(&self, v: &u32) -> String {
        format!("{v:04o}")
    }
}

/// A percentage of one core, 1 to 100.
pub struct Percent;

impl Kind<u32> for Percent {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<u32, String> {
        match integer(v, 1)? {
            p if p > 100 => Err(format!("a percentage of one core: 1 to 100, found {p}")),
            p => Ok(p),
        }
    }
    fn show(&self, v: &u32) -> String {
        v.to_string()
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        integer_text(s)
    }
}

/// Addresses or networks in CIDR form.
pub struct Networks;

impl Kind<Vec<ipnet::IpNet>> for Networks {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<Vec<ipnet::IpNet>, String> {
        strings(v)?
            .iter()
            .map(|s| crate::lockout::parse_network(s))
            .collect()
    }
    fn show(&self, v: &Vec<ipnet::IpNet>) -> String {
        let shown: Vec<String> = v.iter().map(ToString::to_string).collect();
        list(&shown)
    }
    fn repeats(&self) -> bool {
        true
    }
}

pub struct LogTargetKind;

impl Kind<crate::logs::LogTarget> for LogTargetKind {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<crate::logs::LogTarget, String> {
        string(v).map(|s| crate::logs::LogTarget::parse(&s))
    }
    fn show(&self, v: &crate::logs::LogTarget) -> String {
        match v {
            crate::logs::LogTarget::Off => "off".into(),
            crate::logs::LogTarget::Stdout => "stdout".into(),
            crate::logs::LogTarget::File(p) => p.display().to_string(),
        }
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        toml::Value::String(s.to_string())
    }
}

pub struct LogFormatKind;

impl Kind<crate::logs::LogFormat> for LogFormatKind {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<crate::logs::LogFormat, String> {
        let s = string(v)?;
        crate::logs::LogFormat::parse(&s)
            .ok_or_else(|| format!("unknown format '{s}' (expected text or json)"))
    }
    fn show(&self, v: &crate::logs::LogFormat) -> String {
        match v {
            crate::logs::LogFormat::Text => "text".into(),
            crate::logs::LogFormat::Json => "json".into(),
        }
    }
}

/// A tracing filter: a level, or `target=level` directives. A bare word must be a level:
/// a filter would read `verbose` as "everything from the target named verbose" and silently
/// log nothing else.
pub struct LogLevel;

pub const LOG_LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

impl Kind<String> for LogLevel {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<String, String> {
        let s = string(v)?;
        check_log_level(&s)?;
        Ok(s)
    }
    fn show(&self, v: &String) -> String {
        v.clone()
    }
    fn parse_text(&self, s: &str) -> toml::Value {
        toml::Value::String(s.to_string())
    }
}

/// Checks the shape of a log filter (the binary builds the filter itself).
pub fn check_log_level(s: &str) -> Result<(), String> {
    let bad = |why: String| {
        format!("invalid log level '{s}' ({why}; expected error, warn, info, debug, trace or a filter like 'info,server=debug')")
    };
    if s.trim().is_empty() {
        return Err(bad("empty".into()));
    }
    for d in s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        match d.split_once('=') {
            None if d.contains('[') => {}
            None if LOG_LEVELS.iter().any(|l| l.eq_ignore_ascii_case(d)) => {}
            None => return Err(bad(format!("'{d}' is not a level"))),
            Some((target, level)) => {
                if target.is_empty() {
                    return Err(bad(format!("'{d}' names no target")));
                }
                if !LOG_LEVELS
                    .iter()
                    .any(|l| l.eq_ignore_ascii_case(level.trim()))
                {
                    return Err(bad(format!("'{}' is not a level", level.trim())));
                }
            }
        }
    }
    Ok(())
}

pub struct PasswordScheme;

impl Kind<pwhash::Scheme> for PasswordScheme {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<pwhash::Scheme, String> {
        string(v)?
            .parse()
            .map_err(|e: pwhash::UnknownScheme| e.to_string())
    }
    fn show(&self, v: &pwhash::Scheme) -> String {
        v.name().to_string()
    }
}

pub struct DurabilityKind;

impl Kind<super::Durability> for DurabilityKind {
    fn parse(&self, v: &toml::Value, _: &Ctx<'_>) -> Result<super::Durability, String> {
        parse_durability(&string(v)?)
    }
    fn show(&self, v: &super::Durability) -> String {
        match v {
            super::Durability::Sync => "sync".into(),
            super::Durability::NoSync => "nosync".into(),
        }
    }
}

/// `sync` (every batch fsynced before it is acknowledged) or `nosync` (benchmarks only).
pub fn parse_durability(s: &str) -> Result<super::Durability, String> {
    match s {
        "sync" => Ok(super::Durability::Sync),
        "nosync" => Ok(super::Durability::NoSync),
        other => Err(format!(
            "invalid value '{other}' (expected \"sync\" or \"nosync\")"
        )),
    }
}

/// `indexes`: names (presence and equality each), or a table of names to index kinds
/// (`cn = ["eq", "sub"]`; one kind may be a plain string).
pub struct Indexes;

impl Kind<Vec<super::IndexSpec>> for Indexes {
    fn parse(&self, value: &toml::Value, _: &Ctx<'_>) -> Result<Vec<super::IndexSpec>, String> {
        let toml::Value::Table(t) = value else {
            return match value {
                toml::Value::String(_) | toml::Value::Array(_) => Ok(strings(value)?
                    .iter()
                    .map(|n| super::IndexSpec::eq_pres(n))
                    .collect()),
                _ => Err(format!(
                    "expected a string, an array of strings or a table of attribute types, found {}",
                    show_value(value)
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
            out.push(super::IndexSpec {
                attr: attr.clone(),
                kinds: k,
            });
        }
        Ok(out)
    }
    fn show(&self, v: &Vec<super::IndexSpec>) -> String {
        let shown: Vec<String> = v
            .iter()
            .map(|s| {
                if s.kinds == store::IndexKinds::DEFAULT {
                    s.attr.clone()
                } else {
                    format!("{} ({})", s.attr, s.kinds.names().join(", "))
                }
            })
            .collect();
        list(&shown)
    }
    fn repeats(&self) -> bool {
        true
    }
}

/// `[[unique]]` tables: `attributes = [...]` and an optional `base`.
pub struct Unique;

impl Kind<Vec<super::UniqueSpec>> for Unique {
    fn parse(&self, value: &toml::Value, _: &Ctx<'_>) -> Result<Vec<super::UniqueSpec>, String> {
        let items = value
            .as_array()
            .ok_or_else(|| format!("expected [[unique]] tables, found {}", show_value(value)))?;
        let mut rules = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let table = item.as_table().ok_or_else(|| {
                format!("unique[{i}]: expected a table, found {}", show_value(item))
            })?;
            let mut r = super::UniqueSpec::default();
            for (k, v) in table {
                match k.as_str() {
                    "attributes" => {
                        r.attributes = strings(v).map_err(|e| format!("unique[{i}].{k}: {e}"))?
                    }
                    "base" => {
                        r.base = Some(string(v).map_err(|e| format!("unique[{i}].{k}: {e}"))?)
                    }
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
    fn show(&self, v: &Vec<super::UniqueSpec>) -> String {
        match v.len() {
            0 => "none".into(),
            n => format!("{n} rules"),
        }
    }
}

/// `[[dynlist]]` tables: `object_class`, `url_attribute`, and optional `member_attribute`
/// and `member_of_attribute` (slapd's `dynlist-attrset`).
pub struct Dynlist;

impl Kind<Vec<super::DynlistSpec>> for Dynlist {
    fn parse(&self, value: &toml::Value, _: &Ctx<'_>) -> Result<Vec<super::DynlistSpec>, String> {
        let items = value
            .as_array()
            .ok_or_else(|| format!("expected [[dynlist]] tables, found {}", show_value(value)))?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let table = item.as_table().ok_or_else(|| {
                format!("dynlist[{i}]: expected a table, found {}", show_value(item))
            })?;
            let mut d = super::DynlistSpec::default();
            for (k, v) in table {
                let s = string(v).map_err(|e| format!("dynlist[{i}].{k}: {e}"))?;
                match k.as_str() {
                    "object_class" => d.object_class = s,
                    "url_attribute" => d.url_attribute = s,
                    "member_attribute" => d.member_attribute = Some(s),
                    "member_of_attribute" => d.member_of_attribute = Some(s),
                    _ => {
                        return Err(format!(
                            "dynlist[{i}]: unknown field '{k}' (expected object_class, \
                             url_attribute, member_attribute, member_of_attribute)"
                        ))
                    }
                }
            }
            for (field, v) in [
                ("object_class", &d.object_class),
                ("url_attribute", &d.url_attribute),
            ] {
                if v.is_empty() {
                    return Err(format!("dynlist[{i}].{field}: required"));
                }
            }
            if d.member_of_attribute.is_some() && d.member_attribute.is_none() {
                return Err(format!(
                    "dynlist[{i}].member_of_attribute: needs member_attribute (as slapd's member+memberOf)"
                ));
            }
            out.push(d);
        }
        Ok(out)
    }
    fn show(&self, v: &Vec<super::DynlistSpec>) -> String {
        match v.len() {
            0 => "none".into(),
            n => format!("{n} rules"),
        }
    }
}

/// `[[authz_map]]` tables: `match` and `replace`.
pub struct AuthzMap;

impl Kind<Vec<dit::authz::AuthzRuleSpec>> for AuthzMap {
    fn parse(
        &self,
        value: &toml::Value,
        _: &Ctx<'_>,
    ) -> Result<Vec<dit::authz::AuthzRuleSpec>, String> {
        let items = value
            .as_array()
            .ok_or_else(|| format!("expected [[authz_map]] tables, found {}", show_value(value)))?;
        let mut rules = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let table = item.as_table().ok_or_else(|| {
                format!(
                    "authz_map[{i}]: expected a table, found {}",
                    show_value(item)
                )
            })?;
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
        dit::authz::AuthzMap::compile(&rules)?;
        Ok(rules)
    }
    fn show(&self, v: &Vec<dit::authz::AuthzRuleSpec>) -> String {
        match v.len() {
            0 => "none".into(),
            n => format!("{n} rules"),
        }
    }
}

/// The `[[access]]` tables: `dn`, `scope`, `filter`, `attrs` and `by = [{ who, rights }]`,
/// checked as the server will check them. Messages name the rule and field as
/// `access[I].FIELD`, from 0 like the rule list.
pub struct Access;

impl Kind<Option<Vec<dit::acl::RuleSpec>>> for Access {
    fn parse(
        &self,
        value: &toml::Value,
        _: &Ctx<'_>,
    ) -> Result<Option<Vec<dit::acl::RuleSpec>>, String> {
        let rules = access_rules(value)?;
        dit::acl::check(&rules).map_err(|e| e.to_string())?;
        Ok(Some(rules))
    }
    fn show(&self, v: &Option<Vec<dit::acl::RuleSpec>>) -> String {
        match v {
            None => "the default policy".into(),
            Some(r) => format!("{} rules", r.len()),
        }
    }
}

fn access_rules(value: &toml::Value) -> Result<Vec<dit::acl::RuleSpec>, String> {
    let items = value
        .as_array()
        .ok_or_else(|| format!("expected [[access]] tables, found {}", show_value(value)))?;
    let mut rules = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = |field: &str, what: String| format!("access[{i}].{field}: {what}");
        let table = item
            .as_table()
            .ok_or_else(|| at("", format!("expected a table, found {}", show_value(item))))?;
        let mut r = dit::acl::RuleSpec::default();
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
                                show_value(v)
                            ),
                        )
                    })?;
                    for (j, c) in clauses.iter().enumerate() {
                        r.by.push(clause(c, &|f: &str, e: String| {
                            at(&format!("by[{j}]{f}"), e)
                        })?);
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

/// One `{ who, rights }` clause; `at(".who", message)` places a message.
fn clause(
    c: &toml::Value,
    at: &dyn Fn(&str, String) -> String,
) -> Result<dit::acl::ClauseSpec, String> {
    let t = c.as_table().ok_or_else(|| {
        at(
            "",
            format!(
                "expected {{ who = ..., rights = [...] }}, found {}",
                show_value(c)
            ),
        )
    })?;
    let mut who = None;
    let mut rights = None;
    for (k, v) in t {
        match k.as_str() {
            "who" => who = Some(string(v).map_err(|e| at(".who", e))?),
            "rights" => rights = Some(strings(v).map_err(|e| at(".rights", e))?),
            other => {
                return Err(at(
                    &format!(".{other}"),
                    "unknown key (expected who or rights)".into(),
                ))
            }
        }
    }
    Ok(dit::acl::ClauseSpec {
        who: who.ok_or_else(|| at(".who", "missing".into()))?,
        rights: rights.ok_or_else(|| at(".rights", "missing".into()))?,
    })
}

/// `[[syncrepl]]` tables, one per provider (as slapd's `syncrepl` directive): `provider` and
/// `rid` are required; messages name the table and field as `syncrepl[I].FIELD`.
pub struct Syncrepl;

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

impl Kind<Vec<repl::consumer::ConsumerSpec>> for Syncrepl {
    fn parse(
        &self,
        value: &toml::Value,
        _: &Ctx<'_>,
    ) -> Result<Vec<repl::consumer::ConsumerSpec>, String> {
        let items = value
            .as_array()
            .ok_or_else(|| format!("expected [[syncrepl]] tables, found {}", show_value(value)))?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| syncrepl_spec(i, item))
            .collect()
    }
    fn show(&self, v: &Vec<repl::consumer::ConsumerSpec>) -> String {
        match v.len() {
            0 => "none".into(),
            n => format!("{n} consumers"),
        }
    }
}

fn syncrepl_spec(i: usize, item: &toml::Value) -> Result<repl::consumer::ConsumerSpec, String> {
    use repl::consumer::spec::{self as rs, BindMethod};
    let table = item.as_table().ok_or_else(|| {
        format!(
            "syncrepl[{i}]: expected a table, found {}",
            show_value(item)
        )
    })?;
    let field = |k: &str| table.get(k);
    let at = |k: &str, e: String| format!("syncrepl[{i}].{k}: {e}");
    let text = |k: &str| -> Result<Option<String>, String> {
        field(k)
            .map(|v| string(v).map_err(|e| at(k, e)))
            .transpose()
    };
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
    let base =
        text("search_base")?.ok_or_else(|| format!("syncrepl[{i}]: search_base is required"))?;
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
            Duration::from_secs(n)
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
        spec.timeout = Duration::from_secs(n);
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
        Some("simple") => return Err(format!("syncrepl[{i}]: bind_method simple needs bind_dn")),
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
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_become_the_values_each_kind_reads() {
        let ctx = Ctx::default();
        let text = |s: &str| <Int<1> as Kind<u64>>::parse_text(&Int::<1>, s);
        let n: u64 = Int::<1>.parse(&text("42"), &ctx).expect("int");
        assert_eq!(n, 42);
        let e =
            <Int<1> as Kind<u64>>::parse(&Int::<1>, &text("4x2"), &ctx).expect_err("not a number");
        assert_eq!(e, "expected an integer, found string '4x2'");
        assert_eq!(Bool.parse_text("true"), toml::Value::Boolean(true));
        let v = Strings.parse_text("[\"a\", \"b\"]");
        assert_eq!(Strings.parse(&v, &ctx).expect("array"), vec!["a", "b"]);
        // A DN with commas stays one string.
        let v = Strings.parse_text("dc=example,dc=com");
        assert_eq!(
            Strings.parse(&v, &ctx).expect("one"),
            vec!["dc=example,dc=com"]
        );
        // A password that looks like a number is a string.
        assert_eq!(
            Secret
                .parse(&Secret.parse_text("12345"), &ctx)
                .expect("text"),
            Hidden("12345".into())
        );
    }

    #[test]
    fn log_levels() {
        for ok in ["info", "warn,server=debug", "server=trace", "DEBUG"] {
            check_log_level(ok).expect(ok);
        }
        for bad in ["verbose", "info,server=loud", "", "=info"] {
            check_log_level(bad).expect_err(bad);
        }
    }
}
