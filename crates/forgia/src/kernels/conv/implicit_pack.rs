//! The implicit GEMM's packed weights (`conv/implicit.rs`): panels of output channels, once
//! per call, in the tap-major order its microkernel calls read (`(ki·kw + kj)·C + c` a row),
//! for the forward and, with the kernel flipped, for the input gradient run as the forward of
//! the transposed convolution. Both transpose 16 channels at a time in 16×16 blocks.

use super::ConvGeom;
use crate::kernels::for_each_with_scratch;
use crate::tensor::transpose::transpose_to;

/// Runs `fill(panel, its floats, scratch)` over the panels of `wp [O/rows][C·kh·kw][rows]`
/// (the last panel the channels left), on the workers of `bufs`.
fn panels(
    g: &ConvGeom,
    rows: usize,
    wp: &mut [f32],
    bufs: &mut [&mut [f32]],
    fill: impl Fn(usize, &mut [f32], &mut [f32]) + Sync,
) {
    let mut panels: Vec<&mut [f32]> = wp[..g.kg() * g.o].chunks_mut(g.kg() * rows).collect();
    for_each_with_scratch(&mut panels, bufs, |p, dst, tmp| fill(p, dst, tmp));
}

/// Input channels [`pack_forward`] transposes at a time.
pub(super) const PACK_CHANNELS: usize = 16;

/// Packs the weight `w [O, C, kh, kw]` of the forward of `g` into panels of `rows` output
/// channels, row `(ki·kw + kj)·C + c` of a panel holding tap `(c, ki, kj)` of its channels.
/// [`PACK_CHANNELS`] input channels at a time: their consecutive taps of the panel's output
/// channels transposed into the worker's scratch (in 16×16 blocks), whose rows are then
/// copied into tap order.
pub(super) fn pack_forward(g: &ConvGeom, rows: usize, w: &[f32], wp: &mut [f32], bufs: &mut [&mut [f32]]) {
    let (k, taps) = (g.kg(), g.k.0 * g.k.1);
    panels(g, rows, wp, bufs, |panel, dst, tmp| {
        let (o0, mb) = (panel * rows, rows.min(g.o - panel * rows));
        for c0 in (0..g.c).step_by(PACK_CHANNELS) {
            let cb = PACK_CHANNELS.min(g.c - c0);
            transpose_to(&w[o0 * k + c0 * taps..], mb, cb * taps, k, tmp, mb);
            for (j, src) in tmp.chunks_exact(mb).take(cb * taps).enumerate() {
                let (c, t) = (c0 + j / taps, j % taps);
                dst[(t * g.c + c) * mb..][..mb].copy_from_slice(src);
            }
        }
    })
}

/// Packs the weight `w [O, C, kh, kw]` of `g` for the forward of its transposed convolution
/// `t` (`implicit::transposed`): panels of `rows` of `g`'s input channels, row `(ki·kw + kj)·O + o`
/// of a panel holding tap `(kh-1-ki, kw-1-kj)` of output channel `o` for its channels (the
/// kernel flipped). [`PACK_CHANNELS`] output channels at a time: their taps of the panel's
/// channels (consecutive in `w`) transposed into the worker's scratch, then each tap's
/// `[channels, 16]` block transposed into its row of the panel (both in 16×16 blocks).
pub(super) fn pack_backward(
    g: &ConvGeom,
    t: &ConvGeom,
    rows: usize,
    w: &[f32],
    wp: &mut [f32],
    bufs: &mut [&mut [f32]],
) {
    let (k, taps) = (g.kg(), g.k.0 * g.k.1);
    panels(t, rows, wp, bufs, |panel, dst, tmp| {
        let (c0, mb) = (panel * rows, rows.min(g.c - panel * rows));
        for o0 in (0..g.o).step_by(PACK_CHANNELS) {
            let ob = PACK_CHANNELS.min(g.o - o0);
            // tmp[(ci·taps + tap)·ob + oi] = w[o0 + oi, c0 + ci, tap]
            transpose_to(&w[o0 * k + c0 * taps..], ob, mb * taps, k, tmp, ob);
            for tap in 0..taps {
                let row = ((taps - 1 - tap) * g.o + o0) * mb;
                transpose_to(&tmp[tap * ob..], mb, ob, taps * ob, &mut dst[row..], mb);
            }
        }
    })
}
