//! Activation checkpointing: run a block without keeping its intermediates, keep only its
//! inputs and output, and rebuild its subgraph during backward by running it again — a nested,
//! serial backward pass of the engine over the recomputed subgraph.

use smallvec::SmallVec;

use super::engine::{self, BackwardOptions};
use super::mode::{no_grad, set_grad_enabled};
use super::node::{attach, Backward, Grads, VjpCtx};
use crate::autograd::Tensor;
use crate::error::{fail, Error, ErrorKind, Result};
use crate::tensor::Array;

/// Runs `block` on `inputs` without keeping its intermediates: between forward and backward
/// only the inputs (shared, not copied) and the output stay alive. During backward the block
/// runs again on fresh copies of the inputs to rebuild its subgraph, and the incoming gradient
/// is backpropagated through it. The gradients are bitwise identical to calling the block
/// directly — compute traded for memory, not an approximation.
///
/// The contract:
/// - **Pure and deterministic.** The recompute must rebuild the exact forward values (random
///   masks must be pure functions of a seed and the element index, never ambient state).
/// - **Everything differentiable goes in `inputs`**, parameters included: the block sees
///   them as its slice, in order. Inputs that need a gradient are replaced by fresh variables
///   during the recompute; constants stay constants. Non-differentiable state (frozen
///   weights, tables, config) goes through [`checkpoint_with`]'s context. The block must not
///   capture tensors that carry a graph.
/// - Checkpoints nest: a block may itself call `checkpoint`.
///
/// ```
/// use forgia::{checkpoint, Tensor};
/// let x = Tensor::variable(vec![0.5, -1.0], &[1, 2])?;
/// let w = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// // A layer x -> tanh(x·W): its intermediates are recomputed during backward.
/// let y = checkpoint(|xs| Ok(xs[0].matmul(&xs[1])?.tanh()), &[&x, &w])?;
/// y.sum_all().backward()?;
///
/// let (x2, w2) = (x.detach().into_variable(), w.detach().into_variable());
/// x2.matmul(&w2)?.tanh().sum_all().backward()?;
/// assert_eq!(w.grad().unwrap().to_vec(), w2.grad().unwrap().to_vec()); // bitwise
/// assert_eq!(x.grad().unwrap().to_vec(), x2.grad().unwrap().to_vec());
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// Any error of the block in forward, unchanged. During backward: the block's errors wrapped
/// as `Nested { context: "checkpoint recompute", .. }`; `CheckpointOutputNotDifferentiable`
/// when the recomputed output does not depend on any input that needs a gradient;
/// `DoubleBackwardUnsupported { op: "checkpoint" }` in a `create_graph` pass.
pub fn checkpoint<F>(block: F, inputs: &[&Tensor]) -> Result<Tensor>
where
    F: Fn(&[Tensor]) -> Result<Tensor> + Send + Sync + 'static,
{
    checkpoint_with(move |_: &(), xs: &[Tensor]| block(xs), (), inputs)
}

/// [`checkpoint`] with a non-differentiable `context` handed to the block by reference on the
/// forward run and on every recompute: frozen weights, lookup tables, configuration. The
/// context never receives gradients (tensors in it should be constants) and lives until the
/// checkpoint's node is released.
///
/// ```
/// use forgia::{checkpoint_with, Tensor};
/// let frozen = Tensor::from_vec(vec![2.0, -1.0], &[2])?; // a constant: no gradient
/// let x = Tensor::variable(vec![0.3, 0.7], &[2])?;
/// let y = checkpoint_with(|w: &Tensor, xs| Ok(xs[0].mul(w)?.tanh()), frozen, &[&x])?;
/// y.sum_all().backward()?;
/// assert_eq!(x.grad().unwrap().shape(), &[2]);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// As [`checkpoint`].
pub fn checkpoint_with<C, F>(block: F, context: C, inputs: &[&Tensor]) -> Result<Tensor>
where
    C: Send + Sync + 'static,
    F: Fn(&C, &[Tensor]) -> Result<Tensor> + Send + Sync + 'static,
{
    let saved: Vec<Tensor> = inputs.iter().map(|t| t.detach()).collect();
    let output = {
        let _guard = no_grad();
        block(&context, &saved)?.detach()
    };
    Ok(attach(output, inputs, move || CheckpointBackward {
        block,
        context,
        inputs: saved.iter().map(Tensor::value).collect(),
    }))
}

/// The record of a checkpoint: the block, its context, and detached handles to the inputs.
/// No intermediate of the block is kept.
struct CheckpointBackward<C, F> {
    block: F,
    context: C,
    inputs: Vec<Array>,
}

impl<C, F> Backward for CheckpointBackward<C, F>
where
    C: Send + Sync + 'static,
    F: Fn(&C, &[Tensor]) -> Result<Tensor> + Send + Sync + 'static,
{
    fn name(&self) -> &'static str {
        "checkpoint"
    }

    /// Re-runs the block with recording on over fresh variables standing in for the inputs
    /// that need a gradient, backpropagates `gy` through the rebuilt subgraph in a nested
    /// serial pass, and returns the stand-ins' gradients.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        // The stand-ins are fresh leaves, so gradients built in a create_graph pass would
        // not depend on the real inputs: refuse instead of returning a wrong second order.
        cx.fused("checkpoint")?;
        let leaves: Vec<Tensor> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(i, x)| if cx.needs_grad(i) { Tensor::from(x).into_variable() } else { Tensor::from(x) })
            .collect();
        let recomputed = {
            let _mode = set_grad_enabled(true);
            (self.block)(&self.context, &leaves)
        };
        let recomputed = recomputed
            .map_err(|e| Error::from(ErrorKind::Nested { context: "checkpoint recompute", source: Box::new(e) }))?;
        if !recomputed.requires_grad() {
            return fail(ErrorKind::CheckpointOutputNotDifferentiable);
        }
        engine::run_with(&[&recomputed], &[Some(gy)], BackwardOptions::default(), engine::Drain::Inline)?;
        let mut grads: Grads = SmallVec::with_capacity(leaves.len());
        for (i, leaf) in leaves.iter().enumerate() {
            grads.push(if cx.needs_grad(i) { leaf.grad() } else { None });
        }
        Ok(grads)
    }
}
