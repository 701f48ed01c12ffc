//! Password policy (draft-behera-ldap-password-policy-10 as OpenLDAP 2.5's `ppolicy` overlay
//! implements it), without sockets: which policy governs an entry (`pwdPolicySubentry`, else
//! the configured default), whether an account is locked, what a bind's success or failure
//! records (`pwdFailureTime`, `pwdAccountLockedTime`, `pwdGraceUseTime`), whether a password
//! change is allowed (`check_change`: who may change, safe modify, minimum age, quality,
//! history), and the state a change leaves (`after_change`: `pwdChangedTime`, `pwdHistory`,
//! `pwdReset`, cleared failures and locks), which the overlay `overlays::ppolicy` applies in
//! the writer's job.
//!
//! The policy attribute is always userPassword (slapd 2.5 ignores `pwdAttribute` too). Times
//! are seconds since the epoch; the stored forms are GeneralizedTime, with microseconds for
//! `pwdFailureTime` and `pwdGraceUseTime` as slapd writes them.
//!
//! Not implemented (documented in docs/configuration.md): `pwdMinDelay`/`pwdMaxDelay`
//! (`pwdAccountTmpLockoutEnd`), `pwdMaxIdle`, `pwdCheckModule`, the account usability and
//! Netscape password controls.

use std::time::{SystemTime, UNIX_EPOCH};

use proto::controls::ppolicy::{PolicyError, PolicyWarning};
use proto::ResultCode;
use schema::{AttrId, Dn, NormDn, Schema};
use store::{Attr, Entry, Version};

/// The syntax OID slapd writes into `pwdHistory` values (userPassword's, Octet String).
const HISTORY_SYNTAX: &str = "1.3.6.1.4.1.1466.115.121.1.40";

/// The `ppolicy*` settings as the configuration gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PpolicySpec {
    /// `ppolicy`: the overlay is on (and the `ppolicy` schema bundle with it).
    pub enabled: bool,
    /// `ppolicy_default`: the DN of the policy for entries without `pwdPolicySubentry`.
    pub default_policy: Option<String>,
    /// `ppolicy_use_lockout`: a locked account's bind carries the accountLocked error in the
    /// response control (slapd's `ppolicy_use_lockout`; off by default, as there).
    pub use_lockout: bool,
}

/// The attribute types of the policy and of the state kept on accounts, resolved once.
#[derive(Debug, Clone)]
pub struct Types {
    pub user_password: AttrId,
    pub modifiers_name: AttrId,
    pub changed_time: AttrId,
    pub account_locked_time: AttrId,
    pub failure_time: AttrId,
    pub history: AttrId,
    pub grace_use_time: AttrId,
    pub reset: AttrId,
    pub policy_subentry: AttrId,
    pub start_time: AttrId,
    pub end_time: AttrId,
    min_age: AttrId,
    max_age: AttrId,
    in_history: AttrId,
    check_quality: AttrId,
    min_length: AttrId,
    max_length: AttrId,
    expire_warning: AttrId,
    grace_authn_limit: AttrId,
    grace_expiry: AttrId,
    lockout: AttrId,
    lockout_duration: AttrId,
    max_failure: AttrId,
    max_recorded_failure: AttrId,
    failure_count_interval: AttrId,
    must_change: AttrId,
    allow_user_change: AttrId,
    safe_modify: AttrId,
}

impl Types {
    /// Resolves the types; the schema must hold the `ppolicy` bundle.
    pub fn resolve(schema: &Schema) -> Result<Types, String> {
        let get = |n: &str| {
            schema.attr_by_name(n).ok_or_else(|| {
                format!("ppolicy: the schema lacks '{n}' (enable the 'ppolicy' schema bundle)")
            })
        };
        Ok(Types {
            user_password: get("userPassword")?,
            modifiers_name: get("modifiersName")?,
            changed_time: get("pwdChangedTime")?,
            account_locked_time: get("pwdAccountLockedTime")?,
            failure_time: get("pwdFailureTime")?,
            history: get("pwdHistory")?,
            grace_use_time: get("pwdGraceUseTime")?,
            reset: get("pwdReset")?,
            policy_subentry: get("pwdPolicySubentry")?,
            start_time: get("pwdStartTime")?,
            end_time: get("pwdEndTime")?,
            min_age: get("pwdMinAge")?,
            max_age: get("pwdMaxAge")?,
            in_history: get("pwdInHistory")?,
            check_quality: get("pwdCheckQuality")?,
            min_length: get("pwdMinLength")?,
            max_length: get("pwdMaxLength")?,
            expire_warning: get("pwdExpireWarning")?,
            grace_authn_limit: get("pwdGraceAuthNLimit")?,
            grace_expiry: get("pwdGraceExpiry")?,
            lockout: get("pwdLockout")?,
            lockout_duration: get("pwdLockoutDuration")?,
            max_failure: get("pwdMaxFailure")?,
            max_recorded_failure: get("pwdMaxRecordedFailure")?,
            failure_count_interval: get("pwdFailureCountInterval")?,
            must_change: get("pwdMustChange")?,
            allow_user_change: get("pwdAllowUserChange")?,
            safe_modify: get("pwdSafeModify")?,
        })
    }
}

/// One `pwdPolicy` entry's settings (seconds and counts; 0 is "off", as in the draft).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub min_age: i64,
    pub max_age: i64,
    pub in_history: i64,
    pub check_quality: i64,
    pub min_length: i64,
    pub max_length: i64,
    pub expire_warning: i64,
    pub grace_authn_limit: i64,
    pub grace_expiry: i64,
    pub lockout: bool,
    pub lockout_duration: i64,
    pub max_failure: i64,
    /// At least `max_failure` (slapd raises it so).
    pub max_recorded_failure: i64,
    pub failure_count_interval: i64,
    pub must_change: bool,
    pub allow_user_change: bool,
    pub safe_modify: bool,
}

impl Default for Policy {
    /// What applies without a policy entry: nothing but users changing their own passwords.
    fn default() -> Policy {
        Policy {
            min_age: 0,
            max_age: 0,
            in_history: 0,
            check_quality: 0,
            min_length: 0,
            max_length: 0,
            expire_warning: 0,
            grace_authn_limit: 0,
            grace_expiry: 0,
            lockout: false,
            lockout_duration: 0,
            max_failure: 0,
            max_recorded_failure: 0,
            failure_count_interval: 0,
            must_change: false,
            allow_user_change: true,
            safe_modify: false,
        }
    }
}

/// Whether an account may bind now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    Open,
    Locked,
    /// Its lock has run out: the stamp is removed by the bind.
    Expired,
}

/// What a successful password check means under the policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BindSuccess {
    /// The password expired and no grace login is left: the bind fails (passwordExpired).
    pub expired: bool,
    /// A grace login is used; this many remain after it.
    pub grace_remaining: Option<u32>,
    /// Seconds until the password expires, inside the warning period.
    pub warning: Option<u32>,
    /// The password was reset and must be changed before anything else (changeAfterReset).
    pub change_after_reset: bool,
}

impl BindSuccess {
    /// The response control's warning.
    pub fn control_warning(&self) -> Option<PolicyWarning> {
        self.warning
            .map(PolicyWarning::TimeBeforeExpiration)
            .or(self
                .grace_remaining
                .map(PolicyWarning::GraceAuthNsRemaining))
    }
}

/// What a bind records on the account (in the writer's job).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindEvent {
    /// A wrong password: a `pwdFailureTime`, and the lock when there are enough of them.
    Failure,
    /// The right one: failures forgotten, a `pwdGraceUseTime` if a grace login was used.
    Success { grace_used: bool },
    /// Nothing but the removal of a run-out lock stamp.
    None,
}

/// A password change the policy refuses: the result code, slapd's message and the control's
/// error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ResultCode,
    pub message: &'static str,
    pub error: Option<PolicyError>,
}

impl Refusal {
    fn new(code: ResultCode, message: &'static str, error: Option<PolicyError>) -> Refusal {
        Refusal {
            code,
            message,
            error,
        }
    }
}

/// A password change as a request makes it, for `check_change`.
#[derive(Debug, Clone, Default)]
pub struct PasswordChange {
    /// The new password as sent (cleartext, or a value already hashed).
    pub new: Option<Vec<u8>>,
    /// New values in the request beyond the first (the policy allows one password).
    pub extra_values: bool,
    /// The old password: the value a modify deletes, or Password Modify's oldPasswd.
    pub old: Option<Vec<u8>>,
    /// A modify that deletes a value and then adds or replaces (slapd's "delete + add").
    pub delete_then_add: bool,
    /// Password Modify carrying oldPasswd.
    pub exop_old: bool,
}

/// The policy overlay's configuration, resolved: shared by the overlay (in the writer) and the
/// protocol layer (binds, checks before changes).
#[derive(Debug)]
pub struct Ppolicy {
    pub types: Types,
    pub default_policy: Option<NormDn>,
    pub use_lockout: bool,
    pub admin: NormDn,
}

/// Seconds since the epoch.
pub fn unix_seconds(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// `YYYYmmddHHMMSS.uuuuuuZ` (slapd's form for pwdFailureTime and pwdGraceUseTime).
pub fn micro_time(t: SystemTime) -> String {
    let micros = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_micros());
    format!("{}.{micros:06}Z", crate::csn::civil_time(t, "", "", ""))
}

/// The seconds since the epoch of a GeneralizedTime value (`YYYYmmddHHMMSS[.f]Z`); fractions
/// are dropped. `None` when it is not one.
pub fn parse_time(v: &[u8]) -> Option<i64> {
    let digits = v.get(..14)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = |i: usize, len: usize| {
        digits[i..i + len]
            .iter()
            .fold(0i32, |acc, b| acc * 10 + i32::from(b - b'0'))
    };
    let rest = &v[14..];
    let rest = match rest.split_first() {
        Some((b'.' | b',', r)) => {
            let k = r.iter().take_while(|b| b.is_ascii_digit()).count();
            &r[k..]
        }
        _ => rest,
    };
    if rest != b"Z" {
        return None;
    }
    let month = ::time::Month::try_from(u8::try_from(n(4, 2)).ok()?).ok()?;
    let date =
        ::time::Date::from_calendar_date(n(0, 4), month, u8::try_from(n(6, 2)).ok()?).ok()?;
    let t = ::time::Time::from_hms(
        u8::try_from(n(8, 2)).ok()?,
        u8::try_from(n(10, 2)).ok()?,
        u8::try_from(n(12, 2)).ok()?,
    )
    .ok()?;
    Some(
        ::time::PrimitiveDateTime::new(date, t)
            .assume_utc()
            .unix_timestamp(),
    )
}

fn int_of(v: &[u8]) -> Option<i64> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

fn is_true(e: &Entry, ty: AttrId) -> bool {
    e.attr(ty)
        .and_then(|a| a.first())
        .is_some_and(|v| v.eq_ignore_ascii_case(b"TRUE"))
}

fn time_of(e: &Entry, ty: AttrId) -> Option<i64> {
    e.attr(ty).and_then(|a| a.first()).and_then(parse_time)
}

/// Sets `ty` to `values` (none: removes it). Returns whether anything changed.
fn set(schema: &Schema, attrs: &mut Vec<Attr>, ty: AttrId, values: Vec<Box<[u8]>>) -> bool {
    let old = attrs
        .iter()
        .position(|a| a.ty == ty && a.options.is_empty());
    if values.is_empty() {
        return match old {
            Some(i) => {
                attrs.remove(i);
                true
            }
            None => false,
        };
    }
    if let Some(i) = old {
        if attrs[i].values == values {
            return false;
        }
        attrs.remove(i);
    }
    if let Ok(a) = Attr::new(schema, ty, "", values) {
        attrs.push(a);
    }
    true
}

fn values_of(attrs: &[Attr], ty: AttrId) -> Vec<Box<[u8]>> {
    attrs
        .iter()
        .find(|a| a.ty == ty && a.options.is_empty())
        .map(|a| a.values.clone())
        .unwrap_or_default()
}

/// A value not yet among `taken`: `micro_time(now)`, a microsecond later while it is taken.
fn fresh_micro_time(now: SystemTime, taken: &[Box<[u8]>]) -> Box<[u8]> {
    let mut t = now;
    // Bounded: each step moves past one taken value.
    for _ in 0..=taken.len() {
        let v = micro_time(t).into_bytes().into_boxed_slice();
        if !taken.contains(&v) {
            return v;
        }
        t += std::time::Duration::from_micros(1);
    }
    micro_time(t).into_bytes().into_boxed_slice()
}

impl Ppolicy {
    /// The overlay's configuration: the spec's default DN normalized, the types resolved.
    pub fn new(spec: &PpolicySpec, schema: &Schema, admin: NormDn) -> Result<Ppolicy, String> {
        let default_policy = match &spec.default_policy {
            None => None,
            Some(s) => Some(
                Dn::parse(s)
                    .and_then(|d| d.normalize(schema))
                    .map_err(|e| format!("ppolicy_default '{s}': {e}"))?,
            ),
        };
        Ok(Ppolicy {
            types: Types::resolve(schema)?,
            default_policy,
            use_lockout: spec.use_lockout,
            admin,
        })
    }

    /// The policy governing `e`: its `pwdPolicySubentry`, else the default. `None` when that
    /// entry is absent or holds a value that is not an integer (slapd then applies none).
    pub fn policy_of(&self, v: &Version, e: &Entry) -> Option<Policy> {
        self.policy_named(
            v,
            e.attr(self.types.policy_subentry).and_then(|a| a.first()),
        )
    }

    /// The policy an entry whose `pwdPolicySubentry` is `subentry` has (`policy_of`), for an
    /// entry not yet in the tree.
    pub fn policy_named(&self, v: &Version, subentry: Option<&[u8]>) -> Option<Policy> {
        let t = &self.types;
        let pe = match subentry {
            Some(dn) => {
                let s = std::str::from_utf8(dn).ok()?;
                let ndn = Dn::parse(s).ok()?.normalize(v.schema()).ok()?;
                v.lookup(&ndn)?
            }
            None => v.lookup(self.default_policy.as_ref()?)?,
        };
        let int = |ty: AttrId| -> Option<i64> {
            match pe.attr(ty).and_then(|a| a.first()) {
                None => Some(0),
                Some(v) => int_of(v),
            }
        };
        let boolean = |ty: AttrId, default: bool| match pe.attr(ty).and_then(|a| a.first()) {
            None => default,
            Some(v) => v.eq_ignore_ascii_case(b"TRUE"),
        };
        let mut p = Policy {
            min_age: int(t.min_age)?,
            max_age: int(t.max_age)?,
            in_history: int(t.in_history)?,
            check_quality: int(t.check_quality)?,
            min_length: int(t.min_length)?,
            max_length: int(t.max_length)?,
            expire_warning: int(t.expire_warning)?,
            grace_authn_limit: int(t.grace_authn_limit)?,
            grace_expiry: int(t.grace_expiry)?,
            lockout: boolean(t.lockout, false),
            lockout_duration: int(t.lockout_duration)?,
            max_failure: int(t.max_failure)?,
            max_recorded_failure: int(t.max_recorded_failure)?,
            failure_count_interval: int(t.failure_count_interval)?,
            must_change: boolean(t.must_change, false),
            allow_user_change: boolean(t.allow_user_change, true),
            safe_modify: boolean(t.safe_modify, false),
        };
        p.max_recorded_failure = p.max_recorded_failure.max(p.max_failure);
        Some(p)
    }

    /// Whether `e` may bind at `now` under `p`: outside `pwdStartTime`..`pwdEndTime` never;
    /// with `pwdLockout`, not while `pwdAccountLockedTime` is in force (for ever when
    /// `pwdLockoutDuration` is 0).
    pub fn lock_state(&self, p: &Policy, e: &Entry, now: i64) -> Lock {
        let t = &self.types;
        if let Some(a) = e.attr(t.start_time).and_then(|a| a.first()) {
            match parse_time(a) {
                Some(then) if now >= then => {}
                _ => return Lock::Locked,
            }
        }
        if let Some(a) = e.attr(t.end_time).and_then(|a| a.first()) {
            match parse_time(a) {
                Some(then) if then > now => {}
                _ => return Lock::Locked,
            }
        }
        if !p.lockout {
            return Lock::Open;
        }
        let Some(stamp) = e.attr(t.account_locked_time).and_then(|a| a.first()) else {
            return Lock::Open;
        };
        let Some(then) = parse_time(stamp) else {
            return Lock::Locked;
        };
        if now < then {
            Lock::Open
        } else if p.lockout_duration == 0 || now < then.saturating_add(p.lockout_duration) {
            Lock::Locked
        } else {
            Lock::Expired
        }
    }

    /// What a bind with the right password means for `e` under `p` at `now`: reset and
    /// must-change, expiry (with grace logins) and the expiry warning.
    pub fn on_success(&self, p: &Policy, e: &Entry, now: i64) -> BindSuccess {
        let t = &self.types;
        let mut out = BindSuccess::default();
        let changed = time_of(e, t.changed_time);
        let mut expired = false;
        if p.must_change && is_true(e, t.reset) {
            out.change_after_reset = true;
        } else if p.max_age > 0 {
            if let Some(c) = changed {
                expired = now - c > p.max_age;
            }
        }
        if expired {
            let c = changed.unwrap_or(now);
            let left = if p.grace_expiry > 0 && now - c > p.max_age + p.grace_expiry {
                0
            } else {
                let used = e.attr(t.grace_use_time).map_or(0, |a| a.len());
                p.grace_authn_limit - i64::try_from(used).unwrap_or(i64::MAX)
            };
            if left <= 0 {
                out.expired = true;
            } else {
                out.grace_remaining = Some(u32::try_from(left - 1).unwrap_or(u32::MAX));
            }
            return out;
        }
        if let (true, true, Some(c)) = (p.max_age > 0, p.expire_warning > 0, changed) {
            let left = p.max_age - (now - c);
            if left < p.expire_warning {
                out.warning = Some(u32::try_from(left.max(0)).unwrap_or(u32::MAX));
            }
        }
        out
    }

    /// Records a bind on the attributes of its entry (in the writer's job, on the newest
    /// version): returns whether they changed. A failure adds a `pwdFailureTime` when the
    /// policy records failures (keeping at most `pwdMaxRecordedFailure`), and locks the
    /// account (`pwdAccountLockedTime`) when the failures within `pwdFailureCountInterval`
    /// reach `pwdMaxFailure`; a success forgets the failures and records a grace login.
    pub fn record_bind(
        &self,
        schema: &Schema,
        p: &Policy,
        attrs: &mut Vec<Attr>,
        event: BindEvent,
        lock_expired: bool,
        now: SystemTime,
    ) -> bool {
        let t = &self.types;
        let mut changed = false;
        if lock_expired {
            changed |= set(schema, attrs, t.account_locked_time, Vec::new());
        }
        match event {
            BindEvent::None => {}
            BindEvent::Success { grace_used } => {
                changed |= set(schema, attrs, t.failure_time, Vec::new());
                if grace_used {
                    let mut uses = values_of(attrs, t.grace_use_time);
                    uses.push(fresh_micro_time(now, &uses));
                    changed |= set(schema, attrs, t.grace_use_time, uses);
                }
            }
            BindEvent::Failure if p.max_recorded_failure > 0 => {
                let secs = unix_seconds(now);
                let mut failures = values_of(attrs, t.failure_time);
                failures.sort();
                let counted = failures
                    .iter()
                    .filter(|v| {
                        p.failure_count_interval == 0
                            || parse_time(v).is_some_and(|f| secs <= f + p.failure_count_interval)
                    })
                    .count();
                let keep = usize::try_from(p.max_recorded_failure - 1).unwrap_or(0);
                if failures.len() > keep {
                    failures.drain(..failures.len() - keep);
                }
                let new = fresh_micro_time(now, &failures);
                failures.push(new);
                changed |= set(schema, attrs, t.failure_time, failures);
                let counted = i64::try_from(counted).unwrap_or(i64::MAX);
                if p.max_failure > 0 && counted >= p.max_failure - 1 {
                    let stamp = crate::csn::generalized_time(now).into_bytes();
                    changed |= set(schema, attrs, t.account_locked_time, vec![stamp.into()]);
                }
            }
            BindEvent::Failure => {}
        }
        changed
    }

    /// Records a bind on the account `ndn` (`record_bind`, on the newest version) as a change
    /// through the write path's door, in the writer's job: stamped as made by `modifier` (the
    /// administrator, as slapd's internal modify is), and run through the overlay chain as a
    /// `BindRecord`, so contextCSN, the change feed and replication follow it like any write.
    /// `None` when there was nothing to record, or the entry is gone.
    #[expect(
        clippy::too_many_arguments,
        reason = "what one bind records, and where"
    )]
    pub fn record_bind_change(
        &self,
        dit: &crate::Dit,
        txn: &mut store::Txn,
        ndn: &NormDn,
        p: &Policy,
        event: BindEvent,
        lock_expired: bool,
        modifier: &str,
    ) -> crate::error::LdapResult<Option<crate::overlays::Applied>> {
        crate::write::write_job_as(dit, txn, crate::overlays::Origin::BindRecord, |txn| {
            let Some(e) = txn.version().lookup(ndn).cloned() else {
                return Ok(None);
            };
            let mut attrs = e.to_attrs();
            let schema = txn.schema().clone();
            let now = txn.now();
            if !self.record_bind(&schema, p, &mut attrs, event, lock_expired, now) {
                return Ok(None);
            }
            crate::write::stamp_modified(dit, &mut attrs, modifier, now);
            txn.replace_attrs(e.id, attrs)?;
            Ok(Some(crate::overlays::Applied {
                after: txn.version().get(e.id).cloned(),
                before: Some(e),
                ..Default::default()
            }))
        })
    }

    /// Checks the password of an entry being added (slapd's `ppolicy_add`): one value; its
    /// quality under `p` unless the administrator adds it.
    pub fn check_add(
        &self,
        p: Option<&Policy>,
        values: &[&[u8]],
        by_admin: bool,
    ) -> Result<(), Refusal> {
        if values.len() > 1 {
            return Err(Refusal::new(
                ResultCode::ConstraintViolation,
                "Password policy only allows one password value",
                None,
            ));
        }
        match (p, values.first()) {
            (Some(p), Some(v)) if p.check_quality > 0 && !by_admin => check_quality(p, v),
            _ => Ok(()),
        }
    }

    /// Checks a password change to `e` under `p` (`None`: no policy) before it is made, as
    /// slapd's ppolicy does: one password value; then, unless the administrator makes it,
    /// `pwdAllowUserChange` for the user's own change, `pwdSafeModify`, `pwdMinAge` (not after
    /// a reset), the old password, quality and history. Verifies passwords: call it on the
    /// hashing threads. On success returns the stored value the old password matched, which the
    /// modify deletes in its place.
    pub fn check_change(
        &self,
        p: Option<&Policy>,
        e: &Entry,
        ch: &PasswordChange,
        by_admin: bool,
        self_change: bool,
        now: i64,
    ) -> Result<Option<Box<[u8]>>, Refusal> {
        use ResultCode::{ConstraintViolation, InsufficientAccessRights, UnwillingToPerform};
        let t = &self.types;
        if ch.extra_values {
            return Err(Refusal::new(
                ConstraintViolation,
                "Password policy only allows one password value",
                None,
            ));
        }
        let Some(p) = p else { return Ok(None) };
        if by_admin {
            return Ok(None);
        }
        if !p.allow_user_change && self_change {
            return Err(Refusal::new(
                InsufficientAccessRights,
                "User alteration of password is not allowed",
                Some(PolicyError::PasswordModNotAllowed),
            ));
        }
        let Some(new) = &ch.new else { return Ok(None) };
        let safe_old = p.safe_modify && ch.exop_old;
        if p.safe_modify && !(ch.delete_then_add || safe_old) {
            return Err(Refusal::new(
                InsufficientAccessRights,
                "Must supply old password to be changed as well as new one",
                Some(PolicyError::MustSupplyOldPassword),
            ));
        }
        if !is_true(e, t.reset) && p.min_age > 0 {
            if let Some(c) = time_of(e, t.changed_time) {
                if now - c < p.min_age {
                    return Err(Refusal::new(
                        ConstraintViolation,
                        "Password is too young to change",
                        Some(PolicyError::PasswordTooYoung),
                    ));
                }
            }
        }
        let stored: Vec<&[u8]> = e
            .attr(t.user_password)
            .map(|a| a.values().collect())
            .unwrap_or_default();
        let mut matched = None;
        let checks_old = !ch.exop_old || safe_old;
        if let (false, Some(old), true) = (stored.is_empty(), &ch.old, checks_old) {
            match stored.iter().find(|s| pwhash::verify(s, old)) {
                Some(s) => matched = Some(Box::<[u8]>::from(*s)),
                None => {
                    return Err(Refusal::new(
                        UnwillingToPerform,
                        "Must supply correct old password to change to new one",
                        Some(PolicyError::MustSupplyOldPassword),
                    ))
                }
            }
        }
        if p.check_quality > 0 {
            check_quality(p, new)?;
        }
        if !stored.is_empty() && p.in_history > 0 {
            if stored.iter().any(|s| pwhash::verify(s, new)) {
                return Err(Refusal::new(
                    ConstraintViolation,
                    "Password is not being changed from existing value",
                    Some(PolicyError::PasswordInHistory),
                ));
            }
            let history = history_of(e, t.history);
            let skip = history
                .len()
                .saturating_sub(usize::try_from(p.in_history).unwrap_or(usize::MAX));
            if history[skip..]
                .iter()
                .any(|(_, old)| pwhash::verify(old, new))
            {
                return Err(Refusal::new(
                    ConstraintViolation,
                    "Password is in history of old passwords",
                    Some(PolicyError::PasswordInHistory),
                ));
            }
        }
        Ok(matched)
    }

    /// The state a change leaves on its entry, worked out from the entry `before` it and
    /// `after` it (`after` changed in place; returns whether it changed): when the password
    /// changed, `pwdChangedTime`, `pwdHistory`, `pwdReset` (set when the administrator
    /// changes it under `pwdMustChange`, removed otherwise, unless the change set it itself)
    /// and the removal of failures, grace logins and locks; when an add under an ageing policy
    /// carries a password, `pwdChangedTime`. A change that only unlocks the account
    /// (removes `pwdAccountLockedTime`) forgets its failures too.
    pub fn after_change(
        &self,
        schema: &Schema,
        p: Option<&Policy>,
        before: Option<&Entry>,
        after: &mut Vec<Attr>,
        now: SystemTime,
    ) -> bool {
        let t = &self.types;
        let stamp = crate::csn::generalized_time(now).into_bytes();
        let Some(before) = before else {
            let ages = p.is_some_and(|p| p.max_age > 0 || p.min_age > 0);
            let has_pw = !values_of(after, t.user_password).is_empty();
            if ages && has_pw && values_of(after, t.changed_time).is_empty() {
                return set(schema, after, t.changed_time, vec![stamp.into()]);
            }
            return false;
        };
        let old_pw: Vec<&[u8]> = before
            .attr(t.user_password)
            .map(|a| a.values().collect())
            .unwrap_or_default();
        let new_pw = values_of(after, t.user_password);
        let pw_changed =
            old_pw.len() != new_pw.len() || old_pw.iter().zip(&new_pw).any(|(a, b)| **a != **b);
        if !pw_changed {
            let unlocked = before.attr(t.account_locked_time).is_some()
                && values_of(after, t.account_locked_time).is_empty();
            return unlocked && set(schema, after, t.failure_time, Vec::new());
        }
        let default = Policy::default();
        let p = p.unwrap_or(&default);
        let mut changed = false;
        let when = if new_pw.is_empty() {
            Vec::new()
        } else {
            vec![stamp.clone().into()]
        };
        changed |= set(schema, after, t.changed_time, when);
        for ty in [t.grace_use_time, t.account_locked_time, t.failure_time] {
            changed |= set(schema, after, ty, Vec::new());
        }
        let reset_before = before
            .attr(t.reset)
            .and_then(|a| a.first())
            .map(<[u8]>::to_vec);
        let reset_after = values_of(after, t.reset).first().map(|v| v.to_vec());
        if reset_before == reset_after {
            let by_admin = values_of(after, t.modifiers_name)
                .first()
                .and_then(|m| std::str::from_utf8(m).ok())
                .and_then(|m| Dn::parse(m).ok()?.normalize(schema).ok())
                .is_some_and(|m| m == self.admin);
            let reset = if p.must_change && by_admin {
                vec![b"TRUE".to_vec().into_boxed_slice()]
            } else {
                Vec::new()
            };
            changed |= set(schema, after, t.reset, reset);
        }
        if p.in_history <= 0 {
            changed |= set(schema, after, t.history, Vec::new());
        } else if let Some(old) = old_pw.first() {
            let mut history = history_of_values(&values_of(after, t.history));
            let keep = usize::try_from(p.in_history - 1).unwrap_or(0);
            if history.len() > keep {
                history.drain(..history.len() - keep);
            }
            let mut values: Vec<Box<[u8]>> = history.into_iter().map(|(v, _)| v).collect();
            let mut value = format!(
                "{}#{HISTORY_SYNTAX}#{}#",
                String::from_utf8_lossy(&stamp),
                old.len()
            )
            .into_bytes();
            value.extend_from_slice(old);
            let value = value.into_boxed_slice();
            if !values.contains(&value) {
                values.push(value);
            }
            changed |= set(schema, after, t.history, values);
        }
        changed
    }
}

/// Quality: the length bounds, on the value as given; a value already hashed cannot be
/// checked, which `pwdCheckQuality` 2 refuses and 1 lets pass (slapd).
fn check_quality(p: &Policy, new: &[u8]) -> Result<(), Refusal> {
    let len = i64::try_from(new.len()).unwrap_or(i64::MAX);
    let msg = "Password fails quality checking policy";
    if len == 0 || p.min_length > len {
        return Err(Refusal::new(
            ResultCode::ConstraintViolation,
            msg,
            Some(PolicyError::PasswordTooShort),
        ));
    }
    if p.max_length > 0 && len > p.max_length {
        return Err(Refusal::new(
            ResultCode::ConstraintViolation,
            msg,
            Some(PolicyError::PasswordTooLong),
        ));
    }
    let cleartext = new.len() >= 11 && new[..11].eq_ignore_ascii_case(b"{CLEARTEXT}");
    if pwhash::is_hashed(new) && !cleartext && p.check_quality == 2 {
        return Err(Refusal::new(
            ResultCode::ConstraintViolation,
            msg,
            Some(PolicyError::InsufficientPasswordQuality),
        ));
    }
    Ok(())
}

/// The valid `pwdHistory` values of `e`, oldest first: (value, old password).
fn history_of(e: &Entry, ty: AttrId) -> Vec<(Box<[u8]>, Vec<u8>)> {
    let values: Vec<Box<[u8]>> = e
        .attr(ty)
        .map(|a| a.values().map(Box::from).collect())
        .unwrap_or_default();
    history_of_values(&values)
}

/// Parses `time#syntaxOID#length#value` values (slapd's format); invalid ones are skipped.
/// Sorted by time, oldest first.
fn history_of_values(values: &[Box<[u8]>]) -> Vec<(Box<[u8]>, Vec<u8>)> {
    let mut out: Vec<(i64, Box<[u8]>, Vec<u8>)> = values
        .iter()
        .filter_map(|v| {
            let mut parts = v.splitn(4, |b| *b == b'#');
            let time = parse_time(parts.next()?)?;
            let _oid = parts.next()?;
            let len: usize = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
            let pw = parts.next()?;
            (pw.len() == len).then(|| (time, v.clone(), pw.to_vec()))
        })
        .collect();
    out.sort_by_key(|(t, _, _)| *t);
    out.into_iter().map(|(_, v, pw)| (v, pw)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_slapd_writes_them() {
        assert_eq!(parse_time(b"19700101000000Z"), Some(0));
        assert_eq!(
            parse_time(b"20261125001234.123456Z"),
            parse_time(b"20261125001234Z")
        );
        assert_eq!(parse_time(b"20261125001234"), None);
        assert_eq!(parse_time(b"2026112500"), None);
        let t = UNIX_EPOCH + std::time::Duration::from_micros(1_764_012_345_678_901);
        assert_eq!(micro_time(t), "20251124192545.678901Z");
        assert_eq!(parse_time(micro_time(t).as_bytes()), Some(1_764_012_345));
    }

    #[test]
    fn quality_bounds_and_hashed_values() {
        let p = Policy {
            check_quality: 1,
            min_length: 8,
            max_length: 12,
            ..Policy::default()
        };
        let err = |v: &[u8], p: &Policy| check_quality(p, v).err().and_then(|r| r.error);
        assert_eq!(err(b"short", &p), Some(PolicyError::PasswordTooShort));
        assert_eq!(err(b"", &p), Some(PolicyError::PasswordTooShort));
        assert_eq!(
            err(b"much-too-long-pw", &p),
            Some(PolicyError::PasswordTooLong)
        );
        assert_eq!(err(b"just-right", &p), None);
        // Lengths are checked on the value as given; then a hashed value passes at 1 and is
        // refused at 2.
        let p = Policy { max_length: 0, ..p };
        let hashed = b"{SSHA}abcdefgh";
        assert_eq!(err(hashed, &p), None);
        let strict = Policy {
            check_quality: 2,
            ..p.clone()
        };
        assert_eq!(
            err(hashed, &strict),
            Some(PolicyError::InsufficientPasswordQuality)
        );
        assert_eq!(err(b"{CLEARTEXT}abc1", &strict), None);
    }

    fn with_policy() -> (Schema, Ppolicy) {
        let schema = Schema::with_bundles(&["ppolicy".to_string()]).expect("bundle");
        let admin = Dn::parse("cn=admin,dc=example,dc=com")
            .and_then(|d| d.normalize(&schema))
            .expect("dn");
        let pp = Ppolicy::new(&PpolicySpec::default(), &schema, admin).expect("types");
        (schema, pp)
    }

    #[test]
    fn failures_lock_at_the_limit_counting_only_the_interval() {
        let (schema, pp) = with_policy();
        let t = &pp.types;
        let p = Policy {
            max_failure: 3,
            max_recorded_failure: 3,
            failure_count_interval: 60,
            lockout: true,
            ..Policy::default()
        };
        let now = UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let old = now - std::time::Duration::from_secs(3600);
        let mut attrs = Vec::new();
        let fail = |attrs: &mut Vec<Attr>, at| {
            pp.record_bind(&schema, &p, attrs, BindEvent::Failure, false, at)
        };
        // Two old failures do not count; they are the first to go beyond three kept.
        assert!(fail(&mut attrs, old));
        assert!(fail(&mut attrs, old));
        assert!(fail(&mut attrs, now));
        assert!(values_of(&attrs, t.account_locked_time).is_empty());
        assert!(fail(&mut attrs, now));
        assert_eq!(values_of(&attrs, t.failure_time).len(), 3);
        assert!(values_of(&attrs, t.account_locked_time).is_empty());
        assert!(fail(&mut attrs, now));
        assert_eq!(values_of(&attrs, t.account_locked_time).len(), 1);
        // Same-microsecond failures get distinct values.
        let f = values_of(&attrs, t.failure_time);
        assert_eq!(f.len(), 3);
        assert!(f[1] != f[2]);
        // A success forgets them; without failures it changes nothing.
        let ok = BindEvent::Success { grace_used: false };
        assert!(pp.record_bind(&schema, &p, &mut attrs, ok, false, now));
        assert!(values_of(&attrs, t.failure_time).is_empty());
        assert!(!pp.record_bind(&schema, &p, &mut attrs, ok, false, now));
    }

    #[test]
    fn history_values_in_slapd_format() {
        let v: Vec<Box<[u8]>> = vec![
            b"20250102000000Z#1.3.6.1.4.1.1466.115.121.1.40#4#bbbb"
                .to_vec()
                .into(),
            b"20250101000000Z#1.3.6.1.4.1.1466.115.121.1.40#4#aaaa"
                .to_vec()
                .into(),
            b"20250103000000Z#1.3.6.1.4.1.1466.115.121.1.40#9#short"
                .to_vec()
                .into(),
            b"garbage".to_vec().into(),
        ];
        let h = history_of_values(&v);
        let pws: Vec<&[u8]> = h.iter().map(|(_, p)| p.as_slice()).collect();
        assert_eq!(pws, vec![&b"aaaa"[..], &b"bbbb"[..]]);
    }
}
