//! The password policy's protocol side (`ppolicy = true`; the policy itself is
//! `dit::ppolicy`, the state a change leaves `dit::overlays::ppolicy`): binds (locked
//! accounts, failures and successes recorded through the writer, expiry, grace logins,
//! must-change), the checks before a modify or Password Modify changes a password, the
//! restriction of a connection whose password was reset, and the response control
//! (1.3.6.1.4.1.42.2.27.8.5.1) on bind, modify and Password Modify when the request asks for it.
//!
//! A bind records its outcome with a write to the account (slapd does the same with an
//! internal modify): the writer's job reads the newest version, so concurrent failures all
//! count; the bind awaits the commit (the connection waits for a bind's answer anyway), never
//! blocking a runtime thread; it goes through the write path's door like any change, so
//! contextCSN, the change feed and replication follow it. Password verification for the
//! checks runs on the hashing threads (`credcache::Credentials::hashing_job`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use dit::ppolicy::{unix_seconds, BindEvent, Lock, PasswordChange, Policy, Refusal};
use proto::controls::ppolicy::{encode_response, PolicyError, PolicyWarning};
use proto::{BindAuth, BindRequest, Control, ModOp, ModifyRequest, ProtocolOp, ResultCode};
use schema::NormDn;
use store::Entry;

use crate::reply::Conn;
use crate::state::Shared;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;
use dit::modify::Mod;

/// The password policy response control.
pub(crate) fn control(
    warning: Option<PolicyWarning>,
    error: Option<PolicyError>,
) -> Control<'static> {
    Control {
        oid: proto::oids::PASSWORD_POLICY.as_bytes().into(),
        critical: false,
        value: Some(encode_response(warning, error).into()),
    }
}

fn invalid() -> LdapError {
    LdapError::new(ResultCode::InvalidCredentials, "invalid credentials")
}

/// The account a simple bind names, as the policy sees it when the bind starts.
struct Account {
    ndn: NormDn,
    entry: Arc<Entry>,
    policy: Policy,
    lock: Lock,
}

/// A bind under the policy: `start` before the password is checked, `finish` with the result.
pub(crate) struct BindCheck {
    account: Option<Account>,
    want_control: bool,
}

impl BindCheck {
    /// Looks up the account of a simple bind with a name and a password (not the
    /// administrator's, which the policy never governs) and whether it is locked.
    pub(crate) fn start(shared: &Shared, req: &BindRequest<'_>, want_control: bool) -> BindCheck {
        BindCheck {
            account: account(shared, req),
            want_control,
        }
    }

    /// The bind's answer when the account may not bind at all (invalidCredentials, before the
    /// password is looked at, as slapd answers).
    pub(crate) fn refusal(&self) -> Option<LdapError> {
        self.account
            .as_ref()
            .is_some_and(|a| a.lock == Lock::Locked)
            .then(invalid)
    }

    /// Applies the policy to the bind's result `r`: records failures and successes on the
    /// account, refuses an expired password without grace logins left, restricts the
    /// connection after a reset, and adds the response control to `response` when asked.
    pub(crate) async fn finish(
        self,
        conn: &Conn,
        r: LdapResult<Identity>,
        response: &mut Vec<Control<'static>>,
    ) -> LdapResult<Identity> {
        let Some(acc) = self.account else { return r };
        let shared = &conn.shared;
        let Some(pp) = shared.ppolicy.clone() else {
            return r;
        };
        let now = SystemTime::now();
        let t = &pp.types;
        let mut warning = None;
        let mut error = None;
        let (r, event) = match r {
            Err(e) if acc.lock == Lock::Locked => {
                error = pp.use_lockout.then_some(PolicyError::AccountLocked);
                (Err(e), BindEvent::None)
            }
            Err(e) if e.code == ResultCode::InvalidCredentials => (Err(e), BindEvent::Failure),
            Err(e) => (Err(e), BindEvent::None),
            Ok(who) => {
                let s = pp.on_success(&acc.policy, &acc.entry, unix_seconds(now));
                warning = s.control_warning();
                if s.expired {
                    error = Some(PolicyError::PasswordExpired);
                    (Err(invalid()), BindEvent::Success { grace_used: false })
                } else {
                    if s.change_after_reset {
                        error = Some(PolicyError::ChangeAfterReset);
                        conn.must_change.store(true, Ordering::Relaxed);
                    }
                    let grace_used = s.grace_remaining.is_some();
                    (Ok(who), BindEvent::Success { grace_used })
                }
            }
        };
        let has_password = acc.entry.attr(t.user_password).is_some();
        let writes = has_password
            && match event {
                BindEvent::Failure => acc.policy.max_recorded_failure > 0,
                BindEvent::Success { grace_used } => {
                    grace_used || acc.entry.attr(t.failure_time).is_some()
                }
                BindEvent::None => false,
            };
        let lock_expired = acc.lock == Lock::Expired;
        if writes || lock_expired {
            record(shared, acc.ndn, acc.policy, event, lock_expired).await;
        }
        if self.want_control {
            response.push(control(warning, error));
        }
        r
    }
}

fn account(shared: &Shared, req: &BindRequest<'_>) -> Option<Account> {
    let pp = shared.ppolicy.as_ref()?;
    let BindAuth::Simple(password) = &req.auth else {
        return None;
    };
    if req.name.is_empty() || password.is_empty() || req.version != 3 {
        return None;
    }
    let (_, ndn) = shared.parse_dn(&req.name).ok()?;
    if ndn == shared.admin {
        return None;
    }
    let v = shared.store.read();
    let entry = v.lookup(&ndn)?.clone();
    let policy = pp.policy_of(&v, &entry);
    let lock = match &policy {
        Some(p) => pp.lock_state(p, &entry, unix_seconds(SystemTime::now())),
        None => Lock::Open,
    };
    Some(Account {
        ndn,
        entry,
        policy: policy.unwrap_or_default(),
        lock,
    })
}

/// Writes what a bind records on its account, through the write path's door in the writer's
/// job on the newest version (`Ppolicy::record_bind_change`: stamped, the overlay chain, so
/// contextCSN moves with it), and waits for the commit. A failure is logged, not answered (as
/// slapd).
async fn record(
    shared: &Arc<Shared>,
    ndn: NormDn,
    policy: Policy,
    event: BindEvent,
    expired: bool,
) {
    let sh = shared.clone();
    let fut = shared.store.write(move |txn| -> LdapResult<()> {
        let Some(pp) = &sh.ppolicy else { return Ok(()) };
        let admin = &sh.config().admin_dn;
        pp.record_bind_change(&sh, txn, &ndn, &policy, event, expired, admin)
            .map(drop)
    });
    match fut.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("ppolicy: recording a bind failed: {e}"),
        Err(e) => tracing::warn!("ppolicy: recording a bind failed: {e}"),
    }
}

/// What the checks before a password change found: the stored value the old password (a
/// modify's deleted value) matched, which the modify deletes in its place.
#[derive(Default)]
pub(crate) struct Checked {
    old_stored: Option<Box<[u8]>>,
}

impl Checked {
    /// Puts the stored value in place of the cleartext the first userPassword delete names.
    pub(crate) fn apply(self, shared: &Shared, mods: &mut [Mod]) {
        let Some(stored) = self.old_stored else {
            return;
        };
        let up = shared.known.user_password;
        if let Some(m) = mods
            .iter_mut()
            .find(|m| m.ty == up && m.op == ModOp::Delete && !m.values.is_empty())
        {
            m.values = vec![stored];
        }
    }
}

fn refuse(r: Refusal, want_control: bool, response: &mut Vec<Control<'static>>) -> LdapError {
    if want_control {
        response.push(control(None, r.error));
    }
    LdapError::new(r.code, r.message)
}

/// The password change a modify makes, if it touches userPassword: read from its changes as
/// `dit::modify::prepare` resolved them.
fn change_of(shared: &Shared, mods: &[Mod]) -> Option<PasswordChange> {
    let up = shared.known.user_password;
    let mut ch = PasswordChange::default();
    let mut touches = false;
    let mut deleted = false;
    for m in mods.iter().filter(|m| m.ty == up) {
        touches = true;
        let first = m.values.first().map(|v| v.to_vec());
        match m.op {
            ModOp::Delete if first.is_some() && ch.old.is_none() => {
                deleted = true;
                ch.old = first;
            }
            ModOp::Add | ModOp::Replace if first.is_some() => {
                if ch.new.is_some() || m.values.len() > 1 {
                    ch.extra_values = true;
                }
                ch.delete_then_add |= deleted;
                ch.new = first;
            }
            _ => {}
        }
    }
    touches.then_some(ch)
}

/// Checks a modify of `ndn` that changes a password (its changes `mods`, prepared) against the
/// policy of its target before it goes to the writer (`dit::ppolicy::Ppolicy::check_change`).
pub(crate) async fn check_modify(
    shared: &Arc<Shared>,
    who: &Identity,
    ndn: &NormDn,
    mods: &[Mod],
    want_control: bool,
    response: &mut Vec<Control<'static>>,
) -> LdapResult<Checked> {
    if shared.ppolicy.is_none() {
        return Ok(Checked::default());
    }
    let Some(ch) = change_of(shared, mods) else {
        return Ok(Checked::default());
    };
    check(shared, who, ndn, ch, want_control, response).await
}

/// Checks the password of an entry an add creates against the policy it will have
/// (`dit::ppolicy::Ppolicy::check_add`).
pub(crate) fn check_add(
    shared: &Shared,
    who: &Identity,
    req: &proto::AddRequest<'_>,
    want_control: bool,
    response: &mut Vec<Control<'static>>,
) -> LdapResult<()> {
    let Some(pp) = &shared.ppolicy else {
        return Ok(());
    };
    let schema = shared.schema();
    let of = |ty| {
        req.attributes
            .iter()
            .find(|a| dit::resolve_attr(&schema, &a.name).is_ok_and(|(t, _)| t == ty))
    };
    let Some(pw) = of(shared.known.user_password) else {
        return Ok(());
    };
    let subentry = of(pp.types.policy_subentry).and_then(|a| a.values.first());
    let policy = pp.policy_named(&shared.store.read(), subentry.map(|v| &**v));
    let values: Vec<&[u8]> = pw.values.iter().map(|v| &**v).collect();
    pp.check_add(policy.as_ref(), &values, who.is_admin)
        .map_err(|r| refuse(r, want_control, response))
}

/// Checks Password Modify (RFC 3062) setting `new` on `target` (with `old` when the request
/// carries it) against the target's policy.
pub(crate) async fn check_password_modify(
    shared: &Arc<Shared>,
    who: &Identity,
    target: &NormDn,
    new: &[u8],
    old: Option<&[u8]>,
    want_control: bool,
    response: &mut Vec<Control<'static>>,
) -> LdapResult<()> {
    if shared.ppolicy.is_none() {
        return Ok(());
    }
    let ch = PasswordChange {
        new: Some(new.to_vec()),
        extra_values: false,
        old: old.map(<[u8]>::to_vec),
        delete_then_add: false,
        exop_old: old.is_some(),
    };
    check(shared, who, target, ch, want_control, response)
        .await
        .map(drop)
}

async fn check(
    shared: &Arc<Shared>,
    who: &Identity,
    ndn: &NormDn,
    ch: PasswordChange,
    want_control: bool,
    response: &mut Vec<Control<'static>>,
) -> LdapResult<Checked> {
    let Some(pp) = shared.ppolicy.clone() else {
        return Ok(Checked::default());
    };
    let (entry, policy) = {
        let v = shared.store.read();
        let Some(e) = v.lookup(ndn) else {
            return Ok(Checked::default());
        };
        (e.clone(), pp.policy_of(&v, e))
    };
    let by_admin = who.is_admin;
    let self_change = who.ndn.as_ref() == Some(ndn);
    let now = unix_seconds(SystemTime::now());
    // Verifying passwords takes a hash each: on the hashing threads, and only when the checks
    // that verify can run.
    let verifies = policy.is_some() && !by_admin && ch.new.is_some();
    let r = if verifies {
        shared
            .credentials
            .hashing_job(move || {
                pp.check_change(policy.as_ref(), &entry, &ch, by_admin, self_change, now)
            })
            .await?
    } else {
        pp.check_change(policy.as_ref(), &entry, &ch, by_admin, self_change, now)
    };
    match r {
        Ok(old_stored) => Ok(Checked { old_stored }),
        Err(refusal) => Err(refuse(refusal, want_control, response)),
    }
}

/// The refusal of an operation on a connection whose bind found the password reset and to be
/// changed (changeAfterReset): everything but bind, unbind, abandon, extended operations and
/// a modify of the password is insufficientAccessRights until the password is changed (the
/// account's `pwdReset` is gone) or another bind succeeds.
pub(crate) fn restriction(
    conn: &Conn,
    identity: &Identity,
    op: &ProtocolOp<'_>,
) -> Option<LdapError> {
    if !conn.must_change.load(Ordering::Relaxed) {
        return None;
    }
    let shared = &conn.shared;
    let restricted = match op {
        ProtocolOp::SearchRequest(_)
        | ProtocolOp::CompareRequest(_)
        | ProtocolOp::AddRequest(_)
        | ProtocolOp::DelRequest(_) => true,
        ProtocolOp::ModifyRequest(req) => !password_only(shared, req),
        _ => false,
    };
    if !restricted {
        return None;
    }
    if !still_reset(shared, identity) {
        conn.must_change.store(false, Ordering::Relaxed);
        return None;
    }
    Some(LdapError::new(
        ResultCode::InsufficientAccessRights,
        "Operations are restricted to bind/unbind/abandon/StartTLS/modify password",
    ))
}

/// Whether a modify changes nothing but userPassword and operational attributes.
fn password_only(shared: &Shared, req: &ModifyRequest<'_>) -> bool {
    let schema = shared.schema();
    req.changes.iter().all(|c| {
        dit::resolve_attr(&schema, &c.attr.name).is_ok_and(|(ty, _)| {
            ty == shared.known.user_password || schema.attr(ty).is_operational()
        })
    })
}

/// Whether the bound account still has its password reset under a must-change policy.
fn still_reset(shared: &Shared, identity: &Identity) -> bool {
    let (Some(pp), Some(ndn)) = (&shared.ppolicy, &identity.ndn) else {
        return false;
    };
    let v = shared.store.read();
    let Some(e) = v.lookup(ndn) else { return false };
    let reset = e
        .attr(pp.types.reset)
        .and_then(|a| a.first())
        .is_some_and(|r| r.eq_ignore_ascii_case(b"TRUE"));
    reset && pp.policy_of(&v, e).is_some_and(|p| p.must_change)
}

/// The response control for an operation refused by `restriction`, when asked for.
pub(crate) fn restriction_control() -> Control<'static> {
    control(None, Some(PolicyError::ChangeAfterReset))
}
