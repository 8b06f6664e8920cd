//! [`TransformerBlock`]: a pre-norm transformer block
//! `h = x + attn(ln1(x)); out = h + mlp(ln2(h))`, with `mlp = fc2(gelu(fc1(·)))`, and its
//! feed-forward part [`FeedForward`].

use super::attention::{affine, attention, check_heads};
use super::{visit_child, visit_child_mut, Forward, LayerNorm, Linear, Module, MultiHeadAttention};
use crate::autograd::checkpoint_with;
use crate::autograd::Tensor;
use crate::error::{fail, within, ErrorKind, Result};
use crate::tensor::Rng;

/// The position-wise feed-forward network `fc2(gelu(fc1(x)))` (exact, erf-based GELU).
/// Parameters `fc1.weight`, `fc1.bias`, `fc2.weight`, `fc2.bias`.
pub struct FeedForward {
    /// `d_model → d_ff`.
    pub fc1: Linear,
    /// `d_ff → d_model`.
    pub fc2: Linear,
}

impl FeedForward {
    /// A network `d_model → d_ff → d_model` with [`Linear::new`] initialization (fc1 first).
    ///
    /// # Errors
    /// `InvalidArgument` for a zero width.
    pub fn new(d_model: usize, d_ff: usize, rng: &mut Rng) -> Result<FeedForward> {
        within("FeedForward::new", || {
            let fc1 = Linear::new(d_model, d_ff, true, rng)?;
            let fc2 = Linear::new(d_ff, d_model, true, rng)?;
            Ok(FeedForward { fc1, fc2 })
        })
    }

    /// `fc2(gelu(fc1(x)))`.
    ///
    /// # Errors
    /// As [`Linear::forward`].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(x)?.gelu())
    }
}

impl Module for FeedForward {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("fc1", &self.fc1, f);
        visit_child("fc2", &self.fc2, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("fc1", &mut self.fc1, f);
        visit_child_mut("fc2", &mut self.fc2, f);
    }
}

impl Forward for FeedForward {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        FeedForward::forward(self, x)
    }
}

/// A pre-norm transformer block over `x [B, S, D]`:
///
/// ```text
/// h   = x + attn(ln1(x))
/// out = h + mlp(ln2(h)),   mlp = fc2(gelu(fc1(·))),   fc1: D → 4D, fc2: 4D → D
/// ```
///
/// Parameter names: `ln1.weight`, `ln1.bias`, `attn.{q,k,v,o}.{weight,bias}`, `ln2.weight`,
/// `ln2.bias`, `mlp.fc1.*`, `mlp.fc2.*` (in that order). LayerNorm eps is 1e-5.
///
/// ```
/// use forgia::nn::{Forward, Module, TransformerBlock};
/// use forgia::{Rng, Tensor};
/// let block = TransformerBlock::new(8, 2, true, &mut Rng::new(0))?;
/// let x = Tensor::randn(&[2, 5, 8], 0.0, 1.0, &mut Rng::new(1))?;
/// let plain = block.forward(&x)?;
/// let saved = block.forward_checkpointed(&x)?; // recomputed in backward, same values
/// assert_eq!(plain.to_vec(), saved.to_vec());
/// # Ok::<(), forgia::Error>(())
/// ```
pub struct TransformerBlock {
    /// Norm before attention.
    pub ln1: LayerNorm,
    /// Self-attention.
    pub attn: MultiHeadAttention,
    /// Norm before the feed-forward network.
    pub ln2: LayerNorm,
    /// The feed-forward network.
    pub mlp: FeedForward,
}

/// What the pure block function needs besides the parameters.
#[derive(Clone, Copy)]
struct BlockShape {
    heads: usize,
    causal: bool,
    eps1: f32,
    eps2: f32,
}

impl TransformerBlock {
    /// A block of width `d_model` with `heads` heads and a `4·d_model` feed-forward layer.
    /// Norms start at weight 1, bias 0; the linear layers are drawn from `rng` in the order
    /// q, k, v, o, fc1, fc2.
    ///
    /// # Errors
    /// `InvalidArgument` when `heads` is zero or does not divide `d_model`.
    pub fn new(d_model: usize, heads: usize, causal: bool, rng: &mut Rng) -> Result<TransformerBlock> {
        check_heads("TransformerBlock::new", d_model, heads)?;
        Ok(TransformerBlock {
            ln1: LayerNorm::new(&[d_model], 1e-5)?,
            attn: MultiHeadAttention::new(d_model, heads, causal, rng)?,
            ln2: LayerNorm::new(&[d_model], 1e-5)?,
            mlp: FeedForward::new(d_model, 4 * d_model, rng)?,
        })
    }

    /// A block whose attention has `kv_heads` key/value heads for its `heads` query heads
    /// (grouped-query attention, [`MultiHeadAttention::with_kv_heads`]); otherwise as
    /// [`TransformerBlock::new`].
    ///
    /// # Errors
    /// `InvalidArgument` when `heads` is zero or does not divide `d_model`, or `kv_heads` is
    /// zero or does not divide `heads`.
    pub fn with_kv_heads(
        d_model: usize,
        heads: usize,
        kv_heads: usize,
        causal: bool,
        rng: &mut Rng,
    ) -> Result<TransformerBlock> {
        check_heads("TransformerBlock::with_kv_heads", d_model, heads)?;
        Ok(TransformerBlock {
            ln1: LayerNorm::new(&[d_model], 1e-5)?,
            attn: MultiHeadAttention::with_kv_heads(d_model, heads, kv_heads, causal, rng)?,
            ln2: LayerNorm::new(&[d_model], 1e-5)?,
            mlp: FeedForward::new(d_model, 4 * d_model, rng)?,
        })
    }

    fn shape(&self) -> BlockShape {
        BlockShape { heads: self.attn.heads, causal: self.attn.causal, eps1: self.ln1.eps, eps2: self.ln2.eps }
    }

    fn params(&self) -> Vec<Tensor> {
        self.named_parameters().into_iter().map(|(_, t)| t).collect()
    }

    /// The block applied to `x [B, S, D]`.
    ///
    /// # Errors
    /// `RankMismatch` / `ShapeMismatch` for an input that is not `[B, S, D]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        within("TransformerBlock", || block(&self.shape(), x, &self.params()))
    }

    /// The same function under activation checkpointing ([`crate::checkpoint_with`]): only
    /// `x`, the parameters and the output are kept; the block's intermediates are recomputed
    /// during backward. Values and gradients are bitwise identical to [`Self::forward`].
    ///
    /// # Errors
    /// As [`Self::forward`].
    pub fn forward_checkpointed(&self, x: &Tensor) -> Result<Tensor> {
        let params = self.params();
        let mut inputs: Vec<&Tensor> = vec![x];
        inputs.extend(params.iter());
        checkpoint_with(|shape: &BlockShape, xs: &[Tensor]| block(shape, &xs[0], &xs[1..]), self.shape(), &inputs)
    }
}

/// The block math over explicit parameters in visit order (16 tensors).
fn block(shape: &BlockShape, x: &Tensor, p: &[Tensor]) -> Result<Tensor> {
    if p.len() != 16 {
        return fail(ErrorKind::InvalidArgument {
            op: "TransformerBlock",
            arg: "parameters",
            reason: format!("expected 16 parameter tensors (all with bias), got {}", p.len()),
        });
    }
    let d = p[0].shape();
    let a = attention(&x.layer_norm(d, Some(&p[0]), Some(&p[1]), shape.eps1)?, &p[2..10], shape.heads, shape.causal)?;
    let h = x.add(&a)?;
    let n2 = h.layer_norm(d, Some(&p[10]), Some(&p[11]), shape.eps2)?;
    let m = affine(&affine(&n2, &p[12], &p[13])?.gelu(), &p[14], &p[15])?;
    h.add(&m)
}

impl Module for TransformerBlock {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("ln1", &self.ln1, f);
        visit_child("attn", &self.attn, f);
        visit_child("ln2", &self.ln2, f);
        visit_child("mlp", &self.mlp, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("ln1", &mut self.ln1, f);
        visit_child_mut("attn", &mut self.attn, f);
        visit_child_mut("ln2", &mut self.ln2, f);
        visit_child_mut("mlp", &mut self.mlp, f);
    }
}

impl Forward for TransformerBlock {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        TransformerBlock::forward(self, x)
    }
}
