//! Convolution through im2col/col2im and GEMM. One geometry describes a convolution between
//! an "image" side `[N, C, H, W]` and a "columns" side `[N, O, OH, OW]` with a weight
//! `[O, C/groups, kh, kw]`: conv2d maps image → columns, conv_transpose2d maps columns → image
//! with the same three batch kernels (`forward`, `backward_data`, `backward_weight`).
//!
//! Results go into buffers the caller allocated, and so does the scratch ([`ConvScratch`]):
//! the batch is cut into [`ConvGeom::parts`] slices that run in parallel, each with its own
//! column matrix (and, for the weight gradient, its own partial sum).

use rayon::prelude::*;

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
        self.n * self.o * self.ohw() * self.kg()
    }
    /// A 1x1, stride-1, unpadded convolution: the column matrix is the image itself.
    fn is_pointwise(&self) -> bool {
        self.k == (1, 1) && self.stride == (1, 1) && self.pad == (0, 0)
    }
    fn parallel(&self) -> bool {
        self.n > 1 && self.macs() >= parallel::PARALLEL_GEMM_WORK
    }
    /// One sample's column matrix `[C·kh·kw, OH·OW]` (none for a pointwise convolution).
    fn unfold_len(&self) -> usize {
        if self.is_pointwise() {
            0
        } else {
            self.c.saturating_mul(self.k.0 * self.k.1).saturating_mul(self.ohw())
        }
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

/// The scratch of one convolution call: `parts` slices of the batch and a zeroed buffer of
/// [`ConvGeom::scratch_len`] floats for them, allocated by the op.
pub(crate) struct ConvScratch<'a> {
    pub(crate) parts: usize,
    pub(crate) buf: &'a mut [f32],
}

/// Output positions `lo..hi` whose input index `o * stride + shift` falls inside `0..len`.
fn valid_range(out_len: usize, stride: usize, shift: isize, len: usize) -> (usize, usize) {
    let s = stride as isize;
    let lo = if shift < 0 { ((-shift + s - 1) / s) as usize } else { 0 };
    let hi = ((len as isize - shift + s - 1) / s).max(0) as usize;
    let hi = hi.min(out_len);
    (lo.min(hi), hi)
}

/// Unfolds one image `[C, H, W]` into columns `[C*kh*kw, OH*OW]` (zeros where padded).
pub(crate) fn im2col(g: &ConvGeom, x: &[f32], cols: &mut [f32]) {
    let (ohw, hw) = (g.ohw(), g.h * g.w);
    for c in 0..g.c {
        let plane = &x[c * hw..(c + 1) * hw];
        for ki in 0..g.k.0 {
            for kj in 0..g.k.1 {
                let row_idx = (c * g.k.0 + ki) * g.k.1 + kj;
                let row = &mut cols[row_idx * ohw..(row_idx + 1) * ohw];
                let shift_w = (kj * g.dil.1) as isize - g.pad.1 as isize;
                let (lo, hi) = valid_range(g.ow, g.stride.1, shift_w, g.w);
                for oh in 0..g.oh {
                    let dst = &mut row[oh * g.ow..(oh + 1) * g.ow];
                    let ih = (oh * g.stride.0 + ki * g.dil.0) as isize - g.pad.0 as isize;
                    if ih < 0 || ih >= g.h as isize {
                        dst.fill(0.0);
                        continue;
                    }
                    let src = &plane[ih as usize * g.w..(ih as usize + 1) * g.w];
                    dst[..lo].fill(0.0);
                    dst[hi..].fill(0.0);
                    if g.stride.1 == 1 {
                        let s0 = (lo as isize + shift_w) as usize;
                        dst[lo..hi].copy_from_slice(&src[s0..s0 + hi - lo]);
                    } else {
                        for o in lo..hi {
                            dst[o] = src[(o as isize * g.stride.1 as isize + shift_w) as usize];
                        }
                    }
                }
            }
        }
    }
}

/// Folds columns `[C*kh*kw, OH*OW]` back into an image `[C, H, W]`, adding overlaps (the
/// adjoint of [`im2col`]). `x` must be zeroed by the caller.
pub(crate) fn col2im(g: &ConvGeom, cols: &[f32], x: &mut [f32]) {
    let (ohw, hw) = (g.ohw(), g.h * g.w);
    for c in 0..g.c {
        let plane = &mut x[c * hw..(c + 1) * hw];
        for ki in 0..g.k.0 {
            for kj in 0..g.k.1 {
                let row_idx = (c * g.k.0 + ki) * g.k.1 + kj;
                let row = &cols[row_idx * ohw..(row_idx + 1) * ohw];
                let shift_w = (kj * g.dil.1) as isize - g.pad.1 as isize;
                let (lo, hi) = valid_range(g.ow, g.stride.1, shift_w, g.w);
                for oh in 0..g.oh {
                    let ih = (oh * g.stride.0 + ki * g.dil.0) as isize - g.pad.0 as isize;
                    if ih < 0 || ih >= g.h as isize {
                        continue;
                    }
                    let src = &row[oh * g.ow..(oh + 1) * g.ow];
                    let dst = &mut plane[ih as usize * g.w..(ih as usize + 1) * g.w];
                    for o in lo..hi {
                        dst[(o as isize * g.stride.1 as isize + shift_w) as usize] += src[o];
                    }
                }
            }
        }
    }
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
    parallel::install(|| {
        work.into_par_iter().for_each(|(p, (items, cols))| {
            for (j, t) in items.iter_mut().enumerate() {
                f(p * per + j, t, cols);
            }
        })
    });
}

/// Image → columns: `y[n] = W · im2col(x[n])` per group. `x` is `[N, C, H, W]`, `w` is
/// `[O, C/groups, kh, kw]`, `y` is `[N, O, OH, OW]` (overwritten).
pub(crate) fn forward(g: &ConvGeom, x: &[f32], w: &[f32], y: &mut [f32], scratch: ConvScratch<'_>) {
    let (og, kg, ohw, il) = (g.og(), g.kg(), g.ohw(), g.image_len());
    if g.cols_len() == 0 {
        return; // no output channels or no output pixels: nothing to write
    }
    let mut outs: Vec<&mut [f32]> = y.chunks_mut(g.cols_len()).collect();
    per_sample(g, &mut outs, scratch, |n, yn, cols| {
        let xn = &x[n * il..(n + 1) * il];
        let src: &[f32] = if g.is_pointwise() {
            xn
        } else {
            im2col(g, xn, cols);
            cols
        };
        for grp in 0..g.groups {
            let c = &mut yn[grp * og * ohw..(grp + 1) * og * ohw];
            gemm(og, ohw, kg, packed(w, grp * og * kg, kg), packed(src, grp * kg * ohw, ohw), c, false, 1.0);
        }
    })
}

/// Columns → image: `x[n] = col2im(Wᵀ · y[n])` per group (the input gradient of conv2d, the
/// forward of conv_transpose2d). `x` is overwritten.
pub(crate) fn backward_data(g: &ConvGeom, y: &[f32], w: &[f32], x: &mut [f32], scratch: ConvScratch<'_>) {
    let (og, kg, ohw, cl) = (g.og(), g.kg(), g.ohw(), g.cols_len());
    if g.image_len() == 0 {
        return; // no input channels or no input pixels: nothing to write
    }
    let mut outs: Vec<&mut [f32]> = x.chunks_mut(g.image_len()).collect();
    per_sample(g, &mut outs, scratch, |n, xn, cols| {
        let yn = &y[n * cl..(n + 1) * cl];
        let dst: &mut [f32] = if g.is_pointwise() { xn } else { cols };
        for grp in 0..g.groups {
            let c = &mut dst[grp * kg * ohw..(grp + 1) * kg * ohw];
            gemm(kg, ohw, og, transposed(w, grp * og * kg, kg), packed(yn, grp * og * ohw, ohw), c, false, 1.0);
        }
        if !g.is_pointwise() {
            xn.fill(0.0);
            col2im(g, cols, xn);
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
    let partial = |p: usize, gw: &mut [f32], cols: &mut [f32]| {
        for n in p * per..((p + 1) * per).min(g.n) {
            let xn = &x[n * il..(n + 1) * il];
            let src: &[f32] = if g.is_pointwise() {
                xn
            } else {
                im2col(g, xn, cols);
                cols
            };
            let yn = &y[n * cl..(n + 1) * cl];
            for grp in 0..g.groups {
                let c = &mut gw[grp * og * kg..(grp + 1) * og * kg];
                let a = packed(yn, grp * og * ohw, ohw);
                gemm(og, kg, ohw, a, transposed(src, grp * kg * ohw, ohw), c, n > p * per, 1.0);
            }
        }
    };
    let mut cols = split_len(cols, parts, unfold);
    if parts == 1 {
        return partial(0, gw, &mut *cols[0]);
    }
    let mut outs: Vec<&mut [f32]> = std::iter::once(gw).chain(split_len(sums, parts - 1, wlen)).collect();
    parallel::install(|| {
        outs.par_iter_mut().zip(cols.par_iter_mut()).enumerate().for_each(|(p, (gw, cols))| partial(p, gw, cols))
    });
    let (out, rest) = outs.split_first_mut().expect("parts > 1");
    for p in rest.iter() {
        for (o, v) in out.iter_mut().zip(p.iter()) {
            *o += v;
        }
    }
}

/// Adds `b[ch]` to every element of channel `ch` of `[N, C, S]`.
pub(crate) fn add_channel_bias(y: &mut [f32], b: &[f32], spatial: usize) {
    let c = b.len();
    for (i, plane) in y.chunks_mut(spatial.max(1)).enumerate() {
        let v = b[i % c];
        for e in plane {
            *e += v;
        }
    }
}

/// The per-channel sum of `[N, C, S]` (`C = out.len()`), added into the zeroed `out`: the
/// bias gradient.
pub(crate) fn channel_sum(y: &[f32], spatial: usize, out: &mut [f32]) {
    let c = out.len();
    for (i, plane) in y.chunks(spatial.max(1)).enumerate() {
        out[i % c] += plane.iter().sum::<f32>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        im2col(&g, &x, &mut cols);
        let mut back = vec![0.0; x.len()];
        col2im(&g, &y, &mut back);
        let lhs: f32 = cols.iter().zip(&y).map(|(a, b)| a * b).sum();
        let rhs: f32 = x.iter().zip(&back).map(|(a, b)| a * b).sum();
        assert_eq!(lhs, rhs);
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
            forward(&g, &x, &w, &mut y, ConvScratch { parts, buf: &mut buf });
            let mut gx = vec![0.0; x.len()];
            backward_data(&g, &y, &w, &mut gx, ConvScratch { parts, buf: &mut buf });
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
