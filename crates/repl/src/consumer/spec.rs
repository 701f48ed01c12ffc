//! What one `[[syncrepl]]` table of the configuration asks for, parsed and checked: the
//! provider's URL, the replica id, the search, the mode, the retry schedule, how to bind and
//! how to secure the connection. Each parser returns a one-line message the configuration
//! reader prefixes with the key.

use std::path::PathBuf;
use std::time::Duration;

/// Replica ids are three decimal digits in OpenLDAP's cookies (`rid=NNN`).
pub const MAX_RID: u16 = 999;

/// Default network timeout: connecting, TLS and bind, and each response of the refresh
/// before the first entry (slapd's `network-timeout`/`timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Default refreshOnly interval: one hour (slapd's is one day), short enough for a broken
/// replica to be noticed.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(3600);

/// Largest PDU accepted from a provider (an entry with large values), in bytes.
pub const DEFAULT_MAX_PDU: usize = 64 * 1024 * 1024;

/// A provider's address: `ldap://HOST[:PORT]` or `ldaps://HOST[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderUrl {
    /// TLS from the first byte (ldaps).
    pub ldaps: bool,
    pub host: String,
    pub port: u16,
}

impl ProviderUrl {
    pub fn parse(s: &str) -> Result<ProviderUrl, String> {
        let (ldaps, rest) = if let Some(r) = strip_prefix_ci(s, "ldaps://") {
            (true, r)
        } else if let Some(r) = strip_prefix_ci(s, "ldap://") {
            (false, r)
        } else {
            return Err(format!(
                "'{s}' is not an ldap:// or ldaps:// URL (e.g. ldap://provider.example.com:389)"
            ));
        };
        // A trailing "/" (and a DN after it) names nothing a consumer uses.
        let hostport = rest.split('/').next().unwrap_or("");
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            // [v6]:port
            let (h, after) = h
                .split_once(']')
                .ok_or_else(|| format!("'{s}': unclosed '[' in the host"))?;
            (h, after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(format!("'{s}': no host"));
        }
        let port = match port {
            None | Some("") => {
                if ldaps {
                    636
                } else {
                    389
                }
            }
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("'{s}': invalid port '{p}'"))?,
        };
        Ok(ProviderUrl {
            ldaps,
            host: host.to_string(),
            port,
        })
    }
}

impl std::fmt::Display for ProviderUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.ldaps { "ldaps" } else { "ldap" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| s.get(prefix.len()..))
        .flatten()
}

/// The two modes of RFC 4533.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Poll: a refresh every `interval`, then the connection is closed.
    RefreshOnly { interval: Duration },
    /// A refresh, then the provider sends every change as it happens.
    RefreshAndPersist,
}

impl SyncMode {
    /// `refreshOnly` or `refreshAndPersist` (slapd's `type=`); the interval is separate.
    pub fn parse(s: &str, interval: Duration) -> Result<SyncMode, String> {
        match s.to_ascii_lowercase().as_str() {
            "refreshonly" => Ok(SyncMode::RefreshOnly { interval }),
            "refreshandpersist" => Ok(SyncMode::RefreshAndPersist),
            _ => Err(format!(
                "'{s}' is not a mode (expected refreshOnly or refreshAndPersist)"
            )),
        }
    }
}

/// slapd's `interval=dd:hh:mm:ss`, or a plain number of seconds.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid interval '{s}' (expected seconds or dd:hh:mm:ss)");
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 1 && parts.len() != 4 {
        return Err(bad());
    }
    let mut secs: u64 = 0;
    for (p, unit) in parts.iter().rev().zip([1u64, 60, 3600, 86400]) {
        let n: u64 = p.trim().parse().map_err(|_| bad())?;
        secs = n
            .checked_mul(unit)
            .and_then(|n| secs.checked_add(n))
            .ok_or_else(bad)?;
    }
    if secs == 0 {
        return Err(format!("interval '{s}': must be at least one second"));
    }
    Ok(Duration::from_secs(secs))
}

/// When to try again after a session failed: slapd's `retry="5 5 300 +"` — pairs of an
/// interval in seconds and a number of tries, the last number `+` for "forever". After the
/// last pair without `+`, the consumer gives up (until the server restarts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    /// (interval, tries; `None` = forever).
    pub steps: Vec<(Duration, Option<u32>)>,
}

impl Default for RetrySchedule {
    /// Every 5 seconds 12 times, then every 5 minutes forever: a replica never stops trying.
    fn default() -> Self {
        RetrySchedule {
            steps: vec![
                (Duration::from_secs(5), Some(12)),
                (Duration::from_secs(300), None),
            ],
        }
    }
}

impl RetrySchedule {
    pub fn parse(s: &str) -> Result<RetrySchedule, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        if words.is_empty() || !words.len().is_multiple_of(2) {
            return Err(format!(
                "invalid retry schedule '{s}' (expected pairs of seconds and tries, e.g. \"5 5 300 +\")"
            ));
        }
        let mut steps = Vec::with_capacity(words.len() / 2);
        for (i, pair) in words.chunks(2).enumerate() {
            let (secs, tries) = (pair[0], pair[1]);
            let secs: u64 = secs
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("retry '{s}': '{secs}' is not a number of seconds"))?;
            let tries = if tries == "+" {
                if i + 1 != words.len() / 2 {
                    return Err(format!("retry '{s}': '+' may only end the schedule"));
                }
                None
            } else {
                Some(
                    tries
                        .parse::<u32>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| {
                            format!("retry '{s}': '{tries}' is not a number of tries")
                        })?,
                )
            };
            steps.push((Duration::from_secs(secs), tries));
        }
        Ok(RetrySchedule { steps })
    }

    /// The wait before retry number `failures` (1 = the first retry after a failure), or
    /// `None` when the schedule is exhausted.
    pub fn delay(&self, failures: u32) -> Option<Duration> {
        let mut left = failures;
        for (wait, tries) in &self.steps {
            match tries {
                None => return Some(*wait),
                Some(n) if left <= *n => return Some(*wait),
                Some(n) => left -= n,
            }
        }
        None
    }
}

/// How the consumer authenticates to the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindMethod {
    /// No bind: anonymous (the provider must let anonymous clients read everything replicated).
    Anonymous,
    /// Simple bind with a DN and password (over TLS, unless the provider is on loopback).
    Simple { dn: String, password: String },
    /// SASL EXTERNAL with the TLS client certificate `tls_cert`/`tls_key`.
    SaslExternal,
}

/// Whether to secure an `ldap://` connection with StartTLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartTls {
    No,
    /// StartTLS, and give up the session if it fails (slapd's `starttls=critical`).
    Critical,
    /// StartTLS, but go on in the clear if the provider refuses it (slapd's `starttls=yes`).
    Yes,
}

impl StartTls {
    pub fn parse(s: &str) -> Result<StartTls, String> {
        match s.to_ascii_lowercase().as_str() {
            "no" | "false" => Ok(StartTls::No),
            "yes" | "true" => Ok(StartTls::Yes),
            "critical" => Ok(StartTls::Critical),
            _ => Err(format!("'{s}' is not one of no, yes, critical")),
        }
    }
}

/// The scope of the replicated search.
pub fn parse_scope(s: &str) -> Result<proto::Scope, String> {
    match s.to_ascii_lowercase().as_str() {
        "base" => Ok(proto::Scope::Base),
        "one" | "onelevel" => Ok(proto::Scope::One),
        "sub" | "subtree" => Ok(proto::Scope::Subtree),
        _ => Err(format!("'{s}' is not a scope (expected base, one or sub)")),
    }
}

/// One consumer: what `[[syncrepl]]` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerSpec {
    /// `rid`: this consumer's id in the cookies, 1 to 999.
    pub rid: u16,
    pub provider: ProviderUrl,
    /// `search_base`: the replicated subtree; it must be under (or be) one of the server's
    /// suffixes.
    pub search_base: String,
    pub scope: proto::Scope,
    /// RFC 4515 filter of the entries replicated. Default `(objectClass=*)`.
    pub filter: String,
    /// Attributes requested. Default `*` and `+` (all user and operational attributes).
    pub attrs: Vec<String>,
    pub mode: SyncMode,
    pub retry: RetrySchedule,
    pub bind: BindMethod,
    pub start_tls: StartTls,
    /// CA certificates (PEM) the provider's certificate must chain to. Without it, the
    /// system's roots are not consulted: TLS to a provider needs `tls_ca`.
    pub tls_ca: Option<PathBuf>,
    /// Client certificate and key (PEM), for SASL EXTERNAL or a provider that asks for one.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Network timeout for connecting, TLS, bind and the start of the refresh.
    pub timeout: Duration,
    pub max_pdu: usize,
    /// Set by the server, not by the table: this server is one of several providers
    /// (`multi_provider`), so conflicts are resolved by CSN in both directions (see `apply`).
    pub multi_provider: bool,
}

/// How a consumer authenticates to its provider: what a reload may change while it runs (it
/// takes them at its next connection), the rest of the agreement being read at start only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub bind: BindMethod,
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

impl ConsumerSpec {
    /// How it authenticates (`bind_*`, `tls_*`).
    pub fn credentials(&self) -> Credentials {
        Credentials {
            bind: self.bind.clone(),
            tls_ca: self.tls_ca.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
        }
    }

    /// This agreement authenticating with `c`.
    pub fn with_credentials(&self, c: &Credentials) -> ConsumerSpec {
        ConsumerSpec {
            bind: c.bind.clone(),
            tls_ca: c.tls_ca.clone(),
            tls_cert: c.tls_cert.clone(),
            tls_key: c.tls_key.clone(),
            ..self.clone()
        }
    }

    /// A refreshAndPersist consumer of `provider` for `search_base`, with the defaults.
    pub fn new(rid: u16, provider: ProviderUrl, search_base: impl Into<String>) -> ConsumerSpec {
        ConsumerSpec {
            rid,
            provider,
            search_base: search_base.into(),
            scope: proto::Scope::Subtree,
            filter: "(objectClass=*)".into(),
            attrs: vec!["*".into(), "+".into()],
            mode: SyncMode::RefreshAndPersist,
            retry: RetrySchedule::default(),
            bind: BindMethod::Anonymous,
            start_tls: StartTls::No,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            timeout: DEFAULT_TIMEOUT,
            max_pdu: DEFAULT_MAX_PDU,
            multi_provider: false,
        }
    }

    /// Checks what cannot be checked key by key: the filter parses, TLS is possible when
    /// asked for, EXTERNAL has a certificate, the rid is in range.
    pub fn check(&self) -> Result<(), String> {
        if self.rid == 0 || self.rid > MAX_RID {
            return Err(format!("rid: 1 to {MAX_RID}, found {}", self.rid));
        }
        proto::Filter::parse(&self.filter).map_err(|e| format!("filter '{}': {e}", self.filter))?;
        let tls = self.provider.ldaps || self.start_tls != StartTls::No;
        if tls && self.tls_ca.is_none() {
            return Err("tls_ca: a CA file is required to check the provider's certificate (ldaps:// or starttls)".into());
        }
        if self.bind == BindMethod::SaslExternal {
            if !tls {
                return Err("bind_method = \"external\" needs TLS (ldaps:// or starttls)".into());
            }
            if self.tls_cert.is_none() || self.tls_key.is_none() {
                return Err("bind_method = \"external\" needs tls_cert and tls_key".into());
            }
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err("tls_cert and tls_key go together".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = ProviderUrl::parse("ldap://127.0.0.1:3890").unwrap();
        assert_eq!(
            (u.ldaps, u.host.as_str(), u.port),
            (false, "127.0.0.1", 3890)
        );
        let u = ProviderUrl::parse("LDAPS://ldap.example.com/").unwrap();
        assert_eq!(
            (u.ldaps, u.host.as_str(), u.port),
            (true, "ldap.example.com", 636)
        );
        let u = ProviderUrl::parse("ldap://[::1]:389").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 389));
        assert_eq!(u.to_string(), "ldap://[::1]:389");
        assert!(ProviderUrl::parse("http://x").is_err());
        assert!(ProviderUrl::parse("ldap://:389").is_err());
        assert!(ProviderUrl::parse("ldap://h:0").is_err());
    }

    #[test]
    fn retry_schedule_as_slapd() {
        let r = RetrySchedule::parse("5 5 300 +").unwrap();
        let s = Duration::from_secs;
        assert_eq!(r.delay(1), Some(s(5)));
        assert_eq!(r.delay(5), Some(s(5)));
        assert_eq!(r.delay(6), Some(s(300)));
        assert_eq!(r.delay(10_000), Some(s(300)));
        let r = RetrySchedule::parse("1 2 10 1").unwrap();
        assert_eq!(r.delay(3), Some(s(10)));
        assert_eq!(r.delay(4), None);
        for bad in ["", "5", "5 +  300 3", "x 3", "5 0", "0 3"] {
            assert!(RetrySchedule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("90").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_interval("01:00:00:10").unwrap(),
            Duration::from_secs(86410)
        );
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("1:2").is_err());
    }

    #[test]
    fn checks() {
        let url = ProviderUrl::parse("ldaps://p").unwrap();
        let mut s = ConsumerSpec::new(1, url, "dc=example,dc=com");
        assert!(s.check().unwrap_err().contains("tls_ca"));
        s.tls_ca = Some("/ca.pem".into());
        s.check().unwrap();
        s.bind = BindMethod::SaslExternal;
        assert!(s.check().unwrap_err().contains("tls_cert"));
        s.rid = 1000;
        assert!(s.check().unwrap_err().starts_with("rid"));
    }
}
