//! Dropout benches: the mask of the main job's two layers (`[64, 3136]` and `[64, 128]`),
//! forward and forward + backward, and a large tensor that runs in parallel chunks.
#![allow(missing_docs)] // criterion_group! generates an undocumented `pub fn`.

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{Rng, Tensor};

fn dropouts(c: &mut Criterion) {
    let mut rng = Rng::new(0);
    for shape in [[64, 3136], [64, 128], [256, 4096]] {
        let x = Tensor::randn(&shape, 0.0, 1.0, &mut rng).unwrap().into_variable();
        let name = format!("{}x{}", shape[0], shape[1]);
        c.bench_function(&format!("dropout_fwd_{name}"), |b| {
            b.iter(|| {
                let _g = forgia::no_grad();
                x.dropout(0.25, 7, true).unwrap()
            })
        });
        c.bench_function(&format!("dropout_fwd_bwd_{name}"), |b| {
            b.iter(|| {
                x.dropout(0.25, 7, true).unwrap().sum_all().backward().unwrap();
                x.zero_grad();
            })
        });
    }
}

criterion_group!(benches, dropouts);
criterion_main!(benches);
