//! The BERT encoder (`transformers`' `BertModel`, parameter names included) and its
//! sequence-classification head.
//!
//! Post-LN: each sub-layer is `LayerNorm(x + sublayer(x))`. The input is the sum of word,
//! position (learned, `0..S`) and token-type embeddings, layer-normalized; padded keys are
//! masked out of attention by the `[B, S]` 0/1 `attention_mask`. The pooler is `tanh(dense(h₀))`
//! of the first token.
//!
//! ```
//! use forgia::models::bert::{BertConfig, BertModel};
//! use forgia::{Indices, Rng};
//! let config = BertConfig { vocab_size: 50, hidden_size: 8, num_hidden_layers: 1,
//!     num_attention_heads: 2, intermediate_size: 16, ..BertConfig::default() };
//! let model = BertModel::new(config, &mut Rng::new(0))?;
//! let ids = Indices::new(vec![1, 5, 7, 0], &[1, 4])?;
//! let mask = Indices::new(vec![1, 1, 1, 0], &[1, 4])?;
//! let out = model.forward(&ids, None, Some(&mask))?;
//! assert_eq!(out.last_hidden_state.shape(), &[1, 4, 8]);
//! assert_eq!(out.pooler_output.unwrap().shape(), &[1, 8]);
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

/// A BERT configuration: the keys of `config.json` it reads.
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    /// `vocab_size`.
    pub vocab_size: usize,
    /// `hidden_size`.
    pub hidden_size: usize,
    /// `num_hidden_layers`.
    pub num_hidden_layers: usize,
    /// `num_attention_heads`.
    pub num_attention_heads: usize,
    /// `intermediate_size`.
    pub intermediate_size: usize,
    /// `max_position_embeddings`.
    pub max_position_embeddings: usize,
    /// `type_vocab_size`.
    pub type_vocab_size: usize,
    /// `layer_norm_eps`.
    pub layer_norm_eps: f32,
    /// `hidden_act`.
    pub hidden_act: Activation,
    /// `hidden_dropout_prob` (applied in training mode to the embeddings and each sub-layer's
    /// output; attention probabilities are not dropped: the fused attention has no dropout).
    pub hidden_dropout_prob: f32,
    /// `initializer_range`: the std of the normal initialization of [`BertModel::new`].
    pub initializer_range: f32,
    /// Whether the pooler is built (`BertModel(add_pooling_layer=True)`, the default).
    pub add_pooling_layer: bool,
}

impl Default for BertConfig {
    /// `bert-base-uncased`'s configuration.
    fn default() -> BertConfig {
        BertConfig {
            vocab_size: 30522,
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            hidden_act: Activation::Gelu,
            hidden_dropout_prob: 0.1,
            initializer_range: 0.02,
            add_pooling_layer: true,
        }
    }
}

impl BertConfig {
    /// Reads a `config.json` (absent keys take `transformers`' defaults).
    ///
    /// # Errors
    /// `Checkpoint` naming a key of the wrong type; `InvalidArgument` for an unknown activation.
    pub fn from_hf(c: &HfConfig) -> Result<BertConfig> {
        let d = BertConfig::default();
        Ok(BertConfig {
            vocab_size: c.usize_or("vocab_size", d.vocab_size)?,
            hidden_size: c.usize_or("hidden_size", d.hidden_size)?,
            num_hidden_layers: c.usize_or("num_hidden_layers", d.num_hidden_layers)?,
            num_attention_heads: c.usize_or("num_attention_heads", d.num_attention_heads)?,
            intermediate_size: c.usize_or("intermediate_size", d.intermediate_size)?,
            max_position_embeddings: c.usize_or("max_position_embeddings", d.max_position_embeddings)?,
            type_vocab_size: c.usize_or("type_vocab_size", d.type_vocab_size)?,
            layer_norm_eps: c.f32_or("layer_norm_eps", d.layer_norm_eps)?,
            hidden_act: Activation::from_name(c.str_or("hidden_act", "gelu")?)?,
            hidden_dropout_prob: c.f32_or("hidden_dropout_prob", d.hidden_dropout_prob)?,
            initializer_range: c.f32_or("initializer_range", d.initializer_range)?,
            add_pooling_layer: true,
        })
    }

    fn check(&self) -> Result<()> {
        let sizes = [self.vocab_size, self.hidden_size, self.num_hidden_layers, self.num_attention_heads];
        if sizes.contains(&0) || !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return fail(ErrorKind::InvalidArgument {
                op: "BertModel::new",
                arg: "config",
                reason: format!(
                    "sizes must be positive and hidden_size {} divisible by num_attention_heads {}",
                    self.hidden_size, self.num_attention_heads
                ),
            });
        }
        Ok(())
    }
}

fn dense(i: usize, o: usize, std: f32, rng: &mut Rng) -> Result<Dense> {
    Ok(Dense {
        weight: normal(&[o, i], std, rng)?,
        bias: Some(Tensor::zeros(&[o])?.into_variable()),
        layout: WeightLayout::OutIn,
        lora: None,
    })
}

/// One encoder layer: self-attention and a feed-forward block, each post-LN.
pub struct BertLayer {
    /// `attention.self.query`.
    pub query: Dense,
    /// `attention.self.key`.
    pub key: Dense,
    /// `attention.self.value`.
    pub value: Dense,
    /// `attention.output.dense`.
    pub attention_output: Dense,
    /// `attention.output.LayerNorm`.
    pub attention_norm: LayerNorm,
    /// `intermediate.dense`.
    pub intermediate: Dense,
    /// `output.dense`.
    pub output: Dense,
    /// `output.LayerNorm`.
    pub output_norm: LayerNorm,
}

impl BertLayer {
    fn new(c: &BertConfig, rng: &mut Rng) -> Result<BertLayer> {
        let (h, i, std) = (c.hidden_size, c.intermediate_size, c.initializer_range);
        Ok(BertLayer {
            query: dense(h, h, std, rng)?,
            key: dense(h, h, std, rng)?,
            value: dense(h, h, std, rng)?,
            attention_output: dense(h, h, std, rng)?,
            attention_norm: LayerNorm::new(&[h], c.layer_norm_eps)?,
            intermediate: dense(h, i, std, rng)?,
            output: dense(i, h, std, rng)?,
            output_norm: LayerNorm::new(&[h], c.layer_norm_eps)?,
        })
    }

    fn forward(&self, x: &Tensor, mask: Option<&Tensor>, c: &BertConfig, drop: &Dropout) -> Result<Tensor> {
        let heads = c.num_attention_heads;
        let q = split_heads(&self.query.forward(x)?, heads)?;
        let k = split_heads(&self.key.forward(x)?, heads)?;
        let v = split_heads(&self.value.forward(x)?, heads)?;
        let ctx = q.scaled_dot_product_attention(&k, &v, AttentionOptions { mask, ..Default::default() })?;
        let a = drop.forward(&self.attention_output.forward(&merge_heads(&ctx)?)?)?;
        let x = self.attention_norm.forward(&a.add(x)?)?;
        let f = c.hidden_act.apply(&self.intermediate.forward(&x)?);
        let f = drop.forward(&self.output.forward(&f)?)?;
        self.output_norm.forward(&f.add(&x)?)
    }
}

impl Module for BertLayer {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("attention.self.query", &self.query, f);
        visit_child("attention.self.key", &self.key, f);
        visit_child("attention.self.value", &self.value, f);
        visit_child("attention.output.dense", &self.attention_output, f);
        visit_child("attention.output.LayerNorm", &self.attention_norm, f);
        visit_child("intermediate.dense", &self.intermediate, f);
        visit_child("output.dense", &self.output, f);
        visit_child("output.LayerNorm", &self.output_norm, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("attention.self.query", &mut self.query, f);
        visit_child_mut("attention.self.key", &mut self.key, f);
        visit_child_mut("attention.self.value", &mut self.value, f);
        visit_child_mut("attention.output.dense", &mut self.attention_output, f);
        visit_child_mut("attention.output.LayerNorm", &mut self.attention_norm, f);
        visit_child_mut("intermediate.dense", &mut self.intermediate, f);
        visit_child_mut("output.dense", &mut self.output, f);
        visit_child_mut("output.LayerNorm", &mut self.output_norm, f);
    }
}

/// What [`BertModel::forward`] returns.
pub struct BertOutput {
    /// The last layer's hidden states `[B, S, hidden]`.
    pub last_hidden_state: Tensor,
    /// `tanh(dense(h[:, 0]))` `[B, hidden]`, when the pooler is built.
    pub pooler_output: Option<Tensor>,
}

/// The BERT encoder with `transformers`' `BertModel` parameter names
/// (`embeddings.word_embeddings.weight`, `encoder.layer.0.attention.self.query.weight`, …,
/// `pooler.dense.weight`). Load a checkpoint with [`crate::io::load_hf`] and
/// `HfNames::new().file_prefix("bert.")`, which reads files of both `BertModel` and its
/// task heads; the integer `embeddings.position_ids` buffer is skipped.
pub struct BertModel {
    /// The configuration it was built with.
    pub config: BertConfig,
    /// `embeddings.word_embeddings`.
    pub word_embeddings: Embedding,
    /// `embeddings.position_embeddings`.
    pub position_embeddings: Embedding,
    /// `embeddings.token_type_embeddings`.
    pub token_type_embeddings: Embedding,
    /// `embeddings.LayerNorm`.
    pub embeddings_norm: LayerNorm,
    /// `encoder.layer.{i}`.
    pub layers: Vec<BertLayer>,
    /// `pooler.dense`.
    pub pooler: Option<Dense>,
    dropout: Dropout,
}

impl BertModel {
    /// A randomly initialized model (`N(0, initializer_range²)` weights, zero biases, unit
    /// LayerNorms, as `transformers`), in evaluation mode (no dropout until
    /// `set_training(true)`).
    ///
    /// # Errors
    /// `InvalidArgument` for a zero size or a hidden size not divisible by the head count.
    pub fn new(config: BertConfig, rng: &mut Rng) -> Result<BertModel> {
        config.check()?;
        let (h, std) = (config.hidden_size, config.initializer_range);
        let emb = |n: usize, rng: &mut Rng| Embedding::from_tensor(normal(&[n, h], std, rng)?);
        let word_embeddings = emb(config.vocab_size, rng)?;
        let position_embeddings = emb(config.max_position_embeddings, rng)?;
        let token_type_embeddings = emb(config.type_vocab_size, rng)?;
        let embeddings_norm = LayerNorm::new(&[h], config.layer_norm_eps)?;
        let layers = (0..config.num_hidden_layers).map(|_| BertLayer::new(&config, rng)).collect::<Result<_>>()?;
        let pooler = if config.add_pooling_layer { Some(dense(h, h, std, rng)?) } else { None };
        let mut dropout = Dropout::new(config.hidden_dropout_prob, rng.next_u64())?;
        dropout.set_training(false);
        Ok(BertModel {
            config,
            word_embeddings,
            position_embeddings,
            token_type_embeddings,
            embeddings_norm,
            layers,
            pooler,
            dropout,
        })
    }

    /// Encodes `input_ids [B, S]`; `token_type_ids` default to 0, `attention_mask` (1 = token,
    /// 0 = padding) to all ones.
    ///
    /// # Errors
    /// `RankMismatch` for ids that are not a non-empty `[B, S]`; `ShapeMismatch` for a mask or
    /// token types of another shape; `InvalidArgument` for a sequence longer than
    /// `max_position_embeddings` or a mask value other than 0 / 1; `IndexOutOfRange` for an id
    /// outside the vocabulary.
    pub fn forward(
        &self,
        input_ids: &Indices,
        token_type_ids: Option<&Indices>,
        attention_mask: Option<&Indices>,
    ) -> Result<BertOutput> {
        const OP: &str = "BertModel::forward";
        let (b, s) = batch_len(OP, input_ids)?;
        let pos = positions(OP, b, s, self.config.max_position_embeddings)?;
        let zeros;
        let types = match token_type_ids {
            Some(t) if t.shape() != input_ids.shape() => {
                return fail(ErrorKind::ShapeMismatch {
                    op: OP,
                    lhs: input_ids.shape().to_vec(),
                    rhs: t.shape().to_vec(),
                })
            }
            Some(t) => t,
            None => {
                zeros = Indices::new(vec![0; b * s], &[b, s])?;
                &zeros
            }
        };
        let e = self.word_embeddings.forward(input_ids)?;
        let e = e.add(&self.position_embeddings.forward(&pos)?)?.add(&self.token_type_embeddings.forward(types)?)?;
        let mut x = self.dropout.forward(&self.embeddings_norm.forward(&e)?)?;
        let mask = attention_mask.map(|m| padding_mask(OP, m, (b, s))).transpose()?;
        for layer in &self.layers {
            x = layer.forward(&x, mask.as_ref(), &self.config, &self.dropout)?;
        }
        let pooler_output = match &self.pooler {
            Some(p) => Some(p.forward(&x.narrow(1, 0, 1)?.squeeze(1)?)?.tanh()),
            None => None,
        };
        Ok(BertOutput { last_hidden_state: x, pooler_output })
    }
}

impl Module for BertModel {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("embeddings.word_embeddings", &self.word_embeddings, f);
        visit_child("embeddings.position_embeddings", &self.position_embeddings, f);
        visit_child("embeddings.token_type_embeddings", &self.token_type_embeddings, f);
        visit_child("embeddings.LayerNorm", &self.embeddings_norm, f);
        visit_layers("encoder.layer", &self.layers, f);
        if let Some(p) = &self.pooler {
            visit_child("pooler.dense", p, f);
        }
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("embeddings.word_embeddings", &mut self.word_embeddings, f);
        visit_child_mut("embeddings.position_embeddings", &mut self.position_embeddings, f);
        visit_child_mut("embeddings.token_type_embeddings", &mut self.token_type_embeddings, f);
        visit_child_mut("embeddings.LayerNorm", &mut self.embeddings_norm, f);
        visit_layers_mut("encoder.layer", &mut self.layers, f);
        if let Some(p) = &mut self.pooler {
            visit_child_mut("pooler.dense", p, f);
        }
    }

    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
    }
}

impl DenseLayers for BertModel {
    fn visit_dense_mut(&mut self, f: &mut dyn FnMut(&str, &mut Dense)) {
        for (i, l) in self.layers.iter_mut().enumerate() {
            let p = format!("encoder.layer.{i}");
            f(&format!("{p}.attention.self.query"), &mut l.query);
            f(&format!("{p}.attention.self.key"), &mut l.key);
            f(&format!("{p}.attention.self.value"), &mut l.value);
            f(&format!("{p}.attention.output.dense"), &mut l.attention_output);
            f(&format!("{p}.intermediate.dense"), &mut l.intermediate);
            f(&format!("{p}.output.dense"), &mut l.output);
        }
        if let Some(p) = &mut self.pooler {
            f("pooler.dense", p);
        }
    }
}

/// `BertForSequenceClassification`: the encoder under `bert.` and `classifier` on the pooled
/// output (dropout between them in training mode).
pub struct BertForSequenceClassification {
    /// The encoder (`bert.*`), built with its pooler.
    pub bert: BertModel,
    /// `classifier`, `[num_labels, hidden]`.
    pub classifier: Dense,
}

impl BertForSequenceClassification {
    /// A randomly initialized model with `num_labels` classes.
    ///
    /// # Errors
    /// As [`BertModel::new`]; `InvalidArgument` for zero labels.
    pub fn new(mut config: BertConfig, num_labels: usize, rng: &mut Rng) -> Result<BertForSequenceClassification> {
        if num_labels == 0 {
            return fail(ErrorKind::InvalidArgument {
                op: "BertForSequenceClassification::new",
                arg: "num_labels",
                reason: "must be positive".into(),
            });
        }
        config.add_pooling_layer = true;
        let std = config.initializer_range;
        let bert = BertModel::new(config, rng)?;
        let classifier = dense(bert.config.hidden_size, num_labels, std, rng)?;
        Ok(BertForSequenceClassification { bert, classifier })
    }

    /// Class logits `[B, num_labels]`.
    ///
    /// # Errors
    /// As [`BertModel::forward`].
    pub fn forward(
        &self,
        input_ids: &Indices,
        token_type_ids: Option<&Indices>,
        attention_mask: Option<&Indices>,
    ) -> Result<Tensor> {
        let out = self.bert.forward(input_ids, token_type_ids, attention_mask)?;
        let pooled = out.pooler_output.expect("the classification model builds its pooler");
        self.classifier.forward(&self.bert.dropout.forward(&pooled)?)
    }
}

impl Module for BertForSequenceClassification {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("bert", &self.bert, f);
        visit_child("classifier", &self.classifier, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("bert", &mut self.bert, f);
        visit_child_mut("classifier", &mut self.classifier, f);
    }

    fn set_training(&mut self, training: bool) {
        self.bert.set_training(training);
    }
}

impl DenseLayers for BertForSequenceClassification {
    fn visit_dense_mut(&mut self, f: &mut dyn FnMut(&str, &mut Dense)) {
        self.bert.visit_dense_mut(&mut |n, d| f(&format!("bert.{n}"), d));
        f("classifier", &mut self.classifier);
    }
}
