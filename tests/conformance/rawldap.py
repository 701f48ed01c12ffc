"""A minimal LDAP client over a raw socket, for what python-ldap cannot send or read: an empty
control value (slapd's transaction identifier), the response value of a failed extended
operation (End Transaction names the failing message id), responses in arrival order (Cancel).
BER encoding and decoding by hand, definite lengths only."""
import socket

from conftest import LDAP_URL


def _len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def tlv(tag, content):
    return bytes([tag]) + _len(len(content)) + content


def octets(v, tag=0x04):
    return tlv(tag, v if isinstance(v, bytes) else v.encode())


def integer(n, tag=0x02):
    return tlv(tag, n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big", signed=True))


def boolean(v):
    return tlv(0x01, b"\xff" if v else b"\x00")


def seq(*parts, tag=0x30):
    return tlv(tag, b"".join(parts))


def control(oid, critical=False, value=None):
    return seq(octets(oid), boolean(True) if critical else b"", b"" if value is None else octets(value))


def read_tlv(buf, i):
    tag = buf[i]
    n = buf[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(buf[i:i + k], "big")
        i += k
    return tag, buf[i:i + n], i + n


def elements(buf):
    out, i = [], 0
    while i < len(buf):
        tag, v, i = read_tlv(buf, i)
        out.append((tag, v))
    return out


class Response:
    def __init__(self, msgid, tag, body):
        self.msgid, self.tag, self.body = msgid, tag, body
        self.code = self.message = self.name = self.value = None
        if tag in (0x61, 0x65, 0x67, 0x69, 0x6B, 0x6D, 0x6F, 0x78):
            parts = elements(body)
            self.code = int.from_bytes(parts[0][1], "big")
            self.message = parts[2][1].decode("utf-8", "replace")
            for t, v in parts[3:]:
                if t == 0x8A:
                    self.name = v.decode()
                elif t == 0x8B:
                    self.value = v

    def __repr__(self):
        return "Response(id=%d tag=0x%02x code=%s msg=%r value=%r)" % (
            self.msgid, self.tag, self.code, self.message, self.value)


class Conn:
    def __init__(self, url=LDAP_URL, rcvbuf=None):
        """`rcvbuf`: a small receive buffer, so that a client that does not read holds up the
        server's writes sooner (back-pressure)."""
        host, port = url.split("//")[1].rsplit(":", 1)
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(60)
        self.s.connect((host, int(port)))
        self.buf = b""
        self.next_id = 1

    def send(self, op, controls=()):
        msgid = self.next_id
        self.next_id += 1
        ctl = seq(*controls, tag=0xA0) if controls else b""
        self.s.sendall(seq(integer(msgid), op, ctl))
        return msgid

    def recv(self):
        while True:
            if len(self.buf) >= 2:
                try:
                    tag, body, end = read_tlv(self.buf, 0)
                    if end <= len(self.buf):
                        self.buf = self.buf[end:]
                        parts = elements(body)
                        msgid = int.from_bytes(parts[0][1], "big", signed=True)
                        return Response(msgid, parts[1][0], parts[1][1])
                except IndexError:
                    pass
            data = self.s.recv(65536)
            if not data:
                raise EOFError("connection closed")
            self.buf += data

    def call(self, op, controls=()):
        msgid = self.send(op, controls)
        r = self.recv()
        assert r.msgid == msgid, r
        return r

    def search(self, op, controls=()):
        """(DNs of the entries, the SearchResultDone)."""
        msgid = self.send(op, controls)
        dns = []
        while True:
            r = self.recv()
            assert r.msgid == msgid, r
            if r.tag == 0x64:
                dns.append(elements(r.body)[0][1].decode())
            elif r.tag == 0x65:
                return dns, r

    def bind(self, dn, pw):
        r = self.call(seq(integer(3), octets(dn), octets(pw, 0x80), tag=0x60))
        assert r.code == 0, r
        return r

    def close(self):
        try:
            self.send(tlv(0x42, b""))
        finally:
            self.s.close()


def add_op(dn, attrs):
    return seq(octets(dn), seq(*[seq(octets(k), seq(*[octets(v) for v in vs], tag=0x31))
                                 for k, vs in attrs.items()]), tag=0x68)


def delete_op(dn):
    return octets(dn, 0x4A)


def modify_op(dn, changes):
    """changes: [(op, type, [values])], op 0 add, 1 delete, 2 replace."""
    return seq(octets(dn), seq(*[seq(tlv(0x0A, bytes([o])), seq(octets(t), seq(
        *[octets(v) for v in vs], tag=0x31))) for o, t, vs in changes]), tag=0x66)


def extended_op(oid, value=None):
    return seq(octets(oid, 0x80), b"" if value is None else octets(value, 0x81), tag=0x77)


def search_op(base, scope=2, filter_present="objectClass", attrs=("1.1",)):
    return seq(octets(base), tlv(0x0A, bytes([scope])), tlv(0x0A, b"\x00"), integer(0),
               integer(0), boolean(False), octets(filter_present, 0x87),
               seq(*[octets(a) for a in attrs]), tag=0x63)


TXN_START = "1.3.6.1.1.21.1"
TXN_SPEC = "1.3.6.1.1.21.2"
TXN_END = "1.3.6.1.1.21.3"
CANCEL = "1.3.6.1.1.8"


def txn_end(txn_id, commit=True):
    return extended_op(TXN_END, seq(b"" if commit else boolean(False), octets(txn_id)))


def txn_end_failed_id(value):
    """The message id an End Transaction response value names, or None."""
    if not value:
        return None
    (tag, body), = elements(value)
    parts = elements(body)
    if parts and parts[0][0] == 0x02:
        return int.from_bytes(parts[0][1], "big", signed=True)
    return None


def cancel_op(msgid):
    return extended_op(CANCEL, seq(integer(msgid)))
