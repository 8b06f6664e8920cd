//! Pretrained architectures built from [`crate::nn`] modules and ops, with the parameter names
//! `transformers` uses, so Hugging Face checkpoints load through [`crate::io::load_hf`] and
//! write back through [`crate::io::save_hf`]:
//!
//! | model | architecture |
//! | --- | --- |
//! | [`bert::BertModel`] | post-LN encoder, token-type embeddings, padding mask, GELU (erf) |
//! | [`gpt2::Gpt2LMHeadModel`] | pre-LN decoder, learned positions, tied embeddings, GELU-tanh, `Conv1D` weights |
//! | [`llama::LlamaForCausalLM`] | pre-RMSNorm decoder, RoPE, grouped-query attention, SwiGLU, untied head |
//! | [`sentence::SentenceEncoder`] | BERT + pooling + normalization, as sentence-transformers (all-MiniLM-L6-v2) |
//! | [`resnet::ResNetForImageClassification`] | basic residual blocks, BatchNorm, adaptive average pooling |
//!
//! Every linear layer is a [`Dense`] so that [`lora`] can put low-rank adapters on any of
//! them by name ([`DenseLayers`]).

pub mod bert;
mod common;
mod dense;
pub mod gpt2;
pub mod llama;
pub mod lora;
pub mod resnet;
pub mod sentence;

pub use common::{causal_lm_loss, Activation};
pub use dense::{Dense, Lora, WeightLayout};

use crate::nn::Module;

/// A model whose linear layers can be reached by their dotted names (for LoRA).
pub trait DenseLayers: Module {
    /// Calls `f` with every [`Dense`] layer and its dotted module name
    /// (`encoder.layer.0.attention.self.query`), in a fixed order.
    fn visit_dense_mut(&mut self, f: &mut dyn FnMut(&str, &mut Dense));
}
