//! A Linden server for tests: started in-process on 127.0.0.1:0 with its own runtime, stopped
//! when the handle drops. Administrator `cn=admin,dc=example,dc=com`, password `secret`.
#![allow(dead_code)]

pub mod pki;
pub mod raw;
pub mod slapd;

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;

pub const ADMIN_DN: &str = "cn=admin,dc=example,dc=com";
pub const ADMIN_PW: &str = "secret";
pub const BASE: &str = "dc=example,dc=com";

/// The access rules of the slapd the conformance suite is checked against (everyone reads
/// everything but userPassword, which only serves binds and its owner's changes). Tests that
/// are not about access control run with these; `acl.rs` tests the default policy and others.
pub fn open_read_policy() -> Vec<dit::acl::RuleSpec> {
    use dit::acl::{ClauseSpec, RuleSpec};
    let by = |who: &str, rights: &[&str]| ClauseSpec {
        who: who.into(),
        rights: rights.iter().map(|r| r.to_string()).collect(),
    };
    vec![
        RuleSpec {
            attrs: Some(vec!["userPassword".into()]),
            by: vec![by("self", &["write", "auth"]), by("anonymous", &["auth"])],
            ..RuleSpec::default()
        },
        RuleSpec {
            by: vec![by("*", &["read", "search", "compare"])],
            ..RuleSpec::default()
        },
    ]
}

/// Which listeners `Running::start` opens besides the LDAP one, each on 127.0.0.1:0.
#[derive(Debug, Default, Clone, Copy)]
pub struct Extra {
    /// LDAPS (TLS from the first byte, the self-signed certificate).
    pub ldaps: bool,
    /// HTTP: `/metrics`, `/healthz`, `/readyz`.
    pub metrics: bool,
    /// The web console.
    pub console: bool,
}

/// A started server serving its listeners on a runtime of its own (two workers, on its own
/// thread) until dropped: the drop stops it and waits for the thread.
pub struct Running {
    pub server: Arc<server::Server>,
    pub ldap: SocketAddr,
    pub ldaps: Option<SocketAddr>,
    pub metrics: Option<SocketAddr>,
    pub console: Option<SocketAddr>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    pub fn start(config: server::Config, extra: Extra) -> Running {
        let srv = Arc::new(server::Server::start(config).expect("server starts"));
        type Addrs = (
            SocketAddr,
            Option<SocketAddr>,
            Option<SocketAddr>,
            Option<SocketAddr>,
        );
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<Addrs>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let s2 = srv.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let bind = || async {
                    tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("bind")
                };
                let some = |wanted: bool| async move {
                    match wanted {
                        true => Some(bind().await),
                        false => None,
                    }
                };
                let ldap = bind().await;
                let ldaps = some(extra.ldaps).await;
                let metrics = some(extra.metrics).await;
                let console = some(extra.console).await;
                let addr = |l: &Option<tokio::net::TcpListener>| {
                    l.as_ref().map(|l| l.local_addr().expect("addr"))
                };
                addr_tx
                    .send((
                        ldap.local_addr().expect("addr"),
                        addr(&ldaps),
                        addr(&metrics),
                        addr(&console),
                    ))
                    .expect("send addresses");
                let listeners = server::Listeners {
                    ldap: vec![ldap],
                    ldaps: ldaps.into_iter().collect(),
                    metrics: metrics.into_iter().collect(),
                    console: console.into_iter().collect(),
                    ..server::Listeners::default()
                };
                let _ = s2
                    .serve_listeners(listeners, async {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let (ldap, ldaps, metrics, console) = addr_rx.recv().expect("server addresses");
        Running {
            server: srv,
            ldap,
            ldaps,
            metrics,
            console,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub url: String,
    /// The LDAPS listener (TLS from the first byte, self-signed certificate).
    pub ldaps_url: String,
    pub server: Arc<server::Server>,
    running: Running,
    /// The server's data directory, removed when the handle drops (after the server stops).
    pub data: tempfile::TempDir,
}

impl TestServer {
    pub fn start(demo: bool) -> TestServer {
        Self::start_with(|c| c.demo = demo)
    }

    pub fn start_with(tweak: impl FnOnce(&mut server::Config)) -> TestServer {
        let data = tempfile::tempdir().expect("temporary data directory");
        let mut config = server::Config {
            data_dir: data.path().to_path_buf(),
            listen: vec!["127.0.0.1:0".parse().expect("addr")],
            admin_password_hash: pwhash::hash(pwhash::Scheme::default(), ADMIN_PW.as_bytes()),
            access: Some(open_read_policy()),
            size_limit_anonymous: 0,
            ..server::Config::default()
        };
        tweak(&mut config);
        let running = Running::start(
            config,
            Extra {
                ldaps: true,
                ..Extra::default()
            },
        );
        let addr = running.ldap;
        let ldaps = running.ldaps.expect("the LDAPS listener");
        TestServer {
            addr,
            url: format!("ldap://{addr}"),
            ldaps_url: format!("ldaps://{ldaps}"),
            server: running.server.clone(),
            running,
            data,
        }
    }

    /// An ldap3 connection bound as the administrator.
    pub fn admin(&self) -> ldap3::LdapConn {
        let mut c = ldap3::LdapConn::new(&self.url).expect("connect");
        c.simple_bind(ADMIN_DN, ADMIN_PW)
            .expect("bind")
            .success()
            .expect("admin bind");
        c
    }

    pub fn anon(&self) -> ldap3::LdapConn {
        ldap3::LdapConn::new(&self.url).expect("connect")
    }

    /// A new connection bound as `dn`; panics unless the bind succeeds.
    pub fn bind_as(&self, dn: &str, pw: &str) -> ldap3::LdapConn {
        let mut c = self.anon();
        let r = c.simple_bind(dn, pw).expect("bind request");
        assert_eq!(r.rc, 0, "bind as {dn}: {r:?}");
        c
    }

    /// The result code of a simple bind on a new connection.
    pub fn bind_rc(&self, dn: &str, pw: &str) -> u32 {
        self.anon().simple_bind(dn, pw).expect("bind request").rc
    }
}

#[derive(clap::Parser)]
struct BenchCli {
    #[command(flatten)]
    args: bench::load::BenchArgs,
}

/// Runs `linden bench WORKLOAD` against `url` as the administrator: 2 connections × 4
/// outstanding requests, 1 s, no warm-up, `uid=user.0` … `user.49`, plus `extra` arguments;
/// panics if an operation fails.
pub fn bench(url: &str, workload: &str, extra: &[&str]) -> bench::load::Summary {
    use clap::Parser;
    let mut argv = vec![
        "bench",
        workload,
        "--url",
        url,
        "--bind-dn",
        ADMIN_DN,
        "--password",
        ADMIN_PW,
        "--connections",
        "2",
        "--depth",
        "4",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--range",
        "50",
        "--quiet",
    ];
    argv.extend_from_slice(extra);
    let cli = BenchCli::parse_from(argv);
    bench::load::run(&cli.args).expect("bench run without errors")
}

/// Adds `ou=people` and `uid=user.0` … `uid=user.{n-1}` under it, the entries `linden bench`
/// works on (with `employeeNumber` N, and `userPassword` "password" if `password`).
pub fn add_bench_users(c: &mut ldap3::LdapConn, n: usize, password: bool) {
    c.add(
        "ou=people,dc=example,dc=com",
        vec![
            ("objectClass", ["organizationalUnit"].into()),
            ("ou", ["people"].into()),
        ],
    )
    .expect("add")
    .success()
    .expect("ou");
    for i in 0..n {
        let dn = format!("uid=user.{i},ou=people,dc=example,dc=com");
        let uid = format!("user.{i}");
        let num = i.to_string();
        let mut attrs = vec![
            ("objectClass", ["inetOrgPerson"].into()),
            ("uid", [uid.as_str()].into()),
            ("cn", ["Bench User"].into()),
            ("sn", ["User"].into()),
            ("employeeNumber", [num.as_str()].into()),
        ];
        if password {
            attrs.push(("userPassword", ["password"].into()));
        }
        c.add(&dn, attrs).expect("add").success().expect("user");
    }
}

/// A consumer of the provider at `url` as the tests configure it: rid 1, the whole suffix,
/// a simple bind as the administrator, a retry every second.
pub fn consumer_spec(url: &str) -> repl::consumer::ConsumerSpec {
    let mut spec = repl::consumer::ConsumerSpec::new(
        1,
        repl::consumer::spec::ProviderUrl::parse(url).expect("provider URL"),
        BASE,
    );
    spec.bind = repl::consumer::spec::BindMethod::Simple {
        dn: ADMIN_DN.into(),
        password: ADMIN_PW.into(),
    };
    spec.retry = repl::consumer::spec::RetrySchedule::parse("1 +").expect("retry");
    spec
}

/// A search with any outcome: (result code, matchedDN, entries).
pub fn search(
    c: &mut ldap3::LdapConn,
    base: &str,
    scope: ldap3::Scope,
    filter: &str,
    attrs: &[&str],
) -> (u32, String, Vec<ldap3::SearchEntry>) {
    let ldap3::SearchResult(rs, res) = c
        .search(base, scope, filter, attrs.to_vec())
        .expect("search request");
    (
        res.rc,
        res.matched,
        rs.into_iter().map(ldap3::SearchEntry::construct).collect(),
    )
}

/// A free loopback port: bound, then released for a server process (slapd, lloadd) to take.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Whether a test that needs a program from outside the workspace (slapd, lloadd) was asked
/// for with `var=1`. Such a test is `#[ignore]`d, so that a machine without the program shows
/// it as ignored rather than passed; scripts/test.sh runs it with the variable set once the
/// program is installed. Run with `--ignored` but without the variable, it says so and checks
/// nothing.
pub fn opted_in(var: &str, test: &str) -> bool {
    if std::env::var(var).as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: {test} runs with {var}=1 (see its #[ignore] reason)");
    false
}

/// Runs an OpenLDAP client tool; panics with a pointer to the installer when it is missing.
pub fn tool(name: &str, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    tool_env(name, args, stdin, &[])
}

/// `tool` with extra environment variables (e.g. `LDAPTLS_CERT`).
pub fn tool_env(
    name: &str,
    args: &[&str],
    stdin: Option<&str>,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    use std::io::Write;
    let mut cmd = Command::new(name);
    cmd.args(args)
        .envs(env.iter().copied())
        .env("LDAPTLS_REQCERT", "never")
        .env("LDAPCONF", "/dev/null")
        .env("LDAPRC", "/dev/null")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!(
            "cannot run {name} ({e}): install OpenLDAP's ldap-utils (scripts/install-test-deps.sh)"
        )
    });
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().expect("tool output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Reads `path` until `done` holds for its text (the writer thread flushes asynchronously).
pub fn wait_for(path: &std::path::Path, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if done(&text) || std::time::Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
