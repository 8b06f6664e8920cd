//! The pretrained architectures against `transformers` (goldens from
//! tools/reference/generate_models.py): for a small random-initialized config of each, loaded
//! from the safetensors file the script wrote, the logits (≤ 1e-5 relative), the loss, the
//! gradients of several named parameters and the loss curve of 5 AdamW steps (≤ 1e-4).

use std::path::PathBuf;

use forgia::io::{self, HfConfig, HfNames};
use forgia::models::bert::{BertConfig, BertForSequenceClassification};
use forgia::models::lora;
use forgia::nn::Module;
use forgia::optim::{AdamConfig, AdamW, Optimizer};
use forgia::{loss, Indices, Rng, Tensor};
use serde_json::Value;

fn dir(arch: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/models").join(arch)
}

fn golden(arch: &str) -> Value {
    let path = dir(arch).with_extension("json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn ids(v: &Value, g: &Value) -> Indices {
    let (b, s) = (g["batch"].as_u64().unwrap() as usize, g["seq"].as_u64().unwrap() as usize);
    Indices::new(v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect(), &[b, s]).unwrap()
}

/// `|a - e| <= tol · max|e|` element by element (relative to the tensor's scale).
fn assert_close(what: &str, actual: &[f32], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    let scale = expected.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-12);
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let err = (*a as f64 - e).abs();
        assert!(err <= tol * scale, "{what}[{i}]: {a} vs {e} (error {err:.3e}, scale {scale:.3e})");
    }
}

/// Checks logits, loss and named gradients, then runs 5 AdamW steps and checks the curve.
fn check<M: Module>(arch: &str, model: &mut M, lr: f32, forward: impl Fn(&M) -> (Tensor, Tensor)) {
    let g = golden(arch);
    let (logits, l) = forward(model);
    assert_eq!(
        logits.shape().iter().map(|&d| d as u64).collect::<Vec<_>>(),
        floats(&g["logits_shape"]).iter().map(|&d| d as u64).collect::<Vec<_>>()
    );
    assert_close(&format!("{arch} logits"), &logits.to_vec(), &floats(&g["logits"]), 1e-5);
    assert_close(&format!("{arch} loss"), &l.to_vec(), &[g["loss"].as_f64().unwrap()], 1e-5);
    l.backward().unwrap();
    let params = model.named_parameters();
    for (name, expected) in g["grads"].as_object().unwrap() {
        let p = &params.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no parameter {name}")).1;
        let grad = p.grad().unwrap_or_else(|| panic!("{name} has no gradient"));
        assert_close(&format!("{arch} grad {name}"), &grad.to_vec(), &floats(expected), 1e-4);
    }
    let mut opt = AdamW::new(AdamConfig { lr, ..AdamConfig::adamw() }).unwrap();
    let mut curve = Vec::new();
    for _ in 0..5 {
        opt.zero_grad(model);
        let (_, l) = forward(model);
        curve.push(l.to_vec()[0]);
        l.backward().unwrap();
        opt.step(model).unwrap();
    }
    for (i, (a, e)) in curve.iter().zip(floats(&g["curve"])).enumerate() {
        assert!((*a as f64 - e).abs() <= 1e-4 * e.abs(), "{arch} curve step {i}: {a} vs {e}");
    }
}

fn bert_model() -> BertForSequenceClassification {
    let d = dir("bert");
    let config = BertConfig::from_hf(&HfConfig::from_file(d.join("config.json")).unwrap()).unwrap();
    let mut model = BertForSequenceClassification::new(config, 3, &mut Rng::new(0)).unwrap();
    io::load_hf(&mut model, d.join("model.safetensors"), &HfNames::new()).unwrap();
    model
}

#[test]
fn bert_matches_transformers_logits_gradients_and_adamw_curve() {
    let g = golden("bert");
    let mut model = bert_model();
    let (input, types, mask) = (ids(&g["input_ids"], &g), ids(&g["token_type_ids"], &g), ids(&g["attention_mask"], &g));
    let labels =
        Indices::new(g["labels"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect(), &[3]).unwrap();
    check("bert", &mut model, 1e-3, |m| {
        let logits = m.forward(&input, Some(&types), Some(&mask)).unwrap();
        let l = loss::cross_entropy(&logits, &labels, Default::default()).unwrap();
        (logits, l)
    });
}

#[test]
fn bert_lora_matches_a_frozen_base_with_adapters() {
    let g = golden("lora");
    let mut model = bert_model();
    let rank = g["rank"].as_u64().unwrap() as usize;
    let alpha = g["alpha"].as_f64().unwrap() as f32;
    assert_eq!(lora::add_lora(&mut model, &["query", "value"], rank, alpha, &mut Rng::new(1)).unwrap(), 4);
    lora::freeze_base(&mut model);
    lora::load_adapters(&mut model, dir("lora").join("adapter_model.safetensors")).unwrap();
    let (input, mask) = (ids(&g["input_ids"], &g), ids(&g["attention_mask"], &g));
    let labels =
        Indices::new(g["labels"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect(), &[3]).unwrap();
    let base_before = model.bert.layers[0].key.weight.to_vec();
    check("lora", &mut model, 2e-2, |m| {
        let logits = m.forward(&input, None, Some(&mask)).unwrap();
        let l = loss::cross_entropy(&logits, &labels, Default::default()).unwrap();
        (logits, l)
    });
    assert_eq!(model.bert.layers[0].key.weight.to_vec(), base_before, "the frozen base never moves");
    assert!(model.bert.layers[0].query.weight.grad().is_none(), "no gradient for a frozen weight");
}

/// Loads `arch`'s saved weights into `model` and checks it as a causal language model: the
/// logits of `forward` on the golden ids, and `causal_lm_loss` with those ids as labels.
fn check_causal_lm<M: Module>(arch: &str, mut model: M, forward: impl Fn(&M, &Indices) -> forgia::Result<Tensor>) {
    use forgia::models::causal_lm_loss;
    io::load_hf(&mut model, dir(arch).join("model.safetensors"), &HfNames::new()).unwrap();
    let g = golden(arch);
    let input = ids(&g["input_ids"], &g);
    check(arch, &mut model, 1e-3, |m| {
        let logits = forward(m, &input).unwrap();
        let l = causal_lm_loss(&logits, &input).unwrap();
        (logits, l)
    });
}

#[test]
fn gpt2_matches_transformers_with_tied_embeddings_and_conv1d_weights() {
    use forgia::models::gpt2::{Gpt2Config, Gpt2LMHeadModel};
    let config = Gpt2Config::from_hf(&HfConfig::from_file(dir("gpt2").join("config.json")).unwrap()).unwrap();
    let model = Gpt2LMHeadModel::new(config, &mut Rng::new(0)).unwrap();
    check_causal_lm("gpt2", model, |m, input| m.forward(input, None));
}

#[test]
fn llama_matches_transformers_with_rope_gqa_and_swiglu() {
    use forgia::models::llama::{LlamaConfig, LlamaForCausalLM};
    let config = LlamaConfig::from_hf(&HfConfig::from_file(dir("llama").join("config.json")).unwrap()).unwrap();
    assert_eq!((config.num_attention_heads, config.num_key_value_heads), (4, 2));
    let model = LlamaForCausalLM::new(config, &mut Rng::new(0)).unwrap();
    check_causal_lm("llama", model, |m, input| m.forward(input, None));
}

#[test]
fn resnet_matches_transformers_in_eval_and_training_mode() {
    use forgia::models::resnet::{ResNetConfig, ResNetForImageClassification};
    let g = golden("resnet");
    let d = dir("resnet");
    let config = ResNetConfig::from_hf(&HfConfig::from_file(d.join("config.json")).unwrap()).unwrap();
    let mut model = ResNetForImageClassification::new(config, 5, &mut Rng::new(0)).unwrap();
    let report = io::load_hf(&mut model, d.join("model.safetensors"), &HfNames::new()).unwrap();
    assert_eq!(report.skipped.len(), 6, "one num_batches_tracked per BatchNorm: {:?}", report.skipped);
    assert!(report.skipped.iter().all(|n| n.ends_with("num_batches_tracked")));
    let shape: Vec<usize> = floats(&g["pixels_shape"]).iter().map(|&v| v as usize).collect();
    let pixels = Tensor::from_vec(floats(&g["pixels"]).iter().map(|&v| v as f32).collect(), &shape).unwrap();
    let labels =
        Indices::new(g["labels"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect(), &[4]).unwrap();
    model.set_training(false);
    let eval = model.forward(&pixels).unwrap();
    assert_close("resnet eval logits", &eval.to_vec(), &floats(&g["eval_logits"]), 1e-5);
    model.set_training(true);
    check("resnet", &mut model, 1e-3, |m| {
        let logits = m.forward(&pixels).unwrap();
        let l = loss::cross_entropy(&logits, &labels, Default::default()).unwrap();
        (logits, l)
    });
}

/// Writing a loaded model back gives `transformers`' file: the same names, shapes and values
/// (integer buffers such as `num_batches_tracked` aside, which PyTorch restores by default).
fn assert_round_trip(arch: &str, model: &dyn Module) {
    let out = std::env::temp_dir().join(format!("forgia-models-rt-{arch}-{}.safetensors", std::process::id()));
    io::save_hf(&out, model, &HfNames::new()).unwrap();
    let floats_of = |p: &std::path::Path| -> Vec<(String, Vec<usize>, Vec<f32>)> {
        io::load_entries(p)
            .unwrap()
            .into_iter()
            .filter_map(|(n, e)| match e {
                io::Entry::Float(t) => Some((n, t.shape().to_vec(), t.to_vec())),
                io::Entry::Int(_) => None,
            })
            .collect()
    };
    assert_eq!(floats_of(&out), floats_of(&dir(arch).join("model.safetensors")), "{arch}");
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn every_architecture_writes_back_the_file_it_loaded() {
    use forgia::models::gpt2::{Gpt2Config, Gpt2LMHeadModel};
    use forgia::models::llama::{LlamaConfig, LlamaForCausalLM};
    use forgia::models::resnet::{ResNetConfig, ResNetForImageClassification};
    let cfg = |arch: &str| HfConfig::from_file(dir(arch).join("config.json")).unwrap();
    let load = |arch: &str, m: &mut dyn Module| {
        io::load_hf(m, dir(arch).join("model.safetensors"), &HfNames::new()).unwrap();
    };
    assert_round_trip("bert", &bert_model());
    let mut gpt2 = Gpt2LMHeadModel::new(Gpt2Config::from_hf(&cfg("gpt2")).unwrap(), &mut Rng::new(0)).unwrap();
    load("gpt2", &mut gpt2);
    assert_round_trip("gpt2", &gpt2);
    let mut llama = LlamaForCausalLM::new(LlamaConfig::from_hf(&cfg("llama")).unwrap(), &mut Rng::new(0)).unwrap();
    load("llama", &mut llama);
    assert_round_trip("llama", &llama);
    let mut resnet =
        ResNetForImageClassification::new(ResNetConfig::from_hf(&cfg("resnet")).unwrap(), 5, &mut Rng::new(0)).unwrap();
    load("resnet", &mut resnet);
    assert_round_trip("resnet", &resnet);
}
