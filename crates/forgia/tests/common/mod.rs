//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

pub mod golden;
pub mod second_order;
pub mod second_order_unary;
