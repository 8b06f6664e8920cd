//! GEMM: forgia's matmul against the `gemm` crate called directly on the same 2048³ shapes,
//! and on the weight-gradient products `gyᵀ · x` of W6 (small output, inner dimension 2048),
//! which forgia splits along the inner dimension, and on products with a broadcast operand (the
//! backward of a product before a sum). Throughput is reported in elements/s where
//! one element is one FLOP.
#![allow(missing_docs)] // criterion_group! generates an undocumented public fn

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use forgia::{Rng, Tensor};

fn gemm_2048(c: &mut Criterion) {
    let n = 2048;
    let mut rng = Rng::new(1);
    let a = Tensor::randn(&[n, n], 0.0, 1.0, &mut rng).unwrap();
    let b = Tensor::randn(&[n, n], 0.0, 1.0, &mut rng).unwrap();
    let (av, bv) = (a.to_vec(), b.to_vec());
    let mut out = vec![0.0f32; n * n];
    let threads = forgia::num_threads();
    let mut group = c.benchmark_group("gemm_2048");
    group.sample_size(10).throughput(Throughput::Elements(2 * (n as u64).pow(3)));
    group.bench_function("forgia_matmul", |bench| bench.iter(|| a.matmul(&b).unwrap()));
    group.bench_function("gemm_crate_direct", |bench| {
        bench.iter(|| {
            // SAFETY: all three buffers are n×n row-major and `out` is exclusively borrowed.
            unsafe {
                gemm::gemm(
                    n,
                    n,
                    n,
                    out.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    av.as_ptr(),
                    1,
                    n as isize,
                    bv.as_ptr(),
                    1,
                    n as isize,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::Rayon(threads),
                )
            }
        })
    });
    let at = a.transpose(0, 1).unwrap();
    group.bench_function("forgia_matmul_transposed_lhs", |bench| bench.iter(|| at.matmul(&b).unwrap()));
    group.finish();
}

/// The `gemm` crate on a row-major `m × n` output of `a · b`, each operand given by its
/// (row, column) strides over its slice: forgia's call before the inner-dimension split or
/// the packed transposed operand.
fn crate_product(
    (m, n, k): (usize, usize, usize),
    (a, a_rs, a_cs): (&[f32], usize, usize),
    (b, b_rs, b_cs): (&[f32], usize, usize),
    out: &mut [f32],
    threads: usize,
) {
    assert!(a.len() > (m - 1) * a_rs + (k - 1) * a_cs && b.len() > (k - 1) * b_rs + (n - 1) * b_cs);
    assert!(out.len() >= m * n);
    let par = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    // SAFETY: both operands' reads lie inside their slices (asserted above) and `out` holds the
    // m×n row-major output; it is exclusively borrowed and aliases neither input.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            par,
        )
    }
}

/// Weight gradients `gyᵀ · x`, `[m, k] · [k, n]`: W6's over its 2048 rows for the attention
/// projections (128×128), the MLP (512×128, 128×512) and the head (65×128), the main job's
/// two convolutions over a batch of 64 (32×25 over 64·28·28 positions, 64×800 over
/// 64·14·14), and W7's two layers over its 4096 rows (1024×256, 256×1024); forgia's matmul on
/// the transposed view (split along k, or computed as its transpose: `kernels::gemm`) against
/// the crate's call as is.
fn weight_gradients(c: &mut Criterion) {
    let threads = forgia::num_threads();
    let mut group = c.benchmark_group("weight_gradient");
    group.sample_size(20);
    let w6 = [(128, 128), (512, 128), (128, 512), (65, 128)].map(|(m, n)| (m, n, 2048));
    let others = [(32, 25, 64 * 28 * 28), (64, 800, 64 * 14 * 14), (1024, 256, 4096), (256, 1024, 4096)];
    for (m, n, k) in w6.into_iter().chain(others) {
        let mut rng = Rng::new(2);
        let gy = Tensor::randn(&[k, m], 0.0, 1.0, &mut rng).unwrap();
        let x = Tensor::randn(&[k, n], 0.0, 1.0, &mut rng).unwrap();
        let gyt = gy.transpose(0, 1).unwrap();
        let (gv, xv) = (gy.to_vec(), x.to_vec());
        let mut out = vec![0.0f32; m * n];
        group.throughput(Throughput::Elements(2 * (m * n * k) as u64));
        group.bench_function(format!("forgia_{m}x{k}x{n}"), |bench| bench.iter(|| gyt.matmul(&x).unwrap()));
        group.bench_function(format!("crate_unsplit_{m}x{k}x{n}"), |bench| {
            bench.iter(|| crate_product((m, n, k), (&gv, 1, m), (&xv, n, 1), &mut out, threads))
        });
    }
    group.finish();
}

/// Products with a transposed right operand, `x · wᵀ`: a linear layer's forward and the
/// left gradient `gy · Vᵀ` of every matmul. Shapes of W11 (64×256·256), W2 (256×784 with a
/// 1024-wide layer) and W3 (512×1024·1024); forgia's matmul (which packs `wᵀ` first) against
/// the crate reading it in place, and the transpose alone (`contiguous` of the view).
fn transposed_rhs(c: &mut Criterion) {
    let threads = forgia::num_threads();
    let mut group = c.benchmark_group("transposed_rhs");
    group.sample_size(20);
    for (m, n, k) in [(64, 256, 256), (256, 1024, 784), (512, 1024, 1024)] {
        let mut rng = Rng::new(3);
        let x = Tensor::randn(&[m, k], 0.0, 1.0, &mut rng).unwrap();
        let w = Tensor::randn(&[n, k], 0.0, 1.0, &mut rng).unwrap();
        let wt = w.transpose(0, 1).unwrap();
        let (xv, wv) = (x.to_vec(), w.to_vec());
        let mut out = vec![0.0f32; m * n];
        group.throughput(Throughput::Elements(2 * (m * n * k) as u64));
        group.bench_function(format!("forgia_{m}x{k}x{n}"), |bench| bench.iter(|| x.matmul(&wt).unwrap()));
        group.bench_function(format!("crate_in_place_{m}x{k}x{n}"), |bench| {
            bench.iter(|| crate_product((m, n, k), (&xv, k, 1), (&wv, 1, k), &mut out, threads))
        });
        group.throughput(Throughput::Elements((n * k) as u64));
        group.bench_function(format!("transpose_{n}x{k}"), |bench| bench.iter(|| wt.contiguous()));
    }
    group.finish();
}

/// Products with a broadcast operand, as the gradient of `y.sum()` meets `y = t · v` (W11's
/// shapes, `t` [64, 256], `v` [256, 256]): `gy · vᵀ` and `gy · v` sum `v` over `k` along and
/// across its storage, `tᵀ · gy` and `t · gy` sum `t` the same two ways (`gy` one element
/// broadcast; see `kernels/gemm/broadcast.rs`).
fn broadcast_sums(c: &mut Criterion) {
    let (m, k) = (64, 256);
    let mut rng = Rng::new(4);
    let t = Tensor::randn(&[m, k], 0.0, 1.0, &mut rng).unwrap();
    let v = Tensor::randn(&[k, k], 0.0, 1.0, &mut rng).unwrap();
    let (tt, vt) = (t.transpose(0, 1).unwrap(), v.transpose(0, 1).unwrap());
    let one = Tensor::full(&[1, 1], 1.0).unwrap();
    let (gy_mk, gy_kk) = (one.broadcast_to(&[m, k]).unwrap(), one.broadcast_to(&[k, k]).unwrap());
    let mut group = c.benchmark_group("broadcast_sum");
    group.sample_size(20);
    group.bench_function("gy_vt", |bench| bench.iter(|| gy_mk.matmul(&vt).unwrap()));
    group.bench_function("gy_v", |bench| bench.iter(|| gy_mk.matmul(&v).unwrap()));
    group.bench_function("tt_gy", |bench| bench.iter(|| tt.matmul(&gy_mk).unwrap()));
    group.bench_function("t_gy", |bench| bench.iter(|| t.matmul(&gy_kk).unwrap()));
    group.finish();
}

criterion_group!(benches, gemm_2048, weight_gradients, transposed_rhs, broadcast_sums);
criterion_main!(benches);
