//! `linden import`, `export` and `backup` as a user runs them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use common::linden;

use std::path::Path;
use std::process::Command;

/// `linden import [FLAGS] --data DATA SRC`: exit status, standard output and error.
fn import(data: &Path, src: &Path, flags: &[&str]) -> (i32, String, String) {
    let (data, src) = (data.to_str().expect("path"), src.to_str().expect("path"));
    let mut args = vec!["import"];
    args.extend_from_slice(flags);
    args.extend(["--data", data, src]);
    linden(&args)
}

const LDIF: &str = "dn: dc=example,dc=com
objectClass: dcObject
objectClass: organization
dc: example
o: Example

dn: ou=people,dc=example,dc=com
objectClass: organizationalUnit
ou: people

dn: uid=ann,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: ann
cn: Ann Archer
sn: Archer
userPassword: secret
";

const BAD: &str = "
dn: uid=bob,ou=people,dc=example,dc=com
objectClass: inetOrgPerson
uid: bob
cn: Bob
";

#[test]
fn import_export_import_gives_identical_data() {
    let tmp = tempfile::tempdir().expect("tmp");
    let src = tmp.path().join("in.ldif");
    std::fs::write(&src, LDIF).expect("write");
    let d1 = tmp.path().join("d1");
    let (rc, out, err) = import(&d1, &src, &[]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("imported 3 entries"), "{out}");
    let e1 = tmp.path().join("e1.ldif");
    let (rc, _, err) = linden(&[
        "export",
        "--data",
        d1.to_str().expect("p"),
        e1.to_str().expect("p"),
    ]);
    assert_eq!(rc, 0, "{err}");
    let exported = std::fs::read_to_string(&e1).expect("read");
    assert!(exported.contains("dn: uid=ann,ou=people,dc=example,dc=com"));
    assert!(
        exported.contains("entryUUID: "),
        "operational attributes are exported"
    );
    assert!(
        exported.contains("entryCSN: ") && exported.contains("#000#000000"),
        "an import stamps entryCSN as every change does"
    );
    assert!(
        exported.contains("userPassword: {ARGON2}$argon2id$"),
        "cleartext passwords are hashed on import"
    );
    let d2 = tmp.path().join("d2");
    let (rc, _, err) = import(&d2, &e1, &[]);
    assert_eq!(rc, 0, "{err}");
    let e2 = tmp.path().join("e2.ldif");
    linden(&[
        "export",
        "--data",
        d2.to_str().expect("p"),
        e2.to_str().expect("p"),
    ]);
    assert_eq!(exported, std::fs::read_to_string(&e2).expect("read"));
    // Importing again into a directory that holds data is refused.
    let (rc, _, err) = import(&d1, &src, &[]);
    assert_ne!(rc, 0);
    assert!(err.contains("empty data directory"), "{err}");
    // A backup of it restores the same entries.
    let b = tmp.path().join("backup");
    let (rc, out, err) = linden(&[
        "backup",
        "--data",
        d1.to_str().expect("p"),
        b.to_str().expect("p"),
    ]);
    assert_eq!(rc, 0, "{out}{err}");
    let e3 = tmp.path().join("e3.ldif");
    linden(&[
        "export",
        "--data",
        b.to_str().expect("p"),
        e3.to_str().expect("p"),
    ]);
    assert_eq!(exported, std::fs::read_to_string(&e3).expect("read"));
}

/// An entry is stored with its RDN in slapd's pretty form (`uid` for `UID`, no spaces) under its
/// parent's DN as stored, whatever spelling of the parent the LDIF uses (as an add over LDAP
/// does).
#[test]
fn import_stores_the_parents_spelling() {
    let tmp = tempfile::tempdir().expect("tmp");
    let src = tmp.path().join("in.ldif");
    let ldif = LDIF.replace(
        "ou=people,dc=example,dc=com\nobjectClass: org",
        "ou=People,dc=example,dc=com\nobjectClass: org",
    ) + "\ndn: UID=x , OU=PEOPLE,DC=Example,dc=com\nobjectClass: account\nuid: x\n";
    std::fs::write(&src, ldif).expect("write");
    let d = tmp.path().join("d");
    let (rc, out, err) = import(&d, &src, &[]);
    assert_eq!(rc, 0, "{out}{err}");
    let (rc, out, err) = linden(&["export", "--data", d.to_str().expect("p")]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("dn: uid=ann,ou=People,dc=example,dc=com\n"),
        "{out}"
    );
    assert!(
        out.contains("dn: uid=x,ou=People,dc=example,dc=com\n"),
        "{out}"
    );
}

#[test]
fn bad_record_names_its_line() {
    let tmp = tempfile::tempdir().expect("tmp");
    let src = tmp.path().join("in.ldif");
    std::fs::write(&src, format!("{LDIF}{BAD}")).expect("write");
    let d = tmp.path().join("d");
    let (rc, _, err) = import(&d, &src, &[]);
    assert_eq!(rc, 1, "{err}");
    // bob's record starts on line 18 and lacks sn (inetOrgPerson requires it).
    assert!(err.contains("in.ldif:18:") && err.contains("sn"), "{err}");
    assert!(
        !d.join("snap-00000000000000000001.lns").exists(),
        "nothing is written"
    );
    let (rc, out, err) = import(&d, &src, &["--continue-on-error"]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("in.ldif:18: skipped"), "{err}");
    assert!(
        out.contains("imported 3 entries") && out.contains("1 records skipped"),
        "{out}"
    );
}

/// `--config` gives an import the settings of the server that will serve the data: a
/// clear-text password is stored with the file's scheme, entries are stamped with the file's
/// administrator, the file's data directory is used; a flag still beats the file.
#[test]
fn import_takes_settings_from_the_config_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    let src = tmp.path().join("in.ldif");
    std::fs::write(&src, LDIF).expect("write");
    let from_file = tmp.path().join("from-file");
    let config = tmp.path().join("linden.toml");
    std::fs::write(
        &config,
        format!(
            "data = {:?}\nsuffix = \"dc=example,dc=com\"\nadmin_dn = \"cn=manager,dc=example,dc=com\"\npassword_hash = \"SSHA512\"\n",
            from_file.to_str().expect("p")
        ),
    )
    .expect("write");
    let cfg = config.to_str().expect("p");
    let (rc, out, err) = linden(&["import", "--config", cfg, src.to_str().expect("p")]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("imported 3 entries"), "{out}");
    let (rc, exported, err) = linden(&["export", "--data", from_file.to_str().expect("p")]);
    assert_eq!(rc, 0, "{err}");
    // Long values are folded onto continuation lines (RFC 2849).
    let unfolded = exported.replace("\n ", "");
    let stored = unfolded
        .lines()
        .find_map(|l| l.strip_prefix("userPassword: "))
        .expect("userPassword exported");
    assert!(stored.starts_with("{SSHA512}"), "{stored}");
    assert!(pwhash::verify(stored.as_bytes(), b"secret"), "{stored}");
    assert!(
        exported.contains("creatorsName: cn=manager,dc=example,dc=com\n"),
        "{exported}"
    );
    // --data beats the file's `data` (which now holds a directory an import refuses).
    let flag = tmp.path().join("from-flag");
    let (rc, out, err) = linden(&[
        "import",
        "--config",
        cfg,
        "--data",
        flag.to_str().expect("p"),
        src.to_str().expect("p"),
    ]);
    assert_eq!(rc, 0, "{out}{err}");
    let (_, exported, _) = linden(&["export", "--data", flag.to_str().expect("p")]);
    assert!(exported.contains("userPassword: {SSHA512}"), "{exported}");
    // A bad file stops the import as it stops `serve`: one line naming the key, status 2.
    std::fs::write(&config, "password_hash = \"md5\"\n").expect("write");
    let (rc, _, err) = linden(&[
        "import",
        "--config",
        cfg,
        "--data",
        tmp.path().join("never").to_str().expect("p"),
        src.to_str().expect("p"),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("linden.toml:1: key 'password_hash': unknown password scheme"),
        "{err}"
    );
    // So does a setting the server itself refuses.
    std::fs::write(&config, "indexes = [\"noSuchAttribute\"]\n").expect("write");
    let (rc, _, err) = linden(&[
        "import",
        "--config",
        cfg,
        "--data",
        tmp.path().join("never").to_str().expect("p"),
        src.to_str().expect("p"),
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("noSuchAttribute"), "{err}");
    // An index kind the type's matching rules cannot serve, or one that does not exist.
    for (text, want) in [
        (
            "indexes = { uid = [\"eq\", \"ord\"] }\n",
            "indexes: 'uid' has no ORDERING matching rule",
        ),
        (
            "indexes = { uidNumber = \"sub\" }\n",
            "indexes: 'uidNumber' has no SUBSTR matching rule",
        ),
        (
            "indexes = { cn = \"approx\" }\n",
            "key 'indexes': 'cn': unknown index 'approx'",
        ),
    ] {
        std::fs::write(&config, text).expect("write");
        let (rc, _, err) = linden(&[
            "import",
            "--config",
            cfg,
            "--data",
            tmp.path().join("never").to_str().expect("p"),
            src.to_str().expect("p"),
        ]);
        assert_eq!(rc, 2, "{err}");
        assert!(err.contains(want), "{err}");
    }
}

/// Starts `linden serve` on a free port; returns the child and its URL.
fn serve(data: &std::path::Path) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-password",
            "secret",
            "--data",
        ])
        .arg(data)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start linden");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest.split(',').next().unwrap_or("").to_string();
                let _ = tx.send(addr);
            }
        }
    });
    let addr = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("server address");
    (child, format!("ldap://{addr}"))
}

#[test]
fn snapshot_on_demand() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("data");
    let (mut child, url) = serve(&data);
    let snaps = || {
        std::fs::read_dir(&data)
            .expect("data dir")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("snap-"))
            .count()
    };
    assert_eq!(snaps(), 0);
    let (rc, out, err) = linden(&["snapshot", "--url", &url, "--password", "wrong"]);
    assert_ne!(rc, 0, "{out}{err}");
    let (rc, out, err) = linden(&["snapshot", "--url", &url, "--password", "secret"]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(
        out.contains("snapshot snap-") && out.contains("written"),
        "{out}"
    );
    assert_eq!(snaps(), 1);
    let (rc, out, _) = linden(&["snapshot", "--url", &url, "--password", "secret"]);
    assert_eq!(rc, 0);
    assert!(out.contains("no snapshot needed"), "{out}");
    let _ = child.kill();
    let _ = child.wait();
}

/// A file of several blocks (the import cuts its input into blocks of about 2 MiB that are
/// parsed in parallel): bad records in different blocks are named by their line in the file,
/// in file order, and CRLF line ends cut the same way.
#[test]
fn line_numbers_hold_across_blocks() {
    let tmp = tempfile::tempdir().expect("tmp");
    let gen = tmp.path().join("gen.ldif");
    let (rc, _, err) = linden(&[
        "gen",
        "--count",
        "14000",
        "--password-scheme",
        "ssha",
        "-o",
        gen.to_str().expect("p"),
    ]);
    assert_eq!(rc, 0, "{err}");
    let mut text = format!(
        "version: 1\n# {} entries\n\n{}",
        14_002,
        std::fs::read_to_string(&gen).expect("read")
    );
    assert!(
        text.len() > 4_500_000,
        "{} bytes: fewer than three blocks",
        text.len()
    );
    // A record longer than a block, then one bad record (no sn) near the start and one past
    // the second block.
    let big = format!(
        "dn: uid=big,ou=people,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: big\ncn: Big\nsn: Big\ndescription: {}\n\n",
        "x".repeat(3 << 20)
    );
    let at = text.find("dn: uid=user.0,").expect("the first person");
    text.insert_str(at, &big);
    let mut lines = Vec::new();
    for (i, at) in [20_000, 7_500_000].into_iter().enumerate() {
        let cut = at + text[at..].find("\n\n").expect("a record ends") + 2;
        lines.push(text[..cut].matches('\n').count() + 1);
        let bad = format!(
            "dn: uid=bad{i},ou=people,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: bad{i}\ncn: Bad\n\n"
        );
        text.insert_str(cut, &bad);
    }
    for (name, content) in [
        ("lf.ldif", text.clone()),
        ("crlf.ldif", text.replace('\n', "\r\n")),
    ] {
        let src = tmp.path().join(name);
        std::fs::write(&src, content).expect("write");
        let d = tmp.path().join(format!("{name}.d"));
        let (rc, _, err) = import(&d, &src, &[]);
        assert_eq!(rc, 1, "{err}");
        assert!(err.contains(&format!("{name}:{}:", lines[0])), "{err}");
        let (rc, out, err) = import(&d, &src, &["--continue-on-error"]);
        assert_eq!(rc, 0, "{err}");
        let skipped: Vec<&str> = err.lines().filter(|l| l.contains("skipped")).collect();
        assert_eq!(skipped.len(), 2, "{err}");
        for (i, (got, line)) in skipped.iter().zip(&lines).enumerate() {
            let want = format!(
                "{name}:{line}: skipped: uid=bad{i},ou=people,dc=example,dc=com: \
                 object class 'person' requires attribute 'sn'"
            );
            assert!(got.ends_with(&want), "{got}\nwanted {want}");
        }
        assert!(
            out.contains("imported 14003 entries") && out.contains("2 records skipped"),
            "{out}"
        );
    }
}

/// slapcat output imports as it is, OpenLDAP's operational attributes (entryCSN, entryUUID,
/// timestamps, empty creatorsName) kept.
#[test]
fn imports_slapcat_output() {
    let tmp = tempfile::tempdir().expect("tmp");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ldif/tests/fixtures/slapcat.ldif");
    let d = tmp.path().join("d");
    let (rc, out, err) = import(&d, &src, &[]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("imported 20 entries"), "{out}");
    let (rc, exported, err) = linden(&["export", "--data", d.to_str().expect("p")]);
    assert_eq!(rc, 0, "{err}");
    let suffix = exported
        .split("\n\n")
        .find(|r| r.contains("dn: dc=example,dc=com\n"))
        .expect("suffix exported");
    for kept in [
        "entryCSN: 20261122204826.795495Z#000000#000#000000",
        "entryUUID: cf84ad9a-7b01-1041-8905-1d5816d38685",
        "createTimestamp: 20261122204826Z",
        "structuralObjectClass: organization",
    ] {
        assert!(suffix.contains(kept), "{kept} not in {suffix}");
    }
}

/// With `memberof = true` in the configuration, an import computes memberOf from the groups it
/// imports, keeping values the input carries.
#[test]
fn import_computes_member_of_when_configured() {
    let tmp = tempfile::tempdir().expect("tmp");
    let src = tmp.path().join("in.ldif");
    let ldif = format!(
        "{LDIF}\ndn: uid=bob,ou=people,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: bob\ncn: Bob\nsn: B\nmemberOf: cn=old,dc=example,dc=com\n\n\
         dn: cn=staff,dc=example,dc=com\nobjectClass: groupOfNames\ncn: staff\n\
         member: uid=ann,ou=people,dc=example,dc=com\nmember: UID=Bob, ou=people,dc=example,dc=com\n"
    );
    std::fs::write(&src, ldif).expect("write");
    let config = tmp.path().join("linden.toml");
    std::fs::write(&config, "memberof = true\n").expect("write config");
    let d = tmp.path().join("d");
    let (rc, out, err) = import(&d, &src, &["--config", config.to_str().expect("p")]);
    assert_eq!(rc, 0, "{out}{err}");
    let e = tmp.path().join("e.ldif");
    let (rc, _, err) = linden(&[
        "export",
        "--data",
        d.to_str().expect("p"),
        e.to_str().expect("p"),
    ]);
    assert_eq!(rc, 0, "{err}");
    let exported = std::fs::read_to_string(&e).expect("read");
    let record = |dn: &str| {
        exported
            .split("\n\n")
            .find(|r| r.starts_with(&format!("dn: {dn}\n")))
            .unwrap_or_else(|| panic!("{dn} in {exported}"))
            .to_string()
    };
    let ann = record("uid=ann,ou=people,dc=example,dc=com");
    assert!(
        ann.contains("memberOf: cn=staff,dc=example,dc=com"),
        "{ann}"
    );
    let bob = record("uid=bob,ou=people,dc=example,dc=com");
    assert!(bob.contains("memberOf: cn=old,dc=example,dc=com"), "{bob}");
    assert!(
        bob.contains("memberOf: cn=staff,dc=example,dc=com"),
        "{bob}"
    );
}

/// `linden gen --strong | linden import`: every clear-text password is hashed with the
/// configured scheme (Argon2id here, at a small cost) while the blocks holding them are spread
/// over the building threads; `linden gen` says what it writes.
#[test]
fn strong_reference_data_is_hashed_on_import() {
    let tmp = tempfile::tempdir().expect("tmp");
    let src = tmp.path().join("gen.ldif");
    let (rc, _, err) = linden(&[
        "gen",
        "--count",
        "200",
        "--strong",
        "-o",
        src.to_str().expect("p"),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("clear text"), "gen says what it wrote: {err}");
    let (rc, _, err) = linden(&["gen", "--count", "1", "-o", src.to_str().expect("p")]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("{SSHA}"), "the default is fast: {err}");
    // Again with --strong, for the import.
    let (rc, _, err) = linden(&[
        "gen",
        "--count",
        "200",
        "--strong",
        "-o",
        src.to_str().expect("p"),
    ]);
    assert_eq!(rc, 0, "{err}");
    let config = tmp.path().join("linden.toml");
    std::fs::write(
        &config,
        "password_hash = \"ARGON2\"\nargon2_memory_kib = 64\nargon2_iterations = 1\n",
    )
    .expect("write");
    let data = tmp.path().join("d");
    let (rc, out, err) = import(
        &data,
        &src,
        &["--config", config.to_str().expect("p"), "--threads", "2"],
    );
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("imported 202 entries"), "{out}");
    let (rc, exported, err) = linden(&["export", "--data", data.to_str().expect("p")]);
    assert_eq!(rc, 0, "{err}");
    let unfolded = exported.replace("\n ", "");
    let stored: Vec<&str> = unfolded
        .lines()
        .filter_map(|l| l.strip_prefix("userPassword: "))
        .collect();
    assert_eq!(stored.len(), 200);
    for s in stored {
        assert!(s.starts_with("{ARGON2}$argon2id$v=19$m=64,t=1,p=1$"), "{s}");
        assert!(pwhash::verify(s.as_bytes(), b"password"), "{s}");
    }
}
