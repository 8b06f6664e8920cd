//! GEMM: forgia's matmul against the `gemm` crate called directly on the same 2048³ shapes.
//! Throughput is reported in elements/s where one element is one FLOP.
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

criterion_group!(benches, gemm_2048);
criterion_main!(benches);
