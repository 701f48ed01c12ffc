//! Framing: where the next PDU ends, known from its header alone (style rule 5).

use crate::FrameError;

/// Length of the first complete LDAPMessage in `buf`; `Ok(None)` while more bytes are needed.
///
/// The size check runs as soon as the header is complete, so an oversized PDU is refused before
/// its body is buffered (`max_pdu` bounds the bytes buffered per connection).
pub fn frame(buf: &[u8], max_pdu: usize) -> Result<Option<usize>, FrameError> {
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
    Ok((buf.len() >= len).then_some(len))
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
