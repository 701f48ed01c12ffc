//! Property tests: every message encodes and decodes back to itself, and every filter survives
//! both the wire form and the RFC 4515 string form.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proto::*;
use std::borrow::Cow;

type Bytes = Cow<'static, [u8]>;

fn bytes() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..12).prop_map(Cow::Owned)
}

/// Longer values now and then, to exercise long-form lengths.
fn value() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        4 => bytes(),
        1 => vec(any::<u8>(), 100..300).prop_map(Cow::Owned),
    ]
}

fn s(re: &'static str) -> impl Strategy<Value = Bytes> {
    re.prop_map(|s: String| Cow::Owned(s.into_bytes()))
}

fn result_code() -> impl Strategy<Value = ResultCode> {
    let all: Vec<ResultCode> = ResultCode::all().collect();
    proptest::sample::select(all)
}

fn ldap_result() -> impl Strategy<Value = LdapResult<'static>> {
    (result_code(), bytes(), bytes(), vec(bytes(), 0..3)).prop_map(
        |(code, matched_dn, message, referral)| LdapResult {
            code,
            matched_dn,
            message,
            referral,
        },
    )
}

fn attribute() -> impl Strategy<Value = PartialAttribute<'static>> {
    (bytes(), vec(value(), 0..4)).prop_map(|(name, values)| PartialAttribute { name, values })
}

/// Filters. `text` restricts the byte strings to what the string form can express
/// (valid attribute descriptions and rule names, non-empty substring parts).
fn filter(text: bool) -> impl Strategy<Value = Filter<'static>> {
    let attr = move || -> BoxedStrategy<Bytes> {
        if text {
            s("[a-zA-Z][a-zA-Z0-9-]{0,6}(;[a-z-]{1,5})?").boxed()
        } else {
            bytes().boxed()
        }
    };
    let part = move || -> BoxedStrategy<Bytes> {
        if text {
            vec(any::<u8>(), 1..8).prop_map(Cow::Owned).boxed()
        } else {
            bytes().boxed()
        }
    };
    let rule = move || -> BoxedStrategy<Bytes> {
        if text {
            prop_oneof![s("[a-z]{2,6}Match"), s("2\\.5\\.13\\.[0-9]{1,2}")].boxed()
        } else {
            bytes().boxed()
        }
    };
    let leaf = prop_oneof![
        (attr(), bytes()).prop_map(|(a, v)| Filter::Equality(a, v)),
        (attr(), bytes()).prop_map(|(a, v)| Filter::GreaterOrEqual(a, v)),
        (attr(), bytes()).prop_map(|(a, v)| Filter::LessOrEqual(a, v)),
        (attr(), bytes()).prop_map(|(a, v)| Filter::Approx(a, v)),
        attr().prop_map(Filter::Present),
        (
            attr(),
            option::of(part()),
            vec(part(), 0..3),
            option::of(part())
        )
            .prop_filter("at least one part", |(_, i, a, f)| i.is_some()
                || !a.is_empty()
                || f.is_some())
            .prop_map(|(attr, initial, any, final_)| Filter::Substrings {
                attr,
                initial,
                any,
                final_
            }),
        (
            option::of(rule()),
            option::of(attr()),
            bytes(),
            any::<bool>()
        )
            .prop_filter("rule or type", |(r, a, _, _)| r.is_some() || a.is_some())
            .prop_map(|(rule, attr, value, dn_attributes)| Filter::Extensible {
                rule,
                attr,
                value,
                dn_attributes
            }),
    ];
    leaf.prop_recursive(5, 40, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Filter::And),
            vec(inner.clone(), 0..4).prop_map(Filter::Or),
            inner.prop_map(|f| Filter::Not(Box::new(f))),
        ]
    })
}

fn op() -> impl Strategy<Value = ProtocolOp<'static>> {
    let id = 0..=i32::MAX;
    prop_oneof![
        (
            1..=127i64,
            bytes(),
            prop_oneof![
                bytes().prop_map(BindAuth::Simple),
                (bytes(), option::of(bytes())).prop_map(|(mechanism, credentials)| {
                    BindAuth::Sasl {
                        mechanism,
                        credentials,
                    }
                }),
            ]
        )
            .prop_map(
                |(version, name, auth)| ProtocolOp::BindRequest(BindRequest {
                    version,
                    name,
                    auth
                })
            ),
        (ldap_result(), option::of(bytes())).prop_map(|(r, c)| ProtocolOp::BindResponse(r, c)),
        Just(ProtocolOp::UnbindRequest),
        (
            bytes(),
            prop_oneof![Just(Scope::Base), Just(Scope::One), Just(Scope::Subtree)],
            prop_oneof![
                Just(DerefAliases::Never),
                Just(DerefAliases::InSearching),
                Just(DerefAliases::FindingBase),
                Just(DerefAliases::Always)
            ],
            0..=i64::from(i32::MAX),
            0..=i64::from(i32::MAX),
            any::<bool>(),
            filter(false),
            vec(bytes(), 0..4),
        )
            .prop_map(
                |(base, scope, deref, size_limit, time_limit, types_only, filter, attributes)| {
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
            ),
        (bytes(), vec(attribute(), 0..4))
            .prop_map(|(dn, attributes)| ProtocolOp::SearchResultEntry { dn, attributes }),
        ldap_result().prop_map(ProtocolOp::SearchResultDone),
        vec(bytes(), 1..4).prop_map(ProtocolOp::SearchResultReference),
        (
            bytes(),
            vec(
                (
                    prop_oneof![
                        Just(ModOp::Add),
                        Just(ModOp::Delete),
                        Just(ModOp::Replace),
                        Just(ModOp::Increment)
                    ],
                    attribute()
                ),
                0..4
            )
        )
            .prop_map(|(dn, ch)| ProtocolOp::ModifyRequest(ModifyRequest {
                dn,
                changes: ch
                    .into_iter()
                    .map(|(op, attr)| Change { op, attr })
                    .collect(),
            })),
        ldap_result().prop_map(ProtocolOp::ModifyResponse),
        (bytes(), vec(attribute(), 0..4))
            .prop_map(|(dn, attributes)| ProtocolOp::AddRequest(AddRequest { dn, attributes })),
        ldap_result().prop_map(ProtocolOp::AddResponse),
        value().prop_map(ProtocolOp::DelRequest),
        ldap_result().prop_map(ProtocolOp::DelResponse),
        (bytes(), bytes(), any::<bool>(), option::of(bytes())).prop_map(
            |(dn, new_rdn, delete_old_rdn, new_superior)| {
                ProtocolOp::ModifyDnRequest(ModifyDnRequest {
                    dn,
                    new_rdn,
                    delete_old_rdn,
                    new_superior,
                })
            }
        ),
        ldap_result().prop_map(ProtocolOp::ModifyDnResponse),
        (bytes(), bytes(), value()).prop_map(|(dn, attr, value)| ProtocolOp::CompareRequest(
            CompareRequest { dn, attr, value }
        )),
        ldap_result().prop_map(ProtocolOp::CompareResponse),
        id.prop_map(ProtocolOp::AbandonRequest),
        (bytes(), option::of(value()))
            .prop_map(|(oid, value)| ProtocolOp::ExtendedRequest(ExtendedRequest { oid, value })),
        (ldap_result(), option::of(bytes()), option::of(value())).prop_map(
            |(result, oid, value)| ProtocolOp::ExtendedResponse(ExtendedResponse {
                result,
                oid,
                value
            })
        ),
        (option::of(bytes()), option::of(bytes()))
            .prop_map(|(oid, value)| ProtocolOp::IntermediateResponse { oid, value }),
    ]
}

fn control() -> impl Strategy<Value = Control<'static>> {
    (bytes(), any::<bool>(), option::of(bytes())).prop_map(|(oid, critical, value)| Control {
        oid,
        critical,
        value,
    })
}

fn message() -> impl Strategy<Value = LdapMessage<'static>> {
    (0..=i32::MAX, op(), vec(control(), 0..3)).prop_map(|(id, op, controls)| LdapMessage {
        id,
        op,
        controls,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn message_roundtrip(msg in message()) {
        let mut pdu = Vec::new();
        msg.encode(&mut pdu);
        prop_assert_eq!(frame(&pdu, usize::MAX), Ok(Some(pdu.len())));
        let back = LdapMessage::decode(&pdu);
        prop_assert_eq!(back.as_ref(), Ok(&msg));
        // Encoding the decoded (borrowed) message gives the same bytes.
        if let Ok(back) = back {
            let mut again = Vec::new();
            back.encode(&mut again);
            prop_assert_eq!(again, pdu.clone());
        }
        // No strict prefix is a message.
        for cut in [0, 1, pdu.len() / 2, pdu.len() - 1] {
            prop_assert!(LdapMessage::decode(&pdu[..cut]).is_err());
            prop_assert_eq!(frame(&pdu[..cut], usize::MAX), Ok(None));
        }
    }

    #[test]
    fn filter_wire_roundtrip(f in filter(false)) {
        let mut buf = Vec::new();
        f.encode(&mut buf);
        prop_assert_eq!(Filter::decode(&buf, &DecodeLimits::default()), Ok(f));
    }

    #[test]
    fn filter_string_roundtrip(f in filter(true)) {
        let text = f.to_string();
        prop_assert_eq!(Filter::parse(&text), Ok(f), "text: {}", text);
    }

    /// An entry written attribute by attribute, with attributes whose filtered values came
    /// out empty skipped by `attribute_if_any`, is the message holding the others.
    #[test]
    fn entry_writer_skips_attributes_left_without_values(
        id in 0..=i32::MAX,
        dn in bytes(),
        attrs in vec(attribute(), 0..4),
        long in vec(any::<u8>(), 0..400),
    ) {
        let mut streamed = Vec::new();
        let mut e = EntryWriter::start(&mut streamed, Some(id), &dn);
        let mut kept = Vec::new();
        for a in &attrs {
            let values = a.values.iter().map(|v| &v[..]);
            if e.attribute_if_any(&a.name, values) {
                kept.push(a.clone());
            }
            prop_assert!(!e.attribute_if_any(b"skipped", std::iter::empty()));
        }
        e.attribute(b"description", [&long[..]]);
        kept.push(PartialAttribute { name: Cow::Borrowed(b"description"), values: vec![Cow::Borrowed(&long[..])] });
        e.finish(&[]);
        prop_assert!(kept.iter().all(|a| !a.values.is_empty()));
        let msg = LdapMessage {
            id,
            op: ProtocolOp::SearchResultEntry { dn: dn.clone(), attributes: kept },
            controls: vec![],
        };
        prop_assert_eq!(&streamed, &msg.to_vec());
    }

    #[test]
    fn streaming_encoders_match_message_encode(
        id in 0..=i32::MAX,
        dn in bytes(),
        attrs in vec(attribute(), 0..4),
        result in ldap_result(),
        oid in option::of(bytes()),
        val in option::of(bytes()),
    ) {
        let mut streamed = Vec::new();
        encode_search_entry(
            &mut streamed,
            id,
            &dn,
            attrs.iter().map(|a| (&a.name[..], a.values.iter().map(|v| &v[..]))),
        );
        let msg = LdapMessage {
            id,
            op: ProtocolOp::SearchResultEntry { dn: dn.clone(), attributes: attrs.clone() },
            controls: vec![],
        };
        prop_assert_eq!(&streamed, &msg.to_vec());

        // With response controls: the same as a message carrying them, and it decodes back.
        let ctl = Control {
            oid: Cow::Borrowed(proto::oids::ENTRY_CHANGE_NOTIFICATION.as_bytes()),
            critical: false,
            value: val.clone(),
        };
        let mut streamed = Vec::new();
        encode_search_entry_with_controls(
            &mut streamed,
            id,
            &dn,
            attrs.iter().map(|a| (&a.name[..], a.values.iter().map(|v| &v[..]))),
            std::slice::from_ref(&ctl),
        );
        let msg = LdapMessage { controls: vec![ctl], ..msg };
        prop_assert_eq!(&streamed, &msg.to_vec());
        let decoded = LdapMessage::decode(&streamed);
        prop_assert_eq!(decoded.as_ref(), Ok(&msg));

        let mut streamed = Vec::new();
        encode_result(&mut streamed, id, tags::SEARCH_RESULT_DONE, &result);
        let msg = LdapMessage { id, op: ProtocolOp::SearchResultDone(result.clone()), controls: vec![] };
        prop_assert_eq!(&streamed, &msg.to_vec());

        let mut streamed = Vec::new();
        encode_extended_response(&mut streamed, id, &result, oid.as_deref(), val.as_deref());
        let msg = LdapMessage {
            id,
            op: ProtocolOp::ExtendedResponse(ExtendedResponse { result, oid, value: val }),
            controls: vec![],
        };
        prop_assert_eq!(&streamed, &msg.to_vec());
    }

    #[test]
    fn decode_never_panics(pdu in vec(any::<u8>(), 0..80)) {
        let _ = LdapMessage::decode(&pdu);
        let _ = frame(&pdu, 1000);
    }

    #[test]
    fn mutated_messages_never_panic(msg in message(), pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut pdu = msg.to_vec();
        let i = pos.index(pdu.len());
        pdu[i] = byte;
        let _ = LdapMessage::decode(&pdu);
    }

    #[test]
    fn filter_parse_never_panics(
        s in "[()&|!=*~<>:a-c\\\\0-9 ]{0,30}|\\(?[a-c]{1,2}(=|:=|:dn:=)[*a-c\\\\]{0,6}\\)?"
    ) {
        if let Ok(f) = Filter::parse(&s) {
            // Whatever parses prints to something that parses to the same filter...
            let again = Filter::parse(&f.to_string());
            prop_assert_eq!(again.as_ref(), Ok(&f));
            // ... and survives the wire.
            let mut wire = Vec::new();
            f.encode(&mut wire);
            prop_assert_eq!(Filter::decode(&wire, &DecodeLimits::default()), Ok(f));
        }
    }
}
