//! The control registry (design.md seam 1): every request control Linden understands is
//! declared here once — OID, the operations it applies to, and the parser that turns its value
//! into a field of [`RequestControls`]. The registry alone decides criticality (RFC 4511
//! §4.1.11) and lists the root DSE's supportedControl, so a control is advertised exactly when
//! it works. Model: OpenLDAP `controls.c` (`register_supported_control`).
//!
//! Adding a control: a value codec in `proto::controls`, a field in `RequestControls`, one
//! `Spec` below, and the operations that read the field.

use proto::{oids, Control, DecodeLimits, ProtocolOp, ResultCode};

use crate::error::{LdapError, LdapResult};

/// The operations a control may come with (bits of `Spec::ops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Bind = 1,
    Search = 1 << 1,
    Compare = 1 << 2,
    Add = 1 << 3,
    Delete = 1 << 4,
    Modify = 1 << 5,
    ModDn = 1 << 6,
    Extended = 1 << 7,
    /// Abandon and unbind: they have no response, so a control they carry is never refused.
    NoResponse = 1 << 8,
}

impl OpKind {
    pub(crate) fn of(op: &ProtocolOp<'_>) -> OpKind {
        match op {
            ProtocolOp::BindRequest(_) => OpKind::Bind,
            ProtocolOp::SearchRequest(_) => OpKind::Search,
            ProtocolOp::CompareRequest(_) => OpKind::Compare,
            ProtocolOp::AddRequest(_) => OpKind::Add,
            ProtocolOp::DelRequest(_) => OpKind::Delete,
            ProtocolOp::ModifyRequest(_) => OpKind::Modify,
            ProtocolOp::ModifyDnRequest(_) => OpKind::ModDn,
            ProtocolOp::ExtendedRequest(_) => OpKind::Extended,
            _ => OpKind::NoResponse,
        }
    }
}

const WRITES: u16 =
    OpKind::Add as u16 | OpKind::Delete as u16 | OpKind::Modify as u16 | OpKind::ModDn as u16;
const READS: u16 = OpKind::Search as u16 | OpKind::Compare as u16;

/// A paged results request (RFC 2696).
#[derive(Debug, Clone)]
pub(crate) struct PagedRequest {
    /// Entries wanted in this page; 0 with a cookie ends the paged search.
    pub size: u64,
    /// Empty on the first page.
    pub cookie: Vec<u8>,
}

/// The request controls of one operation, parsed. Unknown and inapplicable non-critical
/// controls are not here (ignored, as RFC 4511 asks).
#[derive(Debug, Default)]
pub(crate) struct RequestControls {
    /// ManageDsaIT (RFC 3296): accepted; Linden stores no referral objects, so it changes
    /// nothing yet.
    pub manage_dsa_it: bool,
    pub paged: Option<PagedRequest>,
    /// Assertion (RFC 4528): the operation runs only if its target entry matches.
    pub assertion: Option<proto::Filter<'static>>,
    /// Pre-read (RFC 4527): the attributes of the entry before the change to return.
    pub pre_read: Option<ReadEntry>,
    /// Post-read (RFC 4527): the attributes of the entry after the change to return.
    pub post_read: Option<ReadEntry>,
    /// Persistent search (draft-ietf-ldapext-psearch-03): the search stays open and sends
    /// later changes (`ops::psearch`).
    pub persistent: Option<proto::controls::psearch::PersistentSearch>,
    /// Subtree delete (1.2.840.113556.1.4.805): the entry and all its subordinates go.
    pub subtree_delete: bool,
    /// Permissive modify (1.2.840.113556.1.4.1413): adding a value that exists or deleting
    /// one that does not is not an error.
    pub permissive_modify: bool,
    /// Transaction specification (RFC 5805): the transaction the change is queued in.
    pub txn: Option<Vec<u8>>,
}

/// A pre-read or post-read request (RFC 4527).
#[derive(Debug, Clone)]
pub(crate) struct ReadEntry {
    /// The attribute selection, as in a search request.
    pub attrs: Vec<Vec<u8>>,
    /// Critical: an undefined attribute type in `attrs` refuses the operation (as slapd).
    pub critical: bool,
}

impl RequestControls {
    /// Checks the attribute names of critical pre-read and post-read controls against the
    /// schema before the change is made: an undefined type (or an ill-formed description) is
    /// undefinedAttributeType, as slapd answers. A non-critical control ignores such names.
    pub(crate) fn check_read_entry(&self, schema: &schema::Schema) -> LdapResult<()> {
        let critical = [&self.pre_read, &self.post_read]
            .into_iter()
            .flatten()
            .filter(|r| r.critical);
        for r in critical {
            for a in &r.attrs {
                if !matches!(a.as_slice(), b"*" | b"+" | b"1.1") {
                    crate::state::resolve_attr(schema, a)?;
                }
            }
        }
        Ok(())
    }
}

/// One supported control.
struct Spec {
    oid: &'static str,
    /// `OpKind` bits of the operations it applies to.
    ops: u16,
    parse: fn(&mut RequestControls, &Control<'_>, &DecodeLimits) -> LdapResult<()>,
}

fn read_selection(c: &Control<'_>, what: &str) -> LdapResult<ReadEntry> {
    let v = c
        .value
        .as_deref()
        .ok_or_else(|| protocol(format!("{what} control value is absent")))?;
    let attrs = proto::controls::readentry::decode_selection(v)
        .map(|s| s.into_iter().map(|a| a.into_owned()).collect())
        .map_err(|_| protocol(format!("{what} control could not be decoded")))?;
    Ok(ReadEntry {
        attrs,
        critical: c.critical,
    })
}

const REGISTRY: &[Spec] = &[
    Spec {
        oid: oids::MANAGE_DSA_IT,
        ops: READS | WRITES,
        parse: |rc, c, _| {
            if c.value.is_some() {
                return Err(protocol("manageDSAit control value not absent"));
            }
            rc.manage_dsa_it = true;
            Ok(())
        },
    },
    Spec {
        oid: oids::PAGED_RESULTS,
        ops: OpKind::Search as u16,
        parse: |rc, c, _| {
            let v = c
                .value
                .as_deref()
                .ok_or_else(|| protocol("paged results control value is absent"))?;
            let p = proto::controls::PagedResults::decode(v)
                .map_err(|_| protocol("paged results control could not be decoded"))?;
            let size = u64::try_from(p.size)
                .map_err(|_| protocol("paged results control size invalid"))?;
            rc.paged = Some(PagedRequest {
                size,
                cookie: p.cookie.to_vec(),
            });
            Ok(())
        },
    },
    Spec {
        oid: oids::ASSERTION,
        ops: READS | WRITES,
        parse: |rc, c, limits| {
            let v = c
                .value
                .as_deref()
                .ok_or_else(|| protocol("assert control value is absent"))?;
            if v.is_empty() {
                return Err(protocol("assert control value is empty"));
            }
            let f = proto::Filter::decode(v, limits)
                .map_err(|e| protocol(format!("assertion control: invalid filter ({e})")))?;
            rc.assertion = Some(f.into_owned());
            Ok(())
        },
    },
    Spec {
        oid: oids::PRE_READ,
        ops: OpKind::Delete as u16 | OpKind::Modify as u16 | OpKind::ModDn as u16,
        parse: |rc, c, _| {
            rc.pre_read = Some(read_selection(c, "preread")?);
            Ok(())
        },
    },
    Spec {
        oid: oids::POST_READ,
        ops: OpKind::Add as u16 | OpKind::Modify as u16 | OpKind::ModDn as u16,
        parse: |rc, c, _| {
            rc.post_read = Some(read_selection(c, "postread")?);
            Ok(())
        },
    },
    Spec {
        oid: oids::PERSISTENT_SEARCH,
        ops: OpKind::Search as u16,
        parse: |rc, c, _| {
            let v = c.value.as_deref().unwrap_or(&[]);
            let ps = proto::controls::psearch::PersistentSearch::decode(v)
                .map_err(|e| protocol(format!("persistent search control: {e}")))?;
            rc.persistent = Some(ps);
            Ok(())
        },
    },
    Spec {
        oid: oids::SUBTREE_DELETE,
        ops: OpKind::Delete as u16,
        parse: |rc, c, _| {
            if c.value.is_some() {
                return Err(protocol("subtree delete control value not absent"));
            }
            rc.subtree_delete = true;
            Ok(())
        },
    },
    Spec {
        oid: oids::PERMISSIVE_MODIFY,
        ops: OpKind::Modify as u16,
        parse: |rc, c, _| {
            if c.value.is_some() {
                return Err(protocol("permissive modify control value not absent"));
            }
            rc.permissive_modify = true;
            Ok(())
        },
    },
    Spec {
        oid: oids::TXN_SPEC,
        ops: WRITES,
        parse: |rc, c, _| {
            // RFC 5805 §2.2: always critical, its value the transaction identifier.
            if !c.critical {
                return Err(protocol("txnSpec control must be marked critical"));
            }
            let id = c
                .value
                .as_deref()
                .ok_or_else(|| protocol("no transaction identifier provided"))?;
            rc.txn = Some(id.to_vec());
            Ok(())
        },
    },
];

fn protocol(msg: impl Into<String>) -> LdapError {
    LdapError::new(ResultCode::ProtocolError, msg)
}

/// Parses the controls of a request for an operation of kind `kind`: a supported control that
/// applies is parsed (a malformed value or a repeated control is protocolError); any other is
/// ignored unless critical, which is unavailableCriticalExtension (RFC 4511 §4.1.11).
pub(crate) fn parse(
    controls: &[Control<'_>],
    kind: OpKind,
    limits: &DecodeLimits,
) -> LdapResult<RequestControls> {
    let mut out = RequestControls::default();
    let mut seen: u64 = 0;
    for c in controls {
        let found = REGISTRY
            .iter()
            .enumerate()
            .find(|(_, s)| s.oid.as_bytes() == &*c.oid);
        match found {
            Some((i, spec)) if spec.ops & kind as u16 != 0 => {
                if seen & (1 << i) != 0 {
                    return Err(protocol(format!(
                        "control {} specified more than once",
                        spec.oid
                    )));
                }
                seen |= 1 << i;
                (spec.parse)(&mut out, c, limits)?;
            }
            _ if c.critical && kind != OpKind::NoResponse => {
                let oid = String::from_utf8_lossy(&c.oid);
                let why = if found.is_some() {
                    "is not supported for this operation"
                } else {
                    "is not supported"
                };
                return Err(LdapError::new(
                    ResultCode::UnavailableCriticalExtension,
                    format!("critical control {oid} {why}"),
                ));
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The OIDs of the root DSE's supportedControl: every registered control.
pub(crate) fn supported() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|s| s.oid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctl(oid: &str, critical: bool, value: Option<&[u8]>) -> Control<'static> {
        Control {
            oid: oid.as_bytes().to_vec().into(),
            critical,
            value: value.map(|v| v.to_vec().into()),
        }
    }

    #[test]
    fn criticality_decides_for_unknown_and_inapplicable_controls() {
        let l = DecodeLimits::default();
        assert!(parse(&[ctl("1.2.3", false, None)], OpKind::Search, &l).is_ok());
        let e = parse(&[ctl("1.2.3", true, None)], OpKind::Search, &l).unwrap_err();
        assert_eq!(e.code, ResultCode::UnavailableCriticalExtension);
        // Paged results is for searches only.
        let paged = [0x30, 0x05, 0x02, 0x01, 0x05, 0x04, 0x00];
        let c = ctl(oids::PAGED_RESULTS, true, Some(&paged));
        assert!(parse(std::slice::from_ref(&c), OpKind::Search, &l)
            .unwrap()
            .paged
            .is_some());
        let e = parse(std::slice::from_ref(&c), OpKind::Modify, &l).unwrap_err();
        assert_eq!(e.code, ResultCode::UnavailableCriticalExtension);
        // A critical control on an abandon is never an error: there is no response to carry it.
        assert!(parse(&[ctl("1.2.3", true, None)], OpKind::NoResponse, &l).is_ok());
    }

    #[test]
    fn malformed_and_repeated_controls_are_protocol_errors() {
        let l = DecodeLimits::default();
        for c in [
            ctl(oids::PAGED_RESULTS, false, None),
            ctl(oids::PAGED_RESULTS, false, Some(&[0x30, 0x00])),
            // size -1
            ctl(
                oids::PAGED_RESULTS,
                false,
                Some(&[0x30, 0x05, 0x02, 0x01, 0xff, 0x04, 0x00]),
            ),
            ctl(oids::ASSERTION, false, None),
            ctl(oids::ASSERTION, false, Some(&[0x87, 0x00, 0x00])),
        ] {
            let e = parse(std::slice::from_ref(&c), OpKind::Search, &l).unwrap_err();
            assert_eq!(e.code, ResultCode::ProtocolError, "{c:?}");
        }
        let m = ctl(oids::MANAGE_DSA_IT, false, None);
        let e = parse(&[m.clone(), m], OpKind::Search, &l).unwrap_err();
        assert_eq!(e.code, ResultCode::ProtocolError);
    }

    #[test]
    fn every_registered_control_is_advertised() {
        let all: Vec<_> = supported().collect();
        assert!(all.contains(&oids::PAGED_RESULTS));
        assert!(all.contains(&oids::ASSERTION));
        assert!(all.contains(&oids::MANAGE_DSA_IT));
    }
}
