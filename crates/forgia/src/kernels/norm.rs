//! Normalization kernels over "sets" of elements: the packed input is cut into chunks of
//! `chunk` elements and chunk `i` belongs to set `i % count`. A layer-norm row is one chunk
//! (`count` = rows), a group-norm group is one chunk per sample, and a batch-norm channel is
//! every `C`-th plane. Statistics accumulate in f64; chunks run in parallel when large.
//!
//! Every result goes into a buffer the caller allocated (element-sized ones, per-set
//! statistics and parameter gradients alike). The f64 accumulators kept here (one per chunk,
//! per set, or per row and task of [`Rows::backward`]) are no larger than a small multiple of
//! the input the caller already holds, and are taken as plain `Vec`s.

use rayon::prelude::*;

use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};

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

/// Per-set mean (zero for RMS) and biased variance (mean square for RMS) into `mean_out` and
/// `var_out` (`count` each).
pub(crate) fn moments(s: &Sets, x: &[f32], rms: bool, (mean_out, var_out): (&mut [f32], &mut [f32])) {
    let n = s.per_set().max(1) as f64;
    let chunk = |i: usize| &x[i * s.chunk..(i + 1) * s.chunk];
    let mean: Vec<f64> = if rms {
        vec![0.0; s.count]
    } else {
        let sum = |i: usize| {
            super::simd::vectorized(
                #[inline(always)]
                || row_sum(chunk(i)),
            )
        };
        per_set(s, sum).into_iter().map(|v| v / n).collect()
    };
    let var = per_set(s, |i| {
        let m = mean[i % s.count];
        super::simd::vectorized(
            #[inline(always)]
            || lane_sum(chunk(i), chunk(i), |v, _| (v as f64 - m) * (v as f64 - m)),
        )
    });
    mean_out.iter_mut().zip(mean).for_each(|(o, v)| *o = v as f32);
    var_out.iter_mut().zip(var).for_each(|(o, v)| *o = (v / n) as f32);
}

/// `xhat = (x - mean[set]) * rstd[set]` into `out` (`s.len`, every element written).
pub(crate) fn normalize(s: &Sets, x: &[f32], (mean, rstd): (&[f32], &[f32]), out: &mut [f32]) {
    fill(s, out, |i, o| {
        let (m, r) = (mean[i % s.count], rstd[i % s.count]);
        for (o, &v) in o.iter_mut().zip(&x[i * s.chunk..(i + 1) * s.chunk]) {
            *o = (v - m) * r;
        }
    });
}

/// [`normalize`] and [`affine`] in one pass, for parameters that run per set (batch norm's,
/// one per channel): `y = x̂ · w[set] + b[set]` with `x̂ = (x - mean[set]) * rstd[set]`
/// (`w = 1`, `b = 0` where absent), the same arithmetic as the two passes.
pub(crate) fn normalize_per_set(
    s: &Sets,
    x: &[f32],
    (mean, rstd): (&[f32], &[f32]),
    (w, b): (Option<&[f32]>, Option<&[f32]>),
    out: &mut [f32],
) {
    fill(s, out, |i, o| {
        let k = i % s.count;
        let (m, r) = (mean[k], rstd[k]);
        let (wv, bv) = (w.map_or(1.0, |w| w[k]), b.map_or(0.0, |b| b[k]));
        super::simd::vectorized(
            #[inline(always)]
            || {
                for (o, &v) in o.iter_mut().zip(&x[i * s.chunk..(i + 1) * s.chunk]) {
                    *o = (v - m) * r * wv + bv;
                }
            },
        )
    });
}

/// The gradients of a normalization whose parameters run per set (batch norm), those of `out`
/// that are `Some`, in two passes: per set `S1 = Σ gy` and `S2 = Σ gy · x̂` (f64), then
/// `gx = rstd · (g - a - x̂ · b)` with `g = gy · w`, `a = w · S1 / n` (0 for RMS) and
/// `b = w · S2 / n` (`n` elements a set), the general [`backward`]'s formula with its means
/// taken from the two sums; `gweight = S2`, `gbias = S1`.
pub(crate) fn backward_per_set(
    s: &Sets,
    (x, gy): (&[f32], &[f32]),
    (mean, rstd): (&[f32], &[f32]),
    (w, rms): (Option<&[f32]>, bool),
    out: RowGrads<'_>,
) {
    let n = s.per_set().max(1) as f64;
    let range = |i: usize| i * s.chunk..(i + 1) * s.chunk;
    let sums: Vec<(f64, f64)> = {
        let chunk_sums = |i: usize| {
            let (m, r) = (mean[i % s.count], rstd[i % s.count]);
            super::simd::vectorized(
                #[inline(always)]
                || {
                    let (g, x) = (&gy[range(i)], &x[range(i)]);
                    (row_sum(g), lane_sum(g, x, |g, x| g as f64 * ((x - m) * r) as f64))
                },
            )
        };
        let parts: Vec<(f64, f64)> = if s.len >= PARALLEL_ELEMENTS {
            parallel::install(|| (0..s.chunks()).into_par_iter().map(chunk_sums).collect())
        } else {
            (0..s.chunks()).map(chunk_sums).collect()
        };
        let mut acc = vec![(0.0f64, 0.0f64); s.count];
        for (i, (a, b)) in parts.into_iter().enumerate() {
            acc[i % s.count].0 += a;
            acc[i % s.count].1 += b;
        }
        acc
    };
    if let Some(gw) = out.weight {
        gw.iter_mut().zip(&sums).for_each(|(o, s)| *o = s.1 as f32);
    }
    if let Some(gb) = out.bias {
        gb.iter_mut().zip(&sums).for_each(|(o, s)| *o = s.0 as f32);
    }
    if let Some(gx) = out.x {
        fill(s, gx, |i, o| {
            let k = i % s.count;
            let (m, r, wv) = (mean[k], rstd[k], w.map_or(1.0, |w| w[k]));
            let a = if rms { 0.0 } else { (wv as f64 * sums[k].0 / n) as f32 };
            let b = (wv as f64 * sums[k].1 / n) as f32;
            super::simd::vectorized(
                #[inline(always)]
                || {
                    for ((o, &g), &x) in o.iter_mut().zip(&gy[range(i)]).zip(&x[range(i)]) {
                        *o = r * (g * wv - a - (x - m) * r * b);
                    }
                },
            )
        });
    }
}

/// The input gradient of a normalization given `g = gy · weight`, into `gx` (`s.len`):
/// `gx = rstd · (g - mean(g) - xhat · mean(g · xhat))` (without the `mean(g)` term for RMS).
pub(crate) fn backward(s: &Sets, (x, g): (&[f32], &[f32]), (mean, rstd): (&[f32], &[f32]), rms: bool, gx: &mut [f32]) {
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
    fill(s, gx, |i, o| {
        let k = i % s.count;
        let (m, r, a, b) = (mean[k], rstd[k], mg[k] as f32, mgx[k] as f32);
        for ((o, &g), &x) in o.iter_mut().zip(&g[range(i)]).zip(&x[range(i)]) {
            *o = r * (g - a - (x - m) * r * b);
        }
    });
}

/// `y = y * w[p] + b[p]` where element `e` uses parameter `p = (e / inner) % w.len()`.
/// Walks blocks of `inner · count` elements, so no element needs a division.
pub(crate) fn affine(y: &mut [f32], w: Option<&[f32]>, b: Option<&[f32]>, inner: usize) {
    let count = w.or(b).map_or(1, <[f32]>::len);
    let inner = inner.max(1);
    // Whole blocks per task, at least CHUNK_ELEMENTS each.
    let block = inner * count;
    let task = block * (CHUNK_ELEMENTS / block).max(1);
    let run = |y: &mut [f32]| {
        super::simd::vectorized(
            #[inline(always)]
            || {
                for c in y.chunks_mut(block) {
                    affine_block(c, w, b, inner);
                }
            },
        )
    };
    if y.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| y.par_chunks_mut(task).for_each(run));
    } else {
        run(y);
    }
}

/// One block of [`affine`]: `count` parameters, `inner` elements each.
#[inline(always)]
fn affine_block(block: &mut [f32], w: Option<&[f32]>, b: Option<&[f32]>, inner: usize) {
    if inner == 1 {
        // One loop per case, so that each vectorizes (w = 1 and b = 0 where absent). Plain `for`
        // loops: a `for_each` closure was compiled outside the caller's AVX-512 wrapper.
        match (w, b) {
            (Some(w), Some(b)) => {
                for ((v, &w), &b) in block.iter_mut().zip(w).zip(b) {
                    *v = *v * w + b;
                }
            }
            (Some(w), None) => {
                for (v, &w) in block.iter_mut().zip(w) {
                    *v = *v * w + 0.0;
                }
            }
            (None, Some(b)) => {
                for (v, &b) in block.iter_mut().zip(b) {
                    *v = *v * 1.0 + b;
                }
            }
            (None, None) => {
                for v in block.iter_mut() {
                    *v = *v * 1.0 + 0.0;
                }
            }
        }
        return;
    }
    for (p, c) in block.chunks_mut(inner).enumerate() {
        let (wv, bv) = (w.map_or(1.0, |w| w[p]), b.map_or(0.0, |b| b[p]));
        for v in c {
            *v = *v * wv + bv;
        }
    }
}

/// `out[p] = Σ v[e]` over elements with parameter `p = (e / inner) % count`, `count =
/// out.len()`.
pub(crate) fn param_sums(v: &[f32], inner: usize, out: &mut [f32]) {
    let (inner, count) = (inner.max(1), out.len());
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
    out.iter_mut().zip(acc).for_each(|(o, a)| *o = a as f32);
}

/// Row-wise normalization (layer and RMS norm): every chunk of `d` elements is its own set and
/// the affine parameters run along it. Each row is read once into cache and finished there
/// (statistics, normalization and affine in one visit), instead of the general kernels' one
/// sweep over the whole tensor per step. The arithmetic is the general path's, step for step:
/// statistics in f64, `x̂ = (x - mean) · rstd` in f32, then `x̂ · w + b`.
pub(crate) struct Rows<'a> {
    /// Elements per row.
    pub(crate) d: usize,
    /// RMS norm (no mean subtraction).
    pub(crate) rms: bool,
    pub(crate) weight: Option<&'a [f32]>,
    pub(crate) bias: Option<&'a [f32]>,
}

/// Rows per parallel task: about 16K elements.
fn rows_per_task(d: usize) -> usize {
    (PARALLEL_ELEMENTS / 16 / d.max(1)).max(1)
}

/// `f(task)` for every task of whole rows, in parallel when the tensor is large; the results
/// in task order.
fn for_rows<T: Send, R: Send>(len: usize, items: Vec<T>, f: impl Fn(T) -> R + Sync + Send) -> Vec<R> {
    if len >= PARALLEL_ELEMENTS && items.len() > 1 {
        parallel::install(|| items.into_par_iter().map(f).collect())
    } else {
        items.into_iter().map(f).collect()
    }
}

/// `Σ f(a[i], b[i])` over a row in f64, with eight independent lanes (so it vectorizes).
#[inline(always)]
fn lane_sum(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f64) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let (arest, brest) = (ac.remainder(), bc.remainder());
    for (ak, bk) in ac.zip(bc) {
        for k in 0..8 {
            acc[k] += f(ak[k], bk[k]);
        }
    }
    let mut total: f64 = acc.iter().sum();
    for (&x, &y) in arest.iter().zip(brest) {
        total += f(x, y);
    }
    total
}

/// `Σ v` of a row in f64.
#[inline(always)]
fn row_sum(row: &[f32]) -> f64 {
    lane_sum(row, row, |v, _| v as f64)
}

/// The outputs of [`Rows::forward`], each written in full: `y` like `x`, and per row
/// `mean`, `rstd` and `var`.
pub(crate) struct RowStats<'a> {
    pub(crate) y: &'a mut [f32],
    pub(crate) mean: &'a mut [f32],
    pub(crate) rstd: &'a mut [f32],
    pub(crate) var: &'a mut [f32],
}

/// Where [`Rows::backward`] writes the gradients it is asked for (those that are `Some`):
/// `x` like the input, `weight` and `bias` of `d` elements; each is written in full.
pub(crate) struct RowGrads<'a> {
    pub(crate) x: Option<&'a mut [f32]>,
    pub(crate) weight: Option<&'a mut [f32]>,
    pub(crate) bias: Option<&'a mut [f32]>,
}

impl Rows<'_> {
    /// `y = x̂ · w + b` per row, with the per-row mean (0 for RMS), rstd `1/√(var + eps)`
    /// and biased variance.
    pub(crate) fn forward(&self, x: &[f32], eps: f32, out: RowStats<'_>) {
        let d = self.d.max(1);
        let RowStats { y, mean, rstd, var } = out;
        let per = rows_per_task(d);
        let items: Vec<_> = y
            .chunks_mut(per * d)
            .zip(x.chunks(per * d))
            .zip(mean.chunks_mut(per).zip(rstd.chunks_mut(per)).zip(var.chunks_mut(per)))
            .collect();
        for_rows(x.len(), items, |((y, x), ((mean, rstd), var))| {
            super::simd::vectorized(
                #[inline(always)]
                || {
                    for (i, (yr, xr)) in y.chunks_mut(d).zip(x.chunks(d)).enumerate() {
                        let n = d as f64;
                        let m = if self.rms { 0.0 } else { row_sum(xr) / n };
                        let v = (lane_sum(xr, xr, |v, _| (v as f64 - m).powi(2)) / n) as f32;
                        let (m, r) = (m as f32, 1.0 / (v + eps).sqrt());
                        (mean[i], rstd[i], var[i]) = (m, r, v);
                        for (o, &xv) in yr.iter_mut().zip(xr) {
                            *o = (xv - m) * r;
                        }
                        // `x̂ · w + b`, as the general path does it.
                        affine_block(yr, self.weight, self.bias, 1);
                    }
                },
            )
        });
    }

    /// One row of the input gradient: `g = gy · w` into the scratch `g`, then
    /// `out = rstd · (g - mean(g) - x̂ · mean(g · x̂))` (no `mean(g)` for RMS).
    #[inline(always)]
    fn input_grad_row(&self, (xr, gyr): (&[f32], &[f32]), (m, r): (f32, f32), g: &mut [f32], out: &mut [f32]) {
        match self.weight {
            Some(w) => {
                for ((o, &gv), &w) in g.iter_mut().zip(gyr).zip(w) {
                    *o = gv * w;
                }
            }
            None => g.copy_from_slice(gyr),
        }
        let n = g.len() as f64;
        let a = if self.rms { 0.0 } else { (row_sum(g) / n) as f32 };
        let b = (lane_sum(g, xr, |gv, xv| gv as f64 * ((xv - m) * r) as f64) / n) as f32;
        for ((o, &gv), &xv) in out.iter_mut().zip(g.iter()).zip(xr) {
            *o = r * (gv - a - (xv - m) * r * b);
        }
    }

    /// Gradients from the saved input and per-row statistics, each only when asked for:
    /// with `g = gy · w`, `gx = rstd · (g - mean(g) - x̂ · mean(g · x̂))` (no `mean(g)` term
    /// for RMS), `gw = Σ_rows gy · x̂` and `gb = Σ_rows gy`.
    pub(crate) fn backward(&self, (x, gy): (&[f32], &[f32]), (mean, rstd): (&[f32], &[f32]), out: RowGrads<'_>) {
        let d = self.d.max(1);
        let rows = x.len() / d;
        let (need_w, need_b) = (out.weight.is_some(), out.bias.is_some());
        let per = rows_per_task(d);
        let tasks = rows.div_ceil(per);
        let gx_chunks: Vec<Option<&mut [f32]>> = match out.x {
            Some(gx) => gx.chunks_mut(per * d).map(Some).collect(),
            None => (0..tasks).map(|_| None).collect(),
        };
        let items: Vec<_> = gx_chunks.into_iter().enumerate().collect();
        let partials = for_rows(x.len(), items, |(t, gx)| {
            super::simd::vectorized(
                #[inline(always)]
                || {
                    let first = t * per;
                    let last = (first + per).min(rows);
                    let (mut gw, mut gb) =
                        (vec![0.0f64; if need_w { d } else { 0 }], vec![0.0f64; if need_b { d } else { 0 }]);
                    let mut g = vec![0.0f32; d];
                    let mut gx = gx;
                    for i in first..last {
                        let (xr, gyr) = (&x[i * d..(i + 1) * d], &gy[i * d..(i + 1) * d]);
                        let (m, r) = (mean[i], rstd[i]);
                        if need_w {
                            for ((a, &xv), &gv) in gw.iter_mut().zip(xr).zip(gyr) {
                                *a += ((xv - m) * r * gv) as f64;
                            }
                        }
                        if need_b {
                            for (a, &gv) in gb.iter_mut().zip(gyr) {
                                *a += gv as f64;
                            }
                        }
                        if let Some(out) = gx.as_deref_mut() {
                            let out = &mut out[(i - first) * d..(i - first + 1) * d];
                            self.input_grad_row((xr, gyr), (m, r), &mut g, out);
                        }
                    }
                    [gw, gb]
                },
            )
        });
        let combine = |which: usize, out: &mut [f32]| {
            let mut total = vec![0.0f64; d];
            for p in &partials {
                total.iter_mut().zip(&p[which]).for_each(|(t, &v)| *t += v);
            }
            out.iter_mut().zip(total).for_each(|(o, v)| *o = v as f32);
        };
        if let Some(gw) = out.weight {
            combine(0, gw);
        }
        if let Some(gb) = out.bias {
            combine(1, gb);
        }
    }
}
