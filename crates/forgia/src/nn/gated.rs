//! The SwiGLU feed-forward block of Llama-style transformers:
//! `w2(silu(w1 x) · w3 x)`, three bias-free linear layers (Hugging Face's `gate_proj`,
//! `up_proj` and `down_proj`).

use super::{visit_child, visit_child_mut, Forward, Linear, Module};
use crate::autograd::Tensor;
use crate::error::Result;
use crate::tensor::Rng;

/// `w2(silu(w1 x) · w3 x)` (Llama's MLP). Parameters are named as in Hugging Face's
/// `LlamaMLP`: `gate_proj.weight` (`w1`, `[hidden, dim]`), `up_proj.weight` (`w3`,
/// `[hidden, dim]`) and `down_proj.weight` (`w2`, `[dim, hidden]`).
///
/// ```
/// use forgia::nn::{Forward, Module, SwiGluFeedForward};
/// use forgia::{Rng, Tensor};
/// let ffn = SwiGluFeedForward::new(8, 16, &mut Rng::new(0))?;
/// assert_eq!(ffn.forward(&Tensor::zeros(&[2, 3, 8])?)?.shape(), &[2, 3, 8]);
/// assert_eq!(ffn.num_parameters(), 3 * 8 * 16);
/// # Ok::<(), forgia::Error>(())
/// ```
pub struct SwiGluFeedForward {
    /// `w1`, whose output goes through SiLU.
    pub gate_proj: Linear,
    /// `w3`, the value multiplied by the gate.
    pub up_proj: Linear,
    /// `w2`, back to the model width.
    pub down_proj: Linear,
}

impl SwiGluFeedForward {
    /// A block from `dim` to `hidden` and back, each weight initialised as [`Linear::new`]
    /// (drawn in the order gate, up, down).
    ///
    /// # Errors
    /// `InvalidArgument` when `dim` or `hidden` is zero.
    pub fn new(dim: usize, hidden: usize, rng: &mut Rng) -> Result<SwiGluFeedForward> {
        Ok(SwiGluFeedForward {
            gate_proj: Linear::new(dim, hidden, false, rng)?,
            up_proj: Linear::new(dim, hidden, false, rng)?,
            down_proj: Linear::new(hidden, dim, false, rng)?,
        })
    }
}

impl Module for SwiGluFeedForward {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("gate_proj", &self.gate_proj, f);
        visit_child("up_proj", &self.up_proj, f);
        visit_child("down_proj", &self.down_proj, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("gate_proj", &mut self.gate_proj, f);
        visit_child_mut("up_proj", &mut self.up_proj, f);
        visit_child_mut("down_proj", &mut self.down_proj, f);
    }
}

impl Forward for SwiGluFeedForward {
    /// `x [..., dim]` to `[..., dim]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gate = self.gate_proj.forward(x)?;
        let up = self.up_proj.forward(x)?;
        self.down_proj.forward(&up.swiglu_with(&gate)?)
    }
}
