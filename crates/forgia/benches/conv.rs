//! Convolution benches: conv2d forward and forward+backward at the W4 shapes, and a W4-like
//! CNN training step (conv → relu → maxpool ×2 → linear → sum loss, forward + backward), and a
//! gradient-penalty step through a CNN critic (second order).
#![allow(missing_docs)] // criterion_group! generates an undocumented `pub fn`.

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{Conv2dOptions, Rng, Tensor};

fn conv2d(c: &mut Criterion) {
    let mut rng = Rng::new(0);
    let x = Tensor::randn(&[64, 32, 13, 13], 0.0, 1.0, &mut rng).unwrap();
    let w = Tensor::randn(&[64, 32, 3, 3], 0.0, 0.1, &mut rng).unwrap().into_variable();
    let opts = Conv2dOptions::default();
    c.bench_function("conv2d_fwd_64x32x13x13_k3_o64", |b| {
        b.iter(|| {
            let _g = forgia::no_grad();
            x.conv2d(&w, None, opts).unwrap()
        })
    });
    let xv = x.clone().into_variable();
    c.bench_function("conv2d_fwd_bwd_64x32x13x13_k3_o64", |b| {
        b.iter(|| {
            let y = xv.conv2d(&w, None, opts).unwrap();
            y.sum_all().backward().unwrap();
            xv.zero_grad();
            w.zero_grad();
        })
    });
}

/// Parameters of the W4 network.
struct Cnn {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
    fc: Tensor,
    fb: Tensor,
}

impl Cnn {
    fn new(rng: &mut Rng) -> Self {
        Cnn {
            w1: Tensor::randn(&[32, 1, 3, 3], 0.0, 0.3, rng).unwrap().into_variable(),
            b1: Tensor::zeros(&[32]).unwrap().into_variable(),
            w2: Tensor::randn(&[64, 32, 3, 3], 0.0, 0.06, rng).unwrap().into_variable(),
            b2: Tensor::zeros(&[64]).unwrap().into_variable(),
            fc: Tensor::randn(&[10, 1600], 0.0, 0.02, rng).unwrap().into_variable(),
            fb: Tensor::zeros(&[10]).unwrap().into_variable(),
        }
    }

    fn step(&self, x: &Tensor) -> forgia::Result<f32> {
        let o = Conv2dOptions::default();
        let h = x.conv2d(&self.w1, Some(&self.b1), o)?.relu().max_pool2d((2, 2), (2, 2), (0, 0))?;
        let h = h.conv2d(&self.w2, Some(&self.b2), o)?.relu().max_pool2d((2, 2), (2, 2), (0, 0))?;
        let logits = h.reshape(&[x.shape()[0], 1600])?.matmul(&self.fc.transpose(0, 1)?)?.add(&self.fb)?;
        let loss = logits.sum_all();
        loss.backward()?;
        for p in [&self.w1, &self.b1, &self.w2, &self.b2, &self.fc, &self.fb] {
            p.zero_grad();
        }
        loss.item()
    }
}

fn w4_step(c: &mut Criterion) {
    let mut rng = Rng::new(1);
    let net = Cnn::new(&mut rng);
    let x = Tensor::randn(&[64, 1, 28, 28], 0.0, 1.0, &mut rng).unwrap();
    c.bench_function("w4_like_cnn_step_fwd_bwd_b64", |b| b.iter(|| net.step(&x).unwrap()));
}

/// A WGAN-GP step through a CNN critic (conv → group_norm → tanh → max_pool → conv →
/// avg_pool): the critic's input gradient with a graph (`create_graph`), the penalty
/// `mean(‖g‖ - 1)²`, and its backward to the parameters (second order through every record).
fn gradient_penalty(c: &mut Criterion) {
    let mut rng = Rng::new(2);
    let x = Tensor::randn(&[16, 3, 16, 16], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let w1 = Tensor::randn(&[16, 3, 3, 3], 0.0, 0.2, &mut rng).unwrap().into_variable();
    let w2 = Tensor::randn(&[8, 16, 3, 3], 0.0, 0.1, &mut rng).unwrap().into_variable();
    let (g1, c1) = (Tensor::ones(&[16]).unwrap().into_variable(), Tensor::zeros(&[16]).unwrap().into_variable());
    let pad = Conv2dOptions { padding: (1, 1), ..Conv2dOptions::default() };
    let graph = forgia::BackwardOptions { create_graph: true, ..Default::default() };
    c.bench_function("gradient_penalty_cnn_critic_b16_3x16x16", |b| {
        b.iter(|| {
            let h = x.conv2d(&w1, None, pad).unwrap().group_norm(4, Some(&g1), Some(&c1), 1e-5).unwrap();
            let h = h.tanh().max_pool2d((2, 2), (2, 2), (0, 0)).unwrap().conv2d(&w2, None, pad).unwrap();
            let d = h.avg_pool2d((2, 2), (2, 2), (0, 0)).unwrap().sum_all();
            d.backward_with(None, graph).unwrap();
            let g = x.grad().unwrap();
            x.zero_grad();
            let norms = g.reshape(&[16, 768]).unwrap().square().sum([1usize], false).unwrap().sqrt();
            let penalty = norms.sub_scalar(1.0).square().mean_all().unwrap();
            penalty.backward().unwrap();
            for p in [&x, &w1, &w2, &g1, &c1] {
                p.zero_grad();
            }
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(3));
    targets = conv2d, w4_step, gradient_penalty
}
criterion_main!(benches);
