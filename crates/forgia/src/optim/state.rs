//! Per-parameter optimizer state keyed by name, its named-tensor form (save / validated load),
//! and the check-then-update driver every optimizer's `step` runs through.

use std::collections::{BTreeMap, HashMap};

use crate::autograd::no_grad;
use crate::autograd::Tensor;
use crate::error::{check, fail, Error, ErrorKind, Result};
use crate::nn::{Module, Seen};

/// The state of one parameter: its step count, its shape, and one buffer per slot (empty until
/// the optimizer first writes it).
pub(super) struct ParamState {
    pub(super) step: u64,
    pub(super) shape: Vec<usize>,
    pub(super) bufs: Vec<Vec<f32>>,
}

/// The whole state of an optimizer: learning rate, steps taken, and per-parameter buffers
/// named by `slots`.
pub(super) struct SlotState {
    slots: &'static [&'static str],
    per_param_step: bool,
    pub(super) lr: f32,
    pub(super) steps: u64,
    pub(super) params: BTreeMap<String, ParamState>,
}

/// Counts are stored as two exact f32 integers `[high, low]` of 24 bits each.
const COUNT_SPLIT: u64 = 1 << 24;

fn encode_count(n: u64) -> Tensor {
    Tensor::from_parts(vec![(n / COUNT_SPLIT) as f32, (n % COUNT_SPLIT) as f32], &[2])
}

fn decode_count(key: &str, t: &Tensor) -> Result<u64> {
    let v = t.to_vec();
    let ok = t.shape() == [2] && v.iter().all(|x| x.is_finite() && *x >= 0.0 && x.fract() == 0.0) && v[1] < 1.6777216e7;
    if !ok {
        return Err(bad(format!("{key} must be a [2] tensor of a non-negative integer count")));
    }
    Ok(v[0] as u64 * COUNT_SPLIT + v[1] as u64)
}

fn bad(reason: String) -> Error {
    Error::from(ErrorKind::InvalidArgument { op: "load_state", arg: "state", reason })
}

impl SlotState {
    pub(super) fn new(slots: &'static [&'static str], per_param_step: bool, lr: f32) -> SlotState {
        SlotState { slots, per_param_step, lr, steps: 0, params: BTreeMap::new() }
    }

    /// True when parameters keep any state at all.
    fn stateful(&self) -> bool {
        !self.slots.is_empty() || self.per_param_step
    }

    /// The named-tensor form, sorted by name.
    pub(super) fn to_tensors(&self) -> Vec<(String, Tensor)> {
        let mut out = vec![("lr".to_string(), Tensor::scalar(self.lr)), ("step".to_string(), encode_count(self.steps))];
        for (name, st) in &self.params {
            for (slot, buf) in self.slots.iter().zip(&st.bufs) {
                if buf.len() == crate::tensor::layout::numel(&st.shape) {
                    out.push((format!("{name}.{slot}"), Tensor::from_parts(buf.clone(), &st.shape)));
                }
            }
            if self.per_param_step {
                out.push((format!("{name}.step"), encode_count(st.step)));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// A new state of the same kind read from `state`, checked against `model`'s parameters.
    pub(super) fn parse(&self, model: &dyn Module, state: &[(String, Tensor)]) -> Result<SlotState> {
        let mut shapes: HashMap<String, Vec<usize>> = HashMap::new();
        model.visit_params(&mut |name, t| {
            shapes.insert(name.to_string(), t.shape().to_vec());
        });
        let mut entries: HashMap<&str, &Tensor> = HashMap::new();
        for (k, t) in state {
            if entries.insert(k.as_str(), t).is_some() {
                return Err(bad(format!("duplicate entry {k:?}")));
            }
        }
        let lr = match entries.remove("lr") {
            Some(t) if t.numel() == 1 => {
                let lr = t.to_vec()[0];
                check::learning_rate("Optimizer::load_state", lr)?;
                lr
            }
            Some(_) => return Err(bad("lr must be one value".into())),
            None => return Err(bad("missing entry \"lr\"".into())),
        };
        let steps = decode_count("step", entries.remove("step").ok_or_else(|| bad("missing entry \"step\"".into()))?)?;
        let mut out = SlotState::new(self.slots, self.per_param_step, lr);
        out.steps = steps;
        let mut keys: Vec<&str> = entries.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            self.parse_entry(key, entries[key], &shapes, &mut out)?;
        }
        for (name, st) in &out.params {
            if st.bufs.iter().any(Vec::is_empty) || (self.per_param_step && st.step == u64::MAX) {
                return Err(bad(format!("incomplete state for parameter {name:?}")));
            }
        }
        Ok(out)
    }

    fn parse_entry(
        &self,
        key: &str,
        t: &Tensor,
        shapes: &HashMap<String, Vec<usize>>,
        out: &mut SlotState,
    ) -> Result<()> {
        let unknown = || bad(format!("unknown entry {key:?}"));
        let (param, slot) = key.rsplit_once('.').ok_or_else(unknown)?;
        let shape = shapes.get(param).ok_or_else(unknown)?;
        let is_step = self.per_param_step && slot == "step";
        let slot_index = self.slots.iter().position(|s| *s == slot);
        if (!is_step && slot_index.is_none()) || !self.stateful() {
            return Err(unknown());
        }
        let st = out.params.entry(param.to_string()).or_insert_with(|| ParamState {
            step: if self.per_param_step { u64::MAX } else { 0 },
            shape: shape.clone(),
            bufs: vec![Vec::new(); self.slots.len()],
        });
        match slot_index {
            Some(i) if !is_step => {
                if t.shape() != shape.as_slice() {
                    return Err(bad(format!("{key:?} has shape {:?}, parameter has {shape:?}", t.shape())));
                }
                st.bufs[i] = t.to_vec();
            }
            _ => st.step = decode_count(key, t)?,
        }
        Ok(())
    }
}

/// One optimizer step through `model`: first checks every parameter that has a gradient
/// (a variable or a constant, shape agreeing with its state), then, with recording off,
/// calls `update(param, grad, state)` for each. On a failed check nothing has changed.
pub(super) fn apply(
    op: &'static str,
    model: &mut dyn Module,
    state: &mut SlotState,
    mut update: impl FnMut(&mut [f32], &[f32], &mut ParamState),
) -> Result<()> {
    let mut first_err: Option<Error> = None;
    model.visit_params(&mut |name, p| {
        if first_err.is_some() || p.grad().is_none() {
            return;
        }
        if p.requires_grad() && !p.is_variable() {
            first_err = Some(ErrorKind::MutableDataRequiresNoGrad { op }.into());
        } else if let Some(st) = state.params.get(name).filter(|st| st.shape != p.shape()) {
            first_err = Some(ErrorKind::ShapeMismatch { op, lhs: st.shape.clone(), rhs: p.shape().to_vec() }.into());
        }
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    let _guard = no_grad();
    let stateful = state.stateful();
    let n_slots = state.slots.len();
    let mut scratch = ParamState { step: 0, shape: Vec::new(), bufs: vec![Vec::new(); n_slots] };
    // A parameter held twice (tied weights) is stepped once, under its first name.
    let mut seen = Seen::default();
    model.visit_params_mut(&mut |name, p| {
        let Some(g) = p.grad() else { return };
        if first_err.is_some() || !seen.first(p) {
            return;
        }
        let st = if stateful {
            state.params.entry(name.to_string()).or_insert_with(|| ParamState {
                step: 0,
                shape: p.shape().to_vec(),
                bufs: vec![Vec::new(); n_slots],
            })
        } else {
            &mut scratch
        };
        if let Err(e) = p.with_data_mut(|data| g.with_data(|gs| update(data, gs, st))) {
            first_err = Some(e);
        }
    });
    match first_err {
        Some(e) => fail(e.into_kind()),
        None => {
            state.steps += 1;
            Ok(())
        }
    }
}
