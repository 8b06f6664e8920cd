//! Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay, with
//! `torch.optim.SGD`'s exact update rule.

use rayon::prelude::*;

use super::state::{apply, SlotState};
use super::Optimizer;
use crate::autograd::Tensor;
use crate::error::{check, fail, ErrorKind, Result};
use crate::nn::Module;
use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};

/// Hyperparameters of [`Sgd`] (PyTorch's names and defaults, with `lr` 0.01).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdConfig {
    /// Learning rate.
    pub lr: f32,
    /// Momentum factor (0 disables the buffer).
    pub momentum: f32,
    /// Dampening of the gradient added to the momentum buffer.
    pub dampening: f32,
    /// Nesterov momentum (needs `momentum > 0` and `dampening == 0`).
    pub nesterov: bool,
    /// L2 penalty added to the gradient.
    pub weight_decay: f32,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig { lr: 0.01, momentum: 0.0, dampening: 0.0, nesterov: false, weight_decay: 0.0 }
    }
}

/// SGD, per element (PyTorch's rule):
///
/// ```text
/// d = g + weight_decay · p
/// if momentum ≠ 0:
///     buf = d                                    on the first step
///     buf = momentum · buf + (1 − dampening) · d  afterwards
///     d = d + momentum · buf   if nesterov, else   d = buf
/// p = p − lr · d
/// ```
pub struct Sgd {
    config: SgdConfig,
    state: SlotState,
}

impl Sgd {
    /// An SGD optimizer.
    ///
    /// # Errors
    /// `InvalidArgument` for a negative or non-finite `lr`, `momentum` or `weight_decay`, or
    /// Nesterov without momentum or with dampening.
    pub fn new(config: SgdConfig) -> Result<Sgd> {
        const OP: &str = "Sgd::new";
        check::learning_rate(OP, config.lr)?;
        check::non_negative(OP, "momentum", config.momentum)?;
        check::non_negative(OP, "dampening", config.dampening)?;
        check::non_negative(OP, "weight_decay", config.weight_decay)?;
        if config.nesterov && (config.momentum <= 0.0 || config.dampening != 0.0) {
            return fail(ErrorKind::InvalidArgument {
                op: "Sgd::new",
                arg: "nesterov",
                reason: "Nesterov momentum requires momentum > 0 and zero dampening".into(),
            });
        }
        let slots: &'static [&'static str] = if config.momentum != 0.0 { &["momentum_buffer"] } else { &[] };
        Ok(Sgd { config, state: SlotState::new(slots, false, config.lr) })
    }

    /// The hyperparameters (with the current learning rate).
    pub fn config(&self) -> SgdConfig {
        SgdConfig { lr: self.state.lr, ..self.config }
    }
}

impl Optimizer for Sgd {
    fn step(&mut self, model: &mut dyn Module) -> Result<()> {
        let c = self.config;
        let lr = self.state.lr;
        apply("Sgd::step", model, &mut self.state, |p, g, st| {
            if c.weight_decay == 0.0 && c.momentum == 0.0 {
                // Plain SGD: no need for a private copy of the gradient. Each element is
                // updated on its own, so a large parameter is split between the threads.
                let run = |p: &mut [f32], g: &[f32]| p.iter_mut().zip(g).for_each(|(p, g)| *p -= lr * g);
                if p.len() >= PARALLEL_ELEMENTS {
                    parallel::install(|| {
                        p.par_chunks_mut(CHUNK_ELEMENTS).zip(g.par_chunks(CHUNK_ELEMENTS)).for_each(|(p, g)| run(p, g))
                    });
                } else {
                    run(p, g);
                }
                return;
            }
            let mut d: Vec<f32> = g.to_vec();
            if c.weight_decay != 0.0 {
                d.iter_mut().zip(p.iter()).for_each(|(d, p)| *d += c.weight_decay * p);
            }
            if c.momentum != 0.0 {
                let buf = &mut st.bufs[0];
                if buf.is_empty() {
                    *buf = d.clone();
                } else {
                    buf.iter_mut().zip(&d).for_each(|(b, d)| *b = c.momentum * *b + (1.0 - c.dampening) * d);
                }
                if c.nesterov {
                    d.iter_mut().zip(buf.iter()).for_each(|(d, b)| *d += c.momentum * b);
                } else {
                    d.copy_from_slice(buf);
                }
            }
            p.iter_mut().zip(&d).for_each(|(p, d)| *p -= lr * d);
        })
    }

    state_accessors!(state);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::Linear;
    use crate::parallel::{self, PARALLEL_ELEMENTS};
    use crate::Rng;

    #[test]
    fn a_large_parameter_split_between_threads_steps_as_it_does_on_one() {
        // 600 × 500 weights: past the threshold, with a partial last chunk.
        const { assert!(600 * 500 > PARALLEL_ELEMENTS) };
        let run = || {
            let mut layer = Linear::new(500, 600, false, &mut Rng::new(3)).unwrap();
            let x = Tensor::randn(&[4, 500], 0.0, 1.0, &mut Rng::new(4)).unwrap();
            let mut sgd = Sgd::new(SgdConfig::default()).unwrap();
            for _ in 0..2 {
                layer.weight.zero_grad();
                layer.forward(&x).unwrap().square().sum_all().backward().unwrap();
                sgd.step(&mut layer).unwrap();
            }
            layer.weight.to_vec().into_iter().map(f32::to_bits).collect::<Vec<_>>()
        };
        let serial = parallel::serially(run);
        assert_eq!(run(), serial);
    }
}
