//! Dropout with a mask that is a pure function of (seed, element index): the record keeps
//! only the seed and `p`, and regenerates the mask in backward. Replaying a block with the
//! same seed (checkpointing) gives bitwise identical values and gradients.

use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{check, Result};
use crate::kernels::dropout as k;
use crate::tensor::Shape;

impl Tensor {
    /// Zeroes each element with probability `p` and scales the rest by `1/(1-p)` (all zeros
    /// when `p == 1`); the identity when `!train` or `p == 0`. Element `i` (row-major) is kept
    /// iff `mix64(seed ^ mix64(i))`, read as a uniform in `[0, 1)`, is `>= p`.
    ///
    /// Backward: `gx = gy · mask / (1-p)`, the mask regenerated from the seed (differentiable).
    ///
    /// # Errors
    /// `InvalidArgument` when `p` is outside `[0, 1]`.
    pub fn dropout(&self, p: f32, seed: u64, train: bool) -> Result<Tensor> {
        check::unit_interval("dropout", "p", p)?;
        if !train || p == 0.0 {
            return Ok(self.clone());
        }
        let scale = scale(p);
        let y = self.try_with_data("dropout", |d| {
            // Every element is written (kept or zero), so a recycled buffer serves.
            let mut y = crate::tensor::buffer("dropout", d.len())?;
            k::apply(Some(d), seed, p, scale, &mut y);
            Ok(y)
        })?;
        let mut out = Tensor::from_parts(y, self.shape());
        out.names = self.names.clone();
        Ok(attach(out, &[self], || DropoutBackward { seed, p, shape: self.shape().into() }))
    }
}

fn scale(p: f32) -> f32 {
    if p < 1.0 {
        1.0 / (1.0 - p)
    } else {
        0.0
    }
}

/// Keeps no mask: only the seed, `p` and the shape.
struct DropoutBackward {
    seed: u64,
    p: f32,
    shape: Shape,
}

impl Backward for DropoutBackward {
    fn name(&self) -> &'static str {
        "dropout"
    }

    /// `gx = gy · mask / (1-p)`: dropout of `gy` with the same seed (one fused pass, no mask
    /// tensor), which records itself again in a `create_graph` pass.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let _ = cx;
        debug_assert_eq!(gy.shape(), &self.shape[..]);
        out.push(Some(gy.dropout(self.p, self.seed, true)?));
        Ok(())
    }
}
