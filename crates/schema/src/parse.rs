//! RFC 4512 description parser and OpenLDAP `.schema` file reader.
//!
//! A file is a sequence of statements. A statement starts on a line that does not begin with
//! whitespace; lines that begin with whitespace continue it; `#` lines and blank lines are
//! ignored. Statements: `attributetype ( ... )`, `objectclass ( ... )`,
//! `objectidentifier <name> <oid or name:suffix>`, `ldapsyntax ( ... )`, or a bare description
//! `( ... )` whose kind is told by its keywords. The published `definition` strings are
//! regenerated from the parsed form, so macros never leak into cn=Subschema.

use crate::{
    syntax, AttrId, AttributeType, ClassId, ClassKind, ObjectClass, RuleId, Schema, SchemaError,
    SchemaErrorKind, Usage,
};

/// One statement with the file line each of its pieces came from.
struct Statement {
    text: String,
    /// (byte offset in `text`, line number), ascending.
    lines: Vec<(usize, usize)>,
}

impl Statement {
    fn line_at(&self, offset: usize) -> usize {
        let mut line = self.lines.first().map(|l| l.1).unwrap_or(0);
        for &(start, l) in &self.lines {
            if start <= offset {
                line = l;
            } else {
                break;
            }
        }
        line
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Open,
    Close,
    Dollar,
    Word(String),
    Quoted(String),
}

/// A parse failure at a byte offset of the statement.
struct Fail {
    at: usize,
    message: String,
    kind: SchemaErrorKind,
}

fn fail<T>(at: usize, message: impl Into<String>) -> Result<T, Fail> {
    Err(Fail {
        at,
        message: message.into(),
        kind: SchemaErrorKind::Conflict,
    })
}

/// A failure to parse the text itself.
fn syntax<T>(at: usize, message: impl Into<String>) -> Result<T, Fail> {
    Err(Fail {
        at,
        message: message.into(),
        kind: SchemaErrorKind::Syntax,
    })
}

fn tokenize(s: &str, base: usize) -> Result<Vec<(usize, Tok)>, Fail> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let at = base + i;
        match c {
            _ if c.is_ascii_whitespace() => i += 1,
            b'(' => {
                out.push((at, Tok::Open));
                i += 1;
            }
            b')' => {
                out.push((at, Tok::Close));
                i += 1;
            }
            b'$' => {
                out.push((at, Tok::Dollar));
                i += 1;
            }
            b'\'' => {
                let start = i + 1;
                let Some(len) = b[start..].iter().position(|&x| x == b'\'') else {
                    return syntax(at, "unterminated quoted string");
                };
                let raw = &s[start..start + len];
                out.push((at, Tok::Quoted(unescape_qdstring(raw))));
                i = start + len + 1;
            }
            _ => {
                let start = i;
                while i < b.len()
                    && !b[i].is_ascii_whitespace()
                    && !matches!(b[i], b'(' | b')' | b'$' | b'\'')
                {
                    i += 1;
                }
                out.push((at, Tok::Word(s[start..i].to_string())));
            }
        }
    }
    Ok(out)
}

/// Undoes the `\27` / `\5C` escapes of an RFC 4512 qdstring (case-insensitive hex).
fn unescape_qdstring(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(p) = rest.find('\\') {
        out.push_str(&rest[..p]);
        let esc = rest.get(p + 1..p + 3).unwrap_or("");
        if esc.eq_ignore_ascii_case("27") {
            out.push('\'');
            rest = &rest[p + 3..];
        } else if esc.eq_ignore_ascii_case("5c") {
            out.push('\\');
            rest = &rest[p + 3..];
        } else {
            out.push('\\');
            rest = &rest[p + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Escapes a string for use inside `'...'` in a description.
pub(crate) fn escape_qdstring(s: &str) -> String {
    s.replace('\\', "\\5C").replace('\'', "\\27")
}

#[derive(Debug)]
enum Val {
    Word(String),
    Quoted(String),
}

impl Val {
    fn text(&self) -> &str {
        match self {
            Val::Word(s) | Val::Quoted(s) => s,
        }
    }
}

/// A parsed description: the leading OID (unresolved) and its keyword fields in order.
struct Desc {
    oid: String,
    oid_at: usize,
    fields: Vec<(String, Vec<Val>, usize)>,
}

const FLAGS: &[&str] = &[
    "OBSOLETE",
    "SINGLE-VALUE",
    "COLLECTIVE",
    "NO-USER-MODIFICATION",
    "ABSTRACT",
    "STRUCTURAL",
    "AUXILIARY",
];

impl Desc {
    fn parse(toks: &[(usize, Tok)], end: usize) -> Result<Desc, Fail> {
        let mut it = toks.iter().peekable();
        match it.next() {
            Some((_, Tok::Open)) => {}
            Some((at, _)) => return syntax(*at, "expected '(' to open the description"),
            None => return syntax(end, "missing description"),
        }
        let (oid_at, oid) = match it.next() {
            Some((at, Tok::Word(w))) => (*at, w.clone()),
            Some((at, _)) => return syntax(*at, "expected an OID after '('"),
            None => return syntax(end, "missing OID"),
        };
        let mut fields = Vec::new();
        loop {
            let Some((at, tok)) = it.next() else {
                return syntax(end, "missing ')' at end of description");
            };
            let kw = match tok {
                Tok::Close => break,
                Tok::Word(w) => w.to_ascii_uppercase(),
                _ => return syntax(*at, "expected a keyword"),
            };
            let mut vals = Vec::new();
            if !FLAGS.contains(&kw.as_str()) {
                match it.next() {
                    Some((_, Tok::Word(w))) => vals.push(Val::Word(w.clone())),
                    Some((_, Tok::Quoted(q))) => vals.push(Val::Quoted(q.clone())),
                    Some((_, Tok::Open)) => loop {
                        match it.next() {
                            Some((_, Tok::Close)) => break,
                            Some((_, Tok::Dollar)) => {}
                            Some((_, Tok::Word(w))) => vals.push(Val::Word(w.clone())),
                            Some((_, Tok::Quoted(q))) => vals.push(Val::Quoted(q.clone())),
                            Some((a, Tok::Open)) => return syntax(*a, "unexpected '('"),
                            None => return syntax(end, format!("missing ')' after {kw} list")),
                        }
                    },
                    Some((a, _)) => return syntax(*a, format!("missing value after {kw}")),
                    None => return syntax(end, format!("missing value after {kw}")),
                }
            }
            fields.push((kw, vals, *at));
        }
        if let Some((at, _)) = it.next() {
            return syntax(*at, "unexpected text after ')'");
        }
        Ok(Desc {
            oid,
            oid_at,
            fields,
        })
    }

    fn has(&self, kw: &str) -> bool {
        self.fields.iter().any(|f| f.0 == kw)
    }
}

fn is_numeric_oid(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && s.contains('.')
}

fn usage_str(u: Usage) -> &'static str {
    match u {
        Usage::UserApplications => "userApplications",
        Usage::DirectoryOperation => "directoryOperation",
        Usage::DistributedOperation => "distributedOperation",
        Usage::DsaOperation => "dSAOperation",
    }
}

fn names_str(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => format!(" NAME '{}'", escape_qdstring(one)),
        many => {
            let list: Vec<String> = many
                .iter()
                .map(|n| format!("'{}'", escape_qdstring(n)))
                .collect();
            format!(" NAME ( {} )", list.join(" "))
        }
    }
}

fn oids_str(kw: &str, list: &[String]) -> String {
    match list {
        [] => String::new(),
        [one] => format!(" {kw} {one}"),
        many => format!(" {kw} ( {} )", many.join(" $ ")),
    }
}

/// A canonical definition without its DESC: two files that define one OID alike but word
/// its description differently (Debian's `core.schema` and the built-in one) agree.
fn without_desc(def: &str) -> std::borrow::Cow<'_, str> {
    let Some(start) = def.find(" DESC '") else {
        return def.into();
    };
    let body = start + " DESC '".len();
    match def[body..].find('\'') {
        Some(end) => format!("{}{}", &def[..start], &def[body + end + 1..]).into(),
        None => def.into(),
    }
}

/// Splits `.schema` text into statements: a statement starts on a line that does not begin
/// with whitespace and continues on lines that do; `#` lines and blank lines are skipped.
fn schema_statements(text: &str) -> Vec<Statement> {
    let mut stmts: Vec<Statement> = Vec::new();
    let mut cur: Option<Statement> = None;
    for (idx, line) in text.lines().enumerate() {
        let lineno = idx + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let continues = line.starts_with(|c: char| c.is_whitespace());
        match (&mut cur, continues) {
            (Some(st), true) => {
                st.text.push(' ');
                st.lines.push((st.text.len(), lineno));
                st.text.push_str(trimmed);
            }
            _ => {
                if let Some(st) = cur.take() {
                    stmts.push(st);
                }
                cur = Some(Statement {
                    text: trimmed.to_string(),
                    lines: vec![(0, lineno)],
                });
            }
        }
    }
    if let Some(st) = cur.take() {
        stmts.push(st);
    }
    stmts
}

/// The statement keyword an LDIF attribute of a schema entry stands for, if any: the
/// `olc*` attributes of a `cn=schema,cn=config` entry (as Debian ships in
/// `/etc/ldap/schema/*.ldif`) and the RFC 4512 attributes of a subschema entry.
fn ldif_keyword(attr: &str) -> Option<&'static str> {
    let name = attr.split(';').next().unwrap_or("").to_ascii_lowercase();
    Some(match name.as_str() {
        "olcattributetypes" | "attributetypes" => "attributetype",
        "olcobjectclasses" | "objectclasses" => "objectclass",
        "olcobjectidentifier" => "objectidentifier",
        "olcldapsyntaxes" | "ldapsyntaxes" => "ldapsyntax",
        _ => return None,
    })
}

/// Reads the schema definitions out of an LDIF file: every value of the attributes
/// `ldif_keyword` knows, in file order, as one statement each (a leading `{n}` ordering
/// prefix, as cn=config writes it, is dropped). Other attributes (`dn`, `objectClass`, `cn`,
/// `changetype` …) are ignored. Folded lines (RFC 2849: a continuation line starts with one
/// space) and base64 values (`::`) are understood. Errors give the line.
fn ldif_statements(text: &str) -> Result<Vec<Statement>, (usize, String)> {
    // Unfold: (first line number, logical line, (offset, line number) of each piece).
    let mut logical: Vec<Statement> = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(rest) = line.strip_prefix(' ') {
            match logical.last_mut() {
                Some(st) => {
                    st.lines.push((st.text.len(), lineno));
                    st.text.push_str(rest);
                    continue;
                }
                None => return Err((lineno, "continuation line with nothing to continue".into())),
            }
        }
        logical.push(Statement {
            text: line.to_string(),
            lines: vec![(0, lineno)],
        });
    }
    let mut out = Vec::new();
    for st in logical {
        let t = st.text.as_str();
        if t.trim().is_empty() || t.starts_with('#') || t.trim() == "-" {
            continue;
        }
        let Some(colon) = t.find(':') else {
            return Err((
                st.line_at(0),
                format!("not an LDIF line (no ':'): '{}'", t.trim()),
            ));
        };
        let Some(kw) = ldif_keyword(t[..colon].trim()) else {
            continue;
        };
        let rest = &t[colon + 1..];
        let (value, value_at) = if let Some(b64) = rest.strip_prefix(':') {
            let decoded = base64_decode(b64.trim())
                .ok_or_else(|| (st.line_at(colon), "invalid base64 value".to_string()))?;
            let v = String::from_utf8(decoded)
                .map_err(|_| (st.line_at(colon), "base64 value is not UTF-8".to_string()))?;
            // A decoded value has no positions of its own: every error points at its first line.
            (v, None)
        } else if rest.starts_with('<') {
            return Err((
                st.line_at(colon),
                "URL values (':<') are not supported in schema files".into(),
            ));
        } else {
            let lead = rest.len() - rest.trim_start().len();
            (rest.trim().to_string(), Some(colon + 1 + lead))
        };
        // cn=config keeps multi-valued attributes ordered with an `{n}` prefix.
        let (value, skipped) = match value.strip_prefix('{') {
            Some(r) => match r.find('}') {
                Some(end) if r[..end].bytes().all(|b| b.is_ascii_digit()) => (
                    r[end + 1..].trim_start().to_string(),
                    value.len() - r[end + 1..].trim_start().len(),
                ),
                _ => (value, 0),
            },
            None => (value, 0),
        };
        let text = format!("{kw} {value}");
        let prefix = kw.len() + 1;
        let lines = match value_at {
            Some(at) => {
                // Statement offset o maps to logical offset at + skipped + (o - prefix).
                let base = at + skipped;
                let mut lines = vec![(0, st.line_at(base))];
                for &(off, l) in &st.lines {
                    if off > base {
                        lines.push((off - base + prefix, l));
                    }
                }
                lines
            }
            None => vec![(0, st.line_at(colon))],
        };
        out.push(Statement { text, lines });
    }
    Ok(out)
}

/// Standard base64 (RFC 4648, with padding), as LDIF uses for `::` values.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let b: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if !b.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (i, q) in b.chunks(4).enumerate() {
        let last = i + 1 == b.len() / 4;
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

impl Schema {
    pub(crate) fn load_inner(&mut self, text: &str, origin: &str) -> Result<(), SchemaError> {
        let stmts = schema_statements(text);
        self.apply(&stmts, origin)
    }

    /// Takes in the definitions of an LDIF file (`cn=schema` entries of `cn=config`, or a
    /// subschema entry): see `ldif_statements`.
    pub(crate) fn load_ldif_inner(&mut self, text: &str, origin: &str) -> Result<(), SchemaError> {
        let stmts = ldif_statements(text).map_err(|(line, message)| SchemaError {
            origin: origin.to_string(),
            line,
            message,
            kind: SchemaErrorKind::Syntax,
        })?;
        self.apply(&stmts, origin)
    }

    fn apply(&mut self, stmts: &[Statement], origin: &str) -> Result<(), SchemaError> {
        for st in stmts {
            if let Err(f) = self.statement(&st.text) {
                return Err(SchemaError {
                    origin: origin.to_string(),
                    line: st.line_at(f.at),
                    message: f.message,
                    kind: f.kind,
                });
            }
        }
        Ok(())
    }

    fn statement(&mut self, text: &str) -> Result<(), Fail> {
        if text.starts_with('(') {
            let toks = tokenize(text, 0)?;
            let d = Desc::parse(&toks, text.len())?;
            let class_kw = ["MUST", "MAY", "ABSTRACT", "STRUCTURAL", "AUXILIARY"];
            let attr_kw = [
                "SYNTAX",
                "EQUALITY",
                "ORDERING",
                "SUBSTR",
                "SINGLE-VALUE",
                "COLLECTIVE",
                "NO-USER-MODIFICATION",
                "USAGE",
            ];
            let is_class = if class_kw.iter().any(|k| d.has(k)) {
                true
            } else if attr_kw.iter().any(|k| d.has(k)) {
                false
            } else {
                let sup = d
                    .fields
                    .iter()
                    .find(|f| f.0 == "SUP")
                    .and_then(|f| f.1.first());
                match sup {
                    Some(s) => self.attr_by_name(s.text()).is_none(),
                    None => true,
                }
            };
            return if is_class {
                self.add_class(&d)
            } else {
                self.add_attr(&d)
            };
        }
        let kw_end = text
            .find(|c: char| c.is_whitespace() || c == '(')
            .unwrap_or(text.len());
        let kw = text[..kw_end].trim_end_matches(':').to_ascii_lowercase();
        let rest = &text[kw_end..];
        match kw.as_str() {
            "attributetype" | "attributetypes" => {
                let toks = tokenize(rest, kw_end)?;
                let d = Desc::parse(&toks, text.len())?;
                self.add_attr(&d)
            }
            "objectclass" | "objectclasses" => {
                let toks = tokenize(rest, kw_end)?;
                let d = Desc::parse(&toks, text.len())?;
                self.add_class(&d)
            }
            "ldapsyntax" | "ldapsyntaxes" if self.mode.types_and_classes_only => fail(
                0,
                "only attribute types and object classes can be added to the running schema",
            ),
            "ldapsyntax" | "ldapsyntaxes" => {
                let toks = tokenize(rest, kw_end)?;
                let d = Desc::parse(&toks, text.len())?;
                let oid = self.resolve_oid(&d.oid, d.oid_at)?;
                if self.syntax_index.contains_key(&oid) {
                    return fail(d.oid_at, format!("duplicate ldapSyntax {oid}"));
                }
                let desc = d
                    .fields
                    .iter()
                    .find(|f| f.0 == "DESC")
                    .and_then(|f| f.1.first());
                self.add_syntax(&oid, desc.map(Val::text).unwrap_or(""), syntax::Check::Any);
                Ok(())
            }
            "objectidentifier" if self.mode.types_and_classes_only => fail(
                0,
                "only attribute types and object classes can be added to the running schema",
            ),
            "objectidentifier" => {
                let toks = tokenize(rest, kw_end)?;
                let words: Vec<&(usize, Tok)> = toks.iter().collect();
                match words.as_slice() {
                    [(_, Tok::Word(name)), (at, Tok::Word(oid))] => {
                        let oid = self.resolve_oid(oid, *at)?;
                        self.macros.insert(name.to_ascii_lowercase(), oid);
                        Ok(())
                    }
                    _ => fail(kw_end, "objectidentifier needs a name and an OID"),
                }
            }
            _ => syntax(0, format!("unknown directive '{}'", &text[..kw_end])),
        }
    }

    /// Whether a new definition repeats an existing one (same OID) exactly and the load
    /// options say to skip such repeats.
    fn is_identical(&self, existing: Option<&String>, def: &str) -> bool {
        self.mode.skip_identical && existing.is_some_and(|e| without_desc(e) == without_desc(def))
    }

    /// Numeric OID, `macro`, or `macro:suffix` to a numeric OID.
    fn resolve_oid(&self, raw: &str, at: usize) -> Result<String, Fail> {
        if is_numeric_oid(raw) {
            return Ok(raw.to_string());
        }
        let (name, suffix) = match raw.split_once(':') {
            Some((n, s)) => (n, Some(s)),
            None => (raw, None),
        };
        let Some(base) = self.macros.get(&name.to_ascii_lowercase()) else {
            return fail(
                at,
                format!("OID '{raw}' is neither numeric nor a defined objectidentifier"),
            );
        };
        let oid = match suffix {
            Some(s) => format!("{base}.{s}"),
            None => base.clone(),
        };
        if is_numeric_oid(&oid) {
            Ok(oid)
        } else {
            fail(at, format!("OID '{raw}' expands to invalid OID '{oid}'"))
        }
    }

    fn rule_ref(&self, v: &Val, at: usize) -> Result<RuleId, Fail> {
        let name = v.text();
        if let Some(r) = self.rule_by_name(name) {
            return Ok(r);
        }
        if let Ok(oid) = self.resolve_oid(name, at) {
            if let Some(r) = self.rule_by_name(&oid) {
                return Ok(r);
            }
        }
        fail(at, format!("matching rule '{name}' not defined"))
    }

    fn attr_ref(&self, name: &str, at: usize) -> Result<AttrId, Fail> {
        if let Some(a) = self.attr_by_name(name) {
            return Ok(a);
        }
        if let Ok(oid) = self.resolve_oid(name, at) {
            if let Some(a) = self.attr_by_name(&oid) {
                return Ok(a);
            }
        }
        fail(at, format!("attribute type '{name}' not defined"))
    }

    fn class_ref(&self, name: &str, at: usize) -> Result<ClassId, Fail> {
        if let Some(c) = self.class_by_name(name) {
            return Ok(c);
        }
        if let Ok(oid) = self.resolve_oid(name, at) {
            if let Some(c) = self.class_by_name(&oid) {
                return Ok(c);
            }
        }
        fail(at, format!("object class '{name}' not defined"))
    }

    fn check_new_names<T>(
        index: &crate::NameIndex<T>,
        oid: &str,
        names: &[String],
        at: usize,
    ) -> Result<(), Fail> {
        if index.contains_key(oid) {
            return fail(at, format!("duplicate definition of OID {oid}"));
        }
        for n in names {
            if n.is_empty()
                || !n
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return fail(at, format!("invalid name '{n}'"));
            }
            if index.contains_key(&n.to_ascii_lowercase()) {
                return fail(at, format!("duplicate definition of name '{n}'"));
            }
        }
        Ok(())
    }

    fn add_attr(&mut self, d: &Desc) -> Result<(), Fail> {
        let oid = self.resolve_oid(&d.oid, d.oid_at)?;
        let mut a = AttributeType {
            oid: oid.clone(),
            names: Vec::new(),
            desc: None,
            obsolete: false,
            sup: None,
            equality: None,
            ordering: None,
            substr: None,
            syntax: None,
            syntax_len: None,
            single_value: false,
            collective: false,
            no_user_modification: false,
            usage: Usage::UserApplications,
            definition: String::new(),
        };
        // Explicit references, for the published definition.
        let mut sup_s = String::new();
        let mut rules_s = String::new();
        let mut syntax_s = String::new();
        for (kw, vals, at) in &d.fields {
            let at = *at;
            let one = || {
                vals.first().ok_or(Fail {
                    at,
                    message: format!("missing value after {kw}"),
                    kind: SchemaErrorKind::Syntax,
                })
            };
            match kw.as_str() {
                "NAME" => a.names = vals.iter().map(|v| v.text().to_string()).collect(),
                "DESC" => a.desc = Some(one()?.text().to_string()),
                "OBSOLETE" => a.obsolete = true,
                "SUP" => {
                    let s = self.attr_ref(one()?.text(), at)?;
                    a.sup = Some(s);
                    sup_s = format!(" SUP {}", self.attr(s).name());
                }
                "EQUALITY" | "ORDERING" | "SUBSTR" => {
                    let r = self.rule_ref(one()?, at)?;
                    let want = match kw.as_str() {
                        "EQUALITY" => crate::RuleKind::Equality,
                        "ORDERING" => crate::RuleKind::Ordering,
                        _ => crate::RuleKind::Substring,
                    };
                    if self.rule(r).kind != want {
                        return fail(
                            at,
                            format!("matching rule '{}' cannot be used for {kw}", one()?.text()),
                        );
                    }
                    match kw.as_str() {
                        "EQUALITY" => a.equality = Some(r),
                        "ORDERING" => a.ordering = Some(r),
                        _ => a.substr = Some(r),
                    }
                    let rule = self.rule(r);
                    rules_s.push_str(&format!(
                        " {kw} {}",
                        rule.names.first().unwrap_or(&rule.oid)
                    ));
                }
                "SYNTAX" => {
                    let raw = one()?.text();
                    let (soid, len) = match raw.split_once('{') {
                        Some((o, l)) => {
                            let l = l.trim_end_matches('}');
                            match l.parse::<u32>() {
                                Ok(n) => (o, Some(n)),
                                Err(_) => {
                                    return syntax(at, format!("invalid syntax length in '{raw}'"))
                                }
                            }
                        }
                        None => (raw, None),
                    };
                    let soid = self.resolve_oid(soid, at)?;
                    // As slapd ("Syntax not found"): a syntax neither built in nor defined
                    // by an `ldapsyntax` statement before stops the load.
                    let Some(&sid) = self.syntax_index.get(&soid) else {
                        return fail(at, format!("syntax {soid} is not known to this server"));
                    };
                    a.syntax = Some(sid);
                    a.syntax_len = len;
                    syntax_s = match len {
                        Some(n) => format!(" SYNTAX {soid}{{{n}}}"),
                        None => format!(" SYNTAX {soid}"),
                    };
                }
                "SINGLE-VALUE" => a.single_value = true,
                "COLLECTIVE" => a.collective = true,
                "NO-USER-MODIFICATION" => a.no_user_modification = true,
                "USAGE" => {
                    let u = one()?.text();
                    a.usage = match u.to_ascii_lowercase().as_str() {
                        "userapplications" => Usage::UserApplications,
                        "directoryoperation" => Usage::DirectoryOperation,
                        "distributedoperation" => Usage::DistributedOperation,
                        "dsaoperation" => Usage::DsaOperation,
                        _ => return syntax(at, format!("unknown USAGE '{u}'")),
                    };
                }
                k if k.starts_with("X-") => {}
                k => {
                    return syntax(
                        at,
                        format!("unknown keyword '{k}' in attribute type description"),
                    )
                }
            }
        }
        if let Some(sup) = a.sup {
            let s = self.attr(sup);
            a.equality = a.equality.or(s.equality);
            a.ordering = a.ordering.or(s.ordering);
            a.substr = a.substr.or(s.substr);
            if a.syntax.is_none() {
                a.syntax = s.syntax;
                a.syntax_len = s.syntax_len;
            }
            if a.usage != s.usage {
                return fail(d.oid_at, "attribute type usage differs from its SUP");
            }
        } else if a.syntax.is_none() {
            return fail(d.oid_at, "attribute type has neither SYNTAX nor SUP");
        }
        if a.no_user_modification && a.usage == Usage::UserApplications {
            return fail(
                d.oid_at,
                "NO-USER-MODIFICATION requires an operational USAGE",
            );
        }
        let mut def = format!("( {oid}{}", names_str(&a.names));
        if let Some(desc) = &a.desc {
            def.push_str(&format!(" DESC '{}'", escape_qdstring(desc)));
        }
        if a.obsolete {
            def.push_str(" OBSOLETE");
        }
        def.push_str(&sup_s);
        def.push_str(&rules_s);
        def.push_str(&syntax_s);
        for (on, s) in [
            (a.single_value, " SINGLE-VALUE"),
            (a.collective, " COLLECTIVE"),
            (a.no_user_modification, " NO-USER-MODIFICATION"),
        ] {
            if on {
                def.push_str(s);
            }
        }
        if a.usage != Usage::UserApplications {
            def.push_str(&format!(" USAGE {}", usage_str(a.usage)));
        }
        def.push_str(" )");
        if self.is_identical(
            self.attr_by_name(&oid).map(|x| &self.attr(x).definition),
            &def,
        ) {
            return Ok(());
        }
        if let Some(old) = self.attr_by_name(&oid) {
            if without_desc(&self.attr(old).definition) == without_desc(&def) {
                return Err(Fail {
                    at: d.oid_at,
                    message: format!("attribute type {oid} is already defined"),
                    kind: SchemaErrorKind::Exists,
                });
            }
            return fail(
                d.oid_at,
                format!(
                    "attribute type {oid} is already defined differently: {}",
                    self.attr(old).definition
                ),
            );
        }
        Self::check_new_names(&self.attr_index, &oid, &a.names, d.oid_at)?;
        if self.mode.record {
            self.extensions.push_str(&format!("attributetype {def}\n"));
        }
        a.definition = def;
        let id = AttrId(self.attrs.len() as u32);
        self.attr_index.insert(oid, id);
        for n in &a.names {
            // Also as spelled, so the usual spelling ("objectClass") is found without folding.
            self.attr_index.insert(n.to_string(), id);
            self.attr_index.insert(n.to_ascii_lowercase(), id);
        }
        self.attrs.push(a);
        Ok(())
    }

    fn add_class(&mut self, d: &Desc) -> Result<(), Fail> {
        let oid = self.resolve_oid(&d.oid, d.oid_at)?;
        let mut c = ObjectClass {
            oid: oid.clone(),
            names: Vec::new(),
            desc: None,
            obsolete: false,
            sup: Vec::new(),
            kind: ClassKind::Structural,
            must: Vec::new(),
            may: Vec::new(),
            definition: String::new(),
        };
        let mut kind_given = false;
        for (kw, vals, at) in &d.fields {
            let at = *at;
            match kw.as_str() {
                "NAME" => c.names = vals.iter().map(|v| v.text().to_string()).collect(),
                "DESC" => c.desc = vals.first().map(|v| v.text().to_string()),
                "OBSOLETE" => c.obsolete = true,
                "SUP" => {
                    for v in vals {
                        let s = self.class_ref(v.text(), at)?;
                        c.sup.push(s);
                    }
                }
                "ABSTRACT" | "STRUCTURAL" | "AUXILIARY" => {
                    if kind_given {
                        return fail(at, "more than one kind given");
                    }
                    kind_given = true;
                    c.kind = match kw.as_str() {
                        "ABSTRACT" => ClassKind::Abstract,
                        "STRUCTURAL" => ClassKind::Structural,
                        _ => ClassKind::Auxiliary,
                    };
                }
                "MUST" | "MAY" => {
                    for v in vals {
                        let a = self.attr_ref(v.text(), at)?;
                        if kw == "MUST" {
                            c.must.push(a);
                        } else {
                            c.may.push(a);
                        }
                    }
                }
                k if k.starts_with("X-") => {}
                k => {
                    return syntax(
                        at,
                        format!("unknown keyword '{k}' in object class description"),
                    )
                }
            }
        }
        let attr_names = |ids: &[AttrId]| -> Vec<String> {
            ids.iter()
                .map(|a| self.attr(*a).name().to_string())
                .collect()
        };
        let sup_names: Vec<String> = c
            .sup
            .iter()
            .map(|s| {
                self.class(*s)
                    .names
                    .first()
                    .cloned()
                    .unwrap_or_else(|| self.class(*s).oid.clone())
            })
            .collect();
        let mut def = format!("( {oid}{}", names_str(&c.names));
        if let Some(desc) = &c.desc {
            def.push_str(&format!(" DESC '{}'", escape_qdstring(desc)));
        }
        if c.obsolete {
            def.push_str(" OBSOLETE");
        }
        def.push_str(&oids_str("SUP", &sup_names));
        def.push_str(match c.kind {
            ClassKind::Abstract => " ABSTRACT",
            ClassKind::Structural => " STRUCTURAL",
            ClassKind::Auxiliary => " AUXILIARY",
        });
        def.push_str(&oids_str("MUST", &attr_names(&c.must)));
        def.push_str(&oids_str("MAY", &attr_names(&c.may)));
        def.push_str(" )");
        if self.is_identical(
            self.class_by_name(&oid).map(|x| &self.class(x).definition),
            &def,
        ) {
            return Ok(());
        }
        if let Some(old) = self.class_by_name(&oid) {
            if without_desc(&self.class(old).definition) == without_desc(&def) {
                return Err(Fail {
                    at: d.oid_at,
                    message: format!("object class {oid} is already defined"),
                    kind: SchemaErrorKind::Exists,
                });
            }
            return fail(
                d.oid_at,
                format!(
                    "object class {oid} is already defined differently: {}",
                    self.class(old).definition
                ),
            );
        }
        Self::check_new_names(&self.class_index, &oid, &c.names, d.oid_at)?;
        if self.mode.record {
            self.extensions.push_str(&format!("objectclass {def}\n"));
        }
        c.definition = def;
        let id = ClassId(self.classes.len() as u32);
        self.class_index.insert(oid, id);
        for n in &c.names {
            self.class_index.insert(n.to_string(), id);
            self.class_index.insert(n.to_ascii_lowercase(), id);
        }
        self.classes.push(c);
        Ok(())
    }
}
