//! Gradients returned instead of accumulated: [`grad`] (PyTorch's `torch.autograd.grad`) and
//! the per-pass state behind it, [`Capture`]. A capturing pass delivers the gradients of its
//! `inputs` into slots the pass owns and writes no `.grad` anywhere: not on the inputs, not on
//! a variable the graph reaches that is not an input, not on a `retain_grad` tensor, and it
//! runs no post-accumulate-grad hook. Only the part of the graph that leads to an input runs.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::engine::{self, sum, BackwardOptions};
use super::node::{Node, Parent};
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};

/// The gradients of `outputs` with respect to `inputs`, returned rather than accumulated:
/// PyTorch's `torch.autograd.grad(outputs, inputs, grad_outputs, ...)`.
///
/// `grad_outputs` holds one optional seed per output (an empty slice: none given); a missing
/// seed is the implicit 1 of a one-element output, as in [`Tensor::backward`]. The result has
/// one entry per input: `Σ_k grad_outputs[k]ᵀ · ∂outputs[k]/∂inputs[i]`, or `None` for an
/// input the outputs do not depend on (PyTorch's `allow_unused=True`; map `None` to zeros for
/// its `materialize_grads=True`). An input may be a variable or an op result (the gradient of
/// the outputs with respect to that intermediate).
///
/// Nothing else changes: no variable's [`Tensor::grad`] — the inputs', or that of any variable
/// the graph reaches — is written, no `retain_grad` tensor keeps a gradient, no
/// post-accumulate-grad hook runs, and only the records on a path from an output to an input
/// run (the rest of the graph costs nothing). The graph is consumed unless
/// `options.retain_graph` (or `create_graph`) is set, as with `backward`. With
/// `options.create_graph` the returned gradients are differentiable: a gradient penalty, or a
/// second `grad` of a gradient (higher derivatives).
///
/// ```
/// use forgia::{grad, BackwardOptions, Tensor};
/// let x = Tensor::variable(vec![3.0], &[1])?;
/// let w = Tensor::variable(vec![2.0], &[1])?;
/// let y = x.mul(&x)?.mul(&w)?.sum_all(); // y = w·x²
/// let options = BackwardOptions { create_graph: true, ..Default::default() };
/// let g = grad(&[&y], &[&x], &[], options)?; // ∂y/∂x = 2wx
/// let gx = g[0].clone().unwrap();
/// assert_eq!(gx.to_vec(), vec![12.0]);
/// assert!(x.grad().is_none() && w.grad().is_none()); // nothing accumulated
/// let h = grad(&[&gx.sum_all()], &[&x, &w], &[], BackwardOptions::default())?;
/// assert_eq!(h[0].as_ref().unwrap().to_vec(), vec![4.0]); // ∂²y/∂x² = 2w
/// assert_eq!(h[1].as_ref().unwrap().to_vec(), vec![6.0]); // ∂²y/∂x∂w = 2x
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// `InvalidArgument { op: "grad", arg: "inputs", .. }` when an input is a constant (it has no
/// gradient); `InvalidArgument { op: "grad", arg: "grad_outputs", .. }` when `grad_outputs`
/// is neither empty nor one per output; otherwise as [`Tensor::backward_many`]
/// (`NoGradientGraph`, `MissingOutputGradient`, `ShapeMismatch`, `BackwardAlreadyRun`, any
/// error of a record). On an error nothing has been written and, with a retained graph, the
/// pass can be run again.
pub fn grad(
    outputs: &[&Tensor],
    inputs: &[&Tensor],
    grad_outputs: &[Option<&Tensor>],
    options: BackwardOptions,
) -> Result<Vec<Option<Tensor>>> {
    let implicit = vec![None; outputs.len()];
    let seeds = match grad_outputs.len() {
        0 => &implicit[..],
        n if n == outputs.len() => grad_outputs,
        n => {
            return fail(ErrorKind::InvalidArgument {
                op: "grad",
                arg: "grad_outputs",
                reason: format!("{} outputs but {n} grad_outputs", outputs.len()),
            })
        }
    };
    let capture = Capture::new(inputs)?;
    let capture = engine::run_capturing(outputs, seeds, options, capture)?;
    Ok(capture.into_results(inputs))
}

fn key(node: &Node) -> usize {
    node as *const Node as usize
}

/// The inputs of one capturing pass, which parts of the graph lead to them, and the slots
/// their gradients are summed into.
pub(super) struct Capture {
    /// Input node address → its slot (the first position it appears at).
    index: HashMap<usize, usize>,
    /// Interior node address → whether some path from it reaches an input.
    needed: HashMap<usize, bool>,
    /// The inputs' gradients, summed as they arrive (from any pool thread).
    slots: Vec<Mutex<Option<Tensor>>>,
}

impl Capture {
    /// The capture of `inputs`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the first input that is a constant.
    fn new(inputs: &[&Tensor]) -> Result<Capture> {
        let mut index = HashMap::with_capacity(inputs.len());
        for (i, t) in inputs.iter().enumerate() {
            let Some(node) = &t.node else {
                return fail(ErrorKind::InvalidArgument {
                    op: "grad",
                    arg: "inputs",
                    reason: format!("input {i} (shape {:?}) is a constant: it has no gradient", t.shape()),
                });
            };
            let next = index.len();
            index.entry(key(node)).or_insert(next);
        }
        let slots = (0..index.len()).map(|_| Mutex::new(None)).collect();
        Ok(Capture { index, needed: HashMap::new(), slots })
    }

    /// Marks every interior node reachable from `roots` that leads to an input: an iterative
    /// post-order walk (a node is decided after all its parents). Runs after the prepare walk,
    /// so every edge it reads is held by this pass.
    pub(super) fn mark<'a>(&mut self, roots: impl Iterator<Item = &'a Arc<Node>>) {
        let mut stack: Vec<(Arc<Node>, bool)> = roots.filter(|n| !n.leaf).map(|n| (n.clone(), false)).collect();
        while let Some((node, expanded)) = stack.pop() {
            let k = key(&node);
            if expanded {
                let leads = self.index.contains_key(&k) || self.any_needed_parent(&node);
                self.needed.insert(k, leads);
            } else if !self.needed.contains_key(&k) {
                // In a DAG no copy of `node` can sit above this marker before it is decided.
                // SAFETY: the walk runs after this pass's prepare walk and before its drain, on
                // the pass's thread, over nodes the prepare walk claimed: this thread owns them.
                let edge = unsafe { node.edge() };
                let parents: Vec<Arc<Node>> = edge
                    .iter()
                    .flat_map(|e| e.parents.iter().flatten().filter_map(Parent::interior).cloned())
                    .collect();
                stack.push((node, true));
                stack.extend(parents.into_iter().filter(|p| !self.needed.contains_key(&key(p))).map(|p| (p, false)));
            }
        }
    }

    fn any_needed_parent(&self, node: &Node) -> bool {
        // SAFETY: as in `mark`, its only caller: a node this pass claimed, before the drain.
        let edge = unsafe { node.edge() };
        edge.iter().flat_map(|e| e.parents.iter().flatten()).any(|p| match p {
            Parent::Interior(n) => self.needed.get(&key(n)).copied().unwrap_or(false),
            Parent::Leaf(w) => self.index.contains_key(&(w.as_ptr() as usize)),
        })
    }

    /// True when a gradient for `node` is wanted: it is an input or leads to one.
    pub(super) fn needed(&self, node: &Node) -> bool {
        let k = key(node);
        if node.leaf {
            self.index.contains_key(&k)
        } else {
            self.needed.get(&k).copied().unwrap_or(false)
        }
    }

    /// Adds `g` into `node`'s slot when `node` is an input (and drops it otherwise).
    ///
    /// # Errors
    /// `OutOfMemory` when the sum cannot be allocated.
    pub(super) fn deliver(&self, node: &Node, g: &Tensor, differentiable: bool) -> Result<()> {
        let Some(&i) = self.index.get(&key(node)) else { return Ok(()) };
        let mut slot = self.slots[i].lock();
        *slot = Some(match slot.take() {
            None => g.clone(),
            Some(acc) => sum(acc, g, differentiable).map_err(|b| b.1)?,
        });
        Ok(())
    }

    /// One gradient per input, in order (a repeated input gets the same gradient again),
    /// carrying the input's axis names.
    fn into_results(self, inputs: &[&Tensor]) -> Vec<Option<Tensor>> {
        let slots: Vec<Option<Tensor>> = self.slots.into_iter().map(Mutex::into_inner).collect();
        inputs
            .iter()
            .map(|t| {
                let node = t.node.as_ref().expect("checked in Capture::new");
                slots[self.index[&key(node)]].clone().map(|mut g| {
                    g.names = t.names.clone();
                    g
                })
            })
            .collect()
    }
}
