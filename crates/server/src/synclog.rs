//! The replication provider's session log: the last `syncprov_sessionlog` changed entries
//! (deletes included), by batch, with the CSNs each batch stamped, and per naming context the
//! *floor*: the contextCSN values below which the log has dropped changes. A cookie at or above
//! the floor for every server id is served from the log (`Provider::plan`).
//!
//! A plain data structure: what goes in is worked out from the change feed by `ops::syncprov`,
//! which also runs the task that fills it. `Shared` holds one, so this module depends on
//! nothing of the server's (the directory it reads its figures from is `dit::Dit`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dit::overlays::syncprov::{context_csns, merge};
use proto::controls::sync::{csn_sid, SyncUuid};
use store::EntryId;
use tokio::sync::watch;

/// One batch of the session log, for one naming context.
pub(crate) struct Record {
    pub seq: u64,
    /// The naming context (index in `Shared::suffixes`).
    pub suffix: usize,
    /// The CSNs this batch stamped in the naming context.
    pub csns: Vec<String>,
    /// The entries it changed (added, modified, renamed, deleted).
    pub changed: Vec<(SyncUuid, EntryId)>,
}

/// The recent changes, bounded by `syncprov_sessionlog` entries.
struct SessionLog {
    /// Per naming context (index in `Shared::suffixes`): changes at or below these CSNs may
    /// have left the log.
    floors: Vec<Vec<String>>,
    records: VecDeque<Record>,
    /// Changed entries held in `records`.
    held: usize,
}

/// The provider's shared state: the session log and how far it has read the feed.
pub(crate) struct Provider {
    log: Mutex<SessionLog>,
    /// The `seq` of the last batch the log has taken in (`u64::MAX`: the feed closed).
    pub seen: watch::Sender<u64>,
    started: AtomicBool,
    /// The first version whose tombstones were checked at start
    /// (`ops::syncprov::tombstone_upkeep`); `u64::MAX` until then. Tombstones of an earlier
    /// version do not answer for a cookie.
    pub tombstones_from: AtomicU64,
    capacity: usize,
}

/// What cn=Monitor and `/metrics` show of the provider (`Provider::figures`).
pub(crate) struct ProviderFigures {
    /// Sync searches served now.
    pub searches: usize,
    /// Changed entries in the session log, and its capacity.
    pub log_held: usize,
    pub log_capacity: usize,
    /// Deleted entries remembered (tombstones, `syncprov_tombstones`).
    pub tombstones: usize,
    /// Per naming context: its DN and contextCSN values (one per server id).
    pub contexts: Vec<(String, Vec<String>)>,
}

/// Whether a change stamped `csn` after the holder of `cookie` last looked.
pub(crate) fn newer_than(cookie: &[String], csn: &str) -> bool {
    let Some(sid) = csn_sid(csn) else {
        return false;
    };
    match cookie.iter().find(|c| csn_sid(c) == Some(sid)) {
        Some(c) => csn > c.as_str(),
        None => true,
    }
}

/// How a cookie is refreshed.
pub(crate) enum Plan {
    /// Nothing changed since the cookie.
    UpToDate,
    /// Entries changed since the cookie, from the session log.
    Changed(Vec<(SyncUuid, EntryId)>),
    /// Everything in scope, in a present phase.
    Full,
    /// The entries changed and deleted after this cookie, found in the version itself (its
    /// entryCSNs and tombstones), for a cookie older than the session log.
    Since(Vec<String>),
}

impl Provider {
    pub(crate) fn new(capacity: usize) -> Arc<Provider> {
        Arc::new(Provider {
            log: Mutex::new(SessionLog {
                floors: Vec::new(),
                records: VecDeque::new(),
                held: 0,
            }),
            seen: watch::Sender::new(0),
            started: AtomicBool::new(false),
            tombstones_from: AtomicU64::new(u64::MAX),
            capacity,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SessionLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The provider's figures now, for the directory `dit` it serves: the sync searches (its
    /// provider-side monitor agreements), the session log, each naming context's contextCSN.
    pub(crate) fn figures(&self, dit: &dit::Dit) -> ProviderFigures {
        let log_held = self.lock().held;
        let v = dit.store.read();
        let ty = v.schema().attr_by_name("contextCSN");
        let contexts = dit
            .suffixes
            .iter()
            .map(|s| match v.lookup(s) {
                Some(e) => (
                    e.dn().to_owned(),
                    ty.map(|t| context_csns(t, e)).unwrap_or_default(),
                ),
                None => (s.norm.clone(), Vec::new()),
            })
            .collect();
        let searches = dit
            .monitor
            .agreements()
            .iter()
            .filter(|a| a.role == dit::monitor::Role::Provider)
            .count();
        ProviderFigures {
            searches,
            log_held,
            log_capacity: self.capacity,
            tombstones: v.tombstones().len(),
            contexts,
        }
    }

    /// True the first time only: whoever gets it starts the task that fills the log.
    pub(crate) fn first_start(&self) -> bool {
        !self.started.swap(true, Ordering::Relaxed)
    }

    /// Empties the log; `floors` (per naming context) are the contextCSN values it starts from.
    pub(crate) fn reset(&self, floors: Vec<Vec<String>>) {
        let mut log = self.lock();
        log.floors = floors;
        log.records.clear();
        log.held = 0;
    }

    /// Takes in the records of one batch, dropping the oldest beyond capacity (their CSNs
    /// raise the floors).
    pub(crate) fn take(&self, records: impl IntoIterator<Item = Record>) {
        let mut log = self.lock();
        for r in records {
            log.held += r.changed.len();
            log.records.push_back(r);
        }
        while log.held > self.capacity {
            let Some(old) = log.records.pop_front() else {
                break;
            };
            log.held -= old.changed.len();
            if let Some(f) = log.floors.get_mut(old.suffix) {
                merge(f, &old.csns);
            }
        }
    }

    /// How to refresh a consumer of naming context `suffix` holding `cookie`, against the
    /// version of sequence `seq` (the log has taken it in). A cookie at or past the provider's
    /// contextCSN may still lack changes: a replicated change counts in contextCSN once its
    /// provider's cookie covers it, so the log's records decide.
    pub(crate) fn plan(&self, suffix: usize, cookie: &[String], seq: u64) -> Plan {
        if cookie.is_empty() {
            return Plan::Full;
        }
        let log = self.lock();
        let floor = log.floors.get(suffix).map(Vec::as_slice).unwrap_or(&[]);
        if floor.iter().any(|f| newer_than(cookie, f)) {
            return Plan::Full;
        }
        // Which entries changed since the cookie (in the order first changed), and where each
        // is now: its latest record, even one the cookie already covers. An entry deleted
        // after the cookie and added back by a change the consumer had seen (multi-provider:
        // its own write, replicated here) is the new entry, not the deleted one.
        let mut now: HashMap<SyncUuid, EntryId> = HashMap::new();
        let mut order = Vec::new();
        let mut changed = HashSet::new();
        for r in &log.records {
            if r.seq > seq || r.suffix != suffix {
                continue;
            }
            let news = r.csns.iter().any(|c| newer_than(cookie, c));
            for (u, id) in &r.changed {
                now.insert(*u, *id);
                if news && changed.insert(*u) {
                    order.push(*u);
                }
            }
        }
        if order.is_empty() {
            return Plan::UpToDate;
        }
        Plan::Changed(
            order
                .into_iter()
                .filter_map(|u| now.get(&u).map(|id| (u, *id)))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_compare_per_server_id() {
        let a1 = "20261125000000.000001Z#000000#001#000000".to_string();
        let a2 = "20261125000000.000002Z#000000#001#000000".to_string();
        let b1 = "20261125000000.000001Z#000000#002#000000".to_string();
        let cookie = vec![a1.clone()];
        assert!(!newer_than(&cookie, &a1));
        assert!(newer_than(&cookie, &a2));
        // A server id the cookie has never seen is always news.
        assert!(newer_than(&cookie, &b1));
        let mut set = vec![a2.clone()];
        merge(&mut set, &[a1, b1.clone()]);
        assert_eq!(set, [a2, b1]);
    }

    #[test]
    fn a_full_log_raises_the_floor_and_old_cookies_get_a_full_refresh() {
        let csn = |n: u32| format!("20261125000000.{n:06}Z#000000#001#000000");
        let p = Provider::new(2);
        p.reset(vec![vec![csn(0)]]);
        for n in 1..=3u32 {
            p.take([Record {
                seq: u64::from(n),
                suffix: 0,
                csns: vec![csn(n)],
                changed: vec![([n as u8; 16], n)],
            }]);
        }
        // Capacity 2: the change stamped csn(1) left the log, so a cookie at csn(0) is too old.
        assert!(matches!(p.plan(0, &[csn(0)], 3), Plan::Full));
        match p.plan(0, &[csn(1)], 3) {
            Plan::Changed(l) => assert_eq!(l.len(), 2),
            _ => panic!("a cookie the log covers is served from it"),
        }
        assert!(matches!(p.plan(0, &[csn(3)], 3), Plan::UpToDate));
    }

    #[test]
    fn an_entry_deleted_then_added_back_by_a_change_the_cookie_covers_is_sent_as_it_is_now() {
        // Multi-provider: this server (sid 1) deleted an entry; then it replicated the entry
        // back from server 2, whose change (csn2) the consumer (server 2) already holds. The
        // consumer must get the entry as it is now (id 7), not a delete of the old one (id 3).
        let csn1 = |n: u32| format!("20261125000000.{n:06}Z#000000#001#000000");
        let csn2 = |n: u32| format!("20261125000000.{n:06}Z#000000#002#000000");
        let p = Provider::new(100);
        p.reset(vec![vec![csn1(0), csn2(0)]]);
        let u = [9u8; 16];
        p.take([Record {
            seq: 1,
            suffix: 0,
            csns: vec![csn1(1)],
            changed: vec![(u, 3)],
        }]);
        p.take([Record {
            seq: 2,
            suffix: 0,
            csns: vec![csn2(2)],
            changed: vec![(u, 7)],
        }]);
        match p.plan(0, &[csn1(0), csn2(2)], 2) {
            Plan::Changed(l) => assert_eq!(l, [(u, 7)]),
            _ => panic!("served from the log"),
        }
        // Against the version before the entry came back, it is the deleted one.
        match p.plan(0, &[csn1(0), csn2(2)], 1) {
            Plan::Changed(l) => assert_eq!(l, [(u, 3)]),
            _ => panic!("served from the log"),
        }
    }
}
