//! Shape ops: views (free) against copies (concat, pad, contiguous of a transpose).
#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{Rng, Tensor};

fn shape_ops(c: &mut Criterion) {
    let x = Tensor::randn(&[512, 1024], 0.0, 1.0, &mut Rng::new(1)).unwrap();
    let mut g = c.benchmark_group("shape_512x1024");
    g.bench_function("transpose_view", |b| b.iter(|| x.transpose(0, 1).unwrap()));
    g.bench_function("transpose_contiguous", |b| b.iter(|| x.transpose(0, 1).unwrap().contiguous().unwrap()));
    g.bench_function("concat_axis1", |b| b.iter(|| Tensor::concat(&[&x, &x], 1).unwrap()));
    g.bench_function("pad_1", |b| b.iter(|| x.pad(&[(1, 1), (1, 1)], 0.0).unwrap()));
    g.bench_function("slice_step2_contiguous", |b| b.iter(|| x.slice(1, 0, 1024, 2).unwrap().contiguous().unwrap()));
    g.finish();
}

criterion_group!(benches, shape_ops);
criterion_main!(benches);
