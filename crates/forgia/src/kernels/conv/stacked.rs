//! Several samples per weight-gradient product: for samples of few output pixels
//! ([`ConvGeom::weight_stack`]), the pixel-major rows of `S` samples (`conv/rows.rs`) are
//! stacked into one matrix `[S·OH·OW, ld]` and their output gradients laid side by side
//! `[O, S·OH·OW]`, so that one product of inner size `S·OH·OW` adds them all to the weight
//! gradient. One sample a product, ResNet's 7×7 layers (49 pixels) read and wrote the whole
//! `[512, 4608]` gradient (9 MB, from the L3) for 49 multiply-adds per element; four a
//! product, their weight gradient at batch 8 on two threads took about 0.5 ms less of its
//! 12 (a scratch probe of forgia alone, builds alternated; docs/BENCHMARKS.md).

use std::ops::Range;

use super::{gemm, packed, rows, ConvGeom};

/// The partial sum `gw += Σ_n gy[n] · R[n]` over `samples`, `stack` at a time (the first
/// product overwrites `gw`, the others add to it; `gw` untouched when `samples` is empty),
/// `R[n]` the rows of sample `n` in the order of [`rows::order`]. `cols` is one slice's
/// scratch: the stacked rows, the gradients side by side, then the padded image.
pub(super) fn partial(
    g: &ConvGeom,
    x: &[f32],
    y: &[f32],
    gw: &mut [f32],
    cols: &mut [f32],
    samples: Range<usize>,
    stack: usize,
) {
    let (og, kg, ohw, il, cl, ld) = (g.og(), g.kg(), g.ohw(), g.image_len(), g.cols_len(), rows::ld(g));
    let (r, rest) = cols.split_at_mut(stack * ohw * ld);
    let (gy, xp) = rest.split_at_mut(g.o * stack * ohw);
    for first in samples.clone().step_by(stack) {
        let count = stack.min(samples.end - first);
        let k = count * ohw;
        for s in 0..count {
            let n = first + s;
            let image = rows::pad(g, &x[n * il..][..il], xp);
            rows::unfold(g, image, &mut r[s * ohw * ld..], 0..g.oh);
            for (o, dst) in gy.chunks_exact_mut(k).take(g.o).enumerate() {
                dst[s * ohw..][..ohw].copy_from_slice(&y[n * cl + o * ohw..][..ohw]);
            }
        }
        for grp in 0..g.groups {
            let c = &mut gw[grp * og * kg..(grp + 1) * og * kg];
            let (a, b) = (packed(gy, grp * og * k, k), packed(r, grp * kg, ld));
            gemm(og, kg, k, a, b, c, first > samples.start, 1.0);
        }
    }
}
