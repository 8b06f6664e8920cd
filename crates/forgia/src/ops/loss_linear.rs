//! The fused linear–cross-entropy loss (the spec's `LinearCrossEntropy`):
//! `cross_entropy(hidden · Wᵀ + b, labels)` without ever holding the `[tokens, vocabulary]`
//! logits in full. The forward runs over chunks of tokens, keeping only each row's
//! log-sum-exp; the backward recomputes each chunk's logits and turns them into the chunk's
//! share of the three gradients at once.

use smallvec::SmallVec;

use super::loss::{class_targets, combine, gy_rows, row_weights, CrossEntropyOptions, Reduction};
use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{check, fail, within, ErrorKind, Result};
use crate::kernels::gemm::{gemm, MatRef};
use crate::kernels::loss as k;
use crate::kernels::softmax::row_logsumexp;
use crate::ops::index::Indices;
use crate::tensor::Array;

const OP: &str = "linear_cross_entropy";

/// Options of [`linear_cross_entropy`]: the cross-entropy's own options and how many tokens
/// each chunk holds (the peak extra memory is two `[chunk, vocabulary]` buffers).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearCrossEntropyOptions {
    /// `ignore_index`, `label_smoothing` and `reduction`, as in [`super::loss::cross_entropy`].
    pub cross_entropy: CrossEntropyOptions,
    /// Tokens per chunk (default 1024).
    pub chunk: usize,
}

impl Default for LinearCrossEntropyOptions {
    fn default() -> Self {
        LinearCrossEntropyOptions { cross_entropy: CrossEntropyOptions::default(), chunk: 1024 }
    }
}

/// `cross_entropy(hidden.linear(weight, bias), labels)` for `hidden` `[..., d]`, `weight`
/// `[V, d]` (an LM head), `bias` `[V]` and `labels` of `hidden`'s leading shape, with the
/// same value as the unfused path (up to rounding) and a fraction of its memory: logits exist
/// only one chunk of tokens at a time, in the forward and again in the backward.
///
/// Backward, per chunk, from the saved per-row log-sum-exp: `G = (softmax(logits) - target) ·
/// w_row · gy` (as [`super::loss::cross_entropy`]), then `g_hidden = G · W`,
/// `g_weight += Gᵀ · hidden`, `g_bias += Σ_rows G`. Under `create_graph` the same formulas
/// run in differentiable ops over the full logits (so second order works, at the unfused
/// path's memory).
///
/// # Errors
/// `RankMismatch` for a rank-0 `hidden` or a weight that is not rank 2; `ShapeMismatch` when
/// `d` differs, the bias is not `[V]` or the labels do not match `hidden`'s leading shape;
/// `IndexOutOfRange` for a label outside `0..V` that is not `ignore_index`; `EmptyTensor` for
/// `V = 0`; `InvalidArgument` for a zero chunk, `label_smoothing` outside `[0, 1]` or
/// `BatchMean`.
pub fn linear_cross_entropy(
    hidden: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    labels: &Indices,
    options: LinearCrossEntropyOptions,
) -> Result<Tensor> {
    within("linear_cross_entropy", || {
        let ce = options.cross_entropy;
        check::positive_count(OP, "chunk", options.chunk as u64)?;
        check::unit_interval(OP, "label_smoothing", ce.label_smoothing)?;
        if ce.reduction == Reduction::BatchMean {
            let reason = "BatchMean is for elementwise losses".into();
            return fail(ErrorKind::InvalidArgument { op: OP, arg: "reduction", reason });
        }
        let (v, d) = check_shapes(hidden, weight, bias, labels)?;
        let targets = class_targets(OP, labels, v, ce.ignore_index)?;
        let geometry = Geometry { tokens: targets.len(), d, v, chunk: options.chunk.min(targets.len().max(1)) };
        let (h, w) = (hidden.contiguous_data(OP)?, weight.contiguous_data(OP)?);
        let b = bias.map(|b| b.contiguous_data(OP)).transpose()?;
        let mut lse = vec![(0.0, 0.0); geometry.tokens];
        let mut rows = vec![0.0; geometry.tokens];
        let mut logits = crate::tensor::buffer(OP, geometry.chunk * v)?;
        for (s, m) in geometry.chunks() {
            let block = &mut logits[..m * v];
            geometry.logits(h.packed(), w.packed(), b.as_ref().map(|b| b.packed()), s, block);
            row_logsumexp(block, v, &mut lse[s..s + m]);
            k::cross_entropy_rows(
                block,
                v,
                &lse[s..s + m],
                &targets[s..s + m],
                ce.label_smoothing,
                &mut rows[s..s + m],
            );
        }
        let (out, count) = combine(rows, &targets, ce.reduction);
        let out = if ce.reduction == Reduction::None { out.reshape(labels.shape())? } else { out };
        let inputs: SmallVec<[&Tensor; 3]> = [Some(hidden), Some(weight), bias].into_iter().flatten().collect();
        Ok(attach(out, &inputs, || LinearCrossEntropyBackward {
            h: h.value(),
            w: w.value(),
            b: b.map(|b| b.value()),
            lse,
            targets,
            eps: ce.label_smoothing,
            reduction: ce.reduction,
            count,
            geometry,
        }))
    })
}

/// `(V, d)` after checking every shape.
fn check_shapes(hidden: &Tensor, weight: &Tensor, bias: Option<&Tensor>, labels: &Indices) -> Result<(usize, usize)> {
    if hidden.rank() == 0 {
        return fail(ErrorKind::RankMismatch { op: OP, expected: "rank >= 1 [..., d]", shape: vec![] });
    }
    if weight.rank() != 2 {
        return fail(ErrorKind::RankMismatch {
            op: OP,
            expected: "a rank-2 weight [V, d]",
            shape: weight.shape().to_vec(),
        });
    }
    let (v, d) = (weight.shape()[0], weight.shape()[1]);
    let lead = &hidden.shape()[..hidden.rank() - 1];
    let mismatch =
        |rhs: &[usize]| fail(ErrorKind::ShapeMismatch { op: OP, lhs: hidden.shape().to_vec(), rhs: rhs.to_vec() });
    if hidden.shape()[hidden.rank() - 1] != d {
        return mismatch(weight.shape());
    }
    if let Some(b) = bias.filter(|b| b.shape() != [v]) {
        return mismatch(b.shape());
    }
    if labels.shape() != lead {
        return mismatch(labels.shape());
    }
    if v == 0 {
        return fail(ErrorKind::EmptyTensor { op: OP, shape: weight.shape().to_vec() });
    }
    Ok((v, d))
}

/// Sizes of one fused loss: tokens, model width, vocabulary, tokens per chunk.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    tokens: usize,
    d: usize,
    v: usize,
    chunk: usize,
}

impl Geometry {
    /// `(first token, tokens)` of each chunk.
    fn chunks(&self) -> impl Iterator<Item = (usize, usize)> {
        let (t, c) = (self.tokens, self.chunk);
        (0..t).step_by(c.max(1)).map(move |s| (s, c.min(t - s)))
    }

    /// The logits of tokens `s..s + m` into `out` (`[m, V]`): `h_rows · Wᵀ + b`.
    fn logits(&self, h: &[f32], w: &[f32], b: Option<&[f32]>, s: usize, out: &mut [f32]) {
        let m = out.len() / self.v;
        let d = self.d as isize;
        let hm = MatRef { data: h, offset: s * self.d, row_stride: d, col_stride: 1 };
        let wt = MatRef { data: w, offset: 0, row_stride: 1, col_stride: d };
        gemm(m, self.v, self.d, hm, wt, out, false, 1.0);
        if let Some(b) = b {
            crate::kernels::norm::affine(out, None, Some(b), 1);
        }
    }
}

struct LinearCrossEntropyBackward {
    h: Array,
    w: Array,
    b: Option<Array>,
    /// Per row `(max, log Σ exp(x - max))` of the logits.
    lse: Vec<(f32, f32)>,
    targets: Vec<Option<usize>>,
    eps: f32,
    reduction: Reduction,
    count: usize,
    geometry: Geometry,
}

impl LinearCrossEntropyBackward {
    /// The smoothed target's value off and at the class.
    fn target_values(&self) -> (f32, f32) {
        let off = self.eps / self.geometry.v as f32;
        (off, off + (1.0 - self.eps))
    }

    /// The three gradients in differentiable ops over the full logits (`create_graph`), into
    /// `out`.
    fn grads_tensor(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let Geometry { tokens, d, v, .. } = self.geometry;
        let h = cx.input(0, &self.h).reshape(&[tokens, d])?;
        let w = cx.input(1, &self.w);
        let b = self.b.as_ref().map(|b| cx.input(2, b));
        let mut hot = crate::tensor::buffer(OP, tokens * v)?;
        k::one_hot_rows(&self.targets, v, self.target_values(), &mut hot);
        let scale = row_weights(&self.targets, self.reduction, self.count).mul(&gy_rows(gy)?)?;
        let g = h.linear(&w, b.as_ref())?.softmax(1)?.sub(&Tensor::from_parts(hot, &[tokens, v]))?.mul(&scale)?;
        empty_slots(out, 2 + self.b.is_some() as usize);
        if cx.needs_grad(0) {
            out[0] = Some(g.matmul(&w)?.reshape(self.h.shape())?);
        }
        if cx.needs_grad(1) {
            out[1] = Some(g.transpose(0, 1)?.matmul(&h)?);
        }
        if self.b.is_some() && cx.needs_grad(2) {
            out[2] = Some(g.sum(0, false)?);
        }
        Ok(())
    }
}

impl Backward for LinearCrossEntropyBackward {
    fn name(&self) -> &'static str {
        OP
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        if cx.create_graph() {
            return self.grads_tensor(cx, gy, out);
        }
        let geo = self.geometry;
        let (v, d) = (geo.v, geo.d);
        let (h, w, b) = (self.h.packed(), self.w.packed(), self.b.as_ref().map(|b| b.packed()));
        let g = gy.to_vec();
        let wr = row_weights(&self.targets, self.reduction, self.count);
        let wr = wr.packed();
        let scale = |r: usize| wr[r] * if g.len() == 1 { g[0] } else { g[r] };
        let want = [cx.needs_grad(0), cx.needs_grad(1), self.b.is_some() && cx.needs_grad(2)];
        let mut gh = if want[0] { crate::tensor::zeroed(OP, geo.tokens * d)? } else { Vec::new() };
        let mut gw = if want[1] { crate::tensor::zeroed(OP, v * d)? } else { Vec::new() };
        let mut gb = if want[2] { crate::tensor::zeroed(OP, v)? } else { Vec::new() };
        let mut logits = crate::tensor::buffer(OP, geo.chunk * v)?;
        let mut glog = crate::tensor::buffer(OP, geo.chunk * v)?;
        for (s, m) in geo.chunks() {
            let (block, gblock) = (&mut logits[..m * v], &mut glog[..m * v]);
            geo.logits(h, w, b, s, block);
            let rows = s..s + m;
            k::cross_entropy_grad(
                block,
                v,
                &self.lse[rows.clone()],
                &self.targets[rows],
                self.target_values(),
                |r| scale(s + r),
                gblock,
            );
            let gm = MatRef { data: gblock, offset: 0, row_stride: v as isize, col_stride: 1 };
            if want[0] {
                let wm = MatRef { data: w, offset: 0, row_stride: d as isize, col_stride: 1 };
                gemm(m, d, v, gm, wm, &mut gh[s * d..(s + m) * d], false, 1.0);
            }
            if want[1] {
                let gt = MatRef { data: gblock, offset: 0, row_stride: 1, col_stride: v as isize };
                let hm = MatRef { data: h, offset: s * d, row_stride: d as isize, col_stride: 1 };
                gemm(v, d, m, gt, hm, &mut gw, s > 0, 1.0);
            }
            if want[2] {
                k::add_column_sums(gblock, v, &mut gb);
            }
        }
        empty_slots(out, 2 + self.b.is_some() as usize);
        if want[0] {
            out[0] = Some(Tensor::from_parts(gh, self.h.shape()));
        }
        if want[1] {
            out[1] = Some(Tensor::from_parts(gw, &[v, d]));
        }
        if want[2] {
            out[2] = Some(Tensor::from_parts(gb, &[v]));
        }
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        crate::tensor::work(&[3, self.geometry.tokens, self.w.numel()])
    }
}
