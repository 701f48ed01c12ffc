//! Bind (RFC 4511 §4.2, RFC 4513 §5): anonymous and simple.
//!
//! A wrong password and an unknown DN give the same answer (invalidCredentials) after the same
//! work: an unknown DN is checked against a dummy hash of the configured scheme. Failed binds
//! count for the DN and the client address and, beyond their limits, are answered late
//! (`lockout`).

use std::net::IpAddr;
use std::sync::Arc;

use proto::{tags, BindAuth, BindRequest, ResultCode};
use schema::NormDn;

use crate::op::{Next, Op};
use crate::ops::sasl;
use crate::state::Shared;
use crate::tls::TlsInfo;
use dit::acl::Rights;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;

fn invalid() -> LdapError {
    LdapError::new(ResultCode::InvalidCredentials, "invalid credentials")
}

pub(crate) async fn handle(mut op: Op, req: &BindRequest<'_>) -> Next {
    let conn = op.conn.clone();
    // The password policy (`crate::ppolicy`) wraps the bind: a locked account is refused
    // before its password is checked; the result is recorded on the account after.
    conn.must_change
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let pp = crate::ppolicy::BindCheck::start(&conn.shared, req, op.controls.ppolicy);
    let r = match pp.refusal() {
        Some(e) => Err(e),
        None => bind(&conn.shared, req, conn.peer.ip(), conn.tls.as_ref()).await,
    };
    let r = pp.finish(&conn, r, &mut op.response).await;
    let (r, who) = match r {
        Ok(who) => (Ok(()), who),
        Err(e) => (Err(e), Identity::default()),
    };
    op.finish(tags::BIND_RESPONSE, r.as_ref().map(|_| ()), None)
        .await;
    Next::Bound(Arc::new(who))
}

pub async fn bind(
    shared: &Arc<Shared>,
    req: &BindRequest<'_>,
    peer: IpAddr,
    tls: Option<&TlsInfo>,
) -> LdapResult<Identity> {
    if req.version != 3 {
        return Err(LdapError::new(
            ResultCode::ProtocolError,
            "requested protocol version not supported",
        ));
    }
    let password = match &req.auth {
        BindAuth::Simple(p) => p,
        BindAuth::Sasl {
            mechanism,
            credentials,
        } => {
            let creds = credentials.as_deref().unwrap_or(b"");
            return match &**mechanism {
                b"EXTERNAL" => sasl::external(shared, tls, creds),
                b"PLAIN" => {
                    require_tls(shared, tls)?;
                    sasl::plain(shared, creds, peer).await
                }
                other => Err(LdapError::new(
                    ResultCode::AuthMethodNotSupported,
                    format!(
                        "SASL mechanism '{}' is not supported (supported: EXTERNAL, PLAIN)",
                        String::from_utf8_lossy(other)
                    ),
                )),
            };
        }
    };
    if req.name.is_empty() {
        if password.is_empty() {
            return Ok(Identity::default());
        }
        // A password without a name names nobody (slapd answers the same).
        return Err(invalid());
    }
    let (dn, ndn) = shared.parse_dn(&req.name)?;
    if !password.is_empty() {
        require_tls(shared, tls)?;
    }
    if password.is_empty() {
        // RFC 4513 §5.1.2: unauthenticated binds are refused.
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "unauthenticated bind (DN with no password) disallowed",
        ));
    }
    let ok = check_password(shared, &ndn, password, peer).await;
    if !ok {
        return Err(invalid());
    }
    let is_admin = ndn == shared.admin;
    Ok(Identity {
        dn: dn.to_string(),
        ndn: Some(ndn),
        is_admin,
    })
}

/// `require_tls_for_bind`: passwords only over TLS.
fn require_tls(shared: &Shared, tls: Option<&TlsInfo>) -> LdapResult<()> {
    if shared.config().require_tls_for_bind && tls.is_none() {
        return Err(LdapError::new(
            ResultCode::ConfidentialityRequired,
            "binds with a password require TLS (use StartTLS or ldaps)",
        ));
    }
    Ok(())
}

/// Whether `password` is the password of `ndn`. Cheap schemes are verified inline, slow ones
/// through the credential cache or on the hashing threads (`credcache`). A failure is counted for the DN and the client's
/// address (`lockout`) and, beyond their limits, answered late; a success never is.
pub(crate) async fn check_password(
    shared: &Arc<Shared>,
    ndn: &NormDn,
    password: &[u8],
    peer: IpAddr,
) -> bool {
    let v = shared.store.read();
    let config = shared.config();
    let live = shared.live.load();
    let stored: Vec<&[u8]> = if *ndn == shared.admin {
        vec![&config.admin_password_hash]
    } else {
        // The entry's password counts only where the rules let an anonymous client use it
        // (`auth`); otherwise the bind fails like a wrong password.
        let schema = shared.schema();
        let anonymous = shared.acl.view(&schema, &v, &Identity::default());
        v.lookup(ndn)
            .filter(|e| {
                anonymous
                    .entry(&schema, e)
                    .can(Some(shared.known.user_password), Rights::AUTH)
            })
            .and_then(|e| e.attr(shared.known.user_password))
            .map(|a| a.values().collect())
            .unwrap_or_default()
    };
    // A DN without a password costs the same work as one with a wrong password.
    let (stored, real) = if stored.is_empty() {
        (vec![&live.dummy_password[..]], false)
    } else {
        (stored, true)
    };
    let matched = shared
        .credentials
        .verify(&ndn.norm, &stored, password, real)
        .await;
    drop(stored);
    drop(v);
    let ok = matched && real;
    if ok {
        shared.lockout.succeeded(&ndn.norm);
    } else {
        let delay = shared.lockout.failed(&ndn.norm, peer);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    }
    ok
}
