//! Linden ↔ Linden replication with real `linden serve` processes on loopback (issue 18): a
//! provider and a read-only consumer, multi-provider pairs and a ring, and the faults — a
//! consumer killed with SIGKILL mid-stream, a provider of two killed while clients write to
//! both, and the link between two providers cut while both take conflicting writes.
//!
//! Each server reaches the others through a small TCP proxy of the test (`Link`): its port is
//! known before the servers start (they listen on port 0), and closing it cuts the link.
//! Convergence is awaited by polling both directories with a bounded count and comparing them
//! entry by entry (DN, attributes, entryUUID, entryCSN); the time it took is printed
//! ("converged in"). No sleep orders events: the writes that must be concurrent are made while
//! the link is cut.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use ldap3::{LdapConn, LdapConnSettings, Mod, Scope, SearchEntry};

const SUFFIX: &str = "dc=example,dc=com";
const ADMIN: &str = "cn=admin,dc=example,dc=com";
const PEOPLE: &str = "ou=people,dc=example,dc=com";
const GROUPS: &str = "ou=groups,dc=example,dc=com";
/// Polls of two directories before convergence is declared failed (each poll reads both).
const MAX_POLLS: u32 = 600;
/// Between two polls: a poll reads every entry, so this only spaces them out.
const POLL_PAUSE: Duration = Duration::from_millis(25);
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Attributes each server computes or keeps for itself: not compared.
const LOCAL: [&str; 5] = [
    "contextcsn",
    "entrydn",
    "hassubordinates",
    "numsubordinates",
    "subschemasubentry",
];

/// A TCP proxy to a server, which the test can cut and restore. Its port is fixed when it
/// is made; the server behind it may change (a restarted server listens on a new port).
struct Link {
    port: u16,
    target: Arc<Mutex<Option<SocketAddr>>>,
    open: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Link {
    fn new() -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let target: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
        let open = Arc::new(AtomicBool::new(true));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
        let (t, o, s) = (target.clone(), open.clone(), streams.clone());
        // Lives as long as the test process: every accepted connection is either forwarded
        // or closed at once.
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                let to = *t.lock().expect("lock");
                if !o.load(Ordering::SeqCst) {
                    continue;
                }
                let Some(to) = to else { continue };
                let Ok(server) = TcpStream::connect(to) else {
                    continue;
                };
                let mut keep = s.lock().expect("lock");
                for (from, into) in [(&client, &server), (&server, &client)] {
                    let (Ok(mut r), Ok(mut w)) = (from.try_clone(), into.try_clone()) else {
                        continue;
                    };
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        loop {
                            match r.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    if w.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = w.shutdown(Shutdown::Both);
                        let _ = r.shutdown(Shutdown::Both);
                    });
                }
                keep.push(client);
                keep.push(server);
            }
        });
        Link {
            port,
            target,
            open,
            streams,
        }
    }

    fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    fn point_to(&self, addr: SocketAddr) {
        *self.target.lock().expect("lock") = Some(addr);
    }

    /// Closes every connection through the link and refuses new ones until `restore`.
    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for s in self.streams.lock().expect("lock").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

/// One server of a test: its data directory, configuration and the link others reach it by.
struct Node {
    name: String,
    dir: PathBuf,
    link: Link,
    proc: Option<Proc>,
}

/// A running `linden serve`; killed (SIGKILL) when dropped.
struct Proc {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Node {
    fn new(root: &Path, name: &str) -> Node {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        Node {
            name: name.into(),
            dir,
            link: Link::new(),
            proc: None,
        }
    }

    fn config(&self) -> PathBuf {
        self.dir.join("linden.toml")
    }

    /// Writes the configuration: `sid`, a provider if `provider`, one of several if `multi`,
    /// and a consumer of each of `from` (rid = the position + 1 of the node in the test).
    fn configure(&self, sid: u16, provider: bool, multi: bool, from: &[(u16, &Node)]) {
        let mut t = format!(
            "data = {:?}\nsuffix = \"{SUFFIX}\"\nserver_id = {sid}\nsyncprov = {provider}\nmulti_provider = {multi}\nlog_level = \"info\"\n",
            self.dir.join("data").to_str().expect("path")
        );
        for (rid, n) in from {
            t.push_str(&format!(
                "\n[[syncrepl]]\nprovider = \"{}\"\nrid = {rid}\nsearch_base = \"{SUFFIX}\"\nretry = \"1 +\"\nbind_dn = \"{ADMIN}\"\nbind_password = \"secret\"\n",
                n.link.url()
            ));
        }
        std::fs::write(self.config(), t).expect("write config");
    }

    fn start(&mut self) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_linden"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(self.config())
            .args(["--admin-password", "secret"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start linden serve");
        let pipe = child.stderr.take().expect("stderr piped");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let lines = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let addr = rest.split([',', ' ']).next().unwrap_or("");
                    if let Ok(a) = addr.parse::<SocketAddr>() {
                        let _ = tx.send(a);
                    }
                }
                lines.lock().expect("lock").push(line);
            }
        });
        let Ok(addr) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} did not report its port; stderr:\n{}",
                self.name,
                stderr.lock().expect("lock").join("\n")
            );
        };
        self.link.point_to(addr);
        self.proc = Some(Proc {
            child,
            addr,
            stderr,
        });
    }

    /// SIGKILL: no shutdown code runs.
    fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.child.kill().expect("SIGKILL");
            p.child.wait().expect("wait");
        }
    }

    fn url(&self) -> String {
        format!("ldap://{}", self.proc.as_ref().expect("running").addr)
    }

    fn log(&self) -> String {
        self.proc
            .as_ref()
            .map(|p| p.stderr.lock().expect("lock").join("\n"))
            .unwrap_or_default()
    }

    fn admin(&self) -> LdapConn {
        admin(&self.url())
    }

    /// Every entry (DN lower-cased → attributes, names lower-cased, values sorted), local
    /// attributes left out.
    fn contents(&self) -> Contents {
        let mut c = self.admin();
        let (found, _) = c
            .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["*", "+"])
            .expect("search")
            .success()
            .expect("search result");
        let mut out = Contents::new();
        for e in found {
            let e = SearchEntry::construct(e);
            let mut attrs: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (k, mut v) in e.attrs {
                let k = k.to_ascii_lowercase();
                if LOCAL.contains(&k.as_str()) {
                    continue;
                }
                v.sort();
                attrs.insert(k, v);
            }
            out.insert(e.dn.to_ascii_lowercase(), attrs);
        }
        let _ = c.unbind();
        out
    }

    fn context_csn(&self) -> Vec<String> {
        let mut c = self.admin();
        let (found, _) = c
            .search(SUFFIX, Scope::Base, "(objectClass=*)", vec!["contextCSN"])
            .expect("search")
            .success()
            .expect("search result");
        let _ = c.unbind();
        found
            .into_iter()
            .next()
            .map(SearchEntry::construct)
            .and_then(|e| e.attrs.get("contextCSN").cloned())
            .unwrap_or_default()
    }
}

type Contents = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn admin(url: &str) -> LdapConn {
    let settings = LdapConnSettings::new().set_conn_timeout(OP_TIMEOUT);
    let mut c = LdapConn::with_settings(settings, url).expect("connect");
    c.with_timeout(OP_TIMEOUT);
    c.simple_bind(ADMIN, "secret")
        .expect("bind")
        .success()
        .expect("bind result");
    c
}

/// Waits (a bounded number of polls) until every node holds the same entries; returns the
/// time it took and the contents. `what` names the case in the messages and the report.
fn converge(what: &str, nodes: &[&Node]) -> (Duration, Contents) {
    let start = Instant::now();
    let mut last = Vec::new();
    for _ in 0..MAX_POLLS {
        last = nodes.iter().map(|n| n.contents()).collect::<Vec<_>>();
        if last.windows(2).all(|w| w[0] == w[1]) {
            let took = start.elapsed();
            println!(
                "{what}: converged in {} ms ({} entries on {} servers)",
                took.as_millis(),
                last[0].len(),
                nodes.len()
            );
            return (took, last.swap_remove(0));
        }
        std::thread::sleep(POLL_PAUSE);
    }
    let mut why = String::new();
    for (n, c) in nodes.iter().zip(&last).skip(1) {
        let first = &last[0];
        let only_first: Vec<_> = first
            .keys()
            .filter(|k| !c.contains_key(*k))
            .take(5)
            .collect();
        let only_here: Vec<_> = c
            .keys()
            .filter(|k| !first.contains_key(*k))
            .take(5)
            .collect();
        let differ: Vec<_> = first
            .iter()
            .filter(|(k, v)| c.get(*k).is_some_and(|w| w != *v))
            .map(|(k, v)| (k, v, c.get(k)))
            .take(3)
            .collect();
        why.push_str(&format!(
            "\n{} vs {}: {} vs {} entries; only on the first {only_first:?}; only here {only_here:?}; differing {differ:#?}",
            nodes[0].name,
            n.name,
            first.len(),
            c.len()
        ));
    }
    for n in nodes {
        why.push_str(&format!("\n--- {} log (tail):\n", n.name));
        let log = n.log();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        why.push_str(&tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
    panic!("{what}: no convergence after {MAX_POLLS} polls{why}");
}

fn person_ldif(uid: &str, parent: &str, n: usize) -> String {
    format!(
        "dn: uid={uid},{parent}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: Person {n}\nsn: Number{n}\nmail: {uid}@example.com\ndescription: v0\n\n"
    )
}

fn add_person(
    c: &mut LdapConn,
    uid: &str,
    parent: &str,
    desc: &str,
) -> ldap3::result::Result<ldap3::LdapResult> {
    let cn = format!("Person {uid}");
    c.add(
        &format!("uid={uid},{parent}"),
        vec![
            ("objectClass", ["inetOrgPerson"].into()),
            ("uid", [uid].into()),
            ("cn", [cn.as_str()].into()),
            ("sn", ["Person"].into()),
            ("description", [desc].into()),
        ],
    )
}

fn ok(r: ldap3::result::Result<ldap3::LdapResult>, what: &str) {
    let r = r.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(r.rc, 0, "{what}: {r:?}");
}

fn set_desc(c: &mut LdapConn, dn: &str, v: &str) -> ldap3::result::Result<ldap3::LdapResult> {
    c.modify(
        dn,
        vec![Mod::Replace("description", [v].into_iter().collect())],
    )
}

fn desc(contents: &Contents, dn: &str) -> Option<String> {
    contents
        .get(&dn.to_ascii_lowercase())
        .and_then(|a| a.get("description"))
        .and_then(|v| v.first().cloned())
}

/// The base of every multi-provider test: two organisational units on the first node.
fn base_units(c: &mut LdapConn) {
    for ou in ["people", "groups"] {
        ok(
            c.add(
                &format!("ou={ou},{SUFFIX}"),
                vec![
                    ("objectClass", ["organizationalUnit"].into()),
                    ("ou", [ou].into()),
                ],
            ),
            "add ou",
        );
    }
}

/// Provider → read-only consumer: a few thousand entries imported on the provider, a full
/// refresh, then adds, modifies of several attributes, renames with newSuperior and deletes
/// while the consumer persists; the consumer killed with SIGKILL in the middle of a stream of
/// writes, restarted, resuming from its cookie (the contextCSN kept on its suffix entry).
#[test]
fn provider_to_consumer_with_a_consumer_killed_mid_stream() {
    const ENTRIES: usize = 3000;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut p = Node::new(tmp.path(), "provider");
    let mut c = Node::new(tmp.path(), "consumer");
    p.configure(1, true, false, &[]);
    c.configure(2, false, false, &[(1, &p)]);
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\ndn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n\ndn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups\n\n"
    );
    for i in 0..ENTRIES {
        ldif.push_str(&person_ldif(&format!("p{i}"), PEOPLE, i));
    }
    let src = tmp.path().join("people.ldif");
    std::fs::write(&src, ldif).expect("write ldif");
    let out = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args(["import", "--config"])
        .arg(p.config())
        .arg(&src)
        .output()
        .expect("import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p.start();
    c.start();
    let (_, first) = converge("provider → consumer, initial refresh", &[&p, &c]);
    assert_eq!(first.len(), ENTRIES + 3);
    // A stream of every kind of change while the consumer persists.
    let mut w = p.admin();
    for i in 0..100 {
        ok(add_person(&mut w, &format!("n{i}"), PEOPLE, "new"), "add");
    }
    for i in 0..100 {
        let dn = format!("uid=p{i},{PEOPLE}");
        ok(
            w.modify(
                &dn,
                vec![
                    Mod::Replace("description", ["changed"].into_iter().collect()),
                    Mod::Add("telephoneNumber", ["+1 555 0100"].into_iter().collect()),
                    Mod::Delete("mail", std::collections::HashSet::new()),
                ],
            ),
            "modify",
        );
    }
    for i in 100..150 {
        let r = w.modifydn(
            &format!("uid=p{i},{PEOPLE}"),
            &format!("uid=moved{i}"),
            true,
            Some(GROUPS),
        );
        ok(r, "modrdn");
    }
    for i in 150..250 {
        ok(w.delete(&format!("uid=p{i},{PEOPLE}")), "delete");
    }
    let (_, after) = converge("provider → consumer, stream of changes", &[&p, &c]);
    assert_eq!(after.len(), ENTRIES + 3 + 100 - 100);
    assert!(after.contains_key(&format!("uid=moved120,{GROUPS}")));
    assert_eq!(
        desc(&after, &format!("uid=p5,{PEOPLE}")).as_deref(),
        Some("changed")
    );
    let kept = c.context_csn();
    assert!(
        !kept.is_empty(),
        "the consumer keeps its cookie as contextCSN"
    );
    // Kill the consumer in the middle of a stream of writes, write more, restart it.
    let writer = {
        let url = p.url();
        std::thread::spawn(move || {
            let mut w = admin(&url);
            for i in 0..300 {
                ok(
                    add_person(&mut w, &format!("s{i}"), PEOPLE, "stream"),
                    "add",
                );
                ok(
                    set_desc(&mut w, &format!("uid=p{},{PEOPLE}", 300 + i), "streamed"),
                    "modify",
                );
            }
        })
    };
    // Killed once the stream is under way: when the consumer holds some of it.
    let mut seen = false;
    for _ in 0..MAX_POLLS {
        if c.contents().contains_key(&format!("uid=s20,{PEOPLE}")) {
            seen = true;
            break;
        }
        std::thread::sleep(POLL_PAUSE);
    }
    assert!(seen, "the consumer never saw the stream");
    c.kill();
    writer.join().expect("writer");
    let killed_at = Instant::now();
    c.start();
    let (took, end) = converge("consumer killed mid-stream, restarted", &[&p, &c]);
    println!(
        "consumer killed mid-stream: back and converged {} ms after the restart",
        killed_at.elapsed().as_millis().max(took.as_millis())
    );
    assert_eq!(end.len(), ENTRIES + 3 + 300);
    assert!(
        c.log().contains("refresh from"),
        "the consumer refreshed after the restart"
    );
}

/// Two providers (multi-provider) with clients writing to both; one is killed with SIGKILL
/// mid-stream and the other keeps taking writes; the killed one restarts and both converge.
/// Every write a server acknowledged is on both afterwards.
#[test]
fn two_providers_one_killed_while_clients_write_to_both() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut a = Node::new(tmp.path(), "a");
    let mut b = Node::new(tmp.path(), "b");
    a.configure(1, true, true, &[(2, &b)]);
    b.configure(2, true, true, &[(1, &a)]);
    a.start();
    b.start();
    base_units(&mut a.admin());
    converge("two providers, start", &[&a, &b]);
    // Each client owns its entries and keeps what its server acknowledged.
    let client = |url: String, tag: &'static str, count: usize| {
        std::thread::spawn(move || {
            let mut acked: BTreeMap<String, String> = BTreeMap::new();
            let mut doubt: Option<String> = None;
            let mut c = admin(&url);
            for i in 0..count {
                let dn = format!("uid={tag}{i},{PEOPLE}");
                match add_person(&mut c, &format!("{tag}{i}"), PEOPLE, "v0") {
                    Ok(r) if r.rc == 0 => {
                        acked.insert(dn.clone(), "v0".into());
                    }
                    _ => {
                        doubt = Some(dn);
                        break;
                    }
                }
                if i % 2 == 1 {
                    let prev = format!("uid={tag}{},{PEOPLE}", i - 1);
                    match set_desc(&mut c, &prev, "v1") {
                        Ok(r) if r.rc == 0 => {
                            acked.insert(prev, "v1".into());
                        }
                        _ => {
                            doubt = Some(prev);
                            break;
                        }
                    }
                }
            }
            (acked, doubt)
        })
    };
    let ca = client(a.url(), "a", 400);
    let cb = client(b.url(), "b", 200);
    // Kill a once its client is under way and b has some of a's writes.
    let mut seen = false;
    for _ in 0..MAX_POLLS {
        if b.contents().contains_key(&format!("uid=a30,{PEOPLE}")) {
            seen = true;
            break;
        }
        std::thread::sleep(POLL_PAUSE);
    }
    assert!(seen, "b never saw a's writes");
    a.kill();
    let (acked_a, doubt_a) = ca.join().expect("client a");
    let (mut acked_b, _) = cb.join().expect("client b");
    // b keeps taking writes while a is down.
    let mut w = b.admin();
    for i in 0..100 {
        ok(add_person(&mut w, &format!("late{i}"), PEOPLE, "v0"), "add");
        acked_b.insert(format!("uid=late{i},{PEOPLE}"), "v0".into());
    }
    let restarted = Instant::now();
    a.start();
    let (took, end) = converge("provider of two killed, restarted", &[&a, &b]);
    println!(
        "provider of two killed: converged {} ms after its restart",
        restarted.elapsed().as_millis().max(took.as_millis())
    );
    for (dn, v) in acked_a.iter().chain(&acked_b) {
        if doubt_a.as_deref() == Some(dn.as_str()) {
            continue;
        }
        assert_eq!(
            desc(&end, dn).as_deref(),
            Some(v.as_str()),
            "{dn} lost or stale"
        );
    }
    assert!(
        acked_a.len() > 30 && acked_b.len() >= 300,
        "{} {}",
        acked_a.len(),
        acked_b.len()
    );
}

/// Two providers, the link between them cut while both take conflicting writes: the same
/// entries modified on both (the later write wins on both), the same DN added on both (the
/// later add holds it), an entry deleted on one and modified on the other (the modify the
/// deleting server had not seen wins: the entry is back on both), and writes of their own on
/// each. Restored, they converge.
///
/// The links come back one after the other, in both orders (two tests): the result must not
/// depend on which server pulls the other's writes first, and each order takes other paths
/// (the second to pull finds its own conflicting writes already at the other end).
#[test]
fn two_providers_cut_apart_converge_b_pulling_first() {
    partition_case(Side::A);
}

#[test]
fn two_providers_cut_apart_converge_a_pulling_first() {
    partition_case(Side::B);
}

/// A server of a two-server test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
}

/// The CSN of server id `sid` among contextCSN values.
fn csn_of_sid(csns: &[String], sid: &str) -> Option<String> {
    csns.iter()
        .find(|c| c.split('#').nth(2) == Some(sid))
        .cloned()
}

/// Waits until `puller` holds everything `provider` (server id `sid`, taking no writes) wrote:
/// its contextCSN value for `sid` is the provider's own.
fn pulled(puller: &Node, provider: &Node, sid: &str) {
    let want = csn_of_sid(&provider.context_csn(), sid).expect("the provider's own contextCSN");
    for _ in 0..MAX_POLLS {
        if csn_of_sid(&puller.context_csn(), sid).as_deref() == Some(want.as_str()) {
            return;
        }
        std::thread::sleep(POLL_PAUSE);
    }
    panic!(
        "{} never caught up with {} ({want}): {:?}",
        puller.name,
        provider.name,
        puller.context_csn()
    );
}

/// The partition test, restoring first the link to `first` (so the other server pulls first).
fn partition_case(first: Side) {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut a = Node::new(tmp.path(), "a");
    let mut b = Node::new(tmp.path(), "b");
    a.configure(1, true, true, &[(2, &b)]);
    b.configure(2, true, true, &[(1, &a)]);
    a.start();
    b.start();
    let mut wa = a.admin();
    base_units(&mut wa);
    for i in 0..10 {
        ok(add_person(&mut wa, &format!("c{i}"), PEOPLE, "v0"), "add");
    }
    for i in 0..3 {
        ok(add_person(&mut wa, &format!("d{i}"), PEOPLE, "v0"), "add");
    }
    converge("partition, before", &[&a, &b]);
    a.link.cut();
    b.link.cut();
    let mut wb = b.admin();
    let mut want: BTreeMap<String, Option<String>> = BTreeMap::new();
    for i in 0..10 {
        let dn = format!("uid=c{i},{PEOPLE}");
        let (first, second, (f, s)) = if i % 2 == 0 {
            (&mut wa, &mut wb, ("from a", "from b"))
        } else {
            (&mut wb, &mut wa, ("from b", "from a"))
        };
        ok(set_desc(first, &dn, f), "modify");
        ok(set_desc(second, &dn, s), "modify");
        want.insert(dn, Some(s.into()));
    }
    // The same DN added on both: the later holds it.
    ok(
        add_person(&mut wa, "twin", PEOPLE, "twin from a"),
        "add twin",
    );
    ok(
        add_person(&mut wb, "twin", PEOPLE, "twin from b"),
        "add twin",
    );
    want.insert(format!("uid=twin,{PEOPLE}"), Some("twin from b".into()));
    // Delete on a, then modify on b; modify on b, then delete on a: a never saw b's modify,
    // so in both orders the entry survives with it.
    let d0 = format!("uid=d0,{PEOPLE}");
    ok(wa.delete(&d0), "delete");
    ok(set_desc(&mut wb, &d0, "kept by b"), "modify");
    want.insert(d0, Some("kept by b".into()));
    let d1 = format!("uid=d1,{PEOPLE}");
    ok(set_desc(&mut wb, &d1, "kept by b"), "modify");
    ok(wa.delete(&d1), "delete");
    want.insert(d1, Some("kept by b".into()));
    // A delete no one contests.
    let d2 = format!("uid=d2,{PEOPLE}");
    ok(wb.delete(&d2), "delete");
    want.insert(d2, None);
    for i in 0..50 {
        ok(
            add_person(&mut wa, &format!("own-a{i}"), PEOPLE, "a"),
            "add",
        );
        ok(
            add_person(&mut wb, &format!("own-b{i}"), PEOPLE, "b"),
            "add",
        );
        want.insert(format!("uid=own-a{i},{PEOPLE}"), Some("a".into()));
        want.insert(format!("uid=own-b{i},{PEOPLE}"), Some("b".into()));
    }
    assert_ne!(a.contents(), b.contents(), "the link was cut");
    let restored = Instant::now();
    // b consumes through a's link, a through b's.
    match first {
        Side::A => {
            a.link.restore();
            pulled(&b, &a, "001");
            b.link.restore();
        }
        Side::B => {
            b.link.restore();
            pulled(&a, &b, "002");
            a.link.restore();
        }
    }
    let (took, end) = converge("partition healed", &[&a, &b]);
    println!(
        "partition healed: converged {} ms after the link was restored",
        restored.elapsed().as_millis().max(took.as_millis())
    );
    for (dn, v) in &want {
        assert_eq!(desc(&end, dn).as_deref(), v.as_deref(), "{dn}");
    }
    // Both servers' contextCSN settle on the same values, one per server id (the cookies
    // follow the changes).
    let mut settled = false;
    for _ in 0..MAX_POLLS {
        let (x, y) = (a.context_csn(), b.context_csn());
        if x.len() == 2 && x == y {
            settled = true;
            break;
        }
        std::thread::sleep(POLL_PAUSE);
    }
    assert!(
        settled,
        "contextCSN did not settle: {:?} vs {:?}",
        a.context_csn(),
        b.context_csn()
    );
}

/// Three providers in a ring, each consuming only the one before it (a ← c, b ← a, c ← b): a
/// change reaches the third server through the second, which forwards what it replicated,
/// and comes back to its origin without being applied again (no loop).
#[test]
fn three_providers_in_a_ring_forward_and_stop() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut a = Node::new(tmp.path(), "a");
    let mut b = Node::new(tmp.path(), "b");
    let mut c = Node::new(tmp.path(), "c");
    a.configure(1, true, true, &[(3, &c)]);
    b.configure(2, true, true, &[(1, &a)]);
    c.configure(3, true, true, &[(2, &b)]);
    a.start();
    b.start();
    c.start();
    base_units(&mut a.admin());
    converge("ring, start", &[&a, &b, &c]);
    for (n, tag) in [(&a, "ra"), (&b, "rb"), (&c, "rc")] {
        let mut w = n.admin();
        for i in 0..50 {
            ok(add_person(&mut w, &format!("{tag}{i}"), PEOPLE, tag), "add");
        }
        ok(
            set_desc(&mut w, &format!("uid={tag}0,{PEOPLE}"), "changed"),
            "modify",
        );
    }
    let (_, end) = converge("ring of three", &[&a, &b, &c]);
    assert_eq!(end.len(), 3 + 150);
    for tag in ["ra", "rb", "rc"] {
        assert_eq!(
            desc(&end, &format!("uid={tag}0,{PEOPLE}")).as_deref(),
            Some("changed")
        );
    }
    // Quiet: every server's contextCSN settles on the same three values, and stays.
    let mut settled = false;
    for _ in 0..MAX_POLLS {
        let (x, y, z) = (a.context_csn(), b.context_csn(), c.context_csn());
        if x.len() == 3 && x == y && y == z {
            settled = true;
            break;
        }
        std::thread::sleep(POLL_PAUSE);
    }
    assert!(settled, "contextCSN did not settle");
    let before = a.context_csn();
    let again = converge("ring of three, quiet", &[&a, &b, &c]).1;
    assert_eq!(again, end, "nothing changed once quiet");
    assert_eq!(a.context_csn(), before, "no change circulates once quiet");
}
