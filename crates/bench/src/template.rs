//! Request templates: a PDU encoded once by `proto`, re-emitted per request with its message id
//! and placeholders filled in.
//!
//! Placeholders are literal text inside any primitive value (DN, filter value, attribute value):
//! `{rand}`, `{value}`, `{conn}`, `{seq}`, `{dn}`, `{first}`, `{last}`. Filling them changes lengths, so emitting walks
//! the template's BER tree and writes it again through [`ber::Writer`] (which patches lengths);
//! a search request is a dozen elements, and the output buffer is reused, so this costs no heap
//! allocation once the buffer has grown.

use ber::{Reader, Writer};

/// Values for the placeholders of one request.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Vars<'a> {
    pub rand: u64,
    pub value: u64,
    pub conn: u64,
    pub seq: u64,
    pub dn: &'a [u8],
    pub first: &'a [u8],
    pub last: &'a [u8],
}

/// One encoded request (message id 0) to be re-emitted.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pdu: Vec<u8>,
    /// Fast path: no placeholder anywhere, only the message id changes.
    literal: bool,
}

impl Template {
    /// Encodes `op` as the template; fails if the result cannot be walked again (never for
    /// what `proto` encodes, checked here once so that `emit` cannot fail later).
    pub(crate) fn new(op: proto::ProtocolOp<'_>) -> Result<Self, ber::Error> {
        let msg = proto::LdapMessage {
            id: 0,
            op,
            controls: Vec::new(),
        };
        let mut pdu = Vec::new();
        msg.encode(&mut pdu);
        let literal = !pdu.contains(&b'{');
        let t = Template { pdu, literal };
        let mut probe = Vec::new();
        t.emit(1, &Vars::default(), &mut probe)?;
        Ok(t)
    }

    /// Appends the request with message id `id` and the placeholders filled from `vars`.
    pub(crate) fn emit(
        &self,
        id: i32,
        vars: &Vars<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), ber::Error> {
        let mut outer = Reader::new(&self.pdu);
        let mut msg = outer.sub(ber::tag::SEQUENCE)?;
        msg.read_integer(ber::tag::INTEGER)?;
        let mut w = Writer::new(out);
        let m = w.start(ber::tag::SEQUENCE);
        w.write_integer(ber::tag::INTEGER, i64::from(id));
        if self.literal {
            w.write_raw(msg.remaining());
        } else {
            rewrite(msg, &mut w, vars)?;
        }
        w.end(m);
        Ok(())
    }
}

fn rewrite(mut r: Reader<'_>, w: &mut Writer<'_>, vars: &Vars<'_>) -> Result<(), ber::Error> {
    while !r.is_empty() {
        let (tag, contents) = r.read_element()?;
        let m = w.start(tag);
        if tag & ber::tag::CONSTRUCTED != 0 {
            rewrite(Reader::new(contents), w, vars)?;
        } else {
            substitute(contents, w.buf(), vars);
        }
        w.end(m);
    }
    Ok(())
}

/// Copies `src` to `out`, replacing known placeholders; unknown `{...}` text is kept.
fn substitute(mut src: &[u8], out: &mut Vec<u8>, vars: &Vars<'_>) {
    while let Some(pos) = src.iter().position(|&b| b == b'{') {
        out.extend_from_slice(&src[..pos]);
        let rest = &src[pos..];
        let (num, len) = if rest.starts_with(b"{rand}") {
            (Some(vars.rand), 6)
        } else if rest.starts_with(b"{value}") {
            (Some(vars.value), 7)
        } else if rest.starts_with(b"{conn}") {
            (Some(vars.conn), 6)
        } else if rest.starts_with(b"{seq}") {
            (Some(vars.seq), 5)
        } else if rest.starts_with(b"{dn}") {
            out.extend_from_slice(vars.dn);
            (None, 4)
        } else if rest.starts_with(b"{first}") {
            out.extend_from_slice(vars.first);
            (None, 7)
        } else if rest.starts_with(b"{last}") {
            out.extend_from_slice(vars.last);
            (None, 6)
        } else {
            out.push(b'{');
            (None, 1)
        };
        if let Some(n) = num {
            crate::push_u64(out, n);
        }
        src = &rest[len..];
    }
    out.extend_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::{LdapMessage, ProtocolOp, Scope};
    use std::borrow::Cow;

    fn search(filter: &str) -> ProtocolOp<'static> {
        ProtocolOp::SearchRequest(proto::SearchRequest {
            base: Cow::Borrowed(b"dc=example,dc=com"),
            scope: Scope::Subtree,
            deref: proto::DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: proto::Filter::parse(filter)
                .unwrap_or(proto::Filter::Present(Cow::Borrowed(b"x"))),
            attributes: vec![],
        })
    }

    #[test]
    fn fills_placeholders_like_a_fresh_encoding() {
        let t = Template::new(search("(&(uid=user.{rand})(cn={x}))")).ok();
        let t = t.as_ref();
        let mut out = Vec::new();
        let vars = Vars {
            rand: 123_456,
            ..Vars::default()
        };
        assert!(t.map(|t| t.emit(77, &vars, &mut out)).is_some());
        let mut want = Vec::new();
        LdapMessage {
            id: 77,
            op: search("(&(uid=user.123456)(cn={x}))"),
            controls: vec![],
        }
        .encode(&mut want);
        assert_eq!(out, want);
    }

    #[test]
    fn long_values_get_long_lengths() {
        let dn = vec![b'a'; 300];
        let t = Template::new(ProtocolOp::DelRequest(Cow::Borrowed(b"{dn}"))).ok();
        let mut out = Vec::new();
        let vars = Vars {
            dn: &dn,
            ..Vars::default()
        };
        let r = t.map(|t| t.emit(5, &vars, &mut out));
        assert!(matches!(r, Some(Ok(()))));
        let decoded = LdapMessage::decode(&out).ok().map(|m| (m.id, m.op));
        assert_eq!(decoded, Some((5, ProtocolOp::DelRequest(Cow::Owned(dn)))));
    }
}
