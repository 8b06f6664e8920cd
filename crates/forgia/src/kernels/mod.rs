//! Math on pre-checked slices and layouts. Kernels never allocate a tensor, never fail and know
//! nothing about graphs; `ops/` validates inputs and wraps the results.

pub(crate) mod attention;
pub(crate) mod conv;
pub(crate) mod copy;
pub(crate) mod dropout;
pub(crate) mod fastmath;
pub(crate) mod gemm;
pub(crate) mod index;
pub(crate) mod loss;
pub(crate) mod norm;
pub(crate) mod pointwise;
pub(crate) mod pool;
pub(crate) mod reduce;
pub(crate) mod rope;
pub(crate) mod simd;
pub(crate) mod softmax;
pub(crate) mod ste;
