//! Forward-mode products without forward-mode rules: [`jvp`], the column-wise [`jacfwd`] and
//! [`hvp`], each by the double-VJP construction over `create_graph` passes.
//!
//! `g(u) = Jᵀu` is computed with a graph for a dummy cotangent variable `u` (zeros); `g` is
//! linear in `u`, so backpropagating `g` with the seed `t` gives `∂(tᵀJᵀu)/∂u = J·t`. The
//! engine has no forward-mode (tangent) rules, so every product here is built this way, and
//! every op of `f` needs a differentiable backward.

use super::graph::{assemble, basis, call, grads, one_per_input, same_shape, scalar};
use super::FuncOptions;
use crate::autograd::Tensor;
use crate::error::Result;

/// The value of `f` at `inputs` and the Jacobian–vector product `Σᵢ ∂f/∂inputs[i] · tangents[i]`
/// (of `f`'s output shape): `torch.func.jvp`.
///
/// Built on the double-VJP construction (module docs of [`crate::func`]): one `create_graph`
/// pass for `Jᵀu`, one pass seeded with the tangents. The results are constants; see
/// [`jvp_with`].
///
/// ```
/// use forgia::{func, Tensor};
/// let x = Tensor::from_vec(vec![1.0, -2.0], &[2])?;
/// let t = Tensor::from_vec(vec![1.0, 0.5], &[2])?;
/// let (y, jt) = func::jvp(|xs| xs[0].mul(&xs[0]), &[x], &[t])?; // J = diag(2x)
/// assert_eq!(y.to_vec(), vec![1.0, 4.0]);
/// assert_eq!(jt.to_vec(), vec![2.0, -2.0]);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// `InvalidArgument { op: "jvp", arg: "tangents", .. }` unless one tangent is given per input;
/// `ShapeMismatch { op: "jvp", lhs: input shape, rhs: tangent shape }`;
/// `DoubleBackwardUnsupported { op }` when `f` uses an op whose backward is not
/// differentiable; any error of `f`, unchanged.
pub fn jvp(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    tangents: &[Tensor],
) -> Result<(Tensor, Tensor)> {
    jvp_with(f, inputs, tangents, FuncOptions::default())
}

/// [`jvp`] with options: with `create_graph` the value and the product are differentiable
/// with respect to `inputs` and `tangents`.
///
/// ```
/// use forgia::func::{self, FuncOptions};
/// use forgia::Tensor;
/// let x = Tensor::variable(vec![3.0], &[1])?;
/// let t = Tensor::variable(vec![0.5], &[1])?;
/// let options = FuncOptions { create_graph: true };
/// let (_, jt) = func::jvp_with(|xs| xs[0].mul(&xs[0]), &[x.clone()], &[t.clone()], options)?;
/// jt.sum_all().backward()?; // jt = 2x·t: ∂/∂x = 2t, ∂/∂t = 2x
/// assert_eq!(x.grad().unwrap().to_vec(), vec![1.0]);
/// assert_eq!(t.grad().unwrap().to_vec(), vec![6.0]);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// As [`jvp`].
pub fn jvp_with(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    tangents: &[Tensor],
    options: FuncOptions,
) -> Result<(Tensor, Tensor)> {
    one_per_input("jvp", "tangents", inputs.len(), tangents.len())?;
    inputs.iter().zip(tangents).try_for_each(|(x, t)| same_shape("jvp", x, t))?;
    let c = call(&f, inputs, tangents, options.create_graph)?;
    let u = Tensor::zeros(c.y.shape())?.into_variable();
    let g = grads(&[&c.y], &[&u], &c.z, true, false)?;
    let jt =
        grads(&g.iter().collect::<Vec<_>>(), &c.extra.iter().collect::<Vec<_>>(), &[u], options.create_graph, false)?;
    Ok((c.finish.apply(&c.y)?, c.finish.apply(&jt[0])?))
}

/// The forward-mode Jacobian of `f` with respect to each input, block `i` of the shape
/// `f.shape ++ inputs[i].shape`: the same blocks as [`jacobian`](super::jacobian), built by
/// columns (`torch.func.jacfwd`).
///
/// Built on the double-VJP construction: one `create_graph` pass for `Jᵀu`, then one pass per
/// input element seeded with a basis vector (a column `J·eⱼ`). Cheaper than the reverse mode
/// when the inputs have fewer elements than the output. The results are constants; see
/// [`jacobian_with`](super::jacobian_with).
///
/// ```
/// use forgia::{func, Tensor};
/// let x = Tensor::from_vec(vec![1.0, -2.0], &[2])?;
/// let f = |xs: &[Tensor]| xs[0].mul(&xs[0]);
/// let j = func::jacfwd(f, &[x.clone()])?;
/// assert_eq!(j[0].to_vec(), func::jacobian(f, &[x])?[0].to_vec());
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// `DoubleBackwardUnsupported { op }` when `f` uses an op whose backward is not
/// differentiable; any error of `f`, unchanged.
pub fn jacfwd(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    jacfwd_with(&f, inputs, FuncOptions::default())
}

/// The forward-mode Jacobian blocks, differentiable when `options.create_graph`.
pub(super) fn jacfwd_with(
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    options: FuncOptions,
) -> Result<Vec<Tensor>> {
    let c = call(f, inputs, &[], options.create_graph)?;
    let u = Tensor::zeros(c.y.shape())?.into_variable();
    let g = grads(&[&c.y], &[&u], &c.z, true, false)?;
    let mut blocks = Vec::with_capacity(c.z.len());
    for (gi, zi) in g.iter().zip(&c.z) {
        let mut columns = Vec::with_capacity(zi.numel());
        for j in 0..zi.numel() {
            let seed = basis(zi.shape(), j)?;
            columns.push(grads(&[gi], &[&seed], std::slice::from_ref(&u), options.create_graph, false)?.remove(0));
        }
        blocks.push(assemble(&columns, c.y.rank(), c.y.shape(), zi.shape())?);
    }
    c.finish.all(&blocks)
}

/// The value of a scalar `f` and the Hessian–vector products `Σⱼ ∂²f/∂inputs[i]∂inputs[j] · v[j]`,
/// one per input (`torch.autograd.functional.hvp`; `torch.func.jvp(grad(f))`).
///
/// Built on the double VJP: one `create_graph` pass gives the gradient `g` as a differentiable
/// tensor, one pass seeded with `v` backpropagates `g` (`∂(gᵀv)/∂x = H·v`, the Hessian being
/// symmetric). The results are constants; see [`hvp_with`].
///
/// ```
/// use forgia::{func, Tensor};
/// let x = Tensor::from_vec(vec![1.0, -2.0], &[2])?;
/// let v = Tensor::from_vec(vec![1.0, 0.5], &[2])?;
/// let cube = |xs: &[Tensor]| Ok(xs[0].mul(&xs[0])?.mul(&xs[0])?.sum_all()); // H = diag(6x)
/// let (y, hv) = func::hvp(cube, &[x], &[v])?;
/// assert_eq!(y.to_vec(), vec![-7.0]);
/// assert_eq!(hv[0].to_vec(), vec![6.0, -6.0]);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// `NotScalar { op: "hvp", shape }` when `f`'s output has more than one element;
/// `InvalidArgument { op: "hvp", arg: "v", .. }` unless one vector is given per input;
/// `ShapeMismatch { op: "hvp", lhs: input shape, rhs: vector shape }`;
/// `DoubleBackwardUnsupported { op }` when `f` uses an op whose backward is not
/// differentiable; any error of `f`, unchanged.
pub fn hvp(f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], v: &[Tensor]) -> Result<(Tensor, Vec<Tensor>)> {
    hvp_with(f, inputs, v, FuncOptions::default())
}

/// [`hvp`] with options: with `create_graph` the value and the products are differentiable
/// with respect to `inputs` and `v`.
///
/// ```
/// use forgia::func::{self, FuncOptions};
/// use forgia::Tensor;
/// let x = Tensor::variable(vec![2.0], &[1])?;
/// let v = Tensor::from_vec(vec![1.0], &[1])?;
/// let cube = |xs: &[Tensor]| Ok(xs[0].mul(&xs[0])?.mul(&xs[0])?.sum_all());
/// let (_, hv) = func::hvp_with(cube, &[x.clone()], &[v], FuncOptions { create_graph: true })?;
/// hv[0].sum_all().backward()?; // H·v = 6x·v, so ∂/∂x = 6v
/// assert_eq!(x.grad().unwrap().to_vec(), vec![6.0]);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// As [`hvp`].
pub fn hvp_with(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    v: &[Tensor],
    options: FuncOptions,
) -> Result<(Tensor, Vec<Tensor>)> {
    one_per_input("hvp", "v", inputs.len(), v.len())?;
    inputs.iter().zip(v).try_for_each(|(x, v)| same_shape("hvp", x, v))?;
    let c = call(&f, inputs, v, options.create_graph)?;
    scalar("hvp", &c.y)?;
    let g = grads(&[&c.y], &[&Tensor::ones(c.y.shape())?], &c.z, true, false)?;
    let hv =
        grads(&g.iter().collect::<Vec<_>>(), &c.extra.iter().collect::<Vec<_>>(), &c.z, options.create_graph, false)?;
    Ok((c.finish.apply(&c.y)?, c.finish.all(&hv)?))
}
