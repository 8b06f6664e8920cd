//! Normalization benches: layer_norm, rms_norm, batch_norm and group_norm, forward and
//! forward + backward.
#![allow(missing_docs)] // criterion_group! generates an undocumented `pub fn`.

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{Rng, RunningStats, Tensor};

fn norms(c: &mut Criterion) {
    let mut rng = Rng::new(0);
    let x = Tensor::randn(&[64, 128, 512], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let w = Tensor::ones(&[512]).unwrap().into_variable();
    let b = Tensor::zeros(&[512]).unwrap().into_variable();
    c.bench_function("layer_norm_fwd_bwd_64x128x512", |bch| {
        bch.iter(|| {
            x.layer_norm(&[512], Some(&w), Some(&b), 1e-5).unwrap().sum_all().backward().unwrap();
            for t in [&x, &w, &b] {
                t.zero_grad();
            }
        })
    });
    c.bench_function("rms_norm_fwd_64x128x512", |bch| {
        bch.iter(|| {
            let _g = forgia::no_grad();
            x.rms_norm(Some(&w), 1e-6).unwrap()
        })
    });
    let x4 = Tensor::randn(&[32, 64, 28, 28], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let wc = Tensor::ones(&[64]).unwrap().into_variable();
    let bc = Tensor::zeros(&[64]).unwrap().into_variable();
    c.bench_function("batch_norm_train_fwd_bwd_32x64x28x28", |bch| {
        let mut stats = RunningStats::new(64).unwrap();
        bch.iter(|| {
            x4.batch_norm(&mut stats, Some(&wc), Some(&bc), true, 1e-5).unwrap().sum_all().backward().unwrap();
            for t in [&x4, &wc, &bc] {
                t.zero_grad();
            }
        })
    });
    c.bench_function("group_norm_g8_fwd_bwd_32x64x28x28", |bch| {
        bch.iter(|| {
            x4.group_norm(8, Some(&wc), Some(&bc), 1e-5).unwrap().sum_all().backward().unwrap();
            for t in [&x4, &wc, &bc] {
                t.zero_grad();
            }
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(3));
    targets = norms
}
criterion_main!(benches);
