//! PDUs captured from OpenLDAP's command-line clients (see `vectors/capture.py`): each must
//! decode, carry the fields the client was asked to send, and re-encode to identical bytes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use proto::*;
use std::borrow::Cow;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn load(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("reading vector {name}: {e}"))
}

fn b(s: &str) -> Cow<'_, [u8]> {
    Cow::Borrowed(s.as_bytes())
}

#[test]
fn every_vector_decodes_and_reencodes_identically() {
    let mut count = 0;
    for entry in std::fs::read_dir(dir()).expect("vectors dir") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("bin") {
            continue;
        }
        let pdu = std::fs::read(&path).expect("read vector");
        assert_eq!(
            frame(&pdu, 1 << 20),
            Ok(Some(pdu.len())),
            "{}",
            path.display()
        );
        let msg = LdapMessage::decode(&pdu).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let expected_tag = match name.rsplit('_').next() {
            Some("bind.bin") => tags::BIND_REQUEST,
            Some("unbind.bin") => tags::UNBIND_REQUEST,
            Some("search.bin") => tags::SEARCH_REQUEST,
            Some("add.bin") => tags::ADD_REQUEST,
            Some("modify.bin") => tags::MODIFY_REQUEST,
            Some("delete.bin") => tags::DEL_REQUEST,
            Some("moddn.bin") => tags::MODIFY_DN_REQUEST,
            Some("compare.bin") => tags::COMPARE_REQUEST,
            Some("extended.bin") => tags::EXTENDED_REQUEST,
            other => panic!("unexpected vector name {other:?}"),
        };
        assert_eq!(msg.op.tag(), expected_tag, "{name}");
        assert!(msg.op.is_request());
        let mut out = Vec::new();
        msg.encode(&mut out);
        assert_eq!(out, pdu, "{name} re-encodes differently");
        count += 1;
    }
    assert!(count >= 27, "only {count} vectors found");
}

#[test]
fn search_vector() {
    let pdu = load("search.1_search.bin");
    let msg = LdapMessage::decode(&pdu).expect("decode");
    assert_eq!(msg.id, 2);
    let ProtocolOp::SearchRequest(s) = &msg.op else {
        panic!("not a search: {:?}", msg.op)
    };
    assert_eq!(s.base, b("dc=example,dc=com"));
    assert_eq!(s.scope, Scope::Subtree);
    assert_eq!(s.attributes, vec![b("cn"), b("mail")]);
    assert_eq!(s.filter.to_string(), "(&(uid=a*b)(!(cn=x)))");
    assert_eq!(
        s.filter,
        Filter::parse("(&(uid=a*b)(!(cn=x)))").expect("parse")
    );
    assert!(
        matches!(s.base, Cow::Borrowed(_)),
        "decoded fields borrow from the PDU"
    );
}

#[test]
fn search_filters_vector() {
    let pdu = load("search_filters.1_search.bin");
    let msg = LdapMessage::decode(&pdu).expect("decode");
    let ProtocolOp::SearchRequest(s) = &msg.op else {
        panic!("not a search")
    };
    assert_eq!(s.scope, Scope::One);
    assert_eq!((s.size_limit, s.time_limit, s.types_only), (5, 7, true));
    assert_eq!(
        s.filter.to_string(),
        "(|(cn:dn:2.5.13.5:=John)(sn~=sm\\2aith)(age>=3)(age<=9)(objectClass=*)\
         (:caseExactMatch:=x)(cn;lang-en=*a*b*c)(&))"
    );
    let oids: Vec<_> = msg.controls.iter().map(|c| c.oid.clone()).collect();
    assert_eq!(oids, vec![b(oids::MANAGE_DSA_IT), b(oids::PAGED_RESULTS)]);
    assert!(msg.controls.iter().all(|c| !c.critical));
}

#[test]
fn bind_and_whoami_vectors() {
    let pdu = load("whoami.0_bind.bin");
    let msg = LdapMessage::decode(&pdu).expect("decode");
    assert_eq!(msg.id, 1);
    assert_eq!(
        msg.op,
        ProtocolOp::BindRequest(BindRequest {
            version: 3,
            name: b("cn=admin,dc=example,dc=com"),
            auth: BindAuth::Simple(b("secret")),
        })
    );
    let pdu = load("whoami.1_extended.bin");
    let msg = LdapMessage::decode(&pdu).expect("decode");
    assert_eq!(
        msg.op,
        ProtocolOp::ExtendedRequest(ExtendedRequest {
            oid: b(oids::WHO_AM_I),
            value: None
        })
    );
    let pdu = load("search.0_bind.bin");
    let msg = LdapMessage::decode(&pdu).expect("decode");
    let ProtocolOp::BindRequest(bind) = msg.op else {
        panic!("not a bind")
    };
    assert_eq!((bind.name, bind.auth), (b(""), BindAuth::Simple(b(""))));
}

#[test]
fn update_vectors() {
    let pdu = load("add.1_add.bin");
    let ProtocolOp::AddRequest(add) = LdapMessage::decode(&pdu).expect("decode").op else {
        panic!("not an add")
    };
    assert_eq!(add.dn, b("cn=foo,dc=example,dc=com"));
    let names: Vec<_> = add.attributes.iter().map(|a| a.name.clone()).collect();
    assert_eq!(
        names,
        vec![b("objectClass"), b("cn"), b("sn"), b("description")]
    );
    assert_eq!(add.attributes[3].values[0].len(), 220);

    let pdu = load("modify.1_modify.bin");
    let ProtocolOp::ModifyRequest(m) = LdapMessage::decode(&pdu).expect("decode").op else {
        panic!("not a modify")
    };
    let ops: Vec<_> = m.changes.iter().map(|c| c.op).collect();
    assert_eq!(ops, vec![ModOp::Add, ModOp::Delete, ModOp::Replace]);
    assert_eq!(
        m.changes[0].attr.values,
        vec![b("a@example.com"), b("b@example.com")]
    );
    assert!(m.changes[1].attr.values.is_empty());

    let pdu = load("delete.1_delete.bin");
    let msg = LdapMessage::decode(&pdu).expect("decode");
    assert_eq!(
        msg.op,
        ProtocolOp::DelRequest(b("cn=foo,dc=example,dc=com"))
    );

    let pdu = load("moddn.1_moddn.bin");
    let msg = LdapMessage::decode(&pdu).expect("decode");
    assert_eq!(
        msg.op,
        ProtocolOp::ModifyDnRequest(ModifyDnRequest {
            dn: b("cn=foo,dc=example,dc=com"),
            new_rdn: b("cn=bar"),
            delete_old_rdn: true,
            new_superior: Some(b("ou=new,dc=example,dc=com")),
        })
    );

    let pdu = load("compare.1_compare.bin");
    let msg = LdapMessage::decode(&pdu).expect("decode");
    assert_eq!(
        msg.op,
        ProtocolOp::CompareRequest(CompareRequest {
            dn: b("cn=foo,dc=example,dc=com"),
            attr: b("sn"),
            value: b("Smith"),
        })
    );

    let pdu = load("add.2_unbind.bin");
    assert_eq!(
        LdapMessage::decode(&pdu).expect("decode").op,
        ProtocolOp::UnbindRequest
    );
}

#[test]
fn passwd_vector() {
    let pdu = load("passwd.1_extended.bin");
    let msg = LdapMessage::decode(&pdu).expect("decode");
    let ProtocolOp::ExtendedRequest(ext) = &msg.op else {
        panic!("not extended")
    };
    assert_eq!(ext.oid, b(oids::PASSWORD_MODIFY));
    let req = PasswdModifyRequest::decode(ext.value.as_deref().unwrap_or_default())
        .expect("passwd value");
    assert_eq!(req.user_identity, Some(b("uid=u,dc=example,dc=com")));
    assert_eq!(req.old_passwd, Some(b("old")));
    assert_eq!(req.new_passwd, Some(b("new")));
    let mut again = Vec::new();
    req.encode(&mut again);
    assert_eq!(Some(&again[..]), ext.value.as_deref());
}
