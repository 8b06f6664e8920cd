//! Concurrent backward finds the parallelism in any graph shape (DESIGN.md, engine rule 13):
//! heavy independent branches run on more than one pool thread however their results are
//! joined, and give the serial option's gradients bit for bit where the reduction order is
//! fixed.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use common::identity::identity;
use forgia::{custom_op, BackwardOptions, CustomOp, Rng, Tensor};

/// The identity, whose backward notes the thread it runs on and takes a little while (so a
/// second pool thread has time to pick up another branch).
fn probe(threads: &Arc<Mutex<Vec<ThreadId>>>) -> impl CustomOp {
    let threads = threads.clone();
    identity("probe", move || {
        threads.lock().unwrap().push(std::thread::current().id());
        std::thread::sleep(Duration::from_millis(20));
        Ok(())
    })
}

/// Four heavy branches `probe(x·W_i)·V_i` (each product above the engine's async threshold).
struct Branches {
    x: Tensor,
    params: Vec<(Tensor, Tensor)>,
    threads: Arc<Mutex<Vec<ThreadId>>>,
}

impl Branches {
    fn new(x_is_variable: bool) -> Branches {
        let mut rng = Rng::new(13);
        let x = Tensor::randn(&[128, 256], 0.0, 1.0, &mut rng).unwrap();
        let x = if x_is_variable { x.into_variable() } else { x };
        let params = (0..4)
            .map(|_| {
                let w = Tensor::randn(&[256, 256], 0.0, 0.06, &mut rng).unwrap().into_variable();
                let v = Tensor::randn(&[256, 256], 0.0, 0.06, &mut rng).unwrap().into_variable();
                (w, v)
            })
            .collect();
        Branches { x, params, threads: Arc::default() }
    }

    fn outputs(&self) -> Vec<Tensor> {
        self.params
            .iter()
            .map(|(w, v)| {
                let h = custom_op(probe(&self.threads), &[&self.x.matmul(w).unwrap()]).unwrap();
                h.tanh().matmul(v).unwrap()
            })
            .collect()
    }

    /// The parameter gradients (and `x`'s when it is a variable) after one pass, then cleared.
    fn gradients(&self, join: &dyn Fn(Vec<Tensor>) -> Tensor, serial: bool) -> Vec<Vec<f32>> {
        self.threads.lock().unwrap().clear();
        let loss = join(self.outputs());
        loss.backward_with(None, BackwardOptions { serial, ..BackwardOptions::default() }).unwrap();
        let mut grads = Vec::new();
        for (w, v) in &self.params {
            grads.push(w.grad().unwrap().to_vec());
            grads.push(v.grad().unwrap().to_vec());
            w.zero_grad();
            v.zero_grad();
        }
        if let Some(g) = self.x.grad() {
            grads.push(g.to_vec());
            self.x.zero_grad();
        }
        grads
    }

    fn distinct_threads(&self) -> usize {
        self.threads.lock().unwrap().iter().collect::<HashSet<_>>().len()
    }
}

/// Runs the pooled and the serial pass for one way of joining the branches.
fn check_shape(name: &str, join: &dyn Fn(Vec<Tensor>) -> Tensor, x_is_variable: bool) {
    let b = Branches::new(x_is_variable);
    let pooled = b.gradients(join, false);
    let threads = b.distinct_threads();
    let serial = b.gradients(join, true);
    assert_eq!(b.distinct_threads(), 1, "{name}: the serial option runs on one thread");
    if forgia::num_threads() > 1 {
        assert!(threads > 1, "{name}: heavy branches ran on {threads} thread(s)");
    }
    let own = pooled.len() - usize::from(x_is_variable);
    assert_eq!(pooled[..own], serial[..own], "{name}: each parameter's gradient equals the serial pass's bit for bit");
    if x_is_variable {
        // x sums the four branches' contributions in whatever order they arrive.
        for (p, s) in pooled[own].iter().zip(&serial[own]) {
            assert!((p - s).abs() <= 1e-4 * (1.0 + s.abs()), "{name}: x's gradient {p} vs {s}");
        }
    }
}

fn sums(ys: Vec<Tensor>) -> Vec<Tensor> {
    ys.into_iter().map(|y| y.sum_all()).collect()
}

#[test]
fn branches_joined_by_concat_run_on_more_than_one_thread() {
    let join = |ys: Vec<Tensor>| Tensor::concat(&ys.iter().collect::<Vec<_>>(), 0).unwrap().sum_all();
    check_shape("concat", &join, false);
}

#[test]
fn branches_joined_by_stack_run_on_more_than_one_thread() {
    let join = |ys: Vec<Tensor>| Tensor::stack(&ys.iter().collect::<Vec<_>>(), 0).unwrap().sum_all();
    check_shape("stack", &join, false);
}

#[test]
fn branches_summed_by_a_chain_of_adds_run_on_more_than_one_thread() {
    let join = |ys: Vec<Tensor>| sums(ys).into_iter().reduce(|a, b| a.add(&b).unwrap()).unwrap();
    check_shape("add chain", &join, false);
}

#[test]
fn branches_summed_by_a_tree_of_adds_run_on_more_than_one_thread() {
    let join = |ys: Vec<Tensor>| {
        let s = sums(ys);
        let left = s[0].add(&s[1]).unwrap();
        let right = s[2].add(&s[3]).unwrap();
        left.add(&right).unwrap()
    };
    check_shape("add tree", &join, false);
}

#[test]
fn branches_fanning_out_from_one_input_run_on_more_than_one_thread() {
    let join = |ys: Vec<Tensor>| sums(ys).into_iter().reduce(|a, b| a.add(&b).unwrap()).unwrap();
    check_shape("fan-out", &join, true);
}

#[test]
fn the_serial_option_gives_the_pooled_passs_gradients_with_every_kernel_on_one_thread() {
    // Products large enough that the GEMM kernel would split them over the pool: in a serial
    // pass they run on the one serial thread, and the gradients are the pooled pass's.
    let b = Branches::new(false);
    let join = |ys: Vec<Tensor>| sums(ys).into_iter().reduce(|a, b| a.add(&b).unwrap()).unwrap();
    let serial = b.gradients(&join, true);
    assert_eq!(b.distinct_threads(), 1);
    assert_eq!(serial, b.gradients(&join, false));
}
