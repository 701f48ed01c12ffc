"""Relax Rules control (draft-zeilenga-ldap-relax, 1.3.6.1.4.1.4203.666.5.12): the
administrator's add may carry entryUUID and the creation and modification stamps, which are
kept as sent; without the control they are refused; anyone else is refused."""
import uuid

import ldap
import ldap.modlist
import pytest
from ldap.controls import LDAPControl

from conftest import PEOPLE, to_bytes_attrs

RELAX = "1.3.6.1.4.1.4203.666.5.12"


def relax(critical=True):
    return [LDAPControl(RELAX, critical, None)]


def kept(uid, entry_uuid):
    return ldap.modlist.addModlist(to_bytes_attrs({
        "objectClass": ["inetOrgPerson"], "uid": [uid], "cn": ["Kept " + uid], "sn": ["Kept"],
        "entryUUID": [entry_uuid],
        "createTimestamp": ["20240102030405Z"],
        "creatorsName": ["cn=someone,dc=example,dc=com"],
        "modifyTimestamp": ["20240203040506Z"],
        "modifiersName": ["cn=other,dc=example,dc=com"],
    }))


@pytest.mark.linden_differs(reason="slapd accepts the Relax Rules control without listing it")
def test_root_dse_lists_relax_rules(anon):
    dse = anon.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["supportedControl"])[0][1]
    assert RELAX in [v.decode() for v in dse["supportedControl"]]


def test_without_the_control_operational_attributes_are_refused(admin, tree, cleanup):
    dn = "uid=%s,%s" % (tree.unique("r"), tree.scratch)
    cleanup.append(dn)
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        admin.add_ext_s(dn, kept(dn[4:].split(",")[0], str(uuid.uuid4())))


def test_the_administrators_add_keeps_entry_uuid_and_stamps(admin, tree, cleanup):
    uid = tree.unique("r")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    cleanup.append(dn)
    u = str(uuid.uuid4())
    admin.add_ext_s(dn, kept(uid, u), serverctrls=relax())
    got = admin.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["+"])[0][1]
    assert got["entryUUID"] == [u.encode()]
    assert got["createTimestamp"] == [b"20240102030405Z"]
    assert got["creatorsName"] == [b"cn=someone,dc=example,dc=com"]
    assert got["modifyTimestamp"] == [b"20240203040506Z"]
    assert got["modifiersName"] == [b"cn=other,dc=example,dc=com"]
    assert got["entryCSN"]


def test_an_entry_uuid_must_be_a_uuid(admin, tree, cleanup):
    uid = tree.unique("r")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    cleanup.append(dn)
    with pytest.raises(ldap.INVALID_SYNTAX):
        admin.add_ext_s(dn, kept(uid, "not-a-uuid"), serverctrls=relax())


@pytest.mark.linden_differs(reason="slapd does not check that an entryUUID given with the "
                                   "Relax Rules control is unused")
def test_an_entry_uuid_names_one_entry(admin, tree, cleanup):
    u = str(uuid.uuid4())
    first, second = tree.unique("r"), tree.unique("r")
    for uid in (first, second):
        cleanup.append("uid=%s,%s" % (uid, tree.scratch))
    admin.add_ext_s("uid=%s,%s" % (first, tree.scratch), kept(first, u), serverctrls=relax())
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        admin.add_ext_s("uid=%s,%s" % (second, tree.scratch), kept(second, u),
                        serverctrls=relax())


def test_only_the_administrator(tree, cleanup):
    from conftest import bind_as
    conn = bind_as(tree.person("alice"), PEOPLE["alice"]["userPassword"][0])
    uid = tree.unique("r")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    cleanup.append(dn)
    try:
        with pytest.raises(ldap.INSUFFICIENT_ACCESS):
            conn.add_ext_s(dn, kept(uid, str(uuid.uuid4())), serverctrls=relax())
    finally:
        conn.unbind_s()
