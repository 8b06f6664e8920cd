//! Arbitrary bytes as a `.safetensors` file: `forgia::io::load` and `load_into` must never
//! panic (errors are fine).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    forgia_fuzz::load_checkpoint(data);
});
