//! Access and audit logs.
//!
//! The access log has one line per operation (and per connection opened and closed); the audit
//! log has every successful change as an LDIF change record preceded by a comment saying who
//! made it, when and from where. Both are off by default.
//!
//! Writing never holds up an operation: lines go through a bounded channel to a writer thread
//! that writes whatever has queued every few milliseconds. If the writer falls behind
//! (a stalled disk) and the channel is full, lines are dropped and counted, and the writer
//! writes how many it lost as soon as it can: a slow log must not stop the directory.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::time::{Duration, SystemTime};

use proto::ResultCode;

use dit::csn::civil_time;

/// Lines (or audit records) queued before new ones are dropped.
pub const LOG_QUEUE: usize = 64 * 1024;
/// How often the writer thread writes what has been queued (and so the most a line waits).
pub const FLUSH_EVERY: Duration = Duration::from_millis(5);

/// Where a log goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LogTarget {
    #[default]
    Off,
    Stdout,
    File(PathBuf),
}

impl LogTarget {
    /// `off`, `stdout`, or a file path.
    pub fn parse(s: &str) -> LogTarget {
        match s {
            "off" | "" => LogTarget::Off,
            "stdout" | "-" => LogTarget::Stdout,
            path => LogTarget::File(PathBuf::from(path)),
        }
    }
}

/// One log's sending end.
pub struct LogSink {
    tx: Option<SyncSender<Vec<u8>>>,
    dropped: std::sync::Arc<AtomicU64>,
}

impl LogSink {
    pub fn off() -> LogSink {
        LogSink {
            tx: None,
            dropped: Default::default(),
        }
    }

    /// Opens the target (appending to a file) and starts its writer thread.
    pub fn open(target: &LogTarget, name: &str) -> Result<LogSink, String> {
        let out: Box<dyn std::io::Write + Send> = match target {
            LogTarget::Off => return Ok(LogSink::off()),
            LogTarget::Stdout => Box::new(std::io::stdout()),
            LogTarget::File(p) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| format!("{name}: cannot open {}: {e}", p.display()))?,
            ),
        };
        let (tx, rx) = sync_channel::<Vec<u8>>(LOG_QUEUE);
        let dropped = std::sync::Arc::new(AtomicU64::new(0));
        let lost = dropped.clone();
        let thread_name = format!("linden-{name}");
        std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || {
                // The writer polls every FLUSH_EVERY instead of waiting on the channel: a
                // producer then never has to wake it (a futex call per line would cost more
                // than formatting the line), and each wake-up writes a whole batch.
                let mut w = std::io::BufWriter::with_capacity(256 * 1024, out);
                loop {
                    let mut closed = false;
                    loop {
                        match rx.try_recv() {
                            Ok(rec) => {
                                let _ = w.write_all(&rec);
                            }
                            Err(std::sync::mpsc::TryRecvError::Empty) => break,
                            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                                closed = true;
                                break;
                            }
                        }
                    }
                    let n = lost.swap(0, Ordering::Relaxed);
                    if n > 0 {
                        let _ =
                            writeln!(w, "# {n} log records dropped: the log writer fell behind");
                    }
                    let _ = w.flush();
                    if closed {
                        return;
                    }
                    std::thread::sleep(FLUSH_EVERY);
                }
            })
            .map_err(|e| format!("{name}: cannot start the writer thread: {e}"))?;
        Ok(LogSink {
            tx: Some(tx),
            dropped,
        })
    }

    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues a record (complete lines); never blocks.
    pub fn write(&self, record: Vec<u8>) {
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_)) = tx.try_send(record) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// `2026-11-23T03:31:18.123456Z`.
///
/// The date and time up to the second are formatted once per second per thread (calendar
/// arithmetic and six padded fields cost more than the rest of a log line).
pub fn timestamp(out: &mut String, t: SystemTime) {
    use std::cell::RefCell;
    thread_local! {
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    SECOND.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            c.1 = civil_time(t, "-", "T", ":");
            c.0 = secs;
        }
        out.push_str(&c.1);
    });
    let _ = write!(out, ".{:06}Z", since.subsec_micros());
}

/// Appends `"value"` with `"`, `\` and control characters escaped, so one record is one line
/// whatever a client sends.
pub fn quote(out: &mut String, value: &[u8]) {
    out.push('"');
    // Nearly every value is printable ASCII without quotes or backslashes: copy it whole.
    if value
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push_str(std::str::from_utf8(value).unwrap_or_default());
        out.push('"');
        return;
    }
    for ch in String::from_utf8_lossy(value).chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The start of an access-log line: time, connection, operation, client and bound DN.
///
/// `tag` is the connection's constant part, ` conn=N` (see `conn_tag`), and `client` its
/// ` client=ADDR:PORT`, both formatted once per connection.
pub fn access_prefix(tag: &str, op: i32, client: &str, bound: &str) -> String {
    let mut s = String::with_capacity(256);
    timestamp(&mut s, SystemTime::now());
    s.push_str(tag);
    let _ = write!(s, " op={op}");
    s.push_str(client);
    s.push_str(" bound=");
    quote(&mut s, bound.as_bytes());
    s
}

/// The constant parts of a connection's access-log lines: ` conn=N` and ` client=ADDR:PORT`.
pub fn conn_tag(conn: u64, client: SocketAddr) -> (String, String) {
    (format!(" conn={conn}"), format!(" client={client}"))
}

/// Ends an access-log line with the result, the entries returned (searches) and the server
/// time in microseconds.
pub fn access_finish(
    mut line: String,
    rc: ResultCode,
    entries: Option<u64>,
    etime: Duration,
) -> Vec<u8> {
    let _ = write!(line, " result={}", rc as u32);
    if let Some(n) = entries {
        let _ = write!(line, " entries={n}");
    }
    let _ = writeln!(line, " etime_us={}", etime.as_micros());
    line.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_one_line() {
        let mut s = String::new();
        quote(&mut s, b"cn=a\"b\\c\nd");
        assert_eq!(s, r#""cn=a\"b\\c\x0ad""#);
    }
}
