//! Activation checkpointing on a deep residual MLP (feed-forward blocks as in a transformer): each block's intermediates are dropped
//! after the forward pass and recomputed during backward, so the peak memory of a training
//! step shrinks while the gradients stay bitwise identical.
//!
//! Run it with `cargo run --release -p forgia --example checkpoint_deep`.

use forgia::{checkpoint, Result, Rng, Tensor};

/// The weights of one block: up-projection `[2d, d]`, bias, down-projection `[d, 2d]`, bias.
type Weights = [Tensor; 4];

/// One residual feed-forward block `h + W₂·gelu(W₁·h + b₁) + b₂`, written once for both runs.
/// Unless checkpointed, it keeps its wide hidden activations alive until backward.
fn block(h: &Tensor, [w1, b1, w2, b2]: [&Tensor; 4]) -> Result<Tensor> {
    h.add(&h.linear(w1, Some(b1))?.gelu().linear(w2, Some(b2))?)
}

/// The squared-output loss of `depth` blocks of `weights` on `x`, backpropagated; returns the
/// step's peak live tensor bytes and every weight gradient.
fn step(x: &Tensor, weights: &[Weights], checkpointed: bool) -> Result<(usize, Vec<Vec<f32>>)> {
    weights.iter().flatten().for_each(Tensor::zero_grad);
    forgia::reset_peak_bytes();
    let mut h = x.clone();
    for [w1, b1, w2, b2] in weights {
        h = if checkpointed {
            // Everything differentiable goes in the input list, parameters included.
            checkpoint(|xs| block(&xs[0], [&xs[1], &xs[2], &xs[3], &xs[4]]), &[&h, w1, b1, w2, b2])?
        } else {
            block(&h, [w1, b1, w2, b2])?
        };
    }
    h.square().mean_all()?.backward()?;
    let grads = weights.iter().flatten().map(|w| w.grad().map(|g| g.to_vec()).unwrap_or_default()).collect();
    Ok((forgia::peak_bytes(), grads))
}

/// Runs a model of `depth` blocks of width `width` on a batch of `batch`, both ways; returns
/// the two peaks (plain, checkpointed) after checking the gradients agree.
fn run(depth: usize, width: usize, batch: usize) -> Result<(usize, usize)> {
    let mut rng = Rng::new(0);
    let mut param =
        |shape: &[usize], std: f32| Ok::<_, forgia::Error>(Tensor::randn(shape, 0.0, std, &mut rng)?.into_variable());
    let (up, down) = (1.0 / (width as f32).sqrt(), 0.1 / (width as f32).sqrt());
    let weights: Vec<Weights> = (0..depth)
        .map(|_| {
            let (w1, b1) = (param(&[2 * width, width], up)?, param(&[2 * width], 0.0)?);
            Ok([w1, b1, param(&[width, 2 * width], down)?, param(&[width], 0.0)?])
        })
        .collect::<Result<_>>()?;
    let x = Tensor::randn(&[batch, width], 0.0, 1.0, &mut Rng::new(1))?;
    let (plain_peak, plain) = step(&x, &weights, false)?;
    let (saved_peak, saved) = step(&x, &weights, true)?;
    assert_eq!(plain, saved, "checkpointing changes no gradient, not even in the last bit");
    Ok((plain_peak, saved_peak))
}

fn main() -> Result<()> {
    let (plain, saved) = run(32, 256, 1024)?;
    println!("peak memory of a step: {} MiB plain, {} MiB checkpointed", plain >> 20, saved >> 20);
    Ok(())
}

#[test]
fn checkpointing_lowers_the_peak_and_keeps_the_gradients() {
    let (plain, saved) = run(12, 32, 256).unwrap();
    assert!(saved < plain / 2, "{saved} vs {plain}");
}
