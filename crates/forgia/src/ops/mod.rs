//! Differentiable ops, one family per file: each op's checks, its forward through `kernels/`,
//! its documented backward formula and its record sit together.

pub(crate) mod activation;
pub(crate) mod attention;
pub(crate) mod binary;
pub(crate) mod compare;
pub(crate) mod conv;
pub(crate) mod diagonal;
pub(crate) mod dropout;
pub(crate) mod einsum;
pub(crate) mod elemental;
pub(crate) mod gated;
pub(crate) mod index;
pub(crate) mod join;
pub(crate) mod linear;
pub mod loss;
mod loss_elementwise;
mod loss_linear;
pub(crate) mod matmul;
pub(crate) mod norm;
mod operators;
pub(crate) mod piecewise_activation;
pub(crate) mod pool;
pub(crate) mod reduce;
pub(crate) mod reduce_ext;
pub(crate) mod rope;
pub(crate) mod scan;
pub(crate) mod scatter;
pub(crate) mod shape;
pub(crate) mod smooth_activation;
pub(crate) mod softmax;
pub(crate) mod sort;
pub(crate) mod ste;
pub(crate) mod unary;
pub(crate) mod unfold;
pub(crate) mod vector_norm;
pub(crate) mod where_;
