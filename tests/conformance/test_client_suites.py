"""Defects client test suites found (issue 15): implied superclasses in filters, the stored
form of objectClass and DN values, root DSE writes, matchingRuleUse, approximate match and
extensible match with a substring rule. Every answer is slapd 2.5's."""
import ldap
import ldap.modlist
import ldap.schema
import pytest

from conftest import SUFFIX, delete_subtree, to_bytes_attrs
from helpers import ci, error_info


@pytest.fixture(scope="module")
def cs(tree, admin_session):
    """A subtree with an entry whose only class is inetOrgPerson and a group whose class and
    member were sent in other spellings. Yields (base, person DN, group DN)."""
    conn = admin_session
    base = "ou=%s,%s" % (tree.unique("cs"), tree.scratch)
    conn.add_s(base, ldap.modlist.addModlist(to_bytes_attrs(
        {"objectClass": ["organizationalUnit"], "ou": [ldap.dn.str2dn(base)[0][0][1]]})))
    person = "uid=archer," + base
    conn.add_s(person, ldap.modlist.addModlist(to_bytes_attrs({
        "objectClass": ["inetOrgPerson"], "uid": ["archer"], "cn": ["Alice Archer"],
        "sn": ["Archer"], "telephoneNumber": ["+1 555 0101"],
        "seeAlso": ["cn=All Staff, ou=Groups, " + SUFFIX]})))
    group = "cn=archers," + base
    conn.add_s(group, ldap.modlist.addModlist(to_bytes_attrs({
        "objectClass": ["groupofnames"], "cn": ["archers"],
        "member": ["UID=archer, " + base]})))
    yield base, person, group
    delete_subtree(conn, base)


def found(conn, base, filt):
    res = conn.search_s(base, ldap.SCOPE_SUBTREE, filt, ["1.1"])
    return sorted(ldap.dn.str2dn(dn)[0][0][1].lower() for dn, _ in res if dn is not None)


# ---- superclasses are implied (RFC 4512 §2.4.1) -----------------------------

@pytest.mark.parametrize("filt", [
    "(objectClass=person)", "(objectClass=organizationalPerson)", "(objectClass=top)",
    "(objectClass=2.5.6.6)", "(objectclass=PERSON)",
    "(&(objectClass=person)(sn=Archer))", "(|(objectClass=person)(cn=nobody))",
])
def test_superclass_filter_matches_subclass_entry(admin, cs, filt):
    base, _, _ = cs
    assert "archer" in found(admin, base, filt)


def test_negated_superclass_filter_excludes_subclass_entry(admin, cs):
    base, _, _ = cs
    assert found(admin, base, "(!(objectClass=person))") == ["archers", ldap.dn.str2dn(base)[0][0][1].lower()]


def test_unrelated_class_does_not_match(admin, cs):
    base, _, _ = cs
    assert found(admin, base, "(objectClass=groupOfNames)") == ["archers"]
    assert found(admin, base, "(objectClass=residentialPerson)") == []


def test_superclasses_are_not_added_to_stored_values(admin, cs):
    _, person, _ = cs
    e = admin.search_s(person, ldap.SCOPE_BASE, "(objectClass=*)", ["objectClass"])[0][1]
    assert e["objectClass"] == [b"inetOrgPerson"]


# ---- stored forms: schema spelling of classes, pretty DNs ---------------------

def test_object_class_values_come_back_in_schema_spelling(admin, cs):
    _, _, group = cs
    e = admin.search_s(group, ldap.SCOPE_BASE, "(objectClass=*)", ["objectClass"])[0][1]
    assert e["objectClass"] == [b"groupOfNames"]


def test_object_class_oid_and_case_are_stored_as_names(admin, cs):
    base, _, _ = cs
    dn = "cn=oids," + base
    admin.add_s(dn, [("objectClass", [b"2.5.6.6", b"ORGANIZATIONALPERSON"]),
                     ("cn", [b"oids"]), ("sn", [b"x"])])
    e = admin.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["objectClass"])[0][1]
    assert e["objectClass"] == [b"person", b"organizationalPerson"]
    admin.modify_s(dn, [(ldap.MOD_ADD, "objectClass", [b"SIMPLESECURITYOBJECT"]),
                        (ldap.MOD_ADD, "userPassword", [b"{SSHA}x"])])
    e = admin.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["objectClass"])[0][1]
    assert e["objectClass"] == [b"person", b"organizationalPerson", b"simpleSecurityObject"]


def test_dn_values_are_stored_prettied(admin, cs):
    base, person, group = cs
    e = ci(admin.search_s(person, ldap.SCOPE_BASE, "(objectClass=*)", ["seeAlso"])[0][1])
    assert e["seealso"] == ["cn=All Staff,ou=Groups," + SUFFIX]
    e = ci(admin.search_s(group, ldap.SCOPE_BASE, "(objectClass=*)", ["member"])[0][1])
    assert e["member"] == ["uid=archer," + base]


@pytest.mark.parametrize("sent,stored", [
    ("CN=x\\2Cy,  OU=Groups,DC=example,   dc=com", "cn=x\\2Cy,ou=Groups,dc=example,dc=com"),
    ("2.5.4.3=abc+sn=def,dc=com", "cn=abc+sn=def,dc=com"),
    ("cn=a\\+b\\,c\\;\\\"d\\<\\>\\\\\\ ,dc=com", "cn=a\\2Bb\\2Cc\\3B\\22d\\3C\\3E\\5C\\20,dc=com"),
    ("cn=\\ lead and trail\\ ,dc=com", "cn=\\20lead and trail\\20,dc=com"),
    ("cn=\\23hash\\=eq,dc=com", "cn=\\23hash\\3Deq,dc=com"),
    ("cn=\\C3\\A9t\\C3\\A9 ,dc=com", "cn=\u00e9t\u00e9,dc=com"),
    ("CN=Foo , DC=com", "cn=Foo,dc=com"),
])
def test_dn_value_pretty_forms(admin, cs, sent, stored):
    _, person, _ = cs
    admin.modify_s(person, [(ldap.MOD_REPLACE, "seeAlso", [sent.encode()])])
    e = admin.search_s(person, ldap.SCOPE_BASE, "(objectClass=*)", ["seeAlso"])[0][1]
    assert e["seeAlso"] == [stored.encode()]


def test_uniquemember_dn_part_is_prettied(admin, cs):
    base, _, _ = cs
    dn = "cn=uniq," + base
    admin.add_s(dn, [("objectClass", [b"groupOfUniqueNames"]), ("cn", [b"uniq"]),
                     ("uniqueMember", [("UID=archer , " + base + "#'0101'B").encode(),
                                       b"CN=b ,dc=com"])])
    e = admin.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["uniqueMember"])[0][1]
    assert e["uniqueMember"] == [("uid=archer," + base + "#'0101'B").encode(), b"cn=b,dc=com"]


def test_entry_dn_is_stored_prettied(admin, cs):
    base, _, _ = cs
    admin.add_s("CN=Pretty  One , " + base, [("objectClass", [b"person"]), ("sn", [b"x"])])
    res = admin.search_s(base, ldap.SCOPE_ONELEVEL, "(sn=x)", ["cn", "entryDN"])
    by_dn = {dn: ci(a) for dn, a in res}
    want = "cn=Pretty  One," + base
    assert want in by_dn
    assert by_dn[want]["entrydn"] == [want]
    assert by_dn[want]["cn"] == ["Pretty  One"]


def test_renamed_entry_dn_is_stored_prettied(admin, cs):
    base, _, _ = cs
    admin.add_s("cn=before," + base, [("objectClass", [b"person"]), ("sn", [b"rename"])])
    admin.rename_s("cn=before," + base, "CN=After  Name ", delold=0)
    res = admin.search_s(base, ldap.SCOPE_ONELEVEL, "(sn=rename)", ["cn"])
    assert [dn for dn, _ in res] == ["cn=After  Name," + base]
    assert sorted(ci(res[0][1])["cn"]) == ["After  Name", "before"]


# ---- root DSE and empty adds -----------------------------------------------

@pytest.mark.parametrize("who", ["admin", "anon"])
def test_delete_root_dse_is_unwilling(request, who):
    conn = request.getfixturevalue(who)
    with pytest.raises(ldap.UNWILLING_TO_PERFORM) as e:
        conn.delete_s("")
    assert error_info(e)["info"] == "cannot delete the root DSE"


@pytest.mark.parametrize("dn", ["cn=noattrs,%s" % SUFFIX, SUFFIX, "", "cn=x,ou=nowhere,%s" % SUFFIX])
def test_add_without_attributes_is_protocol_error(admin, dn):
    with pytest.raises(ldap.PROTOCOL_ERROR) as e:
        admin.add_s(dn, [])
    assert error_info(e)["info"] == "no attributes provided"


def test_add_without_attributes_and_bad_dn_is_invalid_dn(admin):
    with pytest.raises(ldap.INVALID_DN_SYNTAX):
        admin.add_s("not a dn", [])


def test_add_root_dse_already_exists(admin):
    with pytest.raises(ldap.ALREADY_EXISTS) as e:
        admin.add_s("", [("objectClass", [b"top"])])
    assert error_info(e)["info"] == "root DSE already exists"


# ---- matchingRuleUse --------------------------------------------------------

def subschema(conn):
    dn = conn.search_subschemasubentry_s("")
    res = conn.search_s(dn, ldap.SCOPE_BASE, "(objectClass=subschema)", ["*", "+"])
    return ldap.schema.SubSchema(res[0][1])


def applies(sub, rule):
    mru = sub.get_obj(ldap.schema.MatchingRuleUse, rule)
    assert mru is not None, rule
    return {a.lower() for a in mru.applies}


def test_matching_rule_use_is_published(anon):
    sub = subschema(anon)
    assert {"cn", "uid", "description", "sn"} <= applies(sub, "caseIgnoreMatch")
    assert {"member", "seealso", "owner", "creatorsname"} <= applies(sub, "2.5.13.1")
    assert {"uidnumber", "gidnumber"} <= applies(sub, "integerMatch")
    assert {"mail", "dc"} <= applies(sub, "caseIgnoreIA5Match")
    assert {"createtimestamp", "modifytimestamp"} <= applies(sub, "generalizedTimeOrderingMatch")


def test_matching_rule_use_follows_syntaxes(anon):
    sub = subschema(anon)
    # A substring rule is listed only for the syntaxes it also takes (telephone numbers,
    # printable and country strings), not for the types whose substring rule it is.
    subs = applies(sub, "caseIgnoreSubstringsMatch")
    assert "telephonenumber" in subs
    assert "cn" not in subs
    assert sub.get_obj(ldap.schema.MatchingRuleUse, "caseIgnoreIA5SubstringsMatch") is None
    assert "objectclass" not in applies(sub, "objectIdentifierMatch")
    assert "cn" not in applies(sub, "caseIgnoreIA5Match")


# ---- approximate match ------------------------------------------------------

@pytest.mark.parametrize("filt,want", [
    ("(cn~=alise archer)", ["archer"]),
    ("(cn~=Alice Archer)", ["archer"]),
    # "archers" sounds as "archer" does: codes keep four characters.
    ("(cn~=archer)", ["archer", "archers"]),
    ("(cn~=arsher)", ["archer", "archers"]),
    ("(cn~=archer alice)", []),
    ("(sn~=Arker)", []),
    ("(cn~=alice bowman)", []),
    ("(cn~=bob)", []),
    ("(uid~=archr)", ["archer"]),
    ("(!(cn~=alise archer))", ["archers"]),
])
def test_approximate_match_is_phonetic(admin, cs, filt, want):
    base, _, _ = cs
    assert found(admin, base, "(&(|(uid=archer)(cn=archers))%s)" % filt) == want


def test_approximate_match_alone_scans(admin, cs):
    base, _, _ = cs
    assert found(admin, base, "(cn~=alise archer)") == ["archer"]
    assert found(admin, base, "(sn~=archur)") == ["archer"]


# ---- extensible match with a substring rule ---------------------------------

@pytest.mark.parametrize("filt", [
    "(cn:caseIgnoreSubstringsMatch:=\\2Alice\\2A)",
    "(cn:caseIgnoreSubstringsMatch:=Alice Archer)",
    "(telephoneNumber:caseIgnoreSubstringsMatch:=\\2A555\\2A)",
    "(:caseIgnoreSubstringsMatch:=\\2Alice\\2A)",
    "(uid:caseIgnoreIA5Match:=archer)",
    "(mail:caseIgnoreMatch:=alice@example.com)",
])
def test_extensible_match_with_unusable_rule_is_undefined(admin, cs, filt):
    base, _, _ = cs
    assert found(admin, base, filt) == []
    assert found(admin, base, "(!%s)" % filt) == []
    everything = found(admin, base, "(objectClass=*)")
    assert found(admin, base, "(|%s(objectClass=*))" % filt) == everything


def test_extensible_match_with_usable_rule_still_matches(admin, cs):
    base, _, _ = cs
    assert found(admin, base, "(cn:caseExactMatch:=Alice Archer)") == ["archer"]
    assert found(admin, base, "(:caseIgnoreMatch:=archer)") == ["archer"]
    # Over all attributes, a rule is tried only on the types it is usable with: mail is an
    # IA5 string, which caseIgnoreMatch does not take.
    admin.modify_s(cs[1], [(ldap.MOD_REPLACE, "mail", [b"archer@example.com"])])
    assert found(admin, base, "(:caseIgnoreMatch:=archer@example.com)") == []
    assert found(admin, base, "(:caseIgnoreIA5Match:=archer@example.com)") == ["archer"]
