//! Failed-bind rate limiting: after too many failed simple binds for one DN, or from one client
//! address, within a window, further binds for it fail for a while without the password being
//! checked at all.
//!
//! The answer while locked is invalidCredentials, the same as for a wrong password, and a DN
//! that does not exist is counted and locked exactly like one that does, so the lockout never
//! tells a client whether a DN exists. A successful bind clears its DN's count (not its
//! address's: one valid account must not reset the budget for guessing others).
//!
//! Memory is bounded: each table keeps at most `MAX_TRACKED` keys; when full, expired records
//! go first, then the oldest.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Keys (DNs or addresses) each table tracks at most.
pub const MAX_TRACKED: usize = 100_000;

/// When binds are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockoutConfig {
    /// Failed binds for one DN within `window` that lock it (0 = never).
    pub failures_per_dn: u32,
    /// Failed binds from one address within `window` that lock it (0 = never).
    pub failures_per_ip: u32,
    /// Both the window failures are counted in and how long a lock lasts.
    pub window: Duration,
}

impl Default for LockoutConfig {
    fn default() -> Self {
        LockoutConfig {
            failures_per_dn: 5,
            failures_per_ip: 50,
            window: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    since: Instant,
    locked_until: Option<Instant>,
}

struct Table<K> {
    limit: u32,
    map: Mutex<HashMap<K, Record>>,
}

impl<K: Eq + Hash + Clone + std::fmt::Display> Table<K> {
    fn new(limit: u32) -> Self {
        Table {
            limit,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn locked(&self, k: &K, now: Instant) -> bool {
        if self.limit == 0 {
            return false;
        }
        let Ok(map) = self.map.lock() else {
            return false;
        };
        map.get(k)
            .and_then(|r| r.locked_until)
            .is_some_and(|t| t > now)
    }

    /// Counts a failure; true when it locks the key.
    fn fail(&self, k: &K, now: Instant, window: Duration) -> bool {
        if self.limit == 0 {
            return false;
        }
        let Ok(mut map) = self.map.lock() else {
            return false;
        };
        if !map.contains_key(k) && map.len() >= MAX_TRACKED {
            let expired = |r: &Record| {
                now.duration_since(r.since) > window && r.locked_until.is_none_or(|t| t <= now)
            };
            map.retain(|_, r| !expired(r));
            if map.len() >= MAX_TRACKED {
                if let Some(oldest) = map
                    .iter()
                    .min_by_key(|(_, r)| r.since)
                    .map(|(k, _)| k.clone())
                {
                    map.remove(&oldest);
                }
            }
        }
        let r = map.entry(k.clone()).or_insert(Record {
            failures: 0,
            since: now,
            locked_until: None,
        });
        if now.duration_since(r.since) > window && r.locked_until.is_none_or(|t| t <= now) {
            *r = Record {
                failures: 0,
                since: now,
                locked_until: None,
            };
        }
        r.failures += 1;
        if r.failures >= self.limit && r.locked_until.is_none_or(|t| t <= now) {
            r.locked_until = Some(now + window);
            return true;
        }
        false
    }

    fn clear(&self, k: &K) {
        if let Ok(mut map) = self.map.lock() {
            map.remove(k);
        }
    }
}

/// The failed-bind counters of a server.
pub struct Lockout {
    window: Duration,
    dns: Table<String>,
    ips: Table<IpAddr>,
}

impl Lockout {
    pub fn new(c: LockoutConfig) -> Lockout {
        Lockout {
            window: c.window,
            dns: Table::new(c.failures_per_dn),
            ips: Table::new(c.failures_per_ip),
        }
    }

    /// Whether a bind for normalized DN `ndn` from `ip` must be refused now.
    pub fn locked(&self, ndn: &str, ip: IpAddr) -> bool {
        let now = Instant::now();
        self.dns.locked(&ndn.to_string(), now) || self.ips.locked(&ip, now)
    }

    /// Records a failed bind.
    pub fn failed(&self, ndn: &str, ip: IpAddr) {
        let now = Instant::now();
        let secs = self.window.as_secs();
        if self.dns.fail(&ndn.to_string(), now, self.window) {
            tracing::warn!(dn = ndn, client = %ip, "too many failed binds for this DN: binds for it refused for {secs} s");
        }
        if self.ips.fail(&ip, now, self.window) {
            tracing::warn!(client = %ip, "too many failed binds from this address: its binds refused for {secs} s");
        }
    }

    /// Records a successful bind: the DN's count starts over.
    pub fn succeeded(&self, ndn: &str) {
        self.dns.clear(&ndn.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn locks_after_limit_and_unlocks_after_window() {
        let l = Lockout::new(LockoutConfig {
            failures_per_dn: 3,
            failures_per_ip: 0,
            window: Duration::from_millis(200),
        });
        for _ in 0..2 {
            l.failed("uid=a", IP);
        }
        assert!(!l.locked("uid=a", IP));
        l.failed("uid=a", IP);
        assert!(l.locked("uid=a", IP));
        assert!(!l.locked("uid=b", IP), "other DNs are not affected");
        std::thread::sleep(Duration::from_millis(250));
        assert!(!l.locked("uid=a", IP));
        l.failed("uid=a", IP);
        assert!(!l.locked("uid=a", IP), "a new window starts");
    }

    #[test]
    fn success_clears_the_dn_but_not_the_address() {
        let l = Lockout::new(LockoutConfig {
            failures_per_dn: 2,
            failures_per_ip: 3,
            window: Duration::from_secs(60),
        });
        l.failed("uid=a", IP);
        l.succeeded("uid=a");
        l.failed("uid=a", IP);
        assert!(!l.locked("uid=a", IP));
        l.failed("uid=b", IP);
        assert!(
            l.locked("uid=c", IP),
            "three failures from the address lock it"
        );
    }

    #[test]
    fn tables_stay_bounded() {
        let t: Table<u32> = Table::new(5);
        let now = Instant::now();
        for k in 0..(MAX_TRACKED as u32 + 10) {
            t.fail(&k, now, Duration::from_secs(60));
        }
        assert!(t.map.lock().map(|m| m.len()).unwrap_or(0) <= MAX_TRACKED);
    }
}
