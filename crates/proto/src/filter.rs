//! Filters on the wire (RFC 4511 §4.5.1). The string form lives in `filter_str.rs`.

use crate::error::DecodeErrorKind as K;
use crate::tags::{context, context_constructed};
use crate::{DecodeLimits, Filter};
use ber::tag::{OCTET_STRING, SEQUENCE};
use ber::{Reader, Writer};
use std::borrow::Cow;

const AND: u8 = context_constructed(0);
const OR: u8 = context_constructed(1);
const NOT: u8 = context_constructed(2);
const EQUALITY: u8 = context_constructed(3);
const SUBSTRINGS: u8 = context_constructed(4);
const GE: u8 = context_constructed(5);
const LE: u8 = context_constructed(6);
const PRESENT: u8 = context(7);
const APPROX: u8 = context_constructed(8);
const EXTENSIBLE: u8 = context_constructed(9);

/// Decodes one filter element given its tag and contents.
///
/// `depth` counts and/or/not levels (1 for the top filter) against `max_filter_depth`;
/// `ber_depth` is the BER nesting of this element within the PDU, against `max_ber_depth`.
pub(crate) fn decode_filter<'a>(
    tag: u8,
    body: &'a [u8],
    depth: usize,
    ber_depth: usize,
    limits: &DecodeLimits,
) -> Result<Filter<'a>, K> {
    if depth > limits.max_filter_depth {
        return Err(K::FilterTooDeep(limits.max_filter_depth));
    }
    if ber_depth > limits.max_ber_depth {
        return Err(K::BerTooDeep(limits.max_ber_depth));
    }
    let mut r = Reader::new(body);
    let f = match tag {
        AND | OR => {
            let mut items = Vec::new();
            while !r.is_empty() {
                let (t, b) = r.read_element()?;
                items.push(decode_filter(t, b, depth + 1, ber_depth + 1, limits)?);
            }
            if tag == AND {
                Filter::And(items)
            } else {
                Filter::Or(items)
            }
        }
        NOT => {
            let (t, b) = r.read_element()?;
            Filter::Not(Box::new(decode_filter(
                t,
                b,
                depth + 1,
                ber_depth + 1,
                limits,
            )?))
        }
        EQUALITY | GE | LE | APPROX => {
            let attr = Cow::Borrowed(r.read_octets(OCTET_STRING)?);
            let value = Cow::Borrowed(r.read_octets(OCTET_STRING)?);
            match tag {
                EQUALITY => Filter::Equality(attr, value),
                GE => Filter::GreaterOrEqual(attr, value),
                LE => Filter::LessOrEqual(attr, value),
                _ => Filter::Approx(attr, value),
            }
        }
        SUBSTRINGS => {
            if ber_depth + 1 > limits.max_ber_depth {
                return Err(K::BerTooDeep(limits.max_ber_depth));
            }
            let attr = Cow::Borrowed(r.read_octets(OCTET_STRING)?);
            let mut parts = r.sub(SEQUENCE)?;
            let (mut initial, mut any, mut final_) = (None, Vec::new(), None);
            if parts.is_empty() {
                return Err(K::BadSubstrings("no initial, any or final part"));
            }
            while !parts.is_empty() {
                let (t, v) = parts.read_element()?;
                if final_.is_some() {
                    return Err(K::BadSubstrings("a part follows the final part"));
                }
                match t {
                    0x80 if initial.is_none() && any.is_empty() => initial = Some(Cow::Borrowed(v)),
                    0x80 => return Err(K::BadSubstrings("initial part is not first")),
                    0x81 => any.push(Cow::Borrowed(v)),
                    0x82 => final_ = Some(Cow::Borrowed(v)),
                    _ => return Err(K::BadSubstrings("part tag must be [0], [1] or [2]")),
                }
            }
            Filter::Substrings {
                attr,
                initial,
                any,
                final_,
            }
        }
        PRESENT => {
            r = Reader::new(&[]);
            Filter::Present(Cow::Borrowed(body))
        }
        EXTENSIBLE => {
            let rule = r.read_optional(context(1))?.map(Cow::Borrowed);
            let attr = r.read_optional(context(2))?.map(Cow::Borrowed);
            let value = Cow::Borrowed(r.read_tagged(context(3))?);
            let dn_attributes = if r.peek_tag() == Some(context(4)) {
                r.read_bool(context(4))?
            } else {
                false
            };
            if rule.is_none() && attr.is_none() {
                return Err(K::Invalid(
                    "extensible match needs a matching rule or a type",
                ));
            }
            Filter::Extensible {
                rule,
                attr,
                value,
                dn_attributes,
            }
        }
        t => return Err(K::UnknownFilter(t)),
    };
    r.finish()?;
    Ok(f)
}

/// Encodes a filter (the whole CHOICE element).
pub(crate) fn encode_filter(w: &mut Writer<'_>, f: &Filter<'_>) {
    match f {
        Filter::And(items) | Filter::Or(items) => {
            let m = w.start(if matches!(f, Filter::And(_)) { AND } else { OR });
            for i in items {
                encode_filter(w, i);
            }
            w.end(m);
        }
        Filter::Not(inner) => {
            let m = w.start(NOT);
            encode_filter(w, inner);
            w.end(m);
        }
        Filter::Equality(a, v) => ava(w, EQUALITY, a, v),
        Filter::GreaterOrEqual(a, v) => ava(w, GE, a, v),
        Filter::LessOrEqual(a, v) => ava(w, LE, a, v),
        Filter::Approx(a, v) => ava(w, APPROX, a, v),
        Filter::Substrings {
            attr,
            initial,
            any,
            final_,
        } => {
            let m = w.start(SUBSTRINGS);
            w.write_octets(OCTET_STRING, attr);
            let s = w.start(SEQUENCE);
            if let Some(i) = initial {
                w.write_octets(0x80, i);
            }
            for a in any {
                w.write_octets(0x81, a);
            }
            if let Some(fi) = final_ {
                w.write_octets(0x82, fi);
            }
            w.end(s);
            w.end(m);
        }
        Filter::Present(a) => w.write_octets(PRESENT, a),
        Filter::Extensible {
            rule,
            attr,
            value,
            dn_attributes,
        } => {
            let m = w.start(EXTENSIBLE);
            if let Some(r) = rule {
                w.write_octets(context(1), r);
            }
            if let Some(a) = attr {
                w.write_octets(context(2), a);
            }
            w.write_octets(context(3), value);
            // DEFAULT FALSE: omitted when false, as DER and OpenLDAP do.
            if *dn_attributes {
                w.write_bool(context(4), true);
            }
            w.end(m);
        }
    }
}

fn ava(w: &mut Writer<'_>, tag: u8, a: &[u8], v: &[u8]) {
    let m = w.start(tag);
    w.write_octets(OCTET_STRING, a);
    w.write_octets(OCTET_STRING, v);
    w.end(m);
}

impl<'a> Filter<'a> {
    /// Decodes a filter from one complete BER element (e.g. the value of an assertion control).
    pub fn decode(element: &'a [u8], limits: &DecodeLimits) -> Result<Filter<'a>, K> {
        let mut r = Reader::new(element);
        let (t, b) = r.read_element()?;
        let f = decode_filter(t, b, 1, 1, limits)?;
        r.finish()?;
        Ok(f)
    }

    /// Appends the BER encoding of this filter.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_filter(&mut Writer::new(out), self);
    }

    /// Copies every borrowed byte string, detaching the filter from its input.
    pub fn into_owned(self) -> Filter<'static> {
        fn o(c: Cow<'_, [u8]>) -> Cow<'static, [u8]> {
            Cow::Owned(c.into_owned())
        }
        match self {
            Filter::And(v) => Filter::And(v.into_iter().map(Filter::into_owned).collect()),
            Filter::Or(v) => Filter::Or(v.into_iter().map(Filter::into_owned).collect()),
            Filter::Not(f) => Filter::Not(Box::new(f.into_owned())),
            Filter::Equality(a, v) => Filter::Equality(o(a), o(v)),
            Filter::GreaterOrEqual(a, v) => Filter::GreaterOrEqual(o(a), o(v)),
            Filter::LessOrEqual(a, v) => Filter::LessOrEqual(o(a), o(v)),
            Filter::Approx(a, v) => Filter::Approx(o(a), o(v)),
            Filter::Present(a) => Filter::Present(o(a)),
            Filter::Substrings {
                attr,
                initial,
                any,
                final_,
            } => Filter::Substrings {
                attr: o(attr),
                initial: initial.map(o),
                any: any.into_iter().map(o).collect(),
                final_: final_.map(o),
            },
            Filter::Extensible {
                rule,
                attr,
                value,
                dn_attributes,
            } => Filter::Extensible {
                rule: rule.map(o),
                attr: attr.map(o),
                value: o(value),
                dn_attributes,
            },
        }
    }
}
