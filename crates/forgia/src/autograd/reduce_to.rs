//! Broadcast gradients summed back to an operand's shape. The engine does it once, when it
//! validates a record's output (as PyTorch's engine does in `validate_outputs`), so a record
//! returns each operand's gradient in the broadcast shape it computed and never reduces it
//! itself. In a `create_graph` pass the sum is recorded, and so is its adjoint (the broadcast
//! back), so gradients stay differentiable to any order.

use smallvec::SmallVec;

use super::node::{attach, Backward, Grads, VjpCtx};
use super::Tensor;
use crate::error::Result;
use crate::kernels::reduce as k;
use crate::tensor::{Layout, ReducePlan, Scratch, Shape};

/// True when `shape` broadcasts to `to` (NumPy rules: aligned from the right, each size equal
/// or 1), i.e. a gradient of shape `to` can be summed back to `shape`.
pub(super) fn expandable(shape: &[usize], to: &[usize]) -> bool {
    shape.len() <= to.len() && shape.iter().rev().zip(to.iter().rev()).all(|(&s, &t)| s == t || s == 1)
}

/// `g` summed over the axes along which `shape` was broadcast to `g`'s shape (the caller has
/// checked [`expandable`]): the leading extra axes and every axis where `shape` has size 1.
///
/// # Errors
/// `OutOfMemory` / `WorkLimitExceeded` when packing `g` is too large.
pub(super) fn sum_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let extra = g.rank() - shape.len();
    let axes: SmallVec<[usize; 4]> =
        (0..g.rank()).filter(|&i| i < extra || (shape[i - extra] == 1 && g.shape()[i] != 1)).collect();
    if axes.is_empty() {
        return Ok(g.clone()); // same shape
    }
    let plan = ReducePlan::new("sum_to_shape", g, &axes, true)?;
    let mut data = crate::tensor::zeroed("sum_to_shape", plan.outer * plan.inner)?;
    let mut scratch = Scratch::new("sum_to_shape", k::sum_scratch(plan.outer, plan.red, plan.inner))?;
    k::sum(plan.data.packed(), plan.outer, plan.red, plan.inner, &mut scratch, &mut data);
    let value = Tensor::from_parts(data, shape);
    Ok(attach(value, &[g], || SumTo { from: g.shape().into() }))
}

/// `g` (of `shape`) seen with the broadcast shape `to`: a free view, leading axes added.
fn expand_to(g: &Tensor, to: &[usize]) -> Tensor {
    let extra = to.len() - g.rank();
    let l = &g.layout;
    let padded = Layout {
        shape: std::iter::repeat_n(1, extra).chain(l.shape.iter().copied()).collect(),
        strides: std::iter::repeat_n(0, extra).chain(l.strides.iter().copied()).collect(),
        offset: l.offset,
    };
    let value = g.with_layout(padded.broadcast_to(to));
    attach(value, &[g], || ExpandTo { to: g.shape().into() })
}

/// The record of [`sum_to`]: backward broadcasts `gy` back to the summed gradient's shape.
struct SumTo {
    from: Shape,
}

impl Backward for SumTo {
    fn name(&self) -> &'static str {
        "sum_to_shape"
    }

    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(expand_to(gy, &self.from)));
        Ok(())
    }
}

/// The record of [`expand_to`]: backward sums `gy` back to the original shape.
struct ExpandTo {
    to: Shape,
}

impl Backward for ExpandTo {
    fn name(&self) -> &'static str {
        "expand_to_shape"
    }

    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(sum_to(gy, &self.to)?));
        Ok(())
    }
}
