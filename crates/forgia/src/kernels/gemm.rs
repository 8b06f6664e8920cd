//! Matrix products through the `gemm` crate. Operands are strided views: a transposed operand
//! is a swap of its strides, never a copy.

use crate::parallel::{self, PARALLEL_GEMM_WORK};
use crate::tensor::Size;

/// A strided matrix operand inside a slice: element `(i, j)` is at
/// `offset + i * row_stride + j * col_stride`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatRef<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) offset: usize,
    pub(crate) row_stride: isize,
    pub(crate) col_stride: isize,
}

impl MatRef<'_> {
    /// True when a `rows × cols` read lies inside `data`: one past its largest offset, computed
    /// with checked arithmetic ([`Size::end`], so no size near `usize::MAX` wraps it), is at
    /// most `data.len()`; an empty read touches nothing (an empty view's offset may lie past
    /// the end of its storage). Panics on negative strides (an internal invariant: `ops/` only
    /// builds non-negative ones).
    fn fits(&self, rows: usize, cols: usize) -> bool {
        assert!(self.row_stride >= 0 && self.col_stride >= 0, "gemm operands have non-negative strides");
        Size::end(self.offset, rows, cols, self.row_stride as usize, self.col_stride as usize)
            .is_some_and(|end| end <= self.data.len())
    }
}

mod broadcast;
mod split_k;
mod swap;

pub(crate) use broadcast::has_broadcast_operand;
pub(crate) use split_k::{gemm_split_k, split_k_scratch};

impl<'a> MatRef<'a> {
    /// The same matrix with its first `rows` rows dropped.
    fn skip_rows(self, rows: usize) -> MatRef<'a> {
        MatRef { offset: self.offset + rows * self.row_stride as usize, ..self }
    }

    /// Element `(i, j)`. Panics outside `data` (an internal invariant: callers read inside a
    /// shape checked with `fits`).
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[self.offset + i * self.row_stride as usize + j * self.col_stride as usize]
    }

    /// The same matrix with its first `cols` columns dropped.
    fn skip_cols(self, cols: usize) -> MatRef<'a> {
        MatRef { offset: self.offset + cols * self.col_stride as usize, ..self }
    }
}

/// `c = beta_c * c + alpha * a · b` for an `m × k` `a` and a `k × n` `b`, into the packed
/// row-major `m × n` block `c`. With `accumulate == false` the old `c` is ignored.
///
/// The result does not depend on the number of threads: the `gemm` crate splits the output
/// between threads, never the inner dimension, so every element sums its products in the same
/// order.
pub(crate) fn gemm(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    accumulate: bool,
    alpha: f32,
) {
    on_threads((m, n, k), |threads| gemm_on((m, n, k), (a, b), (c, n), accumulate, alpha, threads))
}

/// [`gemm()`] into an `m × n` block of `c` whose rows are `ldc ≥ n` floats apart (element
/// `(i, j)` at `i·ldc + j`): a band of a larger matrix written where it lies, by the crate's
/// product (the floats between the rows are left as they are).
pub(crate) fn gemm_rows(
    (m, n, k): (usize, usize, usize),
    (a, b): (MatRef<'_>, MatRef<'_>),
    (c, ldc): (&mut [f32], usize),
    accumulate: bool,
    alpha: f32,
) {
    on_threads((m, n, k), |threads| gemm_on((m, n, k), (a, b), (c, ldc), accumulate, alpha, threads))
}

/// Runs `f(threads)`: on the library's pool with every kernel thread for a product of at
/// least [`PARALLEL_GEMM_WORK`] multiply-adds, else on the calling thread (denormals flushed,
/// as the crate does on its own threads).
fn on_threads((m, n, k): (usize, usize, usize), f: impl FnOnce(usize) + Send) {
    let work = m.saturating_mul(n).saturating_mul(k);
    let threads = if work >= PARALLEL_GEMM_WORK { parallel::kernel_threads() } else { 1 };
    if threads > 1 {
        parallel::install(|| f(threads))
    } else {
        let _flush = parallel::FlushDenormals::new();
        f(1)
    }
}

/// Products with at least this many rows read a transposed `b` from a packed copy (see
/// [`packs_b`]).
const PACK_B_MIN_ROWS: usize = 16;

/// Whether an `m`-row product should read `b` from a packed row-major copy ([`pack_b`], into
/// a buffer the op allocates): when `b` is a transposed matrix (`Wᵀ` read in place: row
/// stride 1, column stride at least `k`) and the product has [`PACK_B_MIN_ROWS`] rows or more.
///
/// The `gemm` crate computes a row-major product as its transpose, so `b` becomes the operand
/// it loads in vectors along the output's rows; when `b` is not contiguous along them the
/// crate packs it one element at a time, on every thread that needs it. Transposing it first
/// with the blocked `tensor::transpose` costs a fraction of that (`cargo bench -p forgia --bench gemm --
/// transposed_rhs`; figures in docs/BENCHMARKS.md).
pub(crate) fn packs_b(m: usize, n: usize, k: usize, b: &MatRef<'_>) -> bool {
    // A column stride below `k` is no transposed matrix: a broadcast (stride 0) or overlapping
    // view, read in place as before.
    b.row_stride == 1 && k >= 2 && b.col_stride >= k as isize && m >= PACK_B_MIN_ROWS && n > 0
}

/// `b` (`k × n`, a transposed matrix: see [`packs_b`]) transposed into the first `k · n`
/// floats of `dst`, returned as the packed operand that reads them.
///
/// Panics when `b` does not have row stride 1, or a slice is too short (internal invariants).
pub(crate) fn pack_b<'d>(n: usize, k: usize, b: MatRef<'_>, dst: &'d mut [f32]) -> MatRef<'d> {
    assert!(b.row_stride == 1 && b.fits(k, n), "pack_b: not an in-bounds transposed matrix");
    assert!(dst.len() >= k * n, "pack_b: destination too small");
    // `b`'s storage is the row-major `n × k` matrix (row stride `col_stride`) it transposes.
    crate::tensor::transpose::transpose(&b.data[b.offset..], n, k, b.col_stride as usize, dst);
    MatRef { data: dst, offset: 0, row_stride: n as isize, col_stride: 1 }
}

/// [`gemm()`] on the calling thread into rows of `c` that are `ldc ≥ n` floats apart (`n` for
/// [`gemm()`], more for [`gemm_rows`]), letting the crate split the output over `threads`
/// threads of the current rayon pool (the caller is on the library's pool when `threads > 1`).
/// Into a packed block, a product with a broadcast operand is computed without the full
/// product (`broadcast`), and some run as their transpose (`swap`).
fn gemm_on(
    (m, n, k): (usize, usize, usize),
    (a, b): (MatRef<'_>, MatRef<'_>),
    (c, ldc): (&mut [f32], usize),
    accumulate: bool,
    alpha: f32,
    threads: usize,
) {
    assert!(a.fits(m, k) && b.fits(k, n), "gemm operand out of bounds");
    assert!(rows_fit(m, n, (c.len(), ldc)), "gemm output too small, or its rows {ldc} apart overlap rows of {n}");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            c.chunks_mut(ldc).take(m).for_each(|row| row[..n].fill(0.0));
        }
        return;
    }
    let packed = ldc == n;
    if packed && !accumulate && broadcast::product(m, n, k, a, b, c, alpha) {
        return;
    }
    if packed && !accumulate && swap::swaps(m, n, k, &a, &b) {
        return swap::product((m, n, k), (a, b), c, alpha, threads);
    }
    crate_gemm((m, n, k), (a, b), (c, ldc), accumulate, alpha, threads);
}

/// True when an `m × n` block whose rows are `ldc` floats apart fits a slice of `len` floats
/// without its rows overlapping: `ldc ≥ n` and `(m - 1)·ldc + n ≤ len` (checked, so no size
/// near `usize::MAX` wraps it; an empty block always fits).
fn rows_fit(m: usize, n: usize, (len, ldc): (usize, usize)) -> bool {
    let end = m.checked_sub(1).map_or(Some(0), |r| r.checked_mul(ldc).and_then(|r| r.checked_add(n)));
    ldc >= n && end.is_some_and(|end| len >= end)
}

/// The `gemm` crate's product, `c = c · [accumulate] + alpha · a · b`, for non-empty sizes
/// `(m, n, k)`, into the `m × n` block of `c` whose rows are `ldc ≥ n` floats apart (`n`: a
/// packed block).
fn crate_gemm(
    (m, n, k): (usize, usize, usize),
    (a, b): (MatRef<'_>, MatRef<'_>),
    (c, ldc): (&mut [f32], usize),
    accumulate: bool,
    alpha: f32,
    threads: usize,
) {
    assert!(m > 0 && n > 0 && k > 0 && a.fits(m, k) && b.fits(k, n), "crate_gemm: empty or out-of-bounds operand");
    assert!(rows_fit(m, n, (c.len(), ldc)), "gemm output too small, or its rows overlap");
    let par = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    // The instruction set in force, fixed before the crate's first product chooses its own.
    crate::runtime::isa();
    // SAFETY: the bounds of every operand were asserted above for the given strides and
    // sizes, with checked arithmetic (an offset that would pass `usize::MAX` fails the
    // assert instead of wrapping), and m, n, k > 0 here so the asserted ranges include
    // each operand's offset and every element the kernel reads; `c` is an exclusive m × n
    // block (row stride ldc ≥ n, column stride 1, inside `c` by the assertion) that aliases
    // neither input (it is a `&mut` borrow distinct from the `&` inputs).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            ldc as isize,
            accumulate,
            a.data.as_ptr().add(a.offset),
            a.col_stride,
            a.row_stride,
            b.data.as_ptr().add(b.offset),
            b.col_stride,
            b.row_stride,
            1.0,
            alpha,
            false,
            false,
            false,
            par,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    #[test]
    fn matches_a_triple_loop_on_odd_sizes() {
        for &(m, n, k) in &[(1, 1, 1), (7, 33, 5), (33, 7, 257), (257, 1, 7)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 - 6.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 - 3.0).collect();
            let mut c = vec![0.0; m * n];
            let ar = MatRef { data: &a, offset: 0, row_stride: k as isize, col_stride: 1 };
            let br = MatRef { data: &b, offset: 0, row_stride: n as isize, col_stride: 1 };
            gemm(m, n, k, ar, br, &mut c, false, 1.0);
            assert_eq!(c, naive(m, n, k, &a, &b), "{m}x{n}x{k}");
        }
    }

    #[test]
    fn a_transposed_right_operand_packed_first_gives_the_in_place_product() {
        // Integer-valued inputs: every order of summation gives the same exact result.
        for &(m, n, k, pad) in &[(16, 2, 3, 0), (16, 9, 13, 3), (40, 33, 70, 0), (64, 256, 256, 0), (300, 17, 9, 1)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 - 6.0).collect();
            // `w` stored [n, k] with row stride k + pad; `b = wᵀ` read in place.
            let ld = k + pad;
            let w: Vec<f32> = (0..n * ld).map(|i| (i % 7) as f32 - 3.0).collect();
            let b_packed: Vec<f32> = (0..k * n).map(|i| w[(i % n) * ld + i / n]).collect();
            let ar = MatRef { data: &a, offset: 0, row_stride: k as isize, col_stride: 1 };
            let bt = MatRef { data: &w, offset: 0, row_stride: 1, col_stride: ld as isize };
            assert!(packs_b(m, n, k, &bt), "{m}x{n}x{k}: a transposed operand of a {m}-row product is packed");
            let mut dst = vec![f32::NAN; k * n];
            let packed = pack_b(n, k, bt, &mut dst);
            assert_eq!(packed.data, &b_packed[..], "{m}x{n}x{k}: the packed copy is bᵀᵀ");
            let (mut c_packed, mut c_in_place) = (vec![0.0; m * n], vec![0.0; m * n]);
            gemm(m, n, k, ar, packed, &mut c_packed, false, 1.0);
            gemm(m, n, k, ar, bt, &mut c_in_place, false, 1.0);
            assert_eq!(c_packed, c_in_place, "{m}x{n}x{k}");
            assert_eq!(c_packed, naive(m, n, k, &a, &b_packed), "{m}x{n}x{k}");
        }
        let w = [1.0f32; 64];
        let bt = MatRef { data: &w, offset: 0, row_stride: 1, col_stride: 8 };
        assert!(!packs_b(15, 8, 8, &bt), "a product of few rows reads the operand in place");
        let b = MatRef { data: &w, offset: 0, row_stride: 8, col_stride: 1 };
        assert!(!packs_b(64, 8, 8, &b), "a row-major operand is read in place");
        let broadcast = MatRef { data: &w, offset: 0, row_stride: 1, col_stride: 0 };
        assert!(!packs_b(64, 8, 8, &broadcast), "a column broadcast (stride 0) is read in place");
        let overlapping = MatRef { data: &w, offset: 0, row_stride: 1, col_stride: 4 };
        assert!(!packs_b(64, 8, 8, &overlapping), "a view whose columns overlap is read in place");
    }

    #[test]
    fn a_product_into_rows_of_a_larger_matrix_writes_its_block_and_nothing_else() {
        // Small and threaded sizes; overwritten and accumulated; an empty inner size.
        for &(m, n, k, ldc) in &[(3, 5, 7, 9), (64, 448, 147, 12544 / 8), (17, 40, 0, 41)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 - 6.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 - 3.0).collect();
            let ar = MatRef { data: &a, offset: 0, row_stride: k as isize, col_stride: 1 };
            let br = MatRef { data: &b, offset: 0, row_stride: n as isize, col_stride: 1 };
            let want = naive(m, n, k, &a, &b);
            for accumulate in [false, true] {
                let mut c: Vec<f32> = (0..m * ldc + 3).map(|i| (i % 5) as f32).collect();
                let before = c.clone();
                gemm_rows((m, n, k), (ar, br), (&mut c[3..], ldc), accumulate, 1.0);
                for (i, (&got, &was)) in c.iter().zip(&before).enumerate() {
                    let (r, j) = ((i.wrapping_sub(3)) / ldc, (i.wrapping_sub(3)) % ldc);
                    let expect = if i < 3 || r >= m || j >= n {
                        was
                    } else {
                        want[r * n + j] + if accumulate { was } else { 0.0 }
                    };
                    assert_eq!(got, expect, "{m}x{n}x{k} into rows {ldc} apart, accumulate {accumulate}: float {i}");
                }
            }
        }
    }
}
