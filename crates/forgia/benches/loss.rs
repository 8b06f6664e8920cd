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

/// Issue 15's losses, forward + backward, on the same sizes.
fn more_losses(c: &mut Criterion) {
    let mut rng = Rng::new(5);
    let logits = Tensor::randn(&[2048, 65], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let labels = Indices::from((0..2048).map(|_| rng.below(65)).collect::<Vec<usize>>());
    let weight = Tensor::rand(&[65], 0.5, 2.0, &mut rng).unwrap();
    let probs = Tensor::randn(&[2048, 65], 0.0, 1.0, &mut rng).unwrap().softmax(1).unwrap();
    let target = Tensor::rand(&[2048, 65], 0.0, 1.0, &mut rng).unwrap();
    let signs = Tensor::from_vec((0..2048).map(|i| if i % 2 == 0 { 1.0 } else { -1.0 }).collect(), &[2048]).unwrap();
    let mut g = c.benchmark_group("loss_2048x65_more");
    let mut run = |name: &str, f: &dyn Fn() -> forgia::Result<Tensor>| {
        g.bench_function(name, |b| {
            b.iter(|| {
                f().unwrap().backward().unwrap();
                logits.zero_grad();
            })
        });
    };
    run("cross_entropy_weighted_fwd_bwd", &|| {
        loss::cross_entropy_weighted(&logits, &labels, &weight, Default::default())
    });
    run("cross_entropy_probs_fwd_bwd", &|| loss::cross_entropy_probs(&logits, &probs, None, Default::default()));
    run("l1_fwd_bwd", &|| loss::l1_loss(&logits, &target, Reduction::Mean));
    run("smooth_l1_fwd_bwd", &|| loss::smooth_l1_loss(&logits, &target, 1.0, Reduction::Mean));
    run("bce_fwd_bwd", &|| loss::binary_cross_entropy(&logits.sigmoid(), &target, None, Reduction::Mean));
    run("cosine_embedding_fwd_bwd", &|| loss::cosine_embedding_loss(&logits, &probs, &signs, 0.1, Reduction::Mean));
    run("margin_ranking_fwd_bwd", &|| {
        loss::margin_ranking_loss(&logits, &probs, &signs.reshape(&[2048, 1])?, 0.1, Reduction::Mean)
    });
    g.finish();
}

/// The fused linear–cross-entropy against `linear` + `cross_entropy` (forward + backward) on
/// an LM head of vocabulary 8192, width 256, 1024 tokens. Its point is memory (see the
/// `loss_linear` test); the time is here to see what the recomputation costs.
fn linear_cross_entropy(c: &mut Criterion) {
    let mut rng = Rng::new(6);
    let (t, d, v) = (1024, 256, 8192);
    let h = Tensor::randn(&[t, d], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let w = Tensor::randn(&[v, d], 0.0, 0.05, &mut rng).unwrap().into_variable();
    let labels = Indices::from((0..t).map(|_| rng.below(v)).collect::<Vec<usize>>());
    let mut g = c.benchmark_group("linear_cross_entropy_1024x256x8192");
    g.sample_size(10);
    g.bench_function("fused_fwd_bwd", |b| {
        b.iter(|| {
            let opts = loss::LinearCrossEntropyOptions { chunk: 256, ..Default::default() };
            loss::linear_cross_entropy(&h, &w, None, &labels, opts).unwrap().backward().unwrap();
            h.zero_grad();
            w.zero_grad();
        })
    });
    g.bench_function("unfused_fwd_bwd", |b| {
        b.iter(|| {
            loss::cross_entropy(&h.linear(&w, None).unwrap(), &labels, Default::default()).unwrap().backward().unwrap();
            h.zero_grad();
            w.zero_grad();
        })
    });
    g.finish();
}

criterion_group!(benches, losses, more_losses, linear_cross_entropy);
criterion_main!(benches);
