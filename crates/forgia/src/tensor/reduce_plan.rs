//! How a reduction over a set of axes lays its input out for the kernels: packed as
//! `[outer, red, inner]` (a copy only when the reduced axes are not one contiguous block). The
//! reduction ops and the engine's sum of broadcast gradients both plan through it.

use super::layout::numel;
use super::{names, Array, Names, Shape};
use crate::error::Result;

/// A reduction laid out for the kernels: the input packed as `[outer, red, inner]`.
pub(crate) struct ReducePlan {
    /// Packed input (a copy only when the reduced axes were not one contiguous block).
    pub(crate) data: Array,
    pub(crate) outer: usize,
    pub(crate) red: usize,
    pub(crate) inner: usize,
    /// The output shape with reduced axes kept as 1.
    pub(crate) kept: Shape,
    /// The output shape as requested (`kept`, or with reduced axes removed).
    pub(crate) out: Shape,
    /// The output's axis names: the input's, less the reduced axes unless they are kept.
    pub(crate) names: Option<Names>,
}

impl ReducePlan {
    /// The reduction's result: `data` in the output shape, with the output's names.
    pub(crate) fn output(&self, data: Vec<f32>) -> Array {
        let mut out = Array::from_parts(data, &self.out);
        out.names = self.names.clone();
        out
    }

    /// Plans reducing `axes` (sorted, distinct) of `x` for `op` (named by its errors).
    ///
    /// # Errors
    /// `WorkLimitExceeded` / `OutOfMemory` when packing a broadcast input is too large.
    pub(crate) fn new(op: &'static str, x: &Array, axes: &[usize], keepdim: bool) -> Result<ReducePlan> {
        let shape = x.shape();
        let kept: Shape = shape.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
        let out: Shape = if keepdim {
            kept.clone()
        } else {
            shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
        };
        let block = axes.windows(2).all(|w| w[1] == w[0] + 1);
        let (data, outer, red, inner) = if axes.is_empty() {
            (x.contiguous_data(op)?, numel(shape), 1, 1)
        } else if block {
            let (a, b) = (axes[0], axes[axes.len() - 1] + 1);
            (x.contiguous_data(op)?, numel(&shape[..a]), numel(&shape[a..b]), numel(&shape[b..]))
        } else {
            // Kept axes first, reduced axes last, then pack.
            let perm: Vec<usize> = (0..shape.len()).filter(|i| !axes.contains(i)).chain(axes.iter().copied()).collect();
            let red: usize = axes.iter().map(|&a| shape[a]).product();
            // The kept sizes' product, not numel / red: that is 0 when a reduced axis is empty.
            let outer: usize = perm[..perm.len() - axes.len()].iter().map(|&a| shape[a]).product();
            let t = x.with_layout(x.layout.permuted(&perm)).contiguous_data(op)?;
            (t, outer, red, 1)
        };
        let names = if keepdim { x.names.clone() } else { names::without(x.names.as_ref(), axes) };
        Ok(ReducePlan { data, outer, red, inner, kept, out, names })
    }
}
