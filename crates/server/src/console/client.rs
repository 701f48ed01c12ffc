//! The console's LDAP client: one connection per browser session to this very server, served
//! in-process (a tokio duplex stream handed to `session::run_in_process`, the handler TCP
//! clients get), so binds are throttled and access control, password policy, overlays, the
//! audit log and replication apply to the console's operations as to any client's. Requests
//! and responses are the project's own codecs (`proto`); one operation at a time (the session
//! holds the client behind a mutex).
//!
//! Limits: `MAX_RESPONSE_PDU` bytes per response, `OP_TIMEOUT` per operation, and a search
//! returns at most the entries it was asked for (`max_entries`), as paged results do.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use proto::{
    BindAuth, BindRequest, Change, Control, DerefAliases, Filter, LdapMessage, ModOp,
    PartialAttribute, ProtocolOp, ResultCode, Scope, SearchRequest,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use crate::state::Shared;

/// The largest response PDU the console reads from its own server.
pub const MAX_RESPONSE_PDU: usize = 16 << 20;
/// The longest one operation of the console may take.
pub const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// The in-process pipe's buffer each way.
const PIPE_BYTES: usize = 256 * 1024;

/// Why an operation did not complete (the server's own answer is an `Outcome`, not this).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the directory connection closed (log in again)")]
    Closed,
    #[error("the directory did not answer within {} s", OP_TIMEOUT.as_secs())]
    Timeout,
    #[error("the directory's answer could not be read: {0}")]
    Protocol(String),
    #[error("the directory connection failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The result of an operation as the server gave it.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub code: ResultCode,
    pub message: String,
    pub matched: String,
    /// The response's controls (OID, value).
    pub controls: Vec<(String, Vec<u8>)>,
    /// An extended response's value.
    pub value: Option<Vec<u8>>,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.code == ResultCode::Success
    }

    /// `name (code): message`, as a person reads it.
    pub fn describe(&self) -> String {
        let name = format!("{:?}", self.code);
        let mut s = format!("{} ({})", name, self.code as u32);
        if !self.message.is_empty() {
            s.push_str(": ");
            s.push_str(&self.message);
        }
        s
    }
}

/// One entry of a search result.
#[derive(Debug, Clone, Default)]
pub struct Entry {
    pub dn: String,
    pub attrs: Vec<(String, Vec<Vec<u8>>)>,
}

impl Entry {
    /// The values of `name` (case-insensitively).
    pub fn get(&self, name: &str) -> &[Vec<u8>] {
        self.attrs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[])
    }

    /// The first value of `name` as text.
    pub fn first(&self, name: &str) -> Option<String> {
        self.get(name)
            .first()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }
}

/// A search's entries, its result and (paged) the cookie of the next page.
#[derive(Debug)]
pub struct Found {
    pub entries: Vec<Entry>,
    pub outcome: Outcome,
    /// Empty after the last page, or when the search was not paged.
    pub next: Vec<u8>,
}

/// What to search for.
pub struct Query<'a> {
    pub base: &'a str,
    pub scope: Scope,
    pub filter: Filter<'static>,
    pub attrs: &'a [&'a str],
    /// Page size (paged results), or 0 for an unpaged search.
    pub page: u32,
    /// The cookie of the previous page.
    pub cookie: &'a [u8],
    /// Entries kept at most (an unpaged search's size limit).
    pub max_entries: usize,
}

/// A connection to the server's own operation path.
pub struct Client {
    stream: DuplexStream,
    conn: proto::ClientConn,
}

impl Client {
    /// Opens a connection served by `shared` as if it came from `peer` (the browser's
    /// address: failed binds are throttled by it); `encrypted`: the browser's connection is
    /// HTTPS, so the LDAP one counts as protected (`require_tls_for_bind`).
    pub fn open(shared: &Arc<Shared>, peer: SocketAddr, encrypted: bool) -> Client {
        let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
        tokio::spawn(crate::session::run_in_process(
            shared.clone(),
            theirs,
            peer,
            encrypted,
        ));
        Client {
            stream: ours,
            conn: proto::ClientConn::new(MAX_RESPONSE_PDU, 16 * 1024),
        }
    }

    async fn send(
        &mut self,
        op: ProtocolOp<'_>,
        controls: Vec<Control<'_>>,
    ) -> Result<i32, ClientError> {
        let (id, out) = self.conn.request(op, controls);
        self.stream.write_all(&out).await?;
        self.stream.flush().await?;
        Ok(id)
    }

    /// The next whole PDU.
    async fn recv(&mut self) -> Result<Vec<u8>, ClientError> {
        loop {
            match self.conn.next_pdu() {
                Ok(Some(pdu)) => return Ok(pdu),
                Ok(None) => {}
                Err(e) => return Err(ClientError::Protocol(format!("framing: {e}"))),
            }
            if self.stream.read_buf(self.conn.read_buf(16 * 1024)).await? == 0 {
                return Err(ClientError::Closed);
            }
        }
    }

    /// Sends `op` and collects what answers it: entries (searches) and the final result.
    async fn run(
        &mut self,
        op: ProtocolOp<'_>,
        controls: Vec<Control<'_>>,
        max_entries: usize,
    ) -> Result<(Vec<Entry>, Outcome), ClientError> {
        let fut = async {
            let id = self.send(op, controls).await?;
            let mut entries = Vec::new();
            loop {
                let pdu = self.recv().await?;
                let msg =
                    LdapMessage::decode(&pdu).map_err(|e| ClientError::Protocol(e.to_string()))?;
                if msg.id == 0 {
                    return Err(ClientError::Closed);
                }
                if msg.id != id {
                    continue;
                }
                let controls: Vec<(String, Vec<u8>)> = msg
                    .controls
                    .iter()
                    .map(|c| {
                        (
                            String::from_utf8_lossy(&c.oid).into_owned(),
                            c.value.as_deref().unwrap_or_default().to_vec(),
                        )
                    })
                    .collect();
                let (r, value) = match msg.op {
                    ProtocolOp::SearchResultEntry { dn, attributes } => {
                        if entries.len() < max_entries {
                            entries.push(Entry {
                                dn: String::from_utf8_lossy(&dn).into_owned(),
                                attrs: attributes
                                    .into_iter()
                                    .map(|a| {
                                        (
                                            String::from_utf8_lossy(&a.name).into_owned(),
                                            a.values.into_iter().map(|v| v.into_owned()).collect(),
                                        )
                                    })
                                    .collect(),
                            });
                        }
                        continue;
                    }
                    ProtocolOp::SearchResultReference(_)
                    | ProtocolOp::IntermediateResponse { .. } => continue,
                    ProtocolOp::BindResponse(r, _)
                    | ProtocolOp::SearchResultDone(r)
                    | ProtocolOp::ModifyResponse(r)
                    | ProtocolOp::AddResponse(r)
                    | ProtocolOp::DelResponse(r)
                    | ProtocolOp::ModifyDnResponse(r)
                    | ProtocolOp::CompareResponse(r) => (r, None),
                    ProtocolOp::ExtendedResponse(x) => (x.result, x.value.map(|v| v.into_owned())),
                    other => {
                        return Err(ClientError::Protocol(format!(
                            "unexpected response (tag {})",
                            other.tag()
                        )))
                    }
                };
                let outcome = Outcome {
                    code: r.code,
                    message: String::from_utf8_lossy(&r.message).into_owned(),
                    matched: String::from_utf8_lossy(&r.matched_dn).into_owned(),
                    controls,
                    value,
                };
                return Ok((entries, outcome));
            }
        };
        match tokio::time::timeout(OP_TIMEOUT, fut).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::Timeout),
        }
    }

    /// A simple bind.
    pub async fn simple_bind(&mut self, dn: &str, password: &[u8]) -> Result<Outcome, ClientError> {
        let op = ProtocolOp::BindRequest(BindRequest {
            version: 3,
            name: Cow::Borrowed(dn.as_bytes()),
            auth: BindAuth::Simple(Cow::Borrowed(password)),
        });
        Ok(self.run(op, Vec::new(), 0).await?.1)
    }

    /// A SASL PLAIN bind with authcid `u:<uid>`: the server's own lookup of a user id (one
    /// entry with that uid), throttled as any bind.
    pub async fn uid_bind(&mut self, uid: &str, password: &[u8]) -> Result<Outcome, ClientError> {
        let mut creds = Vec::with_capacity(uid.len() + password.len() + 4);
        creds.push(0);
        creds.extend_from_slice(b"u:");
        creds.extend_from_slice(uid.as_bytes());
        creds.push(0);
        creds.extend_from_slice(password);
        let op = ProtocolOp::BindRequest(BindRequest {
            version: 3,
            name: Cow::Borrowed(b""),
            auth: BindAuth::Sasl {
                mechanism: Cow::Borrowed(b"PLAIN"),
                credentials: Some(Cow::Owned(creds)),
            },
        });
        Ok(self.run(op, Vec::new(), 0).await?.1)
    }

    /// The DN this connection is bound as (Who am I?, RFC 4532), without `dn:`.
    pub async fn whoami(&mut self) -> Result<String, ClientError> {
        let op = ProtocolOp::ExtendedRequest(proto::ExtendedRequest {
            oid: Cow::Borrowed(proto::oids::WHO_AM_I.as_bytes()),
            value: None,
        });
        let o = self.run(op, Vec::new(), 0).await?.1;
        let v = String::from_utf8_lossy(o.value.as_deref().unwrap_or_default()).into_owned();
        Ok(v.strip_prefix("dn:").unwrap_or(&v).to_string())
    }

    /// A search; paged when `q.page` > 0.
    pub async fn search(&mut self, q: &Query<'_>) -> Result<Found, ClientError> {
        let mut controls = Vec::new();
        if q.page > 0 {
            controls.push(Control {
                oid: Cow::Borrowed(proto::oids::PAGED_RESULTS.as_bytes()),
                critical: true,
                value: Some(Cow::Owned(
                    proto::controls::paged::PagedResults {
                        size: i64::from(q.page),
                        cookie: Cow::Borrowed(q.cookie),
                    }
                    .to_vec(),
                )),
            });
        }
        let op = ProtocolOp::SearchRequest(SearchRequest {
            base: Cow::Borrowed(q.base.as_bytes()),
            scope: q.scope,
            deref: DerefAliases::Never,
            size_limit: if q.page > 0 { 0 } else { q.max_entries as i64 },
            time_limit: 0,
            types_only: false,
            filter: q.filter.clone(),
            attributes: q
                .attrs
                .iter()
                .map(|a| Cow::Borrowed(a.as_bytes()))
                .collect(),
        });
        let (entries, outcome) = self.run(op, controls, q.max_entries).await?;
        let next = outcome
            .controls
            .iter()
            .find(|(oid, _)| oid == proto::oids::PAGED_RESULTS)
            .and_then(|(_, v)| proto::controls::paged::PagedResults::decode(v).ok())
            .map(|p| p.cookie.into_owned())
            .unwrap_or_default();
        Ok(Found {
            entries,
            outcome,
            next,
        })
    }

    /// One entry by DN (all user attributes, and `extra` ones such as `+`); `None` when the
    /// search found nothing (absent, or not visible to this identity).
    pub async fn read(
        &mut self,
        dn: &str,
        attrs: &[&str],
    ) -> Result<(Option<Entry>, Outcome), ClientError> {
        let f = self
            .search(&Query {
                base: dn,
                scope: Scope::Base,
                filter: Filter::Present(Cow::Borrowed(b"objectClass")),
                attrs,
                page: 0,
                cookie: b"",
                max_entries: 1,
            })
            .await?;
        Ok((f.entries.into_iter().next(), f.outcome))
    }

    /// A modify.
    pub async fn modify(
        &mut self,
        dn: &str,
        changes: Vec<(ModOp, String, Vec<Vec<u8>>)>,
    ) -> Result<Outcome, ClientError> {
        let changes = changes
            .into_iter()
            .map(|(op, name, values)| Change {
                op,
                attr: PartialAttribute {
                    name: Cow::Owned(name.into_bytes()),
                    values: values.into_iter().map(Cow::Owned).collect(),
                },
            })
            .collect();
        let op = ProtocolOp::ModifyRequest(proto::ModifyRequest {
            dn: Cow::Borrowed(dn.as_bytes()),
            changes,
        });
        Ok(self.run(op, Vec::new(), 0).await?.1)
    }

    /// An add.
    pub async fn add(
        &mut self,
        dn: &str,
        attrs: Vec<(String, Vec<Vec<u8>>)>,
    ) -> Result<Outcome, ClientError> {
        let op = ProtocolOp::AddRequest(proto::AddRequest {
            dn: Cow::Borrowed(dn.as_bytes()),
            attributes: attrs
                .into_iter()
                .map(|(n, v)| PartialAttribute {
                    name: Cow::Owned(n.into_bytes()),
                    values: v.into_iter().map(Cow::Owned).collect(),
                })
                .collect(),
        });
        Ok(self.run(op, Vec::new(), 0).await?.1)
    }

    /// A delete; `subtree`: with the Subtree Delete control (the entry and all below it).
    pub async fn delete(&mut self, dn: &str, subtree: bool) -> Result<Outcome, ClientError> {
        let mut controls = Vec::new();
        if subtree {
            controls.push(Control {
                oid: Cow::Borrowed(proto::oids::SUBTREE_DELETE.as_bytes()),
                critical: true,
                value: None,
            });
        }
        let op = ProtocolOp::DelRequest(Cow::Borrowed(dn.as_bytes()));
        Ok(self.run(op, controls, 0).await?.1)
    }

    /// A modify DN.
    pub async fn rename(
        &mut self,
        dn: &str,
        new_rdn: &str,
        delete_old_rdn: bool,
        new_superior: Option<&str>,
    ) -> Result<Outcome, ClientError> {
        let op = ProtocolOp::ModifyDnRequest(proto::ModifyDnRequest {
            dn: Cow::Borrowed(dn.as_bytes()),
            new_rdn: Cow::Borrowed(new_rdn.as_bytes()),
            delete_old_rdn,
            new_superior: new_superior.map(|s| Cow::Borrowed(s.as_bytes())),
        });
        Ok(self.run(op, Vec::new(), 0).await?.1)
    }

    /// Password Modify (RFC 3062) for `user` (empty: the bound identity), with the password
    /// policy request control so the policy's answer comes back.
    pub async fn set_password(
        &mut self,
        user: &str,
        old: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<Outcome, ClientError> {
        let mut value = Vec::new();
        proto::PasswdModifyRequest {
            user_identity: (!user.is_empty()).then_some(Cow::Borrowed(user.as_bytes())),
            old_passwd: old.map(Cow::Borrowed),
            new_passwd: new.map(Cow::Borrowed),
        }
        .encode(&mut value);
        let op = ProtocolOp::ExtendedRequest(proto::ExtendedRequest {
            oid: Cow::Borrowed(proto::oids::PASSWORD_MODIFY.as_bytes()),
            value: Some(Cow::Owned(value)),
        });
        let controls = vec![Control {
            oid: Cow::Borrowed(proto::oids::PASSWORD_POLICY.as_bytes()),
            critical: false,
            value: None,
        }];
        Ok(self.run(op, controls, 0).await?.1)
    }

    /// Ends the connection politely (the server logs an UNBIND).
    pub async fn unbind(&mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            let _ = self.send(ProtocolOp::UnbindRequest, Vec::new()).await;
            let _ = self.stream.shutdown().await;
        })
        .await;
    }
}
