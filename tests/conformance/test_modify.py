"""Modify operation (RFC 4511 §4.6, RFC 4525 increment)."""
import time

import ldap
import pytest

from conftest import ADMIN_DN, norm_dn
from helpers import get_entry, matched


def mod(conn, dn, *changes):
    conn.modify_s(dn, [(op, attr, None if v is None else [x.encode() for x in v])
                       for op, attr, v in changes])


def test_modify_add_value(admin, scratch_person):
    dn = scratch_person[0]
    mod(admin, dn, (ldap.MOD_ADD, "mail", ["second@example.com"]))
    assert sorted(get_entry(admin, dn)["mail"]) == sorted([scratch_person[1] + "@example.com",
                                                            "second@example.com"])


def test_modify_add_new_attribute(admin, scratch_person):
    dn = scratch_person[0]
    mod(admin, dn, (ldap.MOD_ADD, "description", ["hello", "world"]))
    assert sorted(get_entry(admin, dn)["description"]) == ["hello", "world"]


def test_modify_delete_value(admin, scratch_person):
    dn = scratch_person[0]
    mod(admin, dn, (ldap.MOD_ADD, "description", ["a", "b"]))
    mod(admin, dn, (ldap.MOD_DELETE, "description", ["A"]))     # matched with equality rule
    assert get_entry(admin, dn)["description"] == ["b"]


def test_modify_delete_whole_attribute(admin, scratch_person):
    dn = scratch_person[0]
    mod(admin, dn, (ldap.MOD_DELETE, "telephoneNumber", None))
    assert "telephonenumber" not in get_entry(admin, dn)


def test_modify_replace(admin, scratch_person):
    dn = scratch_person[0]
    mod(admin, dn, (ldap.MOD_REPLACE, "mail", ["r1@example.com", "r2@example.com"]))
    assert sorted(get_entry(admin, dn)["mail"]) == ["r1@example.com", "r2@example.com"]


def test_modify_replace_with_no_values_removes_attribute(admin, scratch_person):
    dn = scratch_person[0]
    mod(admin, dn, (ldap.MOD_REPLACE, "mail", []))
    assert "mail" not in get_entry(admin, dn)


def test_modify_replace_absent_attribute_with_no_values_is_ok(admin, scratch_person):
    mod(admin, scratch_person[0], (ldap.MOD_REPLACE, "description", []))


def test_modify_increment(admin, scratch_person):
    dn = scratch_person[0]
    before = int(get_entry(admin, dn)["uidnumber"][0])
    mod(admin, dn, (ldap.MOD_INCREMENT, "uidNumber", ["5"]))
    assert int(get_entry(admin, dn)["uidnumber"][0]) == before + 5
    mod(admin, dn, (ldap.MOD_INCREMENT, "uidNumber", ["-2"]))
    assert int(get_entry(admin, dn)["uidnumber"][0]) == before + 3


def test_modify_several_changes_in_one_request(admin, scratch_person):
    dn = scratch_person[0]
    mod(admin, dn, (ldap.MOD_ADD, "description", ["x"]),
        (ldap.MOD_REPLACE, "description", ["y"]),
        (ldap.MOD_ADD, "description", ["z"]))
    assert sorted(get_entry(admin, dn)["description"]) == ["y", "z"]


def test_modify_delete_missing_value_is_no_such_attribute(admin, scratch_person):
    with pytest.raises(ldap.NO_SUCH_ATTRIBUTE):
        mod(admin, scratch_person[0], (ldap.MOD_DELETE, "mail", ["not-there@example.com"]))


def test_modify_delete_missing_attribute_is_no_such_attribute(admin, scratch_person):
    with pytest.raises(ldap.NO_SUCH_ATTRIBUTE):
        mod(admin, scratch_person[0], (ldap.MOD_DELETE, "description", None))


def test_modify_add_existing_value_is_type_or_value_exists(admin, scratch_person):
    dn, uid, _ = scratch_person
    with pytest.raises(ldap.TYPE_OR_VALUE_EXISTS):
        mod(admin, dn, (ldap.MOD_ADD, "mail", [uid.upper() + "@EXAMPLE.COM"]))


def test_modify_is_atomic(admin, scratch_person):
    dn = scratch_person[0]
    with pytest.raises(ldap.NO_SUCH_ATTRIBUTE):
        mod(admin, dn, (ldap.MOD_REPLACE, "description", ["first change"]),
            (ldap.MOD_DELETE, "mail", ["not-there@example.com"]))
    assert "description" not in get_entry(admin, dn)


def test_modify_removing_rdn_value_is_naming_violation(admin, scratch_person):
    # RFC 4511 App. A describes notAllowedOnRDN (67) for this; slapd answers
    # namingViolation (64) "naming attribute 'uid' is not present in entry". We follow slapd.
    dn, uid, _ = scratch_person
    with pytest.raises(ldap.NAMING_VIOLATION):
        mod(admin, dn, (ldap.MOD_DELETE, "uid", [uid]))


def test_modify_replacing_rdn_value_away_is_naming_violation(admin, scratch_person):
    # slapd: namingViolation "value of naming attribute 'uid' is not present in entry"
    dn = scratch_person[0]
    with pytest.raises(ldap.NAMING_VIOLATION):
        mod(admin, dn, (ldap.MOD_REPLACE, "uid", ["somebody-else"]))


def test_modify_adding_second_value_to_rdn_attribute_is_ok(admin, scratch_person):
    dn, uid, _ = scratch_person
    mod(admin, dn, (ldap.MOD_ADD, "uid", ["alias-" + uid]))
    assert sorted(get_entry(admin, dn)["uid"]) == sorted([uid, "alias-" + uid])


def test_modify_structural_object_class_is_no_object_class_mods(admin, scratch_person):
    # slapd: objectClassModsProhibited (69) "structural object class modification from
    # 'inetOrgPerson' to 'organizationalUnit' not allowed"
    dn = scratch_person[0]
    with pytest.raises(ldap.NO_OBJECT_CLASS_MODS):
        mod(admin, dn, (ldap.MOD_REPLACE, "objectClass", ["top", "organizationalUnit"]))


def test_modify_object_class_leaving_attributes_disallowed_is_object_class_violation(
        admin, scratch_person):
    # dropping the auxiliary posixAccount while uidNumber/homeDirectory remain
    dn = scratch_person[0]
    with pytest.raises(ldap.OBJECT_CLASS_VIOLATION):
        mod(admin, dn, (ldap.MOD_REPLACE, "objectClass",
                        ["top", "person", "organizationalPerson", "inetOrgPerson"]))
    assert "posixAccount" in get_entry(admin, dn)["objectclass"]


def test_modify_object_class_to_unknown_class_is_invalid_syntax(admin, scratch_person):
    with pytest.raises(ldap.INVALID_SYNTAX):
        mod(admin, scratch_person[0], (ldap.MOD_ADD, "objectClass", ["noSuchObjectClassXyz"]))


def test_modify_deleting_must_attribute_is_object_class_violation(admin, scratch_person):
    with pytest.raises(ldap.OBJECT_CLASS_VIOLATION):
        mod(admin, scratch_person[0], (ldap.MOD_DELETE, "sn", None))


def test_modify_adding_disallowed_attribute_is_object_class_violation(admin, scratch_person):
    with pytest.raises(ldap.OBJECT_CLASS_VIOLATION):
        mod(admin, scratch_person[0], (ldap.MOD_ADD, "dc", ["x"]))


def test_modify_single_valued_second_value_is_constraint_violation(admin, scratch_person):
    dn = scratch_person[0]
    mod(admin, dn, (ldap.MOD_ADD, "displayName", ["One"]))
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        mod(admin, dn, (ldap.MOD_ADD, "displayName", ["Two"]))


def test_modify_unknown_attribute_is_undefined_type(admin, scratch_person):
    with pytest.raises(ldap.UNDEFINED_TYPE):
        mod(admin, scratch_person[0], (ldap.MOD_REPLACE, "noSuchAttributeXyz", ["1"]))


def test_modify_bad_syntax_is_invalid_syntax(admin, scratch_person):
    with pytest.raises(ldap.INVALID_SYNTAX):
        mod(admin, scratch_person[0], (ldap.MOD_REPLACE, "uidNumber", ["abc"]))


def test_modify_modify_timestamp_is_constraint_violation(admin, scratch_person):
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        mod(admin, scratch_person[0], (ldap.MOD_REPLACE, "modifyTimestamp", ["20200101000000Z"]))


def test_modify_missing_entry_is_no_such_object(admin, tree):
    with pytest.raises(ldap.NO_SUCH_OBJECT) as e:
        mod(admin, "uid=nobody," + tree.scratch, (ldap.MOD_REPLACE, "description", ["x"]))
    assert norm_dn(matched(e)) == norm_dn(tree.scratch)


def test_modify_updates_modify_timestamp_and_modifiers_name(admin, anon, scratch_person):
    dn = scratch_person[0]
    before = get_entry(anon, dn, ["modifyTimestamp", "createTimestamp"])
    time.sleep(1.1)
    mod(admin, dn, (ldap.MOD_REPLACE, "description", ["touched"]))
    after = get_entry(anon, dn, ["modifyTimestamp", "modifiersName", "createTimestamp"])
    assert after["modifytimestamp"][0] > before["modifytimestamp"][0]
    assert after["createtimestamp"] == before["createtimestamp"]
    assert norm_dn(after["modifiersname"][0]) == norm_dn(ADMIN_DN)


def test_modify_as_anonymous_is_refused(anon, scratch_person):
    with pytest.raises(ldap.STRONG_AUTH_REQUIRED):  # "modifications require authentication"
        mod(anon, scratch_person[0], (ldap.MOD_REPLACE, "description", ["x"]))


def test_modify_other_entry_as_user_is_insufficient_access(alice, scratch_person):
    with pytest.raises(ldap.INSUFFICIENT_ACCESS):
        mod(alice, scratch_person[0], (ldap.MOD_REPLACE, "description", ["x"]))


def test_modify_increment_non_integer_attribute_is_constraint_violation(admin, scratch_person):
    # slapd: "telephoneNumber: attribute syntax inappropriate for increment"
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        mod(admin, scratch_person[0], (ldap.MOD_INCREMENT, "telephoneNumber", ["1"]))
