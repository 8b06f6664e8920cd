//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

pub mod bad_input;
pub mod golden;
pub mod identity;
pub mod isolated;
pub mod second_order;
pub mod second_order_unary;
pub mod temp;

use forgia::{gradcheck, GradcheckOptions, Result, Rng, Tensor};

/// A variable of `shape` filled with distinct, well-spread values (a deterministic grid).
pub fn var(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let data = (0..n).map(|i| ((i as u64 * 7 + seed * 13) % 17) as f32 * 0.25 - 2.0).collect();
    Tensor::variable(data, shape).unwrap()
}

/// `n` values spread uniformly over `[-scale, scale)` by a 64-bit LCG from `seed` (no
/// library RNG involved, so tests can feed the library independent data).
pub fn lcg(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0) * scale
        })
        .collect()
}

/// `a · b` in f64 for a row-major `m × k` `a` and `k × n` `b`.
pub fn product_f64(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = f64::from(a[i * k + p]);
            for j in 0..n {
                c[i * n + j] += x * f64::from(b[p * n + j]);
            }
        }
    }
    c
}

/// Asserts that an f32 product with inner dimension `k` is within `1e-5 · √k` (relative, plus
/// an absolute floor of the same size) of its f64 reference.
pub fn assert_product_close(got: &[f32], want: &[f64], k: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let tol = 1e-5 * (k as f64).sqrt();
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((f64::from(*g) - w).abs() <= tol * (1.0 + w.abs()), "{what} [{i}]: {g} vs {w}");
    }
}

/// A variable of `shape` drawn from N(0, 1) with `Rng::new(seed)`.
pub fn normal_var(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, 0.0, 1.0, &mut Rng::new(seed)).unwrap().into_variable()
}

/// Asserts that `f`'s backward matches finite differences at `xs`.
pub fn passes(f: impl Fn(&[Tensor]) -> Result<Tensor>, xs: &[Tensor]) {
    check(f, xs, "gradcheck");
}

/// [`passes`], naming the case `what` in the failure message.
pub fn check(f: impl Fn(&[Tensor]) -> Result<Tensor>, xs: &[Tensor], what: &str) {
    let report = gradcheck(f, xs, GradcheckOptions::default()).unwrap();
    assert!(report.passed(), "{what}: {:?}", report.first_mismatch);
}

/// A one-layer BERT (vocabulary 20, hidden 8, 2 heads, 6 positions) from `Rng::new(0)`.
pub fn small_bert() -> forgia::models::bert::BertModel {
    let c = forgia::models::bert::BertConfig {
        vocab_size: 20,
        hidden_size: 8,
        num_hidden_layers: 1,
        num_attention_heads: 2,
        intermediate_size: 16,
        max_position_embeddings: 6,
        ..forgia::models::bert::BertConfig::default()
    };
    forgia::models::bert::BertModel::new(c, &mut Rng::new(0)).unwrap()
}
