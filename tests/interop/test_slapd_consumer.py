"""Interop: an OpenLDAP slapd 2.5 consumer (syncrepl, refreshAndPersist) replicating from a
Linden provider (`syncprov = true`), on loopback.

Linden is loaded with a few thousand entries, then slapd starts and refreshes from it; then a
stream of adds, modifies of several attributes, renames with newSuperior and deletes is made
on Linden while slapd persists. Both directories are then compared entry by entry: DN, user
attributes, entryUUID and entryCSN.

Bounded: every wait has a deadline. Waiting for slapd to converge is the one poll here (slapd
is another process and says nothing when it has caught up): the consumer's contextCSN is
read until it equals the provider's, then the contents are compared.

Run by scripts/run-interop.sh (part of scripts/test.sh); LINDEN_BIN names the binary.
"""
import os
import shutil
import socket
import subprocess
import time

import ldap
import ldap.modlist
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINDEN = os.environ.get("LINDEN_BIN", os.path.join(ROOT, "target", "debug", "linden"))
SLAPD = shutil.which("slapd") or "/usr/sbin/slapd"
SUFFIX = "dc=example,dc=com"
ADMIN = "cn=admin," + SUFFIX
PW = "secret"
ENTRIES = int(os.environ.get("INTEROP_ENTRIES", "3000"))
ROUNDS = int(os.environ.get("INTEROP_ROUNDS", "100"))
DEADLINE = 120  # seconds for any one wait

pytestmark = pytest.mark.skipif(not os.path.exists(SLAPD), reason="slapd is not installed")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def connect(url):
    """A bound connection, waiting (bounded) for the server to accept."""
    end = time.monotonic() + DEADLINE
    while True:
        try:
            c = ldap.initialize(url)
            c.protocol_version = 3
            c.simple_bind_s(ADMIN, PW)
            return c
        except ldap.SERVER_DOWN:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="module")
def linden(tmp_path_factory):
    d = tmp_path_factory.mktemp("linden")
    port = free_port()
    (d / "linden.toml").write_text(
        'syncprov = true\nserver_id = 1\ndurability = "nosync"\n'
        'syncprov_sessionlog = 100000\n')
    log = open(d / "linden.log", "w")
    p = subprocess.Popen(
        [LINDEN, "serve", "--config", str(d / "linden.toml"), "--listen", "127.0.0.1:%d" % port,
         "--data", str(d / "data"), "--admin-password", PW],
        stdout=log, stderr=subprocess.STDOUT)
    url = "ldap://127.0.0.1:%d" % port
    try:
        yield url
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()


def start_slapd(d, provider):
    port = free_port()
    (d / "data").mkdir()
    conf = d / "slapd.conf"
    conf.write_text("""
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
pidfile {d}/slapd.pid
argsfile {d}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
serverID 2

database mdb
maxsize 1073741824
suffix "{suffix}"
rootdn "{admin}"
rootpw {pw}
directory {d}/data
index objectClass eq
index entryUUID,entryCSN eq
dbnosync
syncrepl rid=001
  provider={provider}
  type=refreshAndPersist
  retry="1 +"
  searchbase="{suffix}"
  scope=sub
  bindmethod=simple
  binddn="{admin}"
  credentials={pw}
  attrs="*,+"
""".format(d=d, suffix=SUFFIX, admin=ADMIN, pw=PW, provider=provider))
    log = open(d / "slapd.log", "w")
    p = subprocess.Popen([SLAPD, "-d", "sync,stats", "-f", str(conf),
                          "-h", "ldap://127.0.0.1:%d/" % port],
                         stdout=log, stderr=subprocess.STDOUT)
    return p, log, "ldap://127.0.0.1:%d" % port


def add_many(conn, entries):
    """Adds pipelined (up to 64 outstanding), checking every result."""
    pending = []
    for dn, attrs in entries:
        pending.append(conn.add_ext(dn, ldap.modlist.addModlist(attrs)))
        if len(pending) >= 64:
            conn.result(pending.pop(0))
    for m in pending:
        conn.result(m)


def person(uid, n):
    return {
        "objectClass": [b"top", b"person", b"organizationalPerson", b"inetOrgPerson"],
        "uid": [uid.encode()], "cn": [("User %d" % n).encode()], "sn": [b"Tester"],
        "mail": [("%s@example.com" % uid).encode()],
        "telephoneNumber": [("+1 555 %04d" % n).encode()],
        "description": [b"initial"],
    }


def ou(name):
    return {"objectClass": [b"top", b"organizationalUnit"], "ou": [name.encode()]}


def snapshot(conn):
    """{normalized DN: {attr: sorted values}} of the whole suffix, with entryUUID, entryCSN."""
    res = conn.search_s(SUFFIX, ldap.SCOPE_SUBTREE, "(objectClass=*)",
                        ["*", "entryUUID", "entryCSN"])
    out = {}
    for dn, attrs in res:
        key = ",".join("+".join("%s=%s" % (t.lower(), v.lower()) for t, v, _ in rdn)
                       for rdn in ldap.dn.str2dn(dn))
        out[key] = {k.lower(): sorted(v) for k, v in attrs.items()}
    return out


def context_csn(conn):
    res = conn.search_s(SUFFIX, ldap.SCOPE_BASE, "(objectClass=*)", ["contextCSN"])
    return sorted(res[0][1].get("contextCSN", []))


def converge(provider, consumer):
    """Waits (bounded) until the consumer's contextCSN is the provider's."""
    want = context_csn(provider)
    end = time.monotonic() + DEADLINE
    while True:
        try:
            got = context_csn(consumer)
        except ldap.NO_SUCH_OBJECT:
            got = []
        if got == want:
            return
        assert time.monotonic() < end, "slapd did not catch up: %r != %r" % (got, want)
        time.sleep(0.2)


def compare(provider, consumer):
    a, b = snapshot(provider), snapshot(consumer)
    missing = sorted(set(a) - set(b))[:5]
    extra = sorted(set(b) - set(a))[:5]
    assert not missing and not extra, "missing on slapd %r, extra on slapd %r" % (missing, extra)
    diff = [dn for dn in a if a[dn] != b[dn]]
    assert not diff, "first difference at %s: linden %r slapd %r" % (
        diff[0], a[diff[0]], b[diff[0]])
    return len(a)


def test_slapd_consumer_replicates_a_linden_provider(linden, tmp_path):
    prov = connect(linden)
    add_many(prov, [("ou=people," + SUFFIX, ou("people")), ("ou=moved," + SUFFIX, ou("moved"))])
    add_many(prov, [("uid=u%d,ou=people,%s" % (i, SUFFIX), person("u%d" % i, i))
                    for i in range(ENTRIES)])

    slapd, log, url = start_slapd(tmp_path, linden)
    try:
        cons = connect(url)
        converge(prov, cons)
        assert compare(prov, cons) >= ENTRIES + 3

        # A stream of changes while slapd persists.
        for r in range(ROUNDS):
            i = ENTRIES + r
            uid = "n%d" % r
            prov.add_s("uid=%s,ou=people,%s" % (uid, SUFFIX), ldap.modlist.addModlist(
                person(uid, i)))
            prov.modify_s("uid=u%d,ou=people,%s" % (r, SUFFIX), [
                (ldap.MOD_REPLACE, "description", [b"changed %d" % r]),
                (ldap.MOD_REPLACE, "sn", [b"Changed"]),
                (ldap.MOD_ADD, "telephoneNumber", [b"+1 555 9%03d" % r]),
            ])
            prov.rename_s("uid=u%d,ou=people,%s" % (ENTRIES - 1 - r, SUFFIX),
                          "uid=m%d" % r, newsuperior="ou=moved," + SUFFIX, delold=0)
            prov.delete_s("uid=u%d,ou=people,%s" % (ENTRIES // 2 + r, SUFFIX))
        converge(prov, cons)
        assert compare(prov, cons) >= ENTRIES + 3
    finally:
        slapd.terminate()
        slapd.wait(timeout=30)
        log.close()
