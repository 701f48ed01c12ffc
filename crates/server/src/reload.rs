//! Reloading the configuration while serving (SIGHUP, or `linden reload` over LDAP).
//!
//! A reload gets a whole new configuration (read by the binary, as at a start), checks it as a
//! start would (`crate::check`: an invalid file changes nothing), and compares it key by key
//! with the one in force. Keys declared `Live` that changed are applied together: what is made
//! of them is rebuilt first (access rules, TLS, SASL mappings, monitor readers, log targets),
//! and only when all of it succeeded is it swapped in, with the new configuration, at once.
//! Keys declared `Restart` that changed are named in a log line and keep their running value.
//!
//! What a reload changes reaches new operations and new connections: an operation reads the
//! configuration once (`Shared::config`), a connection keeps the TLS session it has.
//! Reloads are counted, with the time and outcome of the last, in cn=Monitor and `/metrics`.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use schema::NormDn;

use crate::config::{Config, Reload, KEYS};
use crate::state::Shared;

/// What a reload may replace that is made of the configuration rather than read from it: built
/// whole from a configuration and swapped in one piece.
pub(crate) struct Live {
    /// For LDAPS and StartTLS (new connections); `None` for a memory-only server.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// `authz_map`: SASL EXTERNAL identities (certificate subjects, ldapi peers) to entries.
    pub authz: dit::authz::AuthzMap,
    /// A hash of the configured scheme and cost, verified for binds to DNs without a
    /// password so that they take as long as binds to DNs with one.
    pub dummy_password: Vec<u8>,
    /// `monitor_readers`, normalized.
    pub readers: Vec<NormDn>,
}

/// How the binary takes part in a reload (`Server::set_reloader`): `read` reads the
/// configuration again as a start would (its file, environment and flags); `log_level`
/// applies a new `log_level` (the binary owns the log subscriber). Without one a reload over
/// LDAP is refused.
pub struct Reloader {
    pub read: Box<dyn Fn() -> Result<Config, String> + Send + Sync>,
    pub log_level: Box<dyn Fn(&str) + Send + Sync>,
}

/// What one reload did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadReport {
    /// Live keys whose new values are now in force.
    pub applied: Vec<&'static str>,
    /// Keys that changed but are read at start only: the running value stays.
    pub need_restart: Vec<&'static str>,
    /// Why nothing was changed (an invalid configuration), one problem a line.
    pub problems: Vec<String>,
}

impl ReloadReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// One line for the log and the extended operation's answer.
    pub fn summary(&self) -> String {
        if !self.ok() {
            return format!(
                "configuration not reloaded, nothing changed: {}",
                self.problems.join("; ")
            );
        }
        let mut s = match self.applied.len() {
            0 => "configuration reloaded: no live key changed".to_string(),
            _ => format!(
                "configuration reloaded: {} applied",
                self.applied.join(", ")
            ),
        };
        if !self.need_restart.is_empty() {
            s.push_str(&format!(
                "; changed but only read at start, kept until a restart: {}",
                self.need_restart.join(", ")
            ));
        }
        s
    }
}

/// Reloads since start, for cn=Monitor and `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct ReloadStats {
    pub succeeded: u64,
    pub failed: u64,
    /// The last one: when, and whether it was applied.
    pub last: Option<(SystemTime, bool)>,
}

/// The reload state of a server: the reloader and the figures. One reload at a time.
#[derive(Default)]
pub(crate) struct Reloads {
    reloader: Mutex<Option<Reloader>>,
    stats: Mutex<ReloadStats>,
    one_at_a_time: Mutex<()>,
}

impl Reloads {
    pub fn set_reloader(&self, r: Reloader) {
        *self.reloader.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    }

    pub fn stats(&self) -> ReloadStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn record(&self, ok: bool) {
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        if ok {
            s.succeeded += 1;
        } else {
            s.failed += 1;
        }
        s.last = Some((SystemTime::now(), ok));
    }
}

/// Whether two configurations have the same replication agreements apart from how each
/// authenticates (`bind_*`, `tls_*`).
fn same_but_credentials(old: &Config, new: &Config) -> bool {
    old.syncrepl.len() == new.syncrepl.len()
        && old
            .syncrepl
            .iter()
            .zip(&new.syncrepl)
            .all(|(a, b)| *a == b.with_credentials(&a.credentials()))
}

/// Builds the live state of `config`. `tls` false: none (a memory-only server).
pub(crate) fn live(
    config: &Config,
    tls: Option<Arc<rustls::ServerConfig>>,
    readers: Vec<NormDn>,
    authz: dit::authz::AuthzMap,
) -> Live {
    Live {
        tls,
        authz,
        dummy_password: config.password_policy().hash(b"linden-dummy-password"),
        readers,
    }
}

impl Shared {
    /// Reads the configuration again with the binary's reloader and applies it (a reload
    /// asked for over LDAP).
    pub(crate) fn reload_from_source(&self) -> ReloadReport {
        let read = {
            let r = self
                .reloads
                .reloader
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match r.as_ref() {
                Some(r) => (r.read)(),
                None => {
                    Err("this server was not started from a configuration it can read again".into())
                }
            }
        };
        self.reload_with(read)
    }

    /// Applies `new` (or reports why it cannot be read), logging the outcome.
    pub(crate) fn reload_with(&self, new: Result<Config, String>) -> ReloadReport {
        let _one = self
            .reloads
            .one_at_a_time
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let report = match new {
            Err(e) => ReloadReport {
                problems: e.lines().map(str::to_string).collect(),
                ..ReloadReport::default()
            },
            Ok(new) => self.apply(new),
        };
        self.reloads.record(report.ok());
        if report.applied.contains(&"log_level") {
            if let Some(r) = self
                .reloads
                .reloader
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
            {
                (r.log_level)(&self.config().log_level);
            }
        }
        if report.ok() {
            tracing::info!("{}", report.summary());
        } else {
            for p in &report.problems {
                tracing::error!("reload: {p}");
            }
            tracing::error!("configuration not reloaded: the running configuration is kept unchanged; correct the file and reload again");
        }
        report
    }

    fn apply(&self, mut new: Config) -> ReloadReport {
        let old = self.config();
        let mut report = ReloadReport::default();
        let memory_only = self.persistence.is_none();
        // Checked as a start checks it; the rules, certificate and mappings are built here
        // and kept for the swap, so what is checked is what is applied.
        let prepared = match crate::prepare(&new, false) {
            Ok(p) => p,
            Err(problems) => {
                report.problems = problems;
                return report;
            }
        };
        // Not keys a reload can read: kept from the start.
        new.admin_password = None;
        new.admin_password_hash = old.admin_password_hash.clone();
        let mut merged = (**old).clone();
        for k in KEYS {
            if k.same(&old, &new) {
                continue;
            }
            match k.reload {
                Reload::Live => {
                    k.take(&mut merged, &new);
                    report.applied.push(k.name);
                }
                // The agreements are read at start, but how they authenticate may change:
                // the consumers take new credentials at their next connection.
                Reload::Restart if k.name == "syncrepl" && same_but_credentials(&old, &new) => {
                    k.take(&mut merged, &new);
                    report.applied.push("syncrepl credentials");
                }
                Reload::Restart => report.need_restart.push(k.name),
            }
        }
        // The certificate is read again whatever the keys say: renewing it in place is the
        // usual way (new connections get it, open ones keep theirs).
        let tls = if memory_only {
            None
        } else {
            match crate::tls::server_config(&merged) {
                Ok(t) => Some(t),
                Err(e) => {
                    report.problems.push(e);
                    return report;
                }
            }
        };
        if let Err(e) = self.access_log.retarget(&merged.access_log) {
            report.problems.push(e);
        }
        if let Err(e) = self.audit_log.retarget(&merged.audit_log) {
            report.problems.push(e);
        }
        if !report.problems.is_empty() {
            return report;
        }
        let acl = if report.applied.contains(&"access") {
            Some(prepared.acl)
        } else {
            None
        };
        self.live.store(Arc::new(live(
            &merged,
            tls,
            prepared.readers,
            prepared.authz,
        )));
        for (cell, spec) in self.consumer_credentials.iter().zip(&merged.syncrepl) {
            cell.store(Arc::new(spec.credentials()));
        }
        self.lockout.reconfigure(merged.lockout());
        self.dit
            .reconfigure(acl, merged.password_policy(), merged.write_limits());
        self.config.store(Arc::new(merged));
        report
    }

    /// Opens the log files again by their names (SIGHUP after logrotate moved them).
    pub(crate) fn reopen_logs(&self) {
        for (name, sink) in [
            ("access_log", &self.access_log),
            ("audit_log", &self.audit_log),
        ] {
            if let Err(e) = sink.reopen() {
                tracing::error!("{name}: {e}; still writing to the file it had open");
            }
        }
    }
}
