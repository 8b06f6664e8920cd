//! Scaled dot-product attention benches: forward, and forward + backward, causal, at a large
//! head shape and at the small-head shape of the W6 character transformer (fed the head-split
//! views `x.reshape(B, S, H, dh).transpose(1, 2)` that `MultiHeadAttention` passes), and
//! grouped-query attention (Llama-style 4 query heads per key/value head) against the same
//! shape with the key/value heads repeated, and W9's MiniLM shape with a key-padding mask.
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

/// Grouped-query attention `[B, Hq, S, D]` with `Hq / Hkv = 4`, forward and forward + backward,
/// causal, and the multi-head baseline that materializes the repeated key/value heads.
fn gqa(c: &mut Criterion) {
    let mut rng = Rng::new(1);
    let (b, hq, hkv, s, d) = (4, 16, 4, 128, 64);
    let q = Tensor::randn(&[b, hq, s, d], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let kv = [(); 2].map(|_| Tensor::randn(&[b, hkv, s, d], 0.0, 1.0, &mut rng).unwrap().into_variable());
    let opts = AttentionOptions { causal: true, enable_gqa: true, ..Default::default() };
    let name = format!("b{b}hq{hq}hkv{hkv}s{s}d{d}_causal");
    c.bench_function(&format!("sdpa_gqa_fwd_{name}"), |bch| {
        bch.iter(|| {
            let _g = forgia::no_grad();
            q.scaled_dot_product_attention(&kv[0], &kv[1], opts).unwrap()
        })
    });
    c.bench_function(&format!("sdpa_gqa_fwd_bwd_{name}"), |bch| {
        bch.iter(|| {
            q.scaled_dot_product_attention(&kv[0], &kv[1], opts).unwrap().sum_all().backward().unwrap();
            for t in [&q, &kv[0], &kv[1]] {
                t.zero_grad();
            }
        })
    });
    let repeat = |t: &Tensor| {
        t.unsqueeze(2).unwrap().broadcast_to(&[b, hkv, hq / hkv, s, d]).unwrap().reshape(&[b, hq, s, d]).unwrap()
    };
    let mha = AttentionOptions { causal: true, ..Default::default() };
    c.bench_function(&format!("sdpa_repeated_kv_fwd_bwd_{name}"), |bch| {
        bch.iter(|| {
            let (k, v) = (repeat(&kv[0]), repeat(&kv[1]));
            q.scaled_dot_product_attention(&k, &v, mha).unwrap().sum_all().backward().unwrap();
            for t in [&q, &kv[0], &kv[1]] {
                t.zero_grad();
            }
        })
    });
}

/// W9 (MiniLM): B = 32, H = 12, S = 64, dh = 32, not causal, with BERT's additive key-padding
/// mask `[B, 1, 1, S]` (a quarter of each row's keys padded), forward + backward.
fn keymask(c: &mut Criterion) {
    let mut rng = Rng::new(2);
    let (b, h, s, dh) = (32, 12, 64, 32);
    let xs = [(); 3].map(|_| Tensor::randn(&[b, s, h * dh], 0.0, 1.0, &mut rng).unwrap().into_variable());
    let split = |x: &Tensor| x.reshape(&[b, s, h, dh]).unwrap().transpose(1, 2).unwrap();
    let add: Vec<f32> = (0..b * s).map(|i| if i % s < 3 * s / 4 { 0.0 } else { f32::MIN }).collect();
    let mask = Tensor::from_vec(add, &[b, 1, 1, s]).unwrap();
    let opts = AttentionOptions { mask: Some(&mask), ..Default::default() };
    c.bench_function("sdpa_fwd_bwd_b32h12s64d32_keymask", |bch| {
        bch.iter(|| {
            let [q, k, v] = xs.each_ref().map(split);
            q.scaled_dot_product_attention(&k, &v, opts).unwrap().sum_all().backward().unwrap();
            for t in &xs {
                t.zero_grad();
            }
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(3));
    targets = attention, gqa, keymask
}
criterion_main!(benches);
