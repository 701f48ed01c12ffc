"""Simple bind and the Who am I? extended operation (RFC 4511 §4.2, RFC 4532)."""
import ldap
import pytest

from conftest import ADMIN_DN, ADMIN_PW, PEOPLE, connect, norm_dn


def whoami_dn(conn):
    w = conn.whoami_s()
    if w == "":
        return ""
    assert w.startswith("dn:"), w
    return norm_dn(w[3:])


def test_admin_bind_ok():
    conn = connect()
    conn.simple_bind_s(ADMIN_DN, ADMIN_PW)
    assert whoami_dn(conn) == norm_dn(ADMIN_DN)


def test_user_bind_ok(tree):
    conn = connect()
    conn.simple_bind_s(tree.person("alice"), PEOPLE["alice"]["userPassword"][0])
    assert whoami_dn(conn) == norm_dn(tree.person("alice"))


def test_user_bind_dn_is_case_and_space_insensitive(tree):
    dn = tree.person("alice").replace("uid=alice,ou=people,", "UID=Alice, OU=People, ")
    conn = connect()
    conn.simple_bind_s(dn, PEOPLE["alice"]["userPassword"][0])
    assert whoami_dn(conn) == norm_dn(tree.person("alice"))


def test_wrong_password_is_invalid_credentials(tree):
    conn = connect()
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        conn.simple_bind_s(tree.person("alice"), "not-the-password")
    # after a failed bind the connection is anonymous
    assert whoami_dn(conn) == ""


def test_wrong_admin_password_is_invalid_credentials():
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        connect().simple_bind_s(ADMIN_DN, ADMIN_PW + "x")


def test_unknown_dn_is_invalid_credentials(tree):
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        connect().simple_bind_s("uid=nobody," + tree.people, "whatever")


def test_entry_without_password_is_invalid_credentials(tree):
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        connect().simple_bind_s(tree.people, "whatever")


def test_dn_with_empty_password_is_unwilling_to_perform(tree):
    # RFC 4513 §5.1.2 unauthenticated bind: servers SHOULD fail it by default
    conn = connect()
    with pytest.raises(ldap.UNWILLING_TO_PERFORM):
        conn.simple_bind_s(tree.person("alice"), "")
    assert whoami_dn(conn) == ""


def test_anonymous_bind_ok():
    conn = connect()
    conn.simple_bind_s("", "")
    assert whoami_dn(conn) == ""


def test_no_bind_at_all_is_anonymous():
    assert whoami_dn(connect()) == ""


def test_rebind_changes_identity(tree):
    conn = connect()
    conn.simple_bind_s(tree.person("alice"), PEOPLE["alice"]["userPassword"][0])
    assert whoami_dn(conn) == norm_dn(tree.person("alice"))
    conn.simple_bind_s(tree.person("bob"), PEOPLE["bob"]["userPassword"][0])
    assert whoami_dn(conn) == norm_dn(tree.person("bob"))
    conn.simple_bind_s("", "")
    assert whoami_dn(conn) == ""


def test_bind_invalid_dn_is_invalid_dn_syntax():
    with pytest.raises(ldap.INVALID_DN_SYNTAX):
        connect().simple_bind_s("this is not a dn", "pw")


def test_bind_dn_outside_naming_contexts_is_invalid_credentials():
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        connect().simple_bind_s("cn=nobody,dc=elsewhere,dc=invalid", "pw")
