//! Scaled dot-product attention benches: forward, and forward + backward, causal.
#![allow(missing_docs)] // criterion_group! generates an undocumented `pub fn`.

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{AttentionOptions, Rng, Tensor};

fn attention(c: &mut Criterion) {
    let mut rng = Rng::new(0);
    let shape = [8, 8, 128, 64];
    let q = Tensor::randn(&shape, 0.0, 1.0, &mut rng).into_variable();
    let k = Tensor::randn(&shape, 0.0, 1.0, &mut rng).into_variable();
    let v = Tensor::randn(&shape, 0.0, 1.0, &mut rng).into_variable();
    let opts = AttentionOptions { causal: true, ..Default::default() };
    c.bench_function("sdpa_fwd_b8h8s128d64_causal", |b| {
        b.iter(|| {
            let _g = forgia::no_grad();
            q.scaled_dot_product_attention(&k, &v, opts).unwrap()
        })
    });
    c.bench_function("sdpa_fwd_bwd_b8h8s128d64_causal", |b| {
        b.iter(|| {
            q.scaled_dot_product_attention(&k, &v, opts).unwrap().sum_all().backward().unwrap();
            for t in [&q, &k, &v] {
                t.zero_grad();
            }
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(3));
    targets = attention
}
criterion_main!(benches);
