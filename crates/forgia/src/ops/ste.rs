//! Straight-through estimators: a ternary-weight matmul whose backward treats the
//! quantization as the identity for the weight.

use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::tensor::Array;

impl Tensor {
    /// `y = x · w_qᵀ` for `x [.., in]` and `w [out, in]`, where `w_q` is `w` quantized per
    /// row to `{-s, 0, s}` with `s = mean(|w_row|)` (BitNet-style ternary weights).
    ///
    /// Backward (straight-through): `gx = gy · w_q` through the quantized weight, and
    /// `gw = gyᵀ · x` as if the weight were not quantized (summed over the leading axes).
    /// Both are matmuls, so the backward is differentiable.
    ///
    /// # Errors
    /// `RankMismatch` when `x` is a scalar or `w` is not rank 2; `ShapeMismatch` when the
    /// inner sizes differ.
    pub fn ternary_ste_matmul(&self, w: &Tensor) -> Result<Tensor> {
        const OP: &str = "ternary_ste_matmul";
        if w.rank() != 2 || self.rank() == 0 {
            let shape = if w.rank() != 2 { w.shape() } else { self.shape() };
            return fail(ErrorKind::RankMismatch {
                op: OP,
                expected: "x rank >= 1 and w rank 2",
                shape: shape.to_vec(),
            });
        }
        if self.shape()[self.rank() - 1] != w.shape()[1] {
            return fail(ErrorKind::ShapeMismatch { op: OP, lhs: self.shape().to_vec(), rhs: w.shape().to_vec() });
        }
        let wq = w.try_with_data(OP, |d| {
            let mut q = crate::tensor::buffer(OP, d.len())?;
            crate::kernels::ste::ternary(d, w.shape()[1], &mut q);
            Ok(Tensor::from_parts(q, w.shape()))
        })?;
        let y = self.detach().matmul(&wq.transpose(0, 1)?)?;
        Ok(attach(y, &[self, w], || SteBackward { x: self.value(), wq: wq.value() }))
    }
}

struct SteBackward {
    x: Array,
    /// The quantized weight (a constant: its dependence on `w` is passed straight through).
    wq: Array,
}

impl Backward for SteBackward {
    fn name(&self) -> &'static str {
        "ternary_ste_matmul"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, 2);
        if cx.needs_grad(0) {
            out[0] = Some(gy.matmul(&Tensor::from(&self.wq))?);
        }
        if cx.needs_grad(1) {
            let x = cx.input(0, &self.x);
            let (o, i) = (self.wq.shape()[0], self.wq.shape()[1]);
            let g2 = gy.reshape(&[gy.numel() / o.max(1), o])?;
            let x2 = x.reshape(&[x.numel() / i.max(1), i])?;
            out[1] = Some(g2.transpose(0, 1)?.matmul(&x2)?);
        }
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        crate::tensor::work(&[4, self.x.numel(), self.wq.shape()[0]])
    }
}
