//! Extended operations (RFC 4511 §4.12): Who am I? (RFC 4532), Password Modify (RFC 3062),
//! Start and End Transaction (RFC 5805, `ops::txn`), Cancel (RFC 3909, `ops::cancel`).
//! Any other request name is a protocolError naming the OID, as RFC 4511 asks.

use std::sync::Arc;

use proto::{oids, ExtendedRequest, ResultCode};

use crate::op::{writes_allowed, Next, Op};
use crate::reply::Conn;
use crate::state::Shared;
use dit::acl::Rights;
use dit::error::{wire_result, LdapError, LdapResult};
use dit::identity::Identity;
use dit::modify::Mod;
use dit::overlays::Applied;

/// Sends the extended response with the operation's response controls and ends it.
async fn finish_ext(op: Op, r: Result<Option<Vec<u8>>, &LdapError>) {
    match r {
        Ok(v) => op.finish_extended(Ok(()), v).await,
        Err(e) => op.finish_extended(Err(e), None).await,
    }
}

pub(crate) async fn handle(op: Op, req: &ExtendedRequest<'_>) -> Next {
    let shared = op.shared().clone();
    let who = op.who.clone();
    let oid = String::from_utf8_lossy(&req.oid).into_owned();
    if oid == oids::START_TLS {
        let conn = op.conn.clone();
        let (next, out, rc) = start_tls(&conn, op.id);
        op.finish_with(out, rc, None).await;
        return next;
    }
    match oid.as_str() {
        oids::WHO_AM_I => {
            let authz = if who.is_anonymous() {
                String::new()
            } else {
                format!("dn:{}", who.dn)
            };
            finish_ext(op, Ok(Some(authz.into_bytes()))).await;
        }
        oids::PASSWORD_MODIFY => {
            // Checking the old password and committing take a hash and an fsync: the answer
            // comes from a task of its own, so the connection's later requests go on.
            let Ok(permit) = op.conn.permits.clone().acquire_owned().await else {
                return Next::Continue;
            };
            let value = req.value.as_deref().map(<[u8]>::to_vec);
            let guard = super::cancel::Uncancellable::enter(&op.conn, op.id);
            tokio::spawn(async move {
                password_modify_op(op, shared, who, value).await;
                drop(guard);
                drop(permit);
            });
        }
        oids::TXN_START => {
            let r = super::txn::start(&op.conn, req.value.as_deref());
            finish_ext(op, r.as_ref().map(|id| Some(id.clone()))).await;
        }
        oids::TXN_END => super::txn::end(op, req.value.as_deref()).await,
        oids::CANCEL => super::cancel::handle(op, req.value.as_deref()).await,
        crate::SNAPSHOT_OID => match snapshot(&shared, &who).await {
            Ok(name) => finish_ext(op, Ok(Some(name.into_bytes()))).await,
            Err(e) => finish_ext(op, Err(&e)).await,
        },
        crate::RELOAD_OID => {
            let r = if who.is_admin {
                // Reading files and building rules and certificates: off the connection's task.
                let sh = shared.clone();
                tokio::task::spawn_blocking(move || sh.reload_from_source())
                    .await
                    .map_err(|e| LdapError::new(ResultCode::Other, format!("reload failed: {e}")))
                    .and_then(|report| {
                        if report.ok() {
                            Ok(report.summary())
                        } else {
                            Err(LdapError::new(
                                ResultCode::UnwillingToPerform,
                                report.summary(),
                            ))
                        }
                    })
            } else {
                Err(LdapError::new(
                    ResultCode::InsufficientAccessRights,
                    "only the administrator may reload the configuration",
                ))
            };
            match r {
                Ok(summary) => finish_ext(op, Ok(Some(summary.into_bytes()))).await,
                Err(e) => finish_ext(op, Err(&e)).await,
            }
        }
        _ => {
            let e = LdapError::new(
                ResultCode::ProtocolError,
                format!("unsupported extended operation {oid}"),
            );
            finish_ext(op, Err(&e)).await;
        }
    }
    Next::Continue
}

/// Password Modify (RFC 3062) from its task: checked, committed through the write path, and
/// answered.
async fn password_modify_op(
    mut op: Op,
    shared: Arc<Shared>,
    who: Arc<Identity>,
    value: Option<Vec<u8>>,
) {
    let want = op.controls.ppolicy;
    let allowed =
        writes_allowed(&op.conn).and_then(|()| crate::replica::refer_writes(&shared, &who));
    let r = match allowed {
        Ok(()) => password_modify(&shared, &who, value.as_deref(), want, &mut op.response).await,
        Err(e) => Err(e),
    };
    // Audited as the modify of userPassword it applied (stamps and all, the value redacted).
    let r = r.map(|(generated, applied)| {
        crate::audit::write_audit(&op.conn, &who, op.audit_applied(), &applied);
        generated
    });
    match r {
        Ok(generated) => {
            let value = generated.map(|g| proto::encode_passwd_modify_response(g.as_bytes()));
            finish_ext(op, Ok(value)).await
        }
        Err(e) => finish_ext(op, Err(&e)).await,
    }
}

/// StartTLS (RFC 4511 §4.14, RFC 4513 §3): answers success with the StartTLS OID as response
/// name, then the session hands the stream to TLS. Refused while other operations are in
/// progress (their responses would straddle the switch) and on connections already running TLS.
fn start_tls(conn: &Arc<Conn>, id: i32) -> (Next, Vec<u8>, ResultCode) {
    let shared = &conn.shared;
    let refuse = |code: ResultCode, msg: &str| {
        let e = LdapError::new(code, msg);
        let mut out = Vec::with_capacity(96);
        proto::encode_extended_response(
            &mut out,
            id,
            &wire_result(Err(&e)),
            Some(oids::START_TLS.as_bytes()),
            None,
        );
        (out, code)
    };
    let busy = conn.busy();
    let (out, rc) = if conn.tls.as_ref().is_some_and(|t| t.encrypted) {
        refuse(
            ResultCode::OperationsError,
            "TLS is already established on this connection",
        )
    } else if shared.live.load().tls.is_none() {
        refuse(
            ResultCode::Unavailable,
            "TLS is not available on this server",
        )
    } else if busy {
        refuse(
            ResultCode::OperationsError,
            "StartTLS refused: other operations are still in progress on this connection",
        )
    } else {
        let mut out = Vec::with_capacity(64);
        proto::encode_extended_response(
            &mut out,
            id,
            &wire_result(Ok(())),
            Some(oids::START_TLS.as_bytes()),
            None,
        );
        return (Next::StartTls, out, ResultCode::Success);
    };
    (Next::Continue, out, rc)
}

/// Linden's snapshot operation: the administrator asks for a snapshot now; the response value
/// names the snapshot file (empty when the current version was already on disk).
async fn snapshot(shared: &Arc<Shared>, who: &Identity) -> LdapResult<String> {
    if !who.is_admin {
        return Err(LdapError::new(
            ResultCode::InsufficientAccessRights,
            "only the administrator may take a snapshot",
        ));
    }
    match shared
        .background_snapshot(crate::persistence::SnapshotCause::Requested)
        .await
    {
        Ok(Some(rep)) => {
            tracing::info!(
                "snapshot {} written on request: {} entries, {} bytes in {:.2} s",
                rep.file,
                rep.entries,
                rep.bytes,
                rep.seconds
            );
            Ok(rep.file)
        }
        Ok(None) => Ok(String::new()),
        Err(e) => Err(LdapError::new(
            ResultCode::Unavailable,
            format!("snapshot failed: {e}"),
        )),
    }
}

/// RFC 3062: a modify of the target's userPassword (every value replaced by the new one,
/// hashed) through the write path's door (`dit::modify::apply` in `write_job`: access checked
/// again on the version it changes, stamps, the overlay chain). Returns the generated password
/// when the request carried no new one, and what the change applied. The password policy's
/// checks (`crate::ppolicy`) add their response control to `response` when `want_control`.
async fn password_modify(
    shared: &Arc<Shared>,
    who: &Arc<Identity>,
    value: Option<&[u8]>,
    want_control: bool,
    response: &mut Vec<proto::Control<'static>>,
) -> LdapResult<(Option<String>, dit::overlays::Applied)> {
    let req = match value {
        Some(v) => proto::PasswdModifyRequest::decode(v).map_err(|e| {
            LdapError::new(
                ResultCode::ProtocolError,
                format!("malformed password modify request: {e}"),
            )
        })?,
        None => proto::PasswdModifyRequest::default(),
    };
    if who.is_anonymous() {
        return Err(LdapError::new(
            ResultCode::StrongerAuthRequired,
            "only authenticated users may change passwords",
        ));
    }
    let target = match &req.user_identity {
        Some(u) => shared.parse_dn(u)?.1,
        None => match &who.ndn {
            Some(n) => n.clone(),
            None => {
                return Err(LdapError::new(
                    ResultCode::UnwillingToPerform,
                    "only authenticated users may change passwords",
                ))
            }
        },
    };
    if target == shared.admin {
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "the administrator's password is set in the server configuration",
        ));
    }
    let needs = [(Some(shared.known.user_password), Rights::WRITE)];
    dit::write::authorize(
        shared,
        &shared.store.read(),
        who,
        &target,
        &needs,
        true,
        "write",
    )?;
    let generated = req
        .new_passwd
        .is_none()
        .then(|| pwhash::generate_password(12));
    let new_pw: Vec<u8> = match (&req.new_passwd, &generated) {
        (Some(p), _) => p.to_vec(),
        (None, Some(g)) => g.as_bytes().to_vec(),
        (None, None) => Vec::new(),
    };
    let old = req.old_passwd.as_ref().map(|o| o.to_vec());
    crate::ppolicy::check_password_modify(
        shared,
        who,
        &target,
        &new_pw,
        old.as_deref(),
        want_control,
        response,
    )
    .await?;
    // Hashing and checking the old password happen on the hashing threads, not on this task
    // nor on the writer. The writer applies the change only if the stored passwords are still
    // those the old one was checked against; if they changed meanwhile, the check is redone.
    let policy = shared.config().password_policy();
    let hashed = shared
        .credentials
        .hashing_job(move || policy.hash(&new_pw))
        .await?;
    let user_password = shared.known.user_password;
    for _ in 0..PASSWORD_CHECKS {
        let checked = match &old {
            Some(old) => {
                let seen = shared
                    .store
                    .read()
                    .lookup(&target)
                    .map(|e| passwords(e, user_password));
                let (old, stored) = (old.clone(), seen.clone().unwrap_or_default());
                let ok = shared
                    .credentials
                    .hashing_job(move || stored.iter().any(|s| pwhash::verify(s, &old)))
                    .await?;
                Some((seen, ok))
            }
            None => None,
        };
        let (sh, target, who) = (shared.clone(), target.clone(), who.clone());
        let mods = vec![Mod {
            op: proto::ModOp::Replace,
            ty: user_password,
            options: String::new(),
            name: "userPassword".into(),
            values: vec![hashed.clone().into_boxed_slice()],
        }];
        let fut = shared
            .store
            .write(move |txn| -> LdapResult<Option<Applied>> {
                if let Some((seen, ok)) = checked {
                    let v = txn.version();
                    let stored = v.lookup(&target).map(|e| passwords(e, user_password));
                    if stored.is_some() && seen != stored {
                        return Ok(None);
                    }
                    if stored.is_some() && !ok {
                        return Err(LdapError::new(
                            ResultCode::UnwillingToPerform,
                            "unwilling to verify old password",
                        ));
                    }
                }
                let needs = dit::modify::needs(&mods);
                dit::write::write_job(&sh, txn, |txn| {
                    dit::modify::apply(&sh, txn, &who, &target, &needs, mods, None, false)
                })
                .map(Some)
            });
        match fut.await {
            Ok(Ok(Some(applied))) => return Ok((generated, applied)),
            Ok(Ok(None)) => continue,
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(LdapError::new(
        ResultCode::Busy,
        "the password kept changing while the old one was being checked; try again",
    ))
}

/// How many times Password Modify checks the old password against stored passwords that
/// change under it before it gives up.
const PASSWORD_CHECKS: usize = 3;

/// The userPassword values of an entry.
fn passwords(e: &store::Entry, user_password: schema::AttrId) -> Vec<Vec<u8>> {
    e.attr(user_password)
        .map(|a| a.values().map(<[u8]>::to_vec).collect())
        .unwrap_or_default()
}
