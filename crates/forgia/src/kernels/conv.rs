//! Convolution through im2col/col2im and GEMM. One geometry describes a convolution between
//! an "image" side `[N, C, H, W]` and a "columns" side `[N, O, OH, OW]` with a weight
//! `[O, C/groups, kh, kw]`: conv2d maps image → columns, conv_transpose2d maps columns → image
//! with the same three batch kernels (`forward`, `backward_data`, `backward_weight`).
//!
//! The bias, added per channel and summed out of the gradient, is in `conv/bias.rs`.
//!
//! A forward with a single input channel runs the direct kernel of `conv/direct.rs` instead
//! (an im2col of `kh·kw` rows makes a GEMM with an inner size of 25). The column matrix
//! ([`im2col`], [`col2im`]) is in `conv/cols.rs`; its rows are padded to whole vectors where
//! the pixel count is not a multiple of 8 ([`ConvGeom::ld`]), and the weight gradient of a
//! unit-stride convolution unfolds its image pixel-major instead (`conv/rows.rs`), so that the
//! `gemm` crate reads every large operand in place rather than copying it first.
//!
//! Results go into buffers the caller allocated, and so does the scratch ([`ConvScratch`]):
//! the batch is cut into [`ConvGeom::parts`] slices that run in parallel, each with its own
//! column matrix (and, for the weight gradient, its own partial sum).

use rayon::prelude::*;

mod bias;
mod cols;
mod direct;
mod rows;

use bias::add_channel_bias;
pub(crate) use bias::channel_sum;
use cols::{col2im, im2col};

use super::gemm::{gemm, MatRef};
use super::split_len;
use crate::parallel;

/// The shape of one convolution (all sizes already checked by `ops/conv.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvGeom {
    /// Batch size.
    pub(crate) n: usize,
    /// Image-side channels.
    pub(crate) c: usize,
    /// Image-side height and width.
    pub(crate) h: usize,
    pub(crate) w: usize,
    /// Column-side channels.
    pub(crate) o: usize,
    /// Column-side height and width.
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    /// Kernel size, stride, padding, dilation (height, width).
    pub(crate) k: (usize, usize),
    pub(crate) stride: (usize, usize),
    pub(crate) pad: (usize, usize),
    pub(crate) dil: (usize, usize),
    /// Channel groups (divides `c` and `o`).
    pub(crate) groups: usize,
}

impl ConvGeom {
    /// Rows of one group's column matrix: `C/groups * kh * kw`.
    pub(crate) fn kg(&self) -> usize {
        self.c / self.groups * self.k.0 * self.k.1
    }
    fn og(&self) -> usize {
        self.o / self.groups
    }
    fn ohw(&self) -> usize {
        self.oh * self.ow
    }
    fn image_len(&self) -> usize {
        self.c * self.h * self.w
    }
    fn cols_len(&self) -> usize {
        self.o * self.ohw()
    }
    /// Multiply-adds of one pass (forward, or each of the two backward products).
    pub(crate) fn macs(&self) -> usize {
        crate::tensor::work(&[self.n, self.o, self.ohw(), self.kg()])
    }
    /// A 1x1, stride-1, unpadded convolution: the column matrix is the image itself.
    fn is_pointwise(&self) -> bool {
        self.k == (1, 1) && self.stride == (1, 1) && self.pad == (0, 0)
    }
    fn parallel(&self) -> bool {
        self.n > 1 && self.macs() >= parallel::PARALLEL_GEMM_WORK
    }
    /// Rows of the whole column matrix, every group's: `C·kh·kw`.
    fn unfold_rows(&self) -> usize {
        self.c.saturating_mul(self.k.0 * self.k.1)
    }
    /// The row stride of a column matrix: `OH·OW` rounded up to a whole number of 8-float
    /// vectors. The `gemm` crate copies ("packs") an operand whose rows it cannot read as
    /// whole vectors in place; with this stride it reads the columns and the output where they
    /// are (the main job's second-layer products ran 7–8% faster on the crate alone,
    /// `docs/BENCHMARKS.md`).
    fn ld(&self) -> usize {
        self.ohw().next_multiple_of(8)
    }
    /// The row stride the products use: [`ConvGeom::ld`] where rows are padded, else `OH·OW`.
    fn cols_ld(&self) -> usize {
        if self.padded() {
            self.ld()
        } else {
            self.ohw()
        }
    }
    /// True when the products run on a column matrix with padded rows (the pixel count is not
    /// a multiple of 8), through a padded copy of the product's pixel-side operand or result.
    fn padded(&self) -> bool {
        !self.is_pointwise() && self.ld() != self.ohw()
    }
    /// Output rows per band: the products unfold a sample's image one band of output rows at
    /// a time when its whole column matrix is more than twice [`BAND_BYTES`] and the weights
    /// are the smaller operand (fewer output channels than a band has pixels), so a band's
    /// columns stay in the core's cache between the unfold and the product (ResNet's 64-channel
    /// 3×3 layers at 56×56 unfold 7 MB a sample). Else every output row (`OH`). The bands are
    /// of about equal size, at most [`BAND_BYTES`] each, and hold a whole number of 8-float
    /// vectors of pixels where the row width allows.
    pub(super) fn band_rows(&self) -> usize {
        let oh = self.oh.max(1);
        let row_bytes = self.unfold_rows().saturating_mul(self.ow).saturating_mul(4).max(1);
        if self.is_pointwise() || row_bytes.saturating_mul(oh) <= 2 * BAND_BYTES {
            return oh;
        }
        let rows = oh.div_ceil(oh.div_ceil((BAND_BYTES / row_bytes).max(1)));
        let rows = rows.next_multiple_of(8 / gcd(self.ow, 8)).min(oh);
        if self.og() > rows.saturating_mul(self.ow) {
            return oh;
        }
        rows
    }
    /// True when the products run band by band ([`ConvGeom::band_rows`]).
    fn banded(&self) -> bool {
        self.band_rows() < self.oh
    }
    /// The row stride of a band's column matrix: the whole matrix's ([`ConvGeom::cols_ld`])
    /// when there is one band, else the band's pixels in whole vectors.
    fn band_ld(&self) -> usize {
        if self.banded() {
            (self.band_rows() * self.ow).next_multiple_of(8)
        } else {
            self.cols_ld()
        }
    }
    /// One sample's scratch: one band's column matrix `[C·kh·kw, ld]` (none for a pointwise
    /// convolution) plus, for padded rows or bands, one group's `[O/groups, ld]` block; or the
    /// direct kernel's padded plane, or the weight gradient's pixel-major unfold
    /// (`conv/rows.rs`), where that is larger.
    fn unfold_len(&self) -> usize {
        let cols = if self.is_pointwise() {
            0
        } else {
            let ld = self.band_ld();
            let block = if self.padded() || self.banded() { self.og().saturating_mul(ld) } else { 0 };
            self.unfold_rows().saturating_mul(ld).saturating_add(block)
        };
        cols.max(direct::scratch_len(self)).max(rows::scratch_len(self))
    }
    /// The batch slices a call runs in parallel: one per worker thread for a big
    /// convolution, else 1.
    pub(crate) fn parts(&self) -> usize {
        if self.parallel() {
            parallel::kernel_threads().min(self.n).max(1)
        } else {
            1
        }
    }
    /// Floats of scratch for `parts` slices: a column matrix each, plus, for the weight
    /// gradient (`weight`), a partial sum `[O, C/groups, kh, kw]` for every slice after the
    /// first. Saturates, so an impossible size fails the caller's allocation.
    pub(crate) fn scratch_len(&self, parts: usize, weight: bool) -> usize {
        let partials = if weight { (parts - 1).saturating_mul(self.o * self.kg()) } else { 0 };
        parts.saturating_mul(self.unfold_len()).saturating_add(partials)
    }
}

/// The most bytes of column matrix one band of output rows unfolds ([`ConvGeom::band_rows`]):
/// half the 1 MiB L2 of the cores this was tuned on, so the band, the weights and the band's
/// outputs stay in the core's cache.
const BAND_BYTES: usize = 512 << 10;

/// The greatest common divisor.
fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The bands of output rows of `g`: `0..r`, `r..2r`, … with `r` = [`ConvGeom::band_rows`].
fn bands(g: &ConvGeom) -> impl Iterator<Item = std::ops::Range<usize>> {
    let (r, oh) = (g.band_rows(), g.oh);
    (0..oh).step_by(r).map(move |a| a..(a + r).min(oh))
}

/// The scratch of one convolution call: `parts` slices of the batch and a buffer of
/// [`ConvGeom::scratch_len`] floats for them (any values: the kernels overwrite what they
/// read), allocated by the op.
pub(crate) struct ConvScratch<'a> {
    pub(crate) parts: usize,
    pub(crate) buf: &'a mut [f32],
}

fn packed(data: &[f32], offset: usize, row_stride: usize) -> MatRef<'_> {
    MatRef { data, offset, row_stride: row_stride as isize, col_stride: 1 }
}

fn transposed(data: &[f32], offset: usize, row_stride: usize) -> MatRef<'_> {
    MatRef { data, offset, row_stride: 1, col_stride: row_stride as isize }
}

/// Runs `f(sample, item, column scratch)` over the batch: `scratch.parts` consecutive slices
/// of it in parallel, each with its own column matrix.
fn per_sample<T: Send>(
    g: &ConvGeom,
    items: &mut [T],
    scratch: ConvScratch<'_>,
    f: impl Fn(usize, &mut T, &mut [f32]) + Sync,
) {
    let (unfold, parts) = (g.unfold_len(), scratch.parts.max(1));
    let mut cols = split_len(scratch.buf, parts, unfold);
    if parts == 1 || items.len() <= 1 {
        for (i, t) in items.iter_mut().enumerate() {
            f(i, t, &mut *cols[0]);
        }
        return;
    }
    let per = items.len().div_ceil(parts);
    let work: Vec<_> = items.chunks_mut(per).zip(cols.iter_mut()).enumerate().collect();
    // The parts already fill the pool: each part's products stay on its own thread (a GEMM
    // split again inside a part would only hand work between busy threads).
    parallel::install(|| {
        work.into_par_iter().for_each(|(p, (items, cols))| {
            parallel::with_kernels_on_this_thread(true, || {
                for (j, t) in items.iter_mut().enumerate() {
                    f(p * per + j, t, cols);
                }
            })
        })
    });
}

/// Image → columns: `y[n] = W · im2col(x[n]) (+ bias)` per group. `x` is `[N, C, H, W]`, `w`
/// is `[O, C/groups, kh, kw]`, `bias` is `[O]`, `y` is `[N, O, OH, OW]` (overwritten).
pub(crate) fn forward(
    g: &ConvGeom,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: ConvScratch<'_>,
) {
    let (og, kg, ohw, il) = (g.og(), g.kg(), g.ohw(), g.image_len());
    if g.cols_len() == 0 {
        return; // no output channels or no output pixels: nothing to write
    }
    let mut outs: Vec<&mut [f32]> = y.chunks_mut(g.cols_len()).collect();
    per_sample(g, &mut outs, scratch, |n, yn, cols| {
        let xn = &x[n * il..(n + 1) * il];
        if direct::applies(g) {
            return direct::forward_sample(g, xn, w, bias, yn, &mut cols[..direct::scratch_len(g)]);
        }
        if g.is_pointwise() {
            for grp in 0..g.groups {
                let (a, b) = (packed(w, grp * og * kg, kg), packed(xn, grp * kg * ohw, ohw));
                gemm(og, ohw, kg, a, b, &mut yn[grp * og * ohw..(grp + 1) * og * ohw], false, 1.0);
            }
        } else {
            // A band's product goes into a block of its own row stride, then its rows into
            // place, unless the band is the whole output with unpadded rows.
            let ld = g.band_ld();
            let (cols, block) = cols.split_at_mut(g.unfold_rows() * ld);
            for band in bands(g) {
                let (first, px) = (band.start * g.ow, band.len() * g.ow);
                im2col(g, xn, cols, ld, band);
                for grp in 0..g.groups {
                    let (a, b) = (packed(w, grp * og * kg, kg), packed(cols, grp * kg * ld, ld));
                    let c = &mut yn[grp * og * ohw..(grp + 1) * og * ohw];
                    if px == ohw && ld == ohw {
                        gemm(og, ohw, kg, a, b, c, false, 1.0);
                        continue;
                    }
                    let block = &mut block[..og * ld];
                    gemm(og, ld, kg, a, b, block, false, 1.0);
                    for (dst, src) in c.chunks_exact_mut(ohw).zip(block.chunks_exact(ld)) {
                        dst[first..first + px].copy_from_slice(&src[..px]);
                    }
                }
            }
        }
        if let Some(b) = bias {
            add_channel_bias(yn, b, ohw); // while the sample's output is in cache
        }
    })
}

/// Columns → image: `x[n] = col2im(Wᵀ · y[n]) (+ bias)` per group (the input gradient of
/// conv2d, the forward of conv_transpose2d; `bias` is `[C]`). `x` is overwritten.
pub(crate) fn backward_data(
    g: &ConvGeom,
    y: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    x: &mut [f32],
    scratch: ConvScratch<'_>,
) {
    let (og, kg, ohw, cl) = (g.og(), g.kg(), g.ohw(), g.cols_len());
    if g.image_len() == 0 {
        return; // no input channels or no input pixels: nothing to write
    }
    let mut outs: Vec<&mut [f32]> = x.chunks_mut(g.image_len()).collect();
    per_sample(g, &mut outs, scratch, |n, xn, cols| {
        let yn = &y[n * cl..(n + 1) * cl];
        if g.is_pointwise() {
            for grp in 0..g.groups {
                let (a, b) = (transposed(w, grp * og * kg, kg), packed(yn, grp * og * ohw, ohw));
                gemm(kg, ohw, og, a, b, &mut xn[grp * kg * ohw..(grp + 1) * kg * ohw], false, 1.0);
            }
        } else {
            // A band's gradient rows are read in place when they are whole vectors, else
            // copied into a block of padded rows (zeros after each) first.
            let ld = g.band_ld();
            let (cols, block) = cols.split_at_mut(g.unfold_rows() * ld);
            xn.fill(0.0);
            for band in bands(g) {
                let (first, px) = (band.start * g.ow, band.len() * g.ow);
                for grp in 0..g.groups {
                    let b = if px == ld {
                        packed(yn, grp * og * ohw + first, ohw)
                    } else {
                        let block = &mut block[..og * ld];
                        let gy = yn[grp * og * ohw..(grp + 1) * og * ohw].chunks_exact(ohw);
                        for (dst, src) in block.chunks_exact_mut(ld).zip(gy) {
                            dst[..px].copy_from_slice(&src[first..first + px]);
                            dst[px..].fill(0.0);
                        }
                        packed(block, 0, ld)
                    };
                    let c = &mut cols[grp * kg * ld..(grp + 1) * kg * ld];
                    gemm(kg, ld, og, transposed(w, grp * og * kg, kg), b, c, false, 1.0);
                }
                col2im(g, cols, xn, ld, band);
            }
        }
        if let Some(b) = bias {
            add_channel_bias(xn, b, g.h * g.w);
        }
    })
}

/// The weight gradient `gw = Σ_n y[n] · im2col(x[n])ᵀ` per group, `[O, C/groups, kh, kw]`,
/// into the zeroed `gw`. The batch is split into `scratch.parts` slices, each accumulating its
/// own partial sum (the first into `gw`, the others into the zeroed scratch), then added in
/// slice order.
pub(crate) fn backward_weight(g: &ConvGeom, x: &[f32], y: &[f32], gw: &mut [f32], scratch: ConvScratch<'_>) {
    let (og, kg, ohw, il, cl) = (g.og(), g.kg(), g.ohw(), g.image_len(), g.cols_len());
    let (wlen, unfold, parts) = (g.o * kg, g.unfold_len(), scratch.parts.max(1));
    if gw.is_empty() {
        return; // no weights
    }
    let per = g.n.div_ceil(parts);
    let (cols, sums) = scratch.buf.split_at_mut(parts * unfold);
    sums.fill(0.0); // a slice with no samples adds nothing
    let partial = |p: usize, gw: &mut [f32], cols: &mut [f32]| {
        for n in p * per..((p + 1) * per).min(g.n) {
            let (xn, yn) = (&x[n * il..(n + 1) * il], &y[n * cl..(n + 1) * cl]);
            if g.is_pointwise() {
                for grp in 0..g.groups {
                    let c = &mut gw[grp * og * kg..(grp + 1) * og * kg];
                    let (a, b) = (packed(yn, grp * og * ohw, ohw), transposed(xn, grp * kg * ohw, ohw));
                    gemm(og, kg, ohw, a, b, c, n > p * per, 1.0);
                }
                continue;
            }
            // gw += gy · R band by band, R = the pixel-major unfold `[P, C·kh·kw]` of a band's
            // P pixels (`conv/rows.rs`) where it applies, else the band's im2col read
            // transposed.
            let pixel_major = rows::applies(g);
            let (r, xp) = cols.split_at_mut(if pixel_major { rows::band_len(g) } else { cols.len() });
            let xp = if pixel_major { rows::pad(g, xn, xp) } else { &[] };
            for band in bands(g) {
                let (first, px) = (band.start * g.ow, band.len() * g.ow);
                let accumulate = n > p * per || first > 0;
                let ld = if pixel_major {
                    rows::unfold(g, xp, r, band);
                    rows::ld(g)
                } else {
                    im2col(g, xn, r, px, band);
                    px
                };
                for grp in 0..g.groups {
                    let c = &mut gw[grp * og * kg..(grp + 1) * og * kg];
                    let a = packed(yn, grp * og * ohw + first, ohw);
                    let b = if pixel_major { packed(r, grp * kg, ld) } else { transposed(r, grp * kg * px, px) };
                    gemm(og, kg, px, a, b, c, accumulate, 1.0);
                }
            }
        }
    };
    let mut cols = split_len(cols, parts, unfold);
    if parts == 1 {
        return partial(0, gw, &mut *cols[0]);
    }
    let mut outs: Vec<&mut [f32]> = std::iter::once(gw).chain(split_len(sums, parts - 1, wlen)).collect();
    parallel::install(|| {
        outs.par_iter_mut()
            .zip(cols.par_iter_mut())
            .enumerate()
            .for_each(|(p, (gw, cols))| parallel::with_kernels_on_this_thread(true, || partial(p, gw, cols)))
    });
    let (out, rest) = outs.split_first_mut().expect("parts > 1");
    for p in rest.iter() {
        for (o, v) in out.iter_mut().zip(p.iter()) {
            *o += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sample, one output channel: `c` channels of `(h, w)` under the given kernel,
    /// stride, padding and dilation (the output size derived).
    pub(super) fn geom(
        c: usize,
        (h, w): (usize, usize),
        k: (usize, usize),
        stride: (usize, usize),
        pad: (usize, usize),
        dil: (usize, usize),
    ) -> ConvGeom {
        let out = |len: usize, k: usize, s: usize, p: usize, d: usize| (len + 2 * p - d * (k - 1) - 1) / s + 1;
        let (oh, ow) = (out(h, k.0, stride.0, pad.0, dil.0), out(w, k.1, stride.1, pad.1, dil.1));
        ConvGeom { n: 1, c, h, w, o: 1, oh, ow, k, stride, pad, dil, groups: 1 }
    }

    /// im2col by its definition, one element at a time.
    fn naive_im2col(g: &ConvGeom, x: &[f32]) -> Vec<f32> {
        let mut cols = vec![0.0; g.kg() * g.ohw()];
        for c in 0..g.c {
            for ki in 0..g.k.0 {
                for kj in 0..g.k.1 {
                    for oh in 0..g.oh {
                        for ow in 0..g.ow {
                            let ih = (oh * g.stride.0 + ki * g.dil.0) as isize - g.pad.0 as isize;
                            let iw = (ow * g.stride.1 + kj * g.dil.1) as isize - g.pad.1 as isize;
                            if (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw) {
                                let row = (c * g.k.0 + ki) * g.k.1 + kj;
                                cols[row * g.ohw() + oh * g.ow + ow] = x[(c * g.h + ih as usize) * g.w + iw as usize];
                            }
                        }
                    }
                }
            }
        }
        cols
    }

    /// The forward by its definition.
    fn naive_forward(g: &ConvGeom, x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
        let (og, cg) = (g.o / g.groups, g.c / g.groups);
        let mut y = vec![0.0; g.n * g.cols_len()];
        for n in 0..g.n {
            for o in 0..g.o {
                let grp = o / og;
                for (oh, ow) in (0..g.oh).flat_map(|a| (0..g.ow).map(move |b| (a, b))) {
                    let mut s = bias[o];
                    for (c, ki, kj) in
                        (0..cg).flat_map(|c| (0..g.k.0).flat_map(move |i| (0..g.k.1).map(move |j| (c, i, j))))
                    {
                        let ih = (oh * g.stride.0 + ki * g.dil.0) as isize - g.pad.0 as isize;
                        let iw = (ow * g.stride.1 + kj * g.dil.1) as isize - g.pad.1 as isize;
                        if (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw) {
                            let xi = ((n * g.c + grp * cg + c) * g.h + ih as usize) * g.w + iw as usize;
                            s += w[((o * cg + c) * g.k.0 + ki) * g.k.1 + kj] * x[xi];
                        }
                    }
                    y[(n * g.o + o) * g.ohw() + oh * g.ow + ow] = s;
                }
            }
        }
        y
    }

    #[test]
    fn the_single_channel_direct_kernel_matches_the_definition() {
        let geoms = [
            geom(1, (28, 28), (5, 5), (1, 1), (2, 2), (1, 1)), // the main job's first layer
            geom(1, (9, 37), (3, 3), (1, 1), (0, 0), (1, 1)),  // several tiles, a partial one
            geom(1, (3, 4), (3, 3), (1, 1), (3, 3), (1, 1)),   // over-padded
            geom(1, (11, 10), (3, 2), (2, 1), (1, 2), (2, 3)), // strided rows, dilation
            geom(1, (1, 20), (1, 5), (1, 1), (0, 2), (1, 1)),  // conv1d-like
        ];
        for (i, g0) in geoms.iter().enumerate() {
            for o in [1, 5, 8] {
                let g = ConvGeom { n: 2, o, ..*g0 };
                assert!(direct::applies(&g));
                let x: Vec<f32> = (0..g.n * g.image_len()).map(|v| (v % 9) as f32 - 4.0).collect();
                let w: Vec<f32> = (0..g.o * g.kg()).map(|v| (v % 5) as f32 - 2.0).collect();
                let b: Vec<f32> = (0..o).map(|v| v as f32).collect();
                for parts in [1, 2] {
                    let mut y = vec![f32::NAN; g.n * g.cols_len()];
                    let mut buf = vec![f32::NAN; g.scratch_len(parts, false)];
                    forward(&g, &x, &w, Some(&b), &mut y, ConvScratch { parts, buf: &mut buf });
                    assert_eq!(y, naive_forward(&g, &x, &w, &b), "geometry {i}, {o} channels, {parts} parts");
                }
            }
        }
    }

    #[test]
    fn every_im2col_path_matches_the_definition_and_col2im_is_its_adjoint() {
        let cases = [
            geom(2, (6, 7), (5, 5), (1, 1), (2, 2), (1, 1)), // same: one run per tap
            geom(1, (7, 5), (3, 3), (1, 1), (2, 2), (2, 2)), // same with dilation
            geom(2, (7, 6), (3, 3), (1, 1), (0, 0), (1, 1)), // stride 1, rows shorter
            geom(1, (2, 3), (3, 3), (1, 1), (3, 3), (1, 1)), // over-padded: whole taps outside
            geom(3, (7, 7), (3, 2), (2, 1), (1, 0), (1, 2)), // strided rows
            geom(2, (5, 8), (3, 3), (1, 2), (1, 1), (1, 1)), // strided columns
            geom(1, (1, 9), (1, 5), (1, 1), (0, 2), (1, 1)), // conv1d-like, same
        ];
        for (i, g) in cases.iter().enumerate() {
            let x: Vec<f32> = (0..g.image_len()).map(|v| (v % 11) as f32 - 5.0).collect();
            // Stale values in the scratch must not leak through.
            let mut cols = vec![f32::NAN; g.kg() * g.ohw()];
            im2col(g, &x, &mut cols, g.ohw(), 0..g.oh);
            assert_eq!(cols, naive_im2col(g, &x), "case {i}: {g:?}");
            // With padded rows: the same rows, then zeros.
            let ld = g.ohw() + 3;
            let mut wide = vec![f32::NAN; g.kg() * ld];
            im2col(g, &x, &mut wide, ld, 0..g.oh);
            for (r, row) in wide.chunks_exact(ld).enumerate() {
                assert_eq!(row[..g.ohw()], cols[r * g.ohw()..(r + 1) * g.ohw()], "case {i}: padded row {r}");
                assert!(row[g.ohw()..].iter().all(|&v| v == 0.0), "case {i}: padded row {r}'s tail");
            }
            // <im2col(x), y> = <x, col2im(y)> with small integers: exact in any order.
            let y: Vec<f32> = (0..cols.len()).map(|v| (v % 7) as f32 - 3.0).collect();
            let mut back = vec![0.0; x.len()];
            col2im(g, &mut y.clone(), &mut back, g.ohw(), 0..g.oh);
            let mut padded_y = vec![f32::NAN; wide.len()];
            for (dst, src) in padded_y.chunks_exact_mut(ld).zip(y.chunks_exact(g.ohw())) {
                dst[..g.ohw()].copy_from_slice(src);
            }
            let mut padded_back = vec![0.0; x.len()];
            col2im(g, &mut padded_y, &mut padded_back, ld, 0..g.oh);
            assert_eq!(padded_back, back, "case {i}: col2im of padded rows");
            let lhs: f32 = cols.iter().zip(&y).map(|(a, b)| a * b).sum();
            // Each pixel's gradient by the definition: the sum of the columns that read it.
            let mut want = vec![0.0; x.len()];
            let unit: Vec<f32> = (0..x.len()).map(|_| 0.0).collect();
            for p in 0..x.len() {
                let mut e = unit.clone();
                e[p] = 1.0;
                want[p] = naive_im2col(g, &e).iter().zip(&y).map(|(a, b)| a * b).sum();
            }
            assert_eq!(back, want, "case {i}: col2im");
            let rhs: f32 = x.iter().zip(&back).map(|(a, b)| a * b).sum();
            assert_eq!(lhs, rhs, "case {i}: adjoint");
        }
    }

    #[test]
    fn col2im_is_the_adjoint_of_im2col() {
        let g = ConvGeom {
            n: 1,
            c: 2,
            h: 5,
            w: 6,
            o: 1,
            oh: 3,
            ow: 3,
            k: (3, 2),
            stride: (2, 2),
            pad: (1, 1),
            dil: (1, 2),
            groups: 1,
        };
        let x: Vec<f32> = (0..g.image_len()).map(|i| (i % 7) as f32 - 3.0).collect();
        let y: Vec<f32> = (0..g.c * 6 * g.ohw()).map(|i| (i % 5) as f32 - 2.0).collect();
        let mut cols = vec![0.0; y.len()];
        im2col(&g, &x, &mut cols, g.ohw(), 0..g.oh);
        let mut back = vec![0.0; x.len()];
        col2im(&g, &mut y.clone(), &mut back, g.ohw(), 0..g.oh);
        let lhs: f32 = cols.iter().zip(&y).map(|(a, b)| a * b).sum();
        let rhs: f32 = x.iter().zip(&back).map(|(a, b)| a * b).sum();
        assert_eq!(lhs, rhs);
    }

    /// `<a, b>` in f64 (exact for the small integers of the tests below).
    fn dot(a: &[f32], b: &[f32]) -> f64 {
        a.iter().zip(b).map(|(&a, &b)| a as f64 * b as f64).sum()
    }

    #[test]
    fn products_on_padded_rows_match_the_definition_and_each_other_s_adjoints() {
        // Pixel counts that are not a multiple of 8 (14x14 = 196 is the main job's second
        // layer), with groups and a stride; then one that is (no padded rows).
        let cases = [
            ConvGeom { n: 3, o: 6, groups: 2, ..geom(4, (14, 14), (5, 5), (1, 1), (2, 2), (1, 1)) },
            ConvGeom { n: 2, o: 2, ..geom(3, (7, 5), (3, 3), (2, 2), (1, 1), (1, 1)) },
            ConvGeom { n: 2, o: 3, ..geom(2, (4, 4), (3, 3), (1, 1), (1, 1), (1, 1)) },
        ];
        for (i, g) in cases.iter().enumerate() {
            assert_eq!(g.padded(), i < 2, "case {i}");
            let x: Vec<f32> = (0..g.n * g.image_len()).map(|v| (v % 7) as f32 - 3.0).collect();
            let w: Vec<f32> = (0..g.o * g.kg()).map(|v| (v % 5) as f32 - 2.0).collect();
            let b: Vec<f32> = (0..g.o).map(|v| v as f32).collect();
            let gy: Vec<f32> = (0..g.n * g.cols_len()).map(|v| (v % 3) as f32 - 1.0).collect();
            for parts in [1, 2] {
                let mut buf = vec![f32::NAN; g.scratch_len(parts, true)];
                let mut y = vec![f32::NAN; g.n * g.cols_len()];
                forward(g, &x, &w, Some(&b), &mut y, ConvScratch { parts, buf: &mut buf });
                assert_eq!(y, naive_forward(g, &x, &w, &b), "case {i}, {parts} parts: forward");
                // Without the bias, forward is linear in x and in w: <y, gy> = <x, gx> = <w, gw>.
                let mut y = vec![f32::NAN; g.n * g.cols_len()];
                forward(g, &x, &w, None, &mut y, ConvScratch { parts, buf: &mut buf });
                let mut gx = vec![f32::NAN; x.len()];
                backward_data(g, &gy, &w, None, &mut gx, ConvScratch { parts, buf: &mut buf });
                let mut gw = vec![0.0; w.len()];
                backward_weight(g, &x, &gy, &mut gw, ConvScratch { parts, buf: &mut buf });
                assert_eq!(dot(&y, &gy), dot(&x, &gx), "case {i}, {parts} parts: data gradient");
                assert_eq!(dot(&y, &gy), dot(&w, &gw), "case {i}, {parts} parts: weight gradient");
            }
        }
    }

    /// Both gradients by their definition: `gx[x_i] += w · gy` and `gw[w_i] += x · gy` over
    /// every tap that reads the image.
    fn naive_backward(g: &ConvGeom, x: &[f32], w: &[f32], gy: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let (og, cg) = (g.o / g.groups, g.c / g.groups);
        let (mut gx, mut gw) = (vec![0.0; x.len()], vec![0.0; w.len()]);
        for n in 0..g.n {
            for o in 0..g.o {
                let grp = o / og;
                for (oh, ow) in (0..g.oh).flat_map(|a| (0..g.ow).map(move |b| (a, b))) {
                    let gyv = gy[(n * g.o + o) * g.ohw() + oh * g.ow + ow];
                    for (c, ki, kj) in
                        (0..cg).flat_map(|c| (0..g.k.0).flat_map(move |i| (0..g.k.1).map(move |j| (c, i, j))))
                    {
                        let ih = (oh * g.stride.0 + ki * g.dil.0) as isize - g.pad.0 as isize;
                        let iw = (ow * g.stride.1 + kj * g.dil.1) as isize - g.pad.1 as isize;
                        if (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw) {
                            let xi = ((n * g.c + grp * cg + c) * g.h + ih as usize) * g.w + iw as usize;
                            let wi = ((o * cg + c) * g.k.0 + ki) * g.k.1 + kj;
                            gx[xi] += w[wi] * gyv;
                            gw[wi] += x[xi] * gyv;
                        }
                    }
                }
            }
        }
        (gx, gw)
    }

    #[test]
    fn products_band_by_band_match_the_definition() {
        // Column matrices past `BAND_BYTES`: a "same" 5x5 (the flat unfold, the pixel-major
        // weight gradient, a short last band), a strided 3x3 with groups whose bands are not
        // whole vectors of pixels (padded blocks, im2col's row-by-row path), and a dilated
        // one (the flat unfold, the weight gradient through im2col).
        let cases = [
            ConvGeom { n: 2, o: 2, ..geom(16, (64, 64), (5, 5), (1, 1), (2, 2), (1, 1)) },
            ConvGeom { n: 2, o: 4, groups: 2, ..geom(32, (90, 90), (3, 3), (2, 2), (1, 1), (1, 1)) },
            ConvGeom { n: 1, o: 3, ..geom(24, (70, 70), (3, 3), (1, 1), (2, 2), (2, 2)) },
        ];
        for (i, g) in cases.iter().enumerate() {
            assert!(g.banded() && g.oh % g.band_rows() != 0, "case {i}: {} rows a band", g.band_rows());
            let x: Vec<f32> = (0..g.n * g.image_len()).map(|v| (v % 7) as f32 - 3.0).collect();
            let w: Vec<f32> = (0..g.o * g.kg()).map(|v| (v % 5) as f32 - 2.0).collect();
            let b: Vec<f32> = (0..g.o).map(|v| v as f32).collect();
            let gy: Vec<f32> = (0..g.n * g.cols_len()).map(|v| (v % 3) as f32 - 1.0).collect();
            let (want_gx, want_gw) = naive_backward(g, &x, &w, &gy);
            for parts in [1, 2] {
                let mut buf = vec![f32::NAN; g.scratch_len(parts, true)];
                let mut y = vec![f32::NAN; g.n * g.cols_len()];
                forward(g, &x, &w, Some(&b), &mut y, ConvScratch { parts, buf: &mut buf });
                assert_eq!(y, naive_forward(g, &x, &w, &b), "case {i}, {parts} parts: forward");
                let mut gx = vec![f32::NAN; x.len()];
                backward_data(g, &gy, &w, None, &mut gx, ConvScratch { parts, buf: &mut buf });
                assert_eq!(gx, want_gx, "case {i}, {parts} parts: data gradient");
                let mut gw = vec![0.0; w.len()];
                backward_weight(g, &x, &gy, &mut gw, ConvScratch { parts, buf: &mut buf });
                assert_eq!(gw, want_gw, "case {i}, {parts} parts: weight gradient");
            }
        }
    }

    #[test]
    fn splitting_the_batch_changes_no_sample_and_the_weight_gradient_sums_every_slice() {
        let g = ConvGeom {
            n: 5,
            c: 2,
            h: 4,
            w: 5,
            o: 3,
            oh: 4,
            ow: 5,
            k: (3, 3),
            stride: (1, 1),
            pad: (1, 1),
            dil: (1, 1),
            groups: 1,
        };
        let x: Vec<f32> = (0..g.n * g.image_len()).map(|i| (i % 7) as f32 - 3.0).collect();
        let w: Vec<f32> = (0..g.o * g.kg()).map(|i| (i % 5) as f32 - 2.0).collect();
        let run = |parts: usize| {
            let mut y = vec![0.0; g.n * g.cols_len()];
            let mut buf = vec![0.0; g.scratch_len(parts, false)];
            forward(&g, &x, &w, None, &mut y, ConvScratch { parts, buf: &mut buf });
            let mut gx = vec![0.0; x.len()];
            backward_data(&g, &y, &w, None, &mut gx, ConvScratch { parts, buf: &mut buf });
            let mut gw = vec![0.0; w.len()];
            let mut buf = vec![0.0; g.scratch_len(parts, true)];
            backward_weight(&g, &x, &y, &mut gw, ConvScratch { parts, buf: &mut buf });
            (y, gx, gw)
        };
        let (y1, gx1, gw1) = run(1);
        for parts in [2, 3, 5] {
            let (y, gx, gw) = run(parts);
            assert_eq!((&y, &gx), (&y1, &gx1), "{parts} slices");
            // Small integers: every partial sum is exact, so the order of the slices is too.
            assert_eq!(gw, gw1, "{parts} slices");
        }
    }
}
