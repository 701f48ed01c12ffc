"""Server-side sort (RFC 2891) and virtual list view (draft-ietf-ldapext-ldapv3-vlv-09), as
python-ldap sends them; checked against slapd 2.5 with the sssvlv overlay."""
import ldap
import ldap.modlist
import pytest
from ldap.controls import ResponseControl, SimplePagedResultsControl
from ldap.controls.sss import SSSRequestControl
from ldap.controls.vlv import VLVRequestControl, VirtualListViewResponseType
from pyasn1.codec.ber import decoder

from conftest import delete_subtree, to_bytes_attrs

SORT_RESPONSE = "1.2.840.113556.1.4.474"
VLV_RESPONSE = "2.16.840.1.113730.3.4.10"
PAGED = SimplePagedResultsControl.controlType


class Raw(ResponseControl):
    """A response control kept as the server encoded it."""

    def decodeControlValue(self, encodedControlValue):
        self.encodedControlValue = encodedControlValue


RAW = {oid: Raw for oid in (SORT_RESPONSE, VLV_RESPONSE, PAGED)}

# uid -> attributes. Sorted by cn (caseIgnoreOrderingMatch): alice, Bob (a3, sn Smith),
# Bob (a5, sn Brown), Carol, dave. a5 has no description and no uidNumber.
ENTRIES = {
    "a1": {"cn": "Carol", "sn": "Smith", "description": "two", "uidNumber": "30"},
    "a2": {"cn": "alice", "sn": "Jones", "uidNumber": "100"},
    "a3": {"cn": "Bob", "sn": "Smith", "description": "one", "uidNumber": "9"},
    "a4": {"cn": "dave", "sn": "Adams", "description": "three", "uidNumber": "2000"},
    "a5": {"cn": "Bob", "sn": "Brown"},
}
BY_CN = ["a2", "a3", "a5", "a1", "a4"]


@pytest.fixture(scope="module")
def sv(tree, admin_session):
    base = "ou=sv," + tree.base
    admin_session.add_s(base, ldap.modlist.addModlist(to_bytes_attrs(
        {"objectClass": ["top", "organizationalUnit"], "ou": ["sv"]})))
    for uid, a in ENTRIES.items():
        attrs = {"objectClass": ["top", "inetOrgPerson"], "uid": [uid]}
        attrs.update({k: [v] for k, v in a.items()})
        if "uidNumber" in a:
            attrs["objectClass"].append("posixAccount")
            attrs.update({"gidNumber": ["1"], "homeDirectory": ["/home/" + uid]})
        admin_session.add_s("uid=%s,%s" % (uid, base), ldap.modlist.addModlist(to_bytes_attrs(attrs)))
    yield base
    delete_subtree(admin_session, base)


def sort_code(value):
    """The sortResult of a sort response control's value (read by hand: python-ldap's own
    decoder returns nothing for a successful sort)."""
    # SEQUENCE { ENUMERATED n ... }
    assert value[0] == 0x30 and value[2] == 0x0A, value
    n = value[4]
    return n


def vlv_response(value):
    p, rest = decoder.decode(value, asn1Spec=VirtualListViewResponseType())
    assert not rest
    ctx = p.getComponentByName("contextID")
    return (int(p.getComponentByName("targetPosition")), int(p.getComponentByName("contentCount")),
            int(p.getComponentByName("virtualListViewResult")),
            bytes(ctx) if ctx.hasValue() else None)


def uids(data):
    return [ldap.dn.str2dn(dn)[0][0][1] for dn, _ in data]


def search(conn, base, ctls):
    msgid = conn.search_ext(base, ldap.SCOPE_ONELEVEL, "(uid=*)", ["uid"], serverctrls=ctls)
    # No known response control classes: every value comes back as the server encoded it.
    _, data, _, rctls = conn.result3(msgid, resp_ctrl_classes=RAW)
    return uids(data), {c.controlType: c.encodedControlValue for c in rctls}


def raw(rctls, oid):
    v = rctls.get(oid)
    assert v is not None, "response control %s missing" % oid
    return v


def failure(conn, base, ctls):
    """The error a search fails with, and its response controls as {oid: value}."""
    with pytest.raises(ldap.LDAPError) as e:
        search(conn, base, ctls)
    info = e.value.args[0]
    return info["result"], {oid: v for oid, _, v in info.get("ctrls", [])}


def sss(spec, critical=True):
    return SSSRequestControl(criticality=critical, ordering_rules=spec)


def vlv(before, after, offset=None, count=None, gte=None, context=None, critical=True):
    return VLVRequestControl(criticality=critical, before_count=before, after_count=after,
                             offset=offset, content_count=count, greater_than_or_equal=gte,
                             context_id=context)


def test_supported_controls_advertised(anon):
    (_, root), = anon.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["supportedControl"])
    sc = [v.decode() for v in root["supportedControl"]]
    assert "1.2.840.113556.1.4.473" in sc
    assert "2.16.840.1.113730.3.4.9" in sc


def test_multi_key_sort_with_rules_by_oid_and_name(anon, sv):
    got, rctls = search(anon, sv, [sss(["cn:2.5.13.3", "-sn:caseIgnoreOrderingMatch"])])
    assert got == ["a2", "a3", "a5", "a1", "a4"]
    assert sort_code(raw(rctls, SORT_RESPONSE)) == 0


def test_default_ordering_rule_and_missing_values_last(anon, sv):
    got, _ = search(anon, sv, [sss(["uidNumber"])])
    # Integer order (9 < 30 < 100 < 2000); a5 has no uidNumber and sorts last.
    assert got == ["a3", "a1", "a2", "a4", "a5"]


def test_reverse_puts_missing_values_first(anon, sv):
    got, _ = search(anon, sv, [sss(["-uidNumber"])])
    assert got == ["a5", "a4", "a2", "a1", "a3"]
    got, _ = search(anon, sv, [sss(["-description:caseIgnoreOrderingMatch"])])
    assert got[:1] in (["a2"], ["a5"]) and set(got[:2]) == {"a2", "a5"}
    assert got[2:] == ["a1", "a4", "a3"]


def test_non_orderable_attribute_critical_is_inappropriate_matching(anon, sv):
    # cn (from name) has no ORDERING rule in the standard schema.
    code, _ = failure(anon, sv, [sss(["cn"], critical=True)])
    assert code == ldap.INAPPROPRIATE_MATCHING.errnum


@pytest.mark.linden_differs(reason="RFC 2891 §2: a non-critical sort that cannot be done returns "
                            "the entries unsorted with the sortResult code; slapd fails the "
                            "search with inappropriateMatching whatever the criticality")
def test_non_orderable_attribute_non_critical_returns_unsorted(anon, sv):
    got, rctls = search(anon, sv, [sss(["cn"], critical=False)])
    assert sorted(got) == sorted(ENTRIES)
    assert sort_code(raw(rctls, SORT_RESPONSE)) == ldap.INAPPROPRIATE_MATCHING.errnum


def test_unknown_ordering_rule_is_inappropriate_matching(anon, sv):
    code, _ = failure(anon, sv, [sss(["cn:noSuchOrderingMatch"])])
    assert code == ldap.INAPPROPRIATE_MATCHING.errnum


@pytest.mark.parametrize("critical", [True, False])
def test_undefined_attribute_type_is_no_such_attribute(anon, sv, critical):
    code, _ = failure(anon, sv, [sss(["noSuchAttributeType"], critical=critical)])
    assert code == ldap.NO_SUCH_ATTRIBUTE.errnum


def test_sort_with_paged_results_pages_through_the_sorted_list(anon, sv):
    ctl = SimplePagedResultsControl(True, size=2, cookie=b"")
    pages = []
    while True:
        got, rctls = search(anon, sv, [sss(["cn:2.5.13.3", "-sn:2.5.13.3"]), ctl])
        pages.append(got)
        assert sort_code(raw(rctls, SORT_RESPONSE)) == 0
        resp = SimplePagedResultsControl()
        resp.decodeControlValue(raw(rctls, PAGED))
        cookie = resp.cookie
        if not cookie:
            break
        ctl.cookie = cookie
        assert len(pages) < 10
    assert pages == [["a2", "a3"], ["a5", "a1"], ["a4"]]


SORT = ["cn:2.5.13.3", "-sn:2.5.13.3"]


@pytest.mark.parametrize("before,after,offset,count,want,target", [
    (1, 1, 1, 0, ["a2", "a3"], 1),            # start
    (1, 1, 3, 0, ["a3", "a5", "a1"], 3),      # middle
    (1, 1, 5, 0, ["a1", "a4"], 5),            # end
    (0, 2, 1, 5, ["a2", "a3", "a5"], 1),      # first with the right count
    (2, 0, 5, 5, ["a5", "a1", "a4"], 5),      # last with the right count
    (1, 1, 9, 10, ["a5", "a1", "a4"], 4),     # the client's estimate: 9/10 of 5 is 4
    (1, 1, 2, 10, ["a2", "a3"], 1),           # 2/10 of 5 is 1
    (0, 0, 0, 0, ["a4"], 5),                  # offset = count: the last entry
])
def test_vlv_by_offset(anon, sv, before, after, offset, count, want, target):
    got, rctls = search(anon, sv, [sss(SORT), vlv(before, after, offset, count)])
    assert got == want
    pos, content, result, ctx = vlv_response(raw(rctls, VLV_RESPONSE))
    assert (pos, content, result) == (target, 5, 0)
    assert ctx
    assert sort_code(raw(rctls, SORT_RESPONSE)) == 0


@pytest.mark.parametrize("offset,count", [(6, 0), (7, 5), (11, 10)])
def test_vlv_offset_beyond_the_end_is_offset_range_error(anon, sv, offset, count):
    code, ctls = failure(anon, sv, [sss(SORT), vlv(1, 1, offset, count)])
    assert code == 76  # virtualListViewError
    pos, content, result, _ = vlv_response(ctls[VLV_RESPONSE])
    assert (pos, content, result) == (0, 5, 77)  # offsetRangeError, as slapd numbers it


@pytest.mark.parametrize("value,before,after,want,target", [
    (b"Bob", 1, 1, ["a2", "a3", "a5"], 2),
    (b"c", 1, 1, ["a5", "a1", "a4"], 4),
    (b"a", 0, 1, ["a2", "a3"], 1),
    (b"zzz", 1, 1, ["a4"], 6),   # past the end: targetPosition is contentCount + 1
])
def test_vlv_by_assertion(anon, sv, value, before, after, want, target):
    got, rctls = search(anon, sv, [sss(SORT), vlv(before, after, gte=value)])
    assert got == want
    pos, content, result, _ = vlv_response(raw(rctls, VLV_RESPONSE))
    assert (pos, content, result) == (target, 5, 0)


@pytest.mark.parametrize("critical", [True, False])
def test_vlv_without_sort_is_refused(anon, sv, critical):
    code, ctls = failure(anon, sv, [vlv(1, 1, 1, 0, critical=critical)])
    assert code == 76
    pos, content, result, _ = vlv_response(ctls[VLV_RESPONSE])
    assert (pos, content, result) == (0, 0, 76)  # sortControlMissing, as slapd numbers it


def test_vlv_with_paged_results_is_unwilling(anon, sv):
    ctl = SimplePagedResultsControl(True, size=2, cookie=b"")
    code, _ = failure(anon, sv, [sss(SORT), vlv(1, 1, 1, 0), ctl])
    assert code == ldap.UNWILLING_TO_PERFORM.errnum


def test_vlv_context_continues_the_list(admin, sv):
    got, rctls = search(admin, sv, [sss(SORT), vlv(0, 1, 1, 0)])
    assert got == ["a2", "a3"]
    _, _, _, ctx = vlv_response(raw(rctls, VLV_RESPONSE))
    # The next window of the same list, by its context.
    got, rctls = search(admin, sv, [sss(SORT), vlv(0, 1, 3, 5, context=ctx)])
    assert got == ["a5", "a1"]
    pos, content, result, ctx2 = vlv_response(raw(rctls, VLV_RESPONSE))
    assert (pos, content, result) == (3, 5, 0)
    assert ctx2 == ctx
