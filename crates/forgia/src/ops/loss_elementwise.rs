//! Elementwise losses built from differentiable ops (so every order of derivative works):
//! `mse_loss`, `l1_loss`, `huber_loss`, `smooth_l1_loss`, `binary_cross_entropy` (on
//! probabilities, with its own record for PyTorch's clamped logs),
//! `binary_cross_entropy_with_logits`, `kl_div`, and the pair losses `cosine_embedding_loss`
//! and `margin_ranking_loss`. The few pointwise functions they need are private unary rules.

use super::loss::Reduction;
use super::unary::{constant_map, unary, UnaryRule};
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{check, fail, within, ErrorKind, Result};
use crate::tensor::layout::broadcast_shapes;
use crate::tensor::Array;

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
    within("mse_loss", || {
        same_shape("mse_loss", input, target)?;
        let d = input.sub(target)?;
        reduce("mse_loss", d.mul(&d)?, reduction)
    })
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
    within("huber_loss", || {
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
    })
}

/// `softplus(x) - x·t` per element: binary cross-entropy of `sigmoid(logits)` against
/// probabilities `target`, computed stably from the logits.
///
/// Backward: `g_logits = (sigmoid(x) - t)·gy`, `g_target = -x·gy`.
///
/// # Errors
/// `ShapeMismatch`; `EmptyTensor` for a `Mean` of nothing.
pub fn binary_cross_entropy_with_logits(logits: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    within("binary_cross_entropy_with_logits", || {
        same_shape("binary_cross_entropy_with_logits", logits, target)?;
        let l = logits.softplus().sub(&logits.mul(target)?)?;
        reduce("binary_cross_entropy_with_logits", l, reduction)
    })
}

/// KL divergence with PyTorch's argument order: `input` holds log-probabilities, `target`
/// probabilities; pointwise `target·(log target - input)` (0 where `target == 0`).
///
/// Backward: `g_input = -target·gy`, `g_target = (log target + 1 - input)·gy`.
///
/// # Errors
/// `ShapeMismatch`; `EmptyTensor` for a `Mean` / `BatchMean` of nothing.
pub fn kl_div(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    within("kl_div", || {
        same_shape("kl_div", input, target)?;
        // A term whose target is 0 contributes 0 whatever the input, -inf included (0·-inf would be
        // NaN): the input is read as 0 there, so neither the loss nor a gradient sees it.
        let nonzero = constant_map("kl_div", target, |t| if t != 0.0 { 1.0 } else { 0.0 })?;
        let zero = Tensor::zeros(&[])?;
        let seen = Tensor::where_(&nonzero, input, &zero)?;
        let l = unary(target, XLogX).sub(&target.mul(&seen)?)?;
        reduce("kl_div", l, reduction)
    })
}

/// Mean absolute error `|input - target|`, reduced.
///
/// Backward: `g_input = sign(input - target)·gy` (0 where they are equal, as PyTorch), and
/// the negation for the target.
///
/// # Errors
/// `ShapeMismatch` when the shapes differ; `EmptyTensor` for a `Mean` of nothing.
pub fn l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    within("l1_loss", || {
        same_shape("l1_loss", input, target)?;
        reduce("l1_loss", input.sub(target)?.abs(), reduction)
    })
}

/// Smooth L1 loss with threshold `beta` (`torch.nn.functional.smooth_l1_loss`): `0.5·d²/beta`
/// where `|d| < beta`, else `|d| - 0.5·beta`, with `d = input - target`; `beta = 0` is the L1
/// loss. It is [`huber_loss`] with `delta = beta`, divided by `beta`.
///
/// Backward: `g_input = clamp(d / beta, -1, 1)·gy` (`sign(d)·gy` for `beta = 0`).
///
/// # Errors
/// `ShapeMismatch`; `InvalidArgument` for a negative or non-finite `beta`.
pub fn smooth_l1_loss(input: &Tensor, target: &Tensor, beta: f32, reduction: Reduction) -> Result<Tensor> {
    within("smooth_l1_loss", || {
        same_shape("smooth_l1_loss", input, target)?;
        check::non_negative("smooth_l1_loss", "beta", beta)?;
        let l = if beta == 0.0 {
            input.sub(target)?.abs()
        } else {
            huber_loss(input, target, beta, Reduction::None)?.scale(1.0 / beta)
        };
        reduce("smooth_l1_loss", l, reduction)
    })
}

/// PyTorch clamps each log of [`binary_cross_entropy`] at this value, so a probability of
/// exactly 0 or 1 costs a finite amount.
const BCE_LOG_FLOOR: f32 = -100.0;
/// The floor of `p·(1 - p)` in the input gradient of [`binary_cross_entropy`] (PyTorch's).
const BCE_GRAD_EPS: f32 = 1e-12;

/// Binary cross-entropy of probabilities `input` against `target`
/// (`torch.nn.functional.binary_cross_entropy`):
/// `-w·(t·max(ln p, -100) + (1 - t)·max(ln(1 - p), -100))`, with an optional `weight` that
/// broadcasts to the input's shape.
///
/// Backward, as PyTorch: `g_input = w·(p - t) / max(p·(1 - p), 1e-12)·gy`,
/// `g_target = w·(max(ln(1 - p), -100) - max(ln p, -100))·gy`; both written in
/// differentiable ops.
///
/// # Errors
/// `ShapeMismatch` when the shapes differ or `weight` does not broadcast; `InvalidArgument`
/// when an input element is outside `[0, 1]` (NaN included); `EmptyTensor` for a `Mean` of
/// nothing.
pub fn binary_cross_entropy(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    within("binary_cross_entropy", || {
        const OP: &str = "binary_cross_entropy";
        same_shape(OP, input, target)?;
        if input.to_vec().iter().any(|p| !(0.0..=1.0).contains(p)) {
            let reason = "every element must be a probability in [0, 1]".into();
            return fail(ErrorKind::InvalidArgument { op: OP, arg: "input", reason });
        }
        let (p, t) = (input.detach(), target.detach());
        let l =
            clamped_log(&p)?.mul(&t)?.add(&clamped_log(&p.neg().add_scalar(1.0))?.mul(&t.neg().add_scalar(1.0))?)?;
        let mut l = attach(l.neg(), &[input, target], || BceBackward { p: input.value(), t: target.value() });
        if let Some(w) = weight {
            if broadcast_shapes(OP, input.shape(), w.shape())?.as_slice() != input.shape() {
                return fail(ErrorKind::ShapeMismatch { op: OP, lhs: input.shape().to_vec(), rhs: w.shape().to_vec() });
            }
            l = l.mul(w)?;
        }
        reduce(OP, l, reduction)
    })
}

/// `max(ln x, -100)`, differentiable.
fn clamped_log(x: &Tensor) -> Result<Tensor> {
    x.log().clamp(BCE_LOG_FLOOR, f32::INFINITY)
}

struct BceBackward {
    p: Array,
    t: Array,
}

impl Backward for BceBackward {
    fn name(&self) -> &'static str {
        "binary_cross_entropy"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let (p, t) = (cx.input(0, &self.p), cx.input(1, &self.t));
        let gp = if cx.needs_grad(0) {
            let denom = p.mul(&p.neg().add_scalar(1.0))?.clamp(BCE_GRAD_EPS, f32::INFINITY)?;
            Some(p.sub(&t)?.div(&denom)?.mul(gy)?)
        } else {
            None
        };
        let gt = if cx.needs_grad(1) {
            Some(clamped_log(&p.neg().add_scalar(1.0))?.sub(&clamped_log(&p)?)?.mul(gy)?)
        } else {
            None
        };
        out.push(gp);
        out.push(gt);
        Ok(())
    }
}

/// `[t == v]` as a constant.
fn equals(op: &'static str, t: &Tensor, v: f32) -> Result<Tensor> {
    constant_map(op, t, move |x| if x == v { 1.0 } else { 0.0 })
}

/// Cosine embedding loss (`torch.nn.functional.cosine_embedding_loss`): with
/// `cos = Σ x1·x2 / √((Σ x1² + 1e-12)(Σ x2² + 1e-12))` over the last axis of `[N, D]` inputs
/// (or the only axis of `[D]` inputs, with a rank-0 target), the loss is `1 - cos` where
/// `target = 1` and `max(0, cos - margin)` where `target = -1`.
///
/// Backward: through the differentiable ops above (the clamp passes the gradient where
/// `cos - margin >= 0`).
///
/// # Errors
/// `ShapeMismatch` when `x1` and `x2` differ, are not rank 1 or 2, or `target` is not `[N]`
/// (`[]`); `InvalidArgument` for a target element other than 1 or -1 (PyTorch silently
/// counts it as 0) or a non-finite `margin`; `EmptyTensor` for a `Mean` of nothing.
pub fn cosine_embedding_loss(
    x1: &Tensor,
    x2: &Tensor,
    target: &Tensor,
    margin: f32,
    reduction: Reduction,
) -> Result<Tensor> {
    within("cosine_embedding_loss", || {
        const OP: &str = "cosine_embedding_loss";
        same_shape(OP, x1, x2)?;
        check::finite(OP, "margin", margin)?;
        if !(1..=2).contains(&x1.rank()) || target.shape() != &x1.shape()[..x1.rank() - 1] {
            return fail(ErrorKind::ShapeMismatch { op: OP, lhs: x1.shape().to_vec(), rhs: target.shape().to_vec() });
        }
        if target.to_vec().iter().any(|&y| y != 1.0 && y != -1.0) {
            return fail(ErrorKind::InvalidArgument {
                op: OP,
                arg: "target",
                reason: "every element must be 1 or -1".into(),
            });
        }
        let d = x1.rank() - 1;
        let dot = x1.mul(x2)?.sum(d, false)?;
        let mag = |x: &Tensor| -> Result<Tensor> { Ok(x.square().sum(d, false)?.add_scalar(1e-12)) };
        let cos = dot.div(&mag(x1)?.mul(&mag(x2)?)?.sqrt())?;
        let similar = cos.neg().add_scalar(1.0).mul(&equals(OP, target, 1.0)?)?;
        let dissimilar = cos.sub_scalar(margin).clamp(0.0, f32::INFINITY)?.mul(&equals(OP, target, -1.0)?)?;
        reduce(OP, similar.add(&dissimilar)?, reduction)
    })
}

/// Margin ranking loss (`torch.nn.functional.margin_ranking_loss`):
/// `max(0, -target·(x1 - x2) + margin)`, the three broadcast together; `target` is 1 where
/// `x1` should rank higher and -1 where `x2` should.
///
/// Backward: `g_x1 = -target·gy` where the hinge is active (`>= 0`), else 0; `g_x2` the
/// negation. Built from differentiable ops.
///
/// # Errors
/// `ShapeMismatch` when the shapes do not broadcast; `InvalidArgument` for a non-finite
/// `margin`; `EmptyTensor` for a `Mean` of nothing.
pub fn margin_ranking_loss(
    x1: &Tensor,
    x2: &Tensor,
    target: &Tensor,
    margin: f32,
    reduction: Reduction,
) -> Result<Tensor> {
    within("margin_ranking_loss", || {
        const OP: &str = "margin_ranking_loss";
        check::finite(OP, "margin", margin)?;
        broadcast_shapes(OP, &broadcast_shapes(OP, x1.shape(), x2.shape())?, target.shape())?;
        let hinge = target.detach().neg().mul(&x1.sub(x2)?)?.add_scalar(margin);
        reduce(OP, hinge.clamp(0.0, f32::INFINITY)?, reduction)
    })
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
