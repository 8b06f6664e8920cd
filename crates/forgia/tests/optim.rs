//! Optimizers: hand-computed steps on a two-parameter problem, the JAX goldens of
//! `golden/optim.json`, state save/load, gradient clipping (with shared gradients) and
//! learning-rate schedules.

use forgia::nn::Module;
use forgia::optim::schedule::{CosineAnnealing, LinearWarmup, LrSchedule, StepLr};
use forgia::optim::{clip_grad_norm, Adam, AdamConfig, AdamW, Optimizer, Sgd, SgdConfig};
use forgia::{ErrorKind, Tensor};
use serde_json::Value;

/// A module that is just a list of named tensors.
struct Params(Vec<(String, Tensor)>);

impl Module for Params {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        self.0.iter().for_each(|(n, t)| f(n, t));
    }
    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        self.0.iter_mut().for_each(|(n, t)| f(n, t));
    }
}

/// Scalars `a = 1`, `b = 2` with loss `a² + 3b`, so `∂L/∂a = 2a`, `∂L/∂b = 3`.
fn pair() -> Params {
    Params(vec![
        ("a".into(), Tensor::variable(vec![1.0], &[1]).unwrap()),
        ("b".into(), Tensor::variable(vec![2.0], &[1]).unwrap()),
    ])
}

fn pair_step(model: &mut Params, opt: &mut dyn Optimizer) -> (f32, f32) {
    opt.zero_grad(model);
    let (a, b) = (&model.0[0].1, &model.0[1].1);
    a.mul(a).unwrap().add(&b.scale(3.0)).unwrap().sum_all().backward().unwrap();
    opt.step(model).unwrap();
    (model.0[0].1.to_vec()[0], model.0[1].1.to_vec()[0])
}

fn assert_near(actual: (f32, f32), expected: (f64, f64)) {
    let ok = |a: f32, e: f64| (a as f64 - e).abs() <= 1e-6 * (1.0 + e.abs());
    assert!(ok(actual.0, expected.0) && ok(actual.1, expected.1), "{actual:?} vs {expected:?}");
}

#[test]
fn sgd_momentum_matches_hand_computed_steps() {
    let mut m = pair();
    let mut opt = Sgd::new(SgdConfig { lr: 0.1, momentum: 0.5, ..SgdConfig::default() }).unwrap();
    // step 1: g = (2, 3); buf = g; a = 1 - 0.1·2 = 0.8, b = 2 - 0.1·3 = 1.7
    assert_near(pair_step(&mut m, &mut opt), (0.8, 1.7));
    // step 2: g = (1.6, 3); buf = 0.5·(2, 3) + (1.6, 3) = (2.6, 4.5); a = 0.8 - 0.26, b = 1.7 - 0.45
    assert_near(pair_step(&mut m, &mut opt), (0.54, 1.25));
}

#[test]
fn sgd_nesterov_with_weight_decay_matches_hand_computed_steps() {
    let mut m = pair();
    let cfg = SgdConfig { lr: 0.1, momentum: 0.5, nesterov: true, weight_decay: 0.1, ..SgdConfig::default() };
    let mut opt = Sgd::new(cfg).unwrap();
    // step 1: d = g + 0.1·p = (2.1, 3.2); buf = d; d += 0.5·buf → (3.15, 4.8)
    //         a = 1 - 0.315 = 0.685, b = 2 - 0.48 = 1.52
    assert_near(pair_step(&mut m, &mut opt), (0.685, 1.52));
    // step 2: d = (1.37 + 0.0685, 3 + 0.152) = (1.4385, 3.152)
    //         buf = 0.5·(2.1, 3.2) + d = (2.4885, 4.752); d += 0.5·buf → (2.68275, 5.528)
    //         a = 0.685 - 0.268275 = 0.416725, b = 1.52 - 0.5528 = 0.9672
    assert_near(pair_step(&mut m, &mut opt), (0.416725, 0.9672));
}

#[test]
fn adam_matches_hand_computed_steps() {
    let mut m = pair();
    let mut opt = Adam::new(AdamConfig { lr: 0.1, ..AdamConfig::adam() }).unwrap();
    // step 1: m̂ = g, v̂ = g², so each moves by lr·g/(|g| + eps) ≈ 0.1
    assert_near(pair_step(&mut m, &mut opt), (0.9000000005, 1.9000000003));
    // step 2, a: g = 1.8; m = 0.9·0.2 + 0.1·1.8 = 0.36; v = 0.999·0.004 + 0.001·3.24 = 0.007236
    //   m̂ = 0.36/0.19 = 1.8947368, v̂ = 0.007236/0.001999 = 3.6198099, √v̂ = 1.9025798
    //   a = 0.9 - 0.1·1.8947368/1.9025798 = 0.8004122
    // step 2, b: g = 3; m = 0.57, v = 0.017991; m̂ = 3, v̂ = 9; b = 1.9 - 0.1·3/3 = 1.8
    assert_near(pair_step(&mut m, &mut opt), (0.8004122287, 1.8000000007));
}

#[test]
fn adamw_matches_hand_computed_steps() {
    let mut m = pair();
    let mut opt = AdamW::new(AdamConfig { lr: 0.1, weight_decay: 0.1, ..AdamConfig::adam() }).unwrap();
    // step 1: p ← p·(1 - 0.01) first: a = 0.99 - 0.1 = 0.89, b = 1.98 - 0.1 = 1.88
    assert_near(pair_step(&mut m, &mut opt), (0.8900000005, 1.8800000003));
    // step 2, a: g = 1.78 (at a = 0.89); a ← 0.89·0.99 = 0.8811; m = 0.358, v = 0.0071644
    //   m̂ = 1.8842105, √v̂ = √(0.0071644/0.001999) = 1.8931434; a = 0.8811 - 0.0995283 = 0.7815719
    // step 2, b: b ← 1.88·0.99 = 1.8612, then - 0.1 as for Adam = 1.7612
    assert_near(pair_step(&mut m, &mut opt), (0.7815718559, 1.7612000007));
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<f32> = v["data"].as_array().unwrap().iter().map(|d| d.as_f64().unwrap() as f32).collect();
    Tensor::from_vec(data, &shape).unwrap()
}

fn close(actual: &[f32], expected: &Value, what: &str) {
    let expected = tensor(expected).to_vec();
    assert_eq!(actual.len(), expected.len(), "{what}");
    for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
        assert!((a - e).abs() <= 1e-5 * (1.0 + e.abs()), "{what}[{i}]: {a} vs {e}");
    }
}

fn optimizer_for(case: &Value) -> Box<dyn Optimizer> {
    let h = &case["hparams"];
    let f = |k: &str| h[k].as_f64().unwrap() as f32;
    match case["optimizer"].as_str().unwrap() {
        "sgd" => Box::new(
            Sgd::new(SgdConfig {
                lr: f("lr"),
                momentum: f("momentum"),
                dampening: f("dampening"),
                nesterov: h["nesterov"].as_bool().unwrap(),
                weight_decay: f("weight_decay"),
            })
            .unwrap(),
        ),
        name => {
            let betas = h["betas"].as_array().unwrap();
            let cfg = AdamConfig {
                lr: f("lr"),
                betas: (betas[0].as_f64().unwrap() as f32, betas[1].as_f64().unwrap() as f32),
                eps: f("eps"),
                weight_decay: f("weight_decay"),
            };
            if name == "adam" {
                Box::new(Adam::new(cfg).unwrap())
            } else {
                Box::new(AdamW::new(cfg).unwrap())
            }
        }
    }
}

#[test]
fn optimizers_match_the_jax_goldens_for_three_steps() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/optim.json")).unwrap();
    let cases: Value = serde_json::from_str(&text).unwrap();
    let cases = cases["cases"].as_array().unwrap();
    assert!(cases.len() >= 4);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let (c1, c2) = (tensor(&case["c1"]), tensor(&case["c2"]));
        let init = case["init"].as_array().unwrap();
        let mut model = Params(vec![
            ("w1".into(), tensor(&init[0]).into_variable()),
            ("w2".into(), tensor(&init[1]).into_variable()),
        ]);
        let loss_of = |m: &Params| {
            let (w1, w2) = (&m.0[0].1, &m.0[1].1);
            // sum(c1·w1²) + sum(c2·w2²): grad = 2·c·w
            c1.mul(&w1.mul(w1)?)?.sum_all().add(&c2.mul(&w2.mul(w2)?)?.sum_all())
        };
        let mut opt = optimizer_for(case);
        for (k, expected) in case["steps"].as_array().unwrap().iter().enumerate() {
            opt.zero_grad(&model);
            loss_of(&model).unwrap().backward().unwrap();
            opt.step(&mut model).unwrap();
            close(&model.0[0].1.to_vec(), &expected[0], &format!("{name} step {} w1", k + 1));
            close(&model.0[1].1.to_vec(), &expected[1], &format!("{name} step {} w2", k + 1));
            let loss = loss_of(&model).unwrap().item().unwrap();
            close(&[loss], &serde_json::json!({"shape": [], "data": [case["losses"][k]]}), name);
        }
    }
}

#[test]
fn parameters_without_a_gradient_are_skipped_and_keep_no_state() {
    let mut m = pair();
    let mut opt = Adam::new(AdamConfig { lr: 0.1, ..AdamConfig::adam() }).unwrap();
    // Only `a` takes part in the loss: a² → grad 2.
    let a = m.0[0].1.clone();
    a.mul(&a).unwrap().sum_all().backward().unwrap();
    opt.step(&mut m).unwrap();
    assert_eq!(m.0[1].1.to_vec(), [2.0]);
    let keys: Vec<String> = opt.state().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["a.exp_avg", "a.exp_avg_sq", "a.step", "lr", "step"]);
}

#[test]
fn state_round_trips_and_continues_identically() {
    let cfg = AdamConfig { lr: 0.05, weight_decay: 0.01, ..AdamConfig::adam() };
    let (mut m1, mut o1) = (pair(), AdamW::new(cfg).unwrap());
    pair_step(&mut m1, &mut o1);
    let mut m2 = Params(m1.0.iter().map(|(n, t)| (n.clone(), t.detach().into_variable())).collect());
    let mut o2 = AdamW::new(AdamConfig { lr: 1.0, ..cfg }).unwrap();
    o2.load_state(&m2, &o1.state()).unwrap();
    assert_eq!((o2.lr(), o2.steps_taken()), (0.05, 1));
    for _ in 0..3 {
        assert_eq!(pair_step(&mut m1, &mut o1), pair_step(&mut m2, &mut o2));
    }
}

#[test]
fn bad_optimizer_state_is_rejected_without_changing_anything() {
    let mut m = pair();
    let mut opt = Sgd::new(SgdConfig { lr: 0.1, momentum: 0.9, ..SgdConfig::default() }).unwrap();
    pair_step(&mut m, &mut opt);
    let good = opt.state();
    let mut missing = good.clone();
    missing.retain(|(k, _)| k != "lr");
    let mut extra = good.clone();
    extra.push(("c.momentum_buffer".into(), Tensor::zeros(&[1]).unwrap()));
    let mut misshaped = good.clone();
    misshaped.iter_mut().filter(|(k, _)| k == "a.momentum_buffer").for_each(|(_, t)| *t = Tensor::zeros(&[2]).unwrap());
    for bad in [missing, extra, misshaped] {
        let e = opt.load_state(&m, &bad).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { arg: "state", .. }), "{e}");
        assert_eq!(opt.state().len(), good.len());
        assert_eq!(opt.steps_taken(), 1);
    }
}

#[test]
fn a_step_over_an_op_result_fails_before_changing_any_parameter() {
    let a = Tensor::variable(vec![1.0], &[1]).unwrap();
    let derived = a.scale(2.0);
    derived.retain_grad();
    let mut m = Params(vec![("a".into(), a.clone()), ("derived".into(), derived.clone())]);
    derived.sum_all().backward().unwrap();
    let mut opt = Sgd::new(SgdConfig { lr: 0.1, ..SgdConfig::default() }).unwrap();
    let e = opt.step(&mut m).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::MutableDataRequiresNoGrad { .. }));
    assert_eq!(m.0[0].1.to_vec(), [1.0]);
    assert_eq!(opt.steps_taken(), 0);
}

#[test]
fn invalid_hyperparameters_are_errors() {
    let sgd = |c| Sgd::new(c).err().map(|e| matches!(e.kind(), ErrorKind::InvalidArgument { .. }));
    assert_eq!(sgd(SgdConfig { lr: -1.0, ..SgdConfig::default() }), Some(true));
    assert_eq!(sgd(SgdConfig { nesterov: true, ..SgdConfig::default() }), Some(true));
    assert_eq!(sgd(SgdConfig { nesterov: true, momentum: 0.9, dampening: 0.1, ..SgdConfig::default() }), Some(true));
    assert!(Adam::new(AdamConfig { betas: (0.9, 1.0), ..AdamConfig::adam() }).is_err());
    assert!(AdamW::new(AdamConfig { eps: f32::NAN, ..AdamConfig::adamw() }).is_err());
    assert!(StepLr::new(0.1, 0, 0.5).is_err());
    assert!(CosineAnnealing::new(0.1, 0.0, 0).is_err());
}

#[test]
fn clip_grad_norm_counts_and_scales_a_parameter_shared_by_two_handles_once() {
    let w = Tensor::variable(vec![1.0, 1.0], &[2]).unwrap();
    let m = Params(vec![("w".into(), w.clone()), ("tied".into(), w.clone())]);
    // grad = c = (3, 4): norm 5, not √50 as if counted twice
    w.mul(&Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap()).unwrap().sum_all().backward().unwrap();
    let held = w.grad().unwrap();
    let norm = clip_grad_norm(&m, 1.0).unwrap();
    assert!((norm - 5.0).abs() < 1e-6);
    // scaled once by 1/(5 + 1e-6): (0.6, 0.8), not (0.12, 0.16)
    let g = w.grad().unwrap().to_vec();
    assert!((g[0] - 0.6).abs() < 1e-6 && (g[1] - 0.8).abs() < 1e-6, "{g:?}");
    assert_eq!(held.to_vec(), [3.0, 4.0], "a gradient already held never changes");
}

#[test]
fn clip_grad_norm_scales_two_parameters_sharing_one_gradient_buffer_independently() {
    let (x, y) = (Tensor::variable(vec![0.0, 0.0], &[2]).unwrap(), Tensor::variable(vec![0.0, 0.0], &[2]).unwrap());
    let m = Params(vec![("x".into(), x.clone()), ("y".into(), y.clone())]);
    // L = sum((x + y)·(3, 4)): both gradients are (3, 4); add's backward hands both the
    // same buffer (asserted). Norm = √(25 + 25) = √50.
    let c = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap();
    x.add(&y).unwrap().mul(&c).unwrap().sum_all().backward().unwrap();
    assert!(x.grad().unwrap().shares_storage(&y.grad().unwrap()), "the case under test: one buffer");
    let norm = clip_grad_norm(&m, 1.0).unwrap();
    assert!((norm - 50f32.sqrt()).abs() < 1e-5);
    let k = 1.0 / 50f32.sqrt();
    for g in [x.grad().unwrap(), y.grad().unwrap()] {
        let g = g.to_vec();
        assert!((g[0] - 3.0 * k).abs() < 1e-6 && (g[1] - 4.0 * k).abs() < 1e-6, "{g:?}");
    }
}

#[test]
fn clip_grad_norm_leaves_small_gradients_alone_and_rejects_bad_limits() {
    let w = Tensor::variable(vec![1.0, 1.0], &[2]).unwrap();
    let m = Params(vec![("w".into(), w.clone())]);
    w.scale(0.1).sum_all().backward().unwrap();
    let norm = clip_grad_norm(&m, 1.0).unwrap();
    assert!((norm - 0.02f32.sqrt()).abs() < 1e-6);
    assert_eq!(w.grad().unwrap().to_vec(), [0.1, 0.1]);
    let e = clip_grad_norm(&m, -1.0).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { arg: "max_norm", .. }));
}

#[test]
fn schedules_follow_their_formulas_and_compose() {
    let s = StepLr::new(1.0, 10, 0.5).unwrap();
    assert_eq!([s.lr_at(0), s.lr_at(9), s.lr_at(10), s.lr_at(25)], [1.0, 1.0, 0.5, 0.25]);
    let c = CosineAnnealing::new(1.0, 0.1, 100).unwrap();
    // min + (base - min)·(1 + cos(π t/T))/2: t = 50 → 0.1 + 0.9·0.5 = 0.55
    assert!((c.lr_at(50) - 0.55).abs() < 1e-6);
    assert_eq!((c.lr_at(0), c.lr_at(100), c.lr_at(1000)), (1.0, 0.1, 0.1));
    let w = LinearWarmup::new(4, 0.25, c).unwrap();
    // warmup: 1.0·(0.25 + 0.75·step/4)
    assert_eq!([w.lr_at(0), w.lr_at(2), w.lr_at(4)], [0.25, 0.625, 1.0]);
    assert!((w.lr_at(54) - 0.55).abs() < 1e-6);
    assert!(LinearWarmup::new(4, 1.5, c).is_err());
}

#[test]
fn a_nan_or_negative_learning_rate_is_refused_by_every_entry_point_that_takes_one() {
    let is_lr_arg = |e: forgia::Error| matches!(e.kind(), ErrorKind::InvalidArgument { arg: "lr", .. });
    let mut opt = Sgd::new(SgdConfig { lr: 0.1, ..SgdConfig::default() }).unwrap();
    for bad in [f32::NAN, -0.1, f32::INFINITY] {
        assert!(is_lr_arg(opt.set_lr(bad).unwrap_err()), "set_lr({bad})");
        assert_eq!(opt.lr(), 0.1, "a refused rate leaves the old one");
        assert!(is_lr_arg(StepLr::new(bad, 10, 0.5).unwrap_err()));
        assert!(is_lr_arg(CosineAnnealing::new(bad, 0.0, 10).unwrap_err()));
        assert!(is_lr_arg(Adam::new(AdamConfig { lr: bad, ..AdamConfig::adam() }).err().unwrap()));
    }
    opt.set_lr(0.05).unwrap();
    assert_eq!(opt.lr(), 0.05);
    // load_state with a negative saved rate
    let m = pair();
    let mut state = opt.state();
    state.iter_mut().filter(|(k, _)| k == "lr").for_each(|(_, t)| *t = Tensor::scalar(-1.0));
    assert!(is_lr_arg(opt.load_state(&m, &state).unwrap_err()));
    assert_eq!(opt.lr(), 0.05);
}

#[test]
fn nan_or_out_of_domain_hyperparameters_are_errors_everywhere() {
    let arg = |r: Result<(), forgia::Error>| matches!(r.unwrap_err().kind(), ErrorKind::InvalidArgument { .. });
    let d = SgdConfig::default();
    assert!(arg(Sgd::new(SgdConfig { momentum: f32::NAN, ..d }).map(drop)));
    assert!(arg(Sgd::new(SgdConfig { weight_decay: -1.0, ..d }).map(drop)));
    assert!(arg(Adam::new(AdamConfig { betas: (f32::NAN, 0.9), ..AdamConfig::adam() }).map(drop)));
    assert!(arg(AdamW::new(AdamConfig { weight_decay: f32::NAN, ..AdamConfig::adamw() }).map(drop)));
    assert!(arg(StepLr::new(0.1, 10, f32::NAN).map(drop)));
    assert!(arg(StepLr::new(0.1, 10, -0.5).map(drop)));
    assert!(arg(CosineAnnealing::new(0.1, f32::NAN, 10).map(drop)));
    assert!(arg(LinearWarmup::new(5, f32::NAN, StepLr::new(0.1, 1, 0.5).unwrap()).map(drop)));
    assert!(arg(clip_grad_norm(&pair(), f32::NAN).map(drop)));
}
