//! The consumer's client connection to its provider: TCP, LDAPS or StartTLS (rustls, the
//! provider's certificate checked against `tls_ca` and its name), a bind (simple or SASL
//! EXTERNAL), then PDUs framed and decoded with the project's codecs (`proto::frame`,
//! `LdapMessage::decode`), never more than `max_pdu` bytes each.

use std::sync::Arc;

use proto::{BindAuth, BindRequest, Control, LdapMessage, ProtocolOp, ResultCode};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::spec::{BindMethod, ConsumerSpec, StartTls};
use super::ReplError;

/// A byte stream to a provider: plain TCP or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Read granularity; the buffer grows to hold one PDU at most `max_pdu` long.
const READ_CHUNK: usize = 64 * 1024;

/// One connection: the stream, the bytes read and not yet framed, the next message id.
pub struct Conn<S> {
    stream: S,
    conn: proto::ClientConn,
    /// The local end of the TCP connection (for monitoring).
    pub local: Option<std::net::SocketAddr>,
}

impl<S: Io> Conn<S> {
    fn new(stream: S, max_pdu: usize) -> Conn<S> {
        Conn {
            stream,
            conn: proto::ClientConn::new(max_pdu, READ_CHUNK),
            local: None,
        }
    }

    /// Sends one request; returns its message id.
    pub async fn send(
        &mut self,
        op: ProtocolOp<'_>,
        controls: Vec<Control<'_>>,
    ) -> Result<i32, ReplError> {
        let (id, out) = self.conn.request(op, controls);
        self.stream.write_all(&out).await?;
        self.stream.flush().await?;
        Ok(id)
    }

    /// The next whole PDU from the provider (to decode with `LdapMessage::decode`). Cancel
    /// safe: bytes read before the future is dropped stay in the buffer.
    pub async fn recv(&mut self) -> Result<Vec<u8>, ReplError> {
        loop {
            match self.conn.next_pdu() {
                Ok(Some(pdu)) => return Ok(pdu),
                Ok(None) => {}
                Err(e) => return Err(ReplError::Protocol(format!("framing: {e}"))),
            }
            // `read_buf` appends to the spare capacity: dropped while it waits (the consumer
            // waits with a timer beside it), it loses nothing.
            match self.stream.read_buf(self.conn.read_buf(READ_CHUNK)).await? {
                0 => return Err(ReplError::Closed),
                _ => continue,
            }
        }
    }

    /// Sends a request and waits for its one response (bind, StartTLS), ignoring anything
    /// else (there is nothing else outstanding then).
    async fn exchange(&mut self, op: ProtocolOp<'_>) -> Result<Vec<u8>, ReplError> {
        let id = self.send(op, Vec::new()).await?;
        loop {
            let pdu = self.recv().await?;
            let msg = LdapMessage::decode(&pdu)
                .map_err(|e| ReplError::Protocol(format!("undecodable response: {e}")))?;
            if msg.id == id {
                drop(msg);
                return Ok(pdu);
            }
            if msg.id == 0 {
                // A notice of disconnection.
                return Err(ReplError::Closed);
            }
        }
    }

    fn into_stream(self) -> S {
        self.stream
    }
}

/// The rustls client configuration for `spec`: the provider's certificate must chain to a
/// certificate of `tls_ca`; with `tls_cert`/`tls_key`, the consumer presents that certificate.
pub fn client_config(spec: &ConsumerSpec) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &spec.tls_ca {
        for c in read_certs(ca)? {
            roots
                .add(c)
                .map_err(|e| format!("tls_ca {}: {e}", ca.display()))?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots);
    let config = match (&spec.tls_cert, &spec.tls_key) {
        (Some(cert), Some(key)) => {
            let certs = read_certs(cert)?;
            let data = std::fs::read(key)
                .map_err(|e| format!("tls_key {}: cannot read: {e}", key.display()))?;
            let key_der = rustls_pemfile::private_key(&mut data.as_slice())
                .map_err(|e| format!("tls_key {}: invalid PEM: {e}", key.display()))?
                .ok_or_else(|| format!("tls_key {}: no PRIVATE KEY block", key.display()))?;
            builder
                .with_client_auth_cert(certs, key_der)
                .map_err(|e| format!("tls_cert: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

fn read_certs(
    path: &std::path::Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut data.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: invalid PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no CERTIFICATE block found", path.display()));
    }
    Ok(certs)
}

async fn tls_wrap<S: Io + 'static>(
    spec: &ConsumerSpec,
    tls: &Arc<rustls::ClientConfig>,
    stream: S,
) -> Result<Box<dyn Io>, ReplError> {
    let name = ServerName::try_from(spec.provider.host.clone())
        .map_err(|e| ReplError::Tls(format!("'{}': {e}", spec.provider.host)))?;
    let connector = tokio_rustls::TlsConnector::from(tls.clone());
    let s = connector
        .connect(name, stream)
        .await
        .map_err(|e| ReplError::Tls(e.to_string()))?;
    Ok(Box::new(s))
}

fn result_of(pdu: &[u8]) -> Result<(ResultCode, String), ReplError> {
    let msg = LdapMessage::decode(pdu)
        .map_err(|e| ReplError::Protocol(format!("undecodable response: {e}")))?;
    match msg.op {
        ProtocolOp::BindResponse(r, _) => Ok((r.code, lossy(&r.message))),
        ProtocolOp::ExtendedResponse(x) => Ok((x.result.code, lossy(&x.result.message))),
        other => Err(ReplError::Protocol(format!(
            "unexpected response (tag {})",
            other.tag()
        ))),
    }
}

pub(crate) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Connects to the provider, secures the connection as asked, and binds.
pub async fn open(
    spec: &ConsumerSpec,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Conn<Box<dyn Io>>, ReplError> {
    let addr = (spec.provider.host.as_str(), spec.provider.port);
    let tcp = TcpStream::connect(addr).await?;
    let _ = tcp.set_nodelay(true);
    let local = tcp.local_addr().ok();
    let stream: Box<dyn Io> = if spec.provider.ldaps {
        let tls = tls.ok_or_else(|| ReplError::Tls("no TLS configuration".into()))?;
        tls_wrap(spec, tls, tcp).await?
    } else if spec.start_tls != StartTls::No {
        let mut plain = Conn::new(tcp, spec.max_pdu);
        let pdu = plain
            .exchange(ProtocolOp::ExtendedRequest(proto::ExtendedRequest {
                oid: proto::oids::START_TLS.as_bytes().into(),
                value: None,
            }))
            .await?;
        let (code, message) = result_of(&pdu)?;
        match (code, spec.start_tls) {
            (ResultCode::Success, _) => {
                let tls = tls.ok_or_else(|| ReplError::Tls("no TLS configuration".into()))?;
                tls_wrap(spec, tls, plain.into_stream()).await?
            }
            (_, StartTls::Yes) => {
                tracing::warn!(
                    "replication: {} refused StartTLS ({}: {message}); going on in the clear",
                    spec.provider,
                    code.name()
                );
                Box::new(plain.into_stream())
            }
            _ => {
                return Err(ReplError::Ldap {
                    what: "StartTLS",
                    code,
                    message,
                })
            }
        }
    } else {
        Box::new(tcp)
    };
    let mut conn = Conn::new(stream, spec.max_pdu);
    conn.local = local;
    let auth = match &spec.bind {
        BindMethod::Anonymous => None,
        BindMethod::Simple { dn, password } => Some((
            dn.as_bytes().to_vec(),
            BindAuth::Simple(password.as_bytes().to_vec().into()),
        )),
        BindMethod::SaslExternal => Some((
            Vec::new(),
            BindAuth::Sasl {
                mechanism: b"EXTERNAL".as_slice().into(),
                credentials: None,
            },
        )),
    };
    if let Some((name, auth)) = auth {
        let pdu = conn
            .exchange(ProtocolOp::BindRequest(BindRequest {
                version: 3,
                name: name.into(),
                auth,
            }))
            .await?;
        let (code, message) = result_of(&pdu)?;
        if code != ResultCode::Success {
            return Err(ReplError::Ldap {
                what: "bind",
                code,
                message,
            });
        }
    }
    Ok(conn)
}
