//! Math on pre-checked slices and layouts. Kernels never allocate a tensor, never fail and know
//! nothing about graphs; `ops/` validates inputs and wraps the results.

pub(crate) mod attention;
pub(crate) mod compare;
pub(crate) mod conv;
pub(crate) mod copy;
pub(crate) mod dropout;
pub(crate) mod fastmath;
pub(crate) mod gemm;
pub(crate) mod index;
pub(crate) mod lanes;
pub(crate) mod loss;
pub(crate) mod norm;
pub(crate) mod pointwise;
pub(crate) mod pool;
pub(crate) mod reduce;
pub(crate) mod rope;
pub(crate) mod scan;
pub(crate) mod scatter;
pub(crate) mod simd;
pub(crate) mod softmax;
pub(crate) mod sort;
pub(crate) mod ste;
pub(crate) mod unfold;

/// The first `n` consecutive chunks of `len` floats of `buf` (empty ones when `len` is 0): how
/// the parallel kernels hand each part of their work its own slice of one scratch buffer.
pub(crate) fn split_len(buf: &mut [f32], n: usize, len: usize) -> Vec<&mut [f32]> {
    let mut rest = buf;
    (0..n)
        .map(|_| {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
            rest = tail;
            head
        })
        .collect()
}
