//! See `fuzzing::log_recovery`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fuzzing::log_recovery(data));
