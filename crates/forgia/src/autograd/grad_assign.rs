//! [`Tensor::assign_grad`]: setting a variable's gradient by hand (PyTorch's `p.grad = g`),
//! for tests and custom training loops.

use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};

impl Tensor {
    /// Replaces this variable's accumulated gradient with `grad`'s values (shape-checked), or
    /// clears it with `None` (as [`Tensor::zero_grad`]). The stored gradient is a constant
    /// snapshot: a gradient someone already holds keeps its values, and `grad`'s own graph is
    /// not kept. The next backward pass adds to it, as to any accumulated gradient.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let w = Tensor::variable(vec![1.0, 2.0], &[2])?;
    /// w.assign_grad(Some(&Tensor::from_vec(vec![0.5, -0.5], &[2])?))?;
    /// assert_eq!(w.grad().unwrap().to_vec(), [0.5, -0.5]);
    /// w.scale(2.0).sum_all().backward()?;
    /// assert_eq!(w.grad().unwrap().to_vec(), [2.5, 1.5]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `NoGradientGraph` when this tensor is not a variable (a constant or an op result);
    /// `ShapeMismatch` when `grad`'s shape differs from the variable's.
    pub fn assign_grad(&self, grad: Option<&Tensor>) -> Result<()> {
        if !self.is_variable() {
            return fail(ErrorKind::NoGradientGraph);
        }
        match grad {
            None => self.zero_grad(),
            Some(g) => {
                if g.shape() != self.shape() {
                    return fail(ErrorKind::ShapeMismatch {
                        op: "assign_grad",
                        lhs: self.shape().to_vec(),
                        rhs: g.shape().to_vec(),
                    });
                }
                self.set_grad(g.detach().contiguous()?);
            }
        }
        Ok(())
    }
}
