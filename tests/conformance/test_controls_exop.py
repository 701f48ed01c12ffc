"""Controls (RFC 4511 §4.1.11) and extended operations (§4.12)."""
import ldap
import pytest
from ldap.controls import LDAPControl
from ldap.extop import ExtendedRequest

from helpers import uids

UNKNOWN_CONTROL = "1.3.6.1.4.1.99999.1.2.3"


def test_unsupported_critical_control_on_search(anon, tree):
    with pytest.raises(ldap.UNAVAILABLE_CRITICAL_EXTENSION):
        anon.search_ext_s(tree.people, ldap.SCOPE_ONELEVEL, "(uid=alice)",
                          serverctrls=[LDAPControl(UNKNOWN_CONTROL, True, None)])


def test_unsupported_non_critical_control_is_ignored(anon, tree):
    res = anon.search_ext_s(tree.people, ldap.SCOPE_ONELEVEL, "(uid=alice)", ["uid"],
                            serverctrls=[LDAPControl(UNKNOWN_CONTROL, False, None)])
    assert uids(res) == ["alice"]


def test_unsupported_critical_control_on_modify_leaves_entry_unchanged(admin, scratch_person):
    dn = scratch_person[0]
    with pytest.raises(ldap.UNAVAILABLE_CRITICAL_EXTENSION):
        admin.modify_ext_s(dn, [(ldap.MOD_REPLACE, "description", [b"changed"])],
                           serverctrls=[LDAPControl(UNKNOWN_CONTROL, True, None)])
    res = admin.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["description"])
    assert res[0][1] == {}


def test_unsupported_non_critical_control_on_modify_is_ignored(admin, scratch_person):
    dn = scratch_person[0]
    admin.modify_ext_s(dn, [(ldap.MOD_REPLACE, "description", [b"changed"])],
                       serverctrls=[LDAPControl(UNKNOWN_CONTROL, False, None)])
    res = admin.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["description"])
    assert res[0][1]["description"] == [b"changed"]


def test_unknown_extended_operation_is_protocol_error(anon):
    with pytest.raises(ldap.PROTOCOL_ERROR):
        anon.extop_s(ExtendedRequest("1.3.6.1.4.1.99999.7.7.7", None))


def test_whoami_extended_operation_raw(alice, tree):
    from conftest import norm_dn
    oid, value = alice.extop_s(ExtendedRequest("1.3.6.1.4.1.4203.1.11.3", None))
    assert norm_dn(value.decode()[3:]) == norm_dn(tree.person("alice"))
