"""Content synchronization (RFC 4533) followed by python-ldap's own consumer, ldap.syncrepl.

The server is the provider (Linden with `syncprov = true`, slapd with the syncprov overlay); a
SyncreplConsumer keeps a mirror of a branch (entries by entryUUID) and, after each refresh or
change, the mirror must equal what a plain search of the branch returns: DNs, user attributes
and entryUUIDs. Changes: adds, modifies of several attributes, renames in place and with
newSuperior (into and out of the branch), deletes.

Waiting: a change is acknowledged before the consumer polls, and each poll blocks (with a
deadline for a broken server) until the next message arrives; the loops are bounded by the
number of messages the changes can make. No sleeps.
"""
import ldap
import ldap.modlist
import pytest
from ldap.ldapobject import SimpleLDAPObject
from ldap.syncrepl import SyncreplConsumer

from conftest import ADMIN_DN, ADMIN_PW, LDAP_URL, SUFFIX, norm_dn, person_attrs, to_bytes_attrs

WAIT = 10  # seconds: a deadline for a broken server, never used to order events
SYNC_OID = "1.3.6.1.4.1.4203.1.9.1.1"


class Mirror(SimpleLDAPObject, SyncreplConsumer):
    """A consumer that keeps the entries it is sent, by entryUUID."""

    def __init__(self):
        SimpleLDAPObject.__init__(self, LDAP_URL)
        self.protocol_version = 3
        self.simple_bind_s(ADMIN_DN, ADMIN_PW)
        self.cookie = None
        self.entries = {}
        self.present = set()
        self.refreshed = False

    def syncrepl_get_cookie(self):
        return self.cookie

    def syncrepl_set_cookie(self, cookie):
        self.cookie = cookie

    def syncrepl_entry(self, dn, attrs, uuid):
        self.entries[uuid] = (dn, attrs)

    def syncrepl_delete(self, uuids):
        for u in uuids:
            self.entries.pop(u, None)

    def syncrepl_present(self, uuids, refreshDeletes=False):
        if uuids is not None:
            self.present.update(uuids)
            return
        if not refreshDeletes:
            for u in list(self.entries):
                if u not in self.present:
                    del self.entries[u]
        self.present = set()

    def syncrepl_refreshdone(self):
        self.refreshed = True

    def view(self):
        """{entryUUID: (normalized DN, {attr lower: sorted values})}"""
        return {u: (norm_dn(dn), canon(attrs)) for u, (dn, attrs) in self.entries.items()}


def canon(attrs):
    return {k.lower(): sorted(v) for k, v in attrs.items() if k.lower() != "entryuuid"}


def server_view(conn, base):
    res = conn.search_s(base, ldap.SCOPE_SUBTREE, "(objectClass=*)", ["*", "entryUUID"])
    out = {}
    for dn, attrs in res:
        u = attrs["entryUUID"][0].decode()
        out[u] = (norm_dn(dn), canon(attrs))
    return out


def refresh_only(m, base):
    msgid = m.syncrepl_search(base, ldap.SCOPE_SUBTREE, mode="refreshOnly",
                              filterstr="(objectClass=*)", attrlist=["*"])
    # Bounded: a refresh sends at most one message per entry plus a few.
    for _ in range(10000):
        if not m.syncrepl_poll(msgid=msgid, timeout=WAIT):
            return
    raise AssertionError("refresh did not end")


@pytest.fixture
def branch(tree, admin_session):
    """An OU under ou=scratch holding three people, a sibling OU outside it; removed after."""
    made = []
    dns = []
    for name in ("sync", "away"):
        ou = tree.unique(name)
        dn = "ou=%s,%s" % (ou, tree.scratch)
        admin_session.add_s(dn, ldap.modlist.addModlist(to_bytes_attrs(
            {"objectClass": ["top", "organizationalUnit"], "ou": [ou]})))
        made.append(dn)
    for i in range(3):
        uid = tree.unique("s")
        dn = "uid=%s,%s" % (uid, made[0])
        admin_session.add_s(dn, ldap.modlist.addModlist(person_attrs(uid)))
        dns.append(dn)
    yield made[0], made[1], dns
    for base in made:
        res = admin_session.search_s(base, ldap.SCOPE_SUBTREE, "(objectClass=*)", ["1.1"])
        for edn, _ in sorted(res, key=lambda r: len(ldap.dn.str2dn(r[0])), reverse=True):
            admin_session.delete_s(edn)


def change_everything(conn, tree, base, away, dns):
    """An add, a modify of several attributes, a delete, a rename in place, a move out with
    newSuperior and a move in: the DN each ends with, or None when it left the branch."""
    uid = tree.unique("n")
    conn.add_s("uid=%s,%s" % (uid, base), ldap.modlist.addModlist(person_attrs(uid)))
    conn.modify_s(dns[0], [(ldap.MOD_REPLACE, "sn", [b"Changed"]),
                           (ldap.MOD_ADD, "description", [b"one", b"two"]),
                           (ldap.MOD_DELETE, "telephoneNumber", None)])
    conn.delete_s(dns[1])
    new_rdn = "uid=%s" % tree.unique("r")
    conn.rename_s(dns[2], new_rdn, delold=1)
    moved = "%s,%s" % (new_rdn, base)
    conn.rename_s(moved, new_rdn, newsuperior=away, delold=1)
    uid2 = tree.unique("i")
    conn.add_s("uid=%s,%s" % (uid2, away), ldap.modlist.addModlist(person_attrs(uid2)))
    conn.rename_s("uid=%s,%s" % (uid2, away), "uid=%s" % uid2, newsuperior=base, delold=1)


def test_root_dse_lists_the_sync_request_control(admin_session):
    res = admin_session.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["supportedControl"])
    assert SYNC_OID.encode() in res[0][1]["supportedControl"]


def test_suffix_entry_shows_context_csn(admin_session, branch):
    res = admin_session.search_s(SUFFIX, ldap.SCOPE_BASE, "(objectClass=*)", ["contextCSN"])
    csns = res[0][1].get("contextCSN", [])
    assert csns, res
    # OpenLDAP's form, one per server id.
    for c in csns:
        assert len(c.decode().split("#")) == 4, csns


def test_refresh_only_then_refresh_with_the_cookie(admin_session, tree, branch):
    base, away, dns = branch
    m = Mirror()
    try:
        refresh_only(m, base)
        assert m.cookie
        assert m.view() == server_view(admin_session, base)
        first = m.cookie
        change_everything(admin_session, tree, base, away, dns)
        refresh_only(m, base)
        assert m.cookie != first
        assert m.view() == server_view(admin_session, base)
        assert len(m.entries) == 4  # the OU, one changed, one added, one moved in
    finally:
        m.unbind_s()


def test_refresh_and_persist_follows_changes(admin_session, tree, branch):
    base, away, dns = branch
    m = Mirror()
    try:
        msgid = m.syncrepl_search(base, ldap.SCOPE_SUBTREE, mode="refreshAndPersist",
                                  filterstr="(objectClass=*)", attrlist=["*"])
        for _ in range(100):
            if m.refreshed:
                break
            assert m.syncrepl_poll(msgid=msgid, timeout=WAIT)
        assert m.refreshed
        assert m.view() == server_view(admin_session, base)
        change_everything(admin_session, tree, base, away, dns)
        want = server_view(admin_session, base)
        # The changes make at most one message each.
        for _ in range(10):
            if m.view() == want:
                break
            assert m.syncrepl_poll(msgid=msgid, timeout=WAIT)
        assert m.view() == want
        m.abandon(msgid)
    finally:
        m.unbind_s()
