//! A stand-in for systemd's notification socket: a Unix datagram socket whose path a test puts
//! in NOTIFY_SOCKET, and the notifications (`READY=1`, `STOPPING=1`, …) received on it.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

pub struct NotifySocket {
    pub path: PathBuf,
    socket: UnixDatagram,
    /// Every notification line received so far, in order.
    pub received: Vec<String>,
}

impl NotifySocket {
    /// Binds `dir/notify`. `open`: writable by every user (a server that runs as another user
    /// must be able to send to it).
    pub fn bind(dir: &Path, open: bool) -> NotifySocket {
        let path = dir.join("notify");
        let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
        if open {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
                .expect("chmod the notify socket");
        }
        NotifySocket {
            path,
            socket,
            received: Vec::new(),
        }
    }

    /// Waits (up to `deadline`) for a notification with the line `line` (e.g. "READY=1") from
    /// `child`, and returns the whole datagram. Fails at once if `child` exits first.
    pub fn wait_for(&mut self, line: &str, child: &mut Child, deadline: Duration) -> String {
        let until = Instant::now() + deadline;
        let mut buf = vec![0u8; 4096];
        loop {
            let left = until.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no {line} within {deadline:?}; received: {:?}",
                self.received
            );
            if let Some(status) = child.try_wait().expect("try_wait") {
                // What it sent before exiting is still queued.
                self.drain();
                if let Some(msg) = self.received.iter().find(|l| *l == line) {
                    return msg.clone();
                }
                panic!(
                    "server exited ({status}) before {line}; received: {:?}",
                    self.received
                );
            }
            // Short reads, so that a server that died is noticed; the deadline is the bound.
            self.socket
                .set_read_timeout(Some(left.min(Duration::from_millis(500))))
                .expect("set_read_timeout");
            match self.socket.recv(&mut buf) {
                Ok(n) => {
                    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                    self.received.extend(msg.lines().map(str::to_string));
                    if msg.lines().any(|l| l == line) {
                        return msg;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("notify socket: {e}"),
            }
        }
    }

    /// Takes every notification still queued (after the sender exited: all it sent).
    pub fn drain(&mut self) {
        self.socket.set_nonblocking(true).expect("set_nonblocking");
        let mut buf = vec![0u8; 4096];
        while let Ok(n) = self.socket.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            self.received.extend(msg.lines().map(str::to_string));
        }
        self.socket.set_nonblocking(false).expect("set_nonblocking");
    }

    /// How many times the line `line` was received.
    pub fn count(&self, line: &str) -> usize {
        self.received.iter().filter(|l| *l == line).count()
    }
}
