//! See `fuzzing::parse_filter`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fuzzing::parse_filter(data));
