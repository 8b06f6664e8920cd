//! Post-accumulate-grad hooks (DESIGN.md, engine rule 12): a variable's hook runs once per
//! pass, when its gradient for the pass is final, on whichever thread finished it.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use common::identity::identity;
use forgia::{custom_op, BackwardOptions, ErrorKind, Rng, Tensor};

/// Records every gradient a hook is called with.
fn recorder(w: &Tensor) -> Arc<Mutex<Vec<Vec<f32>>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    w.register_post_accumulate_grad_hook(move |g| {
        log.lock().unwrap().push(g.to_vec());
        Ok(())
    })
    .unwrap();
    seen
}

#[test]
fn hook_runs_exactly_once_per_pass() {
    let w = Tensor::variable(vec![1.0, -2.0], &[2]).unwrap();
    let seen = recorder(&w);
    // Three uses of w (one of them twice through mul): many edges, one call per pass.
    let loss = || w.mul(&w).unwrap().add(&w.scale(3.0)).unwrap().add(&w).unwrap().sum_all();
    loss().backward().unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
    loss().backward().unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn hook_runs_after_the_last_contribution() {
    let w = Tensor::variable(vec![1.0, -2.0], &[2]).unwrap();
    let seen = recorder(&w);
    // d/dw (w² + 3w + w) = 2w + 4
    w.mul(&w).unwrap().add(&w.scale(3.0)).unwrap().add(&w).unwrap().sum_all().backward().unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![vec![6.0, 0.0]]);
    assert_eq!(w.grad().unwrap().to_vec(), vec![6.0, 0.0]);
    // A second pass without zero_grad: the hook sees the accumulated sum, as grad() does.
    w.scale(2.0).sum_all().backward().unwrap();
    assert_eq!(seen.lock().unwrap()[1], vec![8.0, 2.0]);
}

#[test]
fn hook_is_not_run_for_leaves_the_pass_does_not_reach() {
    let (a, b) = (Tensor::variable(vec![1.0], &[1]).unwrap(), Tensor::variable(vec![2.0], &[1]).unwrap());
    let (seen_a, seen_b) = (recorder(&a), recorder(&b));
    a.scale(2.0).sum_all().backward().unwrap();
    assert_eq!(seen_a.lock().unwrap().len(), 1);
    assert!(seen_b.lock().unwrap().is_empty());
    // A detached use is no edge: b is still not reached.
    a.add(&b.detach()).unwrap().sum_all().backward().unwrap();
    assert!(seen_b.lock().unwrap().is_empty());
}

#[test]
fn hook_runs_when_the_variable_is_the_output() {
    let w = Tensor::variable(vec![4.0], &[1]).unwrap();
    let seen = recorder(&w);
    w.backward().unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![vec![1.0]]);
}

#[test]
fn several_hooks_run_in_registration_order_and_removed_hooks_do_not_run() {
    let w = Tensor::variable(vec![1.0], &[1]).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..3)
        .map(|i| {
            let order = order.clone();
            w.register_post_accumulate_grad_hook(move |_| {
                order.lock().unwrap().push(i);
                Ok(())
            })
            .unwrap()
        })
        .collect();
    w.scale(2.0).sum_all().backward().unwrap();
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    let mut handles = handles.into_iter();
    handles.nth(1).unwrap().remove();
    w.scale(2.0).sum_all().backward().unwrap();
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 0, 2]);
}

#[test]
fn hooks_attach_only_to_variables() {
    let w = Tensor::variable(vec![1.0], &[1]).unwrap();
    for t in [Tensor::scalar(1.0), w.scale(2.0)] {
        let e = t.register_post_accumulate_grad_hook(|_| Ok(())).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { op: "register_post_accumulate_grad_hook", .. }));
    }
}

#[test]
fn an_error_in_a_hook_fails_the_pass_cleanly() {
    let (a, b) = (Tensor::variable(vec![1.0, 2.0], &[2]).unwrap(), Tensor::variable(vec![3.0, 4.0], &[2]).unwrap());
    let fail_next = Arc::new(Mutex::new(true));
    let flag = fail_next.clone();
    a.register_post_accumulate_grad_hook(move |_| {
        if std::mem::take(&mut *flag.lock().unwrap()) {
            return Err(forgia::Error::from(ErrorKind::InvalidArgument {
                op: "test_hook",
                arg: "grad",
                reason: "injected".into(),
            }));
        }
        Ok(())
    })
    .unwrap();
    let loss = a.mul(&b).unwrap().tanh().sum_all();
    let options = BackwardOptions { retain_graph: true, ..BackwardOptions::default() };
    let e = loss.backward_with(None, options).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Nested { context: "post-accumulate-grad hook", .. }), "{e}");
    // The graph was left idle: after zero_grad the same retained graph runs again correctly.
    a.zero_grad();
    b.zero_grad();
    loss.backward_with(None, options).unwrap();
    let expected: Vec<f32> =
        [(1.0f32, 3.0f32), (2.0, 4.0)].iter().map(|(x, y)| y * (1.0 - (x * y).tanh().powi(2))).collect();
    for (g, e) in a.grad().unwrap().to_vec().iter().zip(&expected) {
        assert!((g - e).abs() < 1e-6);
    }
}

#[test]
fn a_panic_in_a_hook_fails_the_pass_cleanly() {
    let w = Tensor::variable(vec![1.0], &[1]).unwrap();
    w.register_post_accumulate_grad_hook(|_| panic!("hook exploded")).unwrap();
    let loss = w.scale(2.0).exp().sum_all();
    let e = loss.backward_with(None, BackwardOptions { retain_graph: true, ..BackwardOptions::default() }).unwrap_err();
    match e.kind() {
        ErrorKind::BackwardPanicked { op, message } => {
            assert_eq!(*op, "post_accumulate_grad_hook");
            assert!(message.contains("hook exploded"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// The identity, whose backward takes a little while (so the pool spreads the branches).
fn slow() -> impl forgia::CustomOp {
    identity("slow", || {
        std::thread::sleep(std::time::Duration::from_millis(10));
        Ok(())
    })
}

#[test]
fn hooks_work_with_the_worker_pool() {
    // Four heavy branches x·W_i (each product above the engine's async threshold) that all
    // end in the shared variable x: its hook runs once, after the last branch, whichever
    // pool thread that is, and sees the full sum; each W_i's hook sees its own gradient.
    let mut rng = Rng::new(5);
    let x = Tensor::randn(&[128, 256], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let ws: Vec<Tensor> =
        (0..4).map(|_| Tensor::randn(&[256, 256], 0.0, 0.06, &mut rng).unwrap().into_variable()).collect();
    let threads = Arc::new(Mutex::new(HashSet::<ThreadId>::new()));
    let seen_x = recorder(&x);
    let seen_w: Vec<_> = ws
        .iter()
        .map(|w| {
            let threads = threads.clone();
            let seen = Arc::new(Mutex::new(Vec::new()));
            let log = seen.clone();
            w.register_post_accumulate_grad_hook(move |g| {
                threads.lock().unwrap().insert(std::thread::current().id());
                log.lock().unwrap().push(g.to_vec());
                Ok(())
            })
            .unwrap();
            seen
        })
        .collect();
    let outs: Vec<Tensor> =
        ws.iter().map(|w| custom_op(slow(), &[&x.matmul(w).unwrap()]).unwrap().tanh().sum_all()).collect();
    let loss = outs[0].add(&outs[1]).unwrap().add(&outs[2]).unwrap().add(&outs[3]).unwrap();
    loss.backward().unwrap();
    assert_eq!(seen_x.lock().unwrap().len(), 1);
    assert_eq!(seen_x.lock().unwrap()[0], x.grad().unwrap().to_vec());
    for (w, seen) in ws.iter().zip(&seen_w) {
        assert_eq!(*seen.lock().unwrap(), vec![w.grad().unwrap().to_vec()]);
    }
    if forgia::num_threads() > 1 {
        assert!(threads.lock().unwrap().len() > 1, "the W hooks all ran on one thread");
    }
}

#[test]
fn independent_passes_over_shared_leaves_each_run_the_hook_once() {
    let w = Tensor::variable(vec![1.0; 64], &[8, 8]).unwrap();
    let seen = recorder(&w);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..25 {
                    w.matmul(&w).unwrap().sum_all().backward().unwrap();
                }
            });
        }
    });
    assert_eq!(seen.lock().unwrap().len(), 100);
}

#[test]
fn hooks_run_in_create_graph_passes_with_a_differentiable_gradient() {
    let w = Tensor::variable(vec![3.0], &[1]).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    w.register_post_accumulate_grad_hook(move |g| {
        log.lock().unwrap().push(g.requires_grad());
        Ok(())
    })
    .unwrap();
    w.mul(&w)
        .unwrap()
        .mul(&w)
        .unwrap()
        .sum_all()
        .backward_with(None, BackwardOptions { create_graph: true, ..BackwardOptions::default() })
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![true]);
}

#[test]
fn assign_grad_replaces_a_variable_gradient_and_checks_its_shape() {
    let w = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    w.scale(2.0).sum_all().backward().unwrap();
    let held = w.grad().unwrap();
    w.assign_grad(Some(&Tensor::from_vec(vec![7.0, 8.0], &[2]).unwrap())).unwrap();
    assert_eq!(w.grad().unwrap().to_vec(), vec![7.0, 8.0]);
    assert_eq!(held.to_vec(), vec![2.0, 2.0]);
    assert!(matches!(
        w.assign_grad(Some(&Tensor::zeros(&[3]).unwrap())).unwrap_err().kind(),
        ErrorKind::ShapeMismatch { .. }
    ));
    assert!(matches!(w.scale(1.0).assign_grad(None).unwrap_err().kind(), ErrorKind::InvalidArgument { .. }));
    w.assign_grad(None).unwrap();
    assert!(w.grad().is_none());
}
