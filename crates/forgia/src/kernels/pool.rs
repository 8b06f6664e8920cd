//! 2-D pooling over planes `[P, H, W]` (`P = N·C`): max (with argmax indices for the
//! backward) and average (divisor kh·kw, padding counted). Parallel over planes when large.
//! Results go into zeroed buffers the caller allocated: `[P, OH, OW]` forward, `[P, H, W]`
//! backward.

use rayon::prelude::*;

mod max2x2;

use crate::parallel::{self, PARALLEL_ELEMENTS};

/// The window geometry of one pooling (checked by `ops/pool.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolGeom {
    /// Input height, width.
    pub(crate) h: usize,
    pub(crate) w: usize,
    /// Output height, width.
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    /// Kernel, stride, padding (height, width).
    pub(crate) k: (usize, usize),
    pub(crate) s: (usize, usize),
    pub(crate) p: (usize, usize),
}

impl PoolGeom {
    /// The clipped input rows and columns of output `(i, j)`'s window.
    #[inline]
    fn window(&self, i: usize, j: usize) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let r0 = (i * self.s.0) as isize - self.p.0 as isize;
        let c0 = (j * self.s.1) as isize - self.p.1 as isize;
        let clip = |a: isize, len: usize| a.clamp(0, len as isize) as usize;
        (clip(r0, self.h)..clip(r0 + self.k.0 as isize, self.h), clip(c0, self.w)..clip(c0 + self.k.1 as isize, self.w))
    }
}

/// Runs `f(plane index, plane_in, plane_out)` over planes, in parallel above the element
/// threshold.
fn planes(out: &mut [f32], out_len: usize, inp: &[f32], in_len: usize, f: impl Fn(usize, &[f32], &mut [f32]) + Sync) {
    if out.is_empty() || out_len == 0 {
        return;
    }
    if inp.len() + out.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            out.par_chunks_mut(out_len)
                .zip(inp.par_chunks(in_len.max(1)))
                .enumerate()
                .for_each(|(p, (o, i))| f(p, i, o))
        });
    } else {
        out.chunks_mut(out_len).zip(inp.chunks(in_len.max(1))).enumerate().for_each(|(p, (o, i))| f(p, i, o));
    }
}

/// Output columns `lo..hi` whose input column `j * stride + shift` lies inside `0..len`.
fn valid_cols(out_len: usize, stride: usize, shift: isize, len: usize) -> (usize, usize) {
    let s = stride as isize;
    let lo = if shift < 0 { ((-shift + s - 1) / s) as usize } else { 0 };
    let hi = (((len as isize - shift + s - 1) / s).max(0) as usize).min(out_len);
    (lo.min(hi), hi)
}

/// The max and in-plane argmax of each window of one plane (first maximum on ties; NaN
/// wins). Tap by tap over a whole output row, so neighbouring windows are independent chains.
#[inline(always)]
fn max_plane(g: &PoolGeom, xp: &[f32], y: &mut [f32], arg: &mut [u32]) {
    for i in 0..g.oh {
        let (yr, ar) = (&mut y[i * g.ow..(i + 1) * g.ow], &mut arg[i * g.ow..(i + 1) * g.ow]);
        for j in 0..g.ow {
            let (rows, cols) = g.window(i, j);
            yr[j] = f32::NEG_INFINITY;
            ar[j] = (rows.start * g.w + cols.start) as u32;
        }
        for ki in 0..g.k.0 {
            let r = (i * g.s.0 + ki) as isize - g.p.0 as isize;
            if r < 0 || r >= g.h as isize {
                continue;
            }
            let row = &xp[r as usize * g.w..(r as usize + 1) * g.w];
            for kj in 0..g.k.1 {
                let shift = kj as isize - g.p.1 as isize;
                let (lo, hi) = valid_cols(g.ow, g.s.1, shift, g.w);
                if g.s.1 == 2 && hi > lo {
                    let c0 = (lo as isize * 2 + shift) as usize;
                    tap_stride2(row, c0, (r as usize * g.w + c0) as u32, &mut yr[lo..hi], &mut ar[lo..hi]);
                    continue;
                }
                for j in lo..hi {
                    let c = (j as isize * g.s.1 as isize + shift) as usize;
                    let v = row[c];
                    // A select, not a branch: on random data a branch mispredicts often.
                    let take = v > yr[j] || v.is_nan();
                    yr[j] = if take { v } else { yr[j] };
                    ar[j] = if take { (r as usize * g.w + c) as u32 } else { ar[j] };
                }
            }
        }
    }
}

/// One tap of a window with column stride 2 over a row of windows: `row[c0 + 2·i]` (at
/// in-plane index `at + 2·i`) into window `i`'s running maximum `y[i]` and its index `arg[i]`,
/// by [`max_plane`]'s rule. The constant stride lets the compiler load whole vectors and
/// de-interleave them (a variable stride reads one float at a time; `benches/conv.rs`,
/// `resnet_max_pool_k3s2p1_fwd_bwd_b8_64x112`).
#[inline(always)]
fn tap_stride2(row: &[f32], c0: usize, at: u32, y: &mut [f32], arg: &mut [u32]) {
    let n = y.len();
    let (body, last) = (row[c0..c0 + 2 * (n - 1)].chunks_exact(2), row[c0 + 2 * (n - 1)]);
    let take = |v: f32, y: &mut f32, a: &mut u32, at: u32| {
        let t = v > *y || v.is_nan();
        *y = if t { v } else { *y };
        *a = if t { at } else { *a };
    };
    for (i, ((y, a), pair)) in y.iter_mut().zip(arg.iter_mut()).zip(body).enumerate() {
        take(pair[0], y, a, at + 2 * i as u32);
    }
    take(last, &mut y[n - 1], &mut arg[n - 1], at + 2 * (n - 1) as u32);
}

/// [`max_plane`] for the usual 2x2 window with stride 2 and no padding (every window inside
/// the plane): the same four taps in the same order with the same rule, a row of windows at
/// a time in SIMD registers (`pool/max2x2.rs`).
fn max_plane_2x2(tier: max2x2::Tier, g: &PoolGeom, xp: &[f32], y: &mut [f32], arg: &mut [u32]) {
    let w = g.w;
    for i in 0..g.oh {
        let (r0, r1) = (&xp[2 * i * w..(2 * i + 1) * w], &xp[(2 * i + 1) * w..(2 * i + 2) * w]);
        let (yr, ar) = (&mut y[i * g.ow..(i + 1) * g.ow], &mut arg[i * g.ow..(i + 1) * g.ow]);
        max2x2::row(tier, r0, r1, (2 * i * w) as u32, yr, ar);
    }
}

/// Max over each window into `y`, and the in-plane index of each maximum into `arg` (both
/// `[count, OH, OW]`, zeroed by the caller; left zero for empty planes).
pub(crate) fn max_forward(g: &PoolGeom, x: &[f32], y: &mut [f32], arg: &mut [u32]) {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    if ohw == 0 || hw == 0 {
        return;
    }
    let tier = max2x2::Tier::detect();
    let fast = is_2x2(g);
    let plane = |g: &PoolGeom, xp: &[f32], y: &mut [f32], a: &mut [u32]| {
        if fast {
            max_plane_2x2(tier, g, xp, y, a)
        } else {
            super::simd::vectorized(
                #[inline(always)]
                || max_plane(g, xp, y, a),
            )
        }
    };
    if x.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            y.par_chunks_mut(ohw)
                .zip(arg.par_chunks_mut(ohw))
                .zip(x.par_chunks(hw))
                .for_each(|((y, a), xp)| plane(g, xp, y, a))
        });
    } else {
        for ((y, a), xp) in y.chunks_mut(ohw).zip(arg.chunks_mut(ohw)).zip(x.chunks(hw)) {
            plane(g, xp, y, a);
        }
    }
}

/// True for the 2x2, stride-2, unpadded window, whose kernels have their own fast paths.
fn is_2x2(g: &PoolGeom) -> bool {
    g.k == (2, 2) && g.s == (2, 2) && g.p == (0, 0)
}

/// True when [`max_backward`] writes every element of `gx` (the 2x2 window: windows do not
/// overlap, so each input element gets its one gradient or zero), so `gx` need not be zeroed.
pub(crate) fn max_backward_overwrites(g: &PoolGeom) -> bool {
    is_2x2(g)
}

/// Routes each output gradient to its window's maximum, adding into `gx`, which is zeroed by
/// the caller unless [`max_backward_overwrites`] (then every element is written). `arg` comes
/// from [`max_forward`] of the same geometry.
pub(crate) fn max_backward(g: &PoolGeom, gy: &[f32], arg: &[u32], gx: &mut [f32]) {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    if is_2x2(g) {
        let tier = max2x2::Tier::detect();
        return planes(gx, hw, gy, ohw, |p, gp, out| {
            let arg = &arg[p * ohw..(p + 1) * ohw];
            let (w, rows) = (g.w, 2 * g.oh * g.w);
            for (i, pair) in out[..rows].chunks_exact_mut(2 * w).enumerate() {
                let (g0, g1) = pair.split_at_mut(w);
                let (gr, ar) = (&gp[i * g.ow..(i + 1) * g.ow], &arg[i * g.ow..(i + 1) * g.ow]);
                max2x2::backward_row(tier, gr, ar, (2 * i * w) as u32, g0, g1);
            }
            out[rows..].fill(0.0); // an odd last row, outside every window
        });
    }
    planes(gx, hw, gy, ohw, |p, gp, out| {
        for (&g, &a) in gp.iter().zip(&arg[p * ohw..(p + 1) * ohw]) {
            out[a as usize] += g;
        }
    });
}

/// Reads each output's saved window maximum back out of an input-shaped `x` into `y`
/// (`y[p, o] = x[p, arg[p, o]]`): the adjoint of [`max_backward`], the gradient of max
/// pooling's gradient.
pub(crate) fn max_gather(g: &PoolGeom, x: &[f32], arg: &[u32], y: &mut [f32]) {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    planes(y, ohw, x, hw, |p, xp, out| {
        for (o, &a) in out.iter_mut().zip(&arg[p * ohw..(p + 1) * ohw]) {
            *o = xp[a as usize];
        }
    });
}

/// Window sums divided by `kh·kw` (padding counts as zeros), into `y`.
pub(crate) fn avg_forward(g: &PoolGeom, x: &[f32], y: &mut [f32]) {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    let inv = 1.0 / (g.k.0 * g.k.1) as f32;
    planes(y, ohw, x, hw, |_, xp, out| {
        for i in 0..g.oh {
            for j in 0..g.ow {
                let (rows, cols) = g.window(i, j);
                let s: f32 = rows.map(|r| xp[r * g.w + cols.start..r * g.w + cols.end].iter().sum::<f32>()).sum();
                out[i * g.ow + j] = s * inv;
            }
        }
    });
}

/// Spreads each output gradient evenly (`/ kh·kw`) over its window, adding into the zeroed `gx`.
pub(crate) fn avg_backward(g: &PoolGeom, gy: &[f32], gx: &mut [f32]) {
    let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
    let inv = 1.0 / (g.k.0 * g.k.1) as f32;
    planes(gx, hw, gy, ohw, |_, gp, out| {
        for i in 0..g.oh {
            for j in 0..g.ow {
                let v = gp[i * g.ow + j] * inv;
                let (rows, cols) = g.window(i, j);
                for r in rows {
                    for e in &mut out[r * g.w + cols.start..r * g.w + cols.end] {
                        *e += v;
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2x2_fast_path_matches_the_general_window_loop_on_ties_nans_and_odd_sizes() {
        for (h, w) in [(4, 4), (5, 7), (2, 3), (9, 2)] {
            let g = PoolGeom { h, w, oh: h / 2, ow: w / 2, k: (2, 2), s: (2, 2), p: (0, 0) };
            // Few distinct values (many ties), a NaN, and -inf everywhere in one window.
            let mut x: Vec<f32> = (0..h * w).map(|i| ((i * 7) % 3) as f32).collect();
            x[w + 1] = f32::NAN;
            if h >= 4 && w >= 4 {
                for i in [2 * w + 2, 2 * w + 3, 3 * w + 2, 3 * w + 3] {
                    x[i] = f32::NEG_INFINITY;
                }
            }
            let n = g.oh * g.ow;
            let (mut y1, mut a1, mut y2, mut a2) = (vec![0.0; n], vec![0; n], vec![0.0; n], vec![0; n]);
            max_plane(&g, &x, &mut y1, &mut a1);
            max_plane_2x2(max2x2::Tier::detect(), &g, &x, &mut y2, &mut a2);
            assert_eq!(a1, a2, "{h}x{w}");
            assert_eq!(format!("{y1:?}"), format!("{y2:?}"), "{h}x{w}");
        }
    }

    #[test]
    fn windows_with_column_stride_2_match_the_definition_on_ties_nans_and_edges() {
        // ResNet's 3x3 stride-2 pool with padding 1 (even and odd widths), an unpadded one, and
        // a 2x4 window with row stride 1.
        let geoms = [
            (9, 12, (3, 3), (2, 2), (1, 1)),
            (8, 11, (3, 3), (2, 2), (1, 1)),
            (7, 9, (3, 3), (2, 2), (0, 0)),
            (5, 10, (2, 4), (1, 2), (1, 2)),
        ];
        for (h, w, k, s, p) in geoms {
            let out = |len: usize, k: usize, s: usize, p: usize| (len + 2 * p - k) / s + 1;
            let g = PoolGeom { h, w, oh: out(h, k.0, s.0, p.0), ow: out(w, k.1, s.1, p.1), k, s, p };
            let mut x: Vec<f32> = (0..h * w).map(|i| ((i * 7) % 4) as f32).collect();
            x[w + 3] = f32::NAN;
            x[2 * w + 5] = f32::NEG_INFINITY;
            let n = g.oh * g.ow;
            let (mut y, mut arg) = (vec![0.0; n], vec![0; n]);
            max_plane(&g, &x, &mut y, &mut arg);
            for i in 0..g.oh {
                for j in 0..g.ow {
                    let (rows, cols) = g.window(i, j);
                    let (mut m, mut at) = (f32::NEG_INFINITY, rows.start * w + cols.start);
                    for r in rows {
                        for c in cols.clone() {
                            let v = x[r * w + c];
                            if v > m || v.is_nan() {
                                (m, at) = (v, r * w + c);
                            }
                        }
                    }
                    let o = i * g.ow + j;
                    assert_eq!(
                        (format!("{:?}", y[o]), arg[o] as usize),
                        (format!("{m:?}"), at),
                        "{h}x{w} {k:?} {s:?}: ({i}, {j})"
                    );
                }
            }
        }
    }

    #[test]
    fn the_2x2_backward_overwrites_stale_values_with_the_scatter_into_zeros_on_odd_planes() {
        for (h, w) in [(4, 4), (5, 7), (2, 3), (9, 2), (28, 28), (15, 37)] {
            let g = PoolGeom { h, w, oh: h / 2, ow: w / 2, k: (2, 2), s: (2, 2), p: (0, 0) };
            assert!(max_backward_overwrites(&g));
            let planes = 3;
            let x: Vec<f32> = (0..planes * h * w).map(|i| ((i * 7919) % 13) as f32).collect();
            let n = planes * g.oh * g.ow;
            let (mut y, mut arg) = (vec![0.0; n], vec![0; n]);
            max_forward(&g, &x, &mut y, &mut arg);
            let gy: Vec<f32> = (0..n).map(|i| if i % 3 == 0 { -0.0 } else { i as f32 * 0.5 - 3.0 }).collect();
            let mut want = vec![0.0f32; planes * h * w];
            for (o, (&gv, &a)) in gy.iter().zip(&arg).enumerate() {
                want[o / (g.oh * g.ow) * h * w + a as usize] += gv;
            }
            let mut gx = vec![f32::NAN; planes * h * w];
            max_backward(&g, &gy, &arg, &mut gx);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&gx), bits(&want), "{h}x{w}");
        }
    }
}
