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
            c.1 = crate::ops::civil_time(t, "-", "T", ":");
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

/// An audit record: a comment line (when, who, from where) and the LDIF change record.
pub fn audit_record(
    conn: u64,
    client: SocketAddr,
    who: &str,
    dn: &str,
    change: &ldif::ChangeRecord,
) -> Vec<u8> {
    let mut head = String::with_capacity(160);
    head.push_str("# ");
    timestamp(&mut head, SystemTime::now());
    let _ = write!(head, " conn={conn} client={client} by=");
    quote(&mut head, who.as_bytes());
    head.push('\n');
    let mut w = ldif::Writer::new(head.into_bytes());
    if w.write_change(dn, change, &[]).is_err() {
        // Only attribute names the schema accepted reach here; a name the writer refuses
        // still leaves a trace of the change.
        let mut v = w.into_inner();
        let _ = writeln!(v, "# (change to {dn:?} could not be written as LDIF)\n");
        return v;
    }
    w.into_inner()
}

/// userPassword values never reach the audit log: they are replaced by this marker.
pub const REDACTED: &[u8] = b"{REDACTED}";

/// Whether an attribute description names userPassword (whose values are never logged).
fn is_password(shared: &crate::state::Shared, desc: &[u8]) -> bool {
    crate::state::resolve_attr(&shared.schema(), desc)
        .is_ok_and(|(ty, _)| shared.schema().is_subtype(ty, shared.known.user_password))
}

fn values(
    shared: &crate::state::Shared,
    desc: &[u8],
    vals: &[std::borrow::Cow<'_, [u8]>],
) -> Vec<Vec<u8>> {
    if is_password(shared, desc) {
        vals.iter().map(|_| REDACTED.to_vec()).collect()
    } else {
        vals.iter().map(|v| v.to_vec()).collect()
    }
}

/// The change record of what a change applied (`overlays::Applied`): an add is the whole new
/// entry, server-kept attributes included; a modify replaces or deletes each attribute whose
/// values changed (modify-increment results, stamps); a delete is a delete. `None` for a
/// rename, whose request says more than its result. The entry's DN comes with it.
pub fn applied_change(
    shared: &crate::state::Shared,
    applied: &crate::overlays::Applied,
) -> Option<(String, ldif::ChangeRecord)> {
    use std::collections::BTreeMap;
    let schema = shared.schema();
    // Keyed (operational?, description): the client's attributes come first, the server's
    // stamps after them, as in slapd's audit log.
    let described = |e: &store::Entry| -> BTreeMap<(bool, String), Vec<Vec<u8>>> {
        let mut m = BTreeMap::new();
        for a in e.attrs() {
            let ty = schema.attr(a.ty);
            let name = (ty.is_operational(), format!("{}{}", ty.name(), a.options));
            let secret = schema.is_subtype(a.ty, shared.known.user_password);
            let vals = a
                .values()
                .map(|v| {
                    if secret {
                        REDACTED.to_vec()
                    } else {
                        v.to_vec()
                    }
                })
                .collect();
            m.insert(name, vals);
        }
        m
    };
    match (&applied.before, &applied.after) {
        (None, Some(a)) => {
            let attrs = described(a)
                .into_iter()
                .flat_map(|((_, n), vs)| vs.into_iter().map(move |v| (n.clone(), v)))
                .collect();
            Some((a.dn().to_string(), ldif::ChangeRecord::Add(attrs)))
        }
        (Some(b), None) => Some((b.dn().to_string(), ldif::ChangeRecord::Delete)),
        (Some(b), Some(a)) if b.ndn_str() == a.ndn_str() => {
            let (old, new) = (described(b), described(a));
            let names: std::collections::BTreeSet<&(bool, String)> =
                old.keys().chain(new.keys()).collect();
            let mut mods = Vec::new();
            for name in names {
                let (op, values) = match (old.get(name), new.get(name)) {
                    (Some(_), None) => (ldif::ModOp::Delete, Vec::new()),
                    (None, Some(v)) => (ldif::ModOp::Add, v.clone()),
                    (Some(o), Some(v)) if o != v => (ldif::ModOp::Replace, v.clone()),
                    _ => continue,
                };
                mods.push(ldif::Mod {
                    op,
                    attr: name.1.clone(),
                    values,
                });
            }
            Some((a.dn().to_string(), ldif::ChangeRecord::Modify(mods)))
        }
        _ => None,
    }
}

/// The change record of a modify request.
pub fn modify_change(
    shared: &crate::state::Shared,
    req: &proto::ModifyRequest<'_>,
) -> ldif::ChangeRecord {
    ldif::ChangeRecord::Modify(
        req.changes
            .iter()
            .map(|c| ldif::Mod {
                op: match c.op {
                    proto::ModOp::Add => ldif::ModOp::Add,
                    proto::ModOp::Delete => ldif::ModOp::Delete,
                    proto::ModOp::Replace => ldif::ModOp::Replace,
                    proto::ModOp::Increment => ldif::ModOp::Increment,
                },
                attr: String::from_utf8_lossy(&c.attr.name).into_owned(),
                values: values(shared, &c.attr.name, &c.attr.values),
            })
            .collect(),
    )
}

/// The change record of a modify DN request.
pub fn modrdn_change(req: &proto::ModifyDnRequest<'_>) -> ldif::ChangeRecord {
    ldif::ChangeRecord::ModRdn {
        new_rdn: String::from_utf8_lossy(&req.new_rdn).into_owned(),
        delete_old_rdn: req.delete_old_rdn,
        new_superior: req
            .new_superior
            .as_ref()
            .map(|s| String::from_utf8_lossy(s).into_owned()),
    }
}

/// The change record of a Password Modify: the new value itself is never logged.
pub fn password_change() -> ldif::ChangeRecord {
    ldif::ChangeRecord::Modify(vec![ldif::Mod {
        op: ldif::ModOp::Replace,
        attr: "userPassword".into(),
        values: vec![REDACTED.to_vec()],
    }])
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
    fn audit_record_is_ldif_with_a_comment() {
        let r = audit_record(
            7,
            "127.0.0.1:5000".parse().expect("addr"),
            "cn=admin,dc=example,dc=com",
            "uid=a,dc=example,dc=com",
            &ldif::ChangeRecord::Delete,
        );
        let s = String::from_utf8(r).expect("utf-8");
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("# 20"), "{s}");
        assert!(
            lines[0].ends_with(r#"conn=7 client=127.0.0.1:5000 by="cn=admin,dc=example,dc=com""#),
            "{s}"
        );
        assert_eq!(
            &lines[1..],
            ["dn: uid=a,dc=example,dc=com", "changetype: delete", ""],
            "a record ends with an empty line"
        );
    }
}
