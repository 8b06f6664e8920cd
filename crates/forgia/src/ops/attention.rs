//! Scaled dot-product attention over `[B, H, S, D]`, fused: the forward keeps one
//! log-sum-exp per query row and the backward recomputes the softmax from it. Grouped-query
//! attention reads each key/value head for its group of query heads in place; the softmax
//! extensions (boolean and key masks, sliding window, ALiBi, sinks, dropout) are options.
//! A `create_graph` pass recomputes the attention with differentiable ops (`graph.rs`).

mod bias;
mod graph;

pub use bias::alibi_slopes;

use std::sync::Arc;

use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{check, fail, ErrorKind, Result};
use crate::kernels::attention::{self as k, AttnDropout, AttnGeom, AttnGrads, Heads, MaskRef, Out};
use crate::tensor::layout::{broadcast_shapes, offset_of};
use crate::tensor::{Array, Shape};

/// Options of [`Tensor::scaled_dot_product_attention`]. Build them with
/// `..Default::default()`: later versions add fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct AttentionOptions<'a> {
    /// Lets query `i` attend only to keys `j <= i + query_offset` (PyTorch's `is_causal`,
    /// top-left aligned at offset 0).
    pub causal: bool,
    /// The position of query 0 among the keys, for the causal mask, the sliding window and
    /// ALiBi: query `i` sits at position `i + query_offset`. With a KV cache holding `n`
    /// earlier tokens and `Sk = n + Sq` keys it is `n` (`Sk - Sq`: PyTorch's
    /// `causal_lower_right`); 0 (the default) is PyTorch's top-left `is_causal`.
    pub query_offset: usize,
    /// An additive mask broadcastable to `[B, H, Sq, Sk]` (use `-inf` to block a position).
    /// It receives a gradient like any operand.
    pub mask: Option<&'a Tensor>,
    /// The score scale; `1/sqrt(D)` when `None`.
    pub scale: Option<f32>,
    /// A boolean mask broadcastable to `[B, H, Sq, Sk]`: an f32 tensor whose nonzero entries
    /// mean *may attend* (the project's mask convention, what the comparison ops return, and
    /// PyTorch's boolean `attn_mask`); zero entries are blocked. May be combined with `mask`.
    pub bool_mask: Option<&'a Tensor>,
    /// A key-padding mask `[B, Sk]`, nonzero for a real key (Hugging Face's `attention_mask`
    /// convention; PyTorch's `key_padding_mask` has the opposite sense): zero blocks key `j`
    /// of batch `b` for every query.
    pub key_mask: Option<&'a Tensor>,
    /// Allows key/value with fewer heads than the query (grouped-query attention, PyTorch's
    /// `enable_gqa`): `k`, `v` are `[B, Hkv, Sk, ·]` with `Hq` a multiple of `Hkv`, and query
    /// head `h` reads key/value head `h / (Hq / Hkv)`, in place (nothing is repeated).
    pub enable_gqa: bool,
    /// Sliding window (Mistral's `sliding_window`): query `i` (at position
    /// `i' = i + query_offset`) sees key `j` only when `i' - j < window`, and, when not causal,
    /// `j - i' < window` too. `Some(0)` is an error.
    pub window: Option<usize>,
    /// ALiBi: one slope per query head (see [`alibi_slopes`]), adding `-slope_h · |i' - j|` to
    /// the scores, `i' = i + query_offset` (for causal attention, the paper's
    /// `slope_h · (j - i')`).
    pub alibi_slopes: Option<&'a [f32]>,
    /// Attention sinks (gpt-oss): one logit per query head `[Hq]` that joins every row's
    /// softmax denominator but carries no value, so a row may attend to "nothing":
    /// `P_ij = exp(s_ij) / (exp(sink_h) + Σ_j exp(s_ij))`. It receives a gradient.
    pub sinks: Option<&'a Tensor>,
    /// Dropout on the probabilities (PyTorch's `dropout_p`), seeded and replayable.
    pub dropout: Option<AttentionDropout>,
}

/// Dropout on the attention probabilities: probability `(b, h, i, j)` of the `[B, Hq, Sq, Sk]`
/// matrix (flat row-major index `n`) is kept by the rule of [`Tensor::dropout`] (a keyed hash
/// of `(seed, n)`, read as a uniform in `[0, 1)`, is `>= p`), then scaled by `1/(1-p)`. The mask
/// is a pure function of the seed and the index and is never stored: the backward regenerates
/// it, and a checkpointed block replays it bitwise. Use a fresh seed per step and layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionDropout {
    /// The probability of dropping an entry, in `[0, 1]`.
    pub p: f32,
    /// The mask's seed.
    pub seed: u64,
}

const OP: &str = "scaled_dot_product_attention";

/// The per-block storage offsets of a mask broadcast to `[B, H, Sq, Sk]`.
fn mask_offsets(mask: &Array, full: &[usize]) -> Result<(Vec<usize>, isize, isize)> {
    let fits = mask.rank() <= 4 && broadcast_shapes(OP, mask.shape(), full).is_ok_and(|s| s.as_slice() == full);
    if !fits {
        return fail(ErrorKind::ShapeMismatch { op: OP, lhs: mask.shape().to_vec(), rhs: full.to_vec() });
    }
    let l = mask.layout.broadcast_to(full);
    let block = full[2] * full[3];
    let offsets = (0..full[0] * full[1]).map(|b| offset_of(&l, b * block)).collect();
    Ok((offsets, l.strides[2], l.strides[3]))
}

/// `t` itself (a detached view) when the kernel can address it in place — non-negative
/// strides and contiguous rows, such as the head-split view `x.reshape(B, S, H, dh)
/// .transpose(1, 2)` — else a packed copy.
fn addressable(t: &Tensor) -> Result<Tensor> {
    let l = &t.layout;
    Ok(if l.strides.iter().all(|&s| s >= 0) && (l.strides[3] == 1 || l.shape[3] <= 1) {
        t.detach()
    } else {
        t.contiguous_data(OP)?
    })
}

/// The kernel's view of an [`addressable`] rank-4 tensor.
fn heads(t: &Array) -> Heads<'_> {
    let s = &t.layout.strides;
    Heads {
        data: t.buffer_slice(),
        offset: t.layout.offset,
        batch: s[0] as usize,
        head: s[1] as usize,
        row: s[2] as usize,
    }
}

/// Whether a result shaped like `like` (`[B, H, S, W]`) is stored heads-interleaved
/// (`[B, S, H, W]`, shown through a permuted view): when `like` itself is, so that the
/// caller's `y.transpose(1, 2).reshape(B, S, H·W)` is free, and the batch alone gives every
/// worker a chunk (chunks are then one batch row, all its heads).
fn interleaved(like: &Array) -> bool {
    let sh = like.shape();
    sh[1] > 1 && sh[0] >= crate::parallel::num_threads() && like.layout.permuted(&[0, 2, 1, 3]).is_contiguous()
}

/// Where the kernel writes a result of `rows × width` per block, and how it is shown.
fn out_layout(interleave: bool, heads: usize, rows: usize, width: usize) -> Out {
    if interleave {
        Out { head: width, row: heads * width }
    } else {
        Out { head: rows * width, row: width }
    }
}

/// Wraps a kernel result `[B, H, S, W]`, stored heads-interleaved or packed.
fn result(data: Vec<f32>, shape: [usize; 4], interleave: bool) -> Tensor {
    if !interleave {
        return Tensor::from_parts(data, &shape);
    }
    let t = Tensor::from_parts(data, &[shape[0], shape[2], shape[1], shape[3]]);
    let l = t.layout.permuted(&[0, 2, 1, 3]);
    t.with_layout(l)
}

impl Tensor {
    /// `softmax(scale · q kᵀ + mask) · v` for `q [B, Hq, Sq, D]`, `k [B, Hkv, Sk, D]`,
    /// `v [B, Hkv, Sk, Dv]` → `[B, Hq, Sq, Dv]` (`Hkv = Hq` unless `enable_gqa`). The options
    /// add the softmax extensions: a boolean mask, a key-padding mask, a sliding window and
    /// ALiBi (all folded into one constant additive bias), sinks and dropout (see
    /// [`AttentionOptions`]). A query row with every key masked out gives zeros (PyTorch gives
    /// NaN). Operands with contiguous rows (such as the head-split view
    /// `x.reshape(B, S, H, dh).transpose(1, 2)`) are read in place; when the query is such a
    /// view (and there are at least as many batches as workers), the output is stored as
    /// `[B, S, H, Dv]` behind a `[B, H, S, Dv]` view, so `y.transpose(1, 2).reshape(B, S, H·Dv)`
    /// is free. Gradients follow their operand's layout the same way.
    ///
    /// Backward (fused): the forward saves only each row's log-sum-exp (`B·H·Sq` floats, the
    /// sink folded in) and the output; the backward recomputes `P = exp(scale·q kᵀ + mask - lse)`
    /// with one extra GEMM, regenerates the dropout mask `M` (0 or `1/(1-p)`), then
    /// `dV = (P ⊙ M)ᵀ dO`, `dS = P ⊙ ((dO Vᵀ) ⊙ M - rowsum(dO ⊙ O))`, `dQ = scale·dS K`,
    /// `dK = scale·dSᵀ Q` (with grouped heads, `dK` and `dV` sum over each group),
    /// `dmask = sum_to(dS)` and `dsink_h = -Σ_{b,i} exp(sink_h - lse_i) · rowsum(dO ⊙ O)_i`.
    /// We always recompute: storing `P` would save that one GEMM (a fifth of the backward's
    /// `10·B·H·Sq·Sk·D` flops) but hold `B·H·Sq·Sk` floats per layer until backward, which is
    /// cheaper only when `Sq·Sk` is small next to the activations kept anyway (`Sq·D`), i.e.
    /// `Sk ≲ D`. In a `create_graph` pass the same gradients are built from differentiable ops
    /// over a recomputed `P`, so attention is differentiable to any order.
    ///
    /// # Errors
    /// `RankMismatch` for operands that are not rank 4; `ShapeMismatch` when the batch, head,
    /// length or width axes disagree (with `enable_gqa`, when `Hkv` does not divide `Hq`), a
    /// mask does not broadcast to `[B, Hq, Sq, Sk]`, the key mask is not `[B, Sk]` or the sinks
    /// are not `[Hq]`; `InvalidArgument` for a non-finite scale, a zero window, ALiBi slopes
    /// that are not one finite value per query head, or a dropout `p` outside `[0, 1]`.
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        opts: AttentionOptions<'_>,
    ) -> Result<Tensor> {
        let g = geometry(self, key, value, &opts)?;
        let (q, v) = (self.shape(), value.shape());
        let full = [q[0], q[1], q[2], key.shape()[2]];
        if let Some(m) = opts.mask {
            bias::check_broadcast(m, &full)?;
        }
        bias::check_rest(&opts, q[1])?;
        let mask = match (opts.mask, bias::bias(&opts, full)?) {
            (Some(m), Some(b)) => Some(m.add(&b)?),
            (m, b) => m.cloned().or(b),
        };
        let mask_info = mask.as_ref().map(|m| mask_offsets(m, &full)).transpose()?;
        let (qd, kd, vd) = (addressable(self)?, addressable(key)?, addressable(value)?);
        let mask_data = mask.as_ref().map(Tensor::detach);
        let mref = mask_ref(&mask_data, &mask_info);
        let inter = interleaved(self);
        let group = if inter { g.heads } else { 1 };
        let layout = out_layout(inter, g.heads, g.sq, g.dv);
        let (mut y, mut lse) =
            (crate::tensor::buffer(OP, g.bh * g.sq * g.dv)?, crate::tensor::buffer(OP, g.bh * g.sq)?);
        let parts = g.parts(group);
        let mut buf = crate::tensor::Scratch::new(OP, g.scratch_len(parts))?;
        let scratch = k::AttnScratch { parts, buf: &mut buf };
        k::forward(&g, (heads(&qd), heads(&kd), heads(&vd)), mref, (group, layout), (&mut y, &mut lse), scratch);
        let sinks = opts.sinks.map(|s| s.to_vec());
        if let Some(s) = &sinks {
            k::ext::apply_sinks(&g, s, (group, layout), &mut y, &mut lse);
        }
        let out = result(y, [q[0], q[1], q[2], v[3]], inter);
        let mut operands: Vec<&Tensor> = vec![self, key, value];
        let mask_idx = mask.as_ref().map(|m| {
            operands.push(m);
            operands.len() - 1
        });
        let sink_idx = opts.sinks.map(|s| {
            operands.push(s);
            operands.len() - 1
        });
        let record = || AttnBackward {
            q: qd.value(),
            k: kd.value(),
            v: vd.value(),
            out: out.value(),
            lse: Arc::new(lse),
            mask: mask.as_ref().map(Tensor::value),
            sinks: opts.sinks.map(Tensor::value).zip(sinks),
            mask_idx,
            sink_idx,
            geom: g,
        };
        Ok(attach(out.clone(), &operands, record))
    }
}

/// The sizes of one call, after checking the operands' ranks and shapes, the scale and the
/// dropout.
fn geometry(q: &Tensor, k: &Tensor, v: &Tensor, opts: &AttentionOptions<'_>) -> Result<AttnGeom> {
    for t in [q, k, v] {
        if t.rank() != 4 {
            return fail(ErrorKind::RankMismatch {
                op: OP,
                expected: "rank 4 [B, H, S, D]",
                shape: t.shape().to_vec(),
            });
        }
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let mismatch =
        |a: &[usize], b: &[usize]| fail(ErrorKind::ShapeMismatch { op: OP, lhs: a.to_vec(), rhs: b.to_vec() });
    let grouped = opts.enable_gqa && ks[1] > 0 && qs[1].is_multiple_of(ks[1]);
    if qs[0] != ks[0] || qs[3] != ks[3] || (qs[1] != ks[1] && !grouped) {
        return mismatch(qs, ks);
    }
    if ks[..3] != vs[..3] {
        return mismatch(ks, vs);
    }
    let scale = opts.scale.unwrap_or(1.0 / (qs[3] as f32).sqrt());
    check::finite(OP, "scale", scale)?;
    let dropout = match opts.dropout {
        Some(d) if d.p > 0.0 => {
            check::unit_interval(OP, "dropout.p", d.p)?;
            Some(AttnDropout { seed: d.seed, p: d.p, scale: if d.p < 1.0 { 1.0 / (1.0 - d.p) } else { 0.0 } })
        }
        _ => None,
    };
    Ok(AttnGeom {
        bh: qs[0] * qs[1],
        heads: qs[1],
        sq: qs[2],
        sk: ks[2],
        d: qs[3],
        dv: vs[3],
        scale,
        // At an offset the causal mask is part of the constant bias (the kernel's triangle is
        // top-left aligned).
        causal: opts.causal && opts.query_offset == 0,
        rep: qs[1].checked_div(ks[1]).unwrap_or(1),
        dropout,
    })
}

/// The kernel's view of a mask and its per-block offsets.
fn mask_ref<'a>(mask: &'a Option<Tensor>, info: &'a Option<(Vec<usize>, isize, isize)>) -> Option<MaskRef<'a>> {
    match (mask, info) {
        (Some(m), Some((offs, rs, cs))) => {
            Some(MaskRef { data: m.buffer_slice(), offsets: offs, row_stride: *rs, col_stride: *cs })
        }
        _ => None,
    }
}

/// The record: the operands as read (`q`, `k`, `v`), the output, each row's log-sum-exp, the
/// combined additive mask (the caller's plus the constant bias) and the sinks, with their
/// operand slots.
struct AttnBackward {
    q: Array,
    k: Array,
    v: Array,
    out: Array,
    lse: Arc<Vec<f32>>,
    mask: Option<Array>,
    /// The sinks as saved, and their values.
    sinks: Option<(Array, Vec<f32>)>,
    mask_idx: Option<usize>,
    sink_idx: Option<usize>,
    geom: AttnGeom,
}

impl Backward for AttnBackward {
    fn name(&self) -> &'static str {
        OP
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        if cx.create_graph() {
            return graph::vjp(self, cx, gy, out);
        }
        let g = &self.geom;
        let gy = addressable(gy)?;
        let (mut dq, mut dk, mut dv) = (
            crate::tensor::buffer(OP, self.q.numel())?,
            crate::tensor::buffer(OP, self.k.numel())?,
            crate::tensor::buffer(OP, self.v.numel())?,
        );
        let need_mask = self.mask_idx.is_some_and(|i| cx.needs_grad(i));
        let mut ds = if need_mask { crate::tensor::buffer(OP, g.bh * g.sq * g.sk)? } else { Vec::new() };
        let [b, hq] = [self.q.shape()[0], self.q.shape()[1]];
        let full: Shape = [b, hq, g.sq, g.sk].as_slice().into();
        let mask_info = self.mask.as_ref().map(|m| mask_offsets(m, &full)).transpose()?;
        let mask = self.mask.as_ref().map(Tensor::from);
        let mref = mask_ref(&mask, &mask_info);
        let inter = [&self.q, &self.k, &self.v].map(interleaved);
        // A chunk holds whole groups of query heads, so that it owns their key/value gradients.
        let group = if inter.iter().any(|&i| i) { g.heads } else { g.rep };
        let kv_heads = self.k.shape()[1];
        let layouts = [
            out_layout(inter[0], g.heads, g.sq, g.d),
            out_layout(inter[1], kv_heads, g.sk, g.d),
            out_layout(inter[2], kv_heads, g.sk, g.dv),
        ];
        let ds_out = need_mask.then_some(ds.as_mut_slice());
        let grads = AttnGrads { dq: &mut dq, dk: &mut dk, dv: &mut dv, ds: ds_out, group, layouts };
        let parts = g.parts(group);
        let mut buf = crate::tensor::Scratch::new(OP, g.scratch_len(parts))?;
        k::backward(
            g,
            (heads(&self.q), heads(&self.k), heads(&self.v)),
            (heads(&self.out), &self.lse, heads(&gy)),
            mref,
            grads,
            k::AttnScratch { parts, buf: &mut buf },
        );
        empty_slots(out, 3 + self.mask.is_some() as usize + self.sinks.is_some() as usize);
        for (i, (data, like)) in [(dq, &self.q), (dk, &self.k), (dv, &self.v)].into_iter().enumerate() {
            if !cx.needs_grad(i) {
                continue;
            }
            let sh = like.shape();
            out[i] = Some(result(data, [sh[0], sh[1], sh[2], sh[3]], inter[i]));
        }
        if let Some(i) = self.mask_idx.filter(|_| need_mask) {
            // In the broadcast shape [B, H, Sq, Sk]: the engine sums it back to the mask's.
            out[i] = Some(Tensor::from_parts(ds, &full));
        }
        if let (Some(i), Some((_, s))) = (self.sink_idx, &self.sinks) {
            if cx.needs_grad(i) {
                let mut d = crate::tensor::buffer(OP, hq)?;
                k::ext::sink_grads(g, s, (heads(&self.out), heads(&gy)), &self.lse, &mut d);
                out[i] = Some(Tensor::from_parts(d, &[hq]));
            }
        }
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        let g = &self.geom;
        crate::tensor::work(&[5, g.bh, g.sq, g.sk, g.d.saturating_add(g.dv)])
    }
}
