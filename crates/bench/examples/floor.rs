//! The floor under a server's CPU per request on this machine: an LDAP responder that does no
//! directory work at all. It answers every bind with success, every search with one fixed entry
//! (the size of a reference entry) and a success, every modify with success, and closes on
//! unbind. Whatever CPU it spends per request is the kernel's loopback TCP (the reads, the
//! writes, waking the client) and the runtime's scheduling: what no directory server can go
//! below with the same sockets. BENCHMARKS.md uses it to say where the synchronous aims of
//! issue 17 stand.
//!
//! ```sh
//! cargo run --release -p bench --example floor -- 127.0.0.1:14100 multi    # tokio, one worker per core
//! cargo run --release -p bench --example floor -- 127.0.0.1:14100 current  # tokio, one thread
//! linden bench search --url ldap://127.0.0.1:14100 --connections 8 --depth 1 --duration 5
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "developer tool: a failed step ends the run with its message"
)]

use proto::{tags, LdapMessage, LdapResult, ProtocolOp, ResultCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MAX_PDU: usize = 1 << 20;

/// The responses to every complete request at the front of `buf`, appended to `out`; returns
/// the bytes consumed and whether the client unbound.
fn answer(buf: &[u8], out: &mut Vec<u8>) -> (usize, bool) {
    let mut at = 0;
    while let Ok(Some(len)) = proto::frame(&buf[at..], MAX_PDU) {
        let msg = LdapMessage::decode(&buf[at..at + len]).expect("a request the floor understands");
        at += len;
        let ok = LdapResult {
            code: ResultCode::Success,
            matched_dn: b""[..].into(),
            message: b""[..].into(),
            referral: Vec::new(),
        };
        match msg.op {
            ProtocolOp::BindRequest(_) => {
                proto::encode_result(out, msg.id, tags::BIND_RESPONSE, &ok);
            }
            ProtocolOp::SearchRequest(_) => {
                proto::encode_search_entry(out, msg.id, ENTRY_DN, entry());
                proto::encode_result(out, msg.id, tags::SEARCH_RESULT_DONE, &ok);
            }
            ProtocolOp::ModifyRequest(_) => {
                proto::encode_result(out, msg.id, tags::MODIFY_RESPONSE, &ok);
            }
            ProtocolOp::UnbindRequest => return (at, true),
            other => panic!("the floor does not answer {other:?}"),
        }
    }
    (at, false)
}

const ENTRY_DN: &[u8] = b"uid=user.4711,ou=People,dc=example,dc=com";

/// An entry of `linden gen`'s reference data, as a search returns it.
fn entry() -> impl Iterator<Item = (&'static [u8], std::iter::Once<&'static [u8]>)> {
    const ATTRS: &[(&[u8], &[u8])] = &[
        (b"objectClass", b"inetOrgPerson"),
        (b"uid", b"user.4711"),
        (b"cn", b"Aaren Atp"),
        (b"sn", b"Atp"),
        (b"givenName", b"Aaren"),
        (b"mail", b"user.4711@example.com"),
        (b"telephoneNumber", b"+1 685 622 6202"),
        (b"employeeNumber", b"4711"),
        (b"initials", b"ASA"),
        (b"street", b"01126 Sixth Street"),
        (b"l", b"Panama City"),
        (b"st", b"DE"),
        (b"postalCode", b"50369"),
        (
            b"postalAddress",
            b"Aaren Atp$01126 Sixth Street$Panama City, DE  50369",
        ),
        (b"description", b"This is the description for Aaren Atp."),
    ];
    ATTRS.iter().map(|(n, v)| (*n, std::iter::once(*v)))
}

async fn serve_async(mut s: tokio::net::TcpStream) {
    s.set_nodelay(true).ok();
    let mut buf = Vec::with_capacity(64 << 10);
    let mut out = Vec::with_capacity(64 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let (used, unbound) = answer(&buf, &mut out);
        buf.drain(..used);
        if !out.is_empty() && s.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
        if unbound {
            return;
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:14100".into());
    let mode = args.next().unwrap_or_else(|| "multi".into());
    let mut b = if mode == "current" {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let rt = b.enable_all().build().expect("runtime");
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(&addr).await.expect("bind");
        println!(
            "listening on {} (tokio {mode})",
            l.local_addr().expect("addr")
        );
        loop {
            if let Ok((s, _)) = l.accept().await {
                tokio::spawn(serve_async(s));
            }
        }
    });
}
