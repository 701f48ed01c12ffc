//! Requests built to make the server work hard: many repeated attributes, huge value lists,
//! too many controls or requested attributes. Each is answered with the right code, cheaply,
//! while other clients keep being served.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;

use common::raw::{base_search, control, RawClient};
use common::{TestServer, ADMIN_DN, ADMIN_PW, BASE};
use proto::{AddRequest, PartialAttribute, ProtocolOp, ResultCode};

/// An add of `uid=NAME` with `repeats` separate `description` attributes of one value each.
fn repeated_add(name: &str, repeats: usize) -> ProtocolOp<'static> {
    let mut attributes = vec![
        PartialAttribute {
            name: Cow::Borrowed(b"objectClass"),
            values: vec![Cow::Borrowed(b"inetOrgPerson")],
        },
        PartialAttribute {
            name: Cow::Borrowed(b"cn"),
            values: vec![Cow::Borrowed(b"x")],
        },
        PartialAttribute {
            name: Cow::Borrowed(b"sn"),
            values: vec![Cow::Borrowed(b"x")],
        },
    ];
    for i in 0..repeats {
        attributes.push(PartialAttribute {
            name: Cow::Borrowed(b"description"),
            values: vec![Cow::Owned(format!("d{i}").into_bytes())],
        });
    }
    ProtocolOp::AddRequest(AddRequest {
        dn: Cow::Owned(format!("uid={name},{BASE}").into_bytes()),
        attributes,
    })
}

fn search_base(c: &mut RawClient, id: i32, base: &str) -> Option<ResultCode> {
    c.send(id, base_search(base, &[]), vec![]);
    c.recv_until_done(id).last().and_then(|r| r.code)
}

#[test]
fn anonymous_add_of_50000_repeated_attributes_is_refused_and_others_are_served() {
    // The request is about 1 MiB: over the limit of a connection that has not bound (a Notice
    // of Disconnection from its header, tested in connection_limits.rs). Raised here to see
    // how an anonymous add of that size is answered.
    let srv = TestServer::start_with(|c| c.max_pdu_size_anonymous = c.max_pdu_size);
    let mut other = RawClient::connect(srv.addr);
    other.bind(1, ADMIN_DN, ADMIN_PW);

    let mut hostile = RawClient::connect(srv.addr);
    hostile.send(1, repeated_add("hostile", 50_000), vec![]);
    // The other client is answered while (or after) the hostile PDU is handled; the order of
    // the two does not matter, both must come.
    assert_eq!(search_base(&mut other, 2, BASE), Some(ResultCode::Success));
    let r = hostile.recv();
    assert_eq!(r.id, 1);
    assert_eq!(r.code, Some(ResultCode::StrongerAuthRequired), "{r:?}");
    // The connection stays usable.
    assert_eq!(search_base(&mut hostile, 2, ""), Some(ResultCode::Success));
    assert_eq!(search_base(&mut other, 3, BASE), Some(ResultCode::Success));
}

#[test]
fn authenticated_adds_with_many_repeats_or_values_are_linear_and_limited() {
    let srv = TestServer::start(false);
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    // 9,000 repeated attributes (under max_attributes_per_request): joined into one
    // attribute of 9,000 values. Quadratic joining took minutes for this; it is now linear.
    c.send(2, repeated_add("many", 9_000), vec![]);
    let r = c.recv();
    assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
    c.send(
        3,
        base_search(&format!("uid=many,{BASE}"), &["description"]),
        vec![],
    );
    let rs = c.recv_until_done(3);
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[0].attrs[0].1.len(), 9_000);

    // Over the limit: adminLimitExceeded, nothing added.
    c.send(4, repeated_add("toomany", 10_001), vec![]);
    let r = c.recv();
    assert_eq!(r.code, Some(ResultCode::AdminLimitExceeded), "{r:?}");
    assert!(r.message.contains("max_attributes_per_request"), "{r:?}");
    assert_eq!(
        search_base(&mut c, 5, &format!("uid=toomany,{BASE}")),
        Some(ResultCode::NoSuchObject)
    );

    // A repeat far down a long list is still found, and named by its position.
    let mut op = repeated_add("dup", 5_000);
    if let ProtocolOp::AddRequest(a) = &mut op {
        a.attributes.push(PartialAttribute {
            name: Cow::Borrowed(b"DESCRIPTION"),
            values: vec![Cow::Borrowed(b"D17")],
        });
    }
    c.send(6, op, vec![]);
    let r = c.recv();
    assert_eq!(r.code, Some(ResultCode::AttributeOrValueExists), "{r:?}");
    assert!(r.message.contains("value #5000"), "{r:?}");

    // One attribute with 200,000 values: accepted (a big group), in linear time.
    let values: Vec<Cow<'static, [u8]>> = (0..200_000)
        .map(|i| Cow::Owned(format!("v{i}").into_bytes()))
        .collect();
    let add = |dn: &str, values: Vec<Cow<'static, [u8]>>| {
        ProtocolOp::AddRequest(AddRequest {
            dn: Cow::Owned(format!("{dn},{BASE}").into_bytes()),
            attributes: vec![
                PartialAttribute {
                    name: Cow::Borrowed(b"objectClass"),
                    values: vec![Cow::Borrowed(b"inetOrgPerson")],
                },
                PartialAttribute {
                    name: Cow::Borrowed(b"cn"),
                    values: vec![Cow::Borrowed(b"x")],
                },
                PartialAttribute {
                    name: Cow::Borrowed(b"sn"),
                    values: vec![Cow::Borrowed(b"x")],
                },
                PartialAttribute {
                    name: Cow::Borrowed(b"description"),
                    values,
                },
            ],
        })
    };
    c.send(7, add("uid=big", values.clone()), vec![]);
    assert_eq!(c.recv().code, Some(ResultCode::Success));
    // The same values with one repeated at the very end.
    let mut dup = values;
    dup.push(Cow::Borrowed(b"V4"));
    c.send(8, add("uid=bigdup", dup), vec![]);
    let r = c.recv();
    assert_eq!(r.code, Some(ResultCode::AttributeOrValueExists), "{r:?}");
    assert!(r.message.contains("value #200000"), "{r:?}");
}

#[test]
fn limits_on_values_controls_and_requested_attributes() {
    let srv = TestServer::start_with(|c| {
        c.max_values_per_attribute = 100;
        c.max_controls_per_request = 4;
        c.max_requested_attributes = 10;
    });
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    c.send(2, repeated_add("hundred", 100), vec![]);
    assert_eq!(c.recv().code, Some(ResultCode::Success));
    c.send(3, repeated_add("more", 101), vec![]);
    let r = c.recv();
    assert_eq!(r.code, Some(ResultCode::AdminLimitExceeded), "{r:?}");
    assert!(r.message.contains("max_values_per_attribute"), "{r:?}");
    // A modify adding one more value to the 100 the entry has: over the limit too.
    c.send(
        4,
        ProtocolOp::ModifyRequest(proto::ModifyRequest {
            dn: Cow::Owned(format!("uid=hundred,{BASE}").into_bytes()),
            changes: vec![proto::Change {
                op: proto::ModOp::Add,
                attr: PartialAttribute {
                    name: Cow::Borrowed(b"description"),
                    values: vec![Cow::Borrowed(b"one more")],
                },
            }],
        }),
        vec![],
    );
    let r = c.recv();
    assert_eq!(r.code, Some(ResultCode::AdminLimitExceeded), "{r:?}");

    // Five non-critical controls: refused without running; the connection goes on.
    let controls: Vec<_> = (0..5)
        .map(|i| control(&format!("1.2.3.{i}"), false, None))
        .collect();
    c.send(
        5,
        ProtocolOp::DelRequest(Cow::Owned(format!("uid=hundred,{BASE}").into_bytes())),
        controls,
    );
    let r = c.recv();
    assert_eq!(r.code, Some(ResultCode::AdminLimitExceeded), "{r:?}");
    assert!(r.message.contains("max_controls_per_request"), "{r:?}");
    assert_eq!(
        search_base(&mut c, 6, &format!("uid=hundred,{BASE}")),
        Some(ResultCode::Success),
        "the refused delete changed nothing"
    );

    let attrs: Vec<Cow<'static, [u8]>> = (0..11)
        .map(|i| Cow::Owned(format!("a{i}").into_bytes()))
        .collect();
    c.send(
        7,
        ProtocolOp::SearchRequest(proto::SearchRequest {
            base: Cow::Borrowed(BASE.as_bytes()),
            scope: proto::Scope::Base,
            deref: proto::DerefAliases::Never,
            size_limit: 0,
            time_limit: 0,
            types_only: false,
            filter: proto::Filter::Present(Cow::Borrowed(b"objectClass")),
            attributes: attrs,
        }),
        vec![],
    );
    let rs = c.recv_until_done(7);
    assert_eq!(rs.len(), 1, "no entries: {rs:?}");
    assert_eq!(rs[0].code, Some(ResultCode::AdminLimitExceeded));
}
