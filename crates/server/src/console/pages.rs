//! The console's pages. Each reads its query (GET) or form (POST), does its LDAP operations as
//! the session's identity (`client`), and renders HTML with every directory value escaped.
//! Failures show the server's own result (code and message) next to the form.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;

use hyper::StatusCode;
use proto::{Filter, ModOp, Scope};
use schema::Schema;

use super::client::{ClientError, Entry, Outcome, Query};
use super::sessions::Session;
use super::{enc, esc, hex, html, redirect, respond, unhex, Console, Form, Resp};

/// Entries on one page of the tree or of search results.
pub const PAGE_SIZE: u32 = 100;
/// Entries the subtree listing of the delete page shows at most.
pub const DELETE_LISTING: usize = 100;
/// Entries one LDIF export holds at most.
pub const MAX_EXPORT_ENTRIES: usize = 10_000;

/// Syntaxes whose values are not text: shown as a size and a download, never inline.
const BINARY_SYNTAXES: &[&str] = &[
    "1.3.6.1.4.1.1466.115.121.1.4",  // Audio
    "1.3.6.1.4.1.1466.115.121.1.5",  // Binary
    "1.3.6.1.4.1.1466.115.121.1.8",  // Certificate
    "1.3.6.1.4.1.1466.115.121.1.9",  // Certificate List
    "1.3.6.1.4.1.1466.115.121.1.10", // Certificate Pair
    "1.3.6.1.4.1.1466.115.121.1.28", // JPEG
    "1.3.6.1.4.1.1466.115.121.1.40", // Octet String (userPassword)
];

/// An attribute of an entry: its name and values.
type Attr = (String, Vec<Vec<u8>>);

/// What one request brings to its page.
pub(crate) struct Cx<'a> {
    pub console: &'a Arc<Console>,
    pub session: &'a Arc<Session>,
    pub query: &'a Form,
    pub form: &'a Form,
    pub post: bool,
}

impl Cx<'_> {
    fn q(&self, k: &str) -> &str {
        self.query.get(k).map(String::as_str).unwrap_or("")
    }
    fn f(&self, k: &str) -> &str {
        self.form.get(k).map(String::as_str).unwrap_or("")
    }
    fn schema(&self) -> Arc<Schema> {
        self.console.shared.store.read().schema().clone()
    }
    fn page(&self, title: &str, body: &str) -> Resp {
        html(StatusCode::OK, layout(title, Some(self.session), body))
    }
    fn csrf(&self) -> String {
        format!(
            "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
            esc(&self.session.csrf)
        )
    }
    /// The page of a paged search (`PAGE_SIZE` entries, Simple Paged Results) that the
    /// request's `page=` cookie asks for, run on `c` (the session's connection, locked by the
    /// caller); a broken connection gives the page to answer instead.
    async fn search_page(
        &self,
        c: &mut super::client::Client,
        base: &str,
        scope: Scope,
        filter: Filter<'static>,
        attrs: &[&str],
    ) -> Result<super::client::Found, Resp> {
        let cookie = unhex(self.q("page")).unwrap_or_default();
        c.search(&Query {
            base,
            scope,
            filter,
            attrs,
            page: PAGE_SIZE,
            cookie: &cookie,
            max_entries: PAGE_SIZE as usize,
        })
        .await
        .map_err(|e| self.broken(e))
    }
    /// The page for an LDAP connection that failed (not a result the server gave).
    fn broken(&self, e: ClientError) -> Resp {
        if matches!(e, ClientError::Closed) {
            self.console.sessions.remove(&self.session.id);
        }
        html(
            StatusCode::BAD_GATEWAY,
            layout(
                "Directory unavailable",
                None,
                &format!(
                    "<p class=\"error\" role=\"alert\">{}</p><p><a href=\"/login\">Log in again</a></p>",
                    esc(&e.to_string())
                ),
            ),
        )
    }
}

pub(crate) async fn route(cx: Cx<'_>, path: &str) -> Resp {
    match path {
        "/" => redirect("/tree"),
        "/tree" => tree(&cx).await,
        "/entry" => entry(&cx).await,
        "/value" => value(&cx).await,
        "/edit" => edit(&cx).await,
        "/create" => create(&cx).await,
        "/rename" => rename(&cx).await,
        "/delete" => delete(&cx).await,
        "/search" => search(&cx).await,
        "/search.ldif" => export(&cx).await,
        "/groups" => groups(&cx).await,
        "/group" => group(&cx).await,
        "/password" => password(&cx).await,
        "/schema" => schema_page(&cx).await,
        "/dashboard" => dashboard(&cx).await,
        "/config" => config_page(&cx).await,
        "/audit" => audit_page(&cx).await,
        "/api/monitor" => monitor_json(&cx).await,
        _ => html(
            StatusCode::NOT_FOUND,
            layout(
                "Not found",
                Some(cx.session),
                "<p>No such page. <a href=\"/tree\">Browse the directory</a>.</p>",
            ),
        ),
    }
}

/// The frame of every page: the navigation (when logged in), the title, the body.
pub(crate) fn layout(title: &str, session: Option<&Arc<Session>>, body: &str) -> String {
    let mut nav = String::new();
    if let Some(s) = session {
        let _ = write!(
            nav,
            "<nav aria-label=\"Console\"><a class=\"brand\" href=\"/tree\">Linden</a>\
             <ul><li><a href=\"/tree\">Tree</a></li><li><a href=\"/search\">Search</a></li>\
             <li><a href=\"/create\">New entry</a></li><li><a href=\"/groups\">Groups</a></li>\
             <li><a href=\"/password\">Password</a></li><li><a href=\"/schema\">Schema</a></li>\
             <li><a href=\"/dashboard\">Dashboard</a></li><li><a href=\"/config\">Configuration</a></li>\
             <li><a href=\"/audit\">Audit log</a></li></ul>\
             <form method=\"post\" action=\"/logout\" class=\"logout\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <span class=\"who\" title=\"Logged in as\">{}</span> \
             <button type=\"submit\">Log out</button></form></nav>",
            esc(&s.csrf),
            esc(&s.dn)
        );
    }
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{t} — Linden console</title><link rel=\"stylesheet\" href=\"/assets/console.css\">\
         <script src=\"/assets/console.js\" defer></script></head><body>\
         <a class=\"skip\" href=\"#main\">Skip to content</a>{nav}\
         <main id=\"main\"><h1>{t}</h1>{body}</main></body></html>",
        t = esc(title)
    )
}

pub(crate) fn login(token: &str, next: &str, error: Option<&str>) -> String {
    let mut b = String::new();
    if let Some(e) = error {
        let _ = write!(
            b,
            "<p class=\"error\" role=\"alert\" id=\"login-error\">{}</p>",
            esc(e)
        );
    }
    let _ = write!(
        b,
        "<form method=\"post\" action=\"/login\" class=\"card narrow\">\
         <input type=\"hidden\" name=\"login_token\" value=\"{}\">\
         <input type=\"hidden\" name=\"next\" value=\"{}\">\
         <label for=\"user\">User id or DN</label>\
         <input id=\"user\" name=\"user\" autocomplete=\"username\" required autofocus>\
         <label for=\"password\">Password</label>\
         <input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" required>\
         <button type=\"submit\">Log in</button></form>",
        esc(token),
        esc(next)
    );
    b
}

/// The link to the page after `found` (`href`, HTML-escaped, with the `page=` cookie added),
/// or nothing after the last page.
fn next_page_link(found: &super::client::Found, href: &str, text: &str) -> String {
    if found.next.is_empty() {
        return String::new();
    }
    format!(
        "<p><a rel=\"next\" id=\"next-page\" href=\"{href}&amp;page={}\">{text}</a></p>",
        hex(&found.next)
    )
}

fn result_note(o: &Outcome) -> String {
    format!(
        "<p class=\"error\" role=\"alert\">{}</p>",
        esc(&o.describe())
    )
}

fn dn_link(dn: &str) -> String {
    format!("<a href=\"/entry?dn={}\">{}</a>", enc(dn), esc(dn))
}

fn parent_of(dn: &str) -> String {
    split_rdn(dn).1
}

/// The first RDN of `dn` and the rest (an escaped comma does not split).
fn split_rdn(dn: &str) -> (String, String) {
    let b = dn.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b',' => return (dn[..i].trim().to_string(), dn[i + 1..].trim().to_string()),
            _ => i += 1,
        }
    }
    (dn.trim().to_string(), String::new())
}

/// Escapes an attribute value for an RDN (RFC 4514).
fn rdn_value(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        match c {
            ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=' => {
                o.push('\\');
                o.push(c)
            }
            '#' | ' ' if i == 0 => {
                o.push('\\');
                o.push(c)
            }
            c => o.push(c),
        }
    }
    if o.ends_with(' ') {
        o.pop();
        o.push_str("\\ ");
    }
    o
}

fn scope_of(s: &str) -> Scope {
    match s {
        "base" => Scope::Base,
        "one" => Scope::One,
        _ => Scope::Subtree,
    }
}

fn every() -> Filter<'static> {
    Filter::Present(Cow::Borrowed(b"objectClass"))
}

/// The attribute types of object classes `classes` (and their superclasses): (MUST, MAY).
fn allowed(schema: &Schema, classes: &[String]) -> (Vec<String>, Vec<String>) {
    let ids: Vec<_> = classes
        .iter()
        .filter_map(|c| schema.class_by_name(c))
        .collect();
    let mut must = Vec::new();
    let mut may = Vec::new();
    for c in schema.class_closure(&ids) {
        let oc = schema.class(c);
        for a in &oc.must {
            let n = schema.attr(*a).name().to_string();
            if !must.contains(&n) {
                must.push(n);
            }
        }
        for a in &oc.may {
            let n = schema.attr(*a).name().to_string();
            if !may.contains(&n) {
                may.push(n);
            }
        }
    }
    may.retain(|a| !must.iter().any(|m| m.eq_ignore_ascii_case(a)));
    (must, may)
}

fn contains(list: &[String], name: &str) -> bool {
    list.iter().any(|a| a.eq_ignore_ascii_case(name))
}

/// Whether values of `name` are shown as bytes rather than text.
fn binary_attr(schema: &Schema, name: &str) -> bool {
    let Some(mut id) = schema.attr_by_name(name) else {
        return false;
    };
    for _ in 0..8 {
        let at = schema.attr(id);
        if let Some(s) = at.syntax {
            return BINARY_SYNTAXES.contains(&schema.syntax(s).oid.as_str());
        }
        match at.sup {
            Some(sup) => id = sup,
            None => return false,
        }
    }
    false
}

fn operational(schema: &Schema, name: &str) -> bool {
    schema
        .attr_by_name(name)
        .is_some_and(|id| schema.attr(id).is_operational())
}

fn classes_of(e: &Entry) -> Vec<String> {
    e.get("objectClass")
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// The children of `dn` (the naming contexts without one), a page at a time.
async fn tree(cx: &Cx<'_>) -> Resp {
    let dn = cx.q("dn").to_string();
    let mut c = cx.session.client.lock().await;
    if dn.is_empty() {
        let (root, _) = match c.read("", &["namingContexts"]).await {
            Ok(r) => r,
            Err(e) => return cx.broken(e),
        };
        let mut b = String::from("<p>Naming contexts of this server:</p><ul class=\"tree\">");
        for v in root
            .as_ref()
            .map(|r| r.get("namingContexts"))
            .unwrap_or(&[])
        {
            let n = String::from_utf8_lossy(v);
            let _ = write!(
                b,
                "<li><a href=\"/tree?dn={e}\">{n}</a> <a class=\"small\" href=\"/entry?dn={e}\">entry</a></li>",
                e = enc(&n),
                n = esc(&n)
            );
        }
        b.push_str("</ul>");
        return cx.page("Directory tree", &b);
    }
    let found = match cx
        .search_page(
            &mut c,
            &dn,
            Scope::One,
            every(),
            &["hasSubordinates", "objectClass"],
        )
        .await
    {
        Ok(f) => f,
        Err(r) => return r,
    };
    drop(c);
    let mut b = String::new();
    let _ = write!(b, "<p class=\"crumbs\">{}</p>", crumbs(&dn));
    let _ = write!(
        b,
        "<p class=\"actions\"><a href=\"/entry?dn={e}\">Show this entry</a> \
         <a href=\"/create?parent={e}\">New entry here</a></p>",
        e = enc(&dn)
    );
    if !found.outcome.ok() {
        b.push_str(&result_note(&found.outcome));
    }
    if found.entries.is_empty() && found.outcome.ok() {
        b.push_str("<p>No entries below this one.</p>");
    }
    let _ = write!(b, "<ul class=\"tree\" data-base=\"{}\">", esc(&dn));
    for e in &found.entries {
        let (rdn, _) = split_rdn(&e.dn);
        let more = e
            .first("hasSubordinates")
            .is_some_and(|v| v.eq_ignore_ascii_case("TRUE"));
        let _ = write!(
            b,
            "<li>{mark}<a href=\"/entry?dn={d}\">{r}</a>{open}</li>",
            mark = if more {
                "<span class=\"mark\" aria-hidden=\"true\">▸</span>"
            } else {
                "<span class=\"mark\" aria-hidden=\"true\">·</span>"
            },
            d = enc(&e.dn),
            r = esc(&rdn),
            open = if more {
                format!(" <a class=\"small\" href=\"/tree?dn={}\" aria-label=\"children of {}\">children</a>", enc(&e.dn), esc(&rdn))
            } else {
                String::new()
            }
        );
    }
    b.push_str("</ul>");
    b.push_str(&next_page_link(
        &found,
        &format!("/tree?dn={}", enc(&dn)),
        &format!("Next {PAGE_SIZE} entries"),
    ));
    cx.page("Directory tree", &b)
}

fn crumbs(dn: &str) -> String {
    let mut parts = Vec::new();
    let mut rest = dn.to_string();
    while !rest.is_empty() {
        let (rdn, parent) = split_rdn(&rest);
        parts.push((rdn, rest.clone()));
        rest = parent;
    }
    let mut o = String::from("<a href=\"/tree\">Top</a>");
    for (rdn, full) in parts.iter().rev() {
        let _ = write!(o, " › <a href=\"/tree?dn={}\">{}</a>", enc(full), esc(rdn));
    }
    o
}

/// One entry: its attributes grouped by its object classes' MUST and MAY, operational ones
/// on request; binary values as a size and a download link.
async fn entry(cx: &Cx<'_>) -> Resp {
    let dn = cx.q("dn").to_string();
    let ops = cx.q("ops") == "1";
    // memberOf is operational: asked for by name, it shows with the user attributes.
    let attrs: &[&str] = if ops { &["*", "+"] } else { &["*", "memberOf"] };
    let read = cx.session.client.lock().await.read(&dn, attrs).await;
    let (e, outcome) = match read {
        Ok(r) => r,
        Err(e) => return cx.broken(e),
    };
    let Some(e) = e else {
        let mut b = result_note(&outcome);
        if outcome.ok() {
            b = "<p class=\"error\" role=\"alert\">No such entry, or not visible to you.</p>"
                .into();
        }
        return html(StatusCode::NOT_FOUND, layout("Entry", Some(cx.session), &b));
    };
    let schema = cx.schema();
    let classes = classes_of(&e);
    let is_group = member_attr(&classes).is_some();
    let (must, may) = allowed(&schema, &classes);
    let mut groups: [(&str, Vec<&Attr>); 4] = [
        ("Required attributes", Vec::new()),
        ("Allowed attributes", Vec::new()),
        ("Other attributes", Vec::new()),
        ("Operational attributes", Vec::new()),
    ];
    for a in &e.attrs {
        let i = if a.0.eq_ignore_ascii_case("memberOf") && !ops {
            2
        } else if operational(&schema, &a.0) {
            3
        } else if contains(&must, &a.0) {
            0
        } else if contains(&may, &a.0) {
            1
        } else {
            2
        };
        groups[i].1.push(a);
    }
    let mut b = String::new();
    let _ = write!(
        b,
        "<p class=\"crumbs\">{}</p><p class=\"dn\">{}</p>",
        crumbs(&dn),
        esc(&dn)
    );
    let _ = write!(
        b,
        "<p class=\"actions\"><a href=\"/edit?dn={e}\">Edit</a> <a href=\"/rename?dn={e}\">Rename or move</a> \
         <a href=\"/delete?dn={e}\">Delete</a> <a href=\"/tree?dn={e}\">Children</a> \
         <a href=\"/create?parent={e}\">New child</a> <a href=\"/groups?member={e}\">Groups</a> \
         <a href=\"/password?dn={e}\">Reset password</a>{group} {ops}</p>",
        group = if is_group { format!(" <a href=\"/group?dn={}\">Members</a>", enc(&dn)) } else { String::new() },
        e = enc(&dn),
        ops = if ops {
            format!("<a href=\"/entry?dn={}\">Hide operational attributes</a>", enc(&dn))
        } else {
            format!("<a href=\"/entry?dn={}&amp;ops=1\">Show operational attributes</a>", enc(&dn))
        }
    );
    for (title, attrs) in &groups {
        if attrs.is_empty() {
            continue;
        }
        let _ = write!(b, "<section><h2>{title}</h2><table class=\"attrs\"><tbody>");
        for (name, values) in attrs {
            let bin = binary_attr(&schema, name);
            let _ = write!(b, "<tr><th scope=\"row\">{}</th><td>", esc(name));
            for (i, v) in values.iter().enumerate() {
                match (bin, std::str::from_utf8(v)) {
                    (false, Ok(t)) => {
                        let _ = write!(b, "<div class=\"value\">{}</div>", esc(t));
                    }
                    _ => {
                        let _ = write!(
                            b,
                            "<div class=\"value binary\">{} bytes <a href=\"/value?dn={}&amp;attr={}&amp;i={i}\" download>download</a></div>",
                            v.len(),
                            enc(&dn),
                            enc(name)
                        );
                    }
                }
            }
            b.push_str("</td></tr>");
        }
        b.push_str("</tbody></table></section>");
    }
    cx.page("Entry", &b)
}

/// One value of an attribute, as a download (binary values are never shown inline).
async fn value(cx: &Cx<'_>) -> Resp {
    let dn = cx.q("dn");
    let attr = cx.q("attr");
    let i: usize = cx.q("i").parse().unwrap_or(0);
    let read = cx.session.client.lock().await.read(dn, &[attr]).await;
    let v = match read {
        Ok((Some(e), _)) => e.get(attr).get(i).cloned(),
        Ok(_) => None,
        Err(e) => return cx.broken(e),
    };
    match v {
        Some(v) => {
            let mut r = respond(StatusCode::OK, "application/octet-stream", v);
            let name: String = attr
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if let Ok(h) = hyper::header::HeaderValue::from_str(&format!(
                "attachment; filename=\"{name}-{i}.bin\""
            )) {
                r.headers_mut()
                    .insert(hyper::header::CONTENT_DISPOSITION, h);
            }
            r
        }
        None => super::text(StatusCode::NOT_FOUND, "no such value\n"),
    }
}

/// The values of a text area, one a line.
fn lines(s: &str) -> Vec<Vec<u8>> {
    s.split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.as_bytes().to_vec())
        .collect()
}

/// The input for attribute `name` with `values`; `error` shown beside it.
fn field(name: &str, values: &[Vec<u8>], required: bool, error: Option<&str>) -> String {
    let id = format!("a-{}", name.to_ascii_lowercase());
    let text: Vec<String> = values
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    let mut o = format!(
        "<div class=\"field\"><label for=\"{id}\">{n}{req}</label>",
        id = esc(&id),
        n = esc(name),
        req = if required {
            " <span class=\"req\">(required)</span>"
        } else {
            ""
        }
    );
    let described = error
        .map(|_| {
            format!(
                " aria-describedby=\"{}-error\" aria-invalid=\"true\"",
                esc(&id)
            )
        })
        .unwrap_or_default();
    if name.eq_ignore_ascii_case("userPassword") {
        let _ = write!(
            o,
            "<input type=\"password\" id=\"{id}\" name=\"a.{n}\" autocomplete=\"new-password\"{described}>",
            id = esc(&id),
            n = esc(name)
        );
    } else {
        let _ = write!(
            o,
            "<textarea id=\"{id}\" name=\"a.{n}\" rows=\"{rows}\"{described}>{v}</textarea>",
            id = esc(&id),
            n = esc(name),
            rows = text.len().clamp(1, 8),
            v = esc(&text.join("\n"))
        );
    }
    if let Some(e) = error {
        let _ = write!(
            o,
            "<p class=\"error field-error\" id=\"{}-error\" role=\"alert\">{}</p>",
            esc(&id),
            esc(e)
        );
    }
    o.push_str("</div>");
    o
}

/// Whether the server's message names attribute `name` (as a word).
fn names_attr(message: &str, name: &str) -> bool {
    let m = message.to_ascii_lowercase();
    let n = name.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = m[from..].find(&n) {
        let s = from + i;
        let e = s + n.len();
        let before = m[..s]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_ascii_alphanumeric());
        let after = m[e..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_ascii_alphanumeric());
        if before && after {
            return true;
        }
        from = e;
    }
    false
}

/// The schema-aware edit form: the entry's attributes and the others its classes allow; one
/// value a line. Saving sends one modify with a replace for each attribute that changed.
async fn edit(cx: &Cx<'_>) -> Resp {
    let dn = if cx.post { cx.f("dn") } else { cx.q("dn") }.to_string();
    let mut c = cx.session.client.lock().await;
    let (e, outcome) = match c.read(&dn, &["*"]).await {
        Ok(r) => r,
        Err(e) => return cx.broken(e),
    };
    let Some(e) = e else {
        drop(c);
        return html(
            StatusCode::NOT_FOUND,
            layout("Edit", Some(cx.session), &result_note(&outcome)),
        );
    };
    let schema = cx.schema();
    let mut error: Option<Outcome> = None;
    let mut submitted: Option<&Form> = None;
    if cx.post {
        let mut changes = Vec::new();
        for (k, v) in cx.form {
            let Some(name) = k.strip_prefix("a.") else {
                continue;
            };
            if binary_attr(&schema, name) && !name.eq_ignore_ascii_case("userPassword") {
                continue;
            }
            let new = lines(v);
            if name.eq_ignore_ascii_case("userPassword") {
                if !new.is_empty() {
                    changes.push((ModOp::Replace, name.to_string(), new));
                }
                continue;
            }
            let old = e.get(name);
            let same = old.len() == new.len() && old.iter().all(|o| new.contains(o));
            if !same {
                changes.push((ModOp::Replace, name.to_string(), new));
            }
        }
        changes.sort_by(|a, b| a.1.cmp(&b.1));
        if changes.is_empty() {
            drop(c);
            return redirect(&format!("/entry?dn={}", enc(&dn)));
        }
        match c.modify(&dn, changes).await {
            Ok(o) if o.ok() => {
                drop(c);
                return redirect(&format!("/entry?dn={}", enc(&dn)));
            }
            Ok(o) => {
                error = Some(o);
                submitted = Some(cx.form);
            }
            Err(e) => return cx.broken(e),
        }
    }
    drop(c);
    let classes = classes_of(&e);
    let (must, may) = allowed(&schema, &classes);
    let msg = error.as_ref().map(|o| o.describe());
    let field_error =
        |name: &str| -> Option<&str> { msg.as_deref().filter(|m| names_attr(m, name)) };
    let values_of = |name: &str| -> Vec<Vec<u8>> {
        match submitted.and_then(|f| f.get(&format!("a.{name}"))) {
            Some(v) => lines(v),
            None => e.get(name).to_vec(),
        }
    };
    let mut b = String::new();
    let _ = write!(b, "<p class=\"dn\">{}</p>", esc(&dn));
    if let Some(o) = &error {
        let _ = write!(b, "<p class=\"error\" role=\"alert\" id=\"form-error\">The server refused the change: {}</p>", esc(&o.describe()));
    }
    let _ = write!(b, "<form method=\"post\" action=\"/edit\" class=\"card\">{}<input type=\"hidden\" name=\"dn\" value=\"{}\">", cx.csrf(), esc(&dn));
    b.push_str("<p class=\"hint\">One value a line. An empty box removes the attribute.</p>");
    let mut shown: Vec<String> = Vec::new();
    for (name, _) in &e.attrs {
        if operational(&schema, name)
            || (binary_attr(&schema, name) && !name.eq_ignore_ascii_case("userPassword"))
        {
            continue;
        }
        if name.eq_ignore_ascii_case("userPassword") {
            b.push_str(&field(name, &[], false, field_error(name)));
        } else {
            b.push_str(&field(
                name,
                &values_of(name),
                contains(&must, name),
                field_error(name),
            ));
        }
        shown.push(name.clone());
    }
    for name in &must {
        if !contains(&shown, name) {
            b.push_str(&field(name, &values_of(name), true, field_error(name)));
            shown.push(name.clone());
        }
    }
    let rest: Vec<&String> = may
        .iter()
        .filter(|n| {
            !contains(&shown, n)
                && (!binary_attr(&schema, n) || n.eq_ignore_ascii_case("userPassword"))
        })
        .collect();
    if !rest.is_empty() {
        b.push_str("<details><summary>More attributes the object classes allow</summary>");
        for name in rest {
            b.push_str(&field(name, &values_of(name), false, field_error(name)));
        }
        b.push_str("</details>");
    }
    let _ = write!(
        b,
        "<p><button type=\"submit\">Save</button> <a href=\"/entry?dn={}\">Cancel</a></p></form>",
        enc(&dn)
    );
    form_page(cx, "Edit entry", error.is_some(), &b)
}

/// A template: its object classes, naming attribute, and the attributes offered first.
struct Template {
    classes: Vec<String>,
    rdn: String,
    fields: Vec<String>,
}

fn template(schema: &Schema, name: &str, class: &str) -> Option<Template> {
    let t = |c: &[&str], r: &str, f: &[&str]| Template {
        classes: c.iter().map(|s| s.to_string()).collect(),
        rdn: r.into(),
        fields: f.iter().map(|s| s.to_string()).collect(),
    };
    match name {
        "person" => Some(t(
            &["top", "person", "organizationalPerson", "inetOrgPerson"],
            "uid",
            &[
                "uid",
                "cn",
                "sn",
                "givenName",
                "mail",
                "telephoneNumber",
                "userPassword",
            ],
        )),
        "group" => Some(t(
            &["top", "groupOfNames"],
            "cn",
            &["cn", "description", "member"],
        )),
        "ou" => Some(t(
            &["top", "organizationalUnit"],
            "ou",
            &["ou", "description"],
        )),
        "class" => {
            let id = schema.class_by_name(class)?;
            let oc = schema.class(id);
            let closure = schema.class_closure(&[id]);
            let classes: Vec<String> = closure
                .iter()
                .map(|c| {
                    schema
                        .class(*c)
                        .names
                        .first()
                        .cloned()
                        .unwrap_or_else(|| schema.class(*c).oid.clone())
                })
                .collect();
            let (must, _) = allowed(schema, &classes);
            let rdn = must
                .iter()
                .find(|m| !m.eq_ignore_ascii_case("objectClass"))
                .cloned()
                .unwrap_or_else(|| "cn".into());
            let _ = oc;
            Some(Template {
                classes,
                rdn,
                fields: must
                    .into_iter()
                    .filter(|m| !m.eq_ignore_ascii_case("objectClass"))
                    .collect(),
            })
        }
        _ => None,
    }
}

/// Creating an entry from a template (person, group, organizational unit, any object class).
async fn create(cx: &Cx<'_>) -> Resp {
    let src = if cx.post { cx.form } else { cx.query };
    let get = |k: &str| src.get(k).map(String::as_str).unwrap_or("");
    let parent = get("parent").to_string();
    let kind = get("template").to_string();
    let class = get("class").to_string();
    let schema = cx.schema();
    let Some(t) = template(&schema, &kind, &class) else {
        // The choice of template.
        let mut b = String::new();
        let _ = write!(b, "<form method=\"get\" action=\"/create\" class=\"card\">\
            <label for=\"parent\">Parent entry (DN)</label><input id=\"parent\" name=\"parent\" value=\"{}\" required>\
            <fieldset><legend>Template</legend>", esc(&parent));
        for (v, label) in [
            ("person", "Person (inetOrgPerson)"),
            ("group", "Group (groupOfNames)"),
            ("ou", "Organizational unit"),
            ("class", "Any object class:"),
        ] {
            let _ = write!(b, "<label class=\"inline\"><input type=\"radio\" name=\"template\" value=\"{v}\"{}> {label}</label>", if v == "person" { " checked" } else { "" });
        }
        b.push_str("<label for=\"class\">Object class (for “any object class”)</label><select id=\"class\" name=\"class\">");
        let mut names: Vec<(String, bool)> = schema
            .classes()
            .map(|(_, c)| {
                (
                    c.names.first().cloned().unwrap_or_else(|| c.oid.clone()),
                    matches!(c.kind, schema::ClassKind::Structural),
                )
            })
            .filter(|(_, s)| *s)
            .collect();
        names.sort_by_key(|n| n.0.to_ascii_lowercase());
        for (n, _) in names {
            let _ = write!(
                b,
                "<option{}>{}</option>",
                if n == class { " selected" } else { "" },
                esc(&n)
            );
        }
        b.push_str("</select></fieldset><button type=\"submit\">Continue</button></form>");
        return cx.page("New entry", &b);
    };
    let (must, may) = allowed(&schema, &t.classes);
    let mut error: Option<Outcome> = None;
    if cx.post {
        let rdn_val = lines(get(&format!("a.{}", t.rdn)));
        let Some(first) = rdn_val.first() else {
            let o = Outcome {
                code: proto::ResultCode::NamingViolation,
                message: format!("{} (the naming attribute) needs a value", t.rdn),
                matched: String::new(),
                controls: Vec::new(),
                value: None,
            };
            return create_form(cx, &t, &must, &may, &parent, &kind, &class, Some(&o), src);
        };
        let dn = format!(
            "{}={},{}",
            t.rdn,
            rdn_value(&String::from_utf8_lossy(first)),
            parent
        );
        let mut attrs = vec![(
            "objectClass".to_string(),
            t.classes
                .iter()
                .map(|c| c.as_bytes().to_vec())
                .collect::<Vec<_>>(),
        )];
        for (k, v) in src {
            let Some(name) = k.strip_prefix("a.") else {
                continue;
            };
            let vals = lines(v);
            if !vals.is_empty() && !name.eq_ignore_ascii_case("objectClass") {
                attrs.push((name.to_string(), vals));
            }
        }
        attrs.sort_by(|a, b| {
            (a.0 != "objectClass")
                .cmp(&(b.0 != "objectClass"))
                .then(a.0.cmp(&b.0))
        });
        let r = cx.session.client.lock().await.add(&dn, attrs).await;
        match r {
            Ok(o) if o.ok() => return redirect(&format!("/entry?dn={}", enc(&dn))),
            Ok(o) => error = Some(o),
            Err(e) => return cx.broken(e),
        }
    }
    create_form(
        cx,
        &t,
        &must,
        &may,
        &parent,
        &kind,
        &class,
        error.as_ref(),
        src,
    )
}

#[allow(clippy::too_many_arguments)]
fn create_form(
    cx: &Cx<'_>,
    t: &Template,
    must: &[String],
    may: &[String],
    parent: &str,
    kind: &str,
    class: &str,
    error: Option<&Outcome>,
    src: &Form,
) -> Resp {
    let msg = error.map(|o| o.describe());
    let fe = |n: &str| msg.as_deref().filter(|m| names_attr(m, n));
    let vals = |n: &str| {
        src.get(&format!("a.{n}"))
            .map(|v| lines(v))
            .unwrap_or_default()
    };
    let mut b = String::new();
    if let Some(m) = &msg {
        let _ = write!(b, "<p class=\"error\" role=\"alert\" id=\"form-error\">The server refused the entry: {}</p>", esc(m));
    }
    let _ = write!(
        b,
        "<p>Object classes: {}. Named by <strong>{}</strong>.</p>\
         <form method=\"post\" action=\"/create\" class=\"card\">{}\
         <input type=\"hidden\" name=\"template\" value=\"{}\"><input type=\"hidden\" name=\"class\" value=\"{}\">\
         <label for=\"parent\">Parent entry (DN)</label><input id=\"parent\" name=\"parent\" value=\"{}\" required>",
        esc(&t.classes.join(", ")),
        esc(&t.rdn),
        cx.csrf(),
        esc(kind),
        esc(class),
        esc(parent)
    );
    let mut shown = Vec::new();
    for n in t.fields.iter().chain(must.iter()) {
        if contains(&shown, n) || n.eq_ignore_ascii_case("objectClass") {
            continue;
        }
        b.push_str(&field(
            n,
            &vals(n),
            contains(must, n) || n.eq_ignore_ascii_case(&t.rdn),
            fe(n),
        ));
        shown.push(n.clone());
    }
    let rest: Vec<&String> = may.iter().filter(|n| !contains(&shown, n)).collect();
    if !rest.is_empty() {
        b.push_str("<details><summary>More attributes the object classes allow</summary>");
        for n in rest {
            b.push_str(&field(n, &vals(n), false, fe(n)));
        }
        b.push_str("</details>");
    }
    b.push_str("<p><button type=\"submit\">Create</button></p></form>");
    form_page(cx, "New entry", error.is_some(), &b)
}

/// The server's refusal of what a form sent, shown above the form (announced to screen readers).
fn refusal(o: &Outcome) -> String {
    format!(
        "<p class=\"error\" role=\"alert\" id=\"form-error\">The server refused: {}</p>",
        esc(&o.describe())
    )
}

/// A form page: 422 when the server refused what the form sent (its message is on the page),
/// else 200.
fn form_page(cx: &Cx<'_>, title: &str, refused: bool, body: &str) -> Resp {
    let status = if refused {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    html(status, layout(title, Some(cx.session), body))
}

/// Rename (a new RDN) and move (a new parent): one modify DN.
async fn rename(cx: &Cx<'_>) -> Resp {
    let dn = if cx.post { cx.f("dn") } else { cx.q("dn") }.to_string();
    let (rdn0, parent0) = split_rdn(&dn);
    let mut error = None;
    if cx.post {
        let new_rdn = cx.f("rdn").trim().to_string();
        let new_parent = cx.f("parent").trim().to_string();
        let moved = (!new_parent.eq_ignore_ascii_case(&parent0)).then_some(new_parent.as_str());
        let r = cx
            .session
            .client
            .lock()
            .await
            .rename(&dn, &new_rdn, cx.f("delete_old") == "1", moved)
            .await;
        match r {
            Ok(o) if o.ok() => {
                let p = moved.unwrap_or(&parent0);
                let new_dn = if p.is_empty() {
                    new_rdn
                } else {
                    format!("{new_rdn},{p}")
                };
                return redirect(&format!("/entry?dn={}", enc(&new_dn)));
            }
            Ok(o) => error = Some(o),
            Err(e) => return cx.broken(e),
        }
    }
    let mut b = String::new();
    if let Some(o) = &error {
        b.push_str(&refusal(o));
    }
    let rdn = if cx.post {
        cx.f("rdn").to_string()
    } else {
        rdn0
    };
    let parent = if cx.post {
        cx.f("parent").to_string()
    } else {
        parent0.clone()
    };
    let _ = write!(
        b,
        "<p class=\"dn\">{}</p><form method=\"post\" action=\"/rename\" class=\"card\">{}\
         <input type=\"hidden\" name=\"dn\" value=\"{}\">\
         <label for=\"rdn\">New name (RDN)</label><input id=\"rdn\" name=\"rdn\" value=\"{}\" required>\
         <label for=\"parent\">Parent (DN; change it to move the entry)</label><input id=\"parent\" name=\"parent\" value=\"{}\">\
         <label class=\"inline\"><input type=\"checkbox\" name=\"delete_old\" value=\"1\" checked> Remove the old name's value from the entry</label>\
         <p><button type=\"submit\">Rename or move</button> <a href=\"/entry?dn={}\">Cancel</a></p></form>",
        esc(&dn),
        cx.csrf(),
        esc(&dn),
        esc(&rdn),
        esc(&parent),
        enc(&dn)
    );
    form_page(cx, "Rename or move", error.is_some(), &b)
}

/// Delete: a leaf at once; an entry with children only after listing what its subtree holds,
/// and then with the Subtree Delete control.
async fn delete(cx: &Cx<'_>) -> Resp {
    let dn = if cx.post { cx.f("dn") } else { cx.q("dn") }.to_string();
    let mut c = cx.session.client.lock().await;
    let mut error = None;
    if cx.post {
        match c.delete(&dn, cx.f("subtree") == "1").await {
            Ok(o) if o.ok() => return redirect(&format!("/tree?dn={}", enc(&parent_of(&dn)))),
            Ok(o) => error = Some(o),
            Err(e) => return cx.broken(e),
        }
    }
    let listing = c
        .search(&Query {
            base: &dn,
            scope: Scope::Subtree,
            filter: every(),
            attrs: &["1.1"],
            page: 0,
            cookie: b"",
            max_entries: DELETE_LISTING + 1,
        })
        .await;
    drop(c);
    let found = match listing {
        Ok(f) => f,
        Err(e) => return cx.broken(e),
    };
    let mut b = String::new();
    if let Some(o) = &error {
        b.push_str(&refusal(o));
    }
    let below: Vec<&Entry> = found
        .entries
        .iter()
        .filter(|e| !e.dn.eq_ignore_ascii_case(&dn))
        .collect();
    let more =
        found.outcome.code == proto::ResultCode::SizeLimitExceeded || below.len() >= DELETE_LISTING;
    let _ = write!(b, "<p class=\"dn\">{}</p>", esc(&dn));
    let subtree = !below.is_empty();
    if subtree {
        let _ = write!(
            b,
            "<p>This entry has entries below it; deleting it deletes them all{}:</p><ul class=\"listing\">",
            if more { format!(" (the first {DELETE_LISTING} are listed, there are more)") } else { format!(" ({})", below.len()) }
        );
        for e in below.iter().take(DELETE_LISTING) {
            let _ = write!(b, "<li>{}</li>", dn_link(&e.dn));
        }
        b.push_str("</ul>");
    } else {
        b.push_str("<p>This entry has no entries below it.</p>");
    }
    let _ = write!(
        b,
        "<form method=\"post\" action=\"/delete\" class=\"card\">{}<input type=\"hidden\" name=\"dn\" value=\"{}\">{}\
         <p><button type=\"submit\" class=\"danger\">{}</button> <a href=\"/entry?dn={}\">Cancel</a></p></form>",
        cx.csrf(),
        esc(&dn),
        if subtree { "<input type=\"hidden\" name=\"subtree\" value=\"1\">" } else { "" },
        if subtree { "Delete the entry and everything below it" } else { "Delete the entry" },
        enc(&dn)
    );
    form_page(cx, "Delete", error.is_some(), &b)
}

/// Escapes a value for a filter (RFC 4515).
fn filter_value(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'*' | b'(' | b')' | b'\\' | 0 => {
                let _ = write!(o, "\\{b:02x}");
            }
            _ => o.push(b as char),
        }
    }
    o
}

/// The filter of the search form: the raw filter, or the builder's conditions.
fn built_filter(q: &Form) -> String {
    let raw = q.get("filter").map(|s| s.trim()).unwrap_or("");
    if !raw.is_empty() {
        return raw.to_string();
    }
    let mut parts = Vec::new();
    for i in 0..3 {
        let attr = q.get(&format!("a{i}")).map(|s| s.trim()).unwrap_or("");
        let how = q.get(&format!("m{i}")).map(String::as_str).unwrap_or("eq");
        let val = q.get(&format!("v{i}")).map(|s| s.as_str()).unwrap_or("");
        if attr.is_empty()
            || !attr
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == ';')
        {
            continue;
        }
        let v = filter_value(val);
        parts.push(match how {
            "present" => format!("({attr}=*)"),
            "contains" => format!("({attr}=*{v}*)"),
            "starts" => format!("({attr}={v}*)"),
            "ends" => format!("({attr}=*{v})"),
            "ge" => format!("({attr}>={v})"),
            "le" => format!("({attr}<={v})"),
            "not" => format!("(!({attr}={v}))"),
            _ => format!("({attr}={v})"),
        });
    }
    match parts.len() {
        0 => "(objectClass=*)".into(),
        1 => parts.remove(0),
        _ => format!(
            "({}{})",
            if q.get("join").map(String::as_str) == Some("or") {
                "|"
            } else {
                "&"
            },
            parts.concat()
        ),
    }
}

fn selected(a: &str, b: &str) -> &'static str {
    if a == b {
        " selected"
    } else {
        ""
    }
}

/// Search: a filter builder or a raw filter, base and scope, results a page at a time, an
/// LDIF export of all of them.
async fn search(cx: &Cx<'_>) -> Resp {
    let q = cx.query;
    let base = cx.q("base").to_string();
    let scope = cx.q("scope");
    let filter_text = built_filter(q);
    let ran = q.contains_key("base");
    let mut b = String::new();
    let _ = write!(b, "<form method=\"get\" action=\"/search\" class=\"card\" id=\"search-form\">\
        <label for=\"base\">Base DN</label><input id=\"base\" name=\"base\" value=\"{}\">\
        <label for=\"scope\">Scope</label><select id=\"scope\" name=\"scope\">\
        <option value=\"sub\"{}>the base and everything below it</option><option value=\"one\"{}>the base's children</option><option value=\"base\"{}>the base only</option></select>\
        <fieldset><legend>Filter builder</legend><p class=\"hint\">Used when the raw filter is empty.</p>",
        esc(&base), selected(scope, "sub"), selected(scope, "one"), selected(scope, "base"));
    for i in 0..3 {
        let a = q.get(&format!("a{i}")).cloned().unwrap_or_default();
        let m = q.get(&format!("m{i}")).cloned().unwrap_or_default();
        let v = q.get(&format!("v{i}")).cloned().unwrap_or_default();
        let _ = write!(b, "<div class=\"row\"><label for=\"a{i}\" class=\"sr\">Attribute {n}</label><input id=\"a{i}\" name=\"a{i}\" placeholder=\"attribute\" value=\"{a}\">\
            <label for=\"m{i}\" class=\"sr\">Match {n}</label><select id=\"m{i}\" name=\"m{i}\">\
            <option value=\"eq\"{}>equals</option><option value=\"contains\"{}>contains</option><option value=\"starts\"{}>starts with</option><option value=\"ends\"{}>ends with</option>\
            <option value=\"present\"{}>is present</option><option value=\"ge\"{}>≥</option><option value=\"le\"{}>≤</option><option value=\"not\"{}>is not</option></select>\
            <label for=\"v{i}\" class=\"sr\">Value {n}</label><input id=\"v{i}\" name=\"v{i}\" placeholder=\"value\" value=\"{v}\"></div>",
            selected(&m, "eq"), selected(&m, "contains"), selected(&m, "starts"), selected(&m, "ends"), selected(&m, "present"), selected(&m, "ge"), selected(&m, "le"), selected(&m, "not"),
            n = i + 1, a = esc(&a), v = esc(&v));
    }
    let join = cx.q("join");
    let _ = write!(b, "<label for=\"join\">Combine conditions with</label><select id=\"join\" name=\"join\"><option value=\"and\"{}>all (and)</option><option value=\"or\"{}>any (or)</option></select></fieldset>\
        <label for=\"filter\">Raw filter (RFC 4515)</label><input id=\"filter\" name=\"filter\" value=\"{}\" placeholder=\"(&amp;(objectClass=person)(cn=a*))\">\
        <label for=\"attrs\">Attributes shown (space separated)</label><input id=\"attrs\" name=\"attrs\" value=\"{}\" placeholder=\"cn mail\">\
        <p><button type=\"submit\">Search</button></p></form>",
        selected(join, "and"), selected(join, "or"), esc(cx.q("filter")), esc(cx.q("attrs")));
    if !ran {
        return cx.page("Search", &b);
    }
    let filter = match Filter::parse(&filter_text) {
        Ok(f) => f,
        Err(e) => {
            let _ = write!(
                b,
                "<p class=\"error\" role=\"alert\">The filter {} is not valid: {}</p>",
                esc(&filter_text),
                esc(&e.to_string())
            );
            return html(
                StatusCode::UNPROCESSABLE_ENTITY,
                layout("Search", Some(cx.session), &b),
            );
        }
    };
    let shown: Vec<String> = cx
        .q("attrs")
        .split_whitespace()
        .take(20)
        .map(str::to_string)
        .collect();
    let mut want: Vec<&str> = shown.iter().map(String::as_str).collect();
    if want.is_empty() {
        want.push("1.1");
    }
    let r = {
        let mut c = cx.session.client.lock().await;
        cx.search_page(&mut c, &base, scope_of(scope), filter, &want)
            .await
    };
    let found = match r {
        Ok(f) => f,
        Err(r) => return r,
    };
    let _ = write!(b, "<section aria-live=\"polite\"><h2>Results</h2><p>Filter <code>{}</code>: {} entries on this page.</p>", esc(&filter_text), found.entries.len());
    if !found.outcome.ok() {
        b.push_str(&result_note(&found.outcome));
    }
    b.push_str("<table class=\"results\"><thead><tr><th scope=\"col\">DN</th>");
    for a in &shown {
        let _ = write!(b, "<th scope=\"col\">{}</th>", esc(a));
    }
    b.push_str("</tr></thead><tbody>");
    for e in &found.entries {
        let _ = write!(b, "<tr><td>{}</td>", dn_link(&e.dn));
        for a in &shown {
            let vals: Vec<String> = e
                .get(a)
                .iter()
                .map(|v| match std::str::from_utf8(v) {
                    Ok(t) => esc(t),
                    Err(_) => format!("({} bytes)", v.len()),
                })
                .collect();
            let _ = write!(b, "<td>{}</td>", vals.join("<br>"));
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table>");
    // The same query string, for the next page and the export.
    let mut params: Vec<(String, String)> = q
        .iter()
        .filter(|(k, _)| k.as_str() != "page")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    params.sort();
    let qs: String = params
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&amp;");
    b.push_str(&next_page_link(
        &found,
        &format!("/search?{qs}"),
        &format!("Next {PAGE_SIZE} results"),
    ));
    let _ = write!(b, "<p><a href=\"/search.ldif?{qs}\" download>Export all results as LDIF</a> (at most {MAX_EXPORT_ENTRIES} entries, all their attributes)</p></section>");
    cx.page("Search", &b)
}

/// The search's results as LDIF (every page, all user attributes), as a download.
async fn export(cx: &Cx<'_>) -> Resp {
    let base = cx.q("base").to_string();
    let filter = match Filter::parse(&built_filter(cx.query)) {
        Ok(f) => f,
        Err(e) => {
            return super::text(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("invalid filter: {e}\n"),
            )
        }
    };
    let mut w = ldif::Writer::new(Vec::new());
    let _ = w.write_version();
    let mut cookie = Vec::new();
    let mut count = 0;
    let mut c = cx.session.client.lock().await;
    loop {
        let r = c
            .search(&Query {
                base: &base,
                scope: scope_of(cx.q("scope")),
                filter: filter.clone(),
                attrs: &["*"],
                page: 500,
                cookie: &cookie,
                max_entries: 500,
            })
            .await;
        let found = match r {
            Ok(f) => f,
            Err(e) => return cx.broken(e),
        };
        if !found.outcome.ok() {
            return super::text(
                StatusCode::BAD_GATEWAY,
                &format!("the search failed: {}\n", found.outcome.describe()),
            );
        }
        for e in &found.entries {
            if count >= MAX_EXPORT_ENTRIES {
                break;
            }
            let pairs: Vec<(&str, &[u8])> = e
                .attrs
                .iter()
                .flat_map(|(n, vs)| vs.iter().map(move |v| (n.as_str(), v.as_slice())))
                .collect();
            if !pairs.is_empty() && w.write_entry(&e.dn, pairs).is_ok() {
                count += 1;
            }
        }
        if found.next.is_empty() || count >= MAX_EXPORT_ENTRIES {
            break;
        }
        cookie = found.next;
    }
    drop(c);
    let mut r = respond(StatusCode::OK, "text/plain; charset=utf-8", w.into_inner());
    r.headers_mut().insert(
        hyper::header::CONTENT_DISPOSITION,
        hyper::header::HeaderValue::from_static("attachment; filename=\"search.ldif\""),
    );
    r
}

/// The attribute that lists a group's members, by its object classes.
fn member_attr(classes: &[String]) -> Option<&'static str> {
    if classes
        .iter()
        .any(|c| c.eq_ignore_ascii_case("groupOfNames"))
    {
        Some("member")
    } else if classes
        .iter()
        .any(|c| c.eq_ignore_ascii_case("groupOfUniqueNames"))
    {
        Some("uniqueMember")
    } else {
        None
    }
}

/// The naming context `dn` is in (the configured suffix it ends with).
fn suffix_of(cx: &Cx<'_>, dn: &str) -> String {
    let d = dn.to_ascii_lowercase().replace(' ', "");
    let config = cx.console.shared.config();
    config
        .suffixes
        .iter()
        .find(|s| d.ends_with(&s.to_ascii_lowercase().replace(' ', "")))
        .or(config.suffixes.first())
        .cloned()
        .unwrap_or_default()
}

const GROUP_FILTER: &str = "(|(objectClass=groupOfNames)(objectClass=groupOfUniqueNames))";

/// The groups (all, a page at a time), or those a person is a member of (`member=DN`: the
/// groups naming them, and the person's memberOf when the overlay keeps it).
async fn groups(cx: &Cx<'_>) -> Resp {
    let member = cx.q("member").to_string();
    let mut b = String::new();
    let mut c = cx.session.client.lock().await;
    let (base, filter) = if member.is_empty() {
        (cx.q("base").to_string(), GROUP_FILTER.to_string())
    } else {
        let v = filter_value(&member);
        (
            suffix_of(cx, &member),
            format!("(&{GROUP_FILTER}(|(member={v})(uniqueMember={v})))"),
        )
    };
    let base = if base.is_empty() {
        suffix_of(cx, "")
    } else {
        base
    };
    if !member.is_empty() {
        let _ = write!(b, "<p>Groups of {}</p>", dn_link(&member));
        match c.read(&member, &["memberOf"]).await {
            Ok((Some(e), _)) if !e.get("memberOf").is_empty() => {
                b.push_str("<h2>memberOf</h2><ul class=\"listing\" id=\"member-of\">");
                for v in e.get("memberOf") {
                    let g = String::from_utf8_lossy(v);
                    let _ = write!(b, "<li><a href=\"/group?dn={}\">{}</a></li>", enc(&g), esc(&g));
                }
                b.push_str("</ul>");
            }
            Ok(_) => b.push_str("<p class=\"hint\">No memberOf values (the memberof overlay is off, or the entry is in no group).</p>"),
            Err(e) => return cx.broken(e),
        }
        b.push_str("<h2>Groups naming this entry as a member</h2>");
    }
    let Ok(f) = Filter::parse(&filter) else {
        return super::text(StatusCode::BAD_REQUEST, "bad member DN\n");
    };
    let found = match cx
        .search_page(&mut c, &base, Scope::Subtree, f, &["cn", "description"])
        .await
    {
        Ok(f) => f,
        Err(r) => return r,
    };
    drop(c);
    if !found.outcome.ok() {
        b.push_str(&result_note(&found.outcome));
    }
    b.push_str("<ul class=\"listing\" id=\"groups\">");
    for e in &found.entries {
        let _ = write!(
            b,
            "<li><a href=\"/group?dn={}\">{}</a> <span class=\"small\">{}</span></li>",
            enc(&e.dn),
            esc(&e.first("cn").unwrap_or_else(|| e.dn.clone())),
            esc(&e.dn)
        );
    }
    b.push_str("</ul>");
    if found.entries.is_empty() {
        b.push_str("<p>None.</p>");
    }
    b.push_str(&next_page_link(
        &found,
        &format!("/groups?member={}&amp;base={}", enc(&member), enc(&base)),
        &format!("Next {PAGE_SIZE}"),
    ));
    if member.is_empty() {
        let _ = write!(
            b,
            "<p><a href=\"/create?template=group&amp;parent={}\">New group</a></p>",
            enc(&base)
        );
    }
    cx.page("Groups", &b)
}

/// Entries the member picker shows at most.
pub const PICKER_ENTRIES: usize = 20;

/// One group: its members (each with a remove button) and a picker to add more (a search
/// for people by name, uid or mail). Each change is one modify of the member attribute.
async fn group(cx: &Cx<'_>) -> Resp {
    let dn = if cx.post { cx.f("dn") } else { cx.q("dn") }.to_string();
    let mut c = cx.session.client.lock().await;
    let mut error = None;
    if cx.post {
        let (e, _) = match c.read(&dn, &["objectClass"]).await {
            Ok(r) => r,
            Err(e) => return cx.broken(e),
        };
        let attr = e
            .as_ref()
            .and_then(|e| member_attr(&classes_of(e)))
            .unwrap_or("member");
        let op = if cx.f("op") == "remove" {
            ModOp::Delete
        } else {
            ModOp::Add
        };
        let m = cx.f("member").trim().as_bytes().to_vec();
        match c.modify(&dn, vec![(op, attr.to_string(), vec![m])]).await {
            Ok(o) if o.ok() => {
                drop(c);
                return redirect(&format!("/group?dn={}", enc(&dn)));
            }
            Ok(o) => error = Some(o),
            Err(e) => return cx.broken(e),
        }
    }
    let (e, outcome) = match c
        .read(
            &dn,
            &["objectClass", "cn", "member", "uniqueMember", "description"],
        )
        .await
    {
        Ok(r) => r,
        Err(e) => return cx.broken(e),
    };
    let Some(e) = e else {
        drop(c);
        return html(
            StatusCode::NOT_FOUND,
            layout("Group", Some(cx.session), &result_note(&outcome)),
        );
    };
    let attr = member_attr(&classes_of(&e)).unwrap_or("member");
    let find = cx.q("find").trim().to_string();
    let picked = if find.is_empty() {
        None
    } else {
        let v = filter_value(&find);
        let filter = format!("(&(|(objectClass=person)(objectClass=groupOfNames))(|(cn=*{v}*)(uid=*{v}*)(mail=*{v}*)))");
        let Ok(f) = Filter::parse(&filter) else {
            return super::text(StatusCode::BAD_REQUEST, "bad search\n");
        };
        let base = suffix_of(cx, &dn);
        match c
            .search(&Query {
                base: &base,
                scope: Scope::Subtree,
                filter: f,
                attrs: &["cn", "mail"],
                page: 0,
                cookie: b"",
                max_entries: PICKER_ENTRIES,
            })
            .await
        {
            Ok(f) => Some(f),
            Err(e) => return cx.broken(e),
        }
    };
    drop(c);
    let mut b = String::new();
    let _ = write!(b, "<p class=\"dn\">{}</p>", dn_link(&dn));
    if let Some(o) = &error {
        b.push_str(&refusal(o));
    }
    let members = e.get(attr);
    let _ = write!(
        b,
        "<h2>Members ({})</h2><ul class=\"listing\" id=\"members\">",
        members.len()
    );
    for m in members {
        let m = String::from_utf8_lossy(m);
        let _ = write!(
            b,
            "<li><form method=\"post\" action=\"/group\" class=\"inline\">{}<input type=\"hidden\" name=\"dn\" value=\"{}\">\
             <input type=\"hidden\" name=\"op\" value=\"remove\"><input type=\"hidden\" name=\"member\" value=\"{}\">\
             {} <button type=\"submit\" class=\"small\" aria-label=\"Remove {}\">Remove</button></form></li>",
            cx.csrf(),
            esc(&dn),
            esc(&m),
            dn_link(&m),
            esc(&m)
        );
    }
    b.push_str("</ul><h2>Add members</h2>");
    let _ = write!(
        b,
        "<form method=\"get\" action=\"/group\" class=\"card\" role=\"search\"><input type=\"hidden\" name=\"dn\" value=\"{}\">\
         <label for=\"find\">Find people or groups (name, uid or mail)</label><input id=\"find\" name=\"find\" value=\"{}\">\
         <button type=\"submit\">Find</button></form>",
        esc(&dn),
        esc(&find)
    );
    if let Some(f) = picked {
        if f.entries.is_empty() {
            b.push_str("<p>Nobody found.</p>");
        }
        b.push_str("<ul class=\"listing\" id=\"picked\">");
        for p in &f.entries {
            let already = members
                .iter()
                .any(|m| String::from_utf8_lossy(m).eq_ignore_ascii_case(&p.dn));
            let _ = write!(
                b,
                "<li><form method=\"post\" action=\"/group\" class=\"inline\">{}<input type=\"hidden\" name=\"dn\" value=\"{}\">\
                 <input type=\"hidden\" name=\"op\" value=\"add\"><input type=\"hidden\" name=\"member\" value=\"{}\">\
                 {} <span class=\"small\">{}</span> {}</form></li>",
                cx.csrf(),
                esc(&dn),
                esc(&p.dn),
                esc(&p.first("cn").unwrap_or_default()),
                esc(&p.dn),
                if already {
                    "<span class=\"small\">(a member)</span>".to_string()
                } else {
                    format!("<button type=\"submit\" class=\"small\" aria-label=\"Add {}\">Add</button>", esc(&p.dn))
                }
            );
        }
        b.push_str("</ul>");
    }
    let _ = write!(
        b,
        "<form method=\"post\" action=\"/group\" class=\"card\">{}<input type=\"hidden\" name=\"dn\" value=\"{}\">\
         <input type=\"hidden\" name=\"op\" value=\"add\"><label for=\"member\">Or add by DN</label>\
         <input id=\"member\" name=\"member\"><button type=\"submit\">Add</button></form>",
        cx.csrf(),
        esc(&dn)
    );
    form_page(cx, "Group", error.is_some(), &b)
}

/// The password policy response control's error, in words (draft-behera-ldap-password-policy).
fn policy_error(value: &[u8]) -> Option<&'static str> {
    let mut r = ber::Reader::new(value);
    let mut s = r.sub(ber::tag::SEQUENCE).ok()?;
    while !s.is_empty() {
        let (tag, contents) = s.read_element().ok()?;
        if tag == 0x81 {
            return Some(match ber::decode_integer(contents).ok()? {
                0 => "the password has expired",
                1 => "the account is locked",
                2 => "the password must be changed after a reset",
                3 => "password changes are not allowed",
                4 => "the old password must be given",
                5 => "the password is not of sufficient quality",
                6 => "the password is too short",
                7 => "the password was changed too recently",
                8 => "the password was used before",
                9 => "the password is too long",
                _ => "the password policy refused it",
            });
        }
    }
    None
}

/// A password reset (or a change of one's own): Password Modify, with the password policy's
/// answer. An empty new password asks the server to generate one, shown once.
async fn password(cx: &Cx<'_>) -> Resp {
    let dn = if cx.post { cx.f("dn") } else { cx.q("dn") }.to_string();
    let mut b = String::new();
    let mut status = StatusCode::OK;
    if cx.post {
        let new = cx.f("new");
        if new != cx.f("confirm") {
            status = StatusCode::UNPROCESSABLE_ENTITY;
            b.push_str("<p class=\"error\" role=\"alert\" id=\"form-error\">The two new passwords differ.</p>");
        } else {
            let old = cx.f("old");
            let r = cx
                .session
                .client
                .lock()
                .await
                .set_password(
                    &dn,
                    (!old.is_empty()).then_some(old.as_bytes()),
                    (!new.is_empty()).then_some(new.as_bytes()),
                )
                .await;
            let o = match r {
                Ok(o) => o,
                Err(e) => return cx.broken(e),
            };
            let policy = o
                .controls
                .iter()
                .find(|(oid, _)| oid == proto::oids::PASSWORD_POLICY)
                .and_then(|(_, v)| policy_error(v));
            if o.ok() {
                b.push_str(
                    "<p class=\"ok\" role=\"status\" id=\"form-ok\">The password was changed.</p>",
                );
                if let Some(v) = o
                    .value
                    .as_deref()
                    .and_then(|v| proto::PasswdModifyResponse::decode(v).ok())
                    .and_then(|r| {
                        r.gen_passwd
                            .map(|p| String::from_utf8_lossy(&p).into_owned())
                    })
                {
                    let _ = write!(
                        b,
                        "<p>The new password, shown once: <code id=\"generated\">{}</code></p>",
                        esc(&v)
                    );
                }
            } else {
                status = StatusCode::UNPROCESSABLE_ENTITY;
                let _ = write!(b, "<p class=\"error\" role=\"alert\" id=\"form-error\">The server refused: {}{}</p>", esc(&o.describe()), policy.map(|p| format!(" — password policy: {p}")).unwrap_or_default());
            }
        }
    }
    let _ = write!(
        b,
        "<form method=\"post\" action=\"/password\" class=\"card narrow\">{}\
         <label for=\"dn\">Entry (DN; empty: your own)</label><input id=\"dn\" name=\"dn\" value=\"{}\">\
         <label for=\"old\">Current password (when changing your own, if the policy asks for it)</label><input id=\"old\" name=\"old\" type=\"password\" autocomplete=\"current-password\">\
         <label for=\"new\">New password (empty: the server generates one)</label><input id=\"new\" name=\"new\" type=\"password\" autocomplete=\"new-password\">\
         <label for=\"confirm\">New password again</label><input id=\"confirm\" name=\"confirm\" type=\"password\" autocomplete=\"new-password\">\
         <button type=\"submit\">Set the password</button></form>",
        cx.csrf(),
        esc(&dn)
    );
    html(status, layout("Password", Some(cx.session), &b))
}

/// The schema in force, as cn=Subschema publishes it: object classes and attribute types,
/// filtered by a text in their names, OIDs or descriptions.
async fn schema_page(cx: &Cx<'_>) -> Resp {
    let find = cx.q("q").trim().to_ascii_lowercase();
    let read = cx
        .session
        .client
        .lock()
        .await
        .read("cn=Subschema", &["objectClasses", "attributeTypes"])
        .await;
    let e = match read {
        Ok((Some(e), _)) => e,
        Ok((None, o)) => {
            return html(
                StatusCode::BAD_GATEWAY,
                layout("Schema", Some(cx.session), &result_note(&o)),
            )
        }
        Err(e) => return cx.broken(e),
    };
    let mut b = String::new();
    let _ = write!(
        b,
        "<form method=\"get\" action=\"/schema\" class=\"card\" role=\"search\"><label for=\"q\">Find (name, OID or description)</label>\
         <input id=\"q\" name=\"q\" value=\"{}\"><button type=\"submit\">Find</button></form>",
        esc(cx.q("q"))
    );
    for (title, attr, id) in [
        ("Object classes", "objectClasses", "classes"),
        ("Attribute types", "attributeTypes", "types"),
    ] {
        let defs: Vec<String> = e
            .get(attr)
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .filter(|d| find.is_empty() || d.to_ascii_lowercase().contains(&find))
            .collect();
        let _ = write!(
            b,
            "<section><h2>{title} ({})</h2><dl class=\"schema\" id=\"{id}\">",
            defs.len()
        );
        for d in defs {
            let name = d
                .split("NAME '")
                .nth(1)
                .and_then(|r| r.split('\'').next())
                .or_else(|| {
                    d.split("NAME ( '")
                        .nth(1)
                        .and_then(|r| r.split('\'').next())
                })
                .unwrap_or("");
            let _ = write!(b, "<dt>{}</dt><dd><code>{}</code></dd>", esc(name), esc(&d));
        }
        b.push_str("</dl></section>");
    }
    cx.page("Schema", &b)
}

/// Entries of cn=Monitor read for one dashboard update at most.
pub const MAX_MONITOR_ENTRIES: usize = 2_000;

/// Escapes a string for a JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '<' || c == '>' || c == '&' => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The live dashboard: charts drawn by the console's script from `/api/monitor`, polled every
/// two seconds.
async fn dashboard(cx: &Cx<'_>) -> Resp {
    let b = "<div id=\"dashboard\" data-source=\"/api/monitor\" data-interval=\"2000\">\
        <p id=\"dash-status\" role=\"status\" aria-live=\"polite\">Loading the figures of cn=Monitor…</p>\
        <div class=\"charts\">\
        <figure class=\"chart\"><figcaption>Operations per second, by type: <strong id=\"ops-total-rate\">–</strong> in all</figcaption><svg id=\"chart-ops\" viewBox=\"0 0 600 200\" role=\"img\" aria-label=\"Operations per second by type\"></svg><ul class=\"legend\" id=\"legend-ops\"></ul></figure>\
        <figure class=\"chart\"><figcaption>Open connections: <strong id=\"conn-now\">–</strong></figcaption><svg id=\"chart-conn\" viewBox=\"0 0 600 200\" role=\"img\" aria-label=\"Open connections\"></svg></figure>\
        <figure class=\"chart\"><figcaption>Writer batches per second: <strong id=\"batch-rate\">–</strong></figcaption><svg id=\"chart-batches\" viewBox=\"0 0 600 200\" role=\"img\" aria-label=\"Writer batches per second\"></svg></figure>\
        <figure class=\"chart\"><figcaption>Commit (fsync) latency, µs: p50 <strong id=\"commit-p50\">–</strong>, p99 <strong id=\"commit-p99\">–</strong></figcaption><svg id=\"chart-commit\" viewBox=\"0 0 600 200\" role=\"img\" aria-label=\"Commit latency percentiles\"></svg><ul class=\"legend\" id=\"legend-commit\"></ul></figure>\
        <figure class=\"chart\"><figcaption>Operation latency, µs (dispatch to result, since start): p50 and p99 by type</figcaption><svg id=\"chart-latency\" viewBox=\"0 0 600 200\" role=\"img\" aria-label=\"Operation latency percentiles by type\"></svg><ul class=\"legend\" id=\"legend-latency\"></ul></figure>\
        </div>\
        <h2>Every figure</h2><p class=\"hint\">Credential cache, snapshots, reloads, disk, memory, replication (per consumer and provider) and the rest, as cn=Monitor shows them to you; updated live.</p>\
        <table class=\"results\" id=\"figures\"><thead><tr><th scope=\"col\">Entry</th><th scope=\"col\">Figures</th></tr></thead><tbody></tbody></table></div>";
    cx.page("Dashboard", b)
}

/// cn=Monitor as JSON, read as the session's identity (so only the administrator and the
/// `monitor_readers` see it): `{"t": ms, "entries": [{"dn": …, "a": {name: value}}]}`.
async fn monitor_json(cx: &Cx<'_>) -> Resp {
    let r = cx
        .session
        .client
        .lock()
        .await
        .search(&Query {
            base: "cn=Monitor",
            scope: Scope::Subtree,
            filter: every(),
            // The figures (monitorOpCompleted, …) are operational attributes, as in slapd.
            attrs: &["*", "+"],
            page: 0,
            cookie: b"",
            max_entries: MAX_MONITOR_ENTRIES,
        })
        .await;
    let found = match r {
        Ok(f) => f,
        Err(e) => {
            return respond(
                StatusCode::BAD_GATEWAY,
                "application/json",
                format!("{{\"error\":{}}}", json_str(&e.to_string())),
            )
        }
    };
    if !found.outcome.ok() {
        let why = if found.outcome.code == proto::ResultCode::NoSuchObject {
            "your identity may not read cn=Monitor (the administrator and monitor_readers may)"
                .to_string()
        } else {
            found.outcome.describe()
        };
        return respond(
            StatusCode::FORBIDDEN,
            "application/json",
            format!("{{\"error\":{}}}", json_str(&why)),
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let mut o = format!("{{\"t\":{now},\"entries\":[");
    for (i, e) in found.entries.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let _ = write!(o, "{{\"dn\":{},\"a\":{{", json_str(&e.dn));
        let mut first = true;
        for (name, values) in &e.attrs {
            const NOT_FIGURES: &[&str] = &[
                "objectClass",
                "cn",
                "hasSubordinates",
                "subschemaSubentry",
                "structuralObjectClass",
                "entryDN",
            ];
            if NOT_FIGURES.iter().any(|n| name.eq_ignore_ascii_case(n)) {
                continue;
            }
            let v: Vec<String> = values
                .iter()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect();
            if !first {
                o.push(',');
            }
            first = false;
            let _ = write!(o, "{}:{}", json_str(name), json_str(&v.join("; ")));
        }
        o.push_str("}}");
    }
    o.push_str("]}");
    respond(StatusCode::OK, "application/json", o)
}

/// The configuration in force (every key as `linden check-config` would show it: secrets
/// hidden, tables summarized) and the last reload. Shown to the identities that may read
/// cn=Monitor (the administrator and `monitor_readers`): the gate is a read of cn=Monitor's
/// last-reload entry as the session's identity.
async fn config_page(cx: &Cx<'_>) -> Resp {
    let read = cx
        .session
        .client
        .lock()
        .await
        .read("cn=Last,cn=Reloads,cn=Monitor", &["*", "+"])
        .await;
    let last = match read {
        Ok((Some(e), _)) => Some(e),
        Ok((None, o)) if o.code == proto::ResultCode::NoSuchObject && o.matched.eq_ignore_ascii_case("cn=Reloads,cn=Monitor") => None,
        Ok((None, _)) => {
            return html(
                StatusCode::FORBIDDEN,
                layout(
                    "Configuration",
                    Some(cx.session),
                    "<p class=\"error\" role=\"alert\">Your identity may not see the server's configuration (the administrator and monitor_readers may: the same rule as cn=Monitor).</p>",
                ),
            )
        }
        Err(e) => return cx.broken(e),
    };
    let mut b = String::new();
    b.push_str("<h2>Last reload</h2>");
    match &last {
        Some(e) => {
            b.push_str("<table class=\"attrs\" id=\"last-reload\"><tbody>");
            for (n, v) in &e.attrs {
                if [
                    "objectClass",
                    "cn",
                    "hasSubordinates",
                    "subschemaSubentry",
                    "structuralObjectClass",
                    "entryDN",
                ]
                .iter()
                .any(|x| n.eq_ignore_ascii_case(x))
                {
                    continue;
                }
                let v: Vec<String> = v
                    .iter()
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .collect();
                let _ = write!(
                    b,
                    "<tr><th scope=\"row\">{}</th><td>{}</td></tr>",
                    esc(n),
                    esc(&v.join("; "))
                );
            }
            b.push_str("</tbody></table>");
        }
        None => b.push_str("<p id=\"last-reload\">No reload since the server started.</p>"),
    }
    let config = cx.console.shared.config();
    let mut section = "";
    b.push_str("<h2>Settings in force</h2><p class=\"hint\">Secrets are hidden; tables are summarized. docs/configuration.md describes each key.</p><table class=\"results\" id=\"settings\">");
    for k in crate::config::KEYS {
        if k.section != section {
            section = k.section;
            let _ = write!(b, "<tr><th colspan=\"3\" scope=\"colgroup\">{}</th></tr><tr><th scope=\"col\">key</th><th scope=\"col\">value</th><th scope=\"col\">reload</th></tr>", esc(section));
        }
        let _ = write!(
            b,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            esc(k.name),
            esc(&k.show(&config)),
            k.reload.name()
        );
    }
    b.push_str("</table>");
    cx.page("Configuration", &b)
}

/// Records of the audit log on one page of `/audit`.
pub const AUDIT_PAGE: usize = 20;

/// The recent records of the audit log, newest first (`console::audit`), for the
/// administrator (`admin_dn`) only: the log holds every change with its values, which the
/// access rules may hide from anyone else (a `monitor_readers` identity included).
async fn audit_page(cx: &Cx<'_>) -> Resp {
    let shared = &cx.console.shared;
    let admin = shared
        .parse_dn(cx.session.dn.as_bytes())
        .is_ok_and(|(_, n)| n == shared.admin);
    if !admin {
        return html(
            StatusCode::FORBIDDEN,
            layout(
                "Audit log",
                Some(cx.session),
                "<p class=\"error\" role=\"alert\">The audit log is shown to the administrator \
                 (<code>admin_dn</code>) only: it holds every change with its values, which the \
                 access rules may hide from you.</p>",
            ),
        );
    }
    let path =
        match &shared.config().audit_log {
            crate::logs::LogTarget::File(p) => p.clone(),
            crate::logs::LogTarget::Off => return cx.page(
                "Audit log",
                "<p class=\"note\">The audit log is off. To record every change (who, when, from \
                 where, and what, as LDIF) and see the latest here, set <code>audit_log = \
                 \"/var/log/linden/audit.log\"</code> in the configuration file (or \
                 <code>--audit-log FILE</code>, <code>LINDEN_AUDIT_LOG</code>) and reload \
                 (<code>linden reload</code> or SIGHUP): the key is live.</p>",
            ),
            crate::logs::LogTarget::Stdout => {
                return cx.page(
                    "Audit log",
                    "<p class=\"note\">The audit log goes to standard output (the journal, under \
                 systemd), which the console cannot read back. To see the latest changes here, \
                 set <code>audit_log</code> to a file (e.g. \
                 <code>\"/var/log/linden/audit.log\"</code>) and reload.</p>",
                )
            }
        };
    let before = cx.q("before").parse::<u64>().ok();
    let file = path.clone();
    let read =
        tokio::task::spawn_blocking(move || super::audit::read_page(&file, before, AUDIT_PAGE))
            .await;
    let page = match read {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            return html(
                StatusCode::INTERNAL_SERVER_ERROR,
                layout(
                    "Audit log",
                    Some(cx.session),
                    &format!(
                        "<p class=\"error\" role=\"alert\">Cannot read the audit log {}: {}</p>",
                        esc(&path.display().to_string()),
                        esc(&e.to_string())
                    ),
                ),
            )
        }
        Err(_) => {
            return super::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the audit log could not be read\n",
            )
        }
    };
    let mut b = String::new();
    let _ = write!(
        b,
        "<p>The last changes recorded in <code>{}</code> ({} bytes now), newest first, {AUDIT_PAGE} a page. \
         After logrotate moved it, this shows what the new file holds.</p>",
        esc(&path.display().to_string()),
        page.size
    );
    if page.restarted {
        b.push_str(
            "<p class=\"note\" role=\"status\">The file changed since the previous page (it was \
             rotated): these are the newest records of the file as it is now.</p>",
        );
    }
    if page.records.is_empty() {
        b.push_str("<p class=\"note\">No change recorded here yet.</p>");
    }
    b.push_str("<ol class=\"audit\" id=\"audit-records\">");
    for (at, text, cut) in &page.records {
        let _ = write!(b, "<li id=\"at-{at}\"><pre>{}</pre>", esc(text));
        if *cut > 0 {
            let _ = write!(
                b,
                "<p class=\"hint\">… {cut} more bytes: read the file for the whole record.</p>"
            );
        }
        b.push_str("</li>");
    }
    b.push_str("</ol>");
    if page.too_large {
        let _ = write!(
            b,
            "<p class=\"note\">A record larger than {} MiB stops this page: read the file for older records.</p>",
            super::audit::MAX_PAGE_BYTES >> 20
        );
    }
    b.push_str("<p class=\"actions\">");
    if before.is_some() {
        b.push_str("<a href=\"/audit\">Newest</a> ");
    }
    if let Some(older) = page.older.filter(|_| !page.too_large) {
        let _ = write!(
            b,
            "<a rel=\"next\" href=\"/audit?before={older}\">Older</a>"
        );
    }
    b.push_str("</p>");
    cx.page("Audit log", &b)
}
