//! End to end: a Linear–tanh–Linear network learns XOR with Adam and an MSE loss, fed by a
//! shuffled `BatchIterator`.

use forgia::data::BatchIterator;
use forgia::nn::{Linear, Sequential, Tanh};
use forgia::optim::{Adam, AdamConfig, Optimizer};
use forgia::{Rng, Tensor};

fn xor_data() -> (Vec<f32>, Vec<usize>) {
    (vec![0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0], vec![0, 1, 1, 0])
}

fn accuracy(model: &Sequential) -> f32 {
    let (x, y) = xor_data();
    let _guard = forgia::no_grad();
    let out = model.forward(&Tensor::from_vec(x, &[4, 2]).unwrap()).unwrap().to_vec();
    let correct = out.iter().zip(&y).filter(|(o, &l)| (**o > 0.5) == (l == 1)).count();
    correct as f32 / y.len() as f32
}

#[test]
fn an_mlp_learns_xor_to_full_accuracy_with_adam() {
    let mut rng = Rng::new(42);
    let mut model = Sequential::new()
        .push(Linear::new(2, 8, true, &mut rng).unwrap())
        .push(Tanh)
        .push(Linear::new(8, 1, true, &mut rng).unwrap());
    let mut opt = Adam::new(AdamConfig { lr: 0.05, ..AdamConfig::adam() }).unwrap();
    let (x, y) = xor_data();
    let data = BatchIterator::new(x, &[2], y, 2, 7).unwrap();
    let mut last_loss = f32::INFINITY;
    for epoch in 0..300 {
        for (xb, yb) in data.epoch(epoch) {
            let target = Tensor::from_vec(yb.iter().map(|&l| l as f32).collect(), &[yb.len(), 1]).unwrap();
            opt.zero_grad(&model);
            let d = model.forward(&xb).unwrap().sub(&target).unwrap();
            let loss = d.mul(&d).unwrap().mean_all().unwrap();
            loss.backward().unwrap();
            opt.step(&mut model).unwrap();
            last_loss = loss.item().unwrap();
        }
        if epoch % 50 == 49 && accuracy(&model) == 1.0 && last_loss < 0.05 {
            break;
        }
    }
    assert_eq!(accuracy(&model), 1.0, "final loss {last_loss}");
    assert!(last_loss < 0.05, "{last_loss}");
    assert!(opt.steps_taken() <= 600);
}
