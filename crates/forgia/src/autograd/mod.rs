//! Reverse-mode differentiation with the graph implicit in the values: each op result points
//! at a node holding its backward record and its operands' nodes. See `README.md` beside this
//! file for the design and every memory ordering.

mod api;
mod engine;
pub mod gradcheck;
mod mode;
mod node;

pub use engine::BackwardOptions;
pub(crate) use mode::set_grad_enabled;
pub use mode::{is_grad_enabled, no_grad, NoGradGuard};
pub(crate) use node::{attach, Backward, Grads, Node, VjpCtx};
#[cfg(test)]
mod faults_tests;
#[cfg(test)]
mod tests;
