//! Softmax, log-softmax and their backward over the middle axis of a packed
//! `[outer, red, inner]` buffer, plus row log-sum-exp for the fused cross-entropy. Each
//! (outer, inner) line is shifted by its maximum first, so large logits never overflow.
//!
//! Results go into `out` buffers the caller allocated. The line statistics are the only memory
//! taken here: on the block path a few `Vec`s of `inner` floats per block in flight (so per
//! thread), each no larger than a block of `out`; on the column split (`columns`) two (the
//! backward one) `Vec`s of `outer · inner` floats, at most twice `out` (when `red` is 1) and
//! `2 / red` of it in general, plus for softmax a list of `out`'s row pieces (a 16-byte slice
//! per 64 floats: a sixteenth of `out`), so of the order of `out`, whose fallible allocation
//! the caller already made; short lines use stack buffers.

mod columns;
mod general;
mod short;

use rayon::prelude::*;

use self::general::{grad_row, line_grad_sums, line_scales, line_shifts, scale_row, softmax_row};
use super::lanes::{row_dot, row_max, row_sum_of};
use super::{fastmath, simd};

use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};

/// Runs `line(o, block)` over each `[red, inner]` block of `out`, in parallel when large. Blocks
/// are grouped into tasks of at least `CHUNK_ELEMENTS`, each run inside [`simd::vectorized`]
/// (so mark `line` `#[inline(always)]`): one entry per task, not one per line.
fn blocks(out: &mut [f32], block: usize, line: impl Fn(usize, &mut [f32]) + Sync) {
    if block == 0 {
        return;
    }
    let per = (CHUNK_ELEMENTS / block).max(1);
    let run = |first: usize, task: &mut [f32]| {
        simd::vectorized(
            #[inline(always)]
            || {
                for (j, b) in task.chunks_mut(block).enumerate() {
                    line(first + j, b);
                }
            },
        )
    };
    if out.len() >= PARALLEL_ELEMENTS && out.len() > block {
        parallel::install(|| out.par_chunks_mut(block * per).enumerate().for_each(|(t, c)| run(t * per, c)));
    } else {
        run(0, out);
    }
}

/// Softmax (or log-softmax when `log`) along the middle axis. The statistics of all `inner`
/// lines of a block are kept in vectors so every pass reads memory contiguously. `out` is
/// shaped like `x` (every element written). Few blocks, or short last-axis lines, are split
/// otherwise ([`Split`]), to the same bits.
pub(crate) fn softmax(x: &[f32], shape: (usize, usize, usize), log: bool, out: &mut [f32]) {
    debug_assert_eq!(out.len(), shape.0 * shape.1 * shape.2);
    match Split::of(shape) {
        Split::Columns => columns::softmax(x, shape, log, out),
        Split::ShortLines(red) => short_groups(
            out,
            red,
            #[inline(always)]
            |at, dst| short::softmax(&x[at], red, log, dst),
        ),
        Split::Blocks => softmax_by_blocks(x, shape, log, out),
    }
}

/// How [`softmax`] and [`softmax_backward`] split a `[outer, red, inner]` buffer.
enum Split {
    /// Fewer blocks than threads: by column ranges, then rows (`columns`).
    Columns,
    /// Last-axis lines of this length, up to `short::SHORT_LINE`: in groups (`short`).
    ShortLines(usize),
    /// Block by block ([`blocks`]).
    Blocks,
}

impl Split {
    fn of(shape: (usize, usize, usize)) -> Split {
        let (_, red, inner) = shape;
        if columns::splits(shape) {
            Split::Columns
        } else if inner == 1 && (1..=short::SHORT_LINE).contains(&red) {
            Split::ShortLines(red)
        } else {
            Split::Blocks
        }
    }
}

/// Runs `group(range, out group)` over groups of whole lines of `red` elements, as [`blocks`]
/// runs blocks (so mark `group` `#[inline(always)]`); `range` is the group's place in `out`.
fn short_groups(out: &mut [f32], red: usize, group: impl Fn(std::ops::Range<usize>, &mut [f32]) + Sync) {
    let len = short::group_lines(red) * red;
    blocks(
        out,
        len,
        #[inline(always)]
        |o, dst| group(o * len..o * len + dst.len(), dst),
    );
}

/// [`softmax`] split between threads by blocks.
fn softmax_by_blocks(x: &[f32], (_, red, inner): (usize, usize, usize), log: bool, out: &mut [f32]) {
    blocks(
        out,
        red * inner,
        #[inline(always)]
        |o, dst| {
            let src = &x[o * red * inner..(o + 1) * red * inner];
            if inner == 1 {
                softmax_line(src, log, dst);
                return;
            }
            let mut shift = vec![0.0f32; inner];
            line_shifts(src, inner, 0, &mut shift);
            // Softmax keeps its `exp`s in `dst` and only scales them below.
            let mut scale = vec![0.0f32; inner];
            line_scales(src, inner, 0, &shift, log, (!log).then(|| dst.chunks_exact_mut(inner)), &mut scale);
            if log {
                for (v, d) in src.chunks_exact(inner).zip(dst.chunks_exact_mut(inner)) {
                    softmax_row(v, (&shift, &scale), log, d);
                }
            } else {
                for d in dst.chunks_exact_mut(inner) {
                    scale_row(d, &scale);
                }
            }
        },
    );
}

/// One contiguous line of [`softmax`] (the last axis: `inner == 1`), with the maximum and the
/// sum taken in lanes. As on the general path (`general`), log-softmax is
/// `(x - max) - log Σ exp(x - max)`, and softmax stores `exp(x - max)` once and scales it by
/// the reciprocal of its sum (a line of -inf gives NaN, `0 · inf`).
#[inline(always)]
fn softmax_line(x: &[f32], log: bool, out: &mut [f32]) {
    let m = row_max(x);
    // A line of -inf (or +inf) shifts by 0 so it yields NaN/0 like the math says.
    let shift = if m.is_finite() { m } else { 0.0 };
    if log {
        for (d, &v) in out.iter_mut().zip(x) {
            *d = v - shift;
        }
        let ls = row_sum_of(out, fastmath::exp).ln();
        for d in out.iter_mut() {
            *d -= ls;
        }
    } else {
        for (d, &v) in out.iter_mut().zip(x) {
            *d = fastmath::exp(v - shift);
        }
        let inv = 1.0 / row_dot(out, None);
        for d in out.iter_mut() {
            *d *= inv;
        }
    }
}

/// The backward of [`softmax`] from its output `y`, into `out` shaped like `y`:
/// softmax `gx = y * (gy - Σ gy*y)`, log-softmax `gx = gy - exp(y) * Σ gy`. Split between
/// threads as [`softmax`] is.
pub(crate) fn softmax_backward((y, gy): (&[f32], &[f32]), shape: (usize, usize, usize), log: bool, out: &mut [f32]) {
    debug_assert_eq!(y.len(), shape.0 * shape.1 * shape.2);
    match Split::of(shape) {
        Split::Columns => columns::softmax_backward((y, gy), shape, log, out),
        Split::ShortLines(red) => short_groups(
            out,
            red,
            #[inline(always)]
            |at, dst| short::softmax_backward(&y[at.clone()], &gy[at], red, log, dst),
        ),
        Split::Blocks => softmax_backward_by_blocks((y, gy), shape, log, out),
    }
}

/// [`softmax_backward`] split between threads by blocks.
fn softmax_backward_by_blocks(
    (y, gy): (&[f32], &[f32]),
    (_, red, inner): (usize, usize, usize),
    log: bool,
    out: &mut [f32],
) {
    blocks(
        out,
        red * inner,
        #[inline(always)]
        |o, dst| {
            let base = o * red * inner;
            let (y, g) = (&y[base..base + red * inner], &gy[base..base + red * inner]);
            if inner == 1 {
                // The last axis: the line's sum in lanes.
                let s = row_dot(g, if log { None } else { Some(y) });
                for ((d, &yv), &gv) in dst.iter_mut().zip(y).zip(g) {
                    *d = grad(log, yv, gv, s);
                }
                return;
            }
            let mut sum = vec![0.0f32; inner];
            line_grad_sums((y, g), inner, 0, log, &mut sum);
            for ((d, yr), gr) in dst.chunks_exact_mut(inner).zip(y.chunks_exact(inner)).zip(g.chunks_exact(inner)) {
                grad_row((yr, gr), &sum, log, d);
            }
        },
    );
}

/// One element of [`softmax_backward`] from its line's sum `s`: softmax `y · (g - s)`,
/// log-softmax `g - exp(y) · s`.
#[inline(always)]
fn grad(log: bool, y: f32, g: f32, s: f32) -> f32 {
    grad_from_exp(log, y, if log { fastmath::exp(y) } else { 0.0 }, g, s)
}

/// [`grad`] with `exp(y)` already taken (`exp_y`, read only for log-softmax).
#[inline(always)]
fn grad_from_exp(log: bool, y: f32, exp_y: f32, g: f32, s: f32) -> f32 {
    if log {
        g - exp_y * s
    } else {
        y * (g - s)
    }
}

/// Log-sum-exp of each row of a packed `[rows, cols]` buffer into `out[r]`, as
/// `(max, log Σ_j exp(x[j] - max))` pairs (`lse = max + log_sum`), kept apart so that
/// `(x - max) - log_sum` stays exact for large logits (adding them back loses precision). A
/// row without a finite maximum gives `(max, 0)`.
pub(crate) fn row_logsumexp(x: &[f32], cols: usize, out: &mut [(f32, f32)]) {
    simd::vectorized(
        #[inline(always)]
        || {
            for (r, o) in out.iter_mut().enumerate() {
                let row = &x[r * cols..(r + 1) * cols];
                let m = row_max(row);
                *o = if m.is_finite() { (m, row_sum_of(row, |v| fastmath::exp(v - m)).ln()) } else { (m, 0.0) };
            }
        },
    )
}

/// Zeroes the softmax `out` of every line of `x` (packed `[outer, red, inner]`, as for
/// [`softmax`]) whose entries are all `-inf`: a line that may attend to nothing gives zeros,
/// not the NaN of `0/0`. Other lines are left as they are.
pub(crate) fn zero_blocked_lines(x: &[f32], (outer, red, inner): (usize, usize, usize), out: &mut [f32]) {
    if x.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    for o in 0..outer {
        for i in 0..inner {
            let at = |r: usize| o * red * inner + r * inner + i;
            if red > 0 && (0..red).all(|r| x[at(r)] == f32::NEG_INFINITY) {
                (0..red).for_each(|r| out[at(r)] = 0.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_is_shift_invariant_and_normalized() {
        let (mut y, mut z, mut l) = ([0.0; 3], [0.0; 3], [0.0; 2]);
        softmax(&[1000.0, 1001.0, 1002.0], (1, 3, 1), false, &mut y);
        assert!((y.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        softmax(&[0.0, 1.0, 2.0], (1, 3, 1), false, &mut z);
        for (a, b) in y.iter().zip(&z) {
            assert!((a - b).abs() < 1e-6);
        }
        softmax(&[0.0, 0.0], (1, 2, 1), true, &mut l);
        assert!((l[0] - (0.5f32).ln()).abs() < 1e-6);
    }

    /// Rows of every length up to 40 (whole lane chunks and tails), with the special values a
    /// line can hold: the fixed pattern of `i`, plus -inf, +inf, a NaN, or all -inf.
    fn rows() -> Vec<Vec<f32>> {
        let mut rows = vec![];
        for n in 1..41usize {
            let base: Vec<f32> = (0..n).map(|i| ((i * 37 + n) % 23) as f32 * 0.7 - 8.0).collect();
            rows.push(base.clone());
            let mut r = base.clone();
            r[n / 2] = f32::NEG_INFINITY;
            rows.push(r);
            let mut r = base.clone();
            r[n - 1] = f32::INFINITY;
            rows.push(r);
            let mut r = base;
            r[0] = f32::NAN;
            rows.push(r);
            rows.push(vec![f32::NEG_INFINITY; n]);
        }
        rows
    }

    /// `a` and `b` agree to `tol` relative, NaN with NaN and infinities exactly.
    fn close(a: &[f32], b: &[f32], tol: f32) -> bool {
        a.iter().zip(b).all(|(&a, &b)| (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs()))
    }

    #[test]
    fn the_last_axis_lines_agree_with_the_general_path_on_every_length_and_special_value() {
        for row in rows() {
            let n = row.len();
            // The same line as column 0 of an `[n, 2]` block: the general path (inner = 2).
            let wide: Vec<f32> = row.iter().flat_map(|&v| [v, 0.5]).collect();
            let gy: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect();
            let gy_wide: Vec<f32> = gy.iter().flat_map(|&v| [v, 1.0]).collect();
            for log in [false, true] {
                let (mut y, mut y_wide) = (vec![0.0; n], vec![0.0; 2 * n]);
                softmax(&row, (1, n, 1), log, &mut y);
                softmax(&wide, (1, n, 2), log, &mut y_wide);
                let col: Vec<f32> = y_wide.iter().step_by(2).copied().collect();
                assert!(close(&y, &col, 1e-6), "forward, log {log}, row {row:?}: {y:?} against {col:?}");
                let (mut g, mut g_wide) = (vec![0.0; n], vec![0.0; 2 * n]);
                softmax_backward((&y, &gy), (1, n, 1), log, &mut g);
                softmax_backward((&y_wide, &gy_wide), (1, n, 2), log, &mut g_wide);
                let col: Vec<f32> = g_wide.iter().step_by(2).copied().collect();
                assert!(close(&g, &col, 1e-5), "backward, log {log}, row {row:?}: {g:?} against {col:?}");
            }
        }
    }

    #[test]
    fn the_column_split_gives_the_block_paths_bits_forward_and_backward() {
        // One block and two (first and middle axes), ranges of 64 lines and a partial one,
        // lines of -inf, +inf and NaN.
        for shape in [(1, 300, 200), (2, 70, 130), (1, 3, 129)] {
            let (outer, red, inner) = shape;
            let n = outer * red * inner;
            let mut x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1013) as f32 * 0.05 - 25.0).collect();
            for r in 0..red {
                x[r * inner + 5] = f32::NEG_INFINITY;
                x[r * inner + 70] = if r % 3 == 0 { f32::NEG_INFINITY } else { x[r * inner + 70] };
            }
            x[inner + 9] = f32::INFINITY;
            x[2 * inner + 11] = f32::NAN;
            let g: Vec<f32> = (0..n).map(|i| ((i * 104_729) % 997) as f32 * 1e-3 - 0.5).collect();
            for log in [false, true] {
                let (mut want, mut got) = (vec![0.0; n], vec![0.0; n]);
                softmax_by_blocks(&x, shape, log, &mut want);
                columns::softmax(&x, shape, log, &mut got);
                assert_eq!(bits(&got), bits(&want), "{shape:?} log {log}");
                let (mut want_g, mut got_g) = (vec![0.0; n], vec![0.0; n]);
                softmax_backward_by_blocks((&want, &g), shape, log, &mut want_g);
                columns::softmax_backward((&want, &g), shape, log, &mut got_g);
                assert_eq!(bits(&got_g), bits(&want_g), "{shape:?} log {log}, backward");
            }
        }
    }

    #[test]
    fn grouped_short_lines_give_the_line_paths_bits_forward_and_backward() {
        // Every short length, groups that end in a partial one, lines of -inf, +inf and NaN.
        for red in 1..=short::SHORT_LINE {
            let lines = 2 * short::group_lines(red) + 3;
            let n = lines * red;
            let mut x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1013) as f32 * 0.05 - 25.0).collect();
            x[..red].fill(f32::NEG_INFINITY);
            x[red] = f32::INFINITY;
            x[n - 1] = f32::NAN;
            let g: Vec<f32> = (0..n).map(|i| ((i * 104_729) % 997) as f32 * 1e-3 - 0.5).collect();
            let shape = (lines, red, 1);
            for log in [false, true] {
                let (mut want, mut got) = (vec![0.0; n], vec![0.0; n]);
                softmax_by_blocks(&x, shape, log, &mut want);
                softmax(&x, shape, log, &mut got);
                assert_eq!(bits(&got), bits(&want), "red {red} log {log}");
                let (mut want_g, mut got_g) = (vec![0.0; n], vec![0.0; n]);
                softmax_backward_by_blocks((&want, &g), shape, log, &mut want_g);
                softmax_backward((&want, &g), shape, log, &mut got_g);
                assert_eq!(bits(&got_g), bits(&want_g), "red {red} log {log}, backward");
            }
        }
    }

    /// Bit patterns, so that NaN compares equal to itself.
    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn row_logsumexp_matches_f64_and_keeps_max_and_log_sum_apart() {
        let rows = rows();
        for row in &rows {
            let mut out = [(0.0, 0.0)];
            row_logsumexp(row, row.len(), &mut out);
            let (m, ls) = out[0];
            let m64 = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(m.to_bits(), m64.to_bits(), "max of {row:?}");
            if !m64.is_finite() {
                assert_eq!(ls, 0.0);
                continue;
            }
            let want = row.iter().map(|&v| (v as f64 - m64 as f64).exp()).sum::<f64>().ln() as f32;
            assert!(close(&[ls], &[want], 1e-6), "log-sum of {row:?}: {ls} against {want}");
        }
        // Several rows in one call, each its own line.
        let x: Vec<f32> = (0..3 * 17).map(|i| (i % 11) as f32 * 0.3).collect();
        let mut all = [(0.0, 0.0); 3];
        row_logsumexp(&x, 17, &mut all);
        for (r, &got) in all.iter().enumerate() {
            let mut one = [(0.0, 0.0)];
            row_logsumexp(&x[r * 17..(r + 1) * 17], 17, &mut one);
            assert_eq!(got, one[0]);
        }
    }
}
