//! Vector norms over axes (`norm`, p = 1, 2, ∞ or any `p > 0`, with PyTorch's subgradient at
//! 0), and the ops built on them: `cosine_similarity` and `normalize` (PyTorch's `eps`
//! semantics). Records are written in differentiable ops, so every order works.

use super::unary::constant_map;
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{check, fail, ErrorKind, Result};
use crate::tensor::layout::broadcast_shapes;
use crate::tensor::{Array, Axes, Axis, Shape};

/// `[v == 0]` as a constant.
fn is_zero(op: &'static str, t: &Tensor) -> Result<Tensor> {
    constant_map(op, t, |v| if v == 0.0 { 1.0 } else { 0.0 })
}

/// The sign of each element (0 at 0, NaN at NaN), as a constant.
fn sign(op: &'static str, t: &Tensor) -> Result<Tensor> {
    constant_map(op, t, |v| if v == 0.0 || v.is_nan() { v } else { v.signum() })
}

impl Tensor {
    /// The vector `p`-norm over `axes` (`torch.linalg.vector_norm`): `Σ|x|` for `p = 1`,
    /// `√Σx²` for `p = 2`, `max|x|` for `p = ∞`, `(Σ|x|ᵖ)^(1/p)` for any other `p > 0`.
    /// An empty list of axes reduces nothing; see [`Tensor::norm_all`] for the whole tensor.
    ///
    /// Backward, with PyTorch's subgradients:
    /// - `p = 1`: `gx = gy·sign(x)` (0 at 0);
    /// - `p = ∞`: `gx = gy·sign(x)·[|x| = y] / #{|x| = y}` (ties share the gradient evenly);
    /// - otherwise `gx = gy·sign(x)·|x|^(p-1) / y^(p-1)`, and 0 where `y = 0`
    ///   (for `p = 2`: `gx = gy·x / y`).
    ///
    /// # Errors
    /// Bad axes as [`Tensor::sum`]; `InvalidArgument` for `p` NaN or `<= 0`; `EmptyTensor` for
    /// `p = ∞` over an empty axis.
    pub fn norm(&self, p: f32, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        if p.is_nan() || p <= 0.0 {
            return fail(ErrorKind::InvalidArgument {
                op: "norm",
                arg: "p",
                reason: format!("{p} must be > 0 (1, 2, inf or any other positive order)"),
            });
        }
        if self.rank() == 0 {
            return self.reshape(&[1])?.norm(p, axes, false);
        }
        let axes = self.axes("norm", axes)?.to_vec();
        if p == 1.0 {
            return self.abs().sum(axes, keepdim);
        }
        let x = self.detach();
        let kept = if p.is_infinite() {
            if axes.iter().any(|&a| x.shape()[a] == 0) {
                return fail(ErrorKind::EmptyTensor { op: "norm", shape: x.shape().to_vec() });
            }
            axes.iter().try_fold(x.abs(), |m, &a| m.max(a, true))?
        } else if p == 2.0 {
            x.square().sum(axes.clone(), true)?.sqrt()
        } else {
            x.abs().pow_scalar(p).sum(axes.clone(), true)?.pow_scalar(1.0 / p)
        };
        let out_shape: Vec<usize> = if keepdim {
            kept.shape().to_vec()
        } else {
            (0..x.rank()).filter(|a| !axes.contains(a)).map(|a| x.shape()[a]).collect()
        };
        let out = kept.reshape(&out_shape)?;
        let (y, kept) = (kept.value(), Shape::from(kept.shape()));
        Ok(attach(out, &[self], || NormBackward { x: self.value(), y, kept, p, axes }))
    }

    /// The `p`-norm of every element, as a rank-0 tensor (see [`Tensor::norm`]).
    ///
    /// # Errors
    /// As [`Tensor::norm`].
    pub fn norm_all(&self, p: f32) -> Result<Tensor> {
        self.reshape(&[self.numel()])?.norm(p, 0, false)
    }

    /// Cosine similarity along `dim` (`torch.nn.functional.cosine_similarity`, default
    /// `dim = 1`, `eps = 1e-8`): `Σ (x1 / max(‖x1‖, eps)) · (x2 / max(‖x2‖, eps))` over `dim`,
    /// after broadcasting `x1` and `x2` together. As in PyTorch, each norm is clamped to `eps`
    /// in value only: the gradient flows through the clamp as if it were absent.
    ///
    /// Backward: through `norm`, `div`, `mul` and `sum` (differentiable to every order).
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast; bad `dim` as [`Tensor::sum`];
    /// `InvalidArgument` for a negative or non-finite `eps`.
    pub fn cosine_similarity(&self, other: &Tensor, dim: impl Into<Axis>, eps: f32) -> Result<Tensor> {
        const OP: &str = "cosine_similarity";
        check::non_negative(OP, "eps", eps)?;
        let shape = broadcast_shapes(OP, self.shape(), other.shape())?;
        let (a, b) = (self.broadcast_to(&shape)?, other.broadcast_to(&shape)?);
        let axis = a.axis(OP, dim)?;
        let clamped = |t: &Tensor| -> Result<Tensor> {
            let n = t.norm(2.0, axis, true)?;
            // max(n, eps) in value, identity in gradient (PyTorch clamps in place under no_grad).
            let lift = constant_map(OP, &n, |v| v.max(eps) - v)?;
            n.add(&lift)
        };
        a.div(&clamped(&a)?)?.mul(&b.div(&clamped(&b)?)?)?.sum(axis, false)
    }

    /// `x / max(‖x‖_p, eps)` with the norm over `dim` (`torch.nn.functional.normalize`,
    /// defaults `p = 2`, `dim = 1`, `eps = 1e-12`). Here the clamp is a real one: where the
    /// norm is below `eps` it is a constant.
    ///
    /// Backward: through `norm`, `clamp` and `div` (differentiable to every order).
    ///
    /// # Errors
    /// As [`Tensor::norm`]; `InvalidArgument` for a negative or non-finite `eps`.
    pub fn normalize(&self, p: f32, dim: impl Into<Axis>, eps: f32) -> Result<Tensor> {
        check::non_negative("normalize", "eps", eps)?;
        let n = self.norm(p, dim.into(), true)?.clamp(eps, f32::INFINITY)?;
        self.div(&n)
    }
}

struct NormBackward {
    x: Array,
    /// The norm with the reduced axes kept as size 1.
    y: Array,
    kept: Shape,
    p: f32,
    axes: Vec<usize>,
}

impl Backward for NormBackward {
    fn name(&self) -> &'static str {
        "norm"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        const OP: &str = "norm";
        let shape = self.x.shape();
        let gy = gy.reshape(&self.kept)?.broadcast_to(shape)?;
        let x = cx.input(0, &self.x);
        let gx = if self.p.is_infinite() {
            // sign(x)·[|x| = y or |x| is NaN] / count: a constant, so linear in gy.
            let xa = Tensor::from(self.x.clone()).abs();
            let y = Tensor::from(self.y.clone());
            let hit = is_zero(OP, &xa.sub(&y)?)?.maximum(&constant_map(OP, &xa, |v| f32::from(v.is_nan() as u8))?)?;
            let count = hit.sum(self.axes.clone(), true)?;
            gy.mul(&sign(OP, &Tensor::from(self.x.clone()))?.mul(&hit)?.div(&count)?)?
        } else {
            let y = cx.output(&self.y);
            let yd = Tensor::from(self.y.clone());
            // 0 where the norm is 0 (PyTorch's masked_fill), with a safe divisor there.
            let (zero, live) = (is_zero(OP, &yd)?, is_zero(OP, &yd)?.neg().add_scalar(1.0));
            let y_safe = y.add(&zero)?;
            let scaled = if self.p == 2.0 {
                x.div(&y_safe)?
            } else {
                let xd = Tensor::from(self.x.clone());
                let nonzero = is_zero(OP, &xd)?.neg().add_scalar(1.0);
                let num = x.abs().pow_scalar(self.p - 1.0).mul(&sign(OP, &xd)?)?.mul(&nonzero)?;
                num.div(&y_safe.pow_scalar(self.p - 1.0))?
            };
            gy.mul(&scaled.mul(&live)?)?
        };
        out.push(Some(gx));
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        4 * self.x.numel()
    }
}
