//! Register-blocked products for attention's per-head blocks (`64 × 64 × 32` in a character
//! transformer), where the `gemm` crate's fixed cost per call outweighs the arithmetic.
//!
//! This is the one hand-written product in the crate, kept private to attention: at these
//! sizes every operand of a head sits in L1/L2, so a 4 × 16 register tile (eight 8-lane
//! accumulators) and no packing beyond one transpose per block reaches most of the FMA peak.
//! It uses `f32::mul_add`, which is one instruction only inside
//! [`crate::kernels::simd::vectorized`] on a CPU with FMA ([`crate::kernels::simd::has_fma`]);
//! [`Products::Gemm`] is the path everywhere else (and for large heads).

use crate::kernels::gemm::{gemm, MatRef};
use crate::tensor::Scratch;

/// A row-major destination: element `(i, j)` is `data[off + i·ld + j]`. With `add` the
/// product is added to what is there (the grouped heads' key/value gradients), else it
/// overwrites it.
pub(super) struct Dest<'a> {
    pub(super) data: &'a mut [f32],
    pub(super) off: usize,
    pub(super) ld: usize,
    pub(super) add: bool,
}

/// The causal structure a product may exploit (query `i` sees keys `j <= i`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tri {
    /// Every `C[i, j]` is needed and every `A[i, p]` may be nonzero.
    Full,
    /// Only `C[i, j]` with `j <= i` is needed; the rest may be left unwritten.
    Cols,
    /// `A[i, p] = 0` for `p > i` (the caller stores those zeros).
    Lower,
    /// `A[i, p] = 0` for `p < i` (the caller stores those zeros).
    Upper,
}

/// Which kernel computes the products of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Products {
    /// The register-blocked tiles below (needs FMA, see the module doc).
    Tiles,
    /// The `gemm` crate, through a packed temporary when the destination is strided; ignores
    /// [`Tri`] (so it relies on the stored zeros and computes the unneeded entries too).
    Gemm,
}

/// Rows per register tile.
const MR: usize = 4;

/// `C = alpha · A B` (`C += alpha · A B` when `c.add`) for an `m × k` strided `A` and a `k × n` `B` whose rows are `ldb` apart
/// and contiguous (element `(p, j)` at `b[b_off + p·ldb + j]`).
#[inline(always)]
pub(super) fn matmul(
    how: Products,
    (m, n, k): (usize, usize, usize),
    a: MatRef<'_>,
    (b, b_off, ldb): (&[f32], usize, usize),
    c: Dest<'_>,
    alpha: f32,
    tri: Tri,
) {
    if how == Products::Gemm {
        return via_gemm((m, n, k), a, (b, b_off, ldb), c, alpha);
    }
    let mut c = c;
    for i0 in (0..m).step_by(MR) {
        let mr = MR.min(m - i0);
        let (klo, khi, nhi) = match tri {
            Tri::Full => (0, k, n),
            // Round up to whole 16-wide tiles: the extra entries are computed and ignored.
            Tri::Cols => (0, k, n.min((i0 + mr).next_multiple_of(16))),
            Tri::Lower => (0, k.min(i0 + mr), n),
            Tri::Upper => (k.min(i0), k, n),
        };
        let ks = klo..khi.max(klo);
        let mut j0 = 0;
        while j0 < nhi {
            let w = nhi - j0;
            j0 += if w >= 16 {
                rows::<16>(mr, (i0, j0), ks.clone(), a, (b, b_off, ldb), &mut c, alpha)
            } else if w >= 8 {
                rows::<8>(mr, (i0, j0), ks.clone(), a, (b, b_off, ldb), &mut c, alpha)
            } else {
                rows::<1>(mr, (i0, j0), ks.clone(), a, (b, b_off, ldb), &mut c, alpha)
            };
        }
    }
}

/// The `mr × NR` block of `C` at `(i0, j0)`: one 4-row tile, or `mr < 4` single rows.
/// Returns `NR`, the columns done.
#[inline(always)]
fn rows<const NR: usize>(
    mr: usize,
    (i0, j0): (usize, usize),
    ks: std::ops::Range<usize>,
    a: MatRef<'_>,
    b: (&[f32], usize, usize),
    c: &mut Dest<'_>,
    alpha: f32,
) -> usize {
    if mr == MR {
        tile::<MR, NR>((i0, j0), ks, a, b, c, alpha);
    } else {
        for i in i0..i0 + mr {
            tile::<1, NR>((i, j0), ks.clone(), a, b, c, alpha);
        }
    }
    NR
}

/// `C[i0.., j0..][..R, ..NR] = alpha · Σ_{p in ks} A[i, p] B[p, j]`, accumulated in registers.
#[inline(always)]
fn tile<const R: usize, const NR: usize>(
    (i0, j0): (usize, usize),
    ks: std::ops::Range<usize>,
    a: MatRef<'_>,
    (b, b_off, ldb): (&[f32], usize, usize),
    c: &mut Dest<'_>,
    alpha: f32,
) {
    let mut acc = [[0.0f32; NR]; R];
    // Attention's operands have non-negative strides (built by the caller from `Heads`).
    let (rs, cs) = (a.row_stride as usize, a.col_stride as usize);
    let a0 = a.offset + i0 * rs;
    for p in ks {
        let row: &[f32; NR] = b[b_off + p * ldb + j0..][..NR].try_into().expect("NR columns");
        let ap = a0 + p * cs;
        for r in 0..R {
            let x = a.data[ap + r * rs];
            for j in 0..NR {
                acc[r][j] = x.mul_add(row[j], acc[r][j]);
            }
        }
    }
    for r in 0..R {
        let at = c.off + (i0 + r) * c.ld + j0;
        let out: &mut [f32; NR] = (&mut c.data[at..at + NR]).try_into().expect("NR columns");
        if c.add {
            for j in 0..NR {
                out[j] += alpha * acc[r][j];
            }
        } else {
            for j in 0..NR {
                out[j] = alpha * acc[r][j];
            }
        }
    }
}

/// [`Products::Gemm`]: the `gemm` crate into `C` directly when it is packed, else into a
/// recycled temporary copied out row by row.
fn via_gemm(
    (m, n, k): (usize, usize, usize),
    a: MatRef<'_>,
    (b, b_off, ldb): (&[f32], usize, usize),
    c: Dest<'_>,
    alpha: f32,
) {
    let bm = MatRef { data: b, offset: b_off, row_stride: ldb as isize, col_stride: 1 };
    if c.ld == n {
        return gemm(m, n, k, a, bm, &mut c.data[c.off..], c.add, alpha);
    }
    // No larger than a block of the output or of the chunk's scratch, both allocated
    // fallibly by the caller before any product runs.
    let mut tmp = Scratch::within_checked(m * n);
    gemm(m, n, k, a, bm, &mut tmp, false, alpha);
    for (i, row) in tmp.chunks_exact(n.max(1)).take(m).enumerate() {
        let dst = &mut c.data[c.off + i * c.ld..][..n];
        if c.add {
            dst.iter_mut().zip(row).for_each(|(d, &e)| *d += e);
        } else {
            dst.copy_from_slice(row);
        }
    }
}
