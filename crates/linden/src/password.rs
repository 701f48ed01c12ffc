//! The administrator password: given (hashed in memory), remembered, or generated.
//!
//! Cleartext is never written anywhere. A generated password is printed once on stdout and only
//! its hash is kept, in `DATA/admin-password.hash` (mode 0600), so the next start without a
//! password uses the same one.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// File in the data directory holding the hash of a generated administrator password.
pub const HASH_FILE: &str = "admin-password.hash";

/// Length of generated passwords: 20 characters of 6 bits each, 120 bits.
const GENERATED_LEN: usize = 20;

/// Where the administrator password came from.
#[derive(Debug, PartialEq, Eq)]
pub enum Source {
    /// Given by flag, environment or file.
    Given,
    /// Read back from `DATA/admin-password.hash`.
    Stored(PathBuf),
    /// Generated now; the cleartext is returned once so it can be shown to the operator.
    Generated { password: String, file: PathBuf },
}

/// Returns the stored (hashed) form of the administrator password and where it came from.
pub fn resolve(
    given: Option<&str>,
    data_dir: &Path,
    policy: &pwhash::Policy,
) -> anyhow::Result<(Vec<u8>, Source)> {
    if let Some(pw) = given {
        // A `{SCHEME}` hash (slapd's rootpw, as `linden migrate` carries it) is kept as it
        // is, as slapd keeps its rootpw.
        if pwhash::is_hashed(pw.as_bytes()) {
            return Ok((pw.as_bytes().to_vec(), Source::Given));
        }
        return Ok((policy.hash(pw.as_bytes()), Source::Given));
    }
    let file = data_dir.join(HASH_FILE);
    match std::fs::read(&file) {
        Ok(bytes) => {
            let hash = bytes.trim_ascii().to_vec();
            if hash.is_empty() || !pwhash::is_hashed(&hash) {
                bail!(
                    "{}: not a password hash; delete it to generate a new administrator password",
                    file.display()
                );
            }
            return Ok((hash, Source::Stored(file)));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    }
    let password = pwhash::generate_password(GENERATED_LEN);
    let hash = policy.hash(password.as_bytes());
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
    write_private(&file, &hash).with_context(|| format!("cannot write {}", file.display()))?;
    Ok((hash, Source::Generated { password, file }))
}

/// Writes `contents` to `path` readable by the owner only, atomically (temporary file + rename),
/// so a crash never leaves a half-written hash that would lock the administrator out.
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("hash.tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let result = (|| {
        let mut f = opts.open(&tmp)?;
        f.write_all(contents)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_password_is_hashed_and_nothing_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let (hash, source) =
            resolve(Some("secret"), &data, &pwhash::Policy::default()).expect("resolve");
        assert_eq!(source, Source::Given);
        assert!(pwhash::is_hashed(&hash));
        assert!(pwhash::verify(&hash, b"secret"));
        assert!(!data.exists());
    }

    /// slapd's rootpw, as `linden migrate` writes it: the hash is the stored value.
    #[test]
    fn given_hash_is_kept_as_it_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let given = "{SSHA}mxAcnA9cX4Ct8ErGbRtCJnrSan8GGczn";
        let (hash, source) =
            resolve(Some(given), dir.path(), &pwhash::Policy::default()).expect("resolve");
        assert_eq!(source, Source::Given);
        assert_eq!(hash, given.as_bytes());
        assert!(pwhash::verify(&hash, b"secret"));
    }

    #[test]
    fn generated_once_then_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let (hash, source) = resolve(None, &data, &pwhash::Policy::default()).expect("generate");
        let Source::Generated { password, file } = source else {
            panic!("expected a generated password")
        };
        assert_eq!(password.len(), GENERATED_LEN);
        assert!(pwhash::verify(&hash, password.as_bytes()));
        let on_disk = std::fs::read_to_string(&file).expect("hash file");
        assert!(!on_disk.contains(&password));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (again, source) = resolve(None, &data, &pwhash::Policy::default()).expect("reuse");
        assert_eq!(source, Source::Stored(file));
        assert!(pwhash::verify(&again, password.as_bytes()));
    }

    #[test]
    fn garbage_hash_file_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(HASH_FILE), "").expect("write");
        let e = resolve(None, dir.path(), &pwhash::Policy::default()).expect_err("empty file");
        assert!(e.to_string().contains(HASH_FILE), "{e}");
    }
}
