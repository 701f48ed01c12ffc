//! A certificate authority made for a test, and the certificates it issues (rcgen): for
//! clients (SASL EXTERNAL) and for the server's own listeners (LDAPS, the console's HTTPS).

/// A certificate authority made for a test.
pub struct TestCa {
    pub cert: rcgen::Certificate,
    pub key: rcgen::KeyPair,
}

/// A subject of the given (type, value) parts, in the order given.
pub fn subject(parts: &[(rcgen::DnType, &str)]) -> rcgen::DistinguishedName {
    let mut dn = rcgen::DistinguishedName::new();
    for (t, v) in parts {
        dn.push(t.clone(), *v);
    }
    dn
}

impl TestCa {
    pub fn new(name: rcgen::DistinguishedName) -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let key = KeyPair::generate().expect("key");
        let mut ca = CertificateParams::new(vec![]).expect("params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name = name;
        let cert = ca.self_signed(&key).expect("ca");
        TestCa { cert, key }
    }

    /// A certificate for `name` (and the host names and addresses `sans`), with its key.
    pub fn issue(
        &self,
        name: rcgen::DistinguishedName,
        sans: Vec<rcgen::SanType>,
    ) -> (rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(vec![]).expect("params");
        p.distinguished_name = name;
        p.subject_alt_names = sans;
        let cert = p.signed_by(&key, &self.cert, &self.key).expect("cert");
        (cert, key)
    }
}
