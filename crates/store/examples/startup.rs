//! Times what a start does with a data directory, phase by phase, in wall time and in the
//! process's CPU time (which holds on a shared machine where wall time does not): recovery
//! (reading the snapshot and replaying the logs) and building the version (`Version::restore`:
//! entry table, DN map, indexes), with the server's default indexes (objectClass, uid, cn, sn,
//! mail) and the built-in schema.
//!
//! `cargo run --release -p store --example startup -- DATA_DIR [ROUNDS]`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "developer tool: a failed step ends the run with its message"
)]

use std::sync::Arc;
use std::time::Instant;

use schema::Schema;

/// As the server.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// This process's CPU time so far (user, system), in seconds.
fn cpu() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f[i].parse::<f64>().expect("ticks") / 100.0;
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    (tick(11), tick(12))
}

mod common;

fn rss_mb() -> u64 {
    common::rss_bytes() >> 20
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: startup DATA_DIR [ROUNDS]");
    let rounds: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let schema = Arc::new(Schema::builtin());
    for round in 1..=rounds {
        let (u0, s0) = cpu();
        let t = Instant::now();
        let rec =
            store::persist::recover(&store::persist::FsIo, dir.as_ref(), &schema).expect("recover");
        let read = t.elapsed().as_secs_f64();
        let (u1, s1) = cpu();
        let t = Instant::now();
        let v = common::build_version(rec);
        let built = t.elapsed().as_secs_f64();
        let (u2, s2) = cpu();
        println!(
            "round {round}: {} entries; reading {read:.2} s wall, {:.2} user + {:.2} sys; building {built:.2} s wall, {:.2} user + {:.2} sys; resident {} MB",
            v.len(),
            u1 - u0,
            s1 - s0,
            u2 - u1,
            s2 - s1,
            rss_mb()
        );
        drop(v);
    }
}
