//! [`Dropout`]: seeded inverted dropout with a fresh mask on every call in training mode.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Forward, Module};
use crate::autograd::Tensor;
use crate::error::{check, Result};
use crate::tensor::mix64;

/// Inverted dropout (`nn.Dropout`): in training mode each element is zeroed with probability
/// `p` and the rest are scaled by `1/(1-p)`; in evaluation mode it is the identity.
///
/// **Seeds.** The layer holds a seed and a call counter. Call `n` (0-based, counted from
/// construction, training-mode calls only) draws its mask with the seed
/// `mix64(seed ^ mix64(n))` (see [`Dropout::seed_of_call`]), so masks differ from call to
/// call yet a run is reproducible from the module seed alone.
///
/// **Checkpointing.** A checkpointed block is run again during backward, which would advance
/// the counter and draw another mask. Inside a block, take the seed outside with
/// [`Dropout::next_seed`] and apply it with [`Dropout::forward_with_seed`] inside.
///
/// ```
/// use forgia::nn::{Dropout, Forward, Module};
/// use forgia::Tensor;
/// let mut drop = Dropout::new(0.5, 7)?;
/// let x = Tensor::ones(&[1000])?;
/// let (a, b) = (drop.forward(&x)?.to_vec(), drop.forward(&x)?.to_vec());
/// assert_ne!(a, b); // a fresh mask per call
/// assert!(a.iter().all(|&v| v == 0.0 || v == 2.0));
/// drop.set_training(false);
/// assert_eq!(drop.forward(&x)?.to_vec(), x.to_vec());
/// # Ok::<(), forgia::Error>(())
/// ```
pub struct Dropout {
    p: f32,
    seed: u64,
    calls: AtomicU64,
    training: bool,
}

impl Dropout {
    /// Dropout with probability `p`, in training mode, masks derived from `seed`.
    ///
    /// # Errors
    /// `InvalidArgument` when `p` is outside `[0, 1]`.
    pub fn new(p: f32, seed: u64) -> Result<Dropout> {
        check::unit_interval("Dropout::new", "p", p)?;
        Ok(Dropout { p, seed, calls: AtomicU64::new(0), training: true })
    }

    /// The drop probability.
    pub fn p(&self) -> f32 {
        self.p
    }

    /// True in training mode.
    pub fn is_training(&self) -> bool {
        self.training
    }

    /// The mask seed of training call `n`: `mix64(seed ^ mix64(n))`.
    pub fn seed_of_call(&self, n: u64) -> u64 {
        mix64(self.seed ^ mix64(n))
    }

    /// Takes the mask seed of the next call and advances the counter.
    pub fn next_seed(&self) -> u64 {
        // Relaxed: the counter only hands out distinct numbers; nothing is published with it.
        self.seed_of_call(self.calls.fetch_add(1, Ordering::Relaxed))
    }

    /// The number of training-mode calls so far (masks drawn).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Sets the call counter, e.g. to continue a resumed run's mask sequence.
    pub fn set_calls(&self, calls: u64) {
        self.calls.store(calls, Ordering::Relaxed);
    }

    /// Applies dropout with an explicit mask `seed` (the identity in evaluation mode); does not
    /// touch the counter. Pure: the same seed always gives the same mask.
    ///
    /// # Errors
    /// As [`Tensor::dropout`].
    pub fn forward_with_seed(&self, x: &Tensor, seed: u64) -> Result<Tensor> {
        x.dropout(self.p, seed, self.training)
    }

    /// Applies dropout with the next call's seed in training mode; the identity otherwise
    /// (without advancing the counter).
    ///
    /// # Errors
    /// As [`Tensor::dropout`].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if !self.training || self.p == 0.0 {
            return Ok(x.clone());
        }
        self.forward_with_seed(x, self.next_seed())
    }
}

impl Module for Dropout {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

impl Forward for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Dropout::forward(self, x)
    }
}
