//! The convolution kernels against their definitions: im2col and col2im, the products on
//! padded rows and band by band, the direct kernel, and batch splitting.

use super::weight::add_slices;
use super::*;

/// One sample, one output channel: `c` channels of `(h, w)` under the given kernel,
/// stride, padding and dilation (the output size derived).
pub(super) fn geom(
    c: usize,
    (h, w): (usize, usize),
    k: (usize, usize),
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
) -> ConvGeom {
    let out = |len: usize, k: usize, s: usize, p: usize, d: usize| (len + 2 * p - d * (k - 1) - 1) / s + 1;
    let (oh, ow) = (out(h, k.0, stride.0, pad.0, dil.0), out(w, k.1, stride.1, pad.1, dil.1));
    ConvGeom { n: 1, c, h, w, o: 1, oh, ow, k, stride, pad, dil, groups: 1 }
}

/// im2col by its definition, one element at a time.
fn naive_im2col(g: &ConvGeom, x: &[f32]) -> Vec<f32> {
    let mut cols = vec![0.0; g.kg() * g.ohw()];
    for c in 0..g.c {
        for ki in 0..g.k.0 {
            for kj in 0..g.k.1 {
                for oh in 0..g.oh {
                    for ow in 0..g.ow {
                        let ih = (oh * g.stride.0 + ki * g.dil.0) as isize - g.pad.0 as isize;
                        let iw = (ow * g.stride.1 + kj * g.dil.1) as isize - g.pad.1 as isize;
                        if (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw) {
                            let row = (c * g.k.0 + ki) * g.k.1 + kj;
                            cols[row * g.ohw() + oh * g.ow + ow] = x[(c * g.h + ih as usize) * g.w + iw as usize];
                        }
                    }
                }
            }
        }
    }
    cols
}

/// The forward by its definition.
pub(super) fn naive_forward(g: &ConvGeom, x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
    let (og, cg) = (g.o / g.groups, g.c / g.groups);
    let mut y = vec![0.0; g.n * g.cols_len()];
    for n in 0..g.n {
        for o in 0..g.o {
            let grp = o / og;
            for (oh, ow) in (0..g.oh).flat_map(|a| (0..g.ow).map(move |b| (a, b))) {
                let mut s = bias[o];
                for (c, ki, kj) in
                    (0..cg).flat_map(|c| (0..g.k.0).flat_map(move |i| (0..g.k.1).map(move |j| (c, i, j))))
                {
                    let ih = (oh * g.stride.0 + ki * g.dil.0) as isize - g.pad.0 as isize;
                    let iw = (ow * g.stride.1 + kj * g.dil.1) as isize - g.pad.1 as isize;
                    if (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw) {
                        let xi = ((n * g.c + grp * cg + c) * g.h + ih as usize) * g.w + iw as usize;
                        s += w[((o * cg + c) * g.k.0 + ki) * g.k.1 + kj] * x[xi];
                    }
                }
                y[(n * g.o + o) * g.ohw() + oh * g.ow + ow] = s;
            }
        }
    }
    y
}

#[test]
fn the_single_channel_direct_kernel_matches_the_definition() {
    let geoms = [
        geom(1, (28, 28), (5, 5), (1, 1), (2, 2), (1, 1)), // the main job's first layer
        geom(1, (9, 37), (3, 3), (1, 1), (0, 0), (1, 1)),  // several tiles, a partial one
        geom(1, (3, 4), (3, 3), (1, 1), (3, 3), (1, 1)),   // over-padded
        geom(1, (11, 10), (3, 2), (2, 1), (1, 2), (2, 3)), // strided rows, dilation
        geom(1, (1, 20), (1, 5), (1, 1), (0, 2), (1, 1)),  // conv1d-like
    ];
    for (i, g0) in geoms.iter().enumerate() {
        for o in [1, 5, 8] {
            let g = ConvGeom { n: 2, o, ..*g0 };
            assert!(direct::applies(&g));
            let x: Vec<f32> = (0..g.n * g.image_len()).map(|v| (v % 9) as f32 - 4.0).collect();
            let w: Vec<f32> = (0..g.o * g.kg()).map(|v| (v % 5) as f32 - 2.0).collect();
            let b: Vec<f32> = (0..o).map(|v| v as f32).collect();
            for parts in [1, 2] {
                let mut y = vec![f32::NAN; g.n * g.cols_len()];
                let mut buf = vec![f32::NAN; g.scratch_len(parts, false)];
                forward(&g, &x, &w, Some(&b), &mut y, ConvScratch { parts, buf: &mut buf });
                assert_eq!(y, naive_forward(&g, &x, &w, &b), "geometry {i}, {o} channels, {parts} parts");
            }
        }
    }
}

#[test]
fn every_im2col_path_matches_the_definition_and_col2im_is_its_adjoint() {
    let cases = [
        geom(2, (6, 7), (5, 5), (1, 1), (2, 2), (1, 1)), // same: one run per tap
        geom(1, (7, 5), (3, 3), (1, 1), (2, 2), (2, 2)), // same with dilation
        geom(2, (7, 6), (3, 3), (1, 1), (0, 0), (1, 1)), // stride 1, rows shorter
        geom(1, (2, 3), (3, 3), (1, 1), (3, 3), (1, 1)), // over-padded: whole taps outside
        geom(3, (7, 7), (3, 2), (2, 1), (1, 0), (1, 2)), // strided rows
        geom(2, (5, 8), (3, 3), (1, 2), (1, 1), (1, 1)), // strided columns
        geom(1, (1, 9), (1, 5), (1, 1), (0, 2), (1, 1)), // conv1d-like, same
    ];
    for (i, g) in cases.iter().enumerate() {
        let x: Vec<f32> = (0..g.image_len()).map(|v| (v % 11) as f32 - 5.0).collect();
        // Stale values in the scratch must not leak through.
        let mut cols = vec![f32::NAN; g.kg() * g.ohw()];
        im2col(g, &x, &mut cols, g.ohw(), 0..g.oh);
        assert_eq!(cols, naive_im2col(g, &x), "case {i}: {g:?}");
        // With padded rows: the same rows, the floats after them untouched (they may hold the
        // next sample's columns), then zeros once `zero_tails` has run.
        let ld = g.ohw() + 3;
        let mut wide = vec![f32::NAN; g.kg() * ld];
        im2col(g, &x, &mut wide, ld, 0..g.oh);
        for (r, row) in wide.chunks_exact(ld).enumerate() {
            assert_eq!(row[..g.ohw()], cols[r * g.ohw()..(r + 1) * g.ohw()], "case {i}: padded row {r}");
            assert!(row[g.ohw()..].iter().all(|v| v.is_nan()), "case {i}: padded row {r}'s tail written");
        }
        zero_tails(&mut wide, ld, g.ohw());
        for (r, row) in wide.chunks_exact(ld).enumerate() {
            assert_eq!(row[..g.ohw()], cols[r * g.ohw()..(r + 1) * g.ohw()], "case {i}: zeroed row {r}");
            assert!(row[g.ohw()..].iter().all(|&v| v == 0.0), "case {i}: padded row {r}'s tail");
        }
        // <im2col(x), y> = <x, col2im(y)> with small integers: exact in any order.
        let y: Vec<f32> = (0..cols.len()).map(|v| (v % 7) as f32 - 3.0).collect();
        let mut back = vec![0.0; x.len()];
        col2im(g, &mut y.clone(), &mut back, g.ohw(), 0..g.oh);
        let mut padded_y = vec![f32::NAN; wide.len()];
        for (dst, src) in padded_y.chunks_exact_mut(ld).zip(y.chunks_exact(g.ohw())) {
            dst[..g.ohw()].copy_from_slice(src);
        }
        let mut padded_back = vec![0.0; x.len()];
        col2im(g, &mut padded_y, &mut padded_back, ld, 0..g.oh);
        assert_eq!(padded_back, back, "case {i}: col2im of padded rows");
        let lhs: f32 = cols.iter().zip(&y).map(|(a, b)| a * b).sum();
        // Each pixel's gradient by the definition: the sum of the columns that read it.
        let mut want = vec![0.0; x.len()];
        let unit: Vec<f32> = (0..x.len()).map(|_| 0.0).collect();
        for p in 0..x.len() {
            let mut e = unit.clone();
            e[p] = 1.0;
            want[p] = naive_im2col(g, &e).iter().zip(&y).map(|(a, b)| a * b).sum();
        }
        assert_eq!(back, want, "case {i}: col2im");
        let rhs: f32 = x.iter().zip(&back).map(|(a, b)| a * b).sum();
        assert_eq!(lhs, rhs, "case {i}: adjoint");
    }
}

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
    im2col(&g, &x, &mut cols, g.ohw(), 0..g.oh);
    let mut back = vec![0.0; x.len()];
    col2im(&g, &mut y.clone(), &mut back, g.ohw(), 0..g.oh);
    let lhs: f32 = cols.iter().zip(&y).map(|(a, b)| a * b).sum();
    let rhs: f32 = x.iter().zip(&back).map(|(a, b)| a * b).sum();
    assert_eq!(lhs, rhs);
}

/// `<a, b>` in f64 (exact for the small integers of the tests below).
fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&a, &b)| a as f64 * b as f64).sum()
}

#[test]
fn products_on_padded_rows_match_the_definition_and_each_other_s_adjoints() {
    // Pixel counts that are not a multiple of 8 (14x14 = 196 is the main job's second
    // layer), with groups and a stride; then one that is (no padded rows).
    let cases = [
        ConvGeom { n: 3, o: 6, groups: 2, ..geom(4, (14, 14), (5, 5), (1, 1), (2, 2), (1, 1)) },
        ConvGeom { n: 2, o: 2, ..geom(3, (7, 5), (3, 3), (2, 2), (1, 1), (1, 1)) },
        ConvGeom { n: 2, o: 3, ..geom(2, (4, 4), (3, 3), (1, 1), (1, 1), (1, 1)) },
    ];
    for (i, g) in cases.iter().enumerate() {
        assert_eq!(g.padded(), i < 2, "case {i}");
        let (x, w, b, gy) = small_maps(g);
        for parts in [1, 2] {
            // One buffer for the three maps: the larger of their needs (the last case's 16-pixel
            // samples share the forward's and the input gradient's products).
            let mut buf = vec![f32::NAN; g.scratch_len(parts, true).max(g.scratch_len(parts, false))];
            let mut y = vec![f32::NAN; g.n * g.cols_len()];
            forward(g, &x, &w, Some(&b), &mut y, ConvScratch { parts, buf: &mut buf });
            assert_eq!(y, naive_forward(g, &x, &w, &b), "case {i}, {parts} parts: forward");
            // Without the bias, forward is linear in x and in w: <y, gy> = <x, gx> = <w, gw>.
            let mut y = vec![f32::NAN; g.n * g.cols_len()];
            forward(g, &x, &w, None, &mut y, ConvScratch { parts, buf: &mut buf });
            let mut gx = vec![f32::NAN; x.len()];
            backward_data(g, &gy, &w, None, &mut gx, ConvScratch { parts, buf: &mut buf });
            let mut gw = vec![0.0; w.len()];
            backward_weight(g, &x, &gy, &mut gw, ConvScratch { parts, buf: &mut buf });
            assert_eq!(dot(&y, &gy), dot(&x, &gx), "case {i}, {parts} parts: data gradient");
            assert_eq!(dot(&y, &gy), dot(&w, &gw), "case {i}, {parts} parts: weight gradient");
        }
    }
}

/// Both gradients by their definition: `gx[x_i] += w · gy` and `gw[w_i] += x · gy` over
/// every tap that reads the image.
pub(super) fn naive_backward(g: &ConvGeom, x: &[f32], w: &[f32], gy: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (og, cg) = (g.o / g.groups, g.c / g.groups);
    let (mut gx, mut gw) = (vec![0.0; x.len()], vec![0.0; w.len()]);
    for n in 0..g.n {
        for o in 0..g.o {
            let grp = o / og;
            for (oh, ow) in (0..g.oh).flat_map(|a| (0..g.ow).map(move |b| (a, b))) {
                let gyv = gy[(n * g.o + o) * g.ohw() + oh * g.ow + ow];
                for (c, ki, kj) in
                    (0..cg).flat_map(|c| (0..g.k.0).flat_map(move |i| (0..g.k.1).map(move |j| (c, i, j))))
                {
                    let ih = (oh * g.stride.0 + ki * g.dil.0) as isize - g.pad.0 as isize;
                    let iw = (ow * g.stride.1 + kj * g.dil.1) as isize - g.pad.1 as isize;
                    if (0..g.h as isize).contains(&ih) && (0..g.w as isize).contains(&iw) {
                        let xi = ((n * g.c + grp * cg + c) * g.h + ih as usize) * g.w + iw as usize;
                        let wi = ((o * cg + c) * g.k.0 + ki) * g.k.1 + kj;
                        gx[xi] += w[wi] * gyv;
                        gw[wi] += x[xi] * gyv;
                    }
                }
            }
        }
    }
    (gx, gw)
}

#[test]
fn products_band_by_band_match_the_definition() {
    // Column matrices past `BAND_BYTES`: a "same" 5x5 (the flat unfold, the pixel-major
    // weight gradient, a short last band), a strided 3x3 with groups whose bands are not
    // whole vectors of pixels (padded blocks, im2col's row-by-row path), and a dilated
    // one (the flat unfold, the weight gradient through im2col).
    let cases = [
        ConvGeom { n: 2, o: 2, ..geom(16, (62, 62), (5, 5), (1, 1), (2, 2), (1, 1)) },
        ConvGeom { n: 2, o: 4, groups: 2, ..geom(64, (90, 90), (3, 3), (2, 2), (1, 1), (1, 1)) },
        ConvGeom { n: 1, o: 3, ..geom(26, (70, 70), (3, 3), (1, 1), (2, 2), (2, 2)) },
    ];
    for (i, g) in cases.iter().enumerate() {
        assert!(g.banded() && g.oh % g.band_rows() != 0, "case {i}: {} rows a band", g.band_rows());
        let (x, w, b, gy) = small_maps(g);
        let (want_gx, want_gw) = naive_backward(g, &x, &w, &gy);
        for parts in [1, 2] {
            let mut buf = vec![f32::NAN; g.scratch_len(parts, true).max(g.scratch_len(parts, false))];
            let mut y = vec![f32::NAN; g.n * g.cols_len()];
            forward(g, &x, &w, Some(&b), &mut y, ConvScratch { parts, buf: &mut buf });
            assert_eq!(y, naive_forward(g, &x, &w, &b), "case {i}, {parts} parts: forward");
            let mut gx = vec![f32::NAN; x.len()];
            backward_data(g, &gy, &w, None, &mut gx, ConvScratch { parts, buf: &mut buf });
            assert_eq!(gx, want_gx, "case {i}, {parts} parts: data gradient");
            let mut gw = vec![0.0; w.len()];
            backward_weight(g, &x, &gy, &mut gw, ConvScratch { parts, buf: &mut buf });
            assert_eq!(gw, want_gw, "case {i}, {parts} parts: weight gradient");
        }
    }
}

/// Operands of `g` over small integers, whose sums are exact in any order: the images `x`,
/// the weight `w`, a bias `b` and an output gradient `gy`.
pub(super) fn small_maps(g: &ConvGeom) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let x = (0..g.n * g.image_len()).map(|v| (v % 7) as f32 - 3.0).collect();
    let w = (0..g.o * g.kg()).map(|v| (v % 5) as f32 - 2.0).collect();
    let b = (0..g.o).map(|v| v as f32).collect();
    let gy = (0..g.n * g.cols_len()).map(|v| (v % 3) as f32 - 1.0).collect();
    (x, w, b, gy)
}

/// Runs the forward (with a bias) and the input gradient (with a bias per input channel, as
/// conv_transpose2d's forward has) of `g` on `parts` workers over small integers, whose sums
/// are exact in any order, and asserts both equal the definition.
pub(super) fn check_activation_maps(g: &ConvGeom, parts: usize, what: &str) {
    let (x, w, b, gy) = small_maps(g);
    let cb: Vec<f32> = (0..g.c).map(|v| v as f32 - 1.0).collect();
    let (gx_def, _) = naive_backward(g, &x, &w, &gy);
    let want_gx: Vec<f32> = gx_def.iter().enumerate().map(|(j, v)| v + cb[j / (g.h * g.w) % g.c]).collect();
    let mut buf = vec![f32::NAN; g.scratch_len(parts, false)];
    let mut y = vec![f32::NAN; g.n * g.cols_len()];
    forward(g, &x, &w, Some(&b), &mut y, ConvScratch { parts, buf: &mut buf });
    assert_eq!(y, naive_forward(g, &x, &w, &b), "{what}: forward");
    let mut gx = vec![f32::NAN; x.len()];
    backward_data(g, &gy, &w, Some(&cb), &mut gx, ConvScratch { parts, buf: &mut buf });
    assert_eq!(gx, want_gx, "{what}: input gradient");
}

#[test]
fn products_of_several_samples_match_the_definition() {
    // Samples of fewer pixels than one kernel tile: ResNet's last stage (7x7, here with fewer
    // channels), a strided one with groups and a bias, and a batch that leaves a short last
    // group; each with one worker (every sample in as few products as the pixels ask) and two.
    let cases = [
        ConvGeom { n: 7, o: 5, ..geom(6, (7, 7), (3, 3), (1, 1), (1, 1), (1, 1)) },
        ConvGeom { n: 5, o: 4, groups: 2, ..geom(4, (9, 8), (3, 3), (2, 2), (1, 1), (1, 1)) },
        ConvGeom { n: 7, o: 3, ..geom(2, (3, 5), (1, 3), (1, 1), (0, 1), (1, 1)) },
    ];
    let mut short = 0;
    for (i, g) in cases.iter().enumerate() {
        for parts in [1, 2] {
            let group = g.group(parts);
            assert!(group > 1, "case {i}, {parts} parts: {group} samples a product");
            short += usize::from(g.n % group != 0);
            check_activation_maps(g, parts, &format!("case {i}, {parts} parts"));
        }
    }
    assert!(short >= 3, "only {short} batches ended in a short group");
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
        let mut buf = vec![f32::NAN; g.scratch_len(parts, false)];
        forward(&g, &x, &w, None, &mut y, ConvScratch { parts, buf: &mut buf });
        let mut gx = vec![0.0; x.len()];
        backward_data(&g, &y, &w, None, &mut gx, ConvScratch { parts, buf: &mut buf });
        let mut gw = vec![0.0; w.len()];
        let mut buf = vec![f32::NAN; g.scratch_len(parts, true)];
        backward_weight(&g, &x, &y, &mut gw, ConvScratch { parts, buf: &mut buf });
        (y, gx, gw)
    };
    let (y1, gx1, gw1) = run(1);
    // Scratch of NaNs: whatever a kernel reads it wrote first. Four slices of two samples
    // leave the last with none, whose sum must be zeros.
    for parts in [2, 3, 4, 5] {
        let (y, gx, gw) = run(parts);
        assert_eq!((&y, &gx), (&y1, &gx1), "{parts} slices");
        // Small integers: every partial sum is exact, so the order of the slices is too.
        assert_eq!(gw, gw1, "{parts} slices");
    }
}

#[test]
fn the_weight_gradient_matches_the_definition_with_taps_in_either_order_and_samples_stacked() {
    // ResNet's 3x3 (padded, stride 1) at 9x9 (81 pixels a sample: one sample a product) and
    // 6x6 (36: several samples a product, as ResNet's 7x7 layers), a strided one with rows
    // left over, a strided 1x1 and a stem-like 7x7: each with a batch of many pixels per
    // output channel (tap-major rows) and with more output channels than that
    // (channel-major), on one worker and on two (three samples for two slices: a short last
    // stack); and a pointwise one on 25 pixels, whose product reads the image in place, one
    // sample at a time.
    let shapes = [
        geom(3, (9, 9), (3, 3), (1, 1), (1, 1), (1, 1)),
        geom(4, (5, 5), (1, 1), (1, 1), (0, 0), (1, 1)),
        geom(5, (6, 6), (3, 3), (1, 1), (1, 1), (1, 1)),
        geom(3, (9, 8), (3, 3), (2, 2), (1, 1), (1, 1)),
        geom(4, (8, 6), (1, 1), (2, 2), (0, 0), (1, 1)),
        geom(2, (13, 12), (7, 7), (2, 2), (3, 3), (1, 1)),
    ];
    let cases = shapes.iter().flat_map(|g| [ConvGeom { n: 5, o: 3, ..*g }, ConvGeom { n: 3, o: 6 * g.ohw(), ..*g }]);
    for (i, g) in cases.enumerate() {
        let want = if i % 2 == 0 || g.k == (1, 1) { rows::Order::TapMajor } else { rows::Order::ChannelMajor };
        assert_eq!(rows::order(&g), want, "case {i}");
        let x: Vec<f32> = (0..g.n * g.image_len()).map(|v| (v % 7) as f32 - 3.0).collect();
        let w = vec![0.0; g.o * g.kg()];
        let gy: Vec<f32> = (0..g.n * g.cols_len()).map(|v| (v % 3) as f32 - 1.0).collect();
        let (_, want_gw) = naive_backward(&g, &x, &w, &gy);
        for parts in [1, 2] {
            assert_eq!(
                g.weight_stack(parts) > 1,
                i >= 4,
                "case {i}, {parts} parts: {} samples a product",
                g.weight_stack(parts)
            );
            let mut buf = vec![f32::NAN; g.scratch_len(parts, true)];
            let mut gw = vec![0.0; w.len()];
            backward_weight(&g, &x, &gy, &mut gw, ConvScratch { parts, buf: &mut buf });
            assert_eq!(gw, want_gw, "case {i}, {parts} parts");
        }
    }
}

#[test]
fn weight_gradients_stack_samples_of_few_pixels_and_of_a_few_hundred_against_a_large_gradient() {
    // ResNet-18's layers at batch 8 on two slices: (input side, channels in, out, stride).
    let resnet = |side: usize, c: usize, o: usize, s: usize| ConvGeom {
        n: 8,
        o,
        ..geom(c, (side, side), (3, 3), (s, s), (1, 1), (1, 1))
    };
    assert_eq!(resnet(7, 512, 512, 1).weight_stack(2), 4, "7×7: eight of 49 pixels aimed for, four a slice");
    assert_eq!(resnet(14, 256, 256, 1).weight_stack(2), 2, "14×14 against 2.4 MB");
    assert_eq!(resnet(28, 128, 256, 2).weight_stack(2), 2, "28×28 → 14×14 against 1.2 MB");
    assert_eq!(resnet(28, 128, 128, 1).weight_stack(2), 1, "784 pixels");
    assert_eq!(resnet(14, 16, 16, 1).weight_stack(2), 1, "196 pixels against 9 KB");
    assert_eq!(resnet(7, 16, 16, 1).weight_stack(2), 4, "49 pixels, whatever the gradient");
    assert_eq!(ConvGeom { n: 16, ..resnet(7, 512, 512, 1) }.weight_stack(2), 8);
}

#[test]
fn slice_sums_are_added_in_slice_order_in_chunks_across_threads() {
    // Past one chunk (16 Ki floats), with a last chunk cut short; values whose sums round
    // differently in another order.
    let len = 3 * (1 << 14) + 5;
    let mut rest: Vec<Vec<f32>> =
        (0..3).map(|p| (0..len).map(|i| ((i * 7 + p) % 11) as f32 * 0.1 + 1e7).collect()).collect();
    let mut out: Vec<f32> = (0..len).map(|i| (i % 13) as f32 * 0.3).collect();
    let want: Vec<f32> = (0..len).map(|i| rest.iter().fold(out[i], |s, p| s + p[i])).collect();
    let views: Vec<&mut [f32]> = rest.iter_mut().map(|p| p.as_mut_slice()).collect();
    add_slices(&mut out, &views);
    assert_eq!(out, want);
}
