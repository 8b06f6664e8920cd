//! Function transforms over closures of tensors, in the style of `torch.func` and
//! `torch.autograd.functional`: [`vjp`], [`jvp`], [`jacobian`] and [`jacfwd`], [`hessian`],
//! [`hvp`].
//!
//! A transform takes `f: Fn(&[Tensor]) -> Result<Tensor>` and the point `inputs`, and
//! differentiates `f` with respect to every input. It calls `f` on fresh variables holding the
//! inputs' values, so the caller's tensors are untouched, and computes every derivative with
//! [`crate::grad`] (retained, and with `create_graph` where a derivative of a derivative is
//! needed): a capturing backward pass that returns the stand-ins' gradients and writes no
//! gradient anywhere. Only the public API is used.
//!
//! | transform | computes | built on |
//! | --- | --- | --- |
//! | [`vjp`] | `f(x)`, `vᵀ·J` | one backward pass seeded with `v` |
//! | [`jacobian`] (reverse) | `J`, shape `f.shape ++ x.shape` | one backward pass per output element, seeded with a basis vector (rows) |
//! | [`jacfwd`] (forward) | the same `J` | double VJP: `Jᵀu` with a graph, then one pass per input element (columns) |
//! | [`jvp`] | `f(x)`, `J·t` | double VJP: `Jᵀu` with a graph, then one pass seeded with `t` |
//! | [`hessian`] | `H` of a scalar `f` | the reverse Jacobian of the gradient taken with `create_graph` |
//! | [`hvp`] | `f(x)`, `H·v` | double VJP: the gradient with a graph, then one pass seeded with `v` |
//!
//! **Forward mode is the double-VJP construction, always.** The engine has no tangent rules,
//! so [`jvp`], [`jacfwd`] and [`hvp`] (like [`hessian`]) backpropagate through gradients
//! computed with `create_graph`: every op of `f` needs a differentiable backward. Every
//! built-in op has one (fused records switch to differentiable ops in a `create_graph`
//! pass); an elemental op built without its second-derivative closure fails with
//! `DoubleBackwardUnsupported { op }`, naming it.
//!
//! **Results are constants** unless [`FuncOptions::create_graph`] is set (the `*_with`
//! variants): then they are differentiable with respect to the inputs (and the seed or
//! tangents), so transforms compose — a transform inside another's `f`, or a loss on a
//! gradient. Such a result is a node whose backward replays the retained graph on the
//! stand-ins, itself differentiable again in a `create_graph` pass.
//!
//! **Captured variables.** A variable that `f` captures (rather than receives) is held fixed,
//! as in `torch.func`: the transforms' passes write no `.grad` on it (first order, and the
//! `create_graph` passes of [`hessian`], [`hvp`], [`jvp`] and [`jacfwd`] alike), and only the
//! part of `f`'s graph that leads to the inputs runs backward. A differentiable result
//! (`create_graph`) depends on the inputs and the seed, tangents or vectors given, not on
//! captured variables: pass a variable as an input to differentiate with respect to it.
//!
//! ```
//! use forgia::{func, Tensor};
//! let a = Tensor::from_vec(vec![2.0, 1.0, 0.0, 3.0], &[2, 2])?;
//! let x = Tensor::from_vec(vec![1.0, -1.0], &[2, 1])?;
//! let quad = |xs: &[Tensor]| Ok(xs[0].transpose(0, 1)?.matmul(&a.matmul(&xs[0])?)?.sum_all()); // xᵀAx
//! let h = func::hessian(quad, &[x])?;
//! assert_eq!(h[0][0].shape(), &[2, 1, 2, 1]);
//! assert_eq!(h[0][0].to_vec(), vec![4.0, 1.0, 1.0, 6.0]); // A + Aᵀ
//! # Ok::<(), forgia::Error>(())
//! ```

mod forward;
mod graph;
mod reverse;

pub use forward::{hvp, hvp_with, jacfwd, jvp, jvp_with};
pub use reverse::{hessian, hessian_with, jacobian, vjp, vjp_with};

use crate::autograd::Tensor;
use crate::error::Result;

/// Options of the `*_with` transforms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuncOptions {
    /// Return results that are differentiable with respect to the inputs (and the seed,
    /// tangents or vectors given), instead of constants: the transform's backward passes run
    /// with `create_graph`, and each result replays them when backpropagated.
    pub create_graph: bool,
}

/// Which way [`jacobian_with`] builds a Jacobian.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JacobianMode {
    /// By rows: one backward pass per output element ([`jacobian`], `torch.func.jacrev`).
    #[default]
    Reverse,
    /// By columns: double VJP, one pass per input element ([`jacfwd`], `torch.func.jacfwd`).
    Forward,
}

/// [`jacobian`] or [`jacfwd`] by `mode`, with options: with `create_graph` the blocks are
/// differentiable with respect to the inputs.
///
/// ```
/// use forgia::func::{self, FuncOptions, JacobianMode};
/// use forgia::Tensor;
/// let x = Tensor::variable(vec![3.0], &[1])?;
/// let options = FuncOptions { create_graph: true };
/// let j = func::jacobian_with(|xs| xs[0].mul(&xs[0]), &[x.clone()], JacobianMode::Forward, options)?;
/// j[0].sum_all().backward()?; // d/dx 2x = 2
/// assert_eq!(x.grad().unwrap().to_vec(), vec![2.0]);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// As [`jacobian`] or [`jacfwd`].
pub fn jacobian_with(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    mode: JacobianMode,
    options: FuncOptions,
) -> Result<Vec<Tensor>> {
    match mode {
        JacobianMode::Reverse => reverse::jacrev(&f, inputs, options),
        JacobianMode::Forward => forward::jacfwd_with(&f, inputs, options),
    }
}
