//! What the writer costs per modify, measured as the writer thread's CPU time (which holds on
//! a shared machine where wall-clock rates do not). Ignored by default; run with
//!
//!     cargo test --release -p store --test writer_cost -- --ignored --nocapture
//!
//! Used to check that the change feed costs the writer nothing when nobody subscribes
//! (compare against the commit before the feed) and what one subscriber adds. It uses only
//! APIs older than the feed, plus `subscribe` (replace that line and set `FEED` to false to
//! build it against an older store).
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
use store::Store;

const ENTRIES: u32 = 10_000;
const MODIFIES: u32 = 100_000;

/// Writer thread CPU time so far, in clock ticks (utime + stime of the thread "linden-writer").
fn writer_ticks() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    for t in dir.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == "linden-writer" {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // Fields after the ")" that ends the command name: state is field 3; utime 14, stime 15.
            let rest = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
            let f: Vec<&str> = rest.split_whitespace().collect();
            let n = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            return n(11) + n(12);
        }
    }
    0
}

fn run(subscribe: bool) {
    let schema = Arc::new(Schema::builtin());
    let idx: Vec<_> = ["objectClass", "uid", "cn", "sn"]
        .iter()
        .map(|n| schema.attr_by_name(n).expect("attr"))
        .collect();
    let store = Store::new(schema.clone(), &idx);
    let s = schema.clone();
    let ids = store
        .write_blocking(move |txn| {
            txn.add(
                "dc=example,dc=com".into(),
                ndn(&s, "dc=example,dc=com"),
                vec![
                    attr(&s, "objectClass", &["top", "domain"]),
                    attr(&s, "dc", &["example"]),
                ],
                true,
            )?;
            let mut ids = Vec::new();
            for i in 0..ENTRIES {
                let dn = format!("uid=user.{i},dc=example,dc=com");
                ids.push(txn.add(
                    dn.clone(),
                    ndn(&s, &dn),
                    vec![
                        attr(&s, "objectClass", &["inetOrgPerson"]),
                        attr(&s, "uid", &[&format!("user.{i}")]),
                        attr(&s, "cn", &[&format!("User {i}")]),
                        attr(&s, "sn", &["User"]),
                    ],
                    false,
                )?);
            }
            Ok::<_, store::StoreError>(ids)
        })
        .expect("writer")
        .expect("load");
    // For the commit before the feed: `let sub = subscribe;`
    let sub = (FEED && subscribe).then(|| store.subscribe(1 << 20));
    let before = writer_ticks();
    let start = std::time::Instant::now();
    for k in 0..MODIFIES {
        let id = ids[(k.wrapping_mul(2_654_435_761) % ENTRIES) as usize];
        let s = schema.clone();
        store
            .write_blocking(move |txn| {
                let mut attrs = txn.version().get(id).expect("entry").to_attrs();
                let d = s.attr_by_name("description").expect("description");
                attrs.retain(|a| a.ty != d);
                attrs.push(attr(&s, "description", &[&format!("v{k}")]));
                txn.replace_attrs(id, attrs)
            })
            .expect("writer")
            .expect("modify");
    }
    let wall = start.elapsed();
    let ticks = writer_ticks() - before;
    let hz = 100.0; // USER_HZ on Linux
    println!(
        "subscriber={subscribe}: {MODIFIES} modifies (one per batch), writer CPU {:.2} us/op, wall {:.2} us/op",
        ticks as f64 / hz * 1e6 / f64::from(MODIFIES),
        wall.as_secs_f64() * 1e6 / f64::from(MODIFIES),
    );
    drop(sub);
}

/// False to build this file against a store without the feed.
const FEED: bool = true;

#[test]
#[ignore]
fn writer_cpu_per_modify() {
    for _ in 0..3 {
        run(false);
        if FEED {
            run(true);
        }
    }
}
