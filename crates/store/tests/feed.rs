//! The change feed: each published batch reaches subscribers with the right before/after
//! images; a subscriber that does not read is cut off (and told so) while the writer goes on;
//! dropped subscriptions leave the subscriber list.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;

mod common;

use common::{attr, ndn};
use schema::Schema;
use store::{Attr, ChangeKind, FeedEnd, Store, StoreError};

fn schema() -> Arc<Schema> {
    Arc::new(Schema::builtin())
}

fn person(s: &Schema, uid: &str, sn: &str) -> Vec<Attr> {
    vec![
        attr(s, "objectClass", &["top", "person", "inetOrgPerson"]),
        attr(s, "uid", &[uid]),
        attr(s, "cn", &[uid]),
        attr(s, "sn", &[sn]),
        attr(s, "entryUUID", &["8f0c2a52-3a4e-4d4f-9a9e-0c4a5b6d7e8f"]),
    ]
}

fn base(schema: &Arc<Schema>) -> Store {
    let store = Store::new(schema.clone(), &[]);
    let s = schema.clone();
    store
        .write_blocking(move |txn| {
            txn.add(
                "dc=example,dc=com".into(),
                ndn(&s, "dc=example,dc=com"),
                vec![
                    attr(&s, "objectClass", &["top", "domain"]),
                    attr(&s, "dc", &["example"]),
                ],
                true,
            )
        })
        .expect("writer")
        .expect("root");
    store
}

fn add(store: &Store, s: &Arc<Schema>, dn: &str) -> u32 {
    let (s, dn) = (s.clone(), dn.to_string());
    store
        .write_blocking(move |txn| {
            let uid = uid_of(&dn).to_string();
            txn.add(dn.clone(), ndn(&s, &dn), person(&s, &uid, "A"), false)
        })
        .expect("writer")
        .expect("add")
}

fn uid_of(dn: &str) -> &str {
    dn.split(',')
        .next()
        .and_then(|r| r.strip_prefix("uid="))
        .unwrap_or("x")
}

#[test]
fn add_modify_rename_delete_carry_before_and_after() {
    let s = schema();
    let store = base(&s);
    let mut sub = store.subscribe(16);
    let start = store.read().seq;

    let id = add(&store, &s, "uid=a,dc=example,dc=com");
    let b = sub.try_recv().expect("open").expect("add batch");
    assert_eq!(b.seq, start + 1);
    assert_eq!(b.changes.len(), 1);
    let c = &b.changes[0];
    assert_eq!(c.kind(), ChangeKind::Add);
    assert!(c.before.is_none());
    assert_eq!(
        c.after.as_ref().expect("after").dn(),
        "uid=a,dc=example,dc=com"
    );

    let s2 = s.clone();
    store
        .write_blocking(move |txn| txn.replace_attrs(id, person(&s2, "a", "B")))
        .expect("writer")
        .expect("modify");
    let b = sub.try_recv().expect("open").expect("modify batch");
    assert_eq!(b.seq, start + 2);
    let c = &b.changes[0];
    assert_eq!(c.kind(), ChangeKind::Modify);
    let sn = s.attr_by_name("sn").expect("sn");
    let first = |e: &store::Entry| e.attr(sn).and_then(|a| a.first()).map(<[u8]>::to_vec);
    assert_eq!(
        first(c.before.as_ref().expect("before")),
        Some(b"A".to_vec())
    );
    assert_eq!(first(c.after.as_ref().expect("after")), Some(b"B".to_vec()));

    let s2 = s.clone();
    store
        .write_blocking(move |txn| {
            let root = txn
                .version()
                .lookup(&ndn(&s2, "dc=example,dc=com"))
                .map(|e| e.id);
            txn.rename(
                id,
                "uid=b,dc=example,dc=com".into(),
                ndn(&s2, "uid=b,dc=example,dc=com"),
                root,
                person(&s2, "b", "B"),
            )
        })
        .expect("writer")
        .expect("rename");
    let b = sub.try_recv().expect("open").expect("rename batch");
    let c = &b.changes[0];
    assert_eq!(c.kind(), ChangeKind::Rename);
    assert_eq!(
        c.before.as_ref().expect("before").dn(),
        "uid=a,dc=example,dc=com"
    );
    assert_eq!(
        c.after.as_ref().expect("after").dn(),
        "uid=b,dc=example,dc=com"
    );

    store
        .write_blocking(move |txn| txn.delete(id).map(|_| ()))
        .expect("writer")
        .expect("delete");
    let b = sub.try_recv().expect("open").expect("delete batch");
    let c = &b.changes[0];
    assert_eq!(c.kind(), ChangeKind::Delete);
    assert!(c.after.is_none());
    // The before-image still has the entry's entryUUID, which the journal hook never had.
    let uuid = s.attr_by_name("entryUUID").expect("entryUUID");
    assert!(c.before.as_ref().expect("before").attr(uuid).is_some());
    assert!(matches!(sub.try_recv(), Ok(None)));
}

#[test]
fn a_batch_nets_out_and_failed_operations_are_not_in_the_feed() {
    let s = schema();
    let store = base(&s);
    let mut sub = store.subscribe(16);
    // One batch: add x, a failing add (rolled back), add y, delete x.
    let s2 = s.clone();
    store
        .write_blocking(move |txn| {
            let x = txn.add(
                "uid=x,dc=example,dc=com".into(),
                ndn(&s2, "uid=x,dc=example,dc=com"),
                person(&s2, "x", "A"),
                false,
            )?;
            txn.add(
                "uid=y,dc=example,dc=com".into(),
                ndn(&s2, "uid=y,dc=example,dc=com"),
                person(&s2, "y", "A"),
                false,
            )?;
            txn.delete(x).map(|_| ())
        })
        .expect("writer")
        .expect("batch");
    let s2 = s.clone();
    let r = store
        .write_blocking(move |txn| {
            txn.add(
                "uid=z,ou=missing,dc=example,dc=com".into(),
                ndn(&s2, "uid=z,ou=missing,dc=example,dc=com"),
                person(&s2, "z", "A"),
                false,
            )
        })
        .expect("writer");
    assert!(matches!(r, Err(StoreError::NoParent(_))));
    let b = sub.try_recv().expect("open").expect("batch");
    // x was added and deleted inside the batch: only y remains.
    assert_eq!(b.changes.len(), 1);
    assert_eq!(b.changes[0].kind(), ChangeKind::Add);
    assert_eq!(
        b.changes[0].after.as_ref().expect("after").dn(),
        "uid=y,dc=example,dc=com"
    );
    // The failed add made no batch.
    assert!(matches!(sub.try_recv(), Ok(None)));
}

#[test]
fn a_slow_subscriber_is_cut_off_and_the_writer_goes_on() {
    let s = schema();
    let store = base(&s);
    let mut slow = store.subscribe(2);
    let mut fast = store.subscribe(64);
    for i in 0..5 {
        add(&store, &s, &format!("uid=u{i},dc=example,dc=com"));
        // The fast one keeps up.
        assert!(fast.try_recv().expect("fast open").is_some());
    }
    // Every write was acknowledged although `slow` read nothing; it keeps the two batches
    // queued before the cut, then ends with Lagged (not a silent gap, not Closed).
    assert!(slow.is_lagged());
    assert_eq!(store.subscribers(), 1);
    assert!(slow.try_recv().expect("queued").is_some());
    assert!(slow.try_recv().expect("queued").is_some());
    assert_eq!(slow.try_recv().map(|_| ()), Err(FeedEnd::Lagged));
    assert!(!fast.is_lagged());
}

#[test]
fn dropped_subscribers_are_removed_and_the_writer_stops_collecting() {
    let s = schema();
    let store = base(&s);
    assert_eq!(store.subscribers(), 0);
    let a = store.subscribe(4);
    let b = store.subscribe(4);
    assert_eq!(store.subscribers(), 2);
    drop(a);
    assert_eq!(store.subscribers(), 1);
    drop(b);
    assert_eq!(store.subscribers(), 0);
    // Writes with nobody listening still work.
    add(&store, &s, "uid=q,dc=example,dc=com");
}

#[test]
fn subscribe_then_read_loses_and_repeats_nothing() {
    let s = schema();
    let store = Arc::new(base(&s));
    // Writes from another thread race with subscribe + read; every batch after the version
    // read must arrive, and none at or before it.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let w = {
        let (store, s) = (store.clone(), s.clone());
        std::thread::spawn(move || {
            for i in 0..200 {
                add(&store, &s, &format!("uid=r{i},dc=example,dc=com"));
                if i == 20 {
                    let _ = tx.send(());
                }
            }
        })
    };
    rx.recv().expect("writer started");
    let mut sub = store.subscribe(1024);
    let v = store.read();
    w.join().expect("writer thread");
    let last = store.read().seq;
    let mut expect = v.seq + 1;
    while let Some(b) = sub.try_recv().expect("open") {
        if b.seq <= v.seq {
            continue;
        }
        assert_eq!(b.seq, expect, "no gap, no repeat");
        expect += 1;
    }
    assert_eq!(
        expect,
        last + 1,
        "every batch after the version was delivered"
    );
}
