//! RFC 4517 syntaxes and their value checks.
//!
//! Syntaxes whose values Linden never interprets (certificates, JPEG, audio, the schema
//! description syntaxes) accept anything, as slapd does for most of them.

use crate::{rules, AttrId, Dn, Schema, ValueError};

/// How a syntax checks a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    Any,
    DirectoryString,
    Ia5,
    Printable,
    Numeric,
    Integer,
    Boolean,
    Dn,
    NameUid,
    GeneralizedTime,
    UtcTime,
    Telephone,
    Oid,
    Country,
    PostalAddress,
    BitString,
    Uuid,
    Csn,
}

macro_rules! syn {
    ($n:literal, $desc:literal, $check:expr) => {
        (concat!("1.3.6.1.4.1.1466.115.121.1.", $n), $desc, $check)
    };
}

pub(crate) const SYNTAXES: &[(&str, &str, Check)] = &[
    syn!("3", "Attribute Type Description", Check::Any),
    syn!("4", "Audio", Check::Any),
    syn!("5", "Binary", Check::Any),
    syn!("6", "Bit String", Check::BitString),
    syn!("7", "Boolean", Check::Boolean),
    syn!("8", "Certificate", Check::Any),
    syn!("9", "Certificate List", Check::Any),
    syn!("10", "Certificate Pair", Check::Any),
    syn!("11", "Country String", Check::Country),
    syn!("12", "Distinguished Name", Check::Dn),
    syn!("13", "Data Quality Syntax", Check::Any),
    syn!("14", "Delivery Method", Check::Printable),
    syn!("15", "Directory String", Check::DirectoryString),
    syn!("16", "DIT Content Rule Description", Check::Any),
    syn!("17", "DIT Structure Rule Description", Check::Any),
    syn!("19", "DSA Quality Syntax", Check::Any),
    syn!("21", "Enhanced Guide", Check::Any),
    syn!("22", "Facsimile Telephone Number", Check::Printable),
    syn!("23", "Fax", Check::Any),
    syn!("24", "Generalized Time", Check::GeneralizedTime),
    syn!("25", "Guide", Check::Any),
    syn!("26", "IA5 String", Check::Ia5),
    syn!("27", "INTEGER", Check::Integer),
    syn!("28", "JPEG", Check::Any),
    syn!("30", "Matching Rule Description", Check::Any),
    syn!("31", "Matching Rule Use Description", Check::Any),
    syn!("34", "Name And Optional UID", Check::NameUid),
    syn!("35", "Name Form Description", Check::Any),
    syn!("36", "Numeric String", Check::Numeric),
    syn!("37", "Object Class Description", Check::Any),
    syn!("38", "OID", Check::Oid),
    syn!("39", "Other Mailbox", Check::Any),
    syn!("40", "Octet String", Check::Any),
    syn!("41", "Postal Address", Check::PostalAddress),
    syn!("43", "Presentation Address", Check::Any),
    syn!("44", "Printable String", Check::Printable),
    syn!("49", "Supported Algorithm", Check::Any),
    syn!("50", "Telephone Number", Check::Telephone),
    syn!("51", "Teletex Terminal Identifier", Check::Any),
    syn!("52", "Telex Number", Check::Any),
    syn!("53", "UTC Time", Check::UtcTime),
    syn!("54", "LDAP Syntax Description", Check::Any),
    syn!("58", "Substring Assertion", Check::Any),
    ("1.3.6.1.1.16.1", "UUID", Check::Uuid),
    ("1.3.6.1.1.1.0.0", "RFC2307 NIS Netgroup Triple", Check::Any),
    ("1.3.6.1.1.1.0.1", "RFC2307 Boot Parameter", Check::Any),
    ("1.3.6.1.4.1.4203.666.11.2.1", "CSN", Check::Csn),
    ("1.3.6.1.4.1.4203.666.2.7", "OpenLDAP authz", Check::Any),
    // The rest of slapd's syntax table (schema_init.c), known so that schema files written
    // for slapd load; values of these syntaxes are not checked. Appended, so that the ids of
    // the syntaxes above stay as they were.
    syn!("1", "ACI Item", Check::Any),
    syn!("2", "Access Point", Check::Any),
    syn!("20", "DSE Type", Check::Any),
    syn!("29", "Master And Shadow Access Points", Check::Any),
    syn!("32", "Mail Preference", Check::Any),
    syn!("33", "MHS OR Address", Check::Any),
    syn!("42", "Protocol Information", Check::Any),
    syn!("45", "SubtreeSpecification", Check::Any),
    syn!("55", "Modify Rights", Check::Any),
    syn!("56", "LDAP Schema Definition", Check::Any),
    syn!("57", "LDAP Schema Description", Check::Any),
    ("1.2.36.79672281.1.5.0", "RDN", Check::Any),
    (
        "1.2.840.113549.1.8.1.1",
        "PKCS#8 PrivateKeyInfo",
        Check::Any,
    ),
    ("1.3.6.1.1.15.1", "Certificate Exact Assertion", Check::Any),
    ("1.3.6.1.1.15.2", "Certificate Assertion", Check::Any),
    (
        "1.3.6.1.1.15.3",
        "Certificate Pair Exact Assertion",
        Check::Any,
    ),
    ("1.3.6.1.1.15.4", "Certificate Pair Assertion", Check::Any),
    (
        "1.3.6.1.1.15.5",
        "Certificate List Exact Assertion",
        Check::Any,
    ),
    ("1.3.6.1.1.15.6", "Certificate List Assertion", Check::Any),
    ("1.3.6.1.1.15.7", "Algorithm Identifier", Check::Any),
    ("1.3.6.1.4.1.4203.1.1.1", "OpenLDAP void", Check::Any),
    (
        "1.3.6.1.4.1.4203.666.11.10.2.1",
        "X.509 AttributeCertificate",
        Check::Any,
    ),
    (
        "1.3.6.1.4.1.4203.666.11.10.2.2",
        "AttributeCertificate Exact Assertion",
        Check::Any,
    ),
    (
        "1.3.6.1.4.1.4203.666.11.10.2.3",
        "AttributeCertificate Assertion",
        Check::Any,
    ),
    ("1.3.6.1.4.1.4203.666.11.2.4", "CSN SID", Check::Any),
    (
        "1.3.6.1.4.1.4203.666.2.1",
        "OpenLDAP Experimental ACI",
        Check::Any,
    ),
];

fn is_printable(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'\'' | b'(' | b')' | b'+' | b',' | b'-' | b'.' | b'=' | b'/' | b':' | b'?' | b' '
        )
}

pub(crate) fn is_descr(s: &[u8]) -> bool {
    matches!(s.first(), Some(b) if b.is_ascii_alphabetic())
        && s.iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
}

pub(crate) fn is_numericoid(s: &[u8]) -> bool {
    !s.is_empty()
        && s.split(|b| *b == b'.').all(|p| {
            !p.is_empty() && p.iter().all(u8::is_ascii_digit) && (p.len() == 1 || p[0] != b'0')
        })
}

fn bit_string(v: &[u8]) -> bool {
    v.len() >= 3
        && v[0] == b'\''
        && v[v.len() - 2..] == *b"'B"
        && v[1..v.len() - 2].iter().all(|b| *b == b'0' || *b == b'1')
}

fn utc_time(v: &[u8]) -> bool {
    // YYMMDDHHMM[SS](Z|(+|-)HHMM)
    let digits = v.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits != 10 && digits != 12 {
        return false;
    }
    let d = |i: usize| u32::from(v[i] - b'0') * 10 + u32::from(v[i + 1] - b'0');
    let (mo, day, h, mi) = (d(2), d(4), d(6), d(8));
    if !(1..=12).contains(&mo)
        || !(1..=31).contains(&day)
        || h > 23
        || mi > 59
        || (digits == 12 && d(10) > 59)
    {
        return false;
    }
    match &v[digits..] {
        b"Z" => true,
        [s, rest @ ..]
            if (*s == b'+' || *s == b'-')
                && rest.len() == 4
                && rest.iter().all(u8::is_ascii_digit) =>
        {
            let oh = u32::from(rest[0] - b'0') * 10 + u32::from(rest[1] - b'0');
            let om = u32::from(rest[2] - b'0') * 10 + u32::from(rest[3] - b'0');
            oh <= 23 && om <= 59
        }
        _ => false,
    }
}

fn check(c: Check, v: &[u8]) -> bool {
    match c {
        Check::Any => true,
        Check::DirectoryString => !v.is_empty() && std::str::from_utf8(v).is_ok(),
        Check::Ia5 => v.is_ascii(),
        Check::Printable | Check::Telephone => !v.is_empty() && v.iter().all(|b| is_printable(*b)),
        Check::Numeric => !v.is_empty() && v.iter().all(|b| b.is_ascii_digit() || *b == b' '),
        Check::Integer => rules::integer_canon(v).is_some(),
        Check::Boolean => v == b"TRUE" || v == b"FALSE",
        Check::Dn => std::str::from_utf8(v)
            .ok()
            .and_then(|s| Dn::parse(s).ok())
            .is_some(),
        Check::NameUid => rules::split_name_uid(v).is_some_and(|(dn, _)| {
            std::str::from_utf8(dn)
                .ok()
                .and_then(|s| Dn::parse(s).ok())
                .is_some()
        }),
        Check::GeneralizedTime => rules::gentime_canon(v).is_some(),
        Check::UtcTime => utc_time(v),
        Check::Oid => is_descr(v) || is_numericoid(v),
        Check::Country => v.len() == 2 && v.iter().all(|b| is_printable(*b)),
        Check::PostalAddress => {
            !v.is_empty()
                && std::str::from_utf8(v).is_ok()
                && v.split(|b| *b == b'$').all(|l| !l.is_empty())
        }
        Check::BitString => bit_string(v),
        Check::Uuid => rules::uuid_canon(v).is_some(),
        Check::Csn => csn(v),
    }
}

/// An OpenLDAP change sequence number: `time#count#sid#mod`, the time a GeneralizedTime (with
/// microseconds since OpenLDAP 2.4), the others hexadecimal.
fn csn(v: &[u8]) -> bool {
    let mut parts = v.split(|b| *b == b'#');
    parts
        .next()
        .is_some_and(|t| rules::gentime_canon(t).is_some())
        && (0..3).all(|_| {
            parts
                .next()
                .is_some_and(|p| !p.is_empty() && p.iter().all(u8::is_ascii_hexdigit))
        })
        && parts.next().is_none()
}

impl Schema {
    /// Checks a value against the attribute's syntax. Unknown syntaxes accept anything.
    pub fn validate(&self, attr: AttrId, value: &[u8]) -> Result<(), ValueError> {
        let a = self.attr(attr);
        let Some(sid) = a.syntax else { return Ok(()) };
        let c = self
            .syntax_checks
            .get(sid.0 as usize)
            .copied()
            .unwrap_or(Check::Any);
        if check(c, value) {
            Ok(())
        } else {
            Err(ValueError(format!(
                "{}: value #0 invalid per syntax",
                a.name()
            )))
        }
    }
}
