"""LDAP transactions (RFC 5805), subtree delete (1.2.840.113556.1.4.805) and permissive modify
(1.2.840.113556.1.4.1413). Transactions go over a raw socket (rawldap): slapd's transaction
identifier is empty, which python-ldap cannot send as a control value, and the End Transaction
response of a failed commit carries a value python-ldap does not return."""
import ldap
import ldap.modlist
import pytest
from ldap.controls import LDAPControl

import rawldap as r
from conftest import ADMIN_DN, ADMIN_PW, to_bytes_attrs

SUBTREE_DELETE = "1.2.840.113556.1.4.805"
PERMISSIVE_MODIFY = "1.2.840.113556.1.4.1413"
TXN_ID_INVALID = 0x4121


def ou(name):
    return {"objectClass": ["organizationalUnit"], "ou": [name]}


@pytest.fixture
def raw():
    c = r.Conn()
    c.bind(ADMIN_DN, ADMIN_PW)
    yield c
    c.close()


def start(c):
    s = c.call(r.extended_op(r.TXN_START))
    assert s.code == 0, s
    tid = s.value or b""
    return tid, r.control(r.TXN_SPEC, True, tid)


def exists(admin, dn):
    try:
        admin.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["1.1"])
        return True
    except ldap.NO_SUCH_OBJECT:
        return False


def test_root_dse_lists_the_transaction_operations(anon):
    dse = anon.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["supportedExtension"])[0][1]
    ext = [v.decode() for v in dse["supportedExtension"]]
    assert r.TXN_START in ext and r.TXN_END in ext


@pytest.mark.linden_differs(reason="slapd 2.5 (Debian) implements but does not advertise "
                                   "permissive modify, nor subtree delete or txnSpec")
def test_root_dse_lists_the_controls(anon):
    dse = anon.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["supportedControl"])[0][1]
    ctl = [v.decode() for v in dse["supportedControl"]]
    for oid in (SUBTREE_DELETE, PERMISSIVE_MODIFY, r.TXN_SPEC):
        assert oid in ctl


def test_commit_applies_every_operation_at_once(raw, admin, tree, cleanup, scratch_person):
    base = "ou=%s,%s" % (tree.unique("x"), tree.scratch)
    cleanup.append(base)
    person = scratch_person[0]
    tid, ctl = start(raw)
    for op in (r.add_op(base, ou(base[3:].split(",")[0])),
               r.add_op("ou=child," + base, ou("child")),
               r.modify_op(person, [(2, "description", ["in a transaction"])])):
        res = raw.call(op, [ctl])
        assert res.code == 0, res
    # Queued, not applied.
    assert not exists(admin, base)
    res = raw.call(r.txn_end(tid))
    assert res.code == 0, res
    assert r.txn_end_failed_id(res.value) is None
    assert exists(admin, "ou=child," + base)
    got = admin.search_s(person, ldap.SCOPE_BASE, "(objectClass=*)", ["description"])
    assert got[0][1]["description"] == [b"in a transaction"]


def test_a_failing_operation_fails_the_commit_and_names_its_message_id(raw, admin, tree, cleanup):
    base = "ou=%s,%s" % (tree.unique("x"), tree.scratch)
    cleanup.append(base)
    tid, ctl = start(raw)
    assert raw.call(r.add_op(base, ou(base[3:].split(",")[0])), [ctl]).code == 0
    # The same entry again: it exists by then.
    bad = raw.send(r.add_op(base, ou(base[3:].split(",")[0])), [ctl])
    assert raw.recv().code == 0
    assert raw.call(r.modify_op(tree.person("bob"), [(2, "description", ["never"])]),
                    [ctl]).code == 0
    res = raw.call(r.txn_end(tid))
    assert res.code == 68, res  # entryAlreadyExists, the failing operation's result
    assert r.txn_end_failed_id(res.value) == bad
    assert not exists(admin, base)
    got = admin.search_s(tree.person("bob"), ldap.SCOPE_BASE, "(objectClass=*)", ["description"])
    assert got[0][1] == {}
    # The transaction is over.
    assert raw.call(r.txn_end(tid)).code == TXN_ID_INVALID


def test_abort_applies_nothing(raw, admin, tree, cleanup):
    base = "ou=%s,%s" % (tree.unique("x"), tree.scratch)
    cleanup.append(base)
    tid, ctl = start(raw)
    assert raw.call(r.add_op(base, ou(base[3:].split(",")[0])), [ctl]).code == 0
    res = raw.call(r.txn_end(tid, commit=False))
    assert res.code == 0, res
    assert not exists(admin, base)


def test_closing_the_connection_drops_the_transaction(admin, tree, cleanup):
    base = "ou=%s,%s" % (tree.unique("x"), tree.scratch)
    cleanup.append(base)
    c = r.Conn()
    c.bind(ADMIN_DN, ADMIN_PW)
    _, ctl = start(c)
    assert c.call(r.add_op(base, ou(base[3:].split(",")[0])), [ctl]).code == 0
    c.close()
    assert not exists(admin, base)


def test_transaction_errors(raw, tree):
    # An identifier the connection never got.
    res = raw.call(r.delete_op(tree.person("dave")), [r.control(r.TXN_SPEC, True, b"zz")])
    assert res.code == TXN_ID_INVALID, res
    # The control must be critical.
    tid, _ = start(raw)
    res = raw.call(r.delete_op(tree.person("dave")), [r.control(r.TXN_SPEC, False, tid)])
    assert res.code == 2, res
    # One transaction at a time (max_transactions = 1, slapd's only choice).
    assert raw.call(r.extended_op(r.TXN_START)).code == 51
    # Nothing to commit: operationsError, and the transaction is over.
    assert raw.call(r.txn_end(tid)).code == 1
    assert raw.call(r.txn_end(tid)).code == TXN_ID_INVALID


def add_tree(admin, base):
    admin.add_s(base, ldap.modlist.addModlist(to_bytes_attrs(ou(base[3:].split(",")[0]))))
    for a in ("a", "b"):
        dn = "ou=%s,%s" % (a, base)
        admin.add_s(dn, ldap.modlist.addModlist(to_bytes_attrs(ou(a))))
        admin.add_s("ou=leaf,%s" % dn, ldap.modlist.addModlist(to_bytes_attrs(ou("leaf"))))


@pytest.mark.linden_differs(reason="slapd 2.5 (Debian build) has no subtree delete: "
                                   "unavailableCriticalExtension")
def test_subtree_delete_removes_the_whole_tree(admin, tree, cleanup):
    base = "ou=%s,%s" % (tree.unique("x"), tree.scratch)
    cleanup.append(base)
    add_tree(admin, base)
    with pytest.raises(ldap.NOT_ALLOWED_ON_NONLEAF):
        admin.delete_s(base)
    admin.delete_ext_s(base, serverctrls=[LDAPControl(SUBTREE_DELETE, True, None)])
    assert not exists(admin, base)
    assert not exists(admin, "ou=leaf,ou=a," + base)


@pytest.mark.linden_differs(reason="slapd 2.5 (Debian build) has no subtree delete: "
                                   "unavailableCriticalExtension")
def test_subtree_delete_without_rights_deletes_nothing(admin, alice, tree, cleanup):
    base = "ou=%s,%s" % (tree.unique("x"), tree.scratch)
    cleanup.append(base)
    add_tree(admin, base)
    with pytest.raises(ldap.INSUFFICIENT_ACCESS):
        alice.delete_ext_s(base, serverctrls=[LDAPControl(SUBTREE_DELETE, True, None)])
    assert exists(admin, "ou=leaf,ou=b," + base)


def test_permissive_modify(admin, scratch_person):
    dn = scratch_person[0]
    mods = [(ldap.MOD_ADD, "mail", [(scratch_person[1] + "@example.com").encode(), b"x@example.com"]),
            (ldap.MOD_DELETE, "description", None),
            (ldap.MOD_DELETE, "seeAlso", [b"cn=nobody"])]
    with pytest.raises(ldap.TYPE_OR_VALUE_EXISTS):
        admin.modify_s(dn, mods)
    admin.modify_ext_s(dn, mods, serverctrls=[LDAPControl(PERMISSIVE_MODIFY, True, None)])
    got = admin.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["mail"])[0][1]
    assert sorted(got["mail"]) == sorted([(scratch_person[1] + "@example.com").encode(),
                                          b"x@example.com"])


@pytest.mark.linden_differs(reason="slapd 2.5 still answers noSuchAttribute for a value to "
                                   "delete that an existing attribute lacks; the control's "
                                   "definition (and Linden) skip it")
def test_permissive_modify_skips_a_missing_value(admin, scratch_person):
    dn = scratch_person[0]
    admin.modify_ext_s(dn, [(ldap.MOD_DELETE, "telephoneNumber", [b"+1 555 0000"])],
                       serverctrls=[LDAPControl(PERMISSIVE_MODIFY, True, None)])
    got = admin.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["telephoneNumber"])[0][1]
    assert got["telephoneNumber"] == [b"+1 555 0199"]
