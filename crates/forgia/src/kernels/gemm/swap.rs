//! Products whose large operand the `gemm` crate would pack in a phase of its own, computed
//! as their transpose so that it packs the small one there instead.
//!
//! The crate computes a row-major `c = a · b` as `cᵀ = bᵀ · aᵀ`: `b` is the operand each
//! thread packs block by block inside its own jobs, `a` the one it packs, when `a` is a
//! transposed matrix, in a separate pass over the whole block before any job starts (written
//! out whole, then read back by every job). A weight's gradient `gyᵀ · x` with more outputs
//! than inputs (`[1024, 4096] · [4096, 256]`, W7's first layer) puts the 16 MiB `gyᵀ` in that
//! pass; computing `t = xᵀ · gy` (the crate packs the 4 MiB `x` there) and transposing the
//! 1 MiB `t` into `c` made that product 8% faster and W6's `[512, 2048] · [2048, 128]` 19%
//! (`cargo bench -p forgia --bench gemm -- weight_gradient`); with the same day's `exp`
//! change, W7 and W12 ran 0.986× and 0.987× their time before (builds alternated, their loops
//! aligned alike; 2026-12-04, AMD EPYC, 2 threads; docs/BENCHMARKS.md). The other way round
//! (a small `a`: W7's second layer) the swap was slower, and it is not taken.

use super::{crate_gemm, MatRef};
use crate::tensor::transpose::transpose;

/// Products of less work than this are left as they are: the swap was measured on large
/// products only (W7's `1024 × 256 × 4096`), where the scratch and the transpose of the output
/// cost little next to the product.
const MIN_WORK: usize = 1 << 26;

/// Whether `c = a · b` (`m × k` by `k × n`) is computed as the transpose of `bᵀ · aᵀ`: `a` is
/// a transposed matrix (row stride 1, column stride at least `m`: the crate would pack it in
/// its separate pass), `b` is row-major (column stride 1, row stride at least `n`: packed
/// inside the jobs, as `aᵀ` would be), `a` is at least twice the size of `b` (`m ≥ 2n`), and
/// the product is large. Depends on the shape and layout only, never on the thread count.
pub(crate) fn swaps(m: usize, n: usize, k: usize, a: &MatRef<'_>, b: &MatRef<'_>) -> bool {
    let transposed_a = a.row_stride == 1 && a.col_stride >= m as isize && m > 1;
    let row_major_b = b.col_stride == 1 && b.row_stride >= n as isize && n > 1;
    transposed_a && row_major_b && m >= 2 * n && m.saturating_mul(n).saturating_mul(k) >= MIN_WORK
}

/// `c = alpha · a · b` (the old `c` ignored) as `t = alpha · bᵀ · aᵀ` into scratch, then `t`
/// transposed into the packed row-major `m × n` `c`; the direct product where the scratch
/// (as large as `c`) cannot be allocated, which is slower but needs none: a failed allocation
/// here must not abort a product the caller could hold the result of.
pub(crate) fn product(
    (m, n, k): (usize, usize, usize),
    (a, b): (MatRef<'_>, MatRef<'_>),
    c: &mut [f32],
    alpha: f32,
    threads: usize,
) {
    product_with((m, n, k), (a, b), c, alpha, threads, scratch(n * m));
}

/// `len` floats of scratch, or `None` where they cannot be allocated.
fn scratch(len: usize) -> Option<Vec<f32>> {
    let mut t = Vec::new();
    t.try_reserve_exact(len).ok()?;
    t.resize(len, 0.0);
    Some(t)
}

/// [`product`] with the scratch `t` it allocated (`None`: the direct product).
fn product_with(
    (m, n, k): (usize, usize, usize),
    (a, b): (MatRef<'_>, MatRef<'_>),
    c: &mut [f32],
    alpha: f32,
    threads: usize,
    t: Option<Vec<f32>>,
) {
    let Some(mut t) = t else {
        return crate_gemm((m, n, k), (a, b), (c, n), false, alpha, threads);
    };
    let at = MatRef { row_stride: a.col_stride, col_stride: a.row_stride, ..a };
    let bt = MatRef { row_stride: b.col_stride, col_stride: b.row_stride, ..b };
    crate_gemm((n, m, k), (bt, at), (&mut t, m), false, alpha, threads);
    transpose(&t, n, m, m, &mut c[..m * n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[rows, cols]` integer-valued floats (every order of summation gives the same exact
    /// sums), stored with row stride `cols + pad` after `offset` leading floats.
    fn stored(rows: usize, cols: usize, pad: usize, offset: usize, seed: usize) -> Vec<f32> {
        (0..offset + rows * (cols + pad)).map(|i| ((i * 7 + seed) % 13) as f32 - 6.0).collect()
    }

    #[test]
    fn a_weight_gradient_with_more_outputs_than_inputs_is_computed_as_its_transpose() {
        // W7's first layer: `gyᵀ · x`, `gy` stored [4096, 1024], `x` stored [4096, 256].
        let (gy, x) = (vec![0.0; 4096 * 1024], vec![0.0; 4096 * 256]);
        let a = MatRef { data: &gy, offset: 0, row_stride: 1, col_stride: 1024 };
        let b = MatRef { data: &x, offset: 0, row_stride: 256, col_stride: 1 };
        assert!(swaps(1024, 256, 4096, &a, &b));
        // Its second layer, `gyᵀ · h` with `gy` [4096, 256] and `h` [4096, 1024]: the crate
        // already packs the small operand in its own pass.
        let a2 = MatRef { data: &gy, offset: 0, row_stride: 1, col_stride: 256 };
        let b2 = MatRef { data: &gy, offset: 0, row_stride: 1024, col_stride: 1 };
        assert!(!swaps(256, 1024, 4096, &a2, &b2), "a smaller transposed a");
        let wide_b = MatRef { data: &gy, offset: 0, row_stride: 1024, col_stride: 1 };
        assert!(swaps(1024, 512, 4096, &a, &wide_b), "a twice the size of b");
        assert!(!swaps(1024, 513, 4096, &a, &wide_b), "a less than twice b");
        let row_major_a = MatRef { data: &gy, offset: 0, row_stride: 4096, col_stride: 1 };
        assert!(!swaps(1024, 256, 4096, &row_major_a, &b), "a row-major a is packed inside the jobs already");
        let transposed_b = MatRef { data: &x, offset: 0, row_stride: 1, col_stride: 4096 };
        assert!(!swaps(1024, 256, 4096, &a, &transposed_b), "a transposed b");
        let broadcast_b = MatRef { data: &x, offset: 0, row_stride: 0, col_stride: 1 };
        assert!(!swaps(1024, 256, 4096, &a, &broadcast_b), "a broadcast b (row stride 0)");
        assert!(!swaps(1024, 256, 255, &a, &b), "less work than MIN_WORK");
        assert!(swaps(1024, 256, 256, &a, &b), "exactly MIN_WORK");
    }

    #[test]
    fn scratch_that_cannot_be_allocated_is_none_not_an_abort() {
        assert!(scratch(usize::MAX / 2).is_none());
        assert_eq!(scratch(3), Some(vec![0.0; 3]));
    }

    #[test]
    fn the_transposed_computation_gives_the_direct_product_on_one_and_two_threads() {
        // Edge tiles in every dimension, padded and offset operands, and alpha ≠ 1.
        for &(m, n, k, pad, offset, alpha) in &[(1024, 256, 256, 0, 0, 1.0), (1030, 300, 263, 5, 3, 0.5)] {
            // `a = gᵀ` with `g` stored [k, m]; `b` stored [k, n].
            let g = stored(k, m, pad, offset, 1);
            let x = stored(k, n, pad, offset, 2);
            let a = MatRef { data: &g, offset, row_stride: 1, col_stride: (m + pad) as isize };
            let b = MatRef { data: &x, offset, row_stride: (n + pad) as isize, col_stride: 1 };
            assert!(swaps(m, n, k, &a, &b), "{m}x{n}x{k}");
            let mut want = vec![0.0; m * n];
            crate_gemm((m, n, k), (a, b), (&mut want, n), false, alpha, 1);
            let exact = |i: usize, j: usize| alpha * (0..k).map(|p| a.at(i, p) * b.at(p, j)).sum::<f32>();
            for (i, j) in [(0, 0), (m - 1, n - 1), (m / 2, n / 3), (7, n - 2)] {
                assert_eq!(want[i * n + j], exact(i, j), "{m}x{n}x{k}: the direct product at ({i}, {j})");
            }
            for threads in [1, 2] {
                let mut c = vec![f32::NAN; m * n];
                product((m, n, k), (a, b), &mut c, alpha, threads);
                assert_eq!(c, want, "{m}x{n}x{k} on {threads} threads");
                // Without room for the scratch: the direct product.
                let mut c = vec![f32::NAN; m * n];
                product_with((m, n, k), (a, b), &mut c, alpha, threads, None);
                assert_eq!(c, want, "{m}x{n}x{k} on {threads} threads, no scratch");
            }
            let mut through_gemm = vec![f32::NAN; m * n];
            crate::kernels::gemm::gemm(m, n, k, a, b, &mut through_gemm, false, alpha);
            assert_eq!(through_gemm, want, "{m}x{n}x{k} through gemm");
        }
    }
}
