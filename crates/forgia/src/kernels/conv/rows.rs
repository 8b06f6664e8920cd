//! The pixel-major unfold ("im2row") of the weight gradient: one row of `C·kh·kw` taps per
//! output pixel, instead of im2col's one row of pixels per tap.
//!
//! The weight gradient `gw += gy · im2col(x)ᵀ` reads the unfolded image transposed. The
//! `gemm` crate copies ("packs") an operand it cannot read as whole vectors along its output
//! rows, which im2col's layout is not here, so every sample's column matrix was copied twice:
//! once by im2col and once by the crate. Unfolded pixel-major, the same matrix is read where it
//! is (the product ran 13% faster on the main job's second layer, `docs/BENCHMARKS.md`).
//!
//! For unit dilation (any stride), each `(channel, kernel row)` of a pixel's row is a run of
//! `kw` consecutive floats of a zero-padded copy of the image, so a row is written as whole
//! 8-float copies (each one's extra floats overwritten by the next copy, the last one's falling into
//! the row's padding).

use std::ops::Range;

use super::ConvGeom;

/// Floats one 8-float copy moves.
const RUN: usize = 8;

/// True when the weight gradient of `g` unfolds its image pixel-major: unit dilation, a
/// kernel at most [`RUN`] wide, and something to unfold. (Strided ones too: im2col's matrix,
/// read transposed, made the `gemm` crate copy it one element at a time; `benches/conv.rs`,
/// `resnet_conv_fwd_bwd_b8_stem_3x224_k7s2_o64`.)
pub(super) fn applies(g: &ConvGeom) -> bool {
    g.dil == (1, 1) && (1..=RUN).contains(&g.k.1) && g.k.0 > 0 && g.c > 0 && g.oh * g.ow > 0
}

/// The row stride: `C·kh·kw` plus room for the last copy's extra floats, in whole vectors.
pub(super) fn ld(g: &ConvGeom) -> usize {
    (g.c * g.k.0 * g.k.1 + RUN - g.k.1).next_multiple_of(RUN)
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

/// Floats of scratch one sample needs: its rows and its padded image (0 where the path does
/// not apply).
pub(super) fn scratch_len(g: &ConvGeom) -> usize {
    if !applies(g) {
        return 0;
    }
    let image = g.c.saturating_mul(padded_h(g)).saturating_mul(padded_w(g));
    band_len(g).saturating_add(image)
}

/// Floats of one band's rows (`ConvGeom::band_rows` output rows of `OW` pixels, `ld` each).
pub(super) fn band_len(g: &ConvGeom) -> usize {
    g.band_rows().saturating_mul(g.ow).saturating_mul(ld(g))
}

/// Copies one image `x [C, H, W]` into `xp` (the rest of [`scratch_len`] after the rows) with
/// the zero padding [`unfold`] reads, and returns that padded image.
pub(super) fn pad<'a>(g: &ConvGeom, x: &[f32], xp: &'a mut [f32]) -> &'a [f32] {
    let (ph, pw) = (padded_h(g), padded_w(g));
    let xp = &mut xp[..g.c * ph * pw];
    xp.fill(0.0);
    for (c, plane) in xp.chunks_exact_mut(ph * pw).enumerate() {
        for ir in 0..g.h {
            let r = ir + g.pad.0;
            if r < ph {
                let cols = g.w.min(pw - g.pad.1);
                let src = &x[(c * g.h + ir) * g.w..][..cols];
                plane[r * pw + g.pad.1..][..cols].copy_from_slice(src);
            }
        }
    }
    xp
}

/// Unfolds the output rows `band` of the padded image `xp` ([`pad`]) into `rows [P, ld]`
/// (`P = band.len()·OW` pixels), row `p` holding tap `(c, ki, kj)` of the band's pixel `p` at
/// `(c·kh + ki)·kw + kj` (zeros where padded; the floats after `C·kh·kw` are left
/// unspecified).
pub(super) fn unfold(g: &ConvGeom, xp: &[f32], rows: &mut [f32], band: Range<usize>) {
    let (ph, pw, ld, kw) = (padded_h(g), padded_w(g), ld(g), g.k.1);
    let xp = &xp[..g.c * ph * pw];
    // Every copy below reads inside `xp`: the last one of the last pixel starts at
    // ((C - 1)·ph + (OH - 1)·sh + kh - 1)·pw + (OW - 1)·sw and ends RUN floats later, within
    // the C·ph·pw floats as ph = (OH - 1)·sh + kh and pw ≥ (OW - 1)·sw + RUN; and writes inside
    // its row: the last starts at (C·kh - 1)·kw and ends RUN floats later, at most `ld`.
    let (sh, sw) = g.stride;
    assert!((g.oh - 1) * sh + g.k.0 == ph && (g.ow - 1) * sw + RUN <= pw && (g.c * g.k.0 - 1) * kw + RUN <= ld);
    assert!(band.end <= g.oh, "unfold: band past the output");
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
        for (i, g) in geoms.iter().enumerate() {
            assert!(applies(g), "geometry {i}");
            let x: Vec<f32> = (0..g.c * g.h * g.w).map(|v| v as f32 + 1.0).collect();
            let mut buf = vec![f32::NAN; scratch_len(g)];
            let (rows, xp) = buf.split_at_mut(g.oh * g.ow * ld(g));
            unfold(g, pad(g, &x, xp), rows, 0..g.oh);
            for p in 0..g.oh * g.ow {
                let (oh, ow) = (p / g.ow, p % g.ow);
                for (c, ki, kj) in
                    (0..g.c).flat_map(|c| (0..g.k.0).flat_map(move |i| (0..g.k.1).map(move |j| (c, i, j))))
                {
                    let ih = (oh * g.stride.0 + ki) as isize - g.pad.0 as isize;
                    let iw = (ow * g.stride.1 + kj) as isize - g.pad.1 as isize;
                    let inside = (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw);
                    let want = if inside { x[(c * g.h + ih as usize) * g.w + iw as usize] } else { 0.0 };
                    let got = rows[p * ld(g) + (c * g.k.0 + ki) * g.k.1 + kj];
                    assert_eq!(got, want, "geometry {i}, pixel {p}, tap {c} {ki} {kj}");
                }
            }
        }
    }
}
