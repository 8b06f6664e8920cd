//! The fuzz target bodies, shared by the cargo-fuzz binaries and by the stable-toolchain
//! replay test (`crates/forgia/tests/fuzz_replay.rs` includes `bodies.rs` directly).

#[path = "bodies.rs"]
mod bodies;

pub use bodies::{load_checkpoint, op_sequence};
