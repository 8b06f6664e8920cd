//! Convolution as an implicit GEMM: the `gemm` crate's microkernel, run by a driver of our
//! own on the image where it lies, with no column matrix. It runs the forward, and the input
//! gradient of a stride-1 convolution as the forward of its transposed convolution (the
//! output gradient convolved with the flipped kernel), with AVX-512 (and with AVX2 on rows of
//! 14 pixels and more, or of any width when called by taps: [`micro`]).
//!
//! The output channels are the microkernel's rows (64 a tile with AVX-512, 16 with AVX2, from
//! the weight packed once per call into panels `[C·kh·kw, 64]` in tap-major order,
//! `(ki·kw + kj)·C + c`), and up to 6
//! output pixels of one output row its columns. With the image copied channel-last, the taps
//! of one kernel row of a pixel are `kw·C` consecutive floats and the next pixel's start
//! `stride·C` floats on, so a kernel row of a tile is one microkernel call reading the image
//! in place (row stride 1, column stride `stride·C`), adding to a channel-last tile. The
//! driver runs a band of output rows kernel row by kernel row, so the kernel row's slab of the
//! panel stays in the L2 across the band, then transposes the band's tiles into the output's
//! `[O, OH·OW]`. Kernel rows that fall in the vertical padding are skipped; the horizontal
//! padding is zero columns of the channel-last copy. From 256 input channels on, the driver
//! calls the microkernel tap by tap instead ([`Calls`]), each call over the output columns
//! whose tap is inside the image, so the padding's taps are skipped too. Samples of few
//! pixels whose packed weight is larger than the L2 run panel by panel instead, several
//! samples to each panel (`conv/implicit_panels.rs`).
//!
//! Through im2col, the crate's rows were the pixels and its columns the output channels,
//! which no tile of 6 divides (64 = 10·6 + 4), and each sample's column matrix was written by
//! im2col and copied again by the crate. Here ResNet-18's 3×3 forwards and stride-1 input
//! gradients ran 7–23% faster, and its training step 8% (docs/BENCHMARKS.md, session
//! twenty-six). A kernel row of few floats (the 7×7 stem over 3 channels) or a single tap
//! (strided 1×1) stays on im2col, which ran those faster.

use super::implicit_pack::{pack_backward, pack_forward, PACK_CHANNELS};
use super::implicit_panels as panels;
use super::micro::{column_tiles, micro, product, Micro};
use super::{add_channel_bias, ConvGeom, ConvScratch};
use crate::kernels::{for_each_with_scratch, split_len};
use crate::parallel;
use crate::tensor::transpose::{transpose, transpose_to};

/// Output pixels per band: the tiles of one band are transposed into the output together.
/// 128 and 512 were no faster at 56² and 28² (docs/BENCHMARKS.md, session twenty-six).
const BAND_PIXELS: usize = 256;

/// The fewest floats one microkernel call sums over (`kw·C`, a kernel row of a pixel): ResNet's
/// stem (7×7 over 3 channels, 21) and its strided 1×1 layers (one tap) ran slower here than
/// through im2col (docs/BENCHMARKS.md, session twenty-six).
const MIN_RUN: usize = 64;

/// How the driver cuts a tile's sum into microkernel calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Calls {
    /// One call per kernel row (`kw·C` steps: the row's taps are consecutive in the
    /// channel-last image), the padding's columns summed as zeros.
    KernelRows,
    /// One call per tap (`C` steps), over the output columns whose input column for the tap
    /// is inside the image: the padding's taps are skipped (at 7×7 with a 3×3 kernel, 2 of 21
    /// columns a kernel row), and the tiles of a row are cut from the columns each tap
    /// reaches (6, 7 and 6 at 7×7: the two 6-pixel tiles run the full-width microkernel).
    Taps,
}

/// The fewest channels (steps of a tap's call) for [`Calls::Taps`]. Forgia against forgia
/// (docs/BENCHMARKS.md, session twenty-eight): ResNet-18's 7×7 layers over 512 channels ran
/// 9–13% faster by taps, its 14×14 ones over 256 2–3%, and the 28×28 ones over 128 2% and the
/// 56×56 over 64 7% slower (a call's fixed cost against its shorter sum).
const TAP_CALLS_MIN_CHANNELS: usize = 256;

impl Calls {
    /// The calls for the convolution `g`: by taps from [`TAP_CALLS_MIN_CHANNELS`] input
    /// channels on, when a kernel row has more than one tap.
    fn for_geom(g: &ConvGeom) -> Calls {
        if g.c >= TAP_CALLS_MIN_CHANNELS && g.k.1 > 1 {
            Calls::Taps
        } else {
            Calls::KernelRows
        }
    }
}

/// True when the forward of `g` (image → columns) runs here: a microkernel for this machine,
/// one group, unit dilation, a kernel of more than one tap with at least [`MIN_RUN`] floats a
/// kernel row, output channels in whole vectors, and output rows of at least the kernel's
/// [`Micro::min_ow`] pixels unless it is called by taps.
pub(super) fn forward_applies(g: &ConvGeom) -> bool {
    micro().is_some_and(|mk| {
        g.groups == 1
            && (g.ow >= mk.min_ow || Calls::for_geom(g) == Calls::Taps)
            && g.dil == (1, 1)
            && g.k.0 * g.k.1 > 1
            && g.k.1 * g.c >= MIN_RUN
            && g.o.is_multiple_of(mk.lanes)
            && g.image_len() > 0
            && g.cols_len() > 0
    })
}

/// The convolution whose forward is the input gradient of `g`, for a stride-1 `g` padded by
/// at most its kernel less one: from the output gradient `[O, OH, OW]` to the input's
/// `[C, H, W]`, over the kernel flipped and padded by `k - 1 - pad`.
fn transposed(g: &ConvGeom) -> Option<ConvGeom> {
    let fits = g.stride == (1, 1) && g.pad.0 < g.k.0 && g.pad.1 < g.k.1;
    fits.then(|| ConvGeom {
        c: g.o,
        h: g.oh,
        w: g.ow,
        o: g.c,
        oh: g.h,
        ow: g.w,
        pad: (g.k.0 - 1 - g.pad.0, g.k.1 - 1 - g.pad.1),
        ..*g
    })
}

/// True when the input gradient of `g` runs here, as the forward of the transposed
/// convolution ([`forward_applies`]): stride 1, and the padding at most the kernel less one.
pub(super) fn backward_applies(g: &ConvGeom) -> bool {
    g.dil == (1, 1) && transposed(g).is_some_and(|t| forward_applies(&t))
}

/// Columns of the channel-last image copy: every column a pixel's taps read,
/// `(OW - 1)·stride + kw`, the padding's included.
pub(super) fn padded_w(g: &ConvGeom) -> usize {
    (g.ow - 1) * g.stride.1 + g.k.1
}

/// Output rows per band: about [`BAND_PIXELS`] pixels.
fn band_rows(g: &ConvGeom) -> usize {
    BAND_PIXELS.div_ceil(g.ow).clamp(1, g.oh)
}

/// Floats of the packed weight, shared by the workers: `C·kh·kw·O`.
pub(super) fn weight_len(g: &ConvGeom) -> usize {
    g.kg().saturating_mul(g.o)
}

/// Floats the workers share for whichever of the forward and the input gradient of `g` run
/// here: the packed weight, then the samples' copies where the driver goes panel by panel
/// (`conv/implicit_panels.rs`).
pub(super) fn shared_len(g: &ConvGeom) -> usize {
    let fwd = if forward_applies(g) { panels::shared_len(g, panels::group(g)) } else { 0 };
    let bwd =
        if backward_applies(g) { transposed(g).map_or(0, |t| panels::shared_len(&t, panels::group(&t))) } else { 0 };
    weight_len(g).saturating_add(fwd.max(bwd))
}

/// Floats of one worker's scratch for the forward of `g` (for the input gradient, of its
/// transposed convolution) with the microkernel `mk`: a band's tiles `[P, rows]`, the
/// channel-last image with its padding columns `[H, pw, C]`, and its copy before padding
/// `[H, W, C]`; or, while the weight is packed, [`pack_forward`]'s buffer, or the panel
/// driver's ([`panels::worker_len`]) where it runs `group` samples an item, if that is more.
fn run_len(g: &ConvGeom, mk: Micro, group: Option<usize>) -> usize {
    let tiles = band_rows(g).saturating_mul(g.ow).saturating_mul(mk.rows);
    let image = g.h.saturating_mul(padded_w(g)).saturating_mul(g.c);
    let pack = (PACK_CHANNELS * g.k.0 * g.k.1).saturating_mul(mk.rows);
    tiles.saturating_add(image).saturating_add(g.image_len()).max(pack).max(panels::worker_len(g, mk, group))
}

/// Floats of one worker's scratch for whichever of the forward and the input gradient of `g`
/// run here (0 for neither).
pub(super) fn scratch_len(g: &ConvGeom) -> usize {
    let Some(mk) = micro() else { return 0 };
    let fwd = if forward_applies(g) { run_len(g, mk, panels::group(g)) } else { 0 };
    let bwd = if backward_applies(g) { transposed(g).map_or(0, |t| run_len(&t, mk, panels::group(&t))) } else { 0 };
    fwd.max(bwd)
}

/// Copies `x [C, H, W]` channel-last into `xp`, rows of `pw` pixels of `C` floats, through
/// `xc` (`[H, W, C]`): input pixel `(ih, iw)` at row `top + ih`, column `left + iw`, the input
/// columns past `pw` left out, every other float of `xp` zero (a last, shorter row too). Both
/// implicit GEMMs read their operands from such copies: the forward's image with its column
/// padding, the weight gradient's image padded all round and its output gradient on its grid.
pub(super) fn channel_last(
    x: &[f32],
    (c, h, w): (usize, usize, usize),
    (top, left, pw): (usize, usize, usize),
    xp: &mut [f32],
    xc: &mut [f32],
) {
    let xc = &mut xc[..c * h * w];
    transpose(x, c, h * w, h * w, xc);
    // The padding's columns (all of them, unless a stride past the whole padded row leaves a
    // single output pixel reading padding only), then the input columns some pixel reads.
    let lead = left.min(pw);
    let inside = w.min(pw - lead);
    let (above, rest) = xp.split_at_mut((top * pw * c).min(xp.len()));
    above.fill(0.0);
    let mut rows = rest.chunks_mut(pw * c);
    // The image's rows first: `zip` stops on them without taking a row past the last.
    for (src, row) in xc.chunks_exact(w * c).zip(rows.by_ref()) {
        row[..lead * c].fill(0.0);
        row[lead * c..(lead + inside) * c].copy_from_slice(&src[..inside * c]);
        row[(lead + inside) * c..].fill(0.0);
    }
    rows.for_each(|row| row.fill(0.0));
}

/// `y[n] = W · x[n] (+ bias)` for a convolution [`forward_applies`] takes; `scratch` as
/// [`ConvGeom::scratch_len`] gives it (the workers' [`ConvGeom::unfold_len`] floats each, at
/// least [`run_len`], then [`weight_len`] floats).
pub(super) fn forward(
    g: &ConvGeom,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: ConvScratch<'_>,
) {
    let mk = micro().expect("implicit::forward runs where `forward_applies` found a microkernel");
    forward_on((mk, Calls::for_geom(g), panels::group(g)), g, (x, w, bias), y, scratch);
}

/// [`forward`] with the microkernel `mk` and the `calls`, panel by panel `group` samples an
/// item if some (`conv/implicit_panels.rs`), `scratch` at least [`run_len`] floats a worker
/// and then [`weight_len`] and [`panels::shared_len`].
fn forward_on(
    (mk, calls, group): (Micro, Calls, Option<usize>),
    g: &ConvGeom,
    (x, w, bias): (&[f32], &[f32], Option<&[f32]>),
    y: &mut [f32],
    scratch: ConvScratch<'_>,
) {
    pack_and_run((mk, calls, group), g, (x, bias), y, scratch, |wp, bufs| pack_forward(g, mk.rows, w, wp, bufs));
}

/// `x[n] = col2im(Wᵀ · y[n]) (+ bias)` (`backward_data` of `kernels/conv.rs`) for a
/// convolution [`backward_applies`] takes, as the forward of its transposed convolution: the
/// weight `[O, C, kh, kw]` packed as `[C, O, kh, kw]` with each kernel flipped. `scratch` as
/// for [`forward`].
pub(super) fn backward_data(
    g: &ConvGeom,
    y: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    x: &mut [f32],
    scratch: ConvScratch<'_>,
) {
    let mk = micro().expect("implicit::backward_data runs where `backward_applies` found a microkernel");
    let t = transposed(g).expect("implicit::backward_data runs where `backward_applies` holds");
    backward_data_on((mk, Calls::for_geom(&t), panels::group(&t)), g, (y, w, bias), x, scratch);
}

/// [`backward_data`] with the microkernel `mk`, the `calls` and the `group` (of the
/// transposed convolution, as for [`forward_on`]), `scratch` as for [`forward_on`] of the
/// transposed convolution.
fn backward_data_on(
    (mk, calls, group): (Micro, Calls, Option<usize>),
    g: &ConvGeom,
    (y, w, bias): (&[f32], &[f32], Option<&[f32]>),
    x: &mut [f32],
    scratch: ConvScratch<'_>,
) {
    let t = transposed(g).expect("implicit::backward_data runs where `backward_applies` holds");
    pack_and_run((mk, calls, group), &t, (y, bias), x, scratch, |wp, bufs| pack_backward(g, &t, mk.rows, w, wp, bufs));
}

/// The forward of `t` from `src` into `dst` (`t` is `g` itself for [`forward`], its
/// transposed convolution for [`backward_data`]): `scratch` split into the workers'
/// [`run_len`] floats of `t`, the packed weight after them, which `pack` fills first, and the
/// panel driver's copies ([`panels::shared_len`] of `t`) last.
fn pack_and_run(
    (mk, calls, group): (Micro, Calls, Option<usize>),
    t: &ConvGeom,
    (src, bias): (&[f32], Option<&[f32]>),
    dst: &mut [f32],
    scratch: ConvScratch<'_>,
    pack: impl FnOnce(&mut [f32], &mut [&mut [f32]]),
) {
    let _flush = parallel::FlushDenormals::new(); // as `gemm` does on the caller's thread
    let parts = scratch.parts.max(1);
    let len = run_len(t, mk, group);
    let (work, shared) = scratch.buf.split_at_mut(parts * len);
    let (wp, copies) = shared.split_at_mut(weight_len(t));
    let mut bufs = split_len(work, parts, len);
    pack(wp, &mut bufs);
    if let Some(group) = group {
        return panels::run(t, (mk, calls), group, (src, wp, bias), dst, copies, &mut bufs);
    }
    run(t, (mk, calls), src, wp, bias, dst, &mut bufs);
}

/// The driver: `y[n] = W · x[n] (+ bias)` for the convolution `g` with its weight packed in
/// `wp` ([`pack_forward`]), the samples spread over the workers of `bufs` ([`run_len`]
/// floats each at least), the microkernel `mk` called as `calls` says.
fn run(
    g: &ConvGeom,
    (mk, calls): (Micro, Calls),
    x: &[f32],
    wp: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    bufs: &mut [&mut [f32]],
) {
    let (k, o, ohw, il) = (g.kg(), g.o, g.ohw(), g.image_len());
    let (pw, band) = (padded_w(g), band_rows(g));
    let mut outs: Vec<&mut [f32]> = y.chunks_mut(g.cols_len()).collect();
    for_each_with_scratch(&mut outs, bufs, |n, yn, buf| {
        let (tiles, rest) = buf.split_at_mut(band * g.ow * mk.rows);
        let (xp, xc) = rest.split_at_mut(g.h * pw * g.c);
        channel_last(&x[n * il..][..il], (g.c, g.h, g.w), (0, g.pad.1, pw), xp, xc);
        for o0 in (0..o).step_by(mk.rows) {
            let mb = mk.rows.min(o - o0);
            for oh0 in (0..g.oh).step_by(band) {
                let rows = oh0..(oh0 + band).min(g.oh);
                let (first, px) = (oh0 * g.ow, rows.len() * g.ow);
                let tiles = &mut tiles[..px * mk.rows];
                band_tiles(g, (mk, calls), &wp[o0 * k..][..k * mb], &[&*xp], rows, tiles);
                transpose_to(tiles, px, mb, mk.rows, &mut yn[o0 * ohw + first..], ohw);
            }
        }
        if let Some(b) = bias {
            add_channel_bias(yn, b, ohw); // while the sample's output is in cache
        }
    })
}

/// The channel-last tiles `[P, 64]` of the output rows `rows` for the panel's output channels
/// (`panel` is `[C·kh·kw, mb]`), for each image of `images` ([`channel_last`] with the column
/// padding) into its block of `tiles` (one after another), the microkernel called as `calls`
/// says. Kernel row by kernel row (each tap of it in turn, by taps), through every image: its
/// slab of the panel (`kw·C·64` floats) stays in the L2 across the band's tiles of all of
/// them (a whole 512-channel panel at 7×7 is 1.2 MB).
pub(super) fn band_tiles(
    g: &ConvGeom,
    (mk, calls): (Micro, Calls),
    panel: &[f32],
    images: &[&[f32]],
    rows: std::ops::Range<usize>,
    tiles: &mut [f32],
) {
    let block = rows.len() * g.ow * mk.rows;
    let tiles = &mut tiles[..images.len() * block];
    tiles.fill(0.0);
    for tap in call_taps(g, calls) {
        for (xp, t) in images.iter().zip(tiles.chunks_exact_mut(block)) {
            tap_tiles(g, (mk, calls), panel, tap, xp, rows.clone(), t);
        }
    }
}

/// The first taps `(ki, kj)` of the calls along a row of tiles: `(ki, 0)` for each kernel row
/// by kernel rows, every tap by taps.
fn call_taps(g: &ConvGeom, calls: Calls) -> impl Iterator<Item = (usize, usize)> {
    let starts = match calls {
        Calls::KernelRows => 1,
        Calls::Taps => g.k.1,
    };
    (0..g.k.0).flat_map(move |i| (0..starts).map(move |j| (i, j)))
}

/// Adds to the tiles of [`band_tiles`] the calls that start at tap `(ki, kj)`: by kernel rows
/// a call covers every output column, the padding's read as zeros; by taps, tap `(ki, kj)`
/// covers the columns whose input column `ow·stride + kj - pad` is inside the image.
fn tap_tiles(
    g: &ConvGeom,
    (mk, calls): (Micro, Calls),
    panel: &[f32],
    (ki, kj): (usize, usize),
    xp: &[f32],
    rows: std::ops::Range<usize>,
    tiles: &mut [f32],
) {
    let (pw, step) = (padded_w(g), g.stride.1 * g.c);
    let mb = panel.len() / g.kg();
    // A call sums `taps` taps of one kernel row from tap `kj` on.
    let taps = match calls {
        Calls::KernelRows => g.k.1,
        Calls::Taps => 1,
    };
    let run = taps * g.c;
    let lhs = &panel[(ki * g.k.1 + kj) * g.c * mb..][..run * mb];
    let (lo, hi) = match calls {
        Calls::KernelRows => (0, g.ow),
        Calls::Taps => (
            g.pad.1.saturating_sub(kj).div_ceil(g.stride.1),
            g.ow.min((g.w + g.pad.1).saturating_sub(kj).div_ceil(g.stride.1)),
        ),
    };
    for oh in rows.clone() {
        let ih = (oh * g.stride.0 + ki).wrapping_sub(g.pad.0);
        if ih >= g.h || lo >= hi {
            continue; // a kernel row in the padding (wrapped when above), or a tap in it
        }
        for (first, nn) in column_tiles(hi - lo, mk.cols) {
            let ow0 = lo + first;
            let tile = &mut tiles[((oh - rows.start) * g.ow + ow0) * mk.rows..][..mk.rows * nn];
            // Column `ow·stride + kj` of the copy, whose first `pad` columns are padding.
            let rhs = &xp[(ih * pw + ow0 * g.stride.1 + kj) * g.c..][..(nn - 1) * step + run];
            product(mk, (mb, nn, run), (tile, 1, mk.rows), (lhs, mb), (rhs, 1, step));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::micro::micro_for;
    use super::super::tests::{check_activation_maps, geom, naive_backward, naive_forward, small_maps};
    use super::*;
    use crate::runtime::{isa, Isa};

    /// The driver's microkernels for the instruction sets in force and below: AVX-512's and
    /// AVX2's on a machine with AVX-512, so that both run in its tests.
    fn micros() -> Vec<Micro> {
        [Isa::Avx512, Isa::Avx2].into_iter().filter_map(micro_for).collect()
    }

    /// The forward of `g` (and its input gradient when `backward`) run by the driver with the
    /// microkernel `mk`, its `calls` and panel by panel `group` samples an item (if some), on
    /// `parts` workers, against the definition, whatever the dispatch rules would choose.
    fn check_driver(
        (mk, calls, group): (Micro, Calls, Option<usize>),
        g: &ConvGeom,
        backward: bool,
        parts: usize,
        what: &str,
    ) {
        let (x, w, b, gy) = small_maps(g);
        let len = |t: &ConvGeom| parts * run_len(t, mk, group) + weight_len(g) + panels::shared_len(t, group);
        let mut buf = vec![f32::NAN; len(g)];
        let mut y = vec![f32::NAN; g.n * g.cols_len()];
        forward_on((mk, calls, group), g, (&x, &w, Some(&b)), &mut y, ConvScratch { parts, buf: &mut buf });
        assert_eq!(y, naive_forward(g, &x, &w, &b), "{what}: forward");
        if backward {
            let t = transposed(g).expect("a stride-1 case");
            let mut buf = vec![f32::NAN; len(&t)];
            let mut gx = vec![f32::NAN; x.len()];
            backward_data_on((mk, calls, group), g, (&gy, &w, None), &mut gx, ConvScratch { parts, buf: &mut buf });
            assert_eq!(gx, naive_backward(g, &x, &w, &gy).0, "{what}: input gradient");
        }
    }

    #[test]
    fn the_implicit_forward_and_input_gradient_match_the_definition() {
        // Output channels in one panel, a panel and a part (80 = 64 + 16), several panels;
        // rows not whole tiles of pixels (OW 9, 13, 5), strides, the padding of a "same" 5×5
        // and one that puts whole kernel rows outside the image, an unpadded kernel, bands
        // (more than BAND_PIXELS pixels, a short last band), a stride that leaves input
        // columns unread, and a 7×7 sample (fewer pixels than a tile). The input gradient
        // runs here for the stride-1 ones padded less than their kernel with input channels
        // in whole vectors. Last, a stride past the padded row: one pixel of padding only.
        let cases = [
            ConvGeom { n: 3, o: 32, ..geom(32, (9, 9), (3, 3), (1, 1), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 80, ..geom(48, (9, 13), (3, 3), (1, 1), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 32, ..geom(16, (14, 14), (5, 5), (1, 1), (2, 2), (1, 1)) },
            ConvGeom { n: 1, o: 48, ..geom(32, (25, 9), (3, 3), (2, 2), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 16, ..geom(40, (4, 10), (3, 2), (1, 1), (3, 1), (1, 1)) },
            ConvGeom { n: 2, o: 128, ..geom(22, (12, 12), (3, 3), (1, 1), (0, 0), (1, 1)) },
            ConvGeom { n: 1, o: 32, ..geom(32, (40, 30), (3, 3), (1, 1), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 16, ..geom(33, (24, 23), (2, 2), (3, 3), (0, 0), (1, 1)) },
            ConvGeom { n: 3, o: 64, ..geom(64, (7, 7), (3, 3), (1, 1), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 16, ..geom(32, (3, 2), (2, 2), (20, 20), (4, 5), (1, 1)) },
        ];
        let backward = [true, true, true, false, false, false, true, false, true, false];
        for (i, g) in cases.iter().enumerate() {
            let wide = |ow: usize| micro().is_some_and(|mk| ow >= mk.min_ow);
            assert_eq!(forward_applies(g), wide(g.ow), "case {i}");
            assert_eq!(backward_applies(g), wide(g.w) && backward[i], "case {i}");
            for parts in [1, 2] {
                check_activation_maps(g, parts, &format!("case {i}, {parts} parts"));
                for mk in micros() {
                    // Sample by sample, and panel by panel two samples an item (a last item of
                    // one where the batch is odd).
                    for (calls, group) in
                        [Calls::KernelRows, Calls::Taps].into_iter().flat_map(|c| [None, Some(2)].map(|s| (c, s)))
                    {
                        let what = format!("case {i}, {} rows, {calls:?}, {group:?} a panel, {parts} parts", mk.rows);
                        check_driver((mk, calls, group), g, backward[i], parts, &what);
                    }
                }
            }
        }
        // Both microkernels ran above where the instruction set in force has them.
        #[cfg(target_arch = "x86_64")]
        assert_eq!(micros().len(), [Isa::Avx2, Isa::Avx512].iter().filter(|&&t| t <= isa()).count());
        assert!(!cases[6].oh.is_multiple_of(band_rows(&cases[6])), "a short last band");
        assert!(cases[9].pad.1 > padded_w(&cases[9]), "padding past the padded row");
    }

    #[test]
    fn calls_go_tap_by_tap_from_256_channels_on_a_kernel_row_of_several_taps() {
        let g = |c: usize, k: (usize, usize)| ConvGeom { n: 1, o: 64, ..geom(c, (7, 7), k, (1, 1), (1, 1), (1, 1)) };
        assert_eq!(Calls::for_geom(&g(512, (3, 3))), Calls::Taps);
        assert_eq!(Calls::for_geom(&g(256, (3, 3))), Calls::Taps);
        assert_eq!(Calls::for_geom(&g(128, (3, 3))), Calls::KernelRows);
        assert_eq!(Calls::for_geom(&g(512, (3, 1))), Calls::KernelRows);
        // By taps, rows narrower than the kernel's `min_ow` run here too (AVX2's at 7 pixels).
        assert_eq!(forward_applies(&g(512, (3, 3))), micro().is_some());
        assert_eq!(forward_applies(&g(128, (3, 3))), micro().is_some_and(|mk| mk.min_ow <= 7));
    }
}
