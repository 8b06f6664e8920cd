//! The Llama decoder (`transformers`' `LlamaForCausalLM`, parameter names included).
//!
//! Pre-norm with RMSNorm: `x = x + attn(input_layernorm(x))`, `x = x + mlp(post_attention_layernorm(x))`,
//! then `model.norm` and an untied `lm_head`. Attention applies RoPE (rotate-half, base
//! `rope_theta`) to queries and keys and shares each key/value head among
//! `num_attention_heads / num_key_value_heads` query heads (grouped-query attention); the MLP
//! is SwiGLU, `down(silu(gate(x)) ⊙ up(x))`. No biases.
//!
//! ```
//! use forgia::models::llama::{LlamaConfig, LlamaForCausalLM};
//! use forgia::{Indices, Rng};
//! let config = LlamaConfig { vocab_size: 50, hidden_size: 8, intermediate_size: 16, num_hidden_layers: 1,
//!     num_attention_heads: 2, num_key_value_heads: 1, ..LlamaConfig::default() };
//! let model = LlamaForCausalLM::new(config, &mut Rng::new(0))?;
//! let logits = model.forward(&Indices::new(vec![1, 5, 7], &[1, 3])?, None)?;
//! assert_eq!(logits.shape(), &[1, 3, 50]);
//! # Ok::<(), forgia::Error>(())
//! ```

use super::common::{batch_len, merge_heads, normal, padding_mask, split_heads};
use super::common::{visit_layers, visit_layers_mut};
use super::dense::{Dense, WeightLayout};
use super::DenseLayers;
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::io::HfConfig;
use crate::nn::{visit_child, visit_child_mut, Embedding, Module, RmsNorm};
use crate::ops::attention::AttentionOptions;
use crate::ops::index::Indices;
use crate::tensor::Rng;

/// A Llama configuration: the keys of `config.json` it reads.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// `vocab_size`.
    pub vocab_size: usize,
    /// `hidden_size`.
    pub hidden_size: usize,
    /// `intermediate_size`.
    pub intermediate_size: usize,
    /// `num_hidden_layers`.
    pub num_hidden_layers: usize,
    /// `num_attention_heads`.
    pub num_attention_heads: usize,
    /// `num_key_value_heads` (equal to the attention heads when absent: no grouping).
    pub num_key_value_heads: usize,
    /// `head_dim` (`hidden_size / num_attention_heads` when absent).
    pub head_dim: usize,
    /// `rms_norm_eps`.
    pub rms_norm_eps: f32,
    /// `rope_theta` (or `rope_parameters.rope_theta`); only the default RoPE is supported.
    pub rope_theta: f32,
    /// `max_position_embeddings`.
    pub max_position_embeddings: usize,
    /// `initializer_range`.
    pub initializer_range: f32,
}

impl Default for LlamaConfig {
    /// A Llama-2-7B-like configuration.
    fn default() -> LlamaConfig {
        LlamaConfig {
            vocab_size: 32000,
            hidden_size: 4096,
            intermediate_size: 11008,
            num_hidden_layers: 32,
            num_attention_heads: 32,
            num_key_value_heads: 32,
            head_dim: 128,
            rms_norm_eps: 1e-6,
            rope_theta: 10000.0,
            max_position_embeddings: 2048,
            initializer_range: 0.02,
        }
    }
}

impl LlamaConfig {
    /// Reads a `config.json` (absent keys take `transformers`' defaults).
    ///
    /// # Errors
    /// `Checkpoint` naming a key of the wrong type; `InvalidArgument` for a tied head or a
    /// RoPE scaling other than the default (not supported here).
    pub fn from_hf(c: &HfConfig) -> Result<LlamaConfig> {
        let d = LlamaConfig::default();
        let hidden = c.usize_or("hidden_size", d.hidden_size)?;
        let heads = c.usize_or("num_attention_heads", d.num_attention_heads)?;
        if c.bool_or("tie_word_embeddings", false)? {
            return unsupported("tie_word_embeddings = true");
        }
        if c.has("rope_scaling") {
            return unsupported("rope_scaling");
        }
        // transformers 5 nests RoPE settings under `rope_parameters`; older files hold `rope_theta`.
        let rope_theta = match c.section("rope_parameters")? {
            Some(r) => {
                let kind = r.str_or("rope_type", "default")?;
                if kind != "default" {
                    return unsupported(&format!("rope_type {kind:?}"));
                }
                r.f32_or("rope_theta", d.rope_theta)?
            }
            None => c.f32_or("rope_theta", d.rope_theta)?,
        };
        Ok(LlamaConfig {
            vocab_size: c.usize_or("vocab_size", d.vocab_size)?,
            hidden_size: hidden,
            intermediate_size: c.usize_or("intermediate_size", d.intermediate_size)?,
            num_hidden_layers: c.usize_or("num_hidden_layers", d.num_hidden_layers)?,
            num_attention_heads: heads,
            num_key_value_heads: c.usize_or("num_key_value_heads", heads)?,
            head_dim: c.usize_or("head_dim", hidden / heads.max(1))?,
            rms_norm_eps: c.f32_or("rms_norm_eps", d.rms_norm_eps)?,
            rope_theta,
            max_position_embeddings: c.usize_or("max_position_embeddings", d.max_position_embeddings)?,
            initializer_range: c.f32_or("initializer_range", d.initializer_range)?,
        })
    }

    fn check(&self) -> Result<()> {
        let sizes =
            [self.vocab_size, self.hidden_size, self.num_attention_heads, self.num_key_value_heads, self.head_dim];
        if sizes.contains(&0)
            || !self.num_attention_heads.is_multiple_of(self.num_key_value_heads)
            || !self.head_dim.is_multiple_of(2)
        {
            return fail(ErrorKind::InvalidArgument {
                op: "LlamaForCausalLM::new",
                arg: "config",
                reason: format!(
                    "sizes must be positive, num_attention_heads {} a multiple of num_key_value_heads {}, head_dim {} even",
                    self.num_attention_heads, self.num_key_value_heads, self.head_dim
                ),
            });
        }
        Ok(())
    }
}

fn unsupported<T>(what: &str) -> Result<T> {
    fail(ErrorKind::InvalidArgument {
        op: "LlamaConfig::from_hf",
        arg: "config",
        reason: format!("{what} is not supported"),
    })
}

fn proj(i: usize, o: usize, std: f32, rng: &mut Rng) -> Result<Dense> {
    Ok(Dense { weight: normal(&[o, i], std, rng)?, bias: None, layout: WeightLayout::OutIn, lora: None })
}

/// One decoder layer (`model.layers.{i}`).
pub struct LlamaLayer {
    /// `input_layernorm`.
    pub input_layernorm: RmsNorm,
    /// `self_attn.q_proj`.
    pub q_proj: Dense,
    /// `self_attn.k_proj`.
    pub k_proj: Dense,
    /// `self_attn.v_proj`.
    pub v_proj: Dense,
    /// `self_attn.o_proj`.
    pub o_proj: Dense,
    /// `post_attention_layernorm`.
    pub post_attention_layernorm: RmsNorm,
    /// `mlp.gate_proj`.
    pub gate_proj: Dense,
    /// `mlp.up_proj`.
    pub up_proj: Dense,
    /// `mlp.down_proj`.
    pub down_proj: Dense,
}

impl LlamaLayer {
    fn new(c: &LlamaConfig, rng: &mut Rng) -> Result<LlamaLayer> {
        let (h, i, std) = (c.hidden_size, c.intermediate_size, c.initializer_range);
        let (q, kv) = (c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim);
        Ok(LlamaLayer {
            input_layernorm: RmsNorm::new(h, c.rms_norm_eps)?,
            q_proj: proj(h, q, std, rng)?,
            k_proj: proj(h, kv, std, rng)?,
            v_proj: proj(h, kv, std, rng)?,
            o_proj: proj(q, h, std, rng)?,
            post_attention_layernorm: RmsNorm::new(h, c.rms_norm_eps)?,
            gate_proj: proj(h, i, std, rng)?,
            up_proj: proj(h, i, std, rng)?,
            down_proj: proj(i, h, std, rng)?,
        })
    }

    fn forward(&self, x: &Tensor, mask: Option<&Tensor>, c: &LlamaConfig) -> Result<Tensor> {
        let n = self.input_layernorm.forward(x)?;
        let q = split_heads(&self.q_proj.forward(&n)?, c.num_attention_heads)?.rope(c.rope_theta)?;
        let k = split_heads(&self.k_proj.forward(&n)?, c.num_key_value_heads)?.rope(c.rope_theta)?;
        let v = split_heads(&self.v_proj.forward(&n)?, c.num_key_value_heads)?;
        // Grouped-query attention reads each key/value head in place for its query heads.
        let opts = AttentionOptions { causal: true, mask, enable_gqa: true, ..Default::default() };
        let ctx = q.scaled_dot_product_attention(&k, &v, opts)?;
        let x = x.add(&self.o_proj.forward(&merge_heads(&ctx)?)?)?;
        let n = self.post_attention_layernorm.forward(&x)?;
        let f = self.gate_proj.forward(&n)?.silu().mul(&self.up_proj.forward(&n)?)?;
        x.add(&self.down_proj.forward(&f)?)
    }

    fn denses(&mut self) -> [(&'static str, &mut Dense); 7] {
        [
            ("self_attn.q_proj", &mut self.q_proj),
            ("self_attn.k_proj", &mut self.k_proj),
            ("self_attn.v_proj", &mut self.v_proj),
            ("self_attn.o_proj", &mut self.o_proj),
            ("mlp.gate_proj", &mut self.gate_proj),
            ("mlp.up_proj", &mut self.up_proj),
            ("mlp.down_proj", &mut self.down_proj),
        ]
    }
}

impl Module for LlamaLayer {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("input_layernorm", &self.input_layernorm, f);
        visit_child("self_attn.q_proj", &self.q_proj, f);
        visit_child("self_attn.k_proj", &self.k_proj, f);
        visit_child("self_attn.v_proj", &self.v_proj, f);
        visit_child("self_attn.o_proj", &self.o_proj, f);
        visit_child("post_attention_layernorm", &self.post_attention_layernorm, f);
        visit_child("mlp.gate_proj", &self.gate_proj, f);
        visit_child("mlp.up_proj", &self.up_proj, f);
        visit_child("mlp.down_proj", &self.down_proj, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("input_layernorm", &mut self.input_layernorm, f);
        visit_child_mut("self_attn.q_proj", &mut self.q_proj, f);
        visit_child_mut("self_attn.k_proj", &mut self.k_proj, f);
        visit_child_mut("self_attn.v_proj", &mut self.v_proj, f);
        visit_child_mut("self_attn.o_proj", &mut self.o_proj, f);
        visit_child_mut("post_attention_layernorm", &mut self.post_attention_layernorm, f);
        visit_child_mut("mlp.gate_proj", &mut self.gate_proj, f);
        visit_child_mut("mlp.up_proj", &mut self.up_proj, f);
        visit_child_mut("mlp.down_proj", &mut self.down_proj, f);
    }
}

/// Llama with an untied head, named as `LlamaForCausalLM` (`model.embed_tokens.weight`,
/// `model.layers.0.self_attn.q_proj.weight`, …, `model.norm.weight`, `lm_head.weight`).
pub struct LlamaForCausalLM {
    /// The configuration it was built with.
    pub config: LlamaConfig,
    /// `model.embed_tokens`.
    pub embed_tokens: Embedding,
    /// `model.layers.{i}`.
    pub layers: Vec<LlamaLayer>,
    /// `model.norm`.
    pub norm: RmsNorm,
    /// `lm_head`, `[vocab, hidden]`.
    pub lm_head: Dense,
}

impl LlamaForCausalLM {
    /// A randomly initialized model (`N(0, initializer_range²)` weights, unit norms).
    ///
    /// # Errors
    /// `InvalidArgument` for a zero size, attention heads not a multiple of the key/value
    /// heads, or an odd head dimension.
    pub fn new(config: LlamaConfig, rng: &mut Rng) -> Result<LlamaForCausalLM> {
        config.check()?;
        let std = config.initializer_range;
        let embed_tokens = Embedding::from_tensor(normal(&[config.vocab_size, config.hidden_size], std, rng)?)?;
        let layers = (0..config.num_hidden_layers).map(|_| LlamaLayer::new(&config, rng)).collect::<Result<_>>()?;
        let norm = RmsNorm::new(config.hidden_size, config.rms_norm_eps)?;
        let lm_head = proj(config.hidden_size, config.vocab_size, std, rng)?;
        Ok(LlamaForCausalLM { config, embed_tokens, layers, norm, lm_head })
    }

    /// Next-token logits `[B, S, vocab]` of `input_ids [B, S]` at positions `0..S`;
    /// `attention_mask` (1 = token, 0 = padding) additionally hides padded keys.
    ///
    /// # Errors
    /// `RankMismatch` for ids that are not a non-empty `[B, S]`; `InvalidArgument` for a
    /// sequence longer than `max_position_embeddings`; `ShapeMismatch` / `InvalidArgument` for
    /// a bad mask; `IndexOutOfRange` for an id outside the vocabulary.
    pub fn forward(&self, input_ids: &Indices, attention_mask: Option<&Indices>) -> Result<Tensor> {
        const OP: &str = "LlamaForCausalLM::forward";
        let (b, s) = batch_len(OP, input_ids)?;
        if s > self.config.max_position_embeddings {
            return fail(ErrorKind::InvalidArgument {
                op: OP,
                arg: "input_ids",
                reason: format!(
                    "sequence length {s} exceeds max_position_embeddings {}",
                    self.config.max_position_embeddings
                ),
            });
        }
        let mut x = self.embed_tokens.forward(input_ids)?;
        let mask = attention_mask.map(|m| padding_mask(OP, m, (b, s))).transpose()?;
        for layer in &self.layers {
            x = layer.forward(&x, mask.as_ref(), &self.config)?;
        }
        self.lm_head.forward(&self.norm.forward(&x)?)
    }
}

impl Module for LlamaForCausalLM {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("model.embed_tokens", &self.embed_tokens, f);
        visit_layers("model.layers", &self.layers, f);
        visit_child("model.norm", &self.norm, f);
        visit_child("lm_head", &self.lm_head, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("model.embed_tokens", &mut self.embed_tokens, f);
        visit_layers_mut("model.layers", &mut self.layers, f);
        visit_child_mut("model.norm", &mut self.norm, f);
        visit_child_mut("lm_head", &mut self.lm_head, f);
    }
}

impl DenseLayers for LlamaForCausalLM {
    fn visit_dense_mut(&mut self, f: &mut dyn FnMut(&str, &mut Dense)) {
        for (i, l) in self.layers.iter_mut().enumerate() {
            for (name, d) in l.denses() {
                f(&format!("model.layers.{i}.{name}"), d);
            }
        }
        f("lm_head", &mut self.lm_head);
    }
}
