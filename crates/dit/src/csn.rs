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
        let micros = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
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
        format!(
            "{}.{:06}Z#{:06x}#{:03x}#000000",
            last.civil,
            last.micros % 1_000_000,
            last.count,
            self.server_id
        )
    }
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
    }
}
