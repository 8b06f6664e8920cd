//! Scaled dot-product attention over `[B, H, S, D]`, fused: the forward keeps one
//! log-sum-exp per query row and the backward recomputes the softmax from it.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{check, fail, ErrorKind, Result};
use crate::kernels::attention::{self as k, AttnGeom, AttnGrads, Heads, MaskRef, Out};
use crate::tensor::layout::{broadcast_shapes, offset_of};
use crate::tensor::{Array, Shape};

/// Options of [`Tensor::scaled_dot_product_attention`].
#[derive(Clone, Copy, Debug, Default)]
pub struct AttentionOptions<'a> {
    /// Lets query `i` attend only to keys `j <= i` (PyTorch's `is_causal`, top-left aligned).
    pub causal: bool,
    /// An additive mask broadcastable to `[B, H, Sq, Sk]` (use `-inf` to block a position).
    pub mask: Option<&'a Tensor>,
    /// The score scale; `1/sqrt(D)` when `None`.
    pub scale: Option<f32>,
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
    /// `softmax(scale · q kᵀ + mask) · v` for `q [B, H, Sq, D]`, `k [B, H, Sk, D]`,
    /// `v [B, H, Sk, Dv]` → `[B, H, Sq, Dv]`. A query row with every key masked out gives
    /// zeros (PyTorch gives NaN). Operands with contiguous rows (such as the head-split view
    /// `x.reshape(B, S, H, dh).transpose(1, 2)`) are read in place; when the query is such a
    /// view (and there are at least as many batches as workers), the output is stored as
    /// `[B, S, H, Dv]` behind a `[B, H, S, Dv]` view, so `y.transpose(1, 2).reshape(B, S, H·Dv)`
    /// is free. Gradients follow their operand's layout the same way.
    ///
    /// Backward (fused): the forward saves only each row's log-sum-exp (`B·H·Sq` floats) and
    /// the output; the backward recomputes `P = exp(scale·q kᵀ + mask - lse)` with one extra
    /// GEMM, then `dV = Pᵀ dO`, `dS = P ⊙ (dO Vᵀ - rowsum(dO ⊙ O))`, `dQ = scale·dS K`,
    /// `dK = scale·dSᵀ Q` (and `dmask = sum_to(dS)`). We always recompute: storing `P` would
    /// save that one GEMM (a fifth of the backward's `10·B·H·Sq·Sk·D` flops) but hold
    /// `B·H·Sq·Sk` floats per layer until backward, which is cheaper only when
    /// `Sq·Sk` is small next to the activations kept anyway (`Sq·D`), i.e. `Sk ≲ D`.
    ///
    /// # Errors
    /// `RankMismatch` for operands that are not rank 4; `ShapeMismatch` when the batch, head,
    /// length or width axes disagree, or the mask does not broadcast to `[B, H, Sq, Sk]`;
    /// `InvalidArgument` for a non-finite scale.
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        opts: AttentionOptions<'_>,
    ) -> Result<Tensor> {
        for t in [self, key, value] {
            if t.rank() != 4 {
                return fail(ErrorKind::RankMismatch {
                    op: OP,
                    expected: "rank 4 [B, H, S, D]",
                    shape: t.shape().to_vec(),
                });
            }
        }
        let (q, kk, v) = (self.shape(), key.shape(), value.shape());
        let mismatch =
            |a: &[usize], b: &[usize]| fail(ErrorKind::ShapeMismatch { op: OP, lhs: a.to_vec(), rhs: b.to_vec() });
        if q[..2] != kk[..2] || q[3] != kk[3] {
            return mismatch(q, kk);
        }
        if kk[..3] != v[..3] {
            return mismatch(kk, v);
        }
        let scale = opts.scale.unwrap_or(1.0 / (q[3] as f32).sqrt());
        check::finite(OP, "scale", scale)?;
        let g = AttnGeom {
            bh: q[0] * q[1],
            heads: q[1],
            sq: q[2],
            sk: kk[2],
            d: q[3],
            dv: v[3],
            scale,
            causal: opts.causal,
        };
        let full = [q[0], q[1], q[2], kk[2]];
        let mask_info = opts.mask.map(|m| mask_offsets(m, &full)).transpose()?;
        let (qd, kd, vd) = (addressable(self)?, addressable(key)?, addressable(value)?);
        let mask = opts.mask.map(Tensor::detach);
        let mref = match (&mask, &mask_info) {
            (Some(m), Some((offs, rs, cs))) => {
                Some(MaskRef { data: m.buffer_slice(), offsets: offs, row_stride: *rs, col_stride: *cs })
            }
            _ => None,
        };
        let inter = interleaved(self);
        let group = if inter { g.heads } else { 1 };
        let layout = out_layout(inter, g.heads, g.sq, g.dv);
        let (mut y, mut lse) =
            (crate::tensor::buffer(OP, g.bh * g.sq * g.dv)?, crate::tensor::buffer(OP, g.bh * g.sq)?);
        let parts = g.parts(group);
        let mut buf = crate::tensor::Scratch::new(OP, g.scratch_len(parts))?;
        let scratch = k::AttnScratch { parts, buf: &mut buf };
        k::forward(&g, (heads(&qd), heads(&kd), heads(&vd)), mref, (group, layout), (&mut y, &mut lse), scratch);
        let out = result(y, [q[0], q[1], q[2], v[3]], inter);
        let record = || AttnBackward {
            q: qd.value(),
            k: kd.value(),
            v: vd.value(),
            out: out.value(),
            lse: Arc::new(lse),
            mask: opts.mask.map(Tensor::value),
            geom: g,
        };
        Ok(match opts.mask {
            Some(m) => attach(out.clone(), &[self, key, value, m], record),
            None => attach(out.clone(), &[self, key, value], record),
        })
    }
}

struct AttnBackward {
    q: Array,
    k: Array,
    v: Array,
    out: Array,
    lse: Arc<Vec<f32>>,
    mask: Option<Array>,
    geom: AttnGeom,
}

impl Backward for AttnBackward {
    fn name(&self) -> &'static str {
        OP
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        cx.fused(OP)?;
        let g = &self.geom;
        let gy = addressable(gy)?;
        let (dq_len, dk_len, dv_len) = (self.q.numel(), self.k.numel(), self.v.numel());
        let (mut dq, mut dk, mut dv) = (
            crate::tensor::buffer(OP, dq_len)?,
            crate::tensor::buffer(OP, dk_len)?,
            crate::tensor::buffer(OP, dv_len)?,
        );
        let need_mask = self.mask.is_some() && cx.needs_grad(3);
        let mut ds = if need_mask { crate::tensor::buffer(OP, g.bh * g.sq * g.sk)? } else { Vec::new() };
        let full: Shape = [self.q.shape()[0], self.q.shape()[1], g.sq, g.sk].as_slice().into();
        let mask_info = self.mask.as_ref().map(|m| mask_offsets(m, &full)).transpose()?;
        let mref = match (&self.mask, &mask_info) {
            (Some(m), Some((offs, rs, cs))) => {
                Some(MaskRef { data: m.buffer_slice(), offsets: offs, row_stride: *rs, col_stride: *cs })
            }
            _ => None,
        };
        let inter = [&self.q, &self.k, &self.v].map(interleaved);
        let group = if inter.iter().any(|&i| i) { g.heads } else { 1 };
        let layouts = [
            out_layout(inter[0], g.heads, g.sq, g.d),
            out_layout(inter[1], g.heads, g.sk, g.d),
            out_layout(inter[2], g.heads, g.sk, g.dv),
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
        let mut out: Grads = SmallVec::from_elem(None, 3 + self.mask.is_some() as usize);
        for (i, (data, like)) in [(dq, &self.q), (dk, &self.k), (dv, &self.v)].into_iter().enumerate() {
            if cx.needs_grad(i) {
                let sh = like.shape();
                out[i] = Some(result(data, [sh[0], sh[1], sh[2], sh[3]], inter[i]));
            }
        }
        if need_mask {
            // In the broadcast shape [B, H, Sq, Sk]: the engine sums it back to the mask's.
            out[3] = Some(Tensor::from_parts(ds, &full));
        }
        Ok(out)
    }

    fn estimated_work(&self) -> usize {
        let g = &self.geom;
        10 * g.bh * g.sq * g.sk * (g.d + g.dv) / 2
    }
}
