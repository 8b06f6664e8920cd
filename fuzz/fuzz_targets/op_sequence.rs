//! Bytes as a sequence of ops over small tensors (invalid axes and shapes included), then
//! forward and backward: must never panic (errors are fine).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    forgia_fuzz::op_sequence(data);
});
