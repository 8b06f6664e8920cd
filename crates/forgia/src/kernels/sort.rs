//! Sorting and selection along one axis of a packed `[outer, d, inner]` buffer: full and
//! partial (top-k) stable sorts, and the k-th smallest element. The order is PyTorch's: NaN is
//! larger than every number (all NaNs tie), `-0.0` ties with `0.0`, and ties keep their
//! original order (a stable sort, made deterministic by breaking ties on the position, so the
//! unstable in-place sorts allocate nothing). Every line gets its own pass over a permutation
//! scratch of `d` positions that the caller hands in; a large sort along the last axis splits
//! its lines over [`top_parts`] threads, each with its own scratch.

use std::cmp::Ordering;

use rayon::prelude::*;

use crate::parallel::{self, PARALLEL_ELEMENTS};

/// PyTorch's ascending order of two values: NaN last, every NaN equal.
#[inline]
pub(crate) fn ascending(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // Neither is NaN, so `partial_cmp` is `Some`.
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// The sizes and direction of a selection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lines {
    /// Lines before the axis.
    pub(crate) outer: usize,
    /// The axis length.
    pub(crate) d: usize,
    /// Lines after the axis (the axis stride).
    pub(crate) inner: usize,
    /// Largest first (NaN first) instead of smallest first.
    pub(crate) descending: bool,
}

impl Lines {
    /// The order of positions `a` and `b` of a line: by value, ties by position.
    #[inline]
    fn order(&self, line: impl Fn(usize) -> f32, a: usize, b: usize) -> Ordering {
        let by_value = if self.descending { ascending(line(b), line(a)) } else { ascending(line(a), line(b)) };
        by_value.then(a.cmp(&b))
    }
}

/// How many parts [`top`] splits its lines over (its scratch is `parts * d` positions): the
/// kernel threads for a large selection along the last axis (`inner == 1`, whose lines are
/// contiguous in the input and the outputs), else 1.
pub(crate) fn top_parts(lines: Lines, k: usize) -> usize {
    let work = lines.outer.saturating_mul(lines.d);
    if lines.inner != 1 || k == 0 || lines.outer < 2 || work < PARALLEL_ELEMENTS / 4 {
        1
    } else {
        parallel::kernel_threads().clamp(1, lines.outer)
    }
}

/// The first `k` positions of every line in sorted order (`k <= d`): `vals` and `idx` are
/// packed `[outer, k, inner]`; `perm` is scratch of `d` positions per part (see
/// [`top_parts`]; parts run in parallel). With `sorted == false` the `k` selected elements keep
/// their original order along the axis (PyTorch leaves that order unspecified).
pub(crate) fn top(
    x: &[f32],
    lines: Lines,
    k: usize,
    sorted: bool,
    perm: &mut [usize],
    vals: &mut [f32],
    idx: &mut [i64],
) {
    let Lines { outer, d, inner, .. } = lines;
    let parts = perm.len().checked_div(d).unwrap_or(1);
    if parts > 1 && inner == 1 && k > 0 {
        let per = outer.div_ceil(parts);
        let work: Vec<_> = x
            .chunks(per * d)
            .zip(vals.chunks_mut(per * k))
            .zip(idx.chunks_mut(per * k))
            .zip(perm.chunks_mut(d))
            .collect();
        parallel::install(|| {
            work.into_par_iter().for_each(|(((x, v), i), p)| {
                top_lines(x, Lines { outer: x.len() / d, ..lines }, k, sorted, p, v, i);
            })
        });
        return;
    }
    top_lines(x, lines, k, sorted, perm, vals, idx);
}

/// [`top`] on one thread, with `d` positions of `perm`.
fn top_lines(x: &[f32], lines: Lines, k: usize, sorted: bool, perm: &mut [usize], vals: &mut [f32], idx: &mut [i64]) {
    if vals.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    let Lines { outer, d, inner, .. } = lines;
    let perm = &mut perm[..d];
    for o in 0..outer {
        for i in 0..inner {
            let line = |r: usize| x[(o * d + r) * inner + i];
            perm.iter_mut().enumerate().for_each(|(r, p)| *p = r);
            let by = |a: &usize, b: &usize| lines.order(line, *a, *b);
            if k < d && k > 0 {
                perm.select_nth_unstable_by(k - 1, by);
            }
            if sorted {
                perm[..k].sort_unstable_by(by);
            } else {
                perm[..k].sort_unstable();
            }
            for (j, &r) in perm[..k].iter().enumerate() {
                vals[(o * k + j) * inner + i] = line(r);
                idx[(o * k + j) * inner + i] = r as i64;
            }
        }
    }
}

/// The `k`-th smallest (0-based, `k < d`) element of every line, in PyTorch's order with ties
/// broken by position; `vals` and `idx` are packed `[outer, inner]`. With `nan_wins`, a line
/// holding a NaN gives that NaN and the position of its first NaN instead (`torch.median`).
pub(crate) fn kth(
    x: &[f32],
    (outer, d, inner): (usize, usize, usize),
    k: usize,
    nan_wins: bool,
    perm: &mut [usize],
    vals: &mut [f32],
    idx: &mut [i64],
) {
    if vals.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    let lines = Lines { outer, d, inner, descending: false };
    let perm = &mut perm[..d];
    for o in 0..outer {
        for i in 0..inner {
            let line = |r: usize| x[(o * d + r) * inner + i];
            let first_nan = if nan_wins { (0..d).find(|&r| line(r).is_nan()) } else { None };
            let r = match first_nan {
                Some(r) => r,
                None => {
                    perm.iter_mut().enumerate().for_each(|(r, p)| *p = r);
                    perm.select_nth_unstable_by(k, |a, b| lines.order(line, *a, *b));
                    perm[k]
                }
            };
            vals[o * inner + i] = line(r);
            idx[o * inner + i] = r as i64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_stably_with_nan_largest() {
        let nan = f32::NAN;
        let x = [3.0, nan, 1.0, 2.0, nan, 1.0];
        let (mut v, mut i, mut p) = ([0.0; 6], [0i64; 6], [0usize; 6]);
        top(&x, Lines { outer: 1, d: 6, inner: 1, descending: false }, 6, true, &mut p, &mut v, &mut i);
        assert_eq!(i, [2, 5, 3, 0, 1, 4]);
        top(&x, Lines { outer: 1, d: 6, inner: 1, descending: true }, 6, true, &mut p, &mut v, &mut i);
        assert_eq!(i, [1, 4, 0, 3, 2, 5]);
        let (mut v2, mut i2) = ([0.0; 2], [0i64; 2]);
        top(&x, Lines { outer: 1, d: 6, inner: 1, descending: false }, 2, true, &mut p, &mut v2, &mut i2);
        assert_eq!(i2, [2, 5]);
        // Split over parts, as a large last-axis sort is: the same result as one thread.
        let y: Vec<f32> = (0..60).map(|v| ((v * 37) % 11) as f32).collect();
        let lines = Lines { outer: 6, d: 10, inner: 1, descending: true };
        let (mut one, mut one_i, mut p1) = ([0.0; 18], [0i64; 18], [0usize; 10]);
        top(&y, lines, 3, true, &mut p1, &mut one, &mut one_i);
        let (mut four, mut four_i, mut p4) = ([0.0; 18], [0i64; 18], [0usize; 40]);
        top(&y, lines, 3, true, &mut p4, &mut four, &mut four_i);
        assert_eq!((one, one_i), (four, four_i));
        let (mut m, mut mi) = ([0.0], [0i64]);
        kth(&x, (1, 6, 1), 2, false, &mut p, &mut m, &mut mi);
        assert_eq!((m[0], mi[0]), (2.0, 3));
        kth(&x, (1, 6, 1), 2, true, &mut p, &mut m, &mut mi);
        assert!(m[0].is_nan() && mi[0] == 1);
    }
}
