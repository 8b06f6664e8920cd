//! An MLP that separates two interleaved spirals, in under 40 lines: data, model, Adam, loss,
//! accuracy. Run it with `cargo run --release -p forgia --example spirals_mlp`.
use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::nn::{Linear, Sequential, Tanh};
use forgia::optim::{Adam, AdamConfig, Optimizer};
use forgia::{Indices, Rng, Tensor};

/// Trains on `n` points per spiral for `steps` full-batch steps; returns the training accuracy.
fn train(n: usize, steps: usize) -> forgia::Result<f32> {
    let (mut rng, mut xy, mut labels) = (Rng::new(0), Vec::new(), Vec::new());
    for i in 0..2 * n {
        let (class, t) = (i % 2, 0.1 + 0.9 * (i / 2) as f32 / n as f32);
        let angle = (3.5 * t + class as f32) * std::f32::consts::PI;
        xy.extend([t * angle.cos() + 0.02 * rng.normal(), t * angle.sin() + 0.02 * rng.normal()]);
        labels.push(class);
    }
    let (x, y) = (Tensor::from_vec(xy, &[2 * n, 2])?, Indices::from(labels.clone()));
    let mut model = Sequential::new().push(Linear::new(2, 64, true, &mut rng)?).push(Tanh);
    model = model.push(Linear::new(64, 64, true, &mut rng)?).push(Tanh).push(Linear::new(64, 2, true, &mut rng)?);
    let mut opt = Adam::new(AdamConfig { lr: 1e-2, ..AdamConfig::adam() })?;
    for step in 0..steps {
        opt.zero_grad(&model);
        let loss = cross_entropy(&model.forward(&x)?, &y, CrossEntropyOptions::default())?;
        loss.backward()?;
        opt.step(&mut model)?;
        if step % 100 == 0 {
            println!("step {step:4}: loss {:.4}", loss.item()?);
        }
    }
    let predicted = model.forward(&x)?.argmax(1, false)?.positions();
    Ok(predicted.iter().zip(&labels).filter(|(p, l)| p == l).count() as f32 / labels.len() as f32)
}

fn main() -> forgia::Result<()> {
    println!("training accuracy {:.1}%", 100.0 * train(500, 1000)?);
    Ok(())
}

#[test]
fn the_mlp_separates_the_spirals() {
    assert!(train(100, 400).unwrap() > 0.9);
}
