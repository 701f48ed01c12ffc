//! The client end of an LDAP connection, without I/O (style rule 5: frame before you parse):
//! message ids for requests, and the bytes read until a response PDU is complete. The
//! console's in-process client (`server`) and the replication consumer (`repl`) write and read
//! their own streams through it.

use crate::{frame, Control, FrameError, LdapMessage, ProtocolOp};

/// The requests sent and the responses read on one connection.
#[derive(Debug)]
pub struct ClientConn {
    next_id: i32,
    buf: Vec<u8>,
    max_pdu: usize,
}

impl ClientConn {
    /// A connection accepting responses of up to `max_pdu` bytes; `capacity`: bytes reserved
    /// for reading at first.
    pub fn new(max_pdu: usize, capacity: usize) -> ClientConn {
        ClientConn {
            next_id: 1,
            buf: Vec::with_capacity(capacity),
            max_pdu,
        }
    }

    /// Encodes `op` with `controls` as the next request: its message id and its bytes. Ids
    /// run 1, 2, … and wrap back to 1 (0 is kept for unsolicited notifications, RFC 4511
    /// §4.1.1.1).
    pub fn request(&mut self, op: ProtocolOp<'_>, controls: Vec<Control<'_>>) -> (i32, Vec<u8>) {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let mut out = Vec::with_capacity(256);
        LdapMessage { id, op, controls }.encode(&mut out);
        (id, out)
    }

    /// The next whole response PDU among the bytes read, taken out of them (to decode with
    /// `LdapMessage::decode`); `None` until one is complete. A PDU larger than `max_pdu` is
    /// refused as soon as its header is read.
    pub fn next_pdu(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        Ok(frame(&self.buf, self.max_pdu)?.map(|n| {
            let rest = self.buf.split_off(n);
            std::mem::replace(&mut self.buf, rest)
        }))
    }

    /// Where the next bytes read go, with room for `chunk` more: read into its spare capacity
    /// (tokio's `read_buf`), so a read dropped while it waits loses nothing.
    pub fn read_buf(&mut self, chunk: usize) -> &mut Vec<u8> {
        self.buf.reserve(chunk);
        &mut self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_wrap_past_zero_and_pdus_are_framed_one_at_a_time() {
        let mut c = ClientConn::new(100, 0);
        let (a, bytes) = c.request(ProtocolOp::UnbindRequest, Vec::new());
        assert_eq!(
            (a, bytes.as_slice()),
            (1, &[0x30, 0x05, 0x02, 0x01, 0x01, 0x42, 0x00][..])
        );
        c.next_id = i32::MAX;
        assert_eq!(c.request(ProtocolOp::UnbindRequest, Vec::new()).0, i32::MAX);
        assert_eq!(c.request(ProtocolOp::UnbindRequest, Vec::new()).0, 1);
        // Two PDUs and a half arrive: one at a time, then wait for the rest.
        let unbind = [0x30, 0x05, 0x02, 0x01, 0x02, 0x42, 0x00];
        let buf = c.read_buf(64);
        buf.extend_from_slice(&unbind);
        buf.extend_from_slice(&unbind);
        buf.extend_from_slice(&unbind[..3]);
        assert_eq!(c.next_pdu(), Ok(Some(unbind.to_vec())));
        assert_eq!(c.next_pdu(), Ok(Some(unbind.to_vec())));
        assert_eq!(c.next_pdu(), Ok(None));
        c.read_buf(8).extend_from_slice(&unbind[3..]);
        assert_eq!(c.next_pdu(), Ok(Some(unbind.to_vec())));
        // Too large: refused from the header.
        let mut small = ClientConn::new(6, 0);
        small.read_buf(8).extend_from_slice(&unbind[..2]);
        assert!(small.next_pdu().is_err());
    }
}
