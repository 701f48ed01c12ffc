//! Failed-bind throttling: after too many failed simple binds for one DN, or from one client
//! address, within a window, every further *failed* bind for it is answered late — 100 ms,
//! doubling with each failure, up to `max_delay` — while a bind with the right password is
//! answered at once. A client guessing passwords is slowed to a crawl on each connection, and
//! nobody is locked out by someone else's failures: a login host whose users mistype, or a
//! stranger failing binds to a shared service account, delays only the failures.
//!
//! This is deliberately not a lockout. A lock that refuses even the right password hands a
//! denial of service to anyone who can reach the port (five wrong passwords for the service
//! account of every login host). A hard per-account lock belongs to the password policy, which
//! an administrator turns on per account (pwdLockout), as in OpenLDAP.
//!
//! The answer is invalidCredentials for a wrong password and for a DN that does not exist,
//! after the same delay, so throttling never tells a client whether a DN exists. A successful
//! bind clears its DN's count (not its address's: one valid account must not reset the budget
//! for guessing others). Addresses in `trusted` (a load balancer, the login hosts' own
//! network) are never throttled by address; their DNs still are.
//!
//! Memory is bounded: each table keeps at most `MAX_TRACKED` keys; when full, expired records
//! go first, then the oldest.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A trusted address or network (`bind_trusted_addresses`).
pub use ipnet::IpNet as Network;

/// Keys (DNs or addresses) each table tracks at most.
pub const MAX_TRACKED: usize = 100_000;

/// The delay of the first throttled failure; each further one doubles it.
pub const FIRST_DELAY: Duration = Duration::from_millis(100);

/// When failed binds are answered late.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockoutConfig {
    /// Failed binds for one DN within `window` after which its failures are delayed (0 = never).
    pub failures_per_dn: u32,
    /// Failed binds from one address within `window` after which its failures are delayed
    /// (0 = never).
    pub failures_per_ip: u32,
    /// The window failures are counted in.
    pub window: Duration,
    /// The longest a failed bind is held back.
    pub max_delay: Duration,
    /// Addresses never throttled by address (`bind_trusted_addresses`).
    pub trusted: Vec<ipnet::IpNet>,
}

impl Default for LockoutConfig {
    fn default() -> Self {
        LockoutConfig {
            failures_per_dn: 5,
            failures_per_ip: 50,
            window: Duration::from_secs(60),
            max_delay: Duration::from_secs(2),
            trusted: Vec::new(),
        }
    }
}

/// A trusted address as configured: an address (`10.1.2.3`, `::1`) or a network in CIDR form
/// (`10.0.0.0/8`, `2001:db8::/32`).
pub fn parse_network(s: &str) -> Result<ipnet::IpNet, String> {
    let s = s.trim();
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| {
            format!("invalid address or network '{s}' (expected e.g. 10.0.0.5 or 10.0.0.0/8)")
        })
}

#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    since: Instant,
}

struct Table<K> {
    /// A reload may change it (`bind_failures_per_*`); the counts so far are kept.
    limit: std::sync::atomic::AtomicU32,
    map: Mutex<HashMap<K, Record>>,
}

impl<K: Eq + Hash + Clone + std::fmt::Display> Table<K> {
    fn new(limit: u32) -> Self {
        Table {
            limit: std::sync::atomic::AtomicU32::new(limit),
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a failure; returns how many failures beyond the limit this one is (`None`
    /// below the limit).
    fn fail(&self, k: &K, now: Instant, window: Duration) -> Option<u32> {
        let limit = self.limit.load(std::sync::atomic::Ordering::Relaxed);
        if limit == 0 {
            return None;
        }
        let Ok(mut map) = self.map.lock() else {
            return None;
        };
        if !map.contains_key(k) && map.len() >= MAX_TRACKED {
            map.retain(|_, r| now.duration_since(r.since) <= window);
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
        });
        if now.duration_since(r.since) > window {
            *r = Record {
                failures: 0,
                since: now,
            };
        }
        r.failures = r.failures.saturating_add(1);
        r.failures.checked_sub(limit)
    }

    fn clear<Q: Hash + Eq + ?Sized>(&self, k: &Q)
    where
        K: std::borrow::Borrow<Q>,
    {
        if let Ok(mut map) = self.map.lock() {
            // Every successful bind lands here: nothing to hash while nobody failed.
            if !map.is_empty() {
                map.remove(k);
            }
        }
    }
}

/// The failed-bind counters of a server.
pub struct Lockout {
    /// The window, the longest delay and the trusted networks: replaced by a reload
    /// (`reconfigure`), read on failed binds only.
    settings: Mutex<Settings>,
    dns: Table<String>,
    ips: Table<IpAddr>,
}

struct Settings {
    window: Duration,
    max_delay: Duration,
    trusted: Vec<ipnet::IpNet>,
}

impl Lockout {
    pub fn new(c: LockoutConfig) -> Lockout {
        Lockout {
            settings: Mutex::new(Settings {
                window: c.window,
                max_delay: c.max_delay,
                trusted: c.trusted,
            }),
            dns: Table::new(c.failures_per_dn),
            ips: Table::new(c.failures_per_ip),
        }
    }

    /// Takes new settings (a reload); failures counted so far stay counted.
    pub fn reconfigure(&self, c: LockoutConfig) {
        use std::sync::atomic::Ordering::Relaxed;
        self.dns.limit.store(c.failures_per_dn, Relaxed);
        self.ips.limit.store(c.failures_per_ip, Relaxed);
        *self.settings.lock().unwrap_or_else(|p| p.into_inner()) = Settings {
            window: c.window,
            max_delay: c.max_delay,
            trusted: c.trusted,
        };
    }

    /// Records a failed bind for normalized DN `ndn` from `ip`; returns how long to hold back
    /// its answer (zero below both limits).
    pub fn failed(&self, ndn: &str, ip: IpAddr) -> Duration {
        self.failed_at(ndn, ip, Instant::now())
    }

    fn failed_at(&self, ndn: &str, ip: IpAddr, now: Instant) -> Duration {
        let (window, max_delay, trusted) = {
            let s = self.settings.lock().unwrap_or_else(|p| p.into_inner());
            (
                s.window,
                s.max_delay,
                s.trusted.iter().any(|n| n.contains(&ip)),
            )
        };
        let by_dn = self.dns.fail(&ndn.to_string(), now, window);
        let by_ip = if trusted {
            None
        } else {
            self.ips.fail(&ip, now, window)
        };
        let max = max_delay.as_secs();
        if by_dn == Some(0) {
            tracing::warn!(dn = ndn, client = %ip, "too many failed binds for this DN: its failed binds are answered late (up to {max} s)");
        }
        if by_ip == Some(0) {
            tracing::warn!(client = %ip, "too many failed binds from this address: its failed binds are answered late (up to {max} s)");
        }
        by_dn.max(by_ip).map_or(Duration::ZERO, |excess| {
            FIRST_DELAY
                .saturating_mul(1 << excess.min(16))
                .min(max_delay)
        })
    }

    /// Records a successful bind: the DN's count starts over.
    pub fn succeeded(&self, ndn: &str) {
        self.dns.clear(ndn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 7));

    fn lockout(per_dn: u32, per_ip: u32, trusted: &[&str]) -> Lockout {
        Lockout::new(LockoutConfig {
            failures_per_dn: per_dn,
            failures_per_ip: per_ip,
            window: Duration::from_secs(60),
            max_delay: Duration::from_secs(2),
            trusted: trusted
                .iter()
                .map(|t| parse_network(t).expect("net"))
                .collect(),
        })
    }

    #[test]
    fn failures_beyond_the_limit_are_delayed_more_and_more_up_to_the_cap() {
        let l = lockout(3, 0, &[]);
        let t = Instant::now();
        let delays: Vec<u128> = (0..8)
            .map(|_| l.failed_at("uid=a", IP, t).as_millis())
            .collect();
        assert_eq!(delays, [0, 0, 100, 200, 400, 800, 1600, 2000]);
        assert_eq!(l.failed_at("uid=b", IP, t), Duration::ZERO, "other DNs");
        // A new window starts over.
        let later = t + Duration::from_secs(61);
        assert_eq!(l.failed_at("uid=a", IP, later), Duration::ZERO);
    }

    #[test]
    fn success_clears_the_dn_but_not_the_address() {
        let l = lockout(2, 3, &[]);
        let t = Instant::now();
        l.failed_at("uid=a", IP, t);
        l.succeeded("uid=a");
        assert_eq!(l.failed_at("uid=a", IP, t), Duration::ZERO);
        assert_eq!(
            l.failed_at("uid=b", IP, t),
            FIRST_DELAY,
            "three failures from the address"
        );
        assert_eq!(
            l.failed_at("uid=c", OTHER, t),
            Duration::ZERO,
            "another address"
        );
    }

    #[test]
    fn trusted_addresses_are_not_throttled_by_address() {
        let l = lockout(0, 2, &["127.0.0.0/8", "2001:db8::/32", "192.0.2.9"]);
        assert!(parse_network("10.0.0.0/33").is_err());
        assert!(parse_network("host.example").is_err());
        let t = Instant::now();
        for i in 0..10 {
            assert_eq!(l.failed_at(&format!("uid={i}"), IP, t), Duration::ZERO);
        }
        l.failed_at("uid=x", OTHER, t);
        assert_eq!(l.failed_at("uid=y", OTHER, t), FIRST_DELAY);
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
