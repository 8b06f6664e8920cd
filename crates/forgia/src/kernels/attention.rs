//! Fused scaled-dot-product attention over `[BH, S, D]` blocks: scores by GEMM, an in-place
//! row softmax that keeps only each row's log-sum-exp, and a backward that recomputes the
//! probabilities from it instead of storing the `S × S` matrix.

use rayon::prelude::*;

use super::gemm::{gemm, MatRef};
use crate::parallel;

/// Sizes of one attention call and its optional broadcast mask.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttnGeom {
    /// Batch × heads.
    pub(crate) bh: usize,
    /// Query and key lengths, query/key width, value width.
    pub(crate) sq: usize,
    pub(crate) sk: usize,
    pub(crate) d: usize,
    pub(crate) dv: usize,
    pub(crate) scale: f32,
    pub(crate) causal: bool,
}

/// An additive mask: per `(b, h)` block, the storage offset, and its row and column strides.
#[derive(Clone, Copy)]
pub(crate) struct MaskRef<'a> {
    pub(crate) data: &'a [f32],
    /// Storage offset of block `i` is `offsets[i]`.
    pub(crate) offsets: &'a [usize],
    pub(crate) row_stride: isize,
    pub(crate) col_stride: isize,
}

fn mat(data: &[f32], offset: usize, rows_stride: usize) -> MatRef<'_> {
    MatRef { data, offset, row_stride: rows_stride as isize, col_stride: 1 }
}

fn mat_t(data: &[f32], offset: usize, rows_stride: usize) -> MatRef<'_> {
    MatRef { data, offset, row_stride: 1, col_stride: rows_stride as isize }
}

/// `s = scale · q kᵀ + mask`, with `-inf` above the diagonal when causal.
fn scores(g: &AttnGeom, b: usize, q: &[f32], k: &[f32], mask: Option<MaskRef<'_>>, s: &mut [f32]) {
    let (qo, ko) = (b * g.sq * g.d, b * g.sk * g.d);
    gemm(g.sq, g.sk, g.d, mat(q, qo, g.d), mat_t(k, ko, g.d), s, false, g.scale);
    if let Some(m) = mask {
        let base = m.offsets[b] as isize;
        for i in 0..g.sq {
            for j in 0..g.sk {
                s[i * g.sk + j] += m.data[(base + i as isize * m.row_stride + j as isize * m.col_stride) as usize];
            }
        }
    }
    if g.causal {
        for i in 0..g.sq {
            s[i * g.sk + (i + 1).min(g.sk)..(i + 1) * g.sk].fill(f32::NEG_INFINITY);
        }
    }
}

/// Runs `f(block, scratch)` for every `(b, h)` block, in parallel when there are several.
fn blocks<T: Send>(g: &AttnGeom, items: &mut [T], f: impl Fn(usize, &mut T, &mut Vec<f32>) + Sync) {
    let scratch = 2 * g.sq * g.sk;
    if g.bh > 1 {
        parallel::install(|| {
            items.par_iter_mut().enumerate().for_each_init(|| vec![0.0f32; scratch], |s, (i, t)| f(i, t, s))
        });
    } else {
        let mut s = vec![0.0f32; scratch];
        for (i, t) in items.iter_mut().enumerate() {
            f(i, t, &mut s);
        }
    }
}

/// Forward: returns the output `[BH, Sq, Dv]` and each row's log-sum-exp `[BH, Sq]`
/// (`+inf` for a row that is masked out entirely; its output is zero).
pub(crate) fn forward(
    g: &AttnGeom,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    mask: Option<MaskRef<'_>>,
) -> (Vec<f32>, Vec<f32>) {
    let mut out = crate::tensor::buffer(g.bh * g.sq * g.dv);
    let mut lse = crate::tensor::buffer(g.bh * g.sq);
    let mut items: Vec<(&mut [f32], &mut [f32])> = out.chunks_mut(g.sq * g.dv).zip(lse.chunks_mut(g.sq)).collect();
    blocks(g, &mut items, |b, (o, l), s| {
        let s = &mut s[..g.sq * g.sk];
        scores(g, b, q, k, mask, s);
        for (row, l) in s.chunks_mut(g.sk).zip(l.iter_mut()) {
            let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if m == f32::NEG_INFINITY {
                row.fill(0.0);
                *l = f32::INFINITY;
                continue;
            }
            let mut sum = 0.0f32;
            for e in row.iter_mut() {
                *e = (*e - m).exp();
                sum += *e;
            }
            let inv = 1.0 / sum;
            row.iter_mut().for_each(|e| *e *= inv);
            *l = m + sum.ln();
        }
        gemm(g.sq, g.dv, g.sk, mat(s, 0, g.sk), mat(v, b * g.sk * g.dv, g.dv), o, false, 1.0);
    });
    (out, lse)
}

/// Gradients of one attention call. `ds` (the gradient of the pre-softmax scores, for a mask
/// that needs one) is filled when given, as `[BH, Sq, Sk]`.
pub(crate) struct AttnGrads<'a> {
    pub(crate) dq: &'a mut [f32],
    pub(crate) dk: &'a mut [f32],
    pub(crate) dv: &'a mut [f32],
    pub(crate) ds: Option<&'a mut [f32]>,
}

/// Backward from the saved log-sum-exp: `P = exp(s - lse)`, `dV = Pᵀ dO`, `dP = dO Vᵀ`,
/// `dS = P ⊙ (dP - rowsum(dO ⊙ O))`, `dQ = scale · dS K`, `dK = scale · dSᵀ Q`.
pub(crate) fn backward(
    g: &AttnGeom,
    (q, k, v): (&[f32], &[f32], &[f32]),
    (o, lse, go): (&[f32], &[f32], &[f32]),
    mask: Option<MaskRef<'_>>,
    grads: AttnGrads<'_>,
) {
    let (sq, sk) = (g.sq, g.sk);
    let ds_chunks: Vec<Option<&mut [f32]>> = match grads.ds {
        Some(ds) => ds.chunks_mut(sq * sk).map(Some).collect(),
        None => (0..g.bh).map(|_| None).collect(),
    };
    let mut items: Vec<_> = grads
        .dq
        .chunks_mut(sq * g.d)
        .zip(grads.dk.chunks_mut(sk * g.d))
        .zip(grads.dv.chunks_mut(sk * g.dv))
        .zip(ds_chunks)
        .collect();
    blocks(g, &mut items, |b, (((dq, dk), dv), ds_out), scratch| {
        let (p, dp) = scratch.split_at_mut(sq * sk);
        scores(g, b, q, k, mask, p);
        for (i, row) in p.chunks_mut(sk).enumerate() {
            let l = lse[b * sq + i];
            row.iter_mut().for_each(|e| *e = (*e - l).exp());
        }
        let (go_b, o_b) = (b * sq * g.dv, b * sq * g.dv);
        gemm(sk, g.dv, sq, mat_t(p, 0, sk), mat(go, go_b, g.dv), dv, false, 1.0);
        gemm(sq, sk, g.dv, mat(go, go_b, g.dv), mat_t(v, b * sk * g.dv, g.dv), dp, false, 1.0);
        for i in 0..sq {
            let r = go_b + i * g.dv;
            let delta: f32 =
                go[r..r + g.dv].iter().zip(&o[o_b + i * g.dv..o_b + (i + 1) * g.dv]).map(|(a, b)| a * b).sum();
            for j in 0..sk {
                let e = i * sk + j;
                dp[e] = p[e] * (dp[e] - delta);
            }
        }
        if let Some(ds) = ds_out {
            ds.copy_from_slice(dp);
        }
        gemm(sq, g.d, sk, mat(dp, 0, sk), mat(k, b * sk * g.d, g.d), dq, false, g.scale);
        gemm(sk, g.d, sq, mat_t(dp, 0, sk), mat(q, b * sq * g.d, g.d), dk, false, g.scale);
    });
}
