//! The register tiles of [`super::tile`] in AVX-512 intrinsics, for CPUs that have it: an
//! `8 × 32` block of `C` in sixteen 16-lane accumulators (narrower blocks at the right edge),
//! operands read through raw pointers inside bounds checked once per product.
//!
//! The autovectorized 4 × 16 tile spent about 45 instructions per step of the inner dimension
//! on 8 FMAs (bounds checks on every operand read, indices reloaded from the stack); this one
//! spends 26 on 16. Each accumulator sums its products in the same order, with the same fused
//! multiply-add, as the 8-lane tile, so both give the same bits.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m512, _mm512_add_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mul_ps, _mm512_set1_ps, _mm512_setzero_ps,
    _mm512_storeu_ps,
};

/// Rows per block.
pub(super) const MR: usize = 8;
/// Lanes of one vector.
pub(super) const LANES: usize = 16;

/// True when this CPU runs the AVX-512 tiles.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One block's operands: `A[i, p]` at `a + i·rs + p·cs`, `B[p, j]` at `b + p·ldb + j`,
/// `C[i, j]` at `c + i·ldc + j`, all already offset to the block's first row, column and
/// inner index.
#[derive(Clone, Copy)]
pub(super) struct Block {
    pub(super) a: *const f32,
    pub(super) rs: usize,
    pub(super) cs: usize,
    pub(super) b: *const f32,
    pub(super) ldb: usize,
    pub(super) c: *mut f32,
    pub(super) ldc: usize,
    /// Inner steps.
    pub(super) k: usize,
    pub(super) alpha: f32,
    /// Add to `C` instead of overwriting it.
    pub(super) add: bool,
}

/// `C[..R, ..16·V] = alpha · A[..R, ..k] · B[..k, ..16·V]` (or `+=` with `add`).
///
/// # Safety
/// The CPU has AVX-512F ([`available`]); every `A[i, p]` with `i < R, p < k`, `B[p, j]` with
/// `p < k, j < 16·V` and `C[i, j]` with `i < R, j < 16·V` lies inside one live allocation,
/// and `C` overlaps neither input.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn tile<const R: usize, const V: usize>(t: Block) {
    let mut acc: [[__m512; V]; R] = [[_mm512_setzero_ps(); V]; R];
    for p in 0..t.k {
        // SAFETY (every pointer read below): p < k, r < R and v < V, within the ranges the
        // caller guarantees.
        let bp = unsafe { t.b.add(p * t.ldb) };
        let mut bv = [_mm512_setzero_ps(); V];
        for v in 0..V {
            bv[v] = unsafe { _mm512_loadu_ps(bp.add(v * LANES)) };
        }
        let ap = unsafe { t.a.add(p * t.cs) };
        for r in 0..R {
            let x = _mm512_set1_ps(unsafe { *ap.add(r * t.rs) });
            for v in 0..V {
                acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
            }
        }
    }
    let alpha = _mm512_set1_ps(t.alpha);
    for r in 0..R {
        for v in 0..V {
            // SAFETY: r < R, v < V: inside `C` as the caller guarantees.
            let at = unsafe { t.c.add(r * t.ldc + v * LANES) };
            let mut out = _mm512_mul_ps(alpha, acc[r][v]);
            if t.add {
                out = _mm512_add_ps(unsafe { _mm512_loadu_ps(at) }, out);
            }
            unsafe { _mm512_storeu_ps(at, out) };
        }
    }
}

/// Unreachable off x86-64 ([`available`] is false there).
///
/// # Safety
/// Never called.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn tile<const R: usize, const V: usize>(_t: Block) {
    unreachable!("AVX-512 tiles are only selected on x86-64")
}
