//! Row reductions in independent lanes: 8 partial results that LLVM keeps in one vector
//! register, where a plain `fold` or `sum` is a serial chain of scalar operations (a float sum
//! is never reassociated by the compiler). Called per element inside `simd::vectorized`, so
//! everything here is `#[inline(always)]`. The order of the additions is fixed by the row's
//! length alone, so a row gives the same bits on every thread.

/// Lanes of the partial results.
const LANES: usize = 8;

/// The largest element of `x` (`-inf` for an empty or all-`-inf` `x`). NaN is skipped, as by
/// `f32::max`: a row of NaN gives `-inf`.
#[inline(always)]
pub(crate) fn row_max(x: &[f32]) -> f32 {
    let big = |a: f32, b: f32| if b > a { b } else { a };
    if x.len() < LANES {
        // No whole chunk: the lanes would stay -inf and only lengthen the chain below.
        return x.iter().fold(f32::NEG_INFINITY, |m, &e| big(m, e));
    }
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            acc[l] = big(acc[l], c[l]);
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &e in chunks.remainder().iter().chain(&acc) {
        m = big(m, e);
    }
    m
}

/// `Σ f(x[j])` in `LANES` partial sums (lane `l` takes `j ≡ l mod LANES` of the whole
/// chunks), then the tail, in order. `f` is applied a block at a time into a stack buffer
/// first: a plain loop, which LLVM vectorizes even when `f` branches (as `fastmath::exp`
/// does), where applying it inside the lanes would leave it scalar.
#[inline(always)]
pub(crate) fn row_sum_of(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    /// Elements per block: a multiple of `LANES`, so the lanes see the same elements whatever
    /// the blocks.
    const BLOCK: usize = 32 * LANES;
    let mut buf = [0.0f32; BLOCK];
    let mut acc = [0.0f32; LANES];
    let mut tail = 0.0f32;
    for block in x.chunks(BLOCK) {
        let values = &mut buf[..block.len()];
        for (t, &v) in values.iter_mut().zip(block) {
            *t = f(v);
        }
        add_lanes(values, &mut acc, &mut tail);
    }
    acc.iter().sum::<f32>() + tail
}

/// Adds `x`'s whole chunks of `LANES` into `acc`, lane by lane, and its remainder into `tail`.
#[inline(always)]
fn add_lanes(x: &[f32], acc: &mut [f32; LANES], tail: &mut f32) {
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            acc[l] += c[l];
        }
    }
    for &v in chunks.remainder() {
        *tail += v;
    }
}

/// `Σ x[j] · y[j]` (or `Σ x[j]` when `y` is `None`), in `LANES` partial sums.
///
/// Panics when `y` is shorter than `x` (an internal invariant: the caller's rows).
#[inline(always)]
pub(crate) fn row_dot(x: &[f32], y: Option<&[f32]>) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut tail = 0.0f32;
    let Some(y) = y else {
        add_lanes(x, &mut acc, &mut tail);
        return acc.iter().sum::<f32>() + tail;
    };
    let (xs, x_tail) = x.as_chunks::<LANES>();
    let (ys, y_tail) = y[..x.len()].as_chunks::<LANES>();
    for (c, d) in xs.iter().zip(ys) {
        for l in 0..LANES {
            acc[l] += c[l] * d[l];
        }
    }
    for (a, b) in x_tail.iter().zip(y_tail) {
        tail += a * b;
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_max_skips_nan_and_is_minus_infinity_when_empty() {
        assert_eq!(row_max(&[]), f32::NEG_INFINITY);
        let x: Vec<f32> = (0..21).map(|i| ((i * 7) % 19) as f32 - 9.0).collect();
        assert_eq!(row_max(&x), 9.0);
        let mut y = x.clone();
        y[3] = f32::NAN;
        y[17] = f32::NAN;
        assert_eq!(row_max(&y), 9.0);
        assert_eq!(row_max(&[f32::NAN; 11]), f32::NEG_INFINITY);
        // Shorter than the lanes: folded directly, to the same answers.
        assert_eq!(row_max(&[f32::NAN, 2.0, -1.0]), 2.0);
        assert_eq!(row_max(&[f32::NAN; 3]), f32::NEG_INFINITY);
        assert_eq!(row_max(&x[..7]), x[..7].iter().copied().fold(f32::NEG_INFINITY, f32::max));
    }

    #[test]
    fn lane_sums_are_exact_on_small_integers_at_every_length() {
        for n in (0..40).chain([255, 256, 257, 600]) {
            let x: Vec<f32> = (0..n).map(|i| (i % 5) as f32 - 1.0).collect();
            let y: Vec<f32> = (0..n).map(|i| (i % 3) as f32).collect();
            let sum: f32 = x.iter().sum();
            let dot: f32 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
            assert_eq!(row_dot(&x, None), sum, "n = {n}");
            assert_eq!(row_dot(&x, Some(&y)), dot, "n = {n}");
            assert_eq!(row_sum_of(&x, |v| 2.0 * v), 2.0 * sum, "n = {n}");
        }
    }
}
