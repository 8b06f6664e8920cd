//! Reductions through the public API on a 1024×1024 matrix (and a 4M-element vector for the
//! whole-tensor forms): sum over rows and columns, max with its argmax, var, logsumexp, prod,
//! cumsum.
#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use forgia::{Rng, Tensor};

fn reduce(c: &mut Criterion) {
    let mut rng = Rng::new(2);
    let m = Tensor::randn(&[1024, 1024], 0.0, 1.0, &mut rng).unwrap();
    let v = Tensor::randn(&[1 << 22], 0.0, 1.0, &mut rng).unwrap();
    let mut group = c.benchmark_group("reduce_1024x1024");
    group.throughput(Throughput::Elements(1 << 20));
    group.bench_function("sum_rows", |b| b.iter(|| m.sum(1, false).unwrap()));
    group.bench_function("sum_cols", |b| b.iter(|| m.sum(0, false).unwrap()));
    group.bench_function("max_rows", |b| b.iter(|| m.max(1, false).unwrap()));
    group.bench_function("var_rows", |b| b.iter(|| m.var(1, 1, false).unwrap()));
    group.bench_function("logsumexp_rows", |b| b.iter(|| m.logsumexp(1, false).unwrap()));
    group.bench_function("prod_rows", |b| b.iter(|| m.prod(1, false).unwrap()));
    group.bench_function("cumsum_rows", |b| b.iter(|| m.cumsum(1).unwrap()));
    group.finish();
    let mut group = c.benchmark_group("reduce_all_4M");
    group.throughput(Throughput::Elements(1 << 22));
    group.bench_function("sum_all", |b| b.iter(|| v.sum_all()));
    group.bench_function("max_all", |b| b.iter(|| v.max_all().unwrap()));
    group.finish();
}

/// Issue 15's reductions and scans on the same matrix: std, norms, cumprod, cummax.
fn norms_and_scans(c: &mut Criterion) {
    let m = Tensor::randn(&[1024, 1024], 0.0, 1.0, &mut Rng::new(3)).unwrap();
    let mut group = c.benchmark_group("norms_scans_1024x1024");
    group.throughput(Throughput::Elements(1 << 20));
    group.bench_function("std_rows", |b| b.iter(|| m.std(1, 1, false).unwrap()));
    group.bench_function("norm2_rows", |b| b.iter(|| m.norm(2.0, 1, false).unwrap()));
    group.bench_function("norm_inf_rows", |b| b.iter(|| m.norm(f32::INFINITY, 1, false).unwrap()));
    group.bench_function("cumprod_rows", |b| b.iter(|| m.cumprod(1).unwrap()));
    group.bench_function("cummax_rows", |b| b.iter(|| m.cummax(1).unwrap()));
    group.bench_function("cosine_similarity_rows", |b| b.iter(|| m.cosine_similarity(&m, 1, 1e-8).unwrap()));
    group.finish();
}

criterion_group!(benches, reduce, norms_and_scans);
criterion_main!(benches);
