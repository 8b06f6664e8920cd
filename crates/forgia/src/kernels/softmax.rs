//! Softmax, log-softmax and their backward over the middle axis of a packed
//! `[outer, red, inner]` buffer, plus row log-sum-exp for the fused cross-entropy. Each
//! (outer, inner) line is shifted by its maximum first, so large logits never overflow.
//!
//! Results go into `out` buffers the caller allocated. The per-block line statistics (a few
//! `Vec`s of `inner` floats, one set per block in flight, so per thread) are the only memory
//! taken here: each is no larger than a block of `out`, which the caller's fallible allocation
//! already proved affordable.

use super::fastmath;
use rayon::prelude::*;

use crate::parallel::{self, PARALLEL_ELEMENTS};

/// Runs `line(o, block)` over each `[red, inner]` block of `out`, in parallel when large.
fn blocks(out: &mut [f32], block: usize, line: impl Fn(usize, &mut [f32]) + Sync) {
    if block == 0 {
        return;
    }
    if out.len() >= PARALLEL_ELEMENTS && out.len() > block {
        parallel::install(|| out.par_chunks_mut(block).enumerate().for_each(|(o, b)| line(o, b)));
    } else {
        for (o, b) in out.chunks_mut(block).enumerate() {
            line(o, b);
        }
    }
}

/// The log-sum-exp of one line as `(max, log Σ_r exp(x[r] - max))`: kept apart, so that
/// `(x - max) - log_sum` stays exact for large logits (adding them back loses precision).
fn line_lse(x: &[f32], red: usize, inner: usize, i: usize) -> (f32, f32) {
    let m = (0..red).map(|r| x[r * inner + i]).fold(f32::NEG_INFINITY, f32::max);
    if !m.is_finite() {
        return (m, 0.0);
    }
    let s: f32 = (0..red).map(|r| fastmath::exp(x[r * inner + i] - m)).sum();
    (m, s.ln())
}

/// Softmax (or log-softmax when `log`) along the middle axis. The statistics of all `inner`
/// lines of a block are kept in vectors so every pass reads memory contiguously. `out` is
/// shaped like `x` (every element written).
pub(crate) fn softmax(x: &[f32], (outer, red, inner): (usize, usize, usize), log: bool, out: &mut [f32]) {
    debug_assert_eq!(out.len(), outer * red * inner);
    blocks(out, red * inner, |o, dst| {
        let src = &x[o * red * inner..(o + 1) * red * inner];
        let mut m = vec![f32::NEG_INFINITY; inner];
        for row in src.chunks_exact(inner) {
            for (m, &v) in m.iter_mut().zip(row) {
                *m = m.max(v);
            }
        }
        let mut s = vec![0.0f32; inner];
        for (row, d) in src.chunks_exact(inner).zip(dst.chunks_exact_mut(inner)) {
            for i in 0..inner {
                // A line of -inf (or +inf) shifts by 0 so it yields NaN/0 like the math says.
                let shift = if m[i].is_finite() { m[i] } else { 0.0 };
                d[i] = row[i] - shift;
                s[i] += fastmath::exp(d[i]);
            }
        }
        let ls: Vec<f32> = s.iter().map(|v| v.ln()).collect();
        for d in dst.chunks_exact_mut(inner) {
            for i in 0..inner {
                d[i] = if log { d[i] - ls[i] } else { fastmath::exp(d[i] - ls[i]) };
            }
        }
    });
}

/// The backward of [`softmax`] from its output `y`, into `out` shaped like `y`:
/// softmax `gx = y * (gy - Σ gy*y)`, log-softmax `gx = gy - exp(y) * Σ gy`.
pub(crate) fn softmax_backward(
    (y, gy): (&[f32], &[f32]),
    (outer, red, inner): (usize, usize, usize),
    log: bool,
    out: &mut [f32],
) {
    debug_assert_eq!(y.len(), outer * red * inner);
    blocks(out, red * inner, |o, dst| {
        let base = o * red * inner;
        let (y, g) = (&y[base..base + red * inner], &gy[base..base + red * inner]);
        let mut s = vec![0.0f32; inner];
        for (yr, gr) in y.chunks_exact(inner).zip(g.chunks_exact(inner)) {
            for i in 0..inner {
                s[i] += if log { gr[i] } else { gr[i] * yr[i] };
            }
        }
        for ((d, yr), gr) in dst.chunks_exact_mut(inner).zip(y.chunks_exact(inner)).zip(g.chunks_exact(inner)) {
            for i in 0..inner {
                d[i] = if log { gr[i] - fastmath::exp(yr[i]) * s[i] } else { yr[i] * (gr[i] - s[i]) };
            }
        }
    });
}

/// Log-sum-exp of each row of a packed `[rows, cols]` buffer into `out[r]`, as
/// `(max, log_sum)` pairs (`lse = max + log_sum`).
pub(crate) fn row_logsumexp(x: &[f32], cols: usize, out: &mut [(f32, f32)]) {
    for (r, o) in out.iter_mut().enumerate() {
        *o = line_lse(&x[r * cols..(r + 1) * cols], cols, 1, 0);
    }
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
}
