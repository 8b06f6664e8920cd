//! The pool adopts the program's main thread (`parallel.rs`). This test has no harness, so its
//! `main` is the process's main thread, which builds the pool with its first operation.

use forgia::{Rng, Tensor};

fn main() {
    let mut rng = Rng::new(3);
    let a = Tensor::randn(&[300, 200], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let b = Tensor::randn(&[200, 500], 0.0, 1.0, &mut rng).unwrap().into_variable();
    // The first operation builds the pool on this (main) thread.
    let c = a.matmul(&b).unwrap();
    let threads = forgia::num_threads();
    assert!(threads >= 1);

    // Kernels called from other threads while the main thread is blocked outside the pool
    // (here in `join`) still run, on the pool's spawned threads, and agree with the main
    // thread's result bit for bit.
    let expected = c.to_vec();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (a, b) = (a.detach(), b.detach());
            std::thread::spawn(move || a.matmul(&b).unwrap().to_vec())
        })
        .collect();
    for w in workers {
        assert_eq!(w.join().unwrap(), expected, "a product from another thread");
    }

    // A backward pass from the main thread, with two heavy branches, and one from another
    // thread give the same gradients.
    let loss = |a: &Tensor, b: &Tensor| {
        let left = a.matmul(b).unwrap().gelu();
        let right = a.matmul(b).unwrap().tanh();
        left.add(&right).unwrap().sum_all()
    };
    loss(&a, &b).backward().unwrap();
    let main_grad = a.grad().unwrap().to_vec();
    let (a2, b2) = (a.detach().into_variable(), b.detach().into_variable());
    let other = std::thread::spawn(move || {
        loss(&a2, &b2).backward().unwrap();
        a2.grad().unwrap().to_vec()
    });
    assert_eq!(other.join().unwrap(), main_grad, "gradients from another thread");

    // The main thread flushes subnormals only inside pool work: its own arithmetic keeps them.
    let tiny = std::hint::black_box(1e-30f32) * std::hint::black_box(1e-10f32);
    assert!(tiny > 0.0, "the main thread's own float mode is untouched");
    println!("adopted main thread: ok ({threads} threads)");
}
