//! Multi-provider under faults (issue 26): two Linden providers replicating both ways, clients
//! writing to both at once — adds, modifies of the same attribute of the same entries
//! (conflicts), deletes, renames, the same DN added on both — through a partition and a kill -9
//! of one provider under writes, then a restart. Every result a server acknowledged is
//! recorded (with the entryUUID and entryCSN the Pre-/Post-Read controls return), and once the
//! servers converge (polled, with a generous deadline; the time is printed) the test checks:
//!
//! - both servers hold the same entries with the same values (DN, attributes, entryUUID,
//!   entryCSN);
//! - every acknowledged add, modify and rename is there, as the client left it;
//! - an entry modified on both servers holds the value of the modify with the later entryCSN,
//!   on both;
//! - the same DN added on both holds the later add (its entryUUID) on both;
//! - **no acknowledged delete is undone**: no entry with a deleted entryUUID is anywhere.
//!
//! The providers run with a small session log and a short persist queue, so that full refreshes
//! (present phases) and consumers cut off for falling behind happen often: the paths that
//! resurrected deletes and left entries on one server. Nothing here waits for a time assumed
//! long enough: the kill waits for the killed server's client to have made a number of writes,
//! and convergence is polled.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::*;
use ldap3::controls::{Control, ControlType, PostRead, PostReadResp, PreRead, PreReadResp};
use ldap3::{LdapConn, Mod};

/// Entries both servers' clients modify (conflicts); never deleted.
const SHARED: usize = 10;
/// Entries both servers' clients modify and delete: whether one survives depends on what the
/// deletes had seen (their Pre-Read entryCSN) against the modifies' entryCSNs.
const CONTESTED: usize = 12;
/// Entries added on the first server at the start and then owned by one client (even: a's,
/// odd: b's), which may modify, rename or delete them: deletes of entries the other server
/// stamped.
const SEEDED: usize = 20;
/// Limits of the test's providers: small, so that refreshes from the session log fall back to
/// full refreshes and persisting consumers are cut off (e-syncRefreshRequired).
const HARSH: &str = "syncprov_sessionlog = 40\nsyncprov_queue = 8\n";
/// The longest the servers may take to converge once the faults are over.
const CONVERGE_DEADLINE: Duration = Duration::from_secs(120);
const CONVERGE_POLLS: u32 = 20_000;

/// A small deterministic generator (xorshift): the same choices on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// An entry one client owns: only it writes it, so its last acknowledged state is what every
/// server must end with.
#[derive(Debug, Clone)]
struct Owned {
    dn: String,
    uuid: String,
    desc: String,
    live: bool,
    /// An operation on it whose outcome is unknown (its server was killed): either state.
    doubt: Option<String>,
}

/// What a client's server acknowledged (or left in doubt) on the shared and contested entries.
#[derive(Debug, Default)]
struct SharedWrites {
    /// Per DN: (entryCSN, value) of each acknowledged modify.
    acked: BTreeMap<String, Vec<(String, String)>>,
    /// Per DN: the values of modifies whose outcome is unknown.
    doubt: BTreeMap<String, Vec<String>>,
    /// Per DN: the entryCSN each acknowledged delete had seen (Pre-Read).
    deleted: BTreeMap<String, Vec<String>>,
    /// DNs of deletes whose outcome is unknown.
    doubt_deleted: HashSet<String>,
}

/// One client, writing to one server.
struct Client {
    tag: &'static str,
    url: String,
    rng: Rng,
    owned: Vec<Owned>,
    next: usize,
    shared: SharedWrites,
    /// Acknowledged deletes: entryUUIDs.
    deleted: Vec<(String, String)>,
    /// Results a server should never have given (a failed write of the client's own entry).
    wrong: Vec<String>,
    /// Set when the connection broke: the client stops.
    broken: bool,
    /// Writes made, for the test to wait on.
    progress: Arc<AtomicUsize>,
}

/// The value of one attribute in a Pre-/Post-Read response.
fn read_attr(r: &ldap3::LdapResult, pre: bool, name: &str) -> Option<String> {
    r.ctrls.iter().find_map(|Control(t, raw)| {
        let attrs = match (t, pre) {
            (Some(ControlType::PostReadResp), false) => raw.parse::<PostReadResp>().attrs,
            (Some(ControlType::PreReadResp), true) => raw.parse::<PreReadResp>().attrs,
            _ => return None,
        };
        attrs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.first().cloned())
    })
}

impl Client {
    fn new(tag: &'static str, url: String, seed: u64) -> Client {
        Client {
            tag,
            url,
            rng: Rng(seed),
            owned: Vec::new(),
            next: 0,
            shared: SharedWrites::default(),
            deleted: Vec::new(),
            wrong: Vec::new(),
            broken: false,
            progress: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Runs `count` random writes against the server at `self.url` (a new connection), then
    /// returns. Stops early when the connection breaks (its server was killed).
    fn run(mut self, phase: &str, count: usize) -> Client {
        self.broken = false;
        let Ok(mut c) = try_admin(&self.url) else {
            self.broken = true;
            return self;
        };
        for i in 0..count {
            if self.broken {
                break;
            }
            let live: Vec<usize> = (0..self.owned.len())
                .filter(|&k| self.owned[k].live && self.owned[k].doubt.is_none())
                .collect();
            let roll = self.rng.below(100);
            let value = format!("{}-{phase}-{i}", self.tag);
            if roll < 22 {
                let dn = format!("uid=shared.{},{PEOPLE}", self.rng.below(SHARED));
                self.modify_shared(&mut c, &dn, &value);
            } else if roll < 30 {
                let dn = format!("uid=contested.{},{PEOPLE}", self.rng.below(CONTESTED));
                if roll < 28 {
                    self.modify_shared(&mut c, &dn, &value);
                } else {
                    self.delete_contested(&mut c, &dn);
                }
            } else if roll < 55 || live.is_empty() {
                self.add_own(&mut c, &value);
            } else {
                let k = live[self.rng.below(live.len())];
                if roll < 75 {
                    self.modify_own(&mut c, k, &value);
                } else if roll < 88 {
                    self.delete_own(&mut c, k);
                } else {
                    self.rename_own(&mut c, k, &format!("{phase}.{i}"));
                }
            }
            self.progress.fetch_add(1, Ordering::SeqCst);
        }
        let _ = c.unbind();
        self
    }

    /// Notes an operation whose connection broke: its outcome is unknown.
    fn broke(&mut self, what: String, e: impl std::fmt::Display) {
        println!("{}: {what}: connection lost ({e}); in doubt", self.tag);
        self.broken = true;
    }

    fn check(&mut self, r: &ldap3::LdapResult, what: &str) -> bool {
        if r.rc == 0 {
            return true;
        }
        self.wrong.push(format!("{}: {what}: {r:?}", self.tag));
        false
    }

    fn modify_shared(&mut self, c: &mut LdapConn, dn: &str, value: &str) {
        let r = c.with_controls(PostRead::new(vec!["entryCSN"])).modify(
            dn,
            vec![Mod::Replace("description", HashSet::from([value]))],
        );
        match r {
            // A contested entry this server no longer has.
            Ok(r) if r.rc == 32 && dn.starts_with("uid=contested.") => {}
            Ok(r) if self.check(&r, &format!("modify {dn}")) => {
                let csn = read_attr(&r, false, "entryCSN").expect("post-read entryCSN");
                self.shared
                    .acked
                    .entry(dn.to_ascii_lowercase())
                    .or_default()
                    .push((csn, value.to_string()));
            }
            Ok(_) => {}
            Err(e) => {
                self.shared
                    .doubt
                    .entry(dn.to_ascii_lowercase())
                    .or_default()
                    .push(value.to_string());
                self.broke(format!("modify {dn}"), e);
            }
        }
    }

    /// A delete of an entry both clients write: refused with noSuchObject when this server
    /// no longer has it.
    fn delete_contested(&mut self, c: &mut LdapConn, dn: &str) {
        match c.with_controls(PreRead::new(vec!["entryCSN"])).delete(dn) {
            Ok(r) if r.rc == 0 => {
                let seen = read_attr(&r, true, "entryCSN").expect("pre-read entryCSN");
                self.shared
                    .deleted
                    .entry(dn.to_ascii_lowercase())
                    .or_default()
                    .push(seen);
            }
            Ok(r) if r.rc == 32 => {}
            Ok(r) => self.wrong.push(format!("{}: delete {dn}: {r:?}", self.tag)),
            Err(e) => {
                self.shared.doubt_deleted.insert(dn.to_ascii_lowercase());
                self.broke(format!("delete {dn}"), e);
            }
        }
    }

    fn add_own(&mut self, c: &mut LdapConn, value: &str) {
        let uid = format!("{}.{}", self.tag, self.next);
        self.next += 1;
        let dn = format!("uid={uid},{PEOPLE}");
        let cn = format!("Person {uid}");
        let r = c.with_controls(PostRead::new(vec!["entryUUID"])).add(
            &dn,
            vec![
                ("objectClass", HashSet::from(["inetOrgPerson"])),
                ("uid", HashSet::from([uid.as_str()])),
                ("cn", HashSet::from([cn.as_str()])),
                ("sn", HashSet::from(["Person"])),
                ("description", HashSet::from([value])),
            ],
        );
        match r {
            Ok(r) if self.check(&r, &format!("add {dn}")) => {
                let uuid = read_attr(&r, false, "entryUUID").expect("post-read entryUUID");
                self.owned.push(Owned {
                    dn,
                    uuid,
                    desc: value.into(),
                    live: true,
                    doubt: None,
                });
            }
            Ok(_) => {}
            Err(e) => {
                // Its entryUUID is unknown: it may or may not be anywhere, and nothing checks it.
                self.broke(format!("add {dn}"), e);
            }
        }
    }

    fn modify_own(&mut self, c: &mut LdapConn, k: usize, value: &str) {
        let dn = self.owned[k].dn.clone();
        match c.modify(
            &dn,
            vec![Mod::Replace("description", HashSet::from([value]))],
        ) {
            Ok(r) if self.check(&r, &format!("modify {dn}")) => self.owned[k].desc = value.into(),
            Ok(_) => {}
            Err(e) => {
                self.owned[k].doubt = Some(format!("modify to {value}"));
                self.broke(format!("modify {dn}"), e);
            }
        }
    }

    fn delete_own(&mut self, c: &mut LdapConn, k: usize) {
        let dn = self.owned[k].dn.clone();
        match c.with_controls(PreRead::new(vec!["entryUUID"])).delete(&dn) {
            Ok(r) if self.check(&r, &format!("delete {dn}")) => {
                let uuid = read_attr(&r, true, "entryUUID").expect("pre-read entryUUID");
                assert_eq!(uuid, self.owned[k].uuid, "{dn}: the entry deleted");
                self.owned[k].live = false;
                self.deleted.push((dn, uuid));
            }
            Ok(_) => {}
            Err(e) => {
                self.owned[k].doubt = Some("delete".into());
                self.broke(format!("delete {dn}"), e);
            }
        }
    }

    fn rename_own(&mut self, c: &mut LdapConn, k: usize, suffix: &str) {
        let dn = self.owned[k].dn.clone();
        let uid = format!("{}.r{suffix}", self.tag);
        match c.modifydn(&dn, &format!("uid={uid}"), true, None) {
            Ok(r) if self.check(&r, &format!("rename {dn}")) => {
                self.owned[k].dn = format!("uid={uid},{PEOPLE}");
            }
            Ok(_) => {}
            Err(e) => {
                self.owned[k].doubt = Some(format!("rename to uid={uid}"));
                self.broke(format!("rename {dn}"), e);
            }
        }
    }
}

/// `admin`, but a failure to connect or bind is an error, not a panic (the server may be down).
fn try_admin(url: &str) -> Result<LdapConn, String> {
    let settings = ldap3::LdapConnSettings::new().set_conn_timeout(OP_TIMEOUT);
    let mut c = LdapConn::with_settings(settings, url).map_err(|e| e.to_string())?;
    c.with_timeout(OP_TIMEOUT);
    c.simple_bind(ADMIN, "secret")
        .and_then(|r| r.success())
        .map_err(|e| e.to_string())?;
    Ok(c)
}

/// The entryUUID of every entry of `c`, to its DN.
fn by_uuid(c: &Contents) -> HashMap<String, String> {
    c.iter()
        .filter_map(|(dn, attrs)| {
            let u = attrs.get("entryuuid")?.first()?;
            Some((u.to_ascii_lowercase(), dn.clone()))
        })
        .collect()
}

fn attr<'c>(c: &'c Contents, dn: &str, name: &str) -> Option<&'c str> {
    c.get(&dn.to_ascii_lowercase())
        .and_then(|a| a.get(name))
        .and_then(|v| v.first())
        .map(String::as_str)
}

/// Checks the converged contents against what the clients were told. Returns the failures.
/// `contested` holds the first version of each contested entry: (DN, entryCSN).
fn judge(
    end: &Contents,
    clients: &[&Client],
    twins: &[(String, Vec<(String, String)>)],
    contested: &[(String, String)],
) -> Vec<String> {
    let mut bad = Vec::new();
    let uuids = by_uuid(end);
    for c in clients {
        bad.extend(c.wrong.iter().cloned());
        // No acknowledged delete undone.
        for (dn, u) in &c.deleted {
            if let Some(now) = uuids.get(&u.to_ascii_lowercase()) {
                bad.push(format!(
                    "{dn} (entryUUID {u}) deleted (acknowledged by {}) but is there as {now}",
                    c.tag
                ));
            }
        }
        // Every acknowledged write of the client's own entries there, as it left them.
        for o in c.owned.iter().filter(|o| o.live) {
            let now = uuids.get(&o.uuid.to_ascii_lowercase());
            let as_left = now.is_some_and(|dn| {
                dn.eq_ignore_ascii_case(&o.dn) && attr(end, dn, "description") == Some(&o.desc)
            });
            if !as_left && o.doubt.is_none() {
                bad.push(format!(
                    "{} (entryUUID {}, description {:?}) written by {} is {}",
                    o.dn,
                    o.uuid,
                    o.desc,
                    c.tag,
                    match now {
                        Some(dn) =>
                            format!("{dn} with description {:?}", attr(end, dn, "description")),
                        None => "gone".into(),
                    }
                ));
            }
        }
    }
    // Conflicting modifies: the later entryCSN wins, on every server.
    for i in 0..SHARED {
        let dn = format!("uid=shared.{i},{PEOPLE}").to_ascii_lowercase();
        let mut acked: Vec<&(String, String)> = clients
            .iter()
            .flat_map(|c| c.shared.acked.get(&dn).into_iter().flatten())
            .collect();
        acked.sort();
        let doubt: Vec<&String> = clients
            .iter()
            .flat_map(|c| c.shared.doubt.get(&dn).into_iter().flatten())
            .collect();
        let (csn, value) = (attr(end, &dn, "entrycsn"), attr(end, &dn, "description"));
        match acked.last() {
            Some((want_csn, want)) => {
                let later_doubt = doubt.iter().any(|d| Some(d.as_str()) == value)
                    && csn.is_some_and(|c| c > want_csn.as_str());
                if !later_doubt && (csn != Some(want_csn.as_str()) || value != Some(want)) {
                    bad.push(format!(
                        "{dn}: {value:?} at {csn:?}, but the latest acknowledged modify wrote {want:?} at {want_csn}"
                    ));
                }
            }
            None => {
                if end.get(&dn).is_none() {
                    bad.push(format!("{dn} is gone"));
                }
            }
        }
    }
    // Modifies against deletes: the entry survives a delete only through a modify the delete
    // had not seen (newer than every delete's Pre-Read entryCSN), with the latest modify.
    for (dn, first) in contested {
        let dn = dn.to_ascii_lowercase();
        let mut versions: Vec<(String, String)> = vec![(first.clone(), "v0".into())];
        versions.extend(
            clients
                .iter()
                .flat_map(|c| c.shared.acked.get(&dn).into_iter().flatten().cloned()),
        );
        versions.sort();
        let latest = versions.last().expect("the first version").clone();
        let seen = clients
            .iter()
            .flat_map(|c| c.shared.deleted.get(&dn).into_iter().flatten())
            .max()
            .cloned();
        let doubt = clients
            .iter()
            .any(|c| c.shared.doubt_deleted.contains(&dn) || c.shared.doubt.contains_key(&dn));
        if doubt {
            continue;
        }
        let survives = seen.as_ref().is_none_or(|s| latest.0 > *s);
        let now = (attr(end, &dn, "entrycsn"), attr(end, &dn, "description"));
        let want = survives.then_some((latest.0.as_str(), latest.1.as_str()));
        let got = end
            .contains_key(&dn)
            .then_some((now.0.unwrap_or(""), now.1.unwrap_or("")));
        if got != want {
            bad.push(format!(
                "{dn}: {got:?}, but the latest version is {latest:?} and the deletes had seen up to {seen:?}"
            ));
        }
    }
    // The same DN added on both: the later add holds it.
    for (dn, adds) in twins {
        let Some(latest) = adds.iter().max_by(|x, y| x.1.cmp(&y.1)) else {
            continue;
        };
        let holder = attr(end, dn, "entryuuid").map(str::to_ascii_lowercase);
        if holder.as_deref() != Some(latest.0.to_ascii_lowercase().as_str()) {
            bad.push(format!(
                "{dn}: held by entryUUID {holder:?}, but the later add (CSN {}) was {}",
                latest.1, latest.0
            ));
        }
    }
    bad
}

/// Adds `uid=<uid>` on the server of `c` and returns its (entryUUID, entryCSN).
fn add_read(c: &mut LdapConn, uid: &str, desc: &str) -> (String, String) {
    let cn = format!("Person {uid}");
    let r = c
        .with_controls(PostRead::new(vec!["entryUUID", "entryCSN"]))
        .add(
            &format!("uid={uid},{PEOPLE}"),
            vec![
                ("objectClass", HashSet::from(["inetOrgPerson"])),
                ("uid", HashSet::from([uid])),
                ("cn", HashSet::from([cn.as_str()])),
                ("sn", HashSet::from(["Person"])),
                ("description", HashSet::from([desc])),
            ],
        )
        .expect("add")
        .success()
        .expect("add result");
    (
        read_attr(&r, false, "entryUUID").expect("entryUUID"),
        read_attr(&r, false, "entryCSN").expect("entryCSN"),
    )
}

/// Waits until `n` writes were counted by `progress`, polling (bounded); false if they never
/// came (the client stopped first).
fn wait_for(progress: &AtomicUsize, n: usize) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if progress.load(Ordering::SeqCst) >= n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Two providers, each consuming the other; both take writes at once through every fault.
#[test]
fn two_providers_converge_after_conflicts_a_partition_and_a_kill() {
    faults(2);
}

/// Three providers in a full mesh (each consumes the two others): every change reaches a
/// server by two paths, through the same faults.
#[test]
fn three_providers_converge_after_conflicts_a_partition_and_a_kill() {
    faults(3);
}

/// A provider killed (SIGKILL) in the middle of its first refresh from the other, then
/// restarted: it must end with every entry. A replicated entry used to raise the contextCSN of
/// its server id as it was applied; the refresh sends entries in tree order, so the server
/// came back claiming (in its cookie) changes it never got: its provider sent it nothing more,
/// and its own provider's present phase then made the other server delete what it lacked.
/// Now contextCSN follows the provider's cookies only, which come after what they vouch for.
#[test]
fn a_provider_killed_in_its_first_refresh_gets_everything() {
    const ENTRIES: usize = 3000;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut a = Node::new(tmp.path(), "a");
    let mut b = Node::new(tmp.path(), "b");
    a.configure_with(1, true, true, &[(2, &b)], HARSH);
    b.configure_with(2, true, true, &[(1, &a)], HARSH);
    import_people(&a, ENTRIES);
    a.start();
    b.start();
    // Killed once it holds part of the refresh (if it is quicker than the polls, after it).
    let start = Instant::now();
    let mut held = 0;
    while start.elapsed() < Duration::from_secs(60) {
        held = count(&b).unwrap_or(0);
        if held > 100 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    b.kill();
    println!("b killed holding {held} of {} entries", ENTRIES + 3);
    let restarted = Instant::now();
    b.start();
    let (took, end) = converge_within(
        "a provider killed in its first refresh",
        &[&a, &b],
        CONVERGE_POLLS,
        Some(CONVERGE_DEADLINE),
    );
    println!(
        "a provider killed in its first refresh: converged {} ms after its restart",
        restarted.elapsed().as_millis().max(took.as_millis())
    );
    assert_eq!(end.len(), ENTRIES + 3, "every entry on both");
}

/// A read-only consumer that stops reading (SIGSTOP) while its provider takes large writes
/// falls more than `syncprov_queue` batches behind, and its provider ends the persistent
/// search with e-syncRefreshRequired. It resumes from its cookie and ends with every entry.
/// It used to search again without one, in the same session, so that nothing was marked
/// present in the second refresh and its present phase deleted every entry it held.
#[test]
fn a_consumer_cut_off_for_falling_behind_resumes_with_every_entry() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut p = Node::new(tmp.path(), "provider");
    let mut c = Node::new(tmp.path(), "consumer");
    // Little room on the provider's side: the writes below are far more than it, the queue
    // and the sockets hold.
    p.configure_with(
        1,
        true,
        false,
        &[],
        "syncprov_queue = 2\nmax_buffered_bytes = 262144\n",
    );
    c.configure(2, false, false, &[(1, &p)]);
    import_people(&p, 200);
    p.start();
    c.start();
    converge("a consumer to stop, start", &[&p, &c]);
    let pid = c.proc.as_ref().expect("running").child.id().to_string();
    let signal = |sig: &str| {
        let st = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill");
        assert!(st.success(), "kill {sig}");
    };
    signal("-STOP");
    let big = "x".repeat(64 * 1024);
    let mut w = p.admin();
    for i in 0..200 {
        let value = format!("{i} {big}");
        ok(
            w.modify(
                &format!("uid=p{i},{PEOPLE}"),
                vec![Mod::Replace("description", HashSet::from([value.as_str()]))],
            ),
            "modify",
        );
    }
    let _ = w.unbind();
    signal("-CONT");
    let resumed = Instant::now();
    let (took, end) = converge_within(
        "a consumer cut off for falling behind",
        &[&p, &c],
        CONVERGE_POLLS,
        Some(CONVERGE_DEADLINE),
    );
    println!(
        "a consumer cut off for falling behind: converged {} ms after it went on ({})",
        resumed.elapsed().as_millis().max(took.as_millis()),
        if c.log().contains("cut the persistent search off") {
            "it was cut off"
        } else {
            "it was not cut off this time"
        }
    );
    assert_eq!(end.len(), 203, "every entry on both");
}

/// Runs `clients` at once, each for `count` writes; returns them in the same order.
fn all(clients: Vec<Client>, phase: &'static str, count: usize) -> Vec<Client> {
    let running: Vec<_> = clients
        .into_iter()
        .map(|c| std::thread::spawn(move || c.run(phase, count)))
        .collect();
    running
        .into_iter()
        .map(|t| t.join().expect("client"))
        .collect()
}

const TAGS: [&str; 3] = ["a", "b", "c"];
const SEEDS: [u64; 3] = [
    0x9e37_79b9_7f4a_7c15,
    0xd1b5_4a32_d192_ed03,
    0x94d0_49bb_1331_11eb,
];

/// The fault case with `n` providers (2 or 3), each consuming every other: clients write to
/// all of them (1), through a partition of all links (2), and while the links come back the
/// first server is killed with SIGKILL under its client's writes (3); it restarts and every
/// client writes a little more (4). Then all must converge, and hold what the clients were told.
fn faults(n: usize) {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut nodes: Vec<Node> = TAGS[..n].iter().map(|t| Node::new(tmp.path(), t)).collect();
    for (i, node) in nodes.iter().enumerate() {
        let from: Vec<(u16, &Node)> = nodes
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(j, other)| (j as u16 + 1, other))
            .collect();
        node.configure_with(i as u16 + 1, true, true, &from, HARSH);
    }
    for node in &mut nodes {
        node.start();
    }
    let mut w = nodes[0].admin();
    base_units(&mut w);
    for i in 0..SHARED {
        add_read(&mut w, &format!("shared.{i}"), "v0");
    }
    let contested: Vec<(String, String)> = (0..CONTESTED)
        .map(|i| {
            let uid = format!("contested.{i}");
            let (_, csn) = add_read(&mut w, &uid, "v0");
            (format!("uid={uid},{PEOPLE}"), csn)
        })
        .collect();
    let mut clients: Vec<Client> = (0..n)
        .map(|i| Client::new(TAGS[i], nodes[i].url(), SEEDS[i]))
        .collect();
    for i in 0..SEEDED {
        let uid = format!("seed.{i}");
        let (uuid, _) = add_read(&mut w, &uid, "v0");
        clients[i % n].owned.push(Owned {
            dn: format!("uid={uid},{PEOPLE}"),
            uuid,
            desc: "v0".into(),
            live: true,
            doubt: None,
        });
    }
    let _ = w.unbind();
    let (_, first) = converge("faults: start", &nodes.iter().collect::<Vec<_>>());
    let logs: String = nodes
        .iter()
        .map(|x| format!("\n--- {} log:\n{}", x.name, x.log()))
        .collect();
    assert_eq!(
        first.len(),
        3 + SHARED + CONTESTED + SEEDED,
        "the entries added before the faults{logs}"
    );

    // 1. All take writes, linked.
    let clients = all(clients, "linked", 120);

    // 2. Partitioned: all take writes, and the same DNs are added on every server.
    for node in &nodes {
        node.link.cut();
    }
    let clients = all(clients, "cut", 80);
    let mut twins = Vec::new();
    let mut writers: Vec<LdapConn> = nodes.iter().map(Node::admin).collect();
    for i in 0..3 {
        let uid = format!("twin.{i}");
        let adds = writers
            .iter_mut()
            .zip(TAGS)
            .map(|(w, tag)| add_read(w, &uid, &format!("twin from {tag}")))
            .collect();
        twins.push((format!("uid={uid},{PEOPLE}"), adds));
    }
    for mut w in writers {
        let _ = w.unbind();
    }

    // 3. Linked again while all write; the first server is killed (SIGKILL) once its client
    //    made 40 writes of this phase, while the others go on.
    for node in &nodes {
        node.link.restore();
    }
    let progress = clients[0].progress.clone();
    let start = progress.load(Ordering::SeqCst);
    let running: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let count = if i == 0 { 400 } else { 150 };
            std::thread::spawn(move || c.run("healed", count))
        })
        .collect();
    assert!(
        wait_for(&progress, start + 40),
        "the first client never wrote"
    );
    nodes[0].kill();
    let mut clients: Vec<Client> = running
        .into_iter()
        .map(|t| t.join().expect("client"))
        .collect();
    println!(
        "killed {} after {} writes of its client in this phase",
        nodes[0].name,
        clients[0].progress.load(Ordering::SeqCst) - start
    );

    // 4. It restarts; all take a few more writes.
    let restarted = Instant::now();
    nodes[0].start();
    clients[0].url = nodes[0].url();
    let clients = all(clients, "restarted", 40);
    let what = format!("{n} providers after conflicts, a partition and a kill");
    let (took, end) = converge_within(
        &what,
        &nodes.iter().collect::<Vec<_>>(),
        CONVERGE_POLLS,
        Some(CONVERGE_DEADLINE),
    );
    println!(
        "{n} providers under faults: converged {} ms after the last write ({} ms after the restart)",
        took.as_millis(),
        restarted.elapsed().as_millis()
    );
    let refs: Vec<&Client> = clients.iter().collect();
    let bad = judge(&end, &refs, &twins, &contested);
    let logs: String = nodes
        .iter()
        .map(|x| format!("\n--- {} log (tail):\n{}", x.name, tail(&x.log(), 40)))
        .collect();
    assert!(
        bad.is_empty(),
        "{} wrong:\n{}{logs}",
        bad.len(),
        bad.join("\n")
    );
    assert!(
        clients.iter().map(|c| c.deleted.len()).sum::<usize>() > 10,
        "the workload deleted too little to judge"
    );
}

fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
