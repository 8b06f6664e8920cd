//! Scaled dot-product attention over `[B, H, S, D]`, fused: the forward keeps one
//! log-sum-exp per query row and the backward recomputes the softmax from it.

use std::sync::Arc;

use smallvec::SmallVec;

use super::sum_to_shape;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::attention::{self as k, AttnGeom, AttnGrads, MaskRef};
use crate::tensor::layout::{broadcast_shapes, offset_of};
use crate::tensor::{Shape, Tensor};

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
fn mask_offsets(mask: &Tensor, full: &[usize]) -> Result<(Vec<usize>, isize, isize)> {
    let fits = mask.rank() <= 4 && broadcast_shapes(OP, mask.shape(), full).is_ok_and(|s| s.as_slice() == full);
    if !fits {
        return fail(ErrorKind::ShapeMismatch { op: OP, lhs: mask.shape().to_vec(), rhs: full.to_vec() });
    }
    let l = mask.layout.broadcast_to(full);
    let block = full[2] * full[3];
    let offsets = (0..full[0] * full[1]).map(|b| offset_of(&l, b * block)).collect();
    Ok((offsets, l.strides[2], l.strides[3]))
}

impl Tensor {
    /// `softmax(scale · q kᵀ + mask) · v` for `q [B, H, Sq, D]`, `k [B, H, Sk, D]`,
    /// `v [B, H, Sk, Dv]` → `[B, H, Sq, Dv]`. A query row with every key masked out gives
    /// zeros (PyTorch gives NaN).
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
        if !scale.is_finite() {
            return fail(ErrorKind::InvalidArgument {
                op: OP,
                arg: "scale",
                reason: format!("must be finite, got {scale}"),
            });
        }
        let g = AttnGeom { bh: q[0] * q[1], sq: q[2], sk: kk[2], d: q[3], dv: v[3], scale, causal: opts.causal };
        let full = [q[0], q[1], q[2], kk[2]];
        let mask_info = opts.mask.map(|m| mask_offsets(m, &full)).transpose()?;
        let (qd, kd, vd) = (self.contiguous_data(), key.contiguous_data(), value.contiguous_data());
        let mref = match (opts.mask, &mask_info) {
            (Some(m), Some((offs, rs, cs))) => {
                Some(MaskRef { data: m.storage.as_slice(), offsets: offs, row_stride: *rs, col_stride: *cs })
            }
            _ => None,
        };
        let (y, lse) = k::forward(&g, qd.packed(), kd.packed(), vd.packed(), mref);
        let out = Tensor::from_parts(y, &[q[0], q[1], q[2], v[3]]);
        let record = || AttnBackward {
            q: qd.clone(),
            k: kd.clone(),
            v: vd.clone(),
            out: out.detach(),
            lse: Arc::new(lse),
            mask: opts.mask.map(Tensor::detach),
            geom: g,
        };
        Ok(match opts.mask {
            Some(m) => attach(out.clone(), &[self, key, value, m], record),
            None => attach(out.clone(), &[self, key, value], record),
        })
    }
}

struct AttnBackward {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Arc<Vec<f32>>,
    mask: Option<Tensor>,
    geom: AttnGeom,
}

impl Backward for AttnBackward {
    fn name(&self) -> &'static str {
        OP
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        cx.fused(OP)?;
        let g = &self.geom;
        let gy = gy.contiguous_data();
        let (mut dq, mut dk, mut dv) = (
            crate::tensor::zeroed(self.q.numel()),
            crate::tensor::zeroed(self.k.numel()),
            crate::tensor::zeroed(self.v.numel()),
        );
        let need_mask = self.mask.is_some() && cx.needs_grad(3);
        let mut ds = if need_mask { crate::tensor::zeroed(g.bh * g.sq * g.sk) } else { Vec::new() };
        let full: Shape = [self.q.shape()[0], self.q.shape()[1], g.sq, g.sk].as_slice().into();
        let mask_info = self.mask.as_ref().map(|m| mask_offsets(m, &full)).transpose()?;
        let mref = match (&self.mask, &mask_info) {
            (Some(m), Some((offs, rs, cs))) => {
                Some(MaskRef { data: m.storage.as_slice(), offsets: offs, row_stride: *rs, col_stride: *cs })
            }
            _ => None,
        };
        let grads = AttnGrads { dq: &mut dq, dk: &mut dk, dv: &mut dv, ds: need_mask.then_some(ds.as_mut_slice()) };
        k::backward(
            g,
            (self.q.packed(), self.k.packed(), self.v.packed()),
            (self.out.packed(), &self.lse, gy.packed()),
            mref,
            grads,
        );
        let mut out: Grads = SmallVec::from_elem(None, 3 + self.mask.is_some() as usize);
        for (i, (data, like)) in [(dq, &self.q), (dk, &self.k), (dv, &self.v)].into_iter().enumerate() {
            if cx.needs_grad(i) {
                out[i] = Some(Tensor::from_parts(data, like.shape()));
            }
        }
        if let (true, Some(m)) = (need_mask, &self.mask) {
            let ds = Tensor::from_parts(ds, &full);
            let extra = 4 - m.rank();
            out[3] = Some(sum_to_shape(&ds, &[vec![1; extra], m.shape().to_vec()].concat())?.reshape(m.shape())?);
        }
        Ok(out)
    }

    fn estimated_work(&self) -> usize {
        let g = &self.geom;
        10 * g.bh * g.sq * g.sk * (g.d + g.dv) / 2
    }
}
