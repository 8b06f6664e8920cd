//! Criterion benches of the softmax family and the fused cross-entropy (forward + backward).
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::{Indices, Rng, Tensor};

fn softmax(c: &mut Criterion) {
    let mut rng = Rng::new(1);
    let x = Tensor::randn(&[256, 1024], 0.0, 1.0, &mut rng).unwrap();
    c.bench_function("softmax_256x1024_last_axis", |b| b.iter(|| x.softmax(-1).unwrap()));
    c.bench_function("softmax_256x1024_first_axis", |b| b.iter(|| x.softmax(0).unwrap()));
    // A middle axis with more blocks than threads: the block path's general lines.
    let cube = Tensor::randn(&[16, 256, 256], 0.0, 1.0, &mut Rng::new(3)).unwrap();
    c.bench_function("softmax_16x256x256_middle_axis", |b| b.iter(|| cube.softmax(1).unwrap()));
    // Lines of four: the per-line overhead, and the grouping of lines into tasks.
    let short = Tensor::randn(&[262_144, 4], 0.0, 1.0, &mut Rng::new(2)).unwrap();
    c.bench_function("softmax_262144x4_last_axis", |b| b.iter(|| short.softmax(-1).unwrap()));
    // Forward and backward of the short lines (the backward's groups), from a given gradient.
    let seed = Tensor::randn(&[262_144, 4], 0.0, 1.0, &mut Rng::new(4)).unwrap();
    c.bench_function("softmax_262144x4_last_axis_fwd_bwd", |b| {
        b.iter(|| {
            let v = short.clone().into_variable();
            v.softmax(-1).unwrap().backward_with_grad(&seed).unwrap();
            v.grad().unwrap()
        })
    });
    let labels = Indices::from((0..256).map(|i| (i * 37) % 1000).collect::<Vec<usize>>());
    let logits = Tensor::randn(&[256, 1000], 0.0, 1.0, &mut rng).unwrap();
    c.bench_function("cross_entropy_256x1000_fwd_bwd", |b| {
        b.iter(|| {
            let v = logits.clone().into_variable();
            cross_entropy(&v, &labels, CrossEntropyOptions::default()).unwrap().backward().unwrap();
            v.grad().unwrap()
        })
    });
}

criterion_group!(benches, softmax);
criterion_main!(benches);
