//! Where the memory of a loaded directory goes: recovers a data directory as a start does (the
//! built-in schema, the server's default indexes: objectClass, uid, cn, sn, mail), then prints
//! `Version::footprint` per part and per entry, the process's resident memory, and what the
//! packed entries hold, by attribute type.
//!
//! `cargo run --release -p store --example footprint -- DATA_DIR`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "developer tool: a failed step ends the run with its message"
)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use schema::Schema;

/// As the server: jemalloc, whose size classes `footprint` counts in.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod common;
use common::rss_bytes;

fn main() {
    let dir = std::env::args().nth(1).expect("usage: footprint DATA_DIR");
    let schema = Arc::new(Schema::builtin());
    let t = Instant::now();
    let rec =
        store::persist::recover(&store::persist::FsIo, dir.as_ref(), &schema).expect("recover");
    let read = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let v = common::build_version(rec);
    let built = t.elapsed().as_secs_f64();
    println!(
        "{} entries: {read:.2} s reading, {built:.2} s building; resident {} MB = {} B/entry",
        v.len(),
        rss_bytes() >> 20,
        rss_bytes() / v.len().max(1) as u64
    );
    let f = v.footprint();
    let n = f.entries.max(1) as f64;
    println!("| part | bytes/entry | allocations/entry |\n|---|---:|---:|");
    for (name, p) in f.parts() {
        println!(
            "| {name} | {:.1} | {:.2} |",
            p.bytes as f64 / n,
            p.allocations as f64 / n
        );
    }
    println!("| **total** | **{:.1}** | |", f.total() as f64 / n);

    // What the packed entries hold.
    let s = v.schema();
    let mut name_part = 0u64;
    let mut per_type: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for e in v.iter() {
        name_part += (e.dn().len() + e.ndn_str().len()) as u64;
        for a in e.attrs() {
            let slot = per_type.entry(s.attr(a.ty).name().to_string()).or_default();
            for (r, nm) in a.pairs() {
                slot.0 += r.len() as u64;
                if nm != r {
                    slot.1 += nm.len() as u64;
                }
                slot.2 += 1;
            }
        }
    }
    let packed = f.packed_exact as f64 / n;
    println!(
        "\npacked entry: {packed:.1} B exact on average; DN text (+ normalized DN when it differs, at most): {:.1} B",
        name_part as f64 / n
    );
    println!("| attribute | raw B/entry | normalized B/entry (where different) | values/entry | interned |\n|---|---:|---:|---:|---|");
    for (name, (raw, norm, count)) in &per_type {
        let ty = s.attr_by_name(name).expect("type");
        println!(
            "| {name} | {:.1} | {:.1} | {:.2} | {} |",
            *raw as f64 / n,
            *norm as f64 / n,
            *count as f64 / n,
            store::intern::is_interned_type(ty)
        );
    }
}
