//! Any string: the RFC 4515 parser never panics and its output survives Display and the wire.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|s: &str| {
    if let Ok(f) = proto::Filter::parse(s) {
        assert_eq!(proto::Filter::parse(&f.to_string()).as_ref(), Ok(&f));
        let mut wire = Vec::new();
        f.encode(&mut wire);
        assert_eq!(proto::Filter::decode(&wire, &proto::DecodeLimits::default()).as_ref(), Ok(&f));
    }
});
