//! Pointwise activations (sigmoid, relu, leaky_relu, gelu in erf and tanh forms, silu,
//! softplus, clamp), each a `UnaryRule` of the shared pointwise machinery in `unary.rs`.

use std::f32::consts::FRAC_1_SQRT_2;

use super::unary::{constant_map, unary, UnaryRule};
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::fastmath;

/// `√(2/π)`, the scale inside gelu's tanh form.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
/// The cubic coefficient of gelu's tanh form.
const GELU_C: f32 = 0.044_715;
/// Softplus returns `x` itself above this input (torch's default threshold).
const SOFTPLUS_THRESHOLD: f32 = 20.0;

/// The logistic function (vectorizable; saturates without overflow for large `|x|`).
fn sigmoid(x: f32) -> f32 {
    fastmath::sigmoid(x)
}

#[derive(Clone, Copy)]
pub(crate) struct Sigmoid;
impl UnaryRule for Sigmoid {
    const NAME: &'static str = "sigmoid";
    const USES_OUTPUT: bool = true;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        sigmoid(x)
    }
    #[inline(always)]
    fn df(&self, y: f32) -> f32 {
        y * (1.0 - y)
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        y.mul(&y.neg().add_scalar(1.0))
    }
}

struct Relu;
impl UnaryRule for Relu {
    const NAME: &'static str = "relu";
    const USES_OUTPUT: bool = true;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        // Not `x.max(0.0)`, which drops a NaN: NaN propagates, as in PyTorch.
        if x > 0.0 || x.is_nan() {
            x
        } else {
            0.0
        }
    }
    #[inline(always)]
    fn df(&self, y: f32) -> f32 {
        // PyTorch's `threshold_backward`: zero only where `y <= 0` (a NaN passes `gy` on).
        if y > 0.0 || y.is_nan() {
            1.0
        } else {
            0.0
        }
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        constant_map(Self::NAME, y, |v| self.df(v))
    }
}

struct LeakyRelu {
    slope: f32,
}
impl UnaryRule for LeakyRelu {
    const NAME: &'static str = "leaky_relu";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        if x > 0.0 {
            x
        } else {
            self.slope * x
        }
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        if x > 0.0 {
            1.0
        } else {
            self.slope
        }
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        constant_map(Self::NAME, x, |v| self.df(v))
    }
}

#[derive(Clone, Copy)]
pub(crate) struct GeluErf;
impl UnaryRule for GeluErf {
    const NAME: &'static str = "gelu";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        0.5 * x * (1.0 + fastmath::erf(x * FRAC_1_SQRT_2))
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        let (cdf, pdf) = fastmath::normal_cdf_pdf(x);
        cdf + x * pdf
    }
    /// `Φ(x) + x φ(x)`.
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        let cdf = x.scale(FRAC_1_SQRT_2).erf().add_scalar(1.0).scale(0.5);
        let pdf = x.square().scale(-0.5).exp().scale(fastmath::INV_SQRT_2PI);
        cdf.add(&x.mul(&pdf)?)
    }
}

#[derive(Clone, Copy)]
pub(crate) struct GeluTanh;
impl UnaryRule for GeluTanh {
    const NAME: &'static str = "gelu_tanh";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        0.5 * x * (1.0 + fastmath::tanh(SQRT_2_OVER_PI * (x + GELU_C * x * x * x)))
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        let t = fastmath::tanh(SQRT_2_OVER_PI * (x + GELU_C * x * x * x));
        0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * x * x)
    }
    /// `(1 + t)/2 + x (1 - t²) k (1 + 3c x²) / 2` with `t = tanh(k (x + c x³))`.
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        let t = x.pow_scalar(3.0).scale(GELU_C).add(x)?.scale(SQRT_2_OVER_PI).tanh();
        let left = t.add_scalar(1.0).scale(0.5);
        let sech2 = t.square().neg().add_scalar(1.0);
        let inner = x.square().scale(3.0 * GELU_C).add_scalar(1.0);
        left.add(&x.mul(&sech2)?.mul(&inner)?.scale(0.5 * SQRT_2_OVER_PI))
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Silu;
impl UnaryRule for Silu {
    const NAME: &'static str = "silu";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x * sigmoid(x)
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        let s = sigmoid(x);
        s * (1.0 + x * (1.0 - s))
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.sigmoid();
        s.mul(&x.mul(&s.neg().add_scalar(1.0))?.add_scalar(1.0))
    }
}

struct Softplus;
impl UnaryRule for Softplus {
    const NAME: &'static str = "softplus";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        if x > SOFTPLUS_THRESHOLD {
            x
        } else {
            x.max(0.0) + fastmath::exp(-x.abs()).ln_1p()
        }
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        if x > SOFTPLUS_THRESHOLD {
            1.0
        } else {
            sigmoid(x)
        }
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.sigmoid())
    }
}

struct Clamp {
    min: f32,
    max: f32,
}
impl UnaryRule for Clamp {
    const NAME: &'static str = "clamp";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x.clamp(self.min, self.max)
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        if x >= self.min && x <= self.max {
            1.0
        } else {
            0.0
        }
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        constant_map(Self::NAME, x, |v| self.df(v))
    }
}

impl Tensor {
    /// The logistic function `1 / (1 + e⁻ˣ)`, computed without overflow.
    ///
    /// Backward: `gx = gy * y (1 - y)`, from the saved output.
    pub fn sigmoid(&self) -> Tensor {
        unary(self, Sigmoid)
    }

    /// `max(x, 0)`; NaN propagates (as in PyTorch; so do `leaky_relu`, `clamp`, `maximum` and
    /// `minimum`).
    ///
    /// Backward: `gx = gy` where `y > 0` or `y` is NaN, else 0 (from the saved output).
    pub fn relu(&self) -> Tensor {
        unary(self, Relu)
    }

    /// `x` for `x > 0`, else `slope * x`.
    ///
    /// Backward: `gx = gy` where `x > 0`, else `slope * gy`.
    pub fn leaky_relu(&self, slope: f32) -> Tensor {
        unary(self, LeakyRelu { slope })
    }

    /// GELU, exact form: `x Φ(x) = x (1 + erf(x/√2)) / 2` (erf accurate to 1e-7).
    ///
    /// Backward: `gx = gy * (Φ(x) + x φ(x))`, `φ` the standard normal density.
    pub fn gelu(&self) -> Tensor {
        unary(self, GeluErf)
    }

    /// GELU, tanh approximation: `x (1 + tanh(√(2/π) (x + 0.044715 x³))) / 2`.
    ///
    /// Backward: `gx = gy * ((1 + t)/2 + x (1 - t²) √(2/π) (1 + 3·0.044715 x²) / 2)`.
    pub fn gelu_tanh(&self) -> Tensor {
        unary(self, GeluTanh)
    }

    /// SiLU (swish): `x σ(x)`.
    ///
    /// Backward: `gx = gy * σ(x) (1 + x (1 - σ(x)))`.
    pub fn silu(&self) -> Tensor {
        unary(self, Silu)
    }

    /// `ln(1 + eˣ)`, computed stably; above `x = 20` it returns `x` (torch's threshold).
    ///
    /// Backward: `gx = gy * σ(x)` (exactly `gy` above the threshold).
    pub fn softplus(&self) -> Tensor {
        unary(self, Softplus)
    }

    /// Clamps every element into `[min, max]`; NaN propagates.
    ///
    /// Backward: `gx = gy` where `min <= x <= max`, else 0.
    ///
    /// The one unary op that returns `Result`, because it is the one with arguments that can
    /// be wrong: PyTorch silently returns `max` everywhere when `min > max`; we refuse it.
    ///
    /// # Errors
    /// `InvalidArgument` when `min > max` or either bound is NaN.
    pub fn clamp(&self, min: f32, max: f32) -> Result<Tensor> {
        if min.is_nan() || max.is_nan() || min > max {
            return fail(ErrorKind::InvalidArgument {
                op: "clamp",
                arg: "min",
                reason: format!("need min <= max, got min {min} and max {max}"),
            });
        }
        Ok(unary(self, Clamp { min, max }))
    }
}
