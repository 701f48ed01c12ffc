//! See `fuzzing::control_values`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fuzzing::control_values(data));
