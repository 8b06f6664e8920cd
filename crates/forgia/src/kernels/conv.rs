//! Convolution through im2col/col2im and GEMM. One geometry describes a convolution between
//! an "image" side `[N, C, H, W]` and a "columns" side `[N, O, OH, OW]` with a weight
//! `[O, C/groups, kh, kw]`: conv2d maps image → columns, conv_transpose2d maps columns → image
//! with the same three batch kernels (`forward`, `backward_data`, `backward_weight`).
//!
//! The bias, added per channel and summed out of the gradient, is in `conv/bias.rs`.
//!
//! With AVX-512 (with AVX2, on output rows of 14 pixels and more, or of any width from 256
//! input channels on), the forward and the
//! stride-1 input gradient of most convolutions run as an implicit GEMM instead
//! (`conv/implicit.rs`: the crate's microkernel on a channel-last copy of the image, no column
//! matrix), and with AVX-512 so does the weight gradient of stride-1 convolutions on large
//! images (`conv/implicit_weight.rs`). A forward with a single
//! input channel runs the direct kernel of `conv/direct.rs` (an im2col of `kh·kw` rows makes a
//! GEMM with an inner size of 25). The column matrix ([`im2col`], [`col2im`]) is in
//! `conv/cols.rs`; its rows are padded to whole vectors where
//! the pixel count is not a multiple of 8 ([`ConvGeom::ld`]), and the weight gradient of a
//! convolution with unit dilation unfolds its image pixel-major instead (`conv/rows.rs`), so
//! that the `gemm` crate reads every large operand in place rather than copying it first.
//! Samples of fewer output pixels than one kernel tile share their forward and input-gradient
//! products (`conv/group.rs`), and their weight-gradient products (`conv/stacked.rs`), as do
//! samples of a few hundred pixels whose weight gradient is larger than the L2.
//!
//! Results go into buffers the caller allocated, and so does the scratch ([`ConvScratch`]):
//! [`ConvGeom::parts`] workers run in parallel, each with its own column matrix. The forward
//! and the input gradient hand out the samples one at a time, so a worker on a slower core
//! runs fewer; the weight gradient (`conv/weight.rs`) cuts the batch into that many fixed
//! slices, each with its own partial sum, so its sum is the same whichever core is slower.

mod bias;
mod cols;
mod direct;
mod group;
mod implicit;
mod implicit_pack;
mod implicit_panels;
mod implicit_weight;
mod micro;
mod rows;
mod stacked;
mod weight;

use bias::add_channel_bias;
pub(crate) use bias::channel_sum;
use cols::{col2im, im2col, zero_tails};
pub(crate) use weight::backward_weight;

use super::gemm::{gemm, gemm_rows, MatRef};
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
        self.group_ld(1)
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
    /// columns are still in cache when the product reads them (ResNet's 64-channel 3×3 layers
    /// at 56×56 unfold 7 MB a sample). Else every output row (`OH`). The bands are
    /// of about equal size, at most [`BAND_BYTES`] each, and hold a whole number of 8-float
    /// vectors of pixels where the row width allows.
    pub(super) fn band_rows(&self) -> usize {
        let oh = self.oh.max(1);
        let row_bytes = self.unfold_rows().saturating_mul(self.ow).saturating_mul(4).max(1);
        if self.is_pointwise() || row_bytes.saturating_mul(oh) <= 2 * BAND_BYTES {
            return oh;
        }
        let rows = oh.div_ceil(oh.div_ceil((BAND_BYTES / row_bytes).max(1)));
        // Rows per whole vector of pixels: 8 / gcd(OW, 8).
        let step = 1 << (3 - self.ow.trailing_zeros().min(3));
        let rows = rows.next_multiple_of(step).min(oh);
        if self.og() > rows.saturating_mul(self.ow) {
            return oh;
        }
        rows
    }
    /// Samples per product of the forward and the input gradient for `parts` workers
    /// (`conv/group.rs`): for a sample of fewer than [`GROUP_BELOW`] output pixels, enough
    /// samples for [`GROUP_PIXELS`], at most a worker's share of the batch; else 1.
    fn group(&self, parts: usize) -> usize {
        let ohw = self.ohw();
        if self.is_pointwise() || direct::applies(self) || self.banded() || ohw == 0 || ohw >= GROUP_BELOW {
            return 1;
        }
        GROUP_PIXELS.div_ceil(ohw).min(self.n.div_ceil(parts.max(1))).max(1)
    }
    /// The row stride of the column matrix of `count` samples side by side: their pixels in
    /// whole 8-float vectors (for one sample, [`ConvGeom::ld`]).
    fn group_ld(&self, count: usize) -> usize {
        count.saturating_mul(self.ohw()).next_multiple_of(8)
    }
    /// Samples per product of the weight gradient for `parts` slices: for samples unfolded
    /// pixel-major (`conv/rows.rs`; not a pointwise convolution, whose product reads the
    /// image in place) of fewer than [`GROUP_BELOW`] output pixels, or of fewer than
    /// [`STACK_BELOW`] with a weight gradient past the L2 ([`ConvGeom::weight_past_l2`]), enough
    /// samples for [`STACK_PIXELS`], at most a slice's share of the batch; else 1. A product
    /// of one such sample has an inner size of its few pixels, and reads and writes the whole
    /// weight gradient for it (ResNet's 7×7 layers: 49 pixels a sample against a 9 MB
    /// `[512, 4608]` gradient; its 14×14 ones 196 against 2.4 MB).
    fn weight_stack(&self, parts: usize) -> usize {
        let ohw = self.ohw();
        let few = ohw < GROUP_BELOW || (ohw < STACK_BELOW && self.weight_past_l2());
        if self.is_pointwise() || !rows::applies(self) || self.banded() || ohw == 0 || !few {
            return 1;
        }
        STACK_PIXELS.div_ceil(ohw).min(self.n.div_ceil(parts.max(1))).max(1)
    }
    /// True when the weight (and so its gradient), `O·C/groups·kh·kw` floats, is larger than
    /// [`L2_BYTES`]: it then leaves the L2 between one sample's product and the next.
    pub(super) fn weight_past_l2(&self) -> bool {
        self.o.saturating_mul(self.kg()).saturating_mul(size_of::<f32>()) > L2_BYTES
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
    /// One worker's scratch (of `parts`; `weight` for the weight gradient): one band's column
    /// matrix `[C·kh·kw, ld]` (none for a pointwise convolution) plus, for padded rows or
    /// bands, one group's `[O/groups, ld]` block, or the same for [`ConvGeom::group`] samples
    /// side by side; or the direct kernel's padded plane, or the implicit GEMM's image and
    /// tiles (`conv/implicit.rs`), or the weight gradient's pixel-major unfold
    /// (`conv/rows.rs`) with, for [`ConvGeom::weight_stack`] samples, their output gradients
    /// side by side `[O, S·OH·OW]`, where that is larger.
    fn unfold_len(&self, parts: usize, weight: bool) -> usize {
        let group = if weight { 1 } else { self.group(parts) };
        let cols = if group > 1 {
            let ld = self.group_ld(group);
            self.unfold_rows().saturating_add(self.og()).saturating_mul(ld)
        } else if self.is_pointwise() {
            0
        } else {
            let ld = self.band_ld();
            let block = if self.padded() || self.banded() { self.og().saturating_mul(ld) } else { 0 };
            self.unfold_rows().saturating_mul(ld).saturating_add(block)
        };
        let stack = if weight { self.weight_stack(parts) } else { 1 };
        let gy = if stack > 1 { self.o.saturating_mul(stack * self.ohw()) } else { 0 };
        let implicit = if weight { implicit_weight::scratch_len(self) } else { implicit::scratch_len(self) };
        let rows = rows::scratch_len(self, stack).saturating_add(gy);
        cols.max(direct::scratch_len(self)).max(rows).max(implicit)
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
    /// first, or, where the implicit GEMM runs the forward or the input gradient, its packed
    /// weight and, panel by panel, the samples' copies (`implicit::shared_len`). Saturates, so
    /// an impossible size fails the caller's allocation.
    pub(crate) fn scratch_len(&self, parts: usize, weight: bool) -> usize {
        let extra = if weight {
            (parts - 1).saturating_mul(self.o * self.kg())
        } else if implicit::forward_applies(self) || implicit::backward_applies(self) {
            implicit::shared_len(self)
        } else {
            0
        };
        parts.saturating_mul(self.unfold_len(parts, weight)).saturating_add(extra)
    }
}

/// The L2 of one core of the AVX-512 EPYC the rules here were measured on (1 MiB).
const L2_BYTES: usize = 1 << 20;

/// The most bytes of column matrix one band of output rows unfolds ([`ConvGeom::band_rows`]),
/// and half the most a sample unfolds whole. Twice the 1 MiB L2 of the AVX-512 EPYC it was
/// measured on: a band then leaves the L2 for the L3 between its unfold and its product, but
/// fewer, larger products (no 32-pixel edge tiles at 56² wide rows, 784 pixels a band instead
/// of 224) and the 28² stride-2 layer unfolded whole ran faster than 512 KB bands
/// (docs/BENCHMARKS.md, session twenty-four). The AVX2 EPYC (512 KiB L2) was not measured.
const BAND_BYTES: usize = 2 * L2_BYTES;

/// Samples with fewer output pixels than this share products ([`ConvGeom::group`]): one tile
/// of the AVX-512 kernel, which a sample alone fills only partly. Larger samples gained
/// nothing from it (ResNet's 14×14 layers, 196 pixels, read 3–5% slower forward two samples a
/// product).
const GROUP_BELOW: usize = 64;

/// The pixels a product of several samples aims for ([`ConvGeom::group`]): three of the
/// AVX-512 kernel's 64-pixel tiles.
const GROUP_PIXELS: usize = 192;

/// Samples with fewer output pixels than this stack their weight-gradient products
/// ([`ConvGeom::weight_stack`]) where the gradient is past the L2 ([`ConvGeom::weight_past_l2`]).
/// ResNet-18's 14×14 layers (196 pixels; a 2.4 MB gradient over 256 channels): two samples a
/// product ran the weight gradient at batch 8 on two threads 12.3 → 10.2–10.4 ms while the
/// host was in its slow state (the gradient then comes from a contended L3 once per product),
/// level in its fast one (10.05 and 10.05; docs/BENCHMARKS.md, session twenty-nine).
const STACK_BELOW: usize = 256;

/// The pixels a stack of samples aims for ([`ConvGeom::weight_stack`]): two of ResNet's 14×14
/// samples, eight of its 7×7 ones (at batch 16 on two threads, eight ran the 7×7 weight
/// gradient as fast as four, 20.9 and 21.1 ms; at batch 8 a slice has four).
const STACK_PIXELS: usize = 384;

/// The bands of output rows of `g`: `0..r`, `r..2r`, … with `r` = [`ConvGeom::band_rows`].
fn bands(g: &ConvGeom) -> impl Iterator<Item = std::ops::Range<usize>> {
    let (r, oh) = (g.band_rows(), g.oh);
    (0..oh).step_by(r).map(move |a| a..(a + r).min(oh))
}

/// The scratch of one convolution call: `parts` workers (see the module doc) and a buffer of
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

/// Runs `f(sample, item, column scratch)` over the batch: `scratch.parts` workers at once,
/// each with its own column matrix, taking the samples one at a time
/// ([`super::for_each_with_scratch`]).
fn per_sample<T: Send>(
    g: &ConvGeom,
    items: &mut [T],
    scratch: ConvScratch<'_>,
    f: impl Fn(usize, &mut T, &mut [f32]) + Sync,
) {
    let parts = scratch.parts.max(1);
    let mut cols = split_len(scratch.buf, parts, g.unfold_len(parts, false));
    super::for_each_with_scratch(items, &mut cols, f);
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
    if implicit::forward_applies(g) {
        return implicit::forward(g, x, w, bias, y, scratch);
    }
    let group = g.group(scratch.parts);
    if group > 1 {
        return group::forward(g, x, w, bias, y, scratch, group);
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
            // A band's product goes into its columns of the output, in place where the band's
            // pixels are whole vectors, else into a block of its own row stride and then its
            // rows into place.
            let ld = g.band_ld();
            let (cols, block) = cols.split_at_mut(g.unfold_rows() * ld);
            for band in bands(g) {
                let (first, px) = (band.start * g.ow, band.len() * g.ow);
                im2col(g, xn, cols, ld, band);
                zero_tails(cols, ld, px);
                for grp in 0..g.groups {
                    let (a, b) = (packed(w, grp * og * kg, kg), packed(cols, grp * kg * ld, ld));
                    let c = &mut yn[grp * og * ohw..(grp + 1) * og * ohw];
                    if px == ld {
                        gemm_rows((og, px, kg), (a, b), (&mut c[first..], ohw), false, 1.0);
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
    if implicit::backward_applies(g) {
        return implicit::backward_data(g, y, w, bias, x, scratch);
    }
    let group = g.group(scratch.parts);
    if group > 1 {
        return group::backward_data(g, y, w, bias, x, scratch, group);
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

#[cfg(test)]
mod tests;
