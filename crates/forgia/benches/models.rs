//! Pretrained-architecture benches: a MiniLM-shaped BERT encoder (6 layers, hidden 384, 12
//! heads) forward + backward at batch 8 × sequence 64, with the full model trained and with
//! rank-8 LoRA on query and value over a frozen base (the saving from frozen weights), and a
//! small Llama decoder step with grouped-query attention.
#![allow(missing_docs)] // criterion_group! generates an undocumented `pub fn`.

use criterion::{criterion_group, criterion_main, Criterion};
use forgia::models::bert::{BertConfig, BertModel};
use forgia::models::llama::{LlamaConfig, LlamaForCausalLM};
use forgia::models::{causal_lm_loss, lora};
use forgia::nn::Module;
use forgia::{Indices, Rng};

fn minilm_config() -> BertConfig {
    BertConfig {
        hidden_size: 384,
        num_hidden_layers: 6,
        num_attention_heads: 12,
        intermediate_size: 1536,
        hidden_dropout_prob: 0.0,
        ..BertConfig::default()
    }
}

fn batch(rng: &mut Rng, b: usize, s: usize, vocab: usize) -> Indices {
    Indices::new((0..b * s).map(|_| rng.below(vocab) as i64).collect(), &[b, s]).unwrap()
}

fn bert(c: &mut Criterion) {
    let mut rng = Rng::new(0);
    let ids = batch(&mut rng, 8, 64, 30522);
    let mask = Indices::new(vec![1; 8 * 64], &[8, 64]).unwrap();
    let full = BertModel::new(minilm_config(), &mut rng).unwrap();
    c.bench_function("minilm_full_fwd_bwd_8x64", |bch| {
        bch.iter(|| {
            let out = full.forward(&ids, None, Some(&mask)).unwrap();
            out.last_hidden_state.mean_all().unwrap().backward().unwrap();
            full.zero_grad();
        })
    });
    let mut adapted = BertModel::new(minilm_config(), &mut rng).unwrap();
    lora::add_lora(&mut adapted, &["query", "value"], 8, 16.0, &mut rng).unwrap();
    lora::freeze_base(&mut adapted);
    c.bench_function("minilm_lora_fwd_bwd_8x64", |bch| {
        bch.iter(|| {
            let out = adapted.forward(&ids, None, Some(&mask)).unwrap();
            out.last_hidden_state.mean_all().unwrap().backward().unwrap();
            adapted.zero_grad();
        })
    });
}

fn llama(c: &mut Criterion) {
    let mut rng = Rng::new(1);
    let config = LlamaConfig {
        vocab_size: 1000,
        hidden_size: 256,
        intermediate_size: 688,
        num_hidden_layers: 4,
        num_attention_heads: 8,
        num_key_value_heads: 2,
        head_dim: 32,
        ..LlamaConfig::default()
    };
    let model = LlamaForCausalLM::new(config, &mut rng).unwrap();
    let ids = batch(&mut rng, 8, 64, 1000);
    c.bench_function("llama_gqa_fwd_bwd_8x64", |bch| {
        bch.iter(|| {
            causal_lm_loss(&model.forward(&ids, None).unwrap(), &ids).unwrap().backward().unwrap();
            model.zero_grad();
        })
    });
}

criterion_group!(benches, bert, llama);
criterion_main!(benches);
