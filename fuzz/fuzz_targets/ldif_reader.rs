//! See `fuzzing::ldif_reader`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fuzzing::ldif_reader(data));
