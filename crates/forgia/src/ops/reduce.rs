//! Reductions over any set of axes, with or without kept dimensions.

use smallvec::SmallVec;

use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::reduce as k;
use crate::tensor::layout::numel;
use crate::tensor::{Axes, Shape, Tensor};

/// A reduction laid out for the kernels: the input packed as `[outer, red, inner]`.
pub(crate) struct Plan {
    /// Packed input (a copy only when the reduced axes were not one contiguous block).
    pub(crate) data: Tensor,
    pub(crate) outer: usize,
    pub(crate) red: usize,
    pub(crate) inner: usize,
    /// The output shape with reduced axes kept as 1.
    pub(crate) kept: Shape,
    /// The output shape as requested (`kept`, or with reduced axes removed).
    pub(crate) out: Shape,
}

impl Plan {
    /// Plans reducing `axes` (sorted, distinct) of `x`.
    pub(crate) fn new(x: &Tensor, axes: &[usize], keepdim: bool) -> Plan {
        let shape = x.shape();
        let kept: Shape = shape.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
        let out: Shape = if keepdim {
            kept.clone()
        } else {
            shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
        };
        let block = axes.windows(2).all(|w| w[1] == w[0] + 1);
        let (data, outer, red, inner) = if axes.is_empty() {
            (x.contiguous_data(), numel(shape), 1, 1)
        } else if block {
            let (a, b) = (axes[0], axes[axes.len() - 1] + 1);
            (x.contiguous_data(), numel(&shape[..a]), numel(&shape[a..b]), numel(&shape[b..]))
        } else {
            // Kept axes first, reduced axes last, then pack.
            let perm: Vec<usize> = (0..shape.len()).filter(|i| !axes.contains(i)).chain(axes.iter().copied()).collect();
            let red: usize = axes.iter().map(|&a| shape[a]).product();
            // The kept sizes' product, not numel / red: that is 0 when a reduced axis is empty.
            let outer: usize = perm[..perm.len() - axes.len()].iter().map(|&a| shape[a]).product();
            let t = x.detach().with_layout(x.layout.permuted(&perm)).contiguous_data();
            (t, outer, red, 1)
        };
        Plan { data, outer, red, inner, kept, out }
    }
}

impl Tensor {
    /// Sum over `axes` (an index, a name, or a list of them); `keepdim` keeps them as size 1.
    ///
    /// Backward: `gx = broadcast(gy reshaped to the kept shape, x.shape)` (a free view).
    ///
    /// # Errors
    /// `AxisOutOfRange`, `UnknownAxisName` or `DuplicateAxis` for bad axes.
    pub fn sum(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        let axes = self.axes("sum", axes)?;
        let plan = Plan::new(self, &axes, keepdim);
        let data = k::sum(plan.data.packed(), plan.outer, plan.red, plan.inner);
        let out = Tensor::from_parts(data, &plan.out);
        Ok(attach(out, &[self], || SumBackward { in_shape: self.shape().into(), kept: plan.kept.clone(), scale: 1.0 }))
    }

    /// Mean over `axes`.
    ///
    /// Backward: `gx = broadcast(gy, x.shape) / n`, `n` the number of reduced elements.
    ///
    /// # Errors
    /// As [`Tensor::sum`], plus `EmptyTensor` when a reduced axis has size 0.
    pub fn mean(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        let axes = self.axes("mean", axes)?;
        let n: usize = axes.iter().map(|&a| self.shape()[a]).product();
        if n == 0 {
            return fail(ErrorKind::EmptyTensor { op: "mean", shape: self.shape().to_vec() });
        }
        let plan = Plan::new(self, &axes, keepdim);
        let inv = 1.0 / n as f32;
        let data: Vec<f32> =
            k::sum(plan.data.packed(), plan.outer, plan.red, plan.inner).into_iter().map(|v| v * inv).collect();
        let out = Tensor::from_parts(data, &plan.out);
        Ok(attach(out, &[self], || SumBackward { in_shape: self.shape().into(), kept: plan.kept.clone(), scale: inv }))
    }

    /// Sum of every element, as a rank-0 tensor.
    ///
    /// Backward: `gx = broadcast(gy, x.shape)`.
    pub fn sum_all(&self) -> Tensor {
        let total = self.with_data(|d| k::sum(d, 1, d.len(), 1)[0]);
        attach(Tensor::scalar(total), &[self], || SumBackward {
            in_shape: self.shape().into(),
            kept: Shape::new(),
            scale: 1.0,
        })
    }

    /// Mean of every element, as a rank-0 tensor.
    ///
    /// Backward: `gx = broadcast(gy, x.shape) / numel`.
    ///
    /// # Errors
    /// `EmptyTensor` on an empty tensor.
    pub fn mean_all(&self) -> Result<Tensor> {
        let n = self.numel();
        if n == 0 {
            return fail(ErrorKind::EmptyTensor { op: "mean_all", shape: self.shape().to_vec() });
        }
        let inv = 1.0 / n as f32;
        let total = self.with_data(|d| k::sum(d, 1, d.len(), 1)[0]) * inv;
        Ok(attach(Tensor::scalar(total), &[self], || SumBackward {
            in_shape: self.shape().into(),
            kept: Shape::new(),
            scale: inv,
        }))
    }
}

struct SumBackward {
    in_shape: Shape,
    kept: Shape,
    scale: f32,
}

impl Backward for SumBackward {
    fn name(&self) -> &'static str {
        if self.scale == 1.0 {
            "sum"
        } else {
            "mean"
        }
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        let _ = cx;
        let g = if self.scale == 1.0 { gy.clone() } else { gy.scale(self.scale) };
        let g = if self.kept.is_empty() && !self.in_shape.is_empty() {
            g.reshape(&vec![1; self.in_shape.len()])?
        } else {
            g.reshape(&self.kept)?
        };
        Ok(SmallVec::from_elem(Some(g.broadcast_to(&self.in_shape)?), 1))
    }
}
