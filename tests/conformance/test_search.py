"""Search operation (RFC 4511 §4.5, RFC 4512 root DSE / subschema, RFC 4515 filters)."""
import ldap
import pytest

from conftest import SUFFIX, norm_dn
from helpers import ci, dns, matched, uids

ALL_PEOPLE = ["alice", "bob", "carol", "dave"]


def s(conn, base, scope, filt="(objectClass=*)", attrs=None, **kw):
    return conn.search_ext_s(base, scope, filt, attrs, **kw)


# ---- scopes ---------------------------------------------------------------

def test_scope_base_returns_only_the_entry(anon, tree):
    res = s(anon, tree.person("alice"), ldap.SCOPE_BASE)
    assert dns(res) == [norm_dn(tree.person("alice"))]


def test_scope_base_with_non_matching_filter_returns_nothing(anon, tree):
    assert s(anon, tree.person("alice"), ldap.SCOPE_BASE, "(uid=bob)") == []


def test_scope_one_returns_children_only(anon, tree):
    res = s(anon, tree.people, ldap.SCOPE_ONELEVEL)
    assert uids(res) == ALL_PEOPLE


def test_scope_subtree_includes_base(anon, tree):
    res = s(anon, tree.people, ldap.SCOPE_SUBTREE)
    assert norm_dn(tree.people) in dns(res)
    assert len(res) == 1 + len(ALL_PEOPLE)


def test_scope_subtree_from_test_root(anon, tree):
    res = s(anon, tree.base, ldap.SCOPE_SUBTREE, "(objectClass=inetOrgPerson)")
    assert uids(res) == ALL_PEOPLE


# ---- filters ---------------------------------------------------------------

@pytest.mark.parametrize("filt,expected", [
    ("(uid=bob)", ["bob"]),
    ("(cn=alice smith)", ["alice"]),                       # caseIgnoreMatch
    ("(mail=BOB@EXAMPLE.COM)", ["bob"]),                   # caseIgnoreIA5Match
    ("(telephoneNumber=+15550103)", ["carol"]),            # telephoneNumberMatch ignores spaces
    ("(cn=Ali*)", ["alice"]),                              # substring initial
    ("(cn=*Smith*)", ["alice", "carol"]),                  # substring any
    ("(mail=*@example.org)", ["carol"]),                   # substring final
    ("(cn=C*Smi*ers)", ["carol"]),                         # initial + any + final
    ("(uidNumber>=1003)", ["carol", "dave"]),
    ("(uidNumber<=1002)", ["alice", "bob"]),
    ("(telephoneNumber=*)", ALL_PEOPLE),                   # presence
    ("(description=*)", []),
    ("(sn~=Smith)", ["alice"]),                            # approx
    ("(&(sn=Smith)(givenName=Alice))", ["alice"]),
    ("(&(sn=Smith)(givenName=Bob))", []),
    ("(|(uid=alice)(uid=bob))", ["alice", "bob"]),
    ("(!(uid=alice))", ["bob", "carol", "dave"]),
    ("(&(objectClass=inetOrgPerson)(!(|(uid=alice)(uid=bob))))", ["carol", "dave"]),
    ("(cn:caseExactMatch:=Alice Smith)", ["alice"]),       # extensible match, explicit rule
    ("(cn:caseExactMatch:=alice smith)", []),
    ("(uid:=bob)", ["bob"]),                               # extensible, attribute only
    ("(noSuchAttributeXyz=x)", []),                        # undefined attribute: no match, no error
    ("(!(noSuchAttributeXyz=x))", []),                     # NOT Undefined is Undefined
    ("(|(noSuchAttributeXyz=x)(uid=dave))", ["dave"]),
])
def test_filter(anon, tree, filt, expected):
    res = s(anon, tree.people, ldap.SCOPE_ONELEVEL, filt, ["uid"])
    assert uids(res) == expected


def test_extensible_dn_attributes(anon, tree):
    # (ou:dn:=people) also matches values of ou in the entry's DN (RFC 4515 / 4511 §4.5.1.7.7)
    res = s(anon, tree.base, ldap.SCOPE_SUBTREE, "(ou:dn:=people)", ["1.1"])
    assert dns(res) == sorted([norm_dn(tree.people)] + [norm_dn(tree.person(u)) for u in ALL_PEOPLE])


def test_extensible_without_dn_does_not_match_dn_values(anon, tree):
    res = s(anon, tree.base, ldap.SCOPE_SUBTREE, "(ou:=people)", ["1.1"])
    assert dns(res) == [norm_dn(tree.people)]


def test_filter_on_dn_valued_attribute(anon, tree):
    res = s(anon, tree.groups, ldap.SCOPE_ONELEVEL, "(member=%s)" % tree.person("bob"), ["cn"])
    assert sorted(ci(a)["cn"][0] for _, a in res) == ["staff"]


def test_base_dn_is_case_and_space_insensitive(anon, tree):
    base = tree.person("alice").replace("uid=alice,ou=people,", "UID=ALICE,  ou=People, ")
    res = s(anon, base, ldap.SCOPE_BASE)
    assert dns(res) == [norm_dn(tree.person("alice"))]


# ---- attribute selection ---------------------------------------------------

OPERATIONAL = ["createTimestamp", "modifyTimestamp", "creatorsName", "modifiersName",
               "entryUUID", "entryDN", "structuralObjectClass", "hasSubordinates",
               "subschemaSubentry"]


def test_default_returns_user_attributes_only(anon, tree):
    a = ci(s(anon, tree.person("alice"), ldap.SCOPE_BASE)[0][1])
    assert a["cn"] == ["Alice Smith"] and a["mail"] == ["alice@example.com"]
    for op in OPERATIONAL:
        assert op.lower() not in a, op


def test_star_returns_user_attributes_only(anon, tree):
    a = ci(s(anon, tree.person("alice"), ldap.SCOPE_BASE, attrs=["*"])[0][1])
    assert {"objectclass", "uid", "cn", "sn", "mail", "telephonenumber"} <= set(a)
    for op in OPERATIONAL:
        assert op.lower() not in a, op


def test_plus_returns_operational_attributes_only(anon, tree):
    a = ci(s(anon, tree.person("alice"), ldap.SCOPE_BASE, attrs=["+"])[0][1])
    for op in OPERATIONAL:
        assert op.lower() in a, op
    assert "cn" not in a and "mail" not in a


def test_star_and_plus(anon, tree):
    a = ci(s(anon, tree.person("alice"), ldap.SCOPE_BASE, attrs=["*", "+"])[0][1])
    assert "cn" in a and "createtimestamp" in a and "entryuuid" in a


def test_one_one_returns_no_attributes(anon, tree):
    res = s(anon, tree.people, ldap.SCOPE_ONELEVEL, attrs=["1.1"])
    assert len(res) == len(ALL_PEOPLE)
    assert all(a == {} for _, a in res)


def test_named_attributes_only(anon, tree):
    a = ci(s(anon, tree.person("alice"), ldap.SCOPE_BASE, attrs=["mail", "SN"])[0][1])
    assert set(a) == {"mail", "sn"}
    assert a["mail"] == ["alice@example.com"]


def test_unknown_requested_attribute_is_ignored(anon, tree):
    a = ci(s(anon, tree.person("alice"), ldap.SCOPE_BASE, attrs=["noSuchAttributeXyz", "uid"])[0][1])
    assert set(a) == {"uid"}


def test_attribute_supertype_returns_subtypes(anon, tree):
    a = ci(s(anon, tree.person("alice"), ldap.SCOPE_BASE, attrs=["name"])[0][1])
    assert a["cn"] == ["Alice Smith"] and a["sn"] == ["Smith"]
    assert "mail" not in a and "uid" not in a



def test_attribute_options_select_only_attributes_with_them(admin, anon, tree):
    """RFC 4512 §2.5: `cn;lang-en` names the cn values tagged lang-en, not a plain cn; a
    plain `cn` names every cn, tagged or not."""
    import ldap.modlist
    from conftest import person_attrs
    uid = tree.unique("o")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    admin.add_s(dn, ldap.modlist.addModlist(person_attrs(
        uid, extra={"cn;lang-en": ["English Name"]})))
    try:
        a = ci(s(anon, dn, ldap.SCOPE_BASE, attrs=["cn;lang-en", "sn;lang-en", "uid"])[0][1])
        assert a == {"cn;lang-en": ["English Name"], "uid": [uid]}
        a = ci(s(anon, dn, ldap.SCOPE_BASE, attrs=["cn"])[0][1])
        assert a == {"cn": ["%s Tester" % uid], "cn;lang-en": ["English Name"]}
        a = ci(s(anon, dn, ldap.SCOPE_BASE, attrs=["cn;lang-fr"])[0][1])
        assert a == {}
    finally:
        admin.delete_s(dn)

def test_types_only(anon, tree):
    res = s(anon, tree.person("alice"), ldap.SCOPE_BASE, attrs=["cn", "mail"], attrsonly=1)
    a = ci(res[0][1])
    assert set(a) == {"cn", "mail"}
    assert all(v == [] for v in a.values())


@pytest.mark.parametrize("op", OPERATIONAL)
def test_operational_attribute_when_requested(anon, tree, op):
    a = ci(s(anon, tree.person("alice"), ldap.SCOPE_BASE, attrs=[op])[0][1])
    assert list(a) == [op.lower()]
    assert len(a[op.lower()]) == 1


def test_operational_attribute_values(anon, tree, admin):
    a = ci(s(anon, tree.person("alice"), ldap.SCOPE_BASE, attrs=["+"])[0][1])
    assert a["structuralobjectclass"] == ["inetOrgPerson"]
    assert a["hassubordinates"] == ["FALSE"]
    assert norm_dn(a["entrydn"][0]) == norm_dn(tree.person("alice"))
    assert a["subschemasubentry"][0].lower() == "cn=subschema"
    assert norm_dn(a["creatorsname"][0]) == norm_dn(admin.whoami_s()[3:])
    assert a["createtimestamp"][0].endswith("Z") and len(a["createtimestamp"][0]) >= 15
    assert len(a["entryuuid"][0]) == 36 and a["entryuuid"][0].count("-") == 4


def test_has_subordinates_true_for_container(anon, tree):
    a = ci(s(anon, tree.people, ldap.SCOPE_BASE, attrs=["hasSubordinates"])[0][1])
    assert a["hassubordinates"] == ["TRUE"]


# ---- limits and errors -----------------------------------------------------

def collect(conn, msgid):
    """Read results one by one; return (entries, exception or None)."""
    entries = []
    while True:
        try:
            rtype, rdata, _, _ = conn.result3(msgid, all=0)
        except ldap.LDAPError as exc:
            return entries, exc
        entries.extend(rdata)
        if rtype == ldap.RES_SEARCH_RESULT:
            return entries, None


def test_client_size_limit_exceeded_returns_entries_sent(anon, tree):
    msgid = anon.search_ext(tree.people, ldap.SCOPE_ONELEVEL, "(objectClass=*)", ["uid"], sizelimit=2)
    entries, exc = collect(anon, msgid)
    assert isinstance(exc, ldap.SIZELIMIT_EXCEEDED)
    assert len(entries) == 2


def test_size_limit_equal_to_result_count_is_success(anon, tree):
    res = anon.search_ext_s(tree.people, ldap.SCOPE_ONELEVEL, "(objectClass=*)", ["uid"],
                            sizelimit=len(ALL_PEOPLE))
    assert len(res) == len(ALL_PEOPLE)


def test_search_missing_base_is_no_such_object_with_matched_dn(anon, tree):
    with pytest.raises(ldap.NO_SUCH_OBJECT) as e:
        s(anon, "uid=nobody,ou=nowhere," + tree.people, ldap.SCOPE_SUBTREE)
    assert norm_dn(matched(e)) == norm_dn(tree.people)


def test_search_invalid_base_dn_is_invalid_dn_syntax(anon):
    with pytest.raises(ldap.INVALID_DN_SYNTAX):
        s(anon, "this is not a dn", ldap.SCOPE_BASE)


def test_search_invalid_filter_is_rejected_by_client(anon, tree):
    with pytest.raises(ldap.FILTER_ERROR):
        s(anon, tree.people, ldap.SCOPE_BASE, "(uid=alice")


# ---- root DSE and subschema -------------------------------------------------

def root_dse(conn, attrs):
    res = conn.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", attrs)
    assert len(res) == 1 and res[0][0] == ""
    return ci(res[0][1])


def test_root_dse_plus(anon):
    a = root_dse(anon, ["+"])
    assert norm_dn(SUFFIX) in [norm_dn(x) for x in a["namingcontexts"]]
    assert "3" in a["supportedldapversion"]
    assert a["subschemasubentry"][0].lower() == "cn=subschema"
    assert "1.3.6.1.4.1.4203.1.11.1" in a["supportedextension"]   # password modify
    assert "1.3.6.1.4.1.4203.1.11.3" in a["supportedextension"]   # who am i


def test_root_dse_named_attributes(anon):
    a = root_dse(anon, ["namingContexts", "supportedLDAPVersion", "subschemaSubentry"])
    assert set(a) == {"namingcontexts", "supportedldapversion", "subschemasubentry"}
    assert norm_dn(SUFFIX) in [norm_dn(x) for x in a["namingcontexts"]]


def test_root_dse_operational_attributes_not_returned_by_default(anon):
    a = root_dse(anon, None)
    assert "namingcontexts" not in a and "supportedldapversion" not in a


def test_root_dse_only_in_base_scope(anon):
    # a one-level search from "" does not return the root DSE itself
    try:
        res = anon.search_s("", ldap.SCOPE_ONELEVEL, "(objectClass=*)", ["1.1"])
    except ldap.NO_SUCH_OBJECT:
        res = []
    assert "" not in [dn for dn, _ in res]


def test_subschema_requested_attributes(anon):
    res = anon.search_s("cn=Subschema", ldap.SCOPE_BASE, "(objectClass=subschema)",
                        ["attributeTypes", "objectClasses", "ldapSyntaxes", "matchingRules"])
    assert len(res) == 1
    a = ci(res[0][1])
    assert any("'cn'" in v and "2.5.4.3 " in v for v in a["attributetypes"])
    assert any("'inetOrgPerson'" in v for v in a["objectclasses"])
    assert any("1.3.6.1.4.1.1466.115.121.1.15 " in v for v in a["ldapsyntaxes"])
    assert any("'caseIgnoreMatch'" in v for v in a["matchingrules"])


def test_subschema_definitions_not_returned_by_default(anon):
    res = anon.search_s("cn=Subschema", ldap.SCOPE_BASE, "(objectClass=subschema)")
    a = ci(res[0][1])
    assert "attributetypes" not in a and "objectclasses" not in a


def test_search_outside_naming_contexts_is_no_such_object(anon):
    with pytest.raises(ldap.NO_SUCH_OBJECT) as e:
        s(anon, "dc=elsewhere,dc=invalid", ldap.SCOPE_BASE)
    assert matched(e) == ""
