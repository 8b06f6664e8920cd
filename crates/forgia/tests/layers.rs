//! Issue 15's layers: ELU/SELU/Mish/Hardswish/Hardsigmoid/LogSigmoid/log1p/expm1, PReLU, the
//! GLU family (split and fused), std, norm, cosine_similarity and normalize. PyTorch goldens,
//! gradcheck and second-order checks, literal edge cases and the nn modules.

mod common;

use common::golden::{self, Case};
use common::{second_order, second_order_unary};
use forgia::nn::SwiGluFeedForward;
use forgia::nn::{Elu, Forward, Glu, Hardsigmoid, Hardswish, LogSigmoid, Mish, Module, PRelu, Selu, Silu};
use forgia::{gradcheck, GradcheckOptions, Result, Rng, Tensor};

fn t(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn p_attr(case: &Case) -> f32 {
    match &case.attrs["p"] {
        serde_json::Value::String(s) if s == "inf" => f32::INFINITY,
        v => v.as_f64().unwrap() as f32,
    }
}

fn axes(case: &Case) -> Vec<usize> {
    case.attrs["axes"].as_array().unwrap().iter().map(|a| a.as_u64().unwrap() as usize).collect()
}

fn apply(case: &Case, xs: &[Tensor]) -> Option<Result<Tensor>> {
    let f = |k: &str| case.attrs[k].as_f64().unwrap() as f32;
    let i = |k: &str| case.attrs[k].as_i64().unwrap() as isize;
    let b = |k: &str| case.attrs[k].as_bool().unwrap();
    Some(match case.op.as_str() {
        "elu" => xs[0].elu(f("alpha")),
        "selu" => Ok(xs[0].selu()),
        "mish" => Ok(xs[0].mish()),
        "hardswish" => Ok(xs[0].hardswish()),
        "hardsigmoid" => Ok(xs[0].hardsigmoid()),
        "log_sigmoid" => Ok(xs[0].log_sigmoid()),
        "log1p" => Ok(xs[0].log1p()),
        "expm1" => Ok(xs[0].expm1()),
        "prelu" => xs[0].prelu(&xs[1]),
        "glu" => xs[0].glu(i("dim")),
        "swiglu" => xs[0].swiglu(i("dim")),
        "geglu" => xs[0].geglu(i("dim")),
        "glu_with" => xs[0].glu_with(&xs[1]),
        "swiglu_with" => xs[0].swiglu_with(&xs[1]),
        "geglu_with" => xs[0].geglu_with(&xs[1]),
        "std" => xs[0].std(axes(case), case.attrs["correction"].as_u64().unwrap() as usize, b("keepdim")),
        "norm" => xs[0].norm(p_attr(case), axes(case), b("keepdim")),
        "norm_all" => xs[0].norm_all(p_attr(case)),
        "cosine_similarity" => xs[0].cosine_similarity(&xs[1], i("dim"), f("eps")),
        "normalize" => xs[0].normalize(f("p"), i("dim"), f("eps")),
        _ => return None,
    })
}

#[test]
fn layer_goldens_match_pytorch() {
    let n = golden::check_known("layers_loss", 1e-4, apply).len();
    assert!(n >= 35, "only {n} layer goldens ran");
}

/// `(name, f, low, high)`: every new pointwise op, with a domain away from its kinks.
type Unary = (&'static str, fn(&Tensor) -> Result<Tensor>, f32, f32);

fn unary_ops() -> Vec<Unary> {
    vec![
        ("elu", |x| x.elu(0.7), 0.1, 2.0),
        ("elu negative side", |x| x.elu(0.7), -2.0, -0.1),
        ("selu", |x| Ok(x.selu()), -2.0, -0.1),
        ("mish", |x| Ok(x.mish()), -3.0, 3.0),
        ("hardswish", |x| Ok(x.hardswish()), -2.9, 2.9),
        ("hardsigmoid", |x| x.hardsigmoid().mul(x), -2.9, 2.9),
        ("log_sigmoid", |x| Ok(x.log_sigmoid()), -4.0, 4.0),
        ("log1p", |x| Ok(x.log1p()), -0.5, 2.0),
        ("expm1", |x| Ok(x.expm1()), -2.0, 2.0),
        ("glu fused", |x| x.glu(-1), -2.0, 2.0),
        ("swiglu fused", |x| x.swiglu(0), -2.0, 2.0),
        ("geglu fused", |x| x.geglu(1), -2.0, 2.0),
        ("std", |x| x.std(1, 1, false), -2.0, 2.0),
        ("norm p=2", |x| x.norm(2.0, 1, true), -2.0, 2.0),
        ("norm p=3", |x| x.norm(3.0, [0usize, 1], false), 0.2, 2.0),
        ("norm p=inf", |x| Ok(x.norm(f32::INFINITY, 1, false)?.square()), -2.0, 2.0),
        ("norm_all p=2", |x| x.norm_all(2.0), -2.0, 2.0),
        ("normalize", |x| x.normalize(2.0, 1, 1e-12), -2.0, 2.0),
        ("normalize p=1", |x| x.normalize(1.0, 0, 1e-12), 0.2, 2.0),
    ]
}

#[test]
fn new_layers_pass_gradcheck_and_second_order() {
    let mut rng = Rng::new(3);
    for (name, f, lo, hi) in unary_ops() {
        let x = Tensor::rand(&[2, 4], lo, hi, &mut rng).unwrap().into_variable();
        let report = gradcheck(|v| f(&v[0]), std::slice::from_ref(&x), GradcheckOptions::default()).unwrap();
        assert!(report.passed(), "{name}: {:?}", report.first_mismatch);
        let report = second_order_unary::check(&|v: &Tensor| f(v), &x);
        assert!(report.passed(), "second order {name}: {:?}", report.first_mismatch);
    }
}

#[test]
fn binary_layers_pass_gradcheck_and_second_order() {
    type Binary = (&'static str, fn(&[Tensor]) -> Result<Tensor>, Vec<usize>);
    let ops: Vec<Binary> = vec![
        ("glu_with", |v| v[0].glu_with(&v[1]), vec![2, 3]),
        ("swiglu_with", |v| v[0].swiglu_with(&v[1]), vec![2, 3]),
        ("geglu_with", |v| v[0].geglu_with(&v[1]), vec![2, 3]),
        ("prelu", |v| v[0].prelu(&v[1].narrow(0, 0, 1)?.reshape(&[3])?), vec![2, 3]),
        ("cosine_similarity", |v| v[0].cosine_similarity(&v[1], 1, 1e-8), vec![2, 3]),
    ];
    let mut rng = Rng::new(4);
    for (name, f, shape) in ops {
        let xs = [common::normal_var(&shape, rng.next_u64()), common::normal_var(&shape, rng.next_u64())];
        let report = gradcheck(f, &xs, GradcheckOptions::default()).unwrap();
        assert!(report.passed(), "{name}: {:?}", report.first_mismatch);
        let seed = Tensor::randn(f(&xs).unwrap().shape(), 0.0, 1.0, &mut rng).unwrap();
        let c =
            [Tensor::randn(&shape, 0.0, 1.0, &mut rng).unwrap(), Tensor::randn(&shape, 0.0, 1.0, &mut rng).unwrap()];
        second_order::check(f, &xs, &seed, &c);
    }
}

#[test]
fn activations_are_exact_at_their_extremes() {
    let x = t(&[-100.0, -30.0, 0.0, 30.0, 100.0], &[5]);
    let ls = x.log_sigmoid().to_vec();
    assert_eq!(ls[0], -100.0);
    assert_eq!(ls[4], 0.0);
    assert!((ls[2] + std::f32::consts::LN_2).abs() < 1e-7);
    assert!(x.elu(1.0).unwrap().to_vec().iter().all(|v| v.is_finite()));
    assert_eq!(x.mish().to_vec()[4], 100.0);
    assert_eq!(t(&[1e-8], &[1]).log1p().to_vec(), [1e-8]);
    assert_eq!(t(&[1e-8], &[1]).expm1().to_vec(), [1e-8]);
    // PyTorch's gradients at the kinks (torch 2.15): hardswish 0 at -3 and 1 at 3,
    // hardsigmoid 0 at both.
    let h = Tensor::variable(vec![-3.0, 3.0, -3.5, 3.5, 0.0], &[5]).unwrap();
    h.hardswish().sum_all().backward().unwrap();
    assert_eq!(h.grad().unwrap().to_vec(), [0.0, 1.0, 0.0, 1.0, 0.5]);
    let h = Tensor::variable(vec![-3.0, 3.0, 0.0], &[3]).unwrap();
    h.hardsigmoid().sum_all().backward().unwrap();
    assert_eq!(h.grad().unwrap().to_vec(), [0.0, 0.0, 1.0 / 6.0]);
    // A large positive input does not turn ELU's second derivative into NaN (0·∞).
    let e = Tensor::variable(vec![200.0, -1.0], &[2]).unwrap();
    assert!(second_order_unary::check(&|v: &Tensor| v.elu(1.0), &e).passed());
}

#[test]
fn norms_take_pytorch_subgradients_at_zero_and_at_ties() {
    let x = Tensor::variable(vec![0.0, 0.0, 3.0, -4.0], &[2, 2]).unwrap();
    x.norm(2.0, 1, false).unwrap().sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), [0.0, 0.0, 0.6, -0.8]);
    let x = Tensor::variable(vec![2.0, -2.0, 1.0], &[3]).unwrap();
    x.norm(f32::INFINITY, 0, false).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), [0.5, -0.5, 0.0]);
    let x = Tensor::variable(vec![0.0, 2.0], &[2]).unwrap();
    x.norm_all(1.0).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), [0.0, 1.0]);
    // A zero vector normalizes to zeros with a finite gradient.
    let z = Tensor::variable(vec![0.0; 3], &[1, 3]).unwrap();
    let y = z.normalize(2.0, 1, 1e-12).unwrap();
    assert_eq!(y.to_vec(), [0.0; 3]);
    y.sum_all().backward().unwrap();
    assert!(z.grad().unwrap().to_vec().iter().all(|g| g.is_finite()));
    assert_eq!(Tensor::scalar(-3.0).norm(2.0, 0, false).unwrap().item().unwrap(), 3.0);
}

#[test]
fn activation_modules_match_their_ops() {
    let x = Tensor::randn(&[2, 3, 4], 0.0, 1.0, &mut Rng::new(5)).unwrap();
    let layers: Vec<(Box<dyn Forward>, Tensor)> = vec![
        (Box::new(Elu { alpha: 0.5 }), x.elu(0.5).unwrap()),
        (Box::new(Selu), x.selu()),
        (Box::new(Silu), x.silu()),
        (Box::new(Mish), x.mish()),
        (Box::new(Hardswish), x.hardswish()),
        (Box::new(Hardsigmoid), x.hardsigmoid()),
        (Box::new(LogSigmoid), x.log_sigmoid()),
        (Box::new(Glu::default()), x.glu(-1).unwrap()),
    ];
    for (layer, want) in layers {
        assert_eq!(layer.forward(&x).unwrap().to_vec(), want.to_vec());
    }
    let prelu = PRelu::new(3, 0.25).unwrap();
    let y = prelu.forward(&x).unwrap();
    assert_eq!(y.to_vec(), x.prelu(&Tensor::full(&[3], 0.25).unwrap()).unwrap().to_vec());
    y.sum_all().backward().unwrap();
    assert_eq!(prelu.weight.grad().unwrap().shape(), &[3]);
    assert!(PRelu::new(0, 0.25).is_err());
}

#[test]
fn swiglu_feed_forward_is_llamas_mlp() {
    let ffn = SwiGluFeedForward::new(4, 6, &mut Rng::new(6)).unwrap();
    let names: Vec<String> = ffn.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["gate_proj.weight", "up_proj.weight", "down_proj.weight"]);
    let x = Tensor::randn(&[2, 3, 4], 0.0, 1.0, &mut Rng::new(7)).unwrap();
    let y = ffn.forward(&x).unwrap();
    let gate = x.matmul(&ffn.gate_proj.weight.transpose(0, 1).unwrap()).unwrap();
    let up = x.matmul(&ffn.up_proj.weight.transpose(0, 1).unwrap()).unwrap();
    let want = gate.silu().mul(&up).unwrap().matmul(&ffn.down_proj.weight.transpose(0, 1).unwrap()).unwrap();
    golden::assert_close(&y, &want, 1e-5, "swiglu ffn");
    y.square().sum_all().backward().unwrap();
    assert!(ffn.named_parameters().iter().all(|(_, p)| p.grad().is_some()));
    // The fused form over concatenated [up | gate] equals the split form.
    let both = Tensor::concat(&[&up, &gate], -1).unwrap();
    assert_eq!(both.swiglu(-1).unwrap().to_vec(), up.swiglu_with(&gate).unwrap().to_vec());
}
