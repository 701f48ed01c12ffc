//! `LdapMessage::decode`: one PDU into borrowed types.
//!
//! Every field borrows from the PDU. Each SEQUENCE is read through a sub-reader that must be
//! exhausted (`finish`), so trailing bytes anywhere are an error. The fixed shape of the
//! operations bounds their nesting; only filters recurse, and `filter.rs` enforces both
//! [`DecodeLimits`] there.

use crate::error::{DecodeError, DecodeErrorKind as K};
use crate::filter::decode_filter;
use crate::tags::{self, constructed, context, context_constructed, primitive};
use crate::*;
use ber::tag::{BOOLEAN, INTEGER, OCTET_STRING, SEQUENCE, SET};
use ber::Reader;

type R<T> = Result<T, K>;

/// Nesting of a filter's first element: LDAPMessage, SearchRequest, filter.
pub(crate) const FILTER_BER_DEPTH: usize = 3;

impl<'a> LdapMessage<'a> {
    /// Decodes exactly one PDU with the default [`DecodeLimits`].
    pub fn decode(pdu: &'a [u8]) -> Result<Self, DecodeError> {
        Self::decode_with(pdu, &DecodeLimits::default())
    }

    /// Decodes exactly one PDU (as delimited by [`crate::frame`]); trailing bytes are an error.
    pub fn decode_with(pdu: &'a [u8], limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let mut outer = Reader::new(pdu);
        let mut msg = outer.sub(SEQUENCE).map_err(DecodeError::Envelope)?;
        let id = msg.read_integer(INTEGER).map_err(DecodeError::Envelope)?;
        let id = i32::try_from(id)
            .ok()
            .filter(|v| *v >= 0)
            .ok_or(DecodeError::BadMessageId(id))?;
        let op_num = msg
            .peek_tag()
            .filter(|t| t & 0xc0 == 0x40)
            .map(|t| t & 0x1f);
        let err = |kind: K| DecodeError::Message {
            id,
            op: op_num,
            kind,
        };
        let op = decode_op(&mut msg, limits).map_err(err)?;
        let controls = match msg
            .read_optional(context_constructed(0))
            .map_err(|e| err(e.into()))?
        {
            Some(c) => decode_controls(c).map_err(err)?,
            None => Vec::new(),
        };
        msg.finish().map_err(|e| err(e.into()))?;
        outer.finish().map_err(|e| err(e.into()))?;
        Ok(LdapMessage { id, op, controls })
    }
}

fn cow(b: &[u8]) -> Cow<'_, [u8]> {
    Cow::Borrowed(b)
}

fn octets<'a>(r: &mut Reader<'a>) -> R<Cow<'a, [u8]>> {
    Ok(cow(r.read_octets(OCTET_STRING)?))
}

fn opt<'a>(r: &mut Reader<'a>, tag: u8) -> R<Option<Cow<'a, [u8]>>> {
    Ok(r.read_optional(tag)?.map(cow))
}

/// INTEGER (0 .. maxInt) of RFC 4511.
fn non_negative(r: &mut Reader<'_>, field: &'static str) -> R<i64> {
    let v = r.read_integer(INTEGER)?;
    if (0..=i64::from(i32::MAX)).contains(&v) {
        Ok(v)
    } else {
        Err(K::BadValue { field, value: v })
    }
}

fn decode_op<'a>(msg: &mut Reader<'a>, limits: &DecodeLimits) -> R<ProtocolOp<'a>> {
    let (tag, body) = msg.read_element()?;
    let mut r = Reader::new(body);
    let op = match tag {
        t if t == constructed(tags::BIND_REQUEST) => {
            let version = r.read_integer(INTEGER)?;
            if !(1..=127).contains(&version) {
                return Err(K::BadValue {
                    field: "bind version",
                    value: version,
                });
            }
            let name = octets(&mut r)?;
            let auth = match r.read_element()? {
                (t, pw) if t == context(0) => BindAuth::Simple(cow(pw)),
                (t, sasl) if t == context_constructed(3) => {
                    let mut s = Reader::new(sasl);
                    let mechanism = octets(&mut s)?;
                    let credentials = opt(&mut s, OCTET_STRING)?;
                    s.finish()?;
                    BindAuth::Sasl {
                        mechanism,
                        credentials,
                    }
                }
                (t, _) => return Err(K::UnknownAuth(t)),
            };
            ProtocolOp::BindRequest(BindRequest {
                version,
                name,
                auth,
            })
        }
        t if t == constructed(tags::BIND_RESPONSE) => {
            let res = decode_result(&mut r)?;
            ProtocolOp::BindResponse(res, opt(&mut r, context(7))?)
        }
        t if t == primitive(tags::UNBIND_REQUEST) => {
            if !body.is_empty() {
                return Err(ber::Error::BadNull(body.len()).into());
            }
            ProtocolOp::UnbindRequest
        }
        t if t == constructed(tags::SEARCH_REQUEST) => {
            let base = octets(&mut r)?;
            let scope = match r.read_enumerated()? {
                0 => Scope::Base,
                1 => Scope::One,
                2 => Scope::Subtree,
                v => {
                    return Err(K::BadValue {
                        field: "search scope",
                        value: v,
                    })
                }
            };
            let deref = match r.read_enumerated()? {
                0 => DerefAliases::Never,
                1 => DerefAliases::InSearching,
                2 => DerefAliases::FindingBase,
                3 => DerefAliases::Always,
                v => {
                    return Err(K::BadValue {
                        field: "derefAliases",
                        value: v,
                    })
                }
            };
            let size_limit = non_negative(&mut r, "sizeLimit")?;
            let time_limit = non_negative(&mut r, "timeLimit")?;
            let types_only = r.read_bool(BOOLEAN)?;
            let (ftag, fbody) = r.read_element()?;
            let filter = decode_filter(ftag, fbody, 1, FILTER_BER_DEPTH, limits)?;
            let mut attrs = r.sub(SEQUENCE)?;
            let mut attributes = Vec::new();
            while !attrs.is_empty() {
                attributes.push(octets(&mut attrs)?);
            }
            ProtocolOp::SearchRequest(SearchRequest {
                base,
                scope,
                deref,
                size_limit,
                time_limit,
                types_only,
                filter,
                attributes,
            })
        }
        t if t == constructed(tags::SEARCH_RESULT_ENTRY) => {
            let dn = octets(&mut r)?;
            let attributes = decode_attributes(r.sub(SEQUENCE)?)?;
            ProtocolOp::SearchResultEntry { dn, attributes }
        }
        t if t == constructed(tags::SEARCH_RESULT_DONE) => {
            ProtocolOp::SearchResultDone(decode_result(&mut r)?)
        }
        t if t == constructed(tags::SEARCH_RESULT_REFERENCE) => {
            let mut uris = Vec::new();
            while !r.is_empty() {
                uris.push(octets(&mut r)?);
            }
            if uris.is_empty() {
                return Err(K::Invalid(
                    "SearchResultReference must hold at least one URI",
                ));
            }
            ProtocolOp::SearchResultReference(uris)
        }
        t if t == constructed(tags::MODIFY_REQUEST) => {
            let dn = octets(&mut r)?;
            let mut changes_r = r.sub(SEQUENCE)?;
            let mut changes = Vec::new();
            while !changes_r.is_empty() {
                let mut c = changes_r.sub(SEQUENCE)?;
                let op = match c.read_enumerated()? {
                    0 => ModOp::Add,
                    1 => ModOp::Delete,
                    2 => ModOp::Replace,
                    3 => ModOp::Increment,
                    v => {
                        return Err(K::BadValue {
                            field: "modify operation",
                            value: v,
                        })
                    }
                };
                let attr = decode_attribute(c.sub(SEQUENCE)?)?;
                c.finish()?;
                changes.push(Change { op, attr });
            }
            ProtocolOp::ModifyRequest(ModifyRequest { dn, changes })
        }
        t if t == constructed(tags::MODIFY_RESPONSE) => {
            ProtocolOp::ModifyResponse(decode_result(&mut r)?)
        }
        t if t == constructed(tags::ADD_REQUEST) => {
            let dn = octets(&mut r)?;
            let attributes = decode_attributes(r.sub(SEQUENCE)?)?;
            ProtocolOp::AddRequest(AddRequest { dn, attributes })
        }
        t if t == constructed(tags::ADD_RESPONSE) => {
            ProtocolOp::AddResponse(decode_result(&mut r)?)
        }
        t if t == primitive(tags::DEL_REQUEST) => {
            r = Reader::new(&[]);
            ProtocolOp::DelRequest(cow(body))
        }
        t if t == constructed(tags::DEL_RESPONSE) => {
            ProtocolOp::DelResponse(decode_result(&mut r)?)
        }
        t if t == constructed(tags::MODIFY_DN_REQUEST) => {
            let dn = octets(&mut r)?;
            let new_rdn = octets(&mut r)?;
            let delete_old_rdn = r.read_bool(BOOLEAN)?;
            let new_superior = opt(&mut r, context(0))?;
            ProtocolOp::ModifyDnRequest(ModifyDnRequest {
                dn,
                new_rdn,
                delete_old_rdn,
                new_superior,
            })
        }
        t if t == constructed(tags::MODIFY_DN_RESPONSE) => {
            ProtocolOp::ModifyDnResponse(decode_result(&mut r)?)
        }
        t if t == constructed(tags::COMPARE_REQUEST) => {
            let dn = octets(&mut r)?;
            let mut ava = r.sub(SEQUENCE)?;
            let attr = octets(&mut ava)?;
            let value = octets(&mut ava)?;
            ava.finish()?;
            ProtocolOp::CompareRequest(CompareRequest { dn, attr, value })
        }
        t if t == constructed(tags::COMPARE_RESPONSE) => {
            ProtocolOp::CompareResponse(decode_result(&mut r)?)
        }
        t if t == primitive(tags::ABANDON_REQUEST) => {
            let v = ber::decode_integer(body)?;
            let target = i32::try_from(v)
                .ok()
                .filter(|v| *v >= 0)
                .ok_or(K::BadValue {
                    field: "abandoned message id",
                    value: v,
                })?;
            r = Reader::new(&[]);
            ProtocolOp::AbandonRequest(target)
        }
        t if t == constructed(tags::EXTENDED_REQUEST) => {
            let oid = cow(r.read_tagged(context(0))?);
            let value = opt(&mut r, context(1))?;
            ProtocolOp::ExtendedRequest(ExtendedRequest { oid, value })
        }
        t if t == constructed(tags::EXTENDED_RESPONSE) => {
            let result = decode_result(&mut r)?;
            let oid = opt(&mut r, context(10))?;
            let value = opt(&mut r, context(11))?;
            ProtocolOp::ExtendedResponse(ExtendedResponse { result, oid, value })
        }
        t if t == constructed(tags::INTERMEDIATE_RESPONSE) => {
            let oid = opt(&mut r, context(0))?;
            let value = opt(&mut r, context(1))?;
            ProtocolOp::IntermediateResponse { oid, value }
        }
        t => return Err(K::UnknownOp(t)),
    };
    r.finish()?;
    Ok(op)
}

/// The LDAPResult components, read from the operation's own reader (COMPONENTS OF).
fn decode_result<'a>(r: &mut Reader<'a>) -> R<LdapResult<'a>> {
    let v = r.read_enumerated()?;
    let code = u32::try_from(v)
        .ok()
        .and_then(ResultCode::from_u32)
        .ok_or(K::BadValue {
            field: "resultCode",
            value: v,
        })?;
    let matched_dn = octets(r)?;
    let message = octets(r)?;
    let mut referral = Vec::new();
    if let Some(refs) = r.read_optional(context_constructed(3))? {
        let mut refs = Reader::new(refs);
        while !refs.is_empty() {
            referral.push(octets(&mut refs)?);
        }
        if referral.is_empty() {
            return Err(K::Invalid("referral must hold at least one URI"));
        }
    }
    Ok(LdapResult {
        code,
        matched_dn,
        message,
        referral,
    })
}

fn decode_attributes(mut r: Reader<'_>) -> R<Vec<PartialAttribute<'_>>> {
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(decode_attribute(r.sub(SEQUENCE)?)?);
    }
    Ok(out)
}

fn decode_attribute(mut r: Reader<'_>) -> R<PartialAttribute<'_>> {
    let name = octets(&mut r)?;
    let mut vals = r.sub(SET)?;
    let mut values = Vec::new();
    while !vals.is_empty() {
        values.push(octets(&mut vals)?);
    }
    r.finish()?;
    Ok(PartialAttribute { name, values })
}

fn decode_controls(body: &[u8]) -> R<Vec<Control<'_>>> {
    let mut r = Reader::new(body);
    let mut out = Vec::new();
    while !r.is_empty() {
        let mut c = r.sub(SEQUENCE)?;
        let oid = octets(&mut c)?;
        let critical = match c.peek_tag() {
            Some(BOOLEAN) => c.read_bool(BOOLEAN)?,
            _ => false,
        };
        let value = opt(&mut c, OCTET_STRING)?;
        c.finish()?;
        out.push(Control {
            oid,
            critical,
            value,
        });
    }
    Ok(out)
}
