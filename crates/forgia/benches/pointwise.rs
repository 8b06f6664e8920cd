//! Pointwise kernels through the public API: add, mul, tanh and gelu at 1K, 64K and 4M
//! elements (inference path: constants, no graph), plus `add` around the parallel threshold.
//!
//! To measure where `PARALLEL_ELEMENTS` (src/parallel.rs) should sit, run the
//! `add_threshold` group twice: as is, and with the constant set to `usize::MAX` (serial):
//! `cargo bench -p forgia --bench pointwise -- add_threshold --warm-up-time 1 --measurement-time 2`.
#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use forgia::{Rng, Tensor};

fn inputs(n: usize) -> (Tensor, Tensor) {
    let mut rng = Rng::new(1);
    (Tensor::randn(&[n], 0.0, 1.0, &mut rng).unwrap(), Tensor::randn(&[n], 0.0, 1.0, &mut rng).unwrap())
}

fn pointwise(c: &mut Criterion) {
    let mut group = c.benchmark_group("pointwise");
    for n in [1 << 10, 1 << 16, 1 << 22] {
        let (a, b) = inputs(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("add", n), &n, |bch, _| bch.iter(|| a.add(&b).unwrap()));
        group.bench_with_input(BenchmarkId::new("mul", n), &n, |bch, _| bch.iter(|| a.mul(&b).unwrap()));
        group.bench_with_input(BenchmarkId::new("tanh", n), &n, |bch, _| bch.iter(|| a.tanh()));
        group.bench_with_input(BenchmarkId::new("gelu", n), &n, |bch, _| bch.iter(|| a.gelu()));
        group.bench_with_input(BenchmarkId::new("gelu_tanh", n), &n, |bch, _| bch.iter(|| a.gelu_tanh()));
    }
    group.finish();
}

fn add_threshold(c: &mut Criterion) {
    let mut group = c.benchmark_group("add_threshold");
    for n in [1 << 14, 1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 20] {
        let (a, b) = inputs(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("add", n), &n, |bch, _| bch.iter(|| a.add(&b).unwrap()));
        group.bench_with_input(BenchmarkId::new("tanh", n), &n, |bch, _| bch.iter(|| a.tanh()));
    }
    group.finish();
}

criterion_group!(benches, pointwise, add_threshold);
criterion_main!(benches);
