//! The replication provider (RFC 4533 Content Synchronization, as OpenLDAP's syncprov): a
//! search with the Sync Request control (`syncprov = true`).
//!
//! Three parts:
//! - **contextCSN** (`ContextCsn`, an overlay of the write path): every change raises the
//!   `contextCSN` value of its server id on the suffix entry of its naming context, in the same
//!   transaction as the change, so it is as durable as the change (journal and snapshots) and
//!   readable as in slapd (`ldapsearch -b dc=example,dc=com -s base contextCSN`). A change's
//!   CSN is the entryCSN it stamped; a delete takes a fresh CSN. Only this server's own CSNs
//!   raise it here; another server's rise with its provider's cookie (`ContextCsn`). The
//!   change feed then shows the suffix entry modified in each batch: `only_context_csn` tells
//!   persistent searches and this provider to pass over such a change.
//! - **Tombstones** (the same overlay; `store::tombstone`): every delete leaves the entry's
//!   entryUUID, DN, the delete's CSN and the entryCSN it had, in the same batch, bounded by
//!   `syncprov_tombstones` and `syncprov_tombstone_lifetime` (`expire_tombstones`; the floor
//!   says up to where they may have been forgotten).
//! - **The session log** (`crate::synclog`, fed by one task here on the change feed): the last
//!   `syncprov_sessionlog` changed entries (deletes included), by batch, with the CSNs each
//!   batch stamped, and per naming context the *floor*: the contextCSN values below which the
//!   log has dropped changes. A cookie at or above the floor for every server id is served
//!   from the log.
//! - **The sync search** (`start`): the refresh phase, then for refreshAndPersist the changes.
//!
//! Refresh, against one version `v` of the store (taken after subscribing to the feed, as
//! persistent search does, so nothing is lost or repeated between refresh and persist):
//! - No cookie CSN, or a cookie older than the tombstones' floor: a **full refresh** in a present
//!   phase: every entry in scope as `add`, ended with refreshDeletes FALSE (the consumer
//!   removes what it was not sent).
//! - A cookie the log covers: a **delete phase**: each entry changed after the cookie that is
//!   now in scope as `add` (whole entry), the others (deleted, renamed or modified out of
//!   scope) in one syncIdSet with refreshDeletes TRUE; ended with refreshDeletes TRUE. An
//!   up-to-date cookie gets only the end.
//! - A cookie older than the log that the tombstones cover (`tombstones_cover`): the same
//!   delete phase, its list found in the version itself (`Task::changed_since`: entries whose
//!   entryCSN is newer than the cookie, tombstones whose CSN is).
//! - The end: refreshOnly, SearchResultDone with a Sync Done control and the cookie;
//!   refreshAndPersist, a Sync Info refreshPresent or refreshDelete with refreshDone TRUE.
//!
//! Persist: each batch of the feed after `v`, per entry: `add` (entered the scope), `modify`
//! (still in it), `delete` (left it or deleted, sent with the DN it had and no attributes),
//! the last message of the batch carrying the new cookie. A consumer that falls more than
//! `syncprov_queue` batches behind (it stopped reading) is cut off by the feed, never blocking
//! the writer, and ends with e-syncRefreshRequired (4096): it searches again with its cookie.
//!
//! Cookies are OpenLDAP's: `rid=NNN` echoed from the consumer's cookie, `sid=SSS` this
//! server's `server_id` (left out when 0, as slapd without serverID), `csn=` the contextCSN
//! values of the naming context. Entries carry their entryUUID in the Sync State control; the
//! contextCSN attribute itself is never sent (each server keeps its own).

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use proto::controls::sync::{
    csn_sid, State, SyncCookie, SyncDone, SyncInfo, SyncRequest, SyncState, SyncUuid,
};
use proto::{tags, Control, ResultCode, SearchRequest};
use schema::AttrId;
use store::{Attr, Batch, ChangeKind, Entry, EntryId, FeedEnd, Subscription, Tri, Txn};

use crate::op::{Next, Op};
use crate::ops::live::Stop;
use crate::ops::longsearch::{finish, End};
use crate::ops::search::{self, Prepared};
use crate::reply::{Conn, FLUSH_BYTES};
use crate::state::Shared;
use crate::synclog::{context_csns, merge, newer_than, Plan, Provider, Record};
use dit::acl;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;
use dit::overlays::{Applied, Overlay};

/// Batches the session log's own feed subscription may fall behind before it starts over
/// (from the current contextCSN, dropping what it held): the log task only records, so this
/// happens only when the writer outruns it by this much.
const LOG_FEED_QUEUE: usize = 16 * 1024;

fn context_csn_type(schema: &schema::Schema) -> Option<AttrId> {
    schema.attr_by_name("contextCSN")
}

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
fn uuid_of(shared: &Shared, e: &Entry) -> Option<SyncUuid> {
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

/// How long and how many deletes are remembered (`syncprov_tombstone_lifetime`,
/// `syncprov_tombstones`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TombstonePolicy {
    pub max: usize,
    pub lifetime: std::time::Duration,
}

/// The write-path overlay that keeps contextCSN on the suffix entries (see the module
/// comment) and the tombstones of deleted entries (`store::tombstone`). Runs last in the
/// chain, so it sees every change the others made as well.
///
/// contextCSN is raised only by this server's own CSNs (its client changes, and the fresh CSN
/// of every delete): a replicated change of another server raises the value of that server
/// when its provider's cookie comes (`repl::consumer::apply::store_cookie`), which vouches
/// for every change before it. Raising it here, entry by entry, claimed too much while a
/// refresh was under way (a full refresh sends entries in tree order, not CSN order): a
/// consumer cut off in the middle resumed from a cookie past entries it never got.
pub(crate) struct ContextCsn {
    ty: AttrId,
    sid: u16,
    tombstones: TombstonePolicy,
}

impl ContextCsn {
    pub(crate) fn new(
        schema: &schema::Schema,
        sid: u16,
        tombstones: TombstonePolicy,
    ) -> Result<ContextCsn, String> {
        let ty = context_csn_type(schema).ok_or("the schema lacks contextCSN (openldap.schema)")?;
        Ok(ContextCsn {
            ty,
            sid,
            tombstones,
        })
    }

    /// Raises the contextCSN value of `csn`'s server id on the suffix entry holding `ndn`.
    fn raise(&self, dit: &dit::Dit, txn: &mut Txn, ndn: &str, csn: String) -> LdapResult<()> {
        let Some(sid) = csn_sid(&csn) else {
            return Ok(());
        };
        let Some(suffix) = dit.suffix_of(ndn) else {
            return Ok(());
        };
        // A deleted suffix entry has nowhere to keep it.
        let Some(s) = txn.version().lookup(suffix).cloned() else {
            return Ok(());
        };
        let mut values = context_csns(self.ty, &s);
        if values
            .iter()
            .any(|v| csn_sid(v) == Some(sid) && v.as_str() >= csn.as_str())
        {
            return Ok(());
        }
        values.retain(|v| csn_sid(v) != Some(sid));
        values.push(csn);
        values.sort_by_key(|v| csn_sid(v));
        let schema = txn.schema().clone();
        let mut attrs = s.to_attrs();
        attrs.retain(|a| a.ty != self.ty);
        let values = values
            .into_iter()
            .map(|v| v.into_bytes().into_boxed_slice())
            .collect();
        let a = Attr::new(&schema, self.ty, "", values)
            .map_err(|e| LdapError::new(ResultCode::Other, format!("contextCSN: {e}")))?;
        attrs.push(a);
        txn.replace_attrs(s.id, attrs)?;
        Ok(())
    }

    /// Remembers deleted entry `e` (its delete stamped `csn`), then forgets the oldest
    /// tombstones beyond the policy.
    fn bury(&self, dit: &dit::Dit, txn: &mut Txn, e: &Entry, csn: &str) {
        let Some(uuid) = uuid_norm_of(dit, e) else {
            return;
        };
        txn.put_tombstone(store::Tombstone {
            uuid: uuid.into(),
            dn: e.dn().into(),
            csn: csn.into(),
            seen: entry_csn(dit, e).unwrap_or_default().into(),
        });
        expire_tombstones(txn, self.tombstones);
    }
}

/// An entry's entryCSN.
fn entry_csn(dit: &dit::Dit, e: &Entry) -> Option<String> {
    e.attr(dit.known.entry_csn)
        .and_then(|a| a.first())
        .and_then(|v| std::str::from_utf8(v).ok())
        .map(str::to_owned)
}

/// An entry's entryUUID in its equality form: the key of its tombstone.
fn uuid_norm_of<'e>(dit: &dit::Dit, e: &'e Entry) -> Option<&'e str> {
    e.attr(dit.known.entry_uuid)
        .and_then(|a| a.norm().next())
        .and_then(|v| std::str::from_utf8(v).ok())
}

/// Forgets the tombstones older than the policy's lifetime, and the oldest beyond its count
/// (down to 15/16 of it, so that this happens once every so many deletes, not at each); the
/// floor rises to the newest CSN forgotten of each server id (`synclog::Provider::plan`).
pub(crate) fn expire_tombstones(txn: &mut Txn, policy: TombstonePolicy) {
    let ts = txn.version().tombstones();
    let over = ts.len().saturating_sub(policy.max);
    let drop = if over > 0 { over + policy.max / 16 } else { 0 };
    let cutoff = txn
        .now()
        .checked_sub(policy.lifetime)
        .map(|t| dit::csn::Clock::new(0).next(t));
    let mut gone: Vec<(std::sync::Arc<str>, String)> = Vec::new();
    for (i, t) in ts.iter().enumerate() {
        let expired = cutoff.as_deref().is_some_and(|c| *t.csn < *c);
        if i >= drop && !expired {
            break;
        }
        gone.push((t.uuid.clone(), t.csn.to_string()));
    }
    if gone.is_empty() {
        return;
    }
    let mut floor: Vec<String> = ts.floor().iter().map(|c| c.to_string()).collect();
    merge(
        &mut floor,
        &gone.iter().map(|(_, c)| c.clone()).collect::<Vec<_>>(),
    );
    for (u, _) in &gone {
        txn.remove_tombstone(u);
    }
    txn.set_tombstone_floor(floor);
}

impl Overlay for ContextCsn {
    fn name(&self) -> &'static str {
        "syncprov"
    }

    fn after(&self, dit: &dit::Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()> {
        self.raise_for(dit, txn, applied)?;
        // The overlays before this one may have stamped other entries on the change's behalf
        // (memberOf, referential integrity) after it, replicated changes included: this
        // server's own value also covers the newest CSN its clock issued, so contextCSN never
        // trails an entryCSN stamped here.
        let ndn = match (&applied.before, &applied.after) {
            (_, Some(a)) => a.ndn_str(),
            (Some(b), None) => b.ndn_str(),
            (None, None) => return Ok(()),
        };
        match dit.csn.last_issued() {
            Some(last) if csn_sid(&last) == Some(self.sid) => self.raise(dit, txn, ndn, last),
            _ => Ok(()),
        }
    }
}

impl ContextCsn {
    /// What the change itself does to contextCSN and the tombstones.
    fn raise_for(&self, dit: &dit::Dit, txn: &mut Txn, applied: &Applied) -> LdapResult<()> {
        match (&applied.before, &applied.after) {
            (before, Some(a)) => {
                let uuid = uuid_norm_of(dit, a);
                // Back after a delete (a change the delete had not seen won): no tombstone.
                if let Some(u) = uuid {
                    if txn.version().tombstones().get(u).is_some() {
                        txn.remove_tombstone(u);
                    }
                }
                // Another entry took this one's place (the later of two adds of one DN): the
                // one it replaced is gone, as if deleted.
                if let Some(b) = before {
                    if uuid_norm_of(dit, b).is_some_and(|bu| Some(bu) != uuid) {
                        let csn = dit.csn.next(txn.now());
                        self.bury(dit, txn, b, &csn);
                        self.raise(dit, txn, a.ndn_str(), csn)?;
                    }
                }
                match entry_csn(dit, a) {
                    Some(csn) if csn_sid(&csn) == Some(self.sid) => {
                        self.raise(dit, txn, a.ndn_str(), csn)
                    }
                    // A replicated change: raised by its provider's cookie.
                    Some(_) => Ok(()),
                    None => {
                        let csn = dit.csn.next(txn.now());
                        self.raise(dit, txn, a.ndn_str(), csn)
                    }
                }
            }
            (Some(b), None) => {
                // A delete stamps no entry: it takes a fresh CSN of this server, which its
                // tombstone keeps.
                let csn = dit.csn.next(txn.now());
                self.bury(dit, txn, b, &csn);
                self.raise(dit, txn, b.ndn_str(), csn)
            }
            (None, None) => Ok(()),
        }
    }
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

/// Starts sync search `op` (the Sync Request control `sync`): checks, subscribes, resolves
/// the request, then hands the rest to a task.
pub(crate) async fn start(op: Op, req: &SearchRequest<'_>, sync: SyncRequest<'static>) -> Next {
    let conn = op.conn.clone();
    let shared = conn.shared.clone();
    let Some(provider) = shared.syncprov.clone() else {
        let e = LdapError::new(
            ResultCode::UnavailableCriticalExtension,
            "the sync provider is off (syncprov)",
        );
        op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
        return Next::Continue;
    };
    let id = op.id;
    let who = op.who.clone();
    let cookie = match sync.cookie.as_deref().map(SyncCookie::parse).transpose() {
        Ok(c) => c.unwrap_or_default(),
        Err(e) => {
            let e = LdapError::new(ResultCode::ProtocolError, e.to_string());
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
            return Next::Continue;
        }
    };
    let stop = match conn
        .psearches
        .register(id, shared.config().max_persistent_searches)
    {
        Ok(s) => s,
        Err(e) => {
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
            return Next::Continue;
        }
    };
    // Subscribe first, then take the version (see `ops::psearch`).
    let persist = sync.mode == proto::controls::sync::Mode::RefreshAndPersist;
    let sub = persist.then(|| shared.store.subscribe(shared.config().syncprov_queue));
    let v = shared.store.read();
    let prepared = search::prepare(&shared, &v, req, &who, &op.conn.bases).and_then(|p| {
        let suffix = (!p.root)
            .then(|| {
                shared.suffixes.iter().position(|s| {
                    s.norm == p.base.norm || schema::norm_is_descendant(&p.base.norm, &s.norm)
                })
            })
            .flatten()
            .ok_or_else(|| {
                LdapError::new(
                    ResultCode::UnwillingToPerform,
                    "a sync search must have its base in a naming context",
                )
            })?;
        Ok((p, suffix))
    });
    let (p, suffix) = match prepared {
        Ok(x) => x,
        Err(e) => {
            conn.psearches.unregister(id, &stop);
            op.finish(tags::SEARCH_RESULT_DONE, Err(&e), Some(0)).await;
            return Next::Continue;
        }
    };
    if let Ok(mut m) = conn.running.lock() {
        m.insert(id, stop.flag.clone());
    }
    let agreement = shared.monitor.agreement(
        dit::monitor::Role::Provider,
        &format!("conn {} op {}", conn.id, id),
        &format!("IP={}", conn.peer),
    );
    agreement.connected("");
    agreement.set_state(dit::monitor::ReplState::Refreshing);
    let task = Task {
        agreement,
        conn: conn.clone(),
        id,
        req: super::longsearch::owned(req),
        who,
        rid: cookie.rid,
        suffix,
        stop: stop.clone(),
    };
    tokio::spawn(async move {
        let mut op = op;
        let end = task.run(&provider, &cookie, sub, v, p, &mut op).await;
        finish(&conn, id, &stop, op, end).await;
    });
    Next::Continue
}

/// One sync search.
struct Task {
    /// Its figures in cn=Monitor and `/metrics`, shown while it runs.
    agreement: Arc<dit::monitor::Agreement>,
    conn: Arc<Conn>,
    id: i32,
    req: SearchRequest<'static>,
    who: Arc<Identity>,
    rid: Option<u16>,
    suffix: usize,
    stop: Arc<Stop>,
}

/// What the refresh walk did.
struct Refreshed {
    outcome: Result<(), LdapError>,
    sent: u64,
    out: Vec<u8>,
    /// Entries that left the consumer's content (delete phase).
    gone: Vec<SyncUuid>,
}

impl Task {
    fn shared(&self) -> &Arc<Shared> {
        &self.conn.shared
    }

    /// The cookie for contextCSN values `csns`.
    fn cookie(&self, csns: &[String]) -> Vec<u8> {
        let sid = self.shared().config().server_id;
        SyncCookie {
            rid: self.rid,
            sid: (sid != 0).then_some(sid),
            csns: csns.to_vec(),
        }
        .to_string()
        .into_bytes()
    }

    fn context(&self, v: &store::Version) -> Vec<String> {
        let shared = self.shared();
        match (
            context_csn_type(v.schema()),
            shared.suffixes.get(self.suffix).and_then(|s| v.lookup(s)),
        ) {
            (Some(ty), Some(e)) => context_csns(ty, e),
            _ => Vec::new(),
        }
    }

    async fn run(
        self,
        provider: &Provider,
        cookie: &SyncCookie,
        sub: Option<Subscription>,
        v: Arc<store::Version>,
        p: Prepared,
        op: &mut Op,
    ) -> End {
        let ctx = self.context(&v);
        // The log must have taken in every batch up to `v` before it can answer for it.
        let mut seen = provider.seen.subscribe();
        let plan = match seen.wait_for(|s| *s >= v.seq).await {
            Ok(_) => provider.plan(self.suffix, &cookie.csns, v.seq),
            Err(_) => Plan::Full,
        };
        // Older than the session log (after a restart, or a long absence): the entries and
        // tombstones themselves say what changed since, if no tombstone the consumer may
        // need was forgotten since.
        let plan = match plan {
            Plan::Full
                if !cookie.csns.is_empty()
                    && v.seq >= provider.tombstones_from.load(Ordering::Acquire)
                    && tombstones_cover(&v, &cookie.csns) =>
            {
                Plan::Since(cookie.csns.clone())
            }
            p => p,
        };
        match &plan {
            Plan::Since(_) => tracing::info!(
                "sync search conn {} op {}: the cookie is older than the session log; the changes \
                 after it are taken from the entries and tombstones",
                self.conn.id,
                self.id
            ),
            Plan::Full if !cookie.csns.is_empty() => tracing::info!(
                "sync search conn {} op {}: the cookie is older than the tombstones kept; full refresh",
                self.conn.id,
                self.id
            ),
            _ => {}
        }
        let full = matches!(plan, Plan::Full);
        let v2 = v.clone();
        let walked = tokio::task::spawn_blocking(move || {
            let r = self.refresh(&v2, p, plan);
            (self, r)
        })
        .await;
        let (me, r) = match walked {
            Ok((me, Some(r))) => (me, r),
            Ok((_, None)) => return End::Silent,
            Err(e) => {
                tracing::error!("sync search: refresh failed: {e}");
                return End::Done(Err(LdapError::new(ResultCode::Other, "internal error")), 0);
            }
        };
        let Refreshed {
            outcome,
            sent,
            mut out,
            gone,
        } = r;
        if outcome.is_err() {
            if !out.is_empty() && !me.conn.send(out).await {
                return End::Silent;
            }
            return End::Done(outcome, sent);
        }
        let cookie_now = me.cookie(&ctx);
        me.sent(&ctx, &cookie_now, sent);
        me.agreement.refreshes.fetch_add(1, Ordering::Relaxed);
        if !gone.is_empty() {
            me.info(
                &mut out,
                &SyncInfo::SyncIdSet {
                    cookie: None,
                    refresh_deletes: true,
                    uuids: gone,
                },
            );
        }
        let Some(mut sub) = sub else {
            // refreshOnly: the result carries the cookie.
            let mut value = Vec::new();
            SyncDone {
                cookie: Some(Cow::Borrowed(&cookie_now)),
                refresh_deletes: !full,
            }
            .encode(&mut value);
            op.response.push(Control {
                oid: Cow::Borrowed(proto::oids::SYNC_DONE.as_bytes()),
                critical: false,
                value: Some(Cow::Owned(value)),
            });
            if !out.is_empty() && !me.conn.send(out).await {
                return End::Silent;
            }
            return End::Done(Ok(()), sent);
        };
        let end = if full {
            SyncInfo::RefreshPresent {
                cookie: Some(Cow::Borrowed(&cookie_now)),
                refresh_done: true,
            }
        } else {
            SyncInfo::RefreshDelete {
                cookie: Some(Cow::Borrowed(&cookie_now)),
                refresh_done: true,
            }
        };
        me.info(&mut out, &end);
        if !me.conn.send(out).await {
            return End::Silent;
        }
        me.agreement.set_state(dit::monitor::ReplState::Persisting);
        me.persist(&mut sub, v.seq, ctx, sent).await
    }

    /// Notes in the monitor what was sent: `n` entries, up to contextCSN `ctx` (`cookie`).
    fn sent(&self, ctx: &[String], cookie: &[u8], n: u64) {
        self.agreement.count_changes(n);
        self.agreement.set_context_csns(ctx);
        self.agreement
            .set_cookie_sent(&String::from_utf8_lossy(cookie));
    }

    /// Appends a Sync Info Message.
    fn info(&self, out: &mut Vec<u8>, info: &SyncInfo<'_>) {
        let mut value = Vec::with_capacity(64);
        info.encode(&mut value);
        proto::encode_intermediate_response(
            out,
            self.id,
            Some(proto::oids::SYNC_INFO.as_bytes()),
            Some(&value),
            &[],
        );
    }

    /// The refresh phase on the blocking pool; `None` if abandoned or the connection went.
    fn refresh(&self, v: &Arc<store::Version>, mut p: Prepared, plan: Plan) -> Option<Refreshed> {
        let shared = self.shared();
        let guard = shared.schema();
        let schema = &*guard;
        if matches!(plan, Plan::Full) {
            p.cands = v.candidates(schema, &p.filter);
        }
        let plan = match plan {
            Plan::Since(cookie) => Plan::Changed(self.changed_since(v, &cookie)),
            other => other,
        };
        let p = &p;
        let mut r = Refreshed {
            outcome: Ok(()),
            sent: 0,
            out: Vec::with_capacity(16 * 1024),
            gone: Vec::new(),
        };
        let base = match v.lookup(&p.base) {
            Some(e) if p.view.entry(schema, e).visible() => e.clone(),
            _ => {
                r.outcome = Err(shared.no_such_object_for(v, &p.base, &p.view));
                return Some(r);
            }
        };
        let flag = &self.stop.flag;
        let mut gone = false;
        let emit = |r: &mut Refreshed, e: &Entry, access: Option<&acl::EntryAccess<'_>>| {
            let Some(u) = uuid_of(shared, e) else {
                tracing::warn!("sync search: {} has no entryUUID; not sent", e.dn());
                return true;
            };
            self.encode(&mut r.out, e, &p.sel, access, State::Add, u, None);
            r.sent += 1;
            if r.out.len() >= FLUSH_BYTES {
                if !self.conn.send_blocking(std::mem::take(&mut r.out))
                    || flag.load(Ordering::Relaxed)
                {
                    return false;
                }
                r.out.reserve(16 * 1024);
            }
            true
        };
        match plan {
            // `Since` was turned into the list of what changed, above.
            Plan::UpToDate | Plan::Since(_) => {}
            Plan::Full => {
                search::walk(shared, v, p, &[base], flag, &mut |e, access| {
                    if emit(&mut r, e, access.as_ref()) {
                        ControlFlow::Continue(())
                    } else {
                        gone = true;
                        ControlFlow::Break(())
                    }
                });
            }
            Plan::Changed(list) => {
                for (u, eid) in list {
                    if flag.load(Ordering::Relaxed) {
                        return None;
                    }
                    let now = v
                        .get(eid)
                        .filter(|e| uuid_of(shared, e) == Some(u))
                        .and_then(|e| self.matches(p, schema, e).map(|a| (e, a)));
                    match now {
                        Some((e, access)) => {
                            if !emit(&mut r, e, access.as_ref()) {
                                gone = true;
                                break;
                            }
                        }
                        None => r.gone.push(u),
                    }
                }
            }
        }
        if gone || flag.load(Ordering::Relaxed) {
            return None;
        }
        Some(r)
    }

    /// What changed in the naming context after `cookie`, read from version `v` itself: every
    /// entry whose entryCSN is newer (parents first), then every tombstone whose delete is
    /// (as an entry that is not there: id 0). One pass over the naming context's entries.
    fn changed_since(&self, v: &store::Version, cookie: &[String]) -> Vec<(SyncUuid, EntryId)> {
        let shared = self.shared();
        let mut out = Vec::new();
        if let Some(top) = shared.suffixes.get(self.suffix).and_then(|s| v.lookup(s)) {
            let _ = v.walk(top, &mut |e| {
                let newer = e
                    .attr(shared.known.entry_csn)
                    .and_then(|a| a.first())
                    .and_then(|c| std::str::from_utf8(c).ok())
                    .is_none_or(|c| newer_than(cookie, c));
                if newer {
                    if let Some(u) = uuid_of(shared, e) {
                        out.push((u, e.id));
                    }
                }
                ControlFlow::Continue(())
            });
        }
        for t in v.tombstones().iter() {
            if newer_than(cookie, &t.csn) {
                if let Some(u) = parse_uuid(t.uuid.as_bytes()) {
                    out.push((u, 0));
                }
            }
        }
        out
    }

    /// Whether entry `e` belongs to the consumer's content: in scope, matching the filter,
    /// visible to the requester. `Some(access)` if so (`None` inside: the administrator).
    fn matches<'e>(
        &'e self,
        p: &'e Prepared,
        schema: &'e schema::Schema,
        e: &Entry,
    ) -> Option<Option<acl::EntryAccess<'e>>> {
        if !in_scope(p, e.ndn_str()) || p.filter.eval(schema, e) != Tri::True {
            return None;
        }
        let access = (!p.view.is_admin()).then(|| p.view.entry(schema, e));
        if let Some(a) = &access {
            if !a.visible() || !search::searchable_here(schema, p, a, e) {
                return None;
            }
        }
        Some(access)
    }

    /// Encodes one entry with its Sync State control: its stored attributes only. The
    /// attributes a server computes when asked (entryDN, hasSubordinates, numSubordinates,
    /// subschemaSubentry) are no content to replicate, each server has its own (and slapd,
    /// whose schema lacks numSubordinates, refuses an entry that has it); nor is contextCSN,
    /// left out of the suffix entry.
    #[allow(clippy::too_many_arguments)]
    fn encode(
        &self,
        out: &mut Vec<u8>,
        e: &Entry,
        sel: &search::Selection,
        access: Option<&acl::EntryAccess<'_>>,
        state: State,
        uuid: SyncUuid,
        cookie: Option<&[u8]>,
    ) {
        let shared = self.shared();
        let mut value = Vec::with_capacity(48 + cookie.map_or(0, <[u8]>::len));
        SyncState {
            state,
            entry_uuid: uuid,
            cookie: cookie.map(Cow::Borrowed),
        }
        .encode(&mut value);
        let ctls = [Control {
            oid: Cow::Borrowed(proto::oids::SYNC_STATE.as_bytes()),
            critical: false,
            value: Some(Cow::Owned(value)),
        }];
        if state == State::Delete {
            proto::encode_search_entry_with_controls(
                out,
                self.id,
                e.dn().as_bytes(),
                std::iter::empty::<(&[u8], std::iter::Empty<&[u8]>)>(),
                &ctls,
            );
            return;
        }
        let ty = context_csn_type(&shared.schema());
        let stripped = ty.filter(|t| e.attr(*t).is_some()).map(|t| {
            let mut attrs = e.to_attrs();
            attrs.retain(|a| a.ty != t);
            e.with_attrs(&attrs)
        });
        let e = stripped.as_ref().unwrap_or(e);
        search::encode_entry_with_controls(shared, None, out, Some(self.id), e, sel, access, &ctls);
    }

    /// The persist phase: the changes after version `seen`.
    async fn persist(
        &self,
        sub: &mut Subscription,
        seen: u64,
        mut ctx: Vec<String>,
        mut sent: u64,
    ) -> End {
        let shared = self.shared().clone();
        loop {
            if self.stop.stopped() {
                return End::Silent;
            }
            let next = tokio::select! {
                biased;
                _ = self.stop.wake.notified() => continue,
                b = sub.recv() => b,
            };
            let batch = match next {
                Ok(b) if b.seq <= seen => continue,
                Ok(b) => b,
                Err(FeedEnd::Lagged) => {
                    return End::Done(
                        Err(LdapError::new(
                            ResultCode::SyncRefreshRequired,
                            format!(
                                "the consumer fell more than {} changes behind (syncprov_queue); \
                                 refresh with the last cookie",
                                shared.config().syncprov_queue
                            ),
                        )),
                        sent,
                    )
                }
                Err(FeedEnd::Closed) => {
                    return End::Done(
                        Err(LdapError::new(
                            ResultCode::Unavailable,
                            "the server is shutting down",
                        )),
                        sent,
                    )
                }
            };
            // How far this search is behind the writer: the age of the batch it is at.
            self.agreement
                .set_lag(batch.time.elapsed().unwrap_or_default());
            let (out, n) = self.encode_batch(&batch, &mut ctx);
            if n > 0 {
                if !self.conn.send(out).await {
                    return End::Silent;
                }
                sent += n;
                self.sent(&ctx, &self.cookie(&ctx), n);
            }
        }
    }

    /// The messages one batch makes for this consumer, and how many; `ctx` follows the
    /// naming context's contextCSN.
    fn encode_batch(&self, batch: &Batch, ctx: &mut Vec<String>) -> (Vec<u8>, u64) {
        let shared = self.shared();
        let guard = shared.schema();
        let schema = &*guard;
        let suffix = shared.suffixes.get(self.suffix);
        if let (Some(ty), Some(s)) = (context_csn_type(schema), suffix) {
            for c in &batch.changes {
                if let Some(a) = c.after.as_ref().filter(|a| a.ndn_str() == s.norm) {
                    *ctx = context_csns(ty, a);
                }
            }
        }
        // Resolved once per batch against the newest version, as persistent search does.
        let v = shared.store.read();
        let Ok(p) = search::prepare(shared, &v, &self.req, &self.who, &Default::default()) else {
            return (Vec::new(), 0);
        };
        let mut msgs: Vec<(State, &Entry, Option<acl::EntryAccess<'_>>, SyncUuid)> = Vec::new();
        for c in &batch.changes {
            if only_context_csn(shared, c) {
                continue;
            }
            let was = c
                .before
                .as_ref()
                .is_some_and(|b| self.matches(&p, schema, b).is_some());
            let now = c
                .after
                .as_ref()
                .and_then(|a| self.matches(&p, schema, a).map(|x| (a, x)));
            match (was, now, c.kind()) {
                (_, Some((a, access)), kind) => {
                    let st = if was && kind != ChangeKind::Add {
                        State::Modify
                    } else {
                        State::Add
                    };
                    if let Some(u) = uuid_of(shared, a) {
                        msgs.push((st, a, access, u));
                    }
                }
                (true, None, _) => {
                    if let Some(b) = c.before.as_ref() {
                        if let Some(u) = uuid_of(shared, b) {
                            msgs.push((State::Delete, b, None, u));
                        }
                    }
                }
                (false, None, _) => {}
            }
        }
        let again = self.deletes_again(batch, &p, schema);
        let mut out = Vec::new();
        let cookie = self.cookie(ctx);
        let last = msgs.len() + again.len();
        for (i, (st, e, access, u)) in msgs.iter().enumerate() {
            let c = (i + 1 == last).then_some(cookie.as_slice());
            self.encode(&mut out, e, &p.sel, access.as_ref(), *st, *u, c);
        }
        for (i, (dn, u)) in again.iter().enumerate() {
            let c = (msgs.len() + i + 1 == last).then_some(cookie.as_slice());
            self.encode_delete(&mut out, dn, *u, c);
        }
        (out, last as u64)
    }

    /// The deletes a batch asserts again without deleting an entry (tombstones put anew,
    /// `repl::consumer::apply::store_cookie`): (DN, entryUUID) of those in the search's scope.
    /// Sent to the administrator only: the entry is gone, so no access rule can say who may
    /// see its DN; other consumers learn of it at their next refresh, by entryUUID.
    fn deletes_again<'b>(
        &self,
        batch: &'b Batch,
        p: &Prepared,
        schema: &schema::Schema,
    ) -> Vec<(&'b str, SyncUuid)> {
        if batch.tombstones.is_empty() || !p.view.is_admin() {
            return Vec::new();
        }
        let shared = self.shared();
        let deleted: std::collections::HashSet<SyncUuid> = batch
            .changes
            .iter()
            .filter_map(|c| c.before.as_ref().and_then(|b| uuid_of(shared, b)))
            .collect();
        batch
            .tombstones
            .iter()
            .filter_map(|t| {
                let u = parse_uuid(t.uuid.as_bytes())?;
                if deleted.contains(&u) {
                    return None;
                }
                let ndn = schema::Dn::parse(&t.dn)
                    .and_then(|d| d.normalize(schema))
                    .ok()?;
                in_scope(p, &ndn.norm).then_some((&*t.dn, u))
            })
            .collect()
    }

    /// Encodes a Sync State delete of entryUUID `uuid`, last seen as `dn`.
    fn encode_delete(&self, out: &mut Vec<u8>, dn: &str, uuid: SyncUuid, cookie: Option<&[u8]>) {
        let mut value = Vec::with_capacity(48 + cookie.map_or(0, <[u8]>::len));
        SyncState {
            state: State::Delete,
            entry_uuid: uuid,
            cookie: cookie.map(Cow::Borrowed),
        }
        .encode(&mut value);
        let ctls = [Control {
            oid: Cow::Borrowed(proto::oids::SYNC_STATE.as_bytes()),
            critical: false,
            value: Some(Cow::Owned(value)),
        }];
        proto::encode_search_entry_with_controls(
            out,
            self.id,
            dn.as_bytes(),
            std::iter::empty::<(&[u8], std::iter::Empty<&[u8]>)>(),
            &ctls,
        );
    }
}

/// Whether version `v`'s tombstones hold every delete after `cookie`: none was forgotten
/// after it (the floor, per server id, is at or before the cookie's CSN of that server id).
fn tombstones_cover(v: &store::Version, cookie: &[String]) -> bool {
    v.tombstones()
        .floor()
        .iter()
        .all(|f| !newer_than(cookie, f))
}

/// Whether the normalized DN `ndn` is within the search's base and scope.
fn in_scope(p: &Prepared, ndn: &str) -> bool {
    use store::Scope;
    let base = p.base.norm.as_str();
    match p.scope {
        Scope::Base => ndn == base,
        Scope::One => schema::norm_parent(ndn) == Some(base),
        Scope::Subtree => ndn == base || schema::norm_is_descendant(ndn, base),
    }
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
