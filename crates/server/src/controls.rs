//! The control registry (design.md seam 1): every request control Linden understands is
//! declared here once — OID, the operations it applies to, and the parser that turns its value
//! into a field of [`RequestControls`]. The registry alone decides criticality (RFC 4511
//! §4.1.11) and lists the root DSE's supportedControl, so a control is advertised exactly when
//! it works. Model: OpenLDAP `controls.c` (`register_supported_control`).
//!
//! Adding a control: a value codec in `proto::controls`, a field in `RequestControls`, one
//! `Spec` below, and the operations that read the field.

use proto::{oids, Control, DecodeLimits, ResultCode};

use dit::error::{LdapError, LdapResult};

use crate::state::OpType;

const WRITES: u16 =
    OpType::Add.bit() | OpType::Delete.bit() | OpType::Modify.bit() | OpType::Modrdn.bit();
const READS: u16 = OpType::Search.bit() | OpType::Compare.bit();

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
    /// ManageDsaIT (RFC 3296): referral objects are plain entries for this operation (no
    /// referral, no continuation reference: `dit::standin`).
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
    /// Server-side sort (RFC 2891): the keys as sent, resolved against the schema by
    /// `ops::sort`.
    pub sort: Option<SortRequest>,
    /// Virtual list view (draft-ietf-ldapext-ldapv3-vlv-09), on a sorted search (`ops::sort`).
    pub vlv: Option<proto::controls::vlv::VlvRequest<'static>>,
    /// Proxied authorization (RFC 4370): the identity the operation asks to run as, resolved
    /// and authorized by the `proxy` module before the operation starts.
    pub proxied: Option<ProxiedAuthz>,
    /// dontUseCopy (RFC 6171): accepted; Linden holds no copies, so every answer already
    /// comes from the original.
    pub dont_use_copy: bool,
    /// Matched values (RFC 3876): the ValuesReturnFilter's items (`None`: an item that matches
    /// nothing). An empty filter is no filter, as slapd.
    pub values_return: Option<Vec<Option<proto::Filter<'static>>>>,
    /// Dereference (draft-masarati-ldap-deref): the specs as sent, resolved against the
    /// schema by `check_schema` into `deref_specs`.
    deref: Option<(Vec<RawDerefSpec>, bool)>,
    /// The resolved dereference specs: a DN-valued attribute and the attributes wanted from
    /// the entries its values name.
    pub deref_specs: Option<Vec<DerefSpec>>,
    /// Subtree delete (1.2.840.113556.1.4.805): the entry and all its subordinates go.
    pub subtree_delete: bool,
    /// Permissive modify (1.2.840.113556.1.4.1413): adding a value that exists or deleting
    /// one that does not is not an error.
    pub permissive_modify: bool,
    /// Relax Rules (draft-zeilenga-ldap-relax): the administrator's add may set the
    /// server-kept attributes of `dit::add::RELAXABLE` (an entry put back with its entryUUID).
    pub relax: bool,
    /// Transaction specification (RFC 5805): the transaction the change is queued in.
    pub txn: Option<Vec<u8>>,
    /// Password policy request (draft-behera-ldap-password-policy-10): the response carries
    /// the password policy response control (the `ppolicy` module).
    pub ppolicy: bool,
    /// Sync Request (RFC 4533): a replication consumer's search (`ops::syncprov`).
    pub sync: Option<proto::controls::sync::SyncRequest<'static>>,
    /// The Sync Request control was critical (refused when the provider is off).
    pub sync_critical: bool,
}

/// What the configuration turns on that brings controls with it: a control of a feature that
/// is off is unknown (and not in supportedControl).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Features {
    /// `ppolicy`: the password policy control.
    pub ppolicy: bool,
}

impl Features {
    pub(crate) fn of(config: &crate::config::Config) -> Features {
        Features {
            ppolicy: config.ppolicy,
        }
    }
}

/// The authorization identity of a proxied authorization control (RFC 4513 §5.2.1.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProxiedAuthz {
    Anonymous,
    Dn(Vec<u8>),
    User(Vec<u8>),
}

/// A dereference spec as sent: the DN-valued attribute and the attributes wanted.
type RawDerefSpec = (Vec<u8>, Vec<Vec<u8>>);

/// One dereference spec, resolved against the schema.
#[derive(Debug, Clone)]
pub(crate) struct DerefSpec {
    pub attr: schema::AttrId,
    pub attrs: Vec<schema::AttrId>,
}

/// A server-side sort request (RFC 2891).
#[derive(Debug, Clone)]
pub(crate) struct SortRequest {
    pub keys: Vec<proto::controls::sort::SortKey<'static>>,
    pub critical: bool,
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
    /// Resolves what needs the schema before the operation starts: the dereference specs
    /// (`resolve_deref`) and the attribute names of pre-read and post-read
    /// (`check_read_entry`).
    pub(crate) fn check_schema(&mut self, schema: &schema::Schema) -> LdapResult<()> {
        if let Some((specs, critical)) = self.deref.take() {
            self.deref_specs = resolve_deref(schema, &specs, critical)?;
        }
        self.check_read_entry(schema)
    }

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
                    dit::resolve_attr(schema, a)?;
                }
            }
        }
        Ok(())
    }
}

/// Resolves dereference specs as slapd's deref overlay does: an undefined attribute (the
/// dereferenced one or a requested one) or a repeated dereferenced attribute is protocolError;
/// a dereferenced attribute whose syntax is not a DN is protocolError when the control is
/// critical, and otherwise makes the whole control ignored (`None`).
fn resolve_deref(
    schema: &schema::Schema,
    specs: &[RawDerefSpec],
    critical: bool,
) -> LdapResult<Option<Vec<DerefSpec>>> {
    let ty = |raw: &[u8], what: &str| {
        std::str::from_utf8(raw)
            .ok()
            .and_then(|s| schema.attr_by_name(dit::filter::split_description(s).0))
            .ok_or_else(|| protocol(format!("Dereference control: {what} decoding error")))
    };
    let mut out: Vec<DerefSpec> = Vec::with_capacity(specs.len());
    for (attr, attrs) in specs {
        let attr = ty(attr, "derefAttr")?;
        if out.iter().any(|s| s.attr == attr) {
            return Err(protocol(
                "Dereference control: derefAttr must be unique within control",
            ));
        }
        if !is_dn_valued(schema, attr) {
            if critical {
                return Err(protocol(
                    "Dereference control: derefAttr syntax not distinguishedName",
                ));
            }
            return Ok(None);
        }
        let attrs = attrs
            .iter()
            .map(|a| ty(a, "attribute"))
            .collect::<LdapResult<Vec<_>>>()?;
        out.push(DerefSpec { attr, attrs });
    }
    Ok(Some(out))
}

/// Whether values of `ty` name entries: DN syntax, or Name and Optional UID (uniqueMember),
/// as slapd's `SLAP_SYNTAX_DN`.
fn is_dn_valued(schema: &schema::Schema, ty: schema::AttrId) -> bool {
    const DN: &str = "1.3.6.1.4.1.1466.115.121.1.12";
    const NAME_AND_UID: &str = "1.3.6.1.4.1.1466.115.121.1.34";
    let mut t = Some(ty);
    // The syntax may be inherited; a supertype chain is short and acyclic, but bounded anyway.
    for _ in 0..16 {
        let Some(id) = t else { return false };
        let a = schema.attr(id);
        if let Some(syn) = a.syntax {
            return matches!(schema.syntax(syn).oid.as_str(), DN | NAME_AND_UID);
        }
        t = a.sup;
    }
    false
}

/// One supported control.
struct Spec {
    oid: &'static str,
    /// `OpType::bit`s of the operations it applies to.
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
        ops: OpType::Search.bit(),
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
        ops: OpType::Delete.bit() | OpType::Modify.bit() | OpType::Modrdn.bit(),
        parse: |rc, c, _| {
            rc.pre_read = Some(read_selection(c, "preread")?);
            Ok(())
        },
    },
    Spec {
        oid: oids::POST_READ,
        ops: OpType::Add.bit() | OpType::Modify.bit() | OpType::Modrdn.bit(),
        parse: |rc, c, _| {
            rc.post_read = Some(read_selection(c, "postread")?);
            Ok(())
        },
    },
    Spec {
        oid: oids::SORT_REQUEST,
        ops: OpType::Search.bit(),
        parse: |rc, c, _| {
            let v = c
                .value
                .as_deref()
                .ok_or_else(|| protocol("sorted results control value is absent"))?;
            if v.is_empty() {
                return Err(protocol("sorted results control value is empty"));
            }
            let keys = proto::controls::sort::decode_request(v)
                .map_err(|_| protocol("serverSort control: decoding error"))?;
            rc.sort = Some(SortRequest {
                keys: keys.into_iter().map(|k| k.into_owned()).collect(),
                critical: c.critical,
            });
            Ok(())
        },
    },
    Spec {
        oid: oids::VLV_REQUEST,
        ops: OpType::Search.bit(),
        parse: |rc, c, _| {
            let v = c
                .value
                .as_deref()
                .ok_or_else(|| protocol("vlv control value is absent"))?;
            if v.is_empty() {
                return Err(protocol("vlv control value is empty"));
            }
            let r = proto::controls::vlv::VlvRequest::decode(v)
                .map_err(|e| protocol(format!("vlv control could not be decoded ({e})")))?;
            rc.vlv = Some(r.into_owned());
            Ok(())
        },
    },
    Spec {
        oid: oids::PERSISTENT_SEARCH,
        ops: OpType::Search.bit(),
        parse: |rc, c, _| {
            let v = c.value.as_deref().unwrap_or(&[]);
            let ps = proto::controls::psearch::PersistentSearch::decode(v)
                .map_err(|e| protocol(format!("persistent search control: {e}")))?;
            rc.persistent = Some(ps);
            Ok(())
        },
    },
    Spec {
        oid: oids::PROXIED_AUTHZ,
        // Every operation with an identity to act as: not bind (RFC 4370 §3).
        ops: READS | WRITES | OpType::Extended.bit(),
        parse: |rc, c, _| {
            use proto::controls::proxyauthz::AuthzId;
            let v = c
                .value
                .as_deref()
                .ok_or_else(|| protocol("proxy authorization control value absent"))?;
            if !c.critical {
                return Err(protocol(
                    "proxied authorization criticality of FALSE not allowed",
                ));
            }
            rc.proxied = Some(match AuthzId::decode(v) {
                Ok(AuthzId::Anonymous) => ProxiedAuthz::Anonymous,
                Ok(AuthzId::Dn(dn)) => ProxiedAuthz::Dn(dn.to_vec()),
                Ok(AuthzId::User(u)) => ProxiedAuthz::User(u.to_vec()),
                Err(_) => {
                    return Err(LdapError::new(
                        ResultCode::AuthorizationDenied,
                        "authzId mapping failed",
                    ))
                }
            });
            Ok(())
        },
    },
    Spec {
        oid: oids::DONT_USE_COPY,
        ops: READS,
        parse: |rc, c, _| {
            proto::controls::dontusecopy::check(c.critical, c.value.as_deref())
                .map_err(|e| protocol(e.to_string()))?;
            rc.dont_use_copy = true;
            Ok(())
        },
    },
    Spec {
        oid: oids::MATCHED_VALUES,
        ops: OpType::Search.bit(),
        parse: |rc, c, limits| {
            let v = c
                .value
                .as_deref()
                .ok_or_else(|| protocol("valuesReturnFilter control value is absent"))?;
            if v.is_empty() {
                return Err(protocol("valuesReturnFilter control value is empty"));
            }
            let items = proto::controls::matchedvalues::decode(v, limits)
                .map_err(|e| protocol(format!("valuesReturnFilter control: {e}")))?;
            if !items.is_empty() {
                rc.values_return = Some(
                    items
                        .into_iter()
                        .map(|i| i.map(proto::Filter::into_owned))
                        .collect(),
                );
            }
            Ok(())
        },
    },
    Spec {
        oid: oids::DEREF,
        ops: OpType::Search.bit(),
        parse: |rc, c, _| {
            let v = c
                .value
                .as_deref()
                .ok_or_else(|| protocol("Dereference control value is absent"))?;
            if v.is_empty() {
                return Err(protocol("Dereference control value is empty"));
            }
            let specs = proto::controls::deref::decode(v)
                .map_err(|_| protocol("Dereference control: derefSpec decoding error"))?;
            let specs = specs
                .into_iter()
                .map(|s| {
                    (
                        s.attr.to_vec(),
                        s.attributes.into_iter().map(<[u8]>::to_vec).collect(),
                    )
                })
                .collect();
            rc.deref = Some((specs, c.critical));
            Ok(())
        },
    },
    Spec {
        oid: oids::SUBTREE_DELETE,
        ops: OpType::Delete.bit(),
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
        ops: OpType::Modify.bit(),
        parse: |rc, c, _| {
            if c.value.is_some() {
                return Err(protocol("permissive modify control value not absent"));
            }
            rc.permissive_modify = true;
            Ok(())
        },
    },
    Spec {
        oid: oids::RELAX_RULES,
        // An add only: on a modify the server stamps modifiersName and modifyTimestamp
        // itself, so a critical Relax Rules control there is unavailableCriticalExtension.
        ops: OpType::Add.bit(),
        parse: |rc, c, _| {
            // As slapd's parseRelax.
            if c.value.is_some() {
                return Err(protocol("relax control value not absent"));
            }
            rc.relax = true;
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
    Spec {
        oid: oids::SYNC_REQUEST,
        ops: OpType::Search.bit(),
        parse: |rc, c, _| {
            let v = c
                .value
                .as_deref()
                .ok_or_else(|| protocol("Sync control value is absent"))?;
            let r = proto::controls::sync::SyncRequest::decode(v)
                .map_err(|e| protocol(format!("Sync control: {e}")))?;
            rc.sync = Some(proto::controls::sync::SyncRequest {
                mode: r.mode,
                cookie: r.cookie.map(|c| c.into_owned().into()),
                reload_hint: r.reload_hint,
            });
            rc.sync_critical = c.critical;
            Ok(())
        },
    },
];

/// The controls of the password policy overlay (`ppolicy = true`).
const PPOLICY: &[Spec] = &[Spec {
    oid: oids::PASSWORD_POLICY,
    // As slapd: bind, add, modify and Password Modify.
    ops: OpType::Bind.bit() | OpType::Add.bit() | OpType::Modify.bit() | OpType::Extended.bit(),
    parse: |rc, c, _| {
        proto::controls::ppolicy::check_request(c.value.as_deref())
            .map_err(|e| protocol(e.to_string()))?;
        rc.ppolicy = true;
        Ok(())
    },
}];

/// The controls supported with `features`.
fn specs(features: Features) -> impl Iterator<Item = &'static Spec> {
    let optional: &[Spec] = if features.ppolicy { PPOLICY } else { &[] };
    REGISTRY.iter().chain(optional)
}

fn protocol(msg: impl Into<String>) -> LdapError {
    LdapError::new(ResultCode::ProtocolError, msg)
}

/// Parses the controls of a request for an operation of type `kind`: a supported control that
/// applies is parsed (a malformed value or a repeated control is protocolError); any other is
/// ignored unless critical, which is unavailableCriticalExtension (RFC 4511 §4.1.11).
pub(crate) fn parse(
    controls: &[Control<'_>],
    kind: OpType,
    limits: &DecodeLimits,
    features: Features,
) -> LdapResult<RequestControls> {
    let mut out = RequestControls::default();
    let mut seen: u64 = 0;
    for c in controls {
        let found = specs(features)
            .enumerate()
            .find(|(_, s)| s.oid.as_bytes() == &*c.oid);
        match found {
            Some((i, spec)) if spec.ops & kind.bit() != 0 => {
                if seen & (1 << i) != 0 {
                    return Err(protocol(format!(
                        "control {} specified more than once",
                        spec.oid
                    )));
                }
                seen |= 1 << i;
                (spec.parse)(&mut out, c, limits)?;
            }
            // Unbind and abandon have no response to refuse them with.
            _ if c.critical && kind.response_tag().is_some() => {
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

/// The OIDs of the root DSE's supportedControl: every registered control of the features
/// turned on.
pub(crate) fn supported(features: Features) -> impl Iterator<Item = &'static str> {
    specs(features).map(|s| s.oid)
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
        assert!(parse(
            &[ctl("1.2.3", false, None)],
            OpType::Search,
            &l,
            Features::default()
        )
        .is_ok());
        let e = parse(
            &[ctl("1.2.3", true, None)],
            OpType::Search,
            &l,
            Features::default(),
        )
        .unwrap_err();
        assert_eq!(e.code, ResultCode::UnavailableCriticalExtension);
        // Paged results is for searches only.
        let paged = [0x30, 0x05, 0x02, 0x01, 0x05, 0x04, 0x00];
        let c = ctl(oids::PAGED_RESULTS, true, Some(&paged));
        assert!(parse(
            std::slice::from_ref(&c),
            OpType::Search,
            &l,
            Features::default()
        )
        .unwrap()
        .paged
        .is_some());
        let e = parse(
            std::slice::from_ref(&c),
            OpType::Modify,
            &l,
            Features::default(),
        )
        .unwrap_err();
        assert_eq!(e.code, ResultCode::UnavailableCriticalExtension);
        // A critical control on an abandon is never an error: there is no response to carry it.
        assert!(parse(
            &[ctl("1.2.3", true, None)],
            OpType::Abandon,
            &l,
            Features::default()
        )
        .is_ok());
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
            ctl(oids::SORT_REQUEST, false, None),
            ctl(oids::SORT_REQUEST, true, Some(&[])),
            ctl(oids::SORT_REQUEST, false, Some(&[0x30, 0x00])),
            ctl(oids::VLV_REQUEST, false, None),
            ctl(oids::VLV_REQUEST, true, Some(&[0x30, 0x00])),
        ] {
            let e = parse(
                std::slice::from_ref(&c),
                OpType::Search,
                &l,
                Features::default(),
            )
            .unwrap_err();
            assert_eq!(e.code, ResultCode::ProtocolError, "{c:?}");
        }
        let m = ctl(oids::MANAGE_DSA_IT, false, None);
        let e = parse(&[m.clone(), m], OpType::Search, &l, Features::default()).unwrap_err();
        assert_eq!(e.code, ResultCode::ProtocolError);
    }

    #[test]
    fn every_registered_control_is_advertised() {
        let all: Vec<_> = supported(Features::default()).collect();
        assert!(all.contains(&oids::PAGED_RESULTS));
        assert!(all.contains(&oids::ASSERTION));
        assert!(all.contains(&oids::MANAGE_DSA_IT));
        assert!(all.contains(&oids::SORT_REQUEST));
        assert!(all.contains(&oids::VLV_REQUEST));
        for oid in [
            oids::PROXIED_AUTHZ,
            oids::DONT_USE_COPY,
            oids::MATCHED_VALUES,
            oids::DEREF,
        ] {
            assert!(all.contains(&oid), "{oid}");
        }
    }

    #[test]
    fn the_password_policy_control_comes_with_its_feature() {
        let l = DecodeLimits::default();
        let on = Features { ppolicy: true };
        let off = Features::default();
        assert!(supported(on).any(|o| o == oids::PASSWORD_POLICY));
        assert!(!supported(off).any(|o| o == oids::PASSWORD_POLICY));
        let c = ctl(oids::PASSWORD_POLICY, true, None);
        assert!(
            parse(std::slice::from_ref(&c), OpType::Bind, &l, on)
                .unwrap()
                .ppolicy
        );
        let e = parse(std::slice::from_ref(&c), OpType::Bind, &l, off).unwrap_err();
        assert_eq!(e.code, ResultCode::UnavailableCriticalExtension);
        let e = parse(std::slice::from_ref(&c), OpType::Search, &l, on).unwrap_err();
        assert_eq!(e.code, ResultCode::UnavailableCriticalExtension);
        let bad = ctl(oids::PASSWORD_POLICY, false, Some(b""));
        let e = parse(&[bad], OpType::Modify, &l, on).unwrap_err();
        assert_eq!(e.code, ResultCode::ProtocolError);
    }

    #[test]
    fn new_controls_refuse_malformed_values() {
        let l = DecodeLimits::default();
        let code = |c: Control<'static>, kind: OpType| {
            parse(std::slice::from_ref(&c), kind, &l, Features::default())
                .map(drop)
                .unwrap_err()
                .code
        };
        use ResultCode::{AuthorizationDenied, ProtocolError};
        // Proxied authorization: must be critical and have a value in one of the forms.
        assert_eq!(
            code(ctl(oids::PROXIED_AUTHZ, true, None), OpType::Search),
            ProtocolError
        );
        assert_eq!(
            code(
                ctl(oids::PROXIED_AUTHZ, false, Some(b"dn:cn=x")),
                OpType::Search
            ),
            ProtocolError
        );
        assert_eq!(
            code(
                ctl(oids::PROXIED_AUTHZ, true, Some(b"bogus")),
                OpType::Modify
            ),
            AuthorizationDenied
        );
        let ok = parse(
            &[ctl(oids::PROXIED_AUTHZ, true, Some(b"u:alice"))],
            OpType::Add,
            &l,
            Features::default(),
        );
        assert_eq!(
            ok.unwrap().proxied,
            Some(ProxiedAuthz::User(b"alice".to_vec()))
        );
        // Not on a bind.
        assert_eq!(
            code(ctl(oids::PROXIED_AUTHZ, true, Some(b"")), OpType::Bind),
            ResultCode::UnavailableCriticalExtension
        );
        // dontUseCopy: critical, no value; reads only.
        assert_eq!(
            code(ctl(oids::DONT_USE_COPY, false, None), OpType::Search),
            ProtocolError
        );
        assert_eq!(
            code(ctl(oids::DONT_USE_COPY, true, Some(b"")), OpType::Compare),
            ProtocolError
        );
        assert!(parse(
            &[ctl(oids::DONT_USE_COPY, true, None)],
            OpType::Compare,
            &l,
            Features::default()
        )
        .is_ok());
        assert_eq!(
            code(ctl(oids::DONT_USE_COPY, true, None), OpType::Modify),
            ResultCode::UnavailableCriticalExtension
        );
        // Matched values and dereference.
        for c in [
            ctl(oids::MATCHED_VALUES, false, None),
            ctl(oids::MATCHED_VALUES, false, Some(b"")),
            ctl(oids::MATCHED_VALUES, true, Some(&[0x04, 0x00])),
            ctl(oids::MATCHED_VALUES, true, Some(&[0x30, 0x02, 0x04, 0x00])),
            ctl(oids::DEREF, false, None),
            ctl(oids::DEREF, false, Some(b"")),
            ctl(oids::DEREF, true, Some(&[0x30, 0x02, 0x30, 0x00])),
        ] {
            assert_eq!(code(c.clone(), OpType::Search), ProtocolError, "{c:?}");
        }
        let empty = parse(
            &[ctl(oids::MATCHED_VALUES, true, Some(&[0x30, 0x00]))],
            OpType::Search,
            &l,
            Features::default(),
        );
        assert!(empty.unwrap().values_return.is_none());
    }

    #[test]
    fn deref_specs_resolve_as_slapd() {
        let schema = schema::Schema::builtin();
        let spec = |attr: &[u8], attrs: &[&[u8]]| {
            (
                attr.to_vec(),
                attrs.iter().map(|a| a.to_vec()).collect::<Vec<_>>(),
            )
        };
        let r = resolve_deref(&schema, &[spec(b"member", &[b"uid", b"cn"])], true)
            .unwrap()
            .unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].attrs.len(), 2);
        assert!(resolve_deref(&schema, &[spec(b"uniqueMember", &[])], true)
            .unwrap()
            .is_some());
        for bad in [
            vec![spec(b"noSuchAttr", &[b"cn"])],
            vec![spec(b"member", &[b"noSuchAttr"])],
            vec![spec(b"member", &[]), spec(b"member", &[])],
            vec![spec(b"cn", &[b"uid"])],
        ] {
            let e = resolve_deref(&schema, &bad, true).unwrap_err();
            assert_eq!(e.code, ResultCode::ProtocolError);
        }
        // Non-critical: a non-DN attribute makes the control ignored.
        assert!(resolve_deref(&schema, &[spec(b"cn", &[b"uid"])], false)
            .unwrap()
            .is_none());
    }
}
