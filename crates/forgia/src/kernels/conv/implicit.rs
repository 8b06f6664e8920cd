//! The forward as an implicit GEMM: the `gemm` crate's microkernel run by a driver of our own
//! on the image where it lies, with no column matrix.
//!
//! The output channels are the microkernel's rows (a tile of 64 with AVX-512, from a weight
//! packed once per call into panels `[C·kh·kw, 64]` in tap-major order, `(ki·kw + kj)·C + c`),
//! and 6 output pixels of one output row its columns. With the image channel-last, the taps
//! of one kernel row of a pixel are `kw·C` consecutive floats and the next pixel's start
//! `stride·C` floats on, so each kernel row is one microkernel call reading the image in place
//! (row stride 1, column stride `stride·C`), accumulating into a channel-last tile; the tiles
//! of a band of output rows are then transposed into the output's `[O, OH·OW]`. Kernel rows
//! that fall in the vertical padding are skipped; the horizontal padding is zero columns of
//! the channel-last copy.
//!
//! Through im2col, the crate's rows were the pixels and its columns the output channels,
//! which no tile of 6 divides (64 = 10·6 + 4), and every sample's column matrix was written
//! once by im2col and copied again by the crate (docs/BENCHMARKS.md, session twenty-six).

use gemm_common::microkernel::MicroKernelFn;
use rayon::prelude::*;

use super::{add_channel_bias, direct, per_sample, ConvGeom, ConvScratch};
use crate::parallel::{self, PARALLEL_ELEMENTS};
use crate::tensor::transpose::{transpose, transpose_to};

/// The microkernel: `rows` output channels (whole vectors of `lanes`) by `cols` pixels.
#[derive(Clone, Copy)]
struct Micro {
    lanes: usize,
    rows: usize,
    cols: usize,
    /// The kernel for `vectors` vectors of rows (1-based: index `vectors - 1`) by `cols`
    /// columns (index `cols - 1`).
    pick: fn(usize, usize) -> MicroKernelFn<f32>,
}

/// The microkernel this machine runs, if the driver has one for it (AVX-512 only: the AVX2
/// kernel's 16 × 4 tile was not measured here).
fn micro() -> Option<Micro> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        return Some(Micro {
            lanes: 16,
            rows: 64,
            cols: 6,
            pick: |v, c| gemm_f32::microkernel::avx512f::f32::UKR[v][c],
        });
    }
    None
}

/// Output pixels per band: the tiles of one band are transposed into the output together.
const BAND_PIXELS: usize = 256;

/// True when the forward of `g` runs here for `parts` workers: a microkernel for this
/// machine, one group, unit dilation, a kernel of more than one tap or stride (a pointwise
/// convolution reads its image in place), more than one input channel (else
/// `conv/direct.rs`), samples that do not share products ([`ConvGeom::group`]), and output
/// channels in whole vectors.
pub(super) fn applies(g: &ConvGeom, parts: usize) -> bool {
    micro().is_some_and(|mk| {
        g.groups == 1
            && g.dil == (1, 1)
            && !g.is_pointwise()
            && !direct::applies(g)
            && g.group(parts) == 1
            && g.o % mk.lanes == 0
            && g.image_len() > 0
    })
}

/// Columns of the channel-last image copy: every column a pixel's taps read,
/// `(OW - 1)·stride + kw`, the padding's included.
fn padded_w(g: &ConvGeom) -> usize {
    (g.ow - 1) * g.stride.1 + g.k.1
}

/// Output rows per band: about [`BAND_PIXELS`] pixels.
fn band_rows(g: &ConvGeom) -> usize {
    BAND_PIXELS.div_ceil(g.ow).clamp(1, g.oh)
}

/// Floats of the packed weight and its staging copy, shared by the workers: `2·C·kh·kw·O`.
pub(super) fn weight_len(g: &ConvGeom) -> usize {
    g.kg().saturating_mul(g.o).saturating_mul(2)
}

/// Floats of one worker's scratch: a band's tiles `[P, 64]`, the channel-last image with its
/// padding columns `[H, pw, C]`, and its copy before padding `[H, W, C]`.
pub(super) fn scratch_len(g: &ConvGeom) -> usize {
    let rows = micro().map_or(0, |mk| mk.rows);
    let tiles = band_rows(g).saturating_mul(g.ow).saturating_mul(rows);
    let image = g.h.saturating_mul(padded_w(g)).saturating_mul(g.c);
    tiles.saturating_add(image).saturating_add(g.image_len())
}

/// Packs `w [O, C, kh, kw]` into `wp`: panels of `rows` output channels (the last one what is
/// left), each `[C·kh·kw, rows]` with row `(ki·kw + kj)·C + c` holding tap `(c, ki, kj)`.
/// Through `tmp`, `w` transposed (rows in the weight's order), whose rows are then copied in
/// tap order.
fn pack_weight(g: &ConvGeom, rows: usize, w: &[f32], wp: &mut [f32], tmp: &mut [f32]) {
    let (k, o, taps) = (g.kg(), g.o, g.k.0 * g.k.1);
    transpose(w, o, k, k, tmp);
    let tmp = &*tmp;
    let fill = |panel: usize, dst: &mut [f32]| {
        let (o0, mb) = (panel * rows, rows.min(o - panel * rows));
        for (j, row) in dst.chunks_exact_mut(mb).enumerate() {
            let (t, c) = (j / g.c, j % g.c);
            row.copy_from_slice(&tmp[(c * taps + t) * o + o0..][..mb]);
        }
    };
    let wp = &mut wp[..k * o];
    if parallel::kernel_threads() > 1 && wp.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| wp.par_chunks_mut(k * rows).enumerate().for_each(|(p, dst)| fill(p, dst)));
    } else {
        wp.chunks_mut(k * rows).enumerate().for_each(|(p, dst)| fill(p, dst));
    }
}

/// Copies the image `x [C, H, W]` channel-last into `xp [H, pw, C]`, column `iw + pl` holding
/// input column `iw` and zeros in the padding columns, through `xc` (`[H, W, C]`).
fn pad_columns<'a>(g: &ConvGeom, x: &[f32], xp: &'a mut [f32], xc: &mut [f32]) -> &'a [f32] {
    let (c, pw, pl) = (g.c, padded_w(g), g.pad.1);
    let xc = &mut xc[..g.image_len()];
    transpose(x, c, g.h * g.w, g.h * g.w, xc);
    let inside = g.w.min(pw.saturating_sub(pl)); // input columns some pixel reads
    let xp = &mut xp[..g.h * pw * c];
    for (row, src) in xp.chunks_exact_mut(pw * c).zip(xc.chunks_exact(g.w * c)) {
        row[..pl * c].fill(0.0);
        row[pl * c..(pl + inside) * c].copy_from_slice(&src[..inside * c]);
        row[(pl + inside) * c..].fill(0.0);
    }
    xp
}

/// `y[n] = W · x[n] (+ bias)` for a convolution [`applies`] takes; `scratch` as
/// [`ConvGeom::scratch_len`] gives it (the workers' scratch, then [`weight_len`] floats).
pub(super) fn forward(
    g: &ConvGeom,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: ConvScratch<'_>,
) {
    let mk = micro().expect("implicit::forward runs where `applies` found a microkernel");
    let (k, o, ohw, il) = (g.kg(), g.o, g.ohw(), g.image_len());
    let parts = scratch.parts.max(1);
    let (work, wp) = scratch.buf.split_at_mut(parts * g.unfold_len(parts, false));
    let (wp, tmp) = wp.split_at_mut(k * o);
    pack_weight(g, mk.rows, w, wp, &mut tmp[..k * o]);
    let wp = &*wp;
    let (pw, run, step, band) = (padded_w(g), g.k.1 * g.c, g.stride.1 * g.c, band_rows(g));
    let mut outs: Vec<&mut [f32]> = y.chunks_mut(g.cols_len()).collect();
    per_sample(g, &mut outs, ConvScratch { parts, buf: work }, |n, yn, buf| {
        let (tiles, rest) = buf.split_at_mut(band * g.ow * mk.rows);
        let (xp, xc) = rest.split_at_mut(g.h * pw * g.c);
        let xp = pad_columns(g, &x[n * il..][..il], xp, xc);
        for o0 in (0..o).step_by(mk.rows) {
            let mb = mk.rows.min(o - o0);
            let panel = &wp[o0 * k..][..k * mb];
            for oh0 in (0..g.oh).step_by(band) {
                let rows = band.min(g.oh - oh0);
                for oh in oh0..oh0 + rows {
                    for ow0 in (0..g.ow).step_by(mk.cols) {
                        let nn = mk.cols.min(g.ow - ow0);
                        let tile = &mut tiles[((oh - oh0) * g.ow + ow0) * mk.rows..][..mk.rows * nn];
                        let image_col = ow0 * g.stride.1;
                        let mut first = true;
                        for ki in 0..g.k.0 {
                            let ih = (oh * g.stride.0 + ki).wrapping_sub(g.pad.0);
                            if ih >= g.h {
                                continue; // a kernel row in the padding (wrapped when above)
                            }
                            let lhs = &panel[ki * run * mb..][..run * mb];
                            let rhs = &xp[(ih * pw + image_col) * g.c..][..(nn - 1) * step + run];
                            // SAFETY: the microkernel for `mb / lanes` vectors by `nn` columns
                            // (mk.pick's table, AVX-512 present: `micro`) reads `run` steps
                            // of `mb` floats of `lhs` (row stride 1, column stride mb: the
                            // slice holds run·mb) and of `nn` floats of `rhs` (row stride 1,
                            // column stride `step`: the slice holds (nn-1)·step + run), and
                            // writes `mb × nn` floats of `tile` (column stride rows ≥ mb: the
                            // slice holds rows·nn). With `first` it overwrites the tile
                            // (alpha status 0), else adds to it (status 1).
                            unsafe {
                                (mk.pick)(mb / mk.lanes - 1, nn - 1)(
                                    mb,
                                    nn,
                                    run,
                                    tile.as_mut_ptr(),
                                    lhs.as_ptr(),
                                    rhs.as_ptr(),
                                    mk.rows as isize,
                                    1,
                                    mb as isize,
                                    1,
                                    step as isize,
                                    if first { 0.0 } else { 1.0 },
                                    1.0,
                                    u8::from(!first),
                                    false,
                                    false,
                                    false,
                                    lhs.as_ptr(),
                                )
                            };
                            first = false;
                        }
                        if first {
                            tile.fill(0.0); // every kernel row in the padding
                        }
                    }
                }
                let (first, px) = (oh0 * g.ow, rows * g.ow);
                transpose_to(&tiles[..px * mk.rows], px, mb, mk.rows, &mut yn[o0 * ohw + first..], ohw);
            }
        }
        if let Some(b) = bias {
            add_channel_bias(yn, b, ohw); // while the sample's output is in cache
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{geom, naive_forward};
    use super::*;

    #[test]
    fn the_implicit_forward_matches_the_definition() {
        // Output channels in one panel, a panel and a part (80 = 64 + 16), several panels;
        // rows not whole tiles of pixels (OW 9, 13, 5), strides, the padding of a "same" 5×5
        // and one that puts whole kernel rows outside the image, an unpadded kernel, bands
        // (more than BAND_PIXELS pixels, a short last band) and a stride that leaves input
        // columns unread.
        let cases = [
            ConvGeom { n: 3, o: 16, ..geom(3, (9, 9), (3, 3), (1, 1), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 80, ..geom(5, (9, 13), (3, 3), (1, 1), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 32, ..geom(4, (14, 14), (5, 5), (1, 1), (2, 2), (1, 1)) },
            ConvGeom { n: 1, o: 48, ..geom(2, (25, 9), (3, 3), (2, 2), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 16, ..geom(3, (4, 10), (3, 2), (1, 1), (3, 1), (1, 1)) },
            ConvGeom { n: 2, o: 128, ..geom(6, (12, 12), (3, 3), (1, 1), (0, 0), (1, 1)) },
            ConvGeom { n: 1, o: 16, ..geom(2, (40, 30), (3, 3), (1, 1), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 16, ..geom(3, (24, 23), (2, 2), (3, 3), (0, 0), (1, 1)) },
        ];
        for (i, g) in cases.iter().enumerate() {
            let x: Vec<f32> = (0..g.n * g.image_len()).map(|v| (v % 7) as f32 - 3.0).collect();
            let w: Vec<f32> = (0..g.o * g.kg()).map(|v| (v % 5) as f32 - 2.0).collect();
            let b: Vec<f32> = (0..g.o).map(|v| v as f32).collect();
            let want = naive_forward(g, &x, &w, &b);
            for parts in [1, 2] {
                assert_eq!(applies(g, parts), micro().is_some(), "case {i}, {parts} parts");
                let mut buf = vec![f32::NAN; g.scratch_len(parts, false)];
                let mut y = vec![f32::NAN; g.n * g.cols_len()];
                super::super::forward(g, &x, &w, Some(&b), &mut y, ConvScratch { parts, buf: &mut buf });
                assert_eq!(y, want, "case {i}, {parts} parts");
            }
        }
        assert!(cases[6].oh % band_rows(&cases[6]) != 0, "a short last band");
    }
}
