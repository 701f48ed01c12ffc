//! Several listening addresses and `ldapi://` with SASL EXTERNAL from the peer's credentials,
//! through the `linden` binary and OpenLDAP's client tools.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Runs an OpenLDAP client tool: (exit status, stdout, stderr).
fn tool(name: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(name).args(args).output().unwrap_or_else(|e| {
        panic!("{name}: {e} (scripts/install-test-deps.sh installs ldap-utils)")
    });
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `ldapi://` URL of a socket path (the path percent-encoded, as RFC 4516 asks).
fn ldapi_url(path: &std::path::Path) -> String {
    let mut url = String::from("ldapi://");
    for b in path.to_str().expect("utf-8 path").bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            url.push(char::from(b));
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

struct Server {
    child: std::process::Child,
    /// The addresses of the "listening on" line.
    bound: Vec<String>,
    /// What the server logged before it.
    log: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(config: &std::path::Path, data: &std::path::Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args(["serve", "--demo", "--admin-password", "secret", "--config"])
        .arg(config)
        .arg("--data")
        .arg(data)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start linden");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut log = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addrs = rest.split(", suffixes").next().unwrap_or("").to_string();
                let _ = tx.send(Ok((addrs, std::mem::take(&mut log))));
            } else if line.contains("ERROR") || line.starts_with("error") {
                let _ = tx.send(Err(line));
            } else {
                log.push(line);
            }
        }
    });
    let (line, log) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("server address")
        .expect("server started");
    Server {
        child,
        bound: line.split(", ").map(str::to_string).collect(),
        log,
    }
}

#[test]
fn several_addresses_and_ldapi_with_peer_credentials() {
    let tmp = tempfile::tempdir().expect("tmp");
    let socket = tmp.path().join("ldapi sock");
    let (_, uid, _) = tool("id", &["-u"]);
    let uid = uid.trim();
    let config = tmp.path().join("linden.toml");
    std::fs::write(
        &config,
        format!(
            r#"listen = ["127.0.0.1:0", "127.0.0.2:0"]
ldapi = "{}"
ldapi_mode = "0600"

# This process's user is the administrator over ldapi.
[[authz_map]]
match = 'gidNumber=[0-9]+\+uidNumber={uid},cn=peercred,cn=external,cn=auth'
replace = "cn=admin,dc=example,dc=com"

# A certificate subject maps through a search.
[[authz_map]]
match = 'cn=([^,]+),ou=certs'
replace = "ldap:///ou=people,dc=example,dc=com??sub?(uid=$1)"
"#,
            socket.display()
        ),
    )
    .expect("write config");
    let srv = serve(&config, &tmp.path().join("data"));
    assert_eq!(srv.bound.len(), 2, "{:?}", srv.bound);
    assert!(srv.bound[0].starts_with("127.0.0.1:"), "{:?}", srv.bound);
    assert!(srv.bound[1].starts_with("127.0.0.2:"), "{:?}", srv.bound);
    for addr in &srv.bound {
        let (rc, out, err) = tool(
            "ldapwhoami",
            &[
                "-x",
                "-H",
                &format!("ldap://{addr}"),
                "-D",
                "cn=admin,dc=example,dc=com",
                "-w",
                "secret",
            ],
        );
        assert_eq!(rc, 0, "{addr}: {err}");
        assert_eq!(out.trim(), "dn:cn=admin,dc=example,dc=com", "{addr}");
    }
    {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let meta = std::fs::metadata(&socket).expect("ldapi socket");
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
    let url = ldapi_url(&socket);
    let (rc, out, err) = tool("ldapwhoami", &["-Q", "-Y", "EXTERNAL", "-H", &url]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.trim(), "dn:cn=admin,dc=example,dc=com");
    // Mapped to the administrator: it may change entries without a password.
    let ldif = tmp.path().join("change.ldif");
    std::fs::write(
        &ldif,
        "dn: uid=alice,ou=people,dc=example,dc=com\nchangetype: modify\nreplace: description\ndescription: set over ldapi\n",
    )
    .expect("write ldif");
    let (rc, _, err) = tool(
        "ldapmodify",
        &[
            "-Q",
            "-Y",
            "EXTERNAL",
            "-H",
            &url,
            "-f",
            ldif.to_str().expect("path"),
        ],
    );
    assert_eq!(rc, 0, "{err}");
    // A plain bind over ldapi works too.
    let (rc, out, err) = tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-H",
            &url,
            "-D",
            "uid=alice,ou=people,dc=example,dc=com",
            "-w",
            "password",
            "-b",
            "uid=alice,ou=people,dc=example,dc=com",
            "-s",
            "base",
            "description",
        ],
    );
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("description: set over ldapi"), "{out}");
    // StartTLS works over ldapi as over TCP, as slapd allows it (Net::LDAP's t/47ipc.t sends it
    // there). openssl's client names a host; libldap would send the socket path as the TLS
    // server name, which rustls refuses (docs/client-suites.md).
    let out = Command::new("openssl")
        .args(["s_client", "-unix"])
        .arg(&socket)
        .args(["-starttls", "ldap", "-servername", "localhost"])
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("New, TLSv1.3"), "{text}");
}

#[test]
fn a_second_server_does_not_take_over_a_live_ldapi_socket() {
    let tmp = tempfile::tempdir().expect("tmp");
    let socket = tmp.path().join("ldapi");
    let config = tmp.path().join("linden.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\nldapi = \"{}\"\n",
            socket.display()
        ),
    )
    .expect("write config");
    let _first = serve(&config, &tmp.path().join("one"));
    let out = Command::new(env!("CARGO_BIN_EXE_linden"))
        .args(["serve", "--admin-password", "secret", "--config"])
        .arg(&config)
        .arg("--data")
        .arg(tmp.path().join("two"))
        .output()
        .expect("second server");
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by a running server"), "{err}");
}

/// The accept queue of the TCP listener on `port`: the Send-Q column `ss` shows for a
/// listening socket is its backlog (as the kernel capped it).
fn accept_queue(port: &str) -> u32 {
    let (rc, out, err) = tool("ss", &["-Hltn", "sport", "=", &format!(":{port}")]);
    assert_eq!(rc, 0, "ss (iproute2): {err}");
    let line = out
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no listener on port {port}"));
    line.split_whitespace()
        .nth(2)
        .and_then(|q| q.parse().ok())
        .unwrap_or_else(|| panic!("ss: {line}"))
}

/// The port of an `ADDR:PORT` (or `http://ADDR:PORT`) at the end of a log line.
fn port_in(log: &[String], prefix: &str) -> String {
    let line = log
        .iter()
        .find(|l| l.contains(prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' line in {log:?}"));
    line.rsplit(':').next().expect("port").trim().to_string()
}

fn somaxconn() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .expect("/proc/sys/net/core/somaxconn")
        .trim()
        .parse()
        .expect("a number")
}

/// Sends SIGCONT to a stopped server when dropped, whatever the test's outcome.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Stopped {
        let (rc, _, err) = tool("kill", &["-STOP", &pid.to_string()]);
        assert_eq!(rc, 0, "kill -STOP: {err}");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = tool("kill", &["-CONT", &self.0.to_string()]);
    }
}

#[test]
fn listeners_queue_a_burst_of_connections_as_configured() {
    const BACKLOG: u32 = 300;
    let cap = somaxconn();
    assert!(
        cap >= BACKLOG,
        "net.core.somaxconn is {cap}: this test needs {BACKLOG} (sysctl -w net.core.somaxconn=4096)"
    );
    const { assert!(server::config::DEFAULT_LISTEN_BACKLOG >= 1024) };
    let tmp = tempfile::tempdir().expect("tmp");
    let config = tmp.path().join("linden.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\nldaps_listen = \"127.0.0.1:0\"\n\
             metrics_listen = \"127.0.0.1:0\"\nlisten_backlog = {BACKLOG}\n"
        ),
    )
    .expect("write config");
    let srv = serve(&config, &tmp.path().join("data"));
    let ldap = srv.bound[0].rsplit(':').next().expect("port").to_string();
    let ldaps = port_in(&srv.log, "listening for ldaps on");
    let metrics = port_in(&srv.log, "/readyz on http://");
    for port in [&ldap, &ldaps, &metrics] {
        assert_eq!(accept_queue(port), BACKLOG, "listener on port {port}");
    }
    assert!(
        !srv.log.iter().any(|l| l.contains("somaxconn")),
        "no warning under the cap: {:?}",
        srv.log
    );

    // A burst while the server accepts nothing (stopped): the kernel completes every
    // connection up to the backlog; with 128 the 130th would wait for SYN retries and time out.
    let addr: std::net::SocketAddr = srv.bound[0].parse().expect("address");
    let mut burst = Vec::new();
    {
        let _stopped = Stopped::new(srv.child.id());
        for i in 0..250 {
            let c = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("connection {i} of the burst not completed: {e}"));
            burst.push(c);
        }
    }
    // Running again, the server serves the last of them.
    let mut last = burst.pop().expect("a connection");
    last.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .expect("timeout");
    // Who am I? (message id 2), as OpenLDAP's ldapwhoami sends it.
    let whoami: Vec<u8> = (0..32)
        .map(|i| {
            u8::from_str_radix(
                &"301e02010277198017312e332e362e312e342e312e343230332e312e31312e33"
                    [2 * i..2 * i + 2],
                16,
            )
            .expect("hex")
        })
        .collect();
    std::io::Write::write_all(&mut last, &whoami).expect("send");
    let mut answer = [0u8; 64];
    let n = std::io::Read::read(&mut last, &mut answer).expect("answer");
    assert!(n > 2 && answer[0] == 0x30, "{:02x?}", &answer[..n]);
    drop(burst);
    drop(srv);

    // The default, and a warning when the kernel caps what is asked.
    std::fs::write(&config, "listen = \"127.0.0.1:0\"\n").expect("write config");
    let srv = serve(&config, &tmp.path().join("data"));
    let port = srv.bound[0].rsplit(':').next().expect("port");
    let default = server::config::DEFAULT_LISTEN_BACKLOG;
    assert_eq!(accept_queue(port), default.min(cap));
    drop(srv);
    std::fs::write(
        &config,
        format!("listen = \"127.0.0.1:0\"\nlisten_backlog = {}\n", cap + 1),
    )
    .expect("write config");
    let srv = serve(&config, &tmp.path().join("data"));
    let port = srv.bound[0].rsplit(':').next().expect("port");
    assert_eq!(accept_queue(port), cap);
    assert!(
        srv.log
            .iter()
            .any(|l| l.contains("WARN") && l.contains("net.core.somaxconn")),
        "{:?}",
        srv.log
    );
}
