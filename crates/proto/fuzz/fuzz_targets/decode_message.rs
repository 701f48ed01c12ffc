//! Any bytes: framing and decoding never panic; whatever decodes re-encodes to a PDU that
//! decodes to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let framed = proto::frame(data, 1 << 20);
    let _ = ber::element_len(data);
    if let Ok(msg) = proto::LdapMessage::decode(data) {
        assert_eq!(framed, Ok(Some(data.len())));
        let mut out = Vec::new();
        msg.encode(&mut out);
        assert_eq!(proto::LdapMessage::decode(&out).as_ref(), Ok(&msg));
    }
});
