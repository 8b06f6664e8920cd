//! Activation checkpointing: run a block without keeping its intermediates, keep only its
//! inputs and output, and rebuild its subgraph during backward by running it again — a nested,
//! serial backward pass of the engine over the recomputed subgraph.

use std::cell::Cell;
use std::sync::Arc;

use super::engine::{self, BackwardOptions};
use super::mode::{no_grad, set_grad_enabled};
use super::node::{attach, empty_slots, Backward, Grads, VjpCtx};
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
/// - **The recompute leaves out the block's final product** when the block ends in one
///   (`linear`, followed at most by `add`/`sub`, as a residual block is): its record is
///   rebuilt, its kernel does not run, as PyTorch's non-reentrant checkpoint stops early.
///   The block must not read that product's value outside ops (`to_vec`, `item`).
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
    let (output, pass) = {
        let _guard = no_grad();
        with_final(Final::Count { products: 0, clean: false }, || block(&saved))
    };
    let output = output?.detach();
    let final_product = match pass {
        Final::Count { products, clean: true } => Some(products),
        _ => None,
    };
    Ok(attach(output, inputs, move || CheckpointBackward {
        block,
        inputs: saved.iter().map(Tensor::value).collect(),
        lenient,
        final_product,
    }))
}

/// The innermost checkpoint's bookkeeping on this thread for leaving out the kernel of a
/// block's final product during its recompute (PyTorch's "early stop" of non-reentrant
/// checkpoints, for the op that costs the most in a typical block).
///
/// A block that ends in a product (`linear`), followed at most by ops whose records read no
/// values (`add`, `sub`: a residual connection), needs that product's record during backward
/// but never its value: its record keeps the product's operands, not its result, and the
/// block's output value is already known from the first run. So the recompute runs every op
/// but that product's kernel — in W7's residual block `x + Linear(gelu(Linear(x)))`, half the
/// recompute. The first run counts the block's products and whether an op whose record
/// reads values ran after the last one; the recompute counts again, leaves the matching
/// product's buffer unwritten, and checks the same way that nothing read it (a block that
/// changed its structure between runs is recomputed again in full). A block must therefore
/// not read its final product's value outside ops (`to_vec`, `item`) during the recompute.
#[derive(Clone, Copy, Default)]
enum Final {
    /// Not inside a checkpoint's run (or inside a gradient block): nothing is counted.
    #[default]
    Off,
    /// The first run: products seen so far; `clean` while no op that reads values ran after
    /// the last one.
    Count { products: usize, clean: bool },
    /// A recompute: the `target`-th product is left out (`skipped` once it was); `clean`
    /// while no op that reads values ran after it.
    Skip { products: usize, target: usize, skipped: bool, clean: bool },
}

thread_local! {
    static FINAL: Cell<Final> = const { Cell::new(Final::Off) };
}

/// Runs `f` with `state` as this thread's [`Final`] bookkeeping and returns what `f` left in
/// it; the enclosing state comes back afterwards (also when `f` panics), so nested
/// checkpoints each count their own products.
fn with_final<T>(state: Final, f: impl FnOnce() -> T) -> (T, Final) {
    struct Restore(Final);
    impl Drop for Restore {
        fn drop(&mut self) {
            FINAL.with(|c| c.set(self.0));
        }
    }
    let restore = Restore(FINAL.with(|c| c.replace(state)));
    let out = f();
    let inner = FINAL.with(Cell::get);
    drop(restore);
    (out, inner)
}

/// Asked by a product op (`linear`) before its kernel runs: true when this product is the
/// final one of a checkpointed block being recomputed, whose value nothing reads; the op then
/// leaves its output buffer unwritten and still attaches its record.
pub(crate) fn skip_final_product() -> bool {
    FINAL.with(|c| match c.get() {
        Final::Off => false,
        Final::Count { products, clean } => {
            c.set(Final::Count { products: products + 1, clean });
            false
        }
        Final::Skip { products, target, skipped, clean } => {
            let skip = products + 1 == target;
            c.set(Final::Skip { products: products + 1, target, skipped: skipped || skip, clean });
            skip
        }
    })
}

/// Told by a product op once its record is attached: nothing has read its value yet.
pub(crate) fn note_product() {
    FINAL.with(|c| match c.get() {
        Final::Off => {}
        Final::Count { products, .. } => c.set(Final::Count { products, clean: true }),
        Final::Skip { products, target, skipped, clean } => {
            let clean = clean || products == target;
            c.set(Final::Skip { products, target, skipped, clean });
        }
    })
}

/// Told by every op whose record reads values (see [`Backward::reads_values`]), recorded or
/// not.
pub(crate) fn note_reading_op() {
    FINAL.with(|c| match c.get() {
        Final::Off => {}
        Final::Count { products, .. } => c.set(Final::Count { products, clean: false }),
        Final::Skip { products, target, skipped, .. } => c.set(Final::Skip { products, target, skipped, clean: false }),
    })
}

/// The gradient of a checkpointed `block` as a block of its own: given `inputs ++ [gy]`, the
/// vector–Jacobian products `gyᵀ·∂block/∂inputs[i]` for the inputs marked in `want`,
/// flattened and concatenated. The products come from a nested `create_graph` pass over the
/// recomputed block, so when this runs as the recompute of a checkpoint (its arguments are
/// then that recompute's stand-in variables) the result is differentiable in them: every
/// order goes through the same code.
fn gradient_block(block: Block, want: Vec<bool>) -> Block {
    Arc::new(move |xs: &[Tensor]| with_final(Final::Off, || gradient_of(&block, &want, xs)).0)
}

/// The body of [`gradient_block`]: the products of the block are all computed (their values
/// feed the differentiable gradients).
fn gradient_of(block: &Block, want: &[bool], xs: &[Tensor]) -> Result<Tensor> {
    {
        let (inputs, gy) = xs.split_at(xs.len() - 1);
        let gy = &gy[0];
        let _recording = set_grad_enabled(true);
        // A recompute hands in variables, which must stay the leaves the result depends on;
        // the first run hands in constants, which need stand-ins to collect the gradients.
        let handed_in = xs.iter().any(Tensor::is_variable);
        let leaves: Vec<Tensor> = inputs
            .iter()
            .zip(want)
            .map(|(x, &w)| if w && !x.is_variable() { x.detach().into_variable() } else { x.clone() })
            .collect();
        let y = block(&leaves)?;
        if y.requires_grad() {
            let options = BackwardOptions { create_graph: handed_in, ..BackwardOptions::default() };
            engine::run_with(&[&y], &[Some(gy)], options, engine::Drain::Inline)?;
        }
        let mut parts = Vec::with_capacity(leaves.len());
        for (leaf, _) in leaves.iter().zip(want).filter(|(_, &w)| w) {
            let g = leaf.grad().map_or_else(|| Tensor::zeros(leaf.shape()), Ok)?;
            parts.push(g.reshape(&[leaf.numel()])?);
        }
        // The leaves are this block's own (fresh, or the enclosing recompute's stand-ins, whose
        // pass starts only after this returns): clear them so nothing is counted twice.
        leaves.iter().for_each(Tensor::zero_grad);
        Tensor::concat(&parts.iter().collect::<Vec<_>>(), 0)
    }
}

/// The record of a checkpoint: the block (its context bound), and detached handles to the
/// inputs. No intermediate of the block is kept.
struct CheckpointBackward {
    block: Block,
    inputs: Vec<Array>,
    lenient: bool,
    /// The block's final product, counted from its first product, when the block returns it
    /// (see [`Final`]).
    final_product: Option<usize>,
}

impl CheckpointBackward {
    /// Runs the block again over `leaves`, leaving out its final product's kernel when the
    /// first run found one (see [`Final`]); in full if the block did not return that product
    /// this time.
    fn recompute(&self, leaves: &[Tensor]) -> Result<Tensor> {
        let Some(target) = self.final_product else {
            return with_final(Final::Off, || (self.block)(leaves)).0;
        };
        let (y, pass) =
            with_final(Final::Skip { products: 0, target, skipped: false, clean: false }, || (self.block)(leaves));
        match (y, pass) {
            (Ok(_), Final::Skip { skipped: true, clean: false, .. }) => {
                with_final(Final::Off, || (self.block)(leaves)).0
            }
            (y, _) => y,
        }
    }

    /// The backward of a `create_graph` pass: the gradients are themselves a checkpoint of
    /// [`gradient_block`] over the reconnected inputs and `gy`, split back per input. Nothing
    /// of the recompute is kept; differentiating them recomputes the block again.
    fn graph_backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let want: Vec<bool> = (0..self.inputs.len()).map(|i| cx.needs_grad(i)).collect();
        let mut args: Vec<Tensor> = self.inputs.iter().enumerate().map(|(i, x)| cx.input(i, x)).collect();
        args.push(gy.clone());
        let flat = run(gradient_block(self.block.clone(), want.clone()), &args.iter().collect::<Vec<_>>(), true)?;
        out.reserve(self.inputs.len());
        let mut at = 0;
        for (x, w) in self.inputs.iter().zip(want) {
            out.push(if w {
                let g = flat.narrow(0, at, x.numel())?.reshape(x.shape())?;
                at += x.numel();
                Some(g)
            } else {
                None
            });
        }
        Ok(())
    }
}

impl Backward for CheckpointBackward {
    fn name(&self) -> &'static str {
        "checkpoint"
    }

    /// Re-runs the block with recording on over fresh variables standing in for the inputs
    /// that need a gradient, backpropagates `gy` through the rebuilt subgraph in a nested
    /// serial pass, and writes the stand-ins' gradients into `out`. A `create_graph` pass goes
    /// through [`CheckpointBackward::graph_backward`] instead.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        if cx.create_graph() {
            return self.graph_backward(cx, gy, out);
        }
        let leaves: Vec<Tensor> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(i, x)| if cx.needs_grad(i) { Tensor::from(x).into_variable() } else { Tensor::from(x) })
            .collect();
        let recomputed = {
            let _mode = set_grad_enabled(true);
            self.recompute(&leaves)
        };
        let recomputed = recomputed
            .map_err(|e| Error::from(ErrorKind::Nested { context: "checkpoint recompute", source: Box::new(e) }))?;
        if !recomputed.requires_grad() {
            if self.lenient {
                empty_slots(out, leaves.len());
                return Ok(());
            }
            return fail(ErrorKind::CheckpointOutputNotDifferentiable);
        }
        engine::run_with(&[&recomputed], &[Some(gy)], BackwardOptions::default(), engine::Drain::Inline)?;
        out.extend(leaves.iter().enumerate().map(|(i, leaf)| if cx.needs_grad(i) { leaf.grad() } else { None }));
        Ok(())
    }
}
