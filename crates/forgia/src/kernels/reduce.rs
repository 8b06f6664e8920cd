//! Reductions over the middle axis of a packed `[outer, red, inner]` view. `ops/` permutes
//! any set of axes into that form first. Results go into buffers the caller allocated: `out`
//! is `[outer, inner]` for a reduction, `[outer, red, inner]` for a scan.

use super::fastmath;
use super::simd::vectorized;
use rayon::prelude::*;

use crate::parallel::{self, PARALLEL_ELEMENTS};

/// Elements per row block of [`sum`]'s blocked path (a block's rows are read straight
/// through, as whole pages).
const SUM_BLOCK_ELEMENTS: usize = 1 << 17;
/// Row widths from which [`sum`] splits a single block's columns across the pool instead:
/// each row's share is then long enough to read as whole pages.
const SUM_WIDE_INNER: usize = 1 << 14;

/// True when [`sum`] takes its blocked path: one outer block of short rows, large enough to
/// share out (a bias gradient: the column sums of a `[rows, features]` gradient).
fn sum_blocked(outer: usize, red: usize, inner: usize) -> bool {
    outer == 1 && inner > 1 && inner < SUM_WIDE_INNER && red.saturating_mul(inner) >= PARALLEL_ELEMENTS
}

/// Rows per block of the blocked path.
fn sum_block_rows(inner: usize) -> usize {
    (SUM_BLOCK_ELEMENTS / inner).max(1)
}

/// The scratch floats [`sum`] needs for this shape (0 unless it takes its blocked path, then
/// one row of partial sums per block of at least eight rows, so under a fifth of `x`).
pub(crate) fn sum_scratch(outer: usize, red: usize, inner: usize) -> usize {
    if sum_blocked(outer, red, inner) {
        red.div_ceil(sum_block_rows(inner)) * inner
    } else {
        0
    }
}

/// `out[o, i] = Σ_r x[o, r, i]`, accumulated into `out`, which the caller zeroed; `scratch`
/// holds at least [`sum_scratch`] floats.
///
/// Column sums of one large block (`outer == 1`, rows shorter than [`SUM_WIDE_INNER`]) go by
/// fixed blocks of rows: each block's sums into its own row of `scratch`, the blocks spread
/// over the pool, then added into `out` in block order. Walking down columns instead touches a
/// new page every row, which ran 3.5× slower on W7's `[4096, 1024]` bias gradient. The blocks
/// do not depend on the pool's size, so neither do the bits.
pub(crate) fn sum(x: &[f32], outer: usize, red: usize, inner: usize, scratch: &mut [f32], out: &mut [f32]) {
    if sum_blocked(outer, red, inner) {
        let rows = sum_block_rows(inner);
        let partials = &mut scratch[..red.div_ceil(rows) * inner];
        parallel::install(|| {
            partials.par_chunks_mut(inner).zip(x.par_chunks(rows * inner)).for_each(|(p, block)| {
                p.fill(0.0);
                add_rows(block, p);
            })
        });
        add_rows(partials, out);
        return;
    }
    let block = |o: usize, dst: &mut [f32]| {
        let base = &x[o * red * inner..(o + 1) * red * inner];
        if inner == 1 {
            // Row sum: four independent accumulators let the compiler vectorize.
            let mut acc = [0.0f32; 8];
            let chunks = base.chunks_exact(8);
            let rest = chunks.remainder();
            for c in chunks {
                for k in 0..8 {
                    acc[k] += c[k];
                }
            }
            dst[0] = acc.iter().sum::<f32>() + rest.iter().sum::<f32>();
        } else {
            add_rows(base, dst);
        }
    };
    if x.len() >= PARALLEL_ELEMENTS && outer > 1 {
        parallel::install(|| out.par_chunks_mut(inner.max(1)).enumerate().for_each(|(o, d)| block(o, d)));
    } else if x.len() >= PARALLEL_ELEMENTS && inner >= SUM_WIDE_INNER {
        // One outer block of long rows: split the columns.
        let cols = SUM_WIDE_INNER / 4;
        parallel::install(|| {
            out.par_chunks_mut(cols).enumerate().for_each(|(c, d)| {
                for r in 0..red {
                    let at = r * inner + c * cols;
                    add_rows(&x[at..at + d.len()], d);
                }
            })
        });
    } else {
        for (o, d) in out.chunks_mut(inner.max(1)).enumerate().take(outer) {
            block(o, d);
        }
    }
}

/// `dst[i] += Σ_r rows[r * w + i]` over the rows of `rows` (`w = dst.len()`, whole rows), four
/// rows at a time.
#[inline(always)]
fn add_rows(rows: &[f32], dst: &mut [f32]) {
    let w = dst.len();
    vectorized(
        #[inline(always)]
        || {
            let mut quads = rows.chunks_exact(4 * w);
            for q in &mut quads {
                let (a, rest) = q.split_at(w);
                let (b, rest) = rest.split_at(w);
                let (c, e) = rest.split_at(w);
                for ((((d, &a), &b), &c), &e) in dst.iter_mut().zip(a).zip(b).zip(c).zip(e) {
                    *d += (a + b) + (c + e);
                }
            }
            for row in quads.remainder().chunks_exact(w) {
                for (d, &v) in dst.iter_mut().zip(row) {
                    *d += v;
                }
            }
        },
    )
}

/// The extremum over the middle axis into `vals` and the position of its first occurrence
/// into `args` (both `[outer, inner]`, every element written; `red >= 1`).
/// `max = true` takes the maximum, else the minimum. NaN wins (it propagates).
pub(crate) fn extremum(
    x: &[f32],
    (outer, red, inner): (usize, usize, usize),
    max: bool,
    vals: &mut [f32],
    args: &mut [usize],
) {
    if vals.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    for o in 0..outer {
        for i in 0..inner {
            (vals[o * inner + i], args[o * inner + i]) = line_extremum(x, (o, i), (red, inner), max);
        }
    }
}

/// The extremum of line `(o, i)` and its first position (see [`extremum`]).
#[inline(always)]
fn line_extremum(x: &[f32], (o, i): (usize, usize), (red, inner): (usize, usize), max: bool) -> (f32, usize) {
    let mut best = x[o * red * inner + i];
    let mut arg = 0;
    for r in 1..red {
        let v = x[(o * red + r) * inner + i];
        if best.is_nan() {
            break;
        }
        let better = if max { v > best } else { v < best };
        if better || v.is_nan() {
            best = v;
            arg = r;
        }
    }
    (best, arg)
}

/// `out[o, i] = Π_r x[o, r, i]` (every element of `out` written).
pub(crate) fn prod(x: &[f32], outer: usize, red: usize, inner: usize, out: &mut [f32]) {
    out.fill(1.0);
    if x.is_empty() {
        return; // the empty product (an axis of size zero; the others may be huge)
    }
    for o in 0..outer {
        for r in 0..red {
            for i in 0..inner {
                out[o * inner + i] *= x[(o * red + r) * inner + i];
            }
        }
    }
}

/// Running sum along the middle axis into `out` (same shape as `x`, every element written);
/// `reverse` sums from the end.
pub(crate) fn cumsum(x: &[f32], outer: usize, red: usize, inner: usize, reverse: bool, out: &mut [f32]) {
    if x.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = 0.0f32;
            for step in 0..red {
                let r = if reverse { red - 1 - step } else { step };
                let at = (o * red + r) * inner + i;
                acc += x[at];
                out[at] = acc;
            }
        }
    }
}

/// `Σ_r (x[o, r, i] - mean)² / denom` per `(o, i)` into `acc`, two passes (mean first) for
/// accuracy. `sums` is scratch: `[outer, inner]` for the sums behind the means, which the
/// caller zeroed, then [`sum_scratch`] floats for [`sum`]; the caller zeroed `acc` too.
pub(crate) fn var(
    x: &[f32],
    (outer, red, inner): (usize, usize, usize),
    denom: f32,
    sums: &mut [f32],
    acc: &mut [f32],
) {
    if acc.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    let (sums, sum_scratch) = sums.split_at_mut(outer * inner);
    sum(x, outer, red, inner, sum_scratch, sums);
    let mean = &*sums;
    let inv_n = 1.0 / red as f32;
    for o in 0..outer {
        for r in 0..red {
            let row = &x[(o * red + r) * inner..(o * red + r + 1) * inner];
            for i in 0..inner {
                let d = row[i] - mean[o * inner + i] * inv_n;
                acc[o * inner + i] += d * d;
            }
        }
    }
    acc.iter_mut().for_each(|v| *v /= denom);
}

/// `log Σ_r exp(x[o, r, i])` into `acc`, shifted by the (finite) maximum so nothing overflows
/// (`red >= 1`). `shift` is `[outer, inner]` scratch for the shifts; the caller zeroed `acc`.
pub(crate) fn logsumexp(x: &[f32], (outer, red, inner): (usize, usize, usize), shift: &mut [f32], acc: &mut [f32]) {
    if acc.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    for o in 0..outer {
        for i in 0..inner {
            let (m, _) = line_extremum(x, (o, i), (red, inner), true);
            shift[o * inner + i] = if m.is_finite() { m } else { 0.0 };
        }
    }
    for o in 0..outer {
        for r in 0..red {
            let row = &x[(o * red + r) * inner..(o * red + r + 1) * inner];
            for i in 0..inner {
                acc[o * inner + i] += fastmath::exp(row[i] - shift[o * inner + i]);
            }
        }
    }
    acc.iter_mut().zip(&*shift).for_each(|(s, &m)| *s = s.ln() + m);
}

/// `out[o, r, i] = Π_{r' ≠ r} x[o, r', i]`: the product of every other element, from a
/// prefix and a suffix pass (no division, so zeros are handled exactly). Every element of
/// `out` (shaped like `x`) is written.
pub(crate) fn prod_exclusive(x: &[f32], outer: usize, red: usize, inner: usize, out: &mut [f32]) {
    if x.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    out.fill(1.0);
    for o in 0..outer {
        for i in 0..inner {
            let at = |r: usize| (o * red + r) * inner + i;
            let mut prefix = 1.0f32;
            for r in 0..red {
                out[at(r)] = prefix;
                prefix *= x[at(r)];
            }
            let mut suffix = 1.0f32;
            for r in (0..red).rev() {
                out[at(r)] *= suffix;
                suffix *= x[at(r)];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a reduction kernel into a fresh zeroed `n`-element buffer.
    fn run(n: usize, f: impl FnOnce(&mut [f32])) -> Vec<f32> {
        let mut out = vec![0.0; n];
        f(&mut out);
        out
    }

    #[test]
    fn middle_axis_reductions() {
        // x: [2, 3, 2]
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        assert_eq!(run(4, |o| sum(&x, 2, 3, 2, &mut [], o)), vec![6.0, 9.0, 24.0, 27.0]);
        assert_eq!(run(1, |o| sum(&x, 1, 12, 1, &mut [], o)), vec![66.0]);
        let (mut v, mut a) = ([0.0], [0]);
        extremum(&[1.0, 3.0, 3.0, 0.0], (1, 4, 1), true, &mut v, &mut a);
        assert_eq!((v, a), ([3.0], [1]));
        assert_eq!(run(3, |o| cumsum(&[1.0, 2.0, 3.0], 1, 3, 1, false, o)), vec![1.0, 3.0, 6.0]);
        assert_eq!(run(3, |o| cumsum(&[1.0, 2.0, 3.0], 1, 3, 1, true, o)), vec![6.0, 5.0, 3.0]);
        assert_eq!(run(3, |o| prod_exclusive(&[2.0, 0.0, 3.0], 1, 3, 1, o)), vec![0.0, 6.0, 0.0]);
        assert_eq!(run(1, |o| var(&[1.0, 3.0], (1, 2, 1), 1.0, &mut [0.0], o)), vec![2.0]);
        let lse = run(1, |o| logsumexp(&[1000.0, 1000.0], (1, 2, 1), &mut [0.0], o))[0];
        assert!((lse - (1000.0 + 2f32.ln())).abs() < 1e-3);
    }

    /// Small integers: every sum below is exact in f32 whatever the order of the additions,
    /// so each path must match the exact column sums, which counts every row once.
    fn exact_column_sums(outer: usize, red: usize, inner: usize) -> (Vec<f32>, Vec<f32>) {
        let x: Vec<f32> = (0..outer * red * inner).map(|j| ((j * 7 + j / inner * 3) % 11) as f32 - 5.0).collect();
        let mut want = vec![0i64; outer * inner];
        for o in 0..outer {
            for r in 0..red {
                for i in 0..inner {
                    want[o * inner + i] += x[(o * red + r) * inner + i] as i64;
                }
            }
        }
        let mut scratch = vec![f32::NAN; sum_scratch(outer, red, inner)];
        let got = run(outer * inner, |o| sum(&x, outer, red, inner, &mut scratch, o));
        (got, want.into_iter().map(|v| v as f32).collect())
    }

    #[test]
    fn column_sums_of_one_large_block_go_by_row_blocks_and_count_every_row_once() {
        // 3001 rows (a partial last block and a partial last quad) of 100: above the parallel
        // threshold, so the blocked path with scratch (NaN-filled: every partial is cleared).
        let (outer, red, inner) = (1, 3001, 100);
        assert!(sum_blocked(outer, red, inner));
        assert_eq!(sum_scratch(outer, red, inner), red.div_ceil(sum_block_rows(inner)) * inner);
        let (got, want) = exact_column_sums(outer, red, inner);
        assert_eq!(got, want);
    }

    #[test]
    fn long_rows_split_their_columns_and_other_shapes_need_no_scratch() {
        let wide = (1, 17, SUM_WIDE_INNER + 5);
        assert_eq!(sum_scratch(wide.0, wide.1, wide.2), 0);
        let (got, want) = exact_column_sums(wide.0, wide.1, wide.2);
        assert_eq!(got, want);
        // Several outer blocks (in parallel), and a small block (serial): no scratch either.
        for (outer, red, inner) in [(3, 30_000, 7), (2, 9, 5)] {
            assert_eq!(sum_scratch(outer, red, inner), 0);
            let (got, want) = exact_column_sums(outer, red, inner);
            assert_eq!(got, want);
        }
    }
}
