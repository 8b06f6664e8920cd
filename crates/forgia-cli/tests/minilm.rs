//! The real all-MiniLM-L6-v2 against sentence-transformers: `forgia embed` on 16 fixed
//! sentences (one padded batch) gives embeddings with cosine >= 0.99999 and max abs difference
//! <= 1e-5 to the committed reference (tools/reference/generate_minilm.py).
//!
//! Needs the fetched model, so it is ignored by default:
//!
//! ```text
//! tools/fetch_minilm.sh                      # into models/all-minilm-l6-v2 (git-ignored)
//! cargo test --release -p forgia-cli --test minilm -- --ignored
//! ```
//!
//! `FORGIA_MINILM_DIR` points it at another folder.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn model_dir() -> PathBuf {
    match std::env::var_os("FORGIA_MINILM_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/all-minilm-l6-v2"),
    }
}

#[test]
#[ignore = "needs the fetched model: tools/fetch_minilm.sh, then --ignored"]
fn minilm_embeddings_match_sentence_transformers() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/minilm.json");
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let sentences: Vec<&str> = golden["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let dir = model_dir();
    assert!(dir.join("model.safetensors").exists(), "no model in {}: run tools/fetch_minilm.sh", dir.display());
    let out = Command::new(env!("CARGO_BIN_EXE_forgia"))
        .arg("embed")
        .arg("--model")
        .arg(&dir)
        .args(&sentences)
        .output()
        .unwrap();
    assert!(out.status.success(), "forgia embed failed: {}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Vec<f64>> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str::<Vec<f64>>(l).unwrap()).collect();
    assert_eq!(lines.len(), sentences.len());
    for (i, (got, want)) in lines.iter().zip(golden["embeddings"].as_array().unwrap()).enumerate() {
        let want: Vec<f64> = want.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(got.len(), want.len());
        let dot: f64 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let cosine = dot / (norm(got) * norm(&want));
        let max_abs = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f64, f64::max);
        println!("sentence {i}: cosine {cosine:.9}, max abs diff {max_abs:.2e}");
        assert!(cosine >= 0.99999, "sentence {i} {:?}: cosine {cosine}", sentences[i]);
        assert!(max_abs <= 1e-5, "sentence {i} {:?}: max abs diff {max_abs:e}", sentences[i]);
    }
}
