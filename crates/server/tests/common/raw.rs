//! A raw LDAP client for tests: requests encoded with `proto`, sent as they are (pipelined,
//! hostile, with any controls), and responses decoded one PDU at a time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use proto::{Control, LdapMessage, ProtocolOp, ResultCode};

pub struct RawClient {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

/// One decoded response, owned.
#[derive(Debug)]
pub struct Response {
    pub id: i32,
    pub tag: u8,
    /// The LDAPResult code, for responses that carry one.
    pub code: Option<ResultCode>,
    pub message: String,
    /// The DN of a SearchResultEntry.
    pub dn: String,
    /// The attributes of a SearchResultEntry.
    pub attrs: Vec<(String, Vec<Vec<u8>>)>,
    /// Response controls: (OID, value).
    pub controls: Vec<(String, Option<Vec<u8>>)>,
    /// The responseValue of an ExtendedResponse.
    pub value: Option<Vec<u8>>,
}

impl Response {
    pub fn control(&self, oid: &str) -> Option<&Option<Vec<u8>>> {
        self.controls.iter().find(|(o, _)| o == oid).map(|(_, v)| v)
    }
}

pub fn control(oid: &str, critical: bool, value: Option<Vec<u8>>) -> Control<'static> {
    Control {
        oid: oid.as_bytes().to_vec().into(),
        critical,
        value: value.map(Into::into),
    }
}

/// A search of entry `dn` alone, `(objectClass=*)`, for the attributes named (none: all user
/// attributes).
pub fn base_search(dn: &str, attrs: &[&str]) -> ProtocolOp<'static> {
    ProtocolOp::SearchRequest(proto::SearchRequest {
        base: dn.as_bytes().to_vec().into(),
        scope: proto::Scope::Base,
        deref: proto::DerefAliases::Never,
        size_limit: 0,
        time_limit: 0,
        types_only: false,
        filter: proto::Filter::Present(b"objectClass".as_slice().into()),
        attributes: attrs.iter().map(|a| a.as_bytes().to_vec().into()).collect(),
    })
}

impl RawClient {
    pub fn connect(addr: SocketAddr) -> RawClient {
        let stream = TcpStream::connect(addr).expect("connect");
        // A guard against a hung server, not a timing assertion: a healthy server answers
        // these tests' requests in milliseconds.
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        RawClient {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends one request with controls.
    pub fn send(&mut self, id: i32, op: ProtocolOp<'_>, controls: Vec<Control<'_>>) {
        let msg = LdapMessage { id, op, controls };
        self.stream.write_all(&msg.to_vec()).expect("send");
    }

    /// Sends raw bytes (several PDUs, or a hostile one).
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// A simple bind; panics unless it succeeds.
    pub fn bind(&mut self, id: i32, dn: &str, pw: &str) {
        self.send(
            id,
            ProtocolOp::BindRequest(proto::BindRequest {
                version: 3,
                name: dn.as_bytes().into(),
                auth: proto::BindAuth::Simple(pw.as_bytes().into()),
            }),
            vec![],
        );
        let r = self.recv();
        assert_eq!(r.code, Some(ResultCode::Success), "bind as {dn}: {r:?}");
    }

    /// The next response PDU.
    pub fn recv(&mut self) -> Response {
        loop {
            if let Some(n) = proto::frame(&self.buf, usize::MAX).expect("framing") {
                let pdu: Vec<u8> = self.buf.drain(..n).collect();
                return decode(&pdu);
            }
            let mut chunk = [0u8; 64 * 1024];
            let got = self.stream.read(&mut chunk).expect("read");
            assert!(got > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }

    /// Responses up to and including the one that ends operation `id` (anything but a search
    /// entry or reference for it).
    pub fn recv_until_done(&mut self, id: i32) -> Vec<Response> {
        let mut out = Vec::new();
        loop {
            let r = self.recv();
            let end = r.id == id
                && r.tag != proto::tags::SEARCH_RESULT_ENTRY
                && r.tag != proto::tags::SEARCH_RESULT_REFERENCE;
            out.push(r);
            if end {
                return out;
            }
        }
    }
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn decode(pdu: &[u8]) -> Response {
    let m = LdapMessage::decode(pdu).expect("decodable response");
    let mut r = Response {
        id: m.id,
        tag: m.op.tag(),
        code: None,
        message: String::new(),
        dn: String::new(),
        attrs: Vec::new(),
        controls: m
            .controls
            .iter()
            .map(|c| (s(&c.oid), c.value.as_ref().map(|v| v.to_vec())))
            .collect(),
        value: None,
    };
    let result = match &m.op {
        ProtocolOp::BindResponse(res, _) => Some(res),
        ProtocolOp::SearchResultDone(res)
        | ProtocolOp::ModifyResponse(res)
        | ProtocolOp::AddResponse(res)
        | ProtocolOp::DelResponse(res)
        | ProtocolOp::ModifyDnResponse(res)
        | ProtocolOp::CompareResponse(res) => Some(res),
        ProtocolOp::ExtendedResponse(x) => {
            r.value = x.value.as_ref().map(|v| v.to_vec());
            Some(&x.result)
        }
        ProtocolOp::SearchResultEntry { dn, attributes } => {
            r.dn = s(dn);
            r.attrs = attributes
                .iter()
                .map(|a| (s(&a.name), a.values.iter().map(|v| v.to_vec()).collect()))
                .collect();
            None
        }
        _ => None,
    };
    if let Some(res) = result {
        r.code = Some(res.code);
        r.message = s(&res.message);
    }
    r
}
