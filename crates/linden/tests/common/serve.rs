//! A `linden serve` process for tests: started with a configuration file, its stderr kept
//! (and searched for lines), killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for something the server logs.
pub const WAIT: Duration = Duration::from_secs(30);

/// Spawns `cmd`, a `linden serve` (stdin and stdout closed), keeps draining its stderr for its
/// whole life (so it never blocks on a full pipe) into the lines returned, and waits for the
/// "listening on" line: the child and the address it serves. When no address comes within
/// `WAIT`, kills it and fails naming `what`, with its stderr.
pub fn spawn_listening(
    cmd: &mut Command,
    what: &str,
) -> (Child, SocketAddr, Arc<Mutex<Vec<String>>>) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let pipe = child.stderr.take().expect("stderr piped");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let keep = Arc::clone(&lines);
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest.split([',', ' ']).next().unwrap_or("");
                if let Ok(a) = addr.parse::<SocketAddr>() {
                    let _ = tx.send(a);
                }
            }
            keep.lock().expect("lock").push(line);
        }
    });
    match rx.recv_timeout(WAIT) {
        Ok(addr) => (child, addr, lines),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} did not report its port; stderr:\n{}",
                lines.lock().expect("lock").join("\n")
            );
        }
    }
}

pub struct Running {
    pub child: Child,
    pub addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Running {
    /// Starts `linden serve --config CONFIG ARGS…` and waits for the "listening on" line.
    pub fn start(config: &Path, args: &[&str]) -> Running {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_linden"));
        cmd.arg("serve").arg("--config").arg(config).args(args);
        let (child, addr, lines) = spawn_listening(&mut cmd, "linden serve");
        Running { child, addr, lines }
    }

    pub fn url(&self) -> String {
        format!("ldap://{}", self.addr)
    }

    pub fn log(&self) -> String {
        self.lines.lock().expect("lock").join("\n")
    }

    /// Lines logged so far that contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.lines
            .lock()
            .expect("lock")
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Waits until `n` lines contain `needle`; panics with the log after `WAIT`.
    pub fn wait_for(&self, needle: &str, n: usize) {
        let deadline = Instant::now() + WAIT;
        while self.count(needle) < n {
            assert!(
                Instant::now() < deadline,
                "no {n} lines with '{needle}' within {WAIT:?}; stderr:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` (e.g. "HUP") to the server.
    pub fn signal(&self, signal: &str) {
        let st = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -{signal} failed");
    }

    /// SIGTERM, then waits (bounded) for the exit.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not stop after SIGTERM; stderr:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
