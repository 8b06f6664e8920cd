//! The Hugging Face checkpoint format: `model.safetensors` with `transformers`' parameter
//! names (loaded with a prefix stripped or added and a user name map, written back under the
//! same names), and `config.json` ([`HfConfig`]).
//!
//! # Which entries load
//! - Float entries (F16, BF16, F32, F64) are parameter values, converted to f32. Each one must
//!   name a parameter of the module (after the renaming below) with the same shape, and every
//!   parameter must be given: a missing, unexpected or mis-shaped tensor is an error naming
//!   it. Entries under an [`HfNames::ignore`] prefix are skipped (for example GPT-2's old
//!   `attn.bias` mask buffers, or a pooler the model does not build).
//! - Integer and boolean entries are index data, never parameter values: buffers such as
//!   BERT's `embeddings.position_ids` or BatchNorm's `num_batches_tracked`, which forgia
//!   recomputes. They are skipped and listed in [`HfLoadReport::skipped`]; an integer entry
//!   under a parameter's name is an error.
//!
//! # Renaming
//! A file name is first looked up in [`HfNames::map`] (file name → module name); otherwise
//! [`HfNames::file_prefix`] is stripped when present (so `bert.encoder…` and `encoder…` both
//! load into a `BertModel`), then [`HfNames::model_prefix`] is prepended. Saving applies the
//! inverse, so [`save_hf`] writes the names [`load_hf`] reads.
//!
//! ```
//! use forgia::io::{self, HfNames};
//! use forgia::nn::{Linear, Module};
//! use forgia::Rng;
//! let dir = std::env::temp_dir().join(format!("forgia-doc-hf-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("model.safetensors");
//! let a = Linear::new(3, 2, true, &mut Rng::new(1))?;
//! let names = HfNames::new().file_prefix("classifier.");
//! io::save_hf(&path, &a, &names)?; // writes classifier.weight, classifier.bias
//! let mut b = Linear::new(3, 2, true, &mut Rng::new(2))?;
//! io::load_hf(&mut b, &path, &names)?;
//! assert_eq!(a.weight.to_vec(), b.weight.to_vec());
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), forgia::Error>(())
//! ```

use std::collections::HashMap;
use std::path::Path;

use super::checkpoint::assign;
use super::dtype::Entry;
use super::file::{checkpoint_error, load_entries, save_with_metadata};
use crate::autograd::Tensor;
use crate::error::{Error, ErrorKind, Result};
use crate::nn::{Module, Seen};

/// How the names in a file relate to a module's parameter names (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct HfNames {
    /// A prefix the file's names carry and the module's do not (`"bert."`, `"model."`):
    /// stripped on load when present, added on save.
    pub file_prefix: Option<String>,
    /// A prefix the module's names carry and the file's do not: added on load, stripped on save.
    pub model_prefix: Option<String>,
    /// Explicit pairs `(file name, module name)`, applied before the prefixes.
    pub map: Vec<(String, String)>,
    /// File names starting with any of these (after renaming) are skipped on load.
    pub ignore: Vec<String>,
}

impl HfNames {
    /// The identity: file names are module names.
    pub fn new() -> HfNames {
        HfNames::default()
    }

    /// Sets [`HfNames::file_prefix`].
    pub fn file_prefix(mut self, prefix: &str) -> HfNames {
        self.file_prefix = Some(prefix.to_string());
        self
    }

    /// Sets [`HfNames::model_prefix`].
    pub fn model_prefix(mut self, prefix: &str) -> HfNames {
        self.model_prefix = Some(prefix.to_string());
        self
    }

    /// Adds a pair to [`HfNames::map`].
    pub fn rename(mut self, file_name: &str, model_name: &str) -> HfNames {
        self.map.push((file_name.to_string(), model_name.to_string()));
        self
    }

    /// Adds a prefix to [`HfNames::ignore`].
    pub fn ignore(mut self, prefix: &str) -> HfNames {
        self.ignore.push(prefix.to_string());
        self
    }

    /// The module name a file name loads into.
    pub fn to_model(&self, file_name: &str) -> String {
        if let Some((_, m)) = self.map.iter().find(|(f, _)| f == file_name) {
            return m.clone();
        }
        let stripped = match &self.file_prefix {
            Some(p) => file_name.strip_prefix(p.as_str()).unwrap_or(file_name),
            None => file_name,
        };
        format!("{}{stripped}", self.model_prefix.as_deref().unwrap_or(""))
    }

    /// The file name a module parameter is saved under (the inverse of [`HfNames::to_model`]).
    pub fn to_file(&self, model_name: &str) -> String {
        if let Some((f, _)) = self.map.iter().find(|(_, m)| m == model_name) {
            return f.clone();
        }
        let stripped = match &self.model_prefix {
            Some(p) => model_name.strip_prefix(p.as_str()).unwrap_or(model_name),
            None => model_name,
        };
        format!("{}{stripped}", self.file_prefix.as_deref().unwrap_or(""))
    }

    fn ignored(&self, file_name: &str, model_name: &str) -> bool {
        self.ignore.iter().any(|p| file_name.starts_with(p.as_str()) || model_name.starts_with(p.as_str()))
    }
}

/// What [`load_hf`] left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HfLoadReport {
    /// Integer entries skipped as index data (file names).
    pub skipped: Vec<String>,
    /// Float entries skipped by an [`HfNames::ignore`] prefix (file names).
    pub ignored: Vec<String>,
}

/// Loads a Hugging Face `model.safetensors` into `model` under the renaming of `names`.
/// Everything is checked before any value is assigned, so on an error the module is
/// unchanged; values are copied into the existing variables.
///
/// # Errors
/// `Io` / `Checkpoint` as [`load_entries`]; `Checkpoint` naming a missing parameter (with the
/// file name it was looked up under), an unexpected or mis-shaped tensor, an integer entry
/// under a parameter's name, or two entries that rename to one parameter.
pub fn load_hf(model: &mut dyn Module, path: impl AsRef<Path>, names: &HfNames) -> Result<HfLoadReport> {
    let path = path.as_ref();
    let entries = load_entries(path)?;
    let params: HashMap<String, Vec<usize>> =
        model.named_parameters().into_iter().map(|(n, t)| (n, t.shape().to_vec())).collect();
    let mut report = HfLoadReport::default();
    let mut values: HashMap<String, Tensor> = HashMap::new();
    let mut unexpected = Vec::new();
    for (file_name, entry) in entries {
        let model_name = names.to_model(&file_name);
        let err = |reason: String| Err(checkpoint_error(path, reason));
        match (entry, params.get(&model_name)) {
            (Entry::Int(_), Some(_)) => {
                return err(format!("tensor {file_name:?} holds integers but names the parameter {model_name:?}"))
            }
            (Entry::Int(_), None) => report.skipped.push(file_name),
            (Entry::Float(_), None) if names.ignored(&file_name, &model_name) => report.ignored.push(file_name),
            (Entry::Float(_), None) => unexpected.push(file_name),
            (Entry::Float(t), Some(shape)) => {
                if t.shape() != shape.as_slice() {
                    return err(format!(
                        "tensor {file_name:?} has shape {:?}, the parameter {model_name:?} has {shape:?}",
                        t.shape()
                    ));
                }
                if values.insert(model_name.clone(), t).is_some() {
                    return err(format!("two tensors load into the parameter {model_name:?} (one is {file_name:?})"));
                }
            }
        }
    }
    if !unexpected.is_empty() {
        return Err(checkpoint_error(path, format!("unexpected tensors {unexpected:?}")));
    }
    let mut missing: Vec<String> = params.keys().filter(|n| !values.contains_key(*n)).cloned().collect();
    if !missing.is_empty() {
        missing.sort();
        let looked: Vec<String> = missing.iter().map(|m| names.to_file(m)).collect();
        return Err(checkpoint_error(path, format!("missing tensors {missing:?} (looked up as {looked:?})")));
    }
    check_variables(path, model)?;
    let map: HashMap<&str, &Tensor> = values.iter().map(|(n, t)| (n.as_str(), t)).collect();
    assign(path, model, &map)?;
    Ok(report)
}

/// Every parameter can be written: a variable or a constant, not an op result.
fn check_variables(path: &Path, model: &dyn Module) -> Result<()> {
    let mut bad = None;
    let mut seen = Seen::default();
    model.visit_params(&mut |name, p| {
        if bad.is_none() && seen.first(p) && p.requires_grad() && !p.is_variable() {
            bad = Some(name.to_string());
        }
    });
    match bad {
        Some(n) => Err(checkpoint_error(path, format!("parameter {n:?} is not a variable"))),
        None => Ok(()),
    }
}

/// Writes `model`'s parameters (a tied one once) under the file names of `names`, as an F32
/// safetensors file with the `format: pt` metadata `transformers` expects, atomically.
///
/// # Errors
/// As [`save`](super::save); `Checkpoint` when two parameters map to one file name.
pub fn save_hf(path: impl AsRef<Path>, model: &dyn Module, names: &HfNames) -> Result<()> {
    let params = model.named_parameters();
    let renamed: Vec<(String, &Tensor)> = params.iter().map(|(n, t)| (names.to_file(n), t)).collect();
    save_with_metadata(path.as_ref(), &renamed, &[("format", "pt")])
}

/// A model's `config.json`: typed reads of its keys, each failing with the key's name.
#[derive(Clone, Debug)]
pub struct HfConfig {
    value: serde_json::Value,
    source: String,
}

impl HfConfig {
    /// Reads and parses a `config.json`.
    ///
    /// # Errors
    /// `Io` when it cannot be read; `Checkpoint` when it is not a JSON object.
    pub fn from_file(path: impl AsRef<Path>) -> Result<HfConfig> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|source| Error::from(ErrorKind::Io { path: path.display().to_string(), source }))?;
        HfConfig::parse(&text, &path.display().to_string())
    }

    /// Parses JSON text; `source` names it in errors.
    ///
    /// # Errors
    /// `Checkpoint` when the text is not a JSON object.
    pub fn parse(text: &str, source: &str) -> Result<HfConfig> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| checkpoint_error(Path::new(source), format!("config is not valid JSON: {e}")))?;
        if !value.is_object() {
            return Err(checkpoint_error(Path::new(source), "config is not a JSON object"));
        }
        Ok(HfConfig { value, source: source.to_string() })
    }

    fn bad(&self, key: &str, what: &str) -> Error {
        checkpoint_error(Path::new(&self.source), format!("config key {key:?}: {what}"))
    }

    /// True when `key` is present and not null.
    pub fn has(&self, key: &str) -> bool {
        self.value.get(key).is_some_and(|v| !v.is_null())
    }

    /// A nested object (such as `rope_parameters`), `None` when absent or null.
    ///
    /// # Errors
    /// `Checkpoint` naming the key when it is present but not an object.
    pub fn section(&self, key: &str) -> Result<Option<HfConfig>> {
        match self.value.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) if v.is_object() => {
                Ok(Some(HfConfig { value: v.clone(), source: format!("{} [{key}]", self.source) }))
            }
            Some(_) => Err(self.bad(key, "not an object")),
        }
    }

    /// A non-negative integer.
    ///
    /// # Errors
    /// `Checkpoint` naming the key when it is missing or not a non-negative integer.
    pub fn usize(&self, key: &str) -> Result<usize> {
        let v = self.value.get(key).ok_or_else(|| self.bad(key, "missing"))?;
        v.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| self.bad(key, "not a non-negative integer"))
    }

    /// An array of non-negative integers (such as ResNet's `depths`).
    ///
    /// # Errors
    /// `Checkpoint` naming the key when it is missing or not such an array.
    pub fn usize_list(&self, key: &str) -> Result<Vec<usize>> {
        let v = self.value.get(key).ok_or_else(|| self.bad(key, "missing"))?;
        let items = v.as_array().ok_or_else(|| self.bad(key, "not an array"))?;
        items
            .iter()
            .map(|x| x.as_u64().and_then(|n| usize::try_from(n).ok()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| self.bad(key, "not an array of non-negative integers"))
    }

    /// A number, as f32.
    ///
    /// # Errors
    /// `Checkpoint` naming the key when it is missing or not a number.
    pub fn f32(&self, key: &str) -> Result<f32> {
        let v = self.value.get(key).ok_or_else(|| self.bad(key, "missing"))?;
        v.as_f64().map(|x| x as f32).ok_or_else(|| self.bad(key, "not a number"))
    }

    /// A string.
    ///
    /// # Errors
    /// `Checkpoint` naming the key when it is missing or not a string.
    pub fn str(&self, key: &str) -> Result<&str> {
        let v = self.value.get(key).ok_or_else(|| self.bad(key, "missing"))?;
        v.as_str().ok_or_else(|| self.bad(key, "not a string"))
    }

    /// A boolean.
    ///
    /// # Errors
    /// `Checkpoint` naming the key when it is missing or not a boolean.
    pub fn bool(&self, key: &str) -> Result<bool> {
        let v = self.value.get(key).ok_or_else(|| self.bad(key, "missing"))?;
        v.as_bool().ok_or_else(|| self.bad(key, "not a boolean"))
    }

    /// [`HfConfig::usize`] when the key is present, else `default`.
    ///
    /// # Errors
    /// As [`HfConfig::usize`] for a present key of the wrong type.
    pub fn usize_or(&self, key: &str, default: usize) -> Result<usize> {
        if self.has(key) {
            self.usize(key)
        } else {
            Ok(default)
        }
    }

    /// [`HfConfig::f32`] when the key is present, else `default`.
    ///
    /// # Errors
    /// As [`HfConfig::f32`] for a present key of the wrong type.
    pub fn f32_or(&self, key: &str, default: f32) -> Result<f32> {
        if self.has(key) {
            self.f32(key)
        } else {
            Ok(default)
        }
    }

    /// [`HfConfig::str`] when the key is present, else `default`.
    ///
    /// # Errors
    /// As [`HfConfig::str`] for a present key of the wrong type.
    pub fn str_or<'a>(&'a self, key: &str, default: &'a str) -> Result<&'a str> {
        if self.has(key) {
            self.str(key)
        } else {
            Ok(default)
        }
    }

    /// [`HfConfig::bool`] when the key is present, else `default`.
    ///
    /// # Errors
    /// As [`HfConfig::bool`] for a present key of the wrong type.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        if self.has(key) {
            self.bool(key)
        } else {
            Ok(default)
        }
    }
}
