//! The weight gradient of a convolution (`kernels/conv.rs`): the batch cut into slices, one per
//! worker, each summing its samples' products into its own partial sum (the first slice into
//! the gradient itself), then the partial sums added in slice order. A slice's products run on
//! the pixel-major unfold (`conv/rows.rs`), several samples at a time where they have few
//! pixels (`conv/stacked.rs`), on the image in place for a pointwise convolution, through
//! im2col otherwise, or as the implicit GEMM (`conv/implicit_weight.rs`).

use rayon::prelude::*;

use super::{
    bands, gemm, im2col, implicit_weight, packed, rows, split_len, stacked, transposed, ConvGeom, ConvScratch,
};
use crate::parallel;

/// The weight gradient `gw = Σ_n y[n] · im2col(x[n])ᵀ` per group, `[O, C/groups, kh, kw]`,
/// into the zeroed `gw`. The batch is split into `scratch.parts` slices, each accumulating its
/// own partial sum (the first into `gw`, the others into the zeroed scratch), then added in
/// slice order, and the sum put in the weight's order where the rows were tap-major
/// (`conv/rows.rs`) or the implicit GEMM ran it (`conv/implicit_weight.rs`).
pub(crate) fn backward_weight(g: &ConvGeom, x: &[f32], y: &[f32], gw: &mut [f32], scratch: ConvScratch<'_>) {
    let (og, kg, ohw, il, cl) = (g.og(), g.kg(), g.ohw(), g.image_len(), g.cols_len());
    let parts = scratch.parts.max(1);
    let (wlen, unfold) = (g.o * kg, g.unfold_len(parts, true));
    if gw.is_empty() {
        return; // no weights
    }
    let per = g.n.div_ceil(parts);
    let (cols, sums) = scratch.buf.split_at_mut(parts * unfold);
    let (stack, implicit) = (g.weight_stack(parts), implicit_weight::applies(g));
    // The implicit GEMM adds to its slice's sum, and a slice with no samples adds nothing:
    // those sums start from zeros. The products elsewhere overwrite theirs first (the
    // weight gradient of ResNet's 7×7 layers zeroed 9 MB a call for nothing).
    if implicit || (parts - 1) * per >= g.n {
        sums.fill(0.0);
    }
    let partial = |p: usize, gw: &mut [f32], cols: &mut [f32]| {
        let samples = p * per..((p + 1) * per).min(g.n);
        if implicit {
            return implicit_weight::partial(g, x, y, gw, cols, samples);
        }
        if stack > 1 {
            return stacked::partial(g, x, y, gw, cols, samples, stack);
        }
        for n in samples {
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
        partial(0, gw, &mut *cols[0]);
    } else {
        let mut outs: Vec<&mut [f32]> = std::iter::once(&mut *gw).chain(split_len(sums, parts - 1, wlen)).collect();
        parallel::install(|| {
            outs.par_iter_mut()
                .zip(cols.par_iter_mut())
                .enumerate()
                .for_each(|(p, (gw, cols))| parallel::with_kernels_on_this_thread(true, || partial(p, gw, cols)))
        });
        let (out, rest) = outs.split_first_mut().expect("parts > 1");
        add_slices(out, rest);
    }
    if implicit {
        implicit_weight::to_weight_order(g, gw, &mut *cols[0]);
    } else {
        rows::to_weight_order(g, gw, &mut *cols[0]);
    }
}

/// `out += Σ rest`, each element summing the slices in order (so the result is the same
/// bits on any number of threads), in chunks spread over the kernel threads (on one, the
/// 7×7 layers' weight gradient, 9 MB, ran 11.36 ms against 11.06; docs/BENCHMARKS.md, session
/// twenty-nine).
pub(super) fn add_slices(out: &mut [f32], rest: &[&mut [f32]]) {
    /// Floats a task adds: 64 KiB of `out`.
    const CHUNK: usize = 1 << 14;
    let add = |(i, chunk): (usize, &mut [f32])| {
        for p in rest {
            for (o, v) in chunk.iter_mut().zip(&p[i * CHUNK..]) {
                *o += v;
            }
        }
    };
    if out.len() <= CHUNK {
        return out.chunks_mut(CHUNK).enumerate().for_each(add);
    }
    parallel::install(|| out.par_chunks_mut(CHUNK).enumerate().for_each(add));
}
