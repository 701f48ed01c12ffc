//! Dereference (draft-masarati-ldap-deref-00), OID 1.3.6.1.4.1.4203.666.5.16: for each
//! DN-valued attribute named in the request, every returned entry carries, per value, the
//! requested attributes of the entry that value names.
//!
//! ```text
//! DerefSpecs ::= SEQUENCE OF derefSpec DerefSpec
//! DerefSpec ::= SEQUENCE {
//!         derefAttr       attributeDescription,   -- DN-valued
//!         attributes      AttributeList }
//! AttributeList ::= SEQUENCE OF attr AttributeDescription
//!
//! DerefResponse ::= SEQUENCE OF DerefRes
//! DerefRes ::= SEQUENCE {
//!         derefAttr       AttributeDescription,
//!         derefVal        LDAPDN,
//!         attrVals        [0] PartialAttributeList OPTIONAL }
//! PartialAttributeList ::= SEQUENCE OF partialAttribute PartialAttribute
//! ```
//!
//! As slapd encodes it, `attrVals` is left out when the referenced entry gave no attribute
//! (absent, hidden, or none of the requested ones present).

use ber::tag::{OCTET_STRING, SEQUENCE, SET};
use ber::{Reader, Writer};

use crate::tags::context_constructed;
use crate::DecodeErrorKind;

pub const OID: &str = "1.3.6.1.4.1.4203.666.5.16";

/// One DerefSpec: the DN-valued attribute and the attributes wanted from referenced entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerefSpec<'a> {
    pub attr: &'a [u8],
    pub attributes: Vec<&'a [u8]>,
}

pub fn decode(value: &[u8]) -> Result<Vec<DerefSpec<'_>>, DecodeErrorKind> {
    let mut r = Reader::new(value);
    let mut s = r.sub(SEQUENCE)?;
    r.finish()?;
    let mut out = Vec::new();
    while !s.is_empty() {
        let mut spec = s.sub(SEQUENCE)?;
        let attr = spec.read_octets(OCTET_STRING)?;
        let mut list = spec.sub(SEQUENCE)?;
        spec.finish()?;
        let mut attributes = Vec::new();
        while !list.is_empty() {
            attributes.push(list.read_octets(OCTET_STRING)?);
        }
        out.push(DerefSpec { attr, attributes });
    }
    Ok(out)
}

/// Encodes a request's DerefSpecs (a client's side; used by tests).
pub fn encode_specs(specs: &[DerefSpec<'_>], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    let s = w.start(SEQUENCE);
    for spec in specs {
        let one = w.start(SEQUENCE);
        w.write_octets(OCTET_STRING, spec.attr);
        let list = w.start(SEQUENCE);
        for a in &spec.attributes {
            w.write_octets(OCTET_STRING, a);
        }
        w.end(list);
        w.end(one);
    }
    w.end(s);
}

/// One DerefRes: the attribute, the value (a DN) and the referenced entry's attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerefRes<'a> {
    pub attr: &'a [u8],
    pub value: &'a [u8],
    /// (description, values); empty: `attrVals` is left out.
    pub attrs: Vec<(&'a [u8], Vec<&'a [u8]>)>,
}

/// Encodes the DerefResponse value of the control attached to one search result entry.
pub fn encode_response(res: &[DerefRes<'_>], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    let s = w.start(SEQUENCE);
    for r in res {
        let one = w.start(SEQUENCE);
        w.write_octets(OCTET_STRING, r.attr);
        w.write_octets(OCTET_STRING, r.value);
        if !r.attrs.is_empty() {
            let list = w.start(context_constructed(0));
            for (name, values) in &r.attrs {
                let pa = w.start(SEQUENCE);
                w.write_octets(OCTET_STRING, name);
                let set = w.start(SET);
                for v in values {
                    w.write_octets(OCTET_STRING, v);
                }
                w.end(set);
                w.end(pa);
            }
            w.end(list);
        }
        w.end(one);
    }
    w.end(s);
}

/// Decodes a DerefResponse (a client's side; used by tests).
pub fn decode_response(value: &[u8]) -> Result<Vec<DerefRes<'_>>, DecodeErrorKind> {
    let mut r = Reader::new(value);
    let mut s = r.sub(SEQUENCE)?;
    r.finish()?;
    let mut out = Vec::new();
    while !s.is_empty() {
        let mut one = s.sub(SEQUENCE)?;
        let attr = one.read_octets(OCTET_STRING)?;
        let value = one.read_octets(OCTET_STRING)?;
        let mut attrs = Vec::new();
        if let Some(body) = one.read_optional(context_constructed(0))? {
            let mut list = Reader::new(body);
            while !list.is_empty() {
                let mut pa = list.sub(SEQUENCE)?;
                let name = pa.read_octets(OCTET_STRING)?;
                let mut set = pa.sub(SET)?;
                pa.finish()?;
                let mut values = Vec::new();
                while !set.is_empty() {
                    values.push(set.read_octets(OCTET_STRING)?);
                }
                attrs.push((name, values));
            }
        }
        one.finish()?;
        out.push(DerefRes { attr, value, attrs });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_openldap_request() {
        // ldapsearch -E 'deref=member:uid,cn'
        let v = b"\x30\x15\x30\x13\x04\x06member\x30\x09\x04\x03uid\x04\x02cn";
        let specs = decode(v).expect("decodes");
        assert_eq!(
            specs,
            vec![DerefSpec {
                attr: b"member",
                attributes: vec![b"uid", b"cn"],
            }]
        );
        let mut again = Vec::new();
        encode_specs(&specs, &mut again);
        assert_eq!(again, v);
    }

    #[test]
    fn encodes_as_slapd() {
        // slapd 2.5's answer to deref=member:uid for a group with one member found and one
        // missing: MEMBER uid=b,dc=x with uid b, and uid=n,dc=x without attrVals.
        let res = [
            DerefRes {
                attr: b"member",
                value: b"uid=b,dc=x",
                attrs: vec![(b"uid", vec![b"b"])],
            },
            DerefRes {
                attr: b"member",
                value: b"uid=n,dc=x",
                attrs: vec![],
            },
        ];
        let mut v = Vec::new();
        encode_response(&res, &mut v);
        let want: &[u8] = b"\x30\x3a\
\x30\x22\x04\x06member\x04\x0auid=b,dc=x\xa0\x0c\x30\x0a\x04\x03uid\x31\x03\x04\x01b\
\x30\x14\x04\x06member\x04\x0auid=n,dc=x";
        assert_eq!(v, want);
        assert_eq!(decode_response(&v).expect("decodes"), res);
    }

    #[test]
    fn rejects_malformed_values() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[0x04, 0x00]).is_err());
        // A spec without its attribute list.
        assert!(decode(b"\x30\x0a\x30\x08\x04\x06member").is_err());
        // Trailing bytes inside a spec, and after the value.
        assert!(decode(b"\x30\x0c\x30\x0a\x04\x06member\x30\x00\x00").is_err());
        assert!(decode(b"\x30\x0a\x30\x08\x04\x06member\x30\x00\x00").is_err());
        // An INTEGER in the attribute list.
        assert!(decode(b"\x30\x0d\x30\x0b\x04\x06member\x30\x03\x02\x01\x00").is_err());
        assert!(decode(&[0x30, 0x00]).expect("empty").is_empty());
    }
}
