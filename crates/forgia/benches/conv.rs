//! Convolution benches: conv2d forward and forward+backward at the W4 shapes, and a W4-like
//! CNN training step (conv → relu → maxpool ×2 → linear → sum loss, forward + backward), and a
//! gradient-penalty step through a CNN critic (second order); the main job's CNN (`forgia
//! train`: 5x5 convolutions 1→32→64 at 28x28, dropout, two linear layers, cross-entropy,
//! Adam) one step at batch 64, and its convolutions one by one; ResNet-18's stem and
//! first-stage convolutions and its max pool (W12's shapes).
//!
//! `FORGIA_CONV_STEPS=n cargo bench -p forgia --bench conv` skips criterion and runs `n` steps
//! of the main job's CNN (of the W4-like one with `FORGIA_CONV_JOB=w4`) on
//! `FORGIA_CONV_THREADS` threads (default 1), for
//! `perf stat -e cycles,instructions` of the bench binary: the per-step count is the
//! difference of two runs (say 12 and 2 steps) over the difference of their step counts.
#![allow(missing_docs)] // criterion_group! generates an undocumented `pub fn`.

use criterion::{criterion_group, Criterion};
use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::nn::{visit_child, visit_child_mut, Conv2d, Dropout, Linear, Module};
use forgia::optim::{Adam, AdamConfig, Optimizer};
use forgia::{Conv2dOptions, Indices, Rng, Tensor};

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

/// The main job's CNN (crates/forgia-cli/src/train/mnist.rs), PyTorch default init.
struct MainCnn {
    conv1: Conv2d,
    conv2: Conv2d,
    fc1: Linear,
    fc2: Linear,
    drop1: Dropout,
    drop2: Dropout,
}

impl Module for MainCnn {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("conv1", &self.conv1, f);
        visit_child("conv2", &self.conv2, f);
        visit_child("fc1", &self.fc1, f);
        visit_child("fc2", &self.fc2, f);
    }
    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("conv1", &mut self.conv1, f);
        visit_child_mut("conv2", &mut self.conv2, f);
        visit_child_mut("fc1", &mut self.fc1, f);
        visit_child_mut("fc2", &mut self.fc2, f);
    }
}

/// The main job's model, a batch of 64 images and labels, and its optimizer.
struct MainJob {
    net: MainCnn,
    x: Tensor,
    labels: Indices,
    opt: Adam,
    step: u64,
}

impl MainJob {
    fn new() -> Self {
        let mut rng = Rng::new(5);
        let pad2 = Conv2dOptions { padding: (2, 2), ..Conv2dOptions::default() };
        let net = MainCnn {
            conv1: Conv2d::new(1, 32, (5, 5), pad2, true, &mut rng).unwrap(),
            conv2: Conv2d::new(32, 64, (5, 5), pad2, true, &mut rng).unwrap(),
            fc1: Linear::new(3136, 128, true, &mut rng).unwrap(),
            fc2: Linear::new(128, 10, true, &mut rng).unwrap(),
            drop1: Dropout::new(0.25, 0xD0).unwrap(),
            drop2: Dropout::new(0.25, 0xD1).unwrap(),
        };
        let x = Tensor::randn(&[64, 1, 28, 28], 0.0, 1.0, &mut rng).unwrap();
        let labels = Indices::from((0..64).map(|i| i % 10).collect::<Vec<usize>>());
        MainJob { net, x, labels, opt: Adam::new(AdamConfig::adam()).unwrap(), step: 0 }
    }

    /// The logits of `x` as the job's evaluation computes them (no graph, dropout off).
    fn eval(&self, x: &Tensor) -> Tensor {
        let _g = forgia::no_grad();
        let n = &self.net;
        // As the job: pool, then relu (the same values and gradients as relu, then pool).
        let block = |c: &Conv2d, x: &Tensor| c.forward(x).unwrap().max_pool2d((2, 2), (2, 2), (0, 0)).unwrap().relu();
        let h = block(&n.conv2, &block(&n.conv1, x)).flatten(1, -1).unwrap();
        n.fc2.forward(&n.fc1.forward(&h).unwrap().relu()).unwrap()
    }

    /// One training step as `forgia train` takes it: zero_grad, forward, loss, backward, Adam.
    fn step(&mut self) -> f32 {
        let (n, s) = (&self.net, self.step);
        self.opt.zero_grad(n);
        // As the job: pool, then relu (the same values and gradients as relu, then pool).
        let block = |c: &Conv2d, x: &Tensor| c.forward(x).unwrap().max_pool2d((2, 2), (2, 2), (0, 0)).unwrap().relu();
        let h = block(&n.conv2, &block(&n.conv1, &self.x));
        let h = n.drop1.forward_with_seed(&h, n.drop1.seed_of_call(s)).unwrap().flatten(1, -1).unwrap();
        let h = n.fc1.forward(&h).unwrap().relu();
        let h = n.drop2.forward_with_seed(&h, n.drop2.seed_of_call(s)).unwrap();
        let loss = cross_entropy(&n.fc2.forward(&h).unwrap(), &self.labels, CrossEntropyOptions::default()).unwrap();
        loss.backward().unwrap();
        self.opt.step(&mut self.net).unwrap();
        self.step += 1;
        loss.item().unwrap()
    }
}

fn main_job(c: &mut Criterion) {
    let mut job = MainJob::new();
    c.bench_function("main_job_cnn_step_b64", |b| b.iter(|| job.step()));
    // The job's evaluation: the CNN forward on 500 test images under no_grad, dropout off.
    let x500 = Tensor::randn(&[500, 1, 28, 28], 0.0, 1.0, &mut Rng::new(7)).unwrap();
    c.bench_function("main_job_cnn_eval_b500", |b| b.iter(|| job.eval(&x500)));
    // Its two convolutions alone, forward and forward + backward (conv1's input needs no
    // gradient, as in the job).
    let mut rng = Rng::new(6);
    let pad2 = Conv2dOptions { padding: (2, 2), ..Conv2dOptions::default() };
    let x1 = Tensor::randn(&[64, 1, 28, 28], 0.0, 1.0, &mut rng).unwrap();
    let w1 = Tensor::randn(&[32, 1, 5, 5], 0.0, 0.2, &mut rng).unwrap().into_variable();
    let x2 = Tensor::randn(&[64, 32, 14, 14], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let w2 = Tensor::randn(&[64, 32, 5, 5], 0.0, 0.04, &mut rng).unwrap().into_variable();
    for (name, x, w) in [("c1_64x1x28x28_k5_o32", &x1, &w1), ("c2_64x32x14x14_k5_o64", &x2, &w2)] {
        c.bench_function(&format!("conv2d_fwd_{name}"), |b| {
            b.iter(|| {
                let _g = forgia::no_grad();
                x.conv2d(w, None, pad2).unwrap()
            })
        });
        c.bench_function(&format!("conv2d_fwd_bwd_{name}"), |b| {
            b.iter(|| {
                x.conv2d(w, None, pad2).unwrap().sum_all().backward().unwrap();
                x.zero_grad();
                w.zero_grad();
            })
        });
    }
}

/// ResNet-18's (W12's) stem, first-stage and last-stage convolutions at batch 8, forward +
/// backward: the products whose column matrices are unfolded band by band and the weight
/// gradients unfolded tap-major (stem, first stage), the samples that share products (last
/// stage: 49 pixels a sample; `kernels/conv.rs`), and the stem's 3x3 stride-2 max pool.
fn resnet_layers(c: &mut Criterion) {
    let mut rng = Rng::new(12);
    let layers = [
        ("stem_3x224_k7s2_o64", 3, 224, 64, 7, 2),
        ("stage1_64x56_k3_o64", 64, 56, 64, 3, 1),
        ("stage4_512x7_k3_o512", 512, 7, 512, 3, 1),
    ];
    for (name, ch, side, out, k, stride) in layers {
        let x = Tensor::randn(&[8, ch, side, side], 0.0, 1.0, &mut rng).unwrap();
        let x = if ch == 3 { x } else { x.into_variable() };
        let w = Tensor::randn(&[out, ch, k, k], 0.0, 0.05, &mut rng).unwrap().into_variable();
        let opts = Conv2dOptions { stride: (stride, stride), padding: (k / 2, k / 2), ..Conv2dOptions::default() };
        c.bench_function(&format!("resnet_conv_fwd_bwd_b8_{name}"), |b| {
            b.iter(|| {
                x.conv2d(&w, None, opts).unwrap().sum_all().backward().unwrap();
                x.zero_grad();
                w.zero_grad();
            })
        });
    }
    let x = Tensor::randn(&[8, 64, 112, 112], 0.0, 1.0, &mut rng).unwrap().into_variable();
    c.bench_function("resnet_max_pool_k3s2p1_fwd_bwd_b8_64x112", |b| {
        b.iter(|| {
            x.max_pool2d((3, 3), (2, 2), (1, 1)).unwrap().sum_all().backward().unwrap();
            x.zero_grad();
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(3));
    targets = conv2d, w4_step, gradient_penalty, main_job, resnet_layers
}

fn main() {
    if let Some(steps) = std::env::var("FORGIA_CONV_STEPS").ok().and_then(|v| v.parse::<u64>().ok()) {
        let threads = std::env::var("FORGIA_CONV_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
        forgia::set_num_threads(threads).unwrap();
        if std::env::var("FORGIA_CONV_JOB").is_ok_and(|j| j == "w4") {
            let mut rng = Rng::new(1);
            let (net, x) = (Cnn::new(&mut rng), Tensor::randn(&[64, 1, 28, 28], 0.0, 1.0, &mut rng).unwrap());
            let loss: f32 = (0..steps).map(|_| net.step(&x).unwrap()).sum();
            println!("{steps} steps of the W4-like CNN on {threads} threads, loss sum {loss}");
            return;
        }
        let mut job = MainJob::new();
        let loss: f32 = (0..steps).map(|_| job.step()).sum();
        println!("{steps} steps of the main job's CNN on {threads} threads, loss sum {loss}");
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
