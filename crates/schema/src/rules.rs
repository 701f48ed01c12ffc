//! RFC 4517 matching rules: equality keys, ordering and substring matching.
//!
//! Every rule belongs to a `Family` that says how a value is normalized. An equality key is the
//! normalized value, so two values match iff their keys are equal bytes. Ordering rules compare
//! normalized values (numerically for integers, by instant for times). String preparation is
//! RFC 4518 simplified: drop map-to-nothing characters, trim, collapse inner white space to one
//! space, and Unicode-lowercase for the caseIgnore rules (no NFKC).

use std::cmp::Ordering;

use crate::cache::GenCache;
use crate::{syntax, AttrId, Dn, RuleId, RuleKind, Schema, ValueError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    CaseIgnore,
    CaseExact,
    CaseIgnoreIa5,
    CaseExactIa5,
    CaseIgnoreList,
    Dn,
    UniqueMember,
    Integer,
    Numeric,
    Telephone,
    Octet,
    Boolean,
    Oid,
    GenTime,
    BitString,
    Uuid,
    /// objectIdentifierFirstComponentMatch: the first component of a description, or an OID.
    OidFirst,
    IntFirst,
    DirStringFirst,
}

pub(crate) struct RuleDef {
    pub oid: &'static str,
    pub name: &'static str,
    pub kind: RuleKind,
    pub syntax: &'static str,
    pub family: Family,
}

const fn r(
    oid: &'static str,
    name: &'static str,
    kind: RuleKind,
    syntax: &'static str,
    family: Family,
) -> RuleDef {
    RuleDef {
        oid,
        name,
        kind,
        syntax,
        family,
    }
}

use Family as F;
use RuleKind::{Equality as EQ, Ordering as ORD, Substring as SUB};

const S_DIR: &str = "1.3.6.1.4.1.1466.115.121.1.15";
const S_IA5: &str = "1.3.6.1.4.1.1466.115.121.1.26";
const S_SUBSTR: &str = "1.3.6.1.4.1.1466.115.121.1.58";
const S_INT: &str = "1.3.6.1.4.1.1466.115.121.1.27";
const S_NUM: &str = "1.3.6.1.4.1.1466.115.121.1.36";
const S_OID: &str = "1.3.6.1.4.1.1466.115.121.1.38";
const S_OCTET: &str = "1.3.6.1.4.1.1466.115.121.1.40";
const S_TIME: &str = "1.3.6.1.4.1.1466.115.121.1.24";

/// Equality and ordering rules slapd does not offer for extensible matching (or lacks).
pub(crate) fn not_extensible(rule_oid: &str) -> bool {
    matches!(
        rule_oid,
        "1.3.6.1.1.16.2"
            | "1.3.6.1.1.16.3"
            | "1.3.6.1.4.1.4203.666.11.2.2"
            | "1.3.6.1.4.1.4203.666.11.2.3"
            | "2.5.13.31"
    )
}

/// The syntaxes besides its own a rule also takes values of (slapd's compatible syntaxes,
/// which decide `Schema::rule_applies` and so `matchingRuleUse`).
pub(crate) fn compatible_syntaxes(rule_oid: &str) -> &'static [&'static str] {
    const STRINGS: &[&str] = &[
        "1.3.6.1.4.1.1466.115.121.1.11",
        "1.3.6.1.4.1.1466.115.121.1.44",
        "1.3.6.1.4.1.1466.115.121.1.50",
    ];
    // slapd names more description syntaxes for the first-component rules, but publishes
    // only these as used (its subschema types are its own): what a client sees is matched.
    const INT_FIRST: &[&str] = &[S_INT];
    const OID_FIRST: &[&str] = &[S_OID, "1.3.6.1.4.1.1466.115.121.1.54"];
    match rule_oid {
        "2.5.13.2" | "2.5.13.3" | "2.5.13.4" | "2.5.13.5" | "2.5.13.6" | "2.5.13.7" => STRINGS,
        "2.5.13.29" => INT_FIRST,
        "2.5.13.30" => OID_FIRST,
        _ => &[],
    }
}

pub(crate) const RULES: &[RuleDef] = &[
    r("2.5.13.0", "objectIdentifierMatch", EQ, S_OID, F::Oid),
    r(
        "2.5.13.1",
        "distinguishedNameMatch",
        EQ,
        "1.3.6.1.4.1.1466.115.121.1.12",
        F::Dn,
    ),
    r("2.5.13.2", "caseIgnoreMatch", EQ, S_DIR, F::CaseIgnore),
    r(
        "2.5.13.3",
        "caseIgnoreOrderingMatch",
        ORD,
        S_DIR,
        F::CaseIgnore,
    ),
    r(
        "2.5.13.4",
        "caseIgnoreSubstringsMatch",
        SUB,
        S_SUBSTR,
        F::CaseIgnore,
    ),
    r("2.5.13.5", "caseExactMatch", EQ, S_DIR, F::CaseExact),
    r(
        "2.5.13.6",
        "caseExactOrderingMatch",
        ORD,
        S_DIR,
        F::CaseExact,
    ),
    r(
        "2.5.13.7",
        "caseExactSubstringsMatch",
        SUB,
        S_SUBSTR,
        F::CaseExact,
    ),
    r("2.5.13.8", "numericStringMatch", EQ, S_NUM, F::Numeric),
    r(
        "2.5.13.9",
        "numericStringOrderingMatch",
        ORD,
        S_NUM,
        F::Numeric,
    ),
    r(
        "2.5.13.10",
        "numericStringSubstringsMatch",
        SUB,
        S_SUBSTR,
        F::Numeric,
    ),
    r(
        "2.5.13.11",
        "caseIgnoreListMatch",
        EQ,
        "1.3.6.1.4.1.1466.115.121.1.41",
        F::CaseIgnoreList,
    ),
    r(
        "2.5.13.12",
        "caseIgnoreListSubstringsMatch",
        SUB,
        S_SUBSTR,
        F::CaseIgnoreList,
    ),
    r(
        "2.5.13.13",
        "booleanMatch",
        EQ,
        "1.3.6.1.4.1.1466.115.121.1.7",
        F::Boolean,
    ),
    r("2.5.13.14", "integerMatch", EQ, S_INT, F::Integer),
    r("2.5.13.15", "integerOrderingMatch", ORD, S_INT, F::Integer),
    r(
        "2.5.13.16",
        "bitStringMatch",
        EQ,
        "1.3.6.1.4.1.1466.115.121.1.6",
        F::BitString,
    ),
    r("2.5.13.17", "octetStringMatch", EQ, S_OCTET, F::Octet),
    r(
        "2.5.13.18",
        "octetStringOrderingMatch",
        ORD,
        S_OCTET,
        F::Octet,
    ),
    r(
        "2.5.13.19",
        "octetStringSubstringsMatch",
        SUB,
        S_OCTET,
        F::Octet,
    ),
    r(
        "2.5.13.20",
        "telephoneNumberMatch",
        EQ,
        "1.3.6.1.4.1.1466.115.121.1.50",
        F::Telephone,
    ),
    r(
        "2.5.13.21",
        "telephoneNumberSubstringsMatch",
        SUB,
        S_SUBSTR,
        F::Telephone,
    ),
    r(
        "2.5.13.23",
        "uniqueMemberMatch",
        EQ,
        "1.3.6.1.4.1.1466.115.121.1.34",
        F::UniqueMember,
    ),
    r("2.5.13.27", "generalizedTimeMatch", EQ, S_TIME, F::GenTime),
    r(
        "2.5.13.28",
        "generalizedTimeOrderingMatch",
        ORD,
        S_TIME,
        F::GenTime,
    ),
    r(
        "2.5.13.29",
        "integerFirstComponentMatch",
        EQ,
        S_INT,
        F::IntFirst,
    ),
    r(
        "2.5.13.30",
        "objectIdentifierFirstComponentMatch",
        EQ,
        S_OID,
        F::OidFirst,
    ),
    r(
        "2.5.13.31",
        "directoryStringFirstComponentMatch",
        EQ,
        S_DIR,
        F::DirStringFirst,
    ),
    r(
        "1.3.6.1.4.1.1466.109.114.1",
        "caseExactIA5Match",
        EQ,
        S_IA5,
        F::CaseExactIa5,
    ),
    r(
        "1.3.6.1.4.1.1466.109.114.2",
        "caseIgnoreIA5Match",
        EQ,
        S_IA5,
        F::CaseIgnoreIa5,
    ),
    r(
        "1.3.6.1.4.1.1466.109.114.3",
        "caseIgnoreIA5SubstringsMatch",
        SUB,
        S_SUBSTR,
        F::CaseIgnoreIa5,
    ),
    r(
        "1.3.6.1.4.1.4203.1.2.1",
        "caseExactIA5SubstringsMatch",
        SUB,
        S_SUBSTR,
        F::CaseExactIa5,
    ),
    r("1.3.6.1.1.16.2", "UUIDMatch", EQ, "1.3.6.1.1.16.1", F::Uuid),
    r(
        "1.3.6.1.1.16.3",
        "UUIDOrderingMatch",
        ORD,
        "1.3.6.1.1.16.1",
        F::Uuid,
    ),
    // OpenLDAP's change sequence numbers: fixed-width text, so bytes compare and sort as the
    // CSNs do.
    r(
        "1.3.6.1.4.1.4203.666.11.2.2",
        "CSNMatch",
        EQ,
        "1.3.6.1.4.1.4203.666.11.2.1",
        F::Octet,
    ),
    r(
        "1.3.6.1.4.1.4203.666.11.2.3",
        "CSNOrderingMatch",
        ORD,
        "1.3.6.1.4.1.4203.666.11.2.1",
        F::Octet,
    ),
    // OpenLDAP's authorization rules (dgAuthz of the dyngroup bundle, authzTo/authzFrom):
    // compared as written, so two spellings of one rule are two values, never one.
    r(
        "1.3.6.1.4.1.4203.666.4.12",
        "authzMatch",
        EQ,
        "1.3.6.1.4.1.4203.666.2.7",
        F::Octet,
    ),
];

/// RFC 4518 "map to nothing" characters (soft hyphen, zero-width and variation selectors...).
fn map_to_nothing(c: char) -> bool {
    matches!(c, '\u{AD}' | '\u{34F}' | '\u{1806}' | '\u{180B}'..='\u{180D}' | '\u{200B}' | '\u{2060}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}')
        || (c.is_control() && !c.is_whitespace())
}

/// String preparation for equality: trim, collapse inner white space, optionally case-fold.
/// A value of only spaces becomes a single space, so it stays distinct from the empty value.
fn prep(s: &str, fold: bool) -> String {
    if s.is_ascii() {
        prep_ascii(s.as_bytes(), fold)
    } else {
        prep_chars(s, fold)
    }
}

/// `prep` of a value that must be UTF-8 (`None` if it is not); ASCII needs no UTF-8 check.
fn prep_bytes(v: &[u8], fold: bool) -> Option<Vec<u8>> {
    if v.is_ascii() {
        let mut out = Vec::with_capacity(v.len());
        prep_ascii_into(v, fold, &mut out);
        Some(out)
    } else {
        Some(prep_chars(utf8(v)?, fold).into_bytes())
    }
}

fn prep_chars(s: &str, fold: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending = false;
    for ch in s.chars() {
        if map_to_nothing(ch) {
            continue;
        }
        if ch.is_whitespace() {
            pending = !out.is_empty();
            continue;
        }
        if pending {
            out.push(' ');
            pending = false;
        }
        if fold {
            out.extend(ch.to_lowercase());
        } else {
            out.push(ch);
        }
    }
    // A value with no significant character (only spaces or ignorable characters) keeps one
    // space, so its key stays distinct from the empty value and stays a valid value.
    if out.is_empty() && !s.is_empty() {
        out.push(' ');
    }
    out
}

/// `prep` for ASCII input, a byte at a time (most directory data; start-up and import
/// normalize every stored value, so this is on their hot path). Same result as the general
/// loop: controls other than white space map to nothing, TAB..CR and space are white space.
fn prep_ascii(s: &[u8], fold: bool) -> String {
    let mut out = Vec::with_capacity(s.len());
    prep_ascii_into(s, fold, &mut out);
    // ASCII in, ASCII out.
    String::from_utf8(out).unwrap_or_default()
}

/// `prep_ascii`, appending to `out` (a bulk load normalizes into one buffer per entry).
fn prep_ascii_into(s: &[u8], fold: bool, out: &mut Vec<u8>) {
    let start = out.len();
    let mut pending = false;
    for &c in s {
        if c < 0x20 || c == 0x7f {
            if (0x09..=0x0d).contains(&c) {
                pending = out.len() > start;
            }
            continue;
        }
        if c == b' ' {
            pending = out.len() > start;
            continue;
        }
        if pending {
            out.push(b' ');
            pending = false;
        }
        out.push(if fold { c.to_ascii_lowercase() } else { c });
    }
    if out.len() == start && !s.is_empty() {
        out.push(b' ');
    }
}

/// String preparation for a substring assertion component: like `prep`, but a run of white
/// space at either end is kept as one space (it is significant inside the value).
fn prep_sub(s: &str, fold: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending = false;
    for ch in s.chars() {
        if map_to_nothing(ch) {
            continue;
        }
        if ch.is_whitespace() {
            pending = true;
            continue;
        }
        if pending {
            out.push(' ');
            pending = false;
        }
        if fold {
            out.extend(ch.to_lowercase());
        } else {
            out.push(ch);
        }
    }
    if pending {
        out.push(' ');
    }
    out
}

/// Canonical INTEGER: optional '-', no leading zeros, "-0" is "0". Leading zeros are accepted.
pub(crate) fn integer_canon(v: &[u8]) -> Option<Vec<u8>> {
    let (neg, digits) = match v.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, v),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let start = digits
        .iter()
        .position(|b| *b != b'0')
        .unwrap_or(digits.len());
    let mag = &digits[start..];
    if mag.is_empty() {
        return Some(b"0".to_vec());
    }
    let mut out = Vec::with_capacity(mag.len() + 1);
    if neg {
        out.push(b'-');
    }
    out.extend_from_slice(mag);
    Some(out)
}

/// Compares two canonical integers of any size.
fn integer_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let an = a.first() == Some(&b'-');
    let bn = b.first() == Some(&b'-');
    match (an, bn) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (false, false) => a.len().cmp(&b.len()).then_with(|| a.cmp(b)),
        (true, true) => b.len().cmp(&a.len()).then_with(|| b.cmp(a)),
    }
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
pub(crate) fn civil_from_days_pub(z: i64) -> (i64, u32, u32) {
    civil_from_days(z)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Canonical Generalized Time in UTC: `YYYYMMDDHHMMSS[.fraction]Z`, fraction without trailing
/// zeros. A fraction of an hour or minute is converted to seconds; a missing time zone is
/// taken as UTC.
pub(crate) fn gentime_canon(v: &[u8]) -> Option<Vec<u8>> {
    let nd = v.iter().take_while(|b| b.is_ascii_digit()).count();
    if nd != 10 && nd != 12 && nd != 14 {
        return None;
    }
    let num = |i: usize, n: usize| {
        v[i..i + n]
            .iter()
            .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'))
    };
    let (y, mo, d, h) = (num(0, 4), num(4, 2) as u32, num(6, 2) as u32, num(8, 2));
    let mi = if nd >= 12 { num(10, 2) } else { 0 };
    let s = if nd >= 14 { num(12, 2) } else { 0 };
    if !(1..=12).contains(&mo) || d == 0 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 60
    {
        return None;
    }
    let mut rest = &v[nd..];
    // Fraction of the last given unit, in nanoseconds of that unit scaled to seconds.
    let mut frac_nanos: u128 = 0;
    if let Some((b'.' | b',', r)) = rest.split_first() {
        let fd = r.iter().take_while(|b| b.is_ascii_digit()).count();
        if fd == 0 {
            return None;
        }
        let digits = &r[..fd];
        let used = &digits[..fd.min(18)];
        let val = used
            .iter()
            .fold(0u128, |acc, b| acc * 10 + u128::from(b - b'0'));
        let unit: u128 = match nd {
            10 => 3600,
            12 => 60,
            _ => 1,
        };
        frac_nanos = val * unit * 1_000_000_000 / 10u128.pow(used.len() as u32);
        rest = &r[fd..];
    }
    let offset = match rest {
        b"" | b"Z" => 0i64,
        [sign @ (b'+' | b'-'), tz @ ..]
            if (tz.len() == 2 || tz.len() == 4) && tz.iter().all(u8::is_ascii_digit) =>
        {
            let oh = i64::from(tz[0] - b'0') * 10 + i64::from(tz[1] - b'0');
            let om = if tz.len() == 4 {
                i64::from(tz[2] - b'0') * 10 + i64::from(tz[3] - b'0')
            } else {
                0
            };
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return None,
    };
    let mut total = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset;
    total += (frac_nanos / 1_000_000_000) as i64;
    let nanos = (frac_nanos % 1_000_000_000) as u32;
    let days = total.div_euclid(86_400);
    let secs = total.rem_euclid(86_400);
    let (yy, mm, dd) = civil_from_days(days);
    if !(0..=9999).contains(&yy) {
        return None;
    }
    let mut out = format!(
        "{yy:04}{mm:02}{dd:02}{:02}{:02}{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if nanos != 0 {
        let f = format!("{nanos:09}");
        out.push('.');
        out.push_str(f.trim_end_matches('0'));
    }
    out.push('Z');
    Some(out.into_bytes())
}

/// Orders canonical times: the 14 digits, then the fraction digits (no trailing zeros, so
/// comparing them as strings compares them as numbers).
fn gentime_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let split = |v: &[u8]| -> (Vec<u8>, Vec<u8>) {
        let head = v.get(..14).unwrap_or(v).to_vec();
        let frac = v
            .get(15..v.len().saturating_sub(1))
            .filter(|_| v.get(14) == Some(&b'.'))
            .unwrap_or(&[])
            .to_vec();
        (head, frac)
    };
    split(a).cmp(&split(b))
}

/// `integer_cmp`'s order as a byte order: negatives first, by descending length then
/// descending digits (each byte inverted); then the rest by length, then digits.
fn integer_ord_key(n: &[u8]) -> Vec<u8> {
    let neg = n.first() == Some(&b'-');
    let len = u32::try_from(n.len()).unwrap_or(u32::MAX);
    let mut k = Vec::with_capacity(n.len() + 5);
    if neg {
        k.push(0);
        k.extend_from_slice(&(!len).to_be_bytes());
        k.extend(n.iter().map(|b| !b));
    } else {
        k.push(1);
        k.extend_from_slice(&len.to_be_bytes());
        k.extend_from_slice(n);
    }
    k
}

/// `gentime_cmp`'s order as a byte order: the whole-seconds head, a 0 byte (below every
/// digit, so a shorter head sorts first as in the tuple order), then the fraction.
fn gentime_ord_key(n: &[u8]) -> Vec<u8> {
    let head = n.get(..14).unwrap_or(n);
    let frac = n
        .get(15..n.len().saturating_sub(1))
        .filter(|_| n.get(14) == Some(&b'.'))
        .unwrap_or(&[]);
    let mut k = Vec::with_capacity(head.len() + 1 + frac.len());
    k.extend_from_slice(head);
    k.push(0);
    k.extend_from_slice(frac);
    k
}

/// Lowercase canonical UUID (`8-4-4-4-12` hex digits).
pub(crate) fn uuid_canon(v: &[u8]) -> Option<Vec<u8>> {
    if v.len() != 36 {
        return None;
    }
    for (i, b) in v.iter().enumerate() {
        let ok = if matches!(i, 8 | 13 | 18 | 23) {
            *b == b'-'
        } else {
            b.is_ascii_hexdigit()
        };
        if !ok {
            return None;
        }
    }
    Some(v.to_ascii_lowercase())
}

/// Splits a Name And Optional UID value `dn#'0101'B` into the DN and the bit string.
pub(crate) fn split_name_uid(v: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    if let Some(p) = v.iter().rposition(|b| *b == b'#') {
        let bits = &v[p + 1..];
        if bits.len() >= 3
            && bits[0] == b'\''
            && bits[bits.len() - 2..] == *b"'B"
            && bits[1..bits.len() - 2]
                .iter()
                .all(|b| *b == b'0' || *b == b'1')
        {
            return Some((&v[..p], Some(bits)));
        }
    }
    Some((v, None))
}

/// The first word of a `( word ... )` description, or the whole value trimmed.
fn first_component(v: &[u8]) -> &[u8] {
    let t = v.trim_ascii();
    match t.strip_prefix(b"(") {
        Some(rest) => {
            let rest = rest.trim_ascii_start();
            let end = rest
                .iter()
                .position(|b| b.is_ascii_whitespace() || *b == b')')
                .unwrap_or(rest.len());
            &rest[..end]
        }
        None => t,
    }
}

/// The key of `v` in the families normalized a byte at a time (ASCII text, numeric strings,
/// ASCII telephone numbers, octets), appended to `out`: `Some(true)`, or `Some(false)` when
/// `v` is not valid for the family (`out` then holds part of a key); `None` for other
/// families and input, which `normalize_family` handles. One implementation for both, so a
/// bulk load that normalizes into one buffer gets the same keys.
fn normalize_bytes_into(f: Family, v: &[u8], out: &mut Vec<u8>) -> Option<bool> {
    let simple = matches!(f, F::Numeric | F::Octet)
        || (v.is_ascii()
            && matches!(
                f,
                F::CaseIgnore | F::CaseIgnoreIa5 | F::CaseExact | F::CaseExactIa5 | F::Telephone
            ));
    if !simple {
        return None;
    }
    out.reserve(v.len());
    match f {
        F::CaseIgnore | F::CaseIgnoreIa5 => prep_ascii_into(v, true, out),
        F::CaseExact | F::CaseExactIa5 => prep_ascii_into(v, false, out),
        F::Numeric => {
            if !v.iter().all(|b| b.is_ascii_digit() || *b == b' ') {
                return Some(false);
            }
            out.extend(v.iter().copied().filter(|b| *b != b' '));
        }
        F::Telephone => out.extend(
            v.iter()
                .filter(|b| !b.is_ascii_whitespace() && **b != b'-' && **b != 0x0b)
                .map(u8::to_ascii_lowercase),
        ),
        F::Octet => out.extend_from_slice(v),
        _ => {}
    }
    Some(true)
}

fn utf8(v: &[u8]) -> Option<&str> {
    std::str::from_utf8(v).ok()
}

impl Schema {
    fn oid_key(&self, v: &[u8]) -> Option<Vec<u8>> {
        let t = v.trim_ascii();
        if syntax::is_numericoid(t) {
            return Some(t.to_vec());
        }
        if !syntax::is_descr(t) {
            return None;
        }
        let name = utf8(t)?;
        if let Some(c) = self.class_by_name(name) {
            return Some(self.class(c).oid.as_bytes().to_vec());
        }
        if let Some(a) = self.attr_by_name(name) {
            return Some(self.attr(a).oid.as_bytes().to_vec());
        }
        if let Some(r) = self.rule_by_name(name) {
            return Some(self.rule(r).oid.as_bytes().to_vec());
        }
        // An unknown name still has a key of its own, distinct from every numeric OID.
        Some(t.to_ascii_lowercase())
    }

    /// The equality key of a DN-syntax value. DN values repeat a great deal (creatorsName and
    /// modifiersName are the same few DNs on every entry; member, manager, seeAlso point at a
    /// few hundred entries), and start-up and import normalize every stored value, so each
    /// thread keeps the keys of the DNs it normalized last, for this schema generation.
    fn dn_key(&self, v: &[u8]) -> Option<Vec<u8>> {
        type Cache = GenCache<Box<[u8]>, Box<[u8]>>;
        thread_local! {
            static CACHE: std::cell::RefCell<Cache> = std::cell::RefCell::new(Cache::default());
        }
        const MAX_ENTRIES: usize = 1024;
        const MAX_LEN: usize = 512;
        let cacheable = self.generation != 0 && v.len() <= MAX_LEN;
        if cacheable {
            let hit = CACHE.with_borrow(|c| c.get(self.generation, v, |k| k.to_vec()));
            if hit.is_some() {
                return hit;
            }
        }
        let dn = Dn::parse(utf8(v)?).ok()?;
        let key = dn.normalize(self).ok()?.norm.into_bytes();
        if cacheable {
            CACHE.with_borrow_mut(|c| {
                c.insert(
                    self.generation,
                    v.into(),
                    key.as_slice().into(),
                    MAX_ENTRIES,
                )
            });
        }
        Some(key)
    }

    pub(crate) fn normalize_family(&self, f: Family, v: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        if let Some(ok) = normalize_bytes_into(f, v, &mut out) {
            return ok.then_some(out);
        }
        Some(match f {
            F::CaseIgnore => prep_bytes(v, true)?,
            F::CaseExact => prep_bytes(v, false)?,
            F::CaseIgnoreIa5 | F::CaseExactIa5 => return None,
            F::CaseIgnoreList => {
                let s = utf8(v)?;
                let lines: Vec<String> = s.split('$').map(|l| prep(l, true)).collect();
                lines.join("$").into_bytes()
            }
            F::Dn => self.dn_key(v)?,
            F::UniqueMember => {
                let (dn, bits) = split_name_uid(v)?;
                let mut k = self.dn_key(dn)?;
                if let Some(b) = bits {
                    k.push(b'#');
                    k.extend_from_slice(b);
                }
                k
            }
            F::Integer => integer_canon(v)?,
            // Always taken by `normalize_bytes_into`.
            F::Numeric | F::Octet => return None,
            F::Telephone => {
                let s = utf8(v)?;
                s.chars()
                    .filter(|c| !c.is_whitespace() && *c != '-')
                    .flat_map(char::to_lowercase)
                    .collect::<String>()
                    .into_bytes()
            }
            F::Boolean => {
                if v.eq_ignore_ascii_case(b"TRUE") {
                    b"TRUE".to_vec()
                } else if v.eq_ignore_ascii_case(b"FALSE") {
                    b"FALSE".to_vec()
                } else {
                    return None;
                }
            }
            F::Oid => self.oid_key(v)?,
            F::GenTime => gentime_canon(v)?,
            F::BitString => {
                let t = v.trim_ascii();
                let ok = t.len() >= 3
                    && t[0] == b'\''
                    && t[t.len() - 2..] == *b"'B"
                    && t[1..t.len() - 2].iter().all(|b| *b == b'0' || *b == b'1');
                if !ok {
                    return None;
                }
                t.to_vec()
            }
            F::Uuid => uuid_canon(v)?,
            F::OidFirst => self.oid_key(first_component(v))?,
            F::IntFirst => integer_canon(first_component(v))?,
            F::DirStringFirst => prep(utf8(first_component(v))?, true).into_bytes(),
        })
    }

    /// A substring assertion component prepared to be searched in a normalized value.
    fn substring_component(&self, f: Family, v: &[u8]) -> Option<Vec<u8>> {
        Some(match f {
            F::CaseIgnore | F::CaseIgnoreList | F::DirStringFirst => {
                prep_sub(utf8(v)?, true).into_bytes()
            }
            F::CaseExact => prep_sub(utf8(v)?, false).into_bytes(),
            F::CaseIgnoreIa5 => prep_sub(utf8(v)?, true).into_bytes(),
            F::CaseExactIa5 => prep_sub(utf8(v)?, false).into_bytes(),
            F::Numeric | F::Telephone => self.normalize_family(f, v)?,
            _ => v.to_vec(),
        })
    }

    /// The form a value of `attr` is stored in, when it differs from the value as given:
    /// as slapd, DNs (and the DN part of a name and optional UID) in their pretty form
    /// (`Dn::pretty`), and objectClass values as the class's first name (`groupOfNames` for
    /// `groupofnames` or `2.5.6.9`). `None` when the value is stored as given (or is not
    /// valid, which the syntax check reports).
    pub fn pretty_value(&self, attr: AttrId, v: &[u8]) -> Option<Vec<u8>> {
        let pretty_dn = |v: &[u8]| -> Option<String> {
            let dn = Dn::parse(std::str::from_utf8(v).ok()?).ok()?;
            Some(dn.pretty(self))
        };
        let out = match self.family(self.attr(attr).equality?) {
            F::Dn => pretty_dn(v)?.into_bytes(),
            F::UniqueMember => {
                let (dn, bits) = split_name_uid(v)?;
                let mut out = pretty_dn(dn)?.into_bytes();
                if let Some(b) = bits {
                    out.push(b'#');
                    out.extend_from_slice(b);
                }
                out
            }
            F::Oid if self.is_object_class(attr) => {
                let class = self.class_by_name(std::str::from_utf8(v).ok()?.trim())?;
                let c = self.class(class);
                c.names.first().unwrap_or(&c.oid).as_bytes().to_vec()
            }
            _ => return None,
        };
        (out != v).then_some(out)
    }

    /// Whether `~=` on `attr` is phonetic (`crate::approx`) rather than equality: as in slapd,
    /// for the types whose equality rule is caseIgnoreMatch, caseExactMatch or their IA5
    /// forms, the rules slapd pairs with an approximate rule.
    pub fn has_approx(&self, attr: AttrId) -> bool {
        self.attr(attr).equality.is_some_and(|r| {
            matches!(
                self.family(r),
                F::CaseIgnore | F::CaseExact | F::CaseIgnoreIa5 | F::CaseExactIa5
            )
        })
    }

    fn family(&self, rule: RuleId) -> Family {
        self.rule_impls
            .get(rule.0 as usize)
            .copied()
            .unwrap_or(F::Octet)
    }

    /// The equality key of a value: the value normalized with the attribute's EQUALITY rule,
    /// or the raw bytes when the attribute has none. Two values match iff their keys are equal.
    pub fn normalize_eq(&self, attr: AttrId, value: &[u8]) -> Result<Vec<u8>, ValueError> {
        let a = self.attr(attr);
        match a.equality {
            None => Ok(value.to_vec()),
            Some(r) => self
                .normalize_family(self.family(r), value)
                .ok_or_else(|| ValueError(format!("{}: value #0 invalid per syntax", a.name()))),
        }
    }

    /// `normalize_eq`, appending the key to `out` (on error `out` is left as it was): the
    /// common families without an allocation of their own, for a bulk load that keeps the
    /// keys of an entry in one buffer.
    pub fn normalize_eq_into(
        &self,
        attr: AttrId,
        value: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), ValueError> {
        let start = out.len();
        let family = self.attr(attr).equality.map(|r| self.family(r));
        match normalize_bytes_into(family.unwrap_or(F::Octet), value, out) {
            Some(true) => Ok(()),
            Some(false) => {
                out.truncate(start);
                Err(ValueError(format!(
                    "{}: value #0 invalid per syntax",
                    self.attr(attr).name()
                )))
            }
            None => {
                out.extend_from_slice(&self.normalize_eq(attr, value)?);
                Ok(())
            }
        }
    }

    /// A value normalized with the given rule (for equality rules, its equality key).
    pub fn normalize_with(&self, rule: RuleId, value: &[u8]) -> Result<Vec<u8>, ValueError> {
        self.normalize_family(self.family(rule), value)
            .ok_or_else(|| {
                let r = self.rule(rule);
                ValueError(format!(
                    "{}: value #0 invalid per syntax",
                    r.names.first().unwrap_or(&r.oid)
                ))
            })
    }

    /// Orders two raw values with the attribute's ORDERING rule. `None` when the attribute has
    /// no ordering rule or either value cannot be normalized.
    pub fn compare_ord(&self, attr: AttrId, a: &[u8], b: &[u8]) -> Option<Ordering> {
        let rule = self.attr(attr).ordering?;
        self.compare_with(rule, a, b)
    }

    /// Orders two raw values with a given rule (its family's order).
    pub fn compare_with(&self, rule: RuleId, a: &[u8], b: &[u8]) -> Option<Ordering> {
        let na = self.order_key(rule, a)?;
        let nb = self.order_key(rule, b)?;
        Some(self.compare_keys(rule, &na, &nb))
    }

    /// A value prepared for ordering with `rule` (its normalized form); `None` when the value
    /// cannot be normalized. Sorting many values normalizes each once and compares the keys
    /// with [`Schema::compare_keys`], the same order as [`Schema::compare_with`].
    pub fn order_key(&self, rule: RuleId, v: &[u8]) -> Option<Vec<u8>> {
        self.normalize_family(self.family(rule), v)
    }

    /// Orders two keys made by [`Schema::order_key`] with the same rule.
    pub fn compare_keys(&self, rule: RuleId, a: &[u8], b: &[u8]) -> Ordering {
        match self.family(rule) {
            F::Integer | F::IntFirst => integer_cmp(a, b),
            F::GenTime => gentime_cmp(a, b),
            _ => a.cmp(b),
        }
    }

    /// A key of a raw value whose byte order is the order of the attribute's ORDERING rule
    /// (`compare_ord`): for any two values `a`, `b` that `compare_ord` orders,
    /// `compare_ord(a, b) == ord_key(a).cmp(&ord_key(b))`, and `ord_key` is `Some` exactly when
    /// the value can be normalized. The ordering index is keyed by it.
    pub fn ord_key(&self, attr: AttrId, v: &[u8]) -> Option<Vec<u8>> {
        let rule = self.attr(attr).ordering?;
        let f = self.family(rule);
        let n = self.normalize_family(f, v)?;
        Some(match f {
            F::Integer | F::IntFirst => integer_ord_key(&n),
            F::GenTime => gentime_ord_key(&n),
            _ => n,
        })
    }

    /// A raw value prepared with the attribute's SUBSTR rule as `substrings_match` prepares
    /// it: the text the substring index's keys are cut from. `None` when the attribute has no
    /// substring rule or the value cannot be prepared (it then matches no substring filter).
    pub fn substr_value(&self, attr: AttrId, v: &[u8]) -> Option<Vec<u8>> {
        let rule = self.attr(attr).substr?;
        self.normalize_family(self.family(rule), v)
    }

    /// An assertion component (initial, any or final) prepared as `substrings_match`
    /// prepares it. A value matches only if it (`substr_value`) holds this component at the
    /// place the filter names.
    pub fn substr_component(&self, attr: AttrId, c: &[u8]) -> Option<Vec<u8>> {
        let rule = self.attr(attr).substr?;
        self.substring_component(self.family(rule), c)
    }

    /// Substring match of a raw value with the attribute's SUBSTR rule. `None` when the
    /// attribute has no substring rule or the value or assertion cannot be prepared.
    pub fn substrings_match(
        &self,
        attr: AttrId,
        value: &[u8],
        initial: Option<&[u8]>,
        any: &[&[u8]],
        final_: Option<&[u8]>,
    ) -> Option<bool> {
        let rule = self.attr(attr).substr?;
        self.substrings_with(rule, value, initial, any, final_)
    }

    /// Substring match with a given rule.
    pub fn substrings_with(
        &self,
        rule: RuleId,
        value: &[u8],
        initial: Option<&[u8]>,
        any: &[&[u8]],
        final_: Option<&[u8]>,
    ) -> Option<bool> {
        let f = self.family(rule);
        let v = self.normalize_family(f, value)?;
        let initial = match initial {
            Some(p) => Some(self.substring_component(f, p)?),
            None => None,
        };
        let final_ = match final_ {
            Some(p) => Some(self.substring_component(f, p)?),
            None => None,
        };
        let any: Vec<Vec<u8>> = any
            .iter()
            .map(|p| self.substring_component(f, p))
            .collect::<Option<_>>()?;
        let mut rest: &[u8] = &v;
        if let Some(i) = &initial {
            if !rest.starts_with(i) {
                return Some(false);
            }
            rest = &rest[i.len()..];
        }
        if let Some(fi) = &final_ {
            if !rest.ends_with(fi) {
                return Some(false);
            }
            rest = &rest[..rest.len() - fi.len()];
        }
        for a in &any {
            if a.is_empty() {
                continue;
            }
            match rest.windows(a.len()).position(|w| w == a.as_slice()) {
                Some(p) => rest = &rest[p + a.len()..],
                None => return Some(false),
            }
        }
        Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The ASCII fast path of string preparation gives what the general loop gives.
        #[test]
        fn prep_ascii_matches_the_general_loop(
            v in proptest::collection::vec(0u8..0x80, 0..24),
            fold in proptest::bool::ANY,
        ) {
            let s = std::str::from_utf8(&v).expect("ascii");
            proptest::prop_assert_eq!(prep_ascii(&v, fold), prep_chars(s, fold));
        }

        /// So does the ASCII fast path of telephone numbers.
        #[test]
        fn telephone_ascii_matches_the_general_loop(
            v in proptest::collection::vec(0u8..0x80, 0..24),
        ) {
            let s = std::str::from_utf8(&v).expect("ascii");
            let general: String = s
                .chars()
                .filter(|c| !c.is_whitespace() && *c != '-')
                .flat_map(char::to_lowercase)
                .collect();
            let schema = Schema::builtin();
            proptest::prop_assert_eq!(
                schema.normalize_family(F::Telephone, &v),
                Some(general.into_bytes())
            );
        }
    }

    #[test]
    fn integer_canonical_and_order() {
        assert_eq!(integer_canon(b"007").as_deref(), Some(&b"7"[..]));
        assert_eq!(integer_canon(b"-0").as_deref(), Some(&b"0"[..]));
        assert_eq!(integer_canon(b"-00").as_deref(), Some(&b"0"[..]));
        assert_eq!(integer_canon(b"-012").as_deref(), Some(&b"-12"[..]));
        assert_eq!(integer_canon(b""), None);
        assert_eq!(integer_canon(b"-"), None);
        assert_eq!(integer_canon(b"1a"), None);
        assert_eq!(integer_canon(b"+1"), None);
        assert_eq!(integer_cmp(b"-5", b"3"), Ordering::Less);
        assert_eq!(integer_cmp(b"-5", b"-30"), Ordering::Greater);
        assert_eq!(
            integer_cmp(b"100000000000000000000000", b"99999999999999999999"),
            Ordering::Greater
        );
        assert_eq!(integer_cmp(b"12", b"12"), Ordering::Equal);
    }

    #[test]
    fn gentime_canonical() {
        let c =
            |s: &str| gentime_canon(s.as_bytes()).map(|v| String::from_utf8(v).unwrap_or_default());
        assert_eq!(c("20240101120000Z").as_deref(), Some("20240101120000Z"));
        assert_eq!(c("202401011200Z").as_deref(), Some("20240101120000Z"));
        assert_eq!(c("2024010112Z").as_deref(), Some("20240101120000Z"));
        assert_eq!(c("20240101120000+0200").as_deref(), Some("20240101100000Z"));
        assert_eq!(c("20240101003000+0100").as_deref(), Some("20231231233000Z"));
        assert_eq!(
            c("20240101120000.500Z").as_deref(),
            Some("20240101120000.5Z")
        );
        assert_eq!(c("2024010112.5Z").as_deref(), Some("20240101123000Z"));
        assert_eq!(c("20240229000000Z").as_deref(), Some("20240229000000Z"));
        assert_eq!(c("20230229000000Z"), None);
        assert_eq!(c("20241301000000Z"), None);
        assert_eq!(c("2024010112000Z"), None);
        assert_eq!(c("20240101120000X"), None);
        assert_eq!(
            gentime_cmp(b"20240101120000Z", b"20240101120000.5Z"),
            Ordering::Less
        );
        assert_eq!(
            gentime_cmp(b"20240101120000.05Z", b"20240101120000.5Z"),
            Ordering::Less
        );
    }

    #[test]
    fn prep_rules() {
        assert_eq!(prep("  Hello   World  ", true), "hello world");
        assert_eq!(prep("  Hello   World  ", false), "Hello World");
        assert_eq!(prep("ÄBC", true), "äbc");
        assert_eq!(prep("   ", true), " ");
        assert_eq!(prep("", true), "");
        assert_eq!(prep("\u{34F}", true), " ");
        assert_eq!(prep_sub(" Smith", true), " smith");
    }
}
