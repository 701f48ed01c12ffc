//! The replication provider (RFC 4533 Content Synchronization, as OpenLDAP's syncprov,
//! `syncprov = true`): what it adds to the change feed, and the session log. The sync search
//! itself, the consumers' side of it, is a search (`search::sync`).
//!
//! - **contextCSN and tombstones** are kept by an overlay of the write path,
//!   `dit::overlays::syncprov::ContextCsn` (last in the chain, see `crate::Server`'s start):
//!   every change raises the contextCSN of its naming context in the same transaction, every
//!   delete leaves a tombstone. The change feed then shows the suffix entry modified in each
//!   batch: `only_context_csn` tells persistent searches, sync searches and the session log to
//!   pass over such a change. At start (`follow`) the suffix entries without contextCSN get
//!   one, and expired tombstones are forgotten.
//! - **The session log** (`crate::synclog`, fed by one task here on the change feed): the last
//!   `syncprov_sessionlog` changed entries (deletes included), by batch, with the CSNs each
//!   batch stamped, and per naming context the *floor*: the contextCSN values below which the
//!   log has dropped changes. A cookie at or above the floor for every server id is served
//!   from the log.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use proto::controls::sync::SyncUuid;
use store::{Attr, Batch, Entry, EntryId, FeedEnd, Txn};

use crate::state::Shared;
use crate::synclog::{Provider, Record};
use dit::overlays::syncprov::{
    context_csn_type, context_csns, expire_tombstones, merge, TombstonePolicy,
};

/// Batches the session log's own feed subscription may fall behind before it starts over
/// (from the current contextCSN, dropping what it held): the log task only records, so this
/// happens only when the writer outruns it by this much.
const LOG_FEED_QUEUE: usize = 16 * 1024;

/// Whether a change of the feed only moved the contextCSN of a naming context: the write
/// path's bookkeeping, not a change clients asked for.
pub(crate) fn only_context_csn(shared: &Shared, c: &store::Change) -> bool {
    if !shared.config().syncprov {
        return false;
    }
    let (Some(b), Some(a)) = (&c.before, &c.after) else {
        return false;
    };
    if !shared.is_suffix(a.ndn_str()) || b.dn() != a.dn() {
        return false;
    }
    let Some(ty) = context_csn_type(&shared.schema()) else {
        return false;
    };
    let rest = |e: &Entry| -> Vec<Attr> {
        let mut v = e.to_attrs();
        v.retain(|x| x.ty != ty);
        v
    };
    rest(b) == rest(a)
}

/// The entryUUID of an entry as the 16 bytes a Sync State control carries.
pub(crate) fn uuid_of(shared: &Shared, e: &Entry) -> Option<SyncUuid> {
    let raw = e.attr(shared.known.entry_uuid)?.first()?;
    parse_uuid(raw)
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (RFC 4122 string form) as 16 bytes.
pub(crate) fn parse_uuid(s: &[u8]) -> Option<SyncUuid> {
    let hex: Vec<u8> = s.iter().copied().filter(|c| *c != b'-').collect();
    if hex.len() != 32 || s.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let txt = std::str::from_utf8(pair).ok()?;
        *out.get_mut(i)? = u8::from_str_radix(txt, 16).ok()?;
    }
    Some(out)
}

/// Gives a suffix entry that has no contextCSN (data imported, or served before without the
/// provider) the newest entryCSN of each server id under it, as slapd's syncprov does when it
/// opens a database: one pass over the entries, once, at start.
async fn fill_context_csn(shared: &Shared) {
    let v = shared.store.read();
    let Some(ty) = context_csn_type(v.schema()) else {
        return;
    };
    let mut fills: Vec<(EntryId, Vec<String>)> = Vec::new();
    for s in &shared.suffixes {
        let Some(e) = v.lookup(s) else { continue };
        if e.attr(ty).is_some() {
            continue;
        }
        let mut newest: Vec<String> = Vec::new();
        for x in v.iter() {
            if x.ndn_str() != s.norm && !schema::norm_is_descendant(x.ndn_str(), &s.norm) {
                continue;
            }
            if let Some(csn) = x
                .attr(shared.known.entry_csn)
                .and_then(|a| a.first())
                .and_then(|c| std::str::from_utf8(c).ok())
            {
                merge(&mut newest, &[csn.to_owned()]);
            }
        }
        if !newest.is_empty() {
            fills.push((e.id, newest));
        }
    }
    if fills.is_empty() {
        return;
    }
    let done = shared
        .store
        .write(move |txn: &mut Txn| -> Result<(), String> {
            for (id, csns) in fills {
                let Some(e) = txn.version().get(id).cloned() else {
                    continue;
                };
                if e.attr(ty).is_some() {
                    continue;
                }
                let schema = txn.schema().clone();
                let mut attrs = e.to_attrs();
                let values = csns
                    .into_iter()
                    .map(|c| c.into_bytes().into_boxed_slice())
                    .collect();
                attrs.push(Attr::new(&schema, ty, "", values).map_err(|e| e.to_string())?);
                txn.replace_attrs(id, attrs).map_err(|e| e.to_string())?;
            }
            Ok(())
        })
        .await;
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("syncprov: contextCSN not set at start: {e}"),
        Err(e) => tracing::warn!("syncprov: contextCSN not set at start: {e}"),
    }
}

/// Starts the task that fills the session log (once; from the runtime that serves).
pub(crate) fn spawn(provider: &Arc<Provider>, shared: Arc<Shared>) {
    if !provider.first_start() {
        return;
    }
    let me = provider.clone();
    tokio::spawn(async move { follow(&me, &shared).await });
}

/// At start: forgets the tombstones that expired while the server was down, and gives data
/// kept before tombstones were (a server upgraded from a version without them, or one that
/// never deleted anything) a floor at its contextCSN: deletes before it may have left no
/// tombstone, so older cookies get a full refresh.
async fn tombstone_upkeep(shared: &Shared) {
    let policy = TombstonePolicy {
        max: shared.config().syncprov_tombstones,
        lifetime: std::time::Duration::from_secs(shared.config().syncprov_tombstone_lifetime),
    };
    let suffixes = shared.suffixes.clone();
    let done = shared
        .store
        .write(move |txn: &mut Txn| -> Result<(), String> {
            expire_tombstones(txn, policy);
            let ts = txn.version().tombstones();
            if ts.floor().is_empty() && ts.is_empty() {
                let v = txn.version();
                let mut floor = Vec::new();
                if let Some(ty) = context_csn_type(v.schema()) {
                    for s in &suffixes {
                        if let Some(e) = v.lookup(s) {
                            merge(&mut floor, &context_csns(ty, e));
                        }
                    }
                }
                if !floor.is_empty() {
                    txn.set_tombstone_floor(floor);
                }
            }
            Ok(())
        })
        .await;
    if let Ok(Err(e)) | Err(e) = done.map_err(|e| e.to_string()) {
        tracing::warn!("syncprov: tombstones not checked at start: {e}");
    }
}

/// Fills the session log from the change feed; starts it over when it falls behind.
async fn follow(provider: &Provider, shared: &Shared) {
    fill_context_csn(shared).await;
    tombstone_upkeep(shared).await;
    provider
        .tombstones_from
        .store(shared.store.read().seq, Ordering::Release);
    loop {
        let mut sub = shared.store.subscribe(LOG_FEED_QUEUE);
        let v = shared.store.read();
        provider.reset(floors(shared, &v));
        provider.seen.send_replace(v.seq);
        loop {
            match sub.recv().await {
                Ok(b) if b.seq <= v.seq => {}
                Ok(b) => {
                    provider.take(records(shared, &b));
                    provider.seen.send_replace(b.seq);
                }
                Err(FeedEnd::Lagged) => {
                    tracing::warn!(
                        "syncprov: the session log fell behind the writer and starts over; \
                         consumers older than now get a full refresh"
                    );
                    break;
                }
                Err(FeedEnd::Closed) => {
                    provider.seen.send_replace(u64::MAX);
                    return;
                }
            }
        }
    }
}

/// The contextCSN values of each naming context in version `v`: the floors of an empty log.
fn floors(shared: &Shared, v: &store::Version) -> Vec<Vec<String>> {
    let ty = context_csn_type(v.schema());
    shared
        .suffixes
        .iter()
        .map(|s| match (ty, v.lookup(s)) {
            (Some(ty), Some(e)) => context_csns(ty, e),
            _ => Vec::new(),
        })
        .collect()
}

/// The session log's records of batch `b`: per naming context, the CSNs it stamped and the
/// entries it changed.
fn records(shared: &Shared, b: &Batch) -> Vec<Record> {
    let schema = shared.schema();
    let ty = context_csn_type(&schema);
    let k = &shared.known;
    let mut per: Vec<Option<Record>> = (0..shared.suffixes.len()).map(|_| None).collect();
    for c in &b.changes {
        let Some(e) = c.after.as_ref().or(c.before.as_ref()) else {
            continue;
        };
        let Some(i) = shared.suffixes.iter().position(|s| {
            s.norm == e.ndn_str() || schema::norm_is_descendant(e.ndn_str(), &s.norm)
        }) else {
            continue;
        };
        let Some(r) = per.get_mut(i) else { continue };
        let r = r.get_or_insert_with(|| Record {
            seq: b.seq,
            suffix: i,
            csns: Vec::new(),
            changed: Vec::new(),
        });
        // The suffix's contextCSN values this batch raised: they cover its deletes.
        if let (Some(ty), Some(a)) = (ty, &c.after) {
            if shared.is_suffix(a.ndn_str()) {
                let before = c
                    .before
                    .as_ref()
                    .map(|x| context_csns(ty, x))
                    .unwrap_or_default();
                for csn in context_csns(ty, a) {
                    if !before.contains(&csn) {
                        r.csns.push(csn);
                    }
                }
            }
        }
        if let Some(csn) = c
            .after
            .as_ref()
            .and_then(|a| a.attr(k.entry_csn))
            .and_then(|a| a.first())
            .and_then(|v| std::str::from_utf8(v).ok())
        {
            r.csns.push(csn.to_owned());
        }
        if only_context_csn(shared, c) {
            continue;
        }
        if let Some(u) = uuid_of(shared, e) {
            r.changed.push((u, c.id));
        }
    }
    // Deletes asserted again (a tombstone put with no entry deleted): logged as changes of an
    // entry that is not there (id 0 is never assigned), so refreshes send them as deletes.
    let listed: std::collections::HashSet<SyncUuid> = per
        .iter()
        .flatten()
        .flat_map(|r| r.changed.iter().map(|(u, _)| *u))
        .collect();
    for t in &b.tombstones {
        let Some(u) = parse_uuid(t.uuid.as_bytes()) else {
            continue;
        };
        let Some(i) = shared.suffixes.iter().position(|s| {
            schema::Dn::parse(&t.dn)
                .and_then(|d| d.normalize(&schema))
                .is_ok_and(|n| n.norm == s.norm || schema::norm_is_descendant(&n.norm, &s.norm))
        }) else {
            continue;
        };
        let Some(r) = per.get_mut(i) else { continue };
        let r = r.get_or_insert_with(|| Record {
            seq: b.seq,
            suffix: i,
            csns: Vec::new(),
            changed: Vec::new(),
        });
        if listed.contains(&u) {
            continue;
        }
        r.csns.push(t.csn.to_string());
        r.changed.push((u, 0));
    }
    per.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_parse_from_their_string_form() {
        assert_eq!(
            parse_uuid(b"01234567-89ab-cdef-0123-456789ABCDEF"),
            Some([
                0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
                0xcd, 0xef
            ])
        );
        assert_eq!(parse_uuid(b"0123456789abcdef0123456789abcdef"), None);
        assert_eq!(parse_uuid(b"01234567-89ab-cdef-0123-456789abcdeg"), None);
    }
}
