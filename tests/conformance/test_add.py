"""Add operation (RFC 4511 §4.7) and schema checks (RFC 4512)."""
import ldap
import ldap.modlist
import pytest

from conftest import norm_dn, person_attrs, to_bytes_attrs
from helpers import get_entry, matched


def add(conn, dn, attrs):
    conn.add_s(dn, ldap.modlist.addModlist(attrs))


@pytest.fixture
def new_dn(tree, cleanup):
    uid = tree.unique("a")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    cleanup.append(dn)
    return dn, uid


def test_add_ok_and_readable(admin, anon, new_dn):
    dn, uid = new_dn
    add(admin, dn, person_attrs(uid, cn="New Person", sn="Person"))
    a = get_entry(anon, dn)
    assert a["uid"] == [uid] and a["cn"] == ["New Person"] and a["sn"] == ["Person"]
    assert "inetOrgPerson" in a["objectclass"]


def test_add_duplicate_is_already_exists(admin, new_dn):
    dn, uid = new_dn
    add(admin, dn, person_attrs(uid))
    with pytest.raises(ldap.ALREADY_EXISTS):
        add(admin, dn, person_attrs(uid))


def test_add_duplicate_differing_in_case_is_already_exists(admin, new_dn):
    dn, uid = new_dn
    add(admin, dn, person_attrs(uid))
    with pytest.raises(ldap.ALREADY_EXISTS):
        add(admin, dn.replace("uid=", "UID=").replace(uid, uid.upper()), person_attrs(uid.upper()))


def test_add_missing_parent_is_no_such_object_with_matched_dn(admin, tree):
    dn = "uid=x,ou=missing,%s" % tree.scratch
    with pytest.raises(ldap.NO_SUCH_OBJECT) as e:
        add(admin, dn, person_attrs("x"))
    assert norm_dn(matched(e)) == norm_dn(tree.scratch)


def test_add_missing_must_attribute_is_object_class_violation(admin, new_dn):
    dn, uid = new_dn
    attrs = person_attrs(uid)
    del attrs["sn"]
    with pytest.raises(ldap.OBJECT_CLASS_VIOLATION):
        add(admin, dn, attrs)


def test_add_unknown_attribute_is_undefined_type(admin, new_dn):
    dn, uid = new_dn
    with pytest.raises(ldap.UNDEFINED_TYPE):
        add(admin, dn, person_attrs(uid, extra={"noSuchAttributeXyz": [b"1"]}))


def test_add_bad_syntax_is_invalid_syntax(admin, new_dn):
    dn, uid = new_dn
    with pytest.raises(ldap.INVALID_SYNTAX):
        add(admin, dn, person_attrs(uid, uid_number="abc"))


def test_add_attribute_not_allowed_by_object_classes(admin, new_dn):
    dn, uid = new_dn
    with pytest.raises(ldap.OBJECT_CLASS_VIOLATION):
        add(admin, dn, person_attrs(uid, extra={"dc": [b"nope"]}))


def test_add_without_structural_class_is_object_class_violation(admin, new_dn):
    dn, uid = new_dn
    attrs = to_bytes_attrs({"objectClass": ["top", "posixAccount"], "uid": [uid], "cn": ["x"],
                            "uidNumber": ["5"], "gidNumber": ["5"], "homeDirectory": ["/x"]})
    with pytest.raises(ldap.OBJECT_CLASS_VIOLATION):
        add(admin, dn, attrs)


def test_add_two_unrelated_structural_classes_is_object_class_violation(admin, tree, cleanup):
    dn = "ou=%s,%s" % (tree.unique("o"), tree.scratch)
    cleanup.append(dn)
    attrs = to_bytes_attrs({"objectClass": ["top", "organizationalUnit", "device"],
                            "ou": [ldap.dn.str2dn(dn)[0][0][1]], "cn": ["x"]})
    with pytest.raises(ldap.OBJECT_CLASS_VIOLATION):
        add(admin, dn, attrs)


def test_add_unknown_object_class_is_invalid_syntax(admin, new_dn):
    # slapd: "objectClass: value #5 invalid per syntax"
    dn, uid = new_dn
    attrs = person_attrs(uid)
    attrs["objectClass"].append(b"noSuchObjectClassXyz")
    with pytest.raises(ldap.INVALID_SYNTAX):
        add(admin, dn, attrs)


def test_add_rdn_value_missing_from_attributes_is_added(admin, anon, tree, cleanup):
    # RFC 4511 §4.7: the RDN attribute values are part of the entry even if the client
    # did not list them in the attribute list.
    dn = "cn=%s,%s" % (tree.unique("d"), tree.scratch)
    cleanup.append(dn)
    add(admin, dn, to_bytes_attrs({"objectClass": ["top", "device"], "description": ["no cn given"]}))
    a = get_entry(anon, dn)
    assert a["cn"] == [ldap.dn.str2dn(dn)[0][0][1]]


def test_add_single_valued_with_two_values_is_constraint_violation(admin, new_dn):
    dn, uid = new_dn
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        add(admin, dn, person_attrs(uid, extra={"displayName": [b"One", b"Two"]}))


def test_add_duplicate_values_is_type_or_value_exists(admin, new_dn):
    dn, uid = new_dn
    with pytest.raises(ldap.TYPE_OR_VALUE_EXISTS):
        add(admin, dn, person_attrs(uid, extra={"description": [b"same", b"same"]}))


def test_add_values_equal_under_matching_rule_is_type_or_value_exists(admin, new_dn):
    dn, uid = new_dn
    with pytest.raises(ldap.TYPE_OR_VALUE_EXISTS):
        add(admin, dn, person_attrs(uid, extra={"cn": [b"Same Name", b"same name"]}))


def test_add_no_user_modification_attribute_is_constraint_violation(admin, new_dn):
    dn, uid = new_dn
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        add(admin, dn, person_attrs(uid, extra={"createTimestamp": [b"20200101000000Z"]}))


def test_add_invalid_dn_is_invalid_dn_syntax(admin):
    with pytest.raises(ldap.INVALID_DN_SYNTAX):
        add(admin, "not a dn", person_attrs("x"))


def test_add_as_anonymous_is_refused(anon, tree):
    with pytest.raises(ldap.STRONG_AUTH_REQUIRED):  # "modifications require authentication"
        add(anon, "uid=anonadd,%s" % tree.scratch, person_attrs("anonadd"))


def test_add_as_user_without_write_access_is_insufficient_access(alice, tree):
    with pytest.raises(ldap.INSUFFICIENT_ACCESS):
        add(alice, "uid=useradd,%s" % tree.scratch, person_attrs("useradd"))


def test_operational_attributes_set_on_add(admin, anon, new_dn):
    from conftest import ADMIN_DN
    dn, uid = new_dn
    add(admin, dn, person_attrs(uid))
    a = get_entry(anon, dn, ["+"])
    assert norm_dn(a["creatorsname"][0]) == norm_dn(ADMIN_DN)
    assert norm_dn(a["modifiersname"][0]) == norm_dn(ADMIN_DN)
    assert a["createtimestamp"] == a["modifytimestamp"]
    assert a["structuralobjectclass"] == ["inetOrgPerson"]


def test_add_outside_naming_contexts_is_unwilling_to_perform(admin):
    # slapd without a default referral: "no global superior knowledge"
    with pytest.raises(ldap.UNWILLING_TO_PERFORM):
        add(admin, "dc=elsewhere,dc=invalid", to_bytes_attrs(
            {"objectClass": ["dcObject", "organization"], "dc": ["elsewhere"], "o": ["x"]}))
