//! Normalization layers: literal values, gradcheck, JAX goldens, running statistics and
//! named errors.

mod common;

use common::golden;
use common::{check, normal_var as var};
use forgia::{ErrorKind, RunningStats, Tensor};

#[test]
fn layer_norm_centres_and_scales_a_row() {
    // x = [1, 3]: mean 2, var 1, x̂ = [-1, 1]. The gradient of Σ x̂ is 0 (x̂ sums to 0 always).
    let x = Tensor::variable(vec![1.0, 3.0], &[1, 2]).unwrap();
    let y = x.layer_norm(&[2], None, None, 0.0).unwrap();
    assert_eq!(y.to_vec(), vec![-1.0, 1.0]);
    y.sum_all().backward().unwrap();
    assert!(x.grad().unwrap().to_vec().iter().all(|g| g.abs() < 1e-6));
}

#[test]
fn rms_norm_divides_by_the_root_mean_square() {
    // x = [3, 4]: rms = sqrt(12.5); weight [2, 1].
    let x = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap();
    let w = Tensor::from_vec(vec![2.0, 1.0], &[2]).unwrap();
    let y = x.rms_norm(Some(&w), 0.0).unwrap().to_vec();
    let r = 12.5f32.sqrt();
    assert!((y[0] - 6.0 / r).abs() < 1e-6 && (y[1] - 4.0 / r).abs() < 1e-6);
}

#[test]
fn normalization_gradients_pass_gradcheck() {
    let x = var(&[2, 3, 4], 1);
    let (w, b) = (var(&[4], 2), var(&[4], 3));
    check(|v| v[0].layer_norm(&[4], Some(&v[1]), Some(&v[2]), 1e-5), &[x.clone(), w.clone(), b.clone()], "layer_norm");
    let (w2, b2) = (var(&[3, 4], 4), var(&[3, 4], 5));
    check(|v| v[0].layer_norm(&[3, 4], Some(&v[1]), Some(&v[2]), 1e-5), &[x.clone(), w2, b2], "layer_norm 2 axes");
    check(|v| v[0].layer_norm(&[4], None, None, 1e-5), std::slice::from_ref(&x), "layer_norm plain");
    check(|v| v[0].rms_norm(Some(&v[1]), 1e-6), &[x.clone(), w.clone()], "rms_norm");
    check(|v| v[0].transpose(0, 2)?.rms_norm(None, 1e-6), std::slice::from_ref(&x), "rms_norm transposed");
    let x4 = var(&[2, 4, 2, 3], 6);
    let (wc, bc) = (var(&[4], 7), var(&[4], 8));
    for g in [1, 2, 4] {
        check(
            |v| v[0].group_norm(g, Some(&v[1]), Some(&v[2]), 1e-5),
            &[x4.clone(), wc.clone(), bc.clone()],
            "group_norm",
        );
    }
    check(
        |v| v[0].batch_norm(&mut RunningStats::new(4).unwrap(), Some(&v[1]), Some(&v[2]), true, 1e-5),
        &[x4.clone(), wc.clone(), bc.clone()],
        "batch_norm train",
    );
    check(
        |v| v[0].slice(3, 0, 3, 2)?.batch_norm(&mut RunningStats::new(4).unwrap(), None, Some(&v[1]), true, 1e-5),
        &[x4.clone(), bc.clone()],
        "batch_norm sliced, bias only",
    );
    let mut stats = RunningStats::new(4).unwrap();
    stats.var = Tensor::from_vec(vec![0.5, 1.0, 2.0, 4.0], &[4]).unwrap();
    check(
        |v| v[0].batch_norm(&mut stats.clone(), Some(&v[1]), Some(&v[2]), false, 1e-5),
        &[x4, wc, bc],
        "batch_norm eval",
    );
}

#[test]
fn batch_norm_updates_running_statistics_like_torch() {
    // Channel values [1, 3] (N=2, one position): batch mean 2, unbiased var 2.
    let x = Tensor::from_vec(vec![1.0, 3.0], &[2, 1]).unwrap();
    let mut stats = RunningStats::new(1).unwrap();
    x.batch_norm(&mut stats, None, None, true, 1e-5).unwrap();
    assert!((stats.mean.to_vec()[0] - 0.2).abs() < 1e-6);
    assert!((stats.var.to_vec()[0] - (0.9 + 0.2)).abs() < 1e-6);
    // Eval mode uses them: (1 - 0.2) / sqrt(1.1 + eps).
    let y = x.batch_norm(&mut stats, None, None, false, 0.0).unwrap().to_vec();
    assert!((y[0] - 0.8 / 1.1f32.sqrt()).abs() < 1e-6);
}

#[test]
fn normalization_matches_the_jax_goldens() {
    let ops = ["layer_norm", "rms_norm", "batch_norm_train", "group_norm"];
    let cases: Vec<_> = golden::load("nn").into_iter().filter(|c| ops.contains(&c.op.as_str())).collect();
    assert_eq!(cases.len(), 8);
    for case in &cases {
        let eps = case.attrs["eps"].as_f64().unwrap() as f32;
        golden::check_case(case, 1e-5, |v| match case.op.as_str() {
            "layer_norm" => {
                let shape: Vec<usize> = case.attrs["normalized_shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap() as usize)
                    .collect();
                v[0].layer_norm(&shape, Some(&v[1]), Some(&v[2]), eps)
            }
            "rms_norm" => v[0].rms_norm(Some(&v[1]), eps),
            "batch_norm_train" => {
                v[0].batch_norm(&mut RunningStats::new(v[1].numel()).unwrap(), Some(&v[1]), Some(&v[2]), true, eps)
            }
            _ => v[0].group_norm(case.attrs["groups"].as_u64().unwrap() as usize, Some(&v[1]), Some(&v[2]), eps),
        });
    }
}

#[test]
fn normalization_gradients_carry_a_graph_in_a_create_graph_pass() {
    let x = var(&[2, 3], 9);
    let y = x.layer_norm(&[3], None, None, 1e-5).unwrap().tanh().sum_all();
    let opts = forgia::BackwardOptions { create_graph: true, ..Default::default() };
    y.backward_with(None, opts).unwrap();
    assert!(x.grad().unwrap().requires_grad());
}

#[test]
fn bad_normalization_inputs_are_named_errors() {
    let x = Tensor::zeros(&[2, 4, 3]).unwrap();
    let kind = |r: forgia::Result<Tensor>| r.unwrap_err().into_kind();
    assert!(matches!(kind(x.layer_norm(&[4], None, None, 1e-5)), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(
        kind(x.layer_norm(&[3], Some(&Tensor::ones(&[4]).unwrap()), None, 1e-5)),
        ErrorKind::ShapeMismatch { .. }
    ));
    assert!(matches!(kind(x.layer_norm(&[3], None, None, -1.0)), ErrorKind::InvalidArgument { arg: "eps", .. }));
    assert!(matches!(kind(x.rms_norm(Some(&Tensor::ones(&[4]).unwrap()), 1e-5)), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(kind(x.group_norm(3, None, None, 1e-5)), ErrorKind::InvalidArgument { arg: "groups", .. }));
    assert!(matches!(
        kind(Tensor::zeros(&[4]).unwrap().group_norm(1, None, None, 1e-5)),
        ErrorKind::RankMismatch { .. }
    ));
    let mut stats = RunningStats::new(3).unwrap();
    assert!(matches!(kind(x.batch_norm(&mut stats, None, None, true, 1e-5)), ErrorKind::ShapeMismatch { .. }));
    let one = Tensor::zeros(&[1, 4]).unwrap();
    let mut stats = RunningStats::new(4).unwrap();
    assert!(matches!(
        kind(one.batch_norm(&mut stats, None, None, true, 1e-5)),
        ErrorKind::InvalidArgument { arg: "x", .. }
    ));
}
