//! Change sequence numbers (entryCSN) in OpenLDAP's form, `YYYYmmddHHMMSS.uuuuuuZ#cccccc#sss#mmmmmm`:
//! the commit time to the microsecond, a counter (hex) that orders changes within one
//! microsecond, the server id (`server_id`, hex) and a modifier number (always 0). Replication
//! compares CSNs as strings, so every CSN a server issues must sort after the previous one,
//! even if the clock steps back: the clock never goes below the last CSN's time.
//!
//! Also the calendar forms of a time the server writes (GeneralizedTime stamps, log times).

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub struct Clock {
    server_id: u16,
    last: Mutex<Last>,
}

/// The last CSN issued: its time in microseconds since the epoch, its counter, and its
/// `YYYYmmddHHMMSS` (the writer issues thousands a second: the calendar is worked out once a
/// second).
#[derive(Default)]
struct Last {
    micros: u64,
    count: u32,
    second: u64,
    civil: String,
}

impl Clock {
    pub fn new(server_id: u16) -> Clock {
        Clock {
            server_id,
            last: Mutex::new(Last::default()),
        }
    }

    /// The next CSN, at `now` or just after the previous one.
    pub fn next(&self, now: SystemTime) -> String {
        self.stamps(now).0
    }

    /// The next CSN (as `next`) and `now` as a GeneralizedTime (as `generalized_time`): the
    /// stamps of a change. Written digit by digit, with the calendar of the current second
    /// worked out once: the writer stamps every change it applies.
    pub fn stamps(&self, now: SystemTime) -> (String, String) {
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let micros = u64::try_from(since.as_micros()).unwrap_or(u64::MAX);
        // The state is two numbers and a string, always left whole: usable after a panic.
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if micros > last.micros {
            last.micros = micros;
            last.count = 0;
        } else {
            last.count = last.count.saturating_add(1);
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
