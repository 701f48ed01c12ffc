//! Framing: where the next PDU ends, known from its header alone (style rule 5).

use crate::FrameError;

/// Length of the first complete LDAPMessage in `buf`; `Ok(None)` while more bytes are needed.
///
/// The size check runs as soon as the header is complete, so an oversized PDU is refused before
/// its body is buffered (`max_pdu` bounds the bytes buffered per connection).
pub fn frame(buf: &[u8], max_pdu: usize) -> Result<Option<usize>, FrameError> {
    Ok(announced_len(buf, max_pdu)?.filter(|&len| buf.len() >= len))
}

/// Total length (header included) of the LDAPMessage that starts `buf`, as its header announces
/// it, whether or not the rest has arrived; `Ok(None)` until the header is complete. A length
/// over `max_pdu` is an error, so a reader knows how much to buffer (and whether to accept it)
/// before the body arrives.
pub fn announced_len(buf: &[u8], max_pdu: usize) -> Result<Option<usize>, FrameError> {
    match buf.first() {
        None => return Ok(None),
        Some(&t) if t != ber::tag::SEQUENCE => return Err(FrameError::NotASequence(t)),
        Some(_) => {}
    }
    let Some(h) = ber::parse_header(buf)? else {
        return Ok(None);
    };
    let len = h.total_len().unwrap_or(usize::MAX);
    if len > max_pdu {
        return Err(FrameError::TooLarge { len, max: max_pdu });
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames() {
        let unbind = [0x30, 0x05, 0x02, 0x01, 0x02, 0x42, 0x00];
        assert_eq!(frame(&[], 100), Ok(None));
        assert_eq!(frame(&unbind[..1], 100), Ok(None));
        assert_eq!(frame(&unbind[..6], 100), Ok(None));
        assert_eq!(frame(&unbind, 100), Ok(Some(7)));
        let mut two = unbind.to_vec();
        two.extend_from_slice(&unbind[..3]);
        assert_eq!(frame(&two, 100), Ok(Some(7)));
        assert_eq!(
            frame(&unbind, 6),
            Err(FrameError::TooLarge { len: 7, max: 6 })
        );
        // Header alone is enough to refuse: 16 MiB announced, 5 bytes present.
        assert_eq!(
            frame(&[0x30, 0x84, 0x01, 0x00, 0x00, 0x00], 1 << 20),
            Err(FrameError::TooLarge {
                len: 6 + (1 << 24),
                max: 1 << 20
            })
        );
        // The announced length is known from the header, before the body.
        assert_eq!(announced_len(&unbind[..2], 100), Ok(Some(7)));
        assert_eq!(announced_len(&unbind[..1], 100), Ok(None));
        assert_eq!(
            announced_len(&[0x30, 0x83, 0x01, 0x00, 0x00], 1 << 20),
            Ok(Some(5 + 0x10000))
        );
        assert_eq!(
            frame(&[0x31, 0x00], 100),
            Err(FrameError::NotASequence(0x31))
        );
        assert_eq!(
            frame(&[0x30, 0x80], 100),
            Err(FrameError::Malformed(ber::Error::IndefiniteLength))
        );
        assert!(matches!(
            frame(&[0x30, 0x85, 0, 0, 0, 0, 1], 100),
            Err(FrameError::Malformed(_))
        ));
    }
}
