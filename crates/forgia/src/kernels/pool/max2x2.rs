//! The 2x2, stride-2, unpadded max-pool (every CNN's pooling, the main job's two), forward and
//! backward: 16 windows at a time with AVX-512, 8 with AVX2 (a partial group under lane masks
//! in both), scalar elsewhere. All tiers visit each window's four taps in the same order with
//! the same rule as the general loop (take a tap when it is greater than the running maximum
//! or NaN), so values and argmax indices are the same bit for bit: max is exact, and ties keep
//! the first maximum.

/// Which code runs the windows (chosen once per call from the CPU's features).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tier {
    /// 16 windows per step (AVX-512F).
    Avx512,
    /// 8 windows per step (AVX2).
    Avx2,
    /// One window per step.
    Scalar,
}

impl Tier {
    /// The widest tier the kernels run with ([`isa`](crate::runtime::isa)).
    pub(super) fn detect() -> Tier {
        #[cfg(target_arch = "x86_64")]
        use crate::runtime::{isa, Isa};
        #[cfg(target_arch = "x86_64")]
        match isa() {
            Isa::Avx512 => return Tier::Avx512,
            Isa::Avx2 => return Tier::Avx2,
            Isa::Baseline => {}
        }
        Tier::Scalar
    }
}

/// One output row: `y[j]`, `arg[j]` for windows `j` of input rows `r0`, `r1` (each `w` floats
/// from plane offset `base`, so `r0[c]` is plane element `base + c`); `y.len() == arg.len()`
/// is the output width, at most `w / 2`.
pub(super) fn row(tier: Tier, r0: &[f32], r1: &[f32], base: u32, y: &mut [f32], arg: &mut [u32]) {
    let w = r0.len();
    assert!(r1.len() == w && arg.len() == y.len() && 2 * y.len() <= w, "2x2 pool row sizes");
    #[cfg(target_arch = "x86_64")]
    let done = match tier {
        // SAFETY: `detect` takes this tier only where `isa` runs AVX-512 (AVX-512F present);
        // the sizes were checked just above.
        Tier::Avx512 => unsafe { row_avx512(r0, r1, base, y, arg) },
        // SAFETY: `detect` takes this tier only where `isa` runs AVX2 or wider; the sizes
        // were checked just above.
        Tier::Avx2 => unsafe { row_avx2(r0, r1, base, y, arg) },
        Tier::Scalar => 0,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = {
        let _ = tier;
        0
    };
    row_scalar(r0, r1, base, y, arg, done);
}

/// Windows `from..` of [`row`], one at a time.
fn row_scalar(r0: &[f32], r1: &[f32], base: u32, y: &mut [f32], arg: &mut [u32], from: usize) {
    let w = r0.len();
    for j in from..y.len() {
        let c = 2 * j;
        let (mut m, mut a) = (r0[c], base + c as u32);
        for (v, at) in [(r0[c + 1], c + 1), (r1[c], w + c), (r1[c + 1], w + c + 1)] {
            // Bit masks, not `if`: LLVM turned the selects into branches, which mispredict
            // on every other window of real activations.
            let take = ((v > m) | v.is_nan()) as u32;
            let keep = take.wrapping_sub(1); // all ones where the old maximum stays
            m = f32::from_bits((v.to_bits() & !keep) | (m.to_bits() & keep));
            a = ((base + at as u32) & !keep) | (a & keep);
        }
        y[j] = m;
        arg[j] = a;
    }
}

/// Every window of [`row`] with AVX-512, 16 at a time; the last, partial group (and a row
/// shorter than 16 windows, such as the 14 and 7 of a 28x28 CNN) under lane masks, so no
/// window is left to the scalar loop. Returns how many windows it wrote (all of them).
///
/// # Safety
/// The CPU supports AVX-512F; `r0.len() == r1.len() >= 2 * y.len()` and
/// `arg.len() == y.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn row_avx512(r0: &[f32], r1: &[f32], base: u32, y: &mut [f32], arg: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    /// The `1 << bits` low-lane mask (`bits <= 16`).
    fn low(bits: usize) -> __mmask16 {
        ((1u32 << bits) - 1) as __mmask16
    }
    let (w, n) = (r0.len(), y.len());
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    let (one, below) = (_mm512_set1_epi32(1), _mm512_set1_epi32(w as i32));
    let mut j0 = 0;
    while j0 < n {
        // `r` windows read the 2r floats from column c of both rows: 16 (or fewer) in the
        // first register, the rest in the second.
        let (r, c) = ((n - j0).min(16), 2 * j0);
        let (first_half, second_half) = (low((2 * r).min(16)), low((2 * r).saturating_sub(16)));
        // SAFETY: the unmasked lanes are floats c .. c + 2r of both rows, inside them as
        // c + 2r <= 2n <= w; the second loads run only when some of their lanes are unmasked
        // (so their start, c + 16 < c + 2r, is inside the rows too). The stores write
        // windows j0 .. j0 + r of `y` and `arg`, inside them.
        unsafe {
            let load = |row: &[f32]| {
                let p = row.as_ptr().add(c);
                let lo = _mm512_maskz_loadu_ps(first_half, p);
                let hi =
                    if second_half != 0 { _mm512_maskz_loadu_ps(second_half, p.add(16)) } else { _mm512_setzero_ps() };
                (_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi))
            };
            let ((e0, o0), (e1, o1)) = (load(r0), load(r1));
            // Plane index of each window's first tap: base + c + 2·lane.
            let first = _mm512_add_epi32(_mm512_set1_epi32((base as usize + c) as i32), even);
            let at = [_mm512_add_epi32(first, one), _mm512_add_epi32(first, below)];
            let at = [at[0], at[1], _mm512_add_epi32(at[1], one)];
            let (mut m, mut a) = (e0, first);
            for (v, at) in [o0, e1, o1].into_iter().zip(at) {
                let take = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, m) | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                m = _mm512_mask_blend_ps(take, m, v);
                a = _mm512_mask_blend_epi32(take, a, at);
            }
            _mm512_mask_storeu_ps(y.as_mut_ptr().add(j0), low(r), m);
            _mm512_mask_storeu_epi32(arg.as_mut_ptr().add(j0).cast(), low(r), a);
        }
        j0 += r;
    }
    n
}

/// The lane mask of the first `count` of 8 lanes (`count <= 8`): all ones in those lanes.
///
/// # Safety
/// AVX2.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn first_lanes(count: usize) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    _mm256_cmpgt_epi32(_mm256_set1_epi32(count as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
}

/// Every window of [`row`] with AVX2, 8 at a time; the last, partial group (and a row shorter
/// than 8 windows, such as the 7 of a 14x14 plane) under lane masks, so no window is left to
/// the scalar loop. Returns how many windows it wrote (all of them).
///
/// # Safety
/// As [`row_avx512`], with AVX2 instead of AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn row_avx2(r0: &[f32], r1: &[f32], base: u32, y: &mut [f32], arg: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    /// The even (`IMM = 0b10_00_10_00`) or odd (`0b11_01_11_01`) floats of the 16 in `lo`,
    /// `hi`, in order.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn split<const IMM: i32>(lo: __m256, hi: __m256) -> __m256 {
        // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then the 64-bit lanes in the order 0, 2, 1, 3.
        let s = _mm256_shuffle_ps::<IMM>(lo, hi);
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(s)))
    }
    let (w, n) = (r0.len(), y.len());
    let even = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    let (one, below) = (_mm256_set1_epi32(1), _mm256_set1_epi32(w as i32));
    let mut j0 = 0;
    while j0 < n {
        // `r` windows read the 2r floats from column c of both rows: 8 (or fewer) in the
        // first register, the rest in the second.
        let (r, c) = ((n - j0).min(8), 2 * j0);
        // SAFETY: a full group reads floats c .. c + 16 <= 2n <= w of both rows; a partial one
        // reads only its unmasked lanes, floats c .. c + 2r, inside the rows as well (a masked
        // load does not touch masked-off lanes). The stores write windows j0 .. j0 + r of `y`
        // and `arg`, inside them.
        unsafe {
            let (m0, m1) = (first_lanes((2 * r).min(8)), first_lanes((2 * r).saturating_sub(8)));
            let load = |row: &[f32]| {
                let p = row.as_ptr().add(c);
                let (lo, hi) = if r == 8 {
                    (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
                } else {
                    (_mm256_maskload_ps(p, m0), _mm256_maskload_ps(p.add(8), m1))
                };
                (split::<0b10_00_10_00>(lo, hi), split::<0b11_01_11_01>(lo, hi))
            };
            let ((e0, o0), (e1, o1)) = (load(r0), load(r1));
            let first = _mm256_add_epi32(_mm256_set1_epi32((base as usize + c) as i32), even);
            let at = [_mm256_add_epi32(first, one), _mm256_add_epi32(first, below)];
            let at = [at[0], at[1], _mm256_add_epi32(at[1], one)];
            let (mut m, mut a) = (e0, _mm256_castsi256_ps(first));
            for (v, at) in [o0, e1, o1].into_iter().zip(at) {
                let take = _mm256_or_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(v, m), _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                m = _mm256_blendv_ps(m, v, take);
                a = _mm256_blendv_ps(a, _mm256_castsi256_ps(at), take);
            }
            let (py, pa) = (y.as_mut_ptr().add(j0), arg.as_mut_ptr().add(j0).cast::<i32>());
            if r == 8 {
                _mm256_storeu_ps(py, m);
                _mm256_storeu_si256(pa.cast(), _mm256_castps_si256(a));
            } else {
                let mask = first_lanes(r);
                _mm256_maskstore_ps(py, mask, m);
                _mm256_maskstore_epi32(pa, mask, _mm256_castps_si256(a));
            }
        }
        j0 += r;
    }
    n
}

/// The backward of one output row: writes the two input rows `g0`, `g1` (each `w` floats,
/// plane offset `base` for `g0[0]`) whole: `0 + gy[j]` at window `j`'s argmax `arg[j]`, `+0`
/// elsewhere (the columns past the last window included). The same bits as adding `gy` into
/// zeros at the argmax (`0 + -0 = +0`), without the zeroing pass or the scattered stores.
pub(super) fn backward_row(tier: Tier, gy: &[f32], arg: &[u32], base: u32, g0: &mut [f32], g1: &mut [f32]) {
    let w = g0.len();
    assert!(g1.len() == w && arg.len() == gy.len() && 2 * gy.len() <= w, "2x2 pool backward row sizes");
    #[cfg(target_arch = "x86_64")]
    let done = match tier {
        // SAFETY: `detect` takes this tier only where `isa` runs AVX-512 (AVX-512F present);
        // the sizes were checked just above.
        Tier::Avx512 => unsafe { backward_row_avx512(gy, arg, base, g0, g1) },
        // SAFETY: `detect` takes this tier only where `isa` runs AVX2 or wider; the sizes
        // were checked just above.
        Tier::Avx2 => unsafe { backward_row_avx2(gy, arg, base, g0, g1) },
        Tier::Scalar => 0,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = {
        let _ = tier;
        0
    };
    for j in done..gy.len() {
        let (c, a, v) = (2 * j, arg[j].wrapping_sub(base) as usize, 0.0 + gy[j]);
        let at = |k: usize| if a == k { v } else { 0.0 };
        (g0[c], g0[c + 1], g1[c], g1[c + 1]) = (at(c), at(c + 1), at(w + c), at(w + c + 1));
    }
    for row in [g0, g1] {
        row[2 * gy.len()..].fill(0.0);
    }
}

/// Every window of [`backward_row`] with AVX-512, 16 at a time (the last group under lane
/// masks); returns how many windows it wrote (all of them).
///
/// # Safety
/// The CPU supports AVX-512F; `g0.len() == g1.len() >= 2 * gy.len()` and
/// `arg.len() == gy.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn backward_row_avx512(gy: &[f32], arg: &[u32], base: u32, g0: &mut [f32], g1: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    fn low(bits: usize) -> __mmask16 {
        ((1u32 << bits) - 1) as __mmask16
    }
    let (w, n) = (g0.len(), gy.len());
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    // Interleaving indices: lanes 0..8 (then 8..16) of the even and odd taps, alternately.
    let lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    let (one, below) = (_mm512_set1_epi32(1), _mm512_set1_epi32(w as i32));
    let mut j0 = 0;
    while j0 < n {
        let (r, c) = ((n - j0).min(16), 2 * j0);
        let (first_half, second_half) = (low((2 * r).min(16)), low((2 * r).saturating_sub(16)));
        // SAFETY: the loads read windows j0 .. j0 + r of `gy` and `arg`; the stores write the
        // unmasked floats c .. c + 2r of both rows, inside them as c + 2r <= 2n <= w, and the
        // second stores run only when some of their lanes are unmasked.
        unsafe {
            let v = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(low(r), gy.as_ptr().add(j0)));
            let a = _mm512_maskz_loadu_epi32(low(r), arg.as_ptr().add(j0).cast());
            let first = _mm512_add_epi32(_mm512_set1_epi32((base as usize + c) as i32), even);
            let second = _mm512_add_epi32(first, below);
            for (row, at) in [(&mut *g0, first), (&mut *g1, second)] {
                let ev = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, at), v);
                let od = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(a, _mm512_add_epi32(at, one)), v);
                let p = row.as_mut_ptr().add(c);
                _mm512_mask_storeu_ps(p, first_half, _mm512_permutex2var_ps(ev, lo, od));
                if second_half != 0 {
                    _mm512_mask_storeu_ps(p.add(16), second_half, _mm512_permutex2var_ps(ev, hi, od));
                }
            }
        }
        j0 += r;
    }
    n
}

/// Every window of [`backward_row`] with AVX2, 8 at a time (the last group under lane masks);
/// returns how many windows it wrote (all of them).
///
/// # Safety
/// The CPU supports AVX2; `g0.len() == g1.len() >= 2 * gy.len()` and `arg.len() == gy.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn backward_row_avx2(gy: &[f32], arg: &[u32], base: u32, g0: &mut [f32], g1: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    let (w, n) = (g0.len(), gy.len());
    let even = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    let (one, below) = (_mm256_set1_epi32(1), _mm256_set1_epi32(w as i32));
    let mut j0 = 0;
    while j0 < n {
        let (r, c) = ((n - j0).min(8), 2 * j0);
        // SAFETY: the loads read windows j0 .. j0 + r of `gy` and `arg` (a partial group under
        // a lane mask); the stores write floats c .. c + 2r of both rows (the unmasked lanes of
        // a partial group), inside them as c + 2r <= 2n <= w.
        unsafe {
            let (v, a) = if r == 8 {
                (_mm256_loadu_ps(gy.as_ptr().add(j0)), _mm256_loadu_si256(arg.as_ptr().add(j0).cast()))
            } else {
                let mask = first_lanes(r);
                (
                    _mm256_maskload_ps(gy.as_ptr().add(j0), mask),
                    _mm256_maskload_epi32(arg.as_ptr().add(j0).cast(), mask),
                )
            };
            let v = _mm256_add_ps(_mm256_setzero_ps(), v); // -0 becomes +0, as `0 + gy` does
            let first = _mm256_add_epi32(_mm256_set1_epi32((base as usize + c) as i32), even);
            let second = _mm256_add_epi32(first, below);
            let (m0, m1) = (first_lanes((2 * r).min(8)), first_lanes((2 * r).saturating_sub(8)));
            for (row, at) in [(&mut *g0, first), (&mut *g1, second)] {
                let ev = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, at)), v);
                let od = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, _mm256_add_epi32(at, one))), v);
                // [e0 o0 e1 o1 | e4 o4 e5 o5] and [e2 o2 e3 o3 | e6 o6 e7 o7], then in order.
                let (lo, hi) = (_mm256_unpacklo_ps(ev, od), _mm256_unpackhi_ps(ev, od));
                let (first8, last8) = (_mm256_permute2f128_ps::<0x20>(lo, hi), _mm256_permute2f128_ps::<0x31>(lo, hi));
                let p = row.as_mut_ptr().add(c);
                if r == 8 {
                    _mm256_storeu_ps(p, first8);
                    _mm256_storeu_ps(p.add(8), last8);
                } else {
                    _mm256_maskstore_ps(p, m0, first8);
                    _mm256_maskstore_ps(p.add(8), m1, last8);
                }
            }
        }
        j0 += r;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tier this CPU runs.
    fn tiers() -> Vec<Tier> {
        let mut t = vec![Tier::Scalar];
        match Tier::detect() {
            Tier::Avx512 => t.extend([Tier::Avx2, Tier::Avx512]),
            Tier::Avx2 => t.push(Tier::Avx2),
            Tier::Scalar => {}
        }
        t
    }

    #[test]
    fn every_tier_of_the_backward_writes_the_scatter_into_zeros_bit_for_bit() {
        for w in [2, 3, 15, 16, 17, 31, 32, 33, 34, 47, 64, 65, 70, 97] {
            let (ow, base) = (w / 2, 3 * w as u32);
            // Gradients with signed zeros; argmax at every tap position in turn.
            let gy: Vec<f32> = (0..ow).map(|j| if j % 5 == 0 { -0.0 } else { j as f32 - 6.5 }).collect();
            let arg: Vec<u32> =
                (0..ow).map(|j| base + [2 * j, 2 * j + 1, w + 2 * j, w + 2 * j + 1][j % 4] as u32).collect();
            let mut want = vec![0.0f32; 2 * w];
            for (&g, &a) in gy.iter().zip(&arg) {
                want[(a - base) as usize] += g;
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for tier in tiers() {
                let (mut g0, mut g1) = (vec![f32::NAN; w], vec![f32::NAN; w]);
                backward_row(tier, &gy, &arg, base, &mut g0, &mut g1);
                assert_eq!(bits(&[g0, g1].concat()), bits(&want), "{tier:?} width {w}");
            }
        }
    }

    #[test]
    fn every_tier_matches_the_scalar_row_on_ties_nans_infinities_and_tails() {
        for w in [2, 3, 15, 16, 17, 31, 32, 33, 34, 47, 64, 65, 70, 97] {
            for seed in 0..4u32 {
                // Few distinct values (many ties), NaNs and infinities sprinkled in.
                let val = |i: usize| {
                    let h = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed.wrapping_mul(97)) >> 7;
                    match h % 23 {
                        0 => f32::NAN,
                        1 => f32::NEG_INFINITY,
                        2 => f32::INFINITY,
                        3 => -0.0,
                        k => (k % 4) as f32 - 1.5,
                    }
                };
                let (r0, r1): (Vec<f32>, Vec<f32>) = ((0..w).map(val).collect(), (w..2 * w).map(val).collect());
                let ow = w / 2;
                let base = 7 * w as u32;
                let (mut y0, mut a0) = (vec![0.0; ow], vec![0; ow]);
                row_scalar(&r0, &r1, base, &mut y0, &mut a0, 0);
                for tier in tiers() {
                    let (mut y, mut a) = (vec![1.0; ow], vec![u32::MAX; ow]);
                    row(tier, &r0, &r1, base, &mut y, &mut a);
                    assert_eq!(a, a0, "{tier:?} width {w} seed {seed}");
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&y), bits(&y0), "{tier:?} width {w} seed {seed}");
                }
            }
        }
    }
}
