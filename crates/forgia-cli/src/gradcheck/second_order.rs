//! `forgia gradcheck --second-order`: for every case of the table, the gradient of
//! `φ(x) = Σ_i ⟨∂⟨w, f(x)⟩/∂x_i, v_i⟩` (fixed random `w`, `v`) from a `create_graph` pass,
//! against central differences of `φ` computed from plain first-order passes (a
//! gradgradcheck). An op whose backward refuses a graph fails its row with its name.

use forgia::{BackwardOptions, Result, Rng, Tensor};

use super::{forgia_hash, Case, Row};

/// Central-difference step on the inputs.
const EPS: f64 = 1e-2;
/// Mixed tolerance `|num - ana| <= ABS_TOL + REL_TOL · |ana|` (the differences are of f32
/// gradients, so looser than the first-order check).
const ABS_TOL: f64 = 2e-2;
const REL_TOL: f64 = 2e-2;

/// Fresh leaves for the variables of `xs` holding `data` (constants pass through).
fn leaves(xs: &[Tensor], data: &[Vec<f32>]) -> Result<Vec<Tensor>> {
    xs.iter()
        .zip(data)
        .map(
            |(x, d)| {
                if x.is_variable() {
                    Ok(Tensor::from_vec(d.clone(), x.shape())?.into_variable())
                } else {
                    Ok(x.clone())
                }
            },
        )
        .collect()
}

/// `φ` at `data` from one plain pass: `Σ_i ⟨grad_i, v_i⟩` over the variables.
fn phi(
    f: fn(&[Tensor]) -> Result<Tensor>,
    xs: &[Tensor],
    data: &[Vec<f32>],
    w: &Tensor,
    v: &[Vec<f32>],
) -> Result<f64> {
    let ls = leaves(xs, data)?;
    let y = f(&ls)?;
    if y.requires_grad() {
        y.backward_with_grad(w)?;
    }
    let mut total = 0.0;
    for (l, vi) in ls.iter().zip(v) {
        if let Some(g) = l.grad() {
            total += g.to_vec().iter().zip(vi).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>();
        }
    }
    Ok(total)
}

/// The gradgradcheck of one case: its row (elements checked, largest error, verdict).
pub(super) fn check(case: &Case, seed: u64) -> Row {
    let mut rng = Rng::new(seed ^ forgia_hash(case.op));
    let inputs = (case.inputs)(&mut rng);
    let shapes = inputs.iter().map(|t| format!("{:?}", t.shape())).collect::<Vec<_>>().join(" ");
    match run(case.f, &inputs, &mut rng) {
        Ok((checked, max_error, passed)) => Row { op: case.op, shapes, checked, max_error, verdict: Ok(passed) },
        Err(e) => Row { op: case.op, shapes, checked: 0, max_error: f64::NAN, verdict: Err(e) },
    }
}

fn run(f: fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor], rng: &mut Rng) -> Result<(usize, f64, bool)> {
    let data: Vec<Vec<f32>> = inputs.iter().map(|t| t.to_vec()).collect();
    let ls = leaves(inputs, &data)?;
    let y = f(&ls)?;
    let w = if y.numel() == 1 { Tensor::ones(y.shape())? } else { Tensor::randn(y.shape(), 0.0, 1.0, rng)? };
    let v: Vec<Tensor> = ls.iter().map(|l| Tensor::randn(l.shape(), 0.0, 1.0, rng)).collect::<Result<_>>()?;
    // Analytic: the gradients with a graph, then the gradient of φ through them.
    if y.requires_grad() {
        y.backward_with(Some(&w), BackwardOptions { create_graph: true, ..BackwardOptions::default() })?;
    }
    let mut s = Tensor::scalar(0.0);
    for (l, vi) in ls.iter().zip(&v) {
        if let (true, Some(g)) = (l.is_variable(), l.grad()) {
            s = s.add(&g.mul(vi)?.sum_all())?;
        }
    }
    ls.iter().for_each(Tensor::zero_grad);
    if s.requires_grad() {
        s.backward()?;
    }
    let vd: Vec<Vec<f32>> = v.iter().map(|t| t.to_vec()).collect();
    let (mut checked, mut max_error, mut passed) = (0, 0.0f64, true);
    for (j, l) in ls.iter().enumerate() {
        if !l.is_variable() {
            continue;
        }
        let analytic = l.grad().map(|g| g.to_vec()).unwrap_or_else(|| vec![0.0; l.numel()]);
        for k in 0..data[j].len() {
            let (mut up, mut down) = (data.clone(), data.clone());
            up[j][k] = (data[j][k] as f64 + EPS) as f32;
            down[j][k] = (data[j][k] as f64 - EPS) as f32;
            let step = up[j][k] as f64 - down[j][k] as f64;
            let numeric = (phi(f, inputs, &up, &w, &vd)? - phi(f, inputs, &down, &w, &vd)?) / step;
            let ana = analytic[k] as f64;
            let err = if numeric.is_finite() && ana.is_finite() { (numeric - ana).abs() } else { f64::INFINITY };
            checked += 1;
            max_error = max_error.max(err);
            // Written positively, so a NaN error fails.
            passed &= err <= ABS_TOL + REL_TOL * ana.abs();
        }
    }
    Ok((checked, max_error, passed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `y = x³` with a deliberately wrong second derivative (`6x·gy` off by one in `x`).
    fn wrong(x: &[Tensor]) -> Result<Tensor> {
        Ok(forgia::elemental_unary_with_second(
            &x[0],
            |v| v * v * v,
            |v, _y, g| 3.0 * v * v * g,
            |v, _y, g, u| (u * 6.0 * (v + 1.0) * g, u * 3.0 * v * v),
        ))
    }

    fn right(x: &[Tensor]) -> Result<Tensor> {
        Ok(forgia::elemental_unary_with_second(
            &x[0],
            |v| v * v * v,
            |v, _y, g| 3.0 * v * v * g,
            |v, _y, g, u| (u * 6.0 * v * g, u * 3.0 * v * v),
        ))
    }

    fn inputs(rng: &mut Rng) -> Vec<Tensor> {
        vec![super::super::inputs::normal(&[2, 3], rng)]
    }

    #[test]
    fn the_sweep_catches_a_wrong_second_derivative_and_passes_a_right_one() {
        let row = check(&Case { op: "wrong", inputs, f: wrong }, 0);
        assert!(matches!(row.verdict, Ok(false)), "a wrong second derivative must fail");
        let row = check(&Case { op: "right", inputs, f: right }, 0);
        assert!(matches!(row.verdict, Ok(true)));
        assert_eq!(row.checked, 6);
    }

    #[test]
    fn an_op_that_refuses_second_order_fails_its_row_with_its_name() {
        let f: fn(&[Tensor]) -> Result<Tensor> =
            |x| Ok(forgia::elemental_unary(&x[0], f32::sin, |v, _y, g| g * v.cos()));
        let row = check(&Case { op: "refuses", inputs, f }, 0);
        let e = row.verdict.expect_err("refused");
        assert!(e.to_string().contains("elemental_unary"), "{e}");
    }
}
