//! Rotary position embedding (RoPE), rotate-half convention of HF/LLaMA. Its backward is the
//! inverse rotation, itself this op, so it is differentiable to any order.

use smallvec::SmallVec;

use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{check, fail, ErrorKind, Result};
use crate::kernels::rope as k;

impl Tensor {
    /// Rotates pairs `(x[i], x[i + D/2])` of `x [.., S, D]` (usually `[B, H, S, D]`) by
    /// `θ = s · base^(-2i/D)` for positions `s = 0..S-1`:
    /// `out = x·cos(emb) + cat(-x2, x1)·sin(emb)`, `emb = cat(freqs, freqs)`.
    ///
    /// Backward: the rotation by `-θ` (the exact inverse; rotations are orthogonal).
    ///
    /// # Errors
    /// `RankMismatch` below rank 2; `InvalidArgument` when `D` is odd or `base` is not a
    /// positive finite number.
    pub fn rope(&self, base: f32) -> Result<Tensor> {
        rope_signed(self, base, 1.0)
    }
}

fn rope_signed(x: &Tensor, base: f32, sign: f64) -> Result<Tensor> {
    const OP: &str = "rope";
    if x.rank() < 2 {
        return fail(ErrorKind::RankMismatch { op: OP, expected: "rank >= 2 [.., S, D]", shape: x.shape().to_vec() });
    }
    let (s, d) = (x.shape()[x.rank() - 2], x.shape()[x.rank() - 1]);
    if d % 2 != 0 {
        return fail(ErrorKind::InvalidArgument {
            op: OP,
            arg: "x",
            reason: format!("head dimension {d} must be even"),
        });
    }
    check::positive(OP, "base", base)?;
    let y = x.try_with_data(OP, |data| {
        let (mut table, mut y) = (crate::tensor::buffer(OP, s * d)?, crate::tensor::buffer(OP, data.len())?);
        k::rotate(data, (s, d), (base as f64, sign), &mut table, &mut y);
        Ok(y)
    })?;
    let out = Tensor::from_parts(y, x.shape());
    Ok(attach(out, &[x], || RopeBackward { base, sign }))
}

struct RopeBackward {
    base: f32,
    sign: f64,
}

impl Backward for RopeBackward {
    fn name(&self) -> &'static str {
        "rope"
    }

    /// `gx = R(-θ) · gy`, built with the op itself (differentiable).
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        let _ = cx;
        Ok(SmallVec::from_elem(Some(rope_signed(gy, self.base, -self.sign)?), 1))
    }
}
