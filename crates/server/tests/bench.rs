//! `linden bench` against a real Linden: every operation it reports is one the server counted.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::sync::atomic::Ordering;

use common::{bench as run, TestServer};
use server::state::OpType;

#[test]
fn bench_counts_match_the_server() {
    let srv = TestServer::start(false);
    common::add_bench_users(&mut srv.admin(), 50, false);
    let counters = srv.server.counters();
    for (workload, counter) in [
        ("search", counters.initiated(OpType::Search)),
        ("modify", counters.initiated(OpType::Modify)),
        ("compare", counters.initiated(OpType::Compare)),
    ] {
        let before = counter.load(Ordering::Relaxed);
        let s = run(&srv.url, workload, &[]);
        let after = counter.load(Ordering::Relaxed);
        assert!(s.total.ops > 0, "{workload}: no operations");
        assert_eq!(
            s.total.errors, 0,
            "{workload}: errors {:?}",
            s.total.errors_by_code
        );
        assert_eq!(
            s.total.ops,
            after - before,
            "{workload}: reported vs counted by the server"
        );
        if workload == "search" {
            assert_eq!(s.total.entries_per_search, Some(1.0));
        }
    }
}

/// `linden bench auth --warm-pass`: the warm pass verifies each user's password once (the
/// server's slow scheme), and every bind of the measured run is then a credential-cache hit.
#[test]
fn warm_pass_leaves_every_measured_login_to_the_cache() {
    // `run` binds users 0..50 (`--range 50`).
    const USERS: usize = 50;
    let srv = TestServer::start_with(|c| {
        c.durability = server::Durability::NoSync;
        c.set_password_policy(pwhash::Policy {
            scheme: pwhash::Scheme::Argon2,
            cost: pwhash::Cost {
                argon2_memory_kib: 64,
                argon2_iterations: 1,
                ..pwhash::Cost::default()
            },
        });
    });
    common::add_bench_users(&mut srv.admin(), USERS, true);
    let before = srv.server.credential_stats();
    let s = run(&srv.url, "auth", &["--warm-pass"]);
    let after = srv.server.credential_stats();
    assert!(s.total.ops > 0, "no operations");
    assert_eq!(s.total.errors, 0, "{:?}", s.total.errors_by_code);
    let slow = after.slow_verifications - before.slow_verifications;
    // One per user in the warm pass; the administrator's binds on the two connections are
    // cache hits (the set-up above bound as the administrator already).
    assert_eq!(slow, USERS as u64, "slow verifications");
    assert!(
        after.cache.hits - before.cache.hits >= s.total.ops,
        "every measured auth bind is a cache hit: {after:?} {} ops",
        s.total.ops
    );
}
