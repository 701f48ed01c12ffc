"""Persistent Search (draft-ietf-ldapext-psearch-03) followed with python-ldap's own controls.

Linden only: OpenLDAP slapd 2.5 does not implement persistent search (a critical psearch control
gets unavailableCriticalExtension), so against the reference these are strict xfails.

Changes are made on another connection; each is acknowledged before the next read, and Linden
queues a change for every persistent search before it acknowledges the write, so each read below
waits (with a deadline) for a notification that is already on its way. No sleeps.
"""
import ldap
import ldap.modlist
import pytest
from ldap.controls.psearch import (CHANGE_TYPES_STR, EntryChangeNotificationControl,
                                   PersistentSearchControl)

from conftest import norm_dn, person_attrs, to_bytes_attrs

PSEARCH_OID = PersistentSearchControl.controlType
ECN_OID = EntryChangeNotificationControl.controlType
WAIT = 10  # seconds: a deadline for a broken server, never used to order events

pytestmark = pytest.mark.linden_differs(
    reason="slapd 2.5 does not implement persistent search (draft-ietf-ldapext-psearch)")


def next_entries(conn, msgid):
    """The entries of the next response(s) of `msgid`: [(dn, attrs, ecn or None)]."""
    rtype, rdata = conn.result4(
        msgid, all=0, timeout=WAIT, add_ctrls=1,
        resp_ctrl_classes={ECN_OID: EntryChangeNotificationControl})[:2]
    assert rtype == ldap.RES_SEARCH_ENTRY, (rtype, rdata)
    out = []
    for dn, attrs, ctrls in rdata:
        ecn = [c for c in ctrls if c.controlType == ECN_OID]
        out.append((dn, attrs, ecn[0] if ecn else None))
    return out


def next_entry(conn, msgid):
    got = next_entries(conn, msgid)
    assert len(got) == 1, got
    return got[0]


@pytest.fixture
def branch(tree, admin_session):
    """An OU under ou=scratch holding one person; removed afterwards."""
    ou = tree.unique("ps")
    dn = "ou=%s,%s" % (ou, tree.scratch)
    admin_session.add_s(dn, ldap.modlist.addModlist(to_bytes_attrs(
        {"objectClass": ["top", "organizationalUnit"], "ou": [ou]})))
    first = "uid=%s,%s" % (tree.unique("p"), dn)
    admin_session.add_s(first, ldap.modlist.addModlist(
        person_attrs(ldap.dn.str2dn(first)[0][0][1])))
    yield dn, first
    res = admin_session.search_s(dn, ldap.SCOPE_SUBTREE, "(objectClass=*)", ["1.1"])
    for edn, _ in sorted(res, key=lambda r: len(ldap.dn.str2dn(r[0])), reverse=True):
        admin_session.delete_s(edn)


def test_root_dse_lists_persistent_search(anon):
    res = anon.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["supportedControl"])
    assert PSEARCH_OID.encode() in res[0][1]["supportedControl"]


def test_initial_entries_then_every_change_with_its_notification(admin, admin_session, tree,
                                                                  branch):
    base, first = branch
    msgid = admin.search_ext(
        base, ldap.SCOPE_SUBTREE, "(objectClass=*)", ["uid", "description"],
        serverctrls=[PersistentSearchControl(criticality=True, changesOnly=False,
                                             returnECs=True)])
    # changesOnly=False: the current entries first, without notifications.
    initial = next_entries(admin, msgid)
    while len(initial) < 2:
        initial += next_entries(admin, msgid)
    assert sorted(norm_dn(d) for d, _, _ in initial) == sorted([norm_dn(base), norm_dn(first)])
    assert all(ecn is None for _, _, ecn in initial)

    w = admin_session
    uid = tree.unique("p")
    added = "uid=%s,%s" % (uid, base)
    w.add_s(added, ldap.modlist.addModlist(person_attrs(uid)))
    dn, attrs, ecn = next_entry(admin, msgid)
    assert norm_dn(dn) == norm_dn(added)
    assert CHANGE_TYPES_STR[ecn.changeType] == "add" and ecn.previousDN is None
    assert attrs["uid"] == [uid.encode()]

    w.modify_s(added, [(ldap.MOD_REPLACE, "description", [b"watched"])])
    dn, attrs, ecn = next_entry(admin, msgid)
    assert CHANGE_TYPES_STR[ecn.changeType] == "modify"
    assert attrs["description"] == [b"watched"]

    new_uid = tree.unique("p")
    w.rename_s(added, "uid=" + new_uid, delold=1)
    renamed = "uid=%s,%s" % (new_uid, base)
    dn, attrs, ecn = next_entry(admin, msgid)
    assert CHANGE_TYPES_STR[ecn.changeType] == "modDN"
    assert norm_dn(dn) == norm_dn(renamed)
    assert norm_dn(ecn.previousDN) == norm_dn(added)

    w.delete_s(renamed)
    dn, attrs, ecn = next_entry(admin, msgid)
    assert CHANGE_TYPES_STR[ecn.changeType] == "delete"
    assert norm_dn(dn) == norm_dn(renamed)
    # The entry as it was before the delete.
    assert attrs["description"] == [b"watched"]

    admin.abandon(msgid)


def test_change_types_select_what_is_sent(admin, admin_session, tree, branch):
    base, first = branch
    msgid = admin.search_ext(
        base, ldap.SCOPE_SUBTREE, "(objectClass=*)", ["1.1"],
        serverctrls=[PersistentSearchControl(changeTypes=["delete"], changesOnly=True,
                                             returnECs=False)])
    w = admin_session
    # An add and a modify are not sent; the delete after them is the first thing that arrives.
    uid = tree.unique("p")
    other = "uid=%s,%s" % (uid, base)
    w.add_s(other, ldap.modlist.addModlist(person_attrs(uid)))
    w.modify_s(first, [(ldap.MOD_REPLACE, "description", [b"ignored"])])
    w.delete_s(other)
    dn, _, ecn = next_entry(admin, msgid)
    assert norm_dn(dn) == norm_dn(other)
    assert ecn is None  # returnECs=False
    admin.abandon(msgid)
