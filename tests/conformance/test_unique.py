"""Attribute uniqueness: both servers are configured with uid and mail unique under
ou=unique,<suffix> (slapd's unique overlay: scripts/slapd-reference.sh; Linden's [[unique]]
rule: scripts/run-conformance-linden.sh)."""
import uuid

import ldap
import ldap.modlist
import pytest

from conftest import SUFFIX, delete_subtree, ou, person_attrs

UNIQUE_BASE = "ou=unique," + SUFFIX


@pytest.fixture
def area(admin_session):
    """A fresh OU under ou=unique with two sub-OUs, and a third OU outside ou=unique."""
    try:
        admin_session.add_s(UNIQUE_BASE, ou("unique"))
    except ldap.ALREADY_EXISTS:
        pass
    tag = uuid.uuid4().hex[:10]
    inside = "ou=u%s,%s" % (tag, UNIQUE_BASE)
    outside = "ou=o%s,%s" % (tag, SUFFIX)
    admin_session.add_s(inside, ou("u" + tag))
    admin_session.add_s("ou=a," + inside, ou("a"))
    admin_session.add_s("ou=b," + inside, ou("b"))
    admin_session.add_s(outside, ou("o" + tag))
    yield inside, outside, tag
    delete_subtree(admin_session, inside)
    delete_subtree(admin_session, outside)


def test_add_with_a_taken_uid_is_constraint_violation(admin, area):
    inside, outside, tag = area
    uid = "u" + tag
    admin.add_s("uid=%s,ou=a,%s" % (uid, inside), ldap.modlist.addModlist(person_attrs(uid)))
    attrs = person_attrs(uid)
    attrs["mail"] = [b"other-%s@example.com" % tag.encode()]
    with pytest.raises(ldap.CONSTRAINT_VIOLATION) as e:
        admin.add_s("uid=%s,ou=b,%s" % (uid, inside), ldap.modlist.addModlist(attrs))
    assert "non-unique attributes found with" in e.value.args[0].get("info", "")
    # Outside the rule's base the same uid is fine.
    admin.add_s("uid=%s,%s" % (uid, outside), ldap.modlist.addModlist(attrs))


def test_modify_adding_a_taken_mail_is_refused_and_changes_nothing(admin, area):
    inside, _, tag = area
    a, b = "a" + tag, "b" + tag
    admin.add_s("uid=%s,ou=a,%s" % (a, inside), ldap.modlist.addModlist(person_attrs(a)))
    admin.add_s("uid=%s,ou=b,%s" % (b, inside), ldap.modlist.addModlist(person_attrs(b)))
    dn_b = "uid=%s,ou=b,%s" % (b, inside)
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        admin.modify_s(dn_b, [(ldap.MOD_ADD, "mail", [("%s@example.com" % a).encode()]),
                              (ldap.MOD_REPLACE, "description", [b"changed"])])
    got = admin.search_s(dn_b, ldap.SCOPE_BASE, "(objectClass=*)", ["mail", "description"])
    assert got[0][1]["mail"] == [("%s@example.com" % b).encode()]
    assert "description" not in got[0][1]
    # Changing other attributes of an entry whose values are already unique is fine.
    admin.modify_s(dn_b, [(ldap.MOD_REPLACE, "description", [b"ok"])])


def test_moving_an_entry_with_a_taken_uid_under_the_base_is_refused(admin, area):
    inside, outside, tag = area
    uid = "m" + tag
    admin.add_s("uid=%s,ou=a,%s" % (uid, inside), ldap.modlist.addModlist(person_attrs(uid)))
    attrs = person_attrs(uid)
    attrs["mail"] = [b"moved-%s@example.com" % tag.encode()]
    admin.add_s("uid=%s,%s" % (uid, outside), ldap.modlist.addModlist(attrs))
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        admin.rename_s("uid=%s,%s" % (uid, outside), "uid=%s" % uid, "ou=b," + inside)
    admin.search_s("uid=%s,%s" % (uid, outside), ldap.SCOPE_BASE)
