//! Softmax over an axis with few blocks around it (`[outer, red, inner]` with `outer` below
//! the pool's thread count: the first axis of a matrix is `outer == 1`), split by columns
//! instead of by blocks: the per-line statistics in parallel over ranges of `COLUMNS` lines,
//! then every element in parallel over rows. Each line's statistics take the same operations
//! in the same order as on the block path (`super::softmax`'s general lines), so the two give
//! the same bits.

use rayon::prelude::*;

use super::grad;
use crate::kernels::{fastmath, simd};
use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};

/// Lines per statistics task: whole cache lines of every row.
const COLUMNS: usize = 64;

/// Whether `[outer, red, inner]` takes the column split: fewer blocks than threads, enough
/// work to share, and at least two ranges of lines.
pub(super) fn splits((outer, red, inner): (usize, usize, usize)) -> bool {
    inner >= 2 * COLUMNS
        && outer.saturating_mul(red).saturating_mul(inner) >= PARALLEL_ELEMENTS
        && outer < parallel::kernel_threads()
}

/// Runs `stat(block, first column, stats of that range)` over every block and range of
/// `COLUMNS` lines in parallel, on `stats` (`outer` blocks of `inner` line statistics), inside
/// [`simd::vectorized`] (so mark `stat` `#[inline(always)]`).
fn line_stats(stats: &mut [f32], inner: usize, stat: impl Fn(usize, usize, &mut [f32]) + Sync) {
    parallel::install(|| {
        stats.par_chunks_mut(inner).enumerate().for_each(|(o, block)| {
            block.par_chunks_mut(COLUMNS).enumerate().for_each(|(t, range)| {
                simd::vectorized(
                    #[inline(always)]
                    || stat(o, t * COLUMNS, range),
                )
            })
        })
    });
}

/// Runs `row(row index, out row)` over every row of `inner` elements of `out` in parallel,
/// tasks of at least `CHUNK_ELEMENTS`, inside [`simd::vectorized`].
fn rows(out: &mut [f32], inner: usize, row: impl Fn(usize, &mut [f32]) + Sync) {
    let per = (CHUNK_ELEMENTS / inner).max(1);
    parallel::install(|| {
        out.par_chunks_mut(per * inner).enumerate().for_each(|(t, task)| {
            simd::vectorized(
                #[inline(always)]
                || {
                    for (j, d) in task.chunks_exact_mut(inner).enumerate() {
                        row(t * per + j, d);
                    }
                },
            )
        })
    });
}

/// [`super::softmax`] split by columns (see [`splits`]).
pub(super) fn softmax(x: &[f32], (outer, red, inner): (usize, usize, usize), log: bool, out: &mut [f32]) {
    let mut shift = vec![f32::NEG_INFINITY; outer * inner];
    line_stats(
        &mut shift,
        inner,
        #[inline(always)]
        |o, c0, m| {
            for r in 0..red {
                for (m, &v) in m.iter_mut().zip(&x[(o * red + r) * inner + c0..]) {
                    *m = m.max(v);
                }
            }
            for m in m.iter_mut() {
                // A line of -inf (or +inf) shifts by 0 so it yields NaN/0 like the math says.
                *m = if m.is_finite() { *m } else { 0.0 };
            }
        },
    );
    let mut log_sum = vec![0.0f32; outer * inner];
    line_stats(
        &mut log_sum,
        inner,
        #[inline(always)]
        |o, c0, s| {
            let m = &shift[o * inner + c0..][..s.len()];
            for r in 0..red {
                for ((s, &v), &m) in s.iter_mut().zip(&x[(o * red + r) * inner + c0..]).zip(m) {
                    *s += fastmath::exp(v - m);
                }
            }
            for s in s.iter_mut() {
                *s = s.ln();
            }
        },
    );
    rows(
        out,
        inner,
        #[inline(always)]
        |r, d| {
            let o = r / red;
            let (m, l) = (&shift[o * inner..][..inner], &log_sum[o * inner..][..inner]);
            let v = &x[r * inner..][..inner];
            if log {
                for (((d, &v), &m), &l) in d.iter_mut().zip(v).zip(m).zip(l) {
                    *d = (v - m) - l;
                }
            } else {
                for (((d, &v), &m), &l) in d.iter_mut().zip(v).zip(m).zip(l) {
                    *d = fastmath::exp((v - m) - l);
                }
            }
        },
    );
}

/// [`super::softmax_backward`] split by columns (see [`splits`]).
pub(super) fn softmax_backward(
    (y, gy): (&[f32], &[f32]),
    (outer, red, inner): (usize, usize, usize),
    log: bool,
    out: &mut [f32],
) {
    let mut sums = vec![0.0f32; outer * inner];
    line_stats(
        &mut sums,
        inner,
        #[inline(always)]
        |o, c0, s| {
            for r in 0..red {
                let at = (o * red + r) * inner + c0;
                for ((s, &yv), &gv) in s.iter_mut().zip(&y[at..]).zip(&gy[at..]) {
                    *s += if log { gv } else { gv * yv };
                }
            }
        },
    );
    rows(
        out,
        inner,
        #[inline(always)]
        |r, d| {
            let s = &sums[(r / red) * inner..][..inner];
            let (yr, gr) = (&y[r * inner..][..inner], &gy[r * inner..][..inner]);
            for (((d, &yv), &gv), &s) in d.iter_mut().zip(yr).zip(gr).zip(s) {
                *d = grad(log, yv, gv, s);
            }
        },
    );
}
