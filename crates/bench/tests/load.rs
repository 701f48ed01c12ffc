//! `linden bench` against a small fake LDAP server on 127.0.0.1:0 that counts what it answers:
//! the operation counts the generator reports must equal what the server saw.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use bench::load::{BenchArgs, Summary};
use clap::Parser;
use proto::{LdapMessage, LdapResult, ProtocolOp, ResultCode};
use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

#[derive(Default, Debug)]
struct Counts {
    bind: AtomicU64,
    search: AtomicU64,
    modify: AtomicU64,
    compare: AtomicU64,
    add: AtomicU64,
    /// Adds whose userPassword is `{SSHA}` of "password", and adds whose userPassword is
    /// "password" itself.
    add_ssha: AtomicU64,
    add_clear: AtomicU64,
    delete: AtomicU64,
    /// Searches with a leading-substring filter on mail (`user.N` then anything), and on cn
    /// (a name `linden gen` uses, a space, a surname).
    mail_prefix: AtomicU64,
    cn_prefix: AtomicU64,
}

impl Counts {
    fn get(&self, c: &AtomicU64) -> u64 {
        c.load(Ordering::SeqCst)
    }
}

fn result(code: ResultCode) -> LdapResult<'static> {
    LdapResult {
        code,
        matched_dn: Cow::Borrowed(b""),
        message: Cow::Borrowed(b""),
        referral: vec![],
    }
}

/// Binds as this DN are answered busy (51) the first `BUSY_BINDS` times on each connection,
/// as a load balancer whose bind connections are taken answers.
const BUSY_DN: &[u8] = b"cn=busy";
const BUSY_BINDS: u32 = 3;

/// Answers each request in order: a search gets one entry and success; compare of the value
/// `fail` gets noSuchObject; a bind as `BUSY_DN` gets busy `BUSY_BINDS` times; everything else
/// succeeds.
async fn serve_conn(mut s: tokio::net::TcpStream, counts: Arc<Counts>) -> Option<()> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut busy_left = BUSY_BINDS;
    loop {
        while let Ok(Some(n)) = proto::frame(&buf, 1 << 20) {
            let msg = LdapMessage::decode(&buf[..n]).ok()?;
            let id = msg.id;
            let reply = |op, out: &mut Vec<u8>| {
                LdapMessage {
                    id,
                    op,
                    controls: vec![],
                }
                .encode(out)
            };
            match msg.op {
                ProtocolOp::BindRequest(b) => {
                    counts.bind.fetch_add(1, Ordering::SeqCst);
                    let code = if &*b.name == BUSY_DN && busy_left > 0 {
                        busy_left -= 1;
                        ResultCode::Busy
                    } else {
                        ResultCode::Success
                    };
                    reply(ProtocolOp::BindResponse(result(code), None), &mut out);
                }
                ProtocolOp::SearchRequest(r) => {
                    counts.search.fetch_add(1, Ordering::SeqCst);
                    if let proto::Filter::Substrings {
                        attr,
                        initial: Some(i),
                        any,
                        final_: None,
                    } = &r.filter
                    {
                        let i = String::from_utf8_lossy(i);
                        let digits = i.strip_prefix("user.").unwrap_or("x");
                        if attr.as_ref() == b"mail"
                            && any.is_empty()
                            && digits.chars().all(|c| c.is_ascii_digit())
                        {
                            counts.mail_prefix.fetch_add(1, Ordering::SeqCst);
                        }
                        let words: Vec<&str> = i.split(' ').collect();
                        if attr.as_ref() == b"cn"
                            && any.is_empty()
                            && words.len() == 2
                            && words.iter().all(|w| w.len() > 1 && !w.contains('{'))
                        {
                            counts.cn_prefix.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    reply(
                        ProtocolOp::SearchResultEntry {
                            dn: Cow::Borrowed(b"uid=user.1,ou=people,dc=example,dc=com"),
                            attributes: vec![],
                        },
                        &mut out,
                    );
                    reply(
                        ProtocolOp::SearchResultDone(result(ResultCode::Success)),
                        &mut out,
                    );
                }
                ProtocolOp::ModifyRequest(_) => {
                    counts.modify.fetch_add(1, Ordering::SeqCst);
                    reply(
                        ProtocolOp::ModifyResponse(result(ResultCode::Success)),
                        &mut out,
                    );
                }
                ProtocolOp::CompareRequest(c) => {
                    counts.compare.fetch_add(1, Ordering::SeqCst);
                    let code = if &*c.value == b"fail" {
                        ResultCode::NoSuchObject
                    } else {
                        ResultCode::CompareTrue
                    };
                    reply(ProtocolOp::CompareResponse(result(code)), &mut out);
                }
                ProtocolOp::AddRequest(a) => {
                    counts.add.fetch_add(1, Ordering::SeqCst);
                    let pw = a
                        .attributes
                        .iter()
                        .find(|p| p.name.eq_ignore_ascii_case(b"userPassword"))
                        .and_then(|p| p.values.first());
                    match pw.map(|v| v.as_ref()) {
                        Some(b"password") => counts.add_clear.fetch_add(1, Ordering::SeqCst),
                        Some(v) if is_ssha_of(v, b"password") => {
                            counts.add_ssha.fetch_add(1, Ordering::SeqCst)
                        }
                        _ => 0,
                    };
                    reply(
                        ProtocolOp::AddResponse(result(ResultCode::Success)),
                        &mut out,
                    );
                }
                ProtocolOp::DelRequest(_) => {
                    counts.delete.fetch_add(1, Ordering::SeqCst);
                    reply(
                        ProtocolOp::DelResponse(result(ResultCode::Success)),
                        &mut out,
                    );
                }
                ProtocolOp::UnbindRequest => return Some(()),
                _ => return None,
            }
            buf.drain(..n);
        }
        if !out.is_empty() {
            s.write_all(&out).await.ok()?;
            out.clear();
        }
        if s.read_buf(&mut buf).await.ok()? == 0 {
            return Some(());
        }
    }
}

/// Whether `v` is `{SSHA}` (SHA-1 of the password and the salt, then the salt, in base64) of
/// `password`.
fn is_ssha_of(v: &[u8], password: &[u8]) -> bool {
    use base64::Engine;
    use sha1::{Digest, Sha1};
    let Some(b64) = v.strip_prefix(b"{SSHA}") else {
        return false;
    };
    let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(b64) else {
        return false;
    };
    if raw.len() <= 20 {
        return false;
    }
    let (digest, salt) = raw.split_at(20);
    let mut h = Sha1::new();
    h.update(password);
    h.update(salt);
    h.finalize().as_slice() == digest
}

/// Starts the fake server on its own runtime thread; returns its address and counters.
fn fake_server() -> (SocketAddr, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let c = counts.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fake-ldap")
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx.send(l.local_addr().expect("addr")).expect("send addr");
            loop {
                let Ok((s, _)) = l.accept().await else {
                    continue;
                };
                let _ = s.set_nodelay(true);
                tokio::spawn(serve_conn(s, c.clone()));
            }
        });
    });
    (rx.recv().expect("server address"), counts)
}

fn args(addr: SocketAddr, extra: &[&str]) -> BenchArgs {
    let url = format!("ldap://{addr}");
    let mut argv = vec!["bench"];
    argv.extend_from_slice(extra);
    argv.extend_from_slice(&["--url", &url, "--quiet"]);
    Cli::try_parse_from(argv).expect("valid arguments").args
}

fn run(addr: SocketAddr, extra: &[&str]) -> Summary {
    bench::load::run(&args(addr, extra)).expect("bench run succeeds")
}

const SHORT: &[&str] = &[
    "--connections",
    "2",
    "--depth",
    "4",
    "--warmup",
    "0",
    "--duration",
    "1",
];

fn with(workload: &str, more: &[&str]) -> Vec<String> {
    let mut v = vec![workload.to_string()];
    v.extend(SHORT.iter().map(|s| s.to_string()));
    v.extend(more.iter().map(|s| s.to_string()));
    v
}

fn run_w(addr: SocketAddr, workload: &str, more: &[&str]) -> Summary {
    let v = with(workload, more);
    let refs: Vec<&str> = v.iter().map(String::as_str).collect();
    run(addr, &refs)
}

#[test]
fn search_count_matches_server() {
    let (addr, counts) = fake_server();
    let s = run_w(addr, "search", &[]);
    assert!(s.total.ops > 100, "too few operations: {s:?}");
    assert_eq!(s.total.ops, counts.get(&counts.search));
    assert_eq!(s.total.errors, 0);
    assert_eq!(s.total.entries_per_search, Some(1.0));
    assert!(s.total.latency_us.p50 > 0 && s.total.latency_us.p50 <= s.total.latency_us.max);
    assert_eq!((s.connections, s.depth), (2, 4));
}

#[test]
fn addressing_searches_leading_substrings_of_mail_and_cn() {
    let (addr, counts) = fake_server();
    let s = run_w(addr, "addressing", &["--range", "1000000"]);
    assert!(s.total.ops > 100, "too few operations: {s:?}");
    assert_eq!(s.total.ops, counts.get(&counts.search));
    let (mail, cn) = (
        counts.get(&counts.mail_prefix),
        counts.get(&counts.cn_prefix),
    );
    assert_eq!(
        mail + cn,
        s.total.ops,
        "every search is one of the two filters"
    );
    assert!(mail > 0 && cn > 0, "both filters are used: {mail} {cn}");
    // Given filters replace the defaults.
    let (addr, counts) = fake_server();
    let s = run_w(addr, "addressing", &["--filter", "(uid=user.{rand})"]);
    assert_eq!(s.total.ops, counts.get(&counts.search));
    assert_eq!(
        counts.get(&counts.mail_prefix) + counts.get(&counts.cn_prefix),
        0
    );
}

#[test]
fn modify_compare_bind_counts_match_server() {
    let (addr, counts) = fake_server();
    let s = run_w(addr, "modify", &[]);
    assert_eq!(s.total.ops, counts.get(&counts.modify));
    let s = run_w(addr, "compare", &[]);
    assert_eq!(s.total.ops, counts.get(&counts.compare));
    let s = run_w(addr, "bind", &[]);
    assert_eq!(s.total.ops, counts.get(&counts.bind));
    assert_eq!(counts.get(&counts.search), 0);
}

#[test]
fn auth_is_a_search_then_a_bind() {
    let (addr, counts) = fake_server();
    let s = run_w(
        addr,
        "auth",
        &[
            "--bind-dn",
            "cn=admin,dc=example,dc=com",
            "--password",
            "secret",
        ],
    );
    assert!(s.total.ops > 0);
    assert_eq!(s.total.errors, 0);
    assert_eq!(s.total.ops, counts.get(&counts.search));
    // One bind per auth pair plus the initial bind of each of the 2 connections.
    assert_eq!(s.total.ops + 2, counts.get(&counts.bind));
}

#[test]
fn search_modify_reports_two_populations() {
    let (addr, counts) = fake_server();
    let s = run_w(addr, "search+modify", &[]);
    let names: Vec<&str> = s.operations.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["search", "modify"]);
    assert_eq!(s.operations[0].ops, counts.get(&counts.search));
    assert_eq!(s.operations[1].ops, counts.get(&counts.modify));
    assert_eq!(s.total.ops, s.operations[0].ops + s.operations[1].ops);
}

#[test]
fn mixed_and_add_delete() {
    let (addr, counts) = fake_server();
    let s = run_w(addr, "mixed", &[]);
    let total = counts.get(&counts.search)
        + counts.get(&counts.modify)
        + counts.get(&counts.add)
        + counts.get(&counts.delete)
        + counts.get(&counts.compare);
    assert_eq!(s.total.ops, total);
    assert!(counts.get(&counts.add) > 0 && counts.get(&counts.delete) > 0);
    let search_share = counts.get(&counts.search) as f64 / total as f64;
    assert!(
        (0.40..0.60).contains(&search_share),
        "search share {search_share}"
    );

    // Adds send {SSHA} of the password (stored as given by every server), unless asked for
    // the clear text (which Linden hashes with Argon2id: ~15 ms of CPU an add).
    assert_eq!(counts.get(&counts.add_ssha), counts.get(&counts.add));
    let (addr2, counts2) = fake_server();
    let s2 = run_w(addr2, "add", &["--add-password-scheme", "cleartext"]);
    assert!(s2.total.ops > 0);
    assert_eq!(counts2.get(&counts2.add_clear), s2.total.ops);

    let s = run_w(addr, "delete", &["--delete-users", "--range", "10"]);
    assert_eq!(s.total.ops, 10);
    assert_eq!(s.exhausted_connections, 2);
}

#[test]
fn rate_holds_the_rate() {
    let (addr, counts) = fake_server();
    let s = run_w(addr, "search", &["--rate", "400"]);
    assert_eq!(s.total.ops, counts.get(&counts.search));
    assert!((360..=440).contains(&s.total.ops), "ops {}", s.total.ops);
}

/// Open loop with either pacer: latency from the intended send splits into the send lag and
/// latency from the actual send. Each request's latency is at least its lag and at least its
/// time from the send, so every percentile of latency is at least theirs (no timing assumed).
#[test]
fn rate_reports_latency_from_send_and_the_send_lag() {
    let (addr, counts) = fake_server();
    for pacer in ["thread", "timer"] {
        let before = counts.get(&counts.search);
        let s = run_w(addr, "search", &["--rate", "400", "--pacer", pacer]);
        assert_eq!(s.total.ops, counts.get(&counts.search) - before);
        let (l, sv, lag) = (&s.total.latency_us, &s.total.service_us, &s.total.lag_us);
        for (a, b, c) in [
            (l.p50, sv.p50, lag.p50),
            (l.p99, sv.p99, lag.p99),
            (l.max, sv.max, lag.max),
        ] {
            assert!(a >= b && a >= c, "{pacer}: latency {a} service {b} lag {c}");
        }
        assert_eq!(s.pacer.as_deref(), Some(pacer));
        // The thread pacer reports what it cost; the timer has no thread of its own.
        assert_eq!(s.pacer_cpu_secs.is_some(), pacer == "thread", "{s:?}");
        assert!(s.client_cpu_secs.is_some());
        let text = s.to_string();
        assert!(
            text.contains("from send us:") && text.contains("send lag us:"),
            "{text}"
        );
    }
    // Closed loop: nothing is paced.
    let s = run_w(addr, "search", &[]);
    assert_eq!((s.pacer.as_deref(), s.pacer_cpu_secs), (None, None));
}

/// A rate so low that some connections have nothing due before the end of the run: the pacer
/// never wakes them, and the run still ends (1 request per second over 4 connections: each
/// connection's first request is 0, 1, 2 and 3 s after the start of a 1 s run).
#[test]
fn connections_with_nothing_due_still_end_with_the_run() {
    let (addr, counts) = fake_server();
    let s = run(
        addr,
        &[
            "search",
            "--rate",
            "1",
            "--connections",
            "4",
            "--warmup",
            "0",
            "--duration",
            "1",
        ],
    );
    assert!(s.total.ops <= 2, "{s:?}");
    assert_eq!(s.total.ops, counts.get(&counts.search));
}

/// A server (as lloadd) answering the initial bind busy: each connection binds again until it
/// succeeds, and the run goes on.
#[test]
fn initial_bind_is_retried_while_busy() {
    let (addr, counts) = fake_server();
    let s = run_w(addr, "search", &["--bind-dn", "cn=busy", "--password", "x"]);
    assert!(s.total.ops > 0 && s.total.errors == 0, "{s:?}");
    assert_eq!(counts.get(&counts.bind), 2 * u64::from(BUSY_BINDS + 1));
    assert_eq!(s.total.ops, counts.get(&counts.search));
}

#[test]
fn failures_are_reported_and_fail_the_run() {
    let (addr, _counts) = fake_server();
    let v = with("compare", &["--compare-value", "fail"]);
    let refs: Vec<&str> = v.iter().map(String::as_str).collect();
    let err = bench::load::run(&args(addr, &refs));
    assert!(matches!(err, Err(bench::Error::OperationsFailed { errors }) if errors > 0));

    let v = with("compare", &["--compare-value", "fail", "--allow-errors"]);
    let refs: Vec<&str> = v.iter().map(String::as_str).collect();
    let s = run(addr, &refs);
    assert!(s.total.ops > 0);
    assert_eq!(s.total.errors, s.total.ops);
    assert_eq!(
        s.total.errors_by_code.get("noSuchObject"),
        Some(&s.total.ops)
    );
}

#[test]
fn json_summary_is_written() {
    let (addr, _counts) = fake_server();
    let path = std::env::temp_dir().join(format!("linden-bench-{}.json", std::process::id()));
    let p = path.display().to_string();
    let s = run_w(addr, "search", &["--json", &p]);
    let text = std::fs::read_to_string(&path).expect("json file");
    let _ = std::fs::remove_file(&path);
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["workload"], "search");
    assert_eq!(v["total"]["ops"], s.total.ops);
    assert!(v["total"]["latency_us"]["p99"].is_u64());
}

#[test]
fn warmup_is_not_counted() {
    let (addr, counts) = fake_server();
    let s = run(
        addr,
        &[
            "search",
            "--connections",
            "2",
            "--depth",
            "2",
            "--warmup",
            "0.5",
            "--duration",
            "0.5",
        ],
    );
    let seen = counts.get(&counts.search);
    assert!(
        s.total.ops > 0 && s.total.ops < seen,
        "{} of {seen}",
        s.total.ops
    );
    assert!((0.4..0.7).contains(&s.duration_secs), "{}", s.duration_secs);
}

/// The generator's ceiling against a responder that does no work:
/// `cargo test --release -p bench --test load -- --ignored --nocapture ceiling`.
#[test]
#[ignore]
fn ceiling() {
    let (addr, counts) = fake_server();
    let before = cpu_by_thread_name();
    let s = run(
        addr,
        &[
            "search",
            "--connections",
            "8",
            "--depth",
            "32",
            "--warmup",
            "0",
            "--duration",
            "3",
        ],
    );
    let after = cpu_by_thread_name();
    assert_eq!(s.total.ops, counts.get(&counts.search));
    println!("generator ceiling: {:.0} searches/s", s.total.ops_per_sec);
    // Clock ticks are 10 ms on Linux (CLK_TCK = 100). The bench's runtime threads have exited
    // by now; their time stays in the process total.
    let delta = |name: &str| {
        let get = |v: &[(String, u64)]| v.iter().find(|(n, _)| n == name).map_or(0, |(_, t)| *t);
        (get(&after) - get(&before)) as f64 * 10_000.0 / s.total.ops as f64
    };
    let (all, server) = (delta("process"), delta("fake-ldap"));
    println!(
        "cpu per search: generator {:.2} us, fake server {server:.2} us",
        all - server
    );
}

/// utime + stime (clock ticks) of this process's threads, summed by thread name. The bench's
/// runtime threads keep tokio's default name; the fake server's are named `fake-ldap`.
fn cpu_by_thread_name() -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    let ticks = |stat: &str| -> Option<(String, u64)> {
        let (open, close) = (stat.find('(')?, stat.rfind(')')?);
        let fields: Vec<&str> = stat.get(close + 2..)?.split(' ').collect();
        let t = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some((stat.get(open + 1..close)?.to_string(), t))
    };
    if let Some((_, t)) = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .as_deref()
        .and_then(ticks)
    {
        out.push(("process".to_string(), t));
    }
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let Some((name, ticks)) = ticks(&stat) else {
            continue;
        };
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 += ticks,
            None => out.push((name, ticks)),
        }
    }
    out
}

#[derive(Parser)]
struct SweepCli {
    #[command(flatten)]
    args: bench::sweep::SweepArgs,
}

fn sweep(extra: &[&str]) -> bench::sweep::SweepArgs {
    let mut argv = vec!["sweep"];
    argv.extend_from_slice(extra);
    SweepCli::try_parse_from(argv)
        .expect("valid arguments")
        .args
}

/// A sweep of two servers writes one chart per workload with both on it, and JSON with every
/// point; the probe gives each server's maximum and the steps are fractions of it. (What the
/// fake servers achieve depends on the machine, so only the shape is checked.)
#[test]
fn sweep_draws_every_server_on_one_chart_per_workload() {
    let (a, counts_a) = fake_server();
    let (b, counts_b) = fake_server();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("sweep.html");
    let json = dir.path().join("sweep.json");
    let (ta, tb) = (format!("one=ldap://{a}"), format!("two=ldap://{b}"));
    let args = sweep(&[
        "--target",
        &ta,
        "--target",
        &tb,
        "--workloads",
        "search,modify",
        "--fractions",
        "0.2,0.5",
        "--connections",
        "2",
        "--depth",
        "8",
        "--probe-duration",
        "0.3",
        "--step-duration",
        "0.3",
        "--warmup",
        "0",
        "--out",
        html.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let report = bench::sweep::run(&args).expect("sweep runs");

    assert_eq!(report.workloads.len(), 2);
    for w in &report.workloads {
        let names: Vec<&str> = w.series.iter().map(|s| s.target.as_str()).collect();
        assert_eq!(names, ["one", "two"]);
        for s in &w.series {
            let max = s.max_rate.expect("probed");
            assert!(max > 0.0);
            // The first step always runs; a later one only while the server keeps up.
            assert!(!s.points.is_empty() && s.points.len() <= 2, "{s:?}");
            let expected = [0.2 * max, 0.5 * max];
            for (p, want) in s.points.iter().zip(expected) {
                assert!(
                    (p.offered - want).abs() < 1e-6,
                    "{p:?} offered, {want} expected"
                );
                assert!(p.p50_us <= p.p99_us && p.p99_us <= p.p999_us);
            }
        }
    }
    for c in [&counts_a, &counts_b] {
        assert!(c.get(&c.search) > 0 && c.get(&c.modify) > 0);
    }

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert_eq!(page.matches("<svg ").count(), 2);
    assert_eq!(page.matches("</svg>").count(), 2);
    assert!(page.contains(">search</h2>") && page.contains(">modify</h2>"));
    // Self-contained: nothing to fetch, nothing to run.
    assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("href="));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["workloads"][0]["series"][1]["target"], "two");
    assert_eq!(v["pacer"], "thread");
    let point = &v["workloads"][0]["series"][0]["points"][0];
    for key in ["p99_us", "service_p99_us", "lag_p99_us", "lag_max_us"] {
        assert!(point[key].is_u64(), "{key} missing from {point}");
    }
    // The table gives latency from the actual send and the send lag beside it.
    assert!(page.contains("from the actual send") && page.contains("send lag"));
}

/// With `--rates` there is no probe: every server gets the same offered loads.
#[test]
fn sweep_at_given_rates_skips_the_probe() {
    let (a, _) = fake_server();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("s.html");
    let ta = format!("only=ldap://{a}");
    let args = sweep(&[
        "--target",
        &ta,
        "--workloads",
        "compare",
        "--rates",
        "100,200",
        "--connections",
        "2",
        "--depth",
        "4",
        "--step-duration",
        "0.3",
        "--warmup",
        "0",
        "--out",
        html.to_str().unwrap(),
    ]);
    let report = bench::sweep::run(&args).expect("sweep runs");
    let s = &report.workloads[0].series[0];
    assert_eq!(s.max_rate, None);
    assert_eq!(s.points[0].offered, 100.0);
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg "));
}

#[test]
fn sweep_refuses_bad_arguments() {
    let two_same = sweep(&[
        "--target",
        "x=ldap://127.0.0.1:1",
        "--target",
        "x=ldap://127.0.0.1:2",
    ]);
    let e = bench::sweep::run(&two_same).unwrap_err().to_string();
    assert!(e.contains("same name"), "{e}");
    let bad = sweep(&["--target", "x=ldap://127.0.0.1:1", "--fractions", "0.5,-1"]);
    let e = bench::sweep::run(&bad).unwrap_err().to_string();
    assert!(e.contains("--fractions"), "{e}");
    assert!(SweepCli::try_parse_from(["sweep", "--target", "no-equals-sign"]).is_err());
}
