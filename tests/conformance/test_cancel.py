"""Cancel (RFC 3909): a running search ends with canceled (118) and the Cancel's own answer
(success) follows it; an id that names no operation in progress is noSuchOperation (119).
Over a raw socket (rawldap), to see the responses in the order they arrive."""
import time

import ldap
import ldap.modlist
import pytest

import rawldap as r
from conftest import ADMIN_DN, ADMIN_PW, delete_subtree, to_bytes_attrs

# Entries of ~1 MiB each: together far more than the server's output buffer and the sockets'
# buffers, so a search for all of them cannot finish while the client reads nothing.
N = 32
SIZE = 1 << 20


@pytest.fixture(scope="module")
def big(tree, admin_session):
    base = "ou=%s,%s" % (tree.unique("big"), tree.scratch)
    admin_session.add_s(base, ldap.modlist.addModlist(to_bytes_attrs(
        {"objectClass": ["organizationalUnit"], "ou": [base[3:].split(",")[0]]})))
    for i in range(N):
        admin_session.add_s("cn=big%d,%s" % (i, base), ldap.modlist.addModlist(to_bytes_attrs(
            {"objectClass": ["organizationalRole"], "cn": ["big%d" % i],
             "description": ["%d" % i + "x" * SIZE]})))
    yield base
    delete_subtree(admin_session, base)


@pytest.fixture
def raw():
    c = r.Conn(rcvbuf=4096)
    c.bind(ADMIN_DN, ADMIN_PW)
    yield c
    c.close()


def test_cancel_of_a_running_search(raw, big):
    # The search is sent, then the Cancel, before reading anything: the search cannot have
    # finished (its entries do not fit in the buffers) when the Cancel arrives.
    sid = raw.send(r.search_op(big, filter_present="description", attrs=("description",)))
    cid = raw.send(r.cancel_op(sid))
    entries = 0
    while True:
        resp = raw.recv()
        if resp.msgid == sid and resp.tag == 0x64:
            entries += 1
            continue
        break
    assert (resp.msgid, resp.tag, resp.code) == (sid, 0x65, 118), resp
    assert entries < N
    answer = raw.recv()
    assert (answer.msgid, answer.code) == (cid, 0), answer
    # The connection goes on.
    dns, done = raw.search(r.search_op(big, scope=0))
    assert done.code == 0 and len(dns) == 1


def index_search_op(base):
    """All the big entries by an OR of equalities on cn, which the equality index answers:
    few candidates, so Linden runs the search in the connection's read loop (engine::run)."""
    eqs = b"".join(seq(r.octets("cn"), r.octets("big%d" % i), tag=0xA3) for i in range(N))
    return seq(r.octets(base), r.tlv(0x0A, b"\x01"), r.tlv(0x0A, b"\x00"), r.integer(0),
               r.integer(0), r.boolean(False), r.tlv(0xA1, eqs), seq(r.octets("description")),
               tag=0x63)


def seq(*parts, tag=0x30):
    return r.seq(*parts, tag=tag)


def write_waiters(admin):
    (_, a), = admin.search_s("cn=Write,cn=Waiters,cn=Monitor", ldap.SCOPE_BASE,
                             "(objectClass=*)", ["monitorCounter"])
    return int(a["monitorCounter"][0])


def wait_blocked(admin):
    """Until the server shows an operation waiting to write (slapd: a thread; Linden: a
    search), which the client reading nothing leaves blocked."""
    deadline = time.monotonic() + 60
    while write_waiters(admin) < 1:
        assert time.monotonic() < deadline, "the server never blocked writing"
        time.sleep(0.02)


def test_cancel_of_a_search_blocked_on_a_client_that_reads_nothing(raw, big, admin):
    # Linden used to run this search in the read loop, which then waited for room to write
    # and read the Cancel only after the search: all entries, success, noSuchOperation.
    sid = raw.send(index_search_op(big))
    wait_blocked(admin)
    cid = raw.send(r.cancel_op(sid))
    entries = 0
    while True:
        resp = raw.recv()
        if resp.msgid == sid and resp.tag == 0x64:
            entries += 1
            continue
        break
    assert (resp.msgid, resp.tag, resp.code) == (sid, 0x65, 118), resp
    assert entries < N
    answer = raw.recv()
    assert (answer.msgid, answer.code) == (cid, 0), answer


def test_abandon_of_a_search_blocked_on_a_client_that_reads_nothing(raw, big, admin):
    sid = raw.send(index_search_op(big))
    wait_blocked(admin)
    raw.send(r.tlv(0x50, r.integer(sid)[2:]))
    # A request after the Abandon: its answer comes once what was queued is read, with no
    # result for the abandoned search and not all its entries.
    mid = raw.send(r.search_op(big, scope=0))
    entries = 0
    while True:
        resp = raw.recv()
        if resp.msgid == mid:
            break
        assert (resp.msgid, resp.tag) == (sid, 0x64), "no result after Abandon: %r" % resp
        entries += 1
    assert entries < N
    assert resp.tag == 0x64, resp
    done = raw.recv()
    assert (done.msgid, done.tag, done.code) == (mid, 0x65, 0), done


def test_cancel_of_an_unknown_or_finished_operation(raw, tree):
    assert raw.call(r.cancel_op(999)).code == 119
    _, done = raw.search(r.search_op(tree.people, scope=0))
    assert done.code == 0
    assert raw.call(r.cancel_op(done.msgid)).code == 119


def test_cancel_without_a_message_id_is_a_protocol_error(raw):
    assert raw.call(r.extended_op(r.CANCEL)).code == 2
    assert raw.call(r.extended_op(r.CANCEL, b"\x30\x00")).code == 2


def test_root_dse_lists_cancel(anon):
    dse = anon.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["supportedExtension"])[0][1]
    assert r.CANCEL.encode() in dse["supportedExtension"]
