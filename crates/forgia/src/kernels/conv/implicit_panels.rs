//! The implicit GEMM's driver panel by panel (`conv/implicit.rs`), for convolutions whose
//! packed weight is larger than the L2 and whose samples have few pixels: ResNet-18's 7×7
//! layers (forward and input gradient) and its strided 14×14 → 7×7 forward. Sample by sample,
//! every sample read the whole packed weight (9.4 MB at 7×7 over 512 channels) from the L3
//! for 49 pixels of work; here a worker takes one panel of output channels for a group of
//! samples, and each tap's slab of the panel (`C·64` floats, 128 KB over 512 channels) stays
//! in the L2 across all their tiles, so the weight leaves the L3 once per group instead of
//! once per sample. The samples' channel-last copies are made first, all of them, and shared
//! by the workers. Each sample's tiles sum the same calls in the same order as sample by
//! sample, so the two drivers give the same bits.

use super::implicit::{band_tiles, channel_last, padded_w, Calls};
use super::micro::Micro;
use super::{add_channel_bias, ConvGeom};
use crate::kernels::for_each_with_scratch;
use crate::tensor::transpose::transpose_to;

/// Samples of fewer output pixels than this go panel by panel. ResNet-18's 14×14 layer over 256
/// channels (196 pixels a sample, each weight used 196 times a read) ran 1–4% slower so
/// (docs/BENCHMARKS.md, session thirty).
const PANEL_BELOW: usize = 128;

/// The most samples one panel's item runs: ResNet-18's 7×7 forward at batch 8 ran faster with
/// eight than with two or four, most in the host's slow state (docs/BENCHMARKS.md, session
/// thirty).
const PANEL_SAMPLES: usize = 8;

/// The samples one item runs when `g` goes panel by panel: several samples of fewer than
/// [`PANEL_BELOW`] pixels (one band each) whose weight is past the L2
/// ([`ConvGeom::weight_past_l2`]: a smaller one stays in the L2 from one sample to the next).
pub(super) fn group(g: &ConvGeom) -> Option<usize> {
    (g.n > 1 && g.weight_past_l2() && g.ohw() < PANEL_BELOW).then(|| PANEL_SAMPLES.min(g.n))
}

/// Floats of one channel-last copy ([`channel_last`] with the column padding).
fn copy_len(g: &ConvGeom) -> usize {
    g.h.saturating_mul(padded_w(g)).saturating_mul(g.c)
}

/// Floats of one worker's scratch when `g` goes panel by panel `group` samples an item (else
/// 0): the tiles of a group `[S, P, rows]`, or the copy of one sample before padding,
/// whichever is more.
pub(super) fn worker_len(g: &ConvGeom, mk: Micro, group: Option<usize>) -> usize {
    group.map_or(0, |s| (s.saturating_mul(g.ohw())).saturating_mul(mk.rows).max(g.image_len()))
}

/// Floats the workers share when `g` goes panel by panel (`group` is some; else 0): every
/// sample's copy.
pub(super) fn shared_len(g: &ConvGeom, group: Option<usize>) -> usize {
    if group.is_some() {
        g.n.saturating_mul(copy_len(g))
    } else {
        0
    }
}

/// `y[n] = W · x[n] (+ bias)` as `implicit::run`, panel by panel: the weight packed in `wp`,
/// the samples' copies in `copies` ([`shared_len`] floats), `group` samples an item
/// ([`group`]), the workers' scratch in `bufs` ([`worker_len`] floats each at least).
pub(super) fn run(
    g: &ConvGeom,
    (mk, calls): (Micro, Calls),
    group: usize,
    (x, wp, bias): (&[f32], &[f32], Option<&[f32]>),
    y: &mut [f32],
    copies: &mut [f32],
    bufs: &mut [&mut [f32]],
) {
    let (k, ohw, il, cl) = (g.kg(), g.ohw(), g.image_len(), copy_len(g));
    let copies = &mut copies[..g.n * cl];
    let mut each: Vec<&mut [f32]> = copies.chunks_mut(cl).collect();
    for_each_with_scratch(&mut each, bufs, |n, xp, buf| {
        channel_last(&x[n * il..][..il], (g.c, g.h, g.w), (0, g.pad.1, padded_w(g)), xp, buf);
    });
    let copies = &*copies;
    // An item: a panel's output channels for a group of samples, with each sample's rows of
    // the output for those channels; a panel's items come one after another, so that the
    // workers taking them read the same panel while it lasts.
    let mut rows: Vec<_> = y.chunks_mut(g.cols_len()).map(|yn| yn.chunks_mut(mk.rows * ohw)).collect();
    let mut items = Vec::new();
    for p in 0..g.o.div_ceil(mk.rows) {
        for n0 in (0..g.n).step_by(group) {
            let end = (n0 + group).min(g.n);
            let outs: Vec<&mut [f32]> =
                rows[n0..end].iter_mut().map(|r| r.next().expect("a panel's rows in every sample")).collect();
            items.push((p, n0, outs));
        }
    }
    let tile_len = ohw * mk.rows;
    for_each_with_scratch(&mut items, bufs, |_, (p, n0, outs), buf| {
        let (o0, mb) = (*p * mk.rows, mk.rows.min(g.o - *p * mk.rows));
        let panel = &wp[o0 * k..][..k * mb];
        let images: Vec<&[f32]> = copies[*n0 * cl..].chunks_exact(cl).take(outs.len()).collect();
        let tiles = &mut buf[..outs.len() * tile_len];
        band_tiles(g, (mk, calls), panel, &images, 0..g.oh, tiles);
        for (t, out) in tiles.chunks_exact(tile_len).zip(outs.iter_mut()) {
            transpose_to(t, ohw, mb, mk.rows, out, ohw);
            if let Some(b) = bias {
                add_channel_bias(out, &b[o0..o0 + mb], ohw);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::super::tests::geom;
    use super::*;

    #[test]
    fn samples_of_few_pixels_with_a_weight_past_the_l2_go_panel_by_panel_eight_at_a_time() {
        let g = |n: usize, side: usize, c: usize, o: usize, stride: usize| ConvGeom {
            n,
            o,
            ..geom(c, (side, side), (3, 3), (stride, stride), (1, 1), (1, 1))
        };
        // ResNet-18's 7×7 layer (9.4 MB packed) and its strided 14×14 → 7×7 one (4.7 MB).
        assert_eq!(group(&g(8, 7, 512, 512, 1)), Some(8));
        assert_eq!(group(&g(32, 7, 512, 512, 1)), Some(8));
        assert_eq!(group(&g(3, 7, 512, 512, 1)), Some(3));
        assert_eq!(group(&g(8, 14, 256, 512, 2)), Some(8));
        // One sample; 196 pixels a sample (the 14×14 layer); packed weights on either side of
        // the L2's 1 MiB (64 → 512 channels 1.18 MB, 56 → 512 1.03 MB).
        assert_eq!(group(&g(1, 7, 512, 512, 1)), None);
        assert_eq!(group(&g(8, 14, 256, 256, 1)), None);
        assert_eq!(group(&g(8, 7, 64, 512, 1)), Some(8));
        assert_eq!(group(&g(8, 7, 56, 512, 1)), None);
    }
}
