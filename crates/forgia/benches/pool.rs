//! Pooling benches: the 2x2 max-pool of the main job's CNN (forward, and forward + backward)
//! at its two sizes, and a 3x3 stride-2 padded window (the general loop).
#![allow(missing_docs)] // criterion_group! generates an undocumented `pub fn`.

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{Rng, Tensor};

fn pools(c: &mut Criterion) {
    let mut rng = Rng::new(0);
    for shape in [[64, 32, 28, 28], [64, 64, 14, 14]] {
        let x = Tensor::randn(&shape, 0.0, 1.0, &mut rng).unwrap().into_variable();
        let name = format!("{}x{}x{}x{}", shape[0], shape[1], shape[2], shape[3]);
        c.bench_function(&format!("max_pool2d_2x2_fwd_{name}"), |b| {
            b.iter(|| {
                let _g = forgia::no_grad();
                x.max_pool2d((2, 2), (2, 2), (0, 0)).unwrap()
            })
        });
        c.bench_function(&format!("max_pool2d_2x2_fwd_bwd_{name}"), |b| {
            b.iter(|| {
                x.max_pool2d((2, 2), (2, 2), (0, 0)).unwrap().sum_all().backward().unwrap();
                x.zero_grad();
            })
        });
    }
    let x = Tensor::randn(&[32, 64, 28, 28], 0.0, 1.0, &mut rng).unwrap();
    c.bench_function("max_pool2d_3x3_s2_p1_fwd_32x64x28x28", |b| {
        b.iter(|| x.max_pool2d((3, 3), (2, 2), (1, 1)).unwrap())
    });
}

criterion_group!(benches, pools);
criterion_main!(benches);
