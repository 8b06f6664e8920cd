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

/// `log Σ exp(v - shift)` of each line.
#[inline(always)]
pub(super) fn line_log_sums(block: &[f32], inner: usize, c0: usize, shift: &[f32], log_sum: &mut [f32]) {
    log_sum.fill(0.0);
    for row in block.chunks_exact(inner) {
        for ((s, &v), &m) in log_sum.iter_mut().zip(&row[c0..]).zip(shift) {
            *s += fastmath::exp(v - m);
        }
    }
    for s in log_sum.iter_mut() {
        *s = s.ln();
    }
}

/// One row of a block's softmax from its lines' `(shift, log_sum)`: `(v - shift) - log_sum`,
/// and its `exp` unless `log`.
#[inline(always)]
pub(super) fn softmax_row(v: &[f32], (shift, log_sum): (&[f32], &[f32]), log: bool, out: &mut [f32]) {
    if log {
        for (((d, &v), &m), &l) in out.iter_mut().zip(v).zip(shift).zip(log_sum) {
            *d = (v - m) - l;
        }
    } else {
        for (((d, &v), &m), &l) in out.iter_mut().zip(v).zip(shift).zip(log_sum) {
            *d = fastmath::exp((v - m) - l);
        }
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
