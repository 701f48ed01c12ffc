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

#[path = "common/cluster.rs"]
mod cluster;
mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

use cluster::*;
use common::csn_of_sid;
use ldap3::Mod;

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
