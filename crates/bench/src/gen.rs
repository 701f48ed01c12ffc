//! `linden gen`: the reference data set of design.md as LDIF.
//!
//! Output: the suffix entry, `ou=people,<suffix>`, then `--count` inetOrgPerson entries
//! `uid=user.<i>,ou=people,<suffix>` (i from 0). Names, phone numbers and SSHA salts come from one
//! `StdRng` seeded with `--seed`, so the same arguments give the same bytes. Each entry is built
//! in one reused buffer and written through a `BufWriter`; integers are formatted by hand.

use crate::{push_u64, Error};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha1::{Digest, Sha1};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// How `userPassword` is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PasswordScheme {
    /// The password as given; `linden import` hashes it with the server's scheme (Argon2id by
    /// default, about 15 ms of CPU per entry, spread over all cores: minutes for 100,000
    /// entries on a small machine). What `--strong` asks for.
    Cleartext,
    /// `{SSHA}` (salted SHA-1) with an 8-byte salt drawn from the seeded generator: fast to
    /// write, import and verify, as in slapd's reference data. The default.
    Ssha,
}

/// Arguments of `linden gen`.
#[derive(Debug, Clone, clap::Args)]
pub struct GenArgs {
    /// Number of `uid=user.<i>` entries.
    #[arg(long)]
    pub count: u64,
    /// Seed of the random generator; equal seeds give equal output.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// DN of the naming context (first RDN must be dc=, o= or ou=).
    #[arg(long, default_value = "dc=example,dc=com")]
    pub suffix: String,
    /// File to write; standard output when absent.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// The one password of every entry.
    #[arg(long, default_value = "password")]
    pub password: String,
    /// How userPassword is written. Default `ssha`: fast reference data ({SSHA}, what slapd
    /// stores by default), imported at full speed. `cleartext` (or `--strong`) leaves the
    /// hashing to `linden import`, which uses the server's strong default (Argon2id).
    #[arg(long, value_enum, default_value_t = PasswordScheme::Ssha)]
    pub password_scheme: PasswordScheme,
    /// Clear-text passwords, for `linden import` to store with the server's strong default
    /// (Argon2id, about 15 ms of CPU per entry on import and per first login); the same as
    /// `--password-scheme cleartext`.
    #[arg(long, conflicts_with = "password_scheme")]
    pub strong: bool,
}

impl GenArgs {
    /// The scheme the output uses, `--strong` included.
    pub fn scheme(&self) -> PasswordScheme {
        if self.strong {
            PasswordScheme::Cleartext
        } else {
            self.password_scheme
        }
    }

    /// One line for standard error saying how the passwords are written and how to get the
    /// other kind.
    pub fn note(&self) -> String {
        match self.scheme() {
            PasswordScheme::Ssha => format!(
                "linden gen: userPassword is {{SSHA}} of {:?} (fast reference data, slapd's default scheme); --strong writes clear text for linden import to hash with Argon2id",
                self.password
            ),
            PasswordScheme::Cleartext => format!(
                "linden gen: userPassword is the clear text {:?}; linden import hashes it with the server's scheme (Argon2id by default, about 15 ms of CPU per entry on every core)",
                self.password
            ),
        }
    }
}

/// Appends `{SSHA}` of `password` with `salt` to `out` (`scratch`: a buffer to reuse).
pub(crate) fn ssha(
    password: &[u8],
    salt: [u8; 8],
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    let mut h = Sha1::new();
    h.update(password);
    h.update(salt);
    scratch.clear();
    scratch.extend_from_slice(&h.finalize());
    scratch.extend_from_slice(&salt);
    out.extend_from_slice(b"{SSHA}");
    // 28 bytes of digest and salt are 40 of base64.
    let at = out.len();
    out.resize(at + 40, 0);
    let n = B64
        .encode_slice(&scratch[..], &mut out[at..])
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    out.truncate(at + n);
    Ok(())
}

/// Given names of the generated people (`linden bench` fills `{first}` from them).
pub(crate) const FIRST_NAMES: &[&str] = &[
    "Aaron", "Abigail", "Adam", "Alice", "Amir", "Ana", "Andrew", "Anna", "Ben", "Bianca",
    "Carlos", "Chen", "Chloe", "Daniel", "Diana", "Elena", "Emma", "Ethan", "Fatima", "Felix",
    "Grace", "Hana", "Hugo", "Ines", "Isaac", "Ivan", "Jack", "Julia", "Kai", "Karin", "Leo",
    "Lena", "Lucas", "Maria", "Mei", "Mohamed", "Nadia", "Noah", "Olga", "Omar", "Paul", "Priya",
    "Quentin", "Rosa", "Sam", "Sara", "Tariq", "Tom", "Uma", "Victor", "Wei", "Yara", "Yusuf",
    "Zoe",
];

/// Surnames of the generated people (`{last}` in `linden bench`).
pub(crate) const LAST_NAMES: &[&str] = &[
    "Adams", "Ahmed", "Baker", "Becker", "Brown", "Chen", "Clark", "Costa", "Dubois", "Evans",
    "Fischer", "Garcia", "Gonzalez", "Green", "Hall", "Hansen", "Ivanov", "Jansen", "Johnson",
    "Kim", "Kowalski", "Lee", "Lopez", "Martin", "Meyer", "Moreau", "Muller", "Nakamura", "Nguyen",
    "Novak", "Olsen", "Patel", "Perez", "Rossi", "Santos", "Schmidt", "Silva", "Singh", "Smith",
    "Suzuki", "Tanaka", "Taylor", "Thomas", "Walker", "Wang", "Weber", "Wilson", "Wong", "Young",
    "Zhang",
];

/// Writes the data set described by `args`.
pub fn run(args: &GenArgs) -> Result<(), Error> {
    match &args.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
            write_ldif(args, BufWriter::with_capacity(1 << 20, file))
                .map_err(|e| Error::io(format!("writing {}", path.display()), e))
        }
        None => {
            let stdout = std::io::stdout();
            write_ldif(args, BufWriter::with_capacity(1 << 20, stdout.lock()))
                .map_err(|e| Error::io("writing standard output", e))
        }
    }
    .or_else(|e| match e {
        // `linden gen | head` is normal use, not a failure.
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        e => Err(e),
    })?;
    Ok(())
}

/// The suffix split into what the top entry needs.
struct Suffix<'a> {
    attr: &'a str,
    value: &'a str,
    /// `example.com` for `dc=example,dc=com`: the mail domain.
    domain: String,
}

fn parse_suffix(suffix: &str) -> Result<Suffix<'_>, Error> {
    let first = suffix.split(',').next().unwrap_or_default();
    let (attr, value) = first
        .split_once('=')
        .ok_or_else(|| Error::Args(format!("suffix {suffix:?} is not a DN")))?;
    let attr = attr.trim();
    if !["dc", "o", "ou"]
        .iter()
        .any(|a| attr.eq_ignore_ascii_case(a))
    {
        return Err(Error::Args(format!(
            "suffix {suffix:?}: the first RDN must be dc=, o= or ou="
        )));
    }
    let dcs: Vec<&str> = suffix
        .split(',')
        .filter_map(|rdn| rdn.split_once('='))
        .filter(|(a, _)| a.trim().eq_ignore_ascii_case("dc"))
        .map(|(_, v)| v.trim())
        .collect();
    let domain = if dcs.is_empty() {
        "example.com".to_string()
    } else {
        dcs.join(".")
    };
    Ok(Suffix {
        attr,
        value: value.trim(),
        domain,
    })
}

/// RFC 2849 SAFE-STRING: such values are written as `attr: value`, others base64-encoded.
fn is_safe(v: &[u8]) -> bool {
    match v.first() {
        None => true,
        Some(b' ' | b':' | b'<') => false,
        Some(_) => {
            v.iter()
                .all(|&b| b != 0 && b != b'\n' && b != b'\r' && b < 0x80)
                && v.last() != Some(&b' ')
        }
    }
}

fn attr(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    if is_safe(value) {
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
    } else {
        out.extend_from_slice(b":: ");
        out.extend_from_slice(B64.encode(value).as_bytes());
    }
    out.push(b'\n');
}

fn write_ldif(args: &GenArgs, mut w: impl Write) -> std::io::Result<()> {
    let sfx = parse_suffix(&args.suffix)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut buf: Vec<u8> = Vec::with_capacity(1024);

    // The suffix entry.
    attr(&mut buf, "dn", args.suffix.as_bytes());
    attr(&mut buf, "objectClass", b"top");
    if sfx.attr.eq_ignore_ascii_case("dc") {
        attr(&mut buf, "objectClass", b"dcObject");
        attr(&mut buf, "objectClass", b"organization");
        attr(&mut buf, "dc", sfx.value.as_bytes());
        attr(&mut buf, "o", sfx.value.as_bytes());
    } else if sfx.attr.eq_ignore_ascii_case("o") {
        attr(&mut buf, "objectClass", b"organization");
        attr(&mut buf, "o", sfx.value.as_bytes());
    } else {
        attr(&mut buf, "objectClass", b"organizationalUnit");
        attr(&mut buf, "ou", sfx.value.as_bytes());
    }
    buf.push(b'\n');
    let people = format!("ou=people,{}", args.suffix);
    attr(&mut buf, "dn", people.as_bytes());
    attr(&mut buf, "objectClass", b"top");
    attr(&mut buf, "objectClass", b"organizationalUnit");
    attr(&mut buf, "ou", b"people");
    buf.push(b'\n');
    w.write_all(&buf)?;

    // Per-entry pieces that never change, computed once.
    let dn_tail = format!(",{people}");
    let mail_tail = format!("@{}", sfx.domain);
    let mut password = Vec::with_capacity(64);
    let mut scratch = Vec::with_capacity(256);
    for i in 0..args.count {
        buf.clear();
        let first = FIRST_NAMES[rng.gen_range(0..FIRST_NAMES.len())];
        let last = LAST_NAMES[rng.gen_range(0..LAST_NAMES.len())];

        scratch.clear();
        scratch.extend_from_slice(b"uid=user.");
        push_u64(&mut scratch, i);
        scratch.extend_from_slice(dn_tail.as_bytes());
        attr(&mut buf, "dn", &scratch);
        buf.extend_from_slice(
            b"objectClass: top\nobjectClass: person\nobjectClass: organizationalPerson\nobjectClass: inetOrgPerson\nuid: user.",
        );
        push_u64(&mut buf, i);
        buf.extend_from_slice(b"\ncn: ");
        buf.extend_from_slice(first.as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(last.as_bytes());
        buf.extend_from_slice(b"\nsn: ");
        buf.extend_from_slice(last.as_bytes());
        buf.extend_from_slice(b"\ngivenName: ");
        buf.extend_from_slice(first.as_bytes());
        buf.extend_from_slice(b"\nmail: user.");
        push_u64(&mut buf, i);
        buf.extend_from_slice(mail_tail.as_bytes());
        // +1 555 NNN NNNN: fixed width, so pad by adding a power of ten and dropping the 1.
        buf.extend_from_slice(b"\ntelephoneNumber: +1 555 ");
        let phone: u64 = rng.gen_range(0..10_000_000);
        let start = buf.len();
        push_u64(&mut buf, 10_000_000 + phone);
        buf.remove(start);
        buf.insert(start + 3, b' ');
        buf.extend_from_slice(b"\nemployeeNumber: ");
        push_u64(&mut buf, i);
        buf.push(b'\n');

        password.clear();
        match args.scheme() {
            PasswordScheme::Cleartext => password.extend_from_slice(args.password.as_bytes()),
            PasswordScheme::Ssha => ssha(
                args.password.as_bytes(),
                rng.gen(),
                &mut scratch,
                &mut password,
            )?,
        }
        attr(&mut buf, "userPassword", &password);
        buf.push(b'\n');
        w.write_all(&buf)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_strings() {
        assert!(is_safe(b"user.1"));
        assert!(!is_safe(b" lead"));
        assert!(!is_safe(b":colon"));
        assert!(!is_safe("é".as_bytes()));
        assert!(!is_safe(b"trail "));
    }

    #[test]
    fn suffix_forms() {
        let s = parse_suffix("dc=example,dc=com").ok();
        assert_eq!(
            s.map(|s| (s.attr, s.value, s.domain)),
            Some(("dc", "example", "example.com".into()))
        );
        assert!(parse_suffix("cn=x").is_err());
        assert!(parse_suffix("nodn").is_err());
    }
}
