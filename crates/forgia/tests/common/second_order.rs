//! Second-order checks: the gradient of `sum(grad_f(x) * c)` from a `create_graph` pass,
//! against central differences of first-order gradients from plain passes.

use forgia::{BackwardOptions, Result, Tensor};

/// First-order gradients of `f` at `xs` for the cotangent `seed` (plain pass, fresh leaves).
fn grads(
    f: &dyn Fn(&[Tensor]) -> Result<Tensor>,
    xs: &[Vec<f32>],
    shapes: &[Vec<usize>],
    seed: &Tensor,
) -> Vec<Vec<f32>> {
    let leaves: Vec<Tensor> = xs.iter().zip(shapes).map(|(d, s)| Tensor::variable(d.clone(), s).unwrap()).collect();
    f(&leaves).unwrap().backward_with_grad(seed).unwrap();
    leaves.iter().map(|l| l.grad().map(|g| g.to_vec()).unwrap_or_else(|| vec![0.0; l.numel()])).collect()
}

/// Checks d/dx_j sum_i(grad_i(x) * c_i) from a `create_graph` pass against finite differences.
/// `xs` are the input values (fresh variables are made from them), `c` one weight tensor per
/// input. Panics with the first mismatch.
pub fn check(f: impl Fn(&[Tensor]) -> Result<Tensor>, xs: &[Tensor], seed: &Tensor, c: &[Tensor]) {
    let shapes: Vec<Vec<usize>> = xs.iter().map(|x| x.shape().to_vec()).collect();
    let data: Vec<Vec<f32>> = xs.iter().map(|x| x.to_vec()).collect();
    // Analytic: gradients with a graph, then backward through them.
    let leaves: Vec<Tensor> = data.iter().zip(&shapes).map(|(d, s)| Tensor::variable(d.clone(), s).unwrap()).collect();
    let y = f(&leaves).unwrap();
    y.backward_with(Some(seed), BackwardOptions { create_graph: true, ..Default::default() }).unwrap();
    let mut s = Tensor::scalar(0.0);
    for (l, ci) in leaves.iter().zip(c) {
        let g = l.grad().expect("first-order gradient");
        assert!(g.requires_grad(), "create_graph gradient carries a graph");
        s = s.add(&g.mul(ci).unwrap().sum_all()).unwrap();
    }
    leaves.iter().for_each(Tensor::zero_grad);
    s.backward().unwrap();
    let cv: Vec<Vec<f32>> = c.iter().map(|t| t.to_vec()).collect();
    let objective = |xs: &[Vec<f32>]| -> f64 {
        let g = grads(&f, xs, &shapes, seed);
        g.iter().zip(&cv).flat_map(|(g, c)| g.iter().zip(c).map(|(&a, &b)| a as f64 * b as f64)).sum()
    };
    for (j, leaf) in leaves.iter().enumerate() {
        let analytic = leaf.grad().map(|g| g.to_vec()).unwrap_or_else(|| vec![0.0; leaf.numel()]);
        for k in 0..data[j].len() {
            let eps = 1e-2f32;
            let mut up = data.clone();
            up[j][k] += eps;
            let mut down = data.clone();
            down[j][k] -= eps;
            let numeric = (objective(&up) - objective(&down)) / (up[j][k] as f64 - down[j][k] as f64);
            let a = analytic[k] as f64;
            assert!(
                (numeric - a).abs() <= 2e-2 + 2e-2 * a.abs(),
                "input {j} element {k}: numeric {numeric}, analytic {a}"
            );
        }
    }
}
