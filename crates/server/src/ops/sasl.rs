//! SASL binds (RFC 4513 §5.2, RFC 4422): EXTERNAL and PLAIN, both single round trip.
//!
//! EXTERNAL (RFC 4422 appendix A) takes the identity from the TLS client certificate, or from
//! a local (`ldapi://`) client's user and group (`gidNumber=G+uidNumber=U,cn=peercred,
//! cn=external,cn=auth`, as slapd). The `authz_map` rules (`dit::authz`) may map either to an
//! entry or the administrator; without a matching rule a certificate subject, read as an LDAP
//! DN, must be the administrator DN or name an existing entry, and a local client acts as its
//! peercred identity.
//! PLAIN (RFC 4616) carries `authzid NUL authcid NUL password`; the authcid is `dn:<DN>`, or
//! `u:<uid>` / a bare uid that must name exactly one entry by its `uid`. Neither mechanism
//! allows acting as someone else: an authzid, if given, must name the authenticated identity
//! (otherwise insufficientAccessRights, as slapd's "SASL(-14): authorization failure").

use std::net::IpAddr;
use std::sync::Arc;

use proto::ResultCode;
use schema::NormDn;

use crate::state::Shared;
use crate::tls::TlsInfo;
use dit::authz::Mapped;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;

fn invalid(why: &str) -> LdapError {
    LdapError::new(ResultCode::InvalidCredentials, why)
}

/// The identity of an existing entry (or the administrator) with DN `ndn`.
pub(crate) fn identity_of(shared: &Shared, ndn: &NormDn) -> Option<Identity> {
    if *ndn == shared.admin {
        return Some(Identity {
            dn: shared.config().admin_dn.clone(),
            ndn: Some(ndn.clone()),
            is_admin: true,
        });
    }
    let v = shared.store.read();
    v.lookup(ndn).map(|e| Identity {
        dn: e.dn().to_string(),
        ndn: Some(ndn.clone()),
        is_admin: false,
    })
}

/// Checks an authzid against the authenticated identity: empty, `dn:` of the same DN, or
/// `u:` of the same uid.
fn check_authzid(
    shared: &Shared,
    authzid: &[u8],
    who: &Identity,
    uid: Option<&str>,
) -> LdapResult<()> {
    if authzid.is_empty() {
        return Ok(());
    }
    let s =
        std::str::from_utf8(authzid).map_err(|_| invalid("authorization identity is not UTF-8"))?;
    let same = if let Some(dn) = s.strip_prefix("dn:") {
        shared.parse_dn(dn.as_bytes()).ok().map(|(_, n)| n) == who.ndn
    } else if let Some(u) = s.strip_prefix("u:") {
        uid.is_some_and(|x| x == u)
    } else {
        false
    };
    if same {
        Ok(())
    } else {
        // As slapd ("SASL(-14): authorization failure"): the identity was proven, acting as
        // another is what is refused.
        Err(LdapError::new(
            ResultCode::InsufficientAccessRights,
            "authorization failure: the authorization identity must be the authenticated one (acting as another is not supported)",
        ))
    }
}

pub(crate) fn external(
    shared: &Shared,
    tls: Option<&TlsInfo>,
    authzid: &[u8],
) -> LdapResult<Identity> {
    let Some(tls) = tls else {
        return Err(LdapError::new(
            ResultCode::InappropriateAuthentication,
            "SASL EXTERNAL needs a TLS connection with a client certificate, or an ldapi:// connection",
        ));
    };
    let who = if let Some(cred) = tls.local {
        // A local client is who the kernel says it is; unless a rule maps it to an entry, it
        // acts as that identity itself (which access rules may name), as in slapd.
        let authc = cred.authc_dn();
        match mapped(shared, &authc)? {
            Some(who) => who,
            None => Identity {
                ndn: Some(shared.parse_dn(authc.as_bytes())?.1),
                dn: authc,
                is_admin: false,
            },
        }
    } else {
        let Some(subject) = &tls.client_subject else {
            return Err(LdapError::new(
                ResultCode::InappropriateAuthentication,
                "SASL EXTERNAL: the client presented no certificate (or tls_client_ca is not set)",
            ));
        };
        match mapped(shared, subject)? {
            Some(who) => who,
            None => {
                let ndn = shared
                    .parse_dn(subject.as_bytes())
                    .map_err(|_| {
                        invalid(&format!("the certificate subject '{subject}' is not a DN"))
                    })?
                    .1;
                identity_of(shared, &ndn).ok_or_else(|| {
                    invalid(&format!(
                        "the certificate subject '{subject}' names no entry"
                    ))
                })?
            }
        }
    };
    check_authzid(shared, authzid, &who, None)?;
    Ok(who)
}

/// The entry (or administrator) the `authz_map` rules map an authentication identity to;
/// `None` when no rule matches it.
fn mapped(shared: &Shared, authc: &str) -> LdapResult<Option<Identity>> {
    match shared.live.load().authz.map(shared, authc) {
        Mapped::Unmapped => Ok(None),
        Mapped::Nothing(why) => Err(invalid(&format!("'{authc}' maps to no entry: {why}"))),
        Mapped::Dn(ndn) => identity_of(shared, &ndn).map(Some).ok_or_else(|| {
            invalid(&format!(
                "'{authc}' maps to '{}', which names no entry",
                ndn.norm
            ))
        }),
    }
}

pub(crate) async fn plain(
    shared: &Arc<Shared>,
    creds: &[u8],
    peer: IpAddr,
) -> LdapResult<Identity> {
    let mut parts = creds.splitn(3, |&b| b == 0);
    let (Some(authzid), Some(authcid), Some(password)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(LdapError::new(
            ResultCode::ProtocolError,
            "SASL PLAIN credentials must be authzid NUL authcid NUL password",
        ));
    };
    let authcid = std::str::from_utf8(authcid)
        .map_err(|_| invalid("authentication identity is not UTF-8"))?;
    if password.is_empty() || authcid.is_empty() {
        return Err(invalid("empty authentication identity or password"));
    }
    let (ndn, uid) = if let Some(dn) = authcid.strip_prefix("dn:") {
        (shared.parse_dn(dn.as_bytes())?.1, None)
    } else {
        let uid = authcid.strip_prefix("u:").unwrap_or(authcid);
        match entry_by_uid(shared, uid) {
            Some(n) => (n, Some(uid)),
            // An unknown user costs the same work and counts for the lockout like a known one.
            None => (
                NormDn {
                    norm: format!("uid={},unknown", uid.to_lowercase()),
                    rdns: Vec::new(),
                },
                Some(uid),
            ),
        }
    };
    if !super::bind::check_password(shared, &ndn, password, peer).await {
        return Err(invalid("invalid credentials"));
    }
    let who = identity_of(shared, &ndn).ok_or_else(|| invalid("invalid credentials"))?;
    check_authzid(shared, authzid, &who, uid)?;
    Ok(who)
}

/// The one entry whose `uid` is `uid`; none when there are none or several.
pub(crate) fn entry_by_uid(shared: &Shared, uid: &str) -> Option<NormDn> {
    let schema = &*shared.schema();
    let ty = schema.attr_by_name("uid")?;
    let norm = schema.normalize_eq(ty, uid.as_bytes()).ok()?;
    let filter = store::Filter::Equality {
        attr: ty,
        norm: norm.clone(),
    };
    let v = shared.store.read();
    let mut found: Vec<NormDn> = Vec::new();
    match v.candidates(schema, &filter) {
        Some(ids) => {
            for id in ids.iter() {
                if let Some(e) = v.get(id) {
                    if e.has_value(ty, &norm) {
                        found.push(e.ndn(schema));
                    }
                }
            }
        }
        None => {
            for e in v.iter() {
                if e.has_value(ty, &norm) {
                    found.push(e.ndn(schema));
                }
            }
        }
    }
    if found.len() == 1 {
        found.pop()
    } else {
        None
    }
}
