//! A module's parameters, and a whole training state (parameters plus optimizer state under
//! `optim.`), to and from safetensors files. Loads validate everything, then assign.

use std::collections::HashMap;
use std::path::Path;

use super::file::{checkpoint_error, load, save};
use crate::autograd::no_grad;
use crate::autograd::Tensor;
use crate::error::Result;
use crate::nn::{Module, Seen};
use crate::optim::Optimizer;

/// The prefix of optimizer entries in a checkpoint.
const OPTIM_PREFIX: &str = "optim.";

/// Writes `model`'s parameters under their dotted names (atomically, see [`save`]). A tied
/// parameter is written once, under its first name (see [`Module::named_parameters`]); loading
/// into a model built with the same tie restores it.
///
/// # Errors
/// As [`save`] (a repeated parameter name is a `Checkpoint` error).
pub fn save_model(path: impl AsRef<Path>, model: &dyn Module) -> Result<()> {
    let params = model.named_parameters();
    let refs: Vec<(&str, &Tensor)> = params.iter().map(|(n, t)| (n.as_str(), t)).collect();
    save(path, &refs)
}

/// Loads a file written by [`save_model`] into `model`: the file must hold exactly the
/// module's parameter names with the same shapes. Everything is checked before any value is
/// assigned, so on an error the module is unchanged. Values are copied into the existing
/// variables (their identity and gradients are kept).
///
/// # Errors
/// `Io` / `Checkpoint` as [`load`]; `Checkpoint` naming a missing, unexpected or mis-shaped
/// tensor, or a parameter that is an op result rather than a variable.
pub fn load_into(model: &mut dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let tensors = load(path)?;
    let map = index(path, &tensors)?;
    check_params(path, model, &map)?;
    assign(path, model, &map)
}

/// Writes a training checkpoint: `model`'s parameters, and `optimizer`'s state under the
/// prefix `optim.` (`optim.lr`, `optim.step`, `optim.<param>.exp_avg`, …).
///
/// # Errors
/// As [`save`]; `Checkpoint` when a parameter name itself starts with `optim.`.
pub fn save_checkpoint(path: impl AsRef<Path>, model: &dyn Module, optimizer: &dyn Optimizer) -> Result<()> {
    let path = path.as_ref();
    let params = model.named_parameters();
    if let Some((n, _)) = params.iter().find(|(n, _)| n.starts_with(OPTIM_PREFIX)) {
        return Err(checkpoint_error(path, format!("parameter name {n:?} clashes with the optimizer prefix")));
    }
    let state: Vec<(String, Tensor)> =
        optimizer.state().into_iter().map(|(k, t)| (format!("{OPTIM_PREFIX}{k}"), t)).collect();
    let refs: Vec<(&str, &Tensor)> = params.iter().chain(&state).map(|(n, t)| (n.as_str(), t)).collect();
    save(path, &refs)
}

/// Loads a checkpoint written by [`save_checkpoint`] into `model` and `optimizer`. Both are
/// validated in full (names, shapes, optimizer entries) before either changes: on an error
/// neither is modified.
///
/// # Errors
/// As [`load_into`]; `Checkpoint` wrapping the optimizer's reason for rejecting its state.
pub fn load_checkpoint(model: &mut dyn Module, optimizer: &mut dyn Optimizer, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let tensors = load(path)?;
    let (state, params): (Vec<_>, Vec<_>) = tensors.into_iter().partition(|(n, _)| n.starts_with(OPTIM_PREFIX));
    let map = index(path, &params)?;
    check_params(path, model, &map)?;
    let state: Vec<(String, Tensor)> =
        state.into_iter().map(|(n, t)| (n[OPTIM_PREFIX.len()..].to_string(), t)).collect();
    // The model's shapes equal the file's now, so the optimizer checks against the final shapes.
    optimizer.load_state(model, &state).map_err(|e| checkpoint_error(path, format!("optimizer state: {e}")))?;
    assign(path, model, &map)
}

fn index<'a>(path: &Path, tensors: &'a [(String, Tensor)]) -> Result<HashMap<&'a str, &'a Tensor>> {
    let mut map = HashMap::with_capacity(tensors.len());
    for (n, t) in tensors {
        if map.insert(n.as_str(), t).is_some() {
            return Err(checkpoint_error(path, format!("tensor {n:?} appears twice")));
        }
    }
    Ok(map)
}

/// Checks that `map` holds exactly `model`'s parameters, shape for shape, and that each
/// parameter can be written (a variable or a constant, not an op result).
fn check_params(path: &Path, model: &dyn Module, map: &HashMap<&str, &Tensor>) -> Result<()> {
    let mut problem: Option<String> = None;
    let mut matched = 0usize;
    let mut seen = Seen::default();
    model.visit_params(&mut |name, p| {
        if problem.is_some() || !seen.first(p) {
            return;
        }
        problem = match map.get(name) {
            None => Some(format!("missing tensor {name:?}")),
            Some(t) if t.shape() != p.shape() => {
                Some(format!("tensor {name:?} has shape {:?}, the parameter has {:?}", t.shape(), p.shape()))
            }
            Some(_) if p.requires_grad() && !p.is_variable() => Some(format!("parameter {name:?} is not a variable")),
            Some(_) => {
                matched += 1;
                None
            }
        };
    });
    if let Some(reason) = problem {
        return Err(checkpoint_error(path, reason));
    }
    if matched != map.len() {
        let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
        let mut extra: Vec<&str> = map.keys().copied().filter(|k| !names.iter().any(|n| n == k)).collect();
        extra.sort_unstable();
        let reason = if extra.is_empty() {
            "the module names one parameter twice".to_string()
        } else {
            format!("unexpected tensors {extra:?}")
        };
        return Err(checkpoint_error(path, reason));
    }
    Ok(())
}

/// Copies validated values into the parameters (recording off, so variables can be written).
pub(super) fn assign(path: &Path, model: &mut dyn Module, map: &HashMap<&str, &Tensor>) -> Result<()> {
    let _guard = no_grad();
    let mut failure = None;
    let mut seen = Seen::default();
    model.visit_params_mut(&mut |name, p| {
        if !seen.first(p) {
            return; // a tied parameter's second name: written through its first
        }
        if let (None, Some(t)) = (&failure, map.get(name)) {
            if let Err(e) = p.with_data_mut(|data| t.with_data(|src| data.copy_from_slice(src))) {
                failure = Some(e);
            }
        }
    });
    match failure {
        // Unreachable after `check_params`; reported rather than panicking.
        Some(e) => Err(checkpoint_error(path, format!("assigning parameters: {e}"))),
        None => Ok(()),
    }
}
