//! The softmax family along one axis: `softmax`, `log_softmax` and `masked_softmax` (a scale,
//! an additive and a boolean mask first; a line masked out entirely gives zeros), numerically
//! stable (each line is shifted by its maximum). The records read only the saved output.

use super::reduce::{scalar_as_vector, Plan};
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{check, fail, ErrorKind, Result};
use crate::kernels::softmax as k;
use crate::tensor::layout::broadcast_shapes;
use crate::tensor::{Array, Axes, Axis};

/// Options of [`Tensor::masked_softmax`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MaskedSoftmaxOptions<'a> {
    /// Multiplies the input before the masks are applied; 1 when `None`.
    pub scale: Option<f32>,
    /// An additive mask broadcastable to the input's shape (`-inf` blocks an entry); it
    /// receives a gradient like any operand.
    pub mask: Option<&'a Tensor>,
    /// A boolean mask broadcastable to the input's shape: an f32 tensor whose nonzero entries
    /// mean *keep* (the project's mask convention, what the comparison ops return); zero
    /// entries are blocked.
    pub bool_mask: Option<&'a Tensor>,
}

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

impl Tensor {
    /// `softmax(scale · x + mask)` along `axis`, with the entries where `bool_mask` is zero
    /// blocked (as `-inf`). Unlike [`Tensor::softmax`], a line whose entries are all blocked
    /// gives zeros, not NaN (PyTorch's masked softmax does the same); a NaN stays NaN.
    ///
    /// Backward (from the saved output `y`): `gz = y * (gy - sum(gy * y, axis))`,
    /// `gx = scale · gz`, `gmask = sum_to(gz, mask.shape)`; the boolean mask gets none.
    /// Differentiable to any order.
    ///
    /// ```
    /// use forgia::{MaskedSoftmaxOptions, Tensor};
    /// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
    /// let keep = Tensor::from_vec(vec![1.0, 0.0, 1.0], &[3])?;
    /// let y = x.masked_softmax(0, MaskedSoftmaxOptions { bool_mask: Some(&keep), ..Default::default() })?;
    /// assert_eq!(y.to_vec()[1], 0.0);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis; `ShapeMismatch` when a mask does
    /// not broadcast to the input's shape; `InvalidArgument` for a non-finite scale.
    pub fn masked_softmax(&self, axis: impl Into<Axis>, opts: MaskedSoftmaxOptions<'_>) -> Result<Tensor> {
        const OP: &str = "masked_softmax";
        let axis = axis.into();
        if let Some(v) = scalar_as_vector(self, OP, &Axes(vec![axis.clone()]))? {
            let as_vector = |m: Option<&Tensor>| -> Result<Option<Tensor>> {
                match m {
                    Some(m) if m.rank() > 0 => {
                        fail(ErrorKind::ShapeMismatch { op: OP, lhs: vec![], rhs: m.shape().to_vec() })
                    }
                    Some(m) => Ok(Some(m.reshape(&[1])?)),
                    None => Ok(None),
                }
            };
            let (mask, bool_mask) = (as_vector(opts.mask)?, as_vector(opts.bool_mask)?);
            let o = MaskedSoftmaxOptions { scale: opts.scale, mask: mask.as_ref(), bool_mask: bool_mask.as_ref() };
            return v.masked_softmax(0, o)?.reshape(&[]);
        }
        let a = self.axis(OP, axis)?;
        for m in [opts.mask, opts.bool_mask].into_iter().flatten() {
            let fits = broadcast_shapes(OP, self.shape(), m.shape()).is_ok_and(|s| s.as_slice() == self.shape());
            if !fits {
                return fail(ErrorKind::ShapeMismatch { op: OP, lhs: self.shape().to_vec(), rhs: m.shape().to_vec() });
            }
        }
        let mut z = match opts.scale {
            Some(s) => {
                check::finite(OP, "scale", s)?;
                self.scale(s)
            }
            None => self.clone(),
        };
        if let Some(m) = opts.mask {
            z = z.add(m)?;
        }
        if let Some(keep) = opts.bool_mask {
            z = z.add(&Tensor::where_(keep, &Tensor::scalar(0.0), &Tensor::scalar(f32::NEG_INFINITY))?)?;
        }
        z.softmax_blocked(a)
    }

    /// Softmax along axis `a` where a line of `-inf` (blocked everywhere) gives zeros; the
    /// same record as [`Tensor::softmax`] (differentiable to any order).
    pub(crate) fn softmax_blocked(&self, a: usize) -> Result<Tensor> {
        let plan = Plan::new("masked_softmax", self, &[a], true)?;
        let mut data = crate::tensor::buffer("masked_softmax", self.numel())?;
        let dims = (plan.outer, plan.red, plan.inner);
        k::softmax(plan.data.packed(), dims, false, &mut data);
        k::zero_blocked_lines(plan.data.packed(), dims, &mut data);
        let y = Tensor::from_parts(data, self.shape());
        let saved = y.detach();
        Ok(attach(y, &[self], || SoftmaxBackward { y: saved.value(), axis: a, log: false }))
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

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
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
        out.push(Some(gx));
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        3 * self.y.numel()
    }
}
