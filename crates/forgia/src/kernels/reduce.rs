//! Reductions over the middle axis of a packed `[outer, red, inner]` view. `ops/` permutes
//! any set of axes into that form first. Results go into buffers the caller allocated: `out`
//! is `[outer, inner]` for a reduction, `[outer, red, inner]` for a scan.

use super::fastmath;
use rayon::prelude::*;

use crate::parallel::{self, PARALLEL_ELEMENTS};

/// `out[o, i] = Σ_r x[o, r, i]`, accumulated into `out`, which the caller zeroed.
pub(crate) fn sum(x: &[f32], outer: usize, red: usize, inner: usize, out: &mut [f32]) {
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
            for r in 0..red {
                for (d, &v) in dst.iter_mut().zip(&base[r * inner..(r + 1) * inner]) {
                    *d += v;
                }
            }
        }
    };
    if x.len() >= PARALLEL_ELEMENTS && outer > 1 {
        parallel::install(|| out.par_chunks_mut(inner.max(1)).enumerate().for_each(|(o, d)| block(o, d)));
    } else if x.len() >= PARALLEL_ELEMENTS && inner >= 1024 {
        // One outer block, wide inner: split the inner columns.
        let cols = 256;
        parallel::install(|| {
            out.par_chunks_mut(cols).enumerate().for_each(|(c, d)| {
                for r in 0..red {
                    let row = &x[r * inner + c * cols..r * inner + c * cols + d.len()];
                    for (d, &v) in d.iter_mut().zip(row) {
                        *d += v;
                    }
                }
            })
        });
    } else {
        for (o, d) in out.chunks_mut(inner.max(1)).enumerate().take(outer) {
            block(o, d);
        }
    }
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
/// accuracy. `sums` is `[outer, inner]` scratch for the sums behind the means; the caller
/// zeroed both.
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
    sum(x, outer, red, inner, sums);
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
        assert_eq!(run(4, |o| sum(&x, 2, 3, 2, o)), vec![6.0, 9.0, 24.0, 27.0]);
        assert_eq!(run(1, |o| sum(&x, 1, 12, 1, o)), vec![66.0]);
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
}
