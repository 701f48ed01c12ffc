//! Streaming LDIF reader.
//!
//! Reading happens in two steps per record: collect the record's logical
//! lines (folding undone, comments dropped) into one byte buffer, then parse
//! them. Both buffers are reused, so a record costs no allocation beyond the
//! [`Record`] it produces. A record of plain lines that lies whole in the
//! input's buffer (always, when reading a slice) is parsed where it is, with
//! no copy: a bulk import reads most of its records that way.

use crate::{
    excerpt, is_attr_description, is_numeric_oid, AttrValue, ChangeRecord, Control, ErrorKind,
    LdifError, Mod, ModOp, Record,
};
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use std::borrow::Cow;
use std::io::BufRead;
use std::ops::Range;

/// Default for [`Reader::max_record_len`]: 64 MiB, room for large
/// `jpegPhoto` or certificate values while bounding memory on a corrupt or
/// hostile file.
pub const DEFAULT_MAX_RECORD_LEN: usize = 64 << 20;

/// Standard base64, accepting values with or without padding (some tools
/// strip it).
const B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Reads [`Record`]s from LDIF text.
///
/// Iterating yields one `Result` per record. After a syntax error in one
/// record the reader carries on with the next; after an I/O error or a
/// record over the size limit it yields nothing more.
pub struct Reader<R> {
    inner: R,
    /// Physical lines consumed so far.
    line_no: usize,
    /// The current record's logical lines, back to back.
    buf: Vec<u8>,
    /// `(range in buf, 1-based line number)` per logical line.
    lines: Vec<(Range<usize>, usize)>,
    /// Whether the first record has been seen (where `version:` may appear).
    started: bool,
    /// Bytes of the input the last record borrowed in place (`collect_in_place`), consumed
    /// before the next read.
    pending: usize,
    done: bool,
    max_record_len: usize,
    allow_file_urls: bool,
}

impl<R: BufRead> Reader<R> {
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            line_no: 0,
            buf: Vec::with_capacity(4096),
            lines: Vec::with_capacity(32),
            started: false,
            pending: 0,
            done: false,
            max_record_len: DEFAULT_MAX_RECORD_LEN,
            allow_file_urls: true,
        }
    }

    /// Limits the bytes of one record (after unfolding, comments included).
    pub fn max_record_len(mut self, bytes: usize) -> Self {
        self.max_record_len = bytes;
        self
    }

    /// Whether `attr:< file:///path` values may read local files (default:
    /// yes). Turn off for LDIF from anyone but the server's administrator.
    pub fn allow_file_urls(mut self, allow: bool) -> Self {
        self.allow_file_urls = allow;
        self
    }

    /// Reads one part of a larger file, which starts after the file's first `lines_before`
    /// lines (for parsing a file's parts in parallel): line numbers in errors and records count
    /// from there, and unless `at_start` the part may not hold the `version:` line (which only
    /// comes before the first record) or a byte order mark. A part must start at a line.
    pub fn part_of_file(mut self, lines_before: usize, at_start: bool) -> Self {
        self.line_no = lines_before;
        self.started = !at_start;
        self
    }

    /// The number of physical lines consumed so far.
    pub fn line(&self) -> usize {
        self.line_no
    }

    pub fn into_inner(mut self) -> R {
        self.inner.consume(std::mem::take(&mut self.pending));
        self.inner
    }

    fn fatal(&mut self, kind: ErrorKind, message: String) -> LdifError {
        self.done = true;
        LdifError::new(self.line_no.max(1), kind, message)
    }

    /// Appends one physical line (without its line ending) to `self.buf`.
    /// Returns `false` at end of input.
    fn read_physical(&mut self) -> Result<bool, LdifError> {
        let mut any = false;
        let line_start = self.buf.len();
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let line = self.line_no + 1;
                    self.done = true;
                    return Err(LdifError::new(
                        line,
                        ErrorKind::Io,
                        format!("read error: {e}"),
                    ));
                }
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (take, newline) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            if self.buf.len() + take > self.max_record_len {
                self.line_no += 1;
                let max = self.max_record_len;
                return Err(self.fatal(
                    ErrorKind::TooLong,
                    format!("record is longer than the limit of {max} bytes"),
                ));
            }
            self.buf.extend_from_slice(&chunk[..take]);
            self.inner.consume(take + usize::from(newline));
            if newline {
                break;
            }
        }
        if any {
            self.line_no += 1;
            // Only this line's own CR (of a CRLF ending): an empty line must not eat the
            // last byte of the line before it (found by the ldif_reader fuzz target).
            if self.buf.len() > line_start && self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        }
        Ok(any)
    }

    /// Whether the next physical line starts with a space (continues the
    /// current one). Consumes that space.
    fn continues(&mut self) -> Result<bool, LdifError> {
        loop {
            match self.inner.fill_buf() {
                Ok(c) => {
                    let cont = c.first() == Some(&b' ');
                    if cont {
                        self.inner.consume(1);
                    }
                    return Ok(cont);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let line = self.line_no + 1;
                    self.done = true;
                    return Err(LdifError::new(
                        line,
                        ErrorKind::Io,
                        format!("read error: {e}"),
                    ));
                }
            }
        }
    }

    /// Appends one logical line (folding undone) to `self.buf`; returns its
    /// starting line number, or `None` at end of input.
    fn read_logical(&mut self) -> Result<Option<usize>, LdifError> {
        let start = self.buf.len();
        if !self.read_physical()? {
            return Ok(None);
        }
        let first = self.line_no;
        if first == 1 && self.buf[start..].starts_with(b"\xEF\xBB\xBF") {
            self.buf.drain(start..start + 3);
        }
        // An empty line ends a record and is never folded into.
        if self.buf.len() == start {
            return Ok(Some(first));
        }
        while self.continues()? {
            self.read_physical()?;
        }
        Ok(Some(first))
    }

    /// Collects the next record's logical lines. Returns `false` at end of
    /// input with no record.
    fn collect(&mut self) -> Result<bool, LdifError> {
        self.buf.clear();
        self.lines.clear();
        loop {
            let start = self.buf.len();
            let Some(line) = self.read_logical()? else {
                return Ok(!self.lines.is_empty());
            };
            let text = &self.buf[start..];
            if text.is_empty() {
                if self.lines.is_empty() {
                    continue;
                }
                return Ok(true);
            }
            if text[0] == b'#' {
                self.buf.truncate(start);
                continue;
            }
            if text[0] == b' ' {
                // A folded line with nothing to continue: only harmless if
                // it is blank.
                if text.iter().all(|&b| b == b' ' || b == b'\t') {
                    self.buf.truncate(start);
                    if self.lines.is_empty() {
                        continue;
                    }
                    return Ok(true);
                }
                return Err(LdifError::new(
                    line,
                    ErrorKind::Syntax,
                    "line starts with a space but there is no line before it to continue \
                     (remove the leading space, or the blank line above it)",
                ));
            }
            if !self.started {
                self.started = true;
                if let Some((name, rest)) = split_line(text) {
                    if name.eq_ignore_ascii_case(b"version") {
                        let v = trim(rest);
                        if v != b"1" {
                            return Err(LdifError::new(
                                line,
                                ErrorKind::Version,
                                format!(
                                    "unsupported LDIF version '{}' (only 'version: 1' exists)",
                                    excerpt(v)
                                ),
                            ));
                        }
                        self.buf.truncate(start);
                        continue;
                    }
                }
            }
            let end = self.buf.len();
            self.lines.push((start..end, line));
        }
    }

    /// Finds the next record whole in the input's buffer (as a slice's is: all of it) when it
    /// needs nothing undone: its lines are then parsed where they are, not copied into
    /// `buf` line by line. Only a record of plain lines (no folding, comment or CRLF)
    /// after the first record, ended by an empty line within the buffer, under the size
    /// limit; anything else (`None`) goes the general way, which reads it afresh. Returns
    /// the bytes it spans with its empty line; `lines` holds its lines, `line_no` is past it.
    fn collect_in_place(&mut self) -> Option<usize> {
        if !self.started {
            return None;
        }
        let data = self.inner.fill_buf().ok()?;
        let limit = data.len().min(self.max_record_len);
        self.lines.clear();
        let mut at = 0;
        let mut line = self.line_no;
        loop {
            let end = at + memchr::memchr(b'\n', data.get(at..limit)?)?;
            line += 1;
            if end == at {
                if self.lines.is_empty() {
                    return None;
                }
                self.line_no = line;
                return Some(end + 1);
            }
            if matches!(data[at], b' ' | b'#') || data[end - 1] == b'\r' {
                return None;
            }
            self.lines.push((at..end, line));
            at = end + 1;
        }
    }

    fn parse(&self) -> Result<RecordRef<'_>, LdifError> {
        parse_record(&self.buf, &self.lines, self.line_no, self.allow_file_urls)
    }
}

/// Parses a collected record: its logical lines `lines` in `buf`; `line_no` is the line the
/// record ended at.
fn parse_record<'b>(
    buf: &'b [u8],
    lines: &'b [(Range<usize>, usize)],
    line_no: usize,
    allow_file_urls: bool,
) -> Result<RecordRef<'b>, LdifError> {
    let mut lines = Lines { buf, lines, pos: 0 };
    let p = Parser { allow_file_urls };
    let (dn_line, name, rest) = lines
        .next_split()?
        .ok_or_else(|| LdifError::new(line_no, ErrorKind::MissingDn, "empty record"))?;
    if !name.eq_ignore_ascii_case(b"dn") {
        return Err(LdifError::new(
            dn_line,
            ErrorKind::MissingDn,
            format!(
                "expected 'dn:' to start a record, found '{}:' \
                     (is a blank line missing or one too many?)",
                excerpt(name)
            ),
        ));
    }
    let dn = p.text(rest, dn_line, "DN")?;

    let mut controls = Vec::new();
    while let Some((line, name, rest)) = lines.peek_split()? {
        if !name.eq_ignore_ascii_case(b"control") {
            break;
        }
        lines.pos += 1;
        controls.push(p.control(rest, line)?);
    }

    match lines.peek_split()? {
        Some((line, name, rest)) if name.eq_ignore_ascii_case(b"changetype") => {
            lines.pos += 1;
            let change = p.change(trim(rest), line, &mut lines)?;
            Ok(RecordRef::Change(Record::Change {
                dn: dn.into_owned(),
                change,
                controls,
                line: dn_line,
            }))
        }
        next => {
            if !controls.is_empty() {
                return Err(LdifError::new(
                    next.map_or(dn_line, |n| n.0),
                    ErrorKind::Structure,
                    "'control:' lines must be followed by 'changetype:' \
                         (controls only apply to change records)",
                ));
            }
            let attrs = p.attrs(&mut lines)?;
            if attrs.is_empty() {
                return Err(LdifError::new(
                    dn_line,
                    ErrorKind::Structure,
                    format!("entry '{dn}' has no attributes"),
                ));
            }
            Ok(RecordRef::Content(EntryRef {
                dn,
                attrs,
                line: dn_line,
            }))
        }
    }
}

impl<R: BufRead> Reader<R> {
    /// The next record, as the iterator would yield it, except that a content record borrows
    /// its DN and values from the reader's buffer (until the next call) instead of copying
    /// each into an allocation of its own: what a bulk load of millions of entries wants.
    pub fn next_borrowed(&mut self) -> Option<Result<RecordRef<'_>, LdifError>> {
        if self.done {
            return None;
        }
        self.inner.consume(std::mem::take(&mut self.pending));
        if let Some(len) = self.collect_in_place() {
            self.pending = len;
            return Some(match self.inner.fill_buf() {
                Ok(data) => parse_record(data, &self.lines, self.line_no, self.allow_file_urls),
                // The buffer was filled just now, so this read reads nothing.
                Err(e) => Err(LdifError::new(
                    self.line_no,
                    ErrorKind::Io,
                    format!("read error: {e}"),
                )),
            });
        }
        match self.collect() {
            Ok(false) => {
                self.done = true;
                None
            }
            Ok(true) => Some(self.parse()),
            Err(e) => Some(Err(e)),
        }
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Result<Record, LdifError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_borrowed().map(|r| r.map(RecordRef::into_owned))
    }
}

/// An attribute description and one value, borrowed from the line where they can be.
pub type AttrRef<'a> = (&'a str, Cow<'a, [u8]>);

fn owned_attrs(attrs: Vec<AttrRef<'_>>) -> Vec<AttrValue> {
    attrs
        .into_iter()
        .map(|(n, v)| (n.to_string(), v.into_owned()))
        .collect()
}

/// A content record borrowed from the reader (`Reader::next_borrowed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub dn: Cow<'a, str>,
    pub attrs: Vec<AttrRef<'a>>,
    /// 1-based line of the `dn:` line.
    pub line: usize,
}

/// A record from `Reader::next_borrowed`: a content record borrowed, a change record owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordRef<'a> {
    Content(EntryRef<'a>),
    Change(Record),
}

impl RecordRef<'_> {
    pub fn into_owned(self) -> Record {
        match self {
            RecordRef::Content(e) => Record::Content {
                dn: e.dn.into_owned(),
                attrs: owned_attrs(e.attrs),
                line: e.line,
            },
            RecordRef::Change(r) => r,
        }
    }
}

/// Cursor over a collected record's logical lines.
struct Lines<'a> {
    buf: &'a [u8],
    lines: &'a [(Range<usize>, usize)],
    pos: usize,
}

type Split<'a> = (usize, &'a [u8], &'a [u8]);

impl<'a> Lines<'a> {
    fn peek_raw(&self) -> Option<(usize, &'a [u8])> {
        let (range, line) = self.lines.get(self.pos)?;
        Some((*line, &self.buf[range.clone()]))
    }

    fn peek_split(&self) -> Result<Option<Split<'a>>, LdifError> {
        match self.peek_raw() {
            None => Ok(None),
            Some((line, text)) => match split_line(text) {
                Some((name, rest)) => Ok(Some((line, name, rest))),
                None => Err(not_attr_value(line, text)),
            },
        }
    }

    fn next_split(&mut self) -> Result<Option<Split<'a>>, LdifError> {
        let r = self.peek_split()?;
        if r.is_some() {
            self.pos += 1;
        }
        Ok(r)
    }

    /// The line number of the last line, for "missing …" errors.
    fn last_line(&self) -> usize {
        self.lines.last().map_or(0, |l| l.1)
    }
}

fn not_attr_value(line: usize, text: &[u8]) -> LdifError {
    if trim(text) == b"-" {
        return LdifError::new(
            line,
            ErrorKind::Structure,
            "'-' only separates modifications in a 'changetype: modify' record",
        );
    }
    LdifError::new(
        line,
        ErrorKind::Syntax,
        format!(
            "expected 'attribute: value', found '{}' (no ':')",
            excerpt(text)
        ),
    )
}

/// Splits `name:rest` at the first colon.
fn split_line(text: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = memchr::memchr(b':', text)?;
    Some((&text[..i], &text[i + 1..]))
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b' ').count();
    &s[n..]
}

fn trim(s: &[u8]) -> &[u8] {
    let s = trim_start(s);
    let n = s.iter().rev().take_while(|&&b| b == b' ').count();
    &s[..s.len() - n]
}

struct Parser {
    allow_file_urls: bool,
}

impl Parser {
    /// Decodes a value spec (the text after `name:`); a plain value borrows the line.
    fn value<'a>(&self, rest: &'a [u8], line: usize) -> Result<Cow<'a, [u8]>, LdifError> {
        match rest.first() {
            Some(b':') => {
                let b64 = trim(&rest[1..]);
                B64.decode(b64).map(Cow::Owned).map_err(|e| {
                    LdifError::new(
                        line,
                        ErrorKind::Base64,
                        format!("value after '::' is not valid base64 ({e})"),
                    )
                })
            }
            Some(b'<') => self.url(trim(&rest[1..]), line).map(Cow::Owned),
            _ => Ok(Cow::Borrowed(trim_start(rest))),
        }
    }

    fn url(&self, url: &[u8], line: usize) -> Result<Vec<u8>, LdifError> {
        let err = |m: String| LdifError::new(line, ErrorKind::Url, m);
        let scheme_end = url.iter().position(|&b| b == b':');
        let is_file = scheme_end.is_some_and(|i| url[..i].eq_ignore_ascii_case(b"file"));
        if !is_file {
            return Err(err(format!(
                "unsupported URL '{}' after ':<' (only file:///path is supported)",
                excerpt(url)
            )));
        }
        if !self.allow_file_urls {
            return Err(err(format!(
                "':<' file URLs are disabled for this input ('{}')",
                excerpt(url)
            )));
        }
        let after = &url[5..]; // after "file:", checked above
        let path = if after.starts_with(b"///") {
            &after[2..]
        } else if after.len() >= 12 && after[..12].eq_ignore_ascii_case(b"//localhost/") {
            &after[11..]
        } else {
            return Err(err(format!(
                "URL '{}' is not a local absolute file URL (write file:///path)",
                excerpt(url)
            )));
        };
        let path = percent_decode(path)
            .ok_or_else(|| err(format!("URL '{}' has a malformed %-escape", excerpt(url))))?;
        let path = String::from_utf8(path)
            .map_err(|_| err(format!("URL '{}' is not valid UTF-8", excerpt(url))))?;
        std::fs::read(&path).map_err(|e| err(format!("cannot read '{path}' named by ':<': {e}")))
    }

    /// A value that must be UTF-8 text (DN, RDN, attribute name).
    fn text<'a>(&self, rest: &'a [u8], line: usize, what: &str) -> Result<Cow<'a, str>, LdifError> {
        let bad = || LdifError::new(line, ErrorKind::Utf8, format!("{what} is not valid UTF-8"));
        Ok(match self.value(rest, line)? {
            Cow::Borrowed(b) => Cow::Borrowed(std::str::from_utf8(b).map_err(|_| bad())?),
            Cow::Owned(b) => Cow::Owned(String::from_utf8(b).map_err(|_| bad())?),
        })
    }

    fn attr_name<'a>(&self, name: &'a [u8], line: usize) -> Result<&'a str, LdifError> {
        if !is_attr_description(name) {
            return Err(LdifError::new(
                line,
                ErrorKind::Syntax,
                format!(
                    "'{}' is not a valid attribute description \
                     (letters, digits, '-', '.' and ';options')",
                    excerpt(name)
                ),
            ));
        }
        // Checked ASCII above, so this cannot fail.
        std::str::from_utf8(name).map_err(|_| {
            LdifError::new(
                line,
                ErrorKind::Syntax,
                "attribute description is not ASCII",
            )
        })
    }

    fn attrs<'a>(&self, lines: &mut Lines<'a>) -> Result<Vec<AttrRef<'a>>, LdifError> {
        let mut attrs = Vec::with_capacity(lines.lines.len().saturating_sub(lines.pos));
        while let Some((line, name, rest)) = lines.next_split()? {
            let name = self.attr_name(name, line)?;
            attrs.push((name, self.value(rest, line)?));
        }
        Ok(attrs)
    }

    fn control(&self, rest: &[u8], line: usize) -> Result<Control, LdifError> {
        let err = |m: String| LdifError::new(line, ErrorKind::Control, m);
        let rest = trim_start(rest);
        let oid_len = rest
            .iter()
            .position(|&b| b == b' ' || b == b':')
            .unwrap_or(rest.len());
        let (oid, mut rest) = rest.split_at(oid_len);
        if !is_numeric_oid(oid) {
            return Err(err(format!(
                "'control:' needs a numeric OID such as 1.2.840.113556.1.4.805, found '{}'",
                excerpt(oid)
            )));
        }
        rest = trim_start(rest);
        let mut critical = false;
        for (word, value) in [(&b"true"[..], true), (&b"false"[..], false)] {
            if let Some(after) = rest.strip_prefix(word) {
                if matches!(after.first(), None | Some(b' ' | b':')) {
                    critical = value;
                    rest = trim_start(after);
                    break;
                }
            }
        }
        let value = match rest.split_first() {
            None => None,
            Some((b':', spec)) => Some(self.value(spec, line)?.into_owned()),
            Some(_) => {
                return Err(err(format!(
                    "unexpected '{}' in 'control:' line (expected 'true', 'false' or ': value')",
                    excerpt(rest)
                )))
            }
        };
        Ok(Control {
            // Checked ASCII digits and dots above.
            oid: String::from_utf8_lossy(oid).into_owned(),
            critical,
            value,
        })
    }

    fn change(
        &self,
        kind: &[u8],
        line: usize,
        lines: &mut Lines<'_>,
    ) -> Result<ChangeRecord, LdifError> {
        let k = |s: &[u8]| kind.eq_ignore_ascii_case(s);
        if k(b"add") {
            let attrs = owned_attrs(self.attrs(lines)?);
            if attrs.is_empty() {
                return Err(LdifError::new(
                    line,
                    ErrorKind::Structure,
                    "'changetype: add' record has no attributes",
                ));
            }
            Ok(ChangeRecord::Add(attrs))
        } else if k(b"delete") {
            if let Some((l, name, _)) = lines.next_split()? {
                return Err(LdifError::new(
                    l,
                    ErrorKind::Structure,
                    format!(
                        "'changetype: delete' record cannot have more lines, found '{}:' \
                         (is a blank line missing before the next record?)",
                        excerpt(name)
                    ),
                ));
            }
            Ok(ChangeRecord::Delete)
        } else if k(b"modify") {
            self.modify(lines).map(ChangeRecord::Modify)
        } else if k(b"modrdn") || k(b"moddn") {
            self.modrdn(line, lines)
        } else {
            Err(LdifError::new(
                line,
                ErrorKind::ChangeType,
                format!(
                    "unknown changetype '{}' (expected add, delete, modify, modrdn or moddn)",
                    excerpt(kind)
                ),
            ))
        }
    }

    fn modify(&self, lines: &mut Lines<'_>) -> Result<Vec<Mod>, LdifError> {
        let mut mods = Vec::new();
        while let Some((line, name, rest)) = lines.next_split()? {
            let op = [ModOp::Add, ModOp::Delete, ModOp::Replace, ModOp::Increment]
                .into_iter()
                .find(|op| name.eq_ignore_ascii_case(op.keyword().as_bytes()))
                .ok_or_else(|| {
                    LdifError::new(
                        line,
                        ErrorKind::Structure,
                        format!(
                            "expected 'add:', 'delete:', 'replace:' or 'increment:' \
                             in a modify record, found '{}:'",
                            excerpt(name)
                        ),
                    )
                })?;
            let attr = self.attr_name(trim(rest), line)?.to_string();
            let mut values = Vec::new();
            loop {
                match lines.peek_raw() {
                    // The final '-' is often left out; accept that.
                    None => break,
                    Some((_, text)) if trim(text) == b"-" => {
                        lines.pos += 1;
                        break;
                    }
                    Some(_) => {}
                }
                let Some((l, vname, vrest)) = lines.next_split()? else {
                    break;
                };
                if !vname.eq_ignore_ascii_case(attr.as_bytes()) {
                    return Err(LdifError::new(
                        l,
                        ErrorKind::Structure,
                        format!(
                            "'{}:' does not belong to '{}: {attr}' \
                             (is a '-' line missing before it?)",
                            excerpt(vname),
                            op.keyword()
                        ),
                    ));
                }
                values.push(self.value(vrest, l)?.into_owned());
            }
            mods.push(Mod { op, attr, values });
        }
        Ok(mods)
    }

    fn modrdn(&self, line: usize, lines: &mut Lines<'_>) -> Result<ChangeRecord, LdifError> {
        let missing = |what: &str, at: usize| {
            LdifError::new(
                at,
                ErrorKind::Structure,
                format!("'changetype: modrdn' record needs '{what}' next"),
            )
        };
        let (l, name, rest) = lines
            .next_split()?
            .ok_or_else(|| missing("newrdn:", line))?;
        if !name.eq_ignore_ascii_case(b"newrdn") {
            return Err(missing("newrdn:", l));
        }
        let new_rdn = self.text(rest, l, "newrdn")?.into_owned();
        let (l, name, rest) = lines
            .next_split()?
            .ok_or_else(|| missing("deleteoldrdn: 0|1", lines.last_line()))?;
        if !name.eq_ignore_ascii_case(b"deleteoldrdn") {
            return Err(missing("deleteoldrdn: 0|1", l));
        }
        let delete_old_rdn = match trim(&self.value(rest, l)?) {
            b"0" => false,
            b"1" => true,
            other => {
                return Err(LdifError::new(
                    l,
                    ErrorKind::Structure,
                    format!("'deleteoldrdn:' must be 0 or 1, found '{}'", excerpt(other)),
                ))
            }
        };
        let new_superior = match lines.next_split()? {
            None => None,
            Some((l, name, rest)) if name.eq_ignore_ascii_case(b"newsuperior") => {
                Some(self.text(rest, l, "newsuperior")?.into_owned())
            }
            Some((l, name, _)) => {
                return Err(LdifError::new(
                    l,
                    ErrorKind::Structure,
                    format!(
                        "unexpected '{}:' in a modrdn record (only 'newsuperior:' may follow)",
                        excerpt(name)
                    ),
                ))
            }
        };
        if let Some((l, name, _)) = lines.next_split()? {
            return Err(LdifError::new(
                l,
                ErrorKind::Structure,
                format!(
                    "unexpected '{}:' after 'newsuperior:' in a modrdn record",
                    excerpt(name)
                ),
            ));
        }
        Ok(ChangeRecord::ModRdn {
            new_rdn,
            delete_old_rdn,
            new_superior,
        })
    }
}

/// Decodes `%XX` escapes; `None` if one is malformed.
fn percent_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value ending in CR, folded, then an empty line: the empty line's (absent) CR must not
    /// be taken from the line before it. Found by the ldif_reader fuzz target (it panicked).
    #[test]
    fn empty_line_after_a_value_ending_in_cr() {
        let input = b"dn: cn=a,dc=x\ncn: a\r\r\n\ndn: cn=b,dc=x\ncn: b\n";
        let recs: Vec<_> = Reader::new(&input[..]).collect();
        assert_eq!(recs.len(), 2, "{recs:?}");
        match &recs[0] {
            Ok(Record::Content { attrs, .. }) => assert_eq!(attrs[0].1, b"a\r"),
            other => panic!("{other:?}"),
        }
        let fuzz: &[u8] = b"dn: u\ncontrol: 1.2.:05 true\nchangetyqe: delete(\n\ndn: u\r\r\r\n\n";
        let _ = Reader::new(fuzz).count();
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode(b"/a%20b").as_deref(), Some(&b"/a b"[..]));
        assert_eq!(percent_decode(b"/a%2"), None);
        assert_eq!(percent_decode(b"/a%zz"), None);
    }
}

#[cfg(test)]
mod in_place {
    use super::*;

    /// Records read where they lie in a slice (`collect_in_place`) and records read line by
    /// line (a one-byte buffer never holds a whole record, so every record goes the general
    /// way) come out the same, errors and their line numbers included, for plain records,
    /// folded lines, comments, CRLF endings, change records, bad records and a missing final
    /// blank line.
    #[test]
    fn same_records_and_errors_as_the_general_way() {
        let inputs: [&[u8]; 6] = [
            b"version: 1\n\ndn: cn=a,dc=x\ncn: a\nsn: b\n\ndn: cn=b,dc=x\ncn: b\n\n",
            b"dn: cn=a,dc=x\ncn: a\n\ndn: cn=b,dc=x\ncn: lo\n ng\n\n# note\ndn: cn=c,dc=x\ncn: c\n\n",
            b"dn: cn=a,dc=x\r\ncn: a\r\n\r\ndn: cn=b,dc=x\ncn:: Yg==\n\n\n\ndn: cn=c,dc=x\ncn: c",
            b"dn: cn=a,dc=x\ncn: a\n\ndn: cn=b,dc=x\nno colon here\n\ndn: cn=c,dc=x\ncn: c\n\n",
            b"dn: cn=a,dc=x\nchangetype: modify\nreplace: cn\ncn: z\n-\n\ndn: cn=b,dc=x\ncn: b\n\n",
            b"dn: cn=a,dc=x\ncn: a\n\ncn: no dn\n\ndn: cn=b,dc=x\n\n  \ndn: cn=c,dc=x\ncn: c\n\n",
        ];
        for input in inputs {
            let whole: Vec<_> = Reader::new(input).collect();
            let one_byte = std::io::BufReader::with_capacity(1, input);
            let general: Vec<_> = Reader::new(one_byte).collect();
            assert_eq!(whole, general, "{}", String::from_utf8_lossy(input));
        }
    }

    /// Parts of a file (`part_of_file`) count their lines from where they start.
    #[test]
    fn part_of_file_line_numbers() {
        let input = b"dn: cn=a,dc=x\ncn: a\n\ndn: cn=b,dc=x\nbad\n\n";
        let recs: Vec<_> = Reader::new(&input[..]).part_of_file(100, false).collect();
        match &recs[0] {
            Ok(Record::Content { line, .. }) => assert_eq!(*line, 101),
            other => panic!("{other:?}"),
        }
        match &recs[1] {
            Err(e) => assert_eq!(e.line, 105, "{e:?}"),
            other => panic!("{other:?}"),
        }
    }
}
