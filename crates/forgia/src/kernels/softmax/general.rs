//! The general lines of a softmax (`inner > 1`: each line a column of a `[red, inner]` block):
//! their statistics and elements, shared by the block path and the column split (`columns`).
//! Both run these same operations in the same order, so their bits agree by construction. Each
//! statistics helper takes the block's columns `c0..c0 + len` (its output's length); the row
//! helpers take one row's columns. Zipped slices, not indices: the loops vectorize only
//! without bounds checks.

use super::grad;
use crate::kernels::fastmath;

/// The shift of each line: its maximum, or 0 when that is not finite (a line of -inf, or
/// with a +inf, then yields NaN/0 like the math says).
#[inline(always)]
pub(super) fn line_shifts(block: &[f32], inner: usize, c0: usize, shift: &mut [f32]) {
    shift.fill(f32::NEG_INFINITY);
    for row in block.chunks_exact(inner) {
        for (m, &v) in shift.iter_mut().zip(&row[c0..]) {
            *m = m.max(v);
        }
    }
    for m in shift.iter_mut() {
        *m = if m.is_finite() { *m } else { 0.0 };
    }
}

/// The scale of each line from `Σ exp(v - shift)`: its log for log-softmax, its reciprocal
/// for softmax (a line of -inf sums to 0 and scales by inf, so its `0 · inf` gives NaN like
/// the math says). With `exps` (softmax: one destination per row of the block, holding its
/// columns `c0..c0 + len`) each `exp(v - shift)` is also stored there, so [`scale_row`]
/// finishes it with one product and no second `exp`; the sums are the same either way.
#[inline(always)]
pub(super) fn line_scales<'e>(
    block: &[f32],
    inner: usize,
    c0: usize,
    shift: &[f32],
    log: bool,
    exps: Option<impl Iterator<Item = &'e mut [f32]>>,
    scale: &mut [f32],
) {
    scale.fill(0.0);
    match exps {
        Some(exps) => {
            for (row, e) in block.chunks_exact(inner).zip(exps) {
                for (((e, &v), &m), s) in e.iter_mut().zip(&row[c0..]).zip(shift).zip(scale.iter_mut()) {
                    *e = fastmath::exp(v - m);
                    *s += *e;
                }
            }
        }
        None => {
            for row in block.chunks_exact(inner) {
                for ((s, &v), &m) in scale.iter_mut().zip(&row[c0..]).zip(shift) {
                    *s += fastmath::exp(v - m);
                }
            }
        }
    }
    for s in scale.iter_mut() {
        *s = if log { s.ln() } else { 1.0 / *s };
    }
}

/// One row of a block's softmax from its lines' `(shift, scale)` ([`line_scales`]):
/// `(v - shift) - log_sum` for log-softmax, `exp(v - shift) · (1 / sum)` for softmax.
#[inline(always)]
pub(super) fn softmax_row(v: &[f32], (shift, scale): (&[f32], &[f32]), log: bool, out: &mut [f32]) {
    if log {
        for (((d, &v), &m), &l) in out.iter_mut().zip(v).zip(shift).zip(scale) {
            *d = (v - m) - l;
        }
    } else {
        for (((d, &v), &m), &inv) in out.iter_mut().zip(v).zip(shift).zip(scale) {
            *d = fastmath::exp(v - m) * inv;
        }
    }
}

/// [`softmax_row`] (softmax) of a row whose `exp(v - shift)` [`line_scales`] stored in `out`.
#[inline(always)]
pub(super) fn scale_row(out: &mut [f32], scale: &[f32]) {
    for (d, &inv) in out.iter_mut().zip(scale) {
        *d *= inv;
    }
}

/// The backward's sum of each line: `Σ g` for log-softmax, `Σ g·y` for softmax.
#[inline(always)]
pub(super) fn line_grad_sums((y, g): (&[f32], &[f32]), inner: usize, c0: usize, log: bool, sum: &mut [f32]) {
    sum.fill(0.0);
    for (yr, gr) in y.chunks_exact(inner).zip(g.chunks_exact(inner)) {
        for ((s, &yv), &gv) in sum.iter_mut().zip(&yr[c0..]).zip(&gr[c0..]) {
            *s += if log { gv } else { gv * yv };
        }
    }
}

/// One row of a block's gradient from its lines' sums ([`grad`] of each element).
#[inline(always)]
pub(super) fn grad_row((y, g): (&[f32], &[f32]), sum: &[f32], log: bool, out: &mut [f32]) {
    for (((d, &yv), &gv), &s) in out.iter_mut().zip(y).zip(g).zip(sum) {
        *d = grad(log, yv, gv, s);
    }
}
