//! `forgia::grad` (PyTorch's `torch.autograd.grad`): the gradients of some outputs with
//! respect to given inputs, returned rather than accumulated. No `.grad` is written anywhere,
//! no hook runs, and only the part of the graph that leads to an input runs backward.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::identity::identity;
use forgia::{custom_op, grad, BackwardOptions, ErrorKind, Tensor};

fn var(v: &[f32]) -> Tensor {
    Tensor::variable(v.to_vec(), &[v.len()]).unwrap()
}

fn graph() -> BackwardOptions {
    BackwardOptions { create_graph: true, ..BackwardOptions::default() }
}

fn retained() -> BackwardOptions {
    BackwardOptions { retain_graph: true, ..BackwardOptions::default() }
}

#[test]
fn grad_returns_the_inputs_gradients_and_writes_no_gradient_anywhere() {
    let x = var(&[0.5, -1.0]);
    let w = var(&[2.0, 3.0]);
    let hooked = Arc::new(AtomicUsize::new(0));
    let calls = hooked.clone();
    let _handle = w
        .register_post_accumulate_grad_hook(move |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    let h = x.mul(&w).unwrap();
    h.retain_grad();
    let y = h.tanh().sum_all();
    let g = grad(&[&y], &[&x], &[], BackwardOptions::default()).unwrap();
    // d/dx Σ tanh(xw) = w (1 - tanh²(xw))
    let expected: Vec<f32> =
        [(0.5f32, 2.0f32), (-1.0, 3.0)].iter().map(|&(x, w)| w * (1.0 - (x * w).tanh().powi(2))).collect();
    let got = g[0].as_ref().unwrap().to_vec();
    for (a, e) in got.iter().zip(&expected) {
        assert!((a - e).abs() < 1e-6, "{a} vs {e}");
    }
    assert!(x.grad().is_none(), "an input's .grad is not written");
    assert!(w.grad().is_none(), "a variable that is not an input gets nothing");
    assert!(h.grad().is_none(), "retain_grad keeps nothing from a grad pass");
    assert_eq!(hooked.load(Ordering::Relaxed), 0, "no post-accumulate-grad hook runs");
}

#[test]
fn grad_leaves_gradients_already_accumulated_as_they_were() {
    let x = var(&[1.0, 2.0]);
    let w = var(&[3.0, 4.0]);
    x.mul(&w).unwrap().sum_all().backward().unwrap();
    let y = x.mul(&w).unwrap().mul(&x).unwrap().sum_all();
    let g = grad(&[&y], &[&x, &w], &[], BackwardOptions::default()).unwrap();
    assert_eq!(g[0].as_ref().unwrap().to_vec(), vec![6.0, 16.0]); // 2xw
    assert_eq!(g[1].as_ref().unwrap().to_vec(), vec![1.0, 4.0]); // x²
    assert_eq!(x.grad().unwrap().to_vec(), vec![3.0, 4.0]);
    assert_eq!(w.grad().unwrap().to_vec(), vec![1.0, 2.0]);
}

#[test]
fn grad_matches_backward_on_a_fan_out_graph_and_sums_every_path() {
    let x = var(&[0.3, -0.7, 1.1]);
    let loss = |x: &Tensor| {
        let a = x.tanh();
        a.mul(&a).unwrap().add(&a.mul(x).unwrap()).unwrap().add(&x.scale(2.0)).unwrap().sum_all()
    };
    let g = grad(&[&loss(&x)], &[&x], &[], BackwardOptions::default()).unwrap().remove(0).unwrap();
    loss(&x).backward().unwrap();
    assert_eq!(g.to_vec(), x.grad().unwrap().to_vec(), "the same records in the same order");
}

#[test]
fn an_op_result_as_input_gets_the_gradient_flowing_into_it() {
    let x = var(&[1.0, -2.0]);
    let h = x.scale(2.0);
    let y = h.mul(&h).unwrap().sum_all(); // ∂y/∂h = 2h
    let g = grad(&[&y], &[&h, &x], &[], BackwardOptions::default()).unwrap();
    assert_eq!(g[0].as_ref().unwrap().to_vec(), vec![4.0, -8.0]);
    assert_eq!(g[1].as_ref().unwrap().to_vec(), vec![8.0, -16.0]); // 8x
    assert!(x.grad().is_none());
}

#[test]
fn only_the_part_of_the_graph_that_leads_to_an_input_runs() {
    let x = var(&[1.0, 2.0]);
    let w = var(&[3.0, 4.0]);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let branch = custom_op(
        identity("counted", move || {
            counted.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }),
        &[&w],
    )
    .unwrap();
    let y = x.mul(&x).unwrap().add(&branch.tanh()).unwrap().sum_all();
    let g = grad(&[&y], &[&x], &[], retained()).unwrap();
    assert_eq!(g[0].as_ref().unwrap().to_vec(), vec![2.0, 4.0]);
    assert_eq!(calls.load(Ordering::Relaxed), 0, "the branch to w alone is pruned");
    grad(&[&y], &[&w], &[], retained()).unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert!(x.grad().is_none() && w.grad().is_none());
}

#[test]
fn unused_inputs_get_none_and_repeated_inputs_the_same_gradient() {
    let x = var(&[1.0, 2.0]);
    let unused = var(&[5.0]);
    let y = x.mul(&x).unwrap().sum_all();
    let g = grad(&[&y], &[&x, &unused, &x], &[], BackwardOptions::default()).unwrap();
    assert_eq!(g.len(), 3);
    assert_eq!(g[0].as_ref().unwrap().to_vec(), vec![2.0, 4.0]);
    assert!(g[1].is_none(), "an input the output does not depend on (allow_unused=True)");
    assert_eq!(g[2].as_ref().unwrap().to_vec(), vec![2.0, 4.0]);
}

#[test]
fn grad_outputs_seed_several_outputs_and_a_variable_output_is_its_own_input() {
    let x = var(&[1.0, 2.0]);
    let (a, b) = (x.scale(3.0), x.mul(&x).unwrap());
    let seeds = [Some(Tensor::from_vec(vec![1.0, 0.0], &[2]).unwrap()), Some(Tensor::full(&[2], 0.5).unwrap())];
    let g = grad(&[&a, &b], &[&x], &[seeds[0].as_ref(), seeds[1].as_ref()], BackwardOptions::default()).unwrap();
    assert_eq!(g[0].as_ref().unwrap().to_vec(), vec![3.0 + 1.0, 2.0]); // 3·s₁ + 2x·s₂
    let seed = Tensor::from_vec(vec![7.0, 8.0], &[2]).unwrap();
    let g = grad(&[&x], &[&x], &[Some(&seed)], BackwardOptions::default()).unwrap();
    assert_eq!(g[0].as_ref().unwrap().to_vec(), vec![7.0, 8.0]);
    assert!(x.grad().is_none());
}

#[test]
fn second_order_through_create_graph_and_the_gradient_stays_differentiable() {
    let x = var(&[3.0]);
    let w = var(&[2.0]);
    let y = x.mul(&x).unwrap().mul(&w).unwrap().sum_all(); // w·x²
    let gx = grad(&[&y], &[&x], &[], graph()).unwrap().remove(0).unwrap();
    assert_eq!(gx.to_vec(), vec![12.0]); // 2wx
    assert!(gx.requires_grad());
    let h = grad(&[&gx.sum_all()], &[&x, &w], &[], retained()).unwrap();
    assert_eq!(h[0].as_ref().unwrap().to_vec(), vec![4.0]); // 2w
    assert_eq!(h[1].as_ref().unwrap().to_vec(), vec![6.0]); // 2x
    assert!(x.grad().is_none() && w.grad().is_none());
    // As in PyTorch, the differentiable gradient reaches every variable it depends on.
    gx.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![4.0]);
    assert_eq!(w.grad().unwrap().to_vec(), vec![6.0]);
}

#[test]
fn a_third_derivative_by_nested_grad() {
    let x = var(&[2.0]);
    let y = x.mul(&x).unwrap().mul(&x).unwrap().mul(&x).unwrap().sum_all(); // x⁴
    let d1 = grad(&[&y], &[&x], &[], graph()).unwrap().remove(0).unwrap(); // 4x³
    let d2 = grad(&[&d1.sum_all()], &[&x], &[], graph()).unwrap().remove(0).unwrap(); // 12x²
    let d3 = grad(&[&d2.sum_all()], &[&x], &[], BackwardOptions::default()).unwrap().remove(0).unwrap(); // 24x
    assert_eq!((d1.to_vec(), d2.to_vec(), d3.to_vec()), (vec![32.0], vec![48.0], vec![48.0]));
    assert!(x.grad().is_none());
}

#[test]
fn without_retain_graph_a_grad_pass_consumes_the_graph() {
    let x = var(&[1.0, 2.0]);
    let y = x.tanh().sum_all();
    let once = grad(&[&y], &[&x], &[], retained()).unwrap();
    let twice = grad(&[&y], &[&x], &[], BackwardOptions::default()).unwrap();
    assert_eq!(once[0].as_ref().unwrap().to_vec(), twice[0].as_ref().unwrap().to_vec(), "nothing compounds");
    let e = grad(&[&y], &[&x], &[], BackwardOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::BackwardAlreadyRun), "{e}");
}

#[test]
fn bad_calls_are_errors_that_leave_the_graph_runnable() {
    let x = var(&[1.0, 2.0]);
    let c = Tensor::from_vec(vec![1.0, 1.0], &[2]).unwrap();
    let y = x.mul(&c).unwrap();
    let e = grad(&[&y.sum_all()], &[&c], &[], BackwardOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { op: "grad", arg: "inputs", .. }), "{e}");
    let e = grad(&[&y], &[&x], &[], BackwardOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::MissingOutputGradient { .. }), "{e}");
    let e = grad(&[&y], &[&x], &[None, None], BackwardOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { op: "grad", arg: "grad_outputs", .. }), "{e}");
    let bad = Tensor::ones(&[3]).unwrap();
    let e = grad(&[&y], &[&x], &[Some(&bad)], BackwardOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ShapeMismatch { .. }), "{e}");
    let e = grad(&[&c], &[&x], &[], BackwardOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::NoGradientGraph), "{e}");
    let seed = Tensor::ones(&[2]).unwrap();
    let g = grad(&[&y], &[&x], &[Some(&seed)], BackwardOptions::default()).unwrap();
    assert_eq!(g[0].as_ref().unwrap().to_vec(), vec![1.0, 1.0]);
    assert!(x.grad().is_none());
}

#[test]
fn a_failing_record_in_a_grad_pass_writes_nothing_and_a_retained_graph_reruns() {
    let x = var(&[1.0, 2.0]);
    let calls = AtomicUsize::new(0);
    let fail_once = move || match calls.fetch_add(1, Ordering::Relaxed) {
        0 => Err(forgia::Error::from(ErrorKind::NoGradientGraph)),
        _ => Ok(()),
    };
    let y = custom_op(identity("fail_once", fail_once), &[&x.tanh()]).unwrap().mul(&x).unwrap().sum_all();
    assert!(grad(&[&y], &[&x], &[], retained()).is_err());
    assert!(x.grad().is_none());
    let g = grad(&[&y], &[&x], &[], retained()).unwrap();
    let g2 = grad(&[&y], &[&x], &[], retained()).unwrap();
    assert_eq!(g[0].as_ref().unwrap().to_vec(), g2[0].as_ref().unwrap().to_vec());
}
