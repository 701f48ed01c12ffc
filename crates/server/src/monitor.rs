//! cn=Monitor as the protocol layer serves it: the tree of the server's figures (built by
//! `tree` when read, from the counters, the listeners, the store's writer figures, the
//! snapshots and `dit::monitor::Registry`), who may read it, and the search over it.
//!
//! Layout (docs/monitoring.md), in the manner of slapd's back-monitor:
//!
//! ```text
//! cn=Monitor                       monitoredInfo: Linden <version>
//!   cn=Connections                 cn=Current, cn=Total, cn=Incoming Bytes, cn=Waiting For
//!                                  Budget (monitorCounter)
//!   cn=Listeners                   cn=Listener N: labeledURI, lindenConnectionsCurrent/Total
//!   cn=Operations                  monitorOpInitiated/Completed, and per type (cn=Search, …)
//!                                  with its latency (lindenP50 … in microseconds)
//!   cn=Statistics                  cn=Bytes (sent), cn=Bytes Received, cn=Entries (sent)
//!   cn=Writer                      cn=Batches, cn=Operations, cn=Queue Depth (monitorCounter),
//!                                  cn=Batch Size, cn=Commit Latency (histograms: lindenP50 …)
//!   cn=Snapshots                   cn=Taken, cn=Failed, cn=Last (monitorTimestamp, lindenSum …)
//!   cn=Archive                     (with `archive`) cn=Last Batch, cn=Lag Batches, cn=Lag
//!                                  Seconds, cn=Files, cn=Failures (monitorCounter), cn=Last
//!                                  CSN, cn=Last Error (monitoredInfo)
//!   cn=Reloads                     cn=Applied, cn=Refused, cn=Last (monitorTimestamp, outcome)
//!   cn=Disk                        cn=Free, cn=Log Reserve (bytes), cn=Writes (accepted or
//!                                  refused for a full disk; batches refused)
//!   cn=Memory                      cn=Entries, cn=Resident (bytes)
//!   cn=Time                        cn=Start, cn=Current (monitorTimestamp), cn=Uptime (seconds)
//!   cn=Replication                 one entry per agreement (`dit::monitor::Agreement`)
//!   …                              what registered sources add
//! ```
//!
//! Reading: the administrator and the DNs of `monitor_readers`; anyone else gets
//! noSuchObject, as slapd answers when its access rules hide cn=Monitor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use dit::monitor::Node;
use schema::NormDn;
use store::stats::Histogram;
use store::Entry;

use crate::state::{OpType, Shared};
use dit::identity::Identity;

/// cn=Archive: what the archiver has done (`crate::archive`).
fn archive_node(s: &crate::archive::ArchiveStatus, seq: u64) -> Node {
    let now = SystemTime::now();
    let mut n = Node::container(
        "Archive",
        "Continuous archiving of snapshots and sealed transaction-log files (archive): the \
         newest batch archived, how far the archive is behind, files archived and failures \
         since start.",
    )
    .attr("monitoredInfo", &s.url)
    .child(
        Node::counter("Last Batch", s.last_batch)
            .attr("description", "the newest batch the archive holds"),
    )
    .child(
        Node::counter("Lag Batches", seq.saturating_sub(s.last_batch)).attr(
            "description",
            "batches written that the archive does not hold yet",
        ),
    )
    .child(
        Node::counter("Lag Seconds", s.lag_seconds(now) as u64).attr(
            "description",
            "age in seconds of the oldest batch not archived yet (0: none waits)",
        ),
    )
    .child(
        Node::counter("Files", s.files)
            .attr("description", "files archived and checked since start"),
    )
    .child(
        Node::counter("Failures", s.failures)
            .attr("description", "failed archiving attempts since start"),
    );
    if let Some(c) = &s.last_csn {
        n = n.child(
            Node::new("Last CSN", "monitoredObject")
                .attr("description", "the newest CSN of the archived logs")
                .attr("monitoredInfo", c),
        );
    }
    if let Some(e) = &s.last_error {
        n = n.child(
            Node::new("Last Error", "monitoredObject")
                .attr("description", "the last archiving failure")
                .attr("monitoredInfo", e),
        );
    }
    n
}

/// Whether `who` may read cn=Monitor: the administrator and the `monitor_readers`.
pub(crate) fn may_read(shared: &Shared, who: &Identity) -> bool {
    who.is_admin
        || who
            .ndn
            .as_ref()
            .is_some_and(|n| shared.live.load().readers.iter().any(|r| r.norm == n.norm))
}

/// The process's resident set size in bytes (`VmRSS` of /proc/self/status: the same figure as
/// the second field of /proc/self/statm, already in kB, so no page size is needed); `None`
/// where there is no /proc.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// A histogram entry: samples, sum, percentiles, largest.
fn histogram(cn: &str, description: &str, h: &Histogram) -> Node {
    Node::new(cn, "monitoredObject")
        .attr("description", description)
        .attr("monitorCounter", h.count())
        .linden("lindenSum", h.sum())
        .linden("lindenP50", h.quantile(0.5))
        .linden("lindenP90", h.quantile(0.9))
        .linden("lindenP99", h.quantile(0.99))
        .linden("lindenP999", h.quantile(0.999))
        .linden("lindenMax", h.max())
}

fn timestamp(cn: &str, t: SystemTime) -> Node {
    Node::new(cn, "monitoredObject").attr("monitorTimestamp", dit::csn::generalized_time(t))
}

/// `cn=Provider,cn=Replication`: the provider's figures, a child per naming context with its
/// contextCSN, and one per sync search served (`dit::monitor::Agreement`, role provider).
fn provider(shared: &Shared) -> Option<Node> {
    let f = shared.syncprov.as_ref()?.figures(shared);
    let contexts = f.contexts.into_iter().enumerate().map(|(i, (dn, csns))| {
        let mut n =
            Node::new(format!("Context {}", i + 1), "monitoredObject").attr("namingContexts", dn);
        for c in csns {
            n = n.linden("contextCSN", c);
        }
        n
    });
    let sessions = shared
        .monitor
        .agreements()
        .into_iter()
        .filter(|a| a.role == dit::monitor::Role::Provider)
        .map(|a| a.node())
        .collect::<Vec<_>>();
    Some(
        Node::new("Provider", "monitoredObject")
            .attr(
                "description",
                "The replication provider (syncprov): sync searches served now, the session log, \
                 the contextCSN of each naming context (cn=Context N) and each sync search (cn=Session ...).",
            )
            .linden("lindenSyncSearches", f.searches)
            .linden("lindenSessionLogEntries", f.log_held)
            .linden("lindenSessionLogCapacity", f.log_capacity)
            .children(contexts)
            .children(sessions),
    )
}

/// The whole cn=Monitor tree as it stands now.
pub(crate) fn tree(shared: &Shared) -> Node {
    let c = &shared.counters;
    let figures = &shared.figures;
    let listeners = figures.listeners();
    let connections = Node::container(
        "Connections",
        "Connections: open now, accepted since start, and the large requests they are receiving.",
    )
    .child(Node::counter("Current", shared.connections.open() as u64))
    .child(Node::counter("Total", load(&c.connections)))
    .child(
        Node::counter("Incoming Bytes", shared.incoming.held() as u64).attr(
            "description",
            format!(
                "bytes of large requests being received, taken from max_incoming_bytes ({})",
                shared.incoming.total()
            ),
        ),
    )
    .child(
        Node::counter("Waiting For Budget", shared.incoming.waiting() as u64).attr(
            "description",
            "connections whose reads are paused until max_incoming_bytes covers their request",
        ),
    );
    let listeners = Node::container(
        "Listeners",
        "The sockets the server accepts connections on.",
    )
    .children(listeners.iter().enumerate().map(|(i, l)| {
        Node::new(format!("Listener {i}"), "monitoredObject")
            .attr("labeledURI", &l.url)
            .linden("lindenConnectionsCurrent", load(&l.current))
            .linden("lindenConnectionsTotal", load(&l.total))
    }));
    let (mut initiated, mut completed) = (0, 0);
    let per_type: Vec<Node> = OpType::ALL
        .iter()
        .map(|&t| {
            let i = load(c.initiated(t));
            let d = load(c.completed(t));
            initiated += i;
            completed += d;
            let n = Node::new(t.name(), "monitorOperation")
                .attr("monitorOpInitiated", i)
                .attr("monitorOpCompleted", d);
            if t.response_tag().is_none() {
                return n;
            }
            // Microseconds from dispatch to result queued, since start.
            let h = c.latency(t);
            n.linden("lindenSum", h.sum())
                .linden("lindenP50", h.quantile(0.5))
                .linden("lindenP90", h.quantile(0.9))
                .linden("lindenP99", h.quantile(0.99))
                .linden("lindenP999", h.quantile(0.999))
                .linden("lindenMax", h.max())
        })
        .collect();
    let operations = Node::container(
        "Operations",
        "Operations initiated (dispatched) and completed (answered, abandoned or cut off); per \
     type, the latency from dispatch to result in microseconds since start (lindenP50, \
     lindenP90, lindenP99, lindenP999, lindenMax; lindenSum: their total).",
    )
    .attr("monitorOpInitiated", initiated)
    .attr("monitorOpCompleted", completed)
    .children(per_type);
    let t = &c.traffic;
    let statistics = Node::container("Statistics", "Bytes and entries on the wire.")
        .child(Node::counter("Bytes", load(&t.bytes_sent)).attr("description", "bytes sent"))
        .child(
            Node::counter("Bytes Received", load(&t.bytes_received))
                .attr("description", "bytes received"),
        )
        .child(
            Node::counter("Entries", load(&t.entries_sent))
                .attr("description", "search result entries sent"),
        );
    // Where slapd's back-monitor shows its threads waiting to write (cn=Write,cn=Waiters).
    let waiters = Node::container(
        "Waiters",
        "Operations waiting now for room to write to their clients.",
    )
    .child(
        Node::counter("Write", load(&t.write_waits)).attr(
            "description",
            "operations waiting now for room in their connection's response buffer (max_buffered_bytes): clients that leave responses unread",
        ),
    );
    let w = shared.store.stats();
    let writer = Node::container(
        "Writer",
        "The single writer: batches committed (one log record and fsync each), operations, queue.",
    )
    .child(Node::counter("Batches", load(&w.batches)))
    .child(Node::counter("Operations", load(&w.operations)))
    .child(Node::counter("Queue Depth", w.queue_depth()))
    .child(histogram(
        "Batch Size",
        "operations per batch",
        &w.batch_size,
    ))
    .child(histogram(
        "Commit Latency",
        "microseconds to make a batch durable (log write and fsync)",
        &w.commit_micros,
    ));
    let mut snapshots = Node::container("Snapshots", "Snapshots written since start.");
    if let Some(p) = &shared.persistence {
        let s = p.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
        snapshots = snapshots
            .child(Node::counter("Taken", s.taken))
            .child(Node::counter("Failed", s.failed));
        if let Some(last) = s.last {
            snapshots = snapshots.child(
                Node::new("Last", "monitoredObject")
                    .attr(
                        "description",
                        "the last snapshot written: end, milliseconds, bytes, entries",
                    )
                    .attr("monitorTimestamp", dit::csn::generalized_time(last.at))
                    .linden("lindenSum", (last.seconds * 1000.0) as u64)
                    .attr("monitorCounter", last.bytes)
                    .attr("monitoredInfo", format!("{} entries", last.entries)),
            );
        }
    }
    let archive = shared
        .persistence
        .as_ref()
        .and_then(|p| p.archiver.as_ref())
        .map(|a| archive_node(&a.status(), shared.store.read().seq));
    let r = shared.reloads.stats();
    let mut reloads = Node::container(
        "Reloads",
        "Configuration reloads since start (SIGHUP, linden reload): applied, refused, the last.",
    )
    .child(Node::counter("Applied", r.succeeded))
    .child(Node::counter("Refused", r.failed));
    if let Some((at, ok)) = r.last {
        reloads = reloads.child(
            Node::new("Last", "monitoredObject")
                .attr("monitorTimestamp", dit::csn::generalized_time(at))
                .attr("monitoredInfo", if ok { "applied" } else { "refused" }),
        );
    }
    let mut disk = Node::container(
        "Disk",
        "The data directory's file system: bytes free, bytes snapshots leave free for the \
         transaction log, and whether writes are refused because the disk is full.",
    );
    if let Some(p) = &shared.persistence {
        disk = disk.attr("monitoredInfo", p.dir.display());
        if let Some(free) = p.free_space() {
            disk = disk.child(Node::counter("Free", free).attr("description", "bytes free"));
        }
        let full = w.disk_full.load(Ordering::Relaxed);
        disk = disk
            .child(Node::counter("Log Reserve", p.log_reserve()).attr(
                "description",
                "bytes snapshots leave free for the transaction log (log_reserve_bytes)",
            ))
            .child(
                Node::new("Writes", "monitoredObject")
                    .attr(
                        "description",
                        "whether writes are accepted, or refused because the transaction log \
                         has no room (they resume by themselves once space is freed); \
                         monitorCounter: batches refused for a full disk since start",
                    )
                    .attr(
                        "monitoredInfo",
                        if full {
                            "refused: the disk is full"
                        } else {
                            "accepted"
                        },
                    )
                    .attr("monitorCounter", load(&w.refused_full)),
            );
    }
    let mut memory = Node::container("Memory", "Entries held and the process's resident memory.")
        .child(Node::counter("Entries", shared.store.read().len() as u64));
    if let Some(rss) = rss_bytes() {
        memory = memory.child(Node::counter("Resident", rss).attr("description", "bytes"));
    }
    let now = SystemTime::now();
    let uptime = now
        .duration_since(figures.started)
        .unwrap_or_default()
        .as_secs();
    let time = Node::container("Time", "Start time, current time and uptime (seconds).")
        .child(timestamp("Start", figures.started))
        .child(timestamp("Current", now))
        .child(Node::new("Uptime", "monitoredObject").attr("monitoredInfo", uptime));
    Node::new("Monitor", "monitorServer")
        .attr(
            "description",
            "This subtree holds the server's figures, mostly in operational attributes: ask for '+'.",
        )
        .attr(
            "monitoredInfo",
            format!("Linden {}", env!("CARGO_PKG_VERSION")),
        )
        .child(connections)
        .child(listeners)
        .child(operations)
        .child(statistics)
        .child(waiters)
        .child(writer)
        .child(snapshots)
        .children(archive)
        .child(reloads)
        .child(disk)
        .child(memory)
        .child(time)
        .children(shared.monitor.nodes().into_iter().map(|mut n| {
            if n.cn == "Replication" {
                n.children.extend(provider(shared));
            }
            n
        }))
}

/// The cn=Monitor entries as they stand now, parents first, with their normalized DNs.
pub(crate) fn entries(shared: &Shared) -> Vec<(NormDn, Entry)> {
    dit::monitor::build(&shared.schema(), &tree(shared))
}

/// The entries of a search based at `base` (under cn=Monitor) with `scope`, in tree order;
/// `None` when `base` is not one of them.
pub(crate) fn in_scope(
    all: &[(NormDn, Entry)],
    base: &NormDn,
    scope: store::Scope,
) -> Option<Vec<Entry>> {
    all.iter().find(|(n, _)| n.norm == base.norm)?;
    let depth = base.rdns.len();
    Some(
        all.iter()
            .filter(|(n, _)| match scope {
                store::Scope::Base => n.norm == base.norm,
                store::Scope::One => {
                    n.rdns.len() == depth + 1 && schema::norm_is_descendant(&n.norm, &base.norm)
                }
                store::Scope::Subtree => {
                    n.norm == base.norm || schema::norm_is_descendant(&n.norm, &base.norm)
                }
            })
            .map(|(_, e)| e.clone())
            .collect(),
    )
}

/// Whether a search based at `base` goes to cn=Monitor (and not to a naming context that
/// happens to hold that DN).
pub(crate) fn holds(shared: &Shared, base: &NormDn) -> bool {
    dit::monitor::is_monitor_dn(&base.norm) && shared.suffix_of(&base.norm).is_none()
}
