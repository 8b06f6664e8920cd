//! Parameter identity and tied weights (issue 13): a held clone of a parameter handle sees an
//! optimizer step; a tiny language model whose token embedding is also its output projection
//! (as GPT-2 ties `wte` and `lm_head`) matches PyTorch for 5 AdamW steps
//! (`golden/tied.json`, from `tools/reference/generate_tied.py`); a checkpoint of it stores the
//! tied matrix once and loads back with the tie intact.
//!
//! The model's `Module` impl is the naive one: it visits the tied matrix twice, once through
//! the embedding (`wte.weight`) and once as the head (`lm_head.weight`). The library is expected
//! to recognise the second visit as the same parameter: list it once, step it once, save it
//! once, as PyTorch does.
//!
//! The golden tests collect every failed check before panicking (see [`Findings`]), so one run
//! says everything that is wrong rather than only the first thing.

use std::collections::HashMap;
use std::path::PathBuf;

use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::nn::{visit_child, visit_child_mut, Embedding, LayerNorm, Linear, Module};
use forgia::optim::{AdamConfig, AdamW, Optimizer, Sgd, SgdConfig};
use forgia::{io, Indices, Rng, Tensor};
use serde_json::Value;

/// Tolerance against the float64 PyTorch run: relative for losses, mixed
/// (`|a - e| <= TOL · (1 + |e|)`) elementwise for gradients and parameters. The generator
/// checks that a float32 PyTorch run stays within a tenth of this.
const TOL: f64 = 1e-4;

/// The tied LM of `generate_tied.py`:
/// `logits = layer_norm(tanh(fc(wte[tokens]))) · wteᵀ`, mean cross-entropy.
struct TinyLm {
    wte: Embedding,
    fc: Linear,
    ln: LayerNorm,
    /// The output projection `[V, D]`: a clone of `wte.weight`'s handle, i.e. the same
    /// parameter, used as `h · lm_headᵀ`.
    lm_head: Tensor,
}

impl TinyLm {
    /// The model with the given parameter values (by PyTorch name), the head tied to `wte`.
    fn new(params: &HashMap<String, Tensor>, ln_eps: f32) -> TinyLm {
        let var = |name: &str| params[name].detach().into_variable();
        let wte = Embedding::from_tensor(var("wte.weight")).unwrap();
        let fc = Linear::from_tensors(var("fc.weight"), Some(var("fc.bias"))).unwrap();
        let mut ln = LayerNorm::new(params["ln.weight"].shape(), ln_eps).unwrap();
        ln.weight = var("ln.weight");
        ln.bias = var("ln.bias");
        let lm_head = wte.weight.clone();
        TinyLm { wte, fc, ln, lm_head }
    }

    /// The mean cross-entropy of next-token logits over all `B·T` positions.
    fn loss(&self, tokens: &Indices, targets: &Indices) -> Tensor {
        let x = self.wte.forward(tokens).unwrap();
        let h = self.ln.forward(&self.fc.forward(&x).unwrap().tanh()).unwrap();
        let logits = h.linear(&self.lm_head, None).unwrap();
        let v = self.lm_head.shape()[0];
        let logits = logits.reshape(&[targets.len(), v]).unwrap();
        cross_entropy(&logits, targets, CrossEntropyOptions::default()).unwrap()
    }
}

impl Module for TinyLm {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("wte", &self.wte, f);
        visit_child("fc", &self.fc, f);
        visit_child("ln", &self.ln, f);
        f("lm_head.weight", &self.lm_head);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("wte", &mut self.wte, f);
        visit_child_mut("fc", &mut self.fc, f);
        visit_child_mut("ln", &mut self.ln, f);
        f("lm_head.weight", &mut self.lm_head);
    }
}

/// A module of one named handle, to update a single parameter through an optimizer.
struct Only<'a>(&'a str, &'a mut Tensor);

impl Module for Only<'_> {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f(self.0, self.1);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f(self.0, self.1);
    }
}

/// Failed checks, collected so that a test reports all of them at once.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    /// Checks `actual` against `expected` elementwise within the mixed tolerance [`TOL`].
    fn close(&mut self, actual: &[f32], expected: &[f64], what: &str) {
        self.check(actual.len() == expected.len(), || {
            format!("{what}: {} values, expected {}", actual.len(), expected.len())
        });
        let worst = worst(actual, expected);
        if let Some((_, dev)) = worst {
            eprintln!("{what}: max mixed deviation {dev:.2e}");
        }
        if let Some((i, dev)) = worst.filter(|&(_, d)| d > TOL) {
            self.0.push(format!(
                "{what}: element {i} is {} where PyTorch has {} (mixed deviation {dev:.3e} > {TOL:e})",
                actual[i], expected[i]
            ));
        }
    }

    fn finish(self, test: &str) {
        assert!(self.0.is_empty(), "{test}: {} failed checks:\n  {}", self.0.len(), self.0.join("\n  "));
    }
}

/// The element with the largest `|a - e| / (1 + |e|)`, and that deviation.
fn worst(actual: &[f32], expected: &[f64]) -> Option<(usize, f64)> {
    actual
        .iter()
        .zip(expected)
        .map(|(&a, &e)| (a as f64 - e).abs() / (1.0 + e.abs()))
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// `golden/tied.json`, parsed.
struct Golden {
    raw: Value,
    tokens: Indices,
    targets: Indices,
    init: HashMap<String, Tensor>,
    ln_eps: f32,
}

fn golden() -> Golden {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/tied.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let raw: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let ints = |v: &Value| -> Indices {
        let data = v["data"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
        Indices::new(data, &[v["data"].as_array().unwrap().len()]).unwrap()
    };
    let init = named(&raw["init"]).into_iter().map(|(n, shape, data)| {
        let data = data.iter().map(|&x| x as f32).collect();
        (n, Tensor::from_vec(data, &shape).unwrap())
    });
    Golden {
        tokens: ints(&raw["tokens"]).reshape(&shape(&raw["tokens"])).unwrap(),
        targets: ints(&raw["targets"]),
        init: init.collect(),
        ln_eps: raw["config"]["layer_norm_eps"].as_f64().unwrap() as f32,
        raw,
    }
}

impl Golden {
    fn model(&self) -> TinyLm {
        TinyLm::new(&self.init, self.ln_eps)
    }

    fn optimizer(&self) -> AdamW {
        let c = &self.raw["config"];
        let f = |k: &str| c[k].as_f64().unwrap() as f32;
        let betas = (c["betas"][0].as_f64().unwrap() as f32, c["betas"][1].as_f64().unwrap() as f32);
        AdamW::new(AdamConfig { lr: f("lr"), betas, eps: f("eps"), weight_decay: f("weight_decay") }).unwrap()
    }

    fn losses(&self, key: &str) -> Vec<f64> {
        numbers(&self.raw[key])
    }

    fn names(&self) -> Vec<String> {
        self.raw["named_parameters"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
    }
}

fn shape(v: &Value) -> Vec<usize> {
    v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect()
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

/// `[{"name","shape","data"}]` as (name, shape, data).
fn named(v: &Value) -> Vec<(String, Vec<usize>, Vec<f64>)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), shape(t), numbers(&t["data"])))
        .collect()
}

/// One training step: zero the gradients, backward the loss, step; returns the loss.
fn train_step(model: &mut TinyLm, opt: &mut dyn Optimizer, g: &Golden) -> f32 {
    opt.zero_grad(model);
    let loss = model.loss(&g.tokens, &g.targets);
    loss.backward().unwrap();
    opt.step(model).unwrap();
    loss.item().unwrap()
}

/// Whether the head and the embedding are one parameter: an SGD step through a module that
/// holds only the head's handle must show in the embedding's weight (needs a gradient). On
/// failure, says how they differ.
fn tie_probe(model: &mut TinyLm) -> Result<(), String> {
    let before = model.wte.weight.to_vec();
    let mut sgd = Sgd::new(SgdConfig { lr: 0.5, ..SgdConfig::default() }).unwrap();
    sgd.step(&mut Only("lm_head.weight", &mut model.lm_head)).unwrap();
    let (head, emb) = (model.lm_head.to_vec(), model.wte.weight.to_vec());
    if head == before {
        return Err("the probe's SGD step did not change the head".into());
    }
    if emb != head {
        let diff = head.iter().zip(&emb).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        let unchanged = emb == before;
        return Err(format!(
            "an SGD step on the head's handle is not seen by wte.weight (wte.weight {}; max |head - wte| = {diff:.3e})",
            if unchanged { "kept its old values" } else { "changed differently" }
        ));
    }
    Ok(())
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Records a finding unless the head's view of E still equals `wte.weight` element for element
/// (`when` says at which point of the run).
fn check_tie_holds(found: &mut Findings, model: &TinyLm, when: &str) {
    let (emb, head) = (model.wte.weight.to_vec(), model.lm_head.to_vec());
    found.check(emb == head, || {
        format!("{when}: the head's copy of E differs from wte.weight by up to {:.3e}", max_abs_diff(&emb, &head))
    });
}

#[test]
fn a_held_parameter_handle_sees_an_optimizer_step() {
    let x = Tensor::from_vec((0..12).map(|i| (i as f32 * 0.37).sin()).collect(), &[4, 3]).unwrap();
    let optimizers: Vec<(&str, Box<dyn Optimizer>)> = vec![
        ("Sgd", Box::new(Sgd::new(SgdConfig { lr: 0.1, ..SgdConfig::default() }).unwrap())),
        ("AdamW", Box::new(AdamW::new(AdamConfig { lr: 0.1, ..AdamConfig::adamw() }).unwrap())),
    ];
    for (name, mut opt) in optimizers {
        let mut layer = Linear::new(3, 2, true, &mut Rng::new(7)).unwrap();
        let held = layer.weight.clone();
        let before = held.to_vec();
        opt.zero_grad(&layer);
        let y = layer.forward(&x).unwrap();
        y.mul(&y).unwrap().mean_all().unwrap().backward().unwrap();
        opt.step(&mut layer).unwrap();
        let after = layer.weight.to_vec();
        assert_ne!(after, before, "{name}: the step did not change the layer's weight");
        assert_eq!(
            held.to_vec(),
            after,
            "{name}: the held clone of the weight handle does not see the step (it {})",
            if held.to_vec() == before { "still holds the old values" } else { "holds other values" }
        );
    }
}

#[test]
fn a_tied_model_matches_pytorch_for_five_adamw_steps() {
    let g = golden();
    let mut model = g.model();
    let mut opt = g.optimizer();
    let mut found = Findings::default();

    // The tie is listed once, under its first name, as PyTorch's named_parameters() does.
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    found.check(names == g.names(), || format!("named_parameters() lists {names:?}, PyTorch lists {:?}", g.names()));
    let (v, d) = (g.init["wte.weight"].shape()[0], g.init["wte.weight"].shape()[1]);
    let expected_count: usize = g.init.values().map(|t| t.numel()).sum();
    found.check(model.num_parameters() == expected_count, || {
        format!(
            "num_parameters() is {}, expected {expected_count} (the {v}x{d} tie counted once)",
            model.num_parameters()
        )
    });

    let want = g.losses("losses");
    let untied = g.losses("untied_losses");
    // The tie matters at this learning rate: from the first update on, the untied curve is far
    // outside the tolerance, so matching `losses` means the tie was honoured.
    for k in 1..want.len() {
        assert!((want[k] - untied[k]).abs() > 100.0 * TOL * want[k], "golden: step {} tied and untied agree", k + 1);
    }
    let mut losses = Vec::new();
    for step in 0..want.len() {
        opt.zero_grad(&model);
        let loss = model.loss(&g.tokens, &g.targets);
        loss.backward().unwrap();
        losses.push(loss.item().unwrap());
        if step == 0 {
            let grad = model.wte.weight.grad().expect("wte.weight has a gradient").to_vec();
            let head_grad = model.lm_head.grad().expect("lm_head has a gradient").to_vec();
            found.check(head_grad == grad, || "step 1: the head's gradient is not the embedding's".into());
            let total = numbers(&g.raw["grad_wte_step1"]["data"]);
            // On a mismatch, say whether the gradient is one of the two uses' contributions alone.
            let part = |k: &str| numbers(&g.raw[k]["data"]);
            let which = [
                ("it matches the embedding part alone", "grad_wte_step1_embedding_part"),
                ("it matches the output part alone", "grad_wte_step1_output_part"),
            ]
            .into_iter()
            .find(|(_, k)| worst(&grad, &part(k)).is_some_and(|(_, dev)| dev <= TOL))
            .map_or("the sum of both uses", |(w, _)| w);
            found.close(&grad, &total, &format!("step-1 gradient of wte.weight ({which})"));
        }
        opt.step(&mut model).unwrap();
        check_tie_holds(&mut found, &model, &format!("after step {}", step + 1));
    }
    for (k, (&got, &e)) in losses.iter().zip(&want).enumerate() {
        let rel = (got as f64 - e).abs() / e.abs();
        eprintln!("loss before update {}: {got} vs PyTorch {e} (relative deviation {rel:.2e})", k + 1);
        found.check(rel <= TOL, || {
            format!(
                "loss before update {}: {got} where PyTorch has {e} (untied: {}; relative deviation {rel:.3e})",
                k + 1,
                untied[k]
            )
        });
    }
    let params: HashMap<String, Tensor> = model.named_parameters().into_iter().collect();
    for (name, shape, data) in named(&g.raw["final"]) {
        match params.get(&name) {
            Some(p) if p.shape() == shape.as_slice() => {
                found.close(&p.to_vec(), &data, &format!("{name} after 5 steps"))
            }
            Some(p) => found.0.push(format!("{name}: shape {:?}, PyTorch has {shape:?}", p.shape())),
            None => found.0.push(format!("{name}: not among named_parameters()")),
        }
        if name == "wte.weight" {
            found.close(&model.lm_head.to_vec(), &data, "the head matrix (lm_head) after 5 steps");
        }
    }
    if let Err(e) = tie_probe(&mut model) {
        found.0.push(format!("after 5 steps: {e}"));
    }
    found.finish("tied model vs PyTorch");
}

/// A fresh directory for this test's files.
fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("forgia-tied-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_checkpoint_of_a_tied_model_round_trips_with_the_tie_intact() {
    let g = golden();
    let mut found = Findings::default();
    let want = g.losses("losses");
    let (v, d) = (g.init["wte.weight"].shape()[0], g.init["wte.weight"].shape()[1]);

    // Two of the five golden steps, then a checkpoint (parameters and AdamW state).
    let mut model = g.model();
    let mut opt = g.optimizer();
    for _ in 0..2 {
        train_step(&mut model, &mut opt, &g);
    }
    let dir = scratch_dir("ckpt");
    let path = dir.join("tied.safetensors");
    io::save_checkpoint(&path, &model, &opt).unwrap();

    // The file stores the tied matrix once, and its optimizer state once.
    let entries = io::load(&path).unwrap();
    let (state, params): (Vec<_>, Vec<_>) = entries.iter().partition(|(n, _)| n.starts_with("optim."));
    let param_names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    let tables: Vec<&str> = params.iter().filter(|(_, t)| t.shape() == [v, d]).map(|(n, _)| n.as_str()).collect();
    found.check(tables.len() == 1, || {
        format!("the file stores the {v}x{d} tied matrix {} times: {tables:?}", tables.len())
    });
    found.check(params.len() == g.names().len(), || {
        format!(
            "the file holds {} parameter tensors {param_names:?}, PyTorch's model has {}",
            params.len(),
            g.names().len()
        )
    });
    let moments: Vec<&str> =
        state.iter().filter(|(n, t)| n.ends_with(".exp_avg") && t.shape() == [v, d]).map(|(n, _)| n.as_str()).collect();
    found.check(moments.len() == 1, || {
        format!("the file stores AdamW's exp_avg of the tie {} times: {moments:?}", moments.len())
    });
    let saved = model.wte.weight.to_vec();

    // A freshly built tied model with other values loads it, tie and all.
    let zeros: HashMap<String, Tensor> =
        g.init.iter().map(|(n, t)| (n.clone(), Tensor::zeros_like(t).unwrap())).collect();
    let mut fresh = TinyLm::new(&zeros, g.ln_eps);
    let mut fresh_opt = g.optimizer();
    io::load_checkpoint(&mut fresh, &mut fresh_opt, &path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    found.check(fresh.wte.weight.to_vec() == saved, || "after loading: wte.weight is not the saved matrix".into());
    found.check(fresh.lm_head.to_vec() == saved, || "after loading: the head is not the saved matrix".into());

    // One more step: both views still hold one matrix; then the remaining steps reach
    // PyTorch's final parameters, as the uninterrupted run does.
    let mut losses = Vec::new();
    for step in 2..want.len() {
        losses.push(train_step(&mut fresh, &mut fresh_opt, &g));
        check_tie_holds(&mut found, &fresh, &format!("after step {} (resumed)", step + 1));
    }
    for (k, (&got, &e)) in losses.iter().zip(&want[2..]).enumerate() {
        let rel = (got as f64 - e).abs() / e.abs();
        found.check(rel <= TOL, || format!("resumed loss before update {}: {got} where PyTorch has {e}", k + 3));
    }
    let params: HashMap<String, Tensor> = fresh.named_parameters().into_iter().collect();
    for (name, _, data) in named(&g.raw["final"]) {
        match params.get(&name) {
            Some(p) => found.close(&p.to_vec(), &data, &format!("{name} after resuming to step 5")),
            None => found.0.push(format!("{name}: not among the loaded model's named_parameters()")),
        }
    }
    // And the same identity: updating the head is seen by the embedding.
    if let Err(e) = tie_probe(&mut fresh) {
        found.0.push(format!("after loading: {e}"));
    }
    found.finish("tied checkpoint round trip");
}
