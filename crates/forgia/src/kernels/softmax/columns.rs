//! Softmax over an axis with few blocks around it (`[outer, red, inner]` with `outer` below
//! the pool's thread count: the first axis of a matrix is `outer == 1`), split by columns
//! instead of by blocks: the per-line statistics in parallel over ranges of `COLUMNS` lines,
//! then every element in parallel over rows. Both take the block path's own helpers
//! (`general`), so the two give the same bits. As on the block path, softmax stores each
//! `exp(v - shift)` in `out` while it sums them (each range's task writes the pieces of the
//! rows in its columns, [`row_pieces`]), and the row pass only scales them.

use rayon::prelude::*;

use super::general::{grad_row, line_grad_sums, line_scales, line_shifts, scale_row, softmax_row};
use crate::kernels::simd;
use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};

/// Lines per statistics task: whole cache lines of every row.
const COLUMNS: usize = 64;

/// Statistics tasks (ranges of `COLUMNS` lines) per block of `inner` lines.
fn ranges(inner: usize) -> usize {
    inner.div_ceil(COLUMNS)
}

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
    let mut none = vec![(); stats.len() / inner * ranges(inner)];
    line_stats_with(
        stats,
        inner,
        &mut none,
        #[inline(always)]
        |o, c0, range, ()| stat(o, c0, range),
    );
}

/// [`line_stats`] with one `item` per range handed to its task (`items`: block by block,
/// [`ranges`] per block, in column order).
fn line_stats_with<P: Send>(
    stats: &mut [f32],
    inner: usize,
    items: &mut [P],
    stat: impl Fn(usize, usize, &mut [f32], &mut P) + Sync,
) {
    parallel::install(|| {
        stats.par_chunks_mut(inner).zip(items.par_chunks_mut(ranges(inner))).enumerate().for_each(
            |(o, (block, items))| {
                block.par_chunks_mut(COLUMNS).zip(items.par_iter_mut()).enumerate().for_each(|(t, (range, item))| {
                    simd::vectorized(
                        #[inline(always)]
                        || stat(o, t * COLUMNS, range, item),
                    )
                })
            },
        )
    });
}

/// `out`'s rows cut every `COLUMNS` columns and gathered by range: entry `o · per_block + t`
/// (`per_block`: [`ranges`] of `inner`) holds the pieces of block `o`'s rows in columns
/// `t · COLUMNS..`, top to bottom, so the statistics task of each range can write into its own
/// columns of every row.
fn row_pieces(out: &mut [f32], (outer, red, inner): (usize, usize, usize)) -> Vec<Vec<&mut [f32]>> {
    let per_block = ranges(inner);
    let mut pieces: Vec<Vec<&mut [f32]>> = (0..outer * per_block).map(|_| Vec::with_capacity(red)).collect();
    for (r, row) in out.chunks_exact_mut(inner).enumerate() {
        for (piece, list) in row.chunks_mut(COLUMNS).zip(&mut pieces[(r / red) * per_block..]) {
            list.push(piece);
        }
    }
    pieces
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
    let block = |o: usize| &x[o * red * inner..][..red * inner];
    let mut shift = vec![0.0f32; outer * inner];
    line_stats(
        &mut shift,
        inner,
        #[inline(always)]
        |o, c0, m| line_shifts(block(o), inner, c0, m),
    );
    let mut scale = vec![0.0f32; outer * inner];
    {
        // Softmax writes its `exp`s into `out` here; log-softmax has no use for them.
        let mut pieces = if log {
            (0..outer * ranges(inner)).map(|_| Vec::new()).collect()
        } else {
            row_pieces(out, (outer, red, inner))
        };
        line_stats_with(
            &mut scale,
            inner,
            &mut pieces,
            #[inline(always)]
            |o, c0, s, rows| {
                let exps = (!log).then(|| rows.iter_mut().map(|p| &mut **p));
                line_scales(block(o), inner, c0, &shift[o * inner + c0..][..s.len()], log, exps, s)
            },
        );
    }
    rows(
        out,
        inner,
        #[inline(always)]
        |r, d| {
            let line = (r / red) * inner..(r / red + 1) * inner;
            if log {
                softmax_row(&x[r * inner..][..inner], (&shift[line.clone()], &scale[line]), log, d);
            } else {
                scale_row(d, &scale[line]);
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
    let block = |o: usize| o * red * inner..(o + 1) * red * inner;
    let mut sums = vec![0.0f32; outer * inner];
    line_stats(
        &mut sums,
        inner,
        #[inline(always)]
        |o, c0, s| line_grad_sums((&y[block(o)], &gy[block(o)]), inner, c0, log, s),
    );
    rows(
        out,
        inner,
        #[inline(always)]
        |r, d| {
            let (row, line) = (r * inner..(r + 1) * inner, (r / red) * inner..(r / red + 1) * inner);
            grad_row((&y[row.clone()], &gy[row]), &sums[line], log, d);
        },
    );
}
