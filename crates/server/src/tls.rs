//! TLS for LDAPS and StartTLS (rustls, ring provider).
//!
//! The certificate and key come from `tls_cert`/`tls_key`; without them the server creates a
//! self-signed certificate in its data directory at first start (`tls-cert.pem`, `tls-key.pem`,
//! the key readable by its owner only), logs its SHA-256 fingerprint, and reuses it afterwards,
//! so StartTLS works out of the box. With `tls_client_ca`, clients may present a certificate
//! issued by that CA (optional: clients without one still connect); SASL EXTERNAL binds as the
//! entry named by its subject.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use sha2::Digest as _;

use crate::config::Config;

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// File names of the generated certificate and key in the data directory.
pub const GENERATED_CERT: &str = "tls-cert.pem";
pub const GENERATED_KEY: &str = "tls-key.pem";

/// What a secure transport gave a connection: TLS (LDAPS or StartTLS), or a local `ldapi://`
/// socket, which needs no encryption and counts as secure wherever TLS is required (as slapd
/// gives ldapi a security strength).
#[derive(Debug, Clone, Default)]
pub struct TlsInfo {
    /// The client certificate's subject as an LDAP DN string (RFC 4514 order), if the client
    /// presented one that verified against `tls_client_ca`.
    pub client_subject: Option<String>,
    /// On an `ldapi://` connection: the connecting process's user and group (SO_PEERCRED).
    pub local: Option<PeerCred>,
    /// TLS runs on the connection (LDAPS, or StartTLS on a TCP or `ldapi://` connection).
    pub encrypted: bool,
}

/// The credentials of the process at the other end of a local socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    pub uid: u32,
    pub gid: u32,
}

impl PeerCred {
    /// The SASL EXTERNAL authentication identity of a local connection, in slapd's form.
    pub fn authc_dn(&self) -> String {
        format!(
            "gidNumber={}+uidNumber={},cn=peercred,cn=external,cn=auth",
            self.gid, self.uid
        )
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut data.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: invalid PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no CERTIFICATE block found", path.display()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    rustls_pemfile::private_key(&mut data.as_slice())
        .map_err(|e| format!("{}: invalid PEM: {e}", path.display()))?
        .ok_or_else(|| format!("{}: no PRIVATE KEY block found", path.display()))
}

/// SHA-256 of a certificate, as `AB:CD:...` (what `openssl x509 -fingerprint -sha256` shows).
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    sha2::Sha256::digest(cert.as_ref())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Creates the self-signed certificate and key in `dir` unless both exist; returns their paths.
fn ensure_generated(dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let cert = dir.join(GENERATED_CERT);
    let key = dir.join(GENERATED_KEY);
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    let names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    let ck = rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("cannot create a self-signed certificate: {e}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    write_private(&key, ck.key_pair.serialize_pem().as_bytes())
        .map_err(|e| format!("{}: cannot write: {e}", key.display()))?;
    std::fs::write(&cert, ck.cert.pem())
        .map_err(|e| format!("{}: cannot write: {e}", cert.display()))?;
    tracing::info!(
        "created a self-signed TLS certificate {} (SHA-256 fingerprint {}); set tls_cert and tls_key to use your own",
        cert.display(),
        fingerprint(ck.cert.der())
    );
    Ok((cert, key))
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        o.mode(0o600);
    }
    let mut f = o.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Builds the TLS server configuration; errors are one line naming the file or setting.
pub fn server_config(c: &Config) -> Result<Arc<ServerConfig>, String> {
    let (cert_path, key_path) = match (&c.tls_cert, &c.tls_key) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        (None, None) => ensure_generated(&c.data_dir)?,
        (Some(_), None) => return Err("tls_cert is set but tls_key is not".into()),
        (None, Some(_)) => return Err("tls_key is set but tls_cert is not".into()),
    };
    let certs = read_certs(&cert_path)?;
    let key = read_key(&key_path)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match &c.tls_client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs(ca)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("{}: not a usable CA certificate: {e}", ca.display()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider(),
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| format!("{}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| {
        format!(
            "{} / {}: certificate and key do not fit together: {e}",
            cert_path.display(),
            key_path.display()
        )
    })?;
    Ok(Arc::new(config))
}

/// The LDAP DN of a certificate's subject: RDNs in reverse (most specific first), attribute
/// types by their LDAP names, values escaped per RFC 4514.
pub fn subject_dn(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, x) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let mut rdns = Vec::new();
    for rdn in x.subject().iter_rdn() {
        let mut avas = Vec::new();
        for ava in rdn.iter() {
            let oid = ava.attr_type().to_id_string();
            let name = match oid.as_str() {
                "2.5.4.3" => "cn",
                "2.5.4.6" => "c",
                "2.5.4.7" => "l",
                "2.5.4.8" => "st",
                "2.5.4.10" => "o",
                "2.5.4.11" => "ou",
                "2.5.4.5" => "serialNumber",
                "0.9.2342.19200300.100.1.25" => "dc",
                "0.9.2342.19200300.100.1.1" => "uid",
                "1.2.840.113549.1.9.1" => "emailAddress",
                _ => return None,
            };
            let value = ava.as_str().ok()?;
            avas.push(format!("{name}={}", escape_value(value)));
        }
        rdns.push(avas.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

fn escape_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, ch) in v.chars().enumerate() {
        let special = matches!(ch, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
            || (i == 0 && (ch == ' ' || ch == '#'))
            || (i + 1 == v.chars().count() && ch == ' ');
        if special {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_dn_is_in_ldap_order() {
        let mut params = rcgen::CertificateParams::new(vec![]).expect("params");
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::OrganizationName, "Example, Inc");
        dn.push(rcgen::DnType::CommonName, "alice");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        assert_eq!(
            subject_dn(cert.der()).as_deref(),
            Some("cn=alice,o=Example\\, Inc")
        );
    }

    #[test]
    fn generated_certificate_is_reused() {
        let dir = tempfile::tempdir().expect("tmp");
        let (c1, k1) = ensure_generated(dir.path()).expect("created");
        let first = std::fs::read(&c1).expect("cert");
        let (c2, _) = ensure_generated(dir.path()).expect("reused");
        assert_eq!(first, std::fs::read(&c2).expect("cert"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&k1).expect("key").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        assert!(server_config(&config).is_ok());
        let bad = Config {
            tls_cert: Some(dir.path().join("missing.pem")),
            tls_key: Some(k1),
            ..Config::default()
        };
        let e = server_config(&bad).expect_err("missing file");
        assert!(e.contains("missing.pem: cannot read"), "{e}");
    }
}
