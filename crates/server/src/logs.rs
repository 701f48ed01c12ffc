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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Mutex;
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
///
/// A sink opened for a server has a writer thread for its whole life, whatever its target: a
/// reload may turn the log on, off, or to another file, and SIGHUP reopens the file after
/// logrotate moved it. The new output is opened by whoever asks (so a failure is theirs to
/// report, and the old output stays) and handed to the writer thread, which switches between
/// two records.
pub struct LogSink {
    tx: Option<SyncSender<Vec<u8>>>,
    /// Whether records are wanted: checked first on the hot path, without a lock.
    on: AtomicBool,
    dropped: std::sync::Arc<AtomicU64>,
    /// The target in use, and the output waiting for the writer to switch to.
    target: Mutex<LogTarget>,
    pending: std::sync::Arc<Mutex<Option<Box<dyn std::io::Write + Send>>>>,
    name: &'static str,
}

/// Opens what `target` writes to; `None` for off.
fn output(
    target: &LogTarget,
    name: &str,
) -> Result<Option<Box<dyn std::io::Write + Send>>, String> {
    Ok(match target {
        LogTarget::Off => None,
        LogTarget::Stdout => Some(Box::new(std::io::stdout())),
        LogTarget::File(p) => Some(Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("{name}: cannot open {}: {e}", p.display()))?,
        )),
    })
}

/// Checks that `path` can be appended to, without creating it (`linden check-config`).
pub fn check_writable(path: &std::path::Path) -> Result<(), String> {
    if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))
    } else {
        match path.parent() {
            Some(d) if !d.as_os_str().is_empty() && !d.is_dir() => Err(format!(
                "cannot create {}: no directory {}",
                path.display(),
                d.display()
            )),
            _ => Ok(()),
        }
    }
}

impl LogSink {
    /// A sink that never writes (bulk import).
    pub fn off() -> LogSink {
        LogSink {
            tx: None,
            on: AtomicBool::new(false),
            dropped: Default::default(),
            target: Mutex::new(LogTarget::Off),
            pending: Default::default(),
            name: "log",
        }
    }

    /// Opens the target (appending to a file) and starts its writer thread.
    pub fn open(target: &LogTarget, name: &'static str) -> Result<LogSink, String> {
        let first = output(target, name)?;
        let (tx, rx) = sync_channel::<Vec<u8>>(LOG_QUEUE);
        let dropped = std::sync::Arc::new(AtomicU64::new(0));
        let lost = dropped.clone();
        let pending: std::sync::Arc<Mutex<Option<Box<dyn std::io::Write + Send>>>> =
            Default::default();
        let switch = pending.clone();
        let thread_name = format!("linden-{name}");
        std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || {
                // The writer polls every FLUSH_EVERY instead of waiting on the channel: a
                // producer then never has to wake it (a futex call per line would cost more
                // than formatting the line), and each wake-up writes a whole batch.
                let mut w = first.map(|o| std::io::BufWriter::with_capacity(256 * 1024, o));
                loop {
                    let mut closed = false;
                    loop {
                        match rx.try_recv() {
                            Ok(rec) => {
                                if let Some(w) = &mut w {
                                    let _ = w.write_all(&rec);
                                }
                            }
                            Err(std::sync::mpsc::TryRecvError::Empty) => break,
                            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                                closed = true;
                                break;
                            }
                        }
                    }
                    let n = lost.swap(0, Ordering::Relaxed);
                    if let (true, Some(w)) = (n > 0, &mut w) {
                        let _ =
                            writeln!(w, "# {n} log records dropped: the log writer fell behind");
                    }
                    if let Some(w) = &mut w {
                        let _ = w.flush();
                    }
                    // A reopen or a new target: what the writer took before it saw the switch
                    // went to the old output (flushed above), everything after to the new.
                    if let Some(next) = switch.lock().unwrap_or_else(|p| p.into_inner()).take() {
                        w = Some(std::io::BufWriter::with_capacity(256 * 1024, next));
                    }
                    if closed {
                        return;
                    }
                    std::thread::sleep(FLUSH_EVERY);
                }
            })
            .map_err(|e| format!("{name}: cannot start the writer thread: {e}"))?;
        Ok(LogSink {
            tx: Some(tx),
            on: AtomicBool::new(*target != LogTarget::Off),
            dropped,
            target: Mutex::new(target.clone()),
            pending,
            name,
        })
    }

    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Queues a record (complete lines); never blocks.
    pub fn write(&self, record: Vec<u8>) {
        if !self.enabled() {
            return;
        }
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_)) = tx.try_send(record) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Writes to `target` from now on (a reload changed it). The new file is opened here: on
    /// failure the old target stays and the message says why.
    pub fn retarget(&self, target: &LogTarget) -> Result<(), String> {
        if self.tx.is_none() {
            return Ok(());
        }
        let next = output(target, self.name)?;
        let mut current = self.target.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(o) = next {
            *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(o);
        }
        self.on.store(*target != LogTarget::Off, Ordering::Relaxed);
        *current = target.clone();
        Ok(())
    }

    /// Opens the file again by its name (after logrotate moved it away): later records go
    /// to the new file. Stdout and off need nothing.
    pub fn reopen(&self) -> Result<(), String> {
        let target = self
            .target
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match target {
            LogTarget::File(_) => self.retarget(&target),
            _ => Ok(()),
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

/// How access-log lines are written (`access_log_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `2026-11-23T03:31:18.123456Z conn=1 op=2 client=… bound="…" SEARCH base="…" … result=0`.
    #[default]
    Text,
    /// One JSON object per line, with the same fields under the same names (see
    /// docs/monitoring.md).
    Json,
}

impl LogFormat {
    /// `text` or `json`.
    pub fn parse(s: &str) -> Option<LogFormat> {
        match s {
            "text" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }
}

/// Appends `"value"` as a JSON string: `"`, `\` and control characters escaped, bytes that are
/// not UTF-8 replaced (U+FFFD).
pub fn json_string(out: &mut String, value: &[u8]) {
    out.push('"');
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
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// An access-log line being written, in either format: the fields go in one by one, named the
/// same in both (`key=value` pairs in text, members of one object in JSON).
pub struct Line {
    buf: String,
    json: bool,
}

impl Line {
    fn key(&mut self, key: &str) {
        if self.json {
            self.buf.push_str(",\"");
            self.buf.push_str(key);
            self.buf.push_str("\":");
        } else {
            self.buf.push(' ');
            self.buf.push_str(key);
            self.buf.push('=');
        }
    }

    /// What happened: the operation (`SEARCH`) or event (`CONNECT`). JSON: `"type"`.
    pub fn kind(&mut self, name: &str) {
        if self.json {
            self.buf.push_str(",\"type\":\"");
            self.buf.push_str(name);
            self.buf.push('"');
        } else {
            self.buf.push(' ');
            self.buf.push_str(name);
        }
    }

    /// A value from the client (a DN, a filter): quoted and escaped.
    pub fn quoted(&mut self, key: &str, value: &[u8]) {
        self.key(key);
        if self.json {
            json_string(&mut self.buf, value);
        } else {
            quote(&mut self.buf, value);
        }
    }

    /// A word of the server's own (`scope=sub`): bare in text, a string in JSON.
    pub fn word(&mut self, key: &str, value: &str) {
        self.key(key);
        if self.json {
            json_string(&mut self.buf, value.as_bytes());
        } else {
            self.buf.push_str(value);
        }
    }

    /// A number.
    pub fn num(&mut self, key: &str, value: impl std::fmt::Display) {
        self.key(key);
        let _ = write!(self.buf, "{value}");
    }

    /// A flag without a value (`CONNECT ldapi`): a bare word in text, `true` in JSON.
    pub fn flag(&mut self, name: &str) {
        if self.json {
            self.key(name);
            self.buf.push_str("true");
        } else {
            self.buf.push(' ');
            self.buf.push_str(name);
        }
    }

    /// An event written as text (`ABANDON target=3`): its first word is the kind, then
    /// `key=value` pairs (numbers stay numbers in JSON) and bare flags.
    pub fn event(&mut self, what: &str) {
        let mut words = what.split(' ').filter(|w| !w.is_empty());
        if let Some(k) = words.next() {
            self.kind(k);
        }
        for w in words {
            match w.split_once('=') {
                Some((k, v)) if v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty() => {
                    self.num(k, v)
                }
                Some((k, v)) => self.word(k, v),
                None => self.flag(w),
            }
        }
    }

    /// The finished line, newline included.
    pub fn finish(mut self) -> Vec<u8> {
        if self.json {
            self.buf.push('}');
        }
        self.buf.push('\n');
        self.buf.into_bytes()
    }
}

/// The start of an access-log line: time, connection, operation, client and bound DN.
///
/// `tag` is the connection's constant part, ` conn=N` (see `conn_tag`), and `client` its
/// ` client=ADDR:PORT`, both formatted once per connection in the log's format.
pub fn access_prefix(format: LogFormat, tag: &str, op: i32, client: &str, bound: &str) -> Line {
    let json = format == LogFormat::Json;
    let mut buf = String::with_capacity(256);
    if json {
        buf.push_str("{\"time\":\"");
        timestamp(&mut buf, SystemTime::now());
        buf.push('"');
    } else {
        timestamp(&mut buf, SystemTime::now());
    }
    let mut l = Line { buf, json };
    l.buf.push_str(tag);
    l.num("op", op);
    l.buf.push_str(client);
    l.quoted("bound", bound.as_bytes());
    l
}

/// The constant parts of a connection's access-log lines: ` conn=N` and ` client=ADDR:PORT`
/// (`client=ldapi` for a local connection, `None`), in the log's format.
pub fn conn_tag(format: LogFormat, conn: u64, client: Option<SocketAddr>) -> (String, String) {
    let client = client.map_or_else(|| "ldapi".to_string(), |c| c.to_string());
    let mut l = Line {
        buf: String::new(),
        json: format == LogFormat::Json,
    };
    l.num("conn", conn);
    let tag = std::mem::take(&mut l.buf);
    l.word("client", &client);
    (tag, l.buf)
}

/// Ends an access-log line with the result, the entries returned (searches) and the server
/// time in microseconds.
pub fn access_finish(
    mut line: Line,
    rc: ResultCode,
    entries: Option<u64>,
    etime: Duration,
) -> Vec<u8> {
    line.num("result", rc as u32);
    if let Some(n) = entries {
        line.num("entries", n);
    }
    line.num("etime_us", etime.as_micros());
    line.finish()
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

    #[test]
    fn one_line_in_both_formats() {
        let client = Some(SocketAddr::from(([127, 0, 0, 1], 5000)));
        for format in [LogFormat::Text, LogFormat::Json] {
            let (tag, cl) = conn_tag(format, 7, client);
            let mut l = access_prefix(format, &tag, 2, &cl, "cn=a\"b");
            l.kind("SEARCH");
            l.quoted("base", b"dc=x\n");
            l.word("scope", "sub");
            let out = access_finish(l, ResultCode::Success, Some(1), Duration::from_micros(9));
            let text = String::from_utf8(out).expect("utf-8");
            assert_eq!(text.matches('\n').count(), 1, "{text}");
            if format == LogFormat::Text {
                assert!(text.contains(" conn=7 op=2 client=127.0.0.1:5000 bound=\"cn=a\\\"b\" SEARCH base=\"dc=x\\x0a\" scope=sub result=0 entries=1 etime_us=9\n"), "{text}");
            } else {
                assert!(text.starts_with("{\"time\":\""), "{text}");
                assert!(text.ends_with(",\"conn\":7,\"op\":2,\"client\":\"127.0.0.1:5000\",\"bound\":\"cn=a\\\"b\",\"type\":\"SEARCH\",\"base\":\"dc=x\\n\",\"scope\":\"sub\",\"result\":0,\"entries\":1,\"etime_us\":9}\n"), "{text}");
            }
        }
    }

    #[test]
    fn events_become_fields() {
        let (tag, cl) = conn_tag(LogFormat::Json, 1, None);
        let mut l = access_prefix(LogFormat::Json, &tag, 0, &cl, "");
        l.event("CONNECT tls=no target=3 ldapi");
        let text = String::from_utf8(l.finish()).expect("utf-8");
        assert!(
            text.ends_with(",\"conn\":1,\"op\":0,\"client\":\"ldapi\",\"bound\":\"\",\"type\":\"CONNECT\",\"tls\":\"no\",\"target\":3,\"ldapi\":true}\n"),
            "{text}"
        );
    }
}
