//! Recording and summarising: one [`Recorder`] per connection (locked once per read batch by
//! its connection and once per interval by the reporter, so it is never contended for long),
//! merged into the [`Summary`] at the end.

use crate::pace::Timings;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;

/// The operations a run reports apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Search = 0,
    Modify = 1,
    Add = 2,
    Delete = 3,
    Compare = 4,
    Bind = 5,
    /// A search for a user followed by a bind as that user, timed as one operation.
    Auth = 6,
}

pub(crate) const KINDS: usize = 7;

impl OpKind {
    pub(crate) const ALL: [OpKind; KINDS] = [
        OpKind::Search,
        OpKind::Modify,
        OpKind::Add,
        OpKind::Delete,
        OpKind::Compare,
        OpKind::Bind,
        OpKind::Auth,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            OpKind::Search => "search",
            OpKind::Modify => "modify",
            OpKind::Add => "add",
            OpKind::Delete => "delete",
            OpKind::Compare => "compare",
            OpKind::Bind => "bind",
            OpKind::Auth => "auth",
        }
    }
}

/// Failures that are not LDAP result codes, numbered above every real code.
pub(crate) const NO_ENTRY: u32 = 1000;
pub(crate) const NO_RESPONSE: u32 = 1001;

fn code_name(code: u32) -> String {
    match code {
        NO_ENTRY => "noEntryReturned".to_string(),
        NO_RESPONSE => "noResponse".to_string(),
        c => match proto::ResultCode::from_u32(c) {
            Some(rc) => rc.name().to_string(),
            None => format!("resultCode{c}"),
        },
    }
}

/// Latencies are microseconds; one hour is the largest recorded value (larger ones saturate).
fn histogram() -> Histogram<u64> {
    // hdrhistogram has no infallible constructor; its errors depend only on these arguments.
    #[expect(
        clippy::expect_used,
        reason = "constant bounds that hdrhistogram documents as valid \
                  (low >= 1, high >= 2 * low, 0..=5 significant digits)"
    )]
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

#[derive(Debug)]
pub(crate) struct KindStats {
    /// Latency from the intended send time (the one reported first everywhere).
    total: Histogram<u64>,
    /// Latency from the actual send time.
    service: Histogram<u64>,
    /// Actual minus intended send time.
    lag: Histogram<u64>,
    interval: Histogram<u64>,
    ops: u64,
    errors: BTreeMap<u32, u64>,
    entries: u64,
    interval_errors: u64,
}

impl KindStats {
    fn new() -> Self {
        KindStats {
            total: histogram(),
            service: histogram(),
            lag: histogram(),
            interval: histogram(),
            ops: 0,
            errors: BTreeMap::new(),
            entries: 0,
            interval_errors: 0,
        }
    }
}

/// What one connection has seen.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    kinds: [Option<Box<KindStats>>; KINDS],
    /// Connections (of this recorder: 0 or 1) that ran out of entries to delete.
    pub exhausted: usize,
}

impl Recorder {
    fn kind(&mut self, k: OpKind) -> &mut KindStats {
        self.kinds[k as usize].get_or_insert_with(|| Box::new(KindStats::new()))
    }

    /// Records one completed operation. `measured` is false during the warm-up: such
    /// operations only show in the interval lines.
    pub(crate) fn record(
        &mut self,
        k: OpKind,
        t: Timings,
        measured: bool,
        error: Option<u32>,
        entries: u64,
    ) {
        let s = self.kind(k);
        s.interval.saturating_record(t.latency.max(1));
        if error.is_some() {
            s.interval_errors += 1;
        }
        if measured {
            s.total.saturating_record(t.latency.max(1));
            s.service.saturating_record(t.service.max(1));
            // A lag of 0 µs is common (closed loop); the histogram's floor is 1.
            s.lag.saturating_record(t.lag.max(1));
            s.ops += 1;
            s.entries += entries;
            if let Some(code) = error {
                *s.errors.entry(code).or_insert(0) += 1;
            }
        }
    }
}

/// Sums of the interval parts of several recorders (the reporter's view).
#[derive(Debug)]
pub(crate) struct IntervalTotals {
    pub by_kind: Vec<(OpKind, Histogram<u64>, u64)>,
}

impl IntervalTotals {
    pub(crate) fn new() -> Self {
        IntervalTotals {
            by_kind: Vec::new(),
        }
    }

    /// Moves the interval part of `r` into these totals.
    pub(crate) fn take_from(&mut self, r: &mut Recorder) {
        for (i, slot) in r.kinds.iter_mut().enumerate() {
            let Some(s) = slot else { continue };
            let kind = OpKind::ALL[i];
            let pos = match self.by_kind.iter().position(|(k, _, _)| *k == kind) {
                Some(p) => p,
                None => {
                    self.by_kind.push((kind, histogram(), 0));
                    self.by_kind.len() - 1
                }
            };
            let entry = &mut self.by_kind[pos];
            let _ = entry.1.add(&s.interval);
            entry.2 += s.interval_errors;
            s.interval.reset();
            s.interval_errors = 0;
        }
    }

    /// `t=3s ops/s=... mean=...us p99=...us errors=...`, per kind when there are several.
    pub(crate) fn line(&self, t: u64, secs: f64, warmup: bool) -> String {
        let mut all = histogram();
        let mut errors = 0;
        for (_, h, e) in &self.by_kind {
            let _ = all.add(h);
            errors += e;
        }
        let mut line = format!(
            "t={t}s ops/s={:.0} mean={:.0}us p99={}us errors={errors}",
            all.len() as f64 / secs,
            all.mean(),
            all.value_at_quantile(0.99)
        );
        if self.by_kind.len() > 1 {
            for (k, h, e) in &self.by_kind {
                line.push_str(&format!(
                    " | {} ops/s={:.0} p99={}us errors={e}",
                    k.name(),
                    h.len() as f64 / secs,
                    h.value_at_quantile(0.99)
                ));
            }
        }
        if warmup {
            line.push_str(" (warm-up)");
        }
        line
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Latency {
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// Results for one kind of operation (or for all of them: [`Summary::total`]).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpSummary {
    /// `search`, `modify`, `add`, `delete`, `compare`, `bind`, `auth`, or `all`.
    pub name: String,
    /// Completed operations sent after the warm-up, failed ones included.
    pub ops: u64,
    pub ops_per_sec: f64,
    /// Operations whose result was not the expected one.
    pub errors: u64,
    /// Failed operations by result code name (`noSuchObject`, ...).
    pub errors_by_code: BTreeMap<String, u64>,
    /// From each request's intended send time to its answer (open loop: the schedule's time,
    /// so client lateness and queueing count; closed loop: when a slot freed).
    pub latency_us: Latency,
    /// From each request's actual send (its write to the socket) to its answer.
    pub service_us: Latency,
    /// Actual minus intended send time: the client's own pacing lateness (1 µs resolution,
    /// 0 shows as 1).
    pub lag_us: Latency,
    /// Entries returned per search (searches and auth only).
    pub entries_per_search: Option<f64>,
}

/// What a run measured; printed by [`crate::load::run`] and written by `--json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub workload: String,
    pub url: String,
    pub connections: usize,
    pub depth: usize,
    pub rate: Option<f64>,
    pub warmup_secs: f64,
    /// Measured time: from the end of the warm-up to the last measured response.
    pub duration_secs: f64,
    /// Connections that stopped early because they ran out of entries to delete.
    pub exhausted_connections: usize,
    /// `--rate` only: how sends were paced (`thread` or `timer`, see `--pacer`).
    pub pacer: Option<String>,
    /// CPU seconds of the pacer thread over the whole run (warm-up included), when measured.
    pub pacer_cpu_secs: Option<f64>,
    /// CPU seconds of the whole client process over the run (warm-up and drain included),
    /// when measured: what the load generator itself costs on a machine it shares.
    pub client_cpu_secs: Option<f64>,
    pub total: OpSummary,
    /// One per kind of operation seen (the two populations of `search+modify`, the five parts
    /// of `mixed`).
    pub operations: Vec<OpSummary>,
}

impl Summary {
    /// Total failed operations.
    pub fn errors(&self) -> u64 {
        self.total.errors
    }
}

/// The three histograms of one kind (or of all): latency, service, lag.
struct Hists {
    latency: Histogram<u64>,
    service: Histogram<u64>,
    lag: Histogram<u64>,
}

impl Hists {
    fn new() -> Hists {
        Hists {
            latency: histogram(),
            service: histogram(),
            lag: histogram(),
        }
    }

    fn add(&mut self, latency: &Histogram<u64>, service: &Histogram<u64>, lag: &Histogram<u64>) {
        let _ = self.latency.add(latency);
        let _ = self.service.add(service);
        let _ = self.lag.add(lag);
    }
}

fn percentiles(h: &Histogram<u64>) -> Latency {
    let q = |x: f64| {
        if h.is_empty() {
            0
        } else {
            h.value_at_quantile(x)
        }
    };
    Latency {
        mean: if h.is_empty() { 0.0 } else { h.mean() },
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        p999: q(0.999),
        max: h.max(),
    }
}

fn summarise(
    name: &str,
    h: &Hists,
    ops: u64,
    errors: &BTreeMap<u32, u64>,
    entries: Option<u64>,
    secs: f64,
) -> OpSummary {
    OpSummary {
        name: name.to_string(),
        ops,
        ops_per_sec: if secs > 0.0 { ops as f64 / secs } else { 0.0 },
        errors: errors.values().sum(),
        errors_by_code: errors.iter().map(|(c, n)| (code_name(*c), *n)).collect(),
        latency_us: percentiles(&h.latency),
        service_us: percentiles(&h.service),
        lag_us: percentiles(&h.lag),
        entries_per_search: entries.map(|e| if ops > 0 { e as f64 / ops as f64 } else { 0.0 }),
    }
}

/// Settings echoed into the summary.
pub(crate) struct RunInfo {
    pub workload: String,
    pub url: String,
    pub connections: usize,
    pub depth: usize,
    pub rate: Option<f64>,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    pub pacer: Option<String>,
    pub pacer_cpu_secs: Option<f64>,
    pub client_cpu_secs: Option<f64>,
}

/// Merges the recorders of all connections.
pub(crate) fn build_summary(info: RunInfo, recorders: &[&Recorder]) -> Summary {
    let secs = info.duration_secs;
    let mut all_h = Hists::new();
    let mut all_ops = 0;
    let mut all_errors: BTreeMap<u32, u64> = BTreeMap::new();
    let mut all_entries = 0;
    let mut any_search = false;
    let mut operations = Vec::new();
    for kind in OpKind::ALL {
        let mut h = Hists::new();
        let mut ops = 0;
        let mut errors: BTreeMap<u32, u64> = BTreeMap::new();
        let mut entries = 0;
        let mut seen = false;
        for r in recorders {
            let Some(s) = &r.kinds[kind as usize] else {
                continue;
            };
            seen = true;
            h.add(&s.total, &s.service, &s.lag);
            ops += s.ops;
            entries += s.entries;
            for (c, n) in &s.errors {
                *errors.entry(*c).or_insert(0) += n;
            }
        }
        if !seen {
            continue;
        }
        let searches = matches!(kind, OpKind::Search | OpKind::Auth);
        any_search |= searches;
        all_h.add(&h.latency, &h.service, &h.lag);
        all_ops += ops;
        all_entries += entries;
        for (c, n) in &errors {
            *all_errors.entry(*c).or_insert(0) += n;
        }
        operations.push(summarise(
            kind.name(),
            &h,
            ops,
            &errors,
            searches.then_some(entries),
            secs,
        ));
    }
    let mut total = summarise("all", &all_h, all_ops, &all_errors, None, secs);
    if any_search {
        let searches: u64 = operations
            .iter()
            .filter(|o| o.entries_per_search.is_some())
            .map(|o| o.ops)
            .sum();
        total.entries_per_search = Some(if searches > 0 {
            all_entries as f64 / searches as f64
        } else {
            0.0
        });
    }
    Summary {
        workload: info.workload,
        url: info.url,
        connections: info.connections,
        depth: info.depth,
        rate: info.rate,
        warmup_secs: info.warmup_secs,
        duration_secs: secs,
        exhausted_connections: recorders.iter().map(|r| r.exhausted).sum(),
        pacer: info.pacer,
        pacer_cpu_secs: info.pacer_cpu_secs,
        client_cpu_secs: info.client_cpu_secs,
        total,
        operations,
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "summary: workload={} url={} connections={} depth={} rate={} warmup={}s measured={:.2}s",
            self.workload,
            self.url,
            self.connections,
            self.depth,
            self.rate.map_or("max".to_string(), |r| format!("{r}/s")),
            self.warmup_secs,
            self.duration_secs
        )?;
        let rows = std::iter::once(&self.total)
            .chain(self.operations.iter().filter(|_| self.operations.len() > 1));
        for o in rows {
            let l = &o.latency_us;
            write!(
                f,
                "  {:<8} ops={} ops/s={:.0} latency us: mean={:.0} p50={} p90={} p99={} p99.9={} max={}",
                o.name, o.ops, o.ops_per_sec, l.mean, l.p50, l.p90, l.p99, l.p999, l.max
            )?;
            if let Some(e) = o.entries_per_search {
                write!(f, " entries/search={e:.2}")?;
            }
            writeln!(f, " errors={}", o.errors)?;
            if self.rate.is_some() {
                for (what, l) in [("from send", &o.service_us), ("send lag", &o.lag_us)] {
                    writeln!(
                        f,
                        "  {:<8} {what:>9} us: mean={:.0} p50={} p90={} p99={} p99.9={} max={}",
                        "", l.mean, l.p50, l.p90, l.p99, l.p999, l.max
                    )?;
                }
            }
        }
        if let Some(cpu) = self.client_cpu_secs {
            write!(f, "  client CPU {cpu:.2} s")?;
            if let (Some(p), Some(pacer)) = (self.pacer_cpu_secs, &self.pacer) {
                write!(f, " (the {pacer} pacer thread {p:.2} s)")?;
            }
            writeln!(f)?;
        }
        if self.exhausted_connections > 0 {
            writeln!(
                f,
                "  {} connection(s) ran out of entries to delete and stopped early",
                self.exhausted_connections
            )?;
        }
        if self.total.errors > 0 {
            writeln!(f, "  !!! {} OPERATIONS FAILED:", self.total.errors)?;
            for (name, n) in &self.total.errors_by_code {
                writeln!(f, "  !!!   {name}: {n}")?;
            }
        }
        Ok(())
    }
}
