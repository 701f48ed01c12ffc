//! `linden bench`: the load generator.
//!
//! Shape of a run: connect (and bind, with `--bind-dn`) all connections, then each connection
//! runs as one tokio task that keeps up to `--depth` requests outstanding. Without `--rate` it
//! sends a new request as soon as a slot frees (closed loop); with `--rate` each connection sends
//! on its own schedule (aggregate rate / connections, [`crate::pace`]) and latency runs from the
//! *intended* send time, so a server that falls behind shows it in the latencies (no coordinated
//! omission); latency from the actual send and the pacing lag are reported beside it. At the
//! end of `--warmup + --duration` connections stop sending and wait for what is outstanding; only
//! requests whose (intended) send time is after the warm-up count.
//!
//! Requests are [`Template`]s re-emitted into one write buffer per connection; responses are read
//! into one buffer per connection, framed with `proto::frame` and decoded by
//! [`response::parse`]. Message ids name a slot (low 15 bits) and a generation, so a response finds
//! its request in O(1) even when the server answers out of order.

use crate::pace::{PaceState, PacerThread, Schedule, Timings};
use crate::response::{self, tag};
use crate::stats::{self, IntervalTotals, OpKind, Recorder, RunInfo};
use crate::template::{Template, Vars};
use crate::Error;
use proto::{
    BindAuth, BindRequest, Change, CompareRequest, ModOp, ModifyRequest, PartialAttribute,
    ProtocolOp,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

pub use crate::pace::Pacer;

pub use crate::stats::{Latency, OpSummary, Summary};

/// Largest response PDU accepted (an entry with big attributes fits easily).
pub const MAX_RESPONSE_PDU: usize = 16 << 20;
/// Largest `--depth`: slot numbers live in the low 15 bits of the message id.
pub const MAX_DEPTH: usize = (1 << SLOT_BITS) - 1;
/// How long outstanding requests may take to be answered once the run is over.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

const SLOT_BITS: u32 = 15;

/// The `addressing` workload's filters: leading substrings of a mail address (`--range`
/// decides how many entries match: with it set to the number of entries, most prefixes name
/// one to a dozen) and of a common name (about one entry in 2,700 of `linden gen`'s data).
pub const ADDRESSING_FILTERS: [&str; 2] = ["(mail=user.{rand}*)", "(cn={first} {last}*)"];
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;

/// The workloads of design.md "Reference workloads".
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Subtree search with `--filter` (default `(uid=user.{rand})`).
    Search,
    /// DirectoryMark "addressing": subtree searches with leading-substring filters, by
    /// default `(mail=user.{rand}*)` and `(cn={first} {last}*)` in turn at random (the
    /// `search` workload with these `--filter`s).
    Addressing,
    /// Replace `--modify-attr` of a random entry with a random value.
    Modify,
    /// Simple bind as a random entry with `--user-password`.
    Bind,
    /// Search for a random uid, then bind as the entry found (one operation).
    Auth,
    /// Compare `--compare-attr` of a random entry (compareTrue and compareFalse both succeed).
    Compare,
    /// Add `uid=<prefix>.<conn>.<seq>,ou=people,<base>` entries.
    Add,
    /// Delete what `add` made (same connection count), or `uid=user.N` with `--delete-users`.
    Delete,
    /// 48 % search, 32 % modify, 11 % add, 5 % delete, 4 % compare.
    Mixed,
    /// Two populations of `--connections` each, one searching, one modifying, reported apart.
    #[value(name = "search+modify")]
    SearchModify,
}

impl Workload {
    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Search => "search",
            Workload::Addressing => "addressing",
            Workload::Modify => "modify",
            Workload::Bind => "bind",
            Workload::Auth => "auth",
            Workload::Compare => "compare",
            Workload::Add => "add",
            Workload::Delete => "delete",
            Workload::Mixed => "mixed",
            Workload::SearchModify => "search+modify",
        }
    }
}

/// Arguments of `linden bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Which workload to run.
    #[arg(value_enum)]
    pub workload: Workload,
    /// Server to load.
    #[arg(long, default_value = "ldap://127.0.0.1:3389")]
    pub url: String,
    /// DN every connection binds as before the run (anonymous when absent); a bind answered
    /// busy (as a load balancer answers while its bind connections are taken) is sent again,
    /// up to 200 times 25 ms apart.
    #[arg(long)]
    pub bind_dn: Option<String>,
    /// Password for --bind-dn.
    #[arg(long, default_value = "")]
    pub password: String,
    /// Connections (per population for search+modify).
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Outstanding requests per connection (1 = synchronous).
    #[arg(long, default_value_t = 1)]
    pub depth: usize,
    /// Measured seconds, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds run before measuring.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Fixed aggregate rate in operations per second (open loop) instead of full speed.
    #[arg(long)]
    pub rate: Option<f64>,
    /// With --rate: what wakes a connection when a request is due. `thread`: a pacer thread
    /// sleeping with microsecond precision; `timer`: tokio's 1 ms timer (earlier versions).
    #[arg(long, value_enum, default_value_t = Pacer::Thread)]
    pub pacer: Pacer,
    /// With --rate and the thread pacer: microseconds between two wake-ups of the pacer thread
    /// at most (lower: finer pacing, more client CPU).
    #[arg(long, default_value_t = crate::pace::DEFAULT_RESOLUTION_US)]
    pub pace_resolution: u64,
    /// `{rand}` is uniform in 0..range.
    #[arg(long, default_value_t = 1000)]
    pub range: u64,
    /// Search filter; `{rand}` is replaced per request, `{first}` and `{last}` by a given name
    /// and a surname that `linden gen` uses. Repeat it to pick one of several at random per
    /// search. Default `(uid=user.{rand})`, or the `addressing` filters.
    #[arg(long)]
    pub filter: Vec<String>,
    /// Attributes to return, comma-separated (default all user attributes; `1.1` for none).
    #[arg(long, value_delimiter = ',')]
    pub attrs: Vec<String>,
    /// Search base, and parent of `ou=people`.
    #[arg(long, default_value = "dc=example,dc=com")]
    pub base: String,
    /// DN of the entry that modify, compare and bind use (default `uid=user.{rand},ou=people,<base>`).
    #[arg(long)]
    pub dn: Option<String>,
    /// Attribute that modify replaces.
    #[arg(long, default_value = "description")]
    pub modify_attr: String,
    /// Attribute that compare asserts.
    #[arg(long, default_value = "employeeNumber")]
    pub compare_attr: String,
    /// Value that compare asserts (`{rand}` is the number in the entry's DN).
    #[arg(long, default_value = "{rand}")]
    pub compare_value: String,
    /// Password of the entries that bind and auth bind as.
    #[arg(long, default_value = "password")]
    pub user_password: String,
    /// How add writes userPassword (--user-password): `ssha` (the default) sends `{SSHA}` of it,
    /// stored as given by both Linden and slapd, as `linden gen`'s reference data;
    /// `cleartext` sends the password, which Linden hashes with its scheme (Argon2id by
    /// default: ~15 ms of CPU per add) and slapd stores as it is.
    #[arg(long, value_enum, default_value_t = crate::gen::PasswordScheme::Ssha)]
    pub add_password_scheme: crate::gen::PasswordScheme,
    /// First part of the uid of the entries add makes and delete removes.
    #[arg(long, default_value = "bench")]
    pub name_prefix: String,
    /// delete: remove `uid=user.N` for N in 0..range instead of what add made.
    #[arg(long)]
    pub delete_users: bool,
    /// Also write the summary as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Succeed even when operations failed.
    #[arg(long)]
    pub allow_errors: bool,
    /// Seconds between interval lines.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// No interval lines, only the summary.
    #[arg(long)]
    pub quiet: bool,
    /// Runtime worker threads (default: one per CPU).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seed of the per-connection random generators (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// bind and auth: before the run, bind once as every `uid=user.N` (N in 0..range, spread
    /// over --connections connections) with --user-password, unmeasured, so that the run sees
    /// the warm-cache case of a server that caches verified credentials (Linden's
    /// `credential_cache_entries`). Every one of these binds must succeed.
    #[arg(long)]
    pub warm_pass: bool,
}

/// `linden bench` arguments from the words of a command line (without the program name), with
/// every default as the command line has it: how a sweep builds each of its runs.
pub fn parse_args(words: &[&str]) -> Result<BenchArgs, Error> {
    #[derive(clap::Parser)]
    struct Words {
        #[command(flatten)]
        args: BenchArgs,
    }
    use clap::Parser;
    Words::try_parse_from(std::iter::once("bench").chain(words.iter().copied()))
        .map(|w| w.args)
        .map_err(|e| Error::Args(e.to_string()))
}

/// Runs the benchmark on a runtime of its own, prints interval lines and the summary to standard
/// output, writes `--json`. Blocking; call it outside any tokio runtime (inside one, use
/// [`run_async`]). `Err(Error::OperationsFailed)` when operations failed, unless `--allow-errors`.
pub fn run(args: &BenchArgs) -> Result<Summary, Error> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Some(t) = args.threads {
        b.worker_threads(t.max(1));
    }
    let rt = b
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the tokio runtime", e))?;
    rt.block_on(run_async(args))
}

/// [`run`] on the caller's runtime.
pub async fn run_async(args: &BenchArgs) -> Result<Summary, Error> {
    let plan = Plan::new(args)?;
    let addr = parse_url(&args.url)?;
    let populations: Vec<Mix> = match args.workload {
        Workload::SearchModify => vec![Mix::Only(OpKind::Search), Mix::Only(OpKind::Modify)],
        Workload::Search | Workload::Addressing => vec![Mix::Only(OpKind::Search)],
        Workload::Modify => vec![Mix::Only(OpKind::Modify)],
        Workload::Bind => vec![Mix::Only(OpKind::Bind)],
        Workload::Auth => vec![Mix::Only(OpKind::Auth)],
        Workload::Compare => vec![Mix::Only(OpKind::Compare)],
        Workload::Add => vec![Mix::Only(OpKind::Add)],
        Workload::Delete => vec![Mix::Only(OpKind::Delete)],
        Workload::Mixed => vec![Mix::Mixed],
    };
    let total_conns = args.connections * populations.len();
    if args.warm_pass {
        let t = std::time::Instant::now();
        let binds = warm_pass(&addr, &plan, args.connections).await?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "warm pass: {binds} binds in {secs:.1} s ({:.0}/s), not measured",
            binds as f64 / secs.max(1e-9)
        );
    }

    // Connect (and bind) everything first so that set-up does not count.
    let mut conns = Vec::with_capacity(total_conns);
    let mut setups = tokio::task::JoinSet::new();
    for i in 0..total_conns {
        let addr = addr.clone();
        let plan = plan.clone();
        setups.spawn(async move { connect(i, &addr, &plan).await.map(|s| (i, s)) });
    }
    while let Some(r) = setups.join_next().await {
        let r = r.map_err(|e| Error::Protocol(format!("connection task failed: {e}")))?;
        conns.push(r?);
    }
    conns.sort_by_key(|(i, _)| *i);

    let start = Instant::now() + Duration::from_millis(10);
    let measure_start = start + secs(args.warmup);
    let stop = measure_start + secs(args.duration);
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    // Per-connection send times under --rate, with connections offset to spread the sends.
    let schedule = args
        .rate
        .map(|r| Schedule::new(start.into_std(), total_conns, r));
    let period = schedule.as_ref().map(Schedule::period);
    let notify: Vec<Arc<Notify>> = (0..total_conns).map(|_| Arc::default()).collect();
    let cpu_at_start = crate::pace::process_cpu_time();
    let pacer = match &schedule {
        Some(s) if args.pacer == Pacer::Thread => Some(
            PacerThread::start(
                PaceState::new(
                    s.clone(),
                    Duration::from_micros(args.pace_resolution),
                    stop.into_std(),
                ),
                notify.clone(),
            )
            .map_err(|e| Error::io("starting the pacer thread", e))?,
        ),
        _ => None,
    };

    let recorders: Vec<Arc<Mutex<Recorder>>> = (0..total_conns).map(|_| Arc::default()).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, stream) in conns {
        let mix = populations[i / args.connections.max(1)];
        let first_send = match &schedule {
            Some(s) => Instant::from_std(s.first(i)),
            None => start,
        };
        let conn = Conn {
            index: i as u64,
            stream,
            plan: plan.clone(),
            mix,
            rng: StdRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            recorder: recorders[i].clone(),
            slots: (0..args.depth).map(|_| Slot::default()).collect(),
            unstamped: Vec::with_capacity(args.depth),
            pace: pacer.as_ref().map(|_| notify[i].clone()),
            free: (0..args.depth as u32).rev().collect(),
            generation: 0,
            wbuf: Vec::with_capacity(64 * 1024),
            rbuf: vec![0; 64 * 1024],
            rstart: 0,
            rend: 0,
            add_seq: 0,
            del_seq: 0,
            exhausted: false,
            period,
            next_send: first_send,
            measure_start,
            stop,
            last_measured: measure_start,
        };
        tasks.spawn(conn.run());
    }

    // Interval lines until every connection is done.
    let interval = secs(args.interval.max(0.1));
    let mut ticker = tokio::time::interval_at(start + interval, interval);
    let mut tick = 0u64;
    let mut last_measured = measure_start;
    let mut failure = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                tick += 1;
                let mut totals = IntervalTotals::new();
                for r in &recorders {
                    totals.take_from(&mut lock(r));
                }
                if !args.quiet {
                    let t = interval.as_secs_f64() * tick as f64;
                    let warm = start + interval.mul_f64(tick as f64) <= measure_start;
                    println!("{}", totals.line(t.round() as u64, interval.as_secs_f64(), warm));
                }
            }
            done = tasks.join_next() => match done {
                None => break,
                Some(Ok(Ok(t))) => last_measured = last_measured.max(t),
                Some(Ok(Err(e))) => {
                    failure.get_or_insert(e);
                    tasks.abort_all();
                }
                Some(Err(e)) if e.is_cancelled() => {}
                Some(Err(e)) => {
                    failure.get_or_insert(Error::Protocol(format!("connection task failed: {e}")));
                    tasks.abort_all();
                }
            }
        }
    }
    let pacer_cpu = pacer.and_then(PacerThread::finish);
    if let Some(e) = failure {
        return Err(e);
    }
    let client_cpu = match (cpu_at_start, crate::pace::process_cpu_time()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a).as_secs_f64()),
        _ => None,
    };

    let guards: Vec<MutexGuard<'_, Recorder>> = recorders.iter().map(lock).collect();
    let refs: Vec<&Recorder> = guards.iter().map(|g| &**g).collect();
    let measured = last_measured
        .saturating_duration_since(measure_start)
        .as_secs_f64();
    let summary = stats::build_summary(
        RunInfo {
            workload: args.workload.name().to_string(),
            url: args.url.clone(),
            connections: args.connections,
            depth: args.depth,
            rate: args.rate,
            warmup_secs: args.warmup,
            duration_secs: if measured > 0.0 {
                measured
            } else {
                args.duration
            },
            pacer: args.rate.map(|_| args.pacer.name().to_string()),
            pacer_cpu_secs: pacer_cpu.map(|d| d.as_secs_f64()),
            client_cpu_secs: client_cpu,
        },
        &refs,
    );
    drop(refs);
    drop(guards);
    print!("{summary}");
    if let Some(path) = &args.json {
        let json_err = |source| Error::Json {
            path: path.display().to_string(),
            source,
        };
        let text = serde_json::to_string_pretty(&summary).map_err(json_err)?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    if summary.errors() > 0 && !args.allow_errors {
        return Err(Error::OperationsFailed {
            errors: summary.errors(),
        });
    }
    Ok(summary)
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::from_secs(u64::from(u32::MAX)))
}

/// A poisoned recorder still holds valid counts: a panic elsewhere does not make them wrong.
fn lock(r: &Arc<Mutex<Recorder>>) -> MutexGuard<'_, Recorder> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

/// `ldap://host:port` (port 389 when absent) to `host:port`.
fn parse_url(url: &str) -> Result<String, Error> {
    let rest = url
        .strip_prefix("ldap://")
        .ok_or_else(|| Error::Args(format!("--url {url:?}: only ldap:// URLs are supported")))?;
    let hostport = rest.split('/').next().unwrap_or_default();
    if hostport.is_empty() {
        return Err(Error::Args(format!("--url {url:?} has no host")));
    }
    let has_port = match hostport.rfind(']') {
        Some(b) => hostport[b..].contains(':'),
        None => hostport.contains(':'),
    };
    Ok(if has_port {
        hostport.to_string()
    } else {
        format!("{hostport}:389")
    })
}

/// Which operations a connection sends.
#[derive(Debug, Clone, Copy)]
enum Mix {
    Only(OpKind),
    /// 48 % search, 32 % modify, 11 % add, 5 % delete, 4 % compare (DirectoryMark).
    Mixed,
}

/// Everything fixed for the run: the templates and the settings connections read.
#[derive(Debug, Clone)]
struct Plan {
    /// One per `--filter`; each search picks one at random (auth uses the first).
    searches: Vec<Arc<Template>>,
    modify: Arc<Template>,
    compare: Arc<Template>,
    add: Arc<Template>,
    /// Deletes `uid=<prefix>.{conn}.{seq}` (what add made).
    delete: Arc<Template>,
    /// Deletes `uid=user.{seq}` (`--delete-users`).
    delete_user: Arc<Template>,
    bind_user: Arc<Template>,
    /// Bind as `{dn}` (auth's second step).
    bind_dn: Arc<Template>,
    initial_bind: Option<(String, Arc<Template>)>,
    range: u64,
    depth: usize,
    delete_users: bool,
    connections: u64,
}

impl Plan {
    fn new(args: &BenchArgs) -> Result<Plan, Error> {
        if args.connections == 0 {
            return Err(Error::Args("--connections must be at least 1".into()));
        }
        if args.depth == 0 || args.depth > MAX_DEPTH {
            return Err(Error::Args(format!("--depth must be in 1..={MAX_DEPTH}")));
        }
        if args.range == 0 {
            return Err(Error::Args("--range must be at least 1".into()));
        }
        if let Some(r) = args.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(Error::Args("--rate must be a positive number".into()));
            }
        }
        if !(args.duration.is_finite() && args.warmup.is_finite() && args.duration > 0.0) {
            return Err(Error::Args(
                "--duration must be positive and --warmup finite".into(),
            ));
        }
        let people = format!("ou=people,{}", args.base);
        let user_dn = args
            .dn
            .clone()
            .unwrap_or_else(|| format!("uid=user.{{rand}},{people}"));
        let bad = |what: &str, e: ber::Error| {
            Error::Args(format!("cannot encode the {what} request: {e}"))
        };
        let b = |s: &str| Cow::Owned(s.as_bytes().to_vec());

        let filters: Vec<&str> = match (&args.filter[..], args.workload) {
            ([], Workload::Addressing) => ADDRESSING_FILTERS.to_vec(),
            ([], _) => vec!["(uid=user.{rand})"],
            (given, _) => given.iter().map(String::as_str).collect(),
        };
        let mut searches = Vec::with_capacity(filters.len());
        for text in filters {
            let filter = proto::Filter::parse(text)
                .map_err(|e| Error::Args(format!("--filter {text:?}: {e}")))?;
            let search = Template::new(ProtocolOp::SearchRequest(proto::SearchRequest {
                base: b(&args.base),
                scope: proto::Scope::Subtree,
                deref: proto::DerefAliases::Never,
                size_limit: 0,
                time_limit: 0,
                types_only: false,
                filter,
                attributes: args
                    .attrs
                    .iter()
                    .filter(|a| !a.is_empty())
                    .map(|a| b(a))
                    .collect(),
            }))
            .map_err(|e| bad("search", e))?;
            searches.push(Arc::new(search));
        }
        let modify = Template::new(ProtocolOp::ModifyRequest(ModifyRequest {
            dn: b(&user_dn),
            changes: vec![Change {
                op: ModOp::Replace,
                attr: PartialAttribute {
                    name: b(&args.modify_attr),
                    values: vec![Cow::Borrowed(b"bench {value}")],
                },
            }],
        }))
        .map_err(|e| bad("modify", e))?;
        let compare = Template::new(ProtocolOp::CompareRequest(CompareRequest {
            dn: b(&user_dn),
            attr: b(&args.compare_attr),
            value: b(&args.compare_value),
        }))
        .map_err(|e| bad("compare", e))?;
        let uid = format!("{}.{{conn}}.{{seq}}", args.name_prefix);
        let add_password = match args.add_password_scheme {
            crate::gen::PasswordScheme::Cleartext => args.user_password.as_bytes().to_vec(),
            crate::gen::PasswordScheme::Ssha => {
                let mut out = Vec::new();
                crate::gen::ssha(
                    args.user_password.as_bytes(),
                    *b"lindenbn",
                    &mut Vec::new(),
                    &mut out,
                )
                .map_err(|e| {
                    Error::Args(format!("cannot encode the add request's password: {e}"))
                })?;
                out
            }
        };
        let s = |v: &'static [u8]| Cow::Borrowed(v);
        let add = Template::new(ProtocolOp::AddRequest(proto::AddRequest {
            dn: b(&format!("uid={uid},{people}")),
            attributes: vec![
                PartialAttribute {
                    name: s(b"objectClass"),
                    values: vec![
                        s(b"top"),
                        s(b"person"),
                        s(b"organizationalPerson"),
                        s(b"inetOrgPerson"),
                    ],
                },
                PartialAttribute {
                    name: s(b"uid"),
                    values: vec![b(&uid)],
                },
                PartialAttribute {
                    name: s(b"cn"),
                    values: vec![s(b"Bench {conn} {seq}")],
                },
                PartialAttribute {
                    name: s(b"sn"),
                    values: vec![s(b"Bench")],
                },
                PartialAttribute {
                    name: s(b"userPassword"),
                    values: vec![Cow::Owned(add_password)],
                },
            ],
        }))
        .map_err(|e| Error::Args(format!("cannot encode the add request's password: {e}")))?;
        let delete = Template::new(ProtocolOp::DelRequest(b(&format!("uid={uid},{people}"))))
            .map_err(|e| bad("delete", e))?;
        let delete_user = Template::new(ProtocolOp::DelRequest(b(&format!(
            "uid=user.{{seq}},{people}"
        ))))
        .map_err(|e| bad("delete", e))?;
        let simple = |dn: &str, pw: &str| {
            ProtocolOp::BindRequest(BindRequest {
                version: 3,
                name: b(dn),
                auth: BindAuth::Simple(b(pw)),
            })
        };
        let bind_user =
            Template::new(simple(&user_dn, &args.user_password)).map_err(|e| bad("bind", e))?;
        let bind_dn =
            Template::new(simple("{dn}", &args.user_password)).map_err(|e| bad("bind", e))?;
        let initial_bind = match &args.bind_dn {
            Some(dn) => Some((
                dn.clone(),
                Arc::new(Template::new(simple(dn, &args.password)).map_err(|e| bad("bind", e))?),
            )),
            None => None,
        };
        Ok(Plan {
            searches,
            modify: Arc::new(modify),
            compare: Arc::new(compare),
            add: Arc::new(add),
            delete: Arc::new(delete),
            delete_user: Arc::new(delete_user),
            bind_user: Arc::new(bind_user),
            bind_dn: Arc::new(bind_dn),
            initial_bind,
            range: args.range,
            depth: args.depth,
            delete_users: args.delete_users,
            connections: (args.connections as u64).max(1),
        })
    }
}

/// How often the initial bind is sent again while the server answers busy (51), and how long
/// to wait between tries: a load balancer such as OpenLDAP's lloadd answers busy while its own
/// connections for binds are taken or not yet open, and expects the client to try again.
const BIND_BUSY_TRIES: i32 = 200;
const BIND_BUSY_WAIT: Duration = Duration::from_millis(25);
/// The result code busy (51).
const BUSY: u32 = 51;

/// Opens one connection and performs the initial bind (again while busy), synchronously.
async fn connect(i: usize, addr: &str, plan: &Plan) -> Result<TcpStream, Error> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| Error::io(format!("connecting to {addr}"), e))?;
    stream
        .set_nodelay(true)
        .map_err(|e| Error::io("setting TCP_NODELAY", e))?;
    let Some((dn, t)) = &plan.initial_bind else {
        return Ok(stream);
    };
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(1024);
    let mut id = 0;
    loop {
        id += 1;
        if id > 1 {
            tokio::time::sleep(BIND_BUSY_WAIT).await;
        }
        out.clear();
        t.emit(id, &Vars::default(), &mut out)
            .map_err(|e| Error::Protocol(format!("encoding the bind request: {e}")))?;
        stream
            .write_all(&out)
            .await
            .map_err(|e| Error::io(format!("connection {i}: sending the bind request"), e))?;
        let (tag, code) = loop {
            if let Some(n) = frame(&buf)? {
                let r = response::parse(&buf[..n])
                    .map_err(|e| Error::Protocol(format!("bind response: {e}")))?;
                let got = (r.tag, r.code);
                buf.drain(..n);
                break got;
            }
            let got = stream
                .read_buf(&mut buf)
                .await
                .map_err(|e| Error::io(format!("connection {i}: reading the bind response"), e))?;
            if got == 0 {
                return Err(Error::Protocol(
                    "the server closed the connection during the bind".into(),
                ));
            }
        };
        match (tag, code) {
            (tag::BIND, Some(0)) => return Ok(stream),
            (tag::BIND, Some(BUSY)) if id < BIND_BUSY_TRIES => {}
            (_, code) => {
                let mut code =
                    code.map_or_else(|| format!("unexpected response tag 0x{tag:02x}"), code_text);
                if id > 1 {
                    code.push_str(&format!(" (try {id})"));
                }
                return Err(Error::Bind {
                    dn: dn.clone(),
                    code,
                });
            }
        }
    }
}

/// `--warm-pass`: binds once as each `uid=user.N`, N in 0..range, connection `i` taking the N
/// with N mod `connections` = i, one bind at a time per connection. Returns the number of binds.
async fn warm_pass(addr: &str, plan: &Plan, connections: usize) -> Result<u64, Error> {
    let connections = connections.max(1) as u64;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..connections {
        let (addr, plan) = (addr.to_string(), plan.clone());
        tasks.spawn(async move {
            let mut stream = TcpStream::connect(&addr)
                .await
                .map_err(|e| Error::io(format!("warm pass: connecting to {addr}"), e))?;
            let _ = stream.set_nodelay(true);
            let (mut out, mut buf) = (Vec::with_capacity(256), Vec::with_capacity(1024));
            let mut binds = 0u64;
            for (id, n) in (i..plan.range).step_by(connections as usize).enumerate() {
                out.clear();
                let vars = Vars {
                    rand: n,
                    ..Vars::default()
                };
                let id = (id % (i32::MAX as usize)) as i32 + 1;
                plan.bind_user
                    .emit(id, &vars, &mut out)
                    .map_err(|e| Error::Protocol(format!("encoding a bind request: {e}")))?;
                stream
                    .write_all(&out)
                    .await
                    .map_err(|e| Error::io("warm pass: sending a bind", e))?;
                let n_pdu = loop {
                    if let Some(n) = frame(&buf)? {
                        break n;
                    }
                    let got = stream
                        .read_buf(&mut buf)
                        .await
                        .map_err(|e| Error::io("warm pass: reading a bind response", e))?;
                    if got == 0 {
                        return Err(Error::Protocol(
                            "the server closed the connection during the warm pass".into(),
                        ));
                    }
                };
                let r = response::parse(&buf[..n_pdu])
                    .map_err(|e| Error::Protocol(format!("bind response: {e}")))?;
                if (r.tag, r.code) != (tag::BIND, Some(0)) {
                    return Err(Error::Bind {
                        dn: format!("uid=user.{n} (warm pass)"),
                        code: r.code.map_or_else(
                            || format!("unexpected response tag 0x{:02x}", r.tag),
                            code_text,
                        ),
                    });
                }
                buf.drain(..n_pdu);
                binds += 1;
            }
            Ok::<u64, Error>(binds)
        });
    }
    let mut total = 0;
    while let Some(r) = tasks.join_next().await {
        total += r.map_err(|e| Error::Protocol(format!("warm pass task failed: {e}")))??;
    }
    Ok(total)
}

fn code_text(code: u32) -> String {
    match proto::ResultCode::from_u32(code) {
        Some(c) => c.to_string(),
        None => format!("result code {code}"),
    }
}

fn frame(buf: &[u8]) -> Result<Option<usize>, Error> {
    proto::frame(buf, MAX_RESPONSE_PDU)
        .map_err(|e| Error::Protocol(format!("framing a response: {e}")))
}

/// Where an outstanding request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    #[default]
    Free,
    Waiting,
    /// auth: the search is out; its entry DN goes to `Slot::dn`.
    AuthSearch,
    /// auth: the bind as the found DN is out.
    AuthBind,
}

#[derive(Debug, Default)]
struct Slot {
    id: i32,
    phase: Phase,
    kind: Option<OpKind>,
    /// Intended send time: latency runs from here.
    sent: Option<Instant>,
    /// When the request was handed to the socket (None until then).
    actual: Option<Instant>,
    entries: u64,
    /// auth: the DN found by the search (capacity kept across requests).
    dn: Vec<u8>,
    /// delete: this request removes one of `add`'s entries (noSuchObject means none are left).
    delete_of_added: bool,
}

struct Conn {
    index: u64,
    stream: TcpStream,
    plan: Plan,
    mix: Mix,
    rng: StdRng,
    recorder: Arc<Mutex<Recorder>>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Slots started since the last write: their `actual` send time is the write's.
    unstamped: Vec<u32>,
    /// Thread pacer: notified when a request of this connection is due.
    pace: Option<Arc<Notify>>,
    generation: u32,
    wbuf: Vec<u8>,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    /// Entries added by this connection (add's `{seq}`).
    add_seq: u64,
    /// Next entry to delete.
    del_seq: u64,
    /// delete ran out of entries: send nothing more.
    exhausted: bool,
    period: Option<Duration>,
    next_send: Instant,
    measure_start: Instant,
    stop: Instant,
    last_measured: Instant,
}

impl Conn {
    /// Runs until `stop` and the drain; returns the time of the last measured response.
    async fn run(mut self) -> Result<Instant, Error> {
        match &self.pace {
            // A connection whose first request falls after the end of the run is never woken
            // by the pacer: the end of the run wakes it.
            Some(p) => tokio::select! {
                () = p.notified() => {}
                () = tokio::time::sleep_until(self.stop) => {}
            },
            None => tokio::time::sleep_until(self.next_send.min(self.measure_start)).await,
        }
        let drain_deadline = self.stop + DRAIN_TIMEOUT;
        loop {
            let now = Instant::now();
            let sending = now < self.stop && !self.exhausted;
            if sending {
                self.fill(now)?;
            }
            if !self.wbuf.is_empty() {
                let t = Instant::now();
                for slot in self.unstamped.drain(..) {
                    self.slots[slot as usize].actual = Some(t);
                }
                self.stream
                    .write_all(&self.wbuf)
                    .await
                    .map_err(|e| Error::io(format!("connection {}: sending", self.index), e))?;
                self.wbuf.clear();
            }
            let outstanding = self.slots.len() - self.free.len();
            if !sending && outstanding == 0 {
                break;
            }
            if now >= drain_deadline {
                self.give_up(now);
                break;
            }
            // Sleep until the next scheduled send (rate mode, a slot is free: the pacer thread
            // says when, or tokio's timer), the end of the run, or the drain deadline, unless a
            // response arrives first.
            let paced = sending && self.period.is_some() && !self.free.is_empty();
            let wake = match (sending, paced, &self.pace) {
                (false, _, _) => drain_deadline,
                (true, true, None) => self.next_send.min(self.stop),
                _ => self.stop,
            };
            if self.rend == self.rbuf.len() {
                self.make_room()?;
            }
            let read = self.stream.read(&mut self.rbuf[self.rend..]);
            let read = match (&self.pace, paced) {
                (Some(pace), true) => tokio::select! {
                    r = read => Ok(r),
                    () = pace.notified() => continue,
                    () = tokio::time::sleep_until(wake) => continue,
                },
                _ => tokio::time::timeout_at(wake, read).await,
            };
            match read {
                Err(_elapsed) => continue,
                Ok(Err(e)) => return Err(Error::io(format!("connection {}: reading", self.index), e)),
                Ok(Ok(0)) => {
                    return Err(Error::Protocol(format!(
                        "connection {}: the server closed the connection with {outstanding} requests outstanding",
                        self.index
                    )))
                }
                Ok(Ok(n)) => {
                    self.rend += n;
                    self.process(Instant::now())?;
                }
            }
        }
        if self.exhausted {
            lock(&self.recorder).exhausted = 1;
        }
        let _ = self.stream.shutdown().await;
        Ok(self.last_measured)
    }

    /// Sends what may be sent now: every free slot (closed loop) or every due request.
    fn fill(&mut self, now: Instant) -> Result<(), Error> {
        while let Some(&slot) = self.free.last() {
            let intended = match self.period {
                None => now,
                Some(p) => {
                    if self.next_send > now {
                        break;
                    }
                    let t = self.next_send;
                    self.next_send += p;
                    t
                }
            };
            self.free.pop();
            if !self.start_op(slot, intended)? {
                self.free.push(slot);
                break;
            }
        }
        Ok(())
    }

    fn next_id(&mut self, slot: u32) -> i32 {
        self.generation = (self.generation + 1) & 0x7fff;
        // At most 2^30: always a valid positive message id.
        ((self.generation << SLOT_BITS | slot) + 1) as i32
    }

    /// Encodes a new operation into the write buffer; false when there is nothing to send.
    fn start_op(&mut self, slot: u32, intended: Instant) -> Result<bool, Error> {
        let kind = match self.mix {
            Mix::Only(k) => k,
            Mix::Mixed => match self.rng.gen_range(0..100u32) {
                0..=47 => OpKind::Search,
                48..=79 => OpKind::Modify,
                80..=90 => OpKind::Add,
                // Delete only entries whose add has certainly completed: at most `depth` adds
                // are outstanding, so every add older than that has its answer.
                91..=95 if self.del_seq + (self.plan.depth as u64) < self.add_seq => OpKind::Delete,
                91..=95 => OpKind::Search,
                _ => OpKind::Compare,
            },
        };
        let rand = self.rng.gen_range(0..self.plan.range);
        let plan = &self.plan;
        let mut vars = Vars {
            rand,
            value: self.rng.gen(),
            conn: self.index,
            seq: 0,
            dn: &[],
            first: crate::gen::FIRST_NAMES[self.rng.gen_range(0..crate::gen::FIRST_NAMES.len())]
                .as_bytes(),
            last: crate::gen::LAST_NAMES[self.rng.gen_range(0..crate::gen::LAST_NAMES.len())]
                .as_bytes(),
        };
        let pick = match plan.searches.len() {
            0 | 1 => 0,
            n => self.rng.gen_range(0..n),
        };
        let (template, phase, of_added) = match kind {
            OpKind::Search => (&plan.searches[pick], Phase::Waiting, false),
            OpKind::Auth => (&plan.searches[0], Phase::AuthSearch, false),
            OpKind::Modify => (&plan.modify, Phase::Waiting, false),
            OpKind::Compare => (&plan.compare, Phase::Waiting, false),
            OpKind::Bind => (&plan.bind_user, Phase::Waiting, false),
            OpKind::Add => {
                vars.seq = self.add_seq;
                self.add_seq += 1;
                (&plan.add, Phase::Waiting, false)
            }
            OpKind::Delete if plan.delete_users && matches!(self.mix, Mix::Only(_)) => {
                // Connection c deletes user.c, user.c+C, ... below --range.
                let n = self.index + self.del_seq * plan.connections;
                if n >= plan.range {
                    self.exhausted = true;
                    return Ok(false);
                }
                self.del_seq += 1;
                vars.seq = n;
                (&plan.delete_user, Phase::Waiting, false)
            }
            OpKind::Delete => {
                vars.seq = self.del_seq;
                self.del_seq += 1;
                (&plan.delete, Phase::Waiting, true)
            }
        };
        let template = template.clone();
        let id = self.next_id(slot);
        template
            .emit(id, &vars, &mut self.wbuf)
            .map_err(|e| Error::Protocol(format!("encoding a request: {e}")))?;
        let s = &mut self.slots[slot as usize];
        s.id = id;
        s.phase = phase;
        s.kind = Some(kind);
        s.sent = Some(intended);
        s.actual = None;
        self.unstamped.push(slot);
        s.entries = 0;
        s.dn.clear();
        s.delete_of_added = of_added;
        Ok(true)
    }

    /// Moves unread bytes to the front of the read buffer, growing it for a large PDU.
    fn make_room(&mut self) -> Result<(), Error> {
        self.rbuf.copy_within(self.rstart..self.rend, 0);
        self.rend -= self.rstart;
        self.rstart = 0;
        if self.rend == self.rbuf.len() {
            if self.rbuf.len() >= MAX_RESPONSE_PDU + 16 {
                return Err(Error::Protocol("response larger than the PDU limit".into()));
            }
            let len = (self.rbuf.len() * 2).min(MAX_RESPONSE_PDU + 16);
            self.rbuf.resize(len, 0);
        }
        Ok(())
    }

    /// Handles every complete PDU in the read buffer; `now` is when they arrived.
    fn process(&mut self, now: Instant) -> Result<(), Error> {
        // The buffer leaves `self` while responses borrow from it (`Vec::new` does not allocate).
        let buf = std::mem::take(&mut self.rbuf);
        let r = self.process_in(&buf, now);
        self.rbuf = buf;
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        r
    }

    fn process_in(&mut self, buf: &[u8], now: Instant) -> Result<(), Error> {
        let recorder = self.recorder.clone();
        let mut rec = lock(&recorder);
        while let Some(n) = frame(&buf[self.rstart..self.rend])? {
            let pdu_start = self.rstart;
            self.rstart += n;
            let r = response::parse(&buf[pdu_start..pdu_start + n]).map_err(|e| {
                Error::Protocol(format!("connection {}: bad response: {e}", self.index))
            })?;
            if r.id == 0 {
                return Err(Error::Protocol(format!(
                    "connection {}: unsolicited notification from the server (result {})",
                    self.index,
                    r.code.map_or_else(|| "?".into(), code_text)
                )));
            }
            let slot = ((r.id as u32).wrapping_sub(1) & SLOT_MASK) as usize;
            let matches = self
                .slots
                .get(slot)
                .is_some_and(|s| s.id == r.id && s.phase != Phase::Free);
            if !matches {
                return Err(Error::Protocol(format!(
                    "connection {}: response (tag 0x{:02x}) to unknown message id {}",
                    self.index, r.tag, r.id
                )));
            }
            self.handle(slot, r.tag, r.code, r.dn, now, &mut rec)?;
        }
        Ok(())
    }

    fn handle(
        &mut self,
        slot: usize,
        op_tag: u8,
        code: Option<u32>,
        dn: &[u8],
        now: Instant,
        rec: &mut Recorder,
    ) -> Result<(), Error> {
        let s = &mut self.slots[slot];
        let Some(kind) = s.kind else { return Ok(()) };
        let phase = s.phase;
        let expected = match phase {
            Phase::AuthSearch => tag::SEARCH_DONE,
            Phase::AuthBind => tag::BIND,
            _ => match kind {
                OpKind::Search | OpKind::Auth => tag::SEARCH_DONE,
                OpKind::Modify => tag::MODIFY,
                OpKind::Add => tag::ADD,
                OpKind::Delete => tag::DELETE,
                OpKind::Compare => tag::COMPARE,
                OpKind::Bind => tag::BIND,
            },
        };
        match op_tag {
            tag::SEARCH_ENTRY if expected == tag::SEARCH_DONE => {
                s.entries += 1;
                if phase == Phase::AuthSearch && s.dn.is_empty() {
                    s.dn.extend_from_slice(dn);
                }
                return Ok(());
            }
            tag::SEARCH_REFERENCE | tag::INTERMEDIATE if expected == tag::SEARCH_DONE => {
                return Ok(())
            }
            t if t == expected => {}
            t => {
                return Err(Error::Protocol(format!(
                    "connection {}: expected response tag 0x{expected:02x}, got 0x{t:02x}",
                    self.index
                )))
            }
        }
        let code = code.unwrap_or(u32::MAX);
        let ok = match kind {
            OpKind::Compare => code == 5 || code == 6,
            _ => code == 0,
        };

        if phase == Phase::AuthSearch && ok {
            if s.dn.is_empty() {
                return self.finish(slot, now, Some(stats::NO_ENTRY), rec);
            }
            // Second step on the same slot: bind as the entry found, same intended start.
            let dn = std::mem::take(&mut s.dn);
            let id = self.next_id(slot as u32);
            let vars = Vars {
                dn: &dn,
                ..Vars::default()
            };
            let r = self.plan.bind_dn.emit(id, &vars, &mut self.wbuf);
            let s = &mut self.slots[slot];
            s.dn = dn;
            r.map_err(|e| Error::Protocol(format!("encoding a bind request: {e}")))?;
            s.id = id;
            s.phase = Phase::AuthBind;
            return Ok(());
        }
        if kind == OpKind::Delete
            && s.delete_of_added
            && code == 32
            && matches!(self.mix, Mix::Only(_))
        {
            // The entries `add` made are used up: not a failure, the end of this connection.
            self.exhausted = true;
            self.release(slot);
            return Ok(());
        }
        self.finish(slot, now, (!ok).then_some(code), rec)
    }

    fn finish(
        &mut self,
        slot: usize,
        now: Instant,
        error: Option<u32>,
        rec: &mut Recorder,
    ) -> Result<(), Error> {
        let s = &self.slots[slot];
        if let (Some(kind), Some(sent)) = (s.kind, s.sent) {
            let measured = sent >= self.measure_start;
            let t = Timings::of(
                sent.into_std(),
                s.actual.unwrap_or(sent).into_std(),
                now.into_std(),
            );
            rec.record(kind, t, measured, error, s.entries);
            if measured {
                self.last_measured = self.last_measured.max(now);
            }
        }
        self.release(slot);
        Ok(())
    }

    fn release(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        s.phase = Phase::Free;
        s.id = 0;
        s.kind = None;
        self.free.push(slot as u32);
    }

    /// The drain deadline passed: what is still outstanding counts as failed.
    fn give_up(&mut self, now: Instant) {
        let recorder = self.recorder.clone();
        let mut rec = lock(&recorder);
        for i in 0..self.slots.len() {
            if self.slots[i].phase != Phase::Free {
                let _ = self.finish(i, now, Some(stats::NO_RESPONSE), &mut rec);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("ldap://127.0.0.1:3890").ok().as_deref(),
            Some("127.0.0.1:3890")
        );
        assert_eq!(
            parse_url("ldap://localhost").ok().as_deref(),
            Some("localhost:389")
        );
        assert_eq!(
            parse_url("ldap://[::1]/").ok().as_deref(),
            Some("[::1]:389")
        );
        assert_eq!(
            parse_url("ldap://[::1]:10389").ok().as_deref(),
            Some("[::1]:10389")
        );
        assert!(parse_url("ldaps://x").is_err());
        assert!(parse_url("ldap://").is_err());
    }
}
