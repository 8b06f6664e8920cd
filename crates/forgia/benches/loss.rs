//! Losses: cross-entropy forward + backward (the fused one-pass record) and MSE.
#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::loss::{self, Reduction};
use forgia::{Indices, Rng, Tensor};

fn losses(c: &mut Criterion) {
    let mut rng = Rng::new(4);
    let logits = Tensor::randn(&[2048, 65], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let labels = Indices::from((0..2048).map(|_| rng.below(65)).collect::<Vec<usize>>());
    let target = Tensor::randn(&[2048, 65], 0.0, 1.0, &mut rng).unwrap();
    let mut g = c.benchmark_group("loss_2048x65");
    g.bench_function("cross_entropy_fwd_bwd", |b| {
        b.iter(|| {
            loss::cross_entropy(&logits, &labels, Default::default()).unwrap().backward().unwrap();
            logits.zero_grad();
        })
    });
    g.bench_function("mse_fwd_bwd", |b| {
        b.iter(|| {
            loss::mse_loss(&logits, &target, Reduction::Mean).unwrap().backward().unwrap();
            logits.zero_grad();
        })
    });
    g.finish();
}

criterion_group!(benches, losses);
criterion_main!(benches);
