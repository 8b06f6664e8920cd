//! Issue 15's losses: cross-entropy with class weights and with probability targets, L1,
//! smooth L1, BCE on probabilities, cosine-embedding and margin-ranking losses, each with
//! every reduction. PyTorch goldens, gradcheck, second order and PyTorch's edge cases.

mod common;

use common::golden::{self, Case};
use common::{passes, second_order};
use forgia::loss::{self, CrossEntropyOptions, Reduction};
use forgia::{Indices, Result, Rng, Tensor};
use serde_json::Value;

fn reduction(v: &Value) -> Reduction {
    match v.as_str().unwrap() {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        r => panic!("unknown reduction {r}"),
    }
}

fn ints(v: &Value) -> (Vec<i64>, Vec<usize>) {
    let shape = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    (v["data"].as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).collect(), shape)
}

fn signs(v: &Value) -> Tensor {
    let (data, shape) = ints(v);
    Tensor::from_vec(data.iter().map(|&d| d as f32).collect(), &shape).unwrap()
}

fn opt_tensor(v: &Value) -> Option<Tensor> {
    (!v.is_null()).then(|| golden::tensor(v))
}

fn apply(case: &Case, xs: &[Tensor]) -> Option<Result<Tensor>> {
    let a = &case.attrs;
    let f = |k: &str| a[k].as_f64().unwrap() as f32;
    let ce = || CrossEntropyOptions {
        ignore_index: a["ignore_index"].as_i64().unwrap_or(-100),
        label_smoothing: f("label_smoothing"),
        reduction: reduction(&a["reduction"]),
    };
    Some(match case.op.as_str() {
        "cross_entropy_weighted" => {
            let (labels, shape) = ints(&a["labels"]);
            let labels = Indices::new(labels, &shape).unwrap();
            loss::cross_entropy_weighted(&xs[0], &labels, &golden::tensor(&a["weight"]), ce())
        }
        "cross_entropy_probs" => loss::cross_entropy_probs(&xs[0], &xs[1], opt_tensor(&a["weight"]).as_ref(), ce()),
        "l1_loss" => loss::l1_loss(&xs[0], &xs[1], reduction(&a["reduction"])),
        "smooth_l1_loss" => loss::smooth_l1_loss(&xs[0], &xs[1], f("beta"), reduction(&a["reduction"])),
        "binary_cross_entropy" => {
            loss::binary_cross_entropy(&xs[0], &xs[1], opt_tensor(&a["weight"]).as_ref(), reduction(&a["reduction"]))
        }
        "cosine_embedding_loss" => {
            loss::cosine_embedding_loss(&xs[0], &xs[1], &signs(&a["target"]), f("margin"), reduction(&a["reduction"]))
        }
        "margin_ranking_loss" => {
            loss::margin_ranking_loss(&xs[0], &xs[1], &signs(&a["target"]), f("margin"), reduction(&a["reduction"]))
        }
        _ => return None,
    })
}

#[test]
fn loss_goldens_match_pytorch() {
    let n = golden::check_known("layers_loss", 1e-4, apply).len();
    assert!(n >= 25, "only {n} loss goldens ran");
}

fn normal(shape: &[usize], rng: &mut Rng) -> Tensor {
    Tensor::randn(shape, 0.0, 1.0, rng).unwrap().into_variable()
}

type Loss = (&'static str, Box<dyn Fn(&[Tensor]) -> Result<Tensor>>, Vec<Vec<usize>>);

/// Every new loss under every reduction, with inputs drawn away from kinks by construction (a
/// `tanh` in front of the piecewise-linear ones, so their gradient has a graph to check).
fn losses() -> Vec<Loss> {
    let labels = Indices::new(vec![1, 0, -100, 2], &[4]).unwrap();
    let w = Tensor::from_vec(vec![0.5, 2.0, 1.5], &[3]).unwrap();
    let y = Tensor::from_vec(vec![1.0, -1.0, -1.0], &[3]).unwrap();
    let mut out: Vec<Loss> = Vec::new();
    for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        let opts = CrossEntropyOptions { label_smoothing: 0.1, reduction: r, ..Default::default() };
        let (l, w2) = (labels.clone(), w.clone());
        out.push((
            "cross_entropy_weighted",
            Box::new(move |v| loss::cross_entropy_weighted(&v[0], &l, &w2, opts)),
            vec![vec![4, 3]],
        ));
        let w2 = w.clone();
        out.push((
            "cross_entropy_probs",
            Box::new(move |v| loss::cross_entropy_probs(&v[0], &v[1].softmax(1)?, Some(&w2), opts)),
            vec![vec![4, 3], vec![4, 3]],
        ));
        out.push((
            "l1_loss",
            Box::new(move |v| loss::l1_loss(&v[0].tanh(), &v[1].tanh().add_scalar(5.0), r)),
            vec![vec![2, 3], vec![2, 3]],
        ));
        out.push((
            "smooth_l1_loss",
            Box::new(move |v| loss::smooth_l1_loss(&v[0].scale(0.1), &v[1].scale(0.1), 2.0, r)),
            vec![vec![2, 3], vec![2, 3]],
        ));
        out.push((
            "binary_cross_entropy",
            Box::new(move |v| loss::binary_cross_entropy(&v[0].sigmoid(), &v[1].sigmoid(), None, r)),
            vec![vec![2, 3], vec![2, 3]],
        ));
        let y2 = y.clone();
        out.push((
            "cosine_embedding_loss",
            Box::new(move |v| loss::cosine_embedding_loss(&v[0], &v[1], &y2, -2.0, r)),
            vec![vec![3, 4], vec![3, 4]],
        ));
        let y2 = y.clone();
        out.push((
            "margin_ranking_loss",
            Box::new(move |v| loss::margin_ranking_loss(&v[0].tanh(), &v[1].tanh(), &y2, 10.0, r)),
            vec![vec![3], vec![3]],
        ));
    }
    out
}

#[test]
fn new_losses_pass_gradcheck_and_second_order_under_every_reduction() {
    let mut rng = Rng::new(21);
    for (name, f, shapes) in losses() {
        let xs: Vec<Tensor> = shapes.iter().map(|s| normal(s, &mut rng)).collect();
        common::check(&f, &xs, name);
        let y = f(&xs).unwrap();
        let seed = Tensor::randn(y.shape(), 0.0, 1.0, &mut rng).unwrap();
        let c: Vec<Tensor> = shapes.iter().map(|s| Tensor::randn(s, 0.0, 1.0, &mut rng).unwrap()).collect();
        second_order::check(&f, &xs, &seed, &c);
    }
}

#[test]
fn weighted_cross_entropy_divides_by_the_weights_of_the_rows_it_counts() {
    // Two rows with equal logits: each costs ln 2 times its class weight.
    let x = Tensor::zeros(&[3, 2]).unwrap();
    let w = Tensor::from_vec(vec![1.0, 3.0], &[2]).unwrap();
    let labels = Indices::new(vec![0, 1, -100], &[3]).unwrap();
    let mean = loss::cross_entropy_weighted(&x, &labels, &w, CrossEntropyOptions::default()).unwrap();
    assert!((mean.item().unwrap() - std::f32::consts::LN_2).abs() < 1e-6);
    let none = CrossEntropyOptions { reduction: Reduction::None, ..Default::default() };
    let rows = loss::cross_entropy_weighted(&x, &labels, &w, none).unwrap().to_vec();
    let ln2 = std::f32::consts::LN_2;
    assert_eq!(rows, [ln2, 3.0 * ln2, 0.0]);
    // All weights 1: the unweighted loss, value and gradient.
    let x = common::var(&[4, 3], 2);
    let labels = Indices::new(vec![2, 0, 1, 1], &[4]).unwrap();
    let opts = CrossEntropyOptions { label_smoothing: 0.2, ..Default::default() };
    let a = loss::cross_entropy_weighted(&x, &labels, &Tensor::ones(&[3]).unwrap(), opts).unwrap();
    let b = loss::cross_entropy(&x, &labels, opts).unwrap();
    assert!((a.item().unwrap() - b.item().unwrap()).abs() < 1e-6);
    // Every row ignored: 0 / 0, NaN as in PyTorch.
    let ignored = Indices::new(vec![-100; 4], &[4]).unwrap();
    let nan = loss::cross_entropy_weighted(&x, &ignored, &Tensor::ones(&[3]).unwrap(), opts).unwrap();
    assert!(nan.item().unwrap().is_nan());
}

#[test]
fn soft_targets_equal_hard_ones_on_one_hot_targets() {
    let x = common::var(&[2, 3, 2], 3);
    let labels = Indices::new(vec![0, 2, 1, 1], &[2, 2]).unwrap();
    let mut hot = vec![0.0; 12];
    for (i, &l) in labels.data().iter().enumerate() {
        let (n, d) = (i / 2, i % 2);
        hot[n * 6 + l as usize * 2 + d] = 1.0;
    }
    let target = Tensor::from_vec(hot, &[2, 3, 2]).unwrap();
    for r in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        let opts = CrossEntropyOptions { label_smoothing: 0.1, reduction: r, ..Default::default() };
        let soft = loss::cross_entropy_probs(&x, &target, None, opts).unwrap();
        let hard = loss::cross_entropy(&x, &labels, opts).unwrap();
        golden::assert_close(&soft, &hard, 1e-6, "soft vs hard");
    }
}

#[test]
fn bce_clamps_its_logs_like_pytorch() {
    let p = Tensor::variable(vec![0.0, 1.0, 0.0, 1.0], &[4]).unwrap();
    let t = Tensor::from_vec(vec![0.0, 1.0, 1.0, 0.0], &[4]).unwrap();
    let l = loss::binary_cross_entropy(&p, &t, None, Reduction::None).unwrap();
    assert_eq!(l.to_vec(), [0.0, 0.0, 100.0, 100.0]);
    l.sum_all().backward().unwrap();
    assert_eq!(p.grad().unwrap().to_vec(), [0.0, 0.0, -1e12, 1e12]);
    let w = Tensor::from_vec(vec![2.0], &[1]).unwrap();
    let lw = loss::binary_cross_entropy(&p.detach(), &t, Some(&w), Reduction::Sum).unwrap();
    assert_eq!(lw.item().unwrap(), 400.0);
    // The weight may broadcast to the input, never the other way.
    assert!(loss::binary_cross_entropy(&p.detach(), &t, Some(&Tensor::ones(&[2, 4]).unwrap()), Reduction::Sum).is_err());
}

#[test]
fn smooth_l1_with_beta_zero_is_l1_and_losses_reduce_as_asked() {
    let a = Tensor::from_vec(vec![0.5, -2.0, 3.0], &[3]).unwrap();
    let b = Tensor::zeros(&[3]).unwrap();
    let l1 = loss::l1_loss(&a, &b, Reduction::Sum).unwrap().item().unwrap();
    assert_eq!(l1, 5.5);
    assert_eq!(loss::smooth_l1_loss(&a, &b, 0.0, Reduction::Sum).unwrap().item().unwrap(), 5.5);
    // beta 1: 0.5·0.25 + (2 - 0.5) + (3 - 0.5).
    assert_eq!(loss::smooth_l1_loss(&a, &b, 1.0, Reduction::None).unwrap().to_vec(), [0.125, 1.5, 2.5]);
    assert_eq!(loss::l1_loss(&a, &b, Reduction::Mean).unwrap().item().unwrap(), 5.5 / 3.0);
    // Margin ranking broadcasts the three operands.
    let m = loss::margin_ranking_loss(&a, &Tensor::scalar(0.0), &Tensor::scalar(1.0), 1.0, Reduction::None).unwrap();
    assert_eq!(m.to_vec(), [0.5, 3.0, 0.0]);
    let gradient_passes = |f: &dyn Fn(&[Tensor]) -> Result<Tensor>| passes(f, &[common::var(&[3], 4)]);
    gradient_passes(&|v| loss::l1_loss(&v[0], &Tensor::full(&[3], 5.0)?, Reduction::Mean));
}
