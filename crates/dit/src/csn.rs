//! Change sequence numbers (entryCSN) in OpenLDAP's form, `YYYYmmddHHMMSS.uuuuuuZ#cccccc#sss#mmmmmm`:
//! the commit time to the microsecond, a counter (hex) that orders changes within one
//! microsecond, the server id (`server_id`, hex) and a modifier number (always 0). Replication
//! compares CSNs as strings, so every CSN a server issues must sort after every CSN it holds:
//!
//! - the clock never goes below the last CSN's time, even if the system clock steps back (the
//!   counter goes on; when it would outgrow its six digits, the time moves on a microsecond);
//! - at start it is seeded with the newest CSN stored (`Clock::seed` with `newest_stored`, by
//!   `Dit::new`; worked out on a thread while the server starts, waited for by the first CSN
//!   issued): a server restarted with its clock behind (a bad NTP step, a restored VM)
//!   continues after the changes it holds instead of stamping older ones, which replication
//!   would drop as already seen;
//! - a replicated change applied here, and a provider's cookie kept here, move it to at least
//!   their CSNs (a Lamport clock, `Clock::follow`), so a change made here after it sorts after
//!   it, whatever the two servers' clocks say; a CSN far ahead of this server's clock is
//!   logged (docs/replication.md, "CSNs and clocks").
//!
//! Also the calendar forms of a time the server writes (GeneralizedTime stamps, log times).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The CSNs of one server (`Dit::csn`): issued by the writer's job, one after the other.
pub struct Clock {
    server_id: u16,
    last: Mutex<Last>,
    /// The seed being worked out (`seed`): waited for and applied by the first CSN issued.
    seed: Mutex<Option<Pending>>,
    /// No seed is pending (the fast path of every CSN issued).
    seeded: AtomicBool,
}

/// Finds the CSN a clock is seeded with.
type Find = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// A seed being worked out: the thread doing it (none if it could not be started), and the
/// work, to be done again where it is needed if the thread failed.
struct Pending {
    thread: Option<JoinHandle<Option<String>>>,
    find: Find,
}

/// The largest counter a CSN's six hex digits hold.
const MAX_COUNT: u32 = 0xff_ffff;

/// How far ahead of this server's clock a replicated CSN may be before the log says so
/// (`Clock::follow`): clocks kept in step by NTP are milliseconds apart.
pub const FAR_AHEAD: Duration = Duration::from_secs(10);

/// At most one warning about a clock behind another server's in this long.
const WARN_EVERY: Duration = Duration::from_secs(600);

/// The newest CSN issued or observed: its time in microseconds since the epoch, its counter,
/// and its `YYYYmmddHHMMSS` (the writer issues thousands a second: the calendar is worked out
/// once a second); and the last CSN issued.
#[derive(Default)]
struct Last {
    micros: u64,
    count: u32,
    second: u64,
    civil: String,
    issued: String,
    /// When `follow` last warned.
    warned: Option<std::time::Instant>,
}

impl Clock {
    pub fn new(server_id: u16) -> Clock {
        Clock {
            server_id,
            last: Mutex::new(Last::default()),
            seed: Mutex::new(None),
            seeded: AtomicBool::new(true),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Last> {
        // The state is numbers and strings, always left whole: usable after a panic.
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Seeds the clock with the CSN `find` returns (at start: the newest one stored,
    /// `newest_stored`), as `observe` does. `find` runs on a thread of its own, so that a start
    /// does not wait for its pass over the entries; the first CSN issued waits for it instead
    /// (the first change, not the listeners nor the reads before it).
    pub fn seed(&self, find: impl Fn() -> Option<String> + Send + Sync + 'static) {
        let find: Find = Arc::new(find);
        let work = find.clone();
        let thread = std::thread::Builder::new()
            .name("linden-csn-seed".into())
            .spawn(move || work())
            .ok();
        let mut pending = self.seed.lock().unwrap_or_else(|p| p.into_inner());
        *pending = Some(Pending { thread, find });
        self.seeded.store(false, Ordering::Release);
    }

    /// Waits for the seed being worked out, if any, and applies it. Held under the seed's
    /// lock, so that no CSN is issued before it is applied.
    fn settle(&self) {
        if self.seeded.load(Ordering::Acquire) {
            return;
        }
        let mut pending = self.seed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = pending.take() {
            let newest = match p.thread.map(JoinHandle::join) {
                Some(Ok(newest)) => newest,
                // No thread could be started, or it failed: the work is done here.
                _ => (p.find)(),
            };
            if let Some(n) = newest {
                self.observe(&n);
            }
        }
        self.seeded.store(true, Ordering::Release);
    }

    /// The next CSN, at `now` or just after the newest one issued or observed.
    pub fn next(&self, now: SystemTime) -> String {
        self.stamps(now).0
    }

    /// The next CSN (as `next`) and `now` as a GeneralizedTime (as `generalized_time`): the
    /// stamps of a change. Written digit by digit, with the calendar of the current second
    /// worked out once: the writer stamps every change it applies.
    pub fn stamps(&self, now: SystemTime) -> (String, String) {
        self.settle();
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let micros = u64::try_from(since.as_micros()).unwrap_or(u64::MAX);
        let mut last = self.lock();
        if micros > last.micros {
            last.micros = micros;
            last.count = 0;
        } else if last.count < MAX_COUNT {
            last.count += 1;
        } else {
            // Six hex digits of counter used up in one microsecond (a clock far behind): the
            // next microsecond, so that the CSN keeps its width and its order.
            last.micros = last.micros.saturating_add(1);
            last.count = 0;
        }
        let second = last.micros / 1_000_000;
        if second != last.second || last.civil.is_empty() {
            last.second = second;
            last.civil = civil(second);
        }
        let mut csn = String::with_capacity(40);
        csn.push_str(&last.civil);
        csn.push('.');
        push_digits(&mut csn, last.micros % 1_000_000, 10, 6);
        csn.push_str("Z#");
        push_digits(&mut csn, u64::from(last.count), 16, 6);
        csn.push('#');
        push_digits(&mut csn, u64::from(self.server_id), 16, 3);
        csn.push_str("#000000");
        last.issued.clear();
        last.issued.push_str(&csn);
        // The CSN's second is `now`'s unless the clock went back.
        let time = if since.as_secs() == last.second {
            let mut t = String::with_capacity(15);
            t.push_str(&last.civil);
            t.push('Z');
            t
        } else {
            generalized_time(now)
        };
        (csn, time)
    }

    /// Moves the clock to at least `csn` — a CSN stored here, or one a replicated change
    /// brought — so that every CSN issued from now on sorts after it (a Lamport clock): its
    /// time becomes the clock's when it is ahead, and its counter is passed. A CSN this clock
    /// cannot read changes nothing (false).
    pub fn observe(&self, csn: &str) -> bool {
        let Some((micros, count)) = parse(csn) else {
            return false;
        };
        let mut last = self.lock();
        if (micros, count) > (last.micros, last.count) {
            last.micros = micros;
            last.count = count;
        }
        true
    }

    /// `observe` for a CSN another server stamped (a replicated change, a provider's cookie),
    /// at `now`: when it is more than `FAR_AHEAD` ahead of this server's clock, the log says so
    /// (at most every ten minutes), since every CSN issued here now follows it.
    pub fn follow(&self, csn: &str, now: SystemTime) {
        if !self.observe(csn) {
            return;
        }
        let ahead = self.ahead_of(now);
        if ahead <= FAR_AHEAD {
            return;
        }
        let mut last = self.lock();
        if last.warned.is_some_and(|w| w.elapsed() < WARN_EVERY) {
            return;
        }
        last.warned = Some(std::time::Instant::now());
        drop(last);
        tracing::warn!(
            "a replicated change (CSN {csn}) is {:.0} s ahead of this server's clock; this server's CSNs follow it until the clock catches up: check the clocks (NTP) of the servers that replicate with this one",
            ahead.as_secs_f64()
        );
    }

    /// How far the clock (its newest CSN, issued or observed) is ahead of `now`: zero when
    /// the system clock is where it should be.
    pub fn ahead_of(&self, now: SystemTime) -> Duration {
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let now = u64::try_from(since.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(self.lock().micros.saturating_sub(now))
    }

    /// The last CSN this clock issued (none since start: `None`). Every entryCSN the server
    /// stamped is at most this one.
    pub fn last_issued(&self) -> Option<String> {
        let last = self.lock();
        (!last.issued.is_empty()).then(|| last.issued.clone())
    }
}

/// The time (microseconds since the epoch) and counter of a CSN in OpenLDAP's form, or in the
/// older one without microseconds (`YYYYmmddHHMMSSZ#…`); `None` when it is neither.
pub fn parse(csn: &str) -> Option<(u64, u32)> {
    let mut parts = csn.split('#');
    let time = parts.next()?;
    let count = parts.next()?;
    let secs = u64::try_from(crate::ppolicy::parse_time(time.as_bytes())?).ok()?;
    let fraction = match time.split_once('.') {
        Some((_, f)) => {
            let digits = f.trim_end_matches('Z');
            // Microseconds: the first six digits, right-padded ("5" is 500000).
            let mut us = 0u64;
            for i in 0..6 {
                let d = digits
                    .as_bytes()
                    .get(i)
                    .and_then(|b| char::from(*b).to_digit(10))
                    .map_or(0, u64::from);
                us = us * 10 + d;
            }
            us
        }
        None => 0,
    };
    let count = u32::from_str_radix(count, 16).ok()?.min(MAX_COUNT);
    Some((secs.checked_mul(1_000_000)?.checked_add(fraction)?, count))
}

/// How far the time of `csn` is ahead of `now` (zero when it is not, or is no CSN).
pub fn ahead_of(csn: &str, now: SystemTime) -> Duration {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let now = u64::try_from(since.as_micros()).unwrap_or(u64::MAX);
    parse(csn).map_or(Duration::ZERO, |(t, _)| {
        Duration::from_micros(t.saturating_sub(now))
    })
}

/// Whether CSN `a` is newer than `b`: by string, as replication compares them, when both are
/// in the usual form (one length, one layout); by time and counter otherwise.
fn newer(a: &str, b: &str) -> bool {
    let usual = |c: &str| c.len() == 40 && c.as_bytes().get(14) == Some(&b'.');
    if usual(a) && usual(b) {
        return a > b;
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x > y,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Keeps in `best` the newer of it and the CSN `raw` (unreadable values are passed over).
fn keep_newest(best: &mut Option<String>, raw: &[u8]) {
    let Ok(c) = std::str::from_utf8(raw) else {
        return;
    };
    match best {
        // Most entries share their CSN with the one before (an import stamps one CSN).
        Some(b) if b.as_str() == c || !newer(c, b) => {}
        _ if parse(c).is_none() => {}
        _ => *best = Some(c.to_owned()),
    }
}

/// Entries below which `newest_stored` reads them on one thread.
const PARALLEL_FROM: usize = 100_000;

/// The newest CSN version `v` holds (every server id's): the entryCSN of every entry (type
/// `entry_csn`), and the contextCSN values (type `context_csn`, when the schema has it) of the
/// entries `suffixes` name, which may be newer (a delete's CSN, a provider's cookie). One pass
/// over the entries, split by entry id over the cores: what the clock is seeded with at start
/// (about 0.1 s for a million entries on two cores).
pub fn newest_stored(
    v: &store::Version,
    entry_csn: schema::AttrId,
    context_csn: Option<schema::AttrId>,
    suffixes: &[schema::NormDn],
) -> Option<String> {
    let threads = if v.len() < PARALLEL_FROM {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
    };
    let mut best = newest_entry_csn(v, entry_csn, threads);
    if let Some(ty) = context_csn {
        for s in suffixes {
            if let Some(a) = v.lookup(s).and_then(|e| e.attr(ty)) {
                for c in a.values() {
                    keep_newest(&mut best, c);
                }
            }
        }
    }
    best
}

/// The newest entryCSN (type `entry_csn`) of the entries of `v`, read on `threads` threads,
/// each taking a range of entry ids.
fn newest_entry_csn(
    v: &store::Version,
    entry_csn: schema::AttrId,
    threads: usize,
) -> Option<String> {
    let of = |ids: std::ops::Range<u32>| {
        let mut best = None;
        for id in ids {
            if let Some(c) = v.get(id).and_then(|e| e.attr(entry_csn)?.first()) {
                keep_newest(&mut best, c);
            }
        }
        best
    };
    let end = v.next_id();
    if threads < 2 {
        return of(0..end);
    }
    let step = end
        .div_ceil(u32::try_from(threads).unwrap_or(u32::MAX))
        .max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = std::iter::successors(Some(0u32), |from| {
            from.checked_add(step).filter(|f| *f < end)
        })
        .map(|from| s.spawn(move || of(from..end.min(from.saturating_add(step)))))
        .collect();
        let mut best = None;
        for p in parts {
            // A part only reads: it cannot panic; if one did, its range would go unread, so
            // the whole is read again here.
            if let Some(c) = p.join().unwrap_or_else(|_| of(0..end)) {
                keep_newest(&mut best, c.as_bytes());
            }
        }
        best
    })
}

/// Appends `v` in `base` (10 or 16, lower case), zero-padded to at least `width` digits.
fn push_digits(out: &mut String, mut v: u64, base: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut n = 0;
    while v > 0 || n < width {
        digits[n] = b"0123456789abcdef"[(v % base) as usize];
        v /= base;
        n += 1;
    }
    out.extend(digits[..n].iter().rev().map(|&d| char::from(d)));
}

/// `YYYYmmddHHMMSS` of a second since the epoch, in UTC.
fn civil(second: u64) -> String {
    civil_time(UNIX_EPOCH + Duration::from_secs(second), "", "", "")
}

/// A UTC time to the second as `YYYY{d}MM{d}DD{t}HH{c}MM{c}SS`: GeneralizedTime uses no
/// separators, the logs ISO 8601's `-`, `T` and `:`.
pub fn civil_time(t: SystemTime, d: &str, tsep: &str, c: &str) -> String {
    let dt = ::time::OffsetDateTime::from(t);
    format!(
        "{:04}{d}{:02}{d}{:02}{tsep}{:02}{c}{:02}{c}{:02}",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    )
}

/// RFC 4517 GeneralizedTime in UTC, `YYYYMMDDHHMMSSZ`.
pub fn generalized_time(t: SystemTime) -> String {
    civil_time(t, "", "", "") + "Z"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openldap_form_and_strictly_increasing() {
        let c = Clock::new(0x2a);
        let t = UNIX_EPOCH + Duration::from_micros(1_764_012_345_678_901);
        let a = c.next(t);
        assert_eq!(a, "20251124192545.678901Z#000000#02a#000000");
        // The same microsecond, then a clock that went back: still after the last one.
        let b = c.next(t);
        assert_eq!(b, "20251124192545.678901Z#000001#02a#000000");
        let d = c.next(t - Duration::from_secs(5));
        assert!(d > b, "{d} > {b}");
        let e = c.next(t + Duration::from_micros(1));
        assert_eq!(e, "20251124192545.678902Z#000000#02a#000000");
        // Numbers wider than their field keep every digit, as `format!`'s widths do.
        let mut s = String::new();
        push_digits(&mut s, 0x1000000, 16, 6);
        push_digits(&mut s, 0, 10, 3);
        push_digits(&mut s, 1234567, 10, 6);
        assert_eq!(s, "10000000001234567");
    }

    #[test]
    fn a_csn_observed_ahead_of_the_clock_is_passed() {
        let c = Clock::new(1);
        let t = UNIX_EPOCH + Duration::from_micros(1_764_012_345_678_901);
        let mine = c.next(t);
        // A replicated change stamped a day ahead by server 2, counter 5 (logged, as far
        // ahead).
        let theirs = "20251125192545.678901Z#000005#002#000000";
        c.follow(theirs, t);
        assert_eq!(c.ahead_of(t), Duration::from_secs(86_400));
        let next = c.next(t + Duration::from_secs(1));
        assert_eq!(next, "20251125192545.678901Z#000006#001#000000");
        assert!(next.as_str() > theirs && next > mine);
        // An older CSN moves nothing; one the clock cannot read neither.
        assert!(c.observe("20200101000000.000000Z#000000#003#000000"));
        assert!(!c.observe("yesterday"));
        assert_eq!(
            c.next(t),
            "20251125192545.678901Z#000007#001#000000",
            "still after the newest seen"
        );
        assert_eq!(
            c.last_issued().as_deref(),
            Some("20251125192545.678901Z#000007#001#000000")
        );
        // Once the system clock is past it, CSNs are the clock's again.
        let later = t + Duration::from_secs(86_401);
        assert_eq!(c.ahead_of(later), Duration::ZERO);
        assert_eq!(c.next(later), "20251125192546.678901Z#000000#001#000000");
    }

    #[test]
    fn the_first_csn_waits_for_the_seed() {
        let c = Clock::new(1);
        let t = UNIX_EPOCH + Duration::from_micros(1_764_012_345_678_901);
        let stored = "20251125192545.678901Z#000005#002#000000";
        // Worked out on its own thread; the next CSN is after it however late it comes.
        c.seed(move || Some(stored.to_string()));
        assert_eq!(c.next(t), "20251125192545.678901Z#000006#001#000000");
        assert_eq!(ahead_of(stored, t), Duration::from_secs(86_400));
        assert_eq!(
            ahead_of(stored, t + Duration::from_secs(86_401)),
            Duration::ZERO
        );
        // Nothing stored: the clock's own time.
        let c = Clock::new(1);
        c.seed(|| None);
        assert_eq!(c.next(t), "20251124192545.678901Z#000000#001#000000");
    }

    #[test]
    fn a_used_up_counter_moves_the_time_on_a_microsecond() {
        let c = Clock::new(1);
        let t = UNIX_EPOCH + Duration::from_micros(1_764_012_345_678_901);
        assert!(c.observe("20251124192545.678901Z#fffffe#002#000000"));
        let a = c.next(t - Duration::from_secs(3600));
        let b = c.next(t - Duration::from_secs(3600));
        assert_eq!(a, "20251124192545.678901Z#ffffff#001#000000");
        assert_eq!(b, "20251124192545.678902Z#000000#001#000000");
        assert!(b > a);
    }

    #[test]
    fn csns_are_read_in_both_forms_and_compared_as_replication_does() {
        assert_eq!(
            parse("20251124192545.678901Z#00000a#001#000000"),
            Some((1_764_012_345_678_901, 10))
        );
        // OpenLDAP 2.3's form, without microseconds; a short fraction is right-padded.
        assert_eq!(
            parse("20251124192545Z#000001#00#000000"),
            Some((1_764_012_345_000_000, 1))
        );
        assert_eq!(
            parse("20251124192545.5Z#000000#001#000000"),
            Some((1_764_012_345_500_000, 0))
        );
        assert_eq!(parse("20251124192545.678901Z"), None);
        assert_eq!(parse("not a csn#0#0#0"), None);
        let a = "20251124192545.678901Z#000000#001#000000";
        let b = "20251124192545.678901Z#000000#002#000000";
        assert!(newer(b, a) && !newer(a, b) && !newer(a, a));
        assert!(newer(a, "20251124192545Z#000009#001#000000"));
        assert!(newer("20251124192546Z#000000#001#000000", a));
    }

    #[test]
    fn the_newest_entry_csn_is_found_on_any_number_of_threads() {
        use std::sync::Arc;
        let schema = Arc::new(schema::Schema::builtin());
        let ty = schema.attr_by_name("entryCSN").unwrap();
        let cn = schema.attr_by_name("cn").unwrap();
        let store = store::Store::new(schema.clone(), &[]);
        let csn = |i: u32| format!("20251124192545.{:06}Z#000000#001#000000", (i * 7919) % 1000);
        let s2 = schema.clone();
        store
            .write_blocking(move |txn: &mut store::Txn| {
                let mut ids = Vec::new();
                for i in 0..1000u32 {
                    let dn = format!("cn=e{i}");
                    let ndn = schema::Dn::parse(&dn).unwrap().normalize(&s2).unwrap();
                    let attrs = vec![
                        store::Attr::new(&s2, cn, "", vec![format!("e{i}").into_bytes().into()])
                            .unwrap(),
                        store::Attr::new(&s2, ty, "", vec![csn(i).into_bytes().into()]).unwrap(),
                    ];
                    ids.push((i, txn.add(dn, ndn, attrs, true)?));
                }
                // Holes in the ids, as deletes leave.
                for (i, id) in ids.into_iter().step_by(3) {
                    if (i * 7919) % 1000 != 999 {
                        txn.delete(id)?;
                    }
                }
                Ok::<_, store::StoreError>(())
            })
            .unwrap()
            .unwrap();
        let v = store.read();
        let want = "20251124192545.000999Z#000000#001#000000";
        for threads in [1, 2, 3, 7, 64] {
            assert_eq!(
                newest_entry_csn(&v, ty, threads).as_deref(),
                Some(want),
                "{threads} threads"
            );
        }
        assert_eq!(newest_stored(&v, ty, None, &[]).as_deref(), Some(want));
    }

    #[test]
    fn stamps_give_the_csn_and_the_time_of_now() {
        let c = Clock::new(1);
        let t = UNIX_EPOCH + Duration::from_micros(1_764_012_345_000_123);
        assert_eq!(
            c.stamps(t),
            (
                "20251124192545.000123Z#000000#001#000000".to_string(),
                "20251124192545Z".to_string()
            )
        );
        // The next second, then a clock that went back: the CSN stays after the last one,
        // the time is the clock's.
        let later = t + Duration::from_secs(1);
        assert_eq!(c.stamps(later).1, "20251124192546Z");
        let (csn, time) = c.stamps(t - Duration::from_secs(60));
        assert_eq!(csn, "20251124192546.000123Z#000001#001#000000");
        assert_eq!(time, generalized_time(t - Duration::from_secs(60)));
        assert_eq!(time, "20251124192445Z");
    }
}
