//! Cross-entropy over packed `[N, C]` logits with integer targets (`None`: an ignored row) and
//! label smoothing `eps`, given each row's log-sum-exp as `(max, log Σ exp(x - max))`.

use super::fastmath;
use super::simd;

/// Writes each row's loss into `out[r]`: `(1 - eps)·(lse - x_y) + eps·(lse - mean x)`, 0 for an
/// ignored row. The smoothing term is skipped when `eps` is 0, so a wrong class at `-inf`
/// does not turn the loss into NaN.
pub(crate) fn cross_entropy_rows(
    d: &[f32],
    c: usize,
    lse: &[(f32, f32)],
    targets: &[Option<usize>],
    eps: f32,
    out: &mut [f32],
) {
    for (r, o) in out.iter_mut().enumerate() {
        let Some(y) = targets[r] else {
            *o = 0.0;
            continue;
        };
        let row = &d[r * c..(r + 1) * c];
        let (m, ls) = lse[r];
        let hit = (1.0 - eps) * (ls - (row[y] - m));
        *o = if eps == 0.0 {
            hit
        } else {
            let mean = row.iter().map(|&v| v - m).sum::<f32>() / c as f32;
            hit + eps * (ls - mean)
        };
    }
}

/// Writes the gradient of the losses into `out`: `(softmax(x) - target) · scale[r]` where the
/// smoothed target is `off` everywhere but `on` at the row's class, without materializing it.
pub(crate) fn cross_entropy_grad(
    d: &[f32],
    c: usize,
    lse: &[(f32, f32)],
    targets: &[Option<usize>],
    (off, on): (f32, f32),
    scale: impl Fn(usize) -> f32,
    out: &mut [f32],
) {
    simd::vectorized(
        #[inline(always)]
        || {
            for (r, target) in targets.iter().enumerate() {
                let s = scale(r);
                let (m, l) = lse[r];
                let row = r * c..(r + 1) * c;
                for (o, &x) in out[row.clone()].iter_mut().zip(&d[row]) {
                    *o = (fastmath::exp((x - m) - l) - off) * s;
                }
                if let Some(y) = target {
                    let at = r * c + y;
                    out[at] = (fastmath::exp((d[at] - m) - l) - on) * s;
                }
            }
        },
    );
}

/// Writes `value` at each row's class of a `[N, C]` buffer and `rest` elsewhere.
pub(crate) fn one_hot_rows(targets: &[Option<usize>], c: usize, (rest, value): (f32, f32), out: &mut [f32]) {
    out.fill(rest);
    for (r, y) in targets.iter().enumerate() {
        if let Some(y) = y {
            out[r * c + y] = value;
        }
    }
}

/// Writes each row's class coefficients for a weighted, smoothed cross-entropy into the
/// `[N, C]` buffer `out`: `eps/C · w_c + (1 - eps) · w_y · [c = y]`, and 0 for an ignored row.
pub(crate) fn weighted_targets(targets: &[Option<usize>], w: &[f32], eps: f32, out: &mut [f32]) {
    let c = w.len();
    for (r, y) in targets.iter().enumerate() {
        let row = &mut out[r * c..(r + 1) * c];
        match y {
            Some(y) => {
                for (o, &wc) in row.iter_mut().zip(w) {
                    *o = eps / c as f32 * wc;
                }
                row[*y] += (1.0 - eps) * w[*y];
            }
            None => row.fill(0.0),
        }
    }
}

/// Adds the column sums of the packed `[rows, cols]` block `x` into `out` (`[cols]`).
pub(crate) fn add_column_sums(x: &[f32], cols: usize, out: &mut [f32]) {
    for row in x.chunks_exact(cols.max(1)) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
}
