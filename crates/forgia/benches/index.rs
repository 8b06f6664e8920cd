//! Indexing: an embedding lookup and its scatter-add backward, and gather.
#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{Indices, Rng, Tensor};

fn index_ops(c: &mut Criterion) {
    let mut rng = Rng::new(2);
    let table = Tensor::randn(&[1000, 128], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let ids = Indices::from((0..4096).map(|_| rng.below(1000)).collect::<Vec<usize>>());
    let mut g = c.benchmark_group("index");
    g.bench_function("index_select_4096x128", |b| b.iter(|| table.detach().index_select(0, &ids).unwrap()));
    g.bench_function("index_select_fwd_bwd", |b| {
        b.iter(|| {
            table.index_select(0, &ids).unwrap().sum_all().backward().unwrap();
            table.zero_grad();
        })
    });
    let x = Tensor::randn(&[256, 1000], 0.0, 1.0, &mut rng).unwrap();
    let cols = Indices::new((0..256).map(|_| rng.below(1000) as i64).collect(), &[256, 1]).unwrap();
    g.bench_function("gather_256_rows", |b| b.iter(|| x.gather(1, &cols).unwrap()));
    g.finish();
}

criterion_group!(benches, index_ops);
criterion_main!(benches);
