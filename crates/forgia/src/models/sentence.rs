//! Sentence embeddings as sentence-transformers computes them: a [`BertModel`] encoder, a
//! pooling of its token states (`1_Pooling/config.json`), and an optional L2 normalization
//! (a `Normalize` module in `modules.json`). all-MiniLM-L6-v2 is this with mean pooling and
//! normalization.

use std::path::Path;

use super::bert::{BertConfig, BertModel};
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::io::{load_hf, HfConfig, HfNames};
use crate::ops::index::Indices;
use crate::tensor::Rng;

/// How token states become one vector per sentence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over the tokens the attention mask keeps (`pooling_mode_mean_tokens`).
    Mean,
    /// The first token's state (`pooling_mode_cls_token`).
    Cls,
    /// The elementwise maximum over kept tokens (`pooling_mode_max_tokens`).
    Max,
}

impl Pooling {
    /// Reads a sentence-transformers `1_Pooling/config.json`.
    ///
    /// # Errors
    /// `Checkpoint` for a bad key; `InvalidArgument` when no supported mode, or more than one
    /// mode, is on.
    pub fn from_config(c: &HfConfig) -> Result<Pooling> {
        let modes = [
            ("pooling_mode_mean_tokens", Pooling::Mean),
            ("pooling_mode_cls_token", Pooling::Cls),
            ("pooling_mode_max_tokens", Pooling::Max),
        ];
        let mut on = Vec::new();
        for (key, mode) in modes {
            if c.bool_or(key, false)? {
                on.push(mode);
            }
        }
        if on.len() != 1 || c.bool_or("pooling_mode_mean_sqrt_len_tokens", false)? {
            return fail(ErrorKind::InvalidArgument {
                op: "Pooling::from_config",
                arg: "pooling",
                reason: "exactly one of mean / cls / max pooling must be on".into(),
            });
        }
        Ok(on[0])
    }

    /// Pools `hidden [B, S, H]` under `mask [B, S]` (1 = token) into `[B, H]`.
    ///
    /// Backward: mean pooling is `Σ_s m_s h_s / Σ_s m_s`, linear in `h`; cls is a slice; max
    /// routes the gradient to the chosen token.
    ///
    /// # Errors
    /// `ShapeMismatch` when the mask is not `[B, S]`.
    pub fn apply(self, hidden: &Tensor, mask: &Indices) -> Result<Tensor> {
        let s = hidden.shape().to_vec();
        if s.len() != 3 || mask.shape() != &s[..2] {
            return fail(ErrorKind::ShapeMismatch { op: "Pooling::apply", lhs: s, rhs: mask.shape().to_vec() });
        }
        let m: Vec<f32> = mask.data().iter().map(|&v| v as f32).collect();
        let m = Tensor::from_vec(m, &[s[0], s[1], 1])?;
        match self {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1),
            Pooling::Mean => {
                // sentence-transformers clamps the count at 1e-9.
                let count = m.sum(1, false)?.clamp(1e-9, f32::INFINITY)?;
                hidden.mul(&m)?.sum(1, false)?.div(&count)
            }
            Pooling::Max => {
                // Masked tokens are set to -1e9 first, as sentence-transformers does.
                let keep = m.broadcast_to(&s)?;
                hidden.mul(&keep)?.add(&keep.sub_scalar(1.0).scale(1e9))?.max(1, false)
            }
        }
    }
}

/// A sentence-transformers model: encoder, pooling, optional normalization.
pub struct SentenceEncoder {
    /// The encoder (its pooler is not used).
    pub bert: BertModel,
    /// The pooling.
    pub pooling: Pooling,
    /// Whether embeddings are divided by their L2 norm.
    pub normalize: bool,
}

impl SentenceEncoder {
    /// Loads a sentence-transformers folder: `config.json`, `model.safetensors` (names with or
    /// without `bert.`; a task head's `classifier.*` / `cls.*` entries are skipped),
    /// `1_Pooling/config.json` (mean pooling when absent) and `modules.json` (normalization
    /// when it lists a `Normalize` module).
    ///
    /// # Errors
    /// `Io` / `Checkpoint` for a missing or bad file (naming it, and any missing, extra or
    /// mis-shaped tensor).
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<SentenceEncoder> {
        let dir = dir.as_ref();
        let config = BertConfig::from_hf(&HfConfig::from_file(dir.join("config.json"))?)?;
        let mut bert = BertModel::new(config, &mut Rng::new(0))?;
        // A task head saved with the encoder (`classifier.*`, `cls.*`) is not part of it.
        let names = HfNames::new().file_prefix("bert.").ignore("classifier.").ignore("cls.");
        load_hf(&mut bert, dir.join("model.safetensors"), &names)?;
        let pooling_path = dir.join("1_Pooling").join("config.json");
        let pooling = if pooling_path.exists() {
            Pooling::from_config(&HfConfig::from_file(pooling_path)?)?
        } else {
            Pooling::Mean
        };
        let modules = dir.join("modules.json");
        let normalize = modules.exists()
            && std::fs::read_to_string(&modules)
                .map_err(|source| {
                    crate::error::Error::from(ErrorKind::Io { path: modules.display().to_string(), source })
                })?
                .contains("sentence_transformers.models.Normalize");
        Ok(SentenceEncoder { bert, pooling, normalize })
    }

    /// Embeddings `[B, H]` of tokenized sentences `input_ids [B, S]` with their
    /// `attention_mask` (token types 0).
    ///
    /// # Errors
    /// As [`BertModel::forward`].
    pub fn embed(&self, input_ids: &Indices, attention_mask: &Indices) -> Result<Tensor> {
        let out = self.bert.forward(input_ids, None, Some(attention_mask))?;
        let pooled = self.pooling.apply(&out.last_hidden_state, attention_mask)?;
        if !self.normalize {
            return Ok(pooled);
        }
        // torch.nn.functional.normalize: x / max(‖x‖, 1e-12).
        let norm = pooled.square().sum(1, true)?.sqrt().clamp(1e-12, f32::INFINITY)?;
        pooled.div(&norm)
    }
}
