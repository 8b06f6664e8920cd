//! Scans along the middle axis of a packed `[outer, n, inner]` buffer: the running product
//! and its gradient (exact with zeros: no division), and the index of the running maximum or
//! minimum.

/// `out = cumprod(x)` along the middle axis.
pub(crate) fn cumprod(x: &[f32], outer: usize, n: usize, inner: usize, out: &mut [f32]) {
    if x.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = 1.0;
            for k in 0..n {
                let at = (o * n + k) * inner + i;
                acc *= x[at];
                out[at] = acc;
            }
        }
    }
}

/// The gradient of `cumprod` along the middle axis:
/// `gx_k = Σ_{j ≥ k} gy_j · Π_{i ≤ j, i ≠ k} x_i = P_{k-1} · R_k`, where `P` is the running
/// product and `R_k = gy_k + x_{k+1} · R_{k+1}` is accumulated from the end. No division, so
/// zeros in `x` get their exact gradient.
pub(crate) fn cumprod_grad(x: &[f32], gy: &[f32], outer: usize, n: usize, inner: usize, out: &mut [f32]) {
    if x.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            // First pass: R from the end, stored in out.
            let mut r = 0.0;
            for k in (0..n).rev() {
                let next = if k + 1 < n { x[at(k + 1)] } else { 0.0 };
                r = gy[at(k)] + next * r;
                out[at(k)] = r;
            }
            // Second pass: times the exclusive running product.
            let mut p = 1.0;
            for k in 0..n {
                out[at(k)] *= p;
                p *= x[at(k)];
            }
        }
    }
}

/// The index of the running maximum (`max`) or minimum along the middle axis, as PyTorch's
/// `cummax`/`cummin`: a tie moves the index to the later element, and a NaN, once seen, is the
/// extremum from then on (each later NaN taking the index).
pub(crate) fn cum_extremum_index(x: &[f32], outer: usize, n: usize, inner: usize, max: bool, out: &mut [i64]) {
    if x.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    for o in 0..outer {
        for i in 0..inner {
            let mut best = f32::NAN;
            let mut idx = 0;
            for k in 0..n {
                let at = (o * n + k) * inner + i;
                let v = x[at];
                let better = if max { v >= best } else { v <= best };
                if k == 0 || v.is_nan() || (!best.is_nan() && better) {
                    best = v;
                    idx = k as i64;
                }
                out[at] = idx;
            }
        }
    }
}
