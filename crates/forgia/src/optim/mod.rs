//! Optimizers that update a [`Module`]'s parameters in place from their gradients: [`Sgd`]
//! (momentum, dampening, Nesterov, weight decay), [`Adam`] (L2 weight decay) and [`AdamW`]
//! (decoupled weight decay), all with PyTorch's exact update rules; gradient clipping
//! ([`clip_grad_norm`]); and pure learning-rate schedules in [`schedule`].
//!
//! Per-parameter state is keyed by the parameter's dotted name, so it can be saved as named
//! tensors ([`Optimizer::state`]) next to the model and loaded back
//! ([`Optimizer::load_state`]); see `forgia::io::save_checkpoint`.
//!
//! ```
//! use forgia::nn::{Linear, Module};
//! use forgia::optim::{Optimizer, Sgd, SgdConfig};
//! use forgia::{Rng, Tensor};
//! let mut model = Linear::new(3, 1, true, &mut Rng::new(0))?;
//! let mut opt = Sgd::new(SgdConfig { lr: 0.1, momentum: 0.9, ..SgdConfig::default() })?;
//! let x = Tensor::ones(&[4, 3])?;
//! for _ in 0..3 {
//!     opt.zero_grad(&model);
//!     let y = model.forward(&x)?;
//!     let loss = y.mul(&y)?.mean_all()?;
//!     loss.backward()?;
//!     opt.step(&mut model)?;
//! }
//! assert_eq!(opt.steps_taken(), 3);
//! # Ok::<(), forgia::Error>(())
//! ```

/// The [`Optimizer`] methods that only read or replace an optimizer's slot state (learning
/// rate, step count, per-parameter buffers), for an implementation whose `SlotState` sits at
/// the given field path (`state`, or `0.state` through a newtype).
macro_rules! state_accessors {
    ($($field:tt).+) => {
        fn lr(&self) -> f32 {
            self.$($field).+.lr
        }

        fn set_lr(&mut self, lr: f32) -> Result<()> {
            crate::error::check::learning_rate("Optimizer::set_lr", lr)?;
            self.$($field).+.lr = lr;
            Ok(())
        }

        fn steps_taken(&self) -> u64 {
            self.$($field).+.steps
        }

        fn state(&self) -> Vec<(String, Tensor)> {
            self.$($field).+.to_tensors()
        }

        fn load_state(&mut self, model: &dyn Module, state: &[(String, Tensor)]) -> Result<()> {
            self.$($field).+ = self.$($field).+.parse(model, state)?;
            Ok(())
        }
    };
}

mod adam;
mod clip;
pub mod schedule;
mod sgd;
mod state;

pub use adam::{Adam, AdamConfig, AdamW};
pub use clip::clip_grad_norm;
pub use sgd::{Sgd, SgdConfig};

use crate::autograd::Tensor;
use crate::error::Result;
use crate::nn::Module;

/// An optimizer: updates parameters from their accumulated gradients.
///
/// Parameters without a gradient are skipped (their state does not advance), as in PyTorch.
pub trait Optimizer {
    /// One update of every parameter that has a gradient. Checks everything first: on an
    /// error no parameter and no state has changed.
    ///
    /// # Errors
    /// `MutableDataRequiresNoGrad` when a parameter is an op result rather than a variable;
    /// `ShapeMismatch` when a parameter's shape no longer matches its saved state.
    fn step(&mut self, model: &mut dyn Module) -> Result<()>;

    /// Forgets every parameter's gradient (call before each backward).
    fn zero_grad(&self, model: &dyn Module) {
        model.zero_grad();
    }

    /// The current learning rate.
    fn lr(&self) -> f32;

    /// Sets the learning rate (a schedule calls this before each step).
    ///
    /// # Errors
    /// `InvalidArgument` (arg `lr`) for a negative or non-finite rate; the rate is unchanged.
    fn set_lr(&mut self, lr: f32) -> Result<()>;

    /// How many times [`Optimizer::step`] has run (restored by [`Optimizer::load_state`]).
    fn steps_taken(&self) -> u64;

    /// The state as named tensors: `"lr"`, `"step"`, and `"<param>.<slot>"` per parameter
    /// (`momentum_buffer` for SGD; `exp_avg`, `exp_avg_sq`, `step` for Adam), sorted by name.
    fn state(&self) -> Vec<(String, Tensor)>;

    /// Replaces the state (learning rate and step count included) with one saved by
    /// [`Optimizer::state`], checked against `model`'s parameter names and shapes. Validates
    /// everything before changing anything.
    ///
    /// # Errors
    /// `InvalidArgument` (arg `"state"`) naming the missing, unknown or mis-shaped entry, or
    /// (arg `"lr"`) for a saved learning rate that is negative or not finite.
    fn load_state(&mut self, model: &dyn Module, state: &[(String, Tensor)]) -> Result<()>;
}
