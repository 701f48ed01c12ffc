//! One operation context (design.md seam 1). Every request the read loop dispatches becomes an
//! `Op` — message id, the connection's reply half, the bound and the effective identity, the
//! parsed request controls, the response controls the operation adds, and its access-log line —
//! and every operation has the shape `handle(op, request) -> Next`. Results leave through
//! `Op::finish`, which attaches the response controls and ends the log line, so no operation
//! encodes a result or writes a log line of its own.

use std::sync::Arc;

use proto::{Control, ResultCode};

use crate::controls::RequestControls;
use crate::ops::state::Audit;
use crate::reply::{AccessLine, Conn};
use dit::error::{wire_result, LdapError, LdapResult};
use dit::identity::Identity;
use dit::write::denied;

/// What the read loop does after an operation was dispatched.
pub(crate) enum Next {
    Continue,
    Close,
    /// The StartTLS response is queued: hand the stream to TLS.
    StartTls,
    /// A bind ended: the connection's identity is now this one (anonymous after a failure).
    Bound(Arc<Identity>),
}

pub(crate) struct Op {
    pub id: i32,
    pub conn: Arc<Conn>,
    /// Who the connection is bound as.
    #[expect(
        dead_code,
        reason = "no operation needs it yet: the `proxy` module checks the bound identity before the \
                  operation starts, and the access log takes it from there"
    )]
    pub bound: Arc<Identity>,
    /// Whom the operation acts for: access control, stamps and logs use this one. The bound
    /// identity unless proxied authorization (RFC 4370, the `proxy` module) says otherwise.
    pub who: Arc<Identity>,
    pub controls: RequestControls,
    /// Controls attached to the operation's final response.
    pub response: Vec<Control<'static>>,
    pub log: Option<AccessLine>,
    /// When the request was dispatched: the start of its latency and of its log's etime_us.
    pub start: std::time::Instant,
    /// What it is, for the completed-operations counter bumped when the context ends.
    pub kind: crate::state::OpType,
    /// Whether it was counted as completed already: just before its result is sent, so that
    /// a client holding the result finds it counted (cn=Monitor, /metrics).
    pub counted: bool,
}

/// An operation is complete when its context ends, whatever the way: result sent, abandoned,
/// connection gone (cn=Operations,cn=Monitor counts it then).
impl Drop for Op {
    fn drop(&mut self) {
        self.count_completed();
    }
}

impl Op {
    pub fn shared(&self) -> &Arc<crate::state::Shared> {
        &self.conn.shared
    }

    /// Encodes the final response (an LDAPResult-only PDU with tag `tag`) with the response
    /// controls.
    pub fn result_pdu(&self, tag: u8, r: Result<(), &LdapError>) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        self.encode_result_into(&mut out, tag, r);
        out
    }

    pub fn encode_result_into(&self, out: &mut Vec<u8>, tag: u8, r: Result<(), &LdapError>) {
        proto::encode_result_with(out, self.id, tag, &wire_result(r), &self.response);
    }

    /// Sends the final response and ends the access-log line (`entries` for searches).
    pub async fn finish(self, tag: u8, r: Result<(), &LdapError>, entries: Option<u64>) {
        let pdu = self.result_pdu(tag, r);
        self.finish_with(pdu, code_of(r), entries).await;
    }

    /// Sends the extended response (RFC 4511 §4.12) with result `r` and response value `value`
    /// (which a failure may carry too, as End Transaction's does), and ends the operation.
    pub(crate) async fn finish_extended(self, r: Result<(), &LdapError>, value: Option<Vec<u8>>) {
        let mut out = Vec::with_capacity(96);
        let (res, rc) = (wire_result(r), code_of(r));
        proto::encode_extended_response_with(
            &mut out,
            self.id,
            &res,
            None,
            value.as_deref(),
            &self.response,
        );
        self.finish_with(out, rc, None).await;
    }

    /// Sends a successful extended response carrying a diagnostic message.
    pub(crate) async fn finish_extended_text(self, message: &str) {
        let mut out = Vec::with_capacity(96);
        let res = proto::LdapResult {
            code: ResultCode::Success,
            matched_dn: b"".as_slice().into(),
            message: message.as_bytes().into(),
            referral: Vec::new(),
        };
        proto::encode_extended_response_with(&mut out, self.id, &res, None, None, &self.response);
        self.finish_with(out, ResultCode::Success, None).await;
    }

    /// `finish` without waiting, from any thread (the store's writer answers writes this way):
    /// `None` when the response is queued; otherwise the future that waits for room on the
    /// connection, to be spawned.
    pub fn finish_now(
        mut self,
        tag: u8,
        r: Result<(), &LdapError>,
    ) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        let pdu = self.result_pdu(tag, r);
        let rc = code_of(r);
        self.count_completed();
        let elapsed = self.timed();
        match self.conn.try_send(pdu) {
            Ok(()) => {
                self.conn.log_end(self.log.take(), rc, None, elapsed);
                None
            }
            Err(pdu) => Some(self.finish_after(pdu, rc, None, elapsed)),
        }
    }

    /// Counts the operation as completed (once).
    fn count_completed(&mut self) {
        if !self.counted {
            self.counted = true;
            crate::state::Counters::bump(self.conn.shared.counters.completed(self.kind));
        }
    }

    /// Sends an already encoded final response carrying result code `rc`.
    pub async fn finish_with(mut self, pdu: Vec<u8>, rc: ResultCode, entries: Option<u64>) {
        self.count_completed();
        let elapsed = self.timed();
        self.finish_after(pdu, rc, entries, elapsed).await;
    }

    /// `finish_with` once the operation is counted and timed (`elapsed`).
    async fn finish_after(
        mut self,
        pdu: Vec<u8>,
        rc: ResultCode,
        entries: Option<u64>,
        elapsed: std::time::Duration,
    ) {
        if let Some(n) = entries {
            let sent = &self.conn.shared.counters.traffic.entries_sent;
            sent.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
        self.conn.send(pdu).await;
        self.conn.log_end(self.log.take(), rc, entries, elapsed);
    }

    /// The result is ready to be queued: the operation's latency, recorded in its type's
    /// histogram (before the result leaves, as the completed counter, so that a client
    /// holding the result finds it counted) and returned for the access log's etime_us: one
    /// clock reading for both.
    fn timed(&self) -> std::time::Duration {
        let elapsed = self.start.elapsed();
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.conn.shared.counters.latency(self.kind).record(micros);
        elapsed
    }

    /// The assertion control (RFC 4528) of the operation, if it carries one, to be checked for
    /// its effective identity.
    pub fn take_assertion(&mut self) -> Option<dit::write::Assertion> {
        self.controls
            .assertion
            .take()
            .map(|filter| dit::write::Assertion::new(self.who.clone(), filter))
    }

    /// How a change will be audited: from what it applies (`logs::applied_change`), or off.
    pub fn audit_applied(&self) -> Audit {
        if self.conn.shared.audit_log.enabled() {
            Audit::Applied
        } else {
            Audit::Off
        }
    }

    /// The audit record of a change, if the audit log is on (written once the change succeeds).
    pub fn audit(&self, dn: &[u8], change: impl FnOnce() -> ldif::ChangeRecord) -> Option<Vec<u8>> {
        let conn = &self.conn;
        conn.shared.audit_log.enabled().then(|| {
            crate::audit::audit_record(
                conn.id,
                conn.peer,
                &self.who.dn,
                &String::from_utf8_lossy(dn),
                &change(),
            )
        })
    }

    /// Whether the operation may change anything: over TLS where `require_tls_for_writes`
    /// asks for it, and never anonymously (as slapd, whatever the access rules say). Checked
    /// before the request's DN and values are looked at, so a refused change costs only its
    /// decoding.
    pub fn may_write(&self) -> LdapResult<()> {
        writes_allowed(&self.conn)?;
        crate::replica::refer_writes(&self.conn.shared, &self.who)?;
        if self.who.is_anonymous() {
            return Err(denied(&self.who, true, "write"));
        }
        Ok(())
    }
}

/// `require_tls_for_writes`: changes only over TLS.
pub(crate) fn writes_allowed(conn: &Conn) -> LdapResult<()> {
    if conn.shared.config().require_tls_for_writes && conn.tls.is_none() {
        return Err(LdapError::new(
            ResultCode::ConfidentialityRequired,
            "changes require TLS (use StartTLS or ldaps)",
        ));
    }
    Ok(())
}

/// The result code a response carries.
pub(crate) fn code_of(r: Result<(), &LdapError>) -> ResultCode {
    match r {
        Ok(()) => ResultCode::Success,
        Err(e) => e.code,
    }
}
