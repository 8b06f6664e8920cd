//! # forgia
//!
//! A CPU-first tensor and reverse-mode autograd library. The graph is implicit in the values:
//! every op result points at the record of the op that made it, which points at its operands'
//! nodes — no tape, no graph object, no central engine. `backward()` counts consumer edges,
//! fires each node exactly once when its atomic counter drains, and spreads heavy independent
//! branches over one bounded worker pool.
//!
//! ```
//! use forgia::Tensor;
//! let x = Tensor::variable(vec![3.0, 5.0], &[2])?;
//! let c = Tensor::from_vec(vec![2.0, 2.0], &[2])?; // a constant
//! let loss = x.mul(&c)?.tanh().sum_all();
//! loss.backward()?;
//! assert!(x.grad().is_some() && c.grad().is_none());
//! # Ok::<(), forgia::Error>(())
//! ```

pub mod autograd;
pub mod data;
mod error;
pub mod io;
pub(crate) mod kernels;
pub mod nn;
pub(crate) mod ops;
pub mod optim;
mod parallel;
pub mod tensor;

pub use autograd::gradcheck::{gradcheck, GradcheckOptions, GradcheckReport, Mismatch};
pub use autograd::{checkpoint, checkpoint_with, custom_op, elemental_binary, elemental_unary, CustomOp};
pub use autograd::{is_grad_enabled, no_grad, BackwardOptions, NoGradGuard};
pub use error::{Error, ErrorKind, Result};
pub use ops::attention::AttentionOptions;
pub use ops::conv::{Conv1dOptions, Conv2dOptions, ConvTranspose2dOptions};
pub use ops::index::Indices;
pub use ops::loss;
pub use ops::norm::RunningStats;
pub use parallel::{num_threads, set_num_threads};
pub use tensor::{
    buffer_cache_limit, cached_bytes, clear_buffer_cache, live_bytes, peak_bytes, reset_peak_bytes,
    set_buffer_cache_limit, Axes, Axis, Rng, Shape, Tensor, MAX_WORK,
};

/// The examples of the repository's `README.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
