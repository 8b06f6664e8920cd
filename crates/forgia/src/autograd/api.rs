//! The gradient API on [`Tensor`]: backward entry points, reading and resetting gradients.

use std::sync::atomic::Ordering;

use super::engine::{self, BackwardOptions};
use crate::autograd::Tensor;
use crate::error::Result;

impl Tensor {
    /// True when the tensor has a gradient node (a variable or an op result over variables).
    pub fn requires_grad(&self) -> bool {
        self.node.is_some()
    }

    /// True for a variable (a leaf that accumulates a gradient).
    pub fn is_variable(&self) -> bool {
        self.node.as_ref().is_some_and(|n| n.is_leaf())
    }

    /// Backpropagates from this one-element output with the implicit seed 1.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let x = Tensor::variable(vec![3.0, 5.0], &[2])?;
    /// let loss = x.mul(&x)?.add(&x.scale(4.0))?.sum_all();
    /// loss.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec(), vec![10.0, 14.0]); // d/dx (x² + 4x) = 2x + 4
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `NoGradientGraph` on a constant; `MissingOutputGradient` when the output has more than
    /// one element (use [`Tensor::backward_with_grad`]); `BackwardAlreadyRun` on a graph
    /// already backpropagated without `retain_graph`; any error a record returns (the graph is
    /// then left idle and, if retained, runnable again).
    pub fn backward(&self) -> Result<()> {
        engine::run(&[self], &[None], BackwardOptions::default())
    }

    /// Backpropagates the cotangent `seed` (same shape as `self`): computes seedᵀ·J.
    ///
    /// # Errors
    /// As [`Tensor::backward`], plus `ShapeMismatch` for a seed of another shape.
    pub fn backward_with_grad(&self, seed: &Tensor) -> Result<()> {
        engine::run(&[self], &[Some(seed)], BackwardOptions::default())
    }

    /// Backpropagates with explicit options (`retain_graph`, `create_graph`, `serial`,
    /// `detect_anomaly`) and an optional seed.
    ///
    /// # Errors
    /// As [`Tensor::backward_with_grad`].
    pub fn backward_with(&self, seed: Option<&Tensor>, options: BackwardOptions) -> Result<()> {
        engine::run(&[self], &[seed], options)
    }

    /// Backpropagates several outputs in one pass, each with its own optional seed.
    ///
    /// # Errors
    /// As [`Tensor::backward_with_grad`]; `InvalidArgument` when the lengths differ.
    pub fn backward_many(outputs: &[&Tensor], seeds: &[Option<&Tensor>], options: BackwardOptions) -> Result<()> {
        engine::run(outputs, seeds, options)
    }

    /// The accumulated gradient: a variable's sum over passes, or an op result's gradient
    /// kept by [`Tensor::retain_grad`]. `None` for constants and untouched tensors.
    ///
    /// The snapshot is cheap (it shares the buffer) and stable: later passes never write into
    /// a buffer someone else holds.
    pub fn grad(&self) -> Option<Tensor> {
        let node = self.node.as_ref()?;
        let slot = node.grad.lock();
        let g = if node.is_leaf() { slot.acc.as_deref().cloned() } else { slot.retained().cloned() };
        g.map(|mut g| {
            g.names = self.names.clone();
            g
        })
    }

    /// Forgets the accumulated gradient (between optimizer steps). Does not make a consumed
    /// graph runnable again.
    pub fn zero_grad(&self) {
        if let Some(node) = &self.node {
            let mut slot = node.grad.lock();
            if node.is_leaf() {
                slot.acc = None;
            } else {
                slot.clear_retained();
            }
        }
    }

    /// Asks an op result to keep its gradient after backward (readable with [`Tensor::grad`]).
    pub fn retain_grad(&self) {
        if let Some(node) = &self.node {
            // Relaxed: read by the pass that fires this node, which starts after this call.
            node.flags.fetch_or(super::node::RETAIN, Ordering::Relaxed);
        }
    }

    /// The name of the op whose record produced this tensor (`"variable"` for leaves).
    pub fn grad_fn(&self) -> Option<&'static str> {
        self.node.as_ref().map(|n| n.name())
    }

    /// Replaces this variable's accumulated gradient with `grad` (`None` clears it), like
    /// assigning `param.grad` in PyTorch: for code that computes gradients elsewhere, such as
    /// data-parallel training writing back the average over ranks. `grad` is stored as a
    /// constant; a buffer someone else holds is never written later (copy on write).
    ///
    /// ```
    /// let w = forgia::Tensor::variable(vec![1.0, 2.0], &[2])?;
    /// w.assign_grad(Some(&forgia::Tensor::from_vec(vec![0.5, -0.5], &[2])?))?;
    /// assert_eq!(w.grad().unwrap().to_vec(), vec![0.5, -0.5]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` when this tensor is not a variable; `ShapeMismatch` when `grad`'s
    /// shape differs from the variable's.
    pub fn assign_grad(&self, grad: Option<&Tensor>) -> Result<()> {
        let Some(node) = self.node.as_ref().filter(|n| n.is_leaf()) else {
            return crate::error::fail(crate::error::ErrorKind::InvalidArgument {
                op: "assign_grad",
                arg: "self",
                reason: format!("only a variable holds a gradient; this tensor of shape {:?} is not one", self.shape()),
            });
        };
        if let Some(g) = grad.filter(|g| g.shape() != self.shape()) {
            return crate::error::fail(crate::error::ErrorKind::ShapeMismatch {
                op: "assign_grad",
                lhs: self.shape().to_vec(),
                rhs: g.shape().to_vec(),
            });
        }
        node.grad.lock().acc = grad.map(|g| Box::new(g.detach()));
        Ok(())
    }

    /// Replaces a variable's accumulated gradient (used by gradient clipping). The old
    /// buffer is never written, so a gradient someone holds keeps its values. No-op on
    /// constants and op results.
    pub(crate) fn set_grad(&self, grad: Tensor) {
        if let Some(node) = self.node.as_ref().filter(|n| n.is_leaf()) {
            debug_assert_eq!(grad.shape(), self.shape());
            node.grad.lock().acc = Some(Box::new(grad));
        }
    }
}
