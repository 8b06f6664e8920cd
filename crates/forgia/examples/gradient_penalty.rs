//! A gradient penalty (as in WGAN-GP) with `create_graph`: the gradient of a critic's output
//! with respect to its input is itself differentiable, so a loss on that gradient trains the
//! critic's weights. Here the critic learns to have input gradients of norm 1.
//!
//! Run it with `cargo run --release -p forgia --example gradient_penalty`. Second-order
//! passes cover every op but attention: linear/matmul, pointwise ops, reductions, softmax,
//! conv, pooling and normalization layers, checkpoints, and elemental ops given a
//! second-derivative closure (a CNN critic works the same way; see `tests/second_order.rs`).
//! Attention refuses them with `DoubleBackwardUnsupported`.

use forgia::nn::{Linear, Sequential, Tanh};
use forgia::optim::{Adam, AdamConfig, Optimizer};
use forgia::{BackwardOptions, Result, Rng, Tensor};

/// `mean((|∇ₓ critic(x)| - 1)²)` over the rows of `x`, differentiable in the critic's weights.
fn gradient_penalty(critic: &Sequential, x: &Tensor) -> Result<Tensor> {
    let x = x.detach().into_variable(); // a fresh leaf whose gradient we want
    let score = critic.forward(&x)?.sum_all();
    score.backward_with(None, BackwardOptions { create_graph: true, ..BackwardOptions::default() })?;
    let g = x.grad().expect("x is a variable on the graph"); // carries its own graph
    let norm = g.square().sum([1usize], false)?.add_scalar(1e-12).sqrt();
    norm.add_scalar(-1.0).square().mean_all()
}

/// `steps` Adam steps on the penalty alone; returns (first, last) penalty.
fn run(steps: usize) -> Result<(f32, f32)> {
    let mut rng = Rng::new(0);
    let mut critic = Sequential::new().push(Linear::new(2, 32, true, &mut rng)?).push(Tanh);
    critic = critic.push(Linear::new(32, 1, true, &mut rng)?);
    let mut opt = Adam::new(AdamConfig { lr: 1e-2, ..AdamConfig::adam() })?;
    let (mut first, mut last) = (f32::NAN, f32::NAN);
    for step in 0..steps {
        let x = Tensor::randn(&[64, 2], 0.0, 1.0, &mut rng)?;
        let penalty = gradient_penalty(&critic, &x)?;
        // The create_graph pass also left gradients on the weights: clear them first.
        opt.zero_grad(&critic);
        penalty.backward()?;
        opt.step(&mut critic)?;
        last = penalty.item()?;
        if step == 0 {
            first = last;
        }
    }
    Ok((first, last))
}

fn main() -> Result<()> {
    let (first, last) = run(300)?;
    println!("gradient penalty {first:.4} -> {last:.4}");
    Ok(())
}

#[test]
fn the_penalty_trains_the_critic_towards_unit_gradients() {
    let (first, last) = run(150).unwrap();
    assert!(last < first / 4.0, "{first} -> {last}");
}
