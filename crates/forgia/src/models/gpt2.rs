//! The GPT-2 decoder (`transformers`' `GPT2LMHeadModel`, parameter names and `Conv1D` weight
//! layout included).
//!
//! Pre-LN: `x = x + attn(ln_1(x))`, `x = x + mlp(ln_2(x))`, then `ln_f`. Learned positions
//! `0..S`; causal attention (and an optional padding mask); the MLP's activation is GELU-tanh
//! (`gelu_new`); the output projection is the token embedding itself (tied: one parameter,
//! listed and saved once as `transformer.wte.weight`, getting the sum of both uses'
//! gradients). Linear layers keep `Conv1D`'s `[in, out]` weights ([`WeightLayout::InOut`]), so
//! checkpoints load without transposes.
//!
//! ```
//! use forgia::models::gpt2::{Gpt2Config, Gpt2LMHeadModel};
//! use forgia::models::causal_lm_loss;
//! use forgia::{Indices, Rng};
//! let config = Gpt2Config { vocab_size: 50, n_positions: 16, n_embd: 8, n_layer: 1, n_head: 2, ..Gpt2Config::default() };
//! let model = Gpt2LMHeadModel::new(config, &mut Rng::new(0))?;
//! let ids = Indices::new(vec![1, 5, 7, 3], &[1, 4])?;
//! let logits = model.forward(&ids, None)?;
//! assert_eq!(logits.shape(), &[1, 4, 50]);
//! causal_lm_loss(&logits, &ids)?.backward()?;
//! # Ok::<(), forgia::Error>(())
//! ```

use super::common::{batch_len, merge_heads, normal, padding_mask, positions, split_heads, Activation};
use super::common::{visit_layers, visit_layers_mut};
use super::dense::{Dense, WeightLayout};
use super::DenseLayers;
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::io::HfConfig;
use crate::nn::{visit_child, visit_child_mut, Dropout, Embedding, LayerNorm, Module};
use crate::ops::attention::AttentionOptions;
use crate::ops::index::Indices;
use crate::tensor::Rng;

/// A GPT-2 configuration: the keys of `config.json` it reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpt2Config {
    /// `vocab_size`.
    pub vocab_size: usize,
    /// `n_positions`.
    pub n_positions: usize,
    /// `n_embd`.
    pub n_embd: usize,
    /// `n_layer`.
    pub n_layer: usize,
    /// `n_head`.
    pub n_head: usize,
    /// `n_inner` (`4 · n_embd` when null).
    pub n_inner: usize,
    /// `activation_function`.
    pub activation_function: Activation,
    /// `layer_norm_epsilon`.
    pub layer_norm_epsilon: f32,
    /// `resid_pdrop` (also used for `embd_pdrop`; attention probabilities are not dropped).
    pub resid_pdrop: f32,
    /// `initializer_range`.
    pub initializer_range: f32,
}

impl Default for Gpt2Config {
    /// `gpt2` (124M)'s configuration.
    fn default() -> Gpt2Config {
        Gpt2Config {
            vocab_size: 50257,
            n_positions: 1024,
            n_embd: 768,
            n_layer: 12,
            n_head: 12,
            n_inner: 3072,
            activation_function: Activation::GeluTanh,
            layer_norm_epsilon: 1e-5,
            resid_pdrop: 0.1,
            initializer_range: 0.02,
        }
    }
}

impl Gpt2Config {
    /// Reads a `config.json` (absent keys take `transformers`' defaults).
    ///
    /// # Errors
    /// `Checkpoint` naming a key of the wrong type; `InvalidArgument` for an unknown activation.
    pub fn from_hf(c: &HfConfig) -> Result<Gpt2Config> {
        let d = Gpt2Config::default();
        let n_embd = c.usize_or("n_embd", d.n_embd)?;
        Ok(Gpt2Config {
            vocab_size: c.usize_or("vocab_size", d.vocab_size)?,
            n_positions: c.usize_or("n_positions", d.n_positions)?,
            n_embd,
            n_layer: c.usize_or("n_layer", d.n_layer)?,
            n_head: c.usize_or("n_head", d.n_head)?,
            n_inner: c.usize_or("n_inner", 4 * n_embd)?,
            activation_function: Activation::from_name(c.str_or("activation_function", "gelu_new")?)?,
            layer_norm_epsilon: c.f32_or("layer_norm_epsilon", d.layer_norm_epsilon)?,
            resid_pdrop: c.f32_or("resid_pdrop", d.resid_pdrop)?,
            initializer_range: c.f32_or("initializer_range", d.initializer_range)?,
        })
    }
}

fn conv1d(i: usize, o: usize, std: f32, rng: &mut Rng) -> Result<Dense> {
    Ok(Dense {
        weight: normal(&[i, o], std, rng)?,
        bias: Some(Tensor::zeros(&[o])?.into_variable()),
        layout: WeightLayout::InOut,
        lora: None,
    })
}

/// One pre-LN decoder block (`transformer.h.{i}`).
pub struct Gpt2Block {
    /// `ln_1`.
    pub ln_1: LayerNorm,
    /// `attn.c_attn`: the fused q, k, v projection `[n_embd, 3·n_embd]`.
    pub c_attn: Dense,
    /// `attn.c_proj`.
    pub attn_proj: Dense,
    /// `ln_2`.
    pub ln_2: LayerNorm,
    /// `mlp.c_fc`.
    pub c_fc: Dense,
    /// `mlp.c_proj`.
    pub mlp_proj: Dense,
}

impl Gpt2Block {
    fn new(c: &Gpt2Config, rng: &mut Rng) -> Result<Gpt2Block> {
        let (h, std) = (c.n_embd, c.initializer_range);
        Ok(Gpt2Block {
            ln_1: LayerNorm::new(&[h], c.layer_norm_epsilon)?,
            c_attn: conv1d(h, 3 * h, std, rng)?,
            attn_proj: conv1d(h, h, std, rng)?,
            ln_2: LayerNorm::new(&[h], c.layer_norm_epsilon)?,
            c_fc: conv1d(h, c.n_inner, std, rng)?,
            mlp_proj: conv1d(c.n_inner, h, std, rng)?,
        })
    }

    fn forward(&self, x: &Tensor, mask: Option<&Tensor>, c: &Gpt2Config, drop: &Dropout) -> Result<Tensor> {
        let h = c.n_embd;
        let qkv = self.c_attn.forward(&self.ln_1.forward(x)?)?.split(-1, &[h, h, h])?;
        let [q, k, v] = [&qkv[0], &qkv[1], &qkv[2]].map(|t| split_heads(t, c.n_head));
        let ctx =
            q?.scaled_dot_product_attention(&k?, &v?, AttentionOptions { causal: true, mask, ..Default::default() })?;
        let x = x.add(&drop.forward(&self.attn_proj.forward(&merge_heads(&ctx)?)?)?)?;
        let f = c.activation_function.apply(&self.c_fc.forward(&self.ln_2.forward(&x)?)?);
        x.add(&drop.forward(&self.mlp_proj.forward(&f)?)?)
    }

    fn denses(&mut self) -> [(&'static str, &mut Dense); 4] {
        [
            ("attn.c_attn", &mut self.c_attn),
            ("attn.c_proj", &mut self.attn_proj),
            ("mlp.c_fc", &mut self.c_fc),
            ("mlp.c_proj", &mut self.mlp_proj),
        ]
    }
}

impl Module for Gpt2Block {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("ln_1", &self.ln_1, f);
        visit_child("attn.c_attn", &self.c_attn, f);
        visit_child("attn.c_proj", &self.attn_proj, f);
        visit_child("ln_2", &self.ln_2, f);
        visit_child("mlp.c_fc", &self.c_fc, f);
        visit_child("mlp.c_proj", &self.mlp_proj, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("ln_1", &mut self.ln_1, f);
        visit_child_mut("attn.c_attn", &mut self.c_attn, f);
        visit_child_mut("attn.c_proj", &mut self.attn_proj, f);
        visit_child_mut("ln_2", &mut self.ln_2, f);
        visit_child_mut("mlp.c_fc", &mut self.c_fc, f);
        visit_child_mut("mlp.c_proj", &mut self.mlp_proj, f);
    }
}

/// GPT-2 with its language-model head tied to the token embedding, named as
/// `GPT2LMHeadModel` (`transformer.wte.weight`, `transformer.h.0.attn.c_attn.weight`, …).
/// Checkpoints from `save_pretrained` load with `HfNames::new()`; older ones holding the
/// `attn.bias` / `attn.masked_bias` mask buffers or a duplicate `lm_head.weight` load with
/// those names in [`crate::io::HfNames::ignore`].
pub struct Gpt2LMHeadModel {
    /// The configuration it was built with.
    pub config: Gpt2Config,
    /// `transformer.wte`, also the output projection.
    pub wte: Embedding,
    /// `transformer.wpe`.
    pub wpe: Embedding,
    /// `transformer.h.{i}`.
    pub blocks: Vec<Gpt2Block>,
    /// `transformer.ln_f`.
    pub ln_f: LayerNorm,
    dropout: Dropout,
}

impl Gpt2LMHeadModel {
    /// A randomly initialized model (`N(0, initializer_range²)` weights, as `transformers`
    /// before its depth-scaled `c_proj` init), in evaluation mode.
    ///
    /// # Errors
    /// `InvalidArgument` for a zero size or `n_embd` not divisible by `n_head`.
    pub fn new(config: Gpt2Config, rng: &mut Rng) -> Result<Gpt2LMHeadModel> {
        if [config.vocab_size, config.n_embd, config.n_head, config.n_positions].contains(&0)
            || !config.n_embd.is_multiple_of(config.n_head)
        {
            return fail(ErrorKind::InvalidArgument {
                op: "Gpt2LMHeadModel::new",
                arg: "config",
                reason: format!(
                    "sizes must be positive and n_embd {} divisible by n_head {}",
                    config.n_embd, config.n_head
                ),
            });
        }
        let std = config.initializer_range;
        let wte = Embedding::from_tensor(normal(&[config.vocab_size, config.n_embd], std, rng)?)?;
        let wpe = Embedding::from_tensor(normal(&[config.n_positions, config.n_embd], std / 2.0, rng)?)?;
        let blocks = (0..config.n_layer).map(|_| Gpt2Block::new(&config, rng)).collect::<Result<_>>()?;
        let ln_f = LayerNorm::new(&[config.n_embd], config.layer_norm_epsilon)?;
        let mut dropout = Dropout::new(config.resid_pdrop, rng.next_u64())?;
        dropout.set_training(false);
        Ok(Gpt2LMHeadModel { config, wte, wpe, blocks, ln_f, dropout })
    }

    /// The final hidden states `[B, S, n_embd]` of `input_ids [B, S]` (after `ln_f`).
    ///
    /// # Errors
    /// As [`Gpt2LMHeadModel::forward`].
    pub fn hidden_states(&self, input_ids: &Indices, attention_mask: Option<&Indices>) -> Result<Tensor> {
        const OP: &str = "Gpt2LMHeadModel::forward";
        let (b, s) = batch_len(OP, input_ids)?;
        let pos = positions(OP, b, s, self.config.n_positions)?;
        let mut x = self.dropout.forward(&self.wte.forward(input_ids)?.add(&self.wpe.forward(&pos)?)?)?;
        let mask = attention_mask.map(|m| padding_mask(OP, m, (b, s))).transpose()?;
        for block in &self.blocks {
            x = block.forward(&x, mask.as_ref(), &self.config, &self.dropout)?;
        }
        self.ln_f.forward(&x)
    }

    /// Next-token logits `[B, S, vocab]`: `ln_f(h) · wteᵀ`. `attention_mask` (1 = token,
    /// 0 = padding) additionally hides padded keys.
    ///
    /// # Errors
    /// `RankMismatch` for ids that are not a non-empty `[B, S]`; `InvalidArgument` for a
    /// sequence longer than `n_positions`; `ShapeMismatch` / `InvalidArgument` for a bad mask;
    /// `IndexOutOfRange` for an id outside the vocabulary.
    pub fn forward(&self, input_ids: &Indices, attention_mask: Option<&Indices>) -> Result<Tensor> {
        self.hidden_states(input_ids, attention_mask)?.linear(&self.wte.weight, None)
    }
}

impl Module for Gpt2LMHeadModel {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("transformer.wte", &self.wte, f);
        visit_child("transformer.wpe", &self.wpe, f);
        visit_layers("transformer.h", &self.blocks, f);
        visit_child("transformer.ln_f", &self.ln_f, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("transformer.wte", &mut self.wte, f);
        visit_child_mut("transformer.wpe", &mut self.wpe, f);
        visit_layers_mut("transformer.h", &mut self.blocks, f);
        visit_child_mut("transformer.ln_f", &mut self.ln_f, f);
    }

    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
    }
}

impl DenseLayers for Gpt2LMHeadModel {
    fn visit_dense_mut(&mut self, f: &mut dyn FnMut(&str, &mut Dense)) {
        for (i, b) in self.blocks.iter_mut().enumerate() {
            for (name, d) in b.denses() {
                f(&format!("transformer.h.{i}.{name}"), d);
            }
        }
    }
}
