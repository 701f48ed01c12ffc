//! Replicated changes without a socket: entries as a provider sends them, applied in writer
//! jobs on an in-memory directory, as the consumer applies them (`repl::consumer::apply`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::collections::HashSet;
use std::sync::Arc;

use dit::acl::Acl;
use dit::entries::{attr, virtual_entry};
use dit::error::LdapResult;
use dit::{Dit, WriteLimits};
use proto::controls::sync::SyncCookie;
use proto::ResultCode;
use repl::consumer::apply::{self, Area, Incoming, Outcome};
use repl::consumer::spec::{ConsumerSpec, ProviderUrl};
use schema::{Dn, NormDn, Schema};
use store::{Store, Txn};

const SUFFIX: &str = "dc=example,dc=com";

fn norm(schema: &Schema, dn: &str) -> NormDn {
    Dn::parse(dn).unwrap().normalize(schema).unwrap()
}

fn directory() -> Arc<Dit> {
    let schema = Arc::new(Schema::builtin());
    let indexed = vec![schema.attr_by_name("entryUUID").unwrap()];
    let store = Store::new(schema.clone(), &indexed);
    let root_dse = virtual_entry(
        "",
        NormDn {
            norm: String::new(),
            rdns: Vec::new(),
        },
        vec![attr(&schema, "objectClass", &[b"top"])],
    );
    Arc::new(
        Dit::new(
            store,
            vec![norm(&schema, SUFFIX)],
            norm(&schema, "cn=admin,dc=example,dc=com"),
            Acl::compile(&schema, &dit::acl::default_policy()).unwrap(),
            root_dse,
            Vec::new(),
            9,
            WriteLimits {
                max_values_per_attribute: 0,
                max_attributes_per_request: 0,
                max_subtree_delete: 0,
            },
        )
        .unwrap(),
    )
}

fn area(dit: &Dit) -> Arc<Area> {
    let spec = ConsumerSpec::new(1, ProviderUrl::parse("ldap://127.0.0.1:1").unwrap(), SUFFIX);
    Arc::new(Area::new(dit, &spec).unwrap())
}

fn uuid(n: u8) -> String {
    format!("00000000-0000-4000-8000-0000000000{n:02x}")
}

fn csn(n: u32) -> String {
    format!("20261125000000.{n:06}Z#000000#001#000000")
}

/// An entry as slapd sends it with `*` and `+`: its operational attributes included, the
/// computed ones too.
fn incoming(dn: &str, n: u8, version: u32, user: &[(&str, &[&str])]) -> Incoming {
    let mut attrs: Vec<(String, Vec<Vec<u8>>)> = user
        .iter()
        .map(|(k, vs)| {
            (
                k.to_string(),
                vs.iter().map(|v| v.as_bytes().to_vec()).collect(),
            )
        })
        .collect();
    for (k, v) in [
        ("entryUUID", uuid(n)),
        ("creatorsName", "cn=admin,dc=example,dc=com".into()),
        ("createTimestamp", "20261125000000Z".into()),
        ("entryCSN", csn(version)),
        ("modifiersName", "cn=admin,dc=example,dc=com".into()),
        ("modifyTimestamp", format!("20261125{version:06}Z")),
        ("entryDN", dn.to_string()),
        ("subschemaSubentry", "cn=Subschema".into()),
        ("hasSubordinates", "FALSE".into()),
    ] {
        attrs.push((k.to_string(), vec![v.into_bytes()]));
    }
    Incoming {
        dn: dn.to_string(),
        uuid: uuid(n),
        attrs,
    }
}

fn suffix(version: u32) -> Incoming {
    incoming(
        SUFFIX,
        1,
        version,
        &[
            ("objectClass", &["top", "dcObject", "organization"]),
            ("dc", &["example"]),
            ("o", &["Example"]),
        ],
    )
}

fn ou(name: &str, n: u8) -> Incoming {
    incoming(
        &format!("ou={name},{SUFFIX}"),
        n,
        1,
        &[("objectClass", &["organizationalUnit"]), ("ou", &[name])],
    )
}

fn person(dn: &str, n: u8, version: u32, mail: &str) -> Incoming {
    let uid = dn.split([',', '=']).nth(1).unwrap().to_string();
    let uid: &str = &uid;
    incoming(
        dn,
        n,
        version,
        &[
            ("objectClass", &["inetOrgPerson"]),
            ("uid", &[uid]),
            ("cn", &[uid]),
            ("sn", &["Person"]),
            ("mail", &[mail]),
        ],
    )
}

fn write<R: Send + 'static>(
    dit: &Arc<Dit>,
    f: impl FnOnce(&Dit, &mut Txn) -> LdapResult<R> + Send + 'static,
) -> LdapResult<R> {
    let d = dit.clone();
    dit.store.write_blocking(move |txn| f(&d, txn)).unwrap()
}

fn put(dit: &Arc<Dit>, inc: Incoming) -> LdapResult<Outcome> {
    let a = area(dit);
    write(dit, move |d, txn| {
        apply::apply_entry(d, txn, &a, &inc).map(|(o, _)| o)
    })
}

fn value(dit: &Dit, dn: &str, attr: &str) -> Option<String> {
    let v = dit.store.read();
    let schema = v.schema().clone();
    let e = v.lookup(&norm(&schema, dn))?;
    let ty = schema.attr_by_name(attr).unwrap();
    e.attr(ty)
        .and_then(|a| a.first().map(|b| String::from_utf8_lossy(b).into_owned()))
}

#[test]
fn entries_keep_the_providers_identity_and_stamps() {
    let dit = directory();
    assert_eq!(put(&dit, suffix(1)).unwrap(), Outcome::Added);
    assert_eq!(put(&dit, ou("people", 2)).unwrap(), Outcome::Added);
    let dn = format!("uid=ann,ou=people,{SUFFIX}");
    assert_eq!(
        put(&dit, person(&dn, 3, 5, "ann@example.com")).unwrap(),
        Outcome::Added
    );
    assert_eq!(value(&dit, &dn, "entryUUID").unwrap(), uuid(3));
    assert_eq!(value(&dit, &dn, "entryCSN").unwrap(), csn(5));
    assert_eq!(
        value(&dit, &dn, "modifyTimestamp").unwrap(),
        "20261125000005Z"
    );
    assert_eq!(
        value(&dit, &dn, "creatorsName").unwrap(),
        "cn=admin,dc=example,dc=com"
    );
    assert_eq!(
        value(&dit, &dn, "structuralObjectClass").unwrap(),
        "inetOrgPerson"
    );
    // Computed types are not stored.
    assert!(value(&dit, &dn, "hasSubordinates").is_none());
}

#[test]
fn older_or_repeated_changes_change_nothing() {
    let dit = directory();
    put(&dit, suffix(1)).unwrap();
    put(&dit, ou("people", 2)).unwrap();
    let dn = format!("uid=ann,ou=people,{SUFFIX}");
    put(&dit, person(&dn, 3, 5, "new@example.com")).unwrap();
    // The same change again (a refresh after a restart), then an older one.
    assert_eq!(
        put(&dit, person(&dn, 3, 5, "new@example.com")).unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(
        put(&dit, person(&dn, 3, 4, "old@example.com")).unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(value(&dit, &dn, "mail").unwrap(), "new@example.com");
    // A newer one replaces every replicated attribute: sn and mail change, mail's old
    // value is gone.
    let mut newer = person(&dn, 3, 6, "newer@example.com");
    newer
        .attrs
        .push(("description".into(), vec![b"d".to_vec()]));
    assert_eq!(put(&dit, newer).unwrap(), Outcome::Replaced);
    assert_eq!(value(&dit, &dn, "mail").unwrap(), "newer@example.com");
    assert_eq!(value(&dit, &dn, "description").unwrap(), "d");
    assert_eq!(
        put(&dit, person(&dn, 3, 7, "x@example.com")).unwrap(),
        Outcome::Replaced
    );
    assert!(value(&dit, &dn, "description").is_none());
}

#[test]
fn renames_are_found_by_entry_uuid_with_their_subtree() {
    let dit = directory();
    put(&dit, suffix(1)).unwrap();
    put(&dit, ou("people", 2)).unwrap();
    put(&dit, ou("staff", 4)).unwrap();
    let old = format!("uid=ann,ou=people,{SUFFIX}");
    put(&dit, person(&old, 3, 5, "a@example.com")).unwrap();
    // A child of the entry, which moves with it.
    let child = incoming(
        &format!("cn=desk,{old}"),
        9,
        5,
        &[("objectClass", &["device"]), ("cn", &["desk"])],
    );
    assert_eq!(put(&dit, child).unwrap(), Outcome::Added);
    // Renamed and moved under ou=staff (newSuperior), uid changed with it.
    let new = format!("uid=anne,ou=staff,{SUFFIX}");
    assert_eq!(
        put(&dit, person(&new, 3, 6, "a@example.com")).unwrap(),
        Outcome::Renamed
    );
    assert!(value(&dit, &old, "uid").is_none());
    assert_eq!(value(&dit, &new, "uid").unwrap(), "anne");
    assert_eq!(value(&dit, &new, "entryUUID").unwrap(), uuid(3));
    assert_eq!(
        value(&dit, &format!("cn=desk,{new}"), "entryUUID").unwrap(),
        uuid(9)
    );
}

#[test]
fn an_add_of_an_existing_dn_replaces_it_and_a_missing_parent_waits() {
    let dit = directory();
    // The suffix entry a server creates at first start, with its own entryUUID.
    put(
        &dit,
        incoming(
            SUFFIX,
            0x77,
            59,
            &[
                ("objectClass", &["top", "dcObject", "organization"]),
                ("dc", &["example"]),
                ("o", &["local"]),
            ],
        ),
    )
    .unwrap();
    assert_eq!(put(&dit, suffix(1)).unwrap(), Outcome::Replaced);
    assert_eq!(value(&dit, SUFFIX, "entryUUID").unwrap(), uuid(1));
    assert_eq!(value(&dit, SUFFIX, "o").unwrap(), "Example");
    let dn = format!("uid=bob,ou=people,{SUFFIX}");
    assert_eq!(
        put(&dit, person(&dn, 3, 5, "b@example.com")).unwrap(),
        Outcome::MissingParent
    );
    put(&dit, ou("people", 2)).unwrap();
    assert_eq!(
        put(&dit, person(&dn, 3, 5, "b@example.com")).unwrap(),
        Outcome::Added
    );
}

#[test]
fn the_schema_applies_to_replicated_entries() {
    let dit = directory();
    put(&dit, suffix(1)).unwrap();
    let mut bad = ou("people", 2);
    bad.attrs.push(("noSuchType".into(), vec![b"x".to_vec()]));
    assert_eq!(
        put(&dit, bad).unwrap_err().code,
        ResultCode::UndefinedAttributeType
    );
    let no_sn = incoming(
        &format!("uid=x,{SUFFIX}"),
        5,
        1,
        &[
            ("objectClass", &["inetOrgPerson"]),
            ("uid", &["x"]),
            ("cn", &["x"]),
        ],
    );
    assert_eq!(
        put(&dit, no_sn).unwrap_err().code,
        ResultCode::ObjectClassViolation
    );
}

#[test]
fn deletes_and_the_end_of_a_present_phase() {
    let dit = directory();
    put(&dit, suffix(1)).unwrap();
    put(&dit, ou("people", 2)).unwrap();
    for i in 0..5u8 {
        let dn = format!("uid=p{i},ou=people,{SUFFIX}");
        put(&dit, person(&dn, 10 + i, 1, "p@example.com")).unwrap();
    }
    let a = area(&dit);
    let gone = write(&dit, move |d, txn| {
        apply::apply_delete(d, txn, &a, &[], &uuid(10))
    })
    .unwrap();
    assert!(gone.is_some());
    let a = area(&dit);
    let again = write(&dit, move |d, txn| {
        apply::apply_delete(d, txn, &a, &[], &uuid(10))
    })
    .unwrap();
    assert!(again.is_none());
    // The provider mentioned the suffix, ou=people, p1 and p3: p2 and p4 go.
    let present: HashSet<Box<[u8]>> = [1u8, 2, 11, 13]
        .iter()
        .map(|n| apply::uuid_norm(&dit, &uuid(*n)).unwrap())
        .collect();
    let a = area(&dit);
    let deleted = write(&dit, move |d, txn| {
        apply::delete_absent(d, txn, &a, &[], &present)
    })
    .unwrap();
    assert_eq!(deleted.len(), 2);
    let v = dit.store.read();
    assert_eq!(v.len(), 4);
    // Nothing mentioned: all of the area goes, subordinates first.
    let a = area(&dit);
    let deleted = write(&dit, move |d, txn| {
        apply::delete_absent(d, txn, &a, &[], &HashSet::new())
    })
    .unwrap();
    assert_eq!(deleted.len(), 4);
    assert!(dit.store.read().is_empty());
}

#[test]
fn the_cookie_is_kept_on_the_suffix_entry() {
    let dit = directory();
    put(&dit, suffix(1)).unwrap();
    let a = area(&dit);
    let cookie = SyncCookie::parse(format!("rid=001,csn={}", csn(5)).as_bytes()).unwrap();
    let a2 = a.clone();
    write(&dit, move |d, txn| {
        apply::store_cookie(d, txn, &a2, &cookie)
    })
    .unwrap();
    // An older CSN of the same server, and one of another server.
    let other = "20261124000000.000000Z#000000#002#000000";
    let cookie = SyncCookie::parse(format!("rid=001,csn={};{other}", csn(3)).as_bytes()).unwrap();
    let a2 = a.clone();
    write(&dit, move |d, txn| {
        apply::store_cookie(d, txn, &a2, &cookie)
    })
    .unwrap();
    let kept = apply::stored_cookie(&dit, &dit.store.read(), &a);
    assert_eq!(kept.csns, [csn(5), other.to_string()]);
    // A newer version of the suffix entry from the provider keeps the local contextCSN.
    put(&dit, suffix(9)).unwrap();
    let kept = apply::stored_cookie(&dit, &dit.store.read(), &a);
    assert_eq!(kept.csns, [csn(5), other.to_string()]);
    // The suffix entry's own entryCSN is the provider's, not touched by the cookie.
    assert_eq!(value(&dit, SUFFIX, "entryCSN").unwrap(), csn(9));
}

fn multi_area(dit: &Dit) -> Arc<Area> {
    let mut spec = ConsumerSpec::new(1, ProviderUrl::parse("ldap://127.0.0.1:1").unwrap(), SUFFIX);
    spec.multi_provider = true;
    Arc::new(Area::new(dit, &spec).unwrap())
}

fn put_multi(dit: &Arc<Dit>, inc: Incoming) -> LdapResult<Outcome> {
    let a = multi_area(dit);
    write(dit, move |d, txn| {
        apply::apply_entry(d, txn, &a, &inc).map(|(o, _)| o)
    })
}

fn uuid_at(dit: &Dit, dn: &str) -> Option<String> {
    value(dit, dn, "entryUUID")
}

/// Two providers added the same DN (two entryUUIDs): whichever order the two entries arrive
/// in, the later entryCSN holds the DN.
#[test]
fn multi_provider_the_same_dn_added_twice_keeps_the_later() {
    let dn = format!("uid=twin,ou=people,{SUFFIX}");
    let older = person(&dn, 20, 3, "older@example.com");
    let newer = person(&dn, 21, 4, "newer@example.com");
    for order in [[&older, &newer], [&newer, &older]] {
        let dit = directory();
        put_multi(&dit, suffix(1)).unwrap();
        put_multi(&dit, ou("people", 2)).unwrap();
        for inc in order {
            put_multi(&dit, inc.clone()).unwrap();
        }
        assert_eq!(uuid_at(&dit, &dn).as_deref(), Some(uuid(21).as_str()));
        assert_eq!(
            value(&dit, &dn, "mail").as_deref(),
            Some("newer@example.com")
        );
    }
    // A read-only replica takes what its one provider sends, whatever its CSN.
    let dit = directory();
    put(&dit, suffix(1)).unwrap();
    put(&dit, ou("people", 2)).unwrap();
    put(&dit, newer.clone()).unwrap();
    put(&dit, older.clone()).unwrap();
    assert_eq!(uuid_at(&dit, &dn).as_deref(), Some(uuid(20).as_str()));
}

/// Multi-provider deletes: an entry holding a change the provider had not seen (its entryCSN
/// is newer than the provider's cookie for that server id) is neither deleted by a delete
/// from it nor by the end of its present phase; one it had seen is.
#[test]
fn multi_provider_deletes_spare_changes_the_provider_had_not_seen() {
    let dit = directory();
    put_multi(&dit, suffix(1)).unwrap();
    put_multi(&dit, ou("people", 2)).unwrap();
    let p = |i: u8, version: u32| {
        person(
            &format!("uid=p{i},ou=people,{SUFFIX}"),
            10 + i,
            version,
            "p@example.com",
        )
    };
    put_multi(&dit, p(0, 5)).unwrap();
    put_multi(&dit, p(1, 9)).unwrap();
    put_multi(&dit, p(2, 5)).unwrap();
    put_multi(&dit, p(3, 9)).unwrap();
    // The provider has seen sid 1 up to version 7.
    let heard = vec![csn(7)];
    let a = multi_area(&dit);
    let h = heard.clone();
    let gone = write(&dit, move |d, txn| {
        Ok((
            apply::apply_delete(d, txn, &a, &h, &uuid(10))?.is_some(),
            apply::apply_delete(d, txn, &a, &h, &uuid(11))?.is_some(),
        ))
    })
    .unwrap();
    assert_eq!(gone, (true, false), "p0 (seen) goes, p1 (newer) stays");
    // A present phase that mentions the suffix and ou=people only.
    let present: HashSet<Box<[u8]>> = [1u8, 2]
        .iter()
        .map(|n| apply::uuid_norm(&dit, &uuid(*n)).unwrap())
        .collect();
    let a = multi_area(&dit);
    let deleted = write(&dit, move |d, txn| {
        apply::delete_absent(d, txn, &a, &heard, &present)
    })
    .unwrap();
    assert_eq!(deleted.len(), 1, "p2 (seen) goes, p1 and p3 (newer) stay");
    assert!(value(&dit, &format!("uid=p1,ou=people,{SUFFIX}"), "uid").is_some());
    assert!(value(&dit, &format!("uid=p3,ou=people,{SUFFIX}"), "uid").is_some());
    assert!(value(&dit, &format!("uid=p2,ou=people,{SUFFIX}"), "uid").is_none());
    // A provider that never saw sid 1 at all deletes nothing of it.
    let a = multi_area(&dit);
    let kept = write(&dit, move |d, txn| {
        apply::apply_delete(d, txn, &a, &[], &uuid(11))
    })
    .unwrap();
    assert!(kept.is_none());
}

/// A local change of the entry `dn` (a new description), through the write path's door: its
/// entryCSN.
fn local_change(dit: &Arc<Dit>, dn: &str) -> String {
    let target = dn.to_string();
    write(dit, move |d, txn| {
        let schema = txn.schema().clone();
        let ndn = norm(&schema, &target);
        let who = dit::Identity {
            dn: "cn=admin,dc=example,dc=com".into(),
            ndn: Some(d.admin.clone()),
            is_admin: true,
        };
        let mods = vec![dit::modify::Mod {
            op: proto::ModOp::Replace,
            ty: schema.attr_by_name("description").unwrap(),
            options: String::new(),
            name: "description".into(),
            values: vec![b"local".as_slice().into()],
        }];
        let needs = dit::modify::needs(&mods);
        dit::write::write_job(d, txn, |txn| {
            dit::modify::apply(d, txn, &who, &ndn, &needs, mods, None, false)
        })
    })
    .unwrap();
    value(dit, dn, "entryCSN").unwrap()
}

/// What the consumer applies moves this server's CSN clock (a Lamport clock): a change made
/// here afterwards sorts after the replicated change, and after the CSNs of a cookie kept
/// here, even when the provider's clock is far ahead of this one's.
#[test]
fn replicated_csns_ahead_of_the_clock_are_followed_by_later_local_ones() {
    let dit = directory();
    put(&dit, suffix(1)).unwrap();
    put(&dit, ou("people", 2)).unwrap();
    let dn = format!("uid=ann,ou=people,{SUFFIX}");
    // Stamped by a provider whose clock is in the year 2100, applied as the consumer does.
    let mut ann = person(&dn, 3, 1, "ann@example.com");
    let ahead = "21000101000000.000000Z#000004#001#000000";
    for (k, v) in &mut ann.attrs {
        if k == "entryCSN" {
            *v = vec![ahead.as_bytes().to_vec()];
        }
    }
    let a = area(&dit);
    write(&dit, move |d, txn| {
        dit::write::write_job_as(d, txn, dit::overlays::Origin::Replicated, |txn| {
            apply::apply_entry(d, txn, &a, &ann).map(|(_, applied)| applied)
        })
    })
    .unwrap();
    assert_eq!(value(&dit, &dn, "entryCSN").unwrap(), ahead);
    let mine = local_change(&dit, &dn);
    assert!(mine.as_str() > ahead, "{mine} sorts after {ahead}");
    // A cookie kept on the suffix entry with a CSN further ahead (another server's).
    let further = "21010101000000.000000Z#000000#002#000000";
    let cookie = SyncCookie::parse(format!("rid=001,csn={further}").as_bytes()).unwrap();
    let a = area(&dit);
    write(&dit, move |d, txn| apply::store_cookie(d, txn, &a, &cookie)).unwrap();
    let mine = local_change(&dit, &dn);
    assert!(mine.as_str() > further, "{mine} sorts after {further}");
}

/// A tombstone as the provider's overlay leaves it when it deletes entry `n` whose entryCSN
/// was `seen` (the delete's own CSN is this server's, sid 9).
fn tombstone(n: u8, seen: &str) -> store::Tombstone {
    store::Tombstone {
        uuid: uuid(n).into(),
        dn: format!("uid=gone{n},ou=people,{SUFFIX}").into(),
        csn: "20261125000001.000000Z#000000#009#000000".into(),
        seen: seen.into(),
    }
}

/// Multi-provider: an entry deleted here is not added back by a copy of a change the delete
/// had seen (an echo, a full refresh, a peer that has not applied the delete yet), whatever
/// the path; a change the delete had not seen (newer than its entryCSN) wins and brings the
/// entry back. A read-only replica takes what its one provider sends.
#[test]
fn multi_provider_a_deleted_entry_is_not_added_back_by_an_older_copy() {
    let dn = format!("uid=gone5,ou=people,{SUFFIX}");
    let dit = directory();
    put_multi(&dit, suffix(1)).unwrap();
    put_multi(&dit, ou("people", 2)).unwrap();
    write(&dit, |_, txn| {
        txn.put_tombstone(tombstone(5, &csn(3)));
        Ok(())
    })
    .unwrap();
    for version in [2, 3] {
        assert_eq!(
            put_multi(&dit, person(&dn, 5, version, "old@example.com")).unwrap(),
            Outcome::Unchanged,
            "version {version}"
        );
        assert!(uuid_at(&dit, &dn).is_none(), "version {version} refused");
    }
    // Without an entryCSN it is as old as can be.
    let mut bare = person(&dn, 5, 9, "bare@example.com");
    bare.attrs.retain(|(k, _)| k != "entryCSN");
    assert_eq!(put_multi(&dit, bare).unwrap(), Outcome::Unchanged);
    assert_eq!(
        put_multi(&dit, person(&dn, 5, 4, "new@example.com")).unwrap(),
        Outcome::Added
    );
    assert_eq!(value(&dit, &dn, "mail").as_deref(), Some("new@example.com"));

    let dit = directory();
    put(&dit, suffix(1)).unwrap();
    put(&dit, ou("people", 2)).unwrap();
    write(&dit, |_, txn| {
        txn.put_tombstone(tombstone(5, &csn(3)));
        Ok(())
    })
    .unwrap();
    assert_eq!(
        put(&dit, person(&dn, 5, 3, "old@example.com")).unwrap(),
        Outcome::Added
    );
}

/// Multi-provider: a delete made here of a change this server held before its contextCSN
/// covered it (so its provider's peer, told of the delete with that contextCSN, kept the
/// entry) is asserted again when a cookie covering the change is stored: its tombstone is put
/// anew with a fresh CSN of this server, which raises this server's contextCSN, so the delete
/// goes out again. A delete that was covered already is not repeated.
#[test]
fn multi_provider_a_delete_is_sent_again_once_the_cookie_covers_what_it_saw() {
    let dit = directory();
    put_multi(&dit, suffix(1)).unwrap();
    put_multi(&dit, ou("people", 2)).unwrap();
    let a = multi_area(&dit);
    let first = SyncCookie::parse(format!("rid=001,csn={}", csn(2)).as_bytes()).unwrap();
    let a2 = a.clone();
    write(&dit, move |d, txn| apply::store_cookie(d, txn, &a2, &first)).unwrap();
    // Two deletes: of version 1 (covered by the cookie) and of version 5 (not yet).
    write(&dit, |_, txn| {
        txn.put_tombstone(tombstone(5, &csn(1)));
        txn.put_tombstone(tombstone(6, &csn(5)));
        Ok(())
    })
    .unwrap();
    let before = dit.store.read().tombstones().clone();
    let next = SyncCookie::parse(format!("rid=001,csn={}", csn(7)).as_bytes()).unwrap();
    let a2 = a.clone();
    write(&dit, move |d, txn| apply::store_cookie(d, txn, &a2, &next)).unwrap();
    let v = dit.store.read();
    let after = v.tombstones();
    assert_eq!(after.get(&uuid(5)), before.get(&uuid(5)), "covered already");
    let again = after.get(&uuid(6)).unwrap();
    assert_ne!(again.csn, before.get(&uuid(6)).unwrap().csn, "put anew");
    assert_eq!(again.seen.as_ref(), csn(5));
    assert!(
        again.csn.contains("#009#"),
        "a CSN of this server: {}",
        again.csn
    );
    // The contextCSN holds the cookie and this server's fresh CSN.
    let kept = apply::stored_cookie(&dit, &v, &a);
    assert_eq!(kept.csns, [csn(7), again.csn.to_string()]);
}
