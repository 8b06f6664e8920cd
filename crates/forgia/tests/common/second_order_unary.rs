//! Second-order checks: gradcheck of `x -> sum(grad(f)(x) * c)`, where the inner gradient is
//! taken with a `create_graph` backward pass, so the outer gradcheck verifies that every
//! backward record is itself correctly differentiable.
#![allow(dead_code, unreachable_pub)]

use forgia::{gradcheck, BackwardOptions, GradcheckOptions, GradcheckReport, Result, Rng, Tensor};

/// `∂/∂x <f(x), seed>` read back with `.grad()`. On a variable it builds a graph of the
/// gradient (`create_graph`) and resets the variable's slot so the outer pass starts clean.
/// On a constant (gradcheck's finite-difference evaluations run under `no_grad`, and grad mode
/// is per thread) it takes the gradient of a fresh variable on a scoped thread.
pub fn grad_of(f: &(dyn Fn(&Tensor) -> Result<Tensor> + Sync), x: &Tensor, seed: &Tensor) -> Result<Tensor> {
    if x.is_variable() {
        let y = f(x)?;
        y.backward_with(Some(seed), BackwardOptions { create_graph: true, ..Default::default() })?;
        let g = x.grad().unwrap_or_else(|| Tensor::zeros(x.shape()).unwrap());
        x.zero_grad();
        return Ok(g);
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            let v = x.detach().into_variable();
            let y = f(&v)?;
            if y.requires_grad() {
                y.backward_with(Some(seed), BackwardOptions::default())?;
            }
            Ok(v.grad().unwrap_or_else(|| Tensor::zeros(x.shape()).unwrap()))
        })
        .join()
        .expect("gradient thread panicked")
    })
}

/// Gradchecks `x -> sum(grad(f)(x) * c)` at `x` with a fixed random seed cotangent and `c`.
pub fn check(f: &(dyn Fn(&Tensor) -> Result<Tensor> + Sync), x: &Tensor) -> GradcheckReport {
    let mut rng = Rng::new(7);
    let y_shape = f(&x.detach()).expect("forward").shape().to_vec();
    let seed = Tensor::randn(&y_shape, 0.0, 1.0, &mut rng).unwrap();
    let c = Tensor::randn(x.shape(), 0.0, 1.0, &mut rng).unwrap();
    let h = |xs: &[Tensor]| -> Result<Tensor> { Ok(grad_of(f, &xs[0], &seed)?.mul(&c)?.sum_all()) };
    // eps 1e-2: the inner gradient is computed in f32, so a smaller step amplifies its rounding.
    let options = GradcheckOptions { eps: 1e-2, abs_tol: 2e-3, rel_tol: 2e-2, ..Default::default() };
    gradcheck(h, &[x.detach().into_variable()], options).expect("second-order gradcheck ran")
}
