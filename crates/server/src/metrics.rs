//! The HTTP listener for orchestrators and scrapers (`metrics_listen`, off by default):
//!
//! - `GET /metrics`: the figures of cn=Monitor as OpenMetrics text (which Prometheus reads),
//!   encoded by `prometheus-client` from the same counters at scrape time: counters
//!   (`linden_*_total`), gauges and histograms (`linden_writer_commit_seconds`,
//!   `linden_writer_batch_size`, `linden_operation_duration_seconds{op}`). Series are listed in docs/monitoring.md.
//! - `GET /healthz`: 200 while the process serves (liveness).
//! - `GET /readyz`: 200 once the data is loaded and every readiness condition holds
//!   (`dit::monitor::Registry::readiness`: replication adds its own), 503 with the reason
//!   otherwise.
//!
//! Served by hyper (HTTP/1.1) on its own tasks, at most `MAX_CONNECTIONS` at once, each bounded
//! in time by `CONNECTION_TIMEOUT`; it never touches the LDAP hot path: a scrape reads relaxed
//! atomics.

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use store::stats::Histogram;
use tokio::net::TcpListener;

use crate::state::{OpType, Shared};

/// With `archive_ready_max_lag`, not ready while the archive lags more than that.
fn archive_ready(shared: &Shared) -> Result<(), String> {
    let max = shared.config().archive_ready_max_lag;
    let Some(a) = shared
        .persistence
        .as_ref()
        .and_then(|p| p.archiver.as_ref())
    else {
        return Ok(());
    };
    let lag = a.status().lag_seconds(std::time::SystemTime::now());
    if max > 0 && lag > max as f64 {
        return Err(format!(
            "the archive is {lag:.0} s behind (archive_ready_max_lag = {max})"
        ));
    }
    Ok(())
}

/// HTTP connections served at once; more wait in the kernel's accept queue.
pub const MAX_CONNECTIONS: usize = 64;
/// The longest one HTTP connection is kept (headers, scrape and keep-alive included).
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// The content type of `/metrics` (OpenMetrics 1.0 text).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Accepts HTTP connections on `listener` until the task is dropped.
pub(crate) async fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                crate::accept_failed(e).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let r = respond(&shared, req.method(), req.uri().path());
                async move { Ok::<_, Infallible>(r) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
            drop(slot);
        });
    }
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

fn respond(shared: &Arc<Shared>, method: &Method, path: &str) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if method != Method::GET && method != Method::HEAD {
        let mut r = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "only GET and HEAD\n".into(),
        );
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return r;
    }
    match path {
        "/metrics" => match render(shared) {
            Ok(body) => reply(StatusCode::OK, CONTENT_TYPE, body),
            Err(_) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                TEXT,
                "cannot encode the metrics\n".into(),
            ),
        },
        "/healthz" => reply(StatusCode::OK, TEXT, "ok\n".into()),
        "/readyz" => {
            let max_lag = Duration::from_secs(shared.config().ready_max_lag);
            match shared
                .monitor
                .readiness(max_lag)
                .and_then(|()| archive_ready(shared))
            {
                Ok(()) => reply(StatusCode::OK, TEXT, "ready\n".into()),
                Err(why) => reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    TEXT,
                    format!("not ready: {why}\n"),
                ),
            }
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            TEXT,
            "not found: try /metrics, /healthz or /readyz\n".into(),
        ),
    }
}

/// The figures as OpenMetrics text (what `/metrics` serves).
pub fn render(shared: &Arc<Shared>) -> Result<String, fmt::Error> {
    let mut registry = prometheus_client::registry::Registry::with_prefix("linden");
    registry.register_collector(Box::new(Figures(shared.clone())));
    let mut out = String::with_capacity(16 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &registry)?;
    Ok(out)
}

/// Reads the figures at scrape time.
struct Figures(Arc<Shared>);

impl fmt::Debug for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Figures")
    }
}

fn load(c: &std::sync::atomic::AtomicU64) -> u64 {
    c.load(std::sync::atomic::Ordering::Relaxed)
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> fmt::Result {
    let m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(v).encode(m)
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> fmt::Result {
    let m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(v).encode(m)
}

type Labels = Vec<(&'static str, String)>;

fn family(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: &[(Labels, f64)],
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in series {
        let s = m.encode_family(labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(*v).encode(s)?,
            _ => ConstGauge::new(*v).encode(s)?,
        }
    }
    Ok(())
}

/// A histogram with buckets at `bounds` (sample units; powers of two minus one, where
/// `Histogram` counts exactly), exposed in units of `scale` (1e-6: microseconds as seconds).
fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &Histogram,
    bounds: &[u64],
    scale: f64,
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    encode_histogram(&mut m, h, bounds, scale)
}

/// One histogram family: a histogram per label set (`histogram`'s buckets and scale).
fn histogram_family(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Labels, &Histogram)],
    bounds: &[u64],
    scale: f64,
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in series {
        let mut s = m.encode_family(labels)?;
        encode_histogram(&mut s, h, bounds, scale)?;
    }
    Ok(())
}

fn encode_histogram(
    m: &mut prometheus_client::encoding::MetricEncoder<'_>,
    h: &Histogram,
    bounds: &[u64],
    scale: f64,
) -> fmt::Result {
    let cumulative = h.cumulative(bounds);
    let count = h.count();
    let mut buckets = Vec::with_capacity(bounds.len() + 1);
    let mut before = 0;
    for (b, c) in bounds.iter().zip(cumulative) {
        // `le` is inclusive: the samples of at most b.
        buckets.push((*b as f64 * scale, c.saturating_sub(before)));
        before = c;
    }
    buckets.push((f64::MAX, count.saturating_sub(before)));
    m.encode_histogram::<NoLabelSet>(h.sum() as f64 * scale, count, &buckets, None)
}

/// 2^k - 1 for k in `from..=to`.
fn pow2_bounds(from: u32, to: u32) -> Vec<u64> {
    (from..=to).map(|k| (1u64 << k) - 1).collect()
}

impl prometheus_client::collector::Collector for Figures {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let sh = &self.0;
        let c = &sh.counters;
        gauge(
            &mut e,
            "connections_current",
            "Connections open now.",
            sh.connections.open() as f64,
        )?;
        counter(
            &mut e,
            "connections",
            "Connections accepted since start.",
            load(&c.connections),
        )?;
        gauge(
            &mut e,
            "incoming_bytes",
            "Bytes of large requests being received, taken from max_incoming_bytes.",
            sh.incoming.held() as f64,
        )?;
        gauge(
            &mut e,
            "incoming_budget_bytes",
            "The budget for large requests being received (max_incoming_bytes).",
            sh.incoming.total() as f64,
        )?;
        gauge(
            &mut e,
            "incoming_waiting_connections",
            "Connections whose reads are paused until max_incoming_bytes covers their request.",
            sh.incoming.waiting() as f64,
        )?;
        let listeners = sh.figures.listeners();
        let by_listener = |f: fn(&crate::figures::ListenerStats) -> u64| -> Vec<(Labels, f64)> {
            listeners
                .iter()
                .map(|l| (vec![("listener", l.url.clone())], f(l) as f64))
                .collect()
        };
        family(
            &mut e,
            "listener_connections_current",
            "Connections open now, per listener.",
            MetricType::Gauge,
            &by_listener(|l| load(&l.current)),
        )?;
        family(
            &mut e,
            "listener_connections",
            "Connections accepted since start, per listener.",
            MetricType::Counter,
            &by_listener(|l| load(&l.total)),
        )?;
        let per_op = |f: &dyn Fn(OpType) -> u64| -> Vec<(Labels, f64)> {
            OpType::ALL
                .iter()
                .map(|&t| (vec![("op", t.name().to_ascii_lowercase())], f(t) as f64))
                .collect()
        };
        family(
            &mut e,
            "operations_initiated",
            "Operations received and dispatched, by type.",
            MetricType::Counter,
            &per_op(&|t| load(c.initiated(t))),
        )?;
        family(
            &mut e,
            "operations_completed",
            "Operations completed (answered, abandoned or cut off), by type.",
            MetricType::Counter,
            &per_op(&|t| load(c.completed(t))),
        )?;
        let timed: Vec<(Labels, &Histogram)> = OpType::ALL
            .iter()
            .filter(|t| t.response_tag().is_some())
            .map(|&t| (vec![("op", t.name().to_ascii_lowercase())], c.latency(t)))
            .collect();
        histogram_family(
            &mut e,
            "operation_duration_seconds",
            "Time from a request's dispatch to its result, by operation type.",
            &timed,
            &pow2_bounds(1, 24),
            1e-6,
        )?;
        let t = &c.traffic;
        counter(
            &mut e,
            "bytes_received",
            "Bytes read from LDAP clients.",
            load(&t.bytes_received),
        )?;
        counter(
            &mut e,
            "bytes_sent",
            "Bytes written to LDAP clients.",
            load(&t.bytes_sent),
        )?;
        counter(
            &mut e,
            "entries_sent",
            "Search result entries sent.",
            load(&t.entries_sent),
        )?;
        gauge(
            &mut e,
            "write_waits",
            "Operations waiting now for room in their connection's response buffer (max_buffered_bytes).",
            load(&t.write_waits) as f64,
        )?;
        let w = sh.store.stats();
        counter(
            &mut e,
            "writer_batches",
            "Write batches committed (one log record and one fsync each).",
            load(&w.batches),
        )?;
        counter(
            &mut e,
            "writer_operations",
            "Operations the writer ran.",
            load(&w.operations),
        )?;
        gauge(
            &mut e,
            "writer_queue_depth",
            "Operations waiting for the writer.",
            w.queue_depth() as f64,
        )?;
        histogram(
            &mut e,
            "writer_batch_size",
            "Operations per write batch.",
            &w.batch_size,
            &pow2_bounds(1, 12),
            1.0,
        )?;
        histogram(
            &mut e,
            "writer_commit_seconds",
            "Time to make a write batch durable (log write and fsync).",
            &w.commit_micros,
            &pow2_bounds(4, 24),
            1e-6,
        )?;
        gauge(
            &mut e,
            "writes_refused_disk_full",
            "1 while writes are refused because the transaction log has no room (the disk is full), else 0.",
            if w.disk_full.load(std::sync::atomic::Ordering::Relaxed) {
                1.0
            } else {
                0.0
            },
        )?;
        counter(
            &mut e,
            "writer_batches_refused_disk_full",
            "Write batches refused because the disk was full.",
            load(&w.refused_full),
        )?;
        if let Some(p) = &sh.persistence {
            if let Some(free) = p.free_space() {
                gauge(
                    &mut e,
                    "disk_free_bytes",
                    "Bytes free on the data directory's file system.",
                    free as f64,
                )?;
            }
            gauge(
                &mut e,
                "log_reserve_bytes",
                "Bytes snapshots leave free for the transaction log (log_reserve_bytes).",
                p.log_reserve() as f64,
            )?;
            let s = p.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
            counter(
                &mut e,
                "snapshots",
                "Snapshots written since start.",
                s.taken,
            )?;
            counter(
                &mut e,
                "snapshots_failed",
                "Snapshots that failed since start.",
                s.failed,
            )?;
            if let Some(last) = s.last {
                let at = last
                    .at
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs_f64();
                gauge(
                    &mut e,
                    "snapshot_last_timestamp_seconds",
                    "When the last snapshot was written (Unix time).",
                    at,
                )?;
                gauge(
                    &mut e,
                    "snapshot_last_duration_seconds",
                    "How long the last snapshot took.",
                    last.seconds,
                )?;
                gauge(
                    &mut e,
                    "snapshot_last_bytes",
                    "Size of the last snapshot.",
                    last.bytes as f64,
                )?;
            }
        }
        if let Some(a) = sh.persistence.as_ref().and_then(|p| p.archiver.as_ref()) {
            let s = a.status();
            gauge(
                &mut e,
                "archive_last_batch",
                "The newest batch the archive holds.",
                s.last_batch as f64,
            )?;
            gauge(
                &mut e,
                "archive_lag_batches",
                "Batches written that the archive does not hold yet.",
                sh.store.read().seq.saturating_sub(s.last_batch) as f64,
            )?;
            gauge(
                &mut e,
                "archive_lag_seconds",
                "Age of the oldest batch not archived yet (0: none waits).",
                s.lag_seconds(std::time::SystemTime::now()),
            )?;
            counter(
                &mut e,
                "archive_files",
                "Files archived and checked since start.",
                s.files,
            )?;
            counter(
                &mut e,
                "archive_bytes",
                "Bytes archived since start.",
                s.bytes,
            )?;
            counter(
                &mut e,
                "archive_failures",
                "Failed archiving attempts since start.",
                s.failures,
            )?;
        }
        let r = sh.reloads.stats();
        counter(
            &mut e,
            "config_reloads",
            "Configuration reloads applied since start (SIGHUP, linden reload).",
            r.succeeded,
        )?;
        counter(
            &mut e,
            "config_reloads_failed",
            "Configuration reloads refused since start (the configuration was invalid; nothing changed).",
            r.failed,
        )?;
        if let Some((at, ok)) = r.last {
            gauge(
                &mut e,
                "config_last_reload_timestamp_seconds",
                "When the configuration was last reloaded (Unix time).",
                at.duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs_f64(),
            )?;
            gauge(
                &mut e,
                "config_last_reload_success",
                "Whether the last reload was applied (1) or refused (0).",
                if ok { 1.0 } else { 0.0 },
            )?;
        }
        gauge(
            &mut e,
            "entries",
            "Entries in the directory.",
            sh.store.read().len() as f64,
        )?;
        if let Some(rss) = crate::monitor::rss_bytes() {
            gauge(
                &mut e,
                "resident_memory_bytes",
                "Resident memory of the process.",
                rss as f64,
            )?;
        }
        let started = sh
            .figures
            .started
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        gauge(
            &mut e,
            "start_time_seconds",
            "When the server started (Unix time).",
            started,
        )?;
        if let Some(f) = sh.syncprov.as_ref().map(|p| p.figures(sh)) {
            gauge(
                &mut e,
                "syncprov_searches",
                "Sync searches (replication consumers) served now.",
                f.searches as f64,
            )?;
            gauge(
                &mut e,
                "syncprov_sessionlog_entries",
                "Changed entries held in the replication session log.",
                f.log_held as f64,
            )?;
            gauge(
                &mut e,
                "syncprov_sessionlog_capacity",
                "Changed entries the replication session log may hold (syncprov_sessionlog).",
                f.log_capacity as f64,
            )?;
            gauge(
                &mut e,
                "syncprov_tombstones",
                "Deleted entries remembered for replication (syncprov_tombstones).",
                f.tombstones as f64,
            )?;
            let series: Vec<(Labels, f64)> = f
                .contexts
                .iter()
                .flat_map(|(dn, csns)| {
                    csns.iter().filter_map(move |c| {
                        let t = dit::monitor::csn_unix_secs(c)?;
                        let sid = c.split('#').nth(2)?;
                        Some((vec![("suffix", dn.clone()), ("sid", sid.to_string())], t))
                    })
                })
                .collect();
            family(
                &mut e,
                "context_csn_timestamp_seconds",
                "The time of each server id's contextCSN of a naming context (Unix time).",
                MetricType::Gauge,
                &series,
            )?;
        }
        // What the registry holds (replication agreements, registered sources), grouped by
        // name so that each family is described once.
        let mut samples = sh.monitor.samples();
        samples.sort_by(|a, b| a.name.cmp(b.name));
        for group in samples.chunk_by(|a, b| a.name == b.name) {
            let Some(first) = group.first() else { continue };
            let kind = match first.kind {
                dit::monitor::Kind::Counter => MetricType::Counter,
                dit::monitor::Kind::Gauge => MetricType::Gauge,
            };
            let series: Vec<(Labels, f64)> =
                group.iter().map(|s| (s.labels.clone(), s.value)).collect();
            family(&mut e, first.name, first.help, kind, &series)?;
        }
        Ok(())
    }
}
