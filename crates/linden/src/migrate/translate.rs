//! From the neutral model to Linden's configuration keys (crates/server/src/config: the keys
//! table) and the report. Every directive either becomes keys or a report line.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};

use toml::Value;

use super::acl::{self, Input};
use super::model::{Database, Directive, Loc, Overlay, Schema, SlapdConfig};
use super::report::{Kind, Report};

/// Keys another change (issue 31) adds; emitted, and named in the report so an operator of a
/// Linden without them knows why check-config refuses them.
#[cfg(test)]
pub const PENDING_KEYS: &[&str] = &["referral", "dynlist"];

/// slapd's defaults where Linden's differ: written out so the migrated server behaves as
/// slapd did.
const SLAPD_SIZELIMIT: u64 = 500;
const SLAPD_TIMELIMIT: u64 = 3600;

/// Schemas built into Linden's core (always loaded).
const BUILTIN: &[&str] = &["core", "cosine", "inetorgperson", "nis"];

/// One `[[name]]` table: its name, its fields in order, a comment above it.
pub type TableOut = (String, Vec<(String, Value)>, Option<String>);

/// The configuration written: keys in order, then tables, plus schema files to write beside
/// it.
#[derive(Debug, Default)]
pub struct Output {
    pub keys: Vec<(String, Value, Option<String>)>,
    pub tables: Vec<TableOut>,
    /// (file name, text) of schemas carried as files next to the output.
    pub files: Vec<(String, String)>,
    /// Lines for the header comment.
    pub header: Vec<String>,
}

impl Output {
    fn key(&mut self, name: &str, v: Value, comment: Option<String>) {
        self.keys.retain(|(k, _, _)| k != name);
        self.keys.push((name.to_string(), v, comment));
    }

    fn has(&self, name: &str) -> bool {
        self.keys.iter().any(|(k, _, _)| k == name)
    }

    fn table(&mut self, name: &str, fields: Vec<(&str, Value)>, comment: Option<String>) {
        self.tables.push((
            name.to_string(),
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            comment,
        ));
    }

    /// The TOML text. Values are written by the toml crate, so quoting is right.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for h in &self.header {
            s.push_str(&format!("# {h}\n"));
        }
        s.push('\n');
        for (k, v, c) in &self.keys {
            if c.is_some() {
                s.push('\n');
            }
            if let Some(c) = c {
                for l in c.lines() {
                    s.push_str(&format!("# {l}\n"));
                }
            }
            s.push_str(&format!("{k} = {}\n", inline(v)));
        }
        for (name, fields, c) in &self.tables {
            s.push('\n');
            if let Some(c) = c {
                for l in c.lines() {
                    s.push_str(&format!("# {l}\n"));
                }
            }
            s.push_str(&format!("[[{name}]]\n"));
            for (k, v) in fields {
                match v {
                    Value::Array(items) if items.iter().any(Value::is_table) => {
                        s.push_str(&format!("{k} = [\n"));
                        for i in items {
                            let text = clause_text(i).unwrap_or_else(|| inline(i));
                            s.push_str(&format!("  {text},\n"));
                        }
                        s.push_str("]\n");
                    }
                    _ => s.push_str(&format!("{k} = {}\n", inline(v))),
                }
            }
        }
        s
    }
}

/// A value as inline TOML.
fn inline(v: &Value) -> String {
    v.to_string()
}

fn string(s: &str) -> Value {
    Value::String(s.to_string())
}

fn strings<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I) -> Value {
    Value::Array(items.into_iter().map(|s| string(s.as_ref())).collect())
}

fn int(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// What the command line adds: slapd's `-h` URLs.
#[derive(Debug, Default)]
pub struct Options {
    pub listen: Option<String>,
}

/// Translates `cfg`.
pub fn translate(cfg: &SlapdConfig, opts: &Options, report: &mut Report) -> anyhow::Result<Output> {
    let mut out = Output::default();
    let mut t = Translator {
        out: &mut out,
        report,
        tls_ca: None,
        tls_verify: None,
        server_ids: Vec::new(),
        limits: Limits::default(),
        indexes: BTreeMap::new(),
        index_default: None,
        memberof_groups: Vec::new(),
        refint: Vec::new(),
        module_schemas: Vec::new(),
    };
    t.listeners(opts)?;
    t.global(&cfg.global);
    t.schemas(cfg);
    let data: Vec<&Database> = cfg.databases.iter().filter(|d| d.holds_data()).collect();
    t.databases(cfg, &data);
    t.server_id(opts);
    t.limits(cfg);
    t.access(cfg, &data);
    t.finish();
    Ok(out)
}

#[derive(Default)]
struct Limits {
    size: Option<(u64, Loc)>,
    time: Option<(u64, Loc)>,
}

struct Translator<'a> {
    out: &'a mut Output,
    report: &'a mut Report,
    tls_ca: Option<(String, Loc)>,
    tls_verify: Option<(String, Loc)>,
    server_ids: Vec<Directive>,
    limits: Limits,
    /// attribute → kinds, in the order first seen (BTreeMap on a position key).
    indexes: BTreeMap<String, (usize, Vec<String>)>,
    index_default: Option<Vec<String>>,
    memberof_groups: Vec<String>,
    refint: Vec<String>,
    /// Schema bundles that modules bring (ppolicy).
    module_schemas: Vec<String>,
}

impl Translator<'_> {
    fn note(&mut self, d: &Directive, kind: Kind, why: impl Into<String>) {
        self.report.add(&d.loc, d.shown(), kind, why);
    }

    fn listeners(&mut self, opts: &Options) -> anyhow::Result<()> {
        let Some(urls) = &opts.listen else {
            self.out.header.push(
                "Listeners: none given (--listen with slapd's -h URLs, e.g. from SLAPD_SERVICES in /etc/default/slapd); Linden's default applies.".into(),
            );
            return Ok(());
        };
        let (mut ldap, mut ldaps) = (Vec::new(), Vec::new());
        for url in urls.split_whitespace() {
            let lower = url.to_ascii_lowercase();
            if lower.starts_with("ldapi://") {
                let host = url["ldapi://".len()..].split('/').next().unwrap_or("");
                let path = if host.is_empty() {
                    // slapd's compiled-in default on Debian.
                    "/var/run/slapd/ldapi".to_string()
                } else {
                    percent_decode(host)
                };
                self.out.key("ldapi", string(&path), None);
            } else if let Some(rest) = lower.strip_prefix("ldaps://") {
                ldaps.push(socket(url, rest, 636)?);
            } else if let Some(rest) = lower.strip_prefix("ldap://") {
                ldap.push(socket(url, rest, 389)?);
            } else {
                anyhow::bail!("--listen: '{url}' is not an ldap://, ldaps:// or ldapi:// URL");
            }
        }
        if !ldap.is_empty() {
            self.out.key(
                "listen",
                strings(ldap.iter().map(|a| a.to_string())),
                Some("From slapd's -h URLs. ldap:/// (every address) is 0.0.0.0 here: add [::] for IPv6.".into()),
            );
        } else {
            self.out.key("listen", Value::Array(Vec::new()), None);
        }
        if !ldaps.is_empty() {
            self.out.key(
                "ldaps_listen",
                strings(ldaps.iter().map(|a| a.to_string())),
                None,
            );
        }
        Ok(())
    }

    fn global(&mut self, ds: &[Directive]) {
        for d in ds {
            match d.name.as_str() {
                "loglevel" => self.loglevel(d),
                "serverid" => self.server_ids.push(d.clone()),
                "tlscertificatefile" => self.out.key("tls_cert", string(d.arg()), None),
                "tlscertificatekeyfile" => self.out.key("tls_key", string(d.arg()), None),
                "tlscacertificatefile" => self.tls_ca = Some((d.arg().to_string(), d.loc.clone())),
                "tlsverifyclient" => {
                    self.tls_verify = Some((d.arg().to_ascii_lowercase(), d.loc.clone()))
                }
                "tlscacertificatepath" | "tlsciphersuite" | "tlsprotocolmin" | "tlscrlcheck"
                | "tlsdhparamfile" | "tlsecname" | "tlscrlfile" | "tlsrandfile" => self.note(
                    d,
                    Kind::NotCarried,
                    "Linden's TLS (rustls) chooses ciphers, curves and protocols itself (TLS 1.2 and 1.3), reads CAs from one PEM file (tls_client_ca) and checks no CRLs",
                ),
                "authz-regexp" | "sasl-regexp" => self.authz(d),
                "authz-policy" => self.note(
                    d,
                    Kind::NotCarried,
                    "Linden decides proxied authorization with the 'proxy' right of [[access]] rules, not authzTo/authzFrom attributes",
                ),
                "security" => self.security(d),
                "require" => self.require(d),
                "allow" | "disallow" => self.allow(d),
                "idletimeout" => match d.arg().parse::<u64>() {
                    Ok(n) => self.out.key("idle_timeout", int(n), None),
                    Err(_) => self.note(d, Kind::NotCarried, "not a number of seconds"),
                },
                "writetimeout" => match d.arg().parse::<u64>() {
                    Ok(n) => self.out.key("write_timeout", int(n), None),
                    Err(_) => self.note(d, Kind::NotCarried, "not a number of seconds"),
                },
                "sockbuf_max_incoming" => match d.arg().parse::<u64>() {
                    Ok(n) if n >= 1024 => self.out.key("max_pdu_size_anonymous", int(n), None),
                    _ => self.note(d, Kind::NotCarried, "Linden's max_pdu_size_anonymous is at least 1024"),
                },
                "sockbuf_max_incoming_auth" => match d.arg().parse::<u64>() {
                    Ok(n) if n >= 1 => self.out.key("max_pdu_size", int(n), None),
                    _ => self.note(d, Kind::NotCarried, "not a size"),
                },
                "referral" => {
                    self.out.key("referral", strings(&d.args), None);
                    self.note(
                        d,
                        Kind::Difference,
                        "written as 'referral', a key of Linden releases with issue 31 (default referral); an older Linden's check-config refuses it",
                    );
                }
                "password-hash" => self.password_hash(d),
                "moduleload" => self.moduleload(d),
                "pidfile" | "argsfile" | "tool-threads" | "threads"
                | "modulepath" | "gentlehup" | "listener-threads" | "conn_max_pending"
                | "conn_max_pending_auth" | "localssf" | "index_substr_if_minlen"
                | "index_substr_if_maxlen" | "index_substr_any_len" | "index_substr_any_step"
                | "index_intlen" | "sortvals" | "attributeoptions" | "logfile"
                | "logfilerotate" | "olcconfigfile" | "olcconfigdir" => self.note(
                    d,
                    Kind::NotNeeded,
                    "not needed by Linden (one process, overlays built in, its own threads and indexes)",
                ),
                _ => self.note(d, Kind::NotCarried, "no equivalent in Linden"),
            }
        }
    }

    /// Modules are built in; ppolicy's also brings its schema (OpenLDAP 2.5 defines the
    /// pwdPolicy types in the module), which a server without the overlay still needs, e.g.
    /// a consumer replicating policy entries and pwdFailureTime from its provider.
    fn moduleload(&mut self, d: &Directive) {
        let name = d
            .arg()
            .rsplit('/')
            .next()
            .unwrap_or("")
            .trim_end_matches(".la")
            .trim_end_matches(".so")
            .to_ascii_lowercase();
        if name == "ppolicy" {
            self.module_schemas.push("ppolicy".into());
            self.note(
                d,
                Kind::NotNeeded,
                "Linden's ppolicy is built in; the module's schema is enabled (schemas = [\"ppolicy\"]), as loading the module does in slapd",
            );
        } else {
            self.note(
                d,
                Kind::NotNeeded,
                "not needed by Linden (one process, overlays built in, its own threads and indexes)",
            );
        }
    }

    fn loglevel(&mut self, d: &Directive) {
        // 0: Linden's warn; 256 (stats) and 16384 (sync): info; anything else: debug; -1: trace.
        let mut level = 0u8;
        let mut stats = false;
        for w in &d.args {
            let lw = w.to_ascii_lowercase();
            let n: Option<i64> = if let Some(h) = lw.strip_prefix("0x") {
                i64::from_str_radix(h, 16).ok()
            } else {
                lw.parse().ok()
            };
            let l = match (lw.as_str(), n) {
                ("none", _) | (_, Some(0)) => 0,
                ("any", _) | (_, Some(-1)) => 4,
                ("stats" | "stats2" | "sync", _) => {
                    stats |= lw.starts_with("stats");
                    2
                }
                (_, Some(v)) if v & !(256 | 512 | 16384) == 0 => {
                    stats |= v & (256 | 512) != 0;
                    2
                }
                _ => 3,
            };
            level = level.max(l);
        }
        let name = ["warn", "warn", "info", "debug", "trace"][level as usize];
        self.out.key("log_level", string(name), None);
        if stats {
            self.out.key(
                "access_log",
                string("stdout"),
                Some("slapd's 'stats' lines: one line per operation (docs/monitoring.md).".into()),
            );
            self.note(
                d,
                Kind::Difference,
                "'stats' becomes access_log = \"stdout\" (one line per operation, in Linden's format, to the journal under systemd) and log_level info; other levels map to warn/info/debug/trace",
            );
        }
    }

    fn authz(&mut self, d: &Directive) {
        let (Some(m), Some(r)) = (d.args.first(), d.args.get(1)) else {
            self.note(d, Kind::NotCarried, "needs a pattern and a replacement");
            return;
        };
        let lower = m.to_ascii_lowercase();
        if [
            "cn=plain",
            "cn=digest",
            "cn=gssapi",
            "cn=scram",
            "cn=cram",
            "cn=otp",
        ]
        .iter()
        .any(|mech| lower.contains(mech))
        {
            self.note(
                d,
                Kind::Difference,
                "Linden maps only SASL EXTERNAL identities (TLS client certificates, ldapi peers) this way; SASL PLAIN maps u:NAME to the entry with that uid",
            );
        }
        self.out.table(
            "authz_map",
            vec![("match", string(m)), ("replace", string(r))],
            Some(format!("{}: authz-regexp", d.loc)),
        );
    }

    fn security(&mut self, d: &Directive) {
        for w in &d.args {
            let (k, v) = w.split_once('=').unwrap_or((w, "0"));
            let n: u64 = v.parse().unwrap_or(0);
            if n == 0 {
                continue;
            }
            match k.to_ascii_lowercase().as_str() {
                "ssf" | "tls" | "transport" => {
                    self.out.key("require_tls_for_bind", Value::Boolean(true), None);
                    self.out.key("require_tls_for_writes", Value::Boolean(true), None);
                    self.note(
                        d,
                        Kind::Difference,
                        format!("'{w}': Linden requires TLS for binds and writes (require_tls_for_bind, require_tls_for_writes) but not for searches, and counts no strength"),
                    );
                }
                "simple_bind" => {
                    self.out.key("require_tls_for_bind", Value::Boolean(true), None);
                }
                "update_ssf" | "update_tls" | "update_transport" => {
                    self.out.key("require_tls_for_writes", Value::Boolean(true), None);
                }
                _ => self.note(
                    d,
                    Kind::NotCarried,
                    format!("'{w}' has no equivalent (Linden's TLS requirements: require_tls_for_bind, require_tls_for_writes)"),
                ),
            }
        }
    }

    fn require(&mut self, d: &Directive) {
        for w in &d.args {
            match w.to_ascii_lowercase().as_str() {
                "none" => {}
                "ldapv3" => self.note(d, Kind::NotNeeded, "Linden speaks LDAPv3 only"),
                "bind" | "authc" => self.note(
                    d,
                    Kind::NotCarried,
                    format!("'require {w}': Linden lets anonymous clients search as far as the [[access]] rules allow (and never write): give anonymous no rights there to the same effect"),
                ),
                other => self.note(d, Kind::NotCarried, format!("'require {other}' has no equivalent")),
            }
        }
    }

    fn allow(&mut self, d: &Directive) {
        for w in &d.args {
            let why = match (d.name.as_str(), w.to_ascii_lowercase().as_str()) {
                ("allow", "none") | ("disallow", "none") => continue,
                ("allow", "bind_v2") => "Linden speaks LDAPv3 only".to_string(),
                ("allow", "update_anon") => {
                    "Linden refuses every write from anonymous clients (strongerAuthRequired)".into()
                }
                ("allow", "bind_anon_cred" | "bind_anon_dn") => {
                    "Linden treats a bind with an empty DN as anonymous whatever the password".into()
                }
                ("disallow", "bind_anon") => "Linden always accepts anonymous binds; deny anonymous everything in [[access]] instead".into(),
                ("disallow", "bind_simple") => "Linden always accepts simple binds (require_tls_for_bind refuses them without TLS)".into(),
                ("disallow", "tls_2_anon" | "tls_authc") => "no equivalent".into(),
                (_, other) => format!("'{other}' has no equivalent"),
            };
            self.note(d, Kind::NotCarried, why);
        }
    }

    fn password_hash(&mut self, d: &Directive) {
        let first = d.arg().trim_matches(|c| c == '{' || c == '}');
        match first.parse::<pwhash::Scheme>() {
            Ok(s) => {
                self.out.key("password_hash", string(s.name()), None);
                if d.args.len() > 1 {
                    self.note(d, Kind::Difference, "Linden stores one hash per password: the first scheme is used");
                }
            }
            Err(_) => self.note(
                d,
                Kind::NotCarried,
                format!("Linden has no {{{first}}} scheme (it has ARGON2, PBKDF2-SHA512, CRYPT and the SSHA/SHA family); its default ARGON2 applies"),
            ),
        }
    }

    fn schemas(&mut self, cfg: &SlapdConfig) {
        let mut bundles: Vec<String> = self.module_schemas.clone();
        let mut files: Vec<String> = Vec::new();
        for s in &cfg.schemas {
            let (name, text) = match s {
                Schema::File { path, .. } => (
                    path.file_stem()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    std::fs::read_to_string(path).ok(),
                ),
                Schema::Inline { name, text, .. } => (name.clone(), Some(text.clone())),
            };
            let lower = name.to_ascii_lowercase();
            if BUILTIN.contains(&lower.as_str()) {
                continue;
            }
            let bundle_name = if lower.contains("openssh") {
                "openssh-lpk".to_string()
            } else {
                lower.clone()
            };
            if let Some(b) = schema::bundle(&bundle_name) {
                let same = text
                    .as_deref()
                    .is_none_or(|t| oids(t).iter().all(|o| oids(b.text).contains(o)));
                if same {
                    if !bundles.contains(&bundle_name) {
                        bundles.push(bundle_name);
                    }
                    continue;
                }
                self.report.add(
                    s.loc(),
                    format!("schema {name}"),
                    Kind::Difference,
                    format!("defines types the bundled '{bundle_name}' has not: carried as a file instead of the bundle"),
                );
            }
            match s {
                Schema::File { path, .. } => {
                    let p = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                    files.push(p.display().to_string());
                }
                Schema::Inline { text, .. } => {
                    let file: String = format!(
                        "{}.schema",
                        name.chars()
                            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                                c
                            } else {
                                '_'
                            })
                            .collect::<String>()
                    );
                    self.out.files.push((file.clone(), text.clone()));
                    files.push(file);
                }
            }
        }
        if !bundles.is_empty() {
            self.out.key(
                "schemas",
                strings(&bundles),
                Some("slapd's schemas that Linden ships (linden schema list); core, cosine, inetorgperson and nis are built in.".into()),
            );
        }
        if !files.is_empty() {
            self.out.key("schema_files", strings(&files), None);
        }
    }

    fn databases(&mut self, cfg: &SlapdConfig, data: &[&Database]) {
        for db in &cfg.databases {
            if db.holds_data() {
                continue;
            }
            let d = Directive {
                name: "database".into(),
                args: vec![db.kind.clone()],
                loc: db.loc.clone(),
            };
            let why = match db.kind.as_str() {
                "config" => "Linden's configuration is this file; cn=config is not served (its rootdn and rules are not carried)".to_string(),
                "monitor" => "Linden serves cn=Monitor itself, to the administrator and monitor_readers".to_string(),
                other => format!("back-{other}: no equivalent"),
            };
            self.note(&d, Kind::NotNeeded, why);
        }
        let mut suffixes: Vec<String> = Vec::new();
        let mut admin: Option<(String, Loc)> = None;
        for db in data {
            if !matches!(db.kind.as_str(), "mdb" | "hdb" | "bdb" | "ldif" | "wt") {
                let d = Directive {
                    name: "database".into(),
                    args: vec![db.kind.clone()],
                    loc: db.loc.clone(),
                };
                self.note(
                    &d,
                    Kind::NotCarried,
                    format!("back-{} has no equivalent: Linden stores its entries itself; its suffixes are carried as Linden's own", db.kind),
                );
            }
            for d in &db.directives {
                match d.name.as_str() {
                    "suffix" => suffixes.push(d.arg().to_string()),
                    "rootdn" => match &admin {
                        None => {
                            admin = Some((d.arg().to_string(), d.loc.clone()));
                            self.out.key("admin_dn", string(d.arg()), None);
                        }
                        Some((a, at)) if !a.eq_ignore_ascii_case(d.arg()) => {
                            let why = format!("Linden has one administrator for every suffix: {a} (from {at}) was taken");
                            self.note(d, Kind::Ambiguous, why);
                        }
                        _ => {}
                    },
                    "rootpw" => self.rootpw(d),
                    "index" => self.index(d),
                    "sizelimit" | "timelimit" => self.limit(d, true),
                    "limits" => self.note(
                        d,
                        Kind::NotCarried,
                        "per-identity limits have no equivalent: size_limit/time_limit apply to bound users, *_anonymous to anonymous ones, and the administrator has none",
                    ),
                    "access" => {}
                    "syncrepl" => self.syncrepl(d),
                    "updateref" => {
                        let mut refs: Vec<String> = self
                            .out
                            .keys
                            .iter()
                            .find(|(k, _, _)| k == "updateref")
                            .and_then(|(_, v, _)| v.as_array().cloned())
                            .unwrap_or_default()
                            .iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect();
                        refs.push(d.arg().to_string());
                        self.out.key("updateref", strings(&refs), None);
                    }
                    "mirrormode" | "multiprovider" | "multimaster" => {
                        if d.flag() {
                            self.out.key("multi_provider", Value::Boolean(true), None);
                            if d.name == "mirrormode" {
                                self.note(
                                    d,
                                    Kind::Difference,
                                    "mirror mode becomes multi_provider: Linden takes writes on every provider and resolves conflicts by CSN (send writes to one at a time, as with mirror mode, to avoid conflicts)",
                                );
                            }
                        }
                    }
                    "directory" => self.note(
                        d,
                        Kind::NotNeeded,
                        "Linden keeps its data in the 'data' directory (default ./linden-data; give --data or data = ...): load it with slapcat | linden import",
                    ),
                    "readonly" if !d.flag() => {}
                    "readonly" => self.note(d, Kind::NotCarried, "a read-only database has no equivalent (a consumer with no provider role is read-only)"),
                    "lastmod" if d.flag() => {}
                    "monitoring" | "maxsize" | "checkpoint" | "dbnosync" | "envflags"
                    | "mode" | "dbpagesize" | "maxreaders" | "maxentrysize" | "rtxnsize"
                    | "searchstack" | "cachesize" | "idlcachesize" | "dncachesize"
                    | "cachefree" | "dbconfig" | "multival" | "add_content_acl"
                    | "schemadn" | "hidden" | "lastbind" | "lastbindprecision" => self.note(
                        d,
                        Kind::NotNeeded,
                        "back-mdb tuning: Linden's storage has none of it (its durability is one fsync per batch of writes)",
                    ),
                    _ => self.note(d, Kind::NotCarried, "no equivalent in Linden"),
                }
            }
        }
        if suffixes.is_empty() {
            self.out.header.push(
                "slapd has no database with a suffix: Linden's default suffix applies.".into(),
            );
        } else {
            self.out.key("suffix", strings(&suffixes), None);
            // Keep suffix and admin first.
            let pos = self.out.keys.iter().position(|(k, _, _)| k == "suffix");
            if let Some(p) = pos {
                let item = self.out.keys.remove(p);
                self.out.keys.insert(0, item);
            }
        }
        if admin.is_none() {
            self.out.header.push(
                "slapd's databases have no rootdn: Linden's admin_dn default applies (set admin_dn).".into(),
            );
        }
        let mut overlays: Vec<&Overlay> = cfg.frontend.overlays.iter().collect();
        for db in data {
            overlays.extend(db.overlays.iter());
        }
        for o in overlays {
            self.overlay(o, data);
        }
    }

    fn rootpw(&mut self, d: &Directive) {
        if self.out.has("admin_password") {
            self.note(
                d,
                Kind::Ambiguous,
                "Linden has one administrator password: the first rootpw was taken",
            );
            return;
        }
        let pw = d.arg();
        self.out.key(
            "admin_password",
            string(pw),
            Some("slapd's rootpw. A {SCHEME} hash is kept as it is; keep this file private (mode 0600).".into()),
        );
        if !pwhash::is_hashed(pw.as_bytes()) {
            let why = if pw.starts_with('{') {
                "a hash scheme Linden does not know: it would be taken as a cleartext password; set a new admin_password"
            } else {
                "a cleartext password: Linden hashes it at start (it is never written), but it stays readable in this file"
            };
            self.note(d, Kind::Difference, why);
        }
    }

    fn index(&mut self, d: &Directive) {
        let Some(attrs) = d.args.first() else {
            self.note(d, Kind::NotCarried, "names no attribute");
            return;
        };
        let mut kinds = Vec::new();
        let mut dropped = Vec::new();
        for k in d
            .args
            .get(1)
            .map(|s| s.split(',').map(str::trim).collect::<Vec<_>>())
            .unwrap_or_default()
        {
            let kind = match k.to_ascii_lowercase().as_str() {
                "pres" => "pres",
                "eq" | "equality" => "eq",
                "sub" | "substr" | "substring" => "sub",
                "subinitial" => "subinitial",
                "subany" => "subany",
                "subfinal" => "subfinal",
                "approx" => {
                    dropped.push("approx (Linden's approximate match scans the candidates; an eq index narrows them)");
                    "eq"
                }
                "nolang" | "nosubtypes" => {
                    dropped.push("nolang/nosubtypes (Linden indexes the type named)");
                    continue;
                }
                "notags" | "" => continue,
                _ => {
                    dropped.push("an unknown index type");
                    continue;
                }
            };
            if !kinds.contains(&kind.to_string()) {
                kinds.push(kind.to_string());
            }
        }
        if !dropped.is_empty() {
            let why = format!("carried without {}", dropped.join(", "));
            self.note(d, Kind::Difference, why);
        }
        for a in attrs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            if a.eq_ignore_ascii_case("default") {
                self.index_default = Some(kinds.clone());
                continue;
            }
            let ks = if kinds.is_empty() {
                match &self.index_default {
                    Some(k) => k.clone(),
                    None => {
                        self.note(
                            d,
                            Kind::Ambiguous,
                            "no index type and no 'index default' before it: eq was taken",
                        );
                        vec!["eq".into()]
                    }
                }
            } else {
                kinds.clone()
            };
            let n = self.indexes.len();
            let e = self
                .indexes
                .entry(a.to_string())
                .or_insert_with(|| (n, Vec::new()));
            for k in ks {
                if !e.1.contains(&k) {
                    e.1.push(k);
                }
            }
        }
    }

    fn limit(&mut self, d: &Directive, _per_db: bool) {
        let is_size = d.name == "sizelimit";
        let mut value: Option<u64> = None;
        for w in &d.args {
            let (k, v) = match w.split_once('=') {
                Some((k, v)) => (k.to_ascii_lowercase(), v),
                None => (String::new(), w.as_str()),
            };
            if k.ends_with(".hard")
                || k.ends_with(".unchecked")
                || k.ends_with(".pr")
                || k.ends_with(".prtotal")
            {
                self.note(
                    d,
                    Kind::Difference,
                    format!("'{w}': Linden has one limit (the soft one), which a client may lower but not raise"),
                );
                continue;
            }
            let n = if v.eq_ignore_ascii_case("unlimited") || v == "-1" {
                Some(0)
            } else {
                v.parse::<u64>().ok()
            };
            match n {
                Some(n) => value = Some(n),
                None => self.note(d, Kind::NotCarried, format!("'{w}' is not a limit")),
            }
        }
        let Some(n) = value else { return };
        let slot = if is_size {
            &mut self.limits.size
        } else {
            &mut self.limits.time
        };
        match slot {
            Some((old, at)) if *old != n => {
                let why =
                    format!("Linden's limits apply to every suffix: {old} from {at} was taken");
                self.note(d, Kind::Ambiguous, why);
            }
            Some(_) => {}
            None => *slot = Some((n, d.loc.clone())),
        }
    }

    fn limits(&mut self, cfg: &SlapdConfig) {
        // The databases' own limits were read first (they win in slapd); the frontend's
        // apply where a database has none.
        for d in &cfg.frontend.directives {
            if matches!(d.name.as_str(), "sizelimit" | "timelimit") {
                let is_size = d.name == "sizelimit";
                let taken = if is_size {
                    self.limits.size.is_some()
                } else {
                    self.limits.time.is_some()
                };
                if !taken {
                    self.limit(d, false);
                }
            } else if d.name == "limits" {
                self.note(d, Kind::NotCarried, "per-identity limits have no equivalent: size_limit/time_limit apply to bound users, *_anonymous to anonymous ones, and the administrator has none");
            } else if d.name != "access" {
                self.note(d, Kind::NotCarried, "no equivalent in Linden");
            }
        }
        let size = self
            .limits
            .size
            .as_ref()
            .map(|(n, _)| *n)
            .unwrap_or(SLAPD_SIZELIMIT);
        let time = self
            .limits
            .time
            .as_ref()
            .map(|(n, _)| *n)
            .unwrap_or(SLAPD_TIMELIMIT);
        let why = "slapd's limit for everyone but the rootdn (slapd's defaults: 500 entries, 3600 seconds)";
        self.out.key("size_limit", int(size), Some(why.into()));
        self.out.key("size_limit_anonymous", int(size), None);
        self.out.key("time_limit", int(time), None);
        self.out.key("time_limit_anonymous", int(time), None);
    }

    fn server_id(&mut self, opts: &Options) {
        let ids = std::mem::take(&mut self.server_ids);
        let parse = |s: &str| -> Option<u16> {
            let n = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                u16::from_str_radix(h, 16).ok()
            } else {
                s.parse().ok()
            }?;
            (n <= 4095).then_some(n)
        };
        let mut chosen: Option<u16> = None;
        let listen: Vec<String> = opts
            .listen
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        for d in &ids {
            let Some(n) = parse(d.arg()) else {
                self.note(d, Kind::NotCarried, "not a server id (0 to 4095)");
                continue;
            };
            match d.args.get(1) {
                None => chosen = chosen.or(Some(n)),
                Some(url) if listen.contains(&url.trim_end_matches('/').to_ascii_lowercase()) => {
                    chosen = Some(n)
                }
                Some(_) => {}
            }
        }
        if chosen.is_none() {
            if let Some(d) = ids.iter().find(|d| parse(d.arg()).is_some()) {
                chosen = parse(d.arg());
                if ids.len() > 1 {
                    self.note(
                        d,
                        Kind::Ambiguous,
                        "several serverIDs with URLs and none matches --listen: this one was taken; each Linden server needs its own server_id",
                    );
                }
            }
        }
        if let Some(n) = chosen {
            self.out.key("server_id", int(u64::from(n)), None);
        }
    }

    fn overlay(&mut self, o: &Overlay, data: &[&Database]) {
        let ol = Directive {
            name: "overlay".into(),
            args: vec![o.name.clone()],
            loc: o.loc.clone(),
        };
        match o.name.as_str() {
            "memberof" => {
                self.out.key("memberof", Value::Boolean(true), None);
                let (mut oc, mut ad) = ("groupOfNames".to_string(), "member".to_string());
                for d in &o.directives {
                    match d.name.as_str() {
                        "memberof-group-oc" => oc = d.arg().to_string(),
                        "memberof-member-ad" => ad = d.arg().to_string(),
                        "memberof-memberof-ad" if d.arg().eq_ignore_ascii_case("memberOf") => {}
                        "memberof-memberof-ad" => self.note(d, Kind::NotCarried, "Linden maintains memberOf only"),
                        "memberof-refint" | "memberof-dn" => self.note(d, Kind::NotNeeded, "Linden's memberof always follows renamed and deleted members, in the same change"),
                        "memberof-dangling" | "memberof-dangling-error" => {
                            if !d.arg().eq_ignore_ascii_case("ignore") {
                                self.note(d, Kind::NotCarried, "Linden ignores member values that name no entry (slapd's default, 'ignore')")
                            }
                        }
                        _ => self.note(d, Kind::NotCarried, "no equivalent in Linden's memberof"),
                    }
                }
                let pair = format!("{oc}:{ad}");
                if !self.memberof_groups.contains(&pair) {
                    self.memberof_groups.push(pair);
                }
            }
            "refint" => {
                for d in &o.directives {
                    match d.name.as_str() {
                        "refint_attributes" => {
                            for a in &d.args {
                                for a in a.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                                    if !self.refint.iter().any(|x| x.eq_ignore_ascii_case(a)) {
                                        self.refint.push(a.to_string());
                                    }
                                }
                            }
                        }
                        "refint_modifiersname" => self.note(d, Kind::NotNeeded, "Linden stamps modifiersName with the requester of the change itself"),
                        "refint_nothing" => self.note(d, Kind::NotCarried, "Linden removes a deleted entry's DN from the attributes; it puts no placeholder value in its place"),
                        _ => self.note(d, Kind::NotCarried, "no equivalent in Linden's refint"),
                    }
                }
                if self.refint.is_empty() {
                    self.note(&ol, Kind::NotCarried, "refint names no attribute");
                }
            }
            "unique" => self.unique(o, data),
            "ppolicy" => {
                self.out.key("ppolicy", Value::Boolean(true), None);
                for d in &o.directives {
                    match d.name.as_str() {
                        "ppolicy_default" => self.out.key("ppolicy_default", string(d.arg()), None),
                        "ppolicy_use_lockout" => self.out.key("ppolicy_use_lockout", Value::Boolean(d.flag()), None),
                        "ppolicy_hash_cleartext" => self.note(d, Kind::NotNeeded, "Linden always hashes a cleartext userPassword a client sends (password_hash)"),
                        _ => self.note(d, Kind::NotCarried, "no equivalent in Linden's ppolicy"),
                    }
                }
            }
            "syncprov" => {
                self.out.key("syncprov", Value::Boolean(true), None);
                for d in &o.directives {
                    match d.name.as_str() {
                        "syncprov-sessionlog" => match d.arg().parse::<u64>() {
                            Ok(n) => self.out.key("syncprov_sessionlog", int(n), None),
                            Err(_) => self.note(d, Kind::NotCarried, "not a number"),
                        },
                        "syncprov-checkpoint" => self.note(d, Kind::NotNeeded, "Linden's contextCSN is kept with each committed batch"),
                        "syncprov-reloadhint" => self.note(d, Kind::NotNeeded, "Linden's provider sets the reload hint as RFC 4533 asks"),
                        "syncprov-nopresent" => self.note(d, Kind::NotCarried, "Linden's provider always sends the present phase when the session log cannot cover a consumer"),
                        _ => self.note(d, Kind::NotCarried, "no equivalent in Linden's syncprov"),
                    }
                }
            }
            "dynlist" => {
                for d in &o.directives {
                    if d.name == "dynlist-attrset" {
                        self.dynlist(d);
                    } else {
                        self.note(
                            d,
                            Kind::NotCarried,
                            "no equivalent in Linden's dynamic groups",
                        );
                    }
                }
            }
            "auditlog" => {
                for d in &o.directives {
                    if d.name == "auditlog" {
                        self.out.key("audit_log", string(d.arg()), None);
                        self.note(d, Kind::Difference, "Linden's audit log is LDIF change records too, with who and when in its own comment lines");
                    }
                }
            }
            "sssvlv" => {
                self.note(
                    &ol,
                    Kind::NotNeeded,
                    "Linden does server-side sorting and virtual list views itself",
                );
                for d in &o.directives {
                    match (d.name.as_str(), d.arg().parse::<u64>()) {
                        ("sssvlv-maxkeys", Ok(n)) if n >= 1 => {
                            self.out.key("max_sort_keys", int(n), None)
                        }
                        ("sssvlv-maxperconn", Ok(n)) if n >= 1 => {
                            self.out.key("max_vlv_contexts", int(n), None)
                        }
                        _ => self.note(
                            d,
                            Kind::NotCarried,
                            "no equivalent (max_sort_entries bounds what a sort holds)",
                        ),
                    }
                }
            }
            other => {
                let why = format!(
                    "the {other} overlay has no equivalent in Linden{}",
                    if o.directives.is_empty() {
                        String::new()
                    } else {
                        format!(" (nor its {} settings)", o.directives.len())
                    }
                );
                self.note(&ol, Kind::NotCarried, why);
            }
        }
    }

    fn unique(&mut self, o: &Overlay, data: &[&Database]) {
        let single = data.len() <= 1;
        let db_suffix = data.first().and_then(|d| d.suffixes().into_iter().next());
        let (mut old_base, mut old_attrs): (Option<String>, Vec<String>) = (None, Vec::new());
        for d in &o.directives {
            match d.name.as_str() {
                "unique_uri" => {
                    let mut words: Vec<&str> =
                        d.args.iter().flat_map(|a| a.split_whitespace()).collect();
                    while let Some(w) = words.first() {
                        if w.eq_ignore_ascii_case("strict") || w.eq_ignore_ascii_case("ignore") {
                            let why = format!("'{w}': Linden's uniqueness has neither mode (empty values are not compared)");
                            self.note(d, Kind::Difference, why);
                            words.remove(0);
                        } else {
                            break;
                        }
                    }
                    let Some(uri) = words.first() else {
                        self.note(d, Kind::NotCarried, "no URI");
                        continue;
                    };
                    match parse_unique_uri(uri) {
                        Ok((base, attrs, scope, filter)) => {
                            if attrs.is_empty() {
                                self.note(
                                    d,
                                    Kind::NotCarried,
                                    "uniqueness of every attribute has no equivalent: list them",
                                );
                                continue;
                            }
                            if filter.is_some() {
                                self.note(d, Kind::NotCarried, "a filter in the URI has no equivalent: the rule is left out rather than widened to every entry");
                                continue;
                            }
                            if !matches!(scope.as_str(), "" | "sub" | "subtree") {
                                self.note(d, Kind::Difference, format!("scope '{scope}' is carried as sub (Linden's rules cover the subtree of base)"));
                            }
                            let base = if base.is_empty() {
                                if single {
                                    None
                                } else {
                                    db_suffix.clone()
                                }
                            } else {
                                Some(base)
                            };
                            self.unique_table(&d.loc, base, attrs);
                        }
                        Err(e) => self.note(d, Kind::NotCarried, e),
                    }
                }
                "unique_base" => old_base = Some(d.arg().to_string()),
                "unique_attributes" => old_attrs.extend(
                    d.args
                        .iter()
                        .flat_map(|a| a.split(','))
                        .map(|a| a.trim().to_string())
                        .filter(|a| !a.is_empty()),
                ),
                "unique_strict" => self.note(
                    d,
                    Kind::Difference,
                    "Linden's uniqueness has no strict mode (empty values are not compared)",
                ),
                "unique_ignore" => self.note(
                    d,
                    Kind::NotCarried,
                    "uniqueness of every attribute but some has no equivalent: list the attributes",
                ),
                _ => self.note(d, Kind::NotCarried, "no equivalent in Linden's unique"),
            }
        }
        if !old_attrs.is_empty() {
            self.unique_table(&o.loc, old_base, old_attrs);
        }
    }

    fn unique_table(&mut self, loc: &Loc, base: Option<String>, attrs: Vec<String>) {
        let mut f = vec![("attributes", strings(&attrs))];
        if let Some(b) = base {
            f.push(("base", string(&b)));
        }
        self.out.table("unique", f, Some(format!("{loc}: unique")));
    }

    fn dynlist(&mut self, d: &Directive) {
        // dynlist-attrset <group-oc> [<URI>] <URL-ad> [[<mapped-ad>:]<member-ad>[+<memberOf-ad>[@<oc>[*]]] ...]
        let mut words = d.args.iter().map(String::as_str);
        let Some(oc) = words.next() else {
            self.note(d, Kind::NotCarried, "no object class");
            return;
        };
        let mut rest: Vec<&str> = words.collect();
        if rest
            .first()
            .is_some_and(|w| w.to_ascii_lowercase().starts_with("ldap://"))
        {
            self.note(
                d,
                Kind::NotCarried,
                "a URI restricting the dynamic groups has no equivalent",
            );
            return;
        }
        if rest.is_empty() {
            self.note(d, Kind::NotCarried, "no URL attribute");
            return;
        }
        let url_ad = rest.remove(0);
        let mut fields = vec![
            ("object_class", string(oc)),
            ("url_attribute", string(url_ad)),
        ];
        if let Some(m) = rest.first() {
            if m.contains(':') || rest.len() > 1 {
                self.note(
                    d,
                    Kind::NotCarried,
                    "mapped attributes and several member attributes have no equivalent",
                );
                return;
            }
            let (member, member_of) = m.split_once('+').unwrap_or((m, ""));
            fields.push(("member_attribute", string(member)));
            if !member_of.is_empty() {
                let (mo, _) = member_of.split_once('@').unwrap_or((member_of, ""));
                fields.push(("member_of_attribute", string(mo)));
            }
        }
        self.out.table(
            "dynlist",
            fields,
            Some(format!("{}: dynlist-attrset", d.loc)),
        );
        self.note(
            d,
            Kind::Difference,
            "written as [[dynlist]], a table of Linden releases with issue 31 (dynamic groups); an older Linden's check-config refuses it",
        );
    }

    fn syncrepl(&mut self, d: &Directive) {
        let mut f: Vec<(&str, Value)> = Vec::new();
        let mut method = "simple".to_string();
        let mut mech = String::new();
        for w in &d.args {
            let Some((k, v)) = w.split_once('=') else {
                self.note(d, Kind::NotCarried, format!("'{w}' is not key=value"));
                continue;
            };
            let k = k.to_ascii_lowercase();
            match k.as_str() {
                "rid" => match v.parse::<u64>() {
                    Ok(n) => f.push(("rid", int(n))),
                    Err(_) => self.note(d, Kind::NotCarried, format!("rid '{v}' is not a number")),
                },
                "provider" => f.push(("provider", string(v))),
                "searchbase" => f.push(("search_base", string(v))),
                "scope" => f.push(("scope", string(v))),
                "filter" => f.push(("filter", string(v))),
                "attrs" => f.push(("attrs", strings(v.split(',').map(str::trim).filter(|a| !a.is_empty())))),
                "type" => f.push(("type", string(v))),
                "interval" => f.push(("interval", string(v))),
                "retry" => f.push(("retry", string(v))),
                "timeout" => match v.parse::<u64>() {
                    Ok(n) if n > 0 => f.push(("timeout", int(n))),
                    _ => {}
                },
                "bindmethod" => method = v.to_ascii_lowercase(),
                "saslmech" => mech = v.to_ascii_lowercase(),
                "binddn" => f.push(("bind_dn", string(v))),
                "credentials" => f.push(("bind_password", string(v))),
                "starttls" => f.push(("starttls", string(v))),
                "tls_cacert" => f.push(("tls_ca", string(v))),
                "tls_cert" => f.push(("tls_cert", string(v))),
                "tls_key" => f.push(("tls_key", string(v))),
                "tls_reqcert" if matches!(v.to_ascii_lowercase().as_str(), "demand" | "hard") => {}
                "tls_reqcert" => self.note(d, Kind::Difference, format!("tls_reqcert={v}: Linden's consumer always verifies the provider's certificate")),
                "schemachecking" => {
                    if v.eq_ignore_ascii_case("off") {
                        self.note(d, Kind::Difference, "schemachecking=off: Linden's consumer checks replicated entries against its schema")
                    }
                }
                "syncdata" | "logbase" | "logfilter" => self.note(
                    d,
                    Kind::Difference,
                    format!("{k}: delta-syncrepl is not used; Linden's consumer replicates whole entries from the provider's ordinary sync search"),
                ),
                "network-timeout" | "keepalive" | "sizelimit" | "timelimit" | "exattrs"
                | "tls_cacertdir" | "tls_protocol_min" | "tls_cipher_suite" | "tls_crlcheck"
                | "suffixmassage" | "lazycommit" | "strictrefresh" | "manageDSAit" | "realm"
                | "secprops" | "authcid" | "authzid" => self.note(d, Kind::NotCarried, format!("'{k}' has no equivalent in [[syncrepl]]")),
                _ => self.note(d, Kind::NotCarried, format!("'{k}' has no equivalent in [[syncrepl]]")),
            }
        }
        match (method.as_str(), mech.as_str()) {
            ("simple", _) => {}
            ("sasl", "external") => f.push(("bind_method", string("external"))),
            _ => {
                let why = format!("bindmethod={method} saslmech={mech}: Linden's consumer binds simple or SASL EXTERNAL; the consumer is left out");
                self.note(d, Kind::NotCarried, why);
                return;
            }
        }
        self.out
            .table("syncrepl", f, Some(format!("{}: syncrepl", d.loc)));
    }

    fn access(&mut self, cfg: &SlapdConfig, data: &[&Database]) {
        let several = data.len() > 1;
        let frontend: Vec<&Directive> = cfg.frontend.all("access").collect();
        let mut inputs: Vec<Input> = Vec::new();
        let mut defaults: Vec<String> = Vec::new();
        let any = !frontend.is_empty() || data.iter().any(|db| db.all("access").next().is_some());
        let firsts: Vec<Option<String>> = data
            .iter()
            .map(|db| db.suffixes().into_iter().next())
            .collect();
        for (db, suffix) in data.iter().zip(&firsts) {
            let own: Vec<&Directive> = db.all("access").collect();
            if own.is_empty() && frontend.is_empty() && any {
                if let Some(s) = suffix {
                    defaults.push(s.clone());
                }
            }
            for directive in own {
                inputs.push(Input {
                    directive,
                    confine: if several { suffix.as_deref() } else { None },
                });
            }
        }
        for directive in frontend {
            inputs.push(Input {
                directive,
                confine: None,
            });
        }
        // `attrs=@class` needs the classes: the built-in schema and the bundles enabled.
        let bundles: Vec<String> = self
            .out
            .keys
            .iter()
            .find(|(k, _, _)| k == "schemas")
            .and_then(|(_, v, _)| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        let schema =
            schema::Schema::with_bundles(&bundles).unwrap_or_else(|_| schema::Schema::builtin());
        let mut rules = acl::translate(&inputs, &schema, self.report);
        for s in defaults {
            rules.push(acl::Rule {
                target: acl::Target {
                    dn: Some((s, acl::Scope::Subtree)),
                    ..acl::Target::default()
                },
                by: vec![acl::Clause {
                    who: "*".into(),
                    rights: acl::rights::AUTH
                        | acl::rights::COMPARE
                        | acl::rights::SEARCH
                        | acl::rights::READ,
                }],
                loc: Loc {
                    file: cfg.source.clone(),
                    line: 0,
                },
            });
        }
        if !any {
            self.out.table(
                "access",
                vec![(
                    "by",
                    Value::Array(vec![clause("*", &["auth", "compare", "search", "read"])]),
                )],
                Some(
                    "slapd has no access rules: its default, 'access to * by * read', as a rule."
                        .into(),
                ),
            );
            return;
        }
        for r in rules {
            let mut f: Vec<(&str, Value)> = Vec::new();
            if let Some((dn, scope)) = &r.target.dn {
                f.push(("dn", string(dn)));
                f.push(("scope", string(scope.name())));
            }
            if let Some(fl) = &r.target.filter {
                f.push(("filter", string(fl)));
            }
            if let Some(a) = &r.target.attrs {
                f.push(("attrs", strings(a)));
            }
            let by: Vec<Value> =
                r.by.iter()
                    .map(|c| clause(&c.who, &r.right_names(c)))
                    .collect();
            f.push(("by", Value::Array(by)));
            let comment = if r.loc.line == 0 {
                "slapd's default for a database without rules: read for everyone".to_string()
            } else {
                format!("{}: access", r.loc)
            };
            self.out.table("access", f, Some(comment));
        }
    }

    fn finish(&mut self) {
        if let Some((verify, at)) = self.tls_verify.clone() {
            let d = Directive {
                name: "tlsverifyclient".into(),
                args: vec![verify.clone()],
                loc: at,
            };
            match verify.as_str() {
                "never" => {}
                "allow" | "try" => {}
                "demand" | "hard" | "true" => self.note(&d, Kind::Difference, "Linden asks for a client certificate (tls_client_ca) but does not refuse a connection without one"),
                _ => self.note(&d, Kind::NotCarried, "unknown value"),
            }
            if verify != "never" {
                match self.tls_ca.take() {
                    Some((ca, _)) => self.out.key("tls_client_ca", string(&ca), None),
                    None => self.note(
                        &d,
                        Kind::NotCarried,
                        "no TLSCACertificateFile to verify client certificates with",
                    ),
                }
            }
        }
        if let Some((ca, loc)) = self.tls_ca.take() {
            let d = Directive {
                name: "tlscacertificatefile".into(),
                args: vec![ca],
                loc,
            };
            self.note(&d, Kind::NotCarried, "slapd verifies no client certificate (TLSVerifyClient never): Linden asks for none; a consumer's CA is tls_ca in [[syncrepl]]");
        }
        if !self.indexes.is_empty() {
            let mut v: Vec<(&String, &(usize, Vec<String>))> = self.indexes.iter().collect();
            v.sort_by_key(|(_, (n, _))| *n);
            let mut t = toml::Table::new();
            for (a, (_, kinds)) in v {
                t.insert(a.clone(), strings(kinds));
            }
            self.out.key(
                "indexes",
                Value::Table(t),
                Some("slapd's index lines (attribute = kinds).".into()),
            );
        }
        if !self.memberof_groups.is_empty() {
            self.out.key(
                "memberof_groups",
                strings(self.memberof_groups.clone()),
                None,
            );
        }
        if !self.refint.is_empty() {
            self.out.key("refint", strings(self.refint.clone()), None);
        }
        if self.out.has("syncprov") && !self.out.has("server_id") && self.out.has("multi_provider")
        {
            self.out
                .header
                .push("multi_provider needs a non-zero server_id: set one per server.".into());
        }
    }
}

fn clause(who: &str, rights: &[&str]) -> Value {
    let mut t = toml::Table::new();
    t.insert("who".into(), string(who));
    t.insert("rights".into(), strings(rights));
    Value::Table(t)
}

/// A `{ who, rights }` clause as inline TOML, who first.
fn clause_text(v: &Value) -> Option<String> {
    let t = v.as_table()?;
    let (who, rights) = (t.get("who")?, t.get("rights")?);
    (t.len() == 2).then(|| format!("{{ who = {who}, rights = {rights} }}"))
}

/// `ldap:///BASE?ATTRS?SCOPE?FILTER` of unique_uri: (base, attributes, scope, filter).
fn parse_unique_uri(uri: &str) -> Result<(String, Vec<String>, String, Option<String>), String> {
    let rest = uri
        .strip_prefix("ldap://")
        .ok_or_else(|| format!("'{uri}' is not an ldap:// URI"))?;
    let rest = rest.split_once('/').map(|(_, r)| r).unwrap_or("");
    let mut parts = rest.splitn(4, '?');
    let base = percent_decode(parts.next().unwrap_or(""));
    let attrs = parts
        .next()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect();
    let scope = parts.next().unwrap_or("").to_ascii_lowercase();
    let filter = parts.next().filter(|f| !f.is_empty()).map(percent_decode);
    Ok((base, attrs, scope, filter))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The address of an ldap[s]:// URL's host part (`rest` is after the scheme, lower case).
fn socket(url: &str, rest: &str, default_port: u16) -> anyhow::Result<SocketAddr> {
    let host = rest.split('/').next().unwrap_or("");
    let host = percent_decode(host);
    if host.is_empty() {
        return Ok(SocketAddr::from(([0, 0, 0, 0], default_port)));
    }
    let with_port = if host.starts_with('[') {
        if host.contains("]:") {
            host.clone()
        } else {
            format!("{host}:{default_port}")
        }
    } else if host.contains(':') {
        host.clone()
    } else {
        format!("{host}:{default_port}")
    };
    let with_port = with_port.replacen("localhost:", "127.0.0.1:", 1);
    if let Ok(a) = with_port.parse() {
        return Ok(a);
    }
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            anyhow::anyhow!("--listen: cannot resolve the host of '{url}'; give an address")
        })
}

/// The OIDs a .schema text defines (attribute types and object classes).
fn oids(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    for kw in ["attributetype", "objectclass"] {
        let mut from = 0;
        while let Some(i) = lower[from..].find(kw) {
            let start = from + i + kw.len();
            from = start;
            let rest = lower[start..].trim_start();
            let Some(rest) = rest.strip_prefix('(') else {
                continue;
            };
            if let Some(oid) = rest.split_whitespace().next() {
                out.push(oid.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migrate_text(conf: &str, listen: Option<&str>) -> (String, Report) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("slapd.conf");
        std::fs::write(&p, conf.replace("@DIR@", &dir.path().display().to_string())).unwrap();
        let m = super::super::migrate(
            &p,
            &Options {
                listen: listen.map(str::to_string),
            },
        )
        .unwrap();
        (m.text, m.report)
    }

    /// Every key written is one of Linden's (or one issue 31 adds), and the file passes
    /// check-config.
    #[test]
    fn acls_conf_uses_linden_keys_and_checks() {
        let (text, rep) = migrate_text(
            include_str!("../../tests/migrate/acls.conf"),
            Some("ldap://127.0.0.1:3389/ ldaps:/// ldapi://%2Ftmp%2Fx.sock"),
        );
        let table: toml::Table = text.parse().expect("TOML");
        for k in table.keys() {
            assert!(
                server::config::key(k).is_some() || PENDING_KEYS.contains(&k.as_str()),
                "{k} is not a key"
            );
        }
        assert_eq!(table["size_limit"].as_integer(), Some(200));
        assert_eq!(table["server_id"].as_integer(), Some(7));
        assert_eq!(
            table["listen"].as_array().unwrap()[0].as_str(),
            Some("127.0.0.1:3389")
        );
        assert_eq!(
            table["ldaps_listen"].as_array().unwrap()[0].as_str(),
            Some("0.0.0.0:636")
        );
        assert_eq!(table["ldapi"].as_str(), Some("/tmp/x.sock"));
        assert_eq!(
            table["admin_password"].as_str(),
            Some("{SSHA}mxAcnA9cX4Ct8ErGbRtCJnrSan8GGczn")
        );
        let idx = table["indexes"].as_table().unwrap();
        assert_eq!(idx["objectClass"].as_array().unwrap().len(), 1);
        assert_eq!(idx["member"].as_array().unwrap()[0].as_str(), Some("eq"));
        assert_eq!(idx["cn"].as_array().unwrap().len(), 2);
        assert_eq!(
            table["memberof_groups"].as_array().unwrap()[0].as_str(),
            Some("groupOfNames:member")
        );
        assert_eq!(
            table["refint"].as_array().unwrap()[0].as_str(),
            Some("member")
        );
        assert_eq!(table["access"].as_array().unwrap().len(), 5);
        let unique = &table["unique"].as_array().unwrap()[0];
        assert_eq!(unique["base"].as_str(), Some("ou=people,dc=example,dc=com"));
        assert_eq!(table["ppolicy_use_lockout"].as_bool(), Some(true));
        assert_eq!(table["syncprov_sessionlog"].as_integer(), Some(100));
        // `moduleload ppolicy` brings the schema in slapd 2.5, overlay or not.
        assert_eq!(
            table["schemas"].as_array().unwrap()[0].as_str(),
            Some("ppolicy")
        );
        // moduleload, pidfile, directory, maxsize, checkpoints, hash_cleartext, memberof-refint
        assert!(
            rep.of(Kind::NotNeeded).count() >= 10,
            "{}",
            rep.render("", "")
        );
        assert_eq!(
            rep.of(Kind::NotCarried).count(),
            0,
            "{}",
            rep.render("", "")
        );
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("linden.toml");
        // The ldapi path and the addresses are fine for a check.
        std::fs::write(&out, &text).unwrap();
        let args = crate::cli::ServeArgs {
            config: Some(out),
            ..Default::default()
        };
        assert_eq!(crate::check_problems(&args), Vec::<String>::new());
    }

    #[test]
    fn everything_else_is_reported_with_its_line() {
        let conf = "\
include /nonexistent/custom.schema
TLSCipherSuite HIGH
TLSCertificateFile /c.pem
TLSCertificateKeyFile /k.pem
TLSCACertificateFile /ca.pem
TLSVerifyClient demand
authz-regexp \"uid=([^,]*),cn=plain,cn=auth\" \"uid=$1,ou=people,dc=x\"
security ssf=128 update_ssf=0
require authc
referral ldap://root.example.com
loglevel stats
database mdb
suffix dc=x
rootdn cn=admin,dc=x
rootpw secret
index mail approx
limits users size=10
syncrepl rid=5 provider=ldap://p:389 searchbase=dc=x bindmethod=simple binddn=cn=r,dc=x credentials=pw type=refreshAndPersist retry=\"5 +\" interval=00:00:05:00 logbase=cn=log
mirrormode on
overlay accesslog
logdb cn=log
overlay dynlist
dynlist-attrset groupOfURLs memberURL member+memberOf
database mdb
suffix dc=y
rootdn cn=other,dc=y
";
        let (text, rep) = migrate_text(conf, None);
        let table: toml::Table = text.parse().expect("TOML");
        assert_eq!(table["suffix"].as_array().unwrap().len(), 2);
        assert_eq!(table["admin_dn"].as_str(), Some("cn=admin,dc=x"));
        assert_eq!(table["tls_client_ca"].as_str(), Some("/ca.pem"));
        assert_eq!(table["require_tls_for_bind"].as_bool(), Some(true));
        assert_eq!(table["multi_provider"].as_bool(), Some(true));
        assert_eq!(table["access_log"].as_str(), Some("stdout"));
        assert_eq!(
            table["schema_files"].as_array().unwrap()[0].as_str(),
            Some("/nonexistent/custom.schema")
        );
        let s = &table["syncrepl"].as_array().unwrap()[0];
        assert_eq!(s["retry"].as_str(), Some("5 +"));
        assert_eq!(s["bind_password"].as_str(), Some("pw"));
        let d = &table["dynlist"].as_array().unwrap()[0];
        assert_eq!(d["member_of_attribute"].as_str(), Some("memberOf"));
        assert_eq!(table["authz_map"].as_array().unwrap().len(), 1);
        // slapd's default for rules: none anywhere → read for everyone.
        assert_eq!(table["access"].as_array().unwrap().len(), 1);
        let rendered = rep.render("slapd.conf", "linden.toml");
        for line in [
            ":2: tlsciphersuite HIGH: ",
            ":6: tlsverifyclient demand: ",
            ":7: authz-regexp ",
            ":8: security ssf=128 update_ssf=0: ",
            ":9: require authc: ",
            ":10: referral ",
            ":15: rootpw secret: ",
            ":16: index mail approx: ",
            ":17: limits users size=10: ",
            ":18: syncrepl rid=5",
            ":19: mirrormode on: ",
            ":20: overlay accesslog: ",
            ":23: dynlist-attrset ",
            ":26: rootdn cn=other,dc=y: ",
        ] {
            assert!(
                rendered.lines().any(|l| l.contains(line)),
                "no report line with '{line}':\n{rendered}"
            );
        }
    }

    /// The corners an OpenLDAP administrator meets: a rootdn outside the suffix, several
    /// databases, `index default`, rules in the frontend and in a database, `by * break`.
    #[test]
    fn several_databases_frontend_rules_and_break() {
        let conf = "\
access to dn.base=\"\" by * read
access to * by users read by * none
database mdb
suffix dc=a
rootdn \"cn=manager,o=outside\"
index default eq,sub
index cn
index uid eq
access to attrs=userPassword by self write by anonymous auth by * break
database mdb
suffix dc=b
rootdn cn=admin,dc=b
index cn pres
";
        let (text, rep) = migrate_text(conf, None);
        let table: toml::Table = text.parse().expect("TOML");
        assert_eq!(
            table["suffix"].as_array().unwrap(),
            &vec![Value::from("dc=a"), Value::from("dc=b")]
        );
        assert_eq!(table["admin_dn"].as_str(), Some("cn=manager,o=outside"));
        let idx = table["indexes"].as_table().unwrap();
        assert_eq!(
            idx["cn"].as_array().unwrap(),
            &vec![Value::from("eq"), Value::from("sub"), Value::from("pres")]
        );
        assert_eq!(idx["uid"].as_array().unwrap(), &vec![Value::from("eq")]);
        let access = table["access"].as_array().unwrap();
        assert_eq!(access.len(), 2, "{text}");
        // The database's rule, confined to its suffix, with the frontend's clauses after its
        // own in place of `by * break`.
        assert_eq!(access[0]["dn"].as_str(), Some("dc=a"));
        assert_eq!(access[0]["scope"].as_str(), Some("subtree"));
        let who: Vec<&str> = access[0]["by"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["who"].as_str().unwrap())
            .collect();
        assert_eq!(who, vec!["self", "anonymous", "users", "*"]);
        // The frontend's rule, for every database.
        assert!(access[1].get("dn").is_none());
        let rendered = rep.render("slapd.conf", "linden.toml");
        for line in [
            ":1: access to dn.base= by * read: Linden lets anyone read the root DSE",
            ":12: rootdn cn=admin,dc=b: Linden has one administrator",
            ":9: access to attrs=userPassword by self write by anonymous auth by * break: never reached",
        ] {
            assert!(rendered.contains(line), "no '{line}' in:\n{rendered}");
        }
    }
}
