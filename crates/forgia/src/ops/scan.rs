//! Cumulative scans beyond `cumsum` (PyTorch semantics): `cumprod`, whose gradient is exact
//! with zeros in the input, and `cummax` / `cummin` (values and indices; the gradient flows
//! through the indices).

use super::reduce::{scalar_as_vector, Plan};
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::Result;
use crate::kernels::scan as k;
use crate::ops::index::Indices;
use crate::tensor::{Array, Axes, Axis};

impl Tensor {
    /// The running product along `axis` (`torch.cumprod`; same shape as `x`).
    ///
    /// Backward: `gx_k = Σ_{j ≥ k} gy_j · Π_{i ≤ j, i ≠ k} x_i`, computed in one pass from the
    /// end without dividing by `x`, so zeros in the input get their exact gradient (PyTorch's
    /// formula). Under `create_graph` the same sum is built from `cumprod` itself (`n` scans of
    /// length `n`), so every order works.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis.
    pub fn cumprod(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        let axis = axis.into();
        if let Some(v) = scalar_as_vector(self, "cumprod", &Axes(vec![axis.clone()]))? {
            return v.cumprod(0)?.reshape(&[]);
        }
        let a = self.axis("cumprod", axis)?;
        let plan = Plan::new("cumprod", self, &[a], true)?;
        let mut data = crate::tensor::buffer("cumprod", plan.data.packed().len())?;
        k::cumprod(plan.data.packed(), plan.outer, plan.red, plan.inner, &mut data);
        let mut out = Tensor::from_parts(data, self.shape());
        out.names = self.names.clone();
        Ok(attach(out, &[self], || CumprodBackward { x: self.value(), axis: a }))
    }

    /// The running maximum along `axis` and where it was found (`torch.cummax`): a tie takes
    /// the later index, and NaN propagates (a NaN is the maximum from where it appears).
    ///
    /// Backward: through the indices, `gx = scatter_add(zeros, axis, indices, gy)` (the
    /// gather's record, differentiable).
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis.
    pub fn cummax(&self, axis: impl Into<Axis>) -> Result<(Tensor, Indices)> {
        self.cum_extremum("cummax", axis.into(), true)
    }

    /// The running minimum along `axis` and where it was found (`torch.cummin`), as
    /// [`Tensor::cummax`].
    ///
    /// # Errors
    /// As [`Tensor::cummax`].
    pub fn cummin(&self, axis: impl Into<Axis>) -> Result<(Tensor, Indices)> {
        self.cum_extremum("cummin", axis.into(), false)
    }

    fn cum_extremum(&self, op: &'static str, axis: Axis, max: bool) -> Result<(Tensor, Indices)> {
        if let Some(v) = scalar_as_vector(self, op, &Axes(vec![axis.clone()]))? {
            let (values, idx) = v.cum_extremum(op, Axis::Index(0), max)?;
            return Ok((values.reshape(&[])?, idx.reshape(&[])?));
        }
        let a = self.axis(op, axis)?;
        let plan = Plan::new(op, &self.detach(), &[a], true)?;
        let mut idx = vec![0i64; plan.data.packed().len()];
        k::cum_extremum_index(plan.data.packed(), plan.outer, plan.red, plan.inner, max, &mut idx);
        let idx = Indices::new(idx, self.shape())?;
        Ok((self.gather(a, &idx)?, idx))
    }
}

struct CumprodBackward {
    x: Array,
    axis: usize,
}

impl CumprodBackward {
    /// `gx` in differentiable ops: for each position `k`, `x` with `x_k` replaced by 1 has the
    /// running products `Π_{i ≤ j, i ≠ k} x_i` for `j ≥ k`; `gx_k` sums `gy` times those.
    fn grad_tensor(&self, x: &Tensor, gy: &Tensor) -> Result<Tensor> {
        let n = x.shape()[self.axis];
        let along = |f: &dyn Fn(usize) -> f32| -> Tensor {
            let mut shape = vec![1; x.rank()];
            shape[self.axis] = n;
            Tensor::from_parts((0..n).map(f).collect(), &shape)
        };
        let mut total = Tensor::zeros(x.shape())?;
        for k in 0..n {
            let hot = along(&|i| f32::from(i == k));
            let from_k = along(&|j| f32::from(j >= k));
            let replaced = x.mul(&hot.neg().add_scalar(1.0))?.add(&hot)?;
            let g = gy.mul(&replaced.cumprod(self.axis)?)?.mul(&from_k)?.sum(self.axis, true)?;
            total = total.add(&g.mul(&hot)?)?;
        }
        Ok(total)
    }
}

impl Backward for CumprodBackward {
    fn name(&self) -> &'static str {
        "cumprod"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let gx = if cx.create_graph() {
            self.grad_tensor(&cx.input(0, &self.x), gy)?
        } else {
            let x = Tensor::from(self.x.clone());
            let plan = Plan::new(self.name(), &x, &[self.axis], true)?;
            let g = Plan::new(self.name(), gy, &[self.axis], true)?;
            let mut buf = crate::tensor::buffer("cumprod", plan.data.packed().len())?;
            k::cumprod_grad(plan.data.packed(), g.data.packed(), plan.outer, plan.red, plan.inner, &mut buf);
            Tensor::from_parts(buf, self.x.shape())
        };
        out.push(Some(gx));
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        2 * self.x.numel()
    }
}
