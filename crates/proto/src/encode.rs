//! One-pass encoding (style rule 4) of whole messages and of the hot-path responses.
//!
//! Defaults are omitted (criticality FALSE, dnAttributes FALSE, empty referral), which matches
//! what OpenLDAP sends, so captured PDUs re-encode byte for byte.

use crate::filter::encode_filter;
use crate::tags::{self, constructed, context, context_constructed, primitive};
use crate::*;
use ber::tag::{BOOLEAN, INTEGER, OCTET_STRING, SEQUENCE, SET};
use ber::Writer;

impl LdapMessage<'_> {
    /// Appends this message as one PDU.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let m = w.start(SEQUENCE);
        w.write_integer(INTEGER, i64::from(self.id));
        encode_op(&mut w, &self.op);
        crate::controls::encode_controls(&mut w, &self.controls);
        w.end(m);
    }

    /// The message as a fresh PDU.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

impl ProtocolOp<'_> {
    /// The application tag number of this operation (see [`crate::tags`]).
    pub fn tag(&self) -> u8 {
        use ProtocolOp::*;
        match self {
            BindRequest(_) => tags::BIND_REQUEST,
            BindResponse(..) => tags::BIND_RESPONSE,
            UnbindRequest => tags::UNBIND_REQUEST,
            SearchRequest(_) => tags::SEARCH_REQUEST,
            SearchResultEntry { .. } => tags::SEARCH_RESULT_ENTRY,
            SearchResultDone(_) => tags::SEARCH_RESULT_DONE,
            SearchResultReference(_) => tags::SEARCH_RESULT_REFERENCE,
            ModifyRequest(_) => tags::MODIFY_REQUEST,
            ModifyResponse(_) => tags::MODIFY_RESPONSE,
            AddRequest(_) => tags::ADD_REQUEST,
            AddResponse(_) => tags::ADD_RESPONSE,
            DelRequest(_) => tags::DEL_REQUEST,
            DelResponse(_) => tags::DEL_RESPONSE,
            ModifyDnRequest(_) => tags::MODIFY_DN_REQUEST,
            ModifyDnResponse(_) => tags::MODIFY_DN_RESPONSE,
            CompareRequest(_) => tags::COMPARE_REQUEST,
            CompareResponse(_) => tags::COMPARE_RESPONSE,
            AbandonRequest(_) => tags::ABANDON_REQUEST,
            ExtendedRequest(_) => tags::EXTENDED_REQUEST,
            ExtendedResponse(_) => tags::EXTENDED_RESPONSE,
            IntermediateResponse { .. } => tags::INTERMEDIATE_RESPONSE,
        }
    }

    /// Whether this is a request a client sends.
    pub fn is_request(&self) -> bool {
        tags::is_request(self.tag())
    }
}

fn encode_op(w: &mut Writer<'_>, op: &ProtocolOp<'_>) {
    use ProtocolOp as P;
    let tag = op.tag();
    match op {
        P::UnbindRequest => return w.write_null(primitive(tag)),
        P::DelRequest(dn) => return w.write_octets(primitive(tag), dn),
        P::AbandonRequest(id) => return w.write_integer(primitive(tag), i64::from(*id)),
        _ => {}
    }
    let m = w.start(constructed(tag));
    match op {
        P::BindRequest(b) => {
            w.write_integer(INTEGER, b.version);
            w.write_octets(OCTET_STRING, &b.name);
            match &b.auth {
                BindAuth::Simple(pw) => w.write_octets(context(0), pw),
                BindAuth::Sasl {
                    mechanism,
                    credentials,
                } => {
                    let s = w.start(context_constructed(3));
                    w.write_octets(OCTET_STRING, mechanism);
                    if let Some(c) = credentials {
                        w.write_octets(OCTET_STRING, c);
                    }
                    w.end(s);
                }
            }
        }
        P::BindResponse(r, creds) => {
            result_components(w, r);
            if let Some(c) = creds {
                w.write_octets(context(7), c);
            }
        }
        P::SearchRequest(s) => {
            w.write_octets(OCTET_STRING, &s.base);
            w.write_enumerated(s.scope as i64);
            w.write_enumerated(s.deref as i64);
            w.write_integer(INTEGER, s.size_limit);
            w.write_integer(INTEGER, s.time_limit);
            w.write_bool(BOOLEAN, s.types_only);
            encode_filter(w, &s.filter);
            let a = w.start(SEQUENCE);
            for attr in &s.attributes {
                w.write_octets(OCTET_STRING, attr);
            }
            w.end(a);
        }
        P::SearchResultEntry { dn, attributes } => {
            w.write_octets(OCTET_STRING, dn);
            attribute_list(w, attributes);
        }
        P::SearchResultReference(uris) => {
            for u in uris {
                w.write_octets(OCTET_STRING, u);
            }
        }
        P::ModifyRequest(m) => {
            w.write_octets(OCTET_STRING, &m.dn);
            let list = w.start(SEQUENCE);
            for c in &m.changes {
                let s = w.start(SEQUENCE);
                w.write_enumerated(c.op as i64);
                attribute(w, &c.attr.name, c.attr.values.iter().map(|v| &v[..]));
                w.end(s);
            }
            w.end(list);
        }
        P::AddRequest(a) => {
            w.write_octets(OCTET_STRING, &a.dn);
            attribute_list(w, &a.attributes);
        }
        P::ModifyDnRequest(r) => {
            w.write_octets(OCTET_STRING, &r.dn);
            w.write_octets(OCTET_STRING, &r.new_rdn);
            w.write_bool(BOOLEAN, r.delete_old_rdn);
            if let Some(s) = &r.new_superior {
                w.write_octets(context(0), s);
            }
        }
        P::CompareRequest(c) => {
            w.write_octets(OCTET_STRING, &c.dn);
            let s = w.start(SEQUENCE);
            w.write_octets(OCTET_STRING, &c.attr);
            w.write_octets(OCTET_STRING, &c.value);
            w.end(s);
        }
        P::ExtendedRequest(e) => {
            w.write_octets(context(0), &e.oid);
            if let Some(v) = &e.value {
                w.write_octets(context(1), v);
            }
        }
        P::ExtendedResponse(e) => {
            extended_response_components(w, &e.result, e.oid.as_deref(), e.value.as_deref())
        }
        P::IntermediateResponse { oid, value } => {
            if let Some(o) = oid {
                w.write_octets(context(0), o);
            }
            if let Some(v) = value {
                w.write_octets(context(1), v);
            }
        }
        P::SearchResultDone(r)
        | P::ModifyResponse(r)
        | P::AddResponse(r)
        | P::DelResponse(r)
        | P::ModifyDnResponse(r)
        | P::CompareResponse(r) => result_components(w, r),
        P::UnbindRequest | P::DelRequest(_) | P::AbandonRequest(_) => {}
    }
    w.end(m);
}

fn result_components(w: &mut Writer<'_>, r: &LdapResult<'_>) {
    w.write_enumerated(i64::from(r.code as u32));
    w.write_octets(OCTET_STRING, &r.matched_dn);
    w.write_octets(OCTET_STRING, &r.message);
    if !r.referral.is_empty() {
        let s = w.start(context_constructed(3));
        for u in &r.referral {
            w.write_octets(OCTET_STRING, u);
        }
        w.end(s);
    }
}

fn extended_response_components(
    w: &mut Writer<'_>,
    r: &LdapResult<'_>,
    oid: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    result_components(w, r);
    if let Some(o) = oid {
        w.write_octets(context(10), o);
    }
    if let Some(v) = value {
        w.write_octets(context(11), v);
    }
}

fn attribute_list(w: &mut Writer<'_>, attrs: &[PartialAttribute<'_>]) {
    let list = w.start(SEQUENCE);
    for a in attrs {
        attribute(w, &a.name, a.values.iter().map(|v| &v[..]));
    }
    w.end(list);
}

fn attribute<'v>(w: &mut Writer<'_>, name: &[u8], values: impl IntoIterator<Item = &'v [u8]>) {
    let s = w.start(SEQUENCE);
    w.write_octets(OCTET_STRING, name);
    let set = w.start(SET);
    for v in values {
        w.write_octets(OCTET_STRING, v);
    }
    w.end(set);
    w.end(s);
}

/// Streams a SearchResultEntry PDU straight from the store's data, without building a
/// [`ProtocolOp`] (the search hot path: no per-attribute allocation).
pub fn encode_search_entry<'v, A, V>(out: &mut Vec<u8>, msg_id: i32, dn: &[u8], attrs: A)
where
    A: IntoIterator<Item = (&'v [u8], V)>,
    V: IntoIterator<Item = &'v [u8]>,
{
    encode_search_entry_with_controls(out, msg_id, dn, attrs, &[]);
}

/// Appends a bare SearchResultEntry (`[APPLICATION 4]`, no LDAPMessage around it): the value
/// of the pre-read and post-read response controls (RFC 4527).
pub fn encode_search_entry_op<'v, A, V>(out: &mut Vec<u8>, dn: &[u8], attrs: A)
where
    A: IntoIterator<Item = (&'v [u8], V)>,
    V: IntoIterator<Item = &'v [u8]>,
{
    let mut e = EntryWriter::start(out, None, dn);
    for (name, values) in attrs {
        e.attribute(name, values);
    }
    e.finish(&[]);
}

/// [`encode_search_entry`] with response controls (e.g. Entry Change Notification) after the
/// entry.
pub fn encode_search_entry_with_controls<'v, A, V>(
    out: &mut Vec<u8>,
    msg_id: i32,
    dn: &[u8],
    attrs: A,
    controls: &[Control<'_>],
) where
    A: IntoIterator<Item = (&'v [u8], V)>,
    V: IntoIterator<Item = &'v [u8]>,
{
    let mut e = EntryWriter::start(out, Some(msg_id), dn);
    for (name, values) in attrs {
        e.attribute(name, values);
    }
    e.finish(controls);
}

/// A SearchResultEntry written attribute by attribute straight into the output buffer, for
/// callers that decide per attribute what to send (the search hot path). The entry, its
/// message and its attribute list reserve long-form lengths (`Writer::start_large`): an
/// entry is nearly always 128 bytes to 64 KiB, so ending them moves nothing.
pub struct EntryWriter<'a> {
    w: Writer<'a>,
    msg: Option<ber::Mark>,
    op: ber::Mark,
    list: ber::Mark,
}

impl<'a> EntryWriter<'a> {
    /// Starts the entry `dn` in a message with id `msg_id`, or with `None` a bare
    /// SearchResultEntry (the value of a pre/post-read control, RFC 4527).
    pub fn start(out: &'a mut Vec<u8>, msg_id: Option<i32>, dn: &[u8]) -> EntryWriter<'a> {
        let mut w = Writer::new(out);
        let msg = msg_id.map(|id| {
            let m = w.start_large(SEQUENCE);
            w.write_integer(INTEGER, i64::from(id));
            m
        });
        let op = w.start_large(constructed(tags::SEARCH_RESULT_ENTRY));
        w.write_octets(OCTET_STRING, dn);
        let list = w.start_large(SEQUENCE);
        EntryWriter { w, msg, op, list }
    }

    /// Appends an attribute with `values` (none for typesOnly).
    pub fn attribute<'v>(&mut self, name: &[u8], values: impl IntoIterator<Item = &'v [u8]>) {
        attribute(&mut self.w, name, values);
    }

    /// Appends an attribute with `values` if there is at least one (an attribute that matched
    /// values leave without any is not sent, RFC 3876); whether it was written.
    pub fn attribute_if_any<'v>(
        &mut self,
        name: &[u8],
        values: impl IntoIterator<Item = &'v [u8]>,
    ) -> bool {
        let at = self.w.buf().len();
        let s = self.w.start(SEQUENCE);
        self.w.write_octets(OCTET_STRING, name);
        let set = self.w.start(SET);
        let mut any = false;
        for v in values {
            self.w.write_octets(OCTET_STRING, v);
            any = true;
        }
        self.w.end(set);
        self.w.end(s);
        if !any {
            self.w.buf().truncate(at);
        }
        any
    }

    /// Ends the entry, with response `controls` in its message (a bare entry has none).
    pub fn finish(mut self, controls: &[Control<'_>]) {
        self.w.end(self.list);
        self.w.end(self.op);
        if let Some(m) = self.msg {
            crate::controls::encode_controls(&mut self.w, controls);
            self.w.end(m);
        }
    }
}

/// Appends a response PDU made of an LDAPResult only. `op_tag` is the application tag
/// *number* of the response, e.g. [`tags::SEARCH_RESULT_DONE`] (5).
pub fn encode_result(out: &mut Vec<u8>, msg_id: i32, op_tag: u8, result: &LdapResult<'_>) {
    encode_result_with(out, msg_id, op_tag, result, &[]);
}

/// [`encode_result`] with response controls (paged results cookie, pre/post-read entries…).
pub fn encode_result_with(
    out: &mut Vec<u8>,
    msg_id: i32,
    op_tag: u8,
    result: &LdapResult<'_>,
    controls: &[Control<'_>],
) {
    let mut w = Writer::new(out);
    let m = w.start(SEQUENCE);
    w.write_integer(INTEGER, i64::from(msg_id));
    let op = w.start(constructed(op_tag));
    result_components(&mut w, result);
    w.end(op);
    crate::controls::encode_controls(&mut w, controls);
    w.end(m);
}

/// Appends an ExtendedResponse PDU (also used for the Notice of Disconnection, id 0).
pub fn encode_extended_response(
    out: &mut Vec<u8>,
    msg_id: i32,
    result: &LdapResult<'_>,
    oid: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    encode_extended_response_with(out, msg_id, result, oid, value, &[]);
}

/// [`encode_extended_response`] with response controls.
pub fn encode_extended_response_with(
    out: &mut Vec<u8>,
    msg_id: i32,
    result: &LdapResult<'_>,
    oid: Option<&[u8]>,
    value: Option<&[u8]>,
    controls: &[Control<'_>],
) {
    let mut w = Writer::new(out);
    let m = w.start(SEQUENCE);
    w.write_integer(INTEGER, i64::from(msg_id));
    let op = w.start(constructed(tags::EXTENDED_RESPONSE));
    extended_response_components(&mut w, result, oid, value);
    w.end(op);
    crate::controls::encode_controls(&mut w, controls);
    w.end(m);
}

/// Appends an IntermediateResponse PDU (RFC 4511 §4.13), e.g. a Sync Info Message (RFC 4533).
pub fn encode_intermediate_response(
    out: &mut Vec<u8>,
    msg_id: i32,
    oid: Option<&[u8]>,
    value: Option<&[u8]>,
    controls: &[Control<'_>],
) {
    let mut w = Writer::new(out);
    let m = w.start(SEQUENCE);
    w.write_integer(INTEGER, i64::from(msg_id));
    let op = w.start(constructed(tags::INTERMEDIATE_RESPONSE));
    if let Some(o) = oid {
        w.write_octets(context(0), o);
    }
    if let Some(v) = value {
        w.write_octets(context(1), v);
    }
    w.end(op);
    crate::controls::encode_controls(&mut w, controls);
    w.end(m);
}

impl<'a> LdapResult<'a> {
    /// A result with a code and a diagnostic message, no matched DN, no referral.
    pub fn new(code: ResultCode, message: impl Into<Cow<'a, [u8]>>) -> Self {
        LdapResult {
            code,
            matched_dn: Cow::Borrowed(&[]),
            message: message.into(),
            referral: Vec::new(),
        }
    }

    /// `success` with empty matched DN and message.
    pub fn success() -> Self {
        Self::new(ResultCode::Success, Cow::Borrowed(&[][..]))
    }
}
