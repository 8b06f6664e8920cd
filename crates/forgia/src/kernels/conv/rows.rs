//! The pixel-major unfold ("im2row") of the weight gradient: one row of `C·kh·kw` taps per
//! output pixel, instead of im2col's one row of pixels per tap.
//!
//! The weight gradient `gw += gy · im2col(x)ᵀ` reads the unfolded image transposed. The
//! `gemm` crate copies ("packs") an operand it cannot read as whole vectors along its output
//! rows, which im2col's layout is not here, so every sample's column matrix was copied twice:
//! once by im2col and once by the crate. Unfolded pixel-major, the same matrix is read where it
//! is (the product ran 13% faster on the main job's second layer, `docs/BENCHMARKS.md`).
//!
//! A row orders its taps one of two ways ([`Order`]). Tap-major, from a channel-last copy of
//! the image, each kernel row of a pixel is one run of `kw·C` consecutive floats, copied
//! whole, with zeros for the taps in the padding; the product's result is then in tap-major
//! order too and is permuted into the weight's ([`to_weight_order`]), once per call.
//! Channel-major (the weight's own order), each `(channel, kernel row)` is a run of `kw`
//! floats of the zero-padded image, written as whole 8-float copies (each one's extra floats
//! overwritten by the next copy, the last one's falling into the row's padding): three useful
//! floats a copy for a 3×3 kernel, which made the unfold 4.9% of W12's step
//! (docs/BENCHMARKS.md, session twenty-five). Channel-major is kept where the permutation
//! would cost about what it saves (few pixels in the batch per output channel: ResNet's
//! 14×14 and 7×7 layers) and for grouped convolutions (a group's taps would not be one run).

use std::ops::Range;

use super::ConvGeom;
use crate::tensor::transpose::transpose;

/// Floats one 8-float copy moves.
const RUN: usize = 8;

/// True when the weight gradient of `g` unfolds its image pixel-major: unit dilation, a
/// kernel at most [`RUN`] wide, and something to unfold. (Strided ones too: im2col's matrix,
/// read transposed, made the `gemm` crate copy it one element at a time; `benches/conv.rs`,
/// `resnet_conv_fwd_bwd_b8_stem_3x224_k7s2_o64`.)
pub(super) fn applies(g: &ConvGeom) -> bool {
    g.dil == (1, 1) && (1..=RUN).contains(&g.k.1) && g.k.0 > 0 && g.c > 0 && g.oh * g.ow > 0
}

/// The batch's output pixels per output channel from which the tap-major order is taken
/// ([`order`]): its unfold copies whole runs of `kw·C` floats, about `C·kh·kw` floats per
/// pixel of the batch, and its permutation moves `C·kh·kw` floats per output channel, one at a
/// time. At 4, ResNet's 28×28 → 14×14 layer (6 pixels per channel at batch 8) ran its weight
/// gradient 0.3 ms slower than channel-major, its 14×14 layers level; the 56×56 and 28×28
/// layers (49 and more) about 0.5–1 ms faster.
const TAP_MAJOR_PIXELS_PER_CHANNEL: usize = 16;

/// The order of the taps in a pixel's row (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Order {
    /// Tap `(c, ki, kj)` at `(c·kh + ki)·kw + kj`: the weight's own order.
    ChannelMajor,
    /// Tap `(c, ki, kj)` at `(ki·kw + kj)·C + c`, for a convolution without groups.
    TapMajor,
}

/// The order the rows of `g` take: tap-major without groups where the batch has at least
/// [`TAP_MAJOR_PIXELS_PER_CHANNEL`] output pixels per output channel, or the kernel is one
/// tap (both orders are then the same), else channel-major.
pub(super) fn order(g: &ConvGeom) -> Order {
    let pixels = g.n.saturating_mul(g.oh * g.ow);
    let taps = g.k.0 * g.k.1;
    if g.groups == 1 && (taps == 1 || pixels >= TAP_MAJOR_PIXELS_PER_CHANNEL.saturating_mul(g.o)) {
        Order::TapMajor
    } else {
        Order::ChannelMajor
    }
}

/// The row stride: `C·kh·kw` in whole vectors, plus, channel-major, room for the last
/// copy's extra floats.
pub(super) fn ld(g: &ConvGeom) -> usize {
    let taps = g.c * g.k.0 * g.k.1;
    match order(g) {
        Order::TapMajor => taps.next_multiple_of(RUN),
        Order::ChannelMajor => (taps + RUN - g.k.1).next_multiple_of(RUN),
    }
}

/// Columns of the padded image: the padding on both sides, and room for an 8-float copy from
/// the last output column.
fn padded_w(g: &ConvGeom) -> usize {
    (g.w + 2 * g.pad.1).max((g.ow - 1) * g.stride.1 + RUN)
}

/// Rows of the padded image the outputs read.
fn padded_h(g: &ConvGeom) -> usize {
    (g.oh - 1) * g.stride.0 + g.k.0
}

/// Floats of scratch for the rows of `stack` samples' bands side by side (one sample's band
/// where `stack` is 1) and the image [`pad`] prepares: channel-major padded, tap-major a
/// channel-last copy (0 where the path does not apply).
pub(super) fn scratch_len(g: &ConvGeom, stack: usize) -> usize {
    if !applies(g) {
        return 0;
    }
    let image = match order(g) {
        Order::ChannelMajor => g.c.saturating_mul(padded_h(g)).saturating_mul(padded_w(g)),
        Order::TapMajor => g.c.saturating_mul(g.h).saturating_mul(g.w),
    };
    band_len(g).saturating_mul(stack).saturating_add(image)
}

/// Floats of one band's rows (`ConvGeom::band_rows` output rows of `OW` pixels, `ld` each).
pub(super) fn band_len(g: &ConvGeom) -> usize {
    g.band_rows().saturating_mul(g.ow).saturating_mul(ld(g))
}

/// Copies one image `x [C, H, W]` into `xp` (the rest of [`scratch_len`] after the rows) as
/// [`unfold`] reads it in the [`order`] of `g`, and returns that copy: channel-major
/// `[C, ph, pw]` with the zero padding, tap-major channel-last `[H, W, C]` (the unfold writes
/// the padding's zeros itself).
pub(super) fn pad<'a>(g: &ConvGeom, x: &[f32], xp: &'a mut [f32]) -> &'a [f32] {
    let hw = g.h * g.w;
    if order(g) == Order::TapMajor {
        let xc = &mut xp[..g.c * hw];
        transpose(x, g.c, hw, hw, xc);
        return xc;
    }
    let (ph, pw) = (padded_h(g), padded_w(g));
    let xp = &mut xp[..g.c * ph * pw];
    xp.fill(0.0);
    // Image rows that some output reads: the first `ph - pad` (all of them, unless a stride
    // leaves the last rows unread).
    let rows = g.h.min(ph.saturating_sub(g.pad.0));
    for (c, plane) in xp.chunks_exact_mut(ph * pw).enumerate() {
        for ir in 0..rows {
            let src = &x[(c * g.h + ir) * g.w..][..g.w];
            plane[(ir + g.pad.0) * pw + g.pad.1..][..g.w].copy_from_slice(src);
        }
    }
    xp
}

/// Unfolds the output rows `band` of the image `xp` as [`pad`] copied it into `rows [P, ld]`
/// (`P = band.len()·OW` pixels), row `p` holding the taps of the band's pixel `p` in the
/// [`order`] of `g` (zeros where padded; the floats after `C·kh·kw` are left unspecified).
pub(super) fn unfold(g: &ConvGeom, xp: &[f32], rows: &mut [f32], band: Range<usize>) {
    assert!(band.end <= g.oh, "unfold: band past the output");
    match order(g) {
        Order::ChannelMajor => unfold_channel_major(g, xp, rows, band),
        Order::TapMajor => unfold_tap_major(g, xp, rows, band),
    }
}

/// [`unfold`] tap-major from the channel-last image `xc [H, W, C]`: a pixel's kernel row `ki`
/// is `kw·C` floats, the part inside the image one run copied whole and zeros for the taps in
/// the padding.
fn unfold_tap_major(g: &ConvGeom, xc: &[f32], rows: &mut [f32], band: Range<usize>) {
    let (c, kw, (sh, sw), (pt, pl)) = (g.c, g.k.1, g.stride, g.pad);
    let first = band.start * g.ow;
    for (i, row) in rows.chunks_exact_mut(ld(g)).take(band.len() * g.ow).enumerate() {
        let (oh, ow) = ((first + i) / g.ow, (first + i) % g.ow);
        // The kernel columns `lo..hi` fall inside the image: input column `ow·sw - pl + kj`.
        let left = ow * sw;
        let lo = pl.saturating_sub(left).min(kw);
        let hi = (g.w + pl).saturating_sub(left).clamp(lo, kw);
        for (ki, dst) in row.chunks_exact_mut(kw * c).take(g.k.0).enumerate() {
            let ih = (oh * sh + ki).wrapping_sub(pt);
            if ih >= g.h || lo == hi {
                dst.fill(0.0); // a row of the padding (ih wrapped above `H` when above the image)
                continue;
            }
            let from = (ih * g.w + left + lo - pl) * c;
            dst[..lo * c].fill(0.0);
            dst[lo * c..hi * c].copy_from_slice(&xc[from..from + (hi - lo) * c]);
            dst[hi * c..].fill(0.0);
        }
    }
}

/// [`unfold`] channel-major, in 8-float copies.
fn unfold_channel_major(g: &ConvGeom, xp: &[f32], rows: &mut [f32], band: Range<usize>) {
    let (ph, pw, ld, kw) = (padded_h(g), padded_w(g), ld(g), g.k.1);
    let xp = &xp[..g.c * ph * pw];
    // Every copy below reads inside `xp`: the last one of the last pixel starts at
    // ((C - 1)·ph + (OH - 1)·sh + kh - 1)·pw + (OW - 1)·sw and ends RUN floats later, within
    // the C·ph·pw floats as ph = (OH - 1)·sh + kh and pw ≥ (OW - 1)·sw + RUN; and writes inside
    // its row: the last starts at (C·kh - 1)·kw and ends RUN floats later, at most `ld`.
    let (sh, sw) = g.stride;
    assert!((g.oh - 1) * sh + g.k.0 == ph && (g.ow - 1) * sw + RUN <= pw && (g.c * g.k.0 - 1) * kw + RUN <= ld);
    let first = band.start * g.ow;
    for (i, row) in rows.chunks_exact_mut(ld).take(band.len() * g.ow).enumerate() {
        let p = first + i;
        let (oh, ow) = (p / g.ow, p % g.ow);
        let (src, dst) = (xp.as_ptr(), row.as_mut_ptr());
        let mut at = 0;
        for c in 0..g.c {
            for ki in 0..g.k.0 {
                let from = (c * ph + oh * sh + ki) * pw + ow * sw;
                // SAFETY: inside `xp` and `row` by the assertions above (c < C, ki < kh,
                // oh < OH, ow < OW); the two are distinct buffers.
                unsafe { std::ptr::copy_nonoverlapping(src.add(from), dst.add(at), RUN) };
                at += kw;
            }
        }
    }
}

/// Permutes the weight gradient `gw [O, C·kh·kw]` of a product on tap-major rows into the
/// weight's order (each output channel's `[kh·kw, C]` transposed, through `tmp`); nothing
/// to do for channel-major rows or a one-tap kernel.
pub(super) fn to_weight_order(g: &ConvGeom, gw: &mut [f32], tmp: &mut [f32]) {
    let (taps, kg) = (g.k.0 * g.k.1, g.kg());
    if !applies(g) || order(g) != Order::TapMajor || taps == 1 {
        return;
    }
    let tmp = &mut tmp[..kg];
    for row in gw.chunks_exact_mut(kg) {
        transpose(row, taps, g.c, g.c, tmp);
        row.copy_from_slice(tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::geom;
    use super::*;

    #[test]
    fn every_row_holds_its_pixel_s_taps_with_zeros_in_the_padding() {
        // The main job's second layer (fewer channels), a narrow kernel, an unpadded one, one
        // padded more than its kernel on the rows, a padded 1x1, ResNet's stem (7x7, stride
        // 2) and a strided 3x3 with rows left over.
        let geoms = [
            geom(3, (14, 14), (5, 5), (1, 1), (2, 2), (1, 1)),
            geom(2, (5, 9), (3, 1), (1, 1), (1, 0), (1, 1)),
            geom(2, (6, 7), (3, 3), (1, 1), (0, 0), (1, 1)),
            geom(1, (3, 4), (3, 3), (1, 1), (3, 1), (1, 1)),
            geom(4, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
            geom(3, (16, 16), (7, 7), (2, 2), (3, 3), (1, 1)),
            geom(2, (9, 8), (3, 3), (2, 3), (1, 1), (1, 1)),
        ];
        // Each geometry in both orders: a batch of 16 for one output channel is tap-major, one
        // sample for as many output channels as pixels channel-major (unless the kernel is one
        // tap, where the two orders agree).
        for (i, g) in
            geoms.iter().flat_map(|g| [ConvGeom { n: 16, ..*g }, ConvGeom { o: g.oh * g.ow, ..*g }]).enumerate()
        {
            assert!(applies(&g), "geometry {i}");
            let tap_major = order(&g) == Order::TapMajor;
            assert_eq!(tap_major, i % 2 == 0 || g.k == (1, 1), "geometry {i}");
            let x: Vec<f32> = (0..g.c * g.h * g.w).map(|v| v as f32 + 1.0).collect();
            let mut buf = vec![f32::NAN; scratch_len(&g, 1)];
            let (rows, xp) = buf.split_at_mut(g.oh * g.ow * ld(&g));
            unfold(&g, pad(&g, &x, xp), rows, 0..g.oh);
            for p in 0..g.oh * g.ow {
                let (oh, ow) = (p / g.ow, p % g.ow);
                for (c, ki, kj) in
                    (0..g.c).flat_map(|c| (0..g.k.0).flat_map(move |i| (0..g.k.1).map(move |j| (c, i, j))))
                {
                    let ih = (oh * g.stride.0 + ki) as isize - g.pad.0 as isize;
                    let iw = (ow * g.stride.1 + kj) as isize - g.pad.1 as isize;
                    let inside = (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw);
                    let want = if inside { x[(c * g.h + ih as usize) * g.w + iw as usize] } else { 0.0 };
                    let at = if tap_major { (ki * g.k.1 + kj) * g.c + c } else { (c * g.k.0 + ki) * g.k.1 + kj };
                    assert_eq!(rows[p * ld(&g) + at], want, "geometry {i}, pixel {p}, tap {c} {ki} {kj}");
                }
            }
        }
    }

    #[test]
    fn a_tap_major_weight_gradient_is_put_in_the_weight_s_order() {
        let g = ConvGeom { o: 2, ..geom(3, (6, 5), (2, 3), (1, 1), (1, 1), (1, 1)) };
        assert_eq!(order(&g), Order::TapMajor);
        let (taps, kg) = (g.k.0 * g.k.1, g.kg());
        // Output channel o's tap t of channel c holds 100·o + 10·c + t, tap-major.
        let value = |o: usize, c: usize, t: usize| (100 * o + 10 * c + t) as f32;
        let mut gw: Vec<f32> = (0..g.o * kg).map(|i| value(i / kg, i % g.c, i % kg / g.c)).collect();
        let mut tmp = vec![f32::NAN; kg];
        to_weight_order(&g, &mut gw, &mut tmp);
        let want: Vec<f32> = (0..g.o * kg).map(|i| value(i / kg, i % kg / taps, i % taps)).collect();
        assert_eq!(gw, want);
        // Channel-major rows are already in the weight's order.
        let g = ConvGeom { o: g.oh * g.ow, ..g };
        let mut gw: Vec<f32> = (0..g.o * kg).map(|i| i as f32).collect();
        to_weight_order(&g, &mut gw, &mut tmp);
        assert!(gw.iter().enumerate().all(|(i, &v)| v == i as f32));
    }
}
