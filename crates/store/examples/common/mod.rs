//! What the store's examples share.

/// This process's resident memory, in bytes (0 where /proc cannot be read).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// The version a start builds from `rec`: the entry table, the DN map and the server's default
/// indexes (equality and presence on objectClass, uid, cn, sn and mail).
#[allow(
    dead_code,
    reason = "the load example builds its own store and does not use it"
)]
pub fn build_version(rec: store::persist::Recovered) -> store::Version {
    let idx: Vec<_> = ["objectClass", "uid", "cn", "sn", "mail"]
        .iter()
        .filter_map(|a| rec.schema.attr_by_name(a))
        .collect();
    let indexes = store::Indexes::eq_pres(&idx);
    store::Version::restore(
        rec.schema.clone(),
        &indexes,
        rec.entries,
        rec.next_id,
        rec.last_seq,
    )
}
