//! The column matrix of a convolution: [`im2col`] unfolds an image `[C, H, W]` into one row
//! per kernel tap `[C·kh·kw, OH·OW]`, and [`col2im`], its adjoint, folds such rows back into an
//! image, adding overlaps. "Same" convolutions unfold and fold each kernel tap as one
//! contiguous run.

use std::ops::Range;

use super::ConvGeom;

/// Output positions `lo..hi` whose input index `o * stride + shift` falls inside `0..len`.
fn valid_range(out_len: usize, stride: usize, shift: isize, len: usize) -> (usize, usize) {
    let s = stride as isize;
    let lo = if shift < 0 { ((-shift + s - 1) / s) as usize } else { 0 };
    let hi = ((len as isize - shift + s - 1) / s).max(0) as usize;
    let hi = hi.min(out_len);
    (lo.min(hi), hi)
}

/// The output rows `r0..r1` that read an input row at kernel row `ki`, and that row's shift
/// (`ih = oh * stride + shift`).
fn row_range(g: &ConvGeom, ki: usize) -> (usize, usize, isize) {
    let shift = (ki * g.dil.0) as isize - g.pad.0 as isize;
    let (r0, r1) = valid_range(g.oh, g.stride.0, shift, g.h);
    (r0, r1, shift)
}

/// True when output rows are as long as input rows and both strides are 1 (a "same"
/// convolution such as 5x5 with padding 2): the valid output rows of one kernel tap then read
/// one contiguous run of the input plane, so a tap's column row is one copy (or one add)
/// plus a fix-up of the `|shift|` elements per row that fall off the edges.
fn flat(g: &ConvGeom) -> bool {
    g.stride == (1, 1) && g.ow == g.w
}

/// Zeroes columns `..lo` and `hi..` of every row of `rows` (`ow` floats each): a column at
/// a time, since a `fill` per row is a call into `memset` for one or two floats.
#[inline(always)]
fn zero_edges(rows: &mut [f32], ow: usize, lo: usize, hi: usize) {
    for j in (0..lo).chain(hi..ow) {
        for v in rows.iter_mut().skip(j).step_by(ow) {
            *v = 0.0;
        }
    }
}

/// Unfolds one image `[C, H, W]` into columns `[C*kh*kw, P]` for the `P = band.len()·OW`
/// output pixels of the output rows `band`, with row stride `ld >= P` (zeros where padded).
/// The whole matrix is the band `0..OH`. The `ld - P` floats after each row are left as
/// they are ([`zero_tails`] zeroes them): they may hold the next sample's columns.
pub(super) fn im2col(g: &ConvGeom, x: &[f32], cols: &mut [f32], ld: usize, band: Range<usize>) {
    super::super::simd::vectorized(
        #[inline(always)]
        || im2col_inner(g, x, cols, ld, band),
    )
}

#[inline(always)]
fn im2col_inner(g: &ConvGeom, x: &[f32], cols: &mut [f32], ld: usize, band: Range<usize>) {
    let (hw, ow) = (g.h * g.w, g.ow);
    let (a, b) = (band.start, band.end);
    let ohw = (b - a) * ow;
    for c in 0..g.c {
        let plane = &x[c * hw..(c + 1) * hw];
        for ki in 0..g.k.0 {
            let (r0, r1, shift_h) = row_range(g, ki);
            for kj in 0..g.k.1 {
                let row_idx = (c * g.k.0 + ki) * g.k.1 + kj;
                let row = &mut cols[row_idx * ld..row_idx * ld + ohw];
                let shift_w = (kj * g.dil.1) as isize - g.pad.1 as isize;
                let (lo, hi) = valid_range(ow, g.stride.1, shift_w, g.w);
                let (r0, r1) = (r0.clamp(a, b), r1.clamp(a, b));
                row[..(r0 - a) * ow].fill(0.0);
                row[(r1 - a) * ow..].fill(0.0);
                if r1 == r0 {
                    continue;
                }
                if flat(g) {
                    // dst[(r - r0) * w + j] = plane[(r + shift_h) * w + j + shift_w]: one run,
                    // clipped to the plane; the elements outside lo..hi are then zeroed.
                    let dst = &mut row[(r0 - a) * ow..(r1 - a) * ow];
                    let start = (r0 as isize + shift_h) * g.w as isize + shift_w;
                    let (s0, s1) = (start.max(0), (start + dst.len() as isize).min(hw as isize));
                    if s1 > s0 {
                        let d0 = (s0 - start) as usize;
                        dst[d0..d0 + (s1 - s0) as usize].copy_from_slice(&plane[s0 as usize..s1 as usize]);
                    }
                    zero_edges(dst, ow, lo, hi);
                    continue;
                }
                for oh in r0..r1 {
                    let dst = &mut row[(oh - a) * ow..(oh - a + 1) * ow];
                    let ih = (oh as isize * g.stride.0 as isize + shift_h) as usize;
                    let src = &plane[ih * g.w..(ih + 1) * g.w];
                    dst[..lo].fill(0.0);
                    dst[hi..].fill(0.0);
                    if g.stride.1 == 1 {
                        let s0 = (lo as isize + shift_w) as usize;
                        copy_short(&mut dst[lo..hi], &src[s0..s0 + hi - lo]);
                    } else if g.stride.1 == 2 && hi > lo {
                        // Every other float: a constant stride the compiler loads as whole
                        // vectors and de-interleaves (a variable one is a gather).
                        let (s0, n) = ((lo as isize * 2 + shift_w) as usize, hi - lo);
                        let (body, last) = dst[lo..hi].split_at_mut(n - 1);
                        for (d, pair) in body.iter_mut().zip(src[s0..s0 + 2 * (n - 1)].chunks_exact(2)) {
                            *d = pair[0];
                        }
                        last[0] = src[s0 + 2 * (n - 1)];
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

/// Zeroes the floats `p..ld` of every row of `cols` (row stride `ld`): the padding after the
/// pixels of a column matrix, so that the products read zeros there.
pub(super) fn zero_tails(cols: &mut [f32], ld: usize, p: usize) {
    if p < ld {
        for row in cols.chunks_exact_mut(ld) {
            row[p..].fill(0.0);
        }
    }
}

/// `dst.copy_from_slice(src)` for the short rows of an image (a dozen floats, where a call
/// into `memcpy` costs more than the copy): whole 8-float blocks, the last one overlapping.
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    const B: usize = 8;
    let n = dst.len();
    if n < B {
        dst.copy_from_slice(src);
        return;
    }
    let mut i = 0;
    while i + B < n {
        dst[i..i + B].copy_from_slice(&src[i..i + B]);
        i += B;
    }
    dst[n - B..].copy_from_slice(&src[n - B..n]);
}

/// `dst[i] += src[i]`, vectorized.
#[inline(always)]
fn add_into(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += *s;
    }
}

/// Folds the columns `[C*kh*kw, P]` of the output rows `band` (row stride `ld`, as
/// [`im2col`] writes them) back into an image `[C, H, W]`, adding them to what `x` holds (the
/// adjoint of [`im2col`]; the caller zeroes `x` before the first band). The columns that fall
/// into the padding are set to zero on the way (`cols` is the caller's scratch).
pub(super) fn col2im(g: &ConvGeom, cols: &mut [f32], x: &mut [f32], ld: usize, band: Range<usize>) {
    super::super::simd::vectorized(
        #[inline(always)]
        || col2im_inner(g, cols, x, ld, band),
    )
}

#[inline(always)]
fn col2im_inner(g: &ConvGeom, cols: &mut [f32], x: &mut [f32], ld: usize, band: Range<usize>) {
    let (hw, ow) = (g.h * g.w, g.ow);
    let (a, b) = (band.start, band.end);
    let ohw = (b - a) * ow;
    for c in 0..g.c {
        let plane = &mut x[c * hw..(c + 1) * hw];
        for ki in 0..g.k.0 {
            let (r0, r1, shift_h) = row_range(g, ki);
            let (r0, r1) = (r0.clamp(a, b), r1.clamp(a, b));
            if r1 == r0 {
                continue;
            }
            for kj in 0..g.k.1 {
                let row_idx = (c * g.k.0 + ki) * g.k.1 + kj;
                let row = &mut cols[row_idx * ld..row_idx * ld + ohw];
                let shift_w = (kj * g.dil.1) as isize - g.pad.1 as isize;
                let (lo, hi) = valid_range(ow, g.stride.1, shift_w, g.w);
                if flat(g) {
                    // The adjoint of im2col's single run: zero what reads the padding, then
                    // add the whole run (clipped to the plane) in one pass.
                    let src = &mut row[(r0 - a) * ow..(r1 - a) * ow];
                    zero_edges(src, ow, lo, hi);
                    let start = (r0 as isize + shift_h) * g.w as isize + shift_w;
                    let (s0, s1) = (start.max(0), (start + src.len() as isize).min(hw as isize));
                    if s1 > s0 {
                        let d0 = (s0 - start) as usize;
                        add_into(&mut plane[s0 as usize..s1 as usize], &src[d0..d0 + (s1 - s0) as usize]);
                    }
                    continue;
                }
                for oh in r0..r1 {
                    let ih = (oh as isize * g.stride.0 as isize + shift_h) as usize;
                    let src = &row[(oh - a) * ow..(oh - a + 1) * ow];
                    let dst = &mut plane[ih * g.w..(ih + 1) * g.w];
                    if g.stride.1 == 1 {
                        let s0 = (lo as isize + shift_w) as usize;
                        add_into(&mut dst[s0..s0 + hi - lo], &src[lo..hi]);
                    } else {
                        for o in lo..hi {
                            dst[(o as isize * g.stride.1 as isize + shift_w) as usize] += src[o];
                        }
                    }
                }
            }
        }
    }
}
