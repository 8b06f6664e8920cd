//! Pointwise kernels through the public API: add, mul, tanh and gelu at 1K, 64K and 4M
//! elements (inference path: constants, no graph), plus `add` around the parallel threshold,
//! and GELU's records forward and backward at W7's hidden size.
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

/// Issue 15's activations at 64K elements: forward only, and the gated units forward +
/// backward (their fused record).
fn activations(c: &mut Criterion) {
    let n = 1 << 16;
    let (a, b) = inputs(n);
    let mut group = c.benchmark_group("activations_64k");
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("elu", |bch| bch.iter(|| a.elu(1.0).unwrap()));
    group.bench_function("selu", |bch| bch.iter(|| a.selu()));
    group.bench_function("mish", |bch| bch.iter(|| a.mish()));
    group.bench_function("hardswish", |bch| bch.iter(|| a.hardswish()));
    group.bench_function("hardsigmoid", |bch| bch.iter(|| a.hardsigmoid()));
    group.bench_function("log_sigmoid", |bch| bch.iter(|| a.log_sigmoid()));
    group.bench_function("log1p", |bch| bch.iter(|| a.abs().log1p()));
    group.bench_function("expm1", |bch| bch.iter(|| a.expm1()));
    group.bench_function("glu_fused", |bch| bch.iter(|| a.glu(0).unwrap()));
    let (v, g) = (a.clone().into_variable(), b.clone().into_variable());
    group.bench_function("swiglu_with_fwd_bwd", |bch| {
        bch.iter(|| {
            v.swiglu_with(&g).unwrap().sum_all().backward().unwrap();
            v.zero_grad();
            g.zero_grad();
        })
    });
    group.finish();
}

/// GELU's forward and backward records at W7's `[4096, 1024]` (one MLP's hidden layer): the
/// backward seeded with a given gradient, so the time is the record's kernel alone.
fn gelu_record(c: &mut Criterion) {
    let n = 4096 * 1024;
    let (a, b) = inputs(n);
    let v = a.into_variable();
    let mut group = c.benchmark_group("gelu_4m");
    group.throughput(Throughput::Elements(n as u64));
    for (name, tanh) in [("gelu", false), ("gelu_tanh", true)] {
        group.bench_function(format!("{name}_fwd"), |bch| bch.iter(|| if tanh { v.gelu_tanh() } else { v.gelu() }));
        group.bench_function(format!("{name}_fwd_bwd"), |bch| {
            bch.iter(|| {
                let y = if tanh { v.gelu_tanh() } else { v.gelu() };
                y.backward_with_grad(&b).unwrap();
                v.zero_grad();
            })
        });
    }
    group.finish();
}

criterion_group!(benches, pointwise, add_threshold, activations, gelu_record);
criterion_main!(benches);
