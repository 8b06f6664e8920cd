//! Sorting and selection: a full sort along the last axis, top-k of a vocabulary-sized row
//! (sampling), median, and the forward + backward of top-k (the scatter of its gradient).
#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{Rng, Tensor};

fn sort_ops(c: &mut Criterion) {
    let mut rng = Rng::new(3);
    let rows = Tensor::randn(&[256, 1024], 0.0, 1.0, &mut rng).unwrap();
    let logits = Tensor::randn(&[8, 50_257], 0.0, 1.0, &mut rng).unwrap();
    let mut g = c.benchmark_group("sort");
    g.bench_function("sort_256x1024", |b| b.iter(|| rows.sort(-1, false).unwrap()));
    g.bench_function("argsort_desc_256x1024", |b| b.iter(|| rows.argsort(-1, true).unwrap()));
    g.bench_function("topk50_8x50257", |b| b.iter(|| logits.topk(50, -1, true, true).unwrap()));
    g.bench_function("median_256x1024", |b| b.iter(|| rows.median(-1, false).unwrap()));
    let w = rows.clone().into_variable();
    g.bench_function("topk32_fwd_bwd_256x1024", |b| {
        b.iter(|| {
            w.topk(32, -1, true, true).unwrap().0.sum_all().backward().unwrap();
            w.zero_grad();
        })
    });
    g.finish();
}

criterion_group!(benches, sort_ops);
criterion_main!(benches);
