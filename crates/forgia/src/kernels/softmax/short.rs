//! Softmax over short last-axis lines (at most [`SHORT_LINE`] elements): a line at a time,
//! the `exp`s of a line are too few to fill a vector, and a `[262144, 4]` softmax spent most
//! of its time in scalar `exp`. Here lines go in groups of up to [`GROUP`] elements: each
//! line's shift as before, then one vectorized `exp` pass over the whole group, then each
//! line's sum and scale. Every line takes the operations of `super::softmax_line` (and of the
//! backward's last-axis lines) in the same order, so the two paths give the same bits.

use super::grad_from_exp;
use crate::kernels::fastmath;
use crate::kernels::lanes::{row_dot, row_max};

/// The longest line taken here; longer lines fill vectors on their own.
pub(super) const SHORT_LINE: usize = 16;

/// Elements per group: the `exp` buffer on the stack.
const GROUP: usize = 256;

/// Lines per group for lines of `red` elements (`1 ≤ red ≤ GROUP`).
pub(super) fn group_lines(red: usize) -> usize {
    GROUP / red
}

/// Softmax (log-softmax when `log`) of each line of `red` elements of `x` (whole lines, at
/// most [`GROUP`] elements) into `out`.
#[inline(always)]
pub(super) fn softmax(x: &[f32], red: usize, log: bool, out: &mut [f32]) {
    for (xl, dl) in x.chunks_exact(red).zip(out.chunks_exact_mut(red)) {
        let m = row_max(xl);
        // A line of -inf (or +inf) shifts by 0 so it yields NaN/0 like the math says.
        let shift = if m.is_finite() { m } else { 0.0 };
        for (d, &v) in dl.iter_mut().zip(xl) {
            *d = v - shift;
        }
    }
    let mut buf = [0.0f32; GROUP];
    let e = &mut buf[..out.len()];
    for (e, &d) in e.iter_mut().zip(out.iter()) {
        *e = fastmath::exp(d);
    }
    // The lines' sums, then (softmax) their reciprocals in one vectorized pass: a division a
    // line left each line waiting on its latency.
    let mut sums = [0.0f32; GROUP];
    let sums = &mut sums[..out.len() / red];
    for (s, el) in sums.iter_mut().zip(e.chunks_exact(red)) {
        *s = row_dot(el, None);
    }
    if log {
        for (dl, &s) in out.chunks_exact_mut(red).zip(sums.iter()) {
            let ls = s.ln();
            for d in dl.iter_mut() {
                *d -= ls;
            }
        }
    } else {
        for s in sums.iter_mut() {
            *s = 1.0 / *s;
        }
        for ((dl, el), &inv) in out.chunks_exact_mut(red).zip(e.chunks_exact(red)).zip(sums.iter()) {
            for (d, &e) in dl.iter_mut().zip(el) {
                *d = e * inv;
            }
        }
    }
}

/// The backward of [`softmax`] from its output `y` and the gradient `g`, into `out`: for
/// log-softmax the `exp(y)` of the whole group first.
#[inline(always)]
pub(super) fn softmax_backward(y: &[f32], g: &[f32], red: usize, log: bool, out: &mut [f32]) {
    if log {
        for (d, &yv) in out.iter_mut().zip(y) {
            *d = fastmath::exp(yv);
        }
    }
    for ((dl, yl), gl) in out.chunks_exact_mut(red).zip(y.chunks_exact(red)).zip(g.chunks_exact(red)) {
        let s = row_dot(gl, if log { None } else { Some(yl) });
        for ((d, &yv), &gv) in dl.iter_mut().zip(yl).zip(gl) {
            *d = grad_from_exp(log, yv, *d, gv, s);
        }
    }
}
