//! Products with a small output and a long inner dimension — a weight's gradient `gyᵀ · x`
//! summed over thousands of rows — split along that inner dimension. The `gemm` crate threads
//! such a product over its few output tiles and joins its threads twice per inner-dimension
//! block; here each part is one independent product over a slice of the inner dimension (the
//! first into the output, the others into scratch the op hands in), and one vectorized pass
//! adds the parts, in a fixed order.
//!
//! The number of parts depends on the shape only, never on the thread count, so a product
//! gives the same bits on one thread (the serial backward option) as on the whole pool.

use rayon::prelude::*;

use super::{gemm_on, MatRef};
use crate::kernels::simd;
use crate::parallel;

/// The inner-dimension length of one part (the `gemm` crate's own inner block on AVX-512 is
/// 512 long for these shapes, so a part costs the crate one block boundary it had anyway).
const PART_K: usize = 512;
/// At most this many parts.
const MAX_PARTS: usize = 8;
/// Outputs of at most this many elements are split (larger ones have tiles enough for the
/// crate's own threading).
const MAX_SPLIT_OUTPUT: usize = 1 << 17;
/// Outputs of fewer elements are left to the crate (its vector–matrix paths).
const MIN_SPLIT_OUTPUT: usize = 1 << 8;
/// Outputs of fewer elements are split only when the inner dimension is at least
/// [`SMALL_OUTPUT_MIN_K`] long: with W6's 2048, the crate runs the 65×128 head gradient at
/// 168 µs unsplit against 196 µs split, while the main job's 32×25 convolution gradient over
/// 50,176 positions takes 1.93 ms unsplit against 0.67 ms split (`cargo bench -p forgia
/// --bench gemm -- weight_gradient`, 2 threads, quiet machine, 2026-12-01).
const SMALL_OUTPUT: usize = 1 << 14;
/// See [`SMALL_OUTPUT`].
const SMALL_OUTPUT_MIN_K: usize = 8 * PART_K;
/// Elements per chunk of the parallel pass that adds the parts.
const SUM_CHUNK: usize = 1 << 13;

/// How many parts an `m × n` product with inner dimension `k` is split into (1: not split):
/// a small output (`MIN_SPLIT_OUTPUT ..= MAX_SPLIT_OUTPUT` elements) with an inner dimension
/// at least twice its longer side and two parts long (eight parts long for outputs under
/// [`SMALL_OUTPUT`] elements).
fn parts(m: usize, n: usize, k: usize) -> usize {
    let mn = m.saturating_mul(n);
    if !(MIN_SPLIT_OUTPUT..=MAX_SPLIT_OUTPUT).contains(&mn) || k < 2 * PART_K || k / 2 < m.max(n) {
        return 1;
    }
    if mn < SMALL_OUTPUT && k < SMALL_OUTPUT_MIN_K {
        return 1;
    }
    (k / PART_K).min(MAX_PARTS)
}

/// Scratch floats [`gemm_split_k`] needs for this shape (0 when it does not split it).
pub(crate) fn split_k_scratch(m: usize, n: usize, k: usize) -> usize {
    (parts(m, n, k) - 1) * m * n
}

/// [`super::gemm`], with the inner dimension split in parts when the shape calls for it (see
/// the module doc). `scratch` holds at least [`split_k_scratch`]`(m, n, k)` floats of any value.
pub(crate) fn gemm_split_k(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    accumulate: bool,
    alpha: f32,
    scratch: &mut [f32],
) {
    // A broadcast operand makes the product a sum over `k` and an outer product: nothing to split.
    let parts = if super::has_broadcast_operand(m, n, k, &a, &b) { 1 } else { parts(m, n, k) };
    if parts == 1 {
        return super::gemm(m, n, k, a, b, c, accumulate, alpha);
    }
    assert!(a.fits(m, k) && b.fits(k, n), "gemm operand out of bounds");
    let mn = m * n; // at most MAX_SPLIT_OUTPUT
    assert!(c.len() >= mn && scratch.len() >= (parts - 1) * mn, "gemm output or scratch too small");
    let (c, scratch) = (&mut c[..mn], &mut scratch[..(parts - 1) * mn]);
    let threads = parallel::kernel_threads();
    // Parts run side by side; a thread count above the parts' is left to the crate inside each.
    let inner = (threads / parts).max(1);
    // Part `p` covers inner indices `lo..hi`, with `lo = p·k / parts`.
    let part = |p: usize, out: &mut [f32], accumulate: bool| {
        let (lo, hi) = (p * k / parts, (p + 1) * k / parts);
        gemm_on((m, n, hi - lo), (a.skip_cols(lo), b.skip_rows(lo)), (out, n), accumulate, alpha, inner);
    };
    parallel::install(|| {
        rayon::join(
            || part(0, c, accumulate),
            || scratch.par_chunks_mut(mn).enumerate().for_each(|(i, s)| part(i + 1, s, false)),
        );
        // c += part 1, then part 2, … : the same order for every element and thread count.
        let scratch = &*scratch;
        c.par_chunks_mut(SUM_CHUNK).enumerate().for_each(|(i, chunk)| {
            let (at, len) = (i * SUM_CHUNK, chunk.len());
            // Vectorized as wide as the CPU allows: the same adds, so the same bits.
            simd::vectorized(
                #[inline(always)]
                || {
                    for s in scratch.chunks_exact(mn) {
                        for (x, y) in chunk.iter_mut().zip(&s[at..at + len]) {
                            *x += *y;
                        }
                    }
                },
            )
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `a · b` in f64 for row-major operands.
    fn naive(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j])).sum();
            }
        }
        c
    }

    fn values(len: usize, salt: usize) -> Vec<f32> {
        (0..len).map(|i| ((i * 7 + salt) % 23) as f32 / 11.0 - 1.0).collect()
    }

    #[test]
    fn only_small_outputs_with_a_long_inner_dimension_are_split() {
        assert_eq!(parts(128, 128, 2048), 4); // W6: a weight's gradient over 2048 rows
        assert_eq!(parts(512, 128, 2048), 4);
        assert_eq!(parts(128, 128, 100_000), MAX_PARTS);
        assert_eq!(parts(2048, 128, 128), 1); // a forward product
        assert_eq!(parts(1024, 1024, 4096), 1); // output large enough for the crate
        assert_eq!(parts(1024, 128, 1024), 1); // inner dimension not twice the longer side
        assert_eq!(parts(4, 4, 100_000), 1); // a vector-like output
        assert_eq!(parts(65, 128, 2048), 1); // a small output over a short inner dimension
        assert_eq!(parts(32, 25, 50_176), MAX_PARTS); // … and over a long one
        assert_eq!(parts(128, 128, 1023), 1);
        assert_eq!(split_k_scratch(128, 128, 2048), 3 * 128 * 128);
        assert_eq!(split_k_scratch(2048, 128, 128), 0);
    }

    /// Odd sizes (parts of unequal length), a transposed left operand (strided, as `gyᵀ`),
    /// accumulation and `alpha`; every split shape against f64 and the unsplit product.
    #[test]
    fn split_products_match_the_unsplit_product_on_odd_and_transposed_shapes() {
        for &(m, n, k) in &[(17, 33, 4111), (128, 128, 2048), (31, 9, 4099), (16, 16, 4500)] {
            assert!(parts(m, n, k) > 1, "{m}x{n}x{k} is split");
            // `a` is stored transposed ([k, m] row-major) and read as its transposed view.
            let at = values(k * m, 1);
            let a: Vec<f32> = (0..m * k).map(|i| at[(i % k) * m + i / k]).collect();
            let b = values(k * n, 2);
            let old = values(m * n, 3);
            let av = MatRef { data: &at, offset: 0, row_stride: 1, col_stride: m as isize };
            let bv = MatRef { data: &b, offset: 0, row_stride: n as isize, col_stride: 1 };
            let mut scratch = vec![f32::NAN; split_k_scratch(m, n, k)];
            let (mut split, mut plain) = (old.clone(), old.clone());
            gemm_split_k(m, n, k, av, bv, &mut split, true, 0.5, &mut scratch);
            super::super::gemm(m, n, k, av, bv, &mut plain, true, 0.5);
            let want = naive(m, n, k, &a, &b);
            for i in 0..m * n {
                let w = f64::from(old[i]) + 0.5 * want[i];
                let tol = 1e-5 * (1.0 + want[i].abs()) * (k as f64).sqrt();
                assert!((f64::from(split[i]) - w).abs() <= tol, "{m}x{n}x{k} [{i}]: {} vs {w}", split[i]);
                assert!((split[i] - plain[i]).abs() as f64 <= tol, "{m}x{n}x{k} [{i}] against the crate");
            }
            // Without accumulation the old values (here NaN) are never read.
            let mut fresh = vec![f32::NAN; m * n];
            gemm_split_k(m, n, k, av, bv, &mut fresh, false, 0.5, &mut scratch);
            for i in 0..m * n {
                assert!(
                    (f64::from(fresh[i]) - 0.5 * want[i]).abs() <= 1e-5 * (1.0 + want[i].abs()) * (k as f64).sqrt()
                );
            }
        }
    }

    #[test]
    fn a_split_product_gives_the_same_bits_on_one_thread_as_on_the_pool() {
        let (m, n, k) = (64, 96, 5000);
        let (a, b) = (values(m * k, 4), values(k * n, 5));
        let av = MatRef { data: &a, offset: 0, row_stride: k as isize, col_stride: 1 };
        let bv = MatRef { data: &b, offset: 0, row_stride: n as isize, col_stride: 1 };
        let mut scratch = vec![0.0; split_k_scratch(m, n, k)];
        let mut pooled = vec![0.0; m * n];
        gemm_split_k(m, n, k, av, bv, &mut pooled, false, 1.0, &mut scratch);
        let serial = parallel::serially(|| {
            let mut c = vec![0.0; m * n];
            gemm_split_k(m, n, k, av, bv, &mut c, false, 1.0, &mut vec![0.0; split_k_scratch(m, n, k)]);
            c
        });
        assert_eq!(pooled, serial);
    }

    #[test]
    fn an_unsplit_shape_ignores_the_scratch_and_an_empty_inner_dimension_zeroes() {
        let (a, b) = (values(6, 1), values(6, 2));
        let av = MatRef { data: &a, offset: 0, row_stride: 3, col_stride: 1 };
        let bv = MatRef { data: &b, offset: 0, row_stride: 2, col_stride: 1 };
        let mut c = vec![9.0; 4];
        gemm_split_k(2, 2, 3, av, bv, &mut c, false, 1.0, &mut []);
        let want = naive(2, 2, 3, &a, &b);
        assert!(c.iter().zip(&want).all(|(x, w)| (f64::from(*x) - w).abs() < 1e-5));
        let mut c = vec![9.0; 4];
        gemm_split_k(2, 2, 0, av, bv, &mut c, false, 1.0, &mut []);
        assert_eq!(c, [0.0; 4]);
    }
}
