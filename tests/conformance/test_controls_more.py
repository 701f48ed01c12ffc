"""Matched values (RFC 3876), proxied authorization v2 (RFC 4370), dontUseCopy (RFC 6171) and
the dereference control (draft-masarati-ldap-deref), as python-ldap sends and decodes them;
checked against slapd 2.5 (scripts/slapd-reference.sh: deref overlay, `authz-policy from`,
proxied authorization and dontUseCopy required critical)."""
import ldap
import ldap.modlist
import pytest
from ldap.controls import LDAPControl, RequestControlTuples
from ldap.controls.deref import DereferenceControl, DerefResultControlValue
from ldap.controls.libldap import MatchedValuesControl
from ldap.controls.simple import ProxyAuthzControl as _ProxyAuthzControl

from conftest import ADMIN_DN, PEOPLE, REFERENCE, bind_as, norm_dn, person_attrs
from helpers import ci, error_info, get_entry

MV = "1.2.826.0.1.3344810.2.3"
PROXY = "2.16.840.1.113730.3.4.18"
DONT_USE_COPY = "1.3.6.1.1.22"
DEREF = "1.3.6.1.4.1.4203.666.5.16"
WHOAMI = "1.3.6.1.4.1.4203.1.11.3"


def ProxyAuthzControl(critical, authzid):
    # python-ldap sends the value as given: it must be bytes.
    return _ProxyAuthzControl(critical, authzid.encode())


def test_root_dse_lists_the_controls(anon):
    res = anon.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["supportedControl"])
    oids = {v.decode() for v in res[0][1]["supportedControl"]}
    assert {MV, PROXY, DONT_USE_COPY, DEREF} <= oids


# --- matched values ------------------------------------------------------------------------

def mv_search(conn, dn, filterstr, attrs=None, critical=True):
    ctl = MatchedValuesControl(criticality=critical, filterstr=filterstr)
    res = conn.search_ext_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", attrs, serverctrls=[ctl])
    assert len(res) == 1
    return ci(res[0][1])


@pytest.fixture
def mv_person(tree, admin_session):
    uid = tree.unique("mv")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    admin_session.add_s(dn, ldap.modlist.addModlist(person_attrs(uid, cn="Alice Archer", extra={
        "cn": ["Alice Archer", "Ally", "A. Archer"],
        "mail": ["%s@example.com" % uid, "%s@example.org" % uid, "other@example.net"],
        "telephoneNumber": ["+1 555 0101", "+1 555 0202"],
    })))
    yield dn, uid
    admin_session.delete_s(dn)


def test_mv_equality_keeps_only_matching_values(alice, mv_person):
    dn, uid = mv_person
    got = mv_search(alice, dn, "(cn=ally)", ["cn", "sn", "mail"])
    # Only attributes with a matching value are returned, and only those values.
    assert got == {"cn": ["Ally"]}


def test_mv_several_item_kinds(alice, mv_person):
    dn, uid = mv_person
    got = mv_search(alice, dn, "((mail=*.org)(cn=A*Archer)(uid=*)(telephoneNumber=+1 555 0202))")
    assert sorted(got["mail"]) == ["%s@example.org" % uid]
    assert sorted(got["cn"]) == ["A. Archer", "Alice Archer"]
    assert got["uid"] == [uid]
    assert got["telephonenumber"] == ["+1 555 0202"]
    assert "sn" not in got and "objectclass" not in got


def test_mv_ordering_and_extensible(alice, mv_person):
    dn, uid = mv_person
    got = mv_search(alice, dn, "((uidNumber>=1000)(cn:caseExactMatch:=Ally)(gidNumber<=99))")
    assert got == {"uidnumber": ["2000"], "cn": ["Ally"]}


def test_mv_present_objectclass_returns_only_objectclass(alice, mv_person):
    dn, _ = mv_person
    got = mv_search(alice, dn, "(objectClass=*)", ["*"])
    assert list(got) == ["objectclass"]
    assert "inetOrgPerson".lower() in [v.lower() for v in got["objectclass"]]


def test_mv_attribute_with_no_matching_value_is_left_out(alice, mv_person):
    dn, _ = mv_person
    assert mv_search(alice, dn, "(cn=nobody)") == {}
    # An undefined attribute type matches no value and is no error.
    assert mv_search(alice, dn, "(noSuchAttribute=x)", ["cn"]) == {}


def test_mv_approx_matches_nothing(alice, mv_person):
    # Neither server has an approximate matching rule for cn.
    dn, _ = mv_person
    assert mv_search(alice, dn, "(cn~=Ally)", ["cn"]) == {}


def test_mv_and_item_matches_nothing(alice, mv_person):
    # SEQUENCE { and { equalityMatch cn=Ally } }: not a SimpleFilterItem; slapd accepts it and
    # it matches no value.
    dn, _ = mv_person
    value = b"\x30\x0e\xa0\x0c\xa3\x0a\x04\x02cn\x04\x04Ally"
    res = alice.search_ext_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["cn"],
                             serverctrls=[LDAPControl(MV, True, encodedControlValue=value)])
    assert ci(res[0][1]) == {}


def test_mv_empty_filter_returns_everything(alice, mv_person):
    dn, _ = mv_person
    res = alice.search_ext_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["cn"],
                             serverctrls=[LDAPControl(MV, True, encodedControlValue=b"\x30\x00")])
    assert len(ci(res[0][1])["cn"]) == 3


@pytest.mark.parametrize("value", [None, b"", b"\x04\x00", b"\xa3\x0a\x04\x02cn\x04\x04Ally"])
def test_mv_malformed_is_protocol_error(alice, mv_person, value):
    dn, _ = mv_person
    with pytest.raises(ldap.PROTOCOL_ERROR):
        alice.search_ext_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["cn"],
                           serverctrls=[LDAPControl(MV, True, encodedControlValue=value)])


def test_mv_on_a_subtree_search(alice, tree):
    res = alice.search_ext_s(tree.people, ldap.SCOPE_ONELEVEL, "(objectClass=person)", ["mail"],
                             serverctrls=[MatchedValuesControl(True, "(mail=*.org)")])
    got = {norm_dn(dn): ci(a) for dn, a in res}
    assert got[norm_dn(tree.person("carol"))] == {"mail": ["carol@example.org"]}
    assert got[norm_dn(tree.person("alice"))] == {}


# --- proxied authorization -------------------------------------------------------------------

def whoami(conn, ctrls=None):
    # python-ldap's whoami_s hands its controls to libldap unconverted.
    return conn.whoami_s(serverctrls=RequestControlTuples(ctrls) if ctrls else None)


@pytest.fixture
def target(tree, admin_session):
    """A person bob may act for: the proxy right in Linden's rules, authzFrom in slapd's."""
    uid = tree.unique("px")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    extra = {"description": ["proxy-target"]}
    if REFERENCE.lower() == "slapd":
        extra["authzFrom"] = ["dn:" + tree.person("bob")]
    admin_session.add_s(dn, ldap.modlist.addModlist(person_attrs(
        uid, password="Target-pw-1", extra=extra)))
    yield dn, uid
    admin_session.delete_s(dn)


@pytest.fixture
def bob(tree):
    conn = bind_as(tree.person("bob"), PEOPLE["bob"]["userPassword"][0])
    yield conn
    conn.unbind_s()


@pytest.fixture
def carol(tree):
    conn = bind_as(tree.person("carol"), PEOPLE["carol"]["userPassword"][0])
    yield conn
    conn.unbind_s()


def authz_dn(whoami_answer):
    assert whoami_answer.startswith("dn:"), whoami_answer
    return norm_dn(whoami_answer[3:])


def test_proxy_dn_form(bob, target):
    dn, _ = target
    assert authz_dn(whoami(bob, [ProxyAuthzControl(True, "dn:" + dn)])) == norm_dn(dn)
    # The connection itself is still bob's.
    assert "bob" in whoami(bob)


def test_proxy_u_form(bob, target):
    dn, uid = target
    assert authz_dn(whoami(bob, [ProxyAuthzControl(True, "u:" + uid)])) == norm_dn(dn)


def test_proxy_as_oneself_is_allowed(carol, tree):
    me = tree.person("carol")
    assert authz_dn(whoami(carol, [ProxyAuthzControl(True, "dn:" + me)])) == norm_dn(me)


def test_proxy_empty_authzid_is_anonymous(bob):
    assert whoami(bob, [ProxyAuthzControl(True, "")]) == ""


def test_proxy_admin_may_act_for_anyone(admin, tree):
    who = tree.person("dave")
    assert authz_dn(whoami(admin, [ProxyAuthzControl(True, "dn:" + who)])) == norm_dn(who)


def test_proxy_without_the_right_is_denied(carol, tree):
    # Nothing lets carol act for alice.
    with pytest.raises(ldap.PROXIED_AUTHORIZATION_DENIED):
        whoami(carol, [ProxyAuthzControl(True, "dn:" + tree.person("alice"))])
    with pytest.raises(ldap.PROXIED_AUTHORIZATION_DENIED):
        carol.search_ext_s(tree.person("alice"), ldap.SCOPE_BASE, "(objectClass=*)", ["1.1"],
                           serverctrls=[ProxyAuthzControl(True, "u:alice")])


@pytest.mark.parametrize("authzid", ["dn:uid=nobody-here,ou=people,dc=example,dc=com",
                                     "u:nobody-here", "bogus", "dn:not a dn"])
def test_proxy_unknown_identity_is_denied(bob, authzid):
    with pytest.raises(ldap.PROXIED_AUTHORIZATION_DENIED):
        whoami(bob, [ProxyAuthzControl(True, authzid)])


def test_proxy_from_anonymous_is_denied(anon, target):
    dn, _ = target
    with pytest.raises(ldap.PROXIED_AUTHORIZATION_DENIED):
        whoami(anon, [ProxyAuthzControl(True, "dn:" + dn)])


def test_proxy_must_be_critical(bob, target):
    dn, _ = target
    with pytest.raises(ldap.PROTOCOL_ERROR):
        whoami(bob, [ProxyAuthzControl(False, "dn:" + dn)])


def test_proxy_identity_is_used_for_access_control_and_stamps(bob, admin, target):
    dn, _ = target
    mods = [(ldap.MOD_REPLACE, "userPassword", [b"Changed-pw-2"])]
    # Bob may not change the target's password himself ...
    with pytest.raises(ldap.INSUFFICIENT_ACCESS):
        bob.modify_s(dn, mods)
    # ... but acting as the target, the owner of the password, he may.
    bob.modify_ext_s(dn, mods, serverctrls=[ProxyAuthzControl(True, "dn:" + dn)])
    got = get_entry(admin, dn, ["modifiersName"])
    assert norm_dn(got["modifiersname"][0]) == norm_dn(dn)
    bind_as(dn, "Changed-pw-2").unbind_s()


def test_proxy_denied_change_changes_nothing(carol, admin, tree, target):
    dn, _ = target
    with pytest.raises(ldap.PROXIED_AUTHORIZATION_DENIED):
        carol.modify_ext_s(dn, [(ldap.MOD_REPLACE, "userPassword", [b"Nope-pw-3"])],
                           serverctrls=[ProxyAuthzControl(True, "dn:" + tree.person("alice"))])
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        bind_as(dn, "Nope-pw-3")


# --- dontUseCopy ---------------------------------------------------------------------------

def test_dont_use_copy_on_search_and_compare(alice, tree):
    ctl = [LDAPControl(DONT_USE_COPY, True)]
    dn = tree.person("bob")
    res = alice.search_ext_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["uid"], serverctrls=ctl)
    assert ci(res[0][1]) == {"uid": ["bob"]}
    assert alice.compare_ext_s(dn, "uid", b"bob", serverctrls=ctl) is True


def test_dont_use_copy_must_be_critical_and_valueless(alice, tree):
    dn = tree.person("bob")
    for ctl in (LDAPControl(DONT_USE_COPY, False),
                LDAPControl(DONT_USE_COPY, True, encodedControlValue=b"")):
        with pytest.raises(ldap.PROTOCOL_ERROR):
            alice.search_ext_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["uid"], serverctrls=[ctl])


def test_dont_use_copy_is_not_for_changes(admin, tree):
    with pytest.raises(ldap.UNAVAILABLE_CRITICAL_EXTENSION):
        admin.modify_ext_s(tree.person("bob"), [(ldap.MOD_REPLACE, "description", [b"x"])],
                           serverctrls=[LDAPControl(DONT_USE_COPY, True)])


# --- dereference ---------------------------------------------------------------------------

class Dereference(DereferenceControl):
    """python-ldap's control, with a decoder that accepts a DerefRes without attrVals (its own
    fails on one with current pyasn1, and python-ldap then silently drops the control)."""

    def decodeControlValue(self, encodedControlValue):
        from pyasn1.codec.ber import decoder
        value, _ = decoder.decode(encodedControlValue, asn1Spec=DerefResultControlValue())
        self.derefRes = {}
        for res in value:
            vals = res.getComponentByName("attrVals")
            attrs = {str(tv[0]): [str(v) for v in tv[1]] for tv in vals} if vals.isValue else {}
            self.derefRes.setdefault(str(res[0]), []).append((str(res[1]), attrs))


def deref_search(conn, base, specs, attrs=("cn",), critical=True, scope=ldap.SCOPE_BASE):
    msgid = conn.search_ext(base, scope, "(objectClass=*)", list(attrs),
                            serverctrls=[Dereference(critical, specs)])
    _, data, _, _, _, _ = conn.result4(msgid, add_ctrls=1,
                                 resp_ctrl_classes={DEREF: Dereference})
    out = {}
    for dn, attrs_, ctrls in data:
        if dn is None:
            continue
        out[norm_dn(dn)] = {c.controlType: c for c in ctrls}
    return out


@pytest.fixture
def deref_group(tree, admin_session):
    hidden_uid = tree.unique("hid")
    hidden = "uid=%s,%s" % (hidden_uid, tree.scratch)
    admin_session.add_s(hidden, ldap.modlist.addModlist(person_attrs(
        hidden_uid, extra={"description": ["hidden-entry"]})))
    missing = "uid=nobody-here,%s" % tree.scratch
    cn = tree.unique("g")
    group = "cn=%s,%s" % (cn, tree.groups)
    members = [tree.person("alice"), hidden, missing]
    admin_session.add_s(group, ldap.modlist.addModlist({
        "objectClass": [b"top", b"groupOfNames"], "cn": [cn.encode()],
        "member": [m.encode() for m in members]}))
    yield group, members
    admin_session.delete_s(group)
    admin_session.delete_s(hidden)


def res_by_dn(ctl):
    return {norm_dn(dn): attrs for dn, attrs in ctl.derefRes["member"]}


def test_deref_members_visible_and_hidden(bob, tree, deref_group):
    group, (alice, hidden, missing) = deref_group
    got = deref_search(bob, group, {"member": ["uid", "cn", "userPassword"]})
    ctl = got[norm_dn(group)][DEREF]
    assert list(ctl.derefRes) == ["member"]
    res = res_by_dn(ctl)
    # One DerefRes per value, in order; attributes only from entries the requester may see,
    # and only the attributes they may read (no userPassword).
    assert [norm_dn(dn) for dn, _ in ctl.derefRes["member"]] == [
        norm_dn(alice), norm_dn(hidden), norm_dn(missing)]
    assert res[norm_dn(alice)] == {"uid": ["alice"], "cn": ["Alice Smith"]}
    assert res[norm_dn(hidden)] == {}
    assert res[norm_dn(missing)] == {}


def test_deref_as_admin_sees_hidden_members(admin, deref_group):
    group, (alice, hidden, missing) = deref_group
    res = res_by_dn(deref_search(admin, group, {"member": ["uid"]})[norm_dn(group)][DEREF])
    assert res[norm_dn(hidden)]["uid"] == [ldap.dn.str2dn(hidden)[0][0][1]]


def test_deref_only_on_entries_with_the_attribute(alice, tree):
    got = deref_search(alice, tree.base, {"member": ["uid"]}, scope=ldap.SCOPE_SUBTREE)
    staff = got[norm_dn(tree.group("staff"))][DEREF]
    assert sorted(res_by_dn(staff)) == sorted(norm_dn(tree.person(u))
                                             for u in ("alice", "bob", "carol"))
    assert DEREF not in got[norm_dn(tree.person("alice"))]


def test_deref_spec_errors(alice, tree):
    group = tree.group("staff")
    for specs in ({"member": ["noSuchAttribute"]}, {"noSuchAttribute": ["cn"]}):
        with pytest.raises(ldap.PROTOCOL_ERROR):
            deref_search(alice, group, specs)
    # A non-DN attribute: protocolError when critical, the control is ignored otherwise.
    with pytest.raises(ldap.PROTOCOL_ERROR):
        deref_search(alice, group, {"cn": ["uid"]})
    got = deref_search(alice, group, {"cn": ["uid"]}, critical=False)
    assert DEREF not in got[norm_dn(group)]
