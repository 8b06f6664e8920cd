//! The register tiles of [`super::tile`] in intrinsics: with AVX-512 an `8 × 32` block of `C`
//! in sixteen 16-lane accumulators, with AVX2 and FMA a `6 × 16` block in twelve 8-lane ones
//! (narrower blocks at the right edge, shorter ones at the bottom), operands read through raw
//! pointers inside bounds checked once per product.
//!
//! The autovectorized 4 × 16 tile spent about 45 instructions per step of the inner dimension
//! on 8 FMAs (bounds checks on every operand read, indices reloaded from the stack); the
//! AVX-512 one spends 26 on 16. Without AVX-512 the attention backward of W6 spent 30% of the
//! step in the autovectorized tile. Each accumulator sums its products in the same order,
//! with the same fused multiply-add, as the 8-lane tile, so all give the same bits.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    __m256, __m512, _mm256_add_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_set1_ps, _mm256_setzero_ps,
    _mm256_storeu_ps, _mm512_add_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mul_ps, _mm512_set1_ps,
    _mm512_setzero_ps, _mm512_storeu_ps,
};

/// One instruction set's tiles: how wide a vector is, how many rows a full block has, and the
/// block kernel for `rows` (a full block, 4, 2 or 1) by `v` (2 or 1) vectors of columns.
#[derive(Clone, Copy)]
pub(super) struct Tier {
    /// Lanes of one vector.
    pub(super) lanes: usize,
    /// Rows of a full block.
    pub(super) mr: usize,
    /// Runs one block.
    ///
    /// # Safety
    /// As [`tile`]: this tier's instructions exist on the CPU, and the block's operands are
    /// inside live allocations with `C` apart from both inputs.
    pub(super) run: unsafe fn(rows: usize, v: usize, t: Block),
}

/// The tier of tiles for the instruction set in force ([`isa`](crate::runtime::isa)):
/// AVX-512, or AVX2 with FMA; none elsewhere.
pub(super) fn tier() -> Option<Tier> {
    #[cfg(target_arch = "x86_64")]
    use crate::runtime::{isa, Isa};
    #[cfg(target_arch = "x86_64")]
    match isa() {
        Isa::Avx512 => return Some(Tier { lanes: 16, mr: 8, run: run_avx512 }),
        Isa::Avx2 => return Some(Tier { lanes: 8, mr: 6, run: run_avx2 }),
        Isa::Baseline => {}
    }
    None
}

/// [`Tier::run`] of the AVX-512 tiles.
///
/// # Safety
/// As [`tile`].
#[cfg(target_arch = "x86_64")]
unsafe fn run_avx512(rows: usize, v: usize, t: Block) {
    // SAFETY: the caller's guarantees, passed on.
    unsafe {
        match (rows, v) {
            (8, 2) => tile::<8, 2>(t),
            (8, _) => tile::<8, 1>(t),
            (4, 2) => tile::<4, 2>(t),
            (4, _) => tile::<4, 1>(t),
            (2, 2) => tile::<2, 2>(t),
            (2, _) => tile::<2, 1>(t),
            (_, 2) => tile::<1, 2>(t),
            _ => tile::<1, 1>(t),
        }
    }
}

/// [`Tier::run`] of the AVX2 tiles.
///
/// # Safety
/// As [`tile_avx2`].
#[cfg(target_arch = "x86_64")]
unsafe fn run_avx2(rows: usize, v: usize, t: Block) {
    // SAFETY: the caller's guarantees, passed on.
    unsafe {
        match (rows, v) {
            (6, 2) => tile_avx2::<6, 2>(t),
            (6, _) => tile_avx2::<6, 1>(t),
            (4, 2) => tile_avx2::<4, 2>(t),
            (4, _) => tile_avx2::<4, 1>(t),
            (2, 2) => tile_avx2::<2, 2>(t),
            (2, _) => tile_avx2::<2, 1>(t),
            (_, 2) => tile_avx2::<1, 2>(t),
            _ => tile_avx2::<1, 1>(t),
        }
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
/// The CPU has AVX-512F ([`tier`]); every `A[i, p]` with `i < R, p < k`, `B[p, j]` with
/// `p < k, j < 16·V` and `C[i, j]` with `i < R, j < 16·V` lies inside one live allocation,
/// and `C` overlaps neither input.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn tile<const R: usize, const V: usize>(t: Block) {
    const LANES: usize = 16;
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

/// `C[..R, ..8·V] = alpha · A[..R, ..k] · B[..k, ..8·V]` (or `+=` with `add`): [`tile`] with
/// 8-lane vectors.
///
/// # Safety
/// The CPU has AVX2 and FMA; the operands as for [`tile`], with `8·V` columns.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2<const R: usize, const V: usize>(t: Block) {
    const LANES: usize = 8;
    let mut acc: [[__m256; V]; R] = [[_mm256_setzero_ps(); V]; R];
    for p in 0..t.k {
        // SAFETY (every pointer read below): p < k, r < R and v < V, within the ranges the
        // caller guarantees.
        let bp = unsafe { t.b.add(p * t.ldb) };
        let mut bv = [_mm256_setzero_ps(); V];
        for v in 0..V {
            bv[v] = unsafe { _mm256_loadu_ps(bp.add(v * LANES)) };
        }
        let ap = unsafe { t.a.add(p * t.cs) };
        for r in 0..R {
            let x = _mm256_set1_ps(unsafe { *ap.add(r * t.rs) });
            for v in 0..V {
                acc[r][v] = _mm256_fmadd_ps(x, bv[v], acc[r][v]);
            }
        }
    }
    let alpha = _mm256_set1_ps(t.alpha);
    for r in 0..R {
        for v in 0..V {
            // SAFETY: r < R, v < V: inside `C` as the caller guarantees.
            let at = unsafe { t.c.add(r * t.ldc + v * LANES) };
            let mut out = _mm256_mul_ps(alpha, acc[r][v]);
            if t.add {
                out = _mm256_add_ps(unsafe { _mm256_loadu_ps(at) }, out);
            }
            unsafe { _mm256_storeu_ps(at, out) };
        }
    }
}

/// Unreachable off x86-64 ([`tier`] is `None` there).
///
/// # Safety
/// Never called.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn tile<const R: usize, const V: usize>(_t: Block) {
    unreachable!("intrinsic tiles are only selected on x86-64")
}
