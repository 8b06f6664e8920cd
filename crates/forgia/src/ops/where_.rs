//! Selection by a mask: `where_(mask, a, b)` and `masked_fill(mask, value)`. A mask is an
//! ordinary tensor read as PyTorch reads a bool tensor made from floats: any nonzero value
//! (NaN included) is true. It broadcasts against the operands and is never differentiated.

use super::binary::broadcast_names;
use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::pointwise;
use crate::tensor::layout::broadcast_shapes;
use crate::tensor::names;
use crate::tensor::Array;

/// `mask ? a : b` over the broadcast shape of the three (no checks, no node).
fn select(op: &'static str, mask: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let ab = broadcast_shapes(op, a.shape(), b.shape())?;
    let shape = broadcast_shapes(op, mask.shape(), &ab)?;
    let packed = |t: &Tensor| crate::tensor::gather(op, t.storage().as_slice(), &t.layout.broadcast_to(&shape));
    let (m, va, vb) = (packed(mask)?, packed(a)?, packed(b)?);
    let mut data = crate::tensor::buffer(op, m.len())?;
    pointwise::zip3(&m, &va, &vb, &mut data, |m, a, b| if m != 0.0 { a } else { b });
    let mut out = Tensor::from_parts(data, &shape);
    let ab_names = broadcast_names(op, a, b, ab.len())?;
    out.names = names::broadcast(op, mask.names.as_ref(), mask.rank(), ab_names.as_ref(), ab.len(), shape.len())?;
    Ok(out)
}

impl Tensor {
    /// `mask ? a : b` elementwise, with the three shapes broadcast together. A nonzero mask
    /// value selects `a` (PyTorch's truth of a float, NaN included); the mask is a constant:
    /// no gradient flows into it.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let mask = Tensor::from_vec(vec![1.0, 0.0], &[2])?;
    /// let a = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
    /// let y = Tensor::where_(&mask, &a, &Tensor::scalar(-1.0))?;
    /// assert_eq!(y.to_vec(), vec![1.0, -1.0]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// Backward: `ga = sum_to(where(mask, gy, 0), a.shape)`,
    /// `gb = sum_to(where(mask, 0, gy), b.shape)`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn where_(mask: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let out = select("where", mask, a, b)?;
        Ok(attach(out, &[a, b], || WhereBackward { mask: mask.value() }))
    }

    /// `value` where `mask` is nonzero, `x` elsewhere. The mask broadcasts to `x`'s shape.
    ///
    /// Backward: `gx = where(mask, 0, gy)`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the mask does not broadcast to `x`'s shape (the output keeps that
    /// shape).
    pub fn masked_fill(&self, mask: &Tensor, value: f32) -> Result<Tensor> {
        let shape = broadcast_shapes("masked_fill", self.shape(), mask.shape())?;
        if shape.as_slice() != self.shape() {
            return fail(ErrorKind::ShapeMismatch {
                op: "masked_fill",
                lhs: self.shape().to_vec(),
                rhs: mask.shape().to_vec(),
            });
        }
        let fill = Tensor::scalar(value);
        let out = select("masked_fill", mask, &fill, self)?;
        Ok(attach(out, &[&fill, self], || WhereBackward { mask: mask.value() }))
    }
}

struct WhereBackward {
    mask: Array,
}

impl Backward for WhereBackward {
    fn name(&self) -> &'static str {
        "where"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, 2);
        let zero = Tensor::scalar(0.0);
        if cx.needs_grad(0) {
            out[0] = Some(Tensor::where_(&Tensor::from(&self.mask), gy, &zero)?);
        }
        if cx.needs_grad(1) {
            out[1] = Some(Tensor::where_(&Tensor::from(&self.mask), &zero, gy)?);
        }
        Ok(())
    }
}
