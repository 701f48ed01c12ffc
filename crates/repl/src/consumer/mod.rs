//! The consumer (as OpenLDAP's syncrepl): one task per `[[syncrepl]]` table, which connects to
//! its provider, sends a search with the Sync Request control (RFC 4533) carrying the cookie
//! kept on the suffix entry, and applies what comes back through the write path as replicated
//! changes (`apply`). refreshAndPersist keeps the search open and applies changes as they
//! come; refreshOnly polls every `interval`. A failed session (provider down, refused bind,
//! broken connection) is retried on the configured schedule: the server never depends on its
//! provider being up.
//!
//! Modules: `spec` (configuration), `conn` (the client connection: TCP, TLS, bind, framing),
//! `apply` (socket-free: replicated changes on a `Txn`, the cookie on the suffix entry).
//!
//! Writes are pipelined: each entry is handed to the writer as soon as it is decoded (the
//! writer applies jobs in the order they are queued and commits many in one fsync), with at
//! most `WRITE_WINDOW` outstanding, so a refresh of thousands of entries is not one fsync per
//! entry.

pub mod apply;
pub mod conn;
pub mod spec;

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dit::error::LdapResult;
use dit::overlays::Origin;
use dit::Dit;
use proto::controls::sync::{Mode, State, SyncCookie, SyncDone, SyncInfo, SyncRequest, SyncState};
use proto::{Control, LdapMessage, ProtocolOp, ResultCode};

use apply::{Area, Incoming, Outcome};
pub use spec::ConsumerSpec;

/// Writer jobs a consumer may have queued and not yet seen committed.
pub const WRITE_WINDOW: usize = 512;

/// Why a session ended.
#[derive(Debug, thiserror::Error)]
pub enum ReplError {
    #[error("network: {0}")]
    Io(#[from] std::io::Error),
    #[error("the provider closed the connection")]
    Closed,
    #[error("TLS: {0}")]
    Tls(String),
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("{what}: {}: {message}", code.name())]
    Ldap {
        what: &'static str,
        code: ResultCode,
        message: String,
    },
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    #[error("the local writer refused a write: {0}")]
    Store(String),
}

/// What a consumer is doing (`Phase::Persisting` …): the state of its monitor agreement.
pub use dit::monitor::ReplState as Phase;

/// The state of one consumer, shared with whoever watches it: the agreement it publishes in
/// cn=Monitor, `/metrics` and `/readyz` (`dit::monitor::Registry::agreement`), updated as the
/// session goes (state, cookies, contextCSN received, lag, refreshes, changes applied,
/// failures and the last error).
pub type Status = dit::monitor::Agreement;

/// After the refresh, a provider silent this long means the consumer has applied everything
/// it was sent: its lag is then zero.
pub const QUIET: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs the consumer `spec` against the directory `dit` until the task is dropped (aborted).
/// `D` is anything that derefs to the directory (the server's shared state). `credentials`
/// are read again at every connection (a reload may replace them: `Credentials`).
pub async fn run<D>(
    dit: Arc<D>,
    spec: ConsumerSpec,
    status: Arc<Status>,
    credentials: Arc<arc_swap::ArcSwap<spec::Credentials>>,
) where
    D: Deref<Target = Dit> + Send + Sync + 'static,
{
    let stop = |why: String| {
        tracing::error!("replication rid={:03}: {why}; consumer stopped", spec.rid);
        status.set_last_error(&why);
        status.disconnected(None);
        status.set_state(Phase::Stopped);
    };
    let area = match Area::new(&dit, &spec) {
        Ok(a) => Arc::new(a),
        Err(e) => return stop(e),
    };
    let mut failures: u32 = 0;
    loop {
        status.set_state(Phase::Connecting);
        // The credentials in force now, and the TLS client made of them (certificate files
        // are read again, so a renewed one is taken too).
        let spec = spec.with_credentials(&credentials.load());
        let tls = if spec.provider.ldaps || spec.start_tls != spec::StartTls::No {
            match conn::client_config(&spec) {
                Ok(c) => Some(c),
                Err(e) => return stop(e),
            }
        } else {
            None
        };
        let mut session = Session {
            dit: dit.clone(),
            area: area.clone(),
            spec: &spec,
            status: &status,
            pending: VecDeque::new(),
            deferred: Vec::new(),
            present: None,
            cookie: SyncCookie::default(),
            heard: Vec::new(),
            held_deletes: Vec::new(),
            refreshed: false,
        };
        let r = session.run(tls.as_ref()).await;
        let refreshed = session.refreshed;
        let settled = session.settle().await;
        match r.and(settled) {
            Ok(()) => {
                failures = 0;
                if let spec::SyncMode::RefreshOnly { interval } = spec.mode {
                    status.disconnected(Some(SystemTime::now() + interval));
                    status.set_state(Phase::Idle);
                    tokio::time::sleep(interval).await;
                }
            }
            Err(e) => {
                if refreshed {
                    // It worked for a while: the schedule starts again.
                    failures = 0;
                }
                failures = failures.saturating_add(1);
                let why = e.to_string();
                status.failed(&why);
                let Some(wait) = spec.retry.delay(failures) else {
                    return stop(format!(
                        "{}: {why}; the retry schedule is exhausted",
                        spec.provider
                    ));
                };
                tracing::warn!(
                    "replication rid={:03} from {}: {why}; retrying in {} s",
                    spec.rid,
                    spec.provider,
                    wait.as_secs()
                );
                status.disconnected(Some(SystemTime::now() + wait));
                status.set_state(Phase::Retrying);
                tokio::time::sleep(wait).await;
            }
        }
    }
}

type Job = Pin<Box<dyn Future<Output = Result<LdapResult<Outcome>, store::StoreError>> + Send>>;

/// One session with the provider, and the replicated changes it has queued.
struct Session<'s, D> {
    dit: Arc<D>,
    area: Arc<Area>,
    spec: &'s ConsumerSpec,
    status: &'s Status,
    /// Writer jobs queued, oldest first, each with the entry it applies (to try again when
    /// its parent was missing).
    pending: VecDeque<(Job, Option<Incoming>)>,
    /// Entries whose parent had not arrived yet.
    deferred: Vec<Incoming>,
    /// During a present phase: the entryUUIDs (equality form) the provider mentioned.
    present: Option<HashSet<Box<[u8]>>>,
    /// The newest cookie received in this session (also kept on the suffix entry).
    cookie: SyncCookie,
    /// The CSNs of the cookies this provider sent in this session (not those kept from other
    /// providers): what it had seen, per server id. Multi-provider deletes are checked
    /// against it (`apply::unseen_by_provider`).
    heard: Vec<String>,
    /// Multi-provider: deletes of the refresh, held until its end, when the provider's
    /// cookie says what it had seen.
    held_deletes: Vec<String>,
    refreshed: bool,
}

/// What one message from the provider means for the session.
enum Flow {
    Continue,
    /// The search ended (refreshOnly done).
    Done,
    /// e-syncRefreshRequired: start again without a cookie.
    RefreshRequired,
}

impl<D> Session<'_, D>
where
    D: Deref<Target = Dit> + Send + Sync + 'static,
{
    async fn run(&mut self, tls: Option<&Arc<rustls::ClientConfig>>) -> Result<(), ReplError> {
        let timeout = self.spec.timeout;
        let mut conn = tokio::time::timeout(timeout, conn::open(self.spec, tls))
            .await
            .map_err(|_| ReplError::Timeout(timeout))??;
        self.status
            .connected(&conn.local.map(|a| a.to_string()).unwrap_or_default());
        let mut fresh = false;
        loop {
            let kept = apply::stored_cookie(&self.dit, &self.dit.store.read(), &self.area);
            let csns = if fresh { Vec::new() } else { kept.csns };
            if !csns.is_empty() {
                self.status.resumed.fetch_add(1, Ordering::Relaxed);
            }
            let cookie = SyncCookie {
                rid: Some(self.spec.rid),
                sid: None,
                csns,
            };
            self.cookie = cookie.clone();
            let sent = cookie.to_string();
            self.status.set_cookie_sent(&sent);
            let id = self.search(&mut conn, &sent).await?;
            self.status.set_state(Phase::Refreshing);
            match self.receive(&mut conn, id).await? {
                // Cut off while persisting (it fell behind): the cookie kept is good, as slapd's
                // syncrepl resumes with it. A refresh starts anew: what it marked present or
                // held belongs to the refresh that ended.
                Flow::RefreshRequired if self.refreshed => {
                    tracing::info!(
                        "replication rid={:03}: the provider cut the persistent search off; resuming from the cookie",
                        self.spec.rid
                    );
                    self.settle().await?;
                    self.restart_refresh();
                }
                Flow::RefreshRequired if !fresh => {
                    tracing::info!(
                        "replication rid={:03}: the provider cannot resume from the cookie; full refresh",
                        self.spec.rid
                    );
                    self.settle().await?;
                    self.restart_refresh();
                    fresh = true;
                }
                Flow::RefreshRequired => {
                    return Err(ReplError::Protocol(
                        "e-syncRefreshRequired in answer to a request without a cookie".into(),
                    ))
                }
                Flow::Done | Flow::Continue => {
                    let _ = conn.send(ProtocolOp::UnbindRequest, Vec::new()).await;
                    if self.spec.mode == spec::SyncMode::RefreshAndPersist {
                        // Retried on the schedule, not at once: a provider that keeps ending
                        // the search is not hammered.
                        return Err(ReplError::Protocol(
                            "the provider ended the persistent search".into(),
                        ));
                    }
                    return Ok(());
                }
            }
        }
    }

    async fn search(
        &mut self,
        conn: &mut conn::Conn<Box<dyn conn::Io>>,
        cookie: &str,
    ) -> Result<i32, ReplError> {
        let mode = match self.spec.mode {
            spec::SyncMode::RefreshOnly { .. } => Mode::RefreshOnly,
            spec::SyncMode::RefreshAndPersist => Mode::RefreshAndPersist,
        };
        let mut value = Vec::with_capacity(64 + cookie.len());
        SyncRequest {
            mode,
            cookie: Some(cookie.as_bytes().into()),
            reload_hint: false,
        }
        .encode(&mut value);
        let filter = proto::Filter::parse(&self.spec.filter)
            .map_err(|e| ReplError::Protocol(format!("filter: {e}")))?;
        let req = proto::SearchRequest {
            base: self.spec.search_base.as_bytes().into(),
            scope: self.spec.scope,
            deref: proto::DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter,
            attributes: self
                .spec
                .attrs
                .iter()
                .map(|a| a.as_bytes().into())
                .collect(),
        };
        let control = Control {
            oid: proto::oids::SYNC_REQUEST.as_bytes().into(),
            critical: true,
            value: Some(value.into()),
        };
        conn.send(ProtocolOp::SearchRequest(req), vec![control])
            .await
    }

    /// Forgets the state of the refresh or persist phase that ended, before searching again on
    /// the same connection: the entries marked present, the deletes held, and that the
    /// refresh was done (a present phase deleted every entry it had not marked, when a second
    /// refresh of one session marked none).
    fn restart_refresh(&mut self) {
        self.refreshed = false;
        self.present = None;
        self.held_deletes.clear();
    }

    /// Reads the provider's answers to search `id` until it ends.
    async fn receive(
        &mut self,
        conn: &mut conn::Conn<Box<dyn conn::Io>>,
        id: i32,
    ) -> Result<Flow, ReplError> {
        loop {
            let pdu = if self.refreshed {
                tokio::select! {
                    pdu = conn.recv() => pdu?,
                    () = tokio::time::sleep(QUIET) => {
                        // Everything sent is applied (each change is settled before the
                        // next is read): caught up.
                        self.status.set_lag(Duration::ZERO);
                        continue;
                    }
                }
            } else {
                conn.recv().await?
            };
            self.status.contact();
            let msg = LdapMessage::decode(&pdu)
                .map_err(|e| ReplError::Protocol(format!("undecodable message: {e}")))?;
            if msg.id == 0 {
                return Err(ReplError::Closed);
            }
            if msg.id != id {
                continue;
            }
            match self.message(msg).await? {
                // After the refresh, each change is committed before the next is read: a
                // rename's new parent, added by the change before, is then in place.
                Flow::Continue if self.refreshed => self.settle().await?,
                Flow::Continue => {}
                other => return Ok(other),
            }
        }
    }

    async fn message(&mut self, msg: LdapMessage<'_>) -> Result<Flow, ReplError> {
        let control = |oid: &str| {
            msg.controls
                .iter()
                .find(|c| &*c.oid == oid.as_bytes())
                .and_then(|c| c.value.as_deref())
        };
        match &msg.op {
            ProtocolOp::SearchResultEntry { dn, attributes } => {
                let Some(value) = control(proto::oids::SYNC_STATE) else {
                    return Err(ReplError::Protocol(
                        "an entry without a Sync State control".into(),
                    ));
                };
                let state = SyncState::decode(value)
                    .map_err(|e| ReplError::Protocol(format!("Sync State: {e:?}")))?;
                let Some(uuid) = apply::uuid_text(&state.entry_uuid) else {
                    return Err(ReplError::Protocol("Sync State: bad entryUUID".into()));
                };
                let cookie = state.cookie.as_deref().map(|c| self.take_cookie(c));
                match state.state {
                    State::Present => {
                        self.mark_present(&uuid);
                        if let Some(c) = cookie {
                            self.queue_cookie(c).await?;
                        }
                    }
                    State::Add | State::Modify => {
                        self.mark_present(&uuid);
                        let inc = Incoming {
                            dn: conn::lossy(dn),
                            uuid,
                            attrs: attributes
                                .iter()
                                .map(|a| {
                                    (
                                        conn::lossy(&a.name),
                                        a.values.iter().map(|v| v.to_vec()).collect(),
                                    )
                                })
                                .collect(),
                        };
                        self.queue_entry(inc, cookie).await?;
                    }
                    State::Delete => self.queue_delete(vec![uuid], cookie).await?,
                }
                Ok(Flow::Continue)
            }
            ProtocolOp::SearchResultReference(_) => Ok(Flow::Continue),
            ProtocolOp::IntermediateResponse { oid, value } => {
                if oid.as_deref() != Some(proto::oids::SYNC_INFO.as_bytes()) {
                    return Ok(Flow::Continue);
                }
                let Some(value) = value else {
                    return Err(ReplError::Protocol("a Sync Info without a value".into()));
                };
                let info = SyncInfo::decode(value)
                    .map_err(|e| ReplError::Protocol(format!("Sync Info: {e:?}")))?;
                let cookie = info.cookie().map(|c| self.take_cookie(c));
                match info {
                    SyncInfo::NewCookie(_) => {}
                    SyncInfo::RefreshDelete { refresh_done, .. } => {
                        // The end of a delete phase: nothing more to delete.
                        self.present = None;
                        if refresh_done {
                            self.refresh_done().await?;
                        }
                    }
                    SyncInfo::RefreshPresent { refresh_done, .. } => {
                        self.end_present_phase().await?;
                        if refresh_done {
                            self.refresh_done().await?;
                        }
                    }
                    SyncInfo::SyncIdSet {
                        refresh_deletes,
                        uuids,
                        ..
                    } => {
                        let uuids: Vec<String> =
                            uuids.iter().filter_map(|u| apply::uuid_text(u)).collect();
                        if refresh_deletes {
                            self.queue_delete(uuids, None).await?;
                        } else {
                            for u in &uuids {
                                self.mark_present(u);
                            }
                        }
                    }
                }
                if let Some(c) = cookie {
                    self.queue_cookie(c).await?;
                }
                Ok(Flow::Continue)
            }
            ProtocolOp::SearchResultDone(result) => {
                // RFC 4533 e-syncRefreshRequired: the provider cannot resume from the cookie.
                if result.code == ResultCode::SyncRefreshRequired {
                    return Ok(Flow::RefreshRequired);
                }
                if result.code != ResultCode::Success {
                    return Err(ReplError::Ldap {
                        what: "sync search",
                        code: result.code,
                        message: conn::lossy(&result.message),
                    });
                }
                let done = match control(proto::oids::SYNC_DONE) {
                    Some(v) => SyncDone::decode(v)
                        .map_err(|e| ReplError::Protocol(format!("Sync Done: {e:?}")))?,
                    None => SyncDone::default(),
                };
                let cookie = done.cookie.as_deref().map(|c| self.take_cookie(c));
                if !done.refresh_deletes {
                    self.end_present_phase().await?;
                }
                if let Some(c) = cookie {
                    self.queue_cookie(c).await?;
                }
                self.refresh_done().await?;
                Ok(Flow::Done)
            }
            ProtocolOp::ExtendedResponse(x) => {
                // A notice of disconnection (message id 0) is handled by the caller; any
                // other extended response here is the provider ending the session.
                Err(ReplError::Ldap {
                    what: "provider",
                    code: x.result.code,
                    message: conn::lossy(&x.result.message),
                })
            }
            _ => Err(ReplError::Protocol(format!(
                "unexpected message (tag {}) during the sync search",
                msg.op.tag()
            ))),
        }
    }

    /// Reads a provider's cookie and merges it into the session's.
    fn take_cookie(&mut self, raw: &[u8]) -> SyncCookie {
        match SyncCookie::parse(raw) {
            Ok(c) => {
                self.status
                    .set_cookie_received(&String::from_utf8_lossy(raw));
                let mut received = SyncCookie {
                    csns: self.status.context_csns(),
                    ..SyncCookie::default()
                };
                received.csns.extend(c.csns.iter().cloned());
                received.normalize();
                self.status.set_context_csns(&received.csns);
                self.cookie.csns.extend(c.csns.iter().cloned());
                self.cookie.normalize();
                let mut heard = SyncCookie {
                    csns: std::mem::take(&mut self.heard),
                    ..SyncCookie::default()
                };
                heard.csns.extend(c.csns.iter().cloned());
                heard.normalize();
                self.heard = heard.csns;
                c
            }
            Err(e) => {
                tracing::warn!("replication rid={:03}: {e}; ignored", self.spec.rid);
                SyncCookie::default()
            }
        }
    }

    fn mark_present(&mut self, uuid: &str) {
        // Only a refresh has a present phase: after it, the set would only grow.
        if self.refreshed {
            return;
        }
        if let Some(n) = apply::uuid_norm(&self.dit, uuid) {
            self.present.get_or_insert_with(HashSet::new).insert(n);
        }
    }

    /// The refresh is over: what was deferred is tried again, and from now on (persist)
    /// changes are applied as they come.
    async fn refresh_done(&mut self) -> Result<(), ReplError> {
        let held = std::mem::take(&mut self.held_deletes);
        if !held.is_empty() {
            self.queue_delete_now(held, None).await?;
        }
        self.settle().await?;
        self.present = None;
        if !self.refreshed {
            self.refreshed = true;
            self.status.refreshes.fetch_add(1, Ordering::Relaxed);
        }
        // Everything the provider held when it answered is here.
        self.status.set_lag(Duration::ZERO);
        if matches!(self.spec.mode, spec::SyncMode::RefreshAndPersist) {
            self.status.set_state(Phase::Persisting);
        }
        tracing::info!(
            "replication rid={:03}: refresh from {} done ({})",
            self.spec.rid,
            self.spec.provider,
            self.cookie
        );
        Ok(())
    }

    /// The end of a present phase: every entry of the area not mentioned is deleted.
    async fn end_present_phase(&mut self) -> Result<(), ReplError> {
        let present = self.present.take().unwrap_or_default();
        // Entries waiting for a parent must be in before anything is found absent.
        self.settle().await?;
        let (dit, area) = (self.dit.clone(), self.area.clone());
        let heard = self.heard.clone();
        let job = self.dit.store.write(move |txn| {
            apply::delete_absent(&dit, txn, &area, &heard, &present).map(|gone| {
                if gone.is_empty() {
                    Outcome::Unchanged
                } else {
                    tracing::info!(
                        "replication: {} entries gone at the provider deleted",
                        gone.len()
                    );
                    Outcome::Replaced
                }
            })
        });
        self.push(Box::pin(job), None).await
    }

    async fn queue_entry(
        &mut self,
        inc: Incoming,
        cookie: Option<SyncCookie>,
    ) -> Result<(), ReplError> {
        let (dit, area) = (self.dit.clone(), self.area.clone());
        let keep = inc.clone();
        let job = self.dit.store.write(move |txn| {
            let mut outcome = Outcome::Unchanged;
            // Through the write path's door as a replicated change: the overlay chain on what
            // was applied, the CSN clock moved to its entryCSN.
            dit::write::write_job_as(&dit, txn, Origin::Replicated, |txn| {
                let (o, applied) = apply::apply_entry(&dit, txn, &area, &inc)?;
                outcome = o;
                Ok(applied)
            })?;
            if let Some(c) = &cookie {
                apply::store_cookie(&dit, txn, &area, c)?;
            }
            Ok(outcome)
        });
        self.push(Box::pin(job), Some(keep)).await
    }

    async fn queue_delete(
        &mut self,
        uuids: Vec<String>,
        cookie: Option<SyncCookie>,
    ) -> Result<(), ReplError> {
        if self.area.multi && !self.refreshed {
            // What the provider had seen is known at the end of the refresh.
            self.held_deletes.extend(uuids);
            if let Some(c) = cookie {
                self.queue_cookie(c).await?;
            }
            return Ok(());
        }
        self.queue_delete_now(uuids, cookie).await
    }

    async fn queue_delete_now(
        &mut self,
        uuids: Vec<String>,
        cookie: Option<SyncCookie>,
    ) -> Result<(), ReplError> {
        let (dit, area) = (self.dit.clone(), self.area.clone());
        let heard = self.heard.clone();
        let job = self.dit.store.write(move |txn| {
            let mut any = false;
            for u in &uuids {
                let deleted = dit::write::write_job_as(&dit, txn, Origin::Replicated, |txn| {
                    apply::apply_delete(&dit, txn, &area, &heard, u)
                })?;
                any |= deleted.is_some();
            }
            if let Some(c) = &cookie {
                apply::store_cookie(&dit, txn, &area, c)?;
            }
            Ok(if any {
                Outcome::Replaced
            } else {
                Outcome::Unchanged
            })
        });
        self.push(Box::pin(job), None).await
    }

    async fn queue_cookie(&mut self, cookie: SyncCookie) -> Result<(), ReplError> {
        let (dit, area) = (self.dit.clone(), self.area.clone());
        let job = self.dit.store.write(move |txn| {
            apply::store_cookie(&dit, txn, &area, &cookie).map(|()| Outcome::Unchanged)
        });
        self.push(Box::pin(job), None).await
    }

    /// Queues a job, first waiting for the oldest ones while `WRITE_WINDOW` are outstanding.
    async fn push(&mut self, job: Job, inc: Option<Incoming>) -> Result<(), ReplError> {
        while self.pending.len() >= WRITE_WINDOW {
            self.complete_one().await?;
        }
        self.pending.push_back((job, inc));
        Ok(())
    }

    /// Waits for the oldest queued job and accounts for its outcome.
    async fn complete_one(&mut self) -> Result<(), ReplError> {
        let Some((job, inc)) = self.pending.pop_front() else {
            return Ok(());
        };
        match job.await {
            Err(e) => return Err(ReplError::Store(e.to_string())),
            Ok(Ok(Outcome::MissingParent)) => {
                if let Some(inc) = inc {
                    self.deferred.push(inc);
                }
            }
            Ok(Ok(Outcome::Unchanged)) => {}
            Ok(Ok(_)) => {
                self.status.count_changes(1);
                if self.refreshed {
                    if let Some(lag) = inc.as_ref().and_then(Incoming::age) {
                        self.status.set_lag(lag);
                    }
                }
            }
            Ok(Err(e)) => {
                // The provider holds what this server refuses (e.g. a schema it lacks): the
                // entry is skipped, as slapd's syncrepl does, and the rest goes on.
                let what = inc.map(|i| i.dn).unwrap_or_else(|| "a change".into());
                tracing::error!(
                    "replication rid={:03}: {what} not applied: {e}",
                    self.spec.rid
                );
            }
        }
        Ok(())
    }

    /// Waits for every queued job, then tries the deferred entries again while that places
    /// some of them (each round places at least one, so it ends).
    async fn settle(&mut self) -> Result<(), ReplError> {
        loop {
            while !self.pending.is_empty() {
                self.complete_one().await?;
            }
            if self.deferred.is_empty() {
                return Ok(());
            }
            let before = self.deferred.len();
            for inc in std::mem::take(&mut self.deferred) {
                self.queue_entry(inc, None).await?;
            }
            while !self.pending.is_empty() {
                self.complete_one().await?;
            }
            if self.deferred.len() >= before {
                for inc in &self.deferred {
                    tracing::error!(
                        "replication rid={:03}: {} not applied: its parent is not here",
                        self.spec.rid,
                        inc.dn
                    );
                }
                self.deferred.clear();
                return Ok(());
            }
        }
    }
}
