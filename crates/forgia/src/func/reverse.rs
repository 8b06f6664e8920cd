//! Reverse-mode transforms: [`vjp`], the reverse-mode [`jacobian`], and [`hessian`] (the
//! reverse Jacobian of a gradient taken with a graph).

use super::graph::{call, grads, jacobian_rows, same_shape, scalar};
use super::FuncOptions;
use crate::autograd::Tensor;
use crate::error::Result;

/// The value of `f` at `inputs` and its vector–Jacobian products `vᵀ·∂f/∂inputs[i]`, one per
/// input (each of that input's shape): `torch.func.vjp` with the cotangent given at once.
///
/// Built on one backward pass seeded with `v`, over fresh variables standing in for the
/// inputs: the caller's tensors and their gradients are untouched, and the results are
/// constants. See [`vjp_with`] for a differentiable result.
///
/// ```
/// use forgia::{func, Tensor};
/// let x = Tensor::from_vec(vec![1.0, -2.0], &[2])?;
/// let v = Tensor::from_vec(vec![1.0, 0.5], &[2])?;
/// let (y, g) = func::vjp(|xs| xs[0].mul(&xs[0]), &[x], &v)?; // y = x², ∂y/∂x = diag(2x)
/// assert_eq!(y.to_vec(), vec![1.0, 4.0]);
/// assert_eq!(g[0].to_vec(), vec![2.0, -2.0]); // vᵢ · 2xᵢ
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// `ShapeMismatch { op: "vjp", lhs: f's output shape, rhs: v's shape }`;
/// any error of `f`, unchanged; any error of the backward pass.
pub fn vjp(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], v: &Tensor) -> Result<(Tensor, Vec<Tensor>)> {
    vjp_with(f, inputs, v, FuncOptions::default())
}

/// [`vjp`] with options: with `create_graph` the value and the products are differentiable
/// with respect to `inputs` and `v` (the backward pass runs with `create_graph`).
///
/// ```
/// use forgia::func::{self, FuncOptions};
/// use forgia::Tensor;
/// let x = Tensor::variable(vec![3.0], &[1])?;
/// let options = FuncOptions { create_graph: true };
/// let (_, g) = func::vjp_with(|xs| xs[0].mul(&xs[0]), &[x.clone()], &Tensor::ones(&[1])?, options)?;
/// g[0].sum_all().backward()?; // d/dx (2x) = 2
/// assert_eq!(x.grad().unwrap().to_vec(), vec![2.0]);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// As [`vjp`]; with `create_graph`, `DoubleBackwardUnsupported { op }` when `f` uses an op
/// whose backward is not differentiable.
pub fn vjp_with(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    v: &Tensor,
    options: FuncOptions,
) -> Result<(Tensor, Vec<Tensor>)> {
    let c = call(&f, inputs, std::slice::from_ref(v), options.create_graph)?;
    same_shape("vjp", &c.y, v)?;
    let g = grads(&[&c.y], &[&c.extra[0]], &c.z, options.create_graph, false)?;
    Ok((c.finish.apply(&c.y)?, c.finish.all(&g)?))
}

/// The reverse-mode Jacobian of `f` with respect to each input: block `i` has the shape
/// `f.shape ++ inputs[i].shape` (`torch.func.jacrev`, with `argnums` every input).
///
/// Built on one backward pass per element of `f`'s output, each seeded with a basis vector
/// over the retained graph (rows); [`jacfwd`](super::jacfwd) builds the same blocks by
/// columns. The results are constants; see [`jacobian_with`](super::jacobian_with).
///
/// ```
/// use forgia::{func, Tensor};
/// let x = Tensor::from_vec(vec![1.0, -2.0], &[2])?;
/// let j = func::jacobian(|xs| xs[0].mul(&xs[0]), &[x])?; // diag(2x)
/// assert_eq!(j[0].shape(), &[2, 2]);
/// assert_eq!(j[0].to_vec(), vec![2.0, 0.0, 0.0, -4.0]);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// Any error of `f`, unchanged; any error of the
/// backward passes.
pub fn jacobian(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    jacrev(&f, inputs, FuncOptions::default())
}

/// The reverse-mode Jacobian blocks, differentiable when `options.create_graph`.
pub(super) fn jacrev(
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    options: FuncOptions,
) -> Result<Vec<Tensor>> {
    let c = call(f, inputs, &[], options.create_graph)?;
    c.finish.all(&jacobian_rows(&c.y, &c.z, options.create_graph)?)
}

/// The Hessian of a scalar `f`: block `[i][j]` is `∂²f/∂inputs[i]∂inputs[j]`, of the shape
/// `inputs[i].shape ++ inputs[j].shape` (`torch.func.hessian`, every input).
///
/// Built as the reverse Jacobian of the gradient: one backward pass with `create_graph` gives
/// the gradient as a differentiable tensor, then one backward pass per gradient element gives
/// the rows. Every op of `f` needs a differentiable backward.
///
/// ```
/// use forgia::{func, Tensor};
/// let x = Tensor::from_vec(vec![1.0, -2.0], &[2])?;
/// let h = func::hessian(|xs| Ok(xs[0].mul(&xs[0])?.mul(&xs[0])?.sum_all()), &[x])?; // Σx³
/// assert_eq!(h[0][0].to_vec(), vec![6.0, 0.0, 0.0, -12.0]); // diag(6x)
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// `NotScalar { op: "hessian", shape }` when `f`'s output has more than one element;
/// `DoubleBackwardUnsupported { op }` when `f` uses an op whose backward is not
/// differentiable; any error of `f`, unchanged.
pub fn hessian(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) -> Result<Vec<Vec<Tensor>>> {
    hessian_with(f, inputs, FuncOptions::default())
}

/// [`hessian`] with options: with `create_graph` the blocks are differentiable with respect
/// to `inputs` (third derivatives).
///
/// ```
/// use forgia::func::{self, FuncOptions};
/// use forgia::Tensor;
/// let x = Tensor::variable(vec![2.0], &[1])?;
/// let options = FuncOptions { create_graph: true };
/// let h = func::hessian_with(|xs| Ok(xs[0].mul(&xs[0])?.mul(&xs[0])?.sum_all()), &[x.clone()], options)?;
/// h[0][0].sum_all().backward()?; // d/dx 6x = 6
/// assert_eq!(x.grad().unwrap().to_vec(), vec![6.0]);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// As [`hessian`].
pub fn hessian_with(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    options: FuncOptions,
) -> Result<Vec<Vec<Tensor>>> {
    let c = call(&f, inputs, &[], options.create_graph)?;
    scalar("hessian", &c.y)?;
    let g = grads(&[&c.y], &[&Tensor::ones(c.y.shape())?], &c.z, true, false)?;
    g.iter().map(|gi| c.finish.all(&jacobian_rows(gi, &c.z, options.create_graph)?)).collect()
}
