//! W9: a MiniLM-shaped BERT (6 layers, hidden 384, 12 heads, vocab 30522; random weights, the
//! same shapes and work as all-MiniLM-L6-v2) forward + backward at batch 32 × sequence 64,
//! loss = mean of the last hidden state. Measured with rank-8 LoRA on query and value over a
//! frozen base (`lora_ms`, the headline) and with every weight trained (`full_ms`), so the
//! saving from frozen weights is a number. The PyTorch twin is `bench/torch_w9.py`.

use forgia::models::bert::{BertConfig, BertModel};
use forgia::models::lora;
use forgia::nn::Module;
use forgia::{Indices, Rng};

use super::{line, median_ms};

/// Batch, sequence length, LoRA rank and alpha of W9.
const BATCH: usize = 32;
const SEQ: usize = 64;
const RANK: usize = 8;
const ALPHA: f32 = 16.0;

fn config() -> BertConfig {
    BertConfig {
        hidden_size: 384,
        num_hidden_layers: 6,
        num_attention_heads: 12,
        intermediate_size: 1536,
        hidden_dropout_prob: 0.0,
        ..BertConfig::default()
    }
}

fn step(model: &BertModel, ids: &Indices, mask: &Indices) -> forgia::Result<()> {
    let out = model.forward(ids, None, Some(mask))?;
    out.last_hidden_state.mean_all()?.backward()?;
    model.zero_grad();
    Ok(())
}

/// Runs W9 with `(batch, seq)` (the suite's are 32 × 64; smaller sizes check that it runs).
pub(super) fn w9_minilm_lora(reps: usize, sizes: Option<(usize, usize)>) -> Result<String, forgia::Error> {
    let (b, s) = sizes.unwrap_or((BATCH, SEQ));
    let mut rng = Rng::new(9);
    let c = config();
    let ids = Indices::new((0..b * s).map(|_| rng.below(c.vocab_size) as i64).collect(), &[b, s])?;
    let mask = Indices::new(vec![1; b * s], &[b, s])?;
    let mut model = BertModel::new(c, &mut rng)?;
    let full_ms = median_ms(reps, || step(&model, &ids, &mask))?;
    lora::add_lora(&mut model, &["query", "value"], RANK, ALPHA, &mut rng)?;
    lora::freeze_base(&mut model);
    let lora_ms = median_ms(reps, || step(&model, &ids, &mask))?;
    Ok(line(
        "W9",
        lora_ms,
        &[
            ("lora_ms", format!("{lora_ms:.3}")),
            ("full_ms", format!("{full_ms:.3}")),
            ("batch", b.to_string()),
            ("seq", s.to_string()),
        ],
    ))
}
