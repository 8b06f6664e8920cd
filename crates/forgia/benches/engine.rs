//! Criterion benches of the engine's scheduling: the threshold sweep behind
//! `ASYNC_WORK_THRESHOLD`. Sixteen independent branches `tanh(x·W_i)·V_i` (x `[64, d]`, W and V
//! `[d, d]`, each product `2·64·d²` multiply-adds, the work a branch node reports) joined by a
//! chain of adds, forward + backward, with the pool and with the serial option, for several
//! widths `d`: the smallest branch work at which the pool wins is where the threshold belongs.
//! Also the cost of counting hooked leaves, a capturing pass (`forgia::grad`) against a
//! plain one, and the per-op cost of the engine on a chain of tiny ops (W1's shape).
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use forgia::{BackwardOptions, Rng, Tensor};

fn step(x: &Tensor, params: &[(Tensor, Tensor)], serial: bool) {
    let loss = params
        .iter()
        .map(|(w, v)| x.matmul(w).unwrap().tanh().matmul(v).unwrap().sum_all())
        .reduce(|a, b| a.add(&b).unwrap())
        .unwrap();
    loss.backward_with(None, BackwardOptions { serial, ..BackwardOptions::default() }).unwrap();
    for (w, v) in params {
        w.zero_grad();
        v.zero_grad();
    }
}

fn threshold_sweep(c: &mut Criterion) {
    let mut group = c.benchmark_group("branches16_add_chain");
    group.sample_size(10).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    for d in [32usize, 64, 128, 256, 512] {
        let mut rng = Rng::new(11);
        let x = Tensor::randn(&[64, d], 0.0, 1.0, &mut rng).unwrap();
        let params: Vec<(Tensor, Tensor)> = (0..16)
            .map(|_| {
                let w = Tensor::randn(&[d, d], 0.0, 0.06, &mut rng).unwrap().into_variable();
                let v = Tensor::randn(&[d, d], 0.0, 0.06, &mut rng).unwrap().into_variable();
                (w, v)
            })
            .collect();
        let work = 2 * 64 * d * d;
        group.bench_with_input(BenchmarkId::new("pooled", work), &d, |b, _| b.iter(|| step(&x, &params, false)));
        group.bench_with_input(BenchmarkId::new("serial", work), &d, |b, _| b.iter(|| step(&x, &params, true)));
    }
    group.finish();
}

/// Post-accumulate-grad hooks: a 64-leaf sum backpropagated with and without a (trivial)
/// hook on every leaf, the cost of counting hooked leaves per pass.
fn leaf_hooks(c: &mut Criterion) {
    let mut group = c.benchmark_group("leaf_hooks");
    for hooked in [false, true] {
        let leaves: Vec<Tensor> = (0..64).map(|_| Tensor::variable(vec![1.0; 16], &[16]).unwrap()).collect();
        let handles: Vec<_> = if hooked {
            leaves.iter().map(|l| l.register_post_accumulate_grad_hook(|_| Ok(())).unwrap()).collect()
        } else {
            Vec::new()
        };
        group.bench_function(BenchmarkId::from_parameter(if hooked { "hooked" } else { "plain" }), |b| {
            b.iter(|| {
                let mut total = leaves[0].tanh();
                for l in &leaves[1..] {
                    total = total.add(&l.tanh()).unwrap();
                }
                total.sum_all().backward().unwrap();
                leaves.iter().for_each(Tensor::zero_grad);
            })
        });
        handles.into_iter().for_each(forgia::HookHandle::remove);
    }
    group.finish();
}

/// `forgia::grad` against `backward` on the same graph: a 1,000-op chain of small ops over one
/// input and a captured variable, the gradient of the input only (the capturing pass prunes
/// the captured variable's branch and writes no `.grad`) vs a plain pass into both.
fn capturing_pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("capturing_pass");
    let x = Tensor::variable(vec![0.5; 16], &[16]).unwrap();
    let w = Tensor::variable(vec![0.999; 16], &[16]).unwrap();
    let chain = || {
        let mut h = x.clone();
        for i in 0..1000 {
            h = if i % 2 == 0 { h.mul(&w).unwrap() } else { h.tanh() };
        }
        h.sum_all()
    };
    group.bench_function("grad_of_the_input", |b| {
        b.iter(|| forgia::grad(&[&chain()], &[&x], &[], BackwardOptions::default()).unwrap())
    });
    group.bench_function("backward_into_both", |b| {
        b.iter(|| {
            chain().backward().unwrap();
            x.zero_grad();
            w.zero_grad();
        })
    });
    group.finish();
}

/// W1's step at 1,000 ops: `x·c`, `x+c`, `tanh` over 16 elements, summed, backpropagated.
/// Nearly all of it is the engine's own cost per op (node, record, value, firing); read it
/// with instruction counts (`valgrind --tool=callgrind`) on a shared machine.
fn tiny_op_chain(c: &mut Criterion) {
    let x = Tensor::variable(vec![0.5; 16], &[16]).unwrap();
    let k = Tensor::full(&[16], 0.999).unwrap();
    c.bench_function("tiny_op_chain_1000", |b| {
        b.iter(|| {
            let mut h = x.clone();
            for i in 0..1000 {
                h = match i % 3 {
                    0 => h.mul(&k).unwrap(),
                    1 => h.add(&k).unwrap(),
                    _ => h.tanh(),
                };
            }
            h.sum_all().backward().unwrap();
            x.zero_grad();
        })
    });
}

criterion_group!(benches, threshold_sweep, leaf_hooks, capturing_pass, tiny_op_chain);
criterion_main!(benches);
