//! Elementwise losses built from differentiable ops (so every order of derivative works):
//! `mse_loss`, `huber_loss`, `binary_cross_entropy_with_logits`, `kl_div`. The few pointwise
//! functions they need (stable softplus, sigmoid, log, x·log x) are private unary rules here.

use super::loss::Reduction;
use super::unary::{constant_map, unary, UnaryRule};
use crate::autograd::Tensor;
use crate::error::{check, fail, ErrorKind, Result};

/// Applies a reduction to elementwise losses.
fn reduce(op: &'static str, t: Tensor, reduction: Reduction) -> Result<Tensor> {
    match reduction {
        Reduction::None => Ok(t),
        Reduction::Sum => Ok(t.sum_all()),
        Reduction::Mean if t.numel() == 0 => fail(ErrorKind::EmptyTensor { op, shape: t.shape().to_vec() }),
        Reduction::Mean => t.mean_all(),
        Reduction::BatchMean => match t.shape().first() {
            Some(&n) if n > 0 => Ok(t.sum_all().scale(1.0 / n as f32)),
            _ => fail(ErrorKind::EmptyTensor { op, shape: t.shape().to_vec() }),
        },
    }
}

/// Input and target must have the same shape.
fn same_shape(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.shape() != b.shape() {
        return fail(ErrorKind::ShapeMismatch { op, lhs: a.shape().to_vec(), rhs: b.shape().to_vec() });
    }
    Ok(())
}

/// Mean squared error `(input - target)²`, reduced.
///
/// Backward: `g_input = 2·(input - target)·gy` (and the negation for the target).
///
/// # Errors
/// `ShapeMismatch` when the shapes differ; `EmptyTensor` for a `Mean` of nothing.
pub fn mse_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    same_shape("mse_loss", input, target)?;
    let d = input.sub(target)?;
    reduce("mse_loss", d.mul(&d)?, reduction)
}

/// Huber loss with threshold `delta`: `0.5·d²` where `|d| < delta`, else
/// `delta·(|d| - 0.5·delta)`, with `d = input - target`.
///
/// Backward: `g_input = clamp(d, -delta, delta)·gy` (piecewise linear in `d`: built from
/// constant masks, so it is differentiable).
///
/// # Errors
/// `ShapeMismatch`; `InvalidArgument` for `delta <= 0`.
pub fn huber_loss(input: &Tensor, target: &Tensor, delta: f32, reduction: Reduction) -> Result<Tensor> {
    same_shape("huber_loss", input, target)?;
    // An infinite delta would make the masked linear part 0·∞ = NaN everywhere.
    check::positive("huber_loss", "delta", delta)?;
    let d = input.sub(target)?;
    let inside = constant_map("huber_loss", &d, |v| if v.abs() < delta { 1.0 } else { 0.0 })?;
    let outside_sign = constant_map("huber_loss", &d, |v| if v.abs() < delta { 0.0 } else { v.signum() })?;
    let quadratic = d.mul(&d)?.scale(0.5).mul(&inside)?;
    // delta·(|d| - delta/2) on the outside: |d| = d·sign(d), and the constant is masked too.
    let linear = d.mul(&outside_sign)?.sub(&outside_sign.mul(&outside_sign)?.scale(0.5 * delta))?.scale(delta);
    reduce("huber_loss", quadratic.add(&linear)?, reduction)
}

/// `softplus(x) - x·t` per element: binary cross-entropy of `sigmoid(logits)` against
/// probabilities `target`, computed stably from the logits.
///
/// Backward: `g_logits = (sigmoid(x) - t)·gy`, `g_target = -x·gy`.
///
/// # Errors
/// `ShapeMismatch`; `EmptyTensor` for a `Mean` of nothing.
pub fn binary_cross_entropy_with_logits(logits: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    same_shape("binary_cross_entropy_with_logits", logits, target)?;
    let l = logits.softplus().sub(&logits.mul(target)?)?;
    reduce("binary_cross_entropy_with_logits", l, reduction)
}

/// KL divergence with PyTorch's argument order: `input` holds log-probabilities, `target`
/// probabilities; pointwise `target·(log target - input)` (0 where `target == 0`).
///
/// Backward: `g_input = -target·gy`, `g_target = (log target + 1 - input)·gy`.
///
/// # Errors
/// `ShapeMismatch`; `EmptyTensor` for a `Mean` / `BatchMean` of nothing.
pub fn kl_div(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    same_shape("kl_div", input, target)?;
    // A term whose target is 0 contributes 0 whatever the input, -inf included (0·-inf would be
    // NaN): the input is read as 0 there, so neither the loss nor a gradient sees it.
    let nonzero = constant_map("kl_div", target, |t| if t != 0.0 { 1.0 } else { 0.0 })?;
    let zero = Tensor::zeros(&[])?;
    let seen = Tensor::where_(&nonzero, input, &zero)?;
    let l = unary(target, XLogX).sub(&target.mul(&seen)?)?;
    reduce("kl_div", l, reduction)
}

/// `x·ln x`, 0 at 0 (torch's `xlogy(x, x)`).
struct XLogX;
impl UnaryRule for XLogX {
    const NAME: &'static str = "xlogx";
    const USES_OUTPUT: bool = false;
    fn f(&self, x: f32) -> f32 {
        if x == 0.0 {
            0.0
        } else {
            x * x.ln()
        }
    }
    fn df(&self, x: f32) -> f32 {
        x.ln() + 1.0
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.log().add_scalar(1.0))
    }
}
