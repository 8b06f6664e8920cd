//! Pointwise unary math ops. The family shares one generic forward kernel and one record; each
//! op is a small rule: `f`, its derivative `df` read from the saved input or (when cheaper, as
//! for exp) the saved output, and the same derivative in tensor ops for `create_graph`.
//! Activations (sigmoid, relu, gelu, …) live in `activation.rs` and use the same machinery.

use crate::autograd::Tensor;
use crate::autograd::{attach, attach_saving_output, Backward, Grads, VjpCtx};
use crate::error::Result;
use crate::kernels::{fastmath, pointwise};
use crate::tensor::Saved;

/// A pointwise function and its derivative.
pub(crate) trait UnaryRule: Send + Sync + 'static {
    /// The op's name.
    const NAME: &'static str;
    /// True when `df` reads the output `y` instead of the input `x` (only one is saved).
    const USES_OUTPUT: bool;
    /// The function.
    fn f(&self, x: f32) -> f32;
    /// `dy/dx`, given `x` (or `y` when `USES_OUTPUT`).
    fn df(&self, saved: f32) -> f32;
    /// `dy/dx` as a tensor built from differentiable ops, for `create_graph` passes.
    fn df_tensor(&self, saved: &Tensor) -> Result<Tensor>;
}

/// Applies a rule: the forward kernel, then the funnel with the rule's record.
pub(crate) fn unary<R: UnaryRule>(x: &Tensor, rule: R) -> Tensor {
    let y = x.map_stored_into(R::NAME, |d, y| {
        pointwise::map(
            d,
            y,
            #[inline(always)]
            |v| rule.f(v),
        )
    });
    // The record saves the output or the input (a value, never a node), and only when it is made.
    if R::USES_OUTPUT {
        attach_saving_output(y, &[x], move |y| UnaryBackward { rule, saved: Saved::new(y) })
    } else {
        attach(y, &[x], move || UnaryBackward { rule, saved: Saved::new(x) })
    }
}

struct UnaryBackward<R> {
    rule: R,
    saved: Saved,
}

impl<R: UnaryRule> Backward for UnaryBackward<R> {
    fn name(&self) -> &'static str {
        R::NAME
    }

    /// `gx = gy * df(saved)`: fused in one kernel, or in tensor ops when building a graph.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let gx = if cx.create_graph() {
            let saved = self.saved.value(gy.shape());
            let saved = if R::USES_OUTPUT { cx.output(&saved) } else { cx.input(0, &saved) };
            gy.mul(&self.rule.df_tensor(&saved)?)?
        } else {
            self.saved.try_with_data(R::NAME, gy.shape(), |s| {
                gy.try_with_data(R::NAME, |g| {
                    Tensor::filled(R::NAME, gy.shape(), |gx| {
                        pointwise::zip(
                            g,
                            s,
                            gx,
                            #[inline(always)]
                            |g, s| g * self.rule.df(s),
                        )
                    })
                })
            })?
        };
        out.push(Some(gx));
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        self.saved.numel()
    }
}

/// A constant tensor of `f` applied to `t`'s values (for derivatives that are locally constant,
/// such as relu's step).
pub(crate) fn constant_map(op: &'static str, t: &Tensor, f: impl Fn(f32) -> f32 + Sync) -> Result<Tensor> {
    t.try_with_data(op, |d| {
        let mut out = crate::tensor::buffer(op, d.len())?;
        pointwise::map(d, &mut out, f);
        Ok(Tensor::from_parts(out, t.shape()))
    })
}

/// `2/√π`, the derivative of erf at 0.
const TWO_OVER_SQRT_PI: f32 = std::f32::consts::FRAC_2_SQRT_PI;

struct Neg;
impl UnaryRule for Neg {
    const NAME: &'static str = "neg";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        -x
    }
    #[inline(always)]
    fn df(&self, _x: f32) -> f32 {
        -1.0
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Tensor::full(x.shape(), -1.0)
    }
}

struct Exp;
impl UnaryRule for Exp {
    const NAME: &'static str = "exp";
    const USES_OUTPUT: bool = true;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        fastmath::exp(x)
    }
    #[inline(always)]
    fn df(&self, y: f32) -> f32 {
        y
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        Ok(y.clone())
    }
}

struct Log;
impl UnaryRule for Log {
    const NAME: &'static str = "log";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x.ln()
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        1.0 / x
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.reciprocal())
    }
}

struct Sqrt;
impl UnaryRule for Sqrt {
    const NAME: &'static str = "sqrt";
    const USES_OUTPUT: bool = true;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x.sqrt()
    }
    #[inline(always)]
    fn df(&self, y: f32) -> f32 {
        0.5 / y
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        Ok(y.reciprocal().scale(0.5))
    }
}

struct Rsqrt;
impl UnaryRule for Rsqrt {
    const NAME: &'static str = "rsqrt";
    const USES_OUTPUT: bool = true;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        1.0 / x.sqrt()
    }
    #[inline(always)]
    fn df(&self, y: f32) -> f32 {
        -0.5 * y * y * y
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        Ok(y.square().mul(y)?.scale(-0.5))
    }
}

struct Square;
impl UnaryRule for Square {
    const NAME: &'static str = "square";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x * x
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        2.0 * x
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.scale(2.0))
    }
}

struct Reciprocal;
impl UnaryRule for Reciprocal {
    const NAME: &'static str = "reciprocal";
    const USES_OUTPUT: bool = true;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        1.0 / x
    }
    #[inline(always)]
    fn df(&self, y: f32) -> f32 {
        -y * y
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        Ok(y.square().scale(-1.0))
    }
}

struct Abs;
impl UnaryRule for Abs {
    const NAME: &'static str = "abs";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x.abs()
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            0.0
        }
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        constant_map(Self::NAME, x, |v| self.df(v))
    }
}

struct Sin;
impl UnaryRule for Sin {
    const NAME: &'static str = "sin";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x.sin()
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        x.cos()
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.cos())
    }
}

struct Cos;
impl UnaryRule for Cos {
    const NAME: &'static str = "cos";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x.cos()
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        -x.sin()
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.sin().scale(-1.0))
    }
}

struct Tanh;
impl UnaryRule for Tanh {
    const NAME: &'static str = "tanh";
    const USES_OUTPUT: bool = true;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        fastmath::tanh(x)
    }
    #[inline(always)]
    fn df(&self, y: f32) -> f32 {
        1.0 - y * y
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        Ok(y.mul(y)?.scale(-1.0).add_scalar(1.0))
    }
}

struct Erf;
impl UnaryRule for Erf {
    const NAME: &'static str = "erf";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        fastmath::erf(x)
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        TWO_OVER_SQRT_PI * fastmath::exp(-x * x)
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.square().scale(-1.0).exp().scale(TWO_OVER_SQRT_PI))
    }
}

struct PowScalar {
    p: f32,
}
impl UnaryRule for PowScalar {
    const NAME: &'static str = "pow_scalar";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x.powf(self.p)
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        if self.p == 0.0 {
            0.0
        } else {
            self.p * x.powf(self.p - 1.0)
        }
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        if self.p == 0.0 {
            return Tensor::zeros(x.shape());
        }
        Ok(x.pow_scalar(self.p - 1.0).scale(self.p))
    }
}

struct Log1p;
impl UnaryRule for Log1p {
    const NAME: &'static str = "log1p";
    const USES_OUTPUT: bool = false;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x.ln_1p()
    }
    #[inline(always)]
    fn df(&self, x: f32) -> f32 {
        1.0 / (1.0 + x)
    }
    fn df_tensor(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.add_scalar(1.0).reciprocal())
    }
}

struct Expm1;
impl UnaryRule for Expm1 {
    const NAME: &'static str = "expm1";
    const USES_OUTPUT: bool = true;
    #[inline(always)]
    fn f(&self, x: f32) -> f32 {
        x.exp_m1()
    }
    #[inline(always)]
    fn df(&self, y: f32) -> f32 {
        y + 1.0
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        Ok(y.add_scalar(1.0))
    }
}

impl Tensor {
    /// `ln(1 + x)`, accurate for small `|x|` (NaN below -1, -∞ at -1).
    ///
    /// Backward: `gx = gy / (1 + x)`.
    pub fn log1p(&self) -> Tensor {
        unary(self, Log1p)
    }

    /// `eˣ - 1`, accurate for small `|x|`.
    ///
    /// Backward: `gx = gy * (y + 1)`, from the saved output.
    pub fn expm1(&self) -> Tensor {
        unary(self, Expm1)
    }
}

impl Tensor {
    /// `-x`.
    ///
    /// Backward: `gx = -gy`.
    pub fn neg(&self) -> Tensor {
        unary(self, Neg)
    }

    /// `eˣ`.
    ///
    /// Backward: `gx = gy * y`, from the saved output.
    pub fn exp(&self) -> Tensor {
        unary(self, Exp)
    }

    /// Natural logarithm (NaN below 0, -∞ at 0, like IEEE).
    ///
    /// Backward: `gx = gy / x`.
    pub fn log(&self) -> Tensor {
        unary(self, Log)
    }

    /// `√x`.
    ///
    /// Backward: `gx = gy / (2y)`, from the saved output.
    pub fn sqrt(&self) -> Tensor {
        unary(self, Sqrt)
    }

    /// `1/√x`.
    ///
    /// Backward: `gx = -gy * y³ / 2`, from the saved output.
    pub fn rsqrt(&self) -> Tensor {
        unary(self, Rsqrt)
    }

    /// `x²`.
    ///
    /// Backward: `gx = 2x * gy`.
    pub fn square(&self) -> Tensor {
        unary(self, Square)
    }

    /// `1/x`.
    ///
    /// Backward: `gx = -gy * y²`, from the saved output.
    pub fn reciprocal(&self) -> Tensor {
        unary(self, Reciprocal)
    }

    /// `|x|`.
    ///
    /// Backward: `gx = gy * sign(x)` (0 at 0).
    pub fn abs(&self) -> Tensor {
        unary(self, Abs)
    }

    /// `sin x`.
    ///
    /// Backward: `gx = gy * cos x`.
    pub fn sin(&self) -> Tensor {
        unary(self, Sin)
    }

    /// `cos x`.
    ///
    /// Backward: `gx = -gy * sin x`.
    pub fn cos(&self) -> Tensor {
        unary(self, Cos)
    }

    /// Hyperbolic tangent.
    ///
    /// Backward: `gx = gy * (1 - y²)`, from the saved output.
    pub fn tanh(&self) -> Tensor {
        unary(self, Tanh)
    }

    /// The error function `erf x = 2/√π ∫₀ˣ e^(-t²) dt`, accurate to 1e-7 absolute (computed
    /// in f64).
    ///
    /// Backward: `gx = gy * 2/√π * e^(-x²)`.
    pub fn erf(&self) -> Tensor {
        unary(self, Erf)
    }

    /// `x^p` for a scalar exponent (IEEE `powf`: a negative base gives NaN unless `p` is an
    /// integer).
    ///
    /// Backward: `gx = gy * p * x^(p-1)` (0 when `p == 0`).
    pub fn pow_scalar(&self, p: f32) -> Tensor {
        unary(self, PowScalar { p })
    }
}
