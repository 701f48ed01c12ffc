//! The settings of `linden serve` (and of the commands that read its file): the TOML file, the
//! environment and the flags, merged into one `server::Config`.
//!
//! Every key is declared once, in `server::config` (`KEYS`): its name, type, default, value
//! kind, documentation and reload class. This module only reads: the file key by key, then
//! `LINDEN_<KEY>` variables, then the flags, each handing the key's value to `Key::set`.
//! Precedence is therefore flag, then environment, then file, then default, for every key.
//!
//! Every problem is one line naming where it is: `FILE:LINE: key 'K': …`, `environment
//! LINDEN_K: …` or `--flag: …`. Reading goes on after a bad key, so that `linden
//! check-config` lists every problem at once; `ConfigError` holds them, one a line.

use std::fmt;
use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;

use server::config::{Config, Ctx, KEYS};

use crate::args::{ImportArgs, KeyFlags, ServeArgs};

/// Settings that cannot be used, one problem a line. `linden` prints each line and exits with
/// status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    fn from_lines(lines: Vec<String>) -> ConfigError {
        ConfigError(lines.join("\n"))
    }
}

/// Where settings come from, in increasing precedence after the defaults.
pub struct Sources<'a> {
    pub file: Option<&'a Path>,
    /// The environment: a variable's value by name (`std::env::var` in the binary, a map in
    /// tests).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub flags: &'a KeyFlags,
}

/// The process environment, as `Sources::env` reads it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The configuration `linden serve` runs with.
pub fn resolve(args: &ServeArgs) -> Result<Config, ConfigError> {
    read(&Sources {
        file: args.config.as_deref(),
        env: &process_env,
        flags: &args.keys,
    })
}

/// The configuration `linden import` stores data as: its `--config` file and the environment
/// read exactly as `serve` reads them, under the flags the two commands share (`--data`,
/// `--suffix`), so that an import stores entries as the server on the same file would.
pub fn resolve_import(args: &ImportArgs) -> Result<Config, ConfigError> {
    let mut flags = KeyFlags::default();
    if let Some(d) = &args.data {
        flags.give("data", vec![d.display().to_string()]);
    }
    if !args.suffixes.is_empty() {
        flags.give("suffix", args.suffixes.clone());
    }
    read(&Sources {
        file: args.config.as_deref(),
        env: &process_env,
        flags: &flags,
    })
}

/// The configuration of the commands that read a data directory without serving it
/// (`export`, `backup`, `verify`, `snapshot`): the file if given, and the environment.
pub fn from_file(file: Option<&Path>) -> Result<Config, ConfigError> {
    read(&Sources {
        file,
        env: &process_env,
        flags: &KeyFlags::default(),
    })
}

/// The schema a data directory's entries are read with: the built-in schema plus the
/// configuration's bundles (`schemas`, and `ppolicy`'s) and `schema_files`.
pub fn configured_schema(config: &Config) -> Result<schema::Schema, ConfigError> {
    server::configured_schema(&config.schema_bundles(), &config.schema_files)
        .map_err(|e| ConfigError(e.to_string()))
}

/// Reads every source over the defaults; every problem found is in the error.
pub fn read(src: &Sources<'_>) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    let mut problems = Vec::new();
    if let Some(path) = src.file {
        match std::fs::read_to_string(path) {
            Ok(text) => read_text(&mut config, path, &text, &mut problems),
            Err(e) => problems.push(format!(
                "{}: cannot read configuration file: {e}",
                path.display()
            )),
        }
    }
    for k in KEYS {
        let var = k.env();
        if let Some(text) = (src.env)(&var) {
            if let Err(e) = k.set(&mut config, &k.parse_text(&text), &Ctx::default()) {
                problems.push(format!("environment {var}: {e}"));
            }
        }
    }
    for (k, values) in &src.flags.given {
        let value = match values.as_slice() {
            [one] if !k.repeats() || inline_toml(one) => k.parse_text(one),
            many => toml::Value::Array(
                many.iter()
                    .map(|s| toml::Value::String(s.clone()))
                    .collect(),
            ),
        };
        if let Err(e) = k.set(&mut config, &value, &Ctx::default()) {
            problems.push(format!("--{}: {e}", k.flag().unwrap_or_default()));
        }
    }
    if problems.is_empty() {
        if let Err(e) = config.check() {
            let at = src
                .file
                .map(|p| format!("{}: ", p.display()))
                .unwrap_or_default();
            problems.push(format!("{at}{e}"));
        }
    }
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::from_lines(problems))
    }
}

/// A flag's text written as a TOML array or table (`--indexes '["uid", "cn"]'`).
fn inline_toml(s: &str) -> bool {
    let t = s.trim_start();
    t.starts_with('[') || t.starts_with('{')
}

/// Reads a configuration file's text into `config`; `path` names it in messages and is where
/// relative `schema_files` are found.
pub fn read_text(config: &mut Config, path: &Path, text: &str, problems: &mut Vec<String>) {
    let name = path.display().to_string();
    let table: toml::Table = match text.parse() {
        Ok(t) => t,
        Err(e) => {
            let e: toml::de::Error = e;
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
            problems.push(format!("{name}{at}: invalid TOML: {}", message.join("; ")));
            return;
        }
    };
    let ctx = Ctx {
        base: Some(path.parent().unwrap_or(Path::new(""))),
    };
    // In the order of the file, so that the messages read top to bottom.
    let mut keys: Vec<(&String, &toml::Value)> = table.iter().collect();
    keys.sort_by_key(|(k, _)| key_line(text, k).unwrap_or(usize::MAX));
    for (key, value) in keys {
        let at = key_line(text, key)
            .map(|l| format!(":{l}"))
            .unwrap_or_default();
        let Some(k) = server::config::key(key) else {
            let hint = match server::config::suggest(key) {
                Some(s) => format!("did you mean '{s}'?"),
                None => "`linden serve --help` and docs/configuration.md list the keys".into(),
            };
            problems.push(format!("{name}{at}: unknown key '{key}' ({hint})"));
            continue;
        };
        if let Err(e) = k.set(config, value, &ctx) {
            problems.push(format!("{name}{at}: key '{key}': {e}"));
        }
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The line where a top-level key is set (or its `[[table]]` first starts), for messages;
/// `None` if it cannot be told simply (quoted keys).
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let table = l
                .strip_prefix("[[")
                .or_else(|| l.strip_prefix('['))
                .is_some_and(|r| {
                    r.trim_start()
                        .strip_prefix(key)
                        .is_some_and(|r| r.trim_start().starts_with(']'))
                });
            table
                || l.strip_prefix(key).is_some_and(|rest| {
                    let rest = rest.trim_start();
                    rest.starts_with('=') || rest.starts_with('.')
                })
        })
        .map(|i| i + 1)
}

/// The reference table of docs/configuration.md, one table per section, made from `KEYS`,
/// between the markers the docs keep it in.
pub fn reference_markdown() -> String {
    let mut out = format!("{REFERENCE_BEGIN}\n");
    let mut section = "";
    for k in KEYS {
        if k.section != section {
            section = k.section;
            out.push_str(&format!(
                "\n#### {section}\n\n| key | flag | default | reload | what |\n|---|---|---|---|---|\n"
            ));
        }
        let flag = match k.flag() {
            Some(f) if k.is_switch() => format!("`--{f}`"),
            Some(f) => format!("`--{f} {}`", k.value_name.unwrap_or("VALUE")),
            None => "—".into(),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            k.name,
            cell(&flag),
            cell(&k.default_shown()),
            k.reload.name(),
            cell(&k.doc())
        ));
    }
    out.push('\n');
    out.push_str(REFERENCE_END);
    out.push('\n');
    out
}

/// Text for a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Where the docs hold the generated reference table.
pub const REFERENCE_BEGIN: &str =
    "<!-- keys: generated by `linden config-reference`; do not edit -->";
pub const REFERENCE_END: &str = "<!-- end of keys -->";

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn parse_with(
        text: &str,
        env: &[(&str, &str)],
        flags: &[(&str, &[&str])],
    ) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("linden.toml");
        std::fs::write(&path, text).expect("write");
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut given = KeyFlags::default();
        for (k, v) in flags {
            given.give(k, v.iter().map(|s| s.to_string()).collect());
        }
        let lookup = |n: &str| env.get(n).cloned();
        read(&Sources {
            file: Some(&path),
            env: &lookup,
            flags: &given,
        })
        .map_err(|e| ConfigError(e.0.replace(&path.display().to_string(), "linden.toml")))
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        parse_with(text, &[], &[])
    }

    /// The example in docs/configuration.md is a valid file.
    #[test]
    fn documented_example_parses() {
        let doc = include_str!("../../../docs/configuration.md");
        let start = doc.find("## Example file").expect("example section");
        let block = &doc[start..];
        let block = &block[block.find("```toml\n").expect("toml block") + 8..];
        let block = &block[..block.find("```").expect("end of block")];
        let c = parse(block).expect("documented example");
        assert_eq!(c.access.map(|a| a.len()), Some(2));
        assert_eq!(c.password_hash, pwhash::Scheme::Argon2);
    }

    /// docs/configuration.md holds the reference table as the declarations make it.
    #[test]
    fn docs_hold_the_generated_reference() {
        let doc = include_str!("../../../docs/configuration.md");
        let start = doc.find(REFERENCE_BEGIN).expect("reference begins");
        let end = doc.find(REFERENCE_END).expect("reference ends") + REFERENCE_END.len();
        assert_eq!(
            doc[start..end].trim(),
            reference_markdown().trim(),
            "docs/configuration.md's key reference is out of date: replace it with the output of `linden config-reference`"
        );
        for k in KEYS {
            assert!(
                doc.contains(&format!("`{}`", k.name)),
                "docs/configuration.md lacks `{}`",
                k.name
            );
        }
    }

    #[test]
    fn password_and_lockout_keys() {
        let c = parse(
            "password_hash = \"pbkdf2-sha512\"\npbkdf2_iterations = 300000\nargon2_memory_kib = 65536\nbind_failures_per_dn = 3\nbind_failures_per_ip = 0\nbind_lockout_seconds = 30\ncredential_cache_entries = 0\n",
        )
        .expect("valid");
        assert_eq!(c.password_hash, pwhash::Scheme::Pbkdf2Sha512);
        assert_eq!(c.pbkdf2_iterations, 300000);
        assert_eq!(c.argon2_memory_kib, 65536);
        assert_eq!(c.bind_failures_per_dn, 3);
        assert_eq!(c.bind_failures_per_ip, 0);
        assert_eq!(c.bind_lockout_seconds, std::time::Duration::from_secs(30));
        assert_eq!(c.credential_cache_entries, 0);
        assert_eq!(
            parse("snapshot_cpu_share = 40")
                .expect("valid")
                .snapshot_cpu_share,
            40
        );
        for (text, want) in [
            ("snapshot_cpu_share = 150", "linden.toml:1: key 'snapshot_cpu_share': a percentage of one core"),
            ("password_hash = \"md5\"", "linden.toml:1: key 'password_hash': unknown password scheme \"md5\""),
            ("argon2_memory_kib = 99999999", "linden.toml: key argon2_memory_kib must be between"),
            ("bind_trusted_addresses = [\"10.0.0.0/40\"]", "linden.toml:1: key 'bind_trusted_addresses': invalid address or network '10.0.0.0/40'"),
            ("bind_lockout_seconds = 0", "linden.toml:1: key 'bind_lockout_seconds': must be at least 1"),
            ("syncprov_queue = 0", "linden.toml:1: key 'syncprov_queue': must be at least 1"),
            ("persistent_search_queue = 0", "linden.toml:1: key 'persistent_search_queue': must be at least 1"),
        ] {
            let e = parse(text).expect_err(text).0;
            assert!(e.starts_with(want), "{text}: got {e}");
        }
        let c = parse(
            "bind_throttle_max_ms = 500\nbind_trusted_addresses = [\"10.0.0.0/8\", \"::1\"]\n",
        )
        .expect("valid");
        assert_eq!(
            c.bind_throttle_max_ms,
            std::time::Duration::from_millis(500)
        );
        assert_eq!(c.bind_trusted_addresses.len(), 2);
    }

    #[test]
    fn access_rules_and_anonymous_limits() {
        let c = parse(
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
        assert_eq!(c.size_limit_anonymous, 10);
        assert_eq!(c.time_limit_anonymous, 5);
        let rules = c.access.expect("rules");
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].scope.as_deref(), Some("children"));
        assert_eq!(rules[0].by[1].rights, vec!["all".to_string()]);
        assert_eq!(rules[1].by[0].who, "users");
    }

    #[test]
    fn bad_access_rules_name_rule_and_field() {
        for (text, wants) in [
            ("access = 3", "linden.toml:1: key 'access': expected [[access]] tables"),
            (
                "[[access]]\nby = [{ who = \"*\", rights = [\"read\"] }]\n[[access]]\ndn = \"bogus\"\nby = [{ who = \"*\", rights = [\"read\"] }]",
                "linden.toml:1: key 'access': access[1].dn: invalid DN 'bogus'",
            ),
            (
                "[[access]]\nby = [{ who = \"everyone\", rights = [\"read\"] }]",
                "linden.toml:1: key 'access': access[0].by[0].who: invalid subject 'everyone'",
            ),
            (
                "[[access]]\nby = [{ who = \"*\", rights = [\"fly\"] }]",
                "linden.toml:1: key 'access': access[0].by[0].rights: invalid right 'fly'",
            ),
            (
                "[[access]]\nby = [{ who = \"*\" }]",
                "linden.toml:1: key 'access': access[0].by[0].rights: missing",
            ),
            (
                "[[access]]\nto = \"x\"\nby = []",
                "linden.toml:1: key 'access': access[0].to: unknown key",
            ),
            (
                "[[access]]\nfilter = \"(cn=\"\nby = [{ who = \"*\", rights = [\"read\"] }]",
                "linden.toml:1: key 'access': access[0].filter: invalid filter '(cn='",
            ),
        ] {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.starts_with(wants), "{e}\nwanted: {wants}");
        }
    }

    #[test]
    fn full_file() {
        let c = parse(
            r#"
listen = "0.0.0.0:389"
data = "/var/lib/linden"
suffix = ["dc=example,dc=com", "o=test"]
admin_dn = "cn=root,dc=example,dc=com"
admin_password = "pw"
demo = true
max_pdu_size = 1048576
indexes = ["uid", "mail"]
log_level = "debug"
"#,
        )
        .expect("valid file");
        assert_eq!(c.listen, vec!["0.0.0.0:389".parse().expect("addr")]);
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/linden"));
        assert_eq!(
            c.suffixes,
            vec!["dc=example,dc=com".to_string(), "o=test".to_string()]
        );
        assert_eq!(c.admin_dn, "cn=root,dc=example,dc=com");
        assert_eq!(c.admin_password.map(|p| p.0).as_deref(), Some("pw"));
        assert!(c.demo);
        assert_eq!(c.max_pdu_size, 1048576);
        assert_eq!(
            c.indexes,
            vec![
                server::config::IndexSpec::eq_pres("uid"),
                server::config::IndexSpec::eq_pres("mail")
            ]
        );
        assert_eq!(c.log_level, "debug");
    }

    #[test]
    fn indexes_may_name_kinds_per_type() {
        let c = parse("[indexes]\ncn = [\"eq\", \"sub\"]\nmail = \"subinitial\"\nuidNumber = [\"EQ\", \"ord\", \"pres\"]")
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
            c.indexes,
            vec![
                spec("cn", &["eq", "sub"]),
                spec("mail", &["subinitial"]),
                spec("uidNumber", &["eq", "ord", "pres"]),
            ]
        );
    }

    #[test]
    fn unknown_key_suggests_the_one_meant() {
        let e = parse("demo = true\nlisen = \"127.0.0.1:1\"\n").expect_err("unknown key");
        assert_eq!(
            e.0,
            "linden.toml:2: unknown key 'lisen' (did you mean 'listen'?)"
        );
        let e = parse("frobnicate = 1").expect_err("unknown key");
        assert!(
            e.0.starts_with("linden.toml:1: unknown key 'frobnicate' (`linden serve --help`"),
            "{e}"
        );
    }

    #[test]
    fn every_problem_is_reported_one_a_line() {
        let e = parse("listen = \"abc\"\nmax_pdu_size = 0\nsufix = \"o=x\"\n")
            .expect_err("three problems")
            .0;
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 3, "{e}");
        assert!(
            e.contains("linden.toml:1: key 'listen': invalid socket address 'abc'"),
            "{e}"
        );
        assert!(
            e.contains("linden.toml:2: key 'max_pdu_size': must be at least 1"),
            "{e}"
        );
        assert!(
            e.contains("linden.toml:3: unknown key 'sufix' (did you mean 'suffix'?)"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        let cases = [
            ("listen = 3389", "linden.toml:1: key 'listen': expected a string, found integer 3389"),
            ("demo = \"yes\"", "linden.toml:1: key 'demo': expected true or false, found string 'yes'"),
            ("size_limit = -1", "linden.toml:1: key 'size_limit': must be at least 0, found -1"),
            ("suffix = [1]", "linden.toml:1: key 'suffix': expected strings, found integer 1"),
            ("suffix = []", "linden.toml:1: key 'suffix': at least one suffix is required"),
            ("log_level = \"verbose\"", "linden.toml:1: key 'log_level': invalid log level 'verbose'"),
            ("log_level = \"info,server=loud\"", "linden.toml:1: key 'log_level': invalid log level"),
            ("tls_cert = 1", "linden.toml:1: key 'tls_cert': expected a string, found integer 1"),
            ("indexes = 1", "linden.toml:1: key 'indexes': expected a string, an array of strings or a table of attribute types, found integer 1"),
            ("indexes = { cn = [\"eq\", \"substr\"] }", "linden.toml:1: key 'indexes': 'cn': unknown index 'substr'"),
            ("max_buffered_bytes = 1024", "linden.toml:1: key 'max_buffered_bytes': must be at least 65536, found 1024"),
            ("write_timeout = 1.5", "linden.toml:1: key 'write_timeout': expected an integer, found float 1.5"),
            ("snapshot_cpu_share = 99999999999", "linden.toml:1: key 'snapshot_cpu_share': 99999999999 is too large"),
            ("durability = \"fast\"", "linden.toml:1: key 'durability': invalid value 'fast'"),
            ("ldaps_listen = \"x\"", "linden.toml:1: key 'ldaps_listen': invalid socket address 'x' (expected ADDR:PORT, e.g. 0.0.0.0:636)"),
            ("listen.port = 1", "linden.toml:1: key 'listen': expected a string, found a table"),
            ("access_log = []", "linden.toml:1: key 'access_log': expected a string, found an array"),
            ("server_id = 5000", "linden.toml:1: key 'server_id': a server id: 0 to 4095, found 5000"),
            ("admin_password = \"\"", "linden.toml:1: key 'admin_password': must not be empty"),
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
    fn flag_beats_environment_beats_file_beats_default() {
        let file = "listen = \"127.0.0.1:1\"\ndata = \"/d\"\nsuffix = \"o=file\"\nlog_level = \"warn\"\nmax_connections = 7\nidle_timeout = 9";
        let c = parse_with(
            file,
            &[
                ("LINDEN_MAX_CONNECTIONS", "8"),
                ("LINDEN_IDLE_TIMEOUT", "10"),
                ("LINDEN_ADMIN_PASSWORD", "env"),
            ],
            &[
                ("listen", &["127.0.0.1:2"]),
                ("suffix", &["o=flag", "o=two"]),
                ("idle_timeout", &["11"]),
            ],
        )
        .expect("valid");
        assert_eq!(c.listen, vec!["127.0.0.1:2".parse().expect("addr")]);
        assert_eq!(c.data_dir, PathBuf::from("/d"));
        assert_eq!(c.suffixes, vec!["o=flag".to_string(), "o=two".to_string()]);
        assert_eq!(c.log_level, "warn");
        assert_eq!(c.max_connections, 8, "environment over file");
        assert_eq!(c.idle_timeout, 11, "flag over environment");
        assert_eq!(c.admin_password.map(|p| p.0).as_deref(), Some("env"));
        let c = parse("").expect("empty file");
        assert_eq!(c.listen, Config::default().listen);
        assert_eq!(c.log_level, "info");
        assert!(!c.demo);
    }

    #[test]
    fn bad_flags_and_variables_are_named() {
        let e = parse_with(
            "",
            &[("LINDEN_MAX_CONNECTIONS", "many")],
            &[("max_pdu_size", &["0"])],
        )
        .expect_err("two problems")
        .0;
        assert!(
            e.contains(
                "environment LINDEN_MAX_CONNECTIONS: expected an integer, found string 'many'"
            ),
            "{e}"
        );
        assert!(
            e.contains("--max-pdu-size: must be at least 1, found 0"),
            "{e}"
        );
        let e = parse_with("", &[], &[("admin_password", &[""])])
            .expect_err("empty")
            .0;
        assert_eq!(e, "--admin-password: must not be empty");
    }

    #[test]
    fn syncrepl_tables() {
        let c = parse(
            "updateref = \"ldap://p:389\"\n[[syncrepl]]\nprovider = \"ldap://p:389\"\nrid = 7\nsearch_base = \"dc=example,dc=com\"\ntype = \"refreshOnly\"\ninterval = \"00:00:01:00\"\nretry = \"5 5 300 +\"\nbind_dn = \"cn=r,dc=example,dc=com\"\nbind_password = \"x\"",
        )
        .expect("valid");
        assert_eq!(c.syncrepl.len(), 1);
        assert_eq!(c.syncrepl[0].rid, 7);
        assert_eq!(
            c.syncrepl[0].mode,
            repl::consumer::spec::SyncMode::RefreshOnly {
                interval: std::time::Duration::from_secs(60)
            }
        );
        assert_eq!(c.updateref, vec!["ldap://p:389".to_string()]);
        for (text, want) in [
            ("[[syncrepl]]\nrid = 1\nsearch_base = \"o=x\"", "syncrepl[0]: provider is required"),
            ("[[syncrepl]]\nprovider = \"x://p\"\nrid = 1\nsearch_base = \"o=x\"", "syncrepl[0].provider: 'x://p' is not"),
            ("[[syncrepl]]\nprovider = \"ldap://p\"\nrid = 1\nsearch_base = \"o=x\"\nretry = \"5\"", "syncrepl[0].retry: invalid retry schedule"),
            ("[[syncrepl]]\nprovider = \"ldaps://p\"\nrid = 1\nsearch_base = \"o=x\"", "syncrepl[0]: tls_ca"),
            ("[[syncrepl]]\nprovider = \"ldap://p\"\nrid = 1\nsearch_base = \"o=x\"\nbogus = 1", "syncrepl[0]: unknown field 'bogus'"),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.0.contains(want), "{text}: got {e}");
            assert!(e.0.starts_with("linden.toml:1: key 'syncrepl': "), "{text}: got {e}");
        }
        let doc = include_str!("../../../docs/replication.md");
        for f in server::config::SYNCREPL_FIELDS {
            assert!(
                doc.contains(&format!("`{f}`")),
                "docs/replication.md lacks `{f}`"
            );
        }
    }

    #[test]
    fn syncprov_keys() {
        let c = parse(
            "syncprov = true\nsyncprov_sessionlog = 0\nsyncprov_queue = 4\nsyncprov_tombstones = 10\nsyncprov_tombstone_lifetime = 3600\n",
        )
        .expect("valid");
        assert!(c.syncprov);
        assert_eq!(c.syncprov_sessionlog, 0);
        assert_eq!(c.syncprov_queue, 4);
        assert_eq!(c.syncprov_tombstones, 10);
        assert_eq!(c.syncprov_tombstone_lifetime, 3600);
        for key in [
            "syncprov_tombstones",
            "syncprov_tombstone_lifetime",
            "syncprov_queue",
        ] {
            let e = parse(&format!("{key} = 0")).expect_err("zero").0;
            assert!(
                e.contains(&format!("key '{key}': must be at least 1")),
                "{e}"
            );
        }
    }

    #[test]
    fn storage_keys() {
        let c = parse("log_reserve_bytes = 1048576\nmin_free_bytes = 0").expect("valid");
        assert_eq!(c.log_reserve_bytes, 1 << 20);
        assert_eq!(c.min_free_bytes, 0);
        let e = parse("min_free_bytes = -1").expect_err("negative").0;
        assert!(e.contains("key 'min_free_bytes'"), "{e}");
        let e = parse("log_reserve_bytes = \"64M\"")
            .expect_err("a string")
            .0;
        assert!(e.contains("key 'log_reserve_bytes'"), "{e}");
    }

    #[test]
    fn schema_files_are_relative_to_the_file() {
        let c = parse("schema_files = [\"local.schema\", \"/abs/x.ldif\"]").expect("valid");
        assert!(c.schema_files[0].ends_with("local.schema"));
        assert!(c.schema_files[0].is_absolute());
        assert_eq!(c.schema_files[1], PathBuf::from("/abs/x.ldif"));
    }
}
