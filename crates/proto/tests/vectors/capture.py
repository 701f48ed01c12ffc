#!/usr/bin/env python3
"""Capture request PDUs sent by the OpenLDAP command-line clients.

For each client run, a one-shot listener on 127.0.0.1 (loopback only) records every PDU the
client sends and answers each request with a canned success response of the matching type,
so the client proceeds to its next request. Each PDU is written to <name>.<n>_<op>.bin
next to this script; the tests decode and re-encode all of them.

Re-run with:  python3 crates/proto/tests/vectors/capture.py
"""
import os
import socket
import subprocess
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
OPS = {0x60: "bind", 0x42: "unbind", 0x63: "search", 0x66: "modify", 0x68: "add",
       0x4a: "delete", 0x6c: "moddn", 0x6e: "compare", 0x50: "abandon", 0x77: "extended"}
# request tag -> (response tag, result code)
RESPONSES = {0x60: (0x61, 0), 0x63: (0x65, 0), 0x66: (0x67, 0), 0x68: (0x69, 0),
             0x4a: (0x6b, 0), 0x6c: (0x6d, 0), 0x6e: (0x6f, 6), 0x77: (0x78, 0)}


def tlv(tag, body):
    n = len(body)
    if n < 128:
        return bytes([tag, n]) + body
    lb = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(lb)]) + lb + body


def read_pdu(conn):
    buf = b""
    while True:
        if len(buf) >= 2:
            first = buf[1]
            if first < 0x80:
                hl, cl = 2, first
            else:
                k = first & 0x7F
                if len(buf) >= 2 + k:
                    hl, cl = 2 + k, int.from_bytes(buf[2:2 + k], "big")
                else:
                    hl = None
            if hl is not None and len(buf) >= hl + cl:
                return buf[:hl + cl]
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk


def parse_id_and_op(pdu):
    # 30 LL 02 ii <id bytes> <op tag>; the clients only send short forms for these headers.
    i = 2 if pdu[1] < 0x80 else 2 + (pdu[1] & 0x7F)
    idlen = pdu[i + 1]
    msgid = pdu[i + 2:i + 2 + idlen]
    return msgid, pdu[i + 2 + idlen]


def serve(sock, pdus):
    conn, _ = sock.accept()
    with conn:
        while True:
            pdu = read_pdu(conn)
            if pdu is None:
                return
            pdus.append(pdu)
            msgid, op = parse_id_and_op(pdu)
            if op in RESPONSES:
                rtag, code = RESPONSES[op]
                body = tlv(0x0A, bytes([code])) + tlv(0x04, b"") + tlv(0x04, b"")
                conn.sendall(tlv(0x30, tlv(0x02, msgid) + tlv(rtag, body)))
            elif op == 0x42:
                return


def capture(name, argv, stdin=None):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    port = sock.getsockname()[1]
    pdus = []
    t = threading.Thread(target=serve, args=(sock, pdus))
    t.start()
    url = "ldap://127.0.0.1:%d" % port
    argv = [argv[0], "-H", url] + argv[1:]
    subprocess.run(argv, input=stdin, capture_output=True, timeout=20)
    t.join(timeout=20)
    sock.close()
    for n, pdu in enumerate(pdus):
        op = OPS.get(parse_id_and_op(pdu)[1], "unknown")
        with open(os.path.join(HERE, "%s.%d_%s.bin" % (name, n, op)), "wb") as f:
            f.write(pdu)
    print(name, [OPS.get(parse_id_and_op(p)[1]) for p in pdus])


BASE = "dc=example,dc=com"
ADMIN = ["-x", "-D", "cn=admin," + BASE, "-w", "secret"]

capture("search", ["ldapsearch", "-x", "-b", BASE, "(&(uid=a*b)(!(cn=x)))", "cn", "mail"])
capture("search_filters", ["ldapsearch", "-x", "-M", "-E", "pr=10/noprompt", "-s", "one",
                           "-z", "5", "-l", "7", "-A", "-b", BASE,
                           "(|(cn:dn:2.5.13.5:=John)(sn~=sm\\2aith)(age>=3)(age<=9)"
                           "(objectClass=*)(:caseExactMatch:=x)(cn;lang-en=*a*b*c)(&))"])
capture("whoami", ["ldapwhoami"] + ADMIN)
capture("add", ["ldapadd"] + ADMIN, stdin=(
    "dn: cn=foo," + BASE + "\nobjectClass: person\ncn: foo\nsn: Foo\n"
    "description: " + "long value " * 20 + "\n").encode())
capture("modify", ["ldapmodify"] + ADMIN, stdin=(
    "dn: cn=foo," + BASE + "\nchangetype: modify\nadd: mail\nmail: a@example.com\n"
    "mail: b@example.com\n-\ndelete: phone\n-\nreplace: sn\nsn: Bar\n-\n").encode())
capture("delete", ["ldapdelete"] + ADMIN + ["cn=foo," + BASE])
capture("moddn", ["ldapmodrdn"] + ADMIN + ["-r", "-s", "ou=new," + BASE, "cn=foo," + BASE, "cn=bar"])
capture("compare", ["ldapcompare"] + ADMIN + ["cn=foo," + BASE, "sn:Smith"])
capture("passwd", ["ldappasswd"] + ADMIN + ["-a", "old", "-s", "new", "uid=u," + BASE])
