//! Point-in-time recovery (issue 30): a server archives its snapshots and sealed transaction
//! logs (`archive`, `archive_interval = 1`), and `linden restore` builds data directories from
//! the archive that a new server then serves.
//!
//! - A restore to the moment before a subtree delete (the moment taken from the server's own
//!   answers: the newest entryCSN before the delete, and that CSN's time) equals the state at
//!   that moment, entry by entry (DN, attributes, entryUUID, entryCSN …).
//! - After kill -9, a restore to the latest point holds every write the archive had taken
//!   (the test waits until cn=Archive,cn=Monitor says no batch waits, then kills).
//! - Retention keeps `archive_keep_snapshots` snapshots and the logs after the oldest.
//!
//! Nothing waits for a time assumed long enough: the archive's progress is polled from
//! cn=Monitor with a generous deadline.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use cluster::*;
use common::linden;
use ldap3::{LdapConn, Scope, SearchEntry};

/// How long the archive may take to catch up (it seals every second).
const ARCHIVE_DEADLINE: Duration = Duration::from_secs(60);

fn archive_url(root: &Path) -> String {
    format!("file://{}", root.join("archive").display())
}

/// A node archiving to `root/archive`, sealing its log every second.
fn archiving_node(root: &Path, name: &str, extra: &str) -> Node {
    let n = Node::new(root, name);
    n.configure_with(
        1,
        false,
        false,
        &[],
        &format!(
            "archive = \"{}\"\narchive_interval = 1\n{extra}",
            archive_url(root)
        ),
    );
    n
}

/// cn=<name>,cn=Archive,cn=Monitor: its monitorCounter.
fn archive_counter(c: &mut LdapConn, name: &str) -> Option<u64> {
    let (found, _) = c
        .search(
            &format!("cn={name},cn=Archive,cn=Monitor"),
            Scope::Base,
            "(objectClass=*)",
            vec!["monitorCounter"],
        )
        .ok()?
        .success()
        .ok()?;
    let e = SearchEntry::construct(found.into_iter().next()?);
    e.attrs.get("monitorCounter")?.first()?.parse().ok()
}

/// Waits until the archive holds every batch written so far (cn=Lag Batches is 0, and the
/// last batch archived is at least `min_batch`): returns the last batch archived.
fn wait_archived(node: &Node, min_batch: u64) -> u64 {
    let mut c = node.admin();
    let start = Instant::now();
    loop {
        let lag = archive_counter(&mut c, "Lag Batches");
        let last = archive_counter(&mut c, "Last Batch").unwrap_or(0);
        if lag == Some(0) && last >= min_batch {
            return last;
        }
        assert!(
            start.elapsed() < ARCHIVE_DEADLINE,
            "the archive did not catch up within {ARCHIVE_DEADLINE:?} (lag {lag:?}, last batch {last}); log:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `linden restore --archive URL --data DIR ARGS…`; panics with its output on failure.
fn restore(root: &Path, dir: &Path, args: &[&str]) -> String {
    let url = archive_url(root);
    let d = dir.to_str().expect("path");
    let mut all = vec!["restore", "--archive", url.as_str(), "--data", d];
    all.extend_from_slice(args);
    let (code, out, err) = linden(&all);
    assert_eq!(code, 0, "linden {all:?}: {out}{err}");
    assert!(out.contains("verify: ok"), "{out}");
    assert!(out.contains("restore took"), "prints its timing: {out}");
    out
}

/// Starts a node on a data directory restored into `root/name/data` and reads every entry.
fn serve_restored(root: &Path, name: &str) -> (Node, Contents) {
    let mut n = Node::new(root, name);
    n.configure(1, false, false, &[]);
    n.start();
    let c = n.contents();
    (n, c)
}

/// The newest entryCSN among `contents`.
fn newest_csn(contents: &Contents) -> String {
    contents
        .values()
        .filter_map(|a| a.get("entrycsn"))
        .flatten()
        .max()
        .cloned()
        .expect("an entryCSN")
}

/// The time of a CSN (`20261128101400.123456Z#…`) as RFC 3339.
fn csn_time(csn: &str) -> String {
    let t = &csn[..21];
    format!(
        "{}-{}-{}T{}:{}:{}{}Z",
        &t[0..4],
        &t[4..6],
        &t[6..8],
        &t[8..10],
        &t[10..12],
        &t[12..14],
        &t[14..21]
    )
}

/// Timed writes, a subtree delete, more writes; restores to the moment before the delete
/// (by CSN and by time) hold exactly the entries of that moment; a restore to the latest
/// point holds the final state.
#[test]
fn restore_to_the_moment_before_a_subtree_delete() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let mut a = archiving_node(root, "a", "");
    a.start();
    let mut c = a.admin();
    base_units(&mut c);
    for i in 0..6 {
        ok(
            add_person(&mut c, &format!("u{i}"), PEOPLE, "v0"),
            "add person",
        );
    }
    for i in 0..3 {
        ok(
            set_desc(&mut c, &format!("uid=u{i},{PEOPLE}"), "v1"),
            "modify",
        );
    }
    // One archived file before the delete, to restore across files.
    wait_archived(&a, 1);
    ok(add_person(&mut c, "g0", GROUPS, "v0"), "add under groups");
    let before = a.contents();
    let csn = newest_csn(&before);
    // The accidental delete of the whole subtree, then life goes on.
    for i in 0..6 {
        ok(c.delete(&format!("uid=u{i},{PEOPLE}")), "delete person");
    }
    ok(c.delete(PEOPLE), "delete ou=people");
    ok(
        add_person(&mut c, "g1", GROUPS, "v0"),
        "add after the delete",
    );
    ok(
        set_desc(&mut c, &format!("uid=g0,{GROUPS}"), "v2"),
        "modify after",
    );
    let after = a.contents();
    assert!(!after.contains_key(&PEOPLE.to_ascii_lowercase()));
    wait_archived(&a, 1);

    let out = restore(root, &root.join("by-csn/data"), &["--to-csn", &csn]);
    println!("{out}");
    let (_n1, got) = serve_restored(root, "by-csn");
    assert_eq!(got, before, "restore --to-csn {csn}");

    let when = csn_time(&csn);
    restore(root, &root.join("by-time/data"), &["--to", &when]);
    let (_n2, got) = serve_restored(root, "by-time");
    assert_eq!(got, before, "restore --to {when}");

    restore(root, &root.join("latest/data"), &[]);
    let (_n3, got) = serve_restored(root, "latest");
    assert_eq!(got, after, "restore to the latest point");

    let (code, list, err) = linden(&["archive", "list", "--archive", &archive_url(root)]);
    assert_eq!(code, 0, "{list}{err}");
    assert!(list.contains("restore points: batch 0 to batch"), "{list}");

    // A directory that is not empty is never written over.
    let (code, _, err) = linden(&[
        "restore",
        "--archive",
        &archive_url(root),
        "--data",
        root.join("latest/data").to_str().expect("path"),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("not empty"), "{err}");
}

/// kill -9 once the archive holds every write: the latest restore point holds them all.
/// With two snapshots taken and `archive_keep_snapshots = 1`, only the newest stays, with
/// the logs after it, and the restore starts from it.
#[test]
fn restore_after_kill_9_holds_every_archived_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let mut a = archiving_node(root, "a", "archive_keep_snapshots = 1\n");
    a.start();
    let mut c = a.admin();
    base_units(&mut c);
    let snapshot = |a: &Node| {
        let (code, out, err) = linden(&[
            "snapshot",
            "--url",
            &a.url(),
            "--bind-dn",
            ADMIN,
            "--password",
            "secret",
        ]);
        assert_eq!(code, 0, "snapshot: {out}{err}");
    };
    for round in 0..3 {
        for i in 0..4 {
            ok(
                add_person(&mut c, &format!("r{round}p{i}"), PEOPLE, "v0"),
                "add",
            );
        }
        if round < 2 {
            snapshot(&a);
        }
    }
    ok(
        set_desc(&mut c, &format!("uid=r0p0,{PEOPLE}"), "last"),
        "modify",
    );
    let want = a.contents();
    wait_archived(&a, 1);
    a.kill();

    let archived: Vec<String> = std::fs::read_dir(root.join("archive"))
        .expect("archive dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let snaps = archived.iter().filter(|n| n.ends_with(".lns")).count();
    assert_eq!(snaps, 1, "retention keeps one snapshot: {archived:?}");

    let out = restore(root, &root.join("r/data"), &[]);
    assert!(
        out.contains("snapshot snap-"),
        "starts from the snapshot: {out}"
    );
    let (_r, got) = serve_restored(root, "r");
    assert_eq!(got, want);
}

/// A provider restored to an earlier moment: its consumer, whose cookie names changes the
/// restored provider no longer has (an add, a modify and a delete after the point), does a
/// full refresh and converges to the restored content (without the new identity the
/// consumer's cookie is "up to date" and it keeps the entries the provider lost).
#[test]
fn a_consumer_of_a_restored_provider_converges_to_the_restored_content() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let mut p = Node::new(root, "p");
    p.configure_with(
        1,
        true,
        false,
        &[],
        &format!(
            "archive = \"{}\"\narchive_interval = 1\n",
            archive_url(root)
        ),
    );
    p.start();
    let mut c = Node::new(root, "c");
    c.configure(2, false, false, &[(1, &p)]);
    c.start();
    let mut w = p.admin();
    base_units(&mut w);
    for i in 0..4 {
        ok(add_person(&mut w, &format!("u{i}"), PEOPLE, "v0"), "add");
    }
    let before = p.contents();
    let point = newest_csn(&before);
    // After the point: a new entry, a modify, a delete.
    ok(add_person(&mut w, "late", PEOPLE, "v0"), "add late");
    ok(
        set_desc(&mut w, &format!("uid=u1,{PEOPLE}"), "v9"),
        "modify",
    );
    ok(w.delete(&format!("uid=u2,{PEOPLE}")), "delete");
    converge("consumer before the restore", &[&p, &c]);
    wait_archived(&p, 1);
    p.kill();

    // The provider's directory is replaced by the archive's state at the point.
    std::fs::rename(p.dir.join("data"), p.dir.join("data.lost")).expect("move");
    let out = restore(root, &p.dir.join("data"), &["--to-csn", &point]);
    assert!(out.contains("new replication identity"), "{out}");
    p.start();
    // The restore stamps every entry anew (entryCSN): the rest is the content at the point.
    let without_csn = |mut c: Contents| {
        for attrs in c.values_mut() {
            attrs.remove("entrycsn");
        }
        c
    };
    let before = without_csn(before);
    assert_eq!(without_csn(p.contents()), before, "the restored provider");
    let (_, got) = converge("consumer after the restore", &[&p, &c]);
    assert_eq!(
        without_csn(got),
        before,
        "the consumer holds the restored content"
    );
}

/// An archive that cannot be written (its path is a file) fails, is counted in cn=Monitor and
/// retried, and the server goes on taking writes; a snapshot meanwhile keeps the log files the
/// archive does not hold; once the path is usable, the archive catches up, and the latest
/// restore point holds every write.
#[test]
fn an_unusable_archive_is_retried_and_nothing_is_lost() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    std::fs::write(root.join("archive"), "not a directory").expect("block the archive");
    let mut a = archiving_node(root, "a", "");
    a.start();
    let mut c = a.admin();
    base_units(&mut c);
    ok(add_person(&mut c, "early", PEOPLE, "v0"), "add");
    let at_early = a.contents();
    let early = newest_csn(&at_early);
    // Failures are counted while writes go on.
    let start = Instant::now();
    while archive_counter(&mut c, "Failures").unwrap_or(0) < 2 {
        assert!(
            start.elapsed() < ARCHIVE_DEADLINE,
            "no failure counted; log:\n{}",
            a.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    ok(
        add_person(&mut c, "during", PEOPLE, "v0"),
        "add while failing",
    );
    // Once the log file holding these writes is sealed (a newer one follows), a snapshot
    // could prune it: it must stay until it is archived.
    let logs = || {
        std::fs::read_dir(a.dir.join("data"))
            .expect("data dir")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".lnl"))
            })
            .count()
    };
    let start = Instant::now();
    while logs() < 2 {
        assert!(start.elapsed() < ARCHIVE_DEADLINE, "no log file sealed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, out, err) = linden(&[
        "snapshot",
        "--url",
        &a.url(),
        "--bind-dn",
        ADMIN,
        "--password",
        "secret",
    ]);
    assert_eq!(code, 0, "snapshot: {out}{err}");
    assert!(a.log().contains("archiving failed"), "{}", a.log());
    std::fs::remove_file(root.join("archive")).expect("unblock the archive");
    ok(add_person(&mut c, "after", PEOPLE, "v0"), "add after");
    let want = a.contents();
    wait_archived(&a, 1);
    a.kill();
    restore(root, &root.join("r/data"), &[]);
    let (_r, got) = serve_restored(root, "r");
    assert_eq!(got, want);
    // The batches before the snapshot reached the archive too (the snapshot did not prune
    // them before they were archived).
    restore(root, &root.join("e/data"), &["--to-csn", &early]);
    let (_e, got) = serve_restored(root, "e");
    assert_eq!(got, at_early);
}

/// Attributes a put-back entry may have anew: its change is stamped by the server that makes
/// it (entryCSN), and the memberOf overlay stamps the members whose memberOf it sets again.
const RESTAMPED: [&str; 3] = ["entrycsn", "modifiersname", "modifytimestamp"];

fn without_restamps(attrs: &std::collections::BTreeMap<String, Vec<String>>) -> String {
    let mut a = attrs.clone();
    for k in RESTAMPED {
        a.remove(k);
    }
    format!("{a:?}")
}

/// `linden restore --archive … --to-csn POINT --subtree ou=people --into URL …`: exit status,
/// standard output and error.
fn undo(
    root: &Path,
    point: &str,
    into: &str,
    bind: &str,
    pw: &str,
    more: &[&str],
) -> (i32, String, String) {
    let pw_file = root.join(format!("pw-{}", pw));
    std::fs::write(&pw_file, format!("{pw}\n")).expect("password file");
    let url = archive_url(root);
    let mut all = vec![
        "restore",
        "--archive",
        url.as_str(),
        "--to-csn",
        point,
        "--subtree",
        PEOPLE,
        "--into",
        into,
        "--bind-dn",
        bind,
        "--password-file",
        pw_file.to_str().expect("path"),
    ];
    all.extend_from_slice(more);
    let (code, out, err) = linden(&all);
    println!("linden {all:?}:\n{out}{err}");
    (code, out, err)
}

/// The undo of an accidental subtree delete on a running server (memberOf and refint on):
/// people under ou=people (one level deeper too), a group outside the subtree naming some of
/// them. After a subtree delete (refint takes them out of the group), `restore --subtree
/// --into` as the administrator puts every entry back with its DN, attributes and entryUUID,
/// the group's member values back and each person's memberOf with them; a consumer of the
/// server converges to it; a second run finds everything present; a non-administrator is
/// refused with the server's message; a dry run writes nothing.
#[test]
fn a_deleted_subtree_is_put_back_into_the_running_server() {
    use ldap3::controls::RawControl;
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let mut p = Node::new(root, "p");
    p.configure_with(
        1,
        true,
        false,
        &[],
        &format!(
            "archive = \"{}\"\narchive_interval = 1\nmemberof = true\nrefint = [\"member\"]\n",
            archive_url(root)
        ),
    );
    p.start();
    let mut c = Node::new(root, "c");
    c.configure(2, false, false, &[(1, &p)]);
    c.start();
    let mut w = p.admin();
    base_units(&mut w);
    let staff = format!("ou=staff,{PEOPLE}");
    ok(
        w.add(
            &staff,
            vec![
                ("objectClass", ["organizationalUnit"].into()),
                ("ou", ["staff"].into()),
            ],
        ),
        "add ou=staff",
    );
    for i in 0..3 {
        ok(
            add_person(&mut w, &format!("u{i}"), PEOPLE, "v0"),
            "add person",
        );
    }
    ok(add_person(&mut w, "s0", &staff, "v0"), "add person below");
    ok(add_person(&mut w, "g0", GROUPS, "v0"), "add person outside");
    ok(
        w.modify(
            &format!("uid=g0,{GROUPS}"),
            vec![ldap3::Mod::Replace("userPassword", ["g0-secret"].into())],
        ),
        "password of g0",
    );
    let team = format!("cn=team,{GROUPS}");
    let members = [
        format!("uid=u0,{PEOPLE}"),
        format!("uid=u1,{PEOPLE}"),
        format!("uid=s0,{staff}"),
        format!("uid=g0,{GROUPS}"),
    ];
    ok(
        w.add(
            &team,
            vec![
                ("objectClass", ["groupOfNames"].into()),
                ("cn", ["team"].into()),
                ("member", members.iter().map(String::as_str).collect()),
            ],
        ),
        "add group",
    );
    let before = p.contents();
    let point = newest_csn(&before);
    let u0 = format!("uid=u0,{PEOPLE}").to_ascii_lowercase();
    assert_eq!(
        before[&u0].get("memberof"),
        Some(&vec![team.clone()]),
        "memberOf is on: {:?}",
        before[&u0]
    );

    // The accidental delete (Subtree Delete control), then life goes on.
    let r = w
        .with_controls(RawControl {
            ctype: "1.2.840.113556.1.4.805".into(),
            crit: true,
            val: None,
        })
        .delete(PEOPLE);
    ok(r, "subtree delete");
    ok(
        set_desc(&mut w, &format!("uid=g0,{GROUPS}"), "later"),
        "modify after",
    );
    let after = p.contents();
    assert_eq!(
        after[&team.to_ascii_lowercase()]["member"],
        vec![format!("uid=g0,{GROUPS}")],
        "refint took the deleted people out of the group"
    );
    wait_archived(&p, 1);

    // A non-administrator is refused by the server, with its message.
    let g0 = format!("uid=g0,{GROUPS}");
    let (code, out, _) = undo(root, &point, &p.url(), &g0, "g0-secret", &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("refused {PEOPLE}: insufficientAccessRights (50)"))
            && out.contains("Relax Rules"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "skipped uid=u0,{PEOPLE}: its superior was not put back"
        )),
        "{out}"
    );
    // A dry run writes nothing.
    let (code, out, _) = undo(root, &point, &p.url(), ADMIN, "secret", &["--dry-run"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("would add uid=s0,{staff}")), "{out}");
    assert!(
        out.contains(&format!("would re-link {team}: member += ")),
        "{out}"
    );
    assert!(
        out.contains("dry run, nothing written: would add 6 entries"),
        "{out}"
    );
    assert!(!p.contents().contains_key(&u0), "the dry run wrote nothing");

    // The undo, as the administrator.
    let (code, out, err) = undo(root, &point, &p.url(), ADMIN, "secret", &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("added uid=u0,{PEOPLE} (entryUUID ")),
        "{out}"
    );
    assert!(
        out.contains(&format!("re-linked {team}: member += ")),
        "{out}"
    );
    assert!(
        out.contains(
            "added 6 entries, 0 present, re-linked 1 groups (3 values), 0 skipped, 0 refused"
        ),
        "{out}"
    );
    let now = p.contents();
    for (dn, attrs) in before
        .iter()
        .filter(|(dn, _)| dn.ends_with(&PEOPLE.to_ascii_lowercase()))
    {
        let got = now.get(dn).unwrap_or_else(|| panic!("{dn} is back"));
        assert_eq!(without_restamps(got), without_restamps(attrs), "{dn}");
        assert_eq!(got.get("entryuuid"), attrs.get("entryuuid"), "{dn}");
    }
    assert_eq!(
        now[&team.to_ascii_lowercase()]["member"],
        before[&team.to_ascii_lowercase()]["member"],
        "the group's members are back"
    );
    for m in &members {
        assert_eq!(
            now[&m.to_ascii_lowercase()].get("memberof"),
            Some(&vec![team.clone()]),
            "memberOf of {m}"
        );
    }
    // The consumer takes the undo as any change: the same entries, entryUUIDs included.
    let (_, got) = converge("consumer after the undo", &[&p, &c]);
    assert_eq!(got, now);

    // A second run: every entry present, nothing to re-link.
    let (code, out, err) = undo(root, &point, &p.url(), ADMIN, "secret", &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("added 0 entries, 6 present, re-linked 0 groups"),
        "{out}"
    );
    assert!(
        out.contains(&format!("present uid=u0,{PEOPLE}: left as it is")),
        "{out}"
    );
    assert_eq!(p.contents(), now, "the second run changed nothing");
}
