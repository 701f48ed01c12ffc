//! The web console (`console_listen`, off by default): pages to browse, search and edit the
//! directory, served over HTTPS with the server's certificate (or plain HTTP on a loopback
//! address, `console_plain_http`). docs/console.md lists the pages and their URLs.
//!
//! - `client`: every action is an LDAP operation on a connection to this server served
//!   in-process, bound as the logged-in identity (no second way to read or change data).
//! - `sessions`: the session cookie, its CSRF token, the idle timeout and the session limit.
//! - `pages`: the HTML of each page (escaped on output; no inline script or style).
//! - `audit`: the recent records of the audit log file, read from its end (the audit page).
//! - `assets/`: one style sheet and one script, embedded in the binary.
//!
//! Served by hyper (HTTP/1.1) as `/metrics` is: at most `MAX_CONNECTIONS` connections at once,
//! each bounded by `CONNECTION_TIMEOUT`, headers by `HEADER_TIMEOUT`, a form by
//! `MAX_FORM_BYTES`. Every response carries a strict Content-Security-Policy, `X-Frame-Options:
//! DENY` and `Cache-Control: no-store`.

mod audit;
pub mod client;
mod pages;
pub mod sessions;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

use crate::state::Shared;
use client::Client;
use sessions::Sessions;

/// HTTP connections served at once; more wait in the kernel's accept queue.
pub const MAX_CONNECTIONS: usize = 256;
/// The longest one HTTP connection is kept (keep-alive included).
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a client may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest form (request body) accepted.
pub const MAX_FORM_BYTES: usize = 1 << 20;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "linden_session";
/// The cookie holding the login form's token (login CSRF: a form posted from elsewhere has
/// no matching cookie).
pub const LOGIN_COOKIE: &str = "linden_login";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

/// The console: the server it acts on and its sessions.
pub struct Console {
    pub(crate) shared: Arc<Shared>,
    pub sessions: Sessions,
    /// Served over HTTPS (cookies get `Secure`, the LDAP connections count as protected).
    pub https: bool,
}

pub(crate) type Resp = Response<Full<Bytes>>;

/// Accepts console connections on `listener` until the task is dropped.
pub(crate) async fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let https = !shared.config().console_plain_http;
    let console = Arc::new(Console {
        shared,
        sessions: Sessions::default(),
        https,
    });
    // Ends idle sessions (and their LDAP connections) even if their browser never returns.
    let sweeper = {
        let console = console.clone();
        tokio::spawn(async move {
            loop {
                let idle = console.idle();
                tokio::time::sleep(
                    (idle / 2).clamp(Duration::from_millis(500), Duration::from_secs(30)),
                )
                .await;
                console.sessions.sweep(console.idle());
            }
        })
    };
    let _sweeper = AbortOnDrop(sweeper);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                crate::accept_failed(e).await;
                continue;
            }
        };
        let console = console.clone();
        tokio::spawn(async move {
            let _ =
                tokio::time::timeout(CONNECTION_TIMEOUT, console.clone().connection(stream, peer))
                    .await;
            drop(slot);
        });
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Console {
    fn idle(&self) -> Duration {
        Duration::from_secs(self.shared.config().console_idle_timeout.max(1))
    }

    async fn connection(self: Arc<Self>, stream: tokio::net::TcpStream, peer: SocketAddr) {
        if self.https {
            let Some(tls) = self.shared.live.load().tls.clone() else {
                tracing::warn!(%peer, "console: no TLS certificate to serve HTTPS with");
                return;
            };
            let accept = tokio_rustls::TlsAcceptor::from(tls).accept(stream);
            match tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, accept).await {
                Ok(Ok(tls)) => self.http(tls, peer).await,
                Ok(Err(e)) => tracing::debug!(%peer, "console: TLS handshake failed: {e}"),
                Err(_) => tracing::debug!(%peer, "console: TLS handshake timed out"),
            }
        } else {
            self.http(stream, peer).await
        }
    }

    async fn http<S>(self: Arc<Self>, stream: S, peer: SocketAddr)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
            let console = self.clone();
            async move { Ok::<_, Infallible>(console.handle(req, peer).await) }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
            .await;
    }

    async fn handle(
        self: Arc<Self>,
        req: Request<hyper::body::Incoming>,
        peer: SocketAddr,
    ) -> Resp {
        let mut r = self.route(req, peer).await;
        let h = r.headers_mut();
        h.insert("content-security-policy", HeaderValue::from_static(CSP));
        h.insert("x-frame-options", HeaderValue::from_static("DENY"));
        h.insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    }

    async fn route(
        self: &Arc<Self>,
        req: Request<hyper::body::Incoming>,
        peer: SocketAddr,
    ) -> Resp {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let target = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        let query = parse_form(req.uri().query().unwrap_or("").as_bytes());
        let cookies = cookies(req.headers());
        let origin_ok = self.same_origin(req.headers());
        match (&method, path.as_str()) {
            (&Method::GET, "/assets/console.css") => return asset("text/css; charset=utf-8", CSS),
            (&Method::GET, "/assets/console.js") => {
                return asset("text/javascript; charset=utf-8", JS)
            }
            (&Method::GET, "/favicon.ico") => return text(StatusCode::NOT_FOUND, "no icon\n"),
            _ => {}
        }
        if method != Method::GET && method != Method::POST && method != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and POST\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD, POST"));
            return r;
        }
        let form = if method == Method::POST {
            if !origin_ok {
                return self.refused(
                    "This form came from another site (its Origin is not this console's): refused.",
                );
            }
            let form_type = req
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
            if !form_type {
                return text(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "a form (application/x-www-form-urlencoded) is expected\n",
                );
            }
            match Limited::new(req.into_body(), MAX_FORM_BYTES)
                .collect()
                .await
            {
                Ok(b) => parse_form(&b.to_bytes()),
                Err(_) => {
                    return text(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "the form is larger than the console accepts (1 MiB)\n",
                    )
                }
            }
        } else {
            Form::default()
        };
        if path == "/login" {
            return if method == Method::POST {
                self.login(&form, &cookies, peer).await
            } else {
                self.login_page(
                    query.get("next"),
                    None,
                    StatusCode::OK,
                    cookies.get(LOGIN_COOKIE),
                )
            };
        }
        let session = cookies
            .get(SESSION_COOKIE)
            .and_then(|id| self.sessions.get(id, self.idle()));
        let Some(session) = session else {
            if path.starts_with("/api/") {
                return text(StatusCode::UNAUTHORIZED, "log in first\n");
            }
            let next = if method == Method::GET {
                target.as_str()
            } else {
                "/"
            };
            return redirect(&format!("/login?next={}", enc(next)));
        };
        if method == Method::POST {
            let ok = form
                .get("csrf")
                .is_some_and(|t| sessions::same_token(t, &session.csrf));
            if !ok {
                tracing::info!(%peer, dn = %session.dn, "console: form refused: CSRF token missing or wrong");
                return self.refused("This form has no valid token for your session (CSRF protection): refused. Reload the page and try again.");
            }
            if path == "/logout" {
                if let Some(s) = self.sessions.remove(&session.id) {
                    s.client.lock().await.unbind().await;
                }
                let mut r = redirect("/login");
                set_cookie(
                    &mut r,
                    &format!(
                        "{SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{}",
                        self.secure()
                    ),
                );
                return r;
            }
        }
        let cx = pages::Cx {
            console: self,
            session: &session,
            query: &query,
            form: &form,
            post: method == Method::POST,
        };
        pages::route(cx, &path).await
    }

    /// A POST must come from a page of this console: an `Origin` header, when the browser
    /// sends one, must name this host.
    fn same_origin(&self, h: &hyper::HeaderMap) -> bool {
        let Some(origin) = h.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
            return true;
        };
        let Some(host) = h.get(header::HOST).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let scheme = if self.https { "https" } else { "http" };
        origin == format!("{scheme}://{host}")
    }

    fn secure(&self) -> &'static str {
        if self.https {
            "; Secure"
        } else {
            ""
        }
    }

    fn refused(&self, why: &str) -> Resp {
        html(
            StatusCode::FORBIDDEN,
            pages::layout("Refused", None, &format!("<p class=\"error\" role=\"alert\">{}</p><p><a href=\"/\">Back to the console</a></p>", esc(why))),
        )
    }

    /// The login page. The login token stays the one the browser holds, if any (a second
    /// tab or a stray request must not void the form of the first).
    fn login_page(
        &self,
        next: Option<&String>,
        error: Option<&str>,
        status: StatusCode,
        held: Option<&String>,
    ) -> Resp {
        let token = held
            .filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
            .cloned()
            .unwrap_or_else(sessions::token);
        let body = pages::login(&token, next.map(String::as_str).unwrap_or("/"), error);
        let mut r = html(status, pages::layout("Log in", None, &body));
        set_cookie(
            &mut r,
            &format!(
                "{LOGIN_COOKIE}={token}; Path=/login; HttpOnly; SameSite=Strict{}",
                self.secure()
            ),
        );
        r
    }

    /// A login: the token of the login form, then a bind on a new in-process connection
    /// (a DN: simple bind; otherwise a user id: SASL PLAIN, the server's own lookup); a new
    /// session, with a new id, for the identity bound.
    async fn login(
        self: &Arc<Self>,
        form: &Form,
        cookies: &HashMap<String, String>,
        peer: SocketAddr,
    ) -> Resp {
        let next = form.get("next").cloned();
        let token_ok = match (form.get("login_token"), cookies.get(LOGIN_COOKIE)) {
            (Some(a), Some(b)) => sessions::same_token(a, b),
            _ => false,
        };
        if !token_ok {
            return self.login_page(
                next.as_ref(),
                Some("The login form expired or came from elsewhere: try again."),
                StatusCode::FORBIDDEN,
                cookies.get(LOGIN_COOKIE),
            );
        }
        let user = form.get("user").map(|s| s.trim()).unwrap_or("");
        let password = form.get("password").map(String::as_str).unwrap_or("");
        if user.is_empty() || password.is_empty() {
            return self.login_page(
                next.as_ref(),
                Some("Give a user name or DN and a password."),
                StatusCode::UNAUTHORIZED,
                cookies.get(LOGIN_COOKIE),
            );
        }
        let mut client = Client::open(&self.shared, peer, self.https);
        let bound = if user.contains('=') {
            client.simple_bind(user, password.as_bytes()).await
        } else {
            client.uid_bind(user, password.as_bytes()).await
        };
        let outcome = match bound {
            Ok(o) => o,
            Err(e) => {
                return self.login_page(
                    next.as_ref(),
                    Some(&e.to_string()),
                    StatusCode::SERVICE_UNAVAILABLE,
                    cookies.get(LOGIN_COOKIE),
                )
            }
        };
        if !outcome.ok() {
            return self.login_page(
                next.as_ref(),
                Some(&format!("Login refused: {}", outcome.describe())),
                StatusCode::UNAUTHORIZED,
                cookies.get(LOGIN_COOKIE),
            );
        }
        let dn = match client.whoami().await {
            Ok(dn) if !dn.is_empty() => dn,
            _ => user.to_string(),
        };
        let max = self.shared.config().console_max_sessions;
        let s = self.sessions.create(dn, client, max);
        tracing::info!(%peer, dn = %s.dn, "console: login");
        let to = next
            .filter(|n| n.starts_with('/') && !n.starts_with("//") && !n.starts_with("/login"))
            .unwrap_or_else(|| "/".to_string());
        let mut r = redirect(&to);
        set_cookie(
            &mut r,
            &format!(
                "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict{}",
                s.id,
                self.secure()
            ),
        );
        set_cookie(
            &mut r,
            &format!(
                "{LOGIN_COOKIE}=; Path=/login; Max-Age=0; HttpOnly; SameSite=Strict{}",
                self.secure()
            ),
        );
        r
    }
}

/// A form or query string: the first value of each name.
pub(crate) type Form = HashMap<String, String>;

fn parse_form(b: &[u8]) -> Form {
    let mut f = Form::new();
    for (k, v) in form_urlencoded::parse(b) {
        f.entry(k.into_owned()).or_insert_with(|| v.into_owned());
    }
    f
}

fn cookies(h: &hyper::HeaderMap) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for v in h.get_all(header::COOKIE) {
        let Ok(v) = v.to_str() else { continue };
        for part in v.split(';') {
            if let Some((k, v)) = part.trim().split_once('=') {
                out.entry(k.to_string()).or_insert_with(|| v.to_string());
            }
        }
    }
    out
}

/// Percent-encodes a query value.
pub(crate) fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Escapes text for HTML (element content and quoted attribute values).
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

pub(crate) fn set_cookie(r: &mut Resp, v: &str) {
    if let Ok(v) = HeaderValue::from_str(v) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
}

pub(crate) fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

pub(crate) fn html(status: StatusCode, body: String) -> Resp {
    respond(status, "text/html; charset=utf-8", body)
}

pub(crate) fn text(status: StatusCode, body: &str) -> Resp {
    respond(status, "text/plain; charset=utf-8", body.to_string())
}

fn asset(content_type: &str, body: &'static str) -> Resp {
    respond(
        StatusCode::OK,
        content_type,
        Bytes::from_static(body.as_bytes()),
    )
}

/// 303 See Other to `to` (a path of this console).
pub(crate) fn redirect(to: &str) -> Resp {
    let mut r = respond(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "");
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 1024 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
