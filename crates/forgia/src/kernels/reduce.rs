//! Reductions over the middle axis of a packed `[outer, red, inner]` view. `ops/` permutes
//! any set of axes into that form first.

use super::fastmath;
use crate::error::Result;
use rayon::prelude::*;

use crate::parallel::{self, PARALLEL_ELEMENTS};

/// `out[o, i] = Σ_r x[o, r, i]`.
pub(crate) fn sum(x: &[f32], outer: usize, red: usize, inner: usize) -> Result<Vec<f32>> {
    let mut out = crate::tensor::zeroed("reduce", outer * inner)?;
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
    Ok(out)
}

/// The extremum over the middle axis and the position of its first occurrence.
/// `max = true` takes the maximum, else the minimum. NaN wins (it propagates).
pub(crate) fn extremum(x: &[f32], outer: usize, red: usize, inner: usize, max: bool) -> Result<(Vec<f32>, Vec<usize>)> {
    let mut vals = crate::tensor::zeroed("reduce", outer * inner)?;
    let mut args = vec![0usize; outer * inner];
    for o in 0..outer {
        for i in 0..inner {
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
            vals[o * inner + i] = best;
            args[o * inner + i] = arg;
        }
    }
    Ok((vals, args))
}

/// `out[o, i] = Π_r x[o, r, i]`.
pub(crate) fn prod(x: &[f32], outer: usize, red: usize, inner: usize) -> Result<Vec<f32>> {
    let mut out = crate::tensor::buffer("reduce", outer * inner)?;
    out.fill(1.0);
    for o in 0..outer {
        for r in 0..red {
            for i in 0..inner {
                out[o * inner + i] *= x[(o * red + r) * inner + i];
            }
        }
    }
    Ok(out)
}

/// Running sum along the middle axis (same shape as `x`); `reverse` sums from the end.
pub(crate) fn cumsum(x: &[f32], outer: usize, red: usize, inner: usize, reverse: bool) -> Result<Vec<f32>> {
    let mut out = crate::tensor::zeroed("reduce", x.len())?;
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
    Ok(out)
}

/// `Σ_r (x[o, r, i] - mean)² / denom` per `(o, i)`, two passes (mean first) for accuracy.
pub(crate) fn var(x: &[f32], outer: usize, red: usize, inner: usize, denom: f32) -> Result<Vec<f32>> {
    let mean = sum(x, outer, red, inner)?;
    let inv_n = 1.0 / red as f32;
    let mut acc = crate::tensor::zeroed("reduce", outer * inner)?;
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
    Ok(acc)
}

/// `log Σ_r exp(x[o, r, i])`, shifted by the (finite) maximum so nothing overflows.
pub(crate) fn logsumexp(x: &[f32], outer: usize, red: usize, inner: usize) -> Result<Vec<f32>> {
    let (maxes, _) = extremum(x, outer, red, inner, true)?;
    let shift: Vec<f32> = maxes.iter().map(|&m| if m.is_finite() { m } else { 0.0 }).collect();
    let mut acc = crate::tensor::zeroed("reduce", outer * inner)?;
    for o in 0..outer {
        for r in 0..red {
            let row = &x[(o * red + r) * inner..(o * red + r + 1) * inner];
            for i in 0..inner {
                acc[o * inner + i] += fastmath::exp(row[i] - shift[o * inner + i]);
            }
        }
    }
    Ok(acc.iter().zip(&shift).map(|(&s, &m)| s.ln() + m).collect())
}

/// `out[o, r, i] = Π_{r' ≠ r} x[o, r', i]`: the product of every other element, from a
/// prefix and a suffix pass (no division, so zeros are handled exactly).
pub(crate) fn prod_exclusive(x: &[f32], outer: usize, red: usize, inner: usize) -> Result<Vec<f32>> {
    let mut out = crate::tensor::buffer("reduce", x.len())?;
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
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn middle_axis_reductions() {
        // x: [2, 3, 2]
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        assert_eq!(sum(&x, 2, 3, 2).unwrap(), vec![6.0, 9.0, 24.0, 27.0]);
        assert_eq!(sum(&x, 1, 12, 1).unwrap(), vec![66.0]);
        let (v, a) = extremum(&[1.0, 3.0, 3.0, 0.0], 1, 4, 1, true).unwrap();
        assert_eq!((v, a), (vec![3.0], vec![1]));
        assert_eq!(cumsum(&[1.0, 2.0, 3.0], 1, 3, 1, false).unwrap(), vec![1.0, 3.0, 6.0]);
        assert_eq!(cumsum(&[1.0, 2.0, 3.0], 1, 3, 1, true).unwrap(), vec![6.0, 5.0, 3.0]);
        assert_eq!(prod_exclusive(&[2.0, 0.0, 3.0], 1, 3, 1).unwrap(), vec![0.0, 6.0, 0.0]);
        assert_eq!(var(&[1.0, 3.0], 1, 2, 1, 1.0).unwrap(), vec![2.0]);
        let lse = logsumexp(&[1000.0, 1000.0], 1, 2, 1).unwrap()[0];
        assert!((lse - (1000.0 + 2f32.ln())).abs() < 1e-3);
    }
}
