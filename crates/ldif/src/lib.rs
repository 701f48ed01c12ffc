//! LDIF (RFC 2849): a streaming [`Reader`] and a [`Writer`].
//!
//! - `lib.rs` (this file): the record types both sides share and
//!   [`LdifError`].
//! - [`reader`]: turns a byte stream into [`Record`]s one at a time, so an
//!   import of millions of entries holds one record in memory. Lines are read
//!   into buffers reused from record to record.
//! - [`writer`]: emits records, base64-encoding values that are not
//!   SAFE-STRINGs and folding lines at 76 columns, so the output is plain
//!   ASCII that any LDIF reader (OpenLDAP's `slapadd`, `ldapmodify`) accepts.
//!
//! Values are bytes, not `String`: an attribute value is an OCTET STRING
//! (`jpegPhoto`, `userCertificate`). DNs, RDNs and attribute descriptions
//! are text and must be UTF-8.

pub mod reader;
pub mod writer;

pub use reader::{AttrRef, EntryRef, Reader, RecordRef, DEFAULT_MAX_RECORD_LEN};
pub use writer::Writer;

use std::fmt;

/// An attribute description (`cn`, `userCertificate;binary`) and one value.
pub type AttrValue = (String, Vec<u8>);

/// One LDIF record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// An entry, as `slapcat` writes them: a DN and its attribute values in
    /// file order, one pair per value.
    Content {
        dn: String,
        attrs: Vec<AttrValue>,
        /// 1-based line of the `dn:` line.
        line: usize,
    },
    /// A change, as `ldapmodify` reads them.
    Change {
        dn: String,
        change: ChangeRecord,
        controls: Vec<Control>,
        /// 1-based line of the `dn:` line.
        line: usize,
    },
}

impl Record {
    /// The record's DN.
    pub fn dn(&self) -> &str {
        match self {
            Record::Content { dn, .. } | Record::Change { dn, .. } => dn,
        }
    }

    /// The 1-based line of the record's `dn:` line (0 for records that were
    /// not read from a file).
    pub fn line(&self) -> usize {
        match self {
            Record::Content { line, .. } | Record::Change { line, .. } => *line,
        }
    }
}

/// What a change record asks for (`changetype:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeRecord {
    /// `changetype: add` with the new entry's attribute values.
    Add(Vec<AttrValue>),
    /// `changetype: delete`.
    Delete,
    /// `changetype: modify`, its modifications in order.
    Modify(Vec<Mod>),
    /// `changetype: modrdn` or `changetype: moddn`.
    ModRdn {
        new_rdn: String,
        delete_old_rdn: bool,
        new_superior: Option<String>,
    },
}

/// One modification of a `changetype: modify` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mod {
    pub op: ModOp,
    /// The attribute description named after `add:`/`delete:`/….
    pub attr: String,
    /// Values; empty for "delete the whole attribute" or "replace with
    /// nothing".
    pub values: Vec<Vec<u8>>,
}

/// The operation of a [`Mod`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModOp {
    Add,
    Delete,
    Replace,
    /// RFC 4525 Modify-Increment.
    Increment,
}

impl ModOp {
    /// The keyword that introduces the modification in LDIF.
    pub fn keyword(self) -> &'static str {
        match self {
            ModOp::Add => "add",
            ModOp::Delete => "delete",
            ModOp::Replace => "replace",
            ModOp::Increment => "increment",
        }
    }
}

/// A `control:` line of a change record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// The control's OID, e.g. `1.2.840.113556.1.4.805`.
    pub oid: String,
    pub critical: bool,
    pub value: Option<Vec<u8>>,
}

/// What went wrong, for callers that react differently to I/O failures
/// and to bad input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading the input failed; the reader stops.
    Io,
    /// A record is larger than the reader's limit; the reader stops.
    TooLong,
    /// A line is not `attribute: value`, a folded line continues nothing,
    /// or an attribute description is malformed.
    Syntax,
    /// A `::` value is not valid base64.
    Base64,
    /// A DN, RDN or OID is not valid UTF-8.
    Utf8,
    /// A `:<` URL is not a readable `file://` URL.
    Url,
    /// `version:` is not 1.
    Version,
    /// A record does not start with `dn:`.
    MissingDn,
    /// An unknown `changetype:`.
    ChangeType,
    /// A record's lines do not fit its kind (no attributes, missing
    /// `newrdn:`, a modify value for the wrong attribute, …).
    Structure,
    /// A malformed `control:` line.
    Control,
}

/// An error reading LDIF, with the 1-based line it was found on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LdifError {
    pub line: usize,
    pub kind: ErrorKind,
    pub message: String,
}

impl LdifError {
    pub(crate) fn new(line: usize, kind: ErrorKind, message: impl Into<String>) -> Self {
        LdifError {
            line,
            kind,
            message: message.into(),
        }
    }
}

/// Shows at most 60 bytes of `bytes` for an error message.
pub(crate) fn excerpt(bytes: &[u8]) -> impl fmt::Display + '_ {
    struct Excerpt<'a>(&'a [u8]);
    impl fmt::Display for Excerpt<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            const MAX: usize = 60;
            let cut = self.0.len() > MAX;
            let shown = if cut { &self.0[..MAX] } else { self.0 };
            write!(f, "{}", String::from_utf8_lossy(shown))?;
            if cut {
                f.write_str("…")?;
            }
            Ok(())
        }
    }
    Excerpt(bytes)
}

/// Whether `s` is an attribute description this crate reads and writes:
/// a name or numeric OID followed by `;options`, all ASCII letters, digits,
/// `-` and `.` (RFC 4512 section 2.5).
pub(crate) fn is_attr_description(s: &[u8]) -> bool {
    // One pass (every line of an import goes through here): each `;`-separated part is
    // non-empty, and the first starts with a letter or digit.
    let mut part_start = true;
    for (i, &b) in s.iter().enumerate() {
        if b == b';' {
            if part_start {
                return false;
            }
            part_start = true;
        } else if b.is_ascii_alphanumeric() || ((b == b'-' || b == b'.') && i > 0) {
            part_start = false;
        } else {
            return false;
        }
    }
    !part_start
}

/// Whether `s` is a numeric OID (`1.2.3`), as `control:` requires.
pub(crate) fn is_numeric_oid(s: &[u8]) -> bool {
    !s.is_empty()
        && s.split(|&b| b == b'.')
            .all(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// The one-pass check accepts exactly what the rule says: `;`-separated parts, none
        /// empty, of letters, digits, `-` and `.`, the first starting with a letter or digit.
        #[test]
        fn attr_description_check(s in "[a1;.\\-_ ]{0,8}") {
            let parts: Vec<&str> = s.split(';').collect();
            let expected = parts.iter().all(|p| {
                !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            }) && s.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric);
            prop_assert_eq!(super::is_attr_description(s.as_bytes()), expected);
        }
    }
}
