"""Password Modify extended operation (RFC 3062) and userPassword visibility."""
import ldap
import pytest

from conftest import PEOPLE, bind_as, connect
from helpers import ci, get_entry


def can_bind(dn, pw):
    try:
        bind_as(dn, pw).unbind_s()
        return True
    except ldap.INVALID_CREDENTIALS:
        return False


def test_passwd_self_with_old_password(scratch_person):
    dn, _, old = scratch_person
    conn = bind_as(dn, old)
    conn.passwd_s(dn, old, "Self-new-1")
    assert can_bind(dn, "Self-new-1")
    assert not can_bind(dn, old)


def test_passwd_self_without_user_identity(scratch_person):
    dn, _, old = scratch_person
    conn = bind_as(dn, old)
    conn.passwd_s(None, old, "Self-new-2")
    assert can_bind(dn, "Self-new-2")


def test_passwd_admin_sets_user_password_without_old(admin, scratch_person):
    dn, _, old = scratch_person
    admin.passwd_s(dn, None, "Admin-set-1")
    assert can_bind(dn, "Admin-set-1")
    assert not can_bind(dn, old)


def test_passwd_generated_when_no_new_password(admin, scratch_person):
    dn, _, old = scratch_person
    _, resp = admin.passwd_s(dn, None, None, extract_newpw=True)
    generated = resp.genPasswd
    assert generated
    generated = generated.decode() if isinstance(generated, bytes) else generated
    assert can_bind(dn, generated)
    assert not can_bind(dn, old)


def test_passwd_wrong_old_password(scratch_person):
    dn, _, old = scratch_person
    conn = bind_as(dn, old)
    with pytest.raises(ldap.UNWILLING_TO_PERFORM):
        conn.passwd_s(dn, "wrong-old", "Never-set")
    assert can_bind(dn, old)


def test_passwd_anonymous_is_strong_auth_required(scratch_person):
    # slapd: "only authenticated users may change passwords"
    dn, _, old = scratch_person
    conn = connect()
    with pytest.raises(ldap.STRONG_AUTH_REQUIRED):
        conn.passwd_s(dn, old, "Anon-set")
    assert can_bind(dn, old)


def test_passwd_for_other_user_is_insufficient_access(alice, scratch_person):
    dn, _, old = scratch_person
    with pytest.raises(ldap.INSUFFICIENT_ACCESS):
        alice.passwd_s(dn, None, "Hijack-1")
    assert can_bind(dn, old)


def test_passwd_missing_user_is_no_such_object(admin, tree):
    with pytest.raises(ldap.NO_SUCH_OBJECT):
        admin.passwd_s("uid=nobody," + tree.scratch, None, "x")


# ---- userPassword storage and visibility ------------------------------------

def test_admin_reads_hashed_user_password(admin, tree):
    a = get_entry(admin, tree.person("alice"), ["userPassword"])
    assert len(a["userpassword"]) == 1
    assert a["userpassword"][0].startswith("{")
    assert PEOPLE["alice"]["userPassword"][0] not in a["userpassword"][0]


def test_password_set_by_passwd_exop_is_hashed(admin, scratch_person):
    dn = scratch_person[0]
    admin.passwd_s(dn, None, "Hash-me-1")
    a = get_entry(admin, dn, ["userPassword"])
    assert a["userpassword"][0].startswith("{") and "Hash-me-1" not in a["userpassword"][0]


def test_password_set_by_modify_is_hashed_and_binds(admin, scratch_person):
    dn = scratch_person[0]
    admin.modify_s(dn, [(ldap.MOD_REPLACE, "userPassword", [b"Mod-set-1"])])
    assert get_entry(admin, dn, ["userPassword"])["userpassword"][0].startswith("{")
    assert can_bind(dn, "Mod-set-1")


def test_user_does_not_read_own_user_password(alice, tree):
    for attrs in (None, ["*"], ["userPassword"], ["*", "+"]):
        a = get_entry(alice, tree.person("alice"), attrs)
        assert "userpassword" not in a, attrs


def test_anonymous_does_not_read_user_password(anon, tree):
    for attrs in (None, ["userPassword"]):
        a = get_entry(anon, tree.person("alice"), attrs)
        assert "userpassword" not in a


def test_other_user_does_not_read_user_password(alice, tree):
    a = get_entry(alice, tree.person("bob"), ["*", "userPassword"])
    assert "userpassword" not in a and "cn" in a


def test_user_password_presence_filter_does_not_disclose(anon, tree):
    res = anon.search_s(tree.people, ldap.SCOPE_ONELEVEL, "(userPassword=*)", ["1.1"])
    assert res == []


def test_user_reads_own_entry_other_attributes(alice, tree):
    a = get_entry(alice, tree.person("alice"))
    assert a["cn"] == ["Alice Smith"] and a["uid"] == ["alice"]


def test_compare_user_password_as_anonymous_is_insufficient_access(anon, tree):
    with pytest.raises(ldap.INSUFFICIENT_ACCESS):
        anon.compare_s(tree.person("alice"), "userPassword", PEOPLE["alice"]["userPassword"][0].encode())
