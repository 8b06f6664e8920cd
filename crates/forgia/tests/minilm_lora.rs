//! One LoRA training step of the real all-MiniLM-L6-v2 against PyTorch
//! (tools/reference/generate_minilm_lora.py): the in-batch contrastive loss of 8 (misspelled,
//! correct) word pairs and the gradients of two adapters, to 1e-4.
//!
//! Needs the fetched model, so it is ignored by default:
//!
//! ```text
//! tools/fetch_minilm.sh                      # into models/all-minilm-l6-v2 (git-ignored)
//! cargo test --release -p forgia --test minilm_lora -- --ignored
//! ```
//!
//! `FORGIA_MINILM_DIR` points it at another folder.

use std::path::PathBuf;

use forgia::models::lora;
use forgia::models::sentence::SentenceEncoder;
use forgia::nn::Module;
use forgia::{loss, Indices, Rng};
use serde_json::Value;

fn model_dir() -> PathBuf {
    match std::env::var_os("FORGIA_MINILM_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/all-minilm-l6-v2"),
    }
}

fn rows(v: &Value) -> Indices {
    let rows = v.as_array().unwrap();
    let width = rows[0].as_array().unwrap().len();
    let data: Vec<i64> = rows.iter().flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_i64().unwrap())).collect();
    Indices::new(data, &[rows.len(), width]).unwrap()
}

#[test]
#[ignore = "needs the fetched model: tools/fetch_minilm.sh, then --ignored"]
fn minilm_lora_step_matches_pytorch() {
    let golden_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let g: Value =
        serde_json::from_str(&std::fs::read_to_string(golden_dir.join("minilm_lora.json")).unwrap()).unwrap();
    let dir = model_dir();
    assert!(dir.join("model.safetensors").exists(), "no model in {}: run tools/fetch_minilm.sh", dir.display());
    let mut enc = SentenceEncoder::from_dir(&dir).unwrap();
    let (rank, alpha) = (g["rank"].as_u64().unwrap() as usize, g["alpha"].as_f64().unwrap() as f32);
    assert_eq!(lora::add_lora(&mut enc.bert, &["query", "value"], rank, alpha, &mut Rng::new(0)).unwrap(), 12);
    lora::freeze_base(&mut enc.bert);
    lora::load_adapters(&mut enc.bert, golden_dir.join("minilm_lora/adapter_model.safetensors")).unwrap();
    let a = enc.embed(&rows(&g["a_ids"]), &rows(&g["a_mask"])).unwrap();
    let b = enc.embed(&rows(&g["b_ids"]), &rows(&g["b_mask"])).unwrap();
    // Embeddings are already L2-normalized (the model's Normalize module): cosine = dot.
    let scores = a.matmul(&b.transpose(0, 1).unwrap()).unwrap().scale(20.0);
    let n = scores.shape()[0];
    let labels = Indices::new((0..n as i64).collect(), &[n]).unwrap();
    let l = loss::cross_entropy(&scores, &labels, Default::default()).unwrap();
    let want = g["loss"].as_f64().unwrap();
    let got = l.to_vec()[0] as f64;
    assert!((got - want).abs() <= 1e-4 * want.abs(), "loss {got} vs {want}");
    l.backward().unwrap();
    let params = enc.bert.named_parameters();
    for (name, expected) in g["grads"].as_object().unwrap() {
        let grad = params.iter().find(|(n, _)| n == name).unwrap().1.grad().unwrap().to_vec();
        let expected: Vec<f64> = expected.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let scale = expected.iter().fold(0f64, |m, v| m.max(v.abs()));
        for (i, (x, e)) in grad.iter().zip(&expected).enumerate() {
            assert!((*x as f64 - e).abs() <= 1e-4 * scale, "{name}[{i}]: {x} vs {e} (scale {scale:e})");
        }
    }
    assert!(params.iter().filter(|(n, _)| !lora::is_adapter(n)).all(|(_, p)| p.grad().is_none()), "frozen base");
}
