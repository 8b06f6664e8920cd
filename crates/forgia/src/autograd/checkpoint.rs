//! Activation checkpointing: run a block without keeping its intermediates, keep only its
//! inputs and output, and rebuild its subgraph during backward by running it again — a nested,
//! serial backward pass of the engine over the recomputed subgraph.

use std::sync::Arc;

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
/// when the recomputed output does not depend on any input that needs a gradient. In a
/// `create_graph` pass the gradients are differentiable: they are themselves a checkpoint of
/// the block's vector–Jacobian product (recomputed, with a graph, whenever they are
/// differentiated), so every order works when every op of the block is differentiable.
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
    run(Arc::new(move |xs: &[Tensor]| block(&context, xs)), inputs, false)
}

/// A checkpointed block with its context bound (shared by a checkpoint's record and the
/// records of its differentiable gradients).
type Block = Arc<dyn Fn(&[Tensor]) -> Result<Tensor> + Send + Sync>;

/// Runs `block` without recording and attaches the record that recomputes it. `lenient`:
/// a recompute that does not depend on the inputs contributes no gradient instead of failing
/// (the gradient checkpoint of a `create_graph` pass, which may be constant in some inputs).
fn run(block: Block, inputs: &[&Tensor], lenient: bool) -> Result<Tensor> {
    let saved: Vec<Tensor> = inputs.iter().map(|t| t.detach()).collect();
    let output = {
        let _guard = no_grad();
        block(&saved)?.detach()
    };
    Ok(attach(output, inputs, move || CheckpointBackward {
        block,
        inputs: saved.iter().map(Tensor::value).collect(),
        lenient,
    }))
}

/// The gradient of a checkpointed `block` as a block of its own: given `inputs ++ [gy]`, the
/// vector–Jacobian products `gyᵀ·∂block/∂inputs[i]` for the inputs marked in `want`,
/// flattened and concatenated. The products come from a nested `create_graph` pass over the
/// recomputed block, so when this runs as the recompute of a checkpoint (its arguments are
/// then that recompute's stand-in variables) the result is differentiable in them: every
/// order goes through the same code.
fn gradient_block(block: Block, want: Vec<bool>) -> Block {
    Arc::new(move |xs: &[Tensor]| {
        let (inputs, gy) = xs.split_at(xs.len() - 1);
        let gy = &gy[0];
        let _recording = set_grad_enabled(true);
        // A recompute hands in variables, which must stay the leaves the result depends on;
        // the first run hands in constants, which need stand-ins to collect the gradients.
        let handed_in = xs.iter().any(Tensor::is_variable);
        let leaves: Vec<Tensor> = inputs
            .iter()
            .zip(&want)
            .map(|(x, &w)| if w && !x.is_variable() { x.detach().into_variable() } else { x.clone() })
            .collect();
        let y = block(&leaves)?;
        if y.requires_grad() {
            let options = BackwardOptions { create_graph: handed_in, ..BackwardOptions::default() };
            engine::run_with(&[&y], &[Some(gy)], options, engine::Drain::Inline)?;
        }
        let mut parts = Vec::with_capacity(leaves.len());
        for (leaf, _) in leaves.iter().zip(&want).filter(|(_, &w)| w) {
            let g = leaf.grad().map_or_else(|| Tensor::zeros(leaf.shape()), Ok)?;
            parts.push(g.reshape(&[leaf.numel()])?);
        }
        // The leaves are this block's own (fresh, or the enclosing recompute's stand-ins, whose
        // pass starts only after this returns): clear them so nothing is counted twice.
        leaves.iter().for_each(Tensor::zero_grad);
        Tensor::concat(&parts.iter().collect::<Vec<_>>(), 0)
    })
}

/// The record of a checkpoint: the block (its context bound), and detached handles to the
/// inputs. No intermediate of the block is kept.
struct CheckpointBackward {
    block: Block,
    inputs: Vec<Array>,
    lenient: bool,
}

impl CheckpointBackward {
    /// The backward of a `create_graph` pass: the gradients are themselves a checkpoint of
    /// [`gradient_block`] over the reconnected inputs and `gy`, split back per input. Nothing
    /// of the recompute is kept; differentiating them recomputes the block again.
    fn graph_backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        let want: Vec<bool> = (0..self.inputs.len()).map(|i| cx.needs_grad(i)).collect();
        let mut args: Vec<Tensor> = self.inputs.iter().enumerate().map(|(i, x)| cx.input(i, x)).collect();
        args.push(gy.clone());
        let flat = run(gradient_block(self.block.clone(), want.clone()), &args.iter().collect::<Vec<_>>(), true)?;
        let mut grads: Grads = SmallVec::with_capacity(self.inputs.len());
        let mut at = 0;
        for (x, w) in self.inputs.iter().zip(want) {
            grads.push(if w {
                let g = flat.narrow(0, at, x.numel())?.reshape(x.shape())?;
                at += x.numel();
                Some(g)
            } else {
                None
            });
        }
        Ok(grads)
    }
}

impl Backward for CheckpointBackward {
    fn name(&self) -> &'static str {
        "checkpoint"
    }

    /// Re-runs the block with recording on over fresh variables standing in for the inputs
    /// that need a gradient, backpropagates `gy` through the rebuilt subgraph in a nested
    /// serial pass, and returns the stand-ins' gradients. A `create_graph` pass goes through
    /// [`CheckpointBackward::graph_backward`] instead.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        if cx.create_graph() {
            return self.graph_backward(cx, gy);
        }
        let leaves: Vec<Tensor> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(i, x)| if cx.needs_grad(i) { Tensor::from(x).into_variable() } else { Tensor::from(x) })
            .collect();
        let recomputed = {
            let _mode = set_grad_enabled(true);
            (self.block)(&leaves)
        };
        let recomputed = recomputed
            .map_err(|e| Error::from(ErrorKind::Nested { context: "checkpoint recompute", source: Box::new(e) }))?;
        if !recomputed.requires_grad() {
            if self.lenient {
                return Ok(SmallVec::from_elem(None, leaves.len()));
            }
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
