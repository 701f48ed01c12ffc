"""Dynamic groups and lists, as OpenLDAP's dynlist overlay expands them.

Both servers are configured alike (scripts/slapd-reference.sh: `dynlist-attrset groupOfURLs
memberURL member+memberOf` and `dynlist-attrset labeledURIObject labeledURI`;
scripts/run-conformance-linden.sh: the same two [[dynlist]] tables): a groupOfURLs entry's
members are the entries its memberURL finds, on read, in compare and in (member=...) filters,
as the requester sees them; a member names its dynamic groups in memberOf when asked for it by
name; a labeledURIObject entry gets the attributes its labeledURI names.
"""
import uuid

import ldap
import ldap.modlist
import pytest

from conftest import SUFFIX, delete_subtree, norm_dn, ou, person_attrs


@pytest.fixture
def area(admin_session):
    tag = "d" + uuid.uuid4().hex[:10]
    base = "ou=%s,%s" % (tag, SUFFIX)
    admin_session.add_s(base, ou(tag))
    people = "ou=people," + base
    admin_session.add_s(people, ou("people"))
    for uid, dept in (("alice", "eng"), ("bob", "eng"), ("carol", "ops")):
        admin_session.add_s("uid=%s,%s" % (uid, people),
                            ldap.modlist.addModlist(person_attrs(uid, extra={"ou": [dept]})))
    # Exists for nobody but the administrator (the access rules of both servers).
    admin_session.add_s("uid=hidden,%s" % people, ldap.modlist.addModlist(person_attrs(
        "hidden", extra={"ou": ["eng"], "description": ["hidden-entry"]})))
    group = "cn=engineers," + base
    admin_session.add_s(group, ldap.modlist.addModlist({
        "objectClass": [b"groupOfURLs"], "cn": [b"engineers"],
        "memberURL": [("ldap:///%s??one?(ou=eng)" % people).encode()]}))
    mails = "cn=mails," + base
    admin_session.add_s(mails, ldap.modlist.addModlist({
        "objectClass": [b"device", b"labeledURIObject"], "cn": [b"mails"],
        "labeledURI": [("ldap:///%s?mail?one?(ou=ops)" % people).encode()]}))
    yield {"base": base, "people": people, "group": group, "mails": mails}
    delete_subtree(admin_session, base)


def person(area, uid):
    return "uid=%s,%s" % (uid, area["people"])


def values(conn, dn, attrs):
    (_, a), = conn.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", attrs)
    return a


def members(conn, dn, attrs=("member",)):
    return sorted(norm_dn(v.decode()) for v in values(conn, dn, list(attrs)).get("member", []))


@pytest.mark.parametrize("attrs", [["member"], ["*"]])
def test_members_on_read_as_the_requester(admin, anon, area, attrs):
    want = sorted(norm_dn(person(area, u)) for u in ("alice", "bob", "hidden"))
    assert members(admin, area["group"], attrs) == want
    assert members(anon, area["group"], attrs) == [w for w in want if "hidden" not in w]


def test_members_are_computed_only_when_asked_for(admin, area):
    assert "member" not in values(admin, area["group"], ["cn"])


def test_compare_member(admin, anon, area):
    assert admin.compare_s(area["group"], "member", person(area, "alice").encode()) is True
    assert admin.compare_s(area["group"], "member", person(area, "carol").encode()) is False
    assert admin.compare_s(area["group"], "member", person(area, "hidden").encode()) is True


@pytest.mark.linden_differs(reason="slapd's dynlist answers a compare of member with an entry "
                            "the requester cannot see TRUE (its read and (member=...) filters "
                            "leave that entry out); Linden answers FALSE, as its read and "
                            "filters do, so that a compare does not reveal a hidden entry")
def test_compare_member_hides_what_the_requester_cannot_see(anon, area):
    assert anon.compare_s(area["group"], "member", person(area, "hidden").encode()) is False


def test_member_filter_finds_the_group(admin, anon, area):
    def found(conn, filt):
        return [norm_dn(dn) for dn, _ in conn.search_s(area["base"], ldap.SCOPE_SUBTREE, filt,
                                                        ["1.1"])]
    group = norm_dn(area["group"])
    assert found(admin, "(member=%s)" % person(area, "bob")) == [group]
    assert found(admin, "(&(cn=engineers)(member=%s))" % person(area, "hidden")) == [group]
    assert found(anon, "(member=%s)" % person(area, "hidden")) == []
    assert found(admin, "(member=%s)" % person(area, "carol")) == []


def test_member_of_when_asked_for_by_name(admin, area):
    got = values(admin, person(area, "alice"), ["memberOf"])
    assert [norm_dn(v.decode()) for v in got["memberOf"]] == [norm_dn(area["group"])]
    assert "memberOf" not in values(admin, person(area, "carol"), ["memberOf"])
    assert "memberOf" not in values(admin, person(area, "alice"), ["*"])


def test_membership_follows_the_data(admin, admin_session, area):
    carol = person(area, "carol")
    assert admin.compare_s(area["group"], "member", carol.encode()) is False
    admin_session.modify_s(carol, [(ldap.MOD_REPLACE, "ou", [b"eng"])])
    assert admin.compare_s(area["group"], "member", carol.encode()) is True


def test_dynamic_list_merges_the_attributes_its_url_names(admin, area):
    got = values(admin, area["mails"], ["mail", "cn"])
    assert got["mail"] == [b"carol@example.com"]
    assert got["cn"] == [b"mails"]
