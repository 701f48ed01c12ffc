//! Distinguished names: RFC 4514 parsing and string form, and schema normalization.
//!
//! Parsing follows RFC 4514 and, like OpenLDAP, also accepts `;` between RDNs and `"quoted"`
//! values. A `#hex` value is a BER encoding; its OCTET STRING / string contents become the value.

use std::cell::RefCell;
use std::fmt;

use crate::cache::GenCache;
use crate::{Ava, Dn, DnError, NormDn, Rdn, Schema};

fn err<T>(msg: impl Into<String>) -> Result<T, DnError> {
    Err(DnError(msg.into()))
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Contents of a BER string TLV (OCTET STRING, UTF8String, PrintableString, IA5String,
/// T61String, NumericString, VisibleString). The encoding must fill the input exactly.
fn ber_string_contents(der: &[u8]) -> Option<Vec<u8>> {
    let (&tag, rest) = der.split_first()?;
    if !matches!(tag, 0x04 | 0x0C | 0x12 | 0x13 | 0x14 | 0x16 | 0x1A) {
        return None;
    }
    let (&l0, rest) = rest.split_first()?;
    let (len, rest) = if l0 < 0x80 {
        (usize::from(l0), rest)
    } else {
        let n = usize::from(l0 & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() == len).then(|| rest.to_vec())
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    fn attr_type(&mut self) -> Result<String, DnError> {
        let start = self.i;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'-' || c == b'.' || c == b'_')
        {
            self.i += 1;
        }
        let t = &self.b[start..self.i];
        let ok = match t.first() {
            Some(c) if c.is_ascii_alphabetic() => t
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_'),
            Some(c) if c.is_ascii_digit() => t
                .split(|c| *c == b'.')
                .all(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit)),
            _ => false,
        };
        if !ok {
            return err(format!("bad attribute type at offset {start}"));
        }
        Ok(String::from_utf8_lossy(t).into_owned())
    }

    /// An escape after `\`: a special character or two hex digits.
    fn escape(&mut self) -> Result<u8, DnError> {
        let Some(c) = self.peek() else {
            return err("DN ends inside an escape");
        };
        if let Some(h) = hex_val(c) {
            let Some(l) = self.b.get(self.i + 1).copied().and_then(hex_val) else {
                return err(format!("bad hex escape at offset {}", self.i));
            };
            self.i += 2;
            return Ok(h << 4 | l);
        }
        if matches!(
            c,
            b' ' | b'"' | b'#' | b'+' | b',' | b';' | b'<' | b'=' | b'>' | b'\\'
        ) {
            self.i += 1;
            return Ok(c);
        }
        err(format!("bad escape at offset {}", self.i))
    }

    fn value(&mut self) -> Result<Vec<u8>, DnError> {
        match self.peek() {
            Some(b'#') => {
                self.i += 1;
                let start = self.i;
                while matches!(self.peek(), Some(c) if c.is_ascii_hexdigit()) {
                    self.i += 1;
                }
                let hex = &self.b[start..self.i];
                if hex.is_empty() || hex.len() & 1 == 1 {
                    return err("bad #hex value");
                }
                let der: Vec<u8> = hex
                    .chunks(2)
                    .map(|p| hex_val(p[0]).unwrap_or(0) << 4 | hex_val(p[1]).unwrap_or(0))
                    .collect();
                let v = ber_string_contents(&der)
                    .ok_or_else(|| DnError("#hex value is not a BER string".into()))?;
                self.skip_spaces();
                Ok(v)
            }
            Some(b'"') => {
                self.i += 1;
                let mut out = Vec::new();
                loop {
                    match self.peek() {
                        None => return err("unterminated quoted value"),
                        Some(b'"') => {
                            self.i += 1;
                            break;
                        }
                        Some(b'\\') => {
                            self.i += 1;
                            out.push(self.escape()?);
                        }
                        Some(c) => {
                            out.push(c);
                            self.i += 1;
                        }
                    }
                }
                self.skip_spaces();
                Ok(out)
            }
            _ => {
                let mut out = Vec::new();
                // Length up to the last significant byte: unescaped trailing spaces drop off.
                let mut sig = 0;
                while let Some(c) = self.peek() {
                    match c {
                        b',' | b';' | b'+' => break,
                        b'\\' => {
                            self.i += 1;
                            out.push(self.escape()?);
                            sig = out.len();
                        }
                        0 => return err("NUL in DN"),
                        _ => {
                            out.push(c);
                            self.i += 1;
                            if c != b' ' {
                                sig = out.len();
                            }
                        }
                    }
                }
                out.truncate(sig);
                Ok(out)
            }
        }
    }
}

impl Dn {
    /// Parses an RFC 4514 string. The empty string is the root DN.
    pub fn parse(s: &str) -> Result<Dn, DnError> {
        let mut p = Parser {
            b: s.as_bytes(),
            i: 0,
        };
        p.skip_spaces();
        if p.peek().is_none() {
            return Ok(Dn::default());
        }
        let mut rdns = Vec::new();
        let mut avas = Vec::new();
        loop {
            p.skip_spaces();
            let attr = p.attr_type()?;
            p.skip_spaces();
            if p.peek() != Some(b'=') {
                return err(format!("expected '=' at offset {}", p.i));
            }
            p.i += 1;
            p.skip_spaces();
            let value = p.value()?;
            avas.push(Ava { attr, value });
            match p.peek() {
                None => {
                    rdns.push(Rdn { avas });
                    break;
                }
                Some(b'+') => p.i += 1,
                Some(b',' | b';') => {
                    p.i += 1;
                    rdns.push(Rdn {
                        avas: std::mem::take(&mut avas),
                    });
                }
                Some(_) => return err(format!("unexpected character at offset {}", p.i)),
            }
        }
        Ok(Dn { rdns })
    }

    pub fn is_root(&self) -> bool {
        self.rdns.is_empty()
    }

    /// The most specific RDN; `None` for the root DN.
    pub fn rdn(&self) -> Option<&Rdn> {
        self.rdns.first()
    }

    /// The DN without its first RDN; `None` for the root DN.
    pub fn parent(&self) -> Option<Dn> {
        (!self.rdns.is_empty()).then(|| Dn {
            rdns: self.rdns[1..].to_vec(),
        })
    }

    /// Resolves every attribute type and normalizes every value with its equality rule.
    pub fn normalize(&self, schema: &Schema) -> Result<NormDn, DnError> {
        let mut norm = String::new();
        let mut rdns = Vec::with_capacity(self.rdns.len());
        for (i, rdn) in self.rdns.iter().enumerate() {
            if rdn.avas.is_empty() {
                return err("empty RDN");
            }
            let mut parts: Vec<(String, (crate::AttrId, Vec<u8>))> =
                Vec::with_capacity(rdn.avas.len());
            for ava in &rdn.avas {
                let Some(ty) = schema.attr_by_name(&ava.attr) else {
                    return err(format!("attribute type '{}' undefined", ava.attr));
                };
                let at = schema.attr(ty);
                if at.equality.is_none() {
                    return err(format!(
                        "attribute type '{}' has no equality matching rule",
                        at.name()
                    ));
                }
                let key = schema
                    .validate(ty, &ava.value)
                    .and_then(|()| schema.normalize_eq(ty, &ava.value))
                    .map_err(|_| DnError(format!("value of '{}' invalid per syntax", at.name())))?;
                let mut s = at.name().to_ascii_lowercase();
                s.push('=');
                escape_value(&key, &mut s);
                parts.push((s, (ty, ava.value.clone())));
            }
            parts.sort_by(|a, b| a.0.cmp(&b.0));
            if parts.windows(2).any(|w| w[0].0 == w[1].0) {
                return err("RDN has the same attribute value twice");
            }
            if i > 0 {
                norm.push(',');
            }
            let strs: Vec<&str> = parts.iter().map(|p| p.0.as_str()).collect();
            norm.push_str(&strs.join("+"));
            rdns.push(parts.into_iter().map(|p| p.1).collect());
        }
        Ok(NormDn { norm, rdns })
    }
}

/// A DN parsed for a new entry: its string form as stored (`Dn::pretty`), the
/// length of the first RDN in that form, and the normalized DN.
#[derive(Debug, Clone)]
pub struct NewDn {
    pub text: String,
    pub rdn_len: usize,
    pub ndn: NormDn,
}

impl NewDn {
    /// `Dn::parse`, `normalize` and the string forms, with nothing shared between calls.
    fn build(s: &str, schema: &Schema) -> Result<NewDn, DnError> {
        let dn = Dn::parse(s)?;
        let ndn = dn.normalize(schema)?;
        let rdn_len = Dn {
            rdns: dn.rdns.first().cloned().into_iter().collect(),
        }
        .pretty(schema)
        .len();
        Ok(NewDn {
            text: dn.pretty(schema),
            rdn_len,
            ndn,
        })
    }
}

/// A per-thread cache of parents of DNs, by schema generation (`Schema::cached_parent`).
type Parents<V> = std::thread::LocalKey<RefCell<GenCache<Box<str>, V>>>;

impl Schema {
    /// Parses and normalizes the DN of a new entry (`NewDn`). New entries come in runs under
    /// one parent (an import adds a million under `ou=people`), so each thread keeps the
    /// parents it parsed last and only the first RDN is parsed anew: the result is the same as
    /// `NewDn::build`'s, which any DN this cannot split safely goes through.
    pub fn parse_new_dn(&self, s: &str) -> Result<NewDn, DnError> {
        thread_local! {
            static PARENTS: RefCell<GenCache<Box<str>, (String, NormDn)>> =
                RefCell::new(GenCache::default());
        }
        let Some((first, rest)) = self.split_first_rdn(s) else {
            return NewDn::build(s, self);
        };
        let parent = self.cached_parent(&PARENTS, rest, |rest| {
            let p = NewDn::build(rest, self).ok()?;
            (!p.ndn.is_root()).then_some((p.text, p.ndn))
        });
        let Some((ptext, pndn)) = parent else {
            return NewDn::build(s, self);
        };
        let Ok(rdn) = NewDn::build(first, self) else {
            return NewDn::build(s, self);
        };
        if rdn.ndn.rdns.len() != 1 {
            return NewDn::build(s, self);
        }
        let mut rdns = rdn.ndn.rdns;
        rdns.extend(pndn.rdns);
        Ok(NewDn {
            rdn_len: rdn.text.len(),
            text: format!("{},{ptext}", rdn.text),
            ndn: NormDn {
                norm: format!("{},{}", rdn.ndn.norm, pndn.norm),
                rdns,
            },
        })
    }

    /// `Dn::parse(s)?.normalize(self)`, parsing only the first RDN when this thread normalized
    /// the parent lately: the targets of writes, like new entries, are mostly some of many
    /// entries under a few parents (`parse_new_dn` explains the split).
    pub fn normalize_dn(&self, s: &str) -> Result<NormDn, DnError> {
        thread_local! {
            static PARENTS: RefCell<GenCache<Box<str>, NormDn>> =
                RefCell::new(GenCache::default());
        }
        let whole = || Dn::parse(s)?.normalize(self);
        let Some((first, rest)) = self.split_first_rdn(s) else {
            return whole();
        };
        let parent = self.cached_parent(&PARENTS, rest, |rest| {
            let p = Dn::parse(rest).and_then(|d| d.normalize(self)).ok()?;
            (!p.is_root()).then_some(p)
        });
        let Some(parent) = parent else {
            return whole();
        };
        let Ok(rdn) = Dn::parse(first).and_then(|d| d.normalize(self)) else {
            return whole();
        };
        if rdn.rdns.len() != 1 {
            return whole();
        }
        let mut rdns = rdn.rdns;
        rdns.extend(parent.rdns);
        Ok(NormDn {
            norm: format!("{},{}", rdn.norm, parent.norm),
            rdns,
        })
    }

    /// `s` cut at the comma that ends its first RDN, when that RDN is plain (no escapes,
    /// quotes, multiple AVAs, hex value or trailing space, which only context decides) so that
    /// the cut is where the parser would make it, and the rest is short enough to cache.
    fn split_first_rdn<'s>(&self, s: &'s str) -> Option<(&'s str, &'s str)> {
        const MAX_LEN: usize = 1024;
        let i = s.find(',')?;
        let first = &s.as_bytes()[..i];
        let plain = self.generation != 0
            && s.len() - i - 1 <= MAX_LEN
            && !first.ends_with(b" ")
            && !first
                .iter()
                .any(|b| matches!(b, b'\\' | b'"' | b'+' | b';' | b'#'));
        plain.then(|| (&s[..i], &s[i + 1..]))
    }

    /// The parent `rest` as `build` makes it (`None`: it cannot be used), from this thread's
    /// `cache` or built and kept there.
    fn cached_parent<V: Clone>(
        &self,
        cache: &'static Parents<V>,
        rest: &str,
        build: impl FnOnce(&str) -> Option<V>,
    ) -> Option<V> {
        const MAX_ENTRIES: usize = 256;
        if let Some(p) = cache.with_borrow(|c| c.get(self.generation, rest, Clone::clone)) {
            return Some(p);
        }
        let p = build(rest)?;
        cache.with_borrow_mut(|c| c.insert(self.generation, rest.into(), p.clone(), MAX_ENTRIES));
        Some(p)
    }
}

/// Appends a value in RFC 4514 form. Values that are not UTF-8 are written as `#` and the
/// hex of a BER OCTET STRING, which parses back to the same bytes.
pub(crate) fn escape_value(v: &[u8], out: &mut String) {
    let Ok(s) = std::str::from_utf8(v) else {
        out.push_str("#04");
        let len = v.len();
        if len < 0x80 {
            out.push_str(&format!("{len:02x}"));
        } else {
            let bytes: Vec<u8> = len
                .to_be_bytes()
                .iter()
                .copied()
                .skip_while(|b| *b == 0)
                .collect();
            out.push_str(&format!("{:02x}", 0x80 | bytes.len()));
            for b in bytes {
                out.push_str(&format!("{b:02x}"));
            }
        }
        for b in v {
            out.push_str(&format!("{b:02x}"));
        }
        return;
    };
    let n = s.chars().count();
    for (i, c) in s.chars().enumerate() {
        match c {
            ' ' if i == 0 || i + 1 == n => out.push_str("\\ "),
            '#' if i == 0 => out.push_str("\\#"),
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' | '=' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\{b:02x}"));
                }
            }
            c => out.push(c),
        }
    }
}

/// Appends a value as slapd writes it in the DN it stores (its "pretty" form): the characters
/// RFC 4514 requires escaped, and `=`, as `\` and two upper-case hex digits (a leading space
/// or `#` and a trailing space too); everything else, non-ASCII characters included, as it is.
/// Values that are not UTF-8 are written as `escape_value` writes them.
fn escape_pretty(v: &[u8], out: &mut String) {
    let Ok(s) = std::str::from_utf8(v) else {
        escape_value(v, out);
        return;
    };
    let last = s.len().saturating_sub(1);
    for (i, c) in s.char_indices() {
        let escaped = matches!(c, '\0' | '\\' | ',' | ';' | '+' | '"' | '<' | '>' | '=')
            || (i == 0 && matches!(c, ' ' | '#'))
            || (i == last && c == ' ');
        if escaped {
            out.push_str(&format!("\\{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
}

impl Dn {
    /// The DN as slapd stores it (its "pretty" form), which Linden stores too: each attribute
    /// type by the schema's first name for it (`cn` for `CN` or `2.5.4.3`), no spaces around
    /// separators, values escaped by `escape_pretty`. A type the schema does not know is kept
    /// as spelled (a DN that normalizes has none).
    pub fn pretty(&self, schema: &Schema) -> String {
        self.joined(|ava, out| {
            match schema.attr_by_name(&ava.attr) {
                Some(ty) => out.push_str(schema.attr(ty).name()),
                None => out.push_str(&ava.attr),
            }
            out.push('=');
            escape_pretty(&ava.value, out);
        })
    }

    /// The RDNs joined by `,` and each RDN's AVAs by `+`, every AVA written by `ava`.
    fn joined(&self, mut ava: impl FnMut(&crate::Ava, &mut String)) -> String {
        let mut out = String::new();
        for (i, rdn) in self.rdns.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            for (j, a) in rdn.avas.iter().enumerate() {
                if j > 0 {
                    out.push('+');
                }
                ava(a, &mut out);
            }
        }
        out
    }
}

impl fmt::Display for Dn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.joined(|ava, out| {
            out.push_str(&ava.attr);
            out.push('=');
            escape_value(&ava.value, out);
        }))
    }
}

/// Byte offsets of the commas that separate RDNs in a normalized string (escapes skipped).
fn rdn_commas(norm: &str) -> impl Iterator<Item = usize> + '_ {
    let mut escaped = false;
    norm.bytes().enumerate().filter_map(move |(i, b)| {
        if escaped {
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if b == b',' {
            return Some(i);
        }
        None
    })
}

impl NormDn {
    /// The root DN (empty).
    pub fn root() -> NormDn {
        NormDn {
            norm: String::new(),
            rdns: Vec::new(),
        }
    }

    pub fn is_root(&self) -> bool {
        self.norm.is_empty()
    }

    /// The DN of the superior entry; `None` for the root DN.
    pub fn parent(&self) -> Option<NormDn> {
        if self.is_root() {
            return None;
        }
        let norm = norm_parent(&self.norm).unwrap_or_default().to_string();
        Some(NormDn {
            norm,
            rdns: self.rdns.get(1..).unwrap_or(&[]).to_vec(),
        })
    }

    /// Whether `self` is strictly below `base`.
    pub fn is_descendant_of(&self, base: &NormDn) -> bool {
        norm_is_descendant(&self.norm, &base.norm)
    }
}

/// Whether the normalized DN `dn` is strictly below the normalized DN `base` (as
/// `NormDn::is_descendant_of`, on the strings alone).
pub fn norm_is_descendant(dn: &str, base: &str) -> bool {
    if base.is_empty() {
        return !dn.is_empty();
    }
    if dn.len() <= base.len() + 1 || !dn.ends_with(base) {
        return false;
    }
    let cut = dn.len() - base.len() - 1;
    dn.as_bytes()[cut] == b',' && rdn_commas(dn).take_while(|&i| i <= cut).any(|i| i == cut)
}

/// The normalized DN of the superior of the normalized DN `dn` (as `NormDn::parent`, on the
/// string alone); `None` for the root DN.
pub fn norm_parent(dn: &str) -> Option<&str> {
    if dn.is_empty() {
        return None;
    }
    Some(rdn_commas(dn).next().map_or("", |i| &dn[i + 1..]))
}

impl fmt::Display for NormDn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.norm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ava(attr: &str, value: &[u8]) -> Ava {
        Ava {
            attr: attr.to_string(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn parse_basic_and_escapes() {
        let dn = Dn::parse("cn=John Smith\\, Jr.,  ou = People ;dc=example+uid=x").expect("parse");
        assert_eq!(dn.rdns.len(), 3);
        assert_eq!(dn.rdns[0].avas, vec![ava("cn", b"John Smith, Jr.")]);
        assert_eq!(dn.rdns[1].avas, vec![ava("ou", b"People")]);
        assert_eq!(
            dn.rdns[2].avas,
            vec![ava("dc", b"example"), ava("uid", b"x")]
        );
        let dn = Dn::parse("cn=\\E4\\bd\\A0\\20x\\ ").expect("parse");
        assert_eq!(dn.rdns[0].avas[0].value, "你 x ".as_bytes());
        let dn = Dn::parse("cn=\\2C\\+\\\"\\\\\\<\\>\\;\\=\\#").expect("parse");
        assert_eq!(dn.rdns[0].avas[0].value, b",+\"\\<>;=#");
        let dn = Dn::parse("cn=\"a,b+c\" , o=x").expect("parse");
        assert_eq!(dn.rdns[0].avas[0].value, b"a,b+c");
        assert_eq!(Dn::parse("").expect("root"), Dn::default());
        assert_eq!(Dn::parse("   ").expect("root"), Dn::default());
        assert_eq!(
            Dn::parse("1.2.3=x").expect("oid").rdns[0].avas[0].attr,
            "1.2.3"
        );
    }

    #[test]
    fn parse_hex_ber() {
        // OCTET STRING "Hi"
        let dn = Dn::parse("cn=#04024869,o=x").expect("parse");
        assert_eq!(dn.rdns[0].avas[0].value, b"Hi");
        // UTF8String "ab"
        let dn = Dn::parse("cn=#0C026162").expect("parse");
        assert_eq!(dn.rdns[0].avas[0].value, b"ab");
        assert!(Dn::parse("cn=#0403").is_err());
        assert!(Dn::parse("cn=#04024869FF").is_err());
        assert!(Dn::parse("cn=#zz").is_err());
    }

    #[test]
    fn parse_errors() {
        for bad in [
            "cn",
            "=x",
            "cn=x,",
            "cn=x,,o=y",
            "cn=\\",
            "cn=\\zz",
            "cn=\"abc",
            "c n=x",
            "1.=x",
            "cn=x+",
            "-a=x",
        ] {
            assert!(Dn::parse(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn display_escapes() {
        let dn = Dn {
            rdns: vec![Rdn {
                avas: vec![ava("cn", b" #a,b+c\"d\\e<f>g;h=i ")],
            }],
        };
        let s = dn.to_string();
        assert_eq!(s, "cn=\\ #a\\,b\\+c\\\"d\\\\e\\<f\\>g\\;h\\=i\\ ");
        assert_eq!(Dn::parse(&s).expect("reparse"), dn);
        let dn = Dn {
            rdns: vec![Rdn {
                avas: vec![ava("cn", &[0xff, 0x00])],
            }],
        };
        assert_eq!(dn.to_string(), "cn=#0402ff00");
        assert_eq!(Dn::parse(&dn.to_string()).expect("reparse"), dn);
    }

    #[test]
    fn parent_and_rdn() {
        let dn = Dn::parse("uid=a,ou=p,dc=x").expect("parse");
        assert_eq!(dn.rdn().map(|r| r.avas[0].attr.as_str()), Some("uid"));
        assert_eq!(
            dn.parent().map(|p| p.to_string()).as_deref(),
            Some("ou=p,dc=x")
        );
        assert_eq!(Dn::default().parent(), None);
    }

    #[test]
    fn normalized_strings_split_at_unescaped_commas() {
        assert_eq!(norm_parent("uid=a,ou=p,dc=x"), Some("ou=p,dc=x"));
        assert_eq!(norm_parent("cn=a\\,b,dc=x"), Some("dc=x"));
        assert_eq!(norm_parent("cn=a\\\\,dc=x"), Some("dc=x"));
        assert_eq!(norm_parent("dc=x"), Some(""));
        assert_eq!(norm_parent(""), None);
        assert!(norm_is_descendant("uid=a,ou=p,dc=x", "dc=x"));
        assert!(norm_is_descendant("uid=a,ou=p,dc=x", "ou=p,dc=x"));
        assert!(!norm_is_descendant("ou=p,dc=x", "ou=p,dc=x"));
        assert!(
            !norm_is_descendant("cn=a\\,ou=p,dc=x", "ou=p,dc=x"),
            "escaped comma"
        );
        assert!(
            norm_is_descendant("cn=a\\\\,ou=p,dc=x", "ou=p,dc=x"),
            "escaped backslash"
        );
        assert!(!norm_is_descendant("uid=a,xou=p,dc=x", "ou=p,dc=x"));
        assert!(norm_is_descendant("dc=x", ""));
        assert!(!norm_is_descendant("", ""));
    }

    fn arb_dn() -> impl Strategy<Value = Dn> {
        let attr = "[a-zA-Z][a-zA-Z0-9-]{0,6}|[0-9]{1,2}(\\.[0-9]{1,2}){1,3}";
        let value = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..8),
            "[ -~]{0,8}".prop_map(String::into_bytes),
            "\\PC{0,6}".prop_map(String::into_bytes),
        ];
        let ava = (attr, value).prop_map(|(attr, value)| Ava { attr, value });
        let rdn = proptest::collection::vec(ava, 1..3).prop_map(|avas| Rdn { avas });
        proptest::collection::vec(rdn, 0..4).prop_map(|rdns| Dn { rdns })
    }

    /// `parse_new_dn` and `normalize_dn` (parents cached per thread) answer exactly as
    /// `NewDn::build` and `Dn::normalize`.
    fn same_as_uncached(schema: &Schema, s: &str) -> Result<(), TestCaseError> {
        // Twice: the first call may fill the cache, the second reads it.
        for _ in 0..2 {
            let slow = Dn::parse(s).and_then(|d| d.normalize(schema));
            prop_assert_eq!(schema.normalize_dn(s), slow, "normalize_dn of {:?}", s);
            let fast = schema.parse_new_dn(s);
            let slow = NewDn::build(s, schema);
            match (&fast, &slow) {
                (Ok(a), Ok(b)) => {
                    prop_assert_eq!(&a.text, &b.text, "text of {:?}", s);
                    prop_assert_eq!(a.rdn_len, b.rdn_len, "rdn_len of {:?}", s);
                    prop_assert_eq!(&a.ndn.norm, &b.ndn.norm, "norm of {:?}", s);
                    prop_assert_eq!(&a.ndn.rdns, &b.ndn.rdns, "rdns of {:?}", s);
                }
                (Err(a), Err(b)) => prop_assert_eq!(a, b, "error of {:?}", s),
                _ => prop_assert!(false, "{:?}: {:?} vs {:?}", s, fast, slow),
            }
        }
        Ok(())
    }

    #[test]
    fn parse_new_dn_matches_uncached_parse() {
        let schema = Schema::builtin();
        for s in [
            "uid=user.1,ou=people,dc=example,dc=com",
            "UID=User.2 , OU=People,DC=Example,dc=com",
            "cn=John Smith,ou=people,dc=example,dc=com",
            "cn=John Smith ,ou=people,dc=example,dc=com",
            "cn= John,ou=people,dc=example,dc=com",
            "cn=a\\,b,ou=people,dc=example,dc=com",
            "cn=a+sn=b,ou=people,dc=example,dc=com",
            "cn=#04024869,ou=people,dc=example,dc=com",
            "cn=x,ou=people,dc=example,dc=com,",
            "cn=x,",
            "cn=x, ",
            "cn=x,nosuchattr=y",
            "nosuchattr=x,ou=people,dc=example,dc=com",
            "cn=x;ou=people,dc=example,dc=com",
            "cn=x,ou=people;dc=example,dc=com",
            "cn=\"q,x\",dc=com",
            "dc=com",
            "",
            ",dc=com",
            "cn=,dc=com",
            "=x,dc=com",
            "cn=a=b,dc=com",
        ] {
            same_as_uncached(&schema, s).expect(s);
        }
    }

    proptest! {
        #[test]
        fn parse_new_dn_matches_uncached(
            first in "[a-zA-Z]{1,3}=[ -~]{0,6}",
            parent in prop::sample::select(vec![
                "ou=people,dc=example,dc=com", " ou = People , dc=Example", "dc=com,", "o=x+cn=y",
                "nosuch=x", "cn=a\\,b,dc=com", "",
            ]),
        ) {
            let schema = Schema::builtin();
            same_as_uncached(&schema, &format!("{first},{parent}"))?;
        }

        #[test]
        fn display_parse_round_trip(dn in arb_dn()) {
            let s = dn.to_string();
            let back = Dn::parse(&s);
            prop_assert_eq!(back, Ok(dn), "string form {:?}", s);
        }

        #[test]
        fn parse_any_string_never_panics_and_redisplays(s in "\\PC{0,24}") {
            if let Ok(dn) = Dn::parse(&s) {
                let again = Dn::parse(&dn.to_string());
                prop_assert_eq!(again, Ok(dn));
            }
        }
    }
}
