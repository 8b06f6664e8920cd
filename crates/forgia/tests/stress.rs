//! Concurrency stress: many threads run forward/backward over shared leaves while others run
//! inference on the same leaves under `no_grad` and read gradient snapshots. Leaf gradients
//! must equal the serial result (within float tolerance: summation order differs), and every
//! test runs under a watchdog so a deadlock fails instead of hanging.

use std::sync::mpsc;
use std::time::Duration;

use forgia::{no_grad, BackwardOptions, ErrorKind, Rng, Tensor};

/// Runs `body` on its own thread and fails the test if it does not finish within `limit`.
fn with_watchdog(limit: Duration, body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => worker.join().expect("the stress body panicked"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked before sending: surface its panic.
            if let Err(p) = worker.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("deadlock or livelock: not done within {limit:?}"),
    }
}

/// Shared leaves of a small two-layer model.
#[derive(Clone)]
struct Leaves {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

impl Leaves {
    fn new(seed: u64, hidden: usize) -> Leaves {
        let mut rng = Rng::new(seed);
        Leaves {
            w1: Tensor::randn(&[16, hidden], 0.0, 0.3, &mut rng).unwrap().into_variable(),
            b1: Tensor::randn(&[hidden], 0.0, 0.1, &mut rng).unwrap().into_variable(),
            w2: Tensor::randn(&[hidden, 4], 0.0, 0.3, &mut rng).unwrap().into_variable(),
        }
    }

    fn all(&self) -> [&Tensor; 3] {
        [&self.w1, &self.b1, &self.w2]
    }

    /// A graph with fan-out (h used twice), a diamond through a transposed view, a strided
    /// slice and a broadcast bias. `batch` rows of input drawn from `seed`.
    fn loss(&self, seed: u64, batch: usize) -> Tensor {
        let x = Tensor::randn(&[batch, 16], 0.0, 1.0, &mut Rng::new(seed)).unwrap();
        let h = x.matmul(&self.w1).unwrap().add(&self.b1).unwrap().tanh();
        let gram = h.matmul(&h.transpose(0, 1).unwrap()).unwrap().scale(0.01); // [batch, batch]
        let y = h.matmul(&self.w2).unwrap().relu();
        let picked = y.slice(1, 0, 4, 2).unwrap(); // columns 0 and 2
        picked
            .mean_all()
            .unwrap()
            .add(&gram.mean_all().unwrap())
            .unwrap()
            .add(&h.mul(&h).unwrap().mean_all().unwrap())
            .unwrap()
    }

    fn grads(&self) -> Vec<Vec<f32>> {
        self.all().iter().map(|t| t.grad().map(|g| g.to_vec()).unwrap_or_default()).collect()
    }

    fn zero_grad(&self) {
        self.all().iter().for_each(|t| t.zero_grad());
    }
}

fn assert_close(parallel: &[Vec<f32>], serial: &[Vec<f32>]) {
    for (p, s) in parallel.iter().zip(serial) {
        assert_eq!(p.len(), s.len());
        for (a, b) in p.iter().zip(s) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
        }
    }
}

#[test]
fn trainers_and_inference_threads_over_shared_leaves_match_the_serial_gradients() {
    with_watchdog(Duration::from_secs(120), || {
        let leaves = Leaves::new(1, 32);
        let (trainers, steps, readers) = (8u64, 60u64, 4);
        let reference = leaves.loss(999, 8).detach().to_vec();
        std::thread::scope(|s| {
            for t in 0..trainers {
                let leaves = &leaves;
                s.spawn(move || {
                    for i in 0..steps {
                        let serial = i % 3 == 0; // mix serial and pooled passes
                        let loss = leaves.loss(t * 1000 + i, 8);
                        loss.backward_with(None, BackwardOptions { serial, ..Default::default() }).unwrap();
                    }
                });
            }
            for _ in 0..readers {
                let leaves = &leaves;
                let reference = &reference;
                s.spawn(move || {
                    for _ in 0..steps {
                        let _guard = no_grad();
                        let out = leaves.loss(999, 8);
                        assert!(!out.requires_grad(), "no_grad builds no node");
                        assert_eq!(&out.to_vec(), reference, "inference is deterministic while others train");
                        // A snapshot a reader holds never changes under it (copy-on-write).
                        if let Some(g) = leaves.w1.grad() {
                            let before = g.to_vec();
                            std::thread::yield_now();
                            assert_eq!(g.to_vec(), before);
                        }
                    }
                });
            }
        });
        let parallel = leaves.grads();
        leaves.zero_grad();
        for t in 0..trainers {
            for i in 0..steps {
                leaves.loss(t * 1000 + i, 8).backward().unwrap();
            }
        }
        assert_close(&parallel, &leaves.grads());
    });
}

#[test]
fn concurrent_heavy_passes_on_the_shared_pool_match_the_serial_gradients() {
    // Each pass has several branches above the engine's async threshold, so every thread's
    // pass spawns tasks on the one library pool at the same time.
    with_watchdog(Duration::from_secs(180), || {
        let leaves = Leaves::new(2, 512);
        let loss = |seed: u64| {
            let mut total = leaves.loss(seed, 256);
            for k in 1..3 {
                total = total.add(&leaves.loss(seed + 100 * k, 256)).unwrap();
            }
            total
        };
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let loss = &loss;
                s.spawn(move || (0..3).for_each(|i| loss(t * 10 + i).backward().unwrap()));
            }
        });
        let parallel = leaves.grads();
        leaves.zero_grad();
        for t in 0..4u64 {
            (0..3).for_each(|i| {
                loss(t * 10 + i).backward_with(None, BackwardOptions { serial: true, ..Default::default() }).unwrap()
            });
        }
        assert_close(&parallel, &leaves.grads());
    });
}

#[test]
fn racing_passes_over_one_retained_graph_either_run_whole_or_fail_cleanly() {
    // Several threads call backward on the SAME retained graph. Each call either completes
    // (adding exactly one gradient) or fails with ConcurrentBackward before changing anything;
    // the graph is never left stranded, so a final pass still runs.
    with_watchdog(Duration::from_secs(120), || {
        let leaves = Leaves::new(3, 32);
        let loss = leaves.loss(7, 8);
        let retained = BackwardOptions { retain_graph: true, ..Default::default() };
        loss.backward_with(None, retained).unwrap();
        let single = leaves.grads();
        leaves.zero_grad();
        let ok = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    for _ in 0..50 {
                        match loss.backward_with(None, retained) {
                            Ok(()) => {
                                ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            Err(e) => assert!(matches!(e.kind(), ErrorKind::ConcurrentBackward), "{e}"),
                        }
                    }
                });
            }
        });
        loss.backward_with(None, retained).unwrap(); // not stranded
        let n = ok.load(std::sync::atomic::Ordering::Relaxed) as f32 + 1.0;
        let expected: Vec<Vec<f32>> = single.iter().map(|g| g.iter().map(|v| v * n).collect()).collect();
        let got = leaves.grads();
        for (p, s) in got.iter().zip(&expected) {
            for (a, b) in p.iter().zip(s) {
                assert!((a - b).abs() <= 1e-4 * n * (1.0 + b.abs() / n), "{a} vs {b} after {n} passes");
            }
        }
    });
}
