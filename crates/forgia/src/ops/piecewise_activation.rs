//! Piecewise activations (PyTorch semantics): Hardsigmoid and Hardswish as `UnaryRule`s, and
//! PReLU, whose learnable slope makes it a composite of differentiable ops.

use super::unary::{constant_map, unary, UnaryRule};
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};

#[derive(Clone, Copy)]
struct Hardsigmoid;
impl UnaryRule for Hardsigmoid {
    const NAME: &'static str = "hardsigmoid";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        if x <= -3.0 {
            0.0
        } else if x >= 3.0 {
            1.0
        } else {
            x / 6.0 + 0.5
        }
    }
    /// PyTorch's `hardsigmoid_backward`: `1/6` strictly inside `(-3, 3)`, else 0.
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        if x > -3.0 && x < 3.0 {
            1.0 / 6.0
        } else {
            0.0
        }
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        constant_map(Self::NAME, x, |v| self.df(v))
    }
}

#[derive(Clone, Copy)]
struct Hardswish;
impl UnaryRule for Hardswish {
    const NAME: &'static str = "hardswish";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        if x <= -3.0 {
            0.0
        } else if x >= 3.0 {
            x
        } else {
            x * (x + 3.0) / 6.0
        }
    }
    /// PyTorch's `hardswish_backward`: 0 up to -3, `x/3 + 1/2` strictly inside `(-3, 3)`,
    /// 1 from 3 on (so 0 at -3 and 1 at 3, as torch 2.15 gives).
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        if x <= -3.0 {
            0.0
        } else if x < 3.0 {
            x / 3.0 + 0.5
        } else {
            1.0
        }
    }
    /// `m·(x/3 + 1/2) + u` with the constant masks `m = [-3 < x < 3]`, `u = [x >= 3]`.
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        let inside = constant_map(Self::NAME, x, |v| if v > -3.0 && v < 3.0 { 1.0 } else { 0.0 })?;
        let above = constant_map(Self::NAME, x, |v| if v >= 3.0 { 1.0 } else { 0.0 })?;
        x.scale(1.0 / 3.0).add_scalar(0.5).mul(&inside)?.add(&above)
    }
}

impl Tensor {
    /// Hardsigmoid: `relu6(x + 3) / 6` (`torch.nn.functional.hardsigmoid`).
    ///
    /// Backward: `gx = gy / 6` for `-3 < x < 3`, else 0.
    pub fn hardsigmoid(&self) -> Tensor {
        unary(self, Hardsigmoid)
    }

    /// Hardswish: `x·relu6(x + 3) / 6` (`torch.nn.functional.hardswish`).
    ///
    /// Backward: `gx = 0` for `x <= -3`, `gy·(x/3 + 1/2)` for `-3 < x < 3`, `gy` for `x >= 3`.
    pub fn hardswish(&self) -> Tensor {
        unary(self, Hardswish)
    }

    /// PReLU: `x` for `x > 0`, else `weight·x`, with one learnable slope per channel (axis 1)
    /// or a single shared one (`torch.nn.functional.prelu`). `weight` has 1 element or
    /// `x.shape[1]` elements; a rank-0 or rank-1 `x` has no channel axis and takes one slope.
    ///
    /// Backward: `gx = gy` where `x > 0`, else `gy·weight`;
    /// `g_weight = Σ gy·x` over the elements with `x <= 0` of each channel. Built from
    /// differentiable ops with a constant mask, so every order works.
    ///
    /// # Errors
    /// `ShapeMismatch` when `weight` is neither one element nor one per channel.
    pub fn prelu(&self, weight: &Tensor) -> Result<Tensor> {
        let channels = if self.rank() >= 2 { self.shape()[1] } else { 1 };
        let n = weight.numel();
        if weight.rank() > 1 || (n != 1 && n != channels) {
            return fail(ErrorKind::ShapeMismatch {
                op: "prelu",
                lhs: self.shape().to_vec(),
                rhs: weight.shape().to_vec(),
            });
        }
        let mut wshape = vec![1; self.rank().max(1)];
        if self.rank() >= 2 {
            wshape[1] = n;
        }
        let w = weight.reshape(&wshape)?;
        let w = if self.rank() == 0 { w.reshape(&[])? } else { w };
        let pos = constant_map("prelu", self, |v| if v > 0.0 { 1.0 } else { 0.0 })?;
        // x·(m + w·(1 - m)): the slope only sees the non-positive side.
        let slope = w.mul(&pos.neg().add_scalar(1.0))?.add(&pos)?;
        self.mul(&slope)
    }
}
