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
//! | `{ARGON2}`   | PHC string `$argon2id$v=19$m=..,t=..,p=..$salt$hash` (OpenLDAP's argon2 module; argon2i/d verified too) | yes (the default) |
//! | `{PBKDF2-SHA512}` | `rounds$salt$hash`, adapted base64 (OpenLDAP pw-pbkdf2, 389-ds, passlib) | yes |
//! | `{CRYPT}`    | `$6$[rounds=N$]salt$hash` (SHA-512-crypt) or `$5$...` (SHA-256-crypt) | yes (`$6$`) |
//!
//! The default for new passwords is Argon2id, the winner of the Password
//! Hashing Competition and RFC 9106's recommendation: memory-hard, so
//! guessing with GPUs or ASICs costs far more than with an iterated hash.
//! Its default cost is OWASP's minimum (19 MiB, 2 passes, 1 lane). The
//! SHA-family schemes are what OpenLDAP directories most often contain and
//! exist so that migrated data keeps working, as does `{CRYPT}` from
//! `/etc/shadow`-style migrations; PBKDF2-SHA512 is the choice where a
//! FIPS-approved algorithm is required.
//!
//! Every scheme is one row of the `SCHEMES` table; adding a scheme means
//! adding a [`Scheme`] variant, a row, and an `Algorithm` arm.
//!
//! Digests are compared in constant time ([`subtle`]). [`verify`] never
//! panics: a malformed value simply does not match any password. Because a
//! stored value chooses its own cost, [`verify`] refuses (does not match)
//! values whose cost is above the `MAX_*` limits below, so that nobody who
//! can write a `userPassword` value can make one bind cost seconds of CPU or
//! gigabytes of memory.

pub mod cache;

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

/// Largest Argon2 memory cost [`verify`] accepts, in KiB (256 MiB).
pub const MAX_ARGON2_MEMORY_KIB: u32 = 256 * 1024;
/// Largest Argon2 time cost (passes) [`verify`] accepts.
pub const MAX_ARGON2_ITERATIONS: u32 = 32;
/// Largest Argon2 parallelism [`verify`] accepts.
pub const MAX_ARGON2_PARALLELISM: u32 = 16;
/// Largest PBKDF2 iteration count [`verify`] accepts (about half a second).
pub const MAX_PBKDF2_ITERATIONS: u32 = 1_000_000;
/// Largest SHA-crypt rounds [`verify`] accepts.
pub const MAX_CRYPT_ROUNDS: u32 = 1_000_000;

/// The cost parameters [`hash_with`] uses for the schemes that have one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// Argon2 memory in KiB. Default 19456 (19 MiB, OWASP's minimum for Argon2id).
    pub argon2_memory_kib: u32,
    /// Argon2 passes over memory. Default 2.
    pub argon2_iterations: u32,
    /// Argon2 lanes. Default 1.
    pub argon2_parallelism: u32,
    /// PBKDF2-HMAC-SHA512 iterations. Default 210000 (OWASP 2023).
    pub pbkdf2_iterations: u32,
    /// SHA-512-crypt rounds. Default 5000 (the crypt default).
    pub crypt_rounds: u32,
}

impl Default for Cost {
    fn default() -> Self {
        Cost {
            argon2_memory_kib: 19 * 1024,
            argon2_iterations: 2,
            argon2_parallelism: 1,
            pbkdf2_iterations: 210_000,
            crypt_rounds: 5_000,
        }
    }
}

impl Cost {
    /// Checks the parameters against what the algorithms and [`verify`] accept; the message
    /// names the parameter.
    pub fn check(&self) -> Result<(), String> {
        let range = |name: &str, v: u32, min: u32, max: u32| {
            if v < min || v > max {
                Err(format!("{name} must be between {min} and {max}, found {v}"))
            } else {
                Ok(())
            }
        };
        range(
            "argon2_parallelism",
            self.argon2_parallelism,
            1,
            MAX_ARGON2_PARALLELISM,
        )?;
        range(
            "argon2_memory_kib",
            self.argon2_memory_kib,
            8 * self.argon2_parallelism,
            MAX_ARGON2_MEMORY_KIB,
        )?;
        range(
            "argon2_iterations",
            self.argon2_iterations,
            1,
            MAX_ARGON2_ITERATIONS,
        )?;
        range(
            "pbkdf2_iterations",
            self.pbkdf2_iterations,
            1000,
            MAX_PBKDF2_ITERATIONS,
        )?;
        range("crypt_rounds", self.crypt_rounds, 1000, MAX_CRYPT_ROUNDS)?;
        Ok(())
    }
}

/// The scheme and cost for new passwords: what the server's `password_hash` settings say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    pub scheme: Scheme,
    pub cost: Cost,
}

impl Policy {
    pub fn hash(&self, password: &[u8]) -> Vec<u8> {
        hash_with(self.scheme, &self.cost, password)
    }
}

/// A password storage scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Scheme {
    /// `{ARGON2}`: Argon2id (new values); argon2i and argon2d values verify too.
    #[default]
    Argon2,
    /// `{PBKDF2-SHA512}`: PBKDF2-HMAC-SHA512.
    Pbkdf2Sha512,
    /// `{CRYPT}`: SHA-512-crypt for new values; `$5$` (SHA-256-crypt) verifies too.
    Crypt,
    /// `{SSHA}`: salted SHA-1.
    Ssha,
    /// `{SSHA256}`: salted SHA-256.
    Ssha256,
    /// `{SSHA384}`: salted SHA-384.
    Ssha384,
    /// `{SSHA512}`: salted SHA-512.
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
    Digest {
        digest: DigestKind,
        salted: bool,
    },
    /// Stored as given.
    Cleartext,
    Argon2,
    Pbkdf2Sha512,
    Crypt,
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
    SchemeDef {
        scheme: Scheme::Argon2,
        name: "ARGON2",
        algorithm: Algorithm::Argon2,
    },
    SchemeDef {
        scheme: Scheme::Pbkdf2Sha512,
        name: "PBKDF2-SHA512",
        algorithm: Algorithm::Pbkdf2Sha512,
    },
    SchemeDef {
        scheme: Scheme::Crypt,
        name: "CRYPT",
        algorithm: Algorithm::Crypt,
    },
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
#[error("unknown password scheme {0:?} (known: ARGON2, PBKDF2-SHA512, CRYPT, SSHA, SSHA256, SSHA384, SSHA512, SHA, SHA256, SHA384, SHA512, CLEARTEXT)")]
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

/// Produces the value to store in `userPassword` for `password`, with the
/// default cost.
pub fn hash(scheme: Scheme, password: &[u8]) -> Vec<u8> {
    hash_with(scheme, &Cost::default(), password)
}

/// Produces the value to store in `userPassword` for `password`.
///
/// Salted schemes draw a fresh [`SALT_LEN`]-byte salt from the operating
/// system's random number generator. A cost outside what [`Cost::check`]
/// accepts is clamped into range.
pub fn hash_with(scheme: Scheme, cost: &Cost, password: &[u8]) -> Vec<u8> {
    let def = scheme.def();
    let mut salt = [0u8; SALT_LEN];
    rand::rngs::OsRng.fill_bytes(&mut salt);
    match def.algorithm {
        Algorithm::Cleartext => password.to_vec(),
        Algorithm::Argon2 => {
            let p = cost.argon2_parallelism.clamp(1, MAX_ARGON2_PARALLELISM);
            let params = argon2::Params::new(
                cost.argon2_memory_kib.clamp(8 * p, MAX_ARGON2_MEMORY_KIB),
                cost.argon2_iterations.clamp(1, MAX_ARGON2_ITERATIONS),
                p,
                Some(32),
            )
            .unwrap_or_default();
            let a = argon2::Argon2::new(
                argon2::Algorithm::Argon2id,
                argon2::Version::V0x13,
                params.clone(),
            );
            let mut out = [0u8; 32];
            // Parameters are in range and the salt is 16 bytes, so this does not fail; on the
            // impossible error the output stays zero and the value never verifies.
            let _ = argon2_into(&a, password, &salt, &mut out);
            format!(
                "{{ARGON2}}$argon2id$v=19$m={},t={},p={}${}${}",
                params.m_cost(),
                params.t_cost(),
                params.p_cost(),
                B64_NOPAD.encode(salt),
                B64_NOPAD.encode(out)
            )
            .into_bytes()
        }
        Algorithm::Pbkdf2Sha512 => {
            let rounds = cost.pbkdf2_iterations.clamp(1000, MAX_PBKDF2_ITERATIONS);
            let mut out = [0u8; 64];
            pbkdf2::pbkdf2_hmac::<Sha512>(password, &salt, rounds, &mut out);
            format!("{{PBKDF2-SHA512}}{rounds}${}${}", ab64(&salt), ab64(&out)).into_bytes()
        }
        Algorithm::Crypt => {
            let rounds = cost.crypt_rounds.clamp(1000, MAX_CRYPT_ROUNDS);
            // crypt salts are at most 16 characters of [./0-9A-Za-z].
            let salt: String = salt
                .iter()
                .map(|b| char::from(CRYPT_ALPHABET[usize::from(b & 63)]))
                .collect();
            let Ok(params) = sha_crypt::Sha512Params::new(rounds as usize) else {
                return b"{CRYPT}!".to_vec();
            };
            let h =
                sha_crypt::sha512_crypt_b64(password, salt.as_bytes(), &params).unwrap_or_default();
            if rounds == 5000 {
                format!("{{CRYPT}}$6${salt}${h}").into_bytes()
            } else {
                format!("{{CRYPT}}$6$rounds={rounds}${salt}${h}").into_bytes()
            }
        }
        Algorithm::Digest { digest, salted } => {
            let salt: &[u8] = if salted { &salt } else { &[] };
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
        Algorithm::Argon2 => verify_argon2(encoded, password).unwrap_or(false),
        Algorithm::Pbkdf2Sha512 => verify_pbkdf2(encoded, password).unwrap_or(false),
        Algorithm::Crypt => verify_crypt(encoded, password).unwrap_or(false),
    }
}

/// Whether verifying against `stored` is cheap (a few microseconds at most: one SHA-family
/// digest, a comparison, or an immediate "no" for a value no scheme reads), so that it may run
/// inline on a connection's task. `false` for the deliberately slow schemes (Argon2, PBKDF2,
/// SHA-crypt), whose verification belongs on a blocking pool.
pub fn is_cheap(stored: &[u8]) -> bool {
    let Some((name, _)) = split_prefix(stored) else {
        return true;
    };
    match lookup(name) {
        None => true,
        Some(def) => matches!(
            def.algorithm,
            Algorithm::Digest { .. } | Algorithm::Cleartext
        ),
    }
}

/// Base64 without padding, as PHC strings use it.
const B64_NOPAD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The characters of crypt's salts and hashes.
const CRYPT_ALPHABET: &[u8; 64] =
    b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Passlib's "adapted base64": standard alphabet with `.` for `+`, no padding (what OpenLDAP's
/// pw-pbkdf2 and 389-ds write).
fn ab64(raw: &[u8]) -> String {
    B64_NOPAD.encode(raw).replace('+', ".")
}

fn ab64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let s: Vec<u8> = s
        .iter()
        .map(|&b| if b == b'.' { b'+' } else { b })
        .collect();
    B64_NOPAD.decode(s).ok()
}

/// `$argon2{id,i,d}$v=19$m=M,t=T,p=P$salt$hash` (also without the `v=` part, version 0x10).
fn verify_argon2(encoded: &[u8], password: &[u8]) -> Option<bool> {
    let s = std::str::from_utf8(encoded).ok()?;
    let mut parts = s.split('$');
    if !parts.next()?.is_empty() {
        return None;
    }
    let algorithm = match parts.next()? {
        "argon2id" => argon2::Algorithm::Argon2id,
        "argon2i" => argon2::Algorithm::Argon2i,
        "argon2d" => argon2::Algorithm::Argon2d,
        _ => return None,
    };
    let mut field = parts.next()?;
    let version = match field.strip_prefix("v=") {
        Some(v) => {
            field = parts.next()?;
            match v {
                "19" => argon2::Version::V0x13,
                "16" => argon2::Version::V0x10,
                _ => return None,
            }
        }
        None => argon2::Version::V0x10,
    };
    let (mut m, mut t, mut p) = (None, None, None);
    for kv in field.split(',') {
        let (k, v) = kv.split_once('=')?;
        let v: u32 = v.parse().ok()?;
        match k {
            "m" => m = Some(v),
            "t" => t = Some(v),
            "p" => p = Some(v),
            _ => return None,
        }
    }
    let (m, t, p) = (m?, t?, p?);
    if m > MAX_ARGON2_MEMORY_KIB || t > MAX_ARGON2_ITERATIONS || p > MAX_ARGON2_PARALLELISM {
        return None;
    }
    let salt = B64_NOPAD.decode(parts.next()?).ok()?;
    let expected = B64_NOPAD.decode(parts.next()?).ok()?;
    if parts.next().is_some() || !(4..=1024).contains(&expected.len()) {
        return None;
    }
    let params = argon2::Params::new(m, t, p, Some(expected.len())).ok()?;
    let mut actual = vec![0u8; expected.len()];
    argon2_into(
        &argon2::Argon2::new(algorithm, version, params),
        password,
        &salt,
        &mut actual,
    )
    .ok()?;
    Some(bool::from(actual.ct_eq(&expected)))
}

/// `rounds$salt$hash` in adapted base64.
fn verify_pbkdf2(encoded: &[u8], password: &[u8]) -> Option<bool> {
    let s = std::str::from_utf8(encoded).ok()?;
    let mut parts = s.split('$');
    let rounds: u32 = parts.next()?.parse().ok()?;
    if rounds == 0 || rounds > MAX_PBKDF2_ITERATIONS {
        return None;
    }
    let salt = ab64_decode(parts.next()?.as_bytes())?;
    let expected = ab64_decode(parts.next()?.as_bytes())?;
    if parts.next().is_some() || !(16..=128).contains(&expected.len()) {
        return None;
    }
    let mut actual = vec![0u8; expected.len()];
    pbkdf2::pbkdf2_hmac::<Sha512>(password, &salt, rounds, &mut actual);
    Some(bool::from(actual.ct_eq(&expected)))
}

/// `$6$[rounds=N$]salt$hash` or `$5$...` (Drepper's SHA-crypt).
fn verify_crypt(encoded: &[u8], password: &[u8]) -> Option<bool> {
    let s = std::str::from_utf8(encoded).ok()?;
    let mut parts = s.split('$');
    if !parts.next()?.is_empty() {
        return None;
    }
    let id = parts.next()?;
    let mut salt = parts.next()?;
    let mut rounds = 5000u32;
    if let Some(r) = salt.strip_prefix("rounds=") {
        rounds = r.parse().ok()?;
        salt = parts.next()?;
    }
    let expected = parts.next()?;
    if parts.next().is_some() || rounds > MAX_CRYPT_ROUNDS {
        return None;
    }
    // As crypt(3): fewer rounds than the minimum are raised to it, salts cut at 16.
    let rounds = rounds.max(1000) as usize;
    let salt = &salt.as_bytes()[..salt.len().min(16)];
    let actual = match id {
        "6" => {
            sha_crypt::sha512_crypt_b64(password, salt, &sha_crypt::Sha512Params::new(rounds).ok()?)
                .ok()?
        }
        "5" => {
            sha_crypt::sha256_crypt_b64(password, salt, &sha_crypt::Sha256Params::new(rounds).ok()?)
                .ok()?
        }
        _ => return None,
    };
    Some(bool::from(actual.as_bytes().ct_eq(expected.as_bytes())))
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

/// Working memory for Argon2, shared by every thread that hashes or verifies.
///
/// Each Argon2 computation needs its memory cost in RAM (19 MiB by default). Allocating that
/// afresh every time leaves the allocator holding freed blocks per thread arena: importing
/// 20,000 clear-text passwords on two threads grew the process past 24 GiB. So at most
/// `available_parallelism` computations run at once (more cannot run faster anyway), each on a
/// buffer taken from this pool and given back after, and memory stays bounded by
/// cores × the largest cost in use. Buffers larger than `KEEP_BLOCKS` (a stored hash with an
/// unusually high memory cost) are freed after use rather than kept.
struct MemoryPool {
    state: std::sync::Mutex<PoolState>,
    freed: std::sync::Condvar,
}

struct PoolState {
    idle: Vec<Vec<argon2::Block>>,
    /// Buffers handed out or idle.
    live: usize,
}

/// Largest buffer kept for reuse: 64 MiB of 1 KiB blocks.
const KEEP_BLOCKS: usize = 64 * 1024;

static POOL: MemoryPool = MemoryPool {
    state: std::sync::Mutex::new(PoolState {
        idle: Vec::new(),
        live: 0,
    }),
    freed: std::sync::Condvar::new(),
};

/// How many Argon2 computations run at once (one per core): callers that give slow hashes
/// threads of their own size them with this, so no thread waits here for a turn.
pub fn concurrent_hashes() -> usize {
    pool_limit()
}

fn pool_limit() -> usize {
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

impl MemoryPool {
    fn take(&self) -> Vec<argon2::Block> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(b) = st.idle.pop() {
                return b;
            }
            if st.live < pool_limit() {
                st.live += 1;
                return Vec::new();
            }
            st = self.freed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give(&self, mut b: Vec<argon2::Block>) {
        if b.len() > KEEP_BLOCKS {
            b = Vec::new();
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.idle.push(b);
        drop(st);
        self.freed.notify_one();
    }
}

/// `Argon2::hash_password_into` on pooled working memory (see `MemoryPool`).
fn argon2_into(
    a: &argon2::Argon2<'_>,
    password: &[u8],
    salt: &[u8],
    out: &mut [u8],
) -> Result<(), argon2::Error> {
    let mut mem = POOL.take();
    let need = a.params().block_count();
    mem.resize(need, argon2::Block::default());
    let r = a.hash_password_into_with_memory(password, salt, out, &mut mem[..need]);
    POOL.give(mem);
    r
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

    #[test]
    fn cheap_schemes_are_the_digests_and_cleartext() {
        for s in Scheme::all() {
            let v = hash_with(
                s,
                &Cost {
                    argon2_memory_kib: 8,
                    argon2_iterations: 1,
                    pbkdf2_iterations: 1000,
                    crypt_rounds: 1000,
                    ..Cost::default()
                },
                b"pw",
            );
            let slow = matches!(s, Scheme::Argon2 | Scheme::Pbkdf2Sha512 | Scheme::Crypt);
            assert_eq!(is_cheap(&v), !slow, "{s:?}");
        }
        assert!(
            is_cheap(b"{MD5}xyz"),
            "unknown schemes never match: nothing to compute"
        );
        assert!(is_cheap(b"plain"));
    }
}
