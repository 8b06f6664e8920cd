//! Several samples per product: the forward and the input gradient of a convolution with few
//! output pixels ([`ConvGeom::group`]) unfold `G` samples side by side into one column matrix
//! `[C·kh·kw, G·OH·OW]` and run one product for all of them.
//!
//! The `gemm` crate computes a row-major product as its transpose, so the pixels are its rows
//! and its microkernel covers them 64 at a time (AVX-512; 16 with AVX2). ResNet-18's last
//! stage has 49 pixels a sample, padded to 56: one tile of 64 for 49 useful rows, each
//! product alone. Four samples make 196 pixels (padded to 200): three full tiles and a
//! sliver (its 7×7 convolutions ran 9% faster forward and 5% faster backward at batch 8 on
//! two threads, docs/BENCHMARKS.md).

use super::{
    add_channel_bias, col2im, gemm, im2col, packed, per_sample, transposed, zero_tails, ConvGeom, ConvScratch,
};

/// `y[n] = W · im2col(x[n]) (+ bias)` per group, `G` samples a product (`forward` of
/// `kernels/conv.rs`, which calls this when [`ConvGeom::group`] is more than 1).
pub(super) fn forward(
    g: &ConvGeom,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: ConvScratch<'_>,
    group: usize,
) {
    let (og, kg, ohw, il, cl) = (g.og(), g.kg(), g.ohw(), g.image_len(), g.cols_len());
    let mut outs: Vec<&mut [f32]> = y.chunks_mut(group * cl).collect();
    per_sample(g, &mut outs, scratch, |i, yg, buf| {
        let (first, count) = (i * group, yg.len() / cl);
        let ld = g.group_ld(count);
        let (cols, block) = buf.split_at_mut(g.unfold_rows() * ld);
        for s in 0..count {
            im2col(g, &x[(first + s) * il..][..il], &mut cols[s * ohw..], ld, 0..g.oh);
        }
        zero_tails(cols, ld, count * ohw);
        let block = &mut block[..og * ld];
        for grp in 0..g.groups {
            let (a, b) = (packed(w, grp * og * kg, kg), packed(cols, grp * kg * ld, ld));
            gemm(og, ld, kg, a, b, block, false, 1.0);
            for (s, ys) in yg.chunks_exact_mut(cl).enumerate() {
                let ys = ys[grp * og * ohw..(grp + 1) * og * ohw].chunks_exact_mut(ohw);
                for (dst, src) in ys.zip(block.chunks_exact(ld)) {
                    dst.copy_from_slice(&src[s * ohw..(s + 1) * ohw]);
                }
            }
        }
        if let Some(b) = bias {
            for ys in yg.chunks_exact_mut(cl) {
                add_channel_bias(ys, b, ohw);
            }
        }
    })
}

/// `x[n] = col2im(Wᵀ · y[n]) (+ bias)` per group, `G` samples a product (`backward_data` of
/// `kernels/conv.rs`): the samples' gradient rows are copied side by side into one block
/// first.
pub(super) fn backward_data(
    g: &ConvGeom,
    y: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    x: &mut [f32],
    scratch: ConvScratch<'_>,
    group: usize,
) {
    let (og, kg, ohw, il, cl) = (g.og(), g.kg(), g.ohw(), g.image_len(), g.cols_len());
    let mut outs: Vec<&mut [f32]> = x.chunks_mut(group * il).collect();
    per_sample(g, &mut outs, scratch, |i, xg, buf| {
        let (first, count) = (i * group, xg.len() / il);
        let ld = g.group_ld(count);
        let (cols, block) = buf.split_at_mut(g.unfold_rows() * ld);
        let block = &mut block[..og * ld];
        for grp in 0..g.groups {
            for (oc, row) in block.chunks_exact_mut(ld).enumerate() {
                for s in 0..count {
                    let src = &y[(first + s) * cl + (grp * og + oc) * ohw..][..ohw];
                    row[s * ohw..(s + 1) * ohw].copy_from_slice(src);
                }
            }
            zero_tails(block, ld, count * ohw);
            let c = &mut cols[grp * kg * ld..(grp + 1) * kg * ld];
            gemm(kg, ld, og, transposed(w, grp * og * kg, kg), packed(block, 0, ld), c, false, 1.0);
        }
        for (s, xs) in xg.chunks_exact_mut(il).enumerate() {
            xs.fill(0.0);
            col2im(g, &mut cols[s * ohw..], xs, ld, 0..g.oh);
            if let Some(b) = bias {
                add_channel_bias(xs, b, g.h * g.w);
            }
        }
    })
}
