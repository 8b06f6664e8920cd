//! Learning-rate schedules for the training jobs: [`WarmupDecay`] (a linear warmup, then a
//! constant, linear or cosine decay to zero, as `transformers`' `get_*_schedule_with_warmup`)
//! and [`Scheduled`], an optimizer that sets its rate from a schedule before every step.

use forgia::nn::Module;
use forgia::optim::schedule::LrSchedule;
use forgia::optim::Optimizer;
use forgia::Tensor;

/// What the learning rate does after the warmup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Decay {
    /// Stays at the peak.
    Constant,
    /// Falls linearly to zero at the last step (sentence-transformers' `WarmupLinear`).
    Linear,
    /// Falls along half a cosine to zero at the last step.
    Cosine,
}

impl Decay {
    /// The name on the command line and in the job's header line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Decay::Constant => "constant",
            Decay::Linear => "linear",
            Decay::Cosine => "cosine",
        }
    }
}

/// `peak · (step + 1) / (warmup + 1)` for the first `warmup` steps, then `peak · f(t)` with
/// `t = (step − warmup) / (total − warmup)`: `f = 1` (constant), `1 − t` (linear) or
/// `(1 + cos πt) / 2` (cosine); zero from step `total` on. Unlike `transformers`' schedules the
/// first step does not run at rate 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct WarmupDecay {
    /// The rate at the end of the warmup.
    pub(crate) peak: f32,
    /// Steps of linear warmup.
    pub(crate) warmup: u64,
    /// Steps of the whole run (warmup included).
    pub(crate) total: u64,
    /// The shape after the warmup.
    pub(crate) decay: Decay,
}

impl LrSchedule for WarmupDecay {
    fn lr_at(&self, step: u64) -> f32 {
        if step < self.warmup {
            return self.peak * (step + 1) as f32 / (self.warmup + 1) as f32;
        }
        if self.decay == Decay::Constant {
            return self.peak;
        }
        if step >= self.total {
            return 0.0;
        }
        let t = (step - self.warmup) as f64 / (self.total - self.warmup) as f64;
        let f = match self.decay {
            Decay::Linear => 1.0 - t,
            _ => (1.0 + (std::f64::consts::PI * t).cos()) / 2.0,
        };
        (self.peak as f64 * f) as f32
    }
}

/// An optimizer whose learning rate follows `schedule`: before each step it sets the rate of
/// step [`Optimizer::steps_taken`], so a resumed run continues the same curve. `set_lr` changes
/// the rate until the next step only.
pub(crate) struct Scheduled<S> {
    inner: Box<dyn Optimizer>,
    schedule: S,
}

impl<S: LrSchedule> Scheduled<S> {
    /// `inner` driven by `schedule`; the rate is set to that of the first step to come.
    ///
    /// # Errors
    /// `InvalidArgument` when the schedule gives a negative or non-finite rate.
    pub(crate) fn new(mut inner: Box<dyn Optimizer>, schedule: S) -> forgia::Result<Scheduled<S>> {
        inner.set_lr(schedule.lr_at(inner.steps_taken()))?;
        Ok(Scheduled { inner, schedule })
    }
}

impl<S: LrSchedule> Optimizer for Scheduled<S> {
    fn step(&mut self, model: &mut dyn Module) -> forgia::Result<()> {
        self.inner.set_lr(self.schedule.lr_at(self.inner.steps_taken()))?;
        self.inner.step(model)
    }

    fn zero_grad(&self, model: &dyn Module) {
        self.inner.zero_grad(model);
    }

    fn lr(&self) -> f32 {
        self.inner.lr()
    }

    fn set_lr(&mut self, lr: f32) -> forgia::Result<()> {
        self.inner.set_lr(lr)
    }

    fn steps_taken(&self) -> u64 {
        self.inner.steps_taken()
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        self.inner.state()
    }

    fn load_state(&mut self, model: &dyn Module, state: &[(String, Tensor)]) -> forgia::Result<()> {
        self.inner.load_state(model, state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forgia::nn::Linear;
    use forgia::optim::{Sgd, SgdConfig};
    use forgia::Rng;

    #[test]
    fn the_rate_warms_up_linearly_then_decays_to_zero_at_the_last_step() {
        let s = |decay| WarmupDecay { peak: 1.0, warmup: 3, total: 13, decay };
        let linear = s(Decay::Linear);
        let warm: Vec<f32> = (0..4).map(|t| linear.lr_at(t)).collect();
        assert_eq!(warm, [0.25, 0.5, 0.75, 1.0]);
        assert!((linear.lr_at(8) - 0.5).abs() < 1e-6, "halfway through the decay");
        assert!((linear.lr_at(12) - 0.1).abs() < 1e-6, "the last step still moves");
        assert_eq!(linear.lr_at(13), 0.0);
        let cosine = s(Decay::Cosine);
        assert_eq!(cosine.lr_at(3), 1.0);
        assert!((cosine.lr_at(8) - 0.5).abs() < 1e-6);
        assert!(cosine.lr_at(12) > 0.0 && cosine.lr_at(12) < linear.lr_at(12));
        assert_eq!(cosine.lr_at(20), 0.0);
        let constant = s(Decay::Constant);
        assert_eq!((constant.lr_at(0), constant.lr_at(12), constant.lr_at(99)), (0.25, 1.0, 1.0));
        let none = WarmupDecay { peak: 2.0, warmup: 0, total: 4, decay: Decay::Linear };
        assert_eq!((0..5).map(|t| none.lr_at(t)).collect::<Vec<_>>(), [2.0, 1.5, 1.0, 0.5, 0.0]);
    }

    #[test]
    fn a_scheduled_optimizer_sets_each_steps_rate_before_stepping() {
        let mut model = Linear::new(2, 1, false, &mut Rng::new(0)).unwrap();
        let sgd = Sgd::new(SgdConfig { lr: 9.0, ..SgdConfig::default() }).unwrap();
        let schedule = WarmupDecay { peak: 0.1, warmup: 1, total: 3, decay: Decay::Linear };
        let mut opt = Scheduled::new(Box::new(sgd), schedule).unwrap();
        assert_eq!(opt.lr(), 0.05, "the first step's rate from the start");
        let x = Tensor::ones(&[1, 2]).unwrap();
        let mut rates = Vec::new();
        for _ in 0..3 {
            let before: Vec<f32> = model.weight.to_vec();
            opt.zero_grad(&model);
            model.forward(&x).unwrap().sum_all().backward().unwrap();
            opt.step(&mut model).unwrap();
            // d(sum(x·wᵀ))/dw = x = 1: each weight moves by exactly the rate.
            rates.push(before[0] - model.weight.to_vec()[0]);
        }
        let want = [0.05, 0.1, 0.05];
        assert!(rates.iter().zip(want).all(|(r, w)| (r - w).abs() < 1e-6), "{rates:?}");
        assert_eq!(opt.steps_taken(), 3);
    }
}
