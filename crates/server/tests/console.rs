//! The web console over HTTP on loopback (`console_listen`, `console_plain_http`): login and
//! logout, the session cookie and CSRF token, session fixation, the idle timeout and the
//! session limit, and the directory pages, each checked over LDAP where it changes data.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ADMIN_DN, ADMIN_PW};
use ldap3::{Mod, Scope, SearchEntry};

/// A server with an LDAP listener and a console listener (plain HTTP on 127.0.0.1).
struct Served {
    url: String,
    console: SocketAddr,
    server: Arc<server::Server>,
    _running: common::Running,
    _data: tempfile::TempDir,
}

impl Served {
    fn start(tweak: impl FnOnce(&mut server::Config)) -> Served {
        let data = tempfile::tempdir().expect("tmp");
        let mut config = server::Config {
            data_dir: data.path().to_path_buf(),
            admin_password_hash: pwhash::hash(pwhash::Scheme::default(), ADMIN_PW.as_bytes()),
            access: Some(common::open_read_policy()),
            console_plain_http: true,
            console_listen: Some("127.0.0.1:0".parse().expect("addr")),
            ..server::Config::default()
        };
        tweak(&mut config);
        let running = common::Running::start(
            config,
            common::Extra {
                console: true,
                ..common::Extra::default()
            },
        );
        let (addr, console) = (running.ldap, running.console.expect("the console listener"));
        let s = Served {
            url: format!("ldap://{addr}"),
            console,
            server: running.server.clone(),
            _running: running,
            _data: data,
        };
        s.populate();
        // The populating connection is gone before a test counts connections.
        eventually("the setup's connections to close", || {
            s.server.open_connections() == 0
        });
        s
    }

    fn admin(&self) -> ldap3::LdapConn {
        let mut c = ldap3::LdapConn::new(&self.url).expect("connect");
        c.simple_bind(ADMIN_DN, ADMIN_PW)
            .expect("bind")
            .success()
            .expect("admin");
        c
    }

    /// ou=people with alice and bob (password "alice-pw", "bob-pw"), ou=groups with one group.
    fn populate(&self) {
        let mut c = self.admin();
        for ou in ["people", "groups"] {
            c.add(
                &format!("ou={ou},dc=example,dc=com"),
                vec![
                    ("objectClass", ["organizationalUnit"].into()),
                    ("ou", [ou].into()),
                ],
            )
            .expect("add")
            .success()
            .expect("ou");
        }
        for (uid, cn) in [("alice", "Alice Liddell"), ("bob", "Bob Builder")] {
            let pw = format!("{uid}-pw");
            c.add(
                &format!("uid={uid},ou=people,dc=example,dc=com"),
                vec![
                    ("objectClass", ["inetOrgPerson"].into()),
                    ("uid", [uid].into()),
                    ("cn", [cn].into()),
                    ("sn", [cn.split(' ').nth(1).unwrap_or(cn)].into()),
                    ("userPassword", [pw.as_str()].into()),
                ],
            )
            .expect("add")
            .success()
            .expect("person");
        }
    }

    fn attr(&self, dn: &str, attr: &str) -> Vec<String> {
        let mut c = self.admin();
        let rs = c
            .search(dn, Scope::Base, "(objectClass=*)", vec![attr])
            .expect("search")
            .success()
            .map(|(rs, _)| rs)
            .unwrap_or_default();
        rs.into_iter()
            .next()
            .map(|e| {
                SearchEntry::construct(e)
                    .attrs
                    .remove(attr)
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }

    fn browser(&self) -> Browser {
        Browser {
            addr: self.console,
            cookies: HashMap::new(),
            tls: None,
        }
    }
}

#[derive(Debug)]
struct Resp {
    status: u16,
    /// Header lines, names in lower case.
    headers: Vec<(String, String)>,
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn set_cookies(&self) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == "set-cookie")
            .map(|(_, v)| v.as_str())
            .collect()
    }
    /// The value of hidden input `name` in the page.
    fn hidden(&self, name: &str) -> String {
        let pat = format!("name=\"{name}\" value=\"");
        let i = self
            .body
            .find(&pat)
            .unwrap_or_else(|| panic!("no {name} in {}", self.body));
        let rest = &self.body[i + pat.len()..];
        rest[..rest.find('"').expect("end of value")].to_string()
    }
}

/// A minimal browser: one request a connection, the cookies it was given; over TLS with
/// `tls` (the roots it trusts).
struct Browser {
    addr: SocketAddr,
    cookies: HashMap<String, String>,
    tls: Option<Arc<rustls::ClientConfig>>,
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

impl Browser {
    fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<String>,
        extra: &[(&str, &str)],
    ) -> Resp {
        let tcp = std::net::TcpStream::connect(self.addr).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut s: Box<dyn Stream> = match &self.tls {
            None => Box::new(tcp),
            Some(config) => {
                let name = rustls::pki_types::ServerName::IpAddress(self.addr.ip().into());
                let conn = rustls::ClientConnection::new(config.clone(), name).expect("tls");
                Box::new(rustls::StreamOwned::new(conn, tcp))
            }
        };
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.addr
        );
        if !self.cookies.is_empty() {
            let c: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req.push_str(&format!("Cookie: {}\r\n", c.join("; ")));
        }
        for (k, v) in extra {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = body.unwrap_or_default();
        if method == "POST" {
            req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        s.write_all(req.as_bytes()).expect("send");
        let mut raw = Vec::new();
        match s.read_to_end(&mut raw) {
            Ok(_) => {}
            // A TLS peer that closes without close_notify: what came is the answer.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
            Err(e) => panic!("read: {e}"),
        }
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|c| c.parse().ok())
            .expect("status");
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let r = Resp {
            status,
            headers,
            body: body.to_string(),
        };
        for c in r.set_cookies() {
            let pair = c.split(';').next().unwrap_or("");
            if let Some((k, v)) = pair.split_once('=') {
                if v.is_empty() || c.contains("Max-Age=0") {
                    self.cookies.remove(k);
                } else {
                    self.cookies.insert(k.to_string(), v.to_string());
                }
            }
        }
        r
    }

    fn get(&mut self, path: &str) -> Resp {
        self.request("GET", path, None, &[])
    }

    fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Resp {
        self.request("POST", path, Some(encode(form)), &[])
    }

    /// Logs in through the login page; returns the response to the login form.
    fn login(&mut self, user: &str, password: &str) -> Resp {
        let page = self.get("/login");
        assert_eq!(page.status, 200);
        let token = page.hidden("login_token");
        self.post(
            "/login",
            &[
                ("login_token", &token),
                ("next", "/tree"),
                ("user", user),
                ("password", password),
            ],
        )
    }

    /// The CSRF token of the session, from any page's logout form.
    fn csrf(&mut self) -> String {
        self.get("/tree").hidden("csrf")
    }

    fn session(&self) -> Option<String> {
        self.cookies.get("linden_session").cloned()
    }
}

fn pairs<'a>(f: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    f.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn encode(form: &[(&str, &str)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form {
        s.append_pair(k, v);
    }
    s.finish()
}

fn q(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

const ALICE: &str = "uid=alice,ou=people,dc=example,dc=com";
const BOB: &str = "uid=bob,ou=people,dc=example,dc=com";

/// Polls `cond` until it holds, for at most 20 s.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn login_pages_and_logout() {
    let srv = Served::start(|_| {});
    let mut b = srv.browser();
    // Not logged in: every page sends to the login page, remembering where it was going.
    let r = b.get("/entry?dn=x");
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/login?next=%2Fentry%3Fdn%3Dx"));
    // The login page: a strict policy, no framing, no caching, the login cookie.
    let page = b.get("/login");
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").expect("CSP");
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert!(page
        .set_cookies()
        .iter()
        .any(|c| c.starts_with("linden_login=")
            && c.contains("HttpOnly")
            && c.contains("SameSite=Strict")));
    // The assets are served from the binary.
    assert_eq!(b.get("/assets/console.css").status, 200);
    assert!(b
        .get("/assets/console.js")
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/javascript")));

    // A wrong password: the server's answer, no session.
    let before = srv.server.open_connections();
    let r = b.login(ALICE, "wrong");
    assert_eq!(r.status, 401);
    assert!(r.body.contains("InvalidCredentials (49)"), "{}", r.body);
    assert!(b.session().is_none());

    // A DN and its password: a session cookie, then the pages as that identity.
    let r = b.login(ALICE, "alice-pw");
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.header("location"), Some("/tree"));
    let cookie = r
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("linden_session="))
        .expect("session cookie")
        .to_string();
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && cookie.contains("Path=/"),
        "{cookie}"
    );
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP on loopback: no Secure flag"
    );
    let tree = b.get("/tree?dn=ou%3Dpeople%2Cdc%3Dexample%2Cdc%3Dcom");
    assert_eq!(tree.status, 200);
    assert!(
        tree.body.contains("uid=alice") && tree.body.contains("uid=bob"),
        "{}",
        tree.body
    );
    assert!(tree.body.contains(ALICE), "the logged-in DN is shown");
    assert_eq!(
        srv.server.open_connections(),
        before + 1,
        "one LDAP connection for the session"
    );

    // Logout ends the session and its LDAP connection.
    let csrf = tree.hidden("csrf");
    let r = b.post("/logout", &[("csrf", &csrf)]);
    assert_eq!(r.status, 303);
    assert_eq!(b.get("/tree").status, 303);
    eventually("the session's LDAP connection to close", || {
        srv.server.open_connections() == before
    });

    // A user id logs in through the server's own lookup (SASL PLAIN: one entry with that uid).
    let r = b.login("bob", "bob-pw");
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(b.get("/tree").body.contains(BOB), "bound as bob's DN");
}

#[test]
fn csrf_and_foreign_forms_are_refused() {
    let srv = Served::start(|_| {});
    let mut b = srv.browser();
    assert_eq!(b.login(ADMIN_DN, ADMIN_PW).status, 303);
    let csrf = b.csrf();
    let form = |t: &str| {
        vec![
            ("csrf", t.to_string()),
            ("dn", ALICE.to_string()),
            ("a.description", "changed".to_string()),
        ]
    };
    // No token, a wrong token, the right token from another site: refused, nothing changed.
    let none = vec![
        ("dn", ALICE.to_string()),
        ("a.description", "changed".to_string()),
    ];
    let r = b.post("/edit", &pairs(&none));
    assert_eq!(r.status, 403);
    assert!(r.body.contains("CSRF"), "{}", r.body);
    assert_eq!(
        b.post("/edit", &pairs(&form("0123456789abcdef0123456789abcdef")))
            .status,
        403
    );
    let foreign = b.request(
        "POST",
        "/edit",
        Some(encode(&pairs(&form(&csrf)))),
        &[("Origin", "http://evil.example")],
    );
    assert_eq!(foreign.status, 403);
    assert!(
        srv.attr(ALICE, "description").is_empty(),
        "no refused form changed anything"
    );
    // The session's own token: done.
    let r = b.post("/edit", &pairs(&form(&csrf)));
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(srv.attr(ALICE, "description"), vec!["changed"]);
    // A login form without its token (posted from elsewhere) is refused.
    let mut other = srv.browser();
    let r = other.post("/login", &[("user", ADMIN_DN), ("password", ADMIN_PW)]);
    assert_eq!(r.status, 403);
    assert!(other.session().is_none());
}

#[test]
fn a_login_gets_a_new_session_id() {
    let srv = Served::start(|_| {});
    let mut b = srv.browser();
    // An attacker plants a session id of their choosing before the victim logs in.
    b.cookies.insert(
        "linden_session".into(),
        "0123456789abcdef0123456789abcdef".into(),
    );
    assert_eq!(b.login(ALICE, "alice-pw").status, 303);
    let id = b.session().expect("session");
    assert_ne!(id, "0123456789abcdef0123456789abcdef");
    assert_eq!(id.len(), 32, "128 random bits as hex");
    // The planted id does not open the victim's session.
    let mut attacker = srv.browser();
    attacker.cookies.insert(
        "linden_session".into(),
        "0123456789abcdef0123456789abcdef".into(),
    );
    assert_eq!(attacker.get("/tree").status, 303);
    // Logging in again (same browser) gives yet another id; the old one is no longer valid.
    assert_eq!(b.login(ALICE, "alice-pw").status, 303);
    let id2 = b.session().expect("session");
    assert_ne!(id, id2);
    let mut old = srv.browser();
    old.cookies.insert("linden_session".into(), id2.clone());
    assert_eq!(old.get("/tree").status, 200);
}

#[test]
fn idle_sessions_end_with_their_connection() {
    let srv = Served::start(|c| c.console_idle_timeout = 1);
    let before = srv.server.open_connections();
    let mut b = srv.browser();
    assert_eq!(b.login(ALICE, "alice-pw").status, 303);
    // Nothing touches the session: the sweeper ends it and closes its LDAP connection.
    eventually("the idle session's LDAP connection to close", || {
        srv.server.open_connections() == before
    });
    let r = b.get("/tree");
    assert_eq!(r.status, 303);
    assert!(r
        .header("location")
        .is_some_and(|l| l.starts_with("/login")));
}

#[test]
fn the_session_limit_ends_the_one_idle_longest() {
    let srv = Served::start(|c| c.console_max_sessions = 2);
    let mut first = srv.browser();
    let mut second = srv.browser();
    let mut third = srv.browser();
    assert_eq!(first.login(ALICE, "alice-pw").status, 303);
    assert_eq!(second.login(BOB, "bob-pw").status, 303);
    // `first` was used last after `second` logged in: `second` is now idle longest.
    assert_eq!(first.get("/tree").status, 200);
    assert_eq!(third.login(ADMIN_DN, ADMIN_PW).status, 303);
    assert_eq!(
        second.get("/tree").status,
        303,
        "the session idle longest ended"
    );
    assert_eq!(first.get("/tree").status, 200);
    assert_eq!(third.get("/tree").status, 200);
}

#[test]
fn a_plain_listener_must_be_on_loopback() {
    let mut c = server::Config {
        console_listen: Some("0.0.0.0:8080".parse().expect("addr")),
        console_plain_http: true,
        ..server::Config::default()
    };
    let e = c.check().expect_err("refused");
    assert!(
        e.starts_with("console_listen:") && e.contains("loopback"),
        "{e}"
    );
    c.console_listen = Some("[::1]:8080".parse().expect("addr"));
    assert!(c.check().is_ok());
    c.console_listen = Some("0.0.0.0:8443".parse().expect("addr"));
    c.console_plain_http = false;
    assert!(c.check().is_ok());
}

#[test]
fn entry_edit_and_access_control() {
    let srv = Served::start(|_| {});
    let mut admin = srv.browser();
    assert_eq!(admin.login(ADMIN_DN, ADMIN_PW).status, 303);
    let mut b = srv.browser();
    assert_eq!(b.login(ALICE, "alice-pw").status, 303);
    // The entry page groups attributes by the schema; the password is bytes, not text (and
    // only for those who may read it).
    assert!(!b
        .get(&format!("/entry?dn={}", q(ALICE)))
        .body
        .contains("userPassword"));
    let page = admin.get(&format!("/entry?dn={}", q(ALICE)));
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Required attributes") && page.body.contains("Allowed attributes"));
    assert!(
        page.body.contains("bytes <a href=\"/value?"),
        "userPassword as a download: {}",
        page.body
    );
    assert!(!page.body.contains("{ARGON2}"), "the hash is not shown");
    assert!(!page.body.contains("entryUUID"));
    assert!(b
        .get(&format!("/entry?dn={}&ops=1", q(ALICE)))
        .body
        .contains("entryUUID"));
    // The edit form offers what the classes allow; alice may not change her own cn under
    // the access rules: the server's message is shown next to the form.
    let form = b.get(&format!("/edit?dn={}", q(ALICE)));
    assert!(
        form.body.contains("name=\"a.cn\"") && form.body.contains("name=\"a.telephoneNumber\"")
    );
    let csrf = form.hidden("csrf");
    let r = b.post(
        "/edit",
        &[
            ("csrf", &csrf),
            ("dn", ALICE),
            ("a.cn", "Alice"),
            ("a.sn", "Liddell"),
        ],
    );
    assert_eq!(r.status, 422);
    assert!(
        r.body.contains("InsufficientAccessRights (50)"),
        "{}",
        r.body
    );
    assert_eq!(srv.attr(ALICE, "cn"), vec!["Alice Liddell"]);
    // The administrator may: the change is there over LDAP.
    let csrf = admin.csrf();
    let r = admin.post(
        "/edit",
        &[
            ("csrf", &csrf),
            ("dn", ALICE),
            ("a.cn", "Alice"),
            ("a.sn", "Liddell"),
            ("a.mail", "alice@example.com\nal@example.com"),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(srv.attr(ALICE, "cn"), vec!["Alice"]);
    let mut mail = srv.attr(ALICE, "mail");
    mail.sort();
    assert_eq!(mail, vec!["al@example.com", "alice@example.com"]);
    // A schema violation: the server's message names the attribute, shown beside its field.
    let r = admin.post("/edit", &[("csrf", &csrf), ("dn", ALICE), ("a.sn", "")]);
    assert_eq!(r.status, 422);
    assert!(r.body.contains("ObjectClassViolation (65)"), "{}", r.body);
    assert!(
        r.body.contains("id=\"a-sn-error\""),
        "the message beside sn: {}",
        r.body
    );
}

#[test]
fn create_rename_and_delete() {
    let srv = Served::start(|_| {});
    let mut b = srv.browser();
    assert_eq!(b.login(ADMIN_DN, ADMIN_PW).status, 303);
    let csrf = b.csrf();
    // A person from the template.
    let page = b.get("/create?template=person&parent=ou%3Dpeople%2Cdc%3Dexample%2Cdc%3Dcom");
    assert!(page.body.contains("name=\"a.uid\"") && page.body.contains("name=\"a.userPassword\""));
    let r = b.post(
        "/create",
        &[
            ("csrf", &csrf),
            ("template", "person"),
            ("parent", "ou=people,dc=example,dc=com"),
            ("a.uid", "carol"),
            ("a.cn", "Carol C"),
            ("a.sn", "C"),
            ("a.userPassword", "carol-pw"),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let carol = "uid=carol,ou=people,dc=example,dc=com";
    assert_eq!(
        r.header("location").map(str::to_string),
        Some(format!("/entry?dn={}", q(carol)))
    );
    let mut c = ldap3::LdapConn::new(&srv.url).expect("connect");
    assert_eq!(
        c.simple_bind(carol, "carol-pw").expect("bind").rc,
        0,
        "the new person binds"
    );
    // A missing required attribute: the server's refusal, shown.
    let r = b.post(
        "/create",
        &[
            ("csrf", &csrf),
            ("template", "person"),
            ("parent", "ou=people,dc=example,dc=com"),
            ("a.uid", "dave"),
            ("a.cn", "Dave"),
        ],
    );
    assert_eq!(r.status, 422);
    assert!(r.body.contains("ObjectClassViolation"), "{}", r.body);
    // Any object class: the form lists its required attributes.
    let page =
        b.get("/create?template=class&class=organizationalRole&parent=dc%3Dexample%2Cdc%3Dcom");
    assert!(page.body.contains("name=\"a.cn\""), "{}", page.body);
    // An organizational unit with an entry in it; rename and move.
    let r = b.post(
        "/create",
        &[
            ("csrf", &csrf),
            ("template", "ou"),
            ("parent", "dc=example,dc=com"),
            ("a.ou", "staff"),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let r = b.post(
        "/rename",
        &[
            ("csrf", &csrf),
            ("dn", carol),
            ("rdn", "uid=caroline"),
            ("parent", "ou=staff,dc=example,dc=com"),
            ("delete_old", "1"),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let moved = "uid=caroline,ou=staff,dc=example,dc=com";
    assert_eq!(srv.attr(moved, "uid"), vec!["caroline"]);
    // Deleting ou=staff lists what it holds first, then deletes the subtree.
    let page = b.get("/delete?dn=ou%3Dstaff%2Cdc%3Dexample%2Cdc%3Dcom");
    assert!(
        page.body.contains(moved) && page.body.contains("name=\"subtree\" value=\"1\""),
        "{}",
        page.body
    );
    let r = b.post(
        "/delete",
        &[
            ("csrf", &csrf),
            ("dn", "ou=staff,dc=example,dc=com"),
            ("subtree", "1"),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(srv.attr("ou=staff,dc=example,dc=com", "ou").is_empty());
    assert!(srv.attr(moved, "uid").is_empty());
}

#[test]
fn search_pages_and_exports() {
    let srv = Served::start(|_| {});
    {
        let mut c = srv.admin();
        for i in 0..150 {
            c.add(
                &format!("cn=item {i},ou=groups,dc=example,dc=com"),
                vec![
                    ("objectClass", ["organizationalRole"].into()),
                    ("cn", [format!("item {i}").as_str()].into()),
                ],
            )
            .expect("add")
            .success()
            .expect("item");
        }
        c.modify(ALICE, vec![Mod::Replace("description", ["findme"].into())])
            .expect("modify")
            .success()
            .expect("ok");
    }
    let mut b = srv.browser();
    assert_eq!(b.login(ALICE, "alice-pw").status, 303);
    // The builder: one condition.
    let r = b.get("/search?base=dc%3Dexample%2Cdc%3Dcom&scope=sub&a0=description&m0=eq&v0=findme&filter=&attrs=cn");
    assert_eq!(r.status, 200);
    assert!(
        r.body.contains("<code>(description=findme)</code>") && r.body.contains(">Alice Liddell<"),
        "{}",
        r.body
    );
    // 150 entries: a first page of 100, then the rest.
    let r = b.get("/search?base=ou%3Dgroups%2Cdc%3Dexample%2Cdc%3Dcom&scope=one&filter=%28cn%3Ditem*%29&attrs=cn");
    assert!(r.body.contains("100 entries on this page"), "{}", r.body);
    let i = r.body.find("id=\"next-page\" href=\"").expect("next link")
        + "id=\"next-page\" href=\"".len();
    let next = r.body[i..i + r.body[i..].find('"').expect("end")].replace("&amp;", "&");
    let r2 = b.get(&next);
    assert!(r2.body.contains("50 entries on this page"), "{}", r2.body);
    // The LDIF export holds all 150.
    let r = b.get(
        "/search.ldif?base=ou%3Dgroups%2Cdc%3Dexample%2Cdc%3Dcom&scope=one&filter=%28cn%3Ditem*%29",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body.matches("\ndn: cn=item ").count(), 150);
    // A bad filter: said so.
    let r = b.get("/search?base=dc%3Dexample%2Cdc%3Dcom&filter=%28cn%3D");
    assert_eq!(r.status, 422);
    // The tree pages children 100 at a time.
    let t = b.get("/tree?dn=ou%3Dgroups%2Cdc%3Dexample%2Cdc%3Dcom");
    assert_eq!(t.body.matches("<li><span class=\"mark\"").count(), 100);
    assert!(t.body.contains("rel=\"next\""));
}

#[test]
fn groups_members_and_member_of() {
    let srv = Served::start(|c| c.memberof = true);
    let mut b = srv.browser();
    assert_eq!(b.login(ADMIN_DN, ADMIN_PW).status, 303);
    let csrf = b.csrf();
    // A group from the template, with bob as its first member.
    let r = b.post(
        "/create",
        &[
            ("csrf", &csrf),
            ("template", "group"),
            ("parent", "ou=groups,dc=example,dc=com"),
            ("a.cn", "staff"),
            ("a.member", BOB),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let group = "cn=staff,ou=groups,dc=example,dc=com";
    assert!(b.get("/groups").body.contains(&q(group)));
    // The picker finds alice by part of her name; adding her is one modify.
    let page = b.get(&format!("/group?dn={}&find=lidd", q(group)));
    assert!(
        page.body.contains("id=\"picked\"") && page.body.contains("aria-label=\"Add uid=alice"),
        "{}",
        page.body
    );
    let r = b.post(
        "/group",
        &[
            ("csrf", &csrf),
            ("dn", group),
            ("op", "add"),
            ("member", ALICE),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let mut members = srv.attr(group, "member");
    members.sort();
    assert_eq!(members, vec![ALICE, BOB]);
    assert_eq!(
        srv.attr(ALICE, "memberOf"),
        vec![group],
        "the memberof overlay ran"
    );
    // A person's groups: memberOf and the groups naming them.
    let page = b.get(&format!("/groups?member={}", q(ALICE)));
    assert!(
        page.body.contains("id=\"member-of\"") && page.body.contains(&q(group)),
        "{}",
        page.body
    );
    // Removing a member.
    let r = b.post(
        "/group",
        &[
            ("csrf", &csrf),
            ("dn", group),
            ("op", "remove"),
            ("member", BOB),
        ],
    );
    assert_eq!(r.status, 303);
    assert_eq!(srv.attr(group, "member"), vec![ALICE]);
    assert!(srv.attr(BOB, "memberOf").is_empty());
    // Removing the last member breaks groupOfNames: the server's refusal is shown.
    let r = b.post(
        "/group",
        &[
            ("csrf", &csrf),
            ("dn", group),
            ("op", "remove"),
            ("member", ALICE),
        ],
    );
    assert_eq!(r.status, 422);
    assert!(r.body.contains("ObjectClassViolation"), "{}", r.body);
}

#[test]
fn password_reset_and_schema() {
    let srv = Served::start(|_| {});
    let mut b = srv.browser();
    assert_eq!(b.login(ADMIN_DN, ADMIN_PW).status, 303);
    let csrf = b.csrf();
    // Two different new passwords: refused before anything is sent.
    let r = b.post(
        "/password",
        &[
            ("csrf", &csrf),
            ("dn", ALICE),
            ("new", "a"),
            ("confirm", "b"),
        ],
    );
    assert_eq!(r.status, 422);
    // A reset: the new password binds, the old one no longer does.
    let r = b.post(
        "/password",
        &[
            ("csrf", &csrf),
            ("dn", ALICE),
            ("new", "new-alice-pw"),
            ("confirm", "new-alice-pw"),
        ],
    );
    assert_eq!(r.status, 200);
    assert!(r.body.contains("id=\"form-ok\""), "{}", r.body);
    let bind = |pw: &str| {
        ldap3::LdapConn::new(&srv.url)
            .expect("connect")
            .simple_bind(ALICE, pw)
            .expect("bind")
            .rc
    };
    assert_eq!(bind("new-alice-pw"), 0);
    assert_eq!(bind("alice-pw"), 49);
    // A generated password, shown once, binds.
    let r = b.post(
        "/password",
        &[("csrf", &csrf), ("dn", BOB), ("new", ""), ("confirm", "")],
    );
    let i = r.body.find("<code id=\"generated\">").expect("generated")
        + "<code id=\"generated\">".len();
    let generated = &r.body[i..i + r.body[i..].find('<').expect("end")];
    assert_eq!(
        ldap3::LdapConn::new(&srv.url)
            .expect("connect")
            .simple_bind(BOB, generated)
            .expect("bind")
            .rc,
        0
    );
    // Bob may not reset alice's password: the server's refusal is shown.
    let mut bob = srv.browser();
    assert_eq!(bob.login(BOB, generated).status, 303);
    let csrf = bob.csrf();
    let r = bob.post(
        "/password",
        &[
            ("csrf", &csrf),
            ("dn", ALICE),
            ("new", "x-pw"),
            ("confirm", "x-pw"),
        ],
    );
    assert_eq!(r.status, 422);
    assert!(r.body.contains("InsufficientAccessRights"), "{}", r.body);
    // The schema, searched.
    let r = bob.get("/schema?q=inetorgperson");
    assert!(
        r.body.contains("<dt>inetOrgPerson</dt>") && !r.body.contains("<dt>groupOfNames</dt>"),
        "{}",
        r.body
    );
}

#[test]
fn the_dashboard_reads_cn_monitor_as_the_user() {
    let srv = Served::start(|_| {});
    let mut b = srv.browser();
    assert_eq!(b.login(ALICE, "alice-pw").status, 303);
    // Alice is not a monitor reader: cn=Monitor is hidden from her, and so are its figures.
    let r = b.get("/api/monitor");
    assert_eq!(r.status, 403);
    assert!(r.body.contains("monitor_readers"), "{}", r.body);
    assert!(b.get("/dashboard").body.contains("id=\"chart-ops\""));
    let mut admin = srv.browser();
    assert_eq!(admin.login(ADMIN_DN, ADMIN_PW).status, 303);
    let first = admin.get("/api/monitor");
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_str(&first.body).expect("JSON");
    let searches = |v: &serde_json::Value| -> u64 {
        v["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .find(|e| e["dn"] == "cn=Search,cn=Operations,cn=Monitor")
            .and_then(|e| e["a"]["monitorOpCompleted"].as_str())
            .and_then(|s| s.parse().ok())
            .expect("searches completed")
    };
    let before = searches(&v);
    // Searches by an LDAP client show in the next reading.
    let mut c = srv.admin();
    for _ in 0..5 {
        c.search(
            "dc=example,dc=com",
            Scope::Base,
            "(objectClass=*)",
            vec!["1.1"],
        )
        .expect("search");
    }
    let v: serde_json::Value = serde_json::from_str(&admin.get("/api/monitor").body).expect("JSON");
    assert!(
        searches(&v) >= before + 5,
        "{} then {}",
        before,
        searches(&v)
    );
    // Not logged in: 401, not a redirect to a page.
    assert_eq!(srv.browser().get("/api/monitor").status, 401);
}

#[test]
fn a_second_login_page_keeps_the_first_form_valid() {
    // A browser asks for /favicon.ico (and a user may open a second tab) after the login page:
    // the first page's form must still be accepted.
    let srv = Served::start(|_| {});
    let mut b = srv.browser();
    let first = b.get("/login");
    assert_eq!(
        b.get("/favicon.ico").status,
        404,
        "not a redirect to a new login page"
    );
    assert_eq!(b.get("/login").status, 200);
    let token = first.hidden("login_token");
    let r = b.post(
        "/login",
        &[
            ("login_token", &token),
            ("user", "alice"),
            ("password", "alice-pw"),
        ],
    );
    assert_eq!(r.status, 303, "{}", r.body);
}

#[test]
fn the_configuration_page_hides_secrets_and_needs_monitor_rights() {
    let srv = Served::start(|c| {
        c.admin_password = Some(server::config::Hidden("cleartext-secret".into()))
    });
    let mut alice = srv.browser();
    assert_eq!(alice.login(ALICE, "alice-pw").status, 303);
    let r = alice.get("/config");
    assert_eq!(r.status, 403);
    assert!(!r.body.contains("console_idle_timeout"));
    let mut admin = srv.browser();
    assert_eq!(admin.login(ADMIN_DN, ADMIN_PW).status, 303);
    let r = admin.get("/config");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body
            .contains("<code>console_idle_timeout</code></td><td>900</td><td>live</td>"),
        "{}",
        r.body
    );
    assert!(
        r.body
            .contains("<code>admin_password</code></td><td>(hidden)</td>"),
        "{}",
        r.body
    );
    assert!(!r.body.contains("cleartext-secret"));
    assert!(r.body.contains("id=\"last-reload\""));
}

/// The audit page: the administrator sees the change just made, newest first; anyone else
/// gets 403 and why; with the audit log off, the page says how to turn it on.
#[test]
fn the_audit_page_shows_recent_changes_to_the_administrator_only() {
    let logs = tempfile::tempdir().expect("tmp");
    let file = logs.path().join("audit.log");
    let path = file.clone();
    let srv = Served::start(move |c| c.audit_log = server::logs::LogTarget::File(path));
    let mut c = srv.admin();
    c.modify(
        ALICE,
        vec![Mod::Replace(
            "description",
            std::collections::HashSet::from(["audit-marker-1"]),
        )],
    )
    .expect("modify")
    .success()
    .expect("modified");
    let mut admin = srv.browser();
    assert_eq!(admin.login(ADMIN_DN, ADMIN_PW).status, 303);
    let deadline = Instant::now() + Duration::from_secs(20);
    let page = loop {
        let r = admin.get("/audit");
        assert_eq!(r.status, 200, "{}", r.body);
        if r.body.contains("description: audit-marker-1") {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "the change never showed: {}",
            r.body
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        page.body.contains(&file.display().to_string()),
        "{}",
        page.body
    );
    // Newest first: the modify before the adds that populated the directory.
    let modify = page.body.find("audit-marker-1").expect("the modify");
    let add = page
        .body
        .find("changetype: add")
        .expect("the populating adds");
    assert!(modify < add, "{}", page.body);
    // Each record says who made it, when and from where.
    assert!(
        page.body.contains(" by=") && page.body.contains(" client=127.0.0.1:"),
        "{}",
        page.body
    );

    // Anyone else: 403, with the reason, and nothing of the log.
    let mut alice = srv.browser();
    assert_eq!(alice.login(ALICE, "alice-pw").status, 303);
    let r = alice.get("/audit");
    assert_eq!(r.status, 403);
    assert!(r.body.contains("administrator"), "{}", r.body);
    assert!(!r.body.contains("audit-marker-1"));

    // With the audit log off: how to turn it on.
    let off = Served::start(|_| {});
    let mut admin = off.browser();
    assert_eq!(admin.login(ADMIN_DN, ADMIN_PW).status, 303);
    let r = admin.get("/audit");
    assert_eq!(r.status, 200);
    assert!(
        r.body.contains("The audit log is off") && r.body.contains("audit_log"),
        "{}",
        r.body
    );
}

/// Served over HTTPS with the server's certificate (`tls_cert`, `tls_key`): a client trusting
/// the certificate's CA completes the handshake, and the cookies carry `Secure` (not so over
/// plain HTTP on loopback: `login_pages_and_logout`).
#[test]
fn https_with_the_servers_certificate_and_secure_cookies() {
    use common::pki::{subject, TestCa};
    let pki = tempfile::tempdir().expect("tmp");
    let ca = TestCa::new(subject(&[(
        rcgen::DnType::CommonName,
        "Linden console test CA",
    )]));
    let (cert, key) = ca.issue(
        subject(&[(rcgen::DnType::CommonName, "127.0.0.1")]),
        vec![rcgen::SanType::IpAddress(
            std::net::Ipv4Addr::LOCALHOST.into(),
        )],
    );
    let (cert_path, key_path) = (pki.path().join("server.pem"), pki.path().join("server.key"));
    std::fs::write(&cert_path, cert.pem()).expect("write");
    std::fs::write(&key_path, key.serialize_pem()).expect("write");
    let srv = Served::start(move |c| {
        c.console_plain_http = false;
        c.tls_cert = Some(cert_path);
        c.tls_key = Some(key_path);
    });
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert.der().clone()).expect("root");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut b = srv.browser();
    b.tls = Some(Arc::new(config));
    let page = b.get("/login");
    assert_eq!(page.status, 200);
    assert!(page
        .set_cookies()
        .iter()
        .any(|c| c.starts_with("linden_login=") && c.contains("Secure")));
    let r = b.login(ALICE, "alice-pw");
    assert_eq!(r.status, 303, "{}", r.body);
    let cookie = r
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("linden_session="))
        .expect("session cookie")
        .to_string();
    assert!(
        cookie.contains("Secure")
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let tree = b.get("/tree");
    assert_eq!(tree.status, 200, "{}", tree.body);
    assert!(tree.body.contains("dc=example,dc=com"));

    // A client that does not trust the CA does not complete the handshake.
    let untrusting = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let mut tcp = std::net::TcpStream::connect(srv.console).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let name = rustls::pki_types::ServerName::IpAddress(srv.console.ip().into());
    let mut conn = rustls::ClientConnection::new(Arc::new(untrusting), name).expect("tls");
    let mut handshake = Ok((0, 0));
    while conn.is_handshaking() && handshake.is_ok() {
        handshake = conn.complete_io(&mut tcp);
    }
    assert!(
        handshake.is_err(),
        "a client without the CA completed the handshake"
    );
}
