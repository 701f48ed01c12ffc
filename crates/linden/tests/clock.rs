//! The CSN clock over real processes (issue 26): a server restarted with its system clock a day
//! behind, and a multi-provider peer whose clock is a day behind the other's. The clock is set
//! back with libfaketime (Debian package `faketime`, which scripts/install-test-deps.sh
//! installs) preloaded into `linden serve`: it fakes the wall clock Rust's `SystemTime` reads
//! (clock_gettime(CLOCK_REALTIME)) and, with FAKETIME_DONT_FAKE_MONOTONIC=1, leaves the
//! monotonic clock of tokio's timers alone. They are ignored unless run with
//! `LINDEN_TEST_FAKETIME=1 cargo test -p linden --test clock -- --ignored`, which scripts/test.sh
//! does after installing faketime; opted in, a missing library is a failure.
//!
//! Waiting is polling a condition with a bounded count; no sleep orders events.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::csn_of_sid;
use common::serve::spawn_listening;
use ldap3::{LdapConn, LdapConnSettings, Mod, Scope, SearchEntry};

const SUFFIX: &str = "dc=example,dc=com";
const ADMIN: &str = "cn=admin,dc=example,dc=com";
const PEOPLE: &str = "ou=people,dc=example,dc=com";
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Polls before a wait is declared failed, and the pause between two.
const MAX_POLLS: u32 = 600;
const POLL_PAUSE: Duration = Duration::from_millis(25);
/// How far behind the clock of a faked server is.
const A_DAY_BEHIND: &str = "-1d";

/// libfaketime's multi-threaded variant, where Debian puts it (any architecture), for test
/// `test` if it runs: opted in with `LINDEN_TEST_FAKETIME=1`, and then the library must be there.
fn libfaketime(test: &str) -> Option<PathBuf> {
    if std::env::var("LINDEN_TEST_FAKETIME").as_deref() != Ok("1") {
        eprintln!("skipped: {test} runs with LINDEN_TEST_FAKETIME=1 (see its #[ignore] reason)");
        return None;
    }
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|d| d.path().join("faketime/libfaketimeMT.so.1"))
        .chain([PathBuf::from("/usr/lib/faketime/libfaketimeMT.so.1")])
        .find(|p| p.is_file());
    assert!(
        found.is_some(),
        "LINDEN_TEST_FAKETIME=1 but libfaketime is not installed: install Debian's faketime \
         (scripts/install-test-deps.sh)"
    );
    found
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

impl Proc {
    /// Starts `linden serve` with the configuration file `config`, its clock moved by
    /// `offset` (libfaketime's FAKETIME, e.g. "-1d") when given.
    fn start(config: &Path, offset: Option<(&Path, &str)>) -> Proc {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_linden"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .args(["--admin-password", "secret"]);
        if let Some((lib, offset)) = offset {
            cmd.env("LD_PRELOAD", lib)
                .env("FAKETIME", offset)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let (child, addr, stderr) = spawn_listening(&mut cmd, "linden serve");
        Proc {
            child,
            addr,
            stderr,
        }
    }

    fn url(&self) -> String {
        format!("ldap://{}", self.addr)
    }

    fn log(&self) -> String {
        self.stderr.lock().expect("lock").join("\n")
    }

    fn admin(&self) -> LdapConn {
        let settings = LdapConnSettings::new().set_conn_timeout(OP_TIMEOUT);
        let mut c = LdapConn::with_settings(settings, &self.url()).expect("connect");
        c.with_timeout(OP_TIMEOUT);
        c.simple_bind(ADMIN, "secret")
            .expect("bind")
            .success()
            .expect("bind result");
        c
    }

    /// Every entry's DN (lower-cased) → its description and entryCSN.
    fn entries(&self) -> BTreeMap<String, (Option<String>, String)> {
        let mut c = self.admin();
        let (found, _) = c
            .search(
                SUFFIX,
                Scope::Subtree,
                "(objectClass=*)",
                vec!["description", "entryCSN"],
            )
            .expect("search")
            .success()
            .expect("search result");
        let _ = c.unbind();
        found
            .into_iter()
            .map(SearchEntry::construct)
            .map(|e| {
                let first = |a: &str| e.attrs.get(a).and_then(|v| v.first().cloned());
                let csn = first("entryCSN").expect("every entry has an entryCSN");
                (e.dn.to_ascii_lowercase(), (first("description"), csn))
            })
            .collect()
    }

    /// The contextCSN values of the suffix entry.
    fn context_csn(&self) -> Vec<String> {
        common::context_csn(self.admin(), SUFFIX)
    }
}

/// Writes a configuration: server id `sid`, the provider on, `multi` for multi-provider, a
/// consumer of `provider` (rid 1) when given.
fn configure(dir: &Path, sid: u16, multi: bool, provider: Option<&str>) -> PathBuf {
    let mut t = format!(
        "data = {:?}\nsuffix = \"{SUFFIX}\"\nserver_id = {sid}\nsyncprov = true\nmulti_provider = {multi}\nlog_level = \"info\"\n",
        dir.join("data").to_str().expect("path")
    );
    if let Some(url) = provider {
        t.push_str(&format!(
            "\n[[syncrepl]]\nprovider = \"{url}\"\nrid = 1\nsearch_base = \"{SUFFIX}\"\nretry = \"1 +\"\nbind_dn = \"{ADMIN}\"\nbind_password = \"secret\"\n"
        ));
    }
    std::fs::create_dir_all(dir).expect("mkdir");
    let path = dir.join("linden.toml");
    std::fs::write(&path, t).expect("write config");
    path
}

fn ok(r: ldap3::result::Result<ldap3::LdapResult>, what: &str) {
    let r = r.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(r.rc, 0, "{what}: {r:?}");
}

fn add_people(c: &mut LdapConn, uids: &[&str]) {
    ok(
        c.add(
            PEOPLE,
            vec![
                ("objectClass", ["organizationalUnit"].into()),
                ("ou", ["people"].into()),
            ],
        ),
        "add ou",
    );
    for uid in uids {
        ok(
            c.add(
                &person(uid),
                vec![
                    ("objectClass", ["inetOrgPerson"].into()),
                    ("uid", [*uid].into()),
                    ("cn", [*uid].into()),
                    ("sn", ["Person"].into()),
                    ("description", ["v0"].into()),
                ],
            ),
            "add person",
        );
    }
}

fn person(uid: &str) -> String {
    format!("uid={uid},{PEOPLE}")
}

fn set_desc(c: &mut LdapConn, dn: &str, v: &str) {
    ok(
        c.modify(dn, vec![Mod::Replace("description", [v].into())]),
        "modify",
    );
}

/// Polls until `done` holds, at most `MAX_POLLS` times; panics with `what` and `log` if not.
fn wait_until(what: &str, log: impl Fn() -> String, mut done: impl FnMut() -> bool) {
    for _ in 0..MAX_POLLS {
        if done() {
            return;
        }
        std::thread::sleep(POLL_PAUSE);
    }
    panic!("{what}: not after {MAX_POLLS} polls; log:\n{}", log());
}

/// A provider stopped and started again with its clock a day behind: its next change gets an
/// entryCSN after every stored one (not a day older), contextCSN moves, the log says how far
/// behind the clock is, and a consumer resuming with its cookie from before gets the change.
#[test]
#[ignore = "needs libfaketime (Debian's faketime); run with LINDEN_TEST_FAKETIME=1"]
fn a_provider_restarted_with_its_clock_a_day_behind_stamps_after_what_it_holds() {
    let Some(lib) =
        libfaketime("a_provider_restarted_with_its_clock_a_day_behind_stamps_after_what_it_holds")
    else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tmp");
    let pconf = configure(&tmp.path().join("provider"), 1, false, None);
    let mut p = Proc::start(&pconf, None);
    add_people(&mut p.admin(), &["ann", "bob", "cid"]);
    set_desc(&mut p.admin(), &person("bob"), "v1");
    // A consumer follows, then stops with its cookie (the provider's contextCSN).
    let cdir = tmp.path().join("consumer");
    let c = Proc::start(&configure(&cdir, 2, false, Some(&p.url())), None);
    let held = p.entries();
    wait_until("the consumer's refresh", || c.log(), || c.entries() == held);
    drop(c);
    let stored_context = csn_of_sid(&p.context_csn(), "001").expect("contextCSN of sid 001");
    let newest_stored = held
        .values()
        .map(|(_, csn)| csn.clone())
        .chain([stored_context.clone()])
        .max()
        .expect("stored CSNs");
    drop(p);
    // Back a day behind: the clock may not take the CSNs back with it.
    p = Proc::start(&pconf, Some((&lib, A_DAY_BEHIND)));
    set_desc(&mut p.admin(), &person("ann"), "after the restart");
    // The pass over the stored entries runs beside the start and says how far behind it is.
    wait_until(
        "the skew is logged",
        || p.log(),
        || p.log().contains("behind the newest stored change"),
    );
    let now = p.entries();
    let (desc, csn) = &now[&person("ann").to_ascii_lowercase()];
    assert_eq!(desc.as_deref(), Some("after the restart"));
    assert!(
        *csn > newest_stored,
        "the change's entryCSN {csn} sorts after every stored CSN (newest {newest_stored})"
    );
    // The server's clock really is a day behind: the change's modifyTimestamp (the clock's
    // time, not the CSN's) is before the newest stored change.
    let mut admin = p.admin();
    let (found, _) = admin
        .search(
            &person("ann"),
            Scope::Base,
            "(objectClass=*)",
            vec!["modifyTimestamp"],
        )
        .expect("search")
        .success()
        .expect("search result");
    let stamp = SearchEntry::construct(found.into_iter().next().expect("ann"))
        .attrs
        .get("modifyTimestamp")
        .and_then(|v| v.first().cloned())
        .expect("modifyTimestamp");
    assert!(
        stamp[..14] < newest_stored[..14],
        "modifyTimestamp {stamp} is the faked clock's, before {newest_stored}"
    );
    let context = csn_of_sid(&p.context_csn(), "001").expect("contextCSN of sid 001");
    assert!(
        context > stored_context && context >= *csn,
        "contextCSN moved: {stored_context} → {context} (entryCSN {csn})"
    );
    // The consumer resumes with its cookie from before the restart and gets the change.
    let c = Proc::start(&configure(&cdir, 2, false, Some(&p.url())), None);
    wait_until(
        "the consumer resuming with its old cookie gets the change",
        || c.log(),
        || c.entries() == now,
    );
}

/// Two providers, one with its clock a day behind the other's: a change replicated from the
/// one ahead moves the other's CSN clock, so a change made there afterwards sorts after it, and
/// the server ahead takes it as the later change instead of dropping it as older.
#[test]
#[ignore = "needs libfaketime (Debian's faketime); run with LINDEN_TEST_FAKETIME=1"]
fn a_change_after_a_replicated_one_from_a_clock_ahead_sorts_after_it() {
    let Some(lib) =
        libfaketime("a_change_after_a_replicated_one_from_a_clock_ahead_sorts_after_it")
    else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tmp");
    let adir = tmp.path().join("a");
    let a = Proc::start(&configure(&adir, 1, true, None), None);
    add_people(&mut a.admin(), &["ann"]);
    let ann = person("ann").to_ascii_lowercase();
    // b, a day behind, consumes a.
    let b = Proc::start(
        &configure(&tmp.path().join("b"), 2, true, Some(&a.url())),
        Some((&lib, A_DAY_BEHIND)),
    );
    let from_a = a.entries();
    wait_until("b replicates a", || b.log(), || b.entries() == from_a);
    let (_, csn_a) = &from_a[&ann];
    // A change on b of the entry a stamped (by a's clock, a day ahead of b's).
    set_desc(&mut b.admin(), &person("ann"), "from b");
    let (desc, csn_b) = b.entries()[&ann].clone();
    assert_eq!(desc.as_deref(), Some("from b"));
    assert!(
        csn_b > *csn_a,
        "b's change {csn_b} sorts after the replicated {csn_a}"
    );
    // a, now consuming b too, takes b's change as the later one: both hold it.
    drop(a);
    let a = Proc::start(&configure(&adir, 1, true, Some(&b.url())), None);
    wait_until(
        "a takes b's later change",
        || a.log(),
        || {
            a.entries()
                .get(&ann)
                .is_some_and(|(d, c)| d.as_deref() == Some("from b") && *c == csn_b)
        },
    );
    assert_eq!(a.entries(), b.entries());
}
