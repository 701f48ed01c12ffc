"""Delete (RFC 4511 §4.8) and Modify DN (§4.9)."""
import ldap
import ldap.modlist
import pytest

from conftest import norm_dn, person_attrs, to_bytes_attrs
from helpers import dns, get_entry, matched


def add_ou(conn, dn):
    conn.add_s(dn, ldap.modlist.addModlist(to_bytes_attrs(
        {"objectClass": ["top", "organizationalUnit"], "ou": [ldap.dn.str2dn(dn)[0][0][1]]})))


def add_person(conn, dn):
    uid = ldap.dn.str2dn(dn)[0][0][1]
    conn.add_s(dn, ldap.modlist.addModlist(person_attrs(uid)))


# ---- delete ---------------------------------------------------------------

def test_delete_leaf(admin, anon, tree, cleanup):
    dn = "uid=%s,%s" % (tree.unique("d"), tree.scratch)
    cleanup.append(dn)
    add_person(admin, dn)
    admin.delete_s(dn)
    with pytest.raises(ldap.NO_SUCH_OBJECT):
        anon.search_s(dn, ldap.SCOPE_BASE)


def test_delete_non_leaf_is_not_allowed_on_nonleaf(admin, anon, tree, cleanup):
    ou = "ou=%s,%s" % (tree.unique("n"), tree.scratch)
    cleanup.append(ou)
    add_ou(admin, ou)
    add_person(admin, "uid=child," + ou)
    with pytest.raises(ldap.NOT_ALLOWED_ON_NONLEAF):
        admin.delete_s(ou)
    assert len(anon.search_s(ou, ldap.SCOPE_SUBTREE)) == 2


def test_delete_missing_is_no_such_object_with_matched_dn(admin, tree):
    with pytest.raises(ldap.NO_SUCH_OBJECT) as e:
        admin.delete_s("uid=nobody," + tree.scratch)
    assert norm_dn(matched(e)) == norm_dn(tree.scratch)


def test_delete_as_anonymous_is_refused(anon, scratch_person):
    with pytest.raises(ldap.STRONG_AUTH_REQUIRED):  # "modifications require authentication"
        anon.delete_s(scratch_person[0])


def test_delete_as_user_is_insufficient_access(alice, scratch_person):
    with pytest.raises(ldap.INSUFFICIENT_ACCESS):
        alice.delete_s(scratch_person[0])


# ---- modrdn ---------------------------------------------------------------

@pytest.fixture
def renamable(admin, tree, cleanup):
    old = tree.unique("r")
    dn = "uid=%s,%s" % (old, tree.scratch)
    add_person(admin, dn)
    new = old + "new"
    cleanup.extend([dn, "uid=%s,%s" % (new, tree.scratch)])
    return dn, old, new


def test_modrdn_delete_old_rdn(admin, anon, tree, renamable):
    dn, old, new = renamable
    admin.rename_s(dn, "uid=" + new, delold=1)
    a = get_entry(anon, "uid=%s,%s" % (new, tree.scratch))
    assert a["uid"] == [new]
    with pytest.raises(ldap.NO_SUCH_OBJECT):
        anon.search_s(dn, ldap.SCOPE_BASE)


def test_modrdn_keep_old_rdn(admin, anon, tree, renamable):
    dn, old, new = renamable
    admin.rename_s(dn, "uid=" + new, delold=0)
    a = get_entry(anon, "uid=%s,%s" % (new, tree.scratch))
    assert sorted(a["uid"]) == sorted([old, new])


def test_modrdn_to_different_attribute_type(admin, anon, tree, renamable):
    dn, old, new = renamable
    new_dn = "cn=%s,%s" % (new, tree.scratch)
    admin.rename_s(dn, "cn=" + new, delold=0)
    try:
        a = get_entry(anon, new_dn)
        assert new in a["cn"] and a["uid"] == [old]
    finally:
        admin.delete_s(new_dn)


def test_modrdn_to_existing_is_already_exists(admin, tree, renamable):
    dn, old, new = renamable
    add_person(admin, "uid=%s,%s" % (new, tree.scratch))
    with pytest.raises(ldap.ALREADY_EXISTS):
        admin.rename_s(dn, "uid=" + new, delold=1)


def test_modrdn_missing_entry_is_no_such_object(admin, tree):
    with pytest.raises(ldap.NO_SUCH_OBJECT) as e:
        admin.rename_s("uid=nobody," + tree.scratch, "uid=somebody", delold=1)
    assert norm_dn(matched(e)) == norm_dn(tree.scratch)


def test_modrdn_new_superior_moves_subtree(admin, anon, tree, cleanup):
    src_parent = "ou=%s,%s" % (tree.unique("s"), tree.scratch)
    dst_parent = "ou=%s,%s" % (tree.unique("t"), tree.scratch)
    cleanup.extend([src_parent, dst_parent])
    add_ou(admin, src_parent)
    add_ou(admin, dst_parent)
    moved = "ou=dept," + src_parent
    add_ou(admin, moved)
    add_person(admin, "uid=m1," + moved)
    add_person(admin, "uid=m2," + moved)

    admin.rename_s(moved, "ou=dept", newsuperior=dst_parent, delold=1)

    new_base = "ou=dept," + dst_parent
    res = anon.search_s(new_base, ldap.SCOPE_SUBTREE, "(objectClass=*)", ["1.1"])
    assert dns(res) == sorted(norm_dn(x) for x in
                              [new_base, "uid=m1," + new_base, "uid=m2," + new_base])
    res = anon.search_s(dst_parent, ldap.SCOPE_SUBTREE, "(uid=m2)", ["entryDN"])
    assert norm_dn(res[0][0]) == norm_dn("uid=m2," + new_base)
    with pytest.raises(ldap.NO_SUCH_OBJECT):
        anon.search_s(moved, ldap.SCOPE_BASE)
    assert anon.search_s(src_parent, ldap.SCOPE_SUBTREE, "(uid=m1)") == []


def test_modrdn_new_superior_missing_is_no_such_object(admin, tree, renamable):
    dn, old, new = renamable
    with pytest.raises(ldap.NO_SUCH_OBJECT):
        admin.rename_s(dn, "uid=" + new, newsuperior="ou=missing," + tree.scratch, delold=1)


def test_modrdn_as_user_is_insufficient_access(alice, renamable):
    dn, old, new = renamable
    with pytest.raises(ldap.INSUFFICIENT_ACCESS):
        alice.rename_s(dn, "uid=" + new, delold=1)


def test_modrdn_to_attribute_not_allowed_is_object_class_violation(admin, renamable):
    dn, old, new = renamable
    with pytest.raises(ldap.OBJECT_CLASS_VIOLATION):
        admin.rename_s(dn, "dc=" + new, delold=0)


def test_modrdn_below_itself_is_unwilling_to_perform(admin, tree, cleanup):
    ou = "ou=%s,%s" % (tree.unique("u"), tree.scratch)
    cleanup.append(ou)
    add_ou(admin, ou)
    with pytest.raises(ldap.UNWILLING_TO_PERFORM):
        admin.rename_s(ou, ldap.dn.str2dn(ou)[0][0][0] + "=x", newsuperior=ou, delold=0)


def test_modrdn_as_anonymous_is_strong_auth_required(anon, renamable):
    dn, old, new = renamable
    with pytest.raises(ldap.STRONG_AUTH_REQUIRED):
        anon.rename_s(dn, "uid=" + new, delold=1)
