//! LoRA (low-rank adaptation, PEFT's conventions): adapters on chosen [`Dense`] layers, the
//! base weights frozen as constants, adapters saved and loaded apart from the base model, and
//! merged into the base for inference. An embedding table takes one too
//! ([`crate::nn::Embedding::add_lora`], PEFT's `lora_embedding_A` / `lora_embedding_B`): the
//! functions here freeze, save and load it with the others; it merges with
//! [`crate::nn::Embedding::merge_lora`].
//!
//! ```
//! use forgia::models::bert::{BertConfig, BertModel};
//! use forgia::models::lora;
//! use forgia::nn::Module;
//! use forgia::Rng;
//! let config = BertConfig { vocab_size: 50, hidden_size: 8, num_hidden_layers: 1,
//!     num_attention_heads: 2, intermediate_size: 16, ..BertConfig::default() };
//! let mut model = BertModel::new(config, &mut Rng::new(0))?;
//! let wrapped = lora::add_lora(&mut model, &["query", "value"], 4, 8.0, &mut Rng::new(1))?;
//! assert_eq!(wrapped, 2);
//! lora::freeze_base(&mut model);
//! let trainable: usize = model.named_parameters().iter().filter(|(_, t)| t.is_variable()).map(|(_, t)| t.numel()).sum();
//! assert_eq!(trainable, 2 * (4 * 8 + 8 * 4));
//! # Ok::<(), forgia::Error>(())
//! ```

use std::path::Path;

use super::dense::Dense;
use super::DenseLayers;
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::io::{load_hf, save_hf, HfNames};
use crate::nn::Module;
use crate::tensor::Rng;

/// The prefix PEFT gives adapter names in `adapter_model.safetensors`.
pub const PEFT_PREFIX: &str = "base_model.model.";

/// True for an adapter parameter's name (`….lora_A.weight`, `….lora_B.weight`, and an
/// embedding's `….lora_embedding_A`, `….lora_embedding_B`).
pub fn is_adapter(name: &str) -> bool {
    name.contains("lora_A.")
        || name.contains("lora_B.")
        || name.ends_with("lora_embedding_A")
        || name.ends_with("lora_embedding_B")
}

/// Adds a fresh adapter (rank `rank`, scaling `alpha / rank`) to every [`Dense`] layer whose
/// dotted name is one of `targets` or ends with `.target` (PEFT's `target_modules`), in the
/// model's layer order. Returns how many layers were wrapped.
///
/// # Errors
/// `InvalidArgument` when no layer matches, for rank 0 or a non-finite `alpha`.
pub fn add_lora(
    model: &mut dyn DenseLayers,
    targets: &[&str],
    rank: usize,
    alpha: f32,
    rng: &mut Rng,
) -> Result<usize> {
    let mut n = 0;
    let mut failure = None;
    model.visit_dense_mut(&mut |name, d| {
        let hit = targets.iter().any(|t| name == *t || name.ends_with(&format!(".{t}")));
        if hit && failure.is_none() {
            match d.add_lora(rank, alpha, rng) {
                Ok(()) => n += 1,
                Err(e) => failure = Some(e),
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    if n == 0 {
        return fail(ErrorKind::InvalidArgument {
            op: "lora::add_lora",
            arg: "targets",
            reason: format!("no layer matches {targets:?}"),
        });
    }
    Ok(n)
}

/// Makes every parameter that is not an adapter a constant (same values and storage, no
/// gradient node): backward then does no work for the base weights and optimizers skip them.
pub fn freeze_base(model: &mut dyn Module) {
    model.visit_params_mut(&mut |name, p| {
        if !is_adapter(name) {
            *p = p.detach();
        }
    });
}

/// Folds every adapter into its base weight and removes it (see [`Dense::merge_lora`]).
///
/// # Errors
/// Only on internal shape errors.
pub fn merge_lora(model: &mut dyn DenseLayers) -> Result<()> {
    let mut failure = None;
    model.visit_dense_mut(&mut |_, d: &mut Dense| {
        if failure.is_none() {
            failure = d.merge_lora().err();
        }
    });
    failure.map_or(Ok(()), Err)
}

/// A module's adapter parameters alone.
struct Adapters<'a, M: ?Sized>(&'a mut M);

impl<M: Module + ?Sized> Module for Adapters<'_, M> {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        self.0.visit_params(&mut |n, t| {
            if is_adapter(n) {
                f(n, t)
            }
        });
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        self.0.visit_params_mut(&mut |n, t| {
            if is_adapter(n) {
                f(n, t)
            }
        });
    }
}

/// Writes only the adapters, under PEFT's names (`base_model.model.<layer>.lora_A.weight`).
///
/// # Errors
/// As [`save_hf`].
pub fn save_adapters(path: impl AsRef<Path>, model: &mut dyn Module) -> Result<()> {
    save_hf(path, &Adapters(model), &HfNames::new().file_prefix(PEFT_PREFIX))
}

/// Loads adapters written by [`save_adapters`] (or PEFT) into a model that has adapters on
/// the same layers: every adapter must be in the file with its shape, and the file must hold
/// nothing else. The base weights are untouched.
///
/// # Errors
/// As [`load_hf`].
pub fn load_adapters(model: &mut dyn Module, path: impl AsRef<Path>) -> Result<()> {
    load_hf(&mut Adapters(model), path, &HfNames::new().file_prefix(PEFT_PREFIX)).map(|_| ())
}
