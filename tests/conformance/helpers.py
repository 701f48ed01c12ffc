"""Small helpers shared by the conformance tests."""
import ldap

from conftest import norm_dn


def ci(attrs):
    """Attribute dict with lower-cased names and str values."""
    return {k.lower(): [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in vals]
            for k, vals in attrs.items()}


def dns(results):
    return sorted(norm_dn(dn) for dn, _ in results if dn is not None)


def uids(results):
    out = []
    for dn, attrs in results:
        if dn is None:
            continue
        rdn = ldap.dn.str2dn(dn)[0][0]
        out.append(rdn[1].lower())
    return sorted(out)


def get_entry(conn, dn, attrs=None):
    res = conn.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", attrs)
    assert len(res) == 1
    return ci(res[0][1])


def error_info(exc):
    """(result dict) of a python-ldap LDAPError."""
    return exc.value.args[0] if hasattr(exc, "value") else exc.args[0]


def matched(exc):
    return error_info(exc).get("matched", "")
