//! See `fuzzing::decode_message`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fuzzing::decode_message(data));
