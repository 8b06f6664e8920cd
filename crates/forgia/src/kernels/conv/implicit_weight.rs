//! The weight gradient of a stride-1 convolution as an implicit GEMM: `gw += gy · R` without
//! the unfold `R`, the microkernel reading the image where it lies (`conv/implicit.rs` does the
//! forward and the input gradient this way).
//!
//! The output gradient is copied channel-last onto a grid of `OH` rows of `pw = OW + kw - 1`
//! pixels (zeros in the `kw - 1` extra columns) and the image channel-last with its padding
//! all round, `[ph, pw, C]`. Grid pixel `q` is output pixel `(q / pw, q % pw)`, and its tap
//! `(ki, kj)` reads image pixel `q + ki·pw + kj`: one stride for every pixel, so a
//! microkernel call sums over a whole run of grid pixels at once, for 64 output channels (its
//! rows, from the gradient: 64 consecutive floats a pixel) by 6 input channels of one tap
//! (its columns, from the image: `C` floats apart a pixel). The extra columns cost `kw - 1` of
//! every `pw` pixels (3.5% at 56×56, 7% at 28×28), so it runs where the grid is long.

use super::implicit::channel_last;
use super::micro::{column_tiles, micro, product, Micro};
use super::ConvGeom;
use crate::tensor::transpose::transpose;

/// The fewest grid pixels a sample must have: ResNet's 14×14 layers (a grid of 224) ran
/// slower here than through the unfold, its 28×28 (840) and 56×56 (3248) faster
/// (docs/BENCHMARKS.md, session twenty-six).
const MIN_GRID: usize = 512;

/// The fewest input channels: a microkernel call covers up to 6 of one tap, and the main job's
/// and W4's single-channel first layers would run 1-column tiles (a rule of thumb, not
/// measured: no layer between 1 and 64 channels has a grid this long in the workloads).
const MIN_CHANNELS: usize = 16;

/// True when the weight gradient of `g` runs here: a microkernel for this machine that takes
/// it ([`Micro::weight_gradient`]), one group, stride and dilation 1, more than one tap,
/// output channels in whole vectors, at least [`MIN_CHANNELS`] input channels, a grid of at
/// least [`MIN_GRID`] pixels, and no empty image or output (whose rows the copies could not
/// be cut into).
pub(super) fn applies(g: &ConvGeom) -> bool {
    micro().is_some_and(|mk| {
        mk.weight_gradient
            && g.groups == 1
            && g.stride == (1, 1)
            && g.dil == (1, 1)
            && g.k.0 * g.k.1 > 1
            && g.o.is_multiple_of(mk.lanes)
            && g.c >= MIN_CHANNELS
            && g.image_len() > 0
            && g.cols_len() > 0
            && g.oh.saturating_mul(padded_w(g)) >= MIN_GRID
    })
}

/// Columns of the grid and of the padded image: `OW + kw - 1`.
fn padded_w(g: &ConvGeom) -> usize {
    g.ow + g.k.1 - 1
}

/// Rows of the padded image: `OH + kh - 1`.
fn padded_h(g: &ConvGeom) -> usize {
    g.oh + g.k.0 - 1
}

/// Floats of one slice's scratch where [`applies`] holds, else 0: the gradient transposed
/// `[OH·OW, O]` and on its grid `[OH·pw, O]`, the image transposed `[H·W, C]` and padded
/// `[ph·pw + kw, C]` (the last grid pixels' taps read up to `kw - 1` pixels past the padded
/// rows); at least the weight's size, for [`to_weight_order`].
pub(super) fn scratch_len(g: &ConvGeom) -> usize {
    if !applies(g) {
        return 0;
    }
    let pw = padded_w(g);
    let gy = g.oh.saturating_mul(g.ow).saturating_add(g.oh.saturating_mul(pw)).saturating_mul(g.o);
    let image = padded_h(g).saturating_mul(pw).saturating_add(g.k.1);
    let all = gy.saturating_add(g.image_len()).saturating_add(image.saturating_mul(g.c));
    all.max(g.kg().saturating_mul(g.o))
}

/// Puts the sum of [`partial`]s, `[C·kh·kw, O]` with its rows in tap-major order, into the
/// weight's order `[O, C, kh, kw]`: transposed into `tmp`, then each output channel's
/// `[kh·kw, C]` transposed back into `gw`.
pub(super) fn to_weight_order(g: &ConvGeom, gw: &mut [f32], tmp: &mut [f32]) {
    let (kg, taps) = (g.kg(), g.k.0 * g.k.1);
    let tmp = &mut tmp[..kg * g.o];
    transpose(gw, kg, g.o, g.o, tmp);
    for (dst, src) in gw.chunks_exact_mut(kg).zip(tmp.chunks_exact(kg)) {
        transpose(src, taps, g.c, g.c, dst);
    }
}

/// Grid rows a microkernel call runs over: about 1024 pixels, so the gradient's slice of them
/// (256 KB for 64 channels) stays in the L2 across the calls of every tap and channel tile
/// (chosen by that reckoning, not tuned).
fn chunk_rows(g: &ConvGeom) -> usize {
    1024usize.div_ceil(padded_w(g)).clamp(1, g.oh)
}

/// The partial sum `gwᵀ += Σ_n (gy[n] · R[n])ᵀ` over `samples` for a convolution [`applies`]
/// takes, into `gw` as `[C·kh·kw, O]` with rows in tap-major order (`(ki·kw + kj)·C + c`; the
/// caller puts the sum in the weight's order, [`to_weight_order`]), `cols` one slice's
/// scratch ([`scratch_len`]). Transposed, the microkernel stores its tiles as whole vectors.
pub(super) fn partial(
    g: &ConvGeom,
    x: &[f32],
    y: &[f32],
    gw: &mut [f32],
    cols: &mut [f32],
    samples: std::ops::Range<usize>,
) {
    let mk = micro().expect("implicit_weight::partial runs where `applies` found a microkernel");
    let (o, c, ohw, il, cl) = (g.o, g.c, g.ohw(), g.image_len(), g.cols_len());
    let (pw, ph) = (padded_w(g), padded_h(g));
    let (gyt, rest) = cols.split_at_mut(ohw * o);
    let (grid, rest) = rest.split_at_mut(g.oh * pw * o);
    let (xc, xp) = rest.split_at_mut(il);
    let xp = &mut xp[..(ph * pw + g.k.1) * c];
    let (chunk, grid_len) = (chunk_rows(g) * pw, g.oh * pw);
    let _flush = crate::parallel::FlushDenormals::new(); // as `gemm` does on the caller's thread
    for n in samples {
        // The gradient on its grid (zeros in the extra columns), the image with its padding.
        channel_last(&y[n * cl..][..cl], (o, g.oh, g.ow), (0, 0, pw), grid, gyt);
        channel_last(&x[n * il..][..il], (c, g.h, g.w), (g.pad.0, g.pad.1, pw), xp, xc);
        for q0 in (0..grid_len).step_by(chunk) {
            add_run(g, mk, (q0, chunk.min(grid_len - q0)), grid, xp, gw);
        }
    }
}

/// `gwᵀ += (gy · R)ᵀ` over the `k` grid pixels from `q0` of one sample: for each panel of
/// output channels, tap and tile of input channels, one microkernel call.
fn add_run(g: &ConvGeom, mk: Micro, (q0, k): (usize, usize), grid: &[f32], xp: &[f32], gw: &mut [f32]) {
    let (o, c, pw) = (g.o, g.c, padded_w(g));
    for o0 in (0..o).step_by(mk.rows) {
        let mb = mk.rows.min(o - o0);
        let lhs = &grid[q0 * o + o0..][..(k - 1) * o + mb];
        for (ki, kj) in (0..g.k.0).flat_map(|i| (0..g.k.1).map(move |j| (i, j))) {
            let (tap, at) = (ki * g.k.1 + kj, q0 + ki * pw + kj);
            for (c0, nn) in column_tiles(c, mk.cols) {
                let rhs = &xp[at * c + c0..][..(k - 1) * c + nn];
                let dst = &mut gw[(tap * c + c0) * o + o0..][..(nn - 1) * o + mb];
                product(mk, (mb, nn, k), (dst, 1, o), (lhs, o), (rhs, c, 1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{geom, naive_backward, small_maps};
    use super::super::{backward_weight, ConvScratch};
    use super::*;

    #[test]
    fn the_implicit_weight_gradient_matches_the_definition() {
        // One panel of output channels and a panel and a part (80 = 64 + 16); channel tiles
        // of 6 with short ones (16 = 6 + 6 + 4, 19 = 6 + 6 + 4 + 3); a 3×3, a 2×4 padded on
        // the columns only, a "same" 5×5 and an unpadded 3×3; a grid in two runs, the last
        // short. The single-channel layer of W4 stays on the unfold.
        let cases = [
            ConvGeom { n: 3, o: 16, ..geom(16, (24, 24), (3, 3), (1, 1), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 80, ..geom(19, (20, 30), (2, 4), (1, 1), (0, 2), (1, 1)) },
            ConvGeom { n: 2, o: 32, ..geom(17, (16, 40), (5, 5), (1, 1), (2, 2), (1, 1)) },
            ConvGeom { n: 3, o: 16, ..geom(16, (30, 30), (3, 3), (1, 1), (0, 0), (1, 1)) },
            ConvGeom { n: 2, o: 16, ..geom(20, (60, 20), (3, 3), (1, 1), (1, 1), (1, 1)) },
        ];
        for (i, g) in cases.iter().enumerate() {
            assert_eq!(applies(g), micro().is_some_and(|mk| mk.weight_gradient), "case {i}");
            let (x, w, _, gy) = small_maps(g);
            let (_, want) = naive_backward(g, &x, &w, &gy);
            for parts in [1, 2] {
                let mut buf = vec![f32::NAN; g.scratch_len(parts, true)];
                let mut gw = vec![0.0; w.len()];
                backward_weight(g, &x, &gy, &mut gw, ConvScratch { parts, buf: &mut buf });
                assert_eq!(gw, want, "case {i}, {parts} parts");
            }
        }
        assert!(chunk_rows(&cases[4]) < cases[4].oh && !cases[4].oh.is_multiple_of(chunk_rows(&cases[4])));
        assert!(!applies(&ConvGeom { n: 2, o: 32, ..geom(1, (28, 28), (3, 3), (1, 1), (0, 0), (1, 1)) }));
        // An image of width 0, padded: 600 output rows of no pixels, a grid of 1200.
        let empty =
            ConvGeom { w: 0, ow: 0, ..ConvGeom { n: 1, o: 16, ..geom(16, (600, 4), (3, 3), (1, 1), (1, 1), (1, 1)) } };
        assert!(empty.oh * padded_w(&empty) >= MIN_GRID && !applies(&empty));
    }
}
