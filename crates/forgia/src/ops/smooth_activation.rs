//! Exponential-family activations (PyTorch semantics): ELU, SELU, Mish and the numerically
//! stable LogSigmoid, each a `UnaryRule` of the shared pointwise machinery in `unary.rs`.

use super::unary::{constant_map, unary, UnaryRule};
use crate::autograd::Tensor;
use crate::error::{check, Result};
use crate::kernels::fastmath;

/// SELU's `α` (Klambauer et al., as `torch.nn.SELU`).
pub const SELU_ALPHA: f32 = 1.673_263_2;
/// SELU's `λ` (Klambauer et al., as `torch.nn.SELU`).
pub const SELU_SCALE: f32 = 1.050_701;

/// `scale·x` for `x > 0`, else `scale·alpha·(eˣ - 1)`: ELU, and SELU with its constants.
#[derive(Clone, Copy)]
struct Elu {
    alpha: f32,
    scale: f32,
    name: &'static str,
}
impl UnaryRule for Elu {
    const NAME: &'static str = "elu";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        if x > 0.0 {
            self.scale * x
        } else {
            self.scale * self.alpha * x.exp_m1()
        }
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        if x > 0.0 {
            self.scale
        } else {
            self.scale * self.alpha * fastmath::exp(x)
        }
    }
    /// `scale·(m + (1 - m)·alpha·e^((1 - m)·x))` with the constant mask `m = [x > 0]`: the
    /// exponent is 0 on the positive side, so a large `x` never overflows into `0·∞`.
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        let pos = constant_map(self.name, x, |v| if v > 0.0 { 1.0 } else { 0.0 })?;
        let neg = pos.neg().add_scalar(1.0);
        let tail = x.mul(&neg)?.exp().mul(&neg)?.scale(self.alpha);
        Ok(pos.add(&tail)?.scale(self.scale))
    }
}

#[derive(Clone, Copy)]
struct Mish;
impl UnaryRule for Mish {
    const NAME: &'static str = "mish";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x * fastmath::tanh(softplus(x))
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        let t = fastmath::tanh(softplus(x));
        t + x * fastmath::sigmoid(x) * (1.0 - t * t)
    }
    /// `tanh(sp(x)) + x σ(x) (1 - tanh²(sp(x)))`.
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        let t = x.softplus().tanh();
        let sech2 = t.square().neg().add_scalar(1.0);
        t.add(&x.mul(&x.sigmoid())?.mul(&sech2)?)
    }
}

/// `ln(1 + eˣ)` without overflow (PyTorch's softplus with threshold 20).
#[inline(always)]
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.max(0.0) + fastmath::exp(-x.abs()).ln_1p()
    }
}

#[derive(Clone, Copy)]
struct LogSigmoid;
impl UnaryRule for LogSigmoid {
    const NAME: &'static str = "log_sigmoid";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        // min(x, 0) - ln(1 + e^-|x|): no overflow and no cancellation on either side.
        x.min(0.0) - fastmath::exp(-x.abs()).ln_1p()
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        fastmath::sigmoid(-x)
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.neg().sigmoid())
    }
}

impl Tensor {
    /// ELU: `x` for `x > 0`, else `alpha·(eˣ - 1)` (`torch.nn.functional.elu`; PyTorch's
    /// default `alpha` is 1).
    ///
    /// Backward: `gx = gy` where `x > 0`, else `gy·alpha·eˣ`.
    ///
    /// # Errors
    /// `InvalidArgument` for a non-finite `alpha`.
    pub fn elu(&self, alpha: f32) -> Result<Tensor> {
        check::finite("elu", "alpha", alpha)?;
        Ok(unary(self, Elu { alpha, scale: 1.0, name: "elu" }))
    }

    /// SELU: `λ·elu(x, α)` with [`SELU_ALPHA`] and [`SELU_SCALE`] (`torch.nn.functional.selu`).
    ///
    /// Backward: `gx = gy·λ` where `x > 0`, else `gy·λ·α·eˣ`.
    pub fn selu(&self) -> Tensor {
        unary(self, Elu { alpha: SELU_ALPHA, scale: SELU_SCALE, name: "selu" })
    }

    /// Mish: `x·tanh(softplus(x))` (`torch.nn.functional.mish`).
    ///
    /// Backward: `gx = gy·(tanh(sp) + x·σ(x)·(1 - tanh²(sp)))`, `sp = softplus(x)`.
    pub fn mish(&self) -> Tensor {
        unary(self, Mish)
    }

    /// `log σ(x) = -softplus(-x)`, computed as `min(x, 0) - ln(1 + e^-|x|)`, which is exact
    /// for large `|x|` on both sides (`torch.nn.functional.logsigmoid`).
    ///
    /// Backward: `gx = gy·σ(-x)`.
    pub fn log_sigmoid(&self) -> Tensor {
        unary(self, LogSigmoid)
    }
}
