//! Reverse-mode differentiation with the graph implicit in the values: each op result points
//! at a node holding its backward record and its operands' nodes. See `README.md` beside this
//! file for the design and every memory ordering.

mod api;
mod capture;
mod checkpoint;
mod custom;
mod engine;
pub mod gradcheck;
mod hooks;
mod mode;
mod node;
mod reduce_to;
mod tensor;

pub use capture::grad;
use checkpoint::note_reading_op;
pub use checkpoint::{checkpoint, checkpoint_with};
pub(crate) use checkpoint::{note_product, skip_final_product};
pub use custom::{custom_op, CustomOp};
pub use engine::BackwardOptions;
pub use hooks::HookHandle;
pub use mode::{enable_grad, is_grad_enabled, no_grad, GradModeGuard, NoGradGuard};
pub(crate) use node::{attach, attach_saving_output, empty_slots, Backward, Grads, VjpCtx};
pub use tensor::Tensor;
#[cfg(test)]
mod faults_tests;
#[cfg(test)]
mod tests;

/// The worked examples of `docs/EXTENDING.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../../docs/EXTENDING.md")]
pub struct ExtendingGuide;
