//! The loaded probe of `forgia bench peak`: the register tile of a GEMM microkernel, rows by
//! 2 vectors, each inner step loading 2 vectors of one operand and broadcasting one float of
//! the other per row, with both operands small enough to stay in L1 (11 KiB at AVX-512
//! width). The rows fill the register file and no more: 12 (24 accumulators) of AVX-512's 32
//! registers, 6 (12 accumulators) of AVX2's 16, whose 24 accumulators would spill to the
//! stack and halve the figure. The register-only loop of the module above is the FMA units'
//! limit; this one is the most a GEMM whose microkernel loads its operands can reach, before
//! any cache miss, packing or edge tile. W5 is read against both.

use super::Isa;

/// Rows of the AVX-512 and scalar tiles (broadcast operand).
const ROWS: usize = 12;
/// Rows of the AVX2 tile: 12 accumulators, the 2 loaded vectors and a broadcast in 16 registers.
const ROWS_AVX2: usize = 6;
/// Inner steps per pass over the operands.
const DEPTH: usize = 64;
/// Every operand element: products of `STEP · STEP = 2⁻²⁰` add up exactly in f32 for the
/// 2²² steps of a default probe (each accumulator reaches at most 4).
const STEP: f32 = 1.0 / 1024.0;

/// Rows of `isa`'s tile.
fn rows(isa: Isa) -> usize {
    match isa {
        Isa::Avx2 => ROWS_AVX2,
        Isa::Avx512 | Isa::Scalar => ROWS,
    }
}

/// Floating-point operations of one pass: a multiply and an add per lane, accumulator and step.
pub(super) fn flops_per_pass(isa: Isa) -> f64 {
    (2 * isa.lanes() * 2 * rows(isa) * DEPTH) as f64
}

/// Runs `passes` passes on this thread over its own operands; returns the accumulators' sum.
pub(super) fn run(isa: Isa, passes: u64) -> f32 {
    let a = vec![STEP; rows(isa) * DEPTH];
    let b = vec![STEP; 2 * isa.lanes() * DEPTH];
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx512` is only produced by `Isa::detect` where `forgia::runtime::isa`
        // runs AVX-512 (AVX-512F present), the one feature enabled; the
        // operands hold `ROWS · DEPTH` and `32 · DEPTH` floats, what the function reads.
        Isa::Avx512 => unsafe { x86::tile_avx512(passes, &a, &b) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, where `isa` runs AVX2 (`avx2` and `fma` present); `a` holds `ROWS_AVX2 · DEPTH`
        // floats and `b` `16 · DEPTH`.
        Isa::Avx2 => unsafe { x86::tile_avx2(passes, &a, &b) },
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx512 | Isa::Avx2 => unreachable!("detected only on x86_64"),
        Isa::Scalar => scalar(passes, &a, &b),
    }
}

/// The fallback: the same tile one lane wide (a multiply and an add, as in `super::scalar`).
fn scalar(passes: u64, a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [[0.0f32; 2]; ROWS];
    for _ in 0..passes {
        for p in 0..DEPTH {
            let (b0, b1) = (b[2 * p], b[2 * p + 1]);
            for (row, &x) in acc.iter_mut().zip(&a[p * ROWS..(p + 1) * ROWS]) {
                row[0] += x * b0;
                row[1] += x * b1;
            }
        }
        std::hint::black_box(&mut acc);
    }
    acc.iter().flatten().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The tile in AVX-512 and AVX2: per step two vector loads of `b`, and per row one
    //! broadcast of `a` feeding two FMAs.
    use std::arch::x86_64::*;

    use super::{DEPTH, ROWS, ROWS_AVX2};

    /// Both operands are read through raw pointers inside their lengths (`a`: `ROWS · DEPTH`,
    /// `b`: `32 · DEPTH` floats, asserted).
    #[target_feature(enable = "avx512f")]
    pub(super) fn tile_avx512(passes: u64, a: &[f32], b: &[f32]) -> f32 {
        assert!(a.len() >= ROWS * DEPTH && b.len() >= 32 * DEPTH);
        let mut c0 = [_mm512_setzero_ps(); ROWS];
        let mut c1 = [_mm512_setzero_ps(); ROWS];
        for _ in 0..passes {
            for p in 0..DEPTH {
                // SAFETY: p < DEPTH, so the 32 floats at 32·p and the 12 at ROWS·p are inside
                // `b` and `a` (asserted above).
                unsafe {
                    let b0 = _mm512_loadu_ps(b.as_ptr().add(32 * p));
                    let b1 = _mm512_loadu_ps(b.as_ptr().add(32 * p + 16));
                    for i in 0..ROWS {
                        let x = _mm512_set1_ps(*a.as_ptr().add(ROWS * p + i));
                        c0[i] = _mm512_fmadd_ps(x, b0, c0[i]);
                        c1[i] = _mm512_fmadd_ps(x, b1, c1[i]);
                    }
                }
            }
        }
        let sum = c0.iter().chain(&c1).fold(_mm512_setzero_ps(), |s, &x| _mm512_add_ps(s, x));
        _mm512_reduce_add_ps(sum)
    }

    /// As [`tile_avx512`] with 8-lane vectors and [`ROWS_AVX2`] rows (`a`: `ROWS_AVX2 ·
    /// DEPTH`, `b`: `16 · DEPTH` floats).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn tile_avx2(passes: u64, a: &[f32], b: &[f32]) -> f32 {
        assert!(a.len() >= ROWS_AVX2 * DEPTH && b.len() >= 16 * DEPTH);
        let mut c0 = [_mm256_setzero_ps(); ROWS_AVX2];
        let mut c1 = [_mm256_setzero_ps(); ROWS_AVX2];
        for _ in 0..passes {
            for p in 0..DEPTH {
                // SAFETY: as in `tile_avx512`, with 16 floats of `b` per step.
                unsafe {
                    let b0 = _mm256_loadu_ps(b.as_ptr().add(16 * p));
                    let b1 = _mm256_loadu_ps(b.as_ptr().add(16 * p + 8));
                    for i in 0..ROWS_AVX2 {
                        let x = _mm256_set1_ps(*a.as_ptr().add(ROWS_AVX2 * p + i));
                        c0[i] = _mm256_fmadd_ps(x, b0, c0[i]);
                        c1[i] = _mm256_fmadd_ps(x, b1, c1[i]);
                    }
                }
            }
        }
        let sum = c0.iter().chain(&c1).fold(_mm256_setzero_ps(), |s, &x| _mm256_add_ps(s, x));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` is 8 writable f32 (32 bytes), the unaligned store's exact size.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
        lanes.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lane_of_the_tile_sums_every_step() {
        let passes = 3;
        for isa in [Isa::detect(), Isa::Scalar] {
            let accumulators = (2 * rows(isa) * isa.lanes()) as f32;
            let per_lane = run(isa, passes) / accumulators;
            assert_eq!(per_lane, (passes as usize * DEPTH) as f32 * STEP * STEP, "{isa:?}");
        }
        assert_eq!(flops_per_pass(Isa::Avx512), 2.0 * 16.0 * 24.0 * DEPTH as f64);
        assert_eq!(flops_per_pass(Isa::Avx2), 2.0 * 8.0 * 12.0 * DEPTH as f64);
    }
}
