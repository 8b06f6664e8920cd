//! The engine plumbing every transform shares, through the public API only: a call of `f` on
//! fresh stand-in variables ([`call`]), gradients of some outputs with respect to them (one
//! retained capturing pass, [`crate::grad`], which writes no gradient anywhere), assembling
//! Jacobian blocks from rows or columns, and reconnecting a result computed on stand-ins to
//! the caller's tensors when a differentiable result is asked for.

use std::sync::{Arc, Mutex};

use crate::autograd::{custom_op, enable_grad, is_grad_enabled, BackwardOptions, CustomOp, GradModeGuard, Tensor};
use crate::error::{fail, ErrorKind, Result};

/// Fresh variables holding the values of `xs` (the caller's tensors are never touched).
pub(super) fn fresh(xs: &[Tensor]) -> Vec<Tensor> {
    xs.iter().map(|x| x.detach().into_variable()).collect()
}

/// One transform call: `f` evaluated on stand-ins `z` for the inputs, the `extra` tensors it
/// is differentiated along (a cotangent, tangents, vectors) as stand-ins too when the results
/// must be differentiable in them, and how the results go back to the caller. Recording stays
/// on while it lives: an outer `no_grad` is ignored, as `torch.func` does.
pub(super) struct Call {
    /// The stand-ins of the inputs.
    pub(super) z: Vec<Tensor>,
    /// `f(z)`.
    pub(super) y: Tensor,
    /// The stand-ins (with `create_graph`) or detached values of `extra`.
    pub(super) extra: Vec<Tensor>,
    /// Hands results back: constants, or reconnected to `inputs ++ extra`.
    pub(super) finish: Finish,
    _recording: GradModeGuard,
}

/// Runs `f` on stand-ins for `inputs` (see [`Call`]).
///
/// # Errors
/// Any error of `f`, unchanged.
pub(super) fn call(
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    extra: &[Tensor],
    create_graph: bool,
) -> Result<Call> {
    let recording = enable_grad();
    let z = fresh(inputs);
    let y = f(&z)?;
    let extra_z = seeds(extra, create_graph);
    let finish = Finish::new(
        z.iter().chain(&extra_z).cloned().collect(),
        inputs.iter().chain(extra).cloned().collect(),
        create_graph,
    );
    Ok(Call { z, y, extra: extra_z, finish, _recording: recording })
}

/// `Σ_k seeds[k]ᵀ · ∂outs[k]/∂leaf` for each leaf, from one retained capturing pass (with a
/// graph when `create_graph`); a leaf the outputs do not reach gets zeros. No gradient is
/// written anywhere: not on the leaves, not on a variable `f` captured.
pub(super) fn grads(
    outs: &[&Tensor],
    seeds: &[&Tensor],
    leaves: &[Tensor],
    create_graph: bool,
    serial: bool,
) -> Result<Vec<Tensor>> {
    let (outs, seeds): (Vec<&Tensor>, Vec<Option<&Tensor>>) =
        outs.iter().zip(seeds).filter(|(o, _)| o.requires_grad()).map(|(o, s)| (*o, Some(*s))).unzip();
    if outs.is_empty() {
        return leaves.iter().map(|l| Tensor::zeros(l.shape())).collect();
    }
    let options = BackwardOptions { retain_graph: true, create_graph, serial, ..BackwardOptions::default() };
    let got = crate::autograd::grad(&outs, &leaves.iter().collect::<Vec<_>>(), &seeds, options)?;
    got.into_iter().zip(leaves).map(|(g, l)| g.map_or_else(|| Tensor::zeros(l.shape()), Ok)).collect()
}

/// Fails with `ShapeMismatch { op, .. }` unless `got` has the shape `want`.
pub(super) fn same_shape(op: &'static str, want: &Tensor, got: &Tensor) -> Result<()> {
    if want.shape() == got.shape() {
        return Ok(());
    }
    fail(ErrorKind::ShapeMismatch { op, lhs: want.shape().to_vec(), rhs: got.shape().to_vec() })
}

/// Fails with `InvalidArgument { op, arg, .. }` unless `got` tensors were given, one per input.
pub(super) fn one_per_input(op: &'static str, arg: &'static str, inputs: usize, got: usize) -> Result<()> {
    if inputs == got {
        return Ok(());
    }
    fail(ErrorKind::InvalidArgument { op, arg, reason: format!("{got} tensors for {inputs} inputs") })
}

/// Fails with `NotScalar { op, .. }` unless `y` has exactly one element.
pub(super) fn scalar(op: &'static str, y: &Tensor) -> Result<()> {
    if y.numel() == 1 {
        return Ok(());
    }
    fail(ErrorKind::NotScalar { op, shape: y.shape().to_vec() })
}

/// The one-hot tensor of `shape` with a 1 at row-major index `k`.
pub(super) fn basis(shape: &[usize], k: usize) -> Result<Tensor> {
    let mut data = vec![0.0; shape.iter().product()];
    data[k] = 1.0;
    Tensor::from_vec(data, shape)
}

/// Stacks `parts` on `axis` and reshapes the result to `outer ++ inner` (zeros when there are
/// no parts, as for an empty output or input).
pub(super) fn assemble(parts: &[Tensor], axis: usize, outer: &[usize], inner: &[usize]) -> Result<Tensor> {
    let shape: Vec<usize> = outer.iter().chain(inner).copied().collect();
    if parts.is_empty() {
        return Tensor::zeros(&shape);
    }
    let refs: Vec<&Tensor> = parts.iter().collect();
    Tensor::stack(&refs, axis as isize)?.reshape(&shape)
}

/// The reverse-mode Jacobian blocks of `out` with respect to each leaf, one backward pass per
/// element of `out`: block `j` has the shape `out.shape ++ leaves[j].shape`.
pub(super) fn jacobian_rows(out: &Tensor, leaves: &[Tensor], create_graph: bool) -> Result<Vec<Tensor>> {
    let mut rows: Vec<Vec<Tensor>> = vec![Vec::with_capacity(out.numel()); leaves.len()];
    if out.requires_grad() {
        for k in 0..out.numel() {
            let seed = basis(out.shape(), k)?;
            for (r, g) in rows.iter_mut().zip(grads(&[out], &[&seed], leaves, create_graph, false)?) {
                r.push(g);
            }
        }
    }
    rows.iter().zip(leaves).map(|(r, l)| assemble(r, 0, out.shape(), l.shape())).collect()
}

/// `target` (computed on the stand-ins `leaves`) as a tensor differentiable with respect to
/// `sources` (the caller's tensors the stand-ins replace, in the same order): a [`custom_op`]
/// whose backward backpropagates through `target`'s retained graph to the stand-ins. Without
/// a graph to reconnect, `target` comes back detached.
pub(super) fn reconnect(
    target: &Tensor,
    leaves: &[Tensor],
    sources: &[Tensor],
    lock: &Arc<Mutex<()>>,
) -> Result<Tensor> {
    debug_assert_eq!(leaves.len(), sources.len());
    if !target.requires_grad() || !sources.iter().any(Tensor::requires_grad) {
        return Ok(target.detach());
    }
    let op = Reconnect { target: target.clone(), leaves: leaves.to_vec(), lock: Arc::clone(lock) };
    custom_op(op, &sources.iter().collect::<Vec<_>>())
}

/// The record of a reconnected result. `lock` is shared by every result of one transform
/// call: their passes run over the same retained graph, so they must not overlap (a second
/// pass meeting nodes another one holds would fail with `ConcurrentBackward`).
struct Reconnect {
    target: Tensor,
    leaves: Vec<Tensor>,
    lock: Arc<Mutex<()>>,
}

impl CustomOp for Reconnect {
    fn name(&self) -> &'static str {
        "func"
    }

    fn forward(&self, _inputs: &[Tensor]) -> Result<Tensor> {
        Ok(self.target.detach())
    }

    /// `gyᵀ · ∂target/∂leaves` by a nested serial pass over the retained graph. In a
    /// `create_graph` pass (recording on) the seed is a fresh stand-in too, and each gradient
    /// is itself reconnected to `inputs ++ [gy]`, so every order stays differentiable.
    fn backward(&self, inputs: &[Tensor], _y: &Tensor, gy: &Tensor, _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let _one_pass_at_a_time = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if !is_grad_enabled() {
            let g = grads(&[&self.target], &[&gy.detach()], &self.leaves, false, true)?;
            return Ok(g.into_iter().map(Some).collect());
        }
        let seed = gy.detach().into_variable();
        let g = grads(&[&self.target], &[&seed], &self.leaves, true, true)?;
        let leaves: Vec<Tensor> = self.leaves.iter().cloned().chain([seed]).collect();
        let sources: Vec<Tensor> = inputs.iter().cloned().chain([gy.clone()]).collect();
        // The new results replay the same retained graph (plus the seed's), so they share the lock.
        g.iter().map(|g| reconnect(g, &leaves, &sources, &self.lock).map(Some)).collect()
    }
}

/// How one transform call hands back its results: detached constants, or (with
/// `create_graph`) reconnected to the caller's tensors that the stand-ins replace.
pub(super) struct Finish {
    leaves: Vec<Tensor>,
    sources: Vec<Tensor>,
    lock: Arc<Mutex<()>>,
    create_graph: bool,
}

impl Finish {
    /// Results computed on `leaves`, standing in for `sources` (the same order and shapes).
    pub(super) fn new(leaves: Vec<Tensor>, sources: Vec<Tensor>, create_graph: bool) -> Finish {
        Finish { leaves, sources, lock: Arc::new(Mutex::new(())), create_graph }
    }

    /// `t` as the caller gets it.
    pub(super) fn apply(&self, t: &Tensor) -> Result<Tensor> {
        if self.create_graph {
            reconnect(t, &self.leaves, &self.sources, &self.lock)
        } else {
            Ok(t.detach())
        }
    }

    /// Every tensor of `ts` as the caller gets it.
    pub(super) fn all(&self, ts: &[Tensor]) -> Result<Vec<Tensor>> {
        ts.iter().map(|t| self.apply(t)).collect()
    }
}

/// Seeds or tangents as stand-ins: fresh variables when the result must be differentiable with
/// respect to them, plain detached values otherwise.
pub(super) fn seeds(ts: &[Tensor], create_graph: bool) -> Vec<Tensor> {
    if create_graph {
        fresh(ts)
    } else {
        ts.iter().map(Tensor::detach).collect()
    }
}
