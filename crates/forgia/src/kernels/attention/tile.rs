//! Register-blocked products for attention's per-head blocks (`64 × 64 × 32` in a character
//! transformer), where the `gemm` crate's fixed cost per call outweighs the arithmetic.
//!
//! This is the one hand-written product in the crate, kept private to attention: at these
//! sizes every operand of a head sits in L1/L2, so a register tile and no packing beyond one
//! transpose per block does the work. On x86-64 the tiles are the intrinsics of
//! [`super::wide`] (`8 × 32` with AVX-512, `6 × 16` with AVX2 and FMA); elsewhere a 4 × 16
//! tile in plain Rust, which uses
//! `f32::mul_add` (one instruction only inside [`crate::kernels::simd::vectorized`] on a CPU
//! with FMA, [`crate::kernels::simd::has_fma`]). Both sum every element's products in the same
//! order with the same fused multiply-add, so they give the same bits. [`Products::Gemm`] is
//! the path everywhere else (and for large heads).

use super::wide::{self, Block};
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
    /// The register-blocked tiles (needs FMA, see the module doc): the intrinsic ones of
    /// [`wide`] when the CPU has AVX-512 or AVX2, else the 8-lane ones below.
    Tiles,
    /// The 8-lane tiles below even where [`wide`] has tiles (to test that both give the same
    /// bits).
    #[cfg(test)]
    Tiles8,
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
    if let (Products::Tiles, Some(tier)) = (how, wide::tier()) {
        return matmul_wide(tier, (m, n, k), a, (b, b_off, ldb), c, alpha, tri);
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

/// The inner range and the columns a block of `mr` rows from `i0` needs (see [`Tri`]; the
/// bounds hold for every row of the block).
#[inline(always)]
fn block_bounds(tri: Tri, (i0, mr): (usize, usize), (n, k): (usize, usize)) -> (usize, usize, usize) {
    match tri {
        Tri::Full => (0, k, n),
        // Round up to whole 16-wide tiles: the extra entries are computed and ignored.
        Tri::Cols => (0, k, n.min((i0 + mr).next_multiple_of(16))),
        Tri::Lower => (0, k.min(i0 + mr), n),
        Tri::Upper => (k.min(i0), k, n),
    }
}

/// True when `offset + (rows - 1)·rs + (cols - 1)·cs < len` (checked arithmetic), or the block
/// is empty.
fn inside(len: usize, offset: usize, (rows, cols): (usize, usize), (rs, cs): (usize, usize)) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    let last = (rows - 1).checked_mul(rs).and_then(|r| (cols - 1).checked_mul(cs).and_then(|c| r.checked_add(c)));
    last.and_then(|l| l.checked_add(offset)).is_some_and(|end| end < len)
}

/// [`matmul`] on the intrinsic tiles of [`wide`]: blocks of the tier's full rows by two or one
/// vectors of columns, the last columns (fewer than a vector) by the 8-lane tiles (inlined,
/// like [`matmul`], into the caller's AVX2 + FMA code).
#[inline(always)]
fn matmul_wide(
    tier: wide::Tier,
    (m, n, k): (usize, usize, usize),
    a: MatRef<'_>,
    (b, b_off, ldb): (&[f32], usize, usize),
    mut c: Dest<'_>,
    alpha: f32,
    tri: Tri,
) {
    let (rs, cs) = (a.row_stride as usize, a.col_stride as usize);
    // Every block below reads and writes inside these ranges (the triangles only shrink them).
    assert!(
        a.row_stride >= 0
            && a.col_stride >= 0
            && inside(a.data.len(), a.offset, (m, k), (rs, cs))
            && inside(b.len(), b_off, (k, n), (ldb, 1))
            && inside(c.data.len(), c.off, (m, n), (c.ld, 1)),
        "attention tile operands out of bounds"
    );
    for i0 in (0..m).step_by(tier.mr) {
        let mr = tier.mr.min(m - i0);
        let (klo, khi, nhi) = block_bounds(tri, (i0, mr), (n, k));
        let ks = klo..khi.max(klo);
        let mut j0 = 0;
        while j0 < nhi {
            let w = nhi - j0;
            if w < tier.lanes {
                // The last columns: 8-lane tiles, four rows at a time.
                while j0 < nhi {
                    let w = nhi - j0;
                    let mut done = 0;
                    for r0 in (i0..i0 + mr).step_by(MR) {
                        let rows = MR.min(i0 + mr - r0);
                        done = if w >= 8 {
                            self::rows::<8>(rows, (r0, j0), ks.clone(), a, (b, b_off, ldb), &mut c, alpha)
                        } else {
                            self::rows::<1>(rows, (r0, j0), ks.clone(), a, (b, b_off, ldb), &mut c, alpha)
                        };
                    }
                    j0 += done;
                }
                break;
            }
            let v = if w >= 2 * tier.lanes { 2 } else { 1 };
            // Rows in full blocks, then 4, 2, 1.
            let mut r0 = i0;
            while r0 < i0 + mr {
                let left = i0 + mr - r0;
                let rows = if left >= tier.mr {
                    tier.mr
                } else if left >= 4 {
                    4
                } else if left >= 2 {
                    2
                } else {
                    1
                };
                // Pointers to the block's first elements: `wrapping_add`, since with an empty
                // inner range they may point one block past the end (and are never read).
                let t = Block {
                    a: a.data.as_ptr().wrapping_add(a.offset + r0 * rs + ks.start * cs),
                    rs,
                    cs,
                    b: b.as_ptr().wrapping_add(b_off + ks.start * ldb + j0),
                    ldb,
                    c: c.data.as_mut_ptr().wrapping_add(c.off + r0 * c.ld + j0),
                    ldc: c.ld,
                    k: ks.len(),
                    alpha,
                    add: c.add,
                };
                // SAFETY: `wide::tier()` chose this tier for this CPU; rows r0..r0+rows < m,
                // inner indices in ks ⊆ 0..k and columns j0..j0+lanes·v ≤ nhi ≤ n lie inside
                // the ranges asserted above, and `c` is a `&mut` borrow apart from both inputs.
                unsafe { (tier.run)(rows, v, t) };
                r0 += rows;
            }
            j0 += v * tier.lanes;
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
