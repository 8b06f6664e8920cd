//! Pointwise unary ops. The family shares one generic forward kernel and one record; each op
//! is a small rule: `f`, its derivative `df` read from the saved input or (when cheaper, as
//! for tanh) the saved output, and the same derivative in tensor ops for `create_graph`.

use smallvec::SmallVec;

use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::Result;
use crate::kernels::pointwise;
use crate::tensor::Tensor;

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
    let data = x.with_data(|d| pointwise::map(d, |v| rule.f(v)));
    let mut y = Tensor::from_parts(data, x.shape());
    y.names = x.names.clone();
    let saved = if R::USES_OUTPUT { y.detach() } else { x.detach() };
    attach(y, &[x], move || UnaryBackward { rule, saved })
}

struct UnaryBackward<R> {
    rule: R,
    saved: Tensor,
}

impl<R: UnaryRule> Backward for UnaryBackward<R> {
    fn name(&self) -> &'static str {
        R::NAME
    }

    /// `gx = gy * df(saved)`: fused in one kernel, or in tensor ops when building a graph.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        let gx = if cx.create_graph() {
            let saved = if R::USES_OUTPUT { cx.output(&self.saved) } else { cx.input(0, &self.saved) };
            gy.mul(&self.rule.df_tensor(&saved)?)?
        } else {
            let s = self.saved.contiguous_data();
            let g = gy.contiguous_data();
            Tensor::from_parts(pointwise::zip(g.packed(), s.packed(), |g, s| g * self.rule.df(s)), gy.shape())
        };
        Ok(SmallVec::from_elem(Some(gx), 1))
    }
}

/// A constant tensor of `f` applied to `t`'s values (for derivatives that are locally constant,
/// such as relu's step).
pub(crate) fn constant_map(t: &Tensor, f: impl Fn(f32) -> f32 + Sync) -> Tensor {
    t.with_data(|d| Tensor::from_parts(pointwise::map(d, f), t.shape()))
}

struct Tanh;
impl UnaryRule for Tanh {
    const NAME: &'static str = "tanh";
    const USES_OUTPUT: bool = true;
    fn f(&self, x: f32) -> f32 {
        x.tanh()
    }
    fn df(&self, y: f32) -> f32 {
        1.0 - y * y
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        Ok(y.mul(y)?.scale(-1.0).add_scalar(1.0))
    }
}

struct Relu;
impl UnaryRule for Relu {
    const NAME: &'static str = "relu";
    const USES_OUTPUT: bool = true;
    fn f(&self, x: f32) -> f32 {
        x.max(0.0)
    }
    fn df(&self, y: f32) -> f32 {
        if y > 0.0 {
            1.0
        } else {
            0.0
        }
    }
    fn df_tensor(&self, y: &Tensor) -> Result<Tensor> {
        Ok(constant_map(y, |v| self.df(v)))
    }
}

impl Tensor {
    /// Hyperbolic tangent.
    ///
    /// Backward: `gx = gy * (1 - y²)`, from the saved output.
    pub fn tanh(&self) -> Tensor {
        unary(self, Tanh)
    }

    /// `max(x, 0)`.
    ///
    /// Backward: `gx = gy` where `y > 0`, else 0 (from the saved output).
    pub fn relu(&self) -> Tensor {
        unary(self, Relu)
    }
}
