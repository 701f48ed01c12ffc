//! cn=Monitor, the HTTP listener (`/metrics`, `/healthz`, `/readyz`) and the JSON access log,
//! over real sockets.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{ADMIN_DN, ADMIN_PW};
use ldap3::{LdapConn, Mod, Scope, SearchEntry};

/// A server with an LDAP and a metrics listener on 127.0.0.1:0, stopped when dropped.
struct Monitored {
    url: String,
    metrics: SocketAddr,
    server: Arc<server::Server>,
    _running: common::Running,
    _data: tempfile::TempDir,
}

impl Monitored {
    fn start(tweak: impl FnOnce(&mut server::Config)) -> Monitored {
        let data = tempfile::tempdir().expect("tmp");
        let mut config = server::Config {
            data_dir: data.path().to_path_buf(),
            admin_password_hash: pwhash::hash(pwhash::Scheme::default(), ADMIN_PW.as_bytes()),
            access: Some(common::open_read_policy()),
            demo: true,
            ..server::Config::default()
        };
        tweak(&mut config);
        let running = common::Running::start(
            config,
            common::Extra {
                metrics: true,
                ..common::Extra::default()
            },
        );
        let (addr, metrics) = (running.ldap, running.metrics.expect("the metrics listener"));
        Monitored {
            url: format!("ldap://{addr}"),
            metrics,
            server: running.server.clone(),
            _running: running,
            _data: data,
        }
    }

    fn bind(&self, dn: &str, pw: &str) -> LdapConn {
        let mut c = LdapConn::new(&self.url).expect("connect");
        c.simple_bind(dn, pw)
            .expect("bind")
            .success()
            .expect("bound");
        c
    }

    fn admin(&self) -> LdapConn {
        self.bind(ADMIN_DN, ADMIN_PW)
    }
}

/// The entries of a search under cn=Monitor, by DN, and the result code.
fn monitor(
    c: &mut LdapConn,
    base: &str,
    scope: Scope,
    filter: &str,
) -> (HashMap<String, SearchEntry>, u32) {
    let r = c
        .search(base, scope, filter, vec!["*", "+"])
        .expect("search");
    let rc = r.1.rc;
    let entries =
        r.0.into_iter()
            .map(SearchEntry::construct)
            .map(|e| (e.dn.clone(), e))
            .collect();
    (entries, rc)
}

fn figure(e: &SearchEntry, attr: &str) -> u64 {
    e.attrs
        .get(attr)
        .and_then(|v| v.first())
        .unwrap_or_else(|| panic!("{} has no {attr}: {:?}", e.dn, e.attrs))
        .parse()
        .expect("a number")
}

fn one(c: &mut LdapConn, dn: &str, attr: &str) -> u64 {
    let (es, rc) = monitor(c, dn, Scope::Base, "(objectClass=*)");
    assert_eq!(rc, 0, "{dn}");
    figure(es.get(dn).unwrap_or_else(|| panic!("{dn} missing")), attr)
}

#[test]
fn admin_reads_cn_monitor_and_its_counts_move() {
    let srv = Monitored::start(|_| {});
    let mut admin = srv.admin();
    let (all, rc) = monitor(&mut admin, "cn=Monitor", Scope::Subtree, "(objectClass=*)");
    assert_eq!(rc, 0);
    for dn in [
        "cn=Monitor",
        "cn=Current,cn=Connections,cn=Monitor",
        "cn=Total,cn=Connections,cn=Monitor",
        "cn=Listener 0,cn=Listeners,cn=Monitor",
        "cn=Search,cn=Operations,cn=Monitor",
        "cn=Bytes,cn=Statistics,cn=Monitor",
        "cn=Bytes Received,cn=Statistics,cn=Monitor",
        "cn=Batches,cn=Writer,cn=Monitor",
        "cn=Queue Depth,cn=Writer,cn=Monitor",
        "cn=Commit Latency,cn=Writer,cn=Monitor",
        "cn=Taken,cn=Snapshots,cn=Monitor",
        "cn=Entries,cn=Memory,cn=Monitor",
        "cn=Resident,cn=Memory,cn=Monitor",
        "cn=Uptime,cn=Time,cn=Monitor",
        "cn=Replication,cn=Monitor",
    ] {
        assert!(all.contains_key(dn), "{dn} missing from {:?}", all.keys());
    }
    let root = &all["cn=Monitor"];
    assert!(root.attrs["monitoredInfo"][0].starts_with("Linden "));
    assert_eq!(root.attrs["hasSubordinates"], ["TRUE"]);
    let listener = &all["cn=Listener 0,cn=Listeners,cn=Monitor"];
    assert_eq!(listener.attrs["labeledURI"], [format!("{}/", srv.url)]);
    assert!(figure(listener, "lindenConnectionsCurrent") >= 1);
    assert!(figure(&all["cn=Entries,cn=Memory,cn=Monitor"], "monitorCounter") > 5);
    assert!(figure(&all["cn=Resident,cn=Memory,cn=Monitor"], "monitorCounter") > 1 << 20);

    // Without '+', the figures (operational) are left out, as slapd does.
    let r = admin
        .search(
            "cn=Search,cn=Operations,cn=Monitor",
            Scope::Base,
            "(objectClass=*)",
            Vec::<&str>::new(),
        )
        .expect("search")
        .success()
        .expect("ok");
    let e = SearchEntry::construct(r.0.into_iter().next().expect("entry"));
    assert_eq!(e.attrs["cn"], ["Search"]);
    assert!(!e.attrs.contains_key("monitorOpInitiated"));

    // One level: the direct children only; filters on the figures work.
    let (kids, _) = monitor(
        &mut admin,
        "cn=Operations,cn=Monitor",
        Scope::OneLevel,
        "(objectClass=*)",
    );
    assert_eq!(kids.len(), 10, "{:?}", kids.keys());
    let (busy, _) = monitor(
        &mut admin,
        "cn=Monitor",
        Scope::Subtree,
        "(monitorOpInitiated>=1)",
    );
    assert!(busy.contains_key("cn=Search,cn=Operations,cn=Monitor"));
    assert!(busy.contains_key("cn=Bind,cn=Operations,cn=Monitor"));
    assert!(!busy.contains_key("cn=Delete,cn=Operations,cn=Monitor"));

    let search = "cn=Search,cn=Operations,cn=Monitor";
    let (i0, c0) = (
        one(&mut admin, search, "monitorOpInitiated"),
        one(&mut admin, search, "monitorOpCompleted"),
    );
    let batches = "cn=Batches,cn=Writer,cn=Monitor";
    let b0 = one(&mut admin, batches, "monitorCounter");
    let sent0 = one(
        &mut admin,
        "cn=Bytes,cn=Statistics,cn=Monitor",
        "monitorCounter",
    );
    for uid in ["alice", "bob", "carol"] {
        admin
            .search(
                "ou=people,dc=example,dc=com",
                Scope::Subtree,
                &format!("(uid={uid})"),
                vec!["cn"],
            )
            .expect("search")
            .success()
            .expect("ok");
    }
    admin
        .modify(
            "uid=alice,ou=people,dc=example,dc=com",
            vec![Mod::Replace("description", HashSet::from(["counted"]))],
        )
        .expect("modify")
        .success()
        .expect("modified");
    // After the search that read i0: three more reads (c0, b0, sent0), three searches, and
    // the one that reads now; all but that one completed.
    assert_eq!(one(&mut admin, search, "monitorOpInitiated"), i0 + 7);
    assert!(one(&mut admin, search, "monitorOpCompleted") >= c0 + 6);
    assert!(one(&mut admin, batches, "monitorCounter") > b0);
    assert!(
        one(
            &mut admin,
            "cn=Commit Latency,cn=Writer,cn=Monitor",
            "monitorCounter"
        ) >= 1
    );
    assert!(
        one(
            &mut admin,
            "cn=Bytes,cn=Statistics,cn=Monitor",
            "monitorCounter"
        ) > sent0
    );
    assert_eq!(
        one(
            &mut admin,
            "cn=Queue Depth,cn=Writer,cn=Monitor",
            "monitorCounter"
        ),
        0
    );
    assert_eq!(
        one(
            &mut admin,
            "cn=Modify,cn=Operations,cn=Monitor",
            "monitorOpCompleted"
        ),
        1
    );

    // The data directory's file system: free space, the log's reserve, writes accepted.
    assert!(one(&mut admin, "cn=Free,cn=Disk,cn=Monitor", "monitorCounter") > 0);
    assert_eq!(
        one(
            &mut admin,
            "cn=Log Reserve,cn=Disk,cn=Monitor",
            "monitorCounter"
        ),
        64 << 20
    );
    let writes_dn = "cn=Writes,cn=Disk,cn=Monitor";
    let (es, rc) = monitor(&mut admin, writes_dn, Scope::Base, "(objectClass=*)");
    assert_eq!(rc, 0);
    let writes = es.get(writes_dn).expect("cn=Writes");
    assert_eq!(
        writes.attrs.get("monitoredInfo"),
        Some(&vec!["accepted".to_string()])
    );
    assert_eq!(figure(writes, "monitorCounter"), 0);

    // An entry that is not there: noSuchObject with the nearest one as matchedDN.
    let r = admin
        .search(
            "cn=Nothing,cn=Writer,cn=Monitor",
            Scope::Base,
            "(objectClass=*)",
            vec!["*"],
        )
        .expect("search");
    assert_eq!(r.1.rc, 32);
    assert_eq!(r.1.matched, "cn=Writer,cn=Monitor");
}

#[test]
fn only_the_administrator_and_configured_readers_see_cn_monitor() {
    let srv = Monitored::start(|c| {
        c.monitor_readers = vec!["uid=bob,ou=people,dc=example,dc=com".into()];
    });
    let mut anon = LdapConn::new(&srv.url).expect("connect");
    for scope in [Scope::Base, Scope::OneLevel, Scope::Subtree] {
        let (es, rc) = monitor(&mut anon, "cn=Monitor", scope, "(objectClass=*)");
        assert_eq!((es.len(), rc), (0, 32), "anonymous, {scope:?}");
    }
    let mut alice = srv.bind("uid=alice,ou=people,dc=example,dc=com", "password");
    let (es, rc) = monitor(
        &mut alice,
        "cn=Operations,cn=Monitor",
        Scope::Subtree,
        "(objectClass=*)",
    );
    assert_eq!((es.len(), rc), (0, 32), "an ordinary user");
    // The monitor is not part of a root search either.
    let (es, _) = monitor(&mut alice, "", Scope::Subtree, "(cn=Monitor)");
    assert!(es.is_empty());
    let mut bob = srv.bind("uid=BOB,ou=people,dc=example,dc=com", "password");
    let (es, rc) = monitor(
        &mut bob,
        "cn=Monitor",
        Scope::Subtree,
        "(objectClass=monitorOperation)",
    );
    assert_eq!((es.len(), rc), (10, 0), "a configured reader");
}

/// `GET path` over HTTP/1.1: status code, headers (lower-case names) and body.
fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let status = head
        .split(' ')
        .nth(1)
        .expect("status")
        .parse()
        .expect("code");
    (status, head.to_ascii_lowercase(), body.to_string())
}

/// Parses Prometheus/OpenMetrics text: every line a comment or `name{labels} value`; returns
/// the samples by their name and labels as written.
fn parse_metrics(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    assert!(
        text.ends_with("# EOF\n"),
        "OpenMetrics text ends with # EOF"
    );
    for line in text.lines() {
        if line.starts_with('#') {
            assert!(
                line.starts_with("# HELP ")
                    || line.starts_with("# TYPE ")
                    || line == "# EOF"
                    || line.starts_with("# UNIT "),
                "{line}"
            );
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                && !name.starts_with(|c: char| c.is_ascii_digit()),
            "bad metric name in {line}"
        );
        if name_end < series.len() {
            let labels = &series[name_end..];
            assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
            for pair in labels[1..labels.len() - 1].split("\",") {
                let (k, v) = pair
                    .split_once('=')
                    .unwrap_or_else(|| panic!("label in {line}"));
                assert!(
                    k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "{line}"
                );
                assert!(v.starts_with('"'), "{line}");
            }
        }
        let v: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        out.insert(series.to_string(), v);
    }
    out
}

#[test]
fn metrics_health_and_readiness_over_http() {
    let srv = Monitored::start(|_| {});
    let mut admin = srv.admin();
    for uid in ["alice", "bob"] {
        admin
            .search(
                "ou=people,dc=example,dc=com",
                Scope::Subtree,
                &format!("(uid={uid})"),
                vec!["cn"],
            )
            .expect("search")
            .success()
            .expect("ok");
    }
    admin
        .modify(
            "uid=bob,ou=people,dc=example,dc=com",
            vec![Mod::Replace("description", HashSet::from(["x"]))],
        )
        .expect("modify")
        .success()
        .expect("modified");
    let (status, head, body) = http(srv.metrics, "GET", "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(
        head.contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    let m = parse_metrics(&body);
    assert!(
        m[r#"linden_operations_initiated_total{op="search"}"#] >= 2.0,
        "{body}"
    );
    assert!(m[r#"linden_operations_completed_total{op="search"}"#] >= 2.0);
    assert_eq!(m[r#"linden_operations_completed_total{op="modify"}"#], 1.0);
    assert!(m["linden_connections_total"] >= 1.0);
    assert!(m["linden_connections_current"] >= 1.0);
    assert!(m["linden_bytes_received_total"] > 0.0);
    assert!(m["linden_bytes_sent_total"] > 0.0);
    assert!(m["linden_writer_batches_total"] >= 1.0);
    assert!(m["linden_entries"] > 5.0);
    assert!(m["linden_disk_free_bytes"] > 0.0);
    assert_eq!(m["linden_log_reserve_bytes"], 64.0 * 1024.0 * 1024.0);
    assert_eq!(m["linden_writes_refused_disk_full"], 0.0);
    assert_eq!(m["linden_writer_batches_refused_disk_full_total"], 0.0);
    assert!(m["linden_resident_memory_bytes"] > 0.0);
    assert!(m["linden_writer_commit_seconds_count"] >= 1.0);
    assert_eq!(
        m[r#"linden_writer_commit_seconds_bucket{le="+Inf"}"#],
        m["linden_writer_commit_seconds_count"]
    );
    assert!(
        m[r#"linden_writer_batch_size_bucket{le="1.0"}"#] >= 1.0,
        "{body}"
    );
    let listener = format!(
        r#"linden_listener_connections_total{{listener="{}/"}}"#,
        srv.url
    );
    assert!(m[&listener] >= 1.0, "{body}");

    let (status, _, body) = http(srv.metrics, "GET", "/healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let (status, _, body) = http(srv.metrics, "GET", "/readyz");
    assert_eq!((status, body.as_str()), (200, "ready\n"));
    assert_eq!(http(srv.metrics, "GET", "/nothing").0, 404);
    assert_eq!(http(srv.metrics, "POST", "/metrics").0, 405);

    // A consumer agreement (as replication registers it) gates readiness until it has caught
    // up, and shows in cn=Monitor and /metrics.
    let a = srv.server.monitor().agreement(
        dit::monitor::Role::Consumer,
        "rid=001",
        "ldap://provider.example:389",
    );
    let (status, _, body) = http(srv.metrics, "GET", "/readyz");
    assert_eq!(status, 503);
    assert!(body.contains("rid=001 is connecting"), "{body}");
    a.set_state(dit::monitor::ReplState::Persisting);
    a.set_context_csn("20261125010203.000000Z#000000#001#000000");
    a.count_changes(3);
    assert_eq!(http(srv.metrics, "GET", "/readyz").0, 200);
    let dn = "cn=Consumer rid\\3D001,cn=Replication,cn=Monitor";
    let (es, rc) = monitor(
        &mut admin,
        "cn=Replication,cn=Monitor",
        Scope::OneLevel,
        "(objectClass=*)",
    );
    assert_eq!(rc, 0);
    let e = es
        .values()
        .next()
        .unwrap_or_else(|| panic!("no agreement entry; {dn}"));
    assert_eq!(e.attrs["lindenReplicationState"], ["persisting"]);
    assert_eq!(
        e.attrs["contextCSN"],
        ["20261125010203.000000Z#000000#001#000000"]
    );
    assert_eq!(e.attrs["lindenReplicationChanges"], ["3"]);
    let m = parse_metrics(&http(srv.metrics, "GET", "/metrics").2);
    let series = r#"linden_replication_changes_total{role="consumer",name="rid=001",peer="ldap://provider.example:389"}"#;
    assert_eq!(m[series], 3.0);
    drop(a);
    let (es, _) = monitor(
        &mut admin,
        "cn=Replication,cn=Monitor",
        Scope::OneLevel,
        "(objectClass=*)",
    );
    assert!(es.is_empty());
}

/// Each operation type's latency (dispatch to result) is a histogram in /metrics
/// (`linden_operation_duration_seconds{op}`) and percentiles in cn=Monitor.
#[test]
fn operation_latency_by_type_in_metrics_and_cn_monitor() {
    let srv = Monitored::start(|_| {});
    let mut admin = srv.admin();
    for _ in 0..5 {
        admin
            .search(
                "ou=people,dc=example,dc=com",
                Scope::Subtree,
                "(uid=alice)",
                vec!["cn"],
            )
            .expect("search")
            .success()
            .expect("ok");
    }
    admin
        .compare("uid=alice,ou=people,dc=example,dc=com", "uid", "alice")
        .expect("compare");
    admin
        .modify(
            "uid=bob,ou=people,dc=example,dc=com",
            vec![Mod::Replace("description", HashSet::from(["x"]))],
        )
        .expect("modify")
        .success()
        .expect("modified");
    let m = parse_metrics(&http(srv.metrics, "GET", "/metrics").2);
    let count = |op: &str| m[&format!(r#"linden_operation_duration_seconds_count{{op="{op}"}}"#)];
    assert!(count("search") >= 5.0, "{m:?}");
    assert_eq!(count("compare"), 1.0);
    assert_eq!(count("modify"), 1.0);
    assert!(count("bind") >= 1.0);
    assert_eq!(count("add"), 0.0);
    for op in ["search", "modify"] {
        let inf = format!(r#"linden_operation_duration_seconds_bucket{{le="+Inf",op="{op}"}}"#);
        let series: Vec<&String> = m
            .keys()
            .filter(|k| k.starts_with("linden_operation_duration"))
            .collect();
        assert_eq!(m.get(&inf), Some(&count(op)), "{inf} in {series:?}");
        assert!(m[&format!(r#"linden_operation_duration_seconds_sum{{op="{op}"}}"#)] > 0.0);
    }
    // Operations without a result have no latency.
    assert!(!m
        .keys()
        .any(|k| k.starts_with("linden_operation_duration_seconds") && k.contains("unbind")));

    let (all, rc) = monitor(
        &mut admin,
        "cn=Operations,cn=Monitor",
        Scope::OneLevel,
        "(objectClass=*)",
    );
    assert_eq!(rc, 0);
    let search = &all["cn=Search,cn=Operations,cn=Monitor"];
    let (p50, p90, p99, max) = (
        figure(search, "lindenP50"),
        figure(search, "lindenP90"),
        figure(search, "lindenP99"),
        figure(search, "lindenMax"),
    );
    assert!(p50 <= p90 && p90 <= p99 && p99 <= max, "{search:?}");
    assert!(figure(search, "lindenSum") >= max, "{search:?}");
    assert!(figure(&all["cn=Modify,cn=Operations,cn=Monitor"], "lindenMax") > 0);
    assert!(!all["cn=Unbind,cn=Operations,cn=Monitor"]
        .attrs
        .contains_key("lindenP50"));
}

#[test]
fn json_access_log_is_one_object_per_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("access.json");
    let l2 = log.clone();
    let srv = Monitored::start(move |c| {
        c.access_log = server::logs::LogTarget::File(l2);
        c.access_log_format = server::logs::LogFormat::Json;
    });
    let mut admin = srv.admin();
    admin
        .search(
            "ou=people,dc=example,dc=com",
            Scope::OneLevel,
            "(uid=a\"li*)",
            vec!["cn", "mail"],
        )
        .expect("search");
    admin
        .search(
            "ou=people,dc=example,dc=com",
            Scope::OneLevel,
            "(uid=alice)",
            vec!["cn"],
        )
        .expect("search")
        .success()
        .expect("ok");
    admin.unbind().expect("unbind");
    let text = common::wait_for(&log, |t| t.contains("\"CLOSED\""));
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for l in &lines {
        for key in ["time", "conn", "op", "client", "bound", "type"] {
            assert!(l.get(key).is_some(), "no {key} in {l}");
        }
        assert!(l["conn"].is_u64() && l["op"].is_i64(), "{l}");
    }
    let kinds: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    for k in ["CONNECT", "BIND", "SEARCH", "UNBIND", "CLOSED"] {
        assert!(kinds.contains(&k), "{k} missing: {kinds:?}");
    }
    let bind = lines.iter().find(|l| l["type"] == "BIND").expect("bind");
    assert_eq!(bind["dn"], ADMIN_DN);
    assert_eq!(bind["method"], "simple");
    assert_eq!(bind["result"], 0);
    let searches: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["type"] == "SEARCH").collect();
    assert_eq!(searches.len(), 2, "{text}");
    // The substring search runs on the blocking pool: its line may come second.
    let quoted = searches
        .iter()
        .find(|l| l["filter"] == "(uid=a\"li*)")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(quoted["scope"], "one");
    assert_eq!(quoted["attrs"], "cn mail");
    let plain = searches
        .iter()
        .find(|l| l["filter"] == "(uid=alice)")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(plain["entries"], 1);
    assert_eq!(plain["base"], "ou=people,dc=example,dc=com");
    assert!(plain["etime_us"].is_u64());
    let connect = lines
        .iter()
        .find(|l| l["type"] == "CONNECT")
        .expect("connect");
    assert_eq!(connect["tls"], "no");
}

/// Polls `f` (bounded: 400 tries 25 ms apart) until it returns `Some`.
fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    for _ in 0..400 {
        if let Some(v) = f() {
            return v;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{what}: not reached after 400 polls");
}

/// A consumer of `provider` (rid 1, the whole suffix, as the administrator, retry every
/// second) with a metrics listener.
fn consumer_of(provider: &str) -> Monitored {
    let url = provider.to_string();
    Monitored::start(move |c| {
        c.demo = false;
        c.syncrepl = vec![common::consumer_spec(&url)];
    })
}

fn values(e: &SearchEntry, attr: &str) -> Vec<String> {
    e.attrs.get(attr).cloned().unwrap_or_default()
}

fn entry(c: &mut LdapConn, dn: &str) -> SearchEntry {
    let (mut es, rc) = monitor(c, dn, Scope::Base, "(objectClass=*)");
    assert_eq!(rc, 0, "{dn}");
    es.remove(dn)
        .unwrap_or_else(|| panic!("{dn} missing: {es:?}"))
}

fn context_csn(c: &mut LdapConn) -> Vec<String> {
    let r = c
        .search(
            common::BASE,
            Scope::Base,
            "(objectClass=*)",
            vec!["contextCSN"],
        )
        .expect("search")
        .success()
        .expect("ok");
    let e = SearchEntry::construct(r.0.into_iter().next().expect("suffix entry"));
    let mut v = values(&e, "contextCSN");
    v.sort();
    v
}

const CONSUMER: &str = "cn=Consumer 001,cn=Replication,cn=Monitor";
const PROVIDER: &str = "cn=Provider,cn=Replication,cn=Monitor";

/// A Linden provider and a Linden consumer: the consumer's agreement (cn=Consumer 001, laid
/// out as slapd 2.5's syncrepl entry, and `linden_replication_*`) and the provider's figures
/// (cn=Provider, its sync search, `linden_syncprov_*`) follow the refresh and a change;
/// `/readyz` on the replica answers ready once it has refreshed.
#[test]
fn replication_status_in_cn_monitor_metrics_and_readyz() {
    let p = Monitored::start(|c| {
        c.syncprov = true;
        c.server_id = 1;
    });
    let r = consumer_of(&p.url);
    // Ready once the refresh is done (the consumer is persisting).
    poll("the replica becomes ready", || {
        (http(r.metrics, "GET", "/readyz").0 == 200).then_some(())
    });
    let mut pa = p.admin();
    let mut ra = r.admin();
    let want = context_csn(&mut pa);
    assert!(!want.is_empty());
    let e = entry(&mut ra, CONSUMER);
    assert!(values(&e, "objectClass").contains(&"olmSyncReplInstance".to_string()));
    assert_eq!(
        values(&e, "olmSRProviderURIList"),
        std::slice::from_ref(&p.url)
    );
    assert_eq!(values(&e, "olmSRSyncPhase"), ["Persist"]);
    assert_eq!(values(&e, "lindenReplicationState"), ["persisting"]);
    assert_eq!(figure(&e, "lindenReplicationRefreshes"), 1);
    assert_eq!(figure(&e, "lindenReplicationFailures"), 0);
    let demo = figure(&e, "lindenReplicationChanges");
    assert!(demo >= 10, "the demo entries were applied: {demo}");
    assert!(values(&e, "olmSRLastCookieRcvd")[0].contains("csn="));
    assert!(values(&e, "olmSRLastCookieSent")[0].starts_with("rid=001"));
    assert!(values(&e, "olmSRConnection")[0].starts_with("127.0.0.1:"));
    assert_ne!(values(&e, "olmSRLastContact"), ["00000101000000Z"]);
    assert_eq!(values(&e, "contextCSN"), want, "contextCSN received");

    // The provider: one sync search, the session log, the contextCSN of the naming context.
    let pe = entry(&mut pa, PROVIDER);
    assert_eq!(figure(&pe, "lindenSyncSearches"), 1);
    assert_eq!(figure(&pe, "lindenSessionLogCapacity"), 10_000);
    let ctx = entry(&mut pa, &format!("cn=Context 1,{PROVIDER}"));
    assert_eq!(values(&ctx, "namingContexts"), [common::BASE]);
    assert_eq!(values(&ctx, "contextCSN"), want);
    let (sessions, _) = monitor(&mut pa, PROVIDER, Scope::OneLevel, "(cn=Session*)");
    let s = sessions.values().next().expect("the sync search's entry");
    assert_eq!(values(s, "lindenReplicationState"), ["persisting"]);
    assert!(values(s, "monitorConnectionPeerAddress")[0].starts_with("IP=127.0.0.1:"));
    assert_eq!(figure(s, "lindenReplicationChanges"), demo);

    // A change on the provider: counted on both sides, the contextCSN moves, the log grows.
    pa.modify(
        "uid=alice,ou=people,dc=example,dc=com",
        vec![Mod::Replace("description", ["replicated"].into())],
    )
    .expect("modify")
    .success()
    .expect("ok");
    let want = context_csn(&mut pa);
    // (The cookie is noted as it arrives, the change once committed: wait for both.)
    poll("the consumer applies the change", || {
        let e = entry(&mut ra, CONSUMER);
        (values(&e, "contextCSN") == want && figure(&e, "lindenReplicationChanges") == demo + 1)
            .then_some(())
    });
    poll("the provider counts it sent and logged", || {
        let pe = entry(&mut pa, PROVIDER);
        let (sessions, _) = monitor(&mut pa, PROVIDER, Scope::OneLevel, "(cn=Session*)");
        let sent = sessions
            .values()
            .map(|s| figure(s, "lindenReplicationChanges"))
            .sum::<u64>();
        (figure(&pe, "lindenSessionLogEntries") >= 1 && sent == demo + 1).then_some(())
    });
    // Quiet for a second: the replica has applied everything it was sent, lag zero.
    poll("the lag falls to zero", || {
        (figure(&entry(&mut ra, CONSUMER), "lindenReplicationLagMillis") == 0).then_some(())
    });

    // The same in /metrics.
    let m = parse_metrics(&http(r.metrics, "GET", "/metrics").2);
    let labels = format!(r#"role="consumer",name="001",peer="{}""#, p.url);
    assert_eq!(
        m[&format!("linden_replication_changes_total{{{labels}}}")],
        (demo + 1) as f64
    );
    assert_eq!(
        m[&format!("linden_replication_refreshes_total{{{labels}}}")],
        1.0
    );
    assert_eq!(
        m[&format!("linden_replication_failures_total{{{labels}}}")],
        0.0
    );
    assert_eq!(
        m[&format!(r#"linden_replication_state{{{labels},state="persisting"}}"#)],
        1.0
    );
    assert_eq!(
        m[&format!("linden_replication_lag_seconds{{{labels}}}")],
        0.0
    );
    let csn_time =
        m[&format!(r#"linden_replication_context_csn_timestamp_seconds{{{labels},sid="001"}}"#)];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    assert!((now - csn_time).abs() < 600.0, "{csn_time} vs {now}");
    let m = parse_metrics(&http(p.metrics, "GET", "/metrics").2);
    assert_eq!(m["linden_syncprov_searches"], 1.0);
    assert!(m["linden_syncprov_sessionlog_entries"] >= 1.0);
    assert_eq!(m["linden_syncprov_tombstones"], 0.0, "nothing was deleted");
    assert_eq!(
        m[r#"linden_context_csn_timestamp_seconds{suffix="dc=example,dc=com",sid="001"}"#],
        csn_time
    );
    let provider_side = m
        .iter()
        .filter(|(k, _)| k.starts_with("linden_replication_changes_total{role=\"provider\""))
        .map(|(_, v)| *v)
        .collect::<Vec<_>>();
    assert_eq!(provider_side, [(demo + 1) as f64]);

    // The Grafana dashboard and the alert rules name only series these two servers export (a
    // snapshot and a refused reload first: their series appear once there is one).
    p.server.snapshot().expect("a snapshot");
    assert!(!p
        .server
        .reload_with(Err("a refused reload (test)".into()))
        .ok());
    assert_packaging_names_exported(&[
        parse_metrics(&http(p.metrics, "GET", "/metrics").2),
        parse_metrics(&http(r.metrics, "GET", "/metrics").2),
    ]);

    // The consumer gone, its sync search leaves the provider's figures.
    drop(r);
    poll("the sync search ends", || {
        (figure(&entry(&mut pa, PROVIDER), "lindenSyncSearches") == 0).then_some(())
    });
}

/// Every `linden_*` series named in packaging/grafana and packaging/prometheus is one of the
/// series in `scrapes` (histograms as `_bucket`, counters as `_total`, as exported).
fn assert_packaging_names_exported(scrapes: &[HashMap<String, f64>]) {
    let exported: HashSet<&str> = scrapes
        .iter()
        .flat_map(|m| m.keys())
        .map(|k| k.split('{').next().unwrap_or(k))
        .collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging");
    for file in [
        "grafana/linden-dashboard.json",
        "prometheus/linden-alerts.yml",
    ] {
        let text = std::fs::read_to_string(root.join(file)).expect("packaging file");
        let mut named = 0;
        for (at, _) in text.match_indices("linden_") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                exported.contains(name.as_str()),
                "{file} names {name}, which /metrics does not export"
            );
            named += 1;
        }
        assert!(named >= 10, "{file} names {named} series");
    }
}

/// A consumer whose provider is down: /readyz says so, and cn=Monitor shows the failures, the
/// last error and the next try.
#[test]
fn a_replica_whose_provider_is_down_is_not_ready_and_says_why() {
    let gone = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("ldap://{}", gone.local_addr().expect("addr"));
    drop(gone);
    let r = consumer_of(&url);
    let mut ra = r.admin();
    let e = poll("a failure is reported", || {
        let e = entry(&mut ra, CONSUMER);
        (figure(&e, "lindenReplicationFailures") >= 1).then_some(e)
    });
    assert!(
        values(&e, "lindenReplicationLastError")[0].contains("network"),
        "{e:?}"
    );
    assert_eq!(values(&e, "olmSRSyncPhase"), ["Refresh"]);
    assert_eq!(values(&e, "olmSRLastConnect"), ["00000101000000Z"]);
    let (status, _, body) = http(r.metrics, "GET", "/readyz");
    assert_eq!(status, 503);
    assert!(body.contains("consumer 001 is"), "{body}");
    assert!(body.contains(&url), "{body}");
}

/// `ldapsearch -LLL` of cn=Monitor (OpenLDAP's client): each entry's DN → attribute → values.
fn ldapsearch_monitor(url: &str, base: &str) -> HashMap<String, HashMap<String, Vec<String>>> {
    let (rc, out, err) = common::tool(
        "ldapsearch",
        &[
            "-LLL",
            "-x",
            "-o",
            "ldif-wrap=no",
            "-H",
            url,
            "-D",
            ADMIN_DN,
            "-w",
            ADMIN_PW,
            "-b",
            base,
            "-s",
            "sub",
            "(objectClass=*)",
            "*",
            "+",
        ],
        None,
    );
    assert_eq!(rc, 0, "ldapsearch: {err}");
    let mut out_map = HashMap::new();
    for block in out.split("\n\n") {
        let mut dn = String::new();
        let mut attrs: HashMap<String, Vec<String>> = HashMap::new();
        for line in block.lines() {
            let Some((k, v)) = line.split_once(": ") else {
                continue;
            };
            if k == "dn" {
                dn = v.to_ascii_lowercase();
            } else {
                attrs.entry(k.to_string()).or_default().push(v.to_string());
            }
        }
        if !dn.is_empty() {
            out_map.insert(dn, attrs);
        }
    }
    out_map
}

/// `curl /metrics`: the samples.
fn curl_metrics(addr: SocketAddr) -> HashMap<String, f64> {
    let url = format!("http://{addr}/metrics");
    let (rc, out, err) = common::tool("curl", &["-sS", "--max-time", "10", &url], None);
    assert_eq!(rc, 0, "curl: {err}");
    parse_metrics(&out)
}

/// Issue 18's "done when": `curl /metrics` and `ldapsearch -b cn=Monitor` show the figures
/// moving under `linden bench` (search+modify, one second): operations by type, entries and
/// bytes sent, the writer's batches and commit latencies, each grown by at least what the
/// benchmark reports it did.
#[test]
fn curl_metrics_and_ldapsearch_cn_monitor_follow_linden_bench() {
    let srv = Monitored::start(|c| c.demo = false);
    common::add_bench_users(&mut srv.admin(), 50, false);
    let figures = |m: &HashMap<String, f64>,
                   ldif: &HashMap<String, HashMap<String, Vec<String>>>| {
        let counter = |dn: &str, attr: &str| -> f64 {
            ldif.get(dn)
                .and_then(|e| e.get(attr))
                .and_then(|v| v.first())
                .unwrap_or_else(|| panic!("{dn} has no {attr}"))
                .parse()
                .expect("a number")
        };
        [
            (
                m[r#"linden_operations_completed_total{op="search"}"#],
                counter("cn=search,cn=operations,cn=monitor", "monitorOpCompleted"),
            ),
            (
                m[r#"linden_operations_completed_total{op="modify"}"#],
                counter("cn=modify,cn=operations,cn=monitor", "monitorOpCompleted"),
            ),
            (
                m["linden_entries_sent_total"],
                counter("cn=entries,cn=statistics,cn=monitor", "monitorCounter"),
            ),
            (
                m["linden_writer_batches_total"],
                counter("cn=batches,cn=writer,cn=monitor", "monitorCounter"),
            ),
            (
                m["linden_writer_commit_seconds_count"],
                counter("cn=commit latency,cn=writer,cn=monitor", "monitorCounter"),
            ),
            (
                m["linden_bytes_sent_total"],
                counter("cn=bytes,cn=statistics,cn=monitor", "monitorCounter"),
            ),
        ]
    };
    let before = figures(
        &curl_metrics(srv.metrics),
        &ldapsearch_monitor(&srv.url, "cn=Monitor"),
    );
    let s = common::bench(&srv.url, "search+modify", &[]);
    let ops = |name: &str| -> f64 {
        s.operations
            .iter()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("no {name} in {s:?}"))
            .ops as f64
    };
    let (searches, modifies) = (ops("search"), ops("modify"));
    assert!(searches > 0.0 && modifies > 0.0, "{s:?}");
    let after = figures(
        &curl_metrics(srv.metrics),
        &ldapsearch_monitor(&srv.url, "cn=Monitor"),
    );
    // Each figure at least what the benchmark did (the readings themselves add a few
    // searches and bytes); /metrics and cn=Monitor agree on the direction.
    let least = [searches, modifies, searches, 1.0, 1.0, searches * 100.0];
    let names = [
        "searches",
        "modifies",
        "entries sent",
        "batches",
        "commits",
        "bytes sent",
    ];
    for (i, ((mb, lb), (ma, la))) in before.iter().zip(&after).enumerate() {
        assert!(ma - mb >= least[i], "/metrics {}: {mb} → {ma}", names[i]);
        assert!(la - lb >= least[i], "cn=Monitor {}: {lb} → {la}", names[i]);
    }
    // The writer took every modify (one or more per batch).
    assert!(after[3].0 - before[3].0 <= modifies + 10.0);
}
