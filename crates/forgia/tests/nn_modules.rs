//! The remaining `nn` modules: Embedding, Conv2d, LayerNorm, RmsNorm, BatchNorm2d, Dropout,
//! MultiHeadAttention and the pre-norm TransformerBlock — literal values, parameter names,
//! train/eval behaviour, gradchecks, bad inputs, and the whole-step JAX goldens of
//! `golden/steps.json` (MLP, CNN, transformer block: loss and every parameter gradient).

mod common;

use common::golden::{assert_close, tensor};
use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::nn::{
    BatchNorm2d, Conv2d, Dropout, Embedding, LayerNorm, Linear, Module, MultiHeadAttention, RmsNorm, TransformerBlock,
};
use forgia::optim::{Adam, AdamConfig, Optimizer};
use forgia::{gradcheck, no_grad, Conv2dOptions, ErrorKind, GradcheckOptions, Indices, Result, Rng, Tensor};
use serde_json::Value;

fn t(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape).unwrap()
}

/// The error kind of a failed constructor (the modules have no `Debug`).
fn err<T>(r: Result<T>) -> ErrorKind {
    r.err().expect("an error").into_kind()
}

fn steps_case(name: &str) -> Value {
    let path = format!("{}/tests/golden/steps.json", env!("CARGO_MANIFEST_DIR"));
    let root: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    root["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone()
}

/// The golden's parameters as `(name, variable)` pairs, in file order.
fn golden_params(case: &Value) -> Vec<(String, Tensor)> {
    let params = case["params"].as_array().unwrap();
    params.iter().map(|p| (p["name"].as_str().unwrap().to_string(), tensor(p).into_variable())).collect()
}

fn param<'a>(params: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
    &params.iter().find(|(n, _)| n == name).unwrap().1
}

fn labels(case: &Value) -> Indices {
    let data: Vec<i64> = case["labels"]["data"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    Indices::from(data)
}

/// Compares the loss and every named gradient with the golden, within 1e-4 relative.
fn check_grads(case: &Value, loss: &Tensor, grad_of: impl Fn(&str) -> Tensor) {
    let expected_loss = case["loss"].as_f64().unwrap() as f32;
    let got = loss.item().unwrap();
    assert!((got - expected_loss).abs() <= 1e-4 * (1.0 + expected_loss.abs()), "loss {got} vs {expected_loss}");
    for g in case["grads"].as_array().unwrap() {
        let name = g["name"].as_str().unwrap();
        assert_close(&grad_of(name), &tensor(g), 1e-4, name);
    }
}

#[test]
fn the_mlp_step_matches_the_jax_golden() {
    let case = steps_case("mlp");
    let p = golden_params(&case);
    let layer = |i: usize| {
        Linear::from_tensors(
            param(&p, &format!("fc{i}.weight")).clone(),
            Some(param(&p, &format!("fc{i}.bias")).clone()),
        )
        .unwrap()
    };
    let (fc1, fc2, fc3) = (layer(1), layer(2), layer(3));
    let x = tensor(&case["input"]);
    let logits = fc3.forward(&fc2.forward(&fc1.forward(&x).unwrap().relu()).unwrap().relu()).unwrap();
    assert_close(&logits, &tensor(&case["output"]), 1e-4, "logits");
    let loss = cross_entropy(&logits, &labels(&case), CrossEntropyOptions::default()).unwrap();
    loss.backward().unwrap();
    check_grads(&case, &loss, |n| param(&p, n).grad().unwrap());
}

#[test]
fn the_cnn_step_matches_the_jax_golden() {
    let case = steps_case("cnn");
    let p = golden_params(&case);
    let conv = |name: &str, pad: usize| {
        let opts = Conv2dOptions { padding: (pad, pad), ..Conv2dOptions::default() };
        let (w, b) = (param(&p, &format!("{name}.weight")), param(&p, &format!("{name}.bias")));
        Conv2d::from_tensors(w.clone(), Some(b.clone()), opts).unwrap()
    };
    let (conv1, conv2) = (conv("conv1", 0), conv("conv2", 1));
    let fc = Linear::from_tensors(param(&p, "fc.weight").clone(), Some(param(&p, "fc.bias").clone())).unwrap();
    let x = tensor(&case["input"]);
    let h = conv1.forward(&x).unwrap().relu().max_pool2d((2, 2), (2, 2), (0, 0)).unwrap();
    let h = conv2.forward(&h).unwrap().relu().flatten(1, -1).unwrap();
    let logits = fc.forward(&h).unwrap();
    assert_close(&logits, &tensor(&case["output"]), 1e-4, "logits");
    let loss = cross_entropy(&logits, &labels(&case), CrossEntropyOptions::default()).unwrap();
    loss.backward().unwrap();
    check_grads(&case, &loss, |n| param(&p, n).grad().unwrap());
}

/// A block of the golden's shape with the golden's parameter values copied in by name.
fn golden_block(case: &Value) -> TransformerBlock {
    let cfg = &case["config"];
    let (d, heads) = (cfg["d_model"].as_u64().unwrap() as usize, cfg["heads"].as_u64().unwrap() as usize);
    let mut block = TransformerBlock::new(d, heads, cfg["causal"].as_bool().unwrap(), &mut Rng::new(0)).unwrap();
    let p = golden_params(case);
    let names: Vec<String> = block.named_parameters().into_iter().map(|(n, _)| n).collect();
    let golden_names: Vec<String> = p.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(names, golden_names, "parameter names and order");
    let _guard = no_grad();
    block.visit_params_mut(&mut |name, t| {
        param(&p, name).with_data(|src| t.with_data_mut(|d| d.copy_from_slice(src)).unwrap())
    });
    block
}

#[test]
fn the_transformer_block_step_matches_the_jax_golden() {
    let case = steps_case("transformer_block");
    let block = golden_block(&case);
    let x = tensor(&case["input"]);
    let out = block.forward(&x).unwrap();
    assert_close(&out, &tensor(&case["output"]), 1e-4, "block output");
    let loss = out.mul(&out).unwrap().mean_all().unwrap();
    loss.backward().unwrap();
    let grads = block.named_parameters();
    check_grads(&case, &loss, |n| param(&grads, n).grad().unwrap());
}

#[test]
fn a_checkpointed_transformer_block_gives_bitwise_identical_gradients() {
    let case = steps_case("transformer_block");
    let (plain, saved) = (golden_block(&case), golden_block(&case));
    let x = tensor(&case["input"]);
    let (xa, xb) = (x.clone().into_variable(), x.into_variable());
    let ya = plain.forward(&xa).unwrap();
    let yb = saved.forward_checkpointed(&xb).unwrap();
    assert_eq!(ya.to_vec(), yb.to_vec());
    ya.mul(&ya).unwrap().mean_all().unwrap().backward().unwrap();
    yb.mul(&yb).unwrap().mean_all().unwrap().backward().unwrap();
    assert_eq!(xa.grad().unwrap().to_vec(), xb.grad().unwrap().to_vec());
    for ((n, a), (_, b)) in plain.named_parameters().iter().zip(saved.named_parameters()) {
        assert_eq!(a.grad().unwrap().to_vec(), b.grad().unwrap().to_vec(), "{n}");
    }
}

#[test]
fn embedding_picks_rows_and_sums_gradients_of_repeated_ids() {
    let emb = Embedding::from_tensor(t(&[0.0, 1.0, 10.0, 11.0, 20.0, 21.0], &[3, 2])).unwrap();
    let ids = Indices::new(vec![2, 0, 2, 2], &[2, 2]).unwrap();
    let y = emb.forward(&ids).unwrap();
    assert_eq!(y.shape(), [2, 2, 2]);
    assert_eq!(y.to_vec(), [20.0, 21.0, 0.0, 1.0, 20.0, 21.0, 20.0, 21.0]);
    y.sum_all().backward().unwrap();
    // L = Σ y: row r's gradient is (count of r in ids) in every column.
    assert_eq!(emb.weight.grad().unwrap().to_vec(), [1.0, 1.0, 0.0, 0.0, 3.0, 3.0]);
    assert_eq!(emb.named_parameters()[0].0, "weight");
    let std = Embedding::new(100, 50, &mut Rng::new(1)).unwrap().weight.to_vec();
    let var = std.iter().map(|v| v * v).sum::<f32>() / std.len() as f32;
    assert!((var - 1.0).abs() < 0.1, "N(0, 1) init, variance {var}");
}

#[test]
fn embedding_rejects_bad_ids_and_sizes() {
    let emb = Embedding::new(4, 2, &mut Rng::new(0)).unwrap();
    let e = emb.forward(&Indices::from(vec![4i64])).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::IndexOutOfRange { .. }));
    let e = emb.forward(&Indices::from(vec![-1i64])).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::IndexOutOfRange { .. }));
    assert!(matches!(&err(Embedding::new(0, 2, &mut Rng::new(0))), ErrorKind::InvalidArgument { .. }));
    assert!(matches!(&err(Embedding::from_tensor(Tensor::zeros(&[3]).unwrap())), ErrorKind::RankMismatch { .. }));
}

#[test]
fn conv2d_has_pytorch_default_init_and_names() {
    let conv = Conv2d::new(2, 3, (3, 3), Conv2dOptions::default(), true, &mut Rng::new(3)).unwrap();
    let bound = 1.0 / (2.0f32 * 9.0).sqrt();
    assert!(conv.weight.to_vec().iter().chain(&conv.bias.as_ref().unwrap().to_vec()).all(|v| v.abs() <= bound));
    let names: Vec<String> = conv.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias"]);
    assert_eq!(conv.num_parameters(), 3 * 2 * 9 + 3);
    assert_eq!(conv.forward(&Tensor::zeros(&[1, 2, 5, 5]).unwrap()).unwrap().shape(), [1, 3, 3, 3]);
}

#[test]
fn conv2d_rejects_bad_sizes_and_inputs() {
    let kind = |r: Result<Conv2d>| r.err().map(|e| e.into_kind());
    let opts = Conv2dOptions { groups: 2, ..Conv2dOptions::default() };
    assert!(matches!(
        kind(Conv2d::new(3, 4, (3, 3), opts, true, &mut Rng::new(0))),
        Some(ErrorKind::InvalidArgument { .. })
    ));
    assert!(matches!(
        kind(Conv2d::new(0, 4, (3, 3), Conv2dOptions::default(), true, &mut Rng::new(0))),
        Some(ErrorKind::InvalidArgument { .. })
    ));
    assert!(matches!(
        kind(Conv2d::from_tensors(Tensor::zeros(&[2, 2]).unwrap(), None, Conv2dOptions::default())),
        Some(ErrorKind::RankMismatch { .. })
    ));
    let conv = Conv2d::new(2, 3, (3, 3), Conv2dOptions::default(), false, &mut Rng::new(0)).unwrap();
    assert!(conv.forward(&Tensor::zeros(&[1, 5, 5, 5]).unwrap()).is_err());
}

#[test]
fn layer_norm_and_rms_norm_compute_their_formulas() {
    let x = t(&[1.0, 2.0, 3.0, 4.0, -1.0, 1.0], &[2, 3]);
    let ln = LayerNorm::new(&[3], 0.0).unwrap();
    let y = ln.forward(&x).unwrap().to_vec();
    // Row 1: mean 2, biased var 2/3 → (-1, 0, 1)·√1.5.
    let s = 1.5f32.sqrt();
    for (a, b) in y[..3].iter().zip([-s, 0.0, s]) {
        assert!((a - b).abs() < 1e-5, "{y:?}");
    }
    let names: Vec<String> = ln.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias"]);
    let rms = RmsNorm::new(3, 0.0).unwrap();
    // Row 1: rms = √(14/3).
    let y = rms.forward(&x).unwrap().to_vec();
    let r = (14.0f32 / 3.0).sqrt();
    for (a, b) in y[..3].iter().zip([1.0 / r, 2.0 / r, 3.0 / r]) {
        assert!((a - b).abs() < 1e-5, "{y:?}");
    }
    assert!(matches!(&err(LayerNorm::new(&[], 1e-5)), ErrorKind::InvalidArgument { .. }));
    assert!(matches!(&err(RmsNorm::new(3, -1.0)), ErrorKind::InvalidArgument { .. }));
    assert!(matches!(
        ln.forward(&Tensor::zeros(&[2, 4]).unwrap()).unwrap_err().kind(),
        ErrorKind::ShapeMismatch { .. }
    ));
}

#[test]
fn norm_layers_pass_gradcheck() {
    let mut rng = Rng::new(9);
    let x = Tensor::randn(&[3, 4], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let g = Tensor::randn(&[4], 1.0, 0.2, &mut rng).unwrap().into_variable();
    let b = Tensor::randn(&[4], 0.0, 0.2, &mut rng).unwrap().into_variable();
    let f = |xs: &[Tensor]| {
        let ln = LayerNorm { weight: xs[1].clone(), bias: xs[2].clone(), eps: 1e-5 };
        ln.forward(&xs[0])
    };
    let r = gradcheck(f, &[x.clone(), g.clone(), b], GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);
    let f = |xs: &[Tensor]| RmsNorm { weight: xs[1].clone(), eps: 1e-5 }.forward(&xs[0]);
    let r = gradcheck(f, &[x, g], GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);
}

#[test]
fn batch_norm_updates_running_stats_in_training_and_uses_them_in_eval() {
    let mut bn = BatchNorm2d::new(2, 1e-5).unwrap();
    // Channel 0 holds 1..4, channel 1 holds 10 everywhere; N = 1, 2x2 spatial.
    let x = t(&[1.0, 2.0, 3.0, 4.0, 10.0, 10.0, 10.0, 10.0], &[1, 2, 2, 2]);
    let y = bn.forward(&x).unwrap().to_vec();
    assert!(y[4..].iter().all(|v| v.abs() < 1e-3), "a constant channel normalizes to 0: {y:?}");
    // running = 0.9·init + 0.1·batch; the variance update is unbiased: var(1..4) = 5/3.
    let mean = bn.running_mean().to_vec();
    let var = bn.running_var().to_vec();
    assert!((mean[0] - 0.25).abs() < 1e-6 && (mean[1] - 1.0).abs() < 1e-6, "{mean:?}");
    assert!((var[0] - (0.9 + 0.1 * 5.0 / 3.0)).abs() < 1e-5 && (var[1] - 0.9).abs() < 1e-5, "{var:?}");
    bn.set_training(false);
    assert!(!bn.is_training());
    let y = bn.forward(&x).unwrap().to_vec();
    // eval: (x - running_mean) / sqrt(running_var + eps)
    let want = (1.0 - 0.25) / (var[0] + 1e-5f32).sqrt();
    assert!((y[0] - want).abs() < 1e-5, "{y:?}");
    assert_eq!(bn.running_mean().to_vec(), mean, "eval leaves the statistics alone");
    let names: Vec<String> = bn.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias", "running_mean", "running_var"]);
    assert!(matches!(bn.forward(&Tensor::zeros(&[2, 2]).unwrap()).unwrap_err().kind(), ErrorKind::RankMismatch { .. }));
}

#[test]
fn batch_norm_running_stats_travel_with_a_checkpoint_and_are_not_optimized() {
    let dir = std::env::temp_dir().join(format!("forgia-bn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bn.safetensors");
    let mut bn = BatchNorm2d::new(3, 1e-5).unwrap();
    let x = Tensor::randn(&[4, 3, 2, 2], 2.0, 1.0, &mut Rng::new(4)).unwrap();
    let mut opt = Adam::new(AdamConfig::adam()).unwrap();
    bn.forward(&x).unwrap().mul(&x).unwrap().sum_all().backward().unwrap();
    opt.step(&mut bn).unwrap();
    forgia::io::save_checkpoint(&path, &bn, &opt).unwrap();
    let mut fresh = BatchNorm2d::new(3, 1e-5).unwrap();
    let mut opt2 = Adam::new(AdamConfig::adam()).unwrap();
    forgia::io::load_checkpoint(&mut fresh, &mut opt2, &path).unwrap();
    assert_eq!(fresh.running_mean().to_vec(), bn.running_mean().to_vec());
    assert_eq!(fresh.running_var().to_vec(), bn.running_var().to_vec());
    assert_eq!(fresh.weight.to_vec(), bn.weight.to_vec());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dropout_draws_a_fresh_reproducible_mask_per_call() {
    let x = Tensor::ones(&[4096]).unwrap();
    let (a, b) = (Dropout::new(0.25, 42).unwrap(), Dropout::new(0.25, 42).unwrap());
    let a1 = a.forward(&x).unwrap().to_vec();
    let a2 = a.forward(&x).unwrap().to_vec();
    assert_ne!(a1, a2, "each call draws a new mask");
    assert_eq!(b.forward(&x).unwrap().to_vec(), a1, "same seed, same sequence");
    assert_eq!(b.forward(&x).unwrap().to_vec(), a2);
    assert_eq!(a.calls(), 2);
    let kept = a1.iter().filter(|&&v| v != 0.0).count() as f32 / 4096.0;
    assert!((kept - 0.75).abs() < 0.03, "keep rate {kept}");
    assert!(a1.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    // Call n uses seed_of_call(n): the explicit form reproduces it.
    assert_eq!(a.forward_with_seed(&x, a.seed_of_call(1)).unwrap().to_vec(), a2);
    assert_ne!(Dropout::new(0.25, 43).unwrap().forward(&x).unwrap().to_vec(), a1);
}

#[test]
fn dropout_is_the_identity_in_eval_and_rejects_bad_p() {
    let mut d = Dropout::new(0.5, 1).unwrap();
    d.set_training(false);
    let x = Tensor::randn(&[10], 0.0, 1.0, &mut Rng::new(0)).unwrap();
    assert_eq!(d.forward(&x).unwrap().to_vec(), x.to_vec());
    assert_eq!(d.calls(), 0, "eval calls draw no mask");
    for p in [-0.1, 1.5, f32::NAN] {
        assert!(matches!(&err(Dropout::new(p, 0)), ErrorKind::InvalidArgument { .. }));
    }
}

#[test]
fn dropout_gradient_is_the_mask_scaled() {
    let d = Dropout::new(0.5, 3).unwrap();
    let x = Tensor::ones(&[64]).unwrap().into_variable();
    let y = d.forward(&x).unwrap();
    y.sum_all().backward().unwrap();
    // y = x·m/(1-p), so dL/dx = m/(1-p) = y when x = 1.
    assert_eq!(x.grad().unwrap().to_vec(), y.to_vec());
}

#[test]
fn multi_head_attention_names_shapes_and_gradcheck() {
    let attn = MultiHeadAttention::new(4, 2, false, &mut Rng::new(2)).unwrap();
    let names: Vec<String> = attn.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["q.weight", "q.bias", "k.weight", "k.bias", "v.weight", "v.bias", "o.weight", "o.bias"]);
    let x = Tensor::randn(&[2, 3, 4], 0.0, 1.0, &mut Rng::new(3)).unwrap().into_variable();
    let mut inputs = vec![x];
    inputs.extend(attn.named_parameters().into_iter().map(|(_, p)| p));
    let f = |xs: &[Tensor]| {
        let lin = |i: usize| Linear::from_tensors(xs[i].clone(), Some(xs[i + 1].clone())).unwrap();
        let m = MultiHeadAttention { q: lin(1), k: lin(3), v: lin(5), o: lin(7), heads: 2, causal: true };
        m.forward(&xs[0])
    };
    let r = gradcheck(f, &inputs, GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);
}

#[test]
fn causal_attention_does_not_look_ahead() {
    let attn = MultiHeadAttention::new(8, 2, true, &mut Rng::new(5)).unwrap();
    let x = Tensor::randn(&[1, 4, 8], 0.0, 1.0, &mut Rng::new(6)).unwrap().into_variable();
    let y = attn.forward(&x).unwrap();
    // d y[:, 0] / d x: only position 0 may receive a gradient.
    y.narrow(1, 0, 1).unwrap().sum_all().backward().unwrap();
    let g = x.grad().unwrap().to_vec();
    assert!(g[..8].iter().any(|v| *v != 0.0));
    assert!(g[8..].iter().all(|v| *v == 0.0), "{g:?}");
}

#[test]
fn attention_and_blocks_reject_bad_widths() {
    let kind = |e: forgia::Error| e.into_kind();
    assert!(matches!(
        kind(MultiHeadAttention::new(6, 4, false, &mut Rng::new(0)).err().unwrap()),
        ErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        kind(TransformerBlock::new(8, 0, false, &mut Rng::new(0)).err().unwrap()),
        ErrorKind::InvalidArgument { .. }
    ));
    let attn = MultiHeadAttention::new(8, 2, false, &mut Rng::new(0)).unwrap();
    assert!(matches!(
        kind(attn.forward(&Tensor::zeros(&[2, 8]).unwrap()).unwrap_err()),
        ErrorKind::RankMismatch { .. }
    ));
    assert!(matches!(
        kind(attn.forward(&Tensor::zeros(&[1, 2, 6]).unwrap()).unwrap_err()),
        ErrorKind::ShapeMismatch { .. }
    ));
    let block = TransformerBlock::new(8, 2, true, &mut Rng::new(0)).unwrap();
    assert!(block.forward(&Tensor::zeros(&[1, 3, 4]).unwrap()).is_err());
}

#[test]
fn transformer_block_trains_under_adam() {
    let mut block = TransformerBlock::new(8, 2, true, &mut Rng::new(1)).unwrap();
    assert_eq!(block.num_parameters(), 2 * 8 + 4 * (64 + 8) + 2 * 8 + (8 * 32 + 32) + (32 * 8 + 8));
    let x = Tensor::randn(&[2, 4, 8], 0.0, 1.0, &mut Rng::new(2)).unwrap();
    let target = Tensor::randn(&[2, 4, 8], 0.0, 1.0, &mut Rng::new(3)).unwrap();
    let mut opt = Adam::new(AdamConfig { lr: 1e-2, ..AdamConfig::adam() }).unwrap();
    let loss = |b: &TransformerBlock| -> Tensor {
        let d = b.forward(&x).unwrap().sub(&target).unwrap();
        d.mul(&d).unwrap().mean_all().unwrap()
    };
    let first = loss(&block).item().unwrap();
    for _ in 0..30 {
        opt.zero_grad(&block);
        loss(&block).backward().unwrap();
        opt.step(&mut block).unwrap();
    }
    let last = loss(&block).item().unwrap();
    assert!(last < 0.7 * first, "{first} -> {last}");
}
