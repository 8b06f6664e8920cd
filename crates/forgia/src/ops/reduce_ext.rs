//! Statistics and scans over axes: variance, standard deviation, log-sum-exp, product and cumulative sum. Each
//! backward is written in differentiable ops (prod's has a fused fast path), so all of them
//! support `create_graph`.

use super::reduce::{expand_reduced, scalar_as_vector, Plan};
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, within, ErrorKind, Result};
use crate::kernels::reduce as k;
use crate::tensor::{Array, Axes, Axis, Shape};

impl Tensor {
    /// Variance over `axes`: `Σ (x - mean)² / (n - correction)`, `n` the number of reduced
    /// elements (`correction` 1 is the unbiased estimate, 0 the population variance).
    ///
    /// Backward: `gx = expand(gy) * 2 (x - mean(x)) / (n - correction)`.
    ///
    /// # Errors
    /// Bad axes as [`Tensor::sum`]; `EmptyTensor` when nothing is reduced over an empty axis;
    /// `InvalidArgument` when `correction >= n`.
    pub fn var(&self, axes: impl Into<Axes>, correction: usize, keepdim: bool) -> Result<Tensor> {
        within("var", || {
            let axes = axes.into();
            if let Some(v) = scalar_as_vector(self, "var", &axes)? {
                return v.var(0, correction, false);
            }
            let axes = self.axes("var", axes)?;
            let n: usize = axes.iter().map(|&a| self.shape()[a]).product();
            if n == 0 {
                return fail(ErrorKind::EmptyTensor { op: "var", shape: self.shape().to_vec() });
            }
            if correction >= n {
                return fail(ErrorKind::InvalidArgument {
                    op: "var",
                    arg: "correction",
                    reason: format!("correction {correction} needs more than {n} reduced elements"),
                });
            }
            let denom = (n - correction) as f32;
            // The variance is shift-invariant: shifted by the first element of each reduced set,
            // identical values are exactly 0 (the kernel's mean comes from a rounded f32 sum, so
            // `var([0.1; 3])` was 8e-17), and values far from 0 lose less to cancellation.
            let x = self.detach();
            let first = axes.iter().try_fold(x.clone(), |f, &a| f.narrow(a, 0, 1))?;
            let shifted = x.sub(&first)?;
            let plan = Plan::new("var", &shifted, &axes, keepdim)?;
            let n = plan.outer * plan.inner;
            // The sums behind the means, then the scratch of the kernel's sum.
            let sums_len = n + k::sum_scratch(plan.outer, plan.red, plan.inner);
            let (mut sums, mut data) = (crate::tensor::zeroed("var", sums_len)?, crate::tensor::zeroed("var", n)?);
            k::var(plan.data.packed(), (plan.outer, plan.red, plan.inner), denom, &mut sums, &mut data);
            let out = Tensor::from(plan.output(data));
            Ok(attach(out, &[self], || VarBackward {
                x: self.value(),
                axes: axes.to_vec(),
                kept: plan.kept.clone(),
                denom,
            }))
        })
    }

    /// Standard deviation over `axes`: `√var(x, axes, correction)` (`torch.std` with
    /// `correction`; `unbiased = true` is `correction = 1`).
    ///
    /// Backward: `gx = gy · (x - mean(x)) / ((n - correction) · y)`, through `var` and `sqrt`
    /// (NaN where `y = 0`, as in PyTorch).
    ///
    /// # Errors
    /// As [`Tensor::var`] (the op named `var`).
    pub fn std(&self, axes: impl Into<Axes>, correction: usize, keepdim: bool) -> Result<Tensor> {
        Ok(self.var(axes, correction, keepdim)?.sqrt())
    }

    /// `log Σ exp(x)` over `axes`, computed stably (shifted by the maximum).
    ///
    /// Backward: `gx = expand(gy) * exp(x - expand(y))` (the softmax over the reduced axes).
    ///
    /// # Errors
    /// Bad axes as [`Tensor::sum`]; `EmptyTensor` when a reduced axis has size 0.
    pub fn logsumexp(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        let axes = axes.into();
        if let Some(v) = scalar_as_vector(self, "logsumexp", &axes)? {
            return v.logsumexp(0, false);
        }
        let axes = self.axes("logsumexp", axes)?;
        if axes.iter().any(|&a| self.shape()[a] == 0) {
            return fail(ErrorKind::EmptyTensor { op: "logsumexp", shape: self.shape().to_vec() });
        }
        let plan = Plan::new("logsumexp", self, &axes, keepdim)?;
        let n = plan.outer * plan.inner;
        let mut shift = crate::tensor::buffer("logsumexp", n)?;
        let mut data = crate::tensor::zeroed("logsumexp", n)?;
        k::logsumexp(plan.data.packed(), (plan.outer, plan.red, plan.inner), &mut shift, &mut data);
        let out = Tensor::from(plan.output(data));
        let y = out.detach();
        Ok(attach(out, &[self], || LogsumexpBackward { x: self.value(), y: y.value(), kept: plan.kept.clone() }))
    }

    /// The product over one axis (1 over an empty axis).
    ///
    /// Backward: `gx_r = expand(gy) * Π_{r' ≠ r} x_r'` — the exclusive product, from prefix and
    /// suffix products, never `y / x`, so zeros get their exact gradient.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis.
    pub fn prod(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        let axis = axis.into();
        if let Some(v) = scalar_as_vector(self, "prod", &Axes(vec![axis.clone()]))? {
            return v.prod(0, false);
        }
        let a = self.axis("prod", axis)?;
        let plan = Plan::new("prod", self, &[a], keepdim)?;
        let mut data = crate::tensor::buffer("prod", plan.outer * plan.inner)?;
        k::prod(plan.data.packed(), plan.outer, plan.red, plan.inner, &mut data);
        let out = Tensor::from(plan.output(data));
        Ok(attach(out, &[self], || ProdBackward { x: self.value(), axis: a, kept: plan.kept.clone() }))
    }

    /// The running sum along `axis` (same shape as `x`).
    ///
    /// Backward: `gx = reverse_cumsum(gy)` along the same axis.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis.
    pub fn cumsum(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        let axis = axis.into();
        if let Some(v) = scalar_as_vector(self, "cumsum", &Axes(vec![axis.clone()]))? {
            return v.cumsum(0)?.reshape(&[]);
        }
        let a = self.axis("cumsum", axis)?;
        self.cumsum_dir(a, false)
    }

    /// Running sum along a resolved axis, from the start or (`reverse`) from the end.
    fn cumsum_dir(&self, axis: usize, reverse: bool) -> Result<Tensor> {
        let plan = Plan::new("cumsum", self, &[axis], true)?;
        let mut data = crate::tensor::zeroed("cumsum", plan.data.packed().len())?;
        k::cumsum(plan.data.packed(), plan.outer, plan.red, plan.inner, reverse, &mut data);
        let mut out = Tensor::from_parts(data, self.shape());
        out.names = self.names.clone();
        Ok(attach(out, &[self], || CumsumBackward { axis, reverse }))
    }
}

struct VarBackward {
    x: Array,
    axes: Vec<usize>,
    kept: Shape,
    denom: f32,
}

impl Backward for VarBackward {
    fn name(&self) -> &'static str {
        "var"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let x = cx.input(0, &self.x);
        let centered = x.sub(&x.mean(self.axes.clone(), true)?)?;
        let g = expand_reduced(gy, &self.kept, x.shape())?.mul(&centered)?.scale(2.0 / self.denom);
        out.push(Some(g));
        Ok(())
    }
}

struct LogsumexpBackward {
    x: Array,
    y: Array,
    kept: Shape,
}

impl Backward for LogsumexpBackward {
    fn name(&self) -> &'static str {
        "logsumexp"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let x = cx.input(0, &self.x);
        let y = expand_reduced(&cx.output(&self.y), &self.kept, x.shape())?;
        let g = expand_reduced(gy, &self.kept, x.shape())?.mul(&x.sub(&y)?.exp())?;
        out.push(Some(g));
        Ok(())
    }
}

struct ProdBackward {
    x: Array,
    axis: usize,
    kept: Shape,
}

impl ProdBackward {
    /// The exclusive products in differentiable ops (for `create_graph`): for each position
    /// `r`, `prod(x[..r]) * prod(x[r+1..])`, placed with a constant one-hot along the axis.
    /// Costs `n` times the fused kernel; only second-order passes use it.
    fn exclusive_tensor(&self, x: &Tensor) -> Result<Tensor> {
        let n = x.shape()[self.axis];
        let mut total: Option<Tensor> = None;
        for r in 0..n {
            let before = x.narrow(self.axis, 0, r)?.prod(self.axis, true)?;
            let after = x.narrow(self.axis, r + 1, n - r - 1)?.prod(self.axis, true)?;
            let mut onehot_shape = vec![1; x.rank()];
            onehot_shape[self.axis] = n;
            let mut onehot = crate::tensor::zeroed("reduce", n)?;
            onehot[r] = 1.0;
            let onehot = Tensor::from_parts(onehot, &onehot_shape);
            let term = before.mul(&after)?.mul(&onehot)?;
            total = Some(match total {
                Some(t) => t.add(&term)?,
                None => term,
            });
        }
        match total {
            Some(t) => t.broadcast_to(x.shape()),
            None => Tensor::zeros(x.shape()),
        }
    }
}

impl Backward for ProdBackward {
    fn name(&self) -> &'static str {
        "prod"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let exclusive = if cx.create_graph() {
            self.exclusive_tensor(&cx.input(0, &self.x))?
        } else {
            let plan = Plan::new(self.name(), &self.x, &[self.axis], true)?;
            let mut data = crate::tensor::buffer("prod", plan.data.packed().len())?;
            k::prod_exclusive(plan.data.packed(), plan.outer, plan.red, plan.inner, &mut data);
            Tensor::from_parts(data, self.x.shape())
        };
        let g = expand_reduced(gy, &self.kept, self.x.shape())?.mul(&exclusive)?;
        out.push(Some(g));
        Ok(())
    }
}

struct CumsumBackward {
    axis: usize,
    reverse: bool,
}

impl Backward for CumsumBackward {
    fn name(&self) -> &'static str {
        "cumsum"
    }

    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.cumsum_dir(self.axis, !self.reverse)?));
        Ok(())
    }
}
