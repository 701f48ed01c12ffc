//! The write path over a real socket: entryCSN stamps in OpenLDAP's form with the configured
//! `server_id`, and the pre-read and post-read controls (RFC 4527) decoded from the raw
//! response controls (the value is a bare SearchResultEntry).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;

use common::raw::{base_search, control, RawClient, Response};
use common::{TestServer, ADMIN_DN, ADMIN_PW, BASE};
use proto::{oids, tags, ProtocolOp, ResultCode};

/// A decoded read-entry response: DN and attributes (description, values), in order.
type ReadEntry = (String, Vec<(String, Vec<String>)>);

/// The request value of a pre-read or post-read control: an AttributeSelection.
fn read_control(oid: &str, critical: bool, attrs: &[&str]) -> proto::Control<'static> {
    let mut v = Vec::new();
    let mut w = ber::Writer::new(&mut v);
    let m = w.start(0x30);
    for a in attrs {
        w.write_octets(0x04, a.as_bytes());
    }
    w.end(m);
    control(oid, critical, Some(v))
}

/// Decodes a bare SearchResultEntry (`[APPLICATION 4] { dn, SEQUENCE OF attribute }`).
fn decode_entry(value: &[u8]) -> ReadEntry {
    let mut outer = ber::Reader::new(value);
    let mut e = outer
        .sub(tags::constructed(tags::SEARCH_RESULT_ENTRY))
        .expect("a SearchResultEntry");
    outer.finish().expect("nothing after the entry");
    let dn = String::from_utf8(e.read_octets(0x04).expect("dn").to_vec()).expect("UTF-8 DN");
    let mut list = e.sub(0x30).expect("attribute list");
    e.finish().expect("nothing after the attributes");
    let mut attrs = Vec::new();
    while !list.is_empty() {
        let mut a = list.sub(0x30).expect("attribute");
        let name = String::from_utf8(a.read_octets(0x04).expect("type").to_vec()).unwrap();
        let mut vals = a.sub(0x31).expect("values");
        let mut values = Vec::new();
        while !vals.is_empty() {
            values.push(String::from_utf8(vals.read_octets(0x04).unwrap().to_vec()).unwrap());
        }
        attrs.push((name, values));
    }
    (dn, attrs)
}

/// The decoded pre-read (or post-read) control of a response; panics when absent.
fn read_entry(r: &Response, oid: &str) -> ReadEntry {
    let v = r
        .control(oid)
        .unwrap_or_else(|| panic!("response control {oid}: {r:?}"))
        .clone()
        .expect("a value");
    decode_entry(&v)
}

/// The values of `name` (case-insensitive) in a decoded entry.
fn values<'e>(e: &'e ReadEntry, name: &str) -> Option<&'e [String]> {
    e.1.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
}

fn one(e: &ReadEntry, name: &str) -> String {
    let v = values(e, name).unwrap_or_else(|| panic!("{name} in {e:?}"));
    assert_eq!(v.len(), 1, "{name}: {v:?}");
    v[0].clone()
}

/// Checks OpenLDAP's CSN form `YYYYmmddHHMMSS.ffffffZ#cccccc#sss#mmmmmm` and returns the sid.
fn csn_sid(csn: &str) -> String {
    let parts: Vec<&str> = csn.split('#').collect();
    assert_eq!(parts.len(), 4, "{csn}");
    let (time, count, sid, modn) = (parts[0], parts[1], parts[2], parts[3]);
    assert_eq!(time.len(), 22, "{csn}");
    assert!(time[..14].bytes().all(|b| b.is_ascii_digit()), "{csn}");
    assert_eq!(&time[14..15], ".", "{csn}");
    assert!(time[15..21].bytes().all(|b| b.is_ascii_digit()), "{csn}");
    assert_eq!(&time[21..], "Z", "{csn}");
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    assert!(hex(count, 6) && hex(sid, 3), "{csn}");
    assert_eq!(modn, "000000", "{csn}");
    sid.to_string()
}

fn attr(name: &str, values: &[&str]) -> proto::PartialAttribute<'static> {
    proto::PartialAttribute {
        name: Cow::Owned(name.as_bytes().to_vec()),
        values: values
            .iter()
            .map(|v| Cow::Owned(v.as_bytes().to_vec()))
            .collect(),
    }
}

fn add_person(uid: &str, password: Option<&str>) -> ProtocolOp<'static> {
    let mut attributes = vec![
        attr("objectClass", &["inetOrgPerson"]),
        attr("uid", &[uid]),
        attr("cn", &[&format!("{uid} Person")]),
        attr("sn", &["Person"]),
    ];
    if let Some(pw) = password {
        attributes.push(attr("userPassword", &[pw]));
    }
    ProtocolOp::AddRequest(proto::AddRequest {
        dn: Cow::Owned(format!("uid={uid},{BASE}").into_bytes()),
        attributes,
    })
}

fn replace(dn: &str, name: &str, vals: &[&str]) -> ProtocolOp<'static> {
    ProtocolOp::ModifyRequest(proto::ModifyRequest {
        dn: Cow::Owned(dn.as_bytes().to_vec()),
        changes: vec![proto::Change {
            op: proto::ModOp::Replace,
            attr: attr(name, vals),
        }],
    })
}

/// Sends `op` with `controls` and returns its response, checking its result code.
fn call(
    c: &mut RawClient,
    id: i32,
    op: ProtocolOp<'_>,
    controls: Vec<proto::Control<'_>>,
    want: ResultCode,
) -> Response {
    c.send(id, op, controls);
    let r = c.recv();
    assert_eq!(r.id, id);
    assert_eq!(r.code, Some(want), "{r:?}");
    r
}

/// The stored values of `name` in entry `dn`, by a base search.
fn stored(c: &mut RawClient, id: i32, dn: &str, name: &str) -> Vec<String> {
    c.send(id, base_search(dn, &[name]), vec![]);
    let rs = c.recv_until_done(id);
    assert_eq!(rs.len(), 2, "{rs:?}");
    assert_eq!(rs[1].code, Some(ResultCode::Success));
    rs[0]
        .attrs
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| {
            v.iter()
                .map(|x| String::from_utf8(x.clone()).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn entry_csn_carries_the_configured_server_id_and_grows_with_each_change() {
    let srv = TestServer::start_with(|c| c.server_id = 5);
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    let dn = format!("uid=csn,{BASE}");

    let r = call(
        &mut c,
        2,
        add_person("csn", None),
        vec![read_control(oids::POST_READ, true, &["entryCSN"])],
        ResultCode::Success,
    );
    assert!(r.control(oids::PRE_READ).is_none(), "no pre-read asked");
    let added = one(&read_entry(&r, oids::POST_READ), "entryCSN");
    assert_eq!(csn_sid(&added), "005");
    assert!(added.ends_with("#005#000000"), "{added}");
    assert_eq!(stored(&mut c, 3, &dn, "entryCSN"), vec![added.clone()]);

    let mut last = added;
    for (i, id) in [(1, 4), (2, 6)] {
        let r = call(
            &mut c,
            id,
            replace(&dn, "description", &[&format!("change {i}")]),
            vec![
                read_control(oids::PRE_READ, true, &["entryCSN"]),
                read_control(oids::POST_READ, true, &["entryCSN", "description"]),
            ],
            ResultCode::Success,
        );
        let pre = read_entry(&r, oids::PRE_READ);
        let post = read_entry(&r, oids::POST_READ);
        assert_eq!(one(&pre, "entryCSN"), last, "pre-read shows the CSN before");
        let now = one(&post, "entryCSN");
        assert!(now.ends_with("#005#000000"), "{now}");
        assert!(now > last, "{now} after {last}");
        assert_eq!(one(&post, "description"), format!("change {i}"));
        assert_eq!(stored(&mut c, id + 1, &dn, "entryCSN"), vec![now.clone()]);
        last = now;
    }
}

#[test]
fn the_default_server_id_is_zero() {
    let srv = TestServer::start(false);
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    call(
        &mut c,
        2,
        add_person("zero", None),
        vec![],
        ResultCode::Success,
    );
    let csn = stored(&mut c, 3, &format!("uid=zero,{BASE}"), "entryCSN");
    assert_eq!(csn.len(), 1);
    assert_eq!(csn_sid(&csn[0]), "000");
}

#[test]
fn read_entry_values_are_bare_search_result_entries() {
    let srv = TestServer::start(false);
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    let dn = format!("uid=bare,{BASE}");
    call(
        &mut c,
        2,
        add_person("bare", None),
        vec![],
        ResultCode::Success,
    );
    let r = call(
        &mut c,
        3,
        replace(&dn, "sn", &["After"]),
        vec![
            read_control(oids::PRE_READ, true, &["sn"]),
            read_control(oids::POST_READ, false, &["sn"]),
        ],
        ResultCode::Success,
    );
    assert_eq!(r.tag, tags::MODIFY_RESPONSE);
    for (oid, sn) in [(oids::PRE_READ, "Person"), (oids::POST_READ, "After")] {
        let mut want = Vec::new();
        proto::encode_search_entry_op(&mut want, dn.as_bytes(), [(&b"sn"[..], [sn.as_bytes()])]);
        let got = r.control(oid).unwrap().clone().unwrap();
        assert_eq!(got, want, "{oid}");
    }
}

#[test]
fn pre_read_on_delete_and_modify_dn_post_read_on_add_and_modify_dn() {
    let srv = TestServer::start(false);
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    let old = format!("uid=mover,{BASE}");
    let new = format!("uid=moved,{BASE}");

    let r = call(
        &mut c,
        2,
        add_person("mover", None),
        vec![read_control(
            oids::POST_READ,
            true,
            &["*", "creatorsName", "entryDN"],
        )],
        ResultCode::Success,
    );
    let post = read_entry(&r, oids::POST_READ);
    assert_eq!(post.0, old);
    assert_eq!(one(&post, "uid"), "mover");
    assert_eq!(one(&post, "sn"), "Person");
    assert_eq!(one(&post, "creatorsName"), ADMIN_DN);
    assert_eq!(one(&post, "entryDN"), old);
    assert!(values(&post, "entryCSN").is_none(), "not asked for");

    let r = call(
        &mut c,
        3,
        ProtocolOp::ModifyDnRequest(proto::ModifyDnRequest {
            dn: Cow::Owned(old.as_bytes().to_vec()),
            new_rdn: Cow::Borrowed(b"uid=moved"),
            delete_old_rdn: true,
            new_superior: None,
        }),
        vec![
            read_control(oids::PRE_READ, true, &["uid", "entryDN"]),
            read_control(oids::POST_READ, true, &["uid", "entryDN", "modifiersName"]),
        ],
        ResultCode::Success,
    );
    let pre = read_entry(&r, oids::PRE_READ);
    let post = read_entry(&r, oids::POST_READ);
    assert_eq!(
        (pre.0.as_str(), post.0.as_str()),
        (old.as_str(), new.as_str())
    );
    assert_eq!(one(&pre, "uid"), "mover");
    assert_eq!(one(&post, "uid"), "moved");
    assert_eq!(one(&pre, "entryDN"), old);
    assert_eq!(one(&post, "entryDN"), new);
    assert_eq!(one(&post, "modifiersName"), ADMIN_DN);

    let r = call(
        &mut c,
        4,
        ProtocolOp::DelRequest(Cow::Owned(new.as_bytes().to_vec())),
        vec![
            read_control(oids::PRE_READ, true, &["1.1"]),
            read_control(oids::POST_READ, false, &["*"]),
        ],
        ResultCode::Success,
    );
    let pre = read_entry(&r, oids::PRE_READ);
    assert_eq!(pre, (new.clone(), vec![]), "'1.1': the name only");
    assert!(
        r.control(oids::POST_READ).is_none(),
        "nothing after a delete"
    );
}

#[test]
fn read_entry_is_refused_where_it_does_not_apply_and_absent_when_the_change_fails() {
    let srv = TestServer::start(false);
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    // Pre-read on an add: ignored when not critical, unavailableCriticalExtension when it is.
    let r = call(
        &mut c,
        2,
        add_person("a1", None),
        vec![read_control(oids::PRE_READ, false, &["*"])],
        ResultCode::Success,
    );
    assert!(r.controls.is_empty(), "{r:?}");
    call(
        &mut c,
        3,
        add_person("a2", None),
        vec![read_control(oids::PRE_READ, true, &["*"])],
        ResultCode::UnavailableCriticalExtension,
    );
    c.send(4, base_search(&format!("uid=a2,{BASE}"), &["uid"]), vec![]);
    let rs = c.recv_until_done(4);
    assert_eq!(
        rs.last().unwrap().code,
        Some(ResultCode::NoSuchObject),
        "not added"
    );
    // A change that fails returns no read-entry control.
    let r = call(
        &mut c,
        5,
        replace(&format!("uid=absent,{BASE}"), "sn", &["x"]),
        vec![
            read_control(oids::PRE_READ, true, &["sn"]),
            read_control(oids::POST_READ, true, &["sn"]),
        ],
        ResultCode::NoSuchObject,
    );
    assert!(r.controls.is_empty(), "{r:?}");
}

#[test]
fn a_critical_read_entry_naming_an_undefined_type_refuses_the_change() {
    let srv = TestServer::start(false);
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    let dn = format!("uid=undef,{BASE}");
    call(
        &mut c,
        2,
        add_person("undef", None),
        vec![],
        ResultCode::Success,
    );
    for (id, oid) in [(3, oids::PRE_READ), (4, oids::POST_READ)] {
        call(
            &mut c,
            id,
            replace(&dn, "sn", &["Refused"]),
            vec![read_control(oid, true, &["sn", "noSuchType"])],
            ResultCode::UndefinedAttributeType,
        );
    }
    assert_eq!(stored(&mut c, 5, &dn, "sn"), vec!["Person".to_string()]);
    // Not critical: the unknown name is ignored and the change is made.
    let r = call(
        &mut c,
        6,
        replace(&dn, "sn", &["Made"]),
        vec![read_control(oids::POST_READ, false, &["sn", "noSuchType"])],
        ResultCode::Success,
    );
    let post = read_entry(&r, oids::POST_READ);
    assert_eq!(post.1, vec![("sn".to_string(), vec!["Made".to_string()])]);
}

#[test]
fn a_user_reads_back_their_own_entry_without_user_password() {
    let srv = TestServer::start(false);
    let mut admin = RawClient::connect(srv.addr);
    admin.bind(1, ADMIN_DN, ADMIN_PW);
    let dn = format!("uid=owner,{BASE}");
    call(
        &mut admin,
        2,
        add_person("owner", Some("first-pw")),
        vec![],
        ResultCode::Success,
    );
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, &dn, "first-pw");
    let r = call(
        &mut c,
        2,
        replace(&dn, "userPassword", &["second-pw"]),
        vec![
            read_control(oids::PRE_READ, true, &["*", "userPassword"]),
            read_control(
                oids::POST_READ,
                true,
                &["*", "userPassword", "modifiersName"],
            ),
        ],
        ResultCode::Success,
    );
    for oid in [oids::PRE_READ, oids::POST_READ] {
        let e = read_entry(&r, oid);
        assert_eq!(e.0, dn);
        assert_eq!(one(&e, "uid"), "owner");
        assert!(values(&e, "userPassword").is_none(), "{oid}: {e:?}");
    }
    assert_eq!(one(&read_entry(&r, oids::POST_READ), "modifiersName"), dn);
    // The administrator reads it (hashed).
    let r = call(
        &mut admin,
        3,
        replace(&dn, "description", &["x"]),
        vec![read_control(oids::POST_READ, true, &["userPassword"])],
        ResultCode::Success,
    );
    assert!(one(&read_entry(&r, oids::POST_READ), "userPassword").starts_with('{'));
    RawClient::connect(srv.addr).bind(1, &dn, "second-pw");
}

/// The writer answers committed writes from its own thread, queueing each response on its
/// connection without waiting; when the connection's response budget is full it hands the
/// answer to a task that waits for room. With a budget of one response (1 KiB) most answers of
/// a pipelined run take that second way: every one still arrives, once, with its message id,
/// and the changes are all applied in order.
#[test]
fn pipelined_writes_are_all_answered_when_the_response_budget_is_full() {
    const N: i32 = 300;
    let srv = TestServer::start_with(|c| {
        c.demo = true;
        c.max_buffered_bytes = 1024;
    });
    let mut c = RawClient::connect(srv.addr);
    c.bind(1, ADMIN_DN, ADMIN_PW);
    let dn = format!("uid=alice,ou=people,{BASE}");
    let requests: Vec<u8> = (0..N)
        .flat_map(|i| {
            proto::LdapMessage {
                id: 2 + i,
                op: replace(&dn, "description", &[&format!("change {i}")]),
                controls: vec![],
            }
            .to_vec()
        })
        .collect();
    // Sent from another thread, so that a server answering while requests are still being
    // written cannot deadlock the test on full socket buffers.
    let mut w = c.stream.try_clone().expect("clone socket");
    let sender = std::thread::spawn(move || std::io::Write::write_all(&mut w, &requests));
    let mut seen = vec![false; N as usize];
    for _ in 0..N {
        let r = c.recv();
        assert_eq!(r.tag, tags::MODIFY_RESPONSE, "{r:?}");
        assert_eq!(r.code, Some(ResultCode::Success), "{r:?}");
        let i = usize::try_from(r.id - 2).expect("a modify's id");
        assert!(!seen[i], "message {} answered twice", r.id);
        seen[i] = true;
    }
    sender.join().expect("sender").expect("send");
    assert_eq!(
        stored(&mut c, N + 2, &dn, "description"),
        [format!("change {}", N - 1)]
    );
}
