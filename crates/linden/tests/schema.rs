//! Schema as data (design.md seam 4) through the `linden` binary, with OpenLDAP's clients:
//! `schema_files` in the configuration, and the administrator extending the schema with an
//! `ldapmodify` of `cn=Subschema`, both surviving restarts (after a crash: log replay; after a
//! clean stop: the snapshot). ldap-utils is required (scripts/install-test-deps.sh).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_linden");
const ADMIN: &str = "cn=admin,dc=example,dc=com";
const PW: &str = "schema-secret";
const ALICE: &str = "uid=alice,ou=people,dc=example,dc=com";

/// A running `linden serve`, killed (SIGKILL: a crash) when dropped.
struct Running {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    fn url(&self) -> String {
        format!("ldap://{}", self.addr)
    }

    /// A clean stop (SIGTERM): the server writes a snapshot before it exits.
    fn terminate(mut self) {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(killed.success());
        let status = self.child.wait().expect("wait for linden");
        assert!(status.success(), "{status}");
    }
}

fn serve_command(data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(args)
        .env_remove("LINDEN_ADMIN_PASSWORD");
    cmd
}

/// Starts `linden serve --listen 127.0.0.1:0 --data DATA ARGS` and waits for "listening on".
fn start(data: &Path, args: &[&str]) -> Running {
    let mut child = serve_command(data, args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start linden");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            seen.push_str(&line);
            seen.push('\n');
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest.split([' ', ',']).next().unwrap_or("").to_string();
                let _ = tx.send(Ok(addr));
            }
        }
        let _ = tx.send(Err(seen));
    });
    let addr = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(addr)) => addr
            .parse()
            .unwrap_or_else(|e| panic!("bad address {addr:?} in log: {e}")),
        Ok(Err(log)) => {
            let _ = child.kill();
            panic!("linden exited before listening; stderr:\n{log}");
        }
        Err(_) => {
            let _ = child.kill();
            panic!("linden did not report its address within 60 s");
        }
    };
    Running { child, addr }
}

/// Runs `linden serve` expecting it to stop at start-up.
/// The lines of a failed start's stderr other than the first one `linden serve` logs, which
/// names the version (`… Linden 0.1.0 (7f0a145) starting`): the error, one line.
fn error_lines(err: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = err.trim_end().lines().collect();
    if lines.first().is_some_and(|l| l.ends_with(" starting")) {
        lines.remove(0);
    }
    lines
}

fn start_fails(data: &Path, args: &[&str]) -> Output {
    serve_command(data, args)
        .stdin(Stdio::null())
        .output()
        .expect("run linden")
}

/// Runs an OpenLDAP client: (exit status, stdout, stderr). Its exit status is the LDAP
/// result code.
fn tool(name: &str, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(name)
        .args(args)
        .env("LDAPCONF", "/dev/null")
        .env("LDAPRC", "/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {name} ({e}): install ldap-utils (scripts/install-test-deps.sh)")
        });
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(input);
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `ldapmodify` (or `ldapadd`) bound as `dn`/`pw` (anonymous when `dn` is empty).
fn modify(srv: &Running, dn: &str, pw: &str, ldif: &str) -> (i32, String) {
    let url = srv.url();
    let mut args = vec!["-x", "-H", url.as_str()];
    if !dn.is_empty() {
        args.extend(["-D", dn, "-w", pw]);
    }
    let (code, out, err) = tool("ldapmodify", &args, Some(ldif));
    (code, format!("{out}{err}"))
}

fn search(srv: &Running, base: &str, scope: &str, filter: &str, attrs: &[&str]) -> String {
    let url = srv.url();
    let mut args = vec![
        "-x",
        "-LLL",
        "-o",
        "ldif-wrap=no",
        "-H",
        &url,
        "-D",
        ADMIN,
        "-w",
        PW,
        "-b",
        base,
        "-s",
        scope,
        filter,
    ];
    args.extend_from_slice(attrs);
    let (code, out, err) = tool("ldapsearch", &args, None);
    assert_eq!(code, 0, "ldapsearch -b {base} {filter}: {err}");
    out
}

/// The definitions published in cn=Subschema, as `ldapsearch -b cn=Subschema -s base +
/// attributeTypes objectClasses` shows them.
fn subschema(srv: &Running) -> String {
    search(
        srv,
        "cn=Subschema",
        "base",
        "(objectClass=*)",
        &["+", "attributeTypes", "objectClasses"],
    )
}

const SHOE_TYPES: &str = "dn: cn=Subschema
changetype: modify
add: attributeTypes
attributeTypes: ( 1.3.6.1.4.1.99999.1.1 NAME 'shoeSize' DESC 'EU shoe size' EQUALITY integerMatch ORDERING integerOrderingMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 SINGLE-VALUE )
-
add: objectClasses
objectClasses: ( 1.3.6.1.4.1.99999.2.1 NAME 'shoeWearer' SUP top AUXILIARY MUST shoeSize )
";

const SAM: &str = "dn: uid=sam,ou=people,dc=example,dc=com
changetype: add
objectClass: inetOrgPerson
objectClass: shoeWearer
uid: sam
cn: Sam Shoe
sn: Shoe
shoeSize: 44
";

fn has_sam(srv: &Running) {
    let out = search(
        srv,
        "dc=example,dc=com",
        "sub",
        "(shoeSize>=43)",
        &["shoeSize"],
    );
    assert!(
        out.contains("dn: uid=sam,ou=people,dc=example,dc=com"),
        "{out}"
    );
    assert!(out.contains("shoeSize: 44"), "{out}");
    let sub = subschema(srv);
    assert!(
        sub.contains("attributeTypes: ( 1.3.6.1.4.1.99999.1.1 NAME 'shoeSize' DESC 'EU shoe size' EQUALITY integerMatch ORDERING integerOrderingMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 SINGLE-VALUE )"),
        "{sub}"
    );
    assert!(
        sub.contains("objectClasses: ( 1.3.6.1.4.1.99999.2.1 NAME 'shoeWearer' SUP top AUXILIARY MUST shoeSize )"),
        "{sub}"
    );
}

#[test]
fn subschema_modify_extends_the_schema_for_good() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let args = ["--demo", "--admin-password", PW];
    let srv = start(&data, &args);
    // Before: the class and the type are unknown.
    let (code, out) = modify(&srv, ADMIN, PW, SAM);
    assert_ne!(code, 0, "{out}");

    let (code, out) = modify(&srv, ADMIN, PW, SHOE_TYPES);
    assert_eq!(code, 0, "{out}");
    let (code, out) = modify(&srv, ADMIN, PW, SAM);
    assert_eq!(code, 0, "{out}");
    has_sam(&srv);
    // The new class is enforced: MUST shoeSize.
    let (code, out) = modify(
        &srv,
        ADMIN,
        PW,
        "dn: uid=sam,ou=people,dc=example,dc=com\nchangetype: modify\ndelete: shoeSize\n",
    );
    assert_eq!(code, 65, "objectClassViolation expected: {out}");

    // A crash: the extension and the entry come back from the log.
    drop(srv);
    let srv = start(&data, &args);
    has_sam(&srv);

    // A second extension, then a clean stop: both come back from the snapshot.
    let hat = "dn: cn=Subschema\nchangetype: modify\nadd: attributeTypes\nattributeTypes: ( 1.3.6.1.4.1.99999.1.2 NAME 'hatSize' SUP shoeSize )\n";
    let (code, out) = modify(&srv, ADMIN, PW, hat);
    assert_eq!(code, 0, "{out}");
    let (code, out) = modify(
        &srv,
        ADMIN,
        PW,
        "dn: uid=sam,ou=people,dc=example,dc=com\nchangetype: modify\nadd: objectClass\nobjectClass: extensibleObject\n-\nadd: hatSize\nhatSize: 7\n",
    );
    assert_eq!(code, 0, "{out}");
    srv.terminate();
    let snapshots = std::fs::read_dir(&data)
        .expect("data dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("snap-"))
        .count();
    assert_eq!(snapshots, 1, "a clean stop writes a snapshot");
    let srv = start(&data, &args);
    has_sam(&srv);
    let out = search(
        &srv,
        "dc=example,dc=com",
        "sub",
        "(hatSize=7)",
        &["hatSize"],
    );
    assert!(out.contains("hatSize: 7"), "{out}");
    // hatSize is a subtype of shoeSize: a filter on shoeSize matches it too.
    let out = search(&srv, "dc=example,dc=com", "sub", "(shoeSize=7)", &["1.1"]);
    assert!(out.contains("uid=sam"), "{out}");
    assert!(subschema(&srv).contains("NAME 'hatSize' SUP shoeSize"));
    srv.terminate();

    // A type added over LDAP can be indexed: the configuration's indexes are resolved against
    // the schema stored with the data.
    let config = dir.path().join("linden.toml");
    std::fs::write(
        &config,
        format!("admin_password = \"{PW}\"\ndemo = true\nindexes = [\"uid\", \"hatSize\"]\n"),
    )
    .expect("config");
    let srv = start(&data, &["--config", config.to_str().expect("utf-8 path")]);
    let out = search(&srv, "dc=example,dc=com", "sub", "(hatSize=7)", &["1.1"]);
    assert!(out.contains("uid=sam"), "{out}");
}

#[test]
fn subschema_modify_refuses_what_is_not_a_compatible_extension() {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = start(
        &dir.path().join("data"),
        &["--demo", "--admin-password", PW],
    );
    let add = |attr: &str, value: &str| {
        format!("dn: cn=Subschema\nchangetype: modify\nadd: {attr}\n{attr}: {value}\n")
    };
    let good = add(
        "attributeTypes",
        "( 1.3.6.1.4.1.99999.1.9 NAME 'goodAttr' SUP description )",
    );

    // Only the administrator.
    let (code, out) = modify(&srv, "", "", &good);
    assert_eq!(code, 8, "anonymous: strongerAuthRequired: {out}");
    let (code, out) = modify(&srv, ALICE, "password", &good);
    assert_eq!(code, 50, "insufficientAccessRights: {out}");

    let cases: Vec<(String, i32, &str)> = vec![
        // Removing or replacing a definition could invalidate stored entries.
        (
            "dn: cn=Subschema\nchangetype: modify\ndelete: attributeTypes\nattributeTypes: ( 2.5.4.3 NAME ( 'cn' 'commonName' ) SUP name )\n".into(),
            53,
            "can only be added",
        ),
        (
            "dn: cn=Subschema\nchangetype: modify\nreplace: objectClasses\nobjectClasses: ( 1.2.3.4 NAME 'x' SUP top )\n".into(),
            53,
            "can only be added",
        ),
        // Only attribute types and object classes.
        (add("ldapSyntaxes", "( 1.3.6.1.4.1.99999.5 DESC 'mine' )"), 53, "only attributeTypes and objectClasses"),
        (add("cn", "other"), 53, "only attributeTypes and objectClasses"),
        // Not a description.
        (add("attributeTypes", "( 1.3.6.1.4.1.99999.1.3 NAME 'x'"), 21, "missing ')'"),
        (add("attributeTypes", "shoeSize"), 21, "starts with '('"),
        // Already there, exactly (as published, but for DESC).
        (
            add("attributeTypes", "( 2.5.4.3 NAME ( 'cn' 'commonName' ) DESC 'mine' SUP name )"),
            20,
            "already defined",
        ),
        // Clashes and undefined references.
        (add("attributeTypes", "( 2.5.4.3 NAME 'myCn' SUP name )"), 19, "already defined differently"),
        (add("attributeTypes", "( 1.3.6.1.4.1.99999.1.4 NAME 'SN' SUP name )"), 19, "duplicate definition of name"),
        (add("attributeTypes", "( 1.3.6.1.4.1.99999.1.5 NAME 'x5' SUP noSuchType )"), 19, "noSuchType"),
        (add("attributeTypes", "( 1.3.6.1.4.1.99999.1.6 NAME 'x6' EQUALITY noSuchMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )"), 19, "noSuchMatch"),
        (add("attributeTypes", "( 1.3.6.1.4.1.99999.1.7 NAME 'x7' SYNTAX 1.2.3.4.5.6.7 )"), 19, "not known"),
        (add("objectClasses", "( 1.3.6.1.4.1.99999.2.7 NAME 'x8' SUP noSuchClass )"), 19, "noSuchClass"),
        (add("objectClasses", "( 1.3.6.1.4.1.99999.2.8 NAME 'x9' SUP top MAY noSuchType )"), 19, "noSuchType"),
    ];
    for (ldif, want, says) in &cases {
        let (code, out) = modify(&srv, ADMIN, PW, ldif);
        assert_eq!(code, *want, "{ldif}: {out}");
        assert!(out.contains(says), "{ldif}: message lacks {says:?}: {out}");
    }
    // All or nothing: a good definition with a bad one in the same request is not added.
    let mixed =
        format!("{good}attributeTypes: ( 1.3.6.1.4.1.99999.1.10 NAME 'badAttr' SUP noSuchType )\n");
    let (code, out) = modify(&srv, ADMIN, PW, &mixed);
    assert_eq!(code, 19, "{out}");
    assert!(out.contains("attributeTypes value 2"), "{out}");
    let sub = subschema(&srv);
    for name in ["goodAttr", "'x'", "myCn", "'x5'", "'x7'", "'x9'", "badAttr"] {
        assert!(!sub.contains(name), "{name} must not be defined: {sub}");
    }
    // And then the good one alone is.
    let (code, out) = modify(&srv, ADMIN, PW, &good);
    assert_eq!(code, 0, "{out}");
    assert!(subschema(&srv).contains("NAME 'goodAttr' SUP description"));
}

/// An OpenLDAP `.schema` file with an OID macro and a definition repeating a built-in one
/// (as Debian's `core.schema` does, with other wording), and an LDIF file in the
/// `cn=schema,cn=config` form of Debian's `/etc/ldap/schema/*.ldif`, with folded lines.
const A_SCHEMA: &str = "# test schema
objectidentifier testOID 1.3.6.1.4.1.99999.20

attributetype ( 2.5.4.3 NAME ( 'cn' 'commonName' )
\tDESC 'RFC4519: common name(s) for which the entity is known by'
\tSUP name )

attributetype ( testOID:1 NAME 'favouriteColour'
\tDESC 'a colour'
\tEQUALITY caseIgnoreMatch
\tSUBSTR caseIgnoreSubstringsMatch
\tSYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )
";

const B_LDIF: &str = "# AUTO-GENERATED FILE - DO NOT EDIT!!
dn: cn=btest,cn=schema,cn=config
objectClass: olcSchemaConfig
cn: btest
olcObjectIdentifier: {0}bOID 1.3.6.1.4.1.99999.21
olcAttributeTypes: {0}( bOID:1 NAME 'luckyNumber' DESC 'a number' EQUALITY integ
 erMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 SINGLE-VALUE )
olcObjectClasses: {0}( bOID:2 NAME 'colourful' DESC 'has colours' SUP top
  AUXILIARY MAY ( favouriteColour $ luckyNumber ) )
";

const PAT: &str = "dn: uid=pat,ou=people,dc=example,dc=com
changetype: add
objectClass: inetOrgPerson
objectClass: colourful
uid: pat
cn: Pat
sn: Colour
favouriteColour: Teal
luckyNumber: 7
";

fn write_config(dir: &Path, files: &[&str]) -> String {
    std::fs::write(dir.join("a.schema"), A_SCHEMA).expect("a.schema");
    std::fs::write(dir.join("b.ldif"), B_LDIF).expect("b.ldif");
    let list: Vec<String> = files.iter().map(|f| format!("\"{f}\"")).collect();
    let config = dir.join("linden.toml");
    std::fs::write(
        &config,
        format!(
            "admin_password = \"{PW}\"\ndemo = true\nschema_files = [{}]\n",
            list.join(", ")
        ),
    )
    .expect("config");
    config.to_str().expect("utf-8 path").to_string()
}

#[test]
fn schema_files_are_loaded_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    // Relative to the configuration file's directory.
    let config = write_config(dir.path(), &["a.schema", "b.ldif"]);
    let srv = start(&data, &["--config", &config]);
    let (code, out) = modify(&srv, ADMIN, PW, PAT);
    assert_eq!(code, 0, "{out}");
    let out = search(
        &srv,
        "ou=people,dc=example,dc=com",
        "one",
        "(&(favouriteColour=te*)(luckyNumber=7))",
        &["favouriteColour", "luckyNumber"],
    );
    assert!(
        out.contains("dn: uid=pat,ou=people,dc=example,dc=com"),
        "{out}"
    );
    let sub = subschema(&srv);
    assert!(
        sub.contains("attributeTypes: ( 1.3.6.1.4.1.99999.20.1 NAME 'favouriteColour' DESC 'a colour' EQUALITY caseIgnoreMatch SUBSTR caseIgnoreSubstringsMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )"),
        "{sub}"
    );
    assert!(sub.contains("NAME 'luckyNumber'"), "{sub}");
    assert!(
        sub.contains("objectClasses: ( 1.3.6.1.4.1.99999.21.2 NAME 'colourful' DESC 'has colours' SUP top AUXILIARY MAY ( favouriteColour $ luckyNumber ) )"),
        "{sub}"
    );
    // The repeated built-in definition was skipped: cn is there once, as built in.
    assert_eq!(sub.matches("( 2.5.4.3 NAME").count(), 1, "{sub}");
    srv.terminate();

    // Same files: the entry is there after a restart.
    let srv = start(&data, &["--config", &config]);
    let out = search(
        &srv,
        "dc=example,dc=com",
        "sub",
        "(luckyNumber=7)",
        &["1.1"],
    );
    assert!(out.contains("uid=pat"), "{out}");
    drop(srv);

    // The offline tools read the data with the configured schema too.
    let data_s = data.to_str().expect("utf-8 path");
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().expect("run linden");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&["verify", "--data", data_s, "--config", &config]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = run(&["verify", "--data", data_s]);
    assert_eq!(
        code,
        Some(1),
        "without the schema files the types are unknown: {out}{err}"
    );
    assert!(
        format!("{out}{err}").contains("favouriteColour"),
        "{out}{err}"
    );
    let (code, out, err) = run(&["export", "--data", data_s, "--config", &config]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("luckyNumber: 7"), "{out}");

    // The files no longer define a type stored entries use: the start stops and names it,
    // instead of dropping or mangling the values.
    let config = write_config(dir.path(), &["a.schema"]);
    let out = start_fails(&data, &["--config", &config]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("luckyNumber"), "{err}");
}

#[test]
fn schema_file_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let config = write_config(dir.path(), &["a.schema", "b.ldif"]);
    // An undefined attribute type on line 10 of b.ldif, a continuation line.
    let bad = B_LDIF.replace(
        "MAY ( favouriteColour $ luckyNumber )",
        "MAY ( favouriteColour $ unluckyNumber )",
    );
    let bad = bad.replace(
        "olcAttributeTypes: {0}",
        "olcAttributeTypes: {0}( bOID:9 NAME 'fine' SUP name )\nolcAttributeTypes: {1}",
    );
    std::fs::write(dir.path().join("b.ldif"), bad).expect("b.ldif");
    let out = start_fails(&data, &["--config", &config]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(error_lines(&err).len(), 1, "one line: {err}");
    let path = dir.path().join("b.ldif");
    assert!(
        err.contains(&format!("{}:10: ", path.display())),
        "names file and line: {err}"
    );
    assert!(err.contains("unluckyNumber"), "{err}");

    // An unknown syntax stops the start, naming the file and line, as slapd does
    // ("a.schema: line 3 attributetype: Syntax not found: \"1.2.3.4.5\"").
    std::fs::write(dir.path().join("b.ldif"), B_LDIF).expect("b.ldif");
    std::fs::write(
        dir.path().join("a.schema"),
        A_SCHEMA.replace(
            "SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )",
            "SYNTAX 1.2.3.4.5 )",
        ),
    )
    .expect("a.schema");
    let out = start_fails(&data, &["--config", &config]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(error_lines(&err).len(), 1, "one line: {err}");
    let path = dir.path().join("a.schema");
    let line = A_SCHEMA
        .lines()
        .position(|l| l.contains("SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )"))
        .expect("syntax line")
        + 1;
    assert!(
        err.contains(&format!("{}:{line}: ", path.display())),
        "names file and line: {err}"
    );
    assert!(err.contains("syntax 1.2.3.4.5"), "{err}");

    // A missing file.
    let config = write_config(dir.path(), &["a.schema", "nope.schema"]);
    let out = start_fails(&data, &["--config", &config]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nope.schema"), "{err}");

    // A .schema file whose definition clashes with a built-in one.
    std::fs::write(
        dir.path().join("a.schema"),
        "\nattributetype ( 2.5.4.3 NAME 'cn' SUP description )\n",
    )
    .expect("a.schema");
    let toml = dir.path().join("linden2.toml");
    std::fs::write(
        &toml,
        format!("admin_password = \"{PW}\"\nschema_files = [\"a.schema\"]\n"),
    )
    .expect("config");
    let out = start_fails(&data, &["--config", toml.to_str().expect("path")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("a.schema:2: "), "{err}");
    assert!(err.contains("already defined differently"), "{err}");
    assert!(!data.join("log-00000000000000000001.lnl").exists());
}

fn linden(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).args(args).output().expect("run linden");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn schema_list_and_show_print_the_bundles() {
    let (code, out, err) = linden(&["schema", "list"]);
    assert_eq!(code, Some(0), "{err}");
    for name in [
        "nis",
        "rfc2307bis",
        "openssh-lpk",
        "sudo",
        "openldap",
        "ppolicy",
        "dyngroup",
        "misc",
        "duaconf",
        "java",
        "corba",
        "samba",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name}: {out}"
        );
    }
    let bis = out.lines().find(|l| l.starts_with("rfc2307bis ")).unwrap();
    assert!(bis.contains("(conflicts with: nis)"), "{bis}");

    let (code, out, err) = linden(&["schema", "show", "openssh-lpk"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("# "), "{out}");
    assert!(
        out.contains("objectclass ( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey'"),
        "{out}"
    );

    let (code, out, err) = linden(&["schema", "show", "sudoers"]);
    assert_ne!(code, Some(0), "{out}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("'sudoers'") && err.contains("known bundles: nis, rfc2307bis"),
        "{err}"
    );
}

#[test]
fn schemas_in_the_configuration_serve_export_and_verify_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let config = dir.path().join("linden.toml");
    std::fs::write(
        &config,
        format!("admin_password = \"{PW}\"\ndemo = true\nschemas = [\"sudo\", \"rfc2307bis\"]\n"),
    )
    .expect("config");
    let config = config.to_str().expect("utf-8 path").to_string();
    let srv = start(&data, &["--config", &config]);
    let (code, out) = modify(
        &srv,
        ADMIN,
        PW,
        "dn: cn=ops,dc=example,dc=com\nchangetype: add\nobjectClass: groupOfNames\n\
         objectClass: posixGroup\ncn: ops\ngidNumber: 4242\nmember: uid=alice,ou=people,dc=example,dc=com\n\n\
         dn: cn=ops-sudo,dc=example,dc=com\nchangetype: add\nobjectClass: sudoRole\ncn: ops-sudo\n\
         sudoUser: %ops\nsudoCommand: /usr/bin/systemctl\nsudoHost: ALL\n",
    );
    assert_eq!(code, 0, "{out}");
    let out = search(
        &srv,
        "dc=example,dc=com",
        "sub",
        "(sudoUser=%ops)",
        &["1.1"],
    );
    assert!(out.contains("dn: cn=ops-sudo,dc=example,dc=com"), "{out}");
    // The demo's RFC 2307 group was loaded as an rfc2307bis one (posixGroup is auxiliary).
    let out = search(
        &srv,
        "dc=example,dc=com",
        "sub",
        "(objectClass=posixGroup)",
        &["objectClass"],
    );
    assert!(
        out.contains("dn: cn=staff,ou=groups,dc=example,dc=com"),
        "{out}"
    );
    assert!(out.contains("objectClass: groupOfMembers"), "{out}");
    srv.terminate();

    let data_s = data.to_str().expect("utf-8 path");
    let (code, out, err) = linden(&["verify", "--data", data_s, "--config", &config]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = linden(&["export", "--data", data_s, "--config", &config]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("sudoCommand: /usr/bin/systemctl"), "{out}");
    // Without the bundles the stored sudo types are unknown.
    let (code, out, err) = linden(&["verify", "--data", data_s]);
    assert_eq!(code, Some(1), "{out}{err}");

    // An unknown name, and nis with rfc2307bis: one line naming the key, status 2.
    for (list, want) in [
        (
            "[\"sudo\", \"sudoers\"]",
            "unknown schema bundle 'sudoers'; known bundles: nis, rfc2307bis",
        ),
        (
            "[\"nis\", \"rfc2307bis\"]",
            "'nis' and 'rfc2307bis' cannot be enabled together",
        ),
    ] {
        let bad = dir.path().join("bad.toml");
        std::fs::write(
            &bad,
            format!("admin_password = \"{PW}\"\nschemas = {list}\n"),
        )
        .expect("config");
        let bad = bad.to_str().expect("path");
        let out = start_fails(&data, &["--config", bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(error_lines(&err).len(), 1, "{err}");
        assert!(err.contains("schemas: ") && err.contains(want), "{err}");
        let (code, _, err) = linden(&["export", "--data", data_s, "--config", bad]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(want), "{err}");
    }
}
