//! Adam with L2 weight decay (`torch.optim.Adam`) and AdamW with decoupled weight decay
//! (`torch.optim.AdamW`): one update rule, two decay placements.

use rayon::prelude::*;

use super::state::{apply, ParamState, SlotState};
use super::Optimizer;
use crate::autograd::Tensor;
use crate::error::{check, Result};
use crate::nn::Module;
use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};

/// Hyperparameters of [`Adam`] and [`AdamW`] (PyTorch's names).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConfig {
    /// Learning rate.
    pub lr: f32,
    /// Decay rates of the first and second moment estimates.
    pub betas: (f32, f32),
    /// Added to the denominator for stability.
    pub eps: f32,
    /// Weight decay: an L2 term added to the gradient for [`Adam`], a decoupled shrink of the
    /// parameter for [`AdamW`].
    pub weight_decay: f32,
}

impl AdamConfig {
    /// PyTorch's Adam defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay.
    pub fn adam() -> AdamConfig {
        AdamConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0 }
    }

    /// PyTorch's AdamW defaults: as [`AdamConfig::adam`] with weight decay 0.01.
    pub fn adamw() -> AdamConfig {
        AdamConfig { weight_decay: 0.01, ..AdamConfig::adam() }
    }
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig::adam()
    }
}

/// Adam, per element and per parameter step `t` (PyTorch's rule):
///
/// ```text
/// g = g + weight_decay · p                  (Adam only: L2)
/// p = p · (1 − lr · weight_decay)           (AdamW only: decoupled, before the update)
/// m = lerp(m, g, 1 − β1)
/// v = β2 · v + (1 − β2) · g²
/// p = p − (lr / (1 − β1ᵗ)) · m / (√v / √(1 − β2ᵗ) + eps)
/// ```
///
/// State per parameter: `exp_avg` (m), `exp_avg_sq` (v) and `step` (t).
pub struct Adam {
    config: AdamConfig,
    decoupled: bool,
    state: SlotState,
}

/// AdamW: [`Adam`] with decoupled weight decay (`torch.optim.AdamW`).
pub struct AdamW(Adam);

const SLOTS: &[&str] = &["exp_avg", "exp_avg_sq"];

impl Adam {
    /// Adam with L2 weight decay.
    ///
    /// # Errors
    /// `InvalidArgument` for a negative or non-finite `lr`, `eps` or `weight_decay`, or a beta
    /// outside `[0, 1)`.
    pub fn new(config: AdamConfig) -> Result<Adam> {
        Adam::build("Adam::new", config, false)
    }

    fn build(op: &'static str, config: AdamConfig, decoupled: bool) -> Result<Adam> {
        check::learning_rate(op, config.lr)?;
        check::non_negative(op, "eps", config.eps)?;
        check::non_negative(op, "weight_decay", config.weight_decay)?;
        check::decay_rate(op, "betas", config.betas.0)?;
        check::decay_rate(op, "betas", config.betas.1)?;
        Ok(Adam { config, decoupled, state: SlotState::new(SLOTS, true, config.lr) })
    }

    /// The hyperparameters (with the current learning rate).
    pub fn config(&self) -> AdamConfig {
        AdamConfig { lr: self.state.lr, ..self.config }
    }
}

impl AdamW {
    /// AdamW with decoupled weight decay.
    ///
    /// # Errors
    /// As [`Adam::new`].
    pub fn new(config: AdamConfig) -> Result<AdamW> {
        Ok(AdamW(Adam::build("AdamW::new", config, true)?))
    }

    /// The hyperparameters (with the current learning rate).
    pub fn config(&self) -> AdamConfig {
        self.0.config()
    }
}

/// PyTorch's CPU `lerp`: `a + w (b − a)` for `|w| < 0.5`, else `b − (b − a)(1 − w)`.
#[inline(always)]
fn lerp(a: f32, b: f32, w: f32) -> f32 {
    if w.abs() < 0.5 {
        a + w * (b - a)
    } else {
        b - (b - a) * (1.0 - w)
    }
}

fn adam_update(c: &AdamConfig, lr: f32, decoupled: bool, p: &mut [f32], g: &[f32], st: &mut ParamState) {
    let (b1, b2) = c.betas;
    if st.bufs[0].is_empty() {
        st.bufs = vec![vec![0.0; p.len()]; 2];
    }
    st.step += 1;
    // Scalars in f64 as PyTorch computes them (Python floats), then rounded once.
    let t = st.step as f64;
    let bc1 = 1.0 - (b1 as f64).powf(t);
    let bc2 = 1.0 - (b2 as f64).powf(t);
    let step_size = (lr as f64 / bc1) as f32;
    let bc2_sqrt = bc2.sqrt() as f32;
    let shrink = 1.0 - lr * c.weight_decay;
    let (m, v) = st.bufs.split_at_mut(1);
    let (m, v) = (&mut m[0][..p.len()], &mut v[0][..p.len()]);
    let g = &g[..p.len()];
    let run = |p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]| {
        // The branches are the same for every element; the loop vectorizes (8 lanes with AVX2).
        crate::kernels::simd::vectorized(
            #[inline(always)]
            || {
                for i in 0..p.len() {
                    let mut gi = g[i];
                    if decoupled {
                        p[i] *= shrink;
                    } else if c.weight_decay != 0.0 {
                        gi += c.weight_decay * p[i];
                    }
                    let mi = lerp(m[i], gi, 1.0 - b1);
                    let vi = v[i] * b2 + (1.0 - b2) * gi * gi;
                    m[i] = mi;
                    v[i] = vi;
                    p[i] -= step_size * (mi / (vi.sqrt() / bc2_sqrt + c.eps));
                }
            },
        )
    };
    // Each element is updated on its own, so a large parameter is split between the threads
    // with the same result (a linear layer's weight: 400k elements in the main job).
    if p.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            p.par_chunks_mut(CHUNK_ELEMENTS)
                .zip(m.par_chunks_mut(CHUNK_ELEMENTS))
                .zip(v.par_chunks_mut(CHUNK_ELEMENTS))
                .zip(g.par_chunks(CHUNK_ELEMENTS))
                .for_each(|(((p, m), v), g)| run(p, m, v, g))
        });
    } else {
        run(p, m, v, g);
    }
}

impl Optimizer for Adam {
    fn step(&mut self, model: &mut dyn Module) -> Result<()> {
        let (c, lr, decoupled) = (self.config, self.state.lr, self.decoupled);
        let op = if decoupled { "AdamW::step" } else { "Adam::step" };
        apply(op, model, &mut self.state, |p, g, st| adam_update(&c, lr, decoupled, p, g, st))
    }

    state_accessors!(state);
}

impl Optimizer for AdamW {
    fn step(&mut self, model: &mut dyn Module) -> Result<()> {
        self.0.step(model)
    }

    state_accessors!(0.state);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_parameter_split_between_threads_steps_as_it_does_on_one() {
        let n = PARALLEL_ELEMENTS + 12_345; // past the threshold, with a partial last chunk
        let c = AdamConfig { weight_decay: 0.01, ..AdamConfig::adam() };
        let g: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
        let run = |decoupled: bool| {
            let mut p: Vec<f32> = (0..n).map(|i| ((i * 104_729) % 997) as f32 / 997.0).collect();
            let mut st = ParamState { step: 0, shape: vec![n], bufs: vec![Vec::new(); 2] };
            for _ in 0..3 {
                adam_update(&c, 1e-2, decoupled, &mut p, &g, &mut st);
            }
            p
        };
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        for decoupled in [false, true] {
            let serial = parallel::serially(|| run(decoupled));
            assert_eq!(bits(run(decoupled)), bits(serial), "decoupled: {decoupled}");
        }
    }
}
