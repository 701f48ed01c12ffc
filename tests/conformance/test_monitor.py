"""cn=Monitor (docs/monitoring.md), as slapd's back-monitor lays it out: the administrator reads
it with base, one-level and subtree searches and filters on the figures; others get
noSuchObject. The slapd reference runs `database monitor` readable by its rootdn only."""
import ldap
import pytest


def entries(conn, base, scope, filt="(objectClass=*)", attrs=("*", "+")):
    return {dn: a for dn, a in conn.search_s(base, scope, filt, list(attrs))}


def norm(dn):
    return dn.lower().replace(", ", ",")


def test_admin_reads_the_monitor_root(admin):
    es = entries(admin, "cn=Monitor", ldap.SCOPE_BASE)
    (dn, a), = es.items()
    assert norm(dn) == "cn=monitor"
    assert b"monitorServer" in a["objectClass"]
    assert a["monitoredInfo"]
    assert a["hasSubordinates"] == [b"TRUE"]


def test_subtree_has_connections_and_operations(admin):
    es = {norm(dn): a for dn, a in entries(admin, "cn=Monitor", ldap.SCOPE_SUBTREE).items()}
    for dn in ("cn=connections,cn=monitor", "cn=total,cn=connections,cn=monitor",
               "cn=current,cn=connections,cn=monitor", "cn=operations,cn=monitor",
               "cn=search,cn=operations,cn=monitor", "cn=bytes,cn=statistics,cn=monitor"):
        assert dn in es, dn
    assert int(es["cn=total,cn=connections,cn=monitor"]["monitorCounter"][0]) >= 1
    search = es["cn=search,cn=operations,cn=monitor"]
    assert b"monitorOperation" in search["objectClass"]
    assert int(search["monitorOpInitiated"][0]) >= 1


def test_one_level_and_filters_on_figures(admin):
    kids = entries(admin, "cn=Operations,cn=Monitor", ldap.SCOPE_ONELEVEL, attrs=["cn"])
    names = {a["cn"][0].decode().lower() for a in kids.values()}
    assert {"bind", "search", "compare", "modify", "modrdn", "add", "delete", "abandon",
            "extended"} <= names
    busy = entries(admin, "cn=Operations,cn=Monitor", ldap.SCOPE_ONELEVEL,
                   "(monitorOpInitiated>=1)", ["cn"])
    busy = {a["cn"][0].decode().lower() for a in busy.values()}
    assert "search" in busy and "bind" in busy


def searches_initiated(conn):
    (_, a), = conn.search_s("cn=Search,cn=Operations,cn=Monitor", ldap.SCOPE_BASE,
                            "(objectClass=*)", ["+"])
    return int(a["monitorOpInitiated"][0])


def test_counts_move(admin):
    before = searches_initiated(admin)
    for _ in range(3):
        admin.search_s("cn=Monitor", ldap.SCOPE_BASE, "(objectClass=*)", ["1.1"])
    assert searches_initiated(admin) >= before + 4


def test_figures_are_operational(admin):
    (dn, a), = admin.search_s("cn=Search,cn=Operations,cn=Monitor", ldap.SCOPE_BASE)
    assert "monitorOpInitiated" not in a
    assert a["cn"] == [b"Search"]


@pytest.mark.parametrize("scope", [ldap.SCOPE_BASE, ldap.SCOPE_ONELEVEL, ldap.SCOPE_SUBTREE])
def test_anonymous_gets_no_such_object(anon, scope):
    with pytest.raises(ldap.NO_SUCH_OBJECT):
        anon.search_s("cn=Monitor", scope, "(objectClass=*)")


def test_ordinary_user_gets_no_such_object(alice):
    with pytest.raises(ldap.NO_SUCH_OBJECT):
        alice.search_s("cn=Operations,cn=Monitor", ldap.SCOPE_SUBTREE, "(objectClass=*)")
