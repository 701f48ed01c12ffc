//! An S3-compatible server for the s3:// archive tests: S3Proxy (org.gaul:s3proxy, the
//! jar-with-dependencies from Maven Central that scripts/install-test-deps.sh fetches) as a
//! separate `java -jar` process on loopback, storing its buckets in a directory of the test
//! (jclouds' filesystem provider), with AWS signature v2/v4 authentication. Killed when
//! dropped.
//!
//! The tests that need it are `#[ignore]`d and run with `LINDEN_TEST_S3=1` (scripts/test.sh
//! sets it after installing S3Proxy); opted in, a missing jar or java is a failure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where scripts/install-test-deps.sh puts the jar (`LINDEN_S3PROXY_JAR` overrides it).
pub const DEFAULT_JAR: &str = "/var/cache/linden-test-deps/s3proxy-jar-with-dependencies.jar";
/// The bucket the tests archive into.
pub const BUCKET: &str = "linden";
/// S3Proxy's identity and credential (its access key id and secret access key).
pub const KEY_ID: &str = "linden-test";
pub const SECRET: &str = "linden-test-secret";
/// How long a JVM on a busy machine may take to start answering.
const READY_DEADLINE: Duration = Duration::from_secs(120);

/// Whether the S3 tests run (`LINDEN_TEST_S3=1`); says why not when they do not.
pub fn enabled(test: &str) -> bool {
    if std::env::var("LINDEN_TEST_S3").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: {test} runs with LINDEN_TEST_S3=1 (see its #[ignore] reason)");
    false
}

/// A free port on loopback for an S3Proxy started later (a JVM takes a second or more to
/// bind it, and one test starts it only after a server has failed to reach it). It is taken
/// below the system's ephemeral range, so that no connection and no `127.0.0.1:0` listener of
/// another test gets it meanwhile; ports handed out before in this process are skipped.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let ephemeral_low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low.max(10_001));
    let span = u32::from(high - low);
    // Different processes (test binaries run one after another, or a second checkout) start
    // at different places.
    let seed = std::process::id()
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
    for _ in 0..1000 {
        let n = u32::from(NEXT.fetch_add(1, Ordering::Relaxed));
        let port = low + ((seed.wrapping_add(n.wrapping_mul(7919))) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port found below {high}");
}

pub struct S3Proxy {
    child: Option<Child>,
    pub port: u16,
    /// The directory holding the buckets (one directory each).
    pub basedir: PathBuf,
    log: PathBuf,
}

impl S3Proxy {
    pub fn endpoint(port: u16) -> String {
        format!("http://127.0.0.1:{port}")
    }

    /// Starts S3Proxy on `port` with its data in `dir` (the bucket `BUCKET` made), and waits
    /// until it answers HTTP.
    pub fn start(dir: &Path, port: u16) -> S3Proxy {
        let jar = std::env::var("LINDEN_S3PROXY_JAR").unwrap_or_else(|_| DEFAULT_JAR.to_string());
        assert!(
            Path::new(&jar).is_file(),
            "LINDEN_TEST_S3=1 but S3Proxy is not at {jar}: run scripts/install-test-deps.sh (or set LINDEN_S3PROXY_JAR)"
        );
        let basedir = dir.join("buckets");
        std::fs::create_dir_all(basedir.join(BUCKET)).expect("bucket directory");
        let props = dir.join("s3proxy.properties");
        std::fs::write(
            &props,
            format!(
                "s3proxy.endpoint={}\ns3proxy.authorization=aws-v2-or-v4\ns3proxy.identity={KEY_ID}\ns3proxy.credential={SECRET}\njclouds.provider=filesystem\njclouds.filesystem.basedir={}\n",
                Self::endpoint(port),
                basedir.display()
            ),
        )
        .expect("properties");
        let log = dir.join("s3proxy.log");
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = Command::new("java")
            .args(["-Xmx256m", "-jar", &jar, "--properties"])
            .arg(&props)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start S3Proxy (java -jar {jar}): {e}"));
        let mut p = S3Proxy {
            child: Some(child),
            port,
            basedir,
            log,
        };
        p.wait_ready();
        p
    }

    /// Polls (bounded in time) until an HTTP request gets a status line back.
    fn wait_ready(&mut self) {
        let start = Instant::now();
        loop {
            if answers(self.port) {
                return;
            }
            if let Some(st) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().expect("try_wait"))
            {
                panic!(
                    "S3Proxy exited ({st}) before answering; its log:\n{}",
                    self.log()
                );
            }
            assert!(
                start.elapsed() < READY_DEADLINE,
                "S3Proxy did not answer on port {} within {READY_DEADLINE:?}; its log:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kills the server (the port stops answering at once).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for S3Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether an HTTP server on `port` answers a request with a status line.
fn answers(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
}
