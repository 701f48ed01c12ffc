"""Entries that stand for others: referral objects (RFC 3296, RFC 4511 §4.1.10 and §4.5.3)
with and without the ManageDsaIT control, and aliases (RFC 4512 §2.6, RFC 4511 §4.5.1.3) in
the four derefAliases modes. The entries live in a subtree of their own, removed with
ManageDsaIT (without it the referral objects could neither be found nor deleted)."""
import uuid

import ldap
import ldap.modlist
import pytest
from ldap.controls.simple import ManageDSAITControl

from conftest import SUFFIX, bind_as, connect, ADMIN_DN, ADMIN_PW, norm_dn
from helpers import dns

MANAGE = [ManageDSAITControl()]
OTHER = "ldap://other.example:389/ou=elsewhere,dc=other"
NODN = "ldap://nodn.example:389/"


def add(conn, dn, attrs):
    conn.add_ext_s(dn, ldap.modlist.addModlist(
        {k: [v.encode() for v in (vs if isinstance(vs, list) else [vs])] for k, vs in attrs.items()}),
        serverctrls=MANAGE)


def referral(conn, dn, url):
    add(conn, dn, {"objectClass": ["referral", "extensibleObject"],
                   "ou": ldap.dn.str2dn(dn)[0][0][1], "ref": url})


def alias(conn, dn, target):
    add(conn, dn, {"objectClass": ["alias", "extensibleObject"],
                   "cn": ldap.dn.str2dn(dn)[0][0][1], "aliasedObjectName": target})


def person(conn, dn, extra=None):
    a = {"objectClass": ["person"], "cn": ldap.dn.str2dn(dn)[0][0][1], "sn": "S"}
    a.update(extra or {})
    add(conn, dn, a)


def ou(conn, dn):
    add(conn, dn, {"objectClass": ["organizationalUnit"], "ou": ldap.dn.str2dn(dn)[0][0][1]})


class Area:
    """ou=r: a person p, referral objects ref (URL with a DN) and refnodn (without), aliases
    al -> p, loop1 <-> loop2, dangling -> nothing. ou=s: q with child q2, and hid (hidden from
    everyone but the administrator). ou=t: toq -> q, tos -> ou=s, tohid -> hid."""

    def __init__(self, base):
        self.base = base
        self.r = "ou=r," + base
        self.s = "ou=s," + base
        self.t = "ou=t," + base

    def at(self, rdn, where):
        return "%s,%s" % (rdn, where)


@pytest.fixture(scope="module")
def area():
    conn = bind_as(ADMIN_DN, ADMIN_PW)
    base = "ou=sr%s,%s" % (uuid.uuid4().hex[:10], SUFFIX)
    a = Area(base)
    ou(conn, base)
    try:
        for o in (a.r, a.s, a.t):
            ou(conn, o)
        person(conn, a.at("cn=p", a.r))
        referral(conn, a.at("ou=ref", a.r), OTHER)
        referral(conn, a.at("ou=refnodn", a.r), NODN)
        alias(conn, a.at("cn=al", a.r), a.at("cn=p", a.r))
        alias(conn, a.at("cn=loop1", a.r), a.at("cn=loop2", a.r))
        alias(conn, a.at("cn=loop2", a.r), a.at("cn=loop1", a.r))
        alias(conn, a.at("cn=dangling", a.r), a.at("cn=nothere", a.r))
        person(conn, a.at("cn=q", a.s))
        person(conn, a.at("cn=q2", a.at("cn=q", a.s)))
        person(conn, a.at("cn=hid", a.s), {"description": "hidden-entry"})
        alias(conn, a.at("cn=toq", a.t), a.at("cn=q", a.s))
        alias(conn, a.at("cn=tos", a.t), a.s)
        alias(conn, a.at("cn=tohid", a.t), a.at("cn=hid", a.s))
        yield a
    finally:
        res = conn.search_ext_s(base, ldap.SCOPE_SUBTREE, "(objectClass=*)", ["1.1"],
                                serverctrls=MANAGE)
        for dn, _ in sorted(res, key=lambda r: len(ldap.dn.str2dn(r[0])), reverse=True):
            conn.delete_ext_s(dn, serverctrls=MANAGE)
        conn.unbind_s()


def admin_with(deref=ldap.DEREF_NEVER):
    conn = connect()
    conn.simple_bind_s(ADMIN_DN, ADMIN_PW)
    conn.set_option(ldap.OPT_DEREF, deref)
    return conn


@pytest.fixture
def admin_conn():
    conn = admin_with()
    yield conn
    conn.unbind_s()


def referred(exc):
    """The matched DN and the URLs of a referral error."""
    info = exc.value.args[0]
    urls = [u for u in info.get("info", "").split("\n")[1:] if u]
    return info.get("matched", ""), urls


def references(results):
    return sorted(u for dn, urls in results if dn is None for u in urls)


# ---- referral objects: searches --------------------------------------------------------

def test_search_based_at_a_referral_object_answers_referral(admin_conn, area):
    ref = area.at("ou=ref", area.r)
    with pytest.raises(ldap.REFERRAL) as e:
        admin_conn.search_ext_s(ref, ldap.SCOPE_BASE)
    assert referred(e) == (ref, [OTHER + "??base"])


def test_search_below_a_referral_object_gets_the_dn_and_scope_put_in(admin_conn, area):
    ref = area.at("ou=ref", area.r)
    with pytest.raises(ldap.REFERRAL) as e:
        admin_conn.search_ext_s("cn=x," + ref, ldap.SCOPE_SUBTREE)
    assert referred(e) == (ref, ["ldap://other.example:389/cn=x,ou=elsewhere,dc=other??sub"])


def test_a_referral_url_without_a_dn_gets_the_request_dn(admin_conn, area):
    ref = area.at("ou=refnodn", area.r)
    with pytest.raises(ldap.REFERRAL) as e:
        admin_conn.search_ext_s("cn=y," + ref, ldap.SCOPE_ONELEVEL)
    assert referred(e) == (ref, [NODN + "cn=y," + ref + "??one"])


def test_subtree_search_returns_continuation_references_not_the_referral_objects(admin_conn, area):
    res = admin_conn.search_ext_s(area.r, ldap.SCOPE_SUBTREE, "(objectClass=*)", ["1.1"])
    assert references(res) == sorted([OTHER + "??sub", NODN + area.at("ou=refnodn", area.r) + "??sub"])
    assert norm_dn(area.at("ou=ref", area.r)) not in dns(res)
    assert norm_dn(area.at("cn=p", area.r)) in dns(res)


def test_continuation_references_do_not_depend_on_the_filter(admin_conn, area):
    res = admin_conn.search_ext_s(area.r, ldap.SCOPE_ONELEVEL, "(cn=nothing-matches)")
    assert dns(res) == []
    assert references(res) == sorted([OTHER + "??base", NODN + area.at("ou=refnodn", area.r) + "??base"])


def test_manage_dsa_it_treats_referral_objects_as_plain_entries(admin_conn, area):
    ref = area.at("ou=ref", area.r)
    res = admin_conn.search_ext_s(ref, ldap.SCOPE_BASE, "(objectClass=*)", ["ref"],
                                  serverctrls=MANAGE)
    assert [(norm_dn(d), a) for d, a in res] == [(norm_dn(ref), {"ref": [OTHER.encode()]})]
    res = admin_conn.search_ext_s(area.r, ldap.SCOPE_SUBTREE, "(objectClass=referral)", ["1.1"],
                                  serverctrls=MANAGE)
    assert references(res) == []
    assert dns(res) == sorted([norm_dn(ref), norm_dn(area.at("ou=refnodn", area.r))])
    admin_conn.compare_ext_s(ref, "ou", b"ref", serverctrls=MANAGE)
    admin_conn.modify_ext_s(ref, [(ldap.MOD_REPLACE, "description", [b"managed"])],
                            serverctrls=MANAGE)
    admin_conn.modify_ext_s(ref, [(ldap.MOD_DELETE, "description", None)], serverctrls=MANAGE)


# ---- referral objects: other operations ----------------------------------------------

def test_modify_of_a_referral_object_answers_referral(admin_conn, area):
    ref = area.at("ou=ref", area.r)
    with pytest.raises(ldap.REFERRAL) as e:
        admin_conn.modify_s(ref, [(ldap.MOD_REPLACE, "description", [b"x"])])
    assert referred(e) == (ref, [OTHER])


def test_add_below_a_referral_object_answers_referral(admin_conn, area):
    ref = area.at("ou=ref", area.r)
    with pytest.raises(ldap.REFERRAL) as e:
        admin_conn.add_s("cn=z," + ref, ldap.modlist.addModlist(
            {"objectClass": [b"person"], "cn": [b"z"], "sn": [b"z"]}))
    assert referred(e) == (ref, ["ldap://other.example:389/cn=z,ou=elsewhere,dc=other"])


def test_delete_rename_and_compare_of_a_referral_object_answer_referral(admin_conn, area):
    ref = area.at("ou=ref", area.r)
    with pytest.raises(ldap.REFERRAL) as e:
        admin_conn.delete_s(ref)
    assert referred(e) == (ref, [OTHER])
    with pytest.raises(ldap.REFERRAL) as e:
        admin_conn.rename_s(ref, "ou=ref2")
    assert referred(e) == (ref, [OTHER])
    with pytest.raises(ldap.REFERRAL) as e:
        admin_conn.compare_s("cn=q," + ref, "cn", b"q")
    assert referred(e) == (ref, ["ldap://other.example:389/cn=q,ou=elsewhere,dc=other"])


# ---- aliases --------------------------------------------------------------------------

def search_dns(area, deref, base, scope, filt="(objectClass=*)"):
    conn = admin_with(deref)
    try:
        res = conn.search_ext_s(base, scope, filt, ["1.1"])
        return sorted(norm_dn(d) for d, _ in res if d is not None)
    finally:
        conn.unbind_s()


@pytest.mark.parametrize("deref,found", [
    (ldap.DEREF_NEVER, "cn=al"), (ldap.DEREF_SEARCHING, "cn=al"),
    (ldap.DEREF_FINDING, "cn=p"), (ldap.DEREF_ALWAYS, "cn=p")])
def test_an_alias_as_base_is_followed_when_finding(area, deref, found):
    got = search_dns(area, deref, area.at("cn=al", area.r), ldap.SCOPE_BASE)
    assert got == [norm_dn(area.at(found, area.r))]


@pytest.mark.parametrize("deref,aliases_returned", [
    (ldap.DEREF_NEVER, True), (ldap.DEREF_SEARCHING, False),
    (ldap.DEREF_FINDING, True), (ldap.DEREF_ALWAYS, False)])
def test_aliases_in_the_scope_are_followed_when_searching(area, deref, aliases_returned):
    got = search_dns(area, deref, area.r, ldap.SCOPE_SUBTREE, "(objectClass=*)")
    aliases = [norm_dn(area.at(x, area.r)) for x in ("cn=al", "cn=loop1", "cn=loop2", "cn=dangling")]
    # Loops and dangling aliases met in the scope are passed over, without an error.
    assert all((a in got) == aliases_returned for a in aliases)
    assert got.count(norm_dn(area.at("cn=p", area.r))) == 1


def test_a_one_level_search_returns_the_entries_aliases_name(area):
    got = search_dns(area, ldap.DEREF_ALWAYS, area.t, ldap.SCOPE_ONELEVEL)
    assert got == sorted([norm_dn(area.s), norm_dn(area.at("cn=q", area.s)),
                          norm_dn(area.at("cn=hid", area.s))])


@pytest.mark.linden_differs(reason="slapd's back-mdb returns an entry once per alias leading to "
                                   "it (cn=q here twice); RFC 4511 4.5.1.3 asks for it once")
def test_a_subtree_search_returns_each_entry_aliases_lead_to_once(area):
    got = search_dns(area, ldap.DEREF_SEARCHING, area.t, ldap.SCOPE_SUBTREE)
    q, q2 = norm_dn(area.at("cn=q", area.s)), norm_dn(area.at("cn=q2", area.at("cn=q", area.s)))
    assert got == sorted([norm_dn(area.t), norm_dn(area.s), q, q2,
                          norm_dn(area.at("cn=hid", area.s))])


def test_the_subtree_of_an_alias_target_is_searched(area):
    got = search_dns(area, ldap.DEREF_ALWAYS, area.at("cn=toq", area.t), ldap.SCOPE_SUBTREE)
    q = area.at("cn=q", area.s)
    assert got == sorted([norm_dn(q), norm_dn(area.at("cn=q2", q))])
    # In searching only, an alias as base is not followed: it is returned itself.
    got = search_dns(area, ldap.DEREF_SEARCHING, area.at("cn=toq", area.t), ldap.SCOPE_SUBTREE)
    assert got == [norm_dn(area.at("cn=toq", area.t))]


def test_an_alias_on_the_way_to_the_base_is_followed_when_finding(area):
    below = "cn=q2," + area.at("cn=toq", area.t)
    got = search_dns(area, ldap.DEREF_FINDING, below, ldap.SCOPE_BASE)
    assert got == [norm_dn(area.at("cn=q2", area.at("cn=q", area.s)))]
    conn = admin_with(ldap.DEREF_NEVER)
    try:
        with pytest.raises(ldap.NO_SUCH_OBJECT) as e:
            conn.search_ext_s(below, ldap.SCOPE_BASE)
        assert norm_dn(e.value.args[0]["matched"]) == norm_dn(area.at("cn=toq", area.t))
    finally:
        conn.unbind_s()


@pytest.mark.parametrize("name,text", [("cn=loop1", "circular alias"),
                                       ("cn=dangling", "aliasedObject not found")])
def test_a_base_alias_that_loops_or_dangles_is_an_alias_problem(area, name, text):
    conn = admin_with(ldap.DEREF_FINDING)
    try:
        with pytest.raises(ldap.ALIAS_PROBLEM) as e:
            conn.search_ext_s(area.at(name, area.r), ldap.SCOPE_BASE)
        assert e.value.args[0]["matched"] == area.at(name, area.r)
        assert e.value.args[0].get("info") == text
    finally:
        conn.unbind_s()


@pytest.fixture
def chain(area, admin_conn):
    """cn=c0 -> cn=c1 -> ... -> cn=c16 -> cn=c17 (a person), under ou=chain."""
    base = "ou=chain," + area.base
    ou(admin_conn, base)
    try:
        for i in range(17):
            alias(admin_conn, "cn=c%d,%s" % (i, base), "cn=c%d,%s" % (i + 1, base))
        person(admin_conn, "cn=c17," + base)
        yield base
    finally:
        for i in range(18):
            admin_conn.delete_s("cn=c%d,%s" % (i, base))
        admin_conn.delete_s(base)


def test_a_chain_of_fifteen_aliases_is_followed(area, chain):
    assert search_dns(area, ldap.DEREF_ALWAYS, "cn=c2," + chain, ldap.SCOPE_BASE) == \
        [norm_dn("cn=c17," + chain)]


@pytest.mark.linden_differs(reason="slapd 2.5/2.6 back-mdb stops at its max deref depth with "
                                   "result success and the text 'maximum deref depth exceeded' "
                                   "(deref_base loses the code); RFC 4511 says "
                                   "aliasDereferencingProblem (36)")
def test_a_chain_of_aliases_longer_than_fifteen_is_a_dereferencing_problem(area, chain):
    conn = admin_with(ldap.DEREF_ALWAYS)
    try:
        with pytest.raises(ldap.ALIAS_DEREF_PROBLEM) as e:
            conn.search_ext_s("cn=c0," + chain, ldap.SCOPE_BASE)
        assert norm_dn(e.value.args[0]["matched"]) == norm_dn("cn=c15," + chain)
        assert e.value.args[0].get("info") == "maximum deref depth exceeded"
    finally:
        conn.unbind_s()


def test_aliases_lead_only_to_entries_the_requester_may_see(area):
    conn = connect()
    conn.simple_bind_s("", "")
    conn.set_option(ldap.OPT_DEREF, ldap.DEREF_ALWAYS)
    try:
        res = conn.search_ext_s(area.t, ldap.SCOPE_ONELEVEL, "(objectClass=*)", ["1.1"])
        got = [norm_dn(d) for d, _ in res if d is not None]
        assert norm_dn(area.at("cn=hid", area.s)) not in got
        assert norm_dn(area.at("cn=q", area.s)) in got
        with pytest.raises(ldap.NO_SUCH_OBJECT):
            conn.search_ext_s(area.at("cn=tohid", area.t), ldap.SCOPE_BASE)
    finally:
        conn.unbind_s()
