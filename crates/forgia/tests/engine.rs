//! The engine contract of DESIGN.md, one test per guarantee, named as sentences.

use forgia::{no_grad, BackwardOptions, ErrorKind, Tensor};

fn var(v: &[f32]) -> Tensor {
    Tensor::variable(v.to_vec(), &[v.len()]).unwrap()
}

fn retained() -> BackwardOptions {
    BackwardOptions { retain_graph: true, ..Default::default() }
}

// Rule 1: seeding.

#[test]
fn a_scalar_output_is_seeded_with_one() {
    let x = var(&[2.0]);
    x.scale(3.0).sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![3.0]);
}

#[test]
fn a_non_scalar_output_needs_a_seed_and_the_graph_stays_runnable() {
    let x = var(&[1.0, 1.0]);
    let y = x.scale(2.0);
    let err = y.backward().unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::MissingOutputGradient { .. }));
    assert!(x.grad().is_none());
    y.backward_with_grad(&Tensor::from_vec(vec![1.0, 10.0], &[2]).unwrap()).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0, 20.0]);
}

#[test]
fn a_seed_of_the_wrong_shape_is_rejected_before_anything_changes() {
    let x = var(&[1.0, 1.0]);
    let y = x.scale(2.0);
    let err = y.backward_with_grad(&Tensor::ones(&[3]).unwrap()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::ShapeMismatch { .. }));
    y.backward_with_grad(&Tensor::ones(&[2]).unwrap()).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0, 2.0]);
}

#[test]
fn backward_on_a_constant_fails_with_no_gradient_graph() {
    let c = Tensor::ones(&[1]).unwrap();
    assert!(matches!(c.backward().unwrap_err().kind(), ErrorKind::NoGradientGraph));
}

#[test]
fn backward_many_runs_several_outputs_in_one_pass() {
    let x = var(&[1.0, 2.0]);
    let a = x.scale(2.0).sum_all();
    let b = x.mul(&x).unwrap();
    let seed = Tensor::from_vec(vec![1.0, 1.0], &[2]).unwrap();
    Tensor::backward_many(&[&a, &b], &[None, Some(&seed)], BackwardOptions::default()).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![4.0, 6.0]); // 2 + 2x
}

// Rule 2: fan-out.

#[test]
fn fan_out_accumulates_d_dx_of_x_squared_plus_4x_is_2x_plus_4() {
    let x = var(&[3.0, 5.0]);
    let loss = x.mul(&x).unwrap().add(&x.scale(4.0)).unwrap().sum_all();
    loss.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![10.0, 14.0]);
}

#[test]
fn a_shared_interior_node_fires_exactly_once() {
    // s = x + 1 consumed twice: y = s², dy/dx = 2s = 6 at x = 2 (the naive walk gives 9).
    let x = var(&[2.0]);
    let s = x.add_scalar(1.0);
    s.mul(&s).unwrap().sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![6.0]);
}

#[test]
fn a_diamond_sums_both_paths() {
    // a = 2x, b = tanh(x); y = a * b: dy/dx = 2 tanh x + 2x (1 - tanh² x).
    let x = var(&[0.5]);
    let y = x.scale(2.0).mul(&x.tanh()).unwrap().sum_all();
    y.backward().unwrap();
    let t = 0.5f32.tanh();
    let expected = 2.0 * t + 2.0 * 0.5 * (1.0 - t * t);
    assert!((x.grad().unwrap().to_vec()[0] - expected).abs() < 1e-6);
}

// Rule 3: pruning (constants get nothing; the counting test lives in src/autograd/tests.rs).

#[test]
fn constants_get_no_gradient() {
    let x = var(&[1.0, 2.0]);
    let c = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap();
    x.mul(&c).unwrap().sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![3.0, 4.0]);
    assert!(c.grad().is_none());
}

// Rule 4: accumulation.

#[test]
fn a_gradient_a_user_holds_never_changes_under_them() {
    let x = var(&[1.0, 2.0]);
    x.scale(3.0).sum_all().backward().unwrap();
    let held = x.grad().unwrap();
    x.scale(3.0).sum_all().backward().unwrap();
    assert_eq!(held.to_vec(), vec![3.0, 3.0]);
    assert_eq!(x.grad().unwrap().to_vec(), vec![6.0, 6.0]);
}

#[test]
fn a_seed_tensor_is_never_written_by_accumulation() {
    let x = var(&[1.0, 2.0]);
    let seed = Tensor::from_vec(vec![1.0, 1.0], &[2]).unwrap();
    x.add_scalar(0.0).backward_with_grad(&seed).unwrap();
    x.add_scalar(0.0).backward_with_grad(&seed).unwrap();
    assert_eq!(seed.to_vec(), vec![1.0, 1.0]);
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0, 2.0]);
}

// Rule 6: one pass per graph.

#[test]
fn a_second_backward_fails_with_backward_already_run() {
    let x = var(&[1.0]);
    let loss = x.mul(&x).unwrap().sum_all();
    loss.backward().unwrap();
    assert!(matches!(loss.backward().unwrap_err().kind(), ErrorKind::BackwardAlreadyRun));
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0]);
}

#[test]
fn a_retained_graph_reruns_without_compounding() {
    // Two passes over sum(x·x) give 2·(2x), not the compounded 3·(2x).
    let x = var(&[3.0]);
    let loss = x.mul(&x).unwrap().sum_all();
    loss.backward_with(None, retained()).unwrap();
    loss.backward_with(None, retained()).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![12.0]);
}

#[test]
fn a_node_released_by_an_earlier_pass_is_a_clear_error() {
    let x = var(&[1.0]);
    let h = x.tanh();
    let y = h.scale(2.0).sum_all();
    y.backward().unwrap();
    let again = h.sum_all();
    assert!(matches!(again.backward().unwrap_err().kind(), ErrorKind::GraphReleased { .. }));
}

#[test]
fn zero_grad_resets_leaf_gradients_but_not_graph_consumption() {
    let x = var(&[1.0]);
    let loss = x.scale(2.0).sum_all();
    loss.backward().unwrap();
    x.zero_grad();
    assert!(x.grad().is_none());
    assert!(matches!(loss.backward().unwrap_err().kind(), ErrorKind::BackwardAlreadyRun));
}

#[test]
fn micro_batch_accumulation_over_fresh_graphs_sums() {
    let w = var(&[1.0, 2.0]);
    for batch in [[1.0, 1.0], [2.0, 3.0]] {
        let x = Tensor::from_vec(batch.to_vec(), &[2]).unwrap();
        w.mul(&x).unwrap().sum_all().backward().unwrap();
    }
    assert_eq!(w.grad().unwrap().to_vec(), vec![3.0, 4.0]);
}

// Rule 8: higher order.

#[test]
fn a_hessian_vector_product_via_create_graph_matches_the_analytic_value() {
    // f = Σ x³ (as x·x·x): ∇f = 3x², H v = 6 x ⊙ v.
    let x = var(&[1.0, -2.0, 0.5]);
    let v = Tensor::from_vec(vec![1.0, 0.5, 2.0], &[3]).unwrap();
    let f = x.mul(&x).unwrap().mul(&x).unwrap().sum_all();
    f.backward_with(None, BackwardOptions { create_graph: true, ..Default::default() }).unwrap();
    let g = x.grad().unwrap();
    assert!(g.requires_grad());
    assert_eq!(g.to_vec(), vec![3.0, 12.0, 0.75]);
    x.zero_grad();
    g.mul(&v).unwrap().sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![6.0, -6.0, 6.0]);
}

#[test]
fn second_derivatives_through_a_saved_output_are_exact() {
    // f = Σ tanh x: ∇f = 1 - t², d/dx Σ(∇f ⊙ v) = -2 t (1 - t²) v.
    let x = var(&[0.3, -0.7]);
    let v = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
    x.tanh().sum_all().backward_with(None, BackwardOptions { create_graph: true, ..Default::default() }).unwrap();
    let g = x.grad().unwrap();
    x.zero_grad();
    g.mul(&v).unwrap().sum_all().backward().unwrap();
    let got = x.grad().unwrap().to_vec();
    for (i, (&xi, &vi)) in [0.3f32, -0.7].iter().zip(&[1.0f32, 2.0]).enumerate() {
        let t = xi.tanh();
        assert!((got[i] - (-2.0 * t * (1.0 - t * t) * vi)).abs() < 1e-6);
    }
}

// Rule 9: concurrency.

#[test]
fn eight_threads_of_independent_graphs_over_shared_leaves_sum_like_the_serial_run() {
    let w = Tensor::variable((0..64).map(|i| i as f32 / 64.0).collect(), &[8, 8]).unwrap();
    let run = |seed: u64| {
        let x = Tensor::randn(&[4, 8], 0.0, 1.0, &mut forgia::Rng::new(seed)).unwrap();
        x.matmul(&w).unwrap().tanh().sum_all().backward().unwrap();
    };
    std::thread::scope(|s| {
        for t in 0..8u64 {
            s.spawn(move || (0..200u64).for_each(|i| run(t * 1000 + i)));
        }
    });
    let parallel = w.grad().unwrap().to_vec();
    w.zero_grad();
    for t in 0..8u64 {
        (0..200u64).for_each(|i| run(t * 1000 + i));
    }
    let serial = w.grad().unwrap().to_vec();
    for (p, s) in parallel.iter().zip(&serial) {
        assert!((p - s).abs() <= 1e-3 * (1.0 + s.abs()), "{p} vs {s}");
    }
}

#[test]
fn heavy_independent_branches_give_the_serial_result_on_the_pool() {
    let mut rng = forgia::Rng::new(3);
    let x = Tensor::randn(&[64, 256], 0.0, 1.0, &mut rng).unwrap();
    let ws: Vec<Tensor> =
        (0..4).map(|_| Tensor::randn(&[256, 256], 0.0, 0.05, &mut rng).unwrap().into_variable()).collect();
    let loss = |serial: bool| {
        let mut total = Tensor::scalar(0.0);
        for w in &ws {
            total = total.add(&x.matmul(w).unwrap().tanh().matmul(w).unwrap().sum_all()).unwrap();
        }
        total.backward_with(None, BackwardOptions { serial, ..Default::default() }).unwrap();
        let g: Vec<Vec<f32>> = ws.iter().map(|w| w.grad().unwrap().to_vec()).collect();
        ws.iter().for_each(Tensor::zero_grad);
        g
    };
    let (a, b) = (loss(false), loss(true));
    assert_eq!(a, b, "each branch's gradient is computed by the same kernels in the same order");
}

// Rule 10: reading.

#[test]
fn grad_is_none_for_constants_and_untouched_variables() {
    let x = var(&[1.0]);
    let c = Tensor::ones(&[1]).unwrap();
    assert!(x.grad().is_none() && c.grad().is_none());
    assert!(x.requires_grad() && x.is_variable() && !c.requires_grad());
}

#[test]
fn detach_shares_storage_and_cuts_the_graph() {
    let x = var(&[1.0, 2.0]);
    let y = x.scale(2.0);
    let d = y.detach();
    assert!(d.shares_storage(&y) && !d.requires_grad());
}

#[test]
fn mutable_data_access_is_refused_on_tensors_with_a_node() {
    let mut x = var(&[1.0]);
    let mut y = x.scale(2.0);
    let write = |d: &mut [f32]| d[0] = 5.0;
    assert!(matches!(y.with_data_mut(write).unwrap_err().kind(), ErrorKind::MutableDataRequiresNoGrad { .. }));
    assert!(matches!(x.with_data_mut(write).unwrap_err().kind(), ErrorKind::MutableDataRequiresNoGrad { .. }));
    let _guard = no_grad();
    x.with_data_mut(write).unwrap();
    assert_eq!(x.to_vec(), vec![5.0]);
    assert!(y.with_data_mut(write).is_err());
}

#[test]
fn retain_grad_keeps_an_interior_gradient() {
    let x = var(&[1.0, 2.0]);
    let h = x.scale(3.0);
    h.retain_grad();
    h.mul(&h).unwrap().sum_all().backward().unwrap();
    assert_eq!(h.grad().unwrap().to_vec(), vec![6.0, 12.0]); // 2h
}

// Rule 11: grad mode.

#[test]
fn no_grad_builds_no_node_and_is_per_thread() {
    let x = var(&[1.0]);
    let _guard = no_grad();
    assert!(!x.scale(2.0).requires_grad());
    std::thread::scope(|s| {
        s.spawn(|| assert!(x.scale(2.0).requires_grad()));
    });
}

// Anomaly mode.

#[test]
fn anomaly_mode_names_the_op_that_produced_a_non_finite_gradient() {
    let x = var(&[1.0]);
    let zero = Tensor::zeros(&[1]).unwrap();
    let y = x.div(&zero).unwrap().sum_all();
    let err = y.backward_with(None, BackwardOptions { detect_anomaly: true, ..Default::default() }).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::AnomalyDetected { op: "div", .. }), "{err}");
}

// Scale: iterative walks.

#[test]
fn a_million_op_chain_is_built_backpropagated_and_dropped_without_overflow() {
    let x = Tensor::variable(vec![0.5; 4], &[4]).unwrap();
    let c = Tensor::full(&[4], 0.999).unwrap();
    let mut h = x.clone();
    for i in 0..1_000_000 {
        h = match i % 3 {
            0 => h.mul(&c).unwrap(),
            1 => h.add(&c).unwrap(),
            _ => h.tanh(),
        };
    }
    h.sum_all().backward().unwrap();
    assert!(x.grad().unwrap().to_vec().iter().all(|v| v.is_finite()));
    drop(h);
}

#[test]
fn a_million_op_chain_drops_without_backward() {
    let x = Tensor::variable(vec![0.5; 4], &[4]).unwrap();
    let mut h = x.clone();
    for _ in 0..1_000_000 {
        h = h.add_scalar(0.0);
    }
    drop(h);
}

#[test]
fn a_create_graph_pass_sums_contributions_whose_axis_names_differ() {
    let x = var(&[1.0, 2.0]);
    let (a, b) = (x.with_names(&[Some("i")]).unwrap(), x.with_names(&[Some("j")]).unwrap());
    let y = a.mul(&a).unwrap().sum_all().add(&b.mul(&b).unwrap().sum_all()).unwrap();
    y.backward_with(None, BackwardOptions { create_graph: true, ..BackwardOptions::default() }).unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.to_vec(), vec![4.0, 8.0]); // d/dx 2x² = 4x
    assert!(g.requires_grad(), "the accumulated gradient stays differentiable");
}

#[test]
fn the_engine_sums_a_broadcast_gradient_back_to_its_operand_and_keeps_it_differentiable() {
    // f = sum(x * w) with x [3] broadcast over w [2, 3]: df/dx = column sums of w, [3].
    let x = var(&[1.0, 2.0, 3.0]);
    let w = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let f = x.mul(&w).unwrap().sum_all();
    f.backward_with(None, BackwardOptions { create_graph: true, ..BackwardOptions::default() }).unwrap();
    let gx = x.grad().unwrap();
    assert_eq!(gx.shape(), &[3]);
    assert_eq!(gx.to_vec(), vec![5.0, 7.0, 9.0]);
    // Second order through the sum: d/dw sum_j (sum_i w_ij)² = 2 · column sum, per row.
    w.zero_grad();
    gx.mul(&gx).unwrap().sum_all().backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec(), vec![10.0, 14.0, 18.0, 10.0, 14.0, 18.0]);
}
