//! Contractions: batched matmul (attention-sized), einsum and dot over a named axis.
#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{Rng, Tensor};

fn contractions(c: &mut Criterion) {
    let mut rng = Rng::new(3);
    let q = Tensor::randn(&[32, 64, 32], 0.0, 1.0, &mut rng).unwrap();
    let k = Tensor::randn(&[32, 32, 64], 0.0, 1.0, &mut rng).unwrap();
    let a = Tensor::randn(&[256, 512], 0.0, 1.0, &mut rng).unwrap();
    let w = Tensor::randn(&[512, 256], 0.0, 1.0, &mut rng).unwrap();
    let named = a.with_names(&[Some("batch"), Some("in")]).unwrap();
    let wn = w.transpose(0, 1).unwrap().with_names(&[Some("out"), Some("in")]).unwrap();
    let mut g = c.benchmark_group("contract");
    g.bench_function("bmm_32x64x32x64", |b| b.iter(|| q.matmul(&k).unwrap()));
    g.bench_function("einsum_ij_jk", |b| b.iter(|| Tensor::einsum("ij,jk->ik", &a, &w).unwrap()));
    g.bench_function("matmul_256x512x256", |b| b.iter(|| a.matmul(&w).unwrap()));
    g.bench_function("dot_named_in", |b| b.iter(|| named.dot(&wn, "in").unwrap()));
    g.finish();
}

criterion_group!(benches, contractions);
criterion_main!(benches);
