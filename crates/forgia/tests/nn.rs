//! Modules: `Linear` values and gradients, PyTorch-style parameter names through
//! `Sequential` and custom composites, initializers, and bad inputs.

mod common;

use forgia::nn::init::{self, FanMode, Nonlinearity};
use forgia::nn::{visit_child, visit_child_mut, Forward, Linear, Module, Relu, Sequential, Tanh};
use forgia::{gradcheck, ErrorKind, GradcheckOptions, Result, Rng, Tensor};

fn t(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape).unwrap()
}

#[test]
fn linear_computes_x_w_transposed_plus_b_and_its_gradients() {
    let w = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
    let b = t(&[0.5, -1.0, 0.0], &[3]);
    let lin = Linear::from_tensors(w, Some(b)).unwrap();
    let x = t(&[1.0, 1.0, 2.0, -1.0], &[2, 2]);
    let y = lin.forward(&x).unwrap();
    // row 1: (1+2, 3+4, 5+6) + b; row 2: (2-2, 6-4, 10-6) + b
    assert_eq!(y.to_vec(), [3.5, 6.0, 11.0, 0.5, 1.0, 4.0]);
    y.sum_all().backward().unwrap();
    // L = Σ y: ∂L/∂W[o, i] = Σ_n x[n, i] = (3, 0) per row; ∂L/∂b = N = 2
    assert_eq!(lin.weight.grad().unwrap().to_vec(), [3.0, 0.0, 3.0, 0.0, 3.0, 0.0]);
    assert_eq!(lin.bias.as_ref().unwrap().grad().unwrap().to_vec(), [2.0, 2.0, 2.0]);
}

#[test]
fn linear_applies_over_any_leading_axes_and_rank_one_inputs() {
    let lin = Linear::new(4, 3, true, &mut Rng::new(5)).unwrap();
    let x = Tensor::randn(&[2, 5, 4], 0.0, 1.0, &mut Rng::new(6)).unwrap();
    let y = lin.forward(&x).unwrap();
    assert_eq!(y.shape(), [2, 5, 3]);
    let flat = lin.forward(&x.reshape(&[10, 4]).unwrap()).unwrap();
    assert_eq!(y.to_vec(), flat.to_vec());
    let row = lin.forward(&x.reshape(&[10, 4]).unwrap().narrow(0, 3, 1).unwrap().squeeze(0).unwrap()).unwrap();
    assert_eq!(row.shape(), [3]);
    assert_eq!(row.to_vec(), flat.to_vec()[9..12]);
}

#[test]
fn linear_passes_gradcheck_with_bias_and_without() {
    let mut rng = Rng::new(11);
    let x = Tensor::randn(&[3, 4], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let w = Tensor::randn(&[2, 4], 0.0, 0.5, &mut rng).unwrap().into_variable();
    let b = Tensor::randn(&[2], 0.0, 0.5, &mut rng).unwrap().into_variable();
    let with_bias = |xs: &[Tensor]| -> Result<Tensor> {
        Linear::from_tensors(xs[1].clone(), Some(xs[2].clone()))?.forward(&xs[0]).map(|y| y.tanh())
    };
    let report = gradcheck(with_bias, &[x.clone(), w.clone(), b], GradcheckOptions::default()).unwrap();
    assert!(report.passed(), "{:?}", report.first_mismatch);
    // A transposed (strided) input.
    let xt = Tensor::randn(&[4, 3], 0.0, 1.0, &mut rng).unwrap().transpose(0, 1).unwrap().into_variable();
    let no_bias = |xs: &[Tensor]| Linear::from_tensors(xs[1].clone(), None)?.forward(&xs[0]);
    let report = gradcheck(no_bias, &[xt, w], GradcheckOptions::default()).unwrap();
    assert!(report.passed(), "{:?}", report.first_mismatch);
}

#[test]
fn the_fused_linear_op_matches_matmul_plus_bias_and_passes_gradcheck() {
    let mut rng = Rng::new(11);
    let x = Tensor::randn(&[2, 3, 4], 0.0, 1.0, &mut rng).unwrap();
    let w = Tensor::randn(&[5, 4], 0.0, 1.0, &mut rng).unwrap();
    let b = Tensor::randn(&[5], 0.0, 1.0, &mut rng).unwrap();
    let fused = x.linear(&w, Some(&b)).unwrap();
    let composed = x.matmul(&w.transpose(0, 1).unwrap()).unwrap().add(&b).unwrap();
    assert_eq!(fused.shape(), &[2, 3, 5]);
    for (a, c) in fused.to_vec().iter().zip(composed.to_vec()) {
        assert!((a - c).abs() < 1e-5, "{a} vs {c}");
    }
    let vars = [x.into_variable(), w.into_variable(), b.into_variable()];
    let f = |v: &[Tensor]| v[0].linear(&v[1], Some(&v[2]));
    let report = gradcheck(f, &vars, GradcheckOptions::default()).unwrap();
    assert!(report.passed(), "{:?}", report.first_mismatch);
    // A strided input, no bias.
    let xt = Tensor::randn(&[4, 3], 0.0, 1.0, &mut rng).unwrap().transpose(0, 1).unwrap().into_variable();
    let f = |v: &[Tensor]| v[0].linear(&v[1], None);
    let report = gradcheck(f, &[xt, vars[1].clone()], GradcheckOptions::default()).unwrap();
    assert!(report.passed(), "{:?}", report.first_mismatch);
}

#[test]
fn the_fused_linear_op_has_second_order_gradients() {
    let mut rng = Rng::new(12);
    let xs = [
        Tensor::randn(&[3, 4], 0.0, 1.0, &mut rng).unwrap(),
        Tensor::randn(&[2, 4], 0.0, 1.0, &mut rng).unwrap(),
        Tensor::randn(&[2], 0.0, 1.0, &mut rng).unwrap(),
    ];
    let seed = Tensor::randn(&[3, 2], 0.0, 1.0, &mut rng).unwrap();
    let c: Vec<Tensor> = xs.iter().map(|x| Tensor::randn(x.shape(), 0.0, 1.0, &mut rng).unwrap()).collect();
    // Squaring makes the second derivative depend on every input.
    common::second_order::check(|v| v[0].linear(&v[1], Some(&v[2])).map(|y| y.square()), &xs, &seed, &c);
}

#[test]
fn linear_rejects_bad_shapes() {
    let lin = Linear::new(4, 3, false, &mut Rng::new(0)).unwrap();
    let e = lin.forward(&Tensor::zeros(&[2, 5]).unwrap()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ShapeMismatch { op: "linear", .. }));
    let e = Linear::new(0, 3, true, &mut Rng::new(0)).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }));
    let e = Linear::from_tensors(Tensor::zeros(&[3, 2]).unwrap(), Some(Tensor::zeros(&[2]).unwrap())).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::ShapeMismatch { .. }));
    let e = Linear::from_tensors(Tensor::zeros(&[3]).unwrap(), None).err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::RankMismatch { .. }));
}

#[test]
fn linear_default_init_is_seeded_and_bounded_by_one_over_root_fan_in() {
    let a = Linear::new(64, 32, true, &mut Rng::new(3)).unwrap();
    let b = Linear::new(64, 32, true, &mut Rng::new(3)).unwrap();
    assert_eq!(a.weight.to_vec(), b.weight.to_vec());
    let bound = 1.0 / 8.0; // 1/√64
    let w = a.weight.to_vec();
    assert!(w.iter().all(|v| v.abs() <= bound));
    assert!(a.bias.as_ref().unwrap().to_vec().iter().all(|v| v.abs() <= bound));
    // U(-b, b) has standard deviation b/√3.
    let std = (w.iter().map(|v| v * v).sum::<f32>() / w.len() as f32).sqrt();
    assert!((std - bound / 3f32.sqrt()).abs() < 0.1 * bound, "{std}");
    assert!(a.weight.is_variable() && a.weight.grad().is_none());
}

fn std_of(t: &Tensor) -> f32 {
    let v = t.to_vec();
    (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32).sqrt()
}

#[test]
fn initializers_follow_pytorch_formulas() {
    assert_eq!(init::fans(&[8, 4, 3, 3]).unwrap(), (36, 72));
    assert!(matches!(init::fans(&[5]).unwrap_err().kind(), ErrorKind::RankMismatch { .. }));
    assert_eq!(init::gain(Nonlinearity::Tanh), 5.0 / 3.0);
    // LeakyRelu(√5): √(2/6) — PyTorch's Linear default.
    assert!((init::gain(Nonlinearity::LeakyRelu(5f32.sqrt())) - (1.0f32 / 3.0).sqrt()).abs() < 1e-7);
    let mut rng = Rng::new(9);
    let mut w = Tensor::zeros(&[256, 128]).unwrap().into_variable();
    let relu = init::gain(Nonlinearity::Relu);
    init::kaiming_normal(&mut w, relu, FanMode::FanIn, &mut rng).unwrap();
    assert!((std_of(&w) - relu / 128f32.sqrt()).abs() < 0.03 * relu / 128f32.sqrt());
    init::kaiming_uniform(&mut w, relu, FanMode::FanOut, &mut rng).unwrap();
    assert!(w.to_vec().iter().all(|v| v.abs() <= relu * (3.0f32 / 256.0).sqrt()));
    init::xavier_uniform(&mut w, 1.0, &mut rng).unwrap();
    assert!(w.to_vec().iter().all(|v| v.abs() <= (6.0f32 / 384.0).sqrt()));
    init::xavier_normal(&mut w, 1.0, &mut rng).unwrap();
    assert!((std_of(&w) - (2.0f32 / 384.0).sqrt()).abs() < 0.05 * (2.0f32 / 384.0).sqrt());
    init::constant(&mut w, 0.5).unwrap();
    assert!(w.to_vec().iter().all(|&v| v == 0.5));
    let mut op_result = w.scale(2.0);
    let e = init::constant(&mut op_result, 0.0).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::MutableDataRequiresNoGrad { .. }));
}

/// A layer that records the training flag, to see `set_training` travel down.
struct Probe {
    training: bool,
}

impl Module for Probe {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

impl Forward for Probe {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(if self.training { x.scale(0.0) } else { x.clone() })
    }
}

#[test]
fn sequential_names_chains_and_propagates_training_mode() {
    let mut rng = Rng::new(0);
    let inner = Sequential::new().push(Linear::new(2, 3, true, &mut rng).unwrap()).push(Relu);
    let mut seq = Sequential::new()
        .push(inner)
        .push(Tanh)
        .push(Probe { training: true })
        .push(Linear::new(3, 1, false, &mut rng).unwrap());
    let names: Vec<String> = seq.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0.0.weight", "0.0.bias", "3.weight"]);
    assert_eq!(seq.num_parameters(), 6 + 3 + 3);
    assert_eq!(seq.len(), 4);
    let x = t(&[1.0, -2.0], &[1, 2]);
    assert_eq!(seq.forward(&x).unwrap().to_vec(), [0.0]);
    seq.set_training(false);
    let y = seq.forward(&x).unwrap();
    let by_hand = {
        let first = seq.get(0).unwrap().forward(&x).unwrap().tanh();
        seq.get(3).unwrap().forward(&first).unwrap()
    };
    assert_eq!(y.to_vec(), by_hand.to_vec());
    y.sum_all().backward().unwrap();
    assert!(seq.named_parameters().iter().all(|(_, p)| p.grad().is_some()));
    seq.zero_grad();
    assert!(seq.named_parameters().iter().all(|(_, p)| p.grad().is_none()));
}

/// A hand-written composite, named like a PyTorch module with attributes `fc1`, `fc2`.
struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Module for Mlp {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("fc1", &self.fc1, f);
        visit_child("fc2", &self.fc2, f);
    }
    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("fc1", &mut self.fc1, f);
        visit_child_mut("fc2", &mut self.fc2, f);
    }
}

#[test]
fn custom_composites_name_children_with_dotted_prefixes() {
    let mut rng = Rng::new(1);
    let mut m =
        Mlp { fc1: Linear::new(2, 2, true, &mut rng).unwrap(), fc2: Linear::new(2, 1, true, &mut rng).unwrap() };
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
    let mut seen = Vec::new();
    m.visit_params_mut(&mut |n, p| seen.push((n.to_string(), p.numel())));
    assert_eq!(seen.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), names);
    let y = m.fc2.forward(&m.fc1.forward(&Tensor::ones(&[1, 2]).unwrap()).unwrap()).unwrap();
    assert_eq!(y.shape(), [1, 1]);
}
