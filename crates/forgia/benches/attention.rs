//! Scaled dot-product attention benches: forward, and forward + backward, causal, at a large
//! head shape and at the small-head shape of the W6 character transformer (fed the head-split
//! views `x.reshape(B, S, H, dh).transpose(1, 2)` that `MultiHeadAttention` passes).
#![allow(missing_docs)] // criterion_group! generates an undocumented `pub fn`.

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::{AttentionOptions, Rng, Tensor};

/// `qkv()` builds the operands from `leaves` (again for every backward: a pass releases them).
fn bench_shape(c: &mut Criterion, name: &str, qkv: impl Fn() -> [Tensor; 3], leaves: &[Tensor]) {
    let [q, k, v] = qkv();
    let opts = AttentionOptions { causal: true, ..Default::default() };
    c.bench_function(&format!("sdpa_fwd_{name}_causal"), |b| {
        b.iter(|| {
            let _g = forgia::no_grad();
            q.scaled_dot_product_attention(&k, &v, opts).unwrap()
        })
    });
    c.bench_function(&format!("sdpa_fwd_bwd_{name}_causal"), |b| {
        b.iter(|| {
            let [q, k, v] = qkv();
            q.scaled_dot_product_attention(&k, &v, opts).unwrap().sum_all().backward().unwrap();
            for t in leaves {
                t.zero_grad();
            }
        })
    });
}

fn attention(c: &mut Criterion) {
    let mut rng = Rng::new(0);
    let shape = [8, 8, 128, 64];
    let qkv = [(); 3].map(|_| Tensor::randn(&shape, 0.0, 1.0, &mut rng).unwrap().into_variable());
    bench_shape(c, "b8h8s128d64", || qkv.clone(), &qkv);
    // W6: B = 32, H = 4, S = 64, dh = 32, heads split from [B, S, H·dh] activations.
    let (b, h, s, dh) = (32, 4, 64, 32);
    let xs = [(); 3].map(|_| Tensor::randn(&[b, s, h * dh], 0.0, 1.0, &mut rng).unwrap().into_variable());
    let split = |x: &Tensor| x.reshape(&[b, s, h, dh]).unwrap().transpose(1, 2).unwrap();
    bench_shape(c, "b32h4s64d32", || xs.each_ref().map(split), &xs);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(3));
    targets = attention
}
criterion_main!(benches);
