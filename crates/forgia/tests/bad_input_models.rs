//! Bad input to the pretrained architectures: each is an `Err` of a named kind, never a panic.

mod common;

use common::small_bert;
use forgia::io::HfConfig;
use forgia::models::bert::{BertConfig, BertModel};
use forgia::models::gpt2::{Gpt2Config, Gpt2LMHeadModel};
use forgia::models::llama::{LlamaConfig, LlamaForCausalLM};
use forgia::models::resnet::{ResNetConfig, ResNetForImageClassification};
use forgia::models::sentence::Pooling;
use forgia::models::{causal_lm_loss, lora, Activation};
use forgia::{ErrorKind, Indices, Rng, Tensor};

fn ids(data: Vec<i64>, shape: &[usize]) -> Indices {
    Indices::new(data, shape).unwrap()
}

fn kind<T>(r: forgia::Result<T>) -> ErrorKind {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.into_kind(),
    }
}

#[test]
fn bert_rejects_bad_ids_masks_and_lengths() {
    let m = small_bert();
    let ok = ids(vec![1, 2, 3], &[1, 3]);
    assert!(matches!(kind(m.forward(&ids(vec![1, 2, 3], &[3]), None, None)), ErrorKind::RankMismatch { .. }));
    assert!(matches!(kind(m.forward(&ids(vec![0; 7], &[1, 7]), None, None)), ErrorKind::InvalidArgument { .. }));
    assert!(matches!(kind(m.forward(&ids(vec![1, 25, 3], &[1, 3]), None, None)), ErrorKind::IndexOutOfRange { .. }));
    assert!(matches!(kind(m.forward(&ok, None, Some(&ids(vec![1, 1], &[1, 2])))), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(
        kind(m.forward(&ok, None, Some(&ids(vec![1, 2, 1], &[1, 3])))),
        ErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(kind(m.forward(&ok, Some(&ids(vec![0, 0], &[1, 2])), None)), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(
        kind(m.forward(&ok, Some(&ids(vec![0, 5, 0], &[1, 3])), None)),
        ErrorKind::IndexOutOfRange { .. }
    ));
}

#[test]
fn configs_that_cannot_be_built_are_errors() {
    let bad_heads = BertConfig { hidden_size: 10, num_attention_heads: 4, ..BertConfig::default() };
    assert!(matches!(kind(BertModel::new(bad_heads, &mut Rng::new(0))), ErrorKind::InvalidArgument { .. }));
    let g = Gpt2Config { n_embd: 10, n_head: 3, ..Gpt2Config::default() };
    assert!(matches!(kind(Gpt2LMHeadModel::new(g, &mut Rng::new(0))), ErrorKind::InvalidArgument { .. }));
    let l = LlamaConfig { num_attention_heads: 4, num_key_value_heads: 3, ..LlamaConfig::default() };
    assert!(matches!(kind(LlamaForCausalLM::new(l, &mut Rng::new(0))), ErrorKind::InvalidArgument { .. }));
    let r = ResNetConfig { depths: vec![1], hidden_sizes: vec![4, 8], ..ResNetConfig::default() };
    assert!(matches!(
        kind(ResNetForImageClassification::new(r, 2, &mut Rng::new(0))),
        ErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(kind(Activation::from_name("mish")), ErrorKind::InvalidArgument { .. }));
    let c = HfConfig::parse(r#"{"hidden_size": "big"}"#, "config.json").unwrap();
    assert!(matches!(kind(BertConfig::from_hf(&c)), ErrorKind::Checkpoint { .. }));
    let c = HfConfig::parse(r#"{"rope_parameters": {"rope_type": "yarn"}}"#, "config.json").unwrap();
    assert!(matches!(kind(LlamaConfig::from_hf(&c)), ErrorKind::InvalidArgument { .. }));
    let c = HfConfig::parse(r#"{"layer_type": "bottleneck"}"#, "config.json").unwrap();
    assert!(matches!(kind(ResNetConfig::from_hf(&c)), ErrorKind::InvalidArgument { .. }));
    let c = HfConfig::parse(r#"{"pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true}"#, "p.json").unwrap();
    assert!(matches!(kind(Pooling::from_config(&c)), ErrorKind::InvalidArgument { .. }));
}

#[test]
fn lora_losses_and_pooling_reject_bad_arguments() {
    let mut m = small_bert();
    assert!(matches!(
        kind(lora::add_lora(&mut m, &["nothing"], 2, 4.0, &mut Rng::new(0))),
        ErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        kind(lora::add_lora(&mut m, &["query"], 0, 4.0, &mut Rng::new(0))),
        ErrorKind::InvalidArgument { .. }
    ));
    let logits = Tensor::zeros(&[2, 3, 5]).unwrap();
    assert!(matches!(kind(causal_lm_loss(&logits, &ids(vec![0; 4], &[2, 2]))), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(
        kind(causal_lm_loss(&Tensor::zeros(&[2, 1, 5]).unwrap(), &ids(vec![0; 2], &[2, 1]))),
        ErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        kind(causal_lm_loss(&logits, &ids(vec![0, 9, 0, 0, 0, 0], &[2, 3]))),
        ErrorKind::IndexOutOfRange { .. }
    ));
    let h = Tensor::zeros(&[2, 3, 4]).unwrap();
    assert!(matches!(kind(Pooling::Mean.apply(&h, &ids(vec![1; 3], &[1, 3]))), ErrorKind::ShapeMismatch { .. }));
    let r = ResNetConfig { embedding_size: 4, hidden_sizes: vec![4], depths: vec![1], ..ResNetConfig::default() };
    let net = ResNetForImageClassification::new(r, 2, &mut Rng::new(0)).unwrap();
    assert!(net.forward(&Tensor::zeros(&[1, 2, 16, 16]).unwrap()).is_err(), "wrong channel count");
    assert!(net.forward(&Tensor::zeros(&[3, 16, 16]).unwrap()).is_err(), "rank 3");
}

#[test]
fn merged_lora_gives_the_adapted_function_and_adapters_round_trip_apart() {
    let mut m = small_bert();
    lora::add_lora(&mut m, &["query", "value"], 2, 4.0, &mut Rng::new(5)).unwrap();
    // Give B nonzero values so the adapter changes the function.
    for l in &mut m.layers {
        for d in [&mut l.query, &mut l.value] {
            let a = d.lora.as_mut().unwrap();
            let n = a.b.numel();
            a.b = Tensor::from_vec((0..n).map(|i| (i as f32 * 0.37).sin() * 0.3).collect(), a.b.shape())
                .unwrap()
                .into_variable();
        }
    }
    lora::freeze_base(&mut m);
    let x = ids(vec![1, 4, 7, 9], &[1, 4]);
    let adapted = m.forward(&x, None, None).unwrap().last_hidden_state.to_vec();
    let dir = std::env::temp_dir().join(format!("forgia-lora-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("adapter_model.safetensors");
    lora::save_adapters(&path, &mut m).unwrap();
    let names: Vec<String> = forgia::io::load(&path).unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 4);
    assert!(names.iter().all(|n| n.starts_with(lora::PEFT_PREFIX) && lora::is_adapter(n)), "{names:?}");
    // A fresh model with fresh adapters, then the saved ones loaded: the same function.
    let mut other = small_bert();
    lora::add_lora(&mut other, &["query", "value"], 2, 4.0, &mut Rng::new(9)).unwrap();
    lora::load_adapters(&mut other, &path).unwrap();
    let loaded = other.forward(&x, None, None).unwrap().last_hidden_state.to_vec();
    assert_eq!(loaded, adapted);
    // Merging folds the adapters into the base: same outputs (to rounding), no adapters left.
    lora::merge_lora(&mut m).unwrap();
    assert!(m.layers.iter().all(|l| l.query.lora.is_none() && l.value.lora.is_none()));
    let merged = m.forward(&x, None, None).unwrap().last_hidden_state.to_vec();
    for (a, b) in merged.iter().zip(&adapted) {
        assert!((a - b).abs() <= 1e-5, "{a} vs {b}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
