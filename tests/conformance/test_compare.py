"""Compare operation (RFC 4511 §4.10)."""
import ldap
import pytest

from helpers import matched
from conftest import norm_dn


def test_compare_true(admin, tree):
    assert admin.compare_s(tree.person("alice"), "cn", b"Alice Smith") is True


def test_compare_true_uses_equality_rule(admin, tree):
    assert admin.compare_s(tree.person("alice"), "cn", b"alice SMITH") is True


def test_compare_false(admin, tree):
    assert admin.compare_s(tree.person("alice"), "cn", b"Bob Jones") is False


def test_compare_objectclass(anon, tree):
    assert anon.compare_s(tree.person("bob"), "objectClass", b"inetOrgPerson") is True


def test_compare_as_anonymous(anon, tree):
    assert anon.compare_s(tree.person("bob"), "mail", b"bob@example.com") is True


def test_compare_unknown_attribute_is_undefined_type(admin, tree):
    with pytest.raises(ldap.UNDEFINED_TYPE):
        admin.compare_s(tree.person("alice"), "noSuchAttributeXyz", b"x")


def test_compare_missing_entry_is_no_such_object(admin, tree):
    with pytest.raises(ldap.NO_SUCH_OBJECT) as e:
        admin.compare_s("uid=nobody," + tree.people, "cn", b"x")
    assert norm_dn(matched(e)) == norm_dn(tree.people)


def test_compare_attribute_absent_from_entry_is_no_such_attribute(admin, tree):
    with pytest.raises(ldap.NO_SUCH_ATTRIBUTE):
        admin.compare_s(tree.person("alice"), "description", b"x")
