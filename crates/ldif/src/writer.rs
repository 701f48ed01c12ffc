//! LDIF writer.
//!
//! Each record is built in a reused buffer and written with one
//! `write_all`, followed by a blank line (as `slapcat` does). Values that
//! are not RFC 2849 SAFE-STRINGs are base64-encoded, so the output is
//! ASCII and folding at any byte is safe.

use crate::{is_attr_description, is_numeric_oid, ChangeRecord, Control, Record};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use std::io::{self, Write};

/// Column at which lines are folded (RFC 2849 suggests 76, like `slapcat`).
pub const FOLD_WIDTH: usize = 76;

/// Writes [`Record`]s as LDIF.
pub struct Writer<W> {
    inner: W,
    /// The record being built.
    out: Vec<u8>,
    /// The logical line being built, before folding.
    line: Vec<u8>,
}

impl<W: Write> Writer<W> {
    pub fn new(inner: W) -> Self {
        Writer {
            inner,
            out: Vec::with_capacity(4096),
            line: Vec::with_capacity(256),
        }
    }

    /// Writes `version: 1` and a blank line; call first, if at all.
    pub fn write_version(&mut self) -> io::Result<()> {
        self.inner.write_all(b"version: 1\n\n")
    }

    /// Writes a content record (an entry).
    ///
    /// Fails with [`io::ErrorKind::InvalidInput`] if an attribute
    /// description is malformed, if there are no attributes, or if the first
    /// one is `changetype` or `control` (a reader would take the record for
    /// a change record).
    pub fn write_entry<'a, I>(&mut self, dn: &str, attrs: I) -> io::Result<()>
    where
        I: IntoIterator<Item = (&'a str, &'a [u8])>,
    {
        self.out.clear();
        self.value_line(b"dn", dn.as_bytes());
        let mut first = true;
        for (name, value) in attrs {
            if first
                && (name.eq_ignore_ascii_case("changetype") || name.eq_ignore_ascii_case("control"))
            {
                return Err(invalid(format!(
                    "entry '{dn}' cannot start with '{name}' (it would read back as a change record)"
                )));
            }
            first = false;
            self.attr_line(name, value)?;
        }
        if first {
            return Err(invalid(format!("entry '{dn}' has no attributes")));
        }
        self.finish()
    }

    /// Writes a change record.
    pub fn write_change(
        &mut self,
        dn: &str,
        change: &ChangeRecord,
        controls: &[Control],
    ) -> io::Result<()> {
        self.out.clear();
        self.value_line(b"dn", dn.as_bytes());
        for c in controls {
            if !is_numeric_oid(c.oid.as_bytes()) {
                return Err(invalid(format!("control OID '{}' is not numeric", c.oid)));
            }
            self.line.clear();
            self.line.extend_from_slice(b"control: ");
            self.line.extend_from_slice(c.oid.as_bytes());
            self.line
                .extend_from_slice(if c.critical { b" true" } else { b" false" });
            if let Some(v) = &c.value {
                self.line.push(b':');
                push_value(&mut self.line, v);
            }
            self.fold_line();
        }
        match change {
            ChangeRecord::Add(attrs) => {
                if attrs.is_empty() {
                    return Err(invalid(format!("add record for '{dn}' has no attributes")));
                }
                self.value_line(b"changetype", b"add");
                for (name, value) in attrs {
                    self.attr_line(name, value)?;
                }
            }
            ChangeRecord::Delete => self.value_line(b"changetype", b"delete"),
            ChangeRecord::Modify(mods) => {
                self.value_line(b"changetype", b"modify");
                for m in mods {
                    check_attr(&m.attr)?;
                    self.value_line(m.op.keyword().as_bytes(), m.attr.as_bytes());
                    for v in &m.values {
                        self.value_line(m.attr.as_bytes(), v);
                    }
                    self.out.extend_from_slice(b"-\n");
                }
            }
            ChangeRecord::ModRdn {
                new_rdn,
                delete_old_rdn,
                new_superior,
            } => {
                self.value_line(b"changetype", b"modrdn");
                self.value_line(b"newrdn", new_rdn.as_bytes());
                self.value_line(b"deleteoldrdn", if *delete_old_rdn { b"1" } else { b"0" });
                if let Some(sup) = new_superior {
                    self.value_line(b"newsuperior", sup.as_bytes());
                }
            }
        }
        self.finish()
    }

    /// Writes any record (its `line` is ignored).
    pub fn write_record(&mut self, record: &Record) -> io::Result<()> {
        match record {
            Record::Content { dn, attrs, .. } => {
                self.write_entry(dn, attrs.iter().map(|(n, v)| (n.as_str(), v.as_slice())))
            }
            Record::Change {
                dn,
                change,
                controls,
                ..
            } => self.write_change(dn, change, controls),
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    pub fn into_inner(self) -> W {
        self.inner
    }

    fn attr_line(&mut self, name: &str, value: &[u8]) -> io::Result<()> {
        check_attr(name)?;
        self.value_line(name.as_bytes(), value);
        Ok(())
    }

    /// `name: value` or `name:: base64`, folded.
    fn value_line(&mut self, name: &[u8], value: &[u8]) {
        self.line.clear();
        self.line.extend_from_slice(name);
        self.line.push(b':');
        push_value(&mut self.line, value);
        self.fold_line();
    }

    /// Appends `self.line` to the record, folded at [`FOLD_WIDTH`].
    fn fold_line(&mut self) {
        let mut rest = self.line.as_slice();
        let mut width = FOLD_WIDTH;
        loop {
            let n = rest.len().min(width);
            self.out.extend_from_slice(&rest[..n]);
            self.out.push(b'\n');
            rest = &rest[n..];
            if rest.is_empty() {
                break;
            }
            self.out.push(b' ');
            width = FOLD_WIDTH - 1;
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.push(b'\n');
        self.inner.write_all(&self.out)
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn check_attr(name: &str) -> io::Result<()> {
    if is_attr_description(name.as_bytes()) {
        Ok(())
    } else {
        Err(invalid(format!(
            "'{name}' is not a valid attribute description"
        )))
    }
}

/// Appends the part after `name:`: ` value`, `: base64`, or nothing for an
/// empty value.
fn push_value(line: &mut Vec<u8>, value: &[u8]) {
    if value.is_empty() {
        return;
    }
    if is_safe(value) {
        line.push(b' ');
        line.extend_from_slice(value);
    } else {
        line.extend_from_slice(b": ");
        let start = line.len();
        line.resize(
            start + base64::encoded_len(value.len(), true).unwrap_or(0),
            0,
        );
        let n = STANDARD
            .encode_slice(value, &mut line[start..])
            .unwrap_or(0);
        line.truncate(start + n);
    }
}

/// RFC 2849 SAFE-STRING, made stricter: printable ASCII only (no control
/// characters such as TAB) and no trailing space, which editors and some
/// readers strip.
pub fn is_safe(value: &[u8]) -> bool {
    match value.first() {
        None => return true,
        Some(b' ' | b':' | b'<') => return false,
        Some(_) => {}
    }
    value.last() != Some(&b' ') && value.iter().all(|&b| (0x20..0x7f).contains(&b))
}
