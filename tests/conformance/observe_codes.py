#!/usr/bin/env python3
"""Print a Markdown table of the result codes and diagnostic messages a server returns
for the notable situations exercised by the conformance suite.

    LDAP_URL=ldap://127.0.0.1:3389 python3 observe_codes.py > codes.md

Uses the same environment variables as conftest.py. Creates and removes its own subtree
ou=codes<random>,<LDAP_BASE_DN>. Handy to diff a server's answers against slapd's.
"""
import uuid

import ldap
import ldap.modlist
from ldap.controls import LDAPControl
from ldap.extop import ExtendedRequest

from conftest import (ADMIN_DN, ADMIN_PW, SUFFIX, bind_as, connect, delete_subtree,
                      person_attrs, to_bytes_attrs)

ROWS = []


def run(op, situation, fn):
    try:
        r = fn()
        if r is True:
            code, name, msg = 6, "compareTrue", ""
        elif r is False:
            code, name, msg = 5, "compareFalse", ""
        else:
            code, name, msg = 0, "success", ""
    except ldap.LDAPError as e:
        info = e.args[0] if e.args and isinstance(e.args[0], dict) else {}
        code = info.get("result", "?")
        name = type(e).__name__
        msg = info.get("info", "")
        if info.get("matched"):
            msg = (msg + " " if msg else "") + "[matched: %s]" % info["matched"]
    ROWS.append((op, situation, code, name, msg))


def main():
    admin = bind_as(ADMIN_DN, ADMIN_PW)
    anon = connect()
    base = "ou=codes%s,%s" % (uuid.uuid4().hex[:8], SUFFIX)
    add = lambda conn, dn, attrs: conn.add_s(dn, ldap.modlist.addModlist(attrs))
    ou_attrs = lambda name: to_bytes_attrs({"objectClass": ["organizationalUnit"], "ou": [name]})
    add(admin, base, ou_attrs(base.split(",")[0][3:]))
    try:
        u1 = "uid=u1," + base
        u2 = "uid=u2," + base
        add(admin, u1, person_attrs("u1", password="pw1"))
        add(admin, u2, person_attrs("u2", password="pw2"))
        add(admin, "ou=sub," + base, ou_attrs("sub"))
        add(admin, "uid=c,ou=sub," + base, person_attrs("c"))
        user = bind_as(u1, "pw1")
        missing = "uid=nobody,ou=missing," + base

        # bind
        run("bind", "admin, right password", lambda: connect().simple_bind_s(ADMIN_DN, ADMIN_PW))
        run("bind", "user, wrong password", lambda: connect().simple_bind_s(u1, "bad"))
        run("bind", "unknown DN", lambda: connect().simple_bind_s("uid=nobody," + base, "x"))
        run("bind", "entry without userPassword", lambda: connect().simple_bind_s(base, "x"))
        run("bind", "DN with empty password", lambda: connect().simple_bind_s(u1, ""))
        run("bind", "invalid DN", lambda: connect().simple_bind_s("not a dn", "x"))
        # search
        run("search", "base does not exist", lambda: anon.search_s(missing, ldap.SCOPE_BASE))
        run("search", "base outside naming contexts",
            lambda: anon.search_s("dc=elsewhere,dc=invalid", ldap.SCOPE_BASE))
        run("search", "invalid base DN", lambda: anon.search_s("not a dn", ldap.SCOPE_BASE))
        run("search", "client size limit 1, 3 entries match",
            lambda: anon.search_ext_s(base, ldap.SCOPE_ONELEVEL, "(objectClass=*)", sizelimit=1))
        run("search", "unknown critical control", lambda: anon.search_ext_s(
            base, ldap.SCOPE_BASE, serverctrls=[LDAPControl("1.3.6.1.4.1.99999.1", True, None)]))
        run("search", "undefined attribute in filter",
            lambda: anon.search_s(base, ldap.SCOPE_SUBTREE, "(noSuchAttr=x)"))
        # compare
        run("compare", "value present", lambda: anon.compare_s(u1, "uid", b"u1"))
        run("compare", "value absent", lambda: anon.compare_s(u1, "uid", b"zz"))
        run("compare", "unknown attribute", lambda: anon.compare_s(u1, "noSuchAttr", b"x"))
        run("compare", "attribute not in entry", lambda: anon.compare_s(u1, "description", b"x"))
        run("compare", "no such entry", lambda: anon.compare_s(missing, "cn", b"x"))
        run("compare", "userPassword as anonymous", lambda: anon.compare_s(u1, "userPassword", b"pw1"))
        # add
        run("add", "entry exists", lambda: add(admin, u1, person_attrs("u1")))
        run("add", "parent missing", lambda: add(admin, missing, person_attrs("nobody")))
        a = person_attrs("x1"); del a["sn"]
        run("add", "MUST attribute missing (sn)", lambda: add(admin, "uid=x1," + base, a))
        run("add", "unknown attribute type", lambda: add(admin, "uid=x2," + base,
            person_attrs("x2", extra={"noSuchAttr": [b"1"]})))
        run("add", "bad syntax (uidNumber=abc)", lambda: add(admin, "uid=x3," + base,
            person_attrs("x3", uid_number="abc")))
        run("add", "attribute not allowed (dc on person)", lambda: add(admin, "uid=x4," + base,
            person_attrs("x4", extra={"dc": [b"x"]})))
        run("add", "no structural object class", lambda: add(admin, "uid=x5," + base, to_bytes_attrs(
            {"objectClass": ["posixAccount"], "uid": ["x5"], "cn": ["x"], "uidNumber": ["1"],
             "gidNumber": ["1"], "homeDirectory": ["/"]})))
        run("add", "two structural classes (organizationalUnit+device)", lambda: add(
            admin, "ou=x6," + base, to_bytes_attrs(
                {"objectClass": ["organizationalUnit", "device"], "ou": ["x6"], "cn": ["x"]})))
        a = person_attrs("x7"); a["objectClass"].append(b"noSuchClass")
        run("add", "unknown objectClass", lambda: add(admin, "uid=x7," + base, a))
        run("add", "RDN value not in attribute list", lambda: add(admin, "cn=x8," + base,
            to_bytes_attrs({"objectClass": ["device"]})))
        run("add", "single-valued attribute with 2 values", lambda: add(admin, "uid=x9," + base,
            person_attrs("x9", extra={"displayName": [b"a", b"b"]})))
        run("add", "duplicate value in one attribute", lambda: add(admin, "uid=x10," + base,
            person_attrs("x10", extra={"description": [b"a", b"a"]})))
        run("add", "NO-USER-MODIFICATION attribute (createTimestamp)", lambda: add(
            admin, "uid=x11," + base, person_attrs("x11", extra={"createTimestamp": [b"20200101000000Z"]})))
        run("add", "outside naming contexts", lambda: add(admin, "dc=elsewhere,dc=invalid", to_bytes_attrs(
            {"objectClass": ["dcObject", "organization"], "dc": ["elsewhere"], "o": ["x"]})))
        run("add", "as anonymous", lambda: add(anon, "uid=x12," + base, person_attrs("x12")))
        run("add", "as user without write access", lambda: add(user, "uid=x13," + base, person_attrs("x13")))
        # modify
        m = lambda conn, dn, *ch: conn.modify_s(dn, list(ch))
        run("modify", "delete value not present",
            lambda: m(admin, u1, (ldap.MOD_DELETE, "mail", [b"nope@example.com"])))
        run("modify", "delete attribute not present",
            lambda: m(admin, u1, (ldap.MOD_DELETE, "description", None)))
        run("modify", "add existing value",
            lambda: m(admin, u1, (ldap.MOD_ADD, "mail", [b"u1@example.com"])))
        run("modify", "delete RDN value", lambda: m(admin, u1, (ldap.MOD_DELETE, "uid", [b"u1"])))
        run("modify", "replace RDN attribute without RDN value",
            lambda: m(admin, u1, (ldap.MOD_REPLACE, "uid", [b"other"])))
        run("modify", "replace structural objectClass",
            lambda: m(admin, u1, (ldap.MOD_REPLACE, "objectClass", [b"organizationalUnit"])))
        run("modify", "objectClass change leaves attributes disallowed",
            lambda: m(admin, u1, (ldap.MOD_REPLACE, "objectClass", [b"inetOrgPerson"])))
        run("modify", "delete MUST attribute (sn)", lambda: m(admin, u1, (ldap.MOD_DELETE, "sn", None)))
        run("modify", "second value for single-valued attribute",
            lambda: m(admin, u1, (ldap.MOD_ADD, "displayName", [b"a", b"b"])))
        run("modify", "modifyTimestamp (NO-USER-MODIFICATION)",
            lambda: m(admin, u1, (ldap.MOD_REPLACE, "modifyTimestamp", [b"20200101000000Z"])))
        run("modify", "unknown attribute", lambda: m(admin, u1, (ldap.MOD_ADD, "noSuchAttr", [b"1"])))
        run("modify", "bad syntax", lambda: m(admin, u1, (ldap.MOD_REPLACE, "uidNumber", [b"abc"])))
        run("modify", "increment non-integer attribute",
            lambda: m(admin, u1, (ldap.MOD_INCREMENT, "telephoneNumber", [b"1"])))
        run("modify", "no such entry", lambda: m(admin, missing, (ldap.MOD_ADD, "description", [b"x"])))
        run("modify", "as anonymous", lambda: m(anon, u1, (ldap.MOD_ADD, "description", [b"x"])))
        run("modify", "other entry as user", lambda: m(user, u2, (ldap.MOD_ADD, "description", [b"x"])))
        # delete
        run("delete", "non-leaf", lambda: admin.delete_s("ou=sub," + base))
        run("delete", "no such entry", lambda: admin.delete_s(missing))
        run("delete", "as anonymous", lambda: anon.delete_s(u2))
        run("delete", "as user", lambda: user.delete_s(u2))
        # modrdn
        run("modrdn", "new RDN exists", lambda: admin.rename_s(u1, "uid=u2"))
        run("modrdn", "no such entry", lambda: admin.rename_s(missing, "uid=y"))
        run("modrdn", "newSuperior missing", lambda: admin.rename_s(u1, "uid=u1", newsuperior="ou=missing," + base))
        run("modrdn", "new RDN attribute not allowed", lambda: admin.rename_s(u1, "dc=u1", delold=0))
        run("modrdn", "move entry below itself", lambda: admin.rename_s("ou=sub," + base, "ou=sub2",
                                                                       newsuperior="ou=sub," + base))
        run("modrdn", "as anonymous", lambda: anon.rename_s(u2, "uid=u3"))
        # extended
        run("extended", "password modify, wrong old password",
            lambda: bind_as(u2, "pw2").passwd_s(u2, "wrong", "new"))
        run("extended", "password modify, anonymous", lambda: connect().passwd_s(u2, "pw2", "new"))
        run("extended", "password modify, other user's password",
            lambda: user.passwd_s(u2, None, "new"))
        run("extended", "password modify, no such user",
            lambda: admin.passwd_s("uid=nobody," + base, None, "new"))
        run("extended", "unknown extended operation",
            lambda: anon.extop_s(ExtendedRequest("1.3.6.1.4.1.99999.7", None)))
        run("modify", "unknown critical control", lambda: admin.modify_ext_s(
            u1, [(ldap.MOD_ADD, "description", [b"x"])],
            serverctrls=[LDAPControl("1.3.6.1.4.1.99999.1", True, None)]))
    finally:
        delete_subtree(admin, base)

    print("| Operation | Situation | Code | python-ldap exception | slapd diagnostic message |")
    print("|---|---|---|---|---|")
    for op, sit, code, name, msg in ROWS:
        print("| %s | %s | %s | %s | %s |" % (op, sit, code, name, msg.replace("|", "\\|")))


if __name__ == "__main__":
    main()
