//! A custom differentiable op: `softsign(x) = x / (1 + |x|)`, with its own forward and
//! vector–Jacobian product (`dy/dx = 1 / (1 + |x|)²`), checked against finite differences by
//! `gradcheck`, then used as the activation of a small regression model.
//!
//! Run it with `cargo run --release -p forgia --example custom_op`.

use forgia::nn::{Forward, Linear, Module, Sequential};
use forgia::optim::{Adam, AdamConfig, Optimizer};
use forgia::{custom_op, gradcheck, CustomOp, GradcheckOptions, Result, Rng, Tensor};

/// `y = x / (1 + |x|)`; backward `gx = gy / (1 + |x|)²`.
struct Softsign;

impl CustomOp for Softsign {
    fn name(&self) -> &'static str {
        "softsign"
    }

    fn forward(&self, xs: &[Tensor]) -> Result<Tensor> {
        let x = &xs[0];
        x.div(&x.abs().add_scalar(1.0))
    }

    fn backward(&self, xs: &[Tensor], _y: &Tensor, gy: &Tensor, _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let denominator = xs[0].abs().add_scalar(1.0).square();
        Ok(vec![Some(gy.div(&denominator)?)])
    }
}

/// Applies the custom op: it records a graph node like any built-in op.
fn softsign(x: &Tensor) -> Result<Tensor> {
    custom_op(Softsign, &[x])
}

/// The op as a parameter-free layer, so it can sit in a [`Sequential`].
struct SoftsignLayer;

impl Module for SoftsignLayer {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for SoftsignLayer {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        softsign(x)
    }
}

/// Checks the op's gradient, then fits `y = sin(3x)` with `steps` Adam steps of a 1-32-1
/// network using it. Returns (first loss, last loss).
fn run(steps: usize) -> Result<(f32, f32)> {
    let x = Tensor::variable(vec![-2.0, -0.5, 0.1, 0.7, 3.0], &[5])?;
    let report = gradcheck(|xs| Ok(softsign(&xs[0])?.sum_all()), &[x], GradcheckOptions::default())?;
    assert!(report.passed(), "softsign's backward disagrees with finite differences: {:?}", report.first_mismatch);

    let mut rng = Rng::new(0);
    let mut model = Sequential::new()
        .push(Linear::new(1, 32, true, &mut rng)?)
        .push(SoftsignLayer)
        .push(Linear::new(32, 1, true, &mut rng)?);
    let xs: Vec<f32> = (0..64).map(|i| i as f32 / 32.0 - 1.0).collect();
    let targets: Vec<f32> = xs.iter().map(|x| (3.0 * x).sin()).collect();
    let (x, y) = (Tensor::from_vec(xs, &[64, 1])?, Tensor::from_vec(targets, &[64, 1])?);
    let mut opt = Adam::new(AdamConfig { lr: 1e-2, ..AdamConfig::adam() })?;
    let mut losses = Vec::with_capacity(steps);
    for _ in 0..steps {
        opt.zero_grad(&model);
        let loss = model.forward(&x)?.sub(&y)?.square().mean_all()?;
        loss.backward()?;
        opt.step(&mut model)?;
        losses.push(loss.item()?);
    }
    Ok((losses[0], losses[steps - 1]))
}

fn main() -> Result<()> {
    let (first, last) = run(500)?;
    println!("softsign passes gradcheck; regression loss {first:.4} -> {last:.4}");
    Ok(())
}

#[test]
fn the_custom_op_passes_gradcheck_and_trains() {
    let (first, last) = run(200).unwrap();
    assert!(last < first / 4.0, "{first} -> {last}");
}
