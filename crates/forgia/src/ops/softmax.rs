//! The softmax family along one axis: `softmax` and `log_softmax`, numerically stable (each
//! line is shifted by its maximum). Both records read only the saved output.

use smallvec::SmallVec;

use super::reduce::{scalar_as_vector, Plan};
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::Result;
use crate::kernels::softmax as k;
use crate::tensor::{Array, Axes, Axis};

/// Runs the forward kernel along axis `a` of `x` (no node).
fn forward(x: &Tensor, a: usize, log: bool) -> Result<Tensor> {
    let plan = Plan::new(if log { "log_softmax" } else { "softmax" }, x, &[a], true)?;
    let mut data = crate::tensor::buffer(if log { "log_softmax" } else { "softmax" }, x.numel())?;
    k::softmax(plan.data.packed(), (plan.outer, plan.red, plan.inner), log, &mut data);
    let mut y = Tensor::from_parts(data, x.shape());
    y.names = x.names.clone();
    Ok(y)
}

impl Tensor {
    /// `softmax(x)_i = exp(x_i) / Σ_j exp(x_j)` along `axis`.
    ///
    /// Backward (from the saved output): `gx = y * (gy - sum(gy * y, axis))`.
    ///
    /// ```
    /// let x = forgia::Tensor::from_vec(vec![0.0, 0.0], &[2])?;
    /// assert_eq!(x.softmax(0)?.to_vec(), vec![0.5, 0.5]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis.
    pub fn softmax(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        let axis = axis.into();
        if let Some(v) = scalar_as_vector(self, "softmax", &Axes(vec![axis.clone()]))? {
            return v.softmax(0)?.reshape(&[]);
        }
        let a = self.axis("softmax", axis)?;
        let y = forward(self, a, false)?;
        let saved = y.detach();
        Ok(attach(y, &[self], || SoftmaxBackward { y: saved.value(), axis: a, log: false }))
    }

    /// `log_softmax(x)_i = x_i - log Σ_j exp(x_j)` along `axis`.
    ///
    /// Backward (from the saved output): `gx = gy - exp(y) * sum(gy, axis)`.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis.
    pub fn log_softmax(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        let axis = axis.into();
        if let Some(v) = scalar_as_vector(self, "log_softmax", &Axes(vec![axis.clone()]))? {
            return v.log_softmax(0)?.reshape(&[]);
        }
        let a = self.axis("log_softmax", axis)?;
        let y = forward(self, a, true)?;
        let saved = y.detach();
        Ok(attach(y, &[self], || SoftmaxBackward { y: saved.value(), axis: a, log: true }))
    }
}

struct SoftmaxBackward {
    y: Array,
    axis: usize,
    log: bool,
}

impl Backward for SoftmaxBackward {
    fn name(&self) -> &'static str {
        if self.log {
            "log_softmax"
        } else {
            "softmax"
        }
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        let gx = if cx.create_graph() {
            // Differentiable: the same formulas in tensor ops over the reconnected output.
            let y = cx.output(&self.y);
            if self.log {
                // softmax(log_softmax(x)) = softmax(x): differentiable through this node.
                gy.sub(&y.softmax(self.axis)?.mul(&gy.sum(self.axis, true)?)?)?
            } else {
                y.mul(&gy.sub(&gy.mul(&y)?.sum(self.axis, true)?)?)?
            }
        } else {
            let plan = Plan::new(self.name(), &self.y, &[self.axis], true)?;
            let g = gy.contiguous_data(self.name())?;
            let mut data = crate::tensor::buffer(self.name(), gy.numel())?;
            k::softmax_backward(
                (plan.data.packed(), g.packed()),
                (plan.outer, plan.red, plan.inner),
                self.log,
                &mut data,
            );
            Tensor::from_parts(data, gy.shape())
        };
        Ok(SmallVec::from_elem(Some(gx), 1))
    }

    fn estimated_work(&self) -> usize {
        3 * self.y.numel()
    }
}
