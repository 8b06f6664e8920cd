//! Pieces the architectures share: head splitting, padding masks, position checks and the
//! visiting of numbered layers.

use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::nn::{visit_child, visit_child_mut, Module};
use crate::ops::index::Indices;

/// `[B, S, H·D]` → `[B, H, S, D]` (a view).
pub(crate) fn split_heads(x: &Tensor, heads: usize) -> Result<Tensor> {
    let s = x.shape();
    let (b, len, width) = (s[0], s[1], s[2]);
    x.reshape(&[b, len, heads, width / heads])?.transpose(1, 2)
}

/// `[B, H, S, D]` → `[B, S, H·D]`.
pub(crate) fn merge_heads(x: &Tensor) -> Result<Tensor> {
    let s = x.shape().to_vec();
    x.transpose(1, 2)?.reshape(&[s[0], s[2], s[1] * s[3]])
}

/// `[B, S]` ids, checked to be rank 2 and non-empty.
pub(crate) fn batch_len(op: &'static str, ids: &Indices) -> Result<(usize, usize)> {
    if ids.rank() != 2 || ids.is_empty() {
        return fail(ErrorKind::RankMismatch {
            op,
            expected: "non-empty ids [batch, seq]",
            shape: ids.shape().to_vec(),
        });
    }
    Ok((ids.shape()[0], ids.shape()[1]))
}

/// The additive key mask `[B, 1, 1, S]` of a `[B, S]` 0/1 attention mask: 0 where the mask is
/// 1, `f32::MIN` where it is 0 (as `transformers`, so a row with every key masked attends
/// uniformly, as there).
pub(crate) fn padding_mask(op: &'static str, mask: &Indices, shape: (usize, usize)) -> Result<Tensor> {
    if mask.shape() != [shape.0, shape.1] {
        return fail(ErrorKind::ShapeMismatch { op, lhs: vec![shape.0, shape.1], rhs: mask.shape().to_vec() });
    }
    if let Some(&bad) = mask.data().iter().find(|&&m| m != 0 && m != 1) {
        return fail(ErrorKind::InvalidArgument {
            op,
            arg: "attention_mask",
            reason: format!("value {bad} is not 0 or 1"),
        });
    }
    let add: Vec<f32> = mask.data().iter().map(|&m| if m == 1 { 0.0 } else { f32::MIN }).collect();
    Tensor::from_vec(add, &[shape.0, 1, 1, shape.1])
}

/// Position ids `0..len` for every row, after checking `len` against the table.
pub(crate) fn positions(op: &'static str, batch: usize, len: usize, max: usize) -> Result<Indices> {
    if len > max {
        return fail(ErrorKind::InvalidArgument {
            op,
            arg: "input_ids",
            reason: format!("sequence length {len} exceeds max_position_embeddings {max}"),
        });
    }
    let data = (0..batch).flat_map(|_| 0..len as i64).collect();
    Indices::new(data, &[batch, len])
}

/// Visits `layers[i]` under `prefix.i`.
pub(crate) fn visit_layers<M: Module>(prefix: &str, layers: &[M], f: &mut dyn FnMut(&str, &Tensor)) {
    for (i, l) in layers.iter().enumerate() {
        visit_child(&format!("{prefix}.{i}"), l, f);
    }
}

/// Mutable twin of [`visit_layers`].
pub(crate) fn visit_layers_mut<M: Module>(prefix: &str, layers: &mut [M], f: &mut dyn FnMut(&str, &mut Tensor)) {
    for (i, l) in layers.iter_mut().enumerate() {
        visit_child_mut(&format!("{prefix}.{i}"), l, f);
    }
}

/// The activations `transformers` names in `hidden_act`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `"gelu"`: exact (erf) GELU.
    Gelu,
    /// `"gelu_new"`, `"gelu_pytorch_tanh"`, `"gelu_fast"`: the tanh approximation.
    GeluTanh,
    /// `"relu"`.
    Relu,
    /// `"silu"` / `"swish"`.
    Silu,
}

impl Activation {
    /// The activation `transformers` means by `name`.
    ///
    /// # Errors
    /// `InvalidArgument` for a name not listed on the variants.
    pub fn from_name(name: &str) -> Result<Activation> {
        Ok(match name {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            "silu" | "swish" => Activation::Silu,
            other => {
                return fail(ErrorKind::InvalidArgument {
                    op: "Activation::from_name",
                    arg: "hidden_act",
                    reason: format!("unknown activation {other:?}"),
                })
            }
        })
    }

    /// Applies it.
    pub fn apply(self, x: &Tensor) -> Tensor {
        match self {
            Activation::Gelu => x.gelu(),
            Activation::GeluTanh => x.gelu_tanh(),
            Activation::Relu => x.relu(),
            Activation::Silu => x.silu(),
        }
    }
}

/// A `[rows, cols]` variable drawn from `N(0, std²)` (`transformers`' `initializer_range`).
pub(crate) fn normal(shape: &[usize], std: f32, rng: &mut crate::tensor::Rng) -> Result<Tensor> {
    Ok(Tensor::randn(shape, 0.0, std, rng)?.into_variable())
}

/// The causal language-model loss of `transformers`' `*ForCausalLM`: mean cross-entropy of
/// `logits[:, :-1]` against `labels[:, 1:]` (labels `-100` ignored).
///
/// # Errors
/// `ShapeMismatch` when `labels` is not `[B, S]` for `logits [B, S, V]`; `InvalidArgument`
/// for `S < 2`; as `cross_entropy` otherwise.
pub fn causal_lm_loss(logits: &Tensor, labels: &Indices) -> Result<Tensor> {
    const OP: &str = "causal_lm_loss";
    let sh = logits.shape();
    if sh.len() != 3 || labels.shape() != &sh[..2] {
        return fail(ErrorKind::ShapeMismatch { op: OP, lhs: sh.to_vec(), rhs: labels.shape().to_vec() });
    }
    let (b, s, v) = (sh[0], sh[1], sh[2]);
    if s < 2 {
        return fail(ErrorKind::InvalidArgument { op: OP, arg: "logits", reason: format!("sequence length {s} < 2") });
    }
    let x = logits.narrow(1, 0, s - 1)?.reshape(&[b * (s - 1), v])?;
    let shifted: Vec<i64> = labels.data().chunks(s).flat_map(|row| row[1..].iter().copied()).collect();
    let y = Indices::new(shifted, &[b * (s - 1)])?;
    crate::ops::loss::cross_entropy(&x, &y, Default::default())
}
