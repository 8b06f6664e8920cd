//! Direct convolution for a single input channel (the first layer of an image model: MNIST's
//! `Conv2d(1, 32, 5)`). Its im2col has only `kh·kw` rows, a GEMM with an inner size of 25;
//! here each output row is instead accumulated tap by tap in registers, a tile of
//! [`TO`] channels × [`TW`] columns at a time, from a zero-padded copy of the plane.

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
    if super::super::simd::has_fma() {
        super::super::simd::vectorized(|| tiles::<true>(g, xp, w, bias, y))
    } else {
        super::super::simd::vectorized(|| tiles::<false>(g, xp, w, bias, y))
    }
}

/// The register-tiled loop: for each tile, every tap adds `w[o, tap] · xp[row, cols + shift]`
/// into `TO × TW` accumulators (with a fused multiply-add where the CPU has one).
#[inline(always)]
fn tiles<const FMA: bool>(g: &ConvGeom, xp: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32]) {
    let ((kh, kw), taps, pw, ohw) = (g.k, g.k.0 * g.k.1, padded_w(g), g.oh * g.ow);
    for o0 in (0..g.o).step_by(TO) {
        let oc = TO.min(g.o - o0);
        // A partial block computes copies of its last channel and stores only the real ones.
        let wo: [&[f32]; TO] = std::array::from_fn(|o| &w[(o0 + o.min(oc - 1)) * taps..][..taps]);
        for oh in 0..g.oh {
            for t in 0..g.ow.div_ceil(TW) {
                let mut acc = [[0.0f32; TW]; TO];
                for ki in 0..kh {
                    let row = &xp[(oh * g.stride.0 + ki * g.dil.0) * pw + t * TW..];
                    for kj in 0..kw {
                        let xs: &[f32; TW] = row[kj * g.dil.1..kj * g.dil.1 + TW].try_into().expect("a whole tile");
                        for o in 0..TO {
                            let wv = wo[o][ki * kw + kj];
                            for l in 0..TW {
                                acc[o][l] = if FMA { wv.mul_add(xs[l], acc[o][l]) } else { acc[o][l] + wv * xs[l] };
                            }
                        }
                    }
                }
                let (c0, cn) = (t * TW, TW.min(g.ow - t * TW));
                for (o, acc) in acc.iter().enumerate().take(oc) {
                    let b = bias.map_or(0.0, |b| b[o0 + o]);
                    let dst = &mut y[(o0 + o) * ohw + oh * g.ow + c0..][..cn];
                    for (d, a) in dst.iter_mut().zip(acc) {
                        *d = a + b;
                    }
                }
            }
        }
    }
}
