//! Losses: JAX goldens for every loss and reduction, literal values, the fused cross-entropy
//! backward against gradcheck and against its differentiable (create_graph) path, and bad
//! inputs.

mod common;

use common::golden;
use common::second_order;
use common::{passes, var};
use forgia::loss::{self, CrossEntropyOptions, NllLossOptions, Reduction};
use forgia::{ErrorKind, Indices, Result, Tensor};
use serde_json::Value;

fn reduction(v: &Value) -> Reduction {
    match v.as_str().unwrap() {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        "batchmean" => Reduction::BatchMean,
        r => panic!("unknown reduction {r}"),
    }
}

fn labels(v: &Value) -> Indices {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    Indices::new(v["data"].as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).collect(), &shape).unwrap()
}

#[test]
fn loss_goldens_match_jax() {
    for c in golden::load("loss") {
        let a = &c.attrs;
        let red = reduction(&a["reduction"]);
        golden::check_case(&c, 1e-5, |xs| match c.op.as_str() {
            "cross_entropy" => loss::cross_entropy(
                &xs[0],
                &labels(&a["labels"]),
                CrossEntropyOptions {
                    ignore_index: a["ignore_index"].as_i64().unwrap(),
                    label_smoothing: a["label_smoothing"].as_f64().unwrap() as f32,
                    reduction: red,
                },
            ),
            "nll_loss" => loss::nll_loss(
                &xs[0],
                &labels(&a["labels"]),
                NllLossOptions { ignore_index: a["ignore_index"].as_i64().unwrap(), reduction: red },
            ),
            "mse_loss" => loss::mse_loss(&xs[0], &xs[1], red),
            "huber_loss" => loss::huber_loss(&xs[0], &xs[1], a["delta"].as_f64().unwrap() as f32, red),
            "binary_cross_entropy_with_logits" => loss::binary_cross_entropy_with_logits(&xs[0], &xs[1], red),
            "kl_div" => loss::kl_div(&xs[0], &xs[1], red),
            op => panic!("unhandled loss {op}"),
        });
    }
}

#[test]
fn cross_entropy_gives_literal_values_and_gradients() {
    // Two classes, equal logits: loss = ln 2; gx = (softmax - one_hot) / N = [[0.5-1, 0.5]] / 1.
    let x = Tensor::variable(vec![0.0, 0.0], &[1, 2]).unwrap();
    let l = loss::cross_entropy(&x, &Indices::from(vec![0usize]), CrossEntropyOptions::default()).unwrap();
    assert!((l.item().unwrap() - 2f32.ln()).abs() < 1e-6);
    l.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![-0.5, 0.5]);
    // Ignored rows give 0 and are not counted by the mean.
    let x = Tensor::from_vec(vec![0.0, 0.0, 5.0, -5.0], &[2, 2]).unwrap();
    let ids = Indices::new(vec![1, -100], &[2]).unwrap();
    let none = CrossEntropyOptions { reduction: Reduction::None, ..Default::default() };
    let rows = loss::cross_entropy(&x, &ids, none).unwrap().to_vec();
    assert!((rows[0] - 2f32.ln()).abs() < 1e-6 && rows[1] == 0.0);
    let mean = loss::cross_entropy(&x, &ids, CrossEntropyOptions::default()).unwrap();
    assert!((mean.item().unwrap() - 2f32.ln()).abs() < 1e-6);
    // nll of log-probs: -x[row, label].
    let lp = Tensor::from_vec(vec![-0.1, -2.0, -3.0, -0.5], &[2, 2]).unwrap();
    let n = loss::nll_loss(&lp, &Indices::from(vec![1usize, 1]), NllLossOptions::default()).unwrap();
    assert!((n.item().unwrap() - 1.25).abs() < 1e-6);
}

#[test]
fn cross_entropy_is_stable_on_huge_logits() {
    let x = Tensor::from_vec(vec![1e4, 0.0, -1e4, 1e4], &[2, 2]).unwrap();
    let l = loss::cross_entropy(&x, &Indices::from(vec![1usize, 0]), CrossEntropyOptions::default()).unwrap();
    // Row losses 1e4 and 2e4 (the label is 1e4 resp. 2e4 below the max): mean 1.5e4.
    assert!((l.item().unwrap() - 1.5e4).abs() < 1.0, "{}", l.item().unwrap());
}

#[test]
fn cross_entropy_supports_spatial_logits() {
    // [N=2, C=3, d=2] equals the flattened [4, 3] case with rows in (n, d) order.
    let x = var(&[2, 3, 2], 1);
    let ids = Indices::new(vec![0, 2, 1, -100], &[2, 2]).unwrap();
    let none = CrossEntropyOptions { reduction: Reduction::None, ..Default::default() };
    let spatial = loss::cross_entropy(&x, &ids, none).unwrap();
    assert_eq!(spatial.shape(), &[2, 2]);
    let flat = x.permute(&[0, 2, 1]).unwrap().reshape(&[4, 3]).unwrap();
    let rows = loss::cross_entropy(&flat, &ids.reshape(&[4]).unwrap(), none).unwrap();
    assert_eq!(spatial.to_vec(), rows.to_vec());
    passes(|v| loss::cross_entropy(&v[0], &ids, CrossEntropyOptions::default()), &[x]);
}

#[test]
fn losses_pass_gradcheck_including_strided_inputs() {
    let x = var(&[4, 3], 1);
    let ids = Indices::new(vec![2, 0, -100, 1], &[4]).unwrap();
    for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        for label_smoothing in [0.0, 0.2] {
            let o = CrossEntropyOptions { ignore_index: -100, label_smoothing, reduction };
            passes(|v| loss::cross_entropy(&v[0], &ids, o), std::slice::from_ref(&x));
            passes(
                |v| loss::cross_entropy(&v[0].transpose(0, 1)?.transpose(0, 1)?.slice(1, 0, 3, 1)?, &ids, o),
                std::slice::from_ref(&x),
            );
        }
        let o = NllLossOptions { ignore_index: -100, reduction };
        passes(|v| loss::nll_loss(&v[0].log_softmax(1)?, &ids, o), std::slice::from_ref(&x));
    }
    let t = var(&[3, 4], 2);
    let probs = Tensor::rand(&[4, 3], 0.1, 0.9, &mut forgia::Rng::new(1)).unwrap().into_variable();
    for r in [Reduction::Mean, Reduction::Sum, Reduction::None, Reduction::BatchMean] {
        passes(|v| loss::mse_loss(&v[0].transpose(0, 1)?, &v[1], r), &[x.clone(), t.clone()]);
        passes(|v| loss::huber_loss(&v[0].transpose(0, 1)?, &v[1].scale(0.7), 0.8, r), &[x.clone(), t.clone()]);
        passes(|v| loss::binary_cross_entropy_with_logits(&v[0], &v[1], r), &[x.clone(), probs.clone()]);
        passes(|v| loss::kl_div(&v[0].log_softmax(1)?, &v[1], r), &[x.clone(), probs.clone()]);
    }
}

#[test]
fn cross_entropy_backward_is_differentiable_under_create_graph() {
    // The fused backward falls back to softmax(x) - target in tensor ops when a graph is
    // requested, so the Hessian-vector product through the loss is available.
    let x = var(&[3, 4], 3);
    let ids = Indices::from(vec![1usize, 3, 0]);
    let c = [var(&[3, 4], 4).detach()];
    for label_smoothing in [0.0, 0.1] {
        let o = CrossEntropyOptions { label_smoothing, ..Default::default() };
        second_order::check(
            |v| loss::cross_entropy(&v[0], &ids, o),
            std::slice::from_ref(&x),
            &Tensor::scalar(1.0),
            &c,
        );
    }
    let none = CrossEntropyOptions { reduction: Reduction::None, ..Default::default() };
    let seed = Tensor::from_vec(vec![1.0, -2.0, 0.5], &[3]).unwrap();
    second_order::check(|v| loss::cross_entropy(&v[0], &ids, none), std::slice::from_ref(&x), &seed, &c);
    let t = var(&[3, 4], 5).detach();
    second_order::check(
        |v| loss::binary_cross_entropy_with_logits(&v[0], &t, Reduction::Mean),
        &[x],
        &Tensor::scalar(1.0),
        &c,
    );
}

#[test]
fn bad_loss_inputs_are_named_errors() {
    let kind = |r: Result<Tensor>| r.err().unwrap().into_kind();
    let x = Tensor::zeros(&[2, 3]).unwrap();
    let ce = |l: Vec<i64>, o: CrossEntropyOptions| {
        let n = l.len();
        kind(loss::cross_entropy(&x, &Indices::new(l, &[n]).unwrap(), o))
    };
    let d = CrossEntropyOptions::default();
    assert!(matches!(ce(vec![0, 3], d), ErrorKind::IndexOutOfRange { op: "cross_entropy", index: 3, size: 3 }));
    assert!(matches!(ce(vec![0, -1], d), ErrorKind::IndexOutOfRange { index: -1, .. }));
    assert!(matches!(ce(vec![0, 1, 2], d), ErrorKind::ShapeMismatch { op: "cross_entropy", .. }));
    assert!(matches!(
        ce(vec![0, 1], CrossEntropyOptions { label_smoothing: 1.5, ..d }),
        ErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        ce(vec![0, 1], CrossEntropyOptions { reduction: Reduction::BatchMean, ..d }),
        ErrorKind::InvalidArgument { .. }
    ));
    let v1 = Tensor::zeros(&[3]).unwrap();
    assert!(matches!(kind(loss::cross_entropy(&v1, &Indices::from(vec![0usize]), d)), ErrorKind::RankMismatch { .. }));
    let nl = loss::nll_loss(&x, &Indices::from(vec![0usize, 7]), NllLossOptions::default());
    assert!(matches!(kind(nl), ErrorKind::IndexOutOfRange { op: "nll_loss", .. }));
    let y = Tensor::zeros(&[3, 2]).unwrap();
    assert!(matches!(kind(loss::mse_loss(&x, &y, Reduction::Mean)), ErrorKind::ShapeMismatch { op: "mse_loss", .. }));
    assert!(matches!(kind(loss::huber_loss(&x, &y, 1.0, Reduction::Mean)), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(
        kind(loss::huber_loss(&x, &x, 0.0, Reduction::Mean)),
        ErrorKind::InvalidArgument { op: "huber_loss", .. }
    ));
    let bce = loss::binary_cross_entropy_with_logits(&x, &y, Reduction::Sum);
    assert!(matches!(kind(bce), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(kind(loss::kl_div(&x, &y, Reduction::BatchMean)), ErrorKind::ShapeMismatch { op: "kl_div", .. }));
    assert!(matches!(
        kind(loss::mse_loss(&Tensor::zeros(&[0]).unwrap(), &Tensor::zeros(&[0]).unwrap(), Reduction::Mean)),
        ErrorKind::EmptyTensor { .. }
    ));
}

#[test]
fn cross_entropy_without_smoothing_is_finite_when_a_wrong_class_is_at_minus_infinity() {
    let x = Tensor::from_vec(vec![2.0, f32::NEG_INFINITY, 0.5], &[1, 3]).unwrap().into_variable();
    let labels = Indices::from(vec![0usize]);
    let loss = loss::cross_entropy(&x, &labels, CrossEntropyOptions::default()).unwrap();
    let want = (2f32.exp() + 0.5f32.exp()).ln() - 2.0;
    assert!((loss.item().unwrap() - want).abs() < 1e-6, "{}", loss.item().unwrap());
    loss.backward().unwrap();
    assert!(x.grad().unwrap().to_vec().iter().all(|g| g.is_finite()));
}

#[test]
fn kl_div_ignores_the_input_where_the_target_is_zero_even_at_minus_infinity() {
    let input = Tensor::variable(vec![f32::NEG_INFINITY, -1.0], &[2]).unwrap();
    let target = Tensor::from_vec(vec![0.0, 0.5], &[2]).unwrap();
    let l = loss::kl_div(&input, &target, Reduction::Sum).unwrap();
    let want = 0.5 * 0.5f32.ln() + 0.5; // 0.5·(ln 0.5 - (-1)), the zero-target term is 0
    assert!((l.item().unwrap() - want).abs() < 1e-6, "{}", l.item().unwrap());
    l.backward().unwrap();
    assert_eq!(input.grad().unwrap().to_vec(), vec![0.0, -0.5]);
}

#[test]
fn huber_loss_with_an_infinite_delta_is_an_error_not_nan() {
    let x = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
    let e = loss::huber_loss(&x, &x, f32::INFINITY, Reduction::Mean).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { arg: "delta", .. }), "{e}");
}
