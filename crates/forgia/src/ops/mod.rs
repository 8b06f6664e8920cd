//! Differentiable ops, one family per file: each op's checks, its forward through `kernels/`,
//! its documented backward formula and its record sit together.

pub(crate) mod activation;
pub(crate) mod attention;
pub(crate) mod binary;
pub(crate) mod conv;
pub(crate) mod dropout;
pub(crate) mod einsum;
pub(crate) mod elemental;
pub(crate) mod index;
pub(crate) mod join;
pub(crate) mod linear;
pub mod loss;
mod loss_elementwise;
pub(crate) mod matmul;
pub(crate) mod norm;
mod operators;
pub(crate) mod pool;
pub(crate) mod reduce;
pub(crate) mod reduce_ext;
pub(crate) mod rope;
pub(crate) mod shape;
pub(crate) mod softmax;
pub(crate) mod ste;
pub(crate) mod unary;
pub(crate) mod where_;

use crate::autograd::Tensor;
use crate::error::Result;

/// Sums a broadcast gradient back to an operand's `shape`: the one helper every broadcasting
/// op's backward uses. Differentiable (a sum over the stretched axes, then a reshape).
pub(crate) fn sum_to_shape(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let extra = g.rank() - shape.len();
    let axes: Vec<usize> =
        (0..g.rank()).filter(|&i| i < extra || (shape[i - extra] == 1 && g.shape()[i] != 1)).collect();
    let summed = if axes.is_empty() { g.clone() } else { g.sum(axes, true)? };
    summed.reshape(shape)
}
