//! Learning-rate schedules as pure functions of the step: [`StepLr`], [`CosineAnnealing`],
//! [`LinearWarmup`] (wraps any schedule: warmup, then the inner schedule from its step 0) and
//! [`Constant`].
//!
//! A schedule holds no mutable state, so resuming from a checkpoint needs only the step count
//! (`Optimizer::steps_taken`).
//!
//! ```
//! use forgia::optim::schedule::{CosineAnnealing, LinearWarmup, LrSchedule};
//! let s = LinearWarmup::new(10, 0.0, CosineAnnealing::new(1.0, 0.0, 100)?)?;
//! assert_eq!(s.lr_at(0), 0.0);
//! assert_eq!(s.lr_at(5), 0.5);
//! assert_eq!(s.lr_at(10), 1.0); // cosine step 0
//! assert!(s.lr_at(110).abs() < 1e-6); // cosine step 100: the minimum
//! # Ok::<(), forgia::Error>(())
//! ```

use crate::error::{check, Result};

/// A learning rate as a function of the optimizer step (0 for the first step).
pub trait LrSchedule {
    /// The learning rate to use for step `step`.
    fn lr_at(&self, step: u64) -> f32;
}

/// A fixed learning rate (a NaN or negative one is refused by `Optimizer::set_lr`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Constant(pub f32);

impl LrSchedule for Constant {
    fn lr_at(&self, _step: u64) -> f32 {
        self.0
    }
}

/// `base · gamma^⌊step / step_size⌋` (`torch.optim.lr_scheduler.StepLR`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepLr {
    base_lr: f32,
    step_size: u64,
    gamma: f32,
}

impl StepLr {
    /// Decays by `gamma` every `step_size` steps.
    ///
    /// # Errors
    /// `InvalidArgument` when `step_size` is zero, `base_lr` is not a learning rate (finite,
    /// `>= 0`) or `gamma` is negative or not finite.
    pub fn new(base_lr: f32, step_size: u64, gamma: f32) -> Result<StepLr> {
        const OP: &str = "StepLr::new";
        check::learning_rate(OP, base_lr)?;
        check::positive_count(OP, "step_size", step_size)?;
        check::non_negative(OP, "gamma", gamma)?;
        Ok(StepLr { base_lr, step_size, gamma })
    }
}

impl LrSchedule for StepLr {
    fn lr_at(&self, step: u64) -> f32 {
        let k = (step / self.step_size).min(i32::MAX as u64) as i32;
        self.base_lr * self.gamma.powi(k)
    }
}

/// `min + (base − min) · (1 + cos(π · step / total)) / 2`, then `min` after `total` steps
/// (`CosineAnnealingLR` without restarts).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineAnnealing {
    base_lr: f32,
    min_lr: f32,
    total_steps: u64,
}

impl CosineAnnealing {
    /// Anneals from `base_lr` to `min_lr` over `total_steps`.
    ///
    /// # Errors
    /// `InvalidArgument` when `total_steps` is zero or a rate is negative or not finite.
    pub fn new(base_lr: f32, min_lr: f32, total_steps: u64) -> Result<CosineAnnealing> {
        const OP: &str = "CosineAnnealing::new";
        check::learning_rate(OP, base_lr)?;
        check::non_negative(OP, "min_lr", min_lr)?;
        check::positive_count(OP, "total_steps", total_steps)?;
        Ok(CosineAnnealing { base_lr, min_lr, total_steps })
    }
}

impl LrSchedule for CosineAnnealing {
    fn lr_at(&self, step: u64) -> f32 {
        let t = step.min(self.total_steps) as f64 / self.total_steps as f64;
        let cos = (1.0 + (std::f64::consts::PI * t).cos()) / 2.0;
        (self.min_lr as f64 + (self.base_lr - self.min_lr) as f64 * cos) as f32
    }
}

/// A linear warmup over `warmup_steps`, then `inner` (started at its own step 0).
///
/// During warmup the rate is `inner.lr_at(0) · (start + (1 − start) · step / warmup_steps)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearWarmup<S> {
    warmup_steps: u64,
    start_factor: f32,
    inner: S,
}

impl<S: LrSchedule> LinearWarmup<S> {
    /// Warms up from `start_factor · inner.lr_at(0)` to `inner.lr_at(0)`.
    ///
    /// # Errors
    /// `InvalidArgument` when `start_factor` is outside `[0, 1]`.
    pub fn new(warmup_steps: u64, start_factor: f32, inner: S) -> Result<LinearWarmup<S>> {
        check::unit_interval("LinearWarmup::new", "start_factor", start_factor)?;
        Ok(LinearWarmup { warmup_steps, start_factor, inner })
    }
}

impl<S: LrSchedule> LrSchedule for LinearWarmup<S> {
    fn lr_at(&self, step: u64) -> f32 {
        if step >= self.warmup_steps {
            return self.inner.lr_at(step - self.warmup_steps);
        }
        let frac = step as f32 / self.warmup_steps as f32;
        self.inner.lr_at(0) * (self.start_factor + (1.0 - self.start_factor) * frac)
    }
}
