//! Normalization kernels over "sets" of elements: the packed input is cut into chunks of
//! `chunk` elements and chunk `i` belongs to set `i % count`. A layer-norm row is one chunk
//! (`count` = rows), a group-norm group is one chunk per sample, and a batch-norm channel is
//! every `C`-th plane. Statistics accumulate in f64; chunks run in parallel when large.

use rayon::prelude::*;

use crate::parallel::{self, PARALLEL_ELEMENTS};

/// How elements are grouped into normalization sets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sets {
    /// Elements per chunk.
    pub(crate) chunk: usize,
    /// Number of sets (chunk `i` belongs to set `i % count`).
    pub(crate) count: usize,
    /// Total elements.
    pub(crate) len: usize,
}

impl Sets {
    fn chunks(&self) -> usize {
        self.len / self.chunk.max(1)
    }
    /// Elements per set.
    pub(crate) fn per_set(&self) -> usize {
        self.len / self.count.max(1)
    }
}

/// `f(i)` for every chunk index, combined per set.
fn per_set(s: &Sets, f: impl Fn(usize) -> f64 + Sync) -> Vec<f64> {
    let parts: Vec<f64> = if s.len >= PARALLEL_ELEMENTS {
        parallel::install(|| (0..s.chunks()).into_par_iter().map(&f).collect())
    } else {
        (0..s.chunks()).map(f).collect()
    };
    let mut out = vec![0.0f64; s.count];
    for (i, v) in parts.into_iter().enumerate() {
        out[i % s.count] += v;
    }
    out
}

/// Fills `out` chunk by chunk with `f(chunk index, chunk)`.
fn fill(s: &Sets, out: &mut [f32], f: impl Fn(usize, &mut [f32]) + Sync) {
    if s.chunk == 0 {
        return;
    }
    if s.len >= PARALLEL_ELEMENTS {
        parallel::install(|| out.par_chunks_mut(s.chunk).enumerate().for_each(|(i, c)| f(i, c)));
    } else {
        out.chunks_mut(s.chunk).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// Per-set mean (zero for RMS) and biased variance (mean square for RMS).
pub(crate) fn moments(s: &Sets, x: &[f32], rms: bool) -> (Vec<f32>, Vec<f32>) {
    let n = s.per_set().max(1) as f64;
    let chunk = |i: usize| &x[i * s.chunk..(i + 1) * s.chunk];
    let mean: Vec<f64> = if rms {
        vec![0.0; s.count]
    } else {
        per_set(s, |i| chunk(i).iter().map(|&v| v as f64).sum()).into_iter().map(|v| v / n).collect()
    };
    let var = per_set(s, |i| {
        let m = mean[i % s.count];
        chunk(i).iter().map(|&v| (v as f64 - m).powi(2)).sum()
    });
    (mean.into_iter().map(|v| v as f32).collect(), var.into_iter().map(|v| (v / n) as f32).collect())
}

/// `xhat = (x - mean[set]) * rstd[set]`.
pub(crate) fn normalize(s: &Sets, x: &[f32], mean: &[f32], rstd: &[f32]) -> Vec<f32> {
    let mut out = crate::tensor::buffer(s.len);
    fill(s, &mut out, |i, o| {
        let (m, r) = (mean[i % s.count], rstd[i % s.count]);
        for (o, &v) in o.iter_mut().zip(&x[i * s.chunk..(i + 1) * s.chunk]) {
            *o = (v - m) * r;
        }
    });
    out
}

/// The input gradient of a normalization given `g = gy · weight`:
/// `gx = rstd · (g - mean(g) - xhat · mean(g · xhat))` (without the `mean(g)` term for RMS).
pub(crate) fn backward(s: &Sets, x: &[f32], g: &[f32], mean: &[f32], rstd: &[f32], rms: bool) -> Vec<f32> {
    let n = s.per_set().max(1) as f64;
    let range = |i: usize| i * s.chunk..(i + 1) * s.chunk;
    let mg: Vec<f64> = if rms {
        vec![0.0; s.count]
    } else {
        per_set(s, |i| g[range(i)].iter().map(|&v| v as f64).sum()).into_iter().map(|v| v / n).collect()
    };
    let mgx: Vec<f64> = per_set(s, |i| {
        let (m, r) = (mean[i % s.count], rstd[i % s.count]);
        g[range(i)].iter().zip(&x[range(i)]).map(|(&g, &x)| g as f64 * ((x - m) * r) as f64).sum()
    })
    .into_iter()
    .map(|v| v / n)
    .collect();
    let mut gx = crate::tensor::buffer(s.len);
    fill(s, &mut gx, |i, o| {
        let k = i % s.count;
        let (m, r, a, b) = (mean[k], rstd[k], mg[k] as f32, mgx[k] as f32);
        for ((o, &g), &x) in o.iter_mut().zip(&g[range(i)]).zip(&x[range(i)]) {
            *o = r * (g - a - (x - m) * r * b);
        }
    });
    gx
}

/// `y = y * w[p] + b[p]` where element `e` uses parameter `p = (e / inner) % w.len()`.
/// Walks blocks of `inner · count` elements, so no element needs a division.
pub(crate) fn affine(y: &mut [f32], w: Option<&[f32]>, b: Option<&[f32]>, inner: usize) {
    let count = w.or(b).map_or(1, <[f32]>::len);
    let inner = inner.max(1);
    let body = |block: &mut [f32]| {
        if inner == 1 {
            for (p, v) in block.iter_mut().enumerate() {
                *v = *v * w.map_or(1.0, |w| w[p]) + b.map_or(0.0, |b| b[p]);
            }
            return;
        }
        for (p, c) in block.chunks_mut(inner).enumerate() {
            let (wv, bv) = (w.map_or(1.0, |w| w[p]), b.map_or(0.0, |b| b[p]));
            for v in c {
                *v = *v * wv + bv;
            }
        }
    };
    if y.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| y.par_chunks_mut(inner * count).for_each(body));
    } else {
        y.chunks_mut(inner * count).for_each(body);
    }
}

/// `out[p] = Σ v[e]` over elements with parameter `p = (e / inner) % count`.
pub(crate) fn param_sums(v: &[f32], inner: usize, count: usize) -> Vec<f32> {
    let inner = inner.max(1);
    let mut acc = vec![0.0f64; count];
    for block in v.chunks(inner * count) {
        if inner == 1 {
            for (a, &x) in acc.iter_mut().zip(block) {
                *a += x as f64;
            }
        } else {
            for (a, c) in acc.iter_mut().zip(block.chunks(inner)) {
                *a += c.iter().map(|&x| x as f64).sum::<f64>();
            }
        }
    }
    acc.into_iter().map(|x| x as f32).collect()
}
