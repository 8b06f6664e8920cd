//! Shared helpers of the integration tests.
#![allow(unreachable_pub)]
pub mod golden;
