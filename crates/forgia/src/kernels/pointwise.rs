//! Elementwise kernels: unary maps and binary maps with NumPy broadcasting. A contiguous fast
//! path, and rayon chunking above `PARALLEL_ELEMENTS`. Every loop runs through
//! [`vectorized`], so callers' per-element closures should be `#[inline(always)]`. Every map
//! writes into an `out` of the output's length that the caller allocated.

use rayon::prelude::*;

use super::simd::vectorized;
use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};
use crate::tensor::layout::offset_of;
use crate::tensor::Layout;

/// `out[i] = f(x[i])` over a packed slice, into `out` of the same length.
pub(crate) fn map(x: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32 + Sync) {
    if x.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            out.par_chunks_mut(CHUNK_ELEMENTS).zip(x.par_chunks(CHUNK_ELEMENTS)).for_each(|(o, x)| map_chunk(x, o, &f))
        });
    } else {
        map_chunk(x, out, &f);
    }
}

#[inline(always)]
fn map_chunk(x: &[f32], out: &mut [f32], f: &impl Fn(f32) -> f32) {
    vectorized(
        #[inline(always)]
        || {
            for (o, &x) in out.iter_mut().zip(x) {
                *o = f(x);
            }
        },
    )
}

#[inline(always)]
fn zip_chunk(a: &[f32], b: &[f32], out: &mut [f32], f: &impl Fn(f32, f32) -> f32) {
    vectorized(
        #[inline(always)]
        || {
            for ((o, &a), &b) in out.iter_mut().zip(a).zip(b) {
                *o = f(a, b);
            }
        },
    )
}

/// `out[i] = f(a[i], b[i])` over two packed slices of equal length (and `out` of it).
pub(crate) fn zip(a: &[f32], b: &[f32], out: &mut [f32], f: impl Fn(f32, f32) -> f32 + Sync) {
    debug_assert_eq!(a.len(), b.len());
    if a.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            out.par_chunks_mut(CHUNK_ELEMENTS)
                .zip(a.par_chunks(CHUNK_ELEMENTS).zip(b.par_chunks(CHUNK_ELEMENTS)))
                .for_each(|(o, (a, b))| zip_chunk(a, b, o, &f))
        });
    } else {
        zip_chunk(a, b, out, &f);
    }
}

/// `out[i] = f(a[i], b[i], c[i])` over three packed slices of equal length (and `out` of it).
pub(crate) fn zip3(a: &[f32], b: &[f32], c: &[f32], out: &mut [f32], f: impl Fn(f32, f32, f32) -> f32 + Sync) {
    let body = |o: &mut [f32], a: &[f32], b: &[f32], c: &[f32]| {
        vectorized(
            #[inline(always)]
            || {
                for (((o, &a), &b), &c) in o.iter_mut().zip(a).zip(b).zip(c) {
                    *o = f(a, b, c);
                }
            },
        )
    };
    if a.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            out.par_chunks_mut(CHUNK_ELEMENTS).enumerate().for_each(|(ci, o)| {
                let s = ci * CHUNK_ELEMENTS;
                let e = s + o.len();
                body(o, &a[s..e], &b[s..e], &c[s..e]);
            })
        });
    } else {
        body(out, a, b, c);
    }
}

/// `out = f(a, b)` where `a` and `b` are layouts already broadcast to the same output shape
/// (`out` is packed, of that shape's element count).
pub(crate) fn zip_broadcast(
    a: &[f32],
    la: &Layout,
    b: &[f32],
    lb: &Layout,
    out: &mut [f32],
    f: impl Fn(f32, f32) -> f32 + Sync,
) {
    let n = la.numel();
    if let (Some(ra), Some(rb)) = (la.contiguous_range(), lb.contiguous_range()) {
        return zip(&a[ra], &b[rb], out, f);
    }
    let rank = la.rank();
    if n == 0 {
        return;
    }
    if rank == 0 {
        out[0] = f(a[la.offset], b[lb.offset]);
        return;
    }
    let inner = la.shape[rank - 1];
    let rows = |first_row: usize, chunk: &mut [f32]| {
        vectorized(
            #[inline(always)]
            || broadcast_rows(a, la, b, lb, &f, first_row, chunk),
        )
    };
    if n >= PARALLEL_ELEMENTS && inner > 0 {
        let rows_per_chunk = (CHUNK_ELEMENTS / inner).max(1);
        parallel::install(|| {
            out.par_chunks_mut(rows_per_chunk * inner)
                .enumerate()
                .for_each(|(c, chunk)| rows(c * rows_per_chunk, chunk))
        });
    } else if inner > 0 {
        rows(0, out);
    }
}

/// Rows `first_row..` of a broadcast binary map into `chunk` (whole rows of the last axis).
#[inline(always)]
fn broadcast_rows(
    a: &[f32],
    la: &Layout,
    b: &[f32],
    lb: &Layout,
    f: &impl Fn(f32, f32) -> f32,
    first_row: usize,
    chunk: &mut [f32],
) {
    let rank = la.rank();
    let inner = la.shape[rank - 1];
    let (sa, sb) = (la.strides[rank - 1], lb.strides[rank - 1]);
    for (r, row) in chunk.chunks_mut(inner).enumerate() {
        let linear = (first_row + r) * inner;
        let (mut oa, mut ob) = (offset_of(la, linear) as isize, offset_of(lb, linear) as isize);
        match (sa, sb) {
            (1, 1) => {
                let (pa, pb) = (&a[oa as usize..oa as usize + inner], &b[ob as usize..ob as usize + inner]);
                for i in 0..inner {
                    row[i] = f(pa[i], pb[i]);
                }
            }
            (1, 0) => {
                let (pa, vb) = (&a[oa as usize..oa as usize + inner], b[ob as usize]);
                for i in 0..inner {
                    row[i] = f(pa[i], vb);
                }
            }
            (0, 1) => {
                let (va, pb) = (a[oa as usize], &b[ob as usize..ob as usize + inner]);
                for i in 0..inner {
                    row[i] = f(va, pb[i]);
                }
            }
            _ => {
                for v in row.iter_mut() {
                    *v = f(a[oa as usize], b[ob as usize]);
                    oa += sa;
                    ob += sb;
                }
            }
        }
    }
}

/// `acc[i] += g[i]` in place (the gradient accumulator's fast path).
pub(crate) fn add_assign(acc: &mut [f32], g: &[f32]) {
    let body = |a: &mut [f32], g: &[f32]| {
        vectorized(
            #[inline(always)]
            || {
                for (a, &g) in a.iter_mut().zip(g) {
                    *a += g;
                }
            },
        )
    };
    if acc.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            acc.par_chunks_mut(CHUNK_ELEMENTS).zip(g.par_chunks(CHUNK_ELEMENTS)).for_each(|(a, g)| body(a, g))
        });
    } else {
        body(acc, g);
    }
}
