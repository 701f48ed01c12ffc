//! cn=Monitor: the server's figures as a subtree of virtual entries (in the manner of OpenLDAP's
//! back-monitor), and the registry through which parts of the server add their own.
//!
//! The entries are built when read, from a tree of [`Node`]s: the protocol layer builds the
//! tree of what it counts (connections, operations, bytes, the writer, snapshots, memory) and
//! appends what the registry holds, then [`build`] turns it into entries and a search walks them
//! with its scope and filter. Nothing is kept between reads, so a figure is never stale and the
//! hot paths only bump relaxed atomics.
//!
//! # The registry (`Dit::monitor`)
//!
//! Anything that runs beside the directory can show figures without the monitor knowing it:
//!
//! - **Replication agreements.** `registry.agreement(Role::Consumer, "001", "ldap://p1")`
//!   returns an [`Agreement`] handle; the replication code updates it as it goes
//!   (`set_state`, `set_context_csns`, `set_lag`, `count_changes`, `failed`, `contact` …),
//!   every update a relaxed atomic or a short lock of its own. A consumer shows as
//!   `cn=Consumer 001,cn=Replication,cn=Monitor` (slapd's `olmSyncReplInstance` attributes and
//!   Linden's: state, contextCSN, lag, changes, refreshes, failures, last error) and as
//!   `linden_replication_*` series in `/metrics`. Provider-side agreements (one per sync search
//!   served) show under the provider's own entry, which the server builds. Dropping the last
//!   handle removes an agreement.
//! - **Any other figures.** Implement [`Source`] (its entries under cn=Monitor and its
//!   `/metrics` samples, both built when read) and `registry.register(Arc::new(source))`; the
//!   registry keeps a weak reference, so dropping the source unregisters it.
//! - **Readiness.** `/readyz` answers ready once `set_loaded()` was called (the data is loaded),
//!   every gate added with `add_gate` passes, and every consumer agreement has finished its
//!   refresh and is within the configured lag (`ready_max_lag`). [`Registry::readiness`] says
//!   which condition is not met.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use schema::{Dn, NormDn, Schema};
use store::{Attr, Entry};

/// The DN of the monitor subtree's root.
pub const MONITOR_DN: &str = "cn=Monitor";

/// One entry of the monitor tree before it becomes an `Entry`: its `cn`, its structural class
/// (from back-monitor's: `monitorServer`, `monitorContainer`, `monitorCounterObject`,
/// `monitorOperation`, `monitoredObject`), its attributes and its children.
#[derive(Debug, Clone)]
pub struct Node {
    pub cn: String,
    pub class: &'static str,
    /// Whether it carries Linden's own figures (the auxiliary class `lindenMonitored`).
    pub linden: bool,
    pub attrs: Vec<(&'static str, Vec<String>)>,
    pub children: Vec<Node>,
}

impl Node {
    pub fn new(cn: impl Into<String>, class: &'static str) -> Node {
        Node {
            cn: cn.into(),
            class,
            linden: false,
            attrs: Vec::new(),
            children: Vec::new(),
        }
    }

    /// A container (`monitorContainer`) with a description.
    pub fn container(cn: &str, description: &str) -> Node {
        Node::new(cn, "monitorContainer").attr("description", description)
    }

    /// A counter (`monitorCounterObject` with `monitorCounter`).
    pub fn counter(cn: &str, value: u64) -> Node {
        Node::new(cn, "monitorCounterObject").attr("monitorCounter", value)
    }

    /// Adds one value of attribute `name`.
    pub fn attr(mut self, name: &'static str, value: impl ToString) -> Node {
        let value = value.to_string();
        match self.attrs.iter_mut().find(|(n, _)| *n == name) {
            Some((_, vs)) => vs.push(value),
            None => self.attrs.push((name, vec![value])),
        }
        self
    }

    /// Adds one of Linden's own figures (its type is in `lindenMonitored`).
    pub fn linden(mut self, name: &'static str, value: impl ToString) -> Node {
        self.linden = true;
        self.attr(name, value)
    }

    pub fn child(mut self, n: Node) -> Node {
        self.children.push(n);
        self
    }

    pub fn children(mut self, ns: impl IntoIterator<Item = Node>) -> Node {
        self.children.extend(ns);
        self
    }
}

/// An RDN value with the characters RFC 4514 asks to escape escaped.
fn escape_rdn(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let edge_space = c == ' ' && (i == 0 || i == last);
        if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
            || edge_space
            || (i == 0 && c == '#')
        {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The entries of the tree under `root` (whose DN is `cn=<root.cn>`), parents before their
/// children, each with its normalized DN. Attributes the schema lacks are left out; the
/// operational attributes slapd shows on its monitor entries (structuralObjectClass, entryDN,
/// hasSubordinates, subschemaSubentry) are included.
pub fn build(schema: &Schema, root: &Node) -> Vec<(NormDn, Entry)> {
    let mut out = Vec::new();
    walk(schema, root, "", &mut out);
    out
}

fn walk(schema: &Schema, n: &Node, parent: &str, out: &mut Vec<(NormDn, Entry)>) {
    let dn = if parent.is_empty() {
        format!("cn={}", escape_rdn(&n.cn))
    } else {
        format!("cn={},{parent}", escape_rdn(&n.cn))
    };
    let Some(ndn) = Dn::parse(&dn).ok().and_then(|d| d.normalize(schema).ok()) else {
        return;
    };
    let attr = |name: &str, values: &[&str]| {
        let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        crate::entries::attr(schema, name, &values)
    };
    let mut classes = vec![n.class];
    if n.linden {
        classes.push("lindenMonitored");
    }
    let mut attrs = vec![
        attr("objectClass", &classes),
        attr("structuralObjectClass", &[n.class]),
        attr("cn", &[&n.cn]),
    ];
    for (name, values) in &n.attrs {
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        attrs.push(attr(name, &values));
    }
    attrs.push(attr("entryDN", &[&dn]));
    attrs.push(attr(
        "hasSubordinates",
        &[if n.children.is_empty() {
            "FALSE"
        } else {
            "TRUE"
        }],
    ));
    attrs.push(attr("subschemaSubentry", &["cn=Subschema"]));
    let attrs: Vec<Attr> = attrs.into_iter().flatten().collect();
    out.push((ndn.clone(), Entry::new(0, None, &dn, &ndn, &attrs)));
    for c in &n.children {
        walk(schema, c, &dn, out);
    }
}

/// Whether the normalized DN `norm` is cn=Monitor or under it.
pub fn is_monitor_dn(norm: &str) -> bool {
    const ROOT: &str = "cn=monitor";
    norm == ROOT || schema::norm_is_descendant(norm, ROOT)
}

/// How a `/metrics` sample is typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (exposed with a `_total` suffix).
    Counter,
    Gauge,
}

/// One `/metrics` series of a [`Source`]: `name` without the `linden_` prefix (added when
/// exposed) and, for counters, without `_total`.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

/// Something that shows its own figures in cn=Monitor and `/metrics` (see the module doc).
pub trait Source: Send + Sync {
    /// Its entries, each placed directly under cn=Monitor (with their own children).
    fn nodes(&self) -> Vec<Node>;
    /// Its `/metrics` series.
    fn samples(&self) -> Vec<Sample> {
        Vec::new()
    }
}

/// Which side of a replication agreement this server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Provider,
    Consumer,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Provider => "provider",
            Role::Consumer => "consumer",
        }
    }
}

/// Where a replication agreement stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ReplState {
    /// Not connected yet.
    Connecting = 0,
    /// Sending or receiving the refresh phase.
    Refreshing = 1,
    /// Refresh done; changes follow as they happen (refreshAndPersist) or at the next poll.
    Persisting = 2,
    /// Refresh done, waiting for the next poll (refreshOnly).
    Idle = 3,
    /// Failed; waiting to try again.
    Retrying = 4,
    Stopped = 5,
}

impl ReplState {
    pub const ALL: [ReplState; 6] = [
        ReplState::Connecting,
        ReplState::Refreshing,
        ReplState::Persisting,
        ReplState::Idle,
        ReplState::Retrying,
        ReplState::Stopped,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReplState::Connecting => "connecting",
            ReplState::Refreshing => "refreshing",
            ReplState::Persisting => "persisting",
            ReplState::Idle => "idle",
            ReplState::Retrying => "retrying",
            ReplState::Stopped => "stopped",
        }
    }

    fn from_u8(v: u8) -> ReplState {
        ReplState::ALL
            .get(usize::from(v))
            .copied()
            .unwrap_or(ReplState::Stopped)
    }
}

/// The figures of one replication agreement (a consumer this server serves, or a provider it
/// follows), updated by the replication code and read by the monitor. Counters are relaxed
/// atomics; the texts (CSNs, cookies, the last error) each take a short lock of their own.
#[derive(Debug)]
pub struct Agreement {
    pub role: Role,
    /// Unique among agreements of the same role: a consumer's rid (`001`, as slapd names its
    /// `cn=Consumer 001` entry), a sync search's connection and message id.
    pub name: String,
    /// The other end (a URI, or a peer address).
    pub peer: String,
    state: AtomicU8,
    context_csn: Mutex<Vec<String>>,
    lag_millis: AtomicU64,
    /// Entries added, replaced, renamed or deleted (a consumer), or sent (a provider).
    pub changes: AtomicU64,
    /// Refreshes completed (a consumer) or served (a provider) since start.
    pub refreshes: AtomicU64,
    /// Sessions that failed since start.
    pub failures: AtomicU64,
    /// Sessions that began with a kept cookie (resumed rather than refreshed in full).
    pub resumed: AtomicU64,
    /// Unix seconds of the last connection, the last message received and the next try (0:
    /// never, or none planned).
    last_connect: AtomicU64,
    last_contact: AtomicU64,
    next_connect: AtomicU64,
    texts: Mutex<Texts>,
}

/// The texts of an agreement, behind one lock.
#[derive(Debug, Default)]
struct Texts {
    last_error: String,
    cookie_received: String,
    cookie_sent: String,
    /// The local end of the connection, while connected.
    connection: String,
}

/// Seconds since the Unix epoch (0 for a time before it).
fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// What back-monitor shows for a time that never was.
const ZERO_TIME: &str = "00000101000000Z";

fn time_text(secs: u64) -> String {
    if secs == 0 {
        return ZERO_TIME.to_string();
    }
    crate::csn::generalized_time(UNIX_EPOCH + Duration::from_secs(secs))
}

/// The time of a CSN (`YYYYmmddHHMMSS.uuuuuuZ#…`), as Unix seconds.
pub fn csn_unix_secs(csn: &str) -> Option<f64> {
    let ts = csn.split('#').next()?;
    let secs = crate::ppolicy::parse_time(ts.as_bytes())?;
    let micros = ts
        .split_once('.')
        .and_then(|(_, f)| f.trim_end_matches('Z').parse::<u32>().ok())
        .map_or(0.0, f64::from);
    Some(secs as f64 + micros / 1e6)
}

impl Agreement {
    fn new(role: Role, name: &str, peer: &str) -> Agreement {
        Agreement {
            role,
            name: name.to_string(),
            peer: peer.to_string(),
            state: AtomicU8::new(ReplState::Connecting as u8),
            context_csn: Mutex::new(Vec::new()),
            lag_millis: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
            last_connect: AtomicU64::new(0),
            last_contact: AtomicU64::new(0),
            next_connect: AtomicU64::new(0),
            texts: Mutex::new(Texts::default()),
        }
    }

    fn texts(&self) -> std::sync::MutexGuard<'_, Texts> {
        self.texts.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_state(&self, s: ReplState) {
        self.state.store(s as u8, Ordering::Relaxed);
    }

    pub fn state(&self) -> ReplState {
        ReplState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// A consumer: what the provider has sent, per server id (the CSNs of its cookies). A
    /// provider: the contextCSN values of the last cookie sent.
    pub fn set_context_csns(&self, csns: &[String]) {
        let mut c = self.context_csn.lock().unwrap_or_else(|p| p.into_inner());
        c.clear();
        c.extend(csns.iter().cloned());
    }

    /// One CSN (an agreement with a single server id).
    pub fn set_context_csn(&self, csn: &str) {
        self.set_context_csns(&[csn.to_string()]);
    }

    pub fn context_csns(&self) -> Vec<String> {
        self.context_csn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How far behind the other end this agreement is (for a consumer: how old the newest
    /// change was when it was applied; zero once it has applied everything the provider sent).
    pub fn set_lag(&self, lag: Duration) {
        let ms = u64::try_from(lag.as_millis()).unwrap_or(u64::MAX);
        self.lag_millis.store(ms, Ordering::Relaxed);
    }

    pub fn lag(&self) -> Duration {
        Duration::from_millis(self.lag_millis.load(Ordering::Relaxed))
    }

    pub fn count_changes(&self, n: u64) {
        self.changes.fetch_add(n, Ordering::Relaxed);
    }

    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// A session failed: counted, and its reason kept.
    pub fn failed(&self, why: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.set_last_error(why);
    }

    pub fn set_last_error(&self, why: &str) {
        why.clone_into(&mut self.texts().last_error);
    }

    /// The last failure, as logged ("" if none).
    pub fn last_error(&self) -> String {
        self.texts().last_error.clone()
    }

    /// Connected, from local address `local`.
    pub fn connected(&self, local: &str) {
        self.last_connect
            .store(unix_secs(SystemTime::now()), Ordering::Relaxed);
        self.next_connect.store(0, Ordering::Relaxed);
        local.clone_into(&mut self.texts().connection);
    }

    /// The connection is gone; the next try is at `next` (if one is planned).
    pub fn disconnected(&self, next: Option<SystemTime>) {
        self.next_connect
            .store(next.map_or(0, unix_secs), Ordering::Relaxed);
        self.texts().connection.clear();
    }

    /// A message came from the other end.
    pub fn contact(&self) {
        self.last_contact
            .store(unix_secs(SystemTime::now()), Ordering::Relaxed);
    }

    pub fn set_cookie_received(&self, cookie: &str) {
        cookie.clone_into(&mut self.texts().cookie_received);
    }

    pub fn set_cookie_sent(&self, cookie: &str) {
        cookie.clone_into(&mut self.texts().cookie_sent);
    }

    /// The entry of a consumer, as slapd's syncrepl shows its own (`olmSyncReplInstance`,
    /// `cn=Consumer 001`), with Linden's figures besides; of a provider's sync search, a
    /// `monitoredObject`.
    pub fn node(&self) -> Node {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let t = self.texts();
        let mut n = match self.role {
            Role::Consumer => {
                let phase = match self.state() {
                    ReplState::Persisting | ReplState::Idle => "Persist",
                    _ => "Refresh",
                };
                let mut n = Node::new(format!("Consumer {}", self.name), "olmSyncReplInstance")
                    .attr("olmSRProviderURIList", &self.peer);
                if !t.connection.is_empty() {
                    n = n.attr("olmSRConnection", &t.connection);
                }
                n = n
                    .attr("olmSRSyncPhase", phase)
                    .attr("olmSRNextConnect", time_text(load(&self.next_connect)))
                    .attr("olmSRLastConnect", time_text(load(&self.last_connect)))
                    .attr("olmSRLastContact", time_text(load(&self.last_contact)));
                if !t.cookie_received.is_empty() {
                    n = n.attr("olmSRLastCookieRcvd", &t.cookie_received);
                }
                if !t.cookie_sent.is_empty() {
                    n = n.attr("olmSRLastCookieSent", &t.cookie_sent);
                }
                n.linden("lindenReplicationRefreshes", load(&self.refreshes))
                    .linden("lindenReplicationFailures", load(&self.failures))
            }
            Role::Provider => {
                let mut n = Node::new(format!("Session {}", self.name), "monitoredObject")
                    .attr("monitorConnectionPeerAddress", &self.peer)
                    .attr("monitorTimestamp", time_text(load(&self.last_connect)))
                    .linden("lindenReplicationRefreshes", load(&self.refreshes));
                if !t.cookie_sent.is_empty() {
                    n = n.attr("monitoredInfo", &t.cookie_sent);
                }
                n
            }
        };
        n = n
            .linden("lindenReplicationState", self.state().name())
            .linden("lindenReplicationLagMillis", self.lag().as_millis())
            .linden("lindenReplicationChanges", self.changes());
        if !t.last_error.is_empty() {
            n = n.linden("lindenReplicationLastError", &t.last_error);
        }
        for csn in self.context_csns() {
            n = n.linden("contextCSN", csn);
        }
        n
    }

    fn samples(&self, out: &mut Vec<Sample>) {
        let labels = vec![
            ("role", self.role.name().to_string()),
            ("name", self.name.clone()),
            ("peer", self.peer.clone()),
        ];
        let mut push = |name, help, kind, value: f64| {
            out.push(Sample {
                name,
                help,
                kind,
                labels: labels.clone(),
                value,
            })
        };
        push(
            "replication_lag_seconds",
            "How far behind the other end a replication agreement is.",
            Kind::Gauge,
            self.lag().as_secs_f64(),
        );
        push(
            "replication_changes",
            "Changes a replication agreement carried since start.",
            Kind::Counter,
            self.changes() as f64,
        );
        push(
            "replication_refreshes",
            "Refreshes a replication agreement completed since start.",
            Kind::Counter,
            self.refreshes.load(Ordering::Relaxed) as f64,
        );
        push(
            "replication_failures",
            "Sessions of a replication agreement that failed since start.",
            Kind::Counter,
            self.failures.load(Ordering::Relaxed) as f64,
        );
        let contact = self.last_contact.load(Ordering::Relaxed);
        if contact > 0 {
            push(
                "replication_last_contact_timestamp_seconds",
                "When the other end of a replication agreement last sent something (Unix time).",
                Kind::Gauge,
                contact as f64,
            );
        }
        let now = self.state();
        for s in ReplState::ALL {
            let mut l = labels.clone();
            l.push(("state", s.name().to_string()));
            out.push(Sample {
                name: "replication_state",
                help: "1 for the state a replication agreement is in, 0 for the others.",
                kind: Kind::Gauge,
                labels: l,
                value: if s == now { 1.0 } else { 0.0 },
            });
        }
        for csn in self.context_csns() {
            let (Some(t), Some(sid)) = (csn_unix_secs(&csn), csn.split('#').nth(2)) else {
                continue;
            };
            let mut l = labels.clone();
            l.push(("sid", sid.to_string()));
            out.push(Sample {
                name: "replication_context_csn_timestamp_seconds",
                help: "The time of the newest CSN a replication agreement carried, per server id (Unix time).",
                kind: Kind::Gauge,
                labels: l,
                value: t,
            });
        }
    }
}

/// A readiness condition added with [`Registry::add_gate`]: `Err(why)` while not ready.
pub type Gate = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What others add to the monitor (see the module doc). Lives in `Dit::monitor`.
#[derive(Default)]
pub struct Registry {
    sources: RwLock<Vec<Weak<dyn Source>>>,
    agreements: RwLock<Vec<Weak<Agreement>>>,
    gates: RwLock<Vec<(String, Gate)>>,
    loaded: AtomicBool,
}

/// Takes a lock whatever a panicking holder left: the registry's lists stay usable.
fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    /// Shows `source`'s figures until it is dropped.
    pub fn register(&self, source: &Arc<dyn Source>) {
        let mut s = write(&self.sources);
        s.retain(|w| w.strong_count() > 0);
        s.push(Arc::downgrade(source));
    }

    /// A new replication agreement's handle, shown until the last clone is dropped.
    pub fn agreement(&self, role: Role, name: &str, peer: &str) -> Arc<Agreement> {
        let a = Arc::new(Agreement::new(role, name, peer));
        let mut v = write(&self.agreements);
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(&a));
        a
    }

    /// The live agreements, in the order they were made.
    pub fn agreements(&self) -> Vec<Arc<Agreement>> {
        read(&self.agreements)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    fn sources(&self) -> Vec<Arc<dyn Source>> {
        read(&self.sources)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The entries of the registered sources and `cn=Replication` (always there, empty until
    /// an agreement is made), each a child of cn=Monitor.
    pub fn nodes(&self) -> Vec<Node> {
        let repl = Node::container(
            "Replication",
            "Replication: the providers this server follows (cn=Consumer NNN, one per syncrepl rid) and, with syncprov, the provider's figures and the sync searches it serves (cn=Provider).",
        )
        .children(
            self.agreements()
                .iter()
                .filter(|a| a.role == Role::Consumer)
                .map(|a| a.node()),
        );
        let mut out = vec![repl];
        for s in self.sources() {
            out.extend(s.nodes());
        }
        out
    }

    /// The `/metrics` samples of the agreements and the registered sources.
    pub fn samples(&self) -> Vec<Sample> {
        let mut out = Vec::new();
        for a in self.agreements() {
            a.samples(&mut out);
        }
        for s in self.sources() {
            out.extend(s.samples());
        }
        out
    }

    /// The data is loaded: the server may be ready.
    pub fn set_loaded(&self) {
        self.loaded.store(true, Ordering::Relaxed);
    }

    /// Adds a readiness condition (e.g. "consumer rid=001 has finished its first refresh").
    pub fn add_gate(&self, name: &str, gate: Gate) {
        write(&self.gates).push((name.to_string(), gate));
    }

    /// `Ok` when ready for clients (see the module doc), or why not. `max_lag`: how far a
    /// consumer agreement may be behind its provider (`ready_max_lag`).
    pub fn readiness(&self, max_lag: Duration) -> Result<(), String> {
        if !self.loaded.load(Ordering::Relaxed) {
            return Err("data not loaded yet".into());
        }
        for (name, gate) in read(&self.gates).iter() {
            gate().map_err(|why| format!("{name}: {why}"))?;
        }
        for a in self.agreements() {
            if a.role != Role::Consumer {
                continue;
            }
            match a.state() {
                ReplState::Persisting | ReplState::Idle => {}
                s => {
                    return Err(format!(
                        "consumer {} is {} (not caught up with {})",
                        a.name,
                        s.name(),
                        a.peer
                    ))
                }
            }
            if a.lag() > max_lag {
                return Err(format!(
                    "consumer {} is {} ms behind {} (ready_max_lag {} s)",
                    a.name,
                    a.lag().as_millis(),
                    a.peer,
                    max_lag.as_secs()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]
    use super::*;

    fn schema() -> Schema {
        Schema::with_bundles(&[] as &[String]).expect("builtin schema")
    }

    #[test]
    fn tree_becomes_entries_parents_first() {
        let s = schema();
        let root = Node::new("Monitor", "monitorServer")
            .attr("monitoredInfo", "Linden")
            .child(Node::container("Connections", "c").child(Node::counter("Total", 7)))
            .child(Node::new("Odd, name", "monitoredObject").linden("lindenP50", 3));
        let es = build(&s, &root);
        let dns: Vec<&str> = es.iter().map(|(_, e)| e.dn()).collect();
        assert_eq!(
            dns,
            [
                "cn=Monitor",
                "cn=Connections,cn=Monitor",
                "cn=Total,cn=Connections,cn=Monitor",
                "cn=Odd\\, name,cn=Monitor"
            ]
        );
        assert!(es.iter().all(|(n, _)| is_monitor_dn(&n.norm)));
        let total = &es[2].1;
        let counter = s.attr_by_name("monitorCounter").unwrap();
        let v: Vec<&[u8]> = total
            .attrs()
            .filter(|a| a.ty == counter)
            .flat_map(|a| a.values())
            .collect();
        assert_eq!(v, [b"7"]);
        assert!(!is_monitor_dn("cn=monitorx"));
        assert!(!is_monitor_dn("dc=example,dc=com"));
    }

    #[test]
    fn agreements_show_until_dropped_and_gate_readiness() {
        let r = Registry::default();
        let any = Duration::from_secs(5);
        assert!(r.readiness(any).is_err());
        r.set_loaded();
        assert_eq!(r.readiness(any), Ok(()));
        let a = r.agreement(Role::Consumer, "rid=001", "ldap://p1");
        assert!(r.readiness(any).unwrap_err().contains("connecting"));
        a.set_state(ReplState::Persisting);
        a.set_context_csn("20261125000000.000000Z#000000#001#000000");
        a.set_lag(Duration::from_secs(9));
        assert!(r.readiness(any).unwrap_err().contains("behind"));
        a.set_lag(Duration::ZERO);
        assert_eq!(r.readiness(any), Ok(()));
        assert_eq!(r.nodes()[0].children.len(), 1);
        assert!(r.samples().iter().any(|s| s.name == "replication_state"
            && s.value == 1.0
            && s.labels.contains(&("state", "persisting".into()))));
        drop(a);
        assert!(r.nodes()[0].children.is_empty());
        r.add_gate("test", Arc::new(|| Err("not yet".into())));
        assert_eq!(r.readiness(any), Err("test: not yet".into()));
    }
}
