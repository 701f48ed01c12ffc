//! The RFC 4515 string form of filters: [`Filter::parse`] and `Display`.
//!
//! Accepted beyond the strict grammar, as `ldapsearch` does: a bare item without parentheses
//! (`uid=x`) and surrounding whitespace. Escapes must be `\XX` (two hex digits); the RFC 1960
//! `\*` form is refused because it is ambiguous with `\2a`-style hex.

use crate::{DecodeLimits, Filter, FilterParseError as E};
use std::borrow::Cow;
use std::fmt::{self, Write as _};

impl Filter<'static> {
    /// Parses an RFC 4515 filter string. Nesting is limited to the default
    /// [`DecodeLimits::max_filter_depth`], the same bound the wire decoder applies.
    pub fn parse(s: &str) -> Result<Filter<'static>, E> {
        let trimmed = s.trim_start();
        let offset = s.len() - trimmed.len();
        let t = trimmed.trim_end();
        if t.is_empty() {
            return Err(E::Empty);
        }
        let mut p = Parser {
            b: t.as_bytes(),
            pos: 0,
            offset,
            max_depth: DecodeLimits::default().max_filter_depth,
        };
        let f = if t.starts_with('(') {
            p.filter(1)?
        } else {
            p.item()?
        };
        if p.pos < p.b.len() {
            return Err(E::Trailing(p.b.len() - p.pos));
        }
        Ok(f)
    }
}

struct Parser<'s> {
    b: &'s [u8],
    pos: usize,
    /// Added to positions in errors so they index the caller's string.
    offset: usize,
    max_depth: usize,
}

type Owned = Cow<'static, [u8]>;

impl<'s> Parser<'s> {
    fn at(&self) -> usize {
        self.offset + self.pos
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn unexpected(&self) -> E {
        match std::str::from_utf8(self.b.get(self.pos..).unwrap_or_default()) {
            Ok(rest) => match rest.chars().next() {
                Some(ch) => E::Unexpected { pos: self.at(), ch },
                None => E::UnexpectedEnd(self.at()),
            },
            Err(_) => E::Unexpected {
                pos: self.at(),
                ch: char::REPLACEMENT_CHARACTER,
            },
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), E> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    fn filter(&mut self, depth: usize) -> Result<Filter<'static>, E> {
        if depth > self.max_depth {
            return Err(E::TooDeep(self.max_depth));
        }
        self.expect(b'(')?;
        let f = match self.peek() {
            Some(c @ (b'&' | b'|')) => {
                self.pos += 1;
                let mut items = Vec::new();
                while self.peek() == Some(b'(') {
                    items.push(self.filter(depth + 1)?);
                }
                if c == b'&' {
                    Filter::And(items)
                } else {
                    Filter::Or(items)
                }
            }
            Some(b'!') => {
                self.pos += 1;
                Filter::Not(Box::new(self.filter(depth + 1)?))
            }
            _ => self.item()?,
        };
        self.expect(b')')?;
        Ok(f)
    }

    /// Reads an attribute description, matching rule or `dn` token: a keystring or numeric OID
    /// with `;options`. Returns the raw bytes (possibly empty).
    fn descr(&mut self) -> &'s [u8] {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b';' | b'_') {
                self.pos += 1;
            } else {
                break;
            }
        }
        {
            let b: &'s [u8] = self.b;
            b.get(start..self.pos).unwrap_or_default()
        }
    }

    /// The raw (still escaped) value up to `)` or the end.
    fn raw_value(&mut self) -> Result<(usize, &'s [u8]), E> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            match c {
                b')' => break,
                b'(' => return Err(self.unexpected()),
                _ => self.pos += 1,
            }
        }
        Ok((start, {
            let b: &'s [u8] = self.b;
            b.get(start..self.pos).unwrap_or_default()
        }))
    }

    fn item(&mut self) -> Result<Filter<'static>, E> {
        let attr_pos = self.at();
        let attr: Owned = Cow::Owned(self.descr().to_vec());
        let op = self.peek();
        if op == Some(b':') {
            return self.extensible(attr, attr_pos);
        }
        if attr.is_empty() {
            return Err(if op.is_none() || op == Some(b')') {
                E::MissingOperator(attr_pos)
            } else {
                E::BadAttribute(attr_pos)
            });
        }
        match op {
            Some(b'=') => {
                self.pos += 1;
                let (start, raw) = self.raw_value()?;
                let start = self.offset + start;
                if raw == b"*" {
                    return Ok(Filter::Present(attr));
                }
                if !raw.contains(&b'*') {
                    return Ok(Filter::Equality(attr, unescape(raw, start)?));
                }
                let mut parts = Vec::new();
                let mut at = start;
                for p in raw.split(|&c| c == b'*') {
                    parts.push(unescape(p, at)?);
                    at += p.len() + 1;
                }
                let n = parts.len();
                let mut initial = None;
                let mut final_ = None;
                let mut any = Vec::new();
                for (i, p) in parts.into_iter().enumerate() {
                    if p.is_empty() {
                        continue;
                    }
                    if i == 0 {
                        initial = Some(p);
                    } else if i == n - 1 {
                        final_ = Some(p);
                    } else {
                        any.push(p);
                    }
                }
                if initial.is_none() && any.is_empty() && final_.is_none() {
                    // `(cn=**)`: only wildcards, which is presence.
                    return Ok(Filter::Present(attr));
                }
                Ok(Filter::Substrings {
                    attr,
                    initial,
                    any,
                    final_,
                })
            }
            Some(c @ (b'~' | b'>' | b'<')) => {
                self.pos += 1;
                self.expect(b'=')?;
                let (start, raw) = self.raw_value()?;
                if let Some(i) = raw.iter().position(|&c| c == b'*') {
                    return Err(E::UnexpectedStar(self.offset + start + i));
                }
                let v = unescape(raw, self.offset + start)?;
                Ok(match c {
                    b'~' => Filter::Approx(attr, v),
                    b'>' => Filter::GreaterOrEqual(attr, v),
                    _ => Filter::LessOrEqual(attr, v),
                })
            }
            None | Some(b')') => Err(E::MissingOperator(self.at())),
            Some(_) => Err(self.unexpected()),
        }
    }

    /// `attr [":dn"] [":" rule] ":=" value` or `[":dn"] ":" rule ":=" value`; `attr` is read.
    fn extensible(&mut self, attr: Owned, attr_pos: usize) -> Result<Filter<'static>, E> {
        let mut dn_attributes = false;
        let mut rule: Option<Owned> = None;
        loop {
            let tok_pos = self.at();
            self.expect(b':').map_err(|_| E::BadExtensible(tok_pos))?;
            if self.peek() == Some(b'=') {
                self.pos += 1;
                break;
            }
            let tok = self.descr();
            if tok.is_empty() || rule.is_some() {
                return Err(E::BadExtensible(tok_pos));
            }
            if tok.eq_ignore_ascii_case(b"dn") && !dn_attributes {
                dn_attributes = true;
            } else {
                rule = Some(Cow::Owned(tok.to_vec()));
            }
        }
        if attr.is_empty() && rule.is_none() {
            return Err(E::BadExtensible(attr_pos));
        }
        let (start, raw) = self.raw_value()?;
        if let Some(i) = raw.iter().position(|&c| c == b'*') {
            return Err(E::UnexpectedStar(self.offset + start + i));
        }
        let value = unescape(raw, self.offset + start)?;
        let attr = if attr.is_empty() { None } else { Some(attr) };
        Ok(Filter::Extensible {
            rule,
            attr,
            value,
            dn_attributes,
        })
    }
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes `\XX` escapes; `at` is the error position of `raw[0]`.
fn unescape(raw: &[u8], at: usize) -> Result<Owned, E> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&c) = raw.get(i) {
        if c == b'\\' {
            let hi = raw.get(i + 1).copied().and_then(hex);
            let lo = raw.get(i + 2).copied().and_then(hex);
            match (hi, lo) {
                (Some(h), Some(l)) => out.push(h << 4 | l),
                _ => return Err(E::BadEscape(at + i)),
            }
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Ok(Cow::Owned(out))
}

/// Writes an assertion value: `*()\` and NUL as `\XX`, other valid UTF-8 as is, and bytes that
/// are not UTF-8 as `\XX`.
fn write_value(f: &mut fmt::Formatter<'_>, v: &[u8]) -> fmt::Result {
    for chunk in v.utf8_chunks() {
        for ch in chunk.valid().chars() {
            match ch {
                '*' | '(' | ')' | '\\' | '\0' => write!(f, "\\{:02x}", ch as u32)?,
                _ => f.write_char(ch)?,
            }
        }
        for b in chunk.invalid() {
            write!(f, "\\{b:02x}")?;
        }
    }
    Ok(())
}

/// Attribute descriptions and rule OIDs are ASCII in practice; anything else is shown lossily.
fn write_descr(f: &mut fmt::Formatter<'_>, d: &[u8]) -> fmt::Result {
    f.write_str(&String::from_utf8_lossy(d))
}

impl fmt::Display for Filter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('(')?;
        match self {
            Filter::And(items) | Filter::Or(items) => {
                f.write_char(if matches!(self, Filter::And(_)) {
                    '&'
                } else {
                    '|'
                })?;
                for i in items {
                    write!(f, "{i}")?;
                }
            }
            Filter::Not(inner) => write!(f, "!{inner}")?,
            Filter::Equality(a, v)
            | Filter::GreaterOrEqual(a, v)
            | Filter::LessOrEqual(a, v)
            | Filter::Approx(a, v) => {
                write_descr(f, a)?;
                f.write_str(match self {
                    Filter::Equality(..) => "=",
                    Filter::GreaterOrEqual(..) => ">=",
                    Filter::LessOrEqual(..) => "<=",
                    _ => "~=",
                })?;
                write_value(f, v)?;
            }
            Filter::Substrings {
                attr,
                initial,
                any,
                final_,
            } => {
                write_descr(f, attr)?;
                f.write_char('=')?;
                if let Some(i) = initial {
                    write_value(f, i)?;
                }
                f.write_char('*')?;
                for a in any {
                    write_value(f, a)?;
                    f.write_char('*')?;
                }
                if let Some(x) = final_ {
                    write_value(f, x)?;
                }
            }
            Filter::Present(a) => {
                write_descr(f, a)?;
                f.write_str("=*")?;
            }
            Filter::Extensible {
                rule,
                attr,
                value,
                dn_attributes,
            } => {
                if let Some(a) = attr {
                    write_descr(f, a)?;
                }
                if *dn_attributes {
                    f.write_str(":dn")?;
                }
                if let Some(r) = rule {
                    f.write_char(':')?;
                    write_descr(f, r)?;
                }
                f.write_str(":=")?;
                write_value(f, value)?;
            }
        }
        f.write_char(')')
    }
}
