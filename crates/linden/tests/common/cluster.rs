//! Helpers of the multi-process replication tests (`replication.rs`, `multi_provider.rs`):
//! real `linden serve` processes on loopback, each reached by the others through a TCP proxy of
//! the test (`Link`) that can be cut, and convergence awaited by polling every server (bounded
//! in count) and comparing all entries (DN, attributes, entryUUID, entryCSN).
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test; each test file uses part of it"
)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldap3::{LdapConn, LdapConnSettings, Mod, Scope, SearchEntry};

pub const SUFFIX: &str = "dc=example,dc=com";
pub const ADMIN: &str = "cn=admin,dc=example,dc=com";
pub const PEOPLE: &str = "ou=people,dc=example,dc=com";
pub const GROUPS: &str = "ou=groups,dc=example,dc=com";
/// Polls of two directories before convergence is declared failed (each poll reads both).
pub const MAX_POLLS: u32 = 600;
/// Between two polls: a poll reads every entry, so this only spaces them out.
pub const POLL_PAUSE: Duration = Duration::from_millis(25);
pub const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Attributes each server computes or keeps for itself: not compared.
pub const LOCAL: [&str; 5] = [
    "contextcsn",
    "entrydn",
    "hassubordinates",
    "numsubordinates",
    "subschemasubentry",
];

/// A TCP proxy to a server, which the test can cut and restore. Its port is fixed when it
/// is made; the server behind it may change (a restarted server listens on a new port).
pub struct Link {
    port: u16,
    target: Arc<Mutex<Option<SocketAddr>>>,
    open: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Link {
    pub fn new() -> Link {
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

    pub fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    pub fn point_to(&self, addr: SocketAddr) {
        *self.target.lock().expect("lock") = Some(addr);
    }

    /// Closes every connection through the link and refuses new ones until `restore`.
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for s in self.streams.lock().expect("lock").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    pub fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

/// One server of a test: its data directory, configuration and the link others reach it by.
pub struct Node {
    pub name: String,
    pub dir: PathBuf,
    pub link: Link,
    pub proc: Option<Proc>,
}

/// A running `linden serve`; killed (SIGKILL) when dropped.
pub struct Proc {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Node {
    pub fn new(root: &Path, name: &str) -> Node {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        Node {
            name: name.into(),
            dir,
            link: Link::new(),
            proc: None,
        }
    }

    pub fn config(&self) -> PathBuf {
        self.dir.join("linden.toml")
    }

    /// Writes the configuration: `sid`, a provider if `provider`, one of several if `multi`,
    /// and a consumer of each of `from` (rid = the position + 1 of the node in the test).
    pub fn configure(&self, sid: u16, provider: bool, multi: bool, from: &[(u16, &Node)]) {
        self.configure_with(sid, provider, multi, from, "");
    }

    /// `configure`, with `extra` TOML lines for the top level (e.g. smaller provider limits).
    pub fn configure_with(
        &self,
        sid: u16,
        provider: bool,
        multi: bool,
        from: &[(u16, &Node)],
        extra: &str,
    ) {
        let mut t = format!(
            "data = {:?}\nsuffix = \"{SUFFIX}\"\nserver_id = {sid}\nsyncprov = {provider}\nmulti_provider = {multi}\nlog_level = \"info\"\n{extra}",
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

    pub fn start(&mut self) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_linden"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(self.config())
            .args(["--admin-password", "secret"]);
        let (child, addr, stderr) = crate::common::serve::spawn_listening(&mut cmd, &self.name);
        self.link.point_to(addr);
        self.proc = Some(Proc {
            child,
            addr,
            stderr,
        });
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.child.kill().expect("SIGKILL");
            p.child.wait().expect("wait");
        }
    }

    pub fn url(&self) -> String {
        format!("ldap://{}", self.proc.as_ref().expect("running").addr)
    }

    pub fn log(&self) -> String {
        self.proc
            .as_ref()
            .map(|p| p.stderr.lock().expect("lock").join("\n"))
            .unwrap_or_default()
    }

    pub fn admin(&self) -> LdapConn {
        admin(&self.url())
    }

    /// Every entry (DN lower-cased → attributes, names lower-cased, values sorted), local
    /// attributes left out; none when the suffix entry itself is gone.
    pub fn contents(&self) -> Contents {
        let mut c = self.admin();
        let mut out = Contents::new();
        let r = c
            .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["*", "+"])
            .expect("search");
        if r.1.rc == 32 {
            return out;
        }
        let (found, _) = r.success().expect("search result");
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

    pub fn context_csn(&self) -> Vec<String> {
        crate::common::context_csn(self.admin(), SUFFIX)
    }
}

pub type Contents = BTreeMap<String, BTreeMap<String, Vec<String>>>;

pub fn admin(url: &str) -> LdapConn {
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
pub fn converge(what: &str, nodes: &[&Node]) -> (Duration, Contents) {
    converge_within(what, nodes, MAX_POLLS, None)
}

/// `converge`, giving up after `polls` polls or, with `deadline`, once that much time passed.
pub fn converge_within(
    what: &str,
    nodes: &[&Node],
    polls: u32,
    deadline: Option<Duration>,
) -> (Duration, Contents) {
    let start = Instant::now();
    let mut last = Vec::new();
    for _ in 0..polls {
        if deadline.is_some_and(|d| start.elapsed() > d) {
            break;
        }
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
    panic!(
        "{what}: no convergence after {} ms{why}",
        start.elapsed().as_millis()
    );
}

pub fn person_ldif(uid: &str, parent: &str, n: usize) -> String {
    format!(
        "dn: uid={uid},{parent}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: Person {n}\nsn: Number{n}\nmail: {uid}@example.com\ndescription: v0\n\n"
    )
}

pub fn add_person(
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

pub fn ok(r: ldap3::result::Result<ldap3::LdapResult>, what: &str) {
    let r = r.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(r.rc, 0, "{what}: {r:?}");
}

pub fn set_desc(c: &mut LdapConn, dn: &str, v: &str) -> ldap3::result::Result<ldap3::LdapResult> {
    c.modify(
        dn,
        vec![Mod::Replace("description", [v].into_iter().collect())],
    )
}

pub fn desc(contents: &Contents, dn: &str) -> Option<String> {
    contents
        .get(&dn.to_ascii_lowercase())
        .and_then(|a| a.get("description"))
        .and_then(|v| v.first().cloned())
}

/// The base of every multi-provider test: two organisational units on the first node.
pub fn base_units(c: &mut LdapConn) {
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

/// Imports the suffix, `ou=people`, `ou=groups` and `n` people into `node`'s data directory
/// with `linden import` (the server stopped): every entry gets the same entryCSN.
pub fn import_people(node: &Node, n: usize) {
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\ndn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n\ndn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups\n\n"
    );
    for i in 0..n {
        ldif.push_str(&person_ldif(&format!("p{i}"), PEOPLE, i));
    }
    let src = node.dir.join("people.ldif");
    std::fs::write(&src, ldif).expect("write ldif");
    let out = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args(["import", "--config"])
        .arg(node.config())
        .arg(&src)
        .output()
        .expect("import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How many entries `node` holds (no attributes read); `None` while it does not answer.
pub fn count(node: &Node) -> Option<usize> {
    let settings = LdapConnSettings::new().set_conn_timeout(OP_TIMEOUT);
    let mut c = LdapConn::with_settings(settings, &node.url()).ok()?;
    c.with_timeout(OP_TIMEOUT);
    c.simple_bind(ADMIN, "secret").ok()?.success().ok()?;
    let (found, _) = c
        .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["1.1"])
        .ok()?
        .success()
        .ok()?;
    let _ = c.unbind();
    Some(found.len())
}
