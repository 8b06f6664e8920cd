//! Shape ops: views (free) against copies (concat, pad, contiguous of a transpose).
#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{PadMode, Rng, Tensor, UnfoldOptions};

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

/// Issue 15's structure ops on the same matrix (and a small image batch for unfold/fold).
fn structure_ops(c: &mut Criterion) {
    let x = Tensor::randn(&[512, 1024], 0.0, 1.0, &mut Rng::new(2)).unwrap();
    let img = Tensor::randn(&[8, 16, 32, 32], 0.0, 1.0, &mut Rng::new(3)).unwrap();
    let o = UnfoldOptions { padding: [1, 1], ..UnfoldOptions::new([3, 3]) };
    let cols = img.unfold(o).unwrap();
    let mut g = c.benchmark_group("structure_512x1024");
    g.bench_function("tril", |b| b.iter(|| x.tril(0).unwrap()));
    g.bench_function("diagonal_view", |b| b.iter(|| x.diagonal(0, 0, 1).unwrap()));
    g.bench_function("roll", |b| b.iter(|| x.roll(&[3, -5], &[0, 1]).unwrap()));
    g.bench_function("pad_reflect_1", |b| b.iter(|| x.pad_with(&[(1, 1), (1, 1)], PadMode::Reflect).unwrap()));
    g.bench_function("pad_replicate_1", |b| b.iter(|| x.pad_with(&[(1, 1), (1, 1)], PadMode::Replicate).unwrap()));
    g.bench_function("pad_circular_1", |b| b.iter(|| x.pad_with(&[(1, 1), (1, 1)], PadMode::Circular).unwrap()));
    g.bench_function("unfold_8x16x32x32_k3", |b| b.iter(|| img.unfold(o).unwrap()));
    g.bench_function("fold_8x16x32x32_k3", |b| b.iter(|| cols.fold([32, 32], o).unwrap()));
    g.finish();
}

criterion_group!(benches, shape_ops, structure_ops);
criterion_main!(benches);
