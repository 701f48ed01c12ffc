//! The sync search (RFC 4533 Content Synchronization, as OpenLDAP's syncprov): a search with
//! the Sync Request control, served when the replication provider is on (`syncprov = true`;
//! what the provider keeps: contextCSN and tombstones, `dit::overlays::syncprov`; the session
//! log, `ops::syncprov`).
//! `start` checks it and spawns its task: the refresh phase, then for refreshAndPersist the
//! changes.
//!
//! Refresh, against one version `v` of the store (taken after subscribing to the feed, as
//! persistent search does, so nothing is lost or repeated between refresh and persist), fed
//! to the search engine's emitter (`engine::Emitter`) as any search's entries are:
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
    State, SyncCookie, SyncDone, SyncInfo, SyncRequest, SyncState, SyncUuid,
};
use proto::{tags, Control, ResultCode, SearchRequest};
use store::{Batch, ChangeKind, Entry, EntryId, Subscription};

use super::encode::Encoder;
use super::engine::{execute, prepare, Emitter, Prepared, Ran, Source, Walked};
use super::long::{finish, next_batch, shutting_down, Cut, End};
use super::state::Stop;
use crate::op::{Next, Op};
use crate::ops::syncprov::{only_context_csn, parse_uuid, uuid_of};
use crate::reply::Conn;
use crate::state::Shared;
use crate::synclog::{newer_than, Plan, Provider};
use dit::acl;
use dit::error::LdapError;
use dit::identity::Identity;
use dit::overlays::syncprov::{context_csn_type, context_csns};
use dit::select::Selection;

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
    // Subscribe first, then take the version (see `persistent`).
    let persist = sync.mode == proto::controls::sync::Mode::RefreshAndPersist;
    let sub = persist.then(|| shared.store.subscribe(shared.config().syncprov_queue));
    let v = shared.store.read();
    let prepared = prepare(&shared, &v, req, &who, &op.conn.bases).and_then(|mut p| {
        // A refresh sends the whole content, whatever the size limit: a consumer's copy is
        // only right whole.
        p.size_limit = 0;
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
        req: super::long::owned(req),
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

/// The source of a sync search's refresh: every entry of the content (`Plan::Full`), or those
/// changed since the consumer's cookie (`Plan::Changed`, the others listed as gone).
struct Refresh<'t> {
    task: &'t Task,
    plan: Plan,
    /// Entries that left the consumer's content (delete phase).
    gone: Vec<SyncUuid>,
}

impl Source for Refresh<'_> {
    fn feed(&mut self, em: &mut Emitter<'_>) -> Walked {
        let Some(bases) = em.bases() else {
            return Walked::Done;
        };
        let (task, shared, schema, p) = (self.task, em.shared, em.schema, em.p);
        match std::mem::replace(&mut self.plan, Plan::UpToDate) {
            // `Since` was turned into the list of what changed (`Task::refresh`).
            Plan::UpToDate | Plan::Since(_) => Walked::Done,
            Plan::Full => em.walk(&bases, &mut |em, e, access| {
                task.add(em, e, access.as_ref())
            }),
            Plan::Changed(list) => {
                for (u, eid) in list {
                    if em.abandoned() {
                        break;
                    }
                    let now =
                        em.v.get(eid)
                            .filter(|e| uuid_of(shared, e) == Some(u))
                            .and_then(|e| p.matches(shared, schema, e).map(|a| (e, a)));
                    match now {
                        Some((e, access)) => {
                            if task.add(em, e, access.as_ref()).is_break() {
                                break;
                            }
                        }
                        None => self.gone.push(u),
                    }
                }
                Walked::Done
            }
        }
    }
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
        let (
            Ran {
                outcome,
                sent,
                mut out,
            },
            gone,
        ) = r;
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

    /// The refresh phase on the blocking pool: what it sent, and the entries that left the
    /// consumer's content; `None` if abandoned or the connection went.
    fn refresh(
        &self,
        v: &Arc<store::Version>,
        mut p: Prepared,
        plan: Plan,
    ) -> Option<(Ran, Vec<SyncUuid>)> {
        if matches!(plan, Plan::Full) {
            p.plan(&self.shared().schema(), v);
        }
        let plan = match plan {
            Plan::Since(cookie) => Plan::Changed(self.changed_since(v, &cookie)),
            other => other,
        };
        let mut source = Refresh {
            task: self,
            plan,
            gone: Vec::new(),
        };
        let conn = &self.conn;
        let sink = &mut |b| conn.send_blocking(b, &self.stop.flag);
        let ran = execute(conn, v, self.id, &p, &self.stop.flag, sink, &mut source)?;
        Some((ran, source.gone))
    }

    /// Sends entry `e` of the content as `add`, which the requester reads with `access`.
    fn add(
        &self,
        em: &mut Emitter<'_>,
        e: &Entry,
        access: Option<&acl::EntryAccess<'_>>,
    ) -> ControlFlow<()> {
        let Some(u) = uuid_of(self.shared(), e) else {
            tracing::warn!("sync search: {} has no entryUUID; not sent", e.dn());
            return ControlFlow::Continue(());
        };
        let (schema, sel) = (em.schema, &em.p.sel);
        em.push(|out| {
            self.encode(
                out,
                schema,
                e,
                sel,
                access,
                &sync_state(State::Add, u, None),
            )
        })
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

    /// Encodes one entry with its Sync State control: its stored attributes only. The
    /// attributes a server computes when asked (entryDN, hasSubordinates, numSubordinates,
    /// subschemaSubentry) are no content to replicate, each server has its own (and slapd,
    /// whose schema lacks numSubordinates, refuses an entry that has it); nor is contextCSN,
    /// left out of the suffix entry. A delete is the DN alone.
    fn encode(
        &self,
        out: &mut Vec<u8>,
        schema: &schema::Schema,
        e: &Entry,
        sel: &Selection,
        access: Option<&acl::EntryAccess<'_>>,
        state: &SyncState<'_>,
    ) {
        if state.state == State::Delete {
            encode_dn(out, self.id, e.dn(), state);
            return;
        }
        let ty = context_csn_type(schema);
        let stripped = ty.filter(|t| e.attr(*t).is_some()).map(|t| {
            let mut attrs = e.to_attrs();
            attrs.retain(|a| a.ty != t);
            e.with_attrs(&attrs)
        });
        let e = stripped.as_ref().unwrap_or(e);
        let enc = Encoder {
            shared: self.shared(),
            schema,
            v: None,
            sel,
            id: Some(self.id),
        };
        enc.entry(out, e, access, &[state_control(state)]);
    }

    /// The persist phase: the changes after version `seen`.
    async fn persist(
        &self,
        sub: &mut Subscription,
        seen: u64,
        mut ctx: Vec<String>,
        mut sent: u64,
    ) -> End {
        loop {
            let batch = match next_batch(&self.stop, sub, seen).await {
                Ok(b) => b,
                Err(Cut::Stopped) => return End::Silent,
                Err(Cut::Lagged) => {
                    return End::Done(
                        Err(LdapError::new(
                            ResultCode::SyncRefreshRequired,
                            format!(
                                "the consumer fell more than {} changes behind (syncprov_queue); \
                                 refresh with the last cookie",
                                self.shared().config().syncprov_queue
                            ),
                        )),
                        sent,
                    )
                }
                Err(Cut::Closed) => return End::Done(Err(shutting_down()), sent),
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
        let Ok(p) = prepare(shared, &v, &self.req, &self.who, &Default::default()) else {
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
                .is_some_and(|b| p.matches(shared, schema, b).is_some());
            let now = c
                .after
                .as_ref()
                .and_then(|a| p.matches(shared, schema, a).map(|x| (a, x)));
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
            let state = sync_state(*st, *u, c);
            self.encode(&mut out, schema, e, &p.sel, access.as_ref(), &state);
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
                p.in_scope(shared, &ndn.norm).then_some((&*t.dn, u))
            })
            .collect()
    }

    /// Encodes a Sync State delete of entryUUID `uuid`, last seen as `dn`.
    fn encode_delete(&self, out: &mut Vec<u8>, dn: &str, uuid: SyncUuid, cookie: Option<&[u8]>) {
        let state = sync_state(State::Delete, uuid, cookie);
        encode_dn(out, self.id, dn, &state);
    }
}

/// The Sync State of an entry: its state, its entryUUID, the cookie on the last message of a
/// batch.
fn sync_state(state: State, uuid: SyncUuid, cookie: Option<&[u8]>) -> SyncState<'_> {
    SyncState {
        state,
        entry_uuid: uuid,
        cookie: cookie.map(Cow::Borrowed),
    }
}

/// The Sync State control.
fn state_control(state: &SyncState<'_>) -> Control<'static> {
    let mut value = Vec::with_capacity(48 + state.cookie.as_ref().map_or(0, |c| c.len()));
    state.encode(&mut value);
    Control {
        oid: Cow::Borrowed(proto::oids::SYNC_STATE.as_bytes()),
        critical: false,
        value: Some(Cow::Owned(value)),
    }
}

/// A SearchResultEntry of DN `dn` alone with its Sync State (a delete).
fn encode_dn(out: &mut Vec<u8>, id: i32, dn: &str, state: &SyncState<'_>) {
    proto::encode_search_entry_with_controls(
        out,
        id,
        dn.as_bytes(),
        std::iter::empty::<(&[u8], std::iter::Empty<&[u8]>)>(),
        &[state_control(state)],
    );
}

/// Whether version `v`'s tombstones hold every delete after `cookie`: none was forgotten
/// after it (the floor, per server id, is at or before the cookie's CSN of that server id).
fn tombstones_cover(v: &store::Version, cookie: &[String]) -> bool {
    v.tombstones()
        .floor()
        .iter()
        .all(|f| !newer_than(cookie, f))
}
