//! Storage and verification of `userPassword` values.
//!
//! A stored value is `{SCHEME}` followed by the scheme's encoding of the
//! password, in the layout OpenLDAP's `slappasswd` (and its `pw-sha2`
//! module) uses, so entries can move between Linden and OpenLDAP unchanged:
//!
//! | scheme       | stored as                          | hashed by [`hash`] |
//! |--------------|------------------------------------|--------------------|
//! | `{SSHA}`     | base64(SHA-1(pw ‖ salt) ‖ salt)    | yes                |
//! | `{SSHA256}`  | base64(SHA-256(pw ‖ salt) ‖ salt)  | yes                |
//! | `{SSHA384}`  | base64(SHA-384(pw ‖ salt) ‖ salt)  | yes                |
//! | `{SSHA512}`  | base64(SHA-512(pw ‖ salt) ‖ salt)  | yes (the default)  |
//! | `{SHA}`      | base64(SHA-1(pw))                  | yes                |
//! | `{SHA256}`   | base64(SHA-256(pw))                | yes                |
//! | `{SHA384}`   | base64(SHA-384(pw))                | yes                |
//! | `{SHA512}`   | base64(SHA-512(pw))                | yes                |
//! | no prefix    | the password itself (cleartext)    | yes                |
//!
//! Why these: they are the schemes an OpenLDAP directory exported with
//! `slapcat` most often contains, they need only the SHA family, and the
//! salted ones are what a client expects a directory to store today.
//! The unsalted and cleartext schemes exist so that imported data keeps
//! working; new passwords should use the default, `{SSHA512}` with a
//! 16-byte random salt.
//!
//! Every scheme is one row of the `SCHEMES` table; adding a scheme (Argon2,
//! PBKDF2, crypt) means adding a [`Scheme`] variant, a row, and an
//! `Algorithm` arm for its hashing and checking.
//!
//! Digests are compared in constant time ([`subtle`]). [`verify`] never
//! panics: a malformed value simply does not match any password.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use rand::RngCore as _;
use sha1::Sha1;
use sha2::{Sha256, Sha384, Sha512};
use std::fmt;
use std::str::FromStr;
use subtle::ConstantTimeEq as _;

/// Length of the random salt [`hash`] appends for salted schemes.
///
/// OpenLDAP uses 4 or 8 bytes; 16 follows current guidance (NIST SP
/// 800-132) and is read back by any implementation, since the salt is
/// simply everything after the digest.
pub const SALT_LEN: usize = 16;

/// Base64 as OpenLDAP writes it (standard alphabet, padded), but accepting
/// values whose padding was stripped by some other tool.
const B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A password storage scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Scheme {
    /// `{SSHA}`: salted SHA-1.
    Ssha,
    /// `{SSHA256}`: salted SHA-256.
    Ssha256,
    /// `{SSHA384}`: salted SHA-384.
    Ssha384,
    /// `{SSHA512}`: salted SHA-512.
    #[default]
    Ssha512,
    /// `{SHA}`: unsalted SHA-1.
    Sha,
    /// `{SHA256}`: unsalted SHA-256.
    Sha256,
    /// `{SHA384}`: unsalted SHA-384.
    Sha384,
    /// `{SHA512}`: unsalted SHA-512.
    Sha512,
    /// The password itself, without a `{SCHEME}` prefix.
    Cleartext,
}

/// How a scheme turns a password into its stored form.
#[derive(Debug, Clone, Copy)]
enum Algorithm {
    /// `digest(password ‖ salt) ‖ salt`, base64; empty salt when unsalted.
    Digest { digest: DigestKind, salted: bool },
    /// Stored as given.
    Cleartext,
}

#[derive(Debug, Clone, Copy)]
enum DigestKind {
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl DigestKind {
    fn len(self) -> usize {
        match self {
            DigestKind::Sha1 => 20,
            DigestKind::Sha256 => 32,
            DigestKind::Sha384 => 48,
            DigestKind::Sha512 => 64,
        }
    }

    /// Appends `digest(password ‖ salt)` to `out`.
    fn digest_into(self, password: &[u8], salt: &[u8], out: &mut Vec<u8>) {
        fn run<D: sha2::Digest>(password: &[u8], salt: &[u8], out: &mut Vec<u8>) {
            let mut d = D::new();
            d.update(password);
            d.update(salt);
            out.extend_from_slice(&d.finalize());
        }
        match self {
            DigestKind::Sha1 => run::<Sha1>(password, salt, out),
            DigestKind::Sha256 => run::<Sha256>(password, salt, out),
            DigestKind::Sha384 => run::<Sha384>(password, salt, out),
            DigestKind::Sha512 => run::<Sha512>(password, salt, out),
        }
    }
}

/// One row of the scheme table.
struct SchemeDef {
    scheme: Scheme,
    /// Name between the braces, upper case; empty for cleartext.
    name: &'static str,
    algorithm: Algorithm,
}

const fn digest(scheme: Scheme, name: &'static str, digest: DigestKind, salted: bool) -> SchemeDef {
    SchemeDef {
        scheme,
        name,
        algorithm: Algorithm::Digest { digest, salted },
    }
}

/// Every supported scheme. Lookup is by linear scan: the table is tiny.
const SCHEMES: &[SchemeDef] = &[
    digest(Scheme::Ssha, "SSHA", DigestKind::Sha1, true),
    digest(Scheme::Ssha256, "SSHA256", DigestKind::Sha256, true),
    digest(Scheme::Ssha384, "SSHA384", DigestKind::Sha384, true),
    digest(Scheme::Ssha512, "SSHA512", DigestKind::Sha512, true),
    digest(Scheme::Sha, "SHA", DigestKind::Sha1, false),
    digest(Scheme::Sha256, "SHA256", DigestKind::Sha256, false),
    digest(Scheme::Sha384, "SHA384", DigestKind::Sha384, false),
    digest(Scheme::Sha512, "SHA512", DigestKind::Sha512, false),
    SchemeDef {
        scheme: Scheme::Cleartext,
        name: "",
        algorithm: Algorithm::Cleartext,
    },
];

impl Scheme {
    fn def(self) -> &'static SchemeDef {
        // Every variant has a row (checked by a test); the fallback keeps
        // this total without a panic.
        SCHEMES
            .iter()
            .find(|d| d.scheme == self)
            .unwrap_or(&SCHEMES[SCHEMES.len() - 1])
    }

    /// The scheme's name as written between braces (`"SSHA512"`), or
    /// `"CLEARTEXT"` for [`Scheme::Cleartext`].
    pub fn name(self) -> &'static str {
        match self.def().name {
            "" => "CLEARTEXT",
            n => n,
        }
    }

    /// Every scheme, in table order.
    pub fn all() -> impl Iterator<Item = Scheme> {
        SCHEMES.iter().map(|d| d.scheme)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheme name that [`Scheme::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown password scheme {0:?} (known: SSHA, SSHA256, SSHA384, SSHA512, SHA, SHA256, SHA384, SHA512, CLEARTEXT)")]
pub struct UnknownScheme(pub String);

impl FromStr for Scheme {
    type Err = UnknownScheme;

    /// Parses `"SSHA512"`, `"ssha512"` or `"{SSHA512}"`; `"CLEARTEXT"` for
    /// cleartext.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s
            .strip_prefix('{')
            .and_then(|n| n.strip_suffix('}'))
            .unwrap_or(s);
        if name.eq_ignore_ascii_case("CLEARTEXT") {
            return Ok(Scheme::Cleartext);
        }
        SCHEMES
            .iter()
            .find(|d| !d.name.is_empty() && d.name.eq_ignore_ascii_case(name))
            .map(|d| d.scheme)
            .ok_or_else(|| UnknownScheme(s.to_owned()))
    }
}

/// Produces the value to store in `userPassword` for `password`.
///
/// Salted schemes draw a fresh [`SALT_LEN`]-byte salt from the operating
/// system's random number generator.
pub fn hash(scheme: Scheme, password: &[u8]) -> Vec<u8> {
    let def = scheme.def();
    match def.algorithm {
        Algorithm::Cleartext => password.to_vec(),
        Algorithm::Digest { digest, salted } => {
            let mut salt = [0u8; SALT_LEN];
            let salt: &[u8] = if salted {
                rand::rngs::OsRng.fill_bytes(&mut salt);
                &salt
            } else {
                &[]
            };
            let mut raw = Vec::with_capacity(digest.len() + salt.len());
            digest.digest_into(password, salt, &mut raw);
            raw.extend_from_slice(salt);
            let mut out = Vec::with_capacity(def.name.len() + 2 + raw.len().div_ceil(3) * 4);
            out.push(b'{');
            out.extend_from_slice(def.name.as_bytes());
            out.push(b'}');
            let start = out.len();
            out.resize(start + raw.len().div_ceil(3) * 4, 0);
            // The buffer was sized for the padded encoding, so this cannot
            // fail; on the impossible error the value simply never verifies.
            let written = B64.encode_slice(&raw, &mut out[start..]).unwrap_or(0);
            out.truncate(start + written);
            out
        }
    }
}

/// Splits `{NAME}rest` into `(NAME, rest)`; `None` when there is no prefix.
fn split_prefix(value: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = value.strip_prefix(b"{")?;
    let end = rest.iter().position(|&b| b == b'}')?;
    Some((&rest[..end], &rest[end + 1..]))
}

fn lookup(name: &[u8]) -> Option<&'static SchemeDef> {
    SCHEMES
        .iter()
        .find(|d| !d.name.is_empty() && d.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Whether `value` starts with the `{SCHEME}` prefix of a known hashing
/// scheme (and so must not be hashed again).
pub fn is_hashed(value: &[u8]) -> bool {
    split_prefix(value).is_some_and(|(name, _)| lookup(name).is_some())
}

/// Checks `password` against a stored `userPassword` value.
///
/// A value without a `{SCHEME}` prefix is compared as cleartext; a value
/// with an unknown scheme, bad base64, or the wrong length matches nothing.
pub fn verify(stored: &[u8], password: &[u8]) -> bool {
    let Some((name, encoded)) = split_prefix(stored) else {
        return bool::from(stored.ct_eq(password));
    };
    let Some(def) = lookup(name) else {
        return false;
    };
    match def.algorithm {
        Algorithm::Cleartext => bool::from(encoded.ct_eq(password)),
        Algorithm::Digest { digest, salted } => {
            let Ok(raw) = B64.decode(encoded) else {
                return false;
            };
            let n = digest.len();
            // Salted values need at least one salt byte (as OpenLDAP
            // requires); unsalted ones are exactly one digest.
            let shape_ok = if salted {
                raw.len() > n
            } else {
                raw.len() == n
            };
            if !shape_ok {
                return false;
            }
            let (expected, salt) = raw.split_at(n);
            let mut actual = Vec::with_capacity(n);
            digest.digest_into(password, salt, &mut actual);
            bool::from(actual.ct_eq(expected))
        }
    }
}

/// Characters of [`generate_password`]: the URL-safe base64 alphabet, so a
/// generated password survives shells, URLs and config files unquoted.
const PASSWORD_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A random password of `len` characters from the URL-safe alphabet
/// (6 bits of entropy per character), for generated administrator
/// passwords and RFC 3062 Password Modify.
pub fn generate_password(len: usize) -> String {
    let mut bytes = vec![0u8; len];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    // 64 symbols: masking to 6 bits is uniform, no modulo bias.
    bytes
        .iter()
        .map(|b| char::from(PASSWORD_ALPHABET[usize::from(b & 63)]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_table_row() {
        for s in [
            Scheme::Ssha,
            Scheme::Ssha256,
            Scheme::Ssha384,
            Scheme::Ssha512,
            Scheme::Sha,
            Scheme::Sha256,
            Scheme::Sha384,
            Scheme::Sha512,
            Scheme::Cleartext,
        ] {
            assert!(SCHEMES.iter().any(|d| d.scheme == s), "{s:?}");
        }
    }
}
