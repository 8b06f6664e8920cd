//! Direct convolution for a single input channel (the first layer of an image model: MNIST's
//! `Conv2d(1, 32, 5)`). Its im2col has only `kh·kw` rows, a GEMM with an inner size of 25;
//! here each output row is instead accumulated tap by tap in registers, a tile of
//! [`TO`] channels × [`TW`] columns at a time, from a zero-padded copy of the plane (AVX2 +
//! FMA intrinsics where the CPU has them, the same loop in scalar code elsewhere).

use super::ConvGeom;

/// Output channels per register tile.
const TO: usize = 4;
/// Output columns per register tile.
const TW: usize = 16;

/// True when the direct kernel computes `g`'s forward: one input channel, no groups, unit
/// stride along the width (the rows are read as contiguous vectors), and some output.
pub(super) fn applies(g: &ConvGeom) -> bool {
    g.c == 1 && g.groups == 1 && g.stride.1 == 1 && g.o > 0 && g.oh > 0 && g.ow > 0
}

/// Columns of the padded plane: whole tiles of output plus the kernel's reach.
fn padded_w(g: &ConvGeom) -> usize {
    g.ow.div_ceil(TW) * TW + g.dil.1 * (g.k.1 - 1)
}

/// Rows of the padded plane the outputs read.
fn padded_h(g: &ConvGeom) -> usize {
    (g.oh - 1) * g.stride.0 + g.dil.0 * (g.k.0 - 1) + 1
}

/// Floats of scratch one sample needs (its padded plane); 0 where the kernel does not apply.
pub(super) fn scratch_len(g: &ConvGeom) -> usize {
    if applies(g) {
        padded_h(g).saturating_mul(padded_w(g))
    } else {
        0
    }
}

/// Copies the plane `x [H, W]` into `xp` with `pad` zeros before it on each axis and zeros
/// after it up to the padded size.
fn pad_plane(g: &ConvGeom, x: &[f32], xp: &mut [f32]) {
    let pw = padded_w(g);
    for (r, row) in xp.chunks_exact_mut(pw).take(padded_h(g)).enumerate() {
        row.fill(0.0);
        let ir = r as isize - g.pad.0 as isize;
        if ir >= 0 && (ir as usize) < g.h {
            let end = (g.pad.1 + g.w).min(pw);
            let src = &x[ir as usize * g.w..(ir as usize + 1) * g.w];
            row[g.pad.1..end].copy_from_slice(&src[..end - g.pad.1]);
        }
    }
}

/// One sample: `y [O, OH, OW] = W ⋆ x (+ bias)` for the single-channel plane `x [H, W]`,
/// `w [O, 1, kh, kw]`, with `xp` ([`scratch_len`] floats) for the padded plane. Overwrites `y`.
pub(super) fn forward_sample(g: &ConvGeom, x: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32], xp: &mut [f32]) {
    pad_plane(g, x, xp);
    #[cfg(target_arch = "x86_64")]
    {
        if super::super::simd::has_fma() {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return unsafe { tiles_avx2(g, xp, w, bias, y) };
        }
    }
    tiles_scalar(g, xp, w, bias, y)
}

/// Stores the accumulators of channel `o0 + o` (for `o < oc`) of output row `oh`, tile `t`,
/// plus the bias.
fn store(
    g: &ConvGeom,
    acc: &[[f32; TW]; TO],
    (o0, oc, oh, t): (usize, usize, usize, usize),
    bias: Option<&[f32]>,
    y: &mut [f32],
) {
    let (c0, cn, ohw) = (t * TW, TW.min(g.ow - t * TW), g.oh * g.ow);
    for (o, acc) in acc.iter().enumerate().take(oc) {
        let b = bias.map_or(0.0, |b| b[o0 + o]);
        let dst = &mut y[(o0 + o) * ohw + oh * g.ow + c0..][..cn];
        for (d, a) in dst.iter_mut().zip(acc) {
            *d = a + b;
        }
    }
}

/// The weights of the `TO` channels from `o0` (a partial block repeats its last channel,
/// whose copies are computed and never stored).
fn block_weights<'a>(g: &ConvGeom, w: &'a [f32], o0: usize) -> (usize, [&'a [f32]; TO]) {
    let (taps, oc) = (g.k.0 * g.k.1, TO.min(g.o - o0));
    (oc, std::array::from_fn(|o| &w[(o0 + o.min(oc - 1)) * taps..][..taps]))
}

/// The padded-plane row that output row `oh` reads at kernel row `ki`, from tile `t` on.
fn tile_row<'a>(g: &ConvGeom, xp: &'a [f32], oh: usize, ki: usize, t: usize) -> &'a [f32] {
    &xp[(oh * g.stride.0 + ki * g.dil.0) * padded_w(g) + t * TW..]
}

/// The register tile with AVX2 + FMA: `TO` channels × two 8-float vectors, each tap one
/// pair of loads and `2·TO` fused multiply-adds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tiles_avx2(g: &ConvGeom, xp: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32]) {
    use std::arch::x86_64::{
        __m256, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };
    let kw = g.k.1;
    for o0 in (0..g.o).step_by(TO) {
        let (oc, wo) = block_weights(g, w, o0);
        for oh in 0..g.oh {
            for t in 0..g.ow.div_ceil(TW) {
                let mut acc: [__m256; 2 * TO] = [_mm256_setzero_ps(); 2 * TO];
                for ki in 0..g.k.0 {
                    let row = tile_row(g, xp, oh, ki, t);
                    for kj in 0..kw {
                        // A checked slice of one whole tile: the loads below read inside it.
                        let xs = &row[kj * g.dil.1..kj * g.dil.1 + TW];
                        // SAFETY: `xs` holds TW = 16 floats, so both 8-float loads are in bounds.
                        let (x0, x1) = unsafe { (_mm256_loadu_ps(xs.as_ptr()), _mm256_loadu_ps(xs.as_ptr().add(8))) };
                        for o in 0..TO {
                            let wv = _mm256_set1_ps(wo[o][ki * kw + kj]);
                            acc[2 * o] = _mm256_fmadd_ps(wv, x0, acc[2 * o]);
                            acc[2 * o + 1] = _mm256_fmadd_ps(wv, x1, acc[2 * o + 1]);
                        }
                    }
                }
                let mut out = [[0.0f32; TW]; TO];
                for (o, lanes) in out.iter_mut().enumerate() {
                    // SAFETY: each row of `out` holds 16 floats, the two 8-float stores' span.
                    unsafe {
                        _mm256_storeu_ps(lanes.as_mut_ptr(), acc[2 * o]);
                        _mm256_storeu_ps(lanes.as_mut_ptr().add(8), acc[2 * o + 1]);
                    }
                }
                store(g, &out, (o0, oc, oh, t), bias, y);
            }
        }
    }
}

/// The same tile without SIMD (CPUs without AVX2 and FMA).
fn tiles_scalar(g: &ConvGeom, xp: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32]) {
    let kw = g.k.1;
    for o0 in (0..g.o).step_by(TO) {
        let (oc, wo) = block_weights(g, w, o0);
        for oh in 0..g.oh {
            for t in 0..g.ow.div_ceil(TW) {
                let mut acc = [[0.0f32; TW]; TO];
                for ki in 0..g.k.0 {
                    let row = tile_row(g, xp, oh, ki, t);
                    for kj in 0..kw {
                        let xs = &row[kj * g.dil.1..kj * g.dil.1 + TW];
                        for (o, acc) in acc.iter_mut().enumerate() {
                            let wv = wo[o][ki * kw + kj];
                            for (a, x) in acc.iter_mut().zip(xs) {
                                *a += wv * x;
                            }
                        }
                    }
                }
                store(g, &acc, (o0, oc, oh, t), bias, y);
            }
        }
    }
}
