//! Normalization layers: layer_norm, rms_norm, group_norm and batch_norm (training statistics
//! or running statistics). All share one record: forward saves the per-set mean and `rstd`,
//! the backward is the fused formula `gx = rstd · (g - mean(g) - x̂ · mean(g · x̂))` with
//! `g = gy · weight` (`kernels/norm.rs`); a `create_graph` pass runs the same formula in
//! differentiable ops instead.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{check, fail, ErrorKind, Result};
use crate::kernels::norm::{self as k, Sets};
use crate::tensor::layout::numel;
use crate::tensor::{Array, Scratch, Shape};

/// Running mean and variance of a batch-norm layer, updated outside the graph by
/// [`Tensor::batch_norm`] in training mode, read in evaluation mode.
#[derive(Clone)]
pub struct RunningStats {
    /// Per-channel running mean (a constant `[C]`), initially 0.
    pub mean: Tensor,
    /// Per-channel running unbiased variance (a constant `[C]`), initially 1.
    pub var: Tensor,
    /// Weight of the new batch in the update (PyTorch's default 0.1):
    /// `running = (1 - momentum) · running + momentum · batch`.
    pub momentum: f32,
}

impl RunningStats {
    /// Fresh statistics for `channels` channels (mean 0, variance 1, momentum 0.1).
    ///
    /// # Errors
    /// `SizeOverflow` / `OutOfMemory` for a `channels` too large to allocate.
    pub fn new(channels: usize) -> Result<Self> {
        Ok(RunningStats { mean: Tensor::zeros(&[channels])?, var: Tensor::ones(&[channels])?, momentum: 0.1 })
    }
}

/// One normalization: how elements form sets, and how the affine parameters index them.
#[derive(Clone)]
struct Spec {
    op: &'static str,
    sets: Sets,
    rms: bool,
    /// Element `e` uses affine parameter `(e / inner) % numel(param_shape)`.
    inner: usize,
    param_shape: Shape,
}

impl Spec {
    /// True when the affine parameters run per set (batch norm: one per channel, every
    /// chunk a plane of it), so the kernels fuse their passes (`k::normalize_per_set`,
    /// `k::backward_per_set`).
    fn per_set_params(&self) -> bool {
        let s = &self.sets;
        self.inner == s.chunk && numel(&self.param_shape) == s.count && s.chunk > 0
    }

    /// The row-wise kernel, when every chunk is its own set and the parameters run along it
    /// (layer and RMS norm).
    fn rows<'a>(&self, w: Option<&'a Array>, b: Option<&'a Array>) -> Option<k::Rows<'a>> {
        let s = &self.sets;
        let row_wise = self.inner == 1 && s.count * s.chunk == s.len && numel(&self.param_shape) == s.chunk;
        row_wise.then(|| k::Rows {
            d: s.chunk,
            rms: self.rms,
            weight: w.map(|t| t.packed()),
            bias: b.map(|t| t.packed()),
        })
    }
}

fn check_eps(op: &'static str, eps: f32) -> Result<()> {
    check::non_negative(op, "eps", eps)
}

fn check_param(op: &'static str, p: Option<&Tensor>, shape: &[usize]) -> Result<()> {
    match p {
        Some(t) if t.shape() != shape => {
            fail(ErrorKind::ShapeMismatch { op, lhs: t.shape().to_vec(), rhs: shape.to_vec() })
        }
        _ => Ok(()),
    }
}

/// Normalizes with the statistics of `x` and attaches the shared record; also returns the
/// per-set mean and biased variance (batch norm's running statistics take them).
fn normalize(
    x: &Tensor,
    spec: Spec,
    eps: f32,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
) -> Result<(Tensor, Vec<f32>, Vec<f32>)> {
    check_eps(spec.op, eps)?;
    check_param(spec.op, w, &spec.param_shape)?;
    check_param(spec.op, b, &spec.param_shape)?;
    // An empty batch of rows normalizes to an empty batch (as in PyTorch); a norm whose
    // statistics pool over the batch (group, batch) has none to take from it.
    if x.numel() == 0 && spec.rows(None, None).is_none() {
        return fail(ErrorKind::EmptyTensor { op: spec.op, shape: x.shape().to_vec() });
    }
    let xd = x.contiguous_data(spec.op)?;
    let pack = |t: &Tensor| t.contiguous_data(spec.op);
    let (wd, bd) = (w.map(pack).transpose()?, b.map(pack).transpose()?);
    let (y, mean, rstd, var) = match spec.rows(wd.as_deref(), bd.as_deref()) {
        Some(rows) => {
            let n = xd.numel() / rows.d.max(1);
            let mut y = crate::tensor::buffer(spec.op, xd.numel())?;
            let (mut mean, mut rstd, mut var) = (
                crate::tensor::buffer(spec.op, n)?,
                crate::tensor::buffer(spec.op, n)?,
                crate::tensor::buffer(spec.op, n)?,
            );
            let stats = k::RowStats { y: &mut y, mean: &mut mean, rstd: &mut rstd, var: &mut var };
            rows.forward(xd.packed(), eps, stats);
            (y, mean, rstd, var)
        }
        None => {
            let n = spec.sets.count;
            let (mut mean, mut var) = (crate::tensor::buffer(spec.op, n)?, crate::tensor::buffer(spec.op, n)?);
            k::moments(&spec.sets, xd.packed(), spec.rms, (&mut mean, &mut var));
            let rstd: Vec<f32> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
            let mut y = crate::tensor::buffer(spec.op, spec.sets.len)?;
            let (wp, bp) = (wd.as_ref().map(|t| t.packed()), bd.as_ref().map(|t| t.packed()));
            if spec.per_set_params() {
                k::normalize_per_set(&spec.sets, xd.packed(), (&mean, &rstd), (wp, bp), &mut y);
            } else {
                k::normalize(&spec.sets, xd.packed(), (&mean, &rstd), &mut y);
                k::affine(&mut y, wp, bp, spec.inner);
            }
            (y, mean, rstd, var)
        }
    };
    let mut out = Tensor::from_parts(y, x.shape());
    out.names = x.names.clone();
    let batch_mean = mean.to_vec();
    let record = || NormBackward {
        x: xd.value(),
        mean: Arc::new(mean),
        rstd: Arc::new(rstd),
        spec: spec.clone(),
        weight: wd.as_ref().map(Tensor::value),
        has_bias: b.is_some(),
        eps,
    };
    let inputs: SmallVec<[&Tensor; 3]> = [Some(x), w, b].into_iter().flatten().collect();
    Ok((attach(out, &inputs, record), batch_mean, var))
}

impl Tensor {
    /// Layer normalization over the last `normalized_shape.len()` axes (which must equal
    /// `normalized_shape`): `y = (x - mean) / sqrt(var + eps) · weight + bias`, biased variance;
    /// `weight` and `bias` (each optional) have shape `normalized_shape`.
    ///
    /// Backward (fused, saved mean/rstd; differentiable ops in a `create_graph` pass): `gx = rstd · (g - mean(g) - x̂ · mean(g · x̂))` with
    /// `g = gy · weight`; `gweight = Σ gy · x̂`, `gbias = Σ gy` over the leading axes.
    ///
    /// # Errors
    /// `ShapeMismatch` when the trailing axes or the parameters do not match
    /// `normalized_shape`; `InvalidArgument` for a negative or non-finite `eps`;
    /// an empty input gives an empty result (as in PyTorch).
    pub fn layer_norm(
        &self,
        normalized_shape: &[usize],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f32,
    ) -> Result<Tensor> {
        let r = normalized_shape.len();
        if r == 0 || r > self.rank() || &self.shape()[self.rank() - r..] != normalized_shape {
            let (lhs, rhs) = (self.shape().to_vec(), normalized_shape.to_vec());
            return fail(ErrorKind::ShapeMismatch { op: "layer_norm", lhs, rhs });
        }
        let d = numel(normalized_shape);
        let sets = Sets { chunk: d, count: self.numel() / d.max(1), len: self.numel() };
        let spec = Spec { op: "layer_norm", sets, rms: false, inner: 1, param_shape: normalized_shape.into() };
        Ok(normalize(self, spec, eps, weight, bias)?.0)
    }

    /// RMS normalization over the last axis: `y = x / sqrt(mean(x²) + eps) · weight`, with an
    /// optional `weight` of shape `[D]`.
    ///
    /// Backward (fused): `gx = rstd · (g - x̂ · mean(g · x̂))`, `g = gy · weight`.
    ///
    /// # Errors
    /// `RankMismatch` for a scalar; `ShapeMismatch` for a weight that is not `[D]`;
    /// `InvalidArgument` for a bad `eps`; an empty input gives an empty result (as in PyTorch).
    pub fn rms_norm(&self, weight: Option<&Tensor>, eps: f32) -> Result<Tensor> {
        if self.rank() == 0 {
            return fail(ErrorKind::RankMismatch { op: "rms_norm", expected: "rank >= 1", shape: vec![] });
        }
        let d = self.shape()[self.rank() - 1];
        let sets = Sets { chunk: d, count: self.numel() / d.max(1), len: self.numel() };
        let spec = Spec { op: "rms_norm", sets, rms: true, inner: 1, param_shape: [d].as_slice().into() };
        Ok(normalize(self, spec, eps, weight, None)?.0)
    }

    /// Group normalization of `x [N, C, *]`: the channels are split into `groups` groups and
    /// each (sample, group) is normalized over its channels and spatial positions; optional
    /// per-channel `weight` and `bias` `[C]`.
    ///
    /// Backward: as [`Tensor::layer_norm`] with one set per (sample, group).
    ///
    /// # Errors
    /// `RankMismatch` below rank 2; `InvalidArgument` when `groups` is 0 or does not divide
    /// `C`, or for a bad `eps`; `ShapeMismatch` for parameters that are not `[C]`.
    pub fn group_norm(
        &self,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f32,
    ) -> Result<Tensor> {
        let (n, c, s) = channels("group_norm", self)?;
        if groups == 0 || c % groups != 0 {
            let reason = format!("{groups} groups do not divide {c} channels");
            return fail(ErrorKind::InvalidArgument { op: "group_norm", arg: "groups", reason });
        }
        let sets = Sets { chunk: c / groups * s, count: n * groups, len: self.numel() };
        let spec = Spec { op: "group_norm", sets, rms: false, inner: s, param_shape: [c].as_slice().into() };
        Ok(normalize(self, spec, eps, weight, bias)?.0)
    }

    /// Batch normalization of `x [N, C, *]` per channel.
    ///
    /// With `train`, normalizes with the batch statistics over `N` and the spatial axes (biased
    /// variance) and updates `stats` outside the graph:
    /// `mean ← (1-m)·mean + m·batch_mean`, `var ← (1-m)·var + m·batch_var·n/(n-1)`.
    /// Without it, uses `stats` as constants: `y = (x - mean) / sqrt(var + eps) · weight + bias`
    /// (composed of differentiable ops). Optional `weight`, `bias` are `[C]`.
    ///
    /// Backward in training mode: as [`Tensor::layer_norm`] with one set per channel.
    ///
    /// # Errors
    /// `RankMismatch` below rank 2; `ShapeMismatch` when the parameters or the running
    /// statistics are not `[C]`; `InvalidArgument` for a bad `eps`, a training pass whose
    /// `stats.momentum` is outside `[0, 1]`, or training on a single value per channel.
    pub fn batch_norm(
        &self,
        stats: &mut RunningStats,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        train: bool,
        eps: f32,
    ) -> Result<Tensor> {
        const OP: &str = "batch_norm";
        let (n, c, s) = channels(OP, self)?;
        check_param(OP, Some(&stats.mean), &[c])?;
        check_param(OP, Some(&stats.var), &[c])?;
        if !train {
            return batch_norm_eval(self, stats, weight, bias, eps);
        }
        check::unit_interval(OP, "momentum", stats.momentum)?;
        let count = n * s;
        if count < 2 {
            let reason = format!("training needs more than one value per channel, got shape {:?}", self.shape());
            return fail(ErrorKind::InvalidArgument { op: OP, arg: "x", reason });
        }
        let sets = Sets { chunk: s, count: c, len: self.numel() };
        let spec = Spec { op: OP, sets, rms: false, inner: s, param_shape: [c].as_slice().into() };
        let (y, mean, var) = normalize(self, spec, eps, weight, bias)?;
        let m = stats.momentum;
        let unbias = count as f32 / (count - 1) as f32;
        let new_mean = stats.mean.with_data(|old| combine(old, &mean, m, 1.0));
        let new_var = stats.var.with_data(|old| combine(old, &var, m, unbias));
        stats.mean = Tensor::from_parts(new_mean, &[c]);
        stats.var = Tensor::from_parts(new_var, &[c]);
        Ok(y)
    }
}

fn combine(old: &[f32], batch: &[f32], m: f32, factor: f32) -> Vec<f32> {
    old.iter().zip(batch).map(|(&o, &b)| (1.0 - m) * o + m * b * factor).collect()
}

/// `(N, C, spatial)` of a `[N, C, *]` tensor.
fn channels(op: &'static str, x: &Tensor) -> Result<(usize, usize, usize)> {
    if x.rank() < 2 {
        return fail(ErrorKind::RankMismatch { op, expected: "rank >= 2 [N, C, *]", shape: x.shape().to_vec() });
    }
    Ok((x.shape()[0], x.shape()[1], numel(&x.shape()[2..])))
}

/// Evaluation-mode batch norm from differentiable ops (the statistics are constants).
fn batch_norm_eval(
    x: &Tensor,
    stats: &RunningStats,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
    eps: f32,
) -> Result<Tensor> {
    check_eps("batch_norm", eps)?;
    let c = x.shape()[1];
    let mut pshape = vec![1usize; x.rank()];
    pshape[1] = c;
    for p in [w, b].into_iter().flatten() {
        check_param("batch_norm", Some(p), &[c])?;
    }
    let rstd = stats.var.with_data(|v| Tensor::from_parts(v.iter().map(|v| 1.0 / (v + eps).sqrt()).collect(), &pshape));
    let mut y = x.sub(&stats.mean.reshape(&pshape)?)?.mul(&rstd)?;
    if let Some(w) = w {
        y = y.mul(&w.reshape(&pshape)?)?;
    }
    if let Some(b) = b {
        y = y.add(&b.reshape(&pshape)?)?;
    }
    Ok(y)
}

/// The record of every normalization: saved input, per-set mean and rstd, and the weight.
struct NormBackward {
    x: Array,
    mean: Arc<Vec<f32>>,
    rstd: Arc<Vec<f32>>,
    spec: Spec,
    weight: Option<Array>,
    has_bias: bool,
    /// The forward's `eps`, for the differentiable backward of a `create_graph` pass.
    eps: f32,
}

impl NormBackward {
    /// The backward of a `create_graph` pass, from differentiable ops: the statistics are
    /// recomputed from the reconnected input (so the gradient is differentiable in `x` through
    /// them), then `gx = rstd · (g - mean(g) - x̂ · mean(g · x̂))` (RMS: without `mean(g)`),
    /// `g = gy · weight`, `gweight = Σ gy · x̂`, `gbias = Σ gy`.
    ///
    /// Elements are viewed two ways (`Sets`: chunk `i` belongs to set `i % count`; parameters:
    /// element `e` uses parameter `(e / inner) % P`): `[rep, count, chunk]` for the statistics
    /// and `[outer, P, inner]` for the parameters, each reduced over axes 0 and 2.
    fn graph_backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let (s, inner, rms) = (&self.spec.sets, self.spec.inner, self.spec.rms);
        let p = numel(&self.spec.param_shape);
        let stat = [s.len / (s.chunk * s.count).max(1), s.count, s.chunk];
        let params = [s.len / (inner * p).max(1), p, inner];
        let axes = || [0usize, 2];
        let xs = cx.input(0, &self.x).reshape(&stat)?;
        let centered = if rms { xs } else { xs.sub(&xs.mean(axes(), true)?)? };
        let rstd = centered.square().mean(axes(), true)?.add_scalar(self.eps).rsqrt();
        let xhat = centered.mul(&rstd)?;
        let gyp = gy.reshape(&params)?;
        let w_slot = self.weight.is_some() as usize;
        empty_slots(out, 1 + w_slot + self.has_bias as usize);
        if cx.needs_grad(0) {
            let g = match &self.weight {
                Some(w) => gyp.mul(&cx.input(1, w).reshape(&[p, 1])?)?,
                None => gyp.clone(),
            }
            .reshape(&stat)?;
            let mut d = g.sub(&xhat.mul(&g.mul(&xhat)?.mean(axes(), true)?)?)?;
            if !rms {
                d = d.sub(&g.mean(axes(), true)?)?;
            }
            out[0] = Some(d.mul(&rstd)?.reshape(self.x.shape())?);
        }
        if w_slot == 1 && cx.needs_grad(1) {
            let gw = gyp.mul(&xhat.reshape(&params)?)?.sum(axes(), false)?;
            out[1] = Some(gw.reshape(&self.spec.param_shape)?);
        }
        if self.has_bias && cx.needs_grad(1 + w_slot) {
            out[1 + w_slot] = Some(gyp.sum(axes(), false)?.reshape(&self.spec.param_shape)?);
        }
        Ok(())
    }
}

impl NormBackward {
    /// Runs a fused backward kernel (`run`) on buffers for the gradients `cx` asks for and
    /// puts them in their slots of `out` (input, then weight and bias where the op has them).
    fn fused_grads(&self, cx: &VjpCtx<'_>, out: &mut Grads, run: impl FnOnce(k::RowGrads<'_>)) -> Result<()> {
        let (op, count, w_slot) = (self.spec.op, numel(&self.spec.param_shape), self.weight.is_some() as usize);
        let need = (cx.needs_grad(0), w_slot == 1 && cx.needs_grad(1), self.has_bias && cx.needs_grad(1 + w_slot));
        let alloc = |want: bool, n: usize| want.then(|| crate::tensor::buffer(op, n)).transpose();
        let (mut gx, mut gw, mut gb) = (alloc(need.0, self.x.numel())?, alloc(need.1, count)?, alloc(need.2, count)?);
        run(k::RowGrads { x: gx.as_deref_mut(), weight: gw.as_deref_mut(), bias: gb.as_deref_mut() });
        out[0] = gx.map(|g| Tensor::from_parts(g, self.x.shape()));
        if w_slot == 1 {
            out[1] = gw.map(|g| Tensor::from_parts(g, &self.spec.param_shape));
        }
        if self.has_bias {
            out[1 + w_slot] = gb.map(|g| Tensor::from_parts(g, &self.spec.param_shape));
        }
        Ok(())
    }
}

impl Backward for NormBackward {
    fn name(&self) -> &'static str {
        self.spec.op
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        if cx.create_graph() {
            return self.graph_backward(cx, gy, out);
        }
        let (s, inner) = (&self.spec.sets, self.spec.inner);
        let count = numel(&self.spec.param_shape);
        let gy = gy.contiguous_data(self.spec.op)?;
        let x = self.x.packed();
        let w_slot = self.weight.is_some() as usize;
        empty_slots(out, 1 + w_slot + self.has_bias as usize);
        if let Some(rows) = self.spec.rows(self.weight.as_ref(), None) {
            return self.fused_grads(cx, out, |grads| rows.backward((x, gy.packed()), (&self.mean, &self.rstd), grads));
        }
        if self.spec.per_set_params() {
            let w = self.weight.as_ref().map(|w| w.packed());
            let stats = (self.mean.as_slice(), self.rstd.as_slice());
            return self
                .fused_grads(cx, out, |g| k::backward_per_set(s, (x, gy.packed()), stats, (w, self.spec.rms), g));
        }
        if cx.needs_grad(0) {
            let mut g = Scratch::new(self.spec.op, gy.numel())?;
            g.copy_from_slice(gy.packed());
            if let Some(w) = &self.weight {
                k::affine(&mut g, Some(w.packed()), None, inner);
            }
            let mut gx = crate::tensor::buffer(self.spec.op, s.len)?;
            k::backward(s, (x, &g), (&self.mean, &self.rstd), self.spec.rms, &mut gx);
            out[0] = Some(Tensor::from_parts(gx, self.x.shape()));
        }
        if w_slot == 1 && cx.needs_grad(1) {
            let mut xhat = Scratch::new(self.spec.op, s.len)?;
            k::normalize(s, x, (&self.mean, &self.rstd), &mut xhat);
            for (h, &g) in xhat.iter_mut().zip(gy.packed()) {
                *h *= g;
            }
            let mut gw = crate::tensor::buffer(self.spec.op, count)?;
            k::param_sums(&xhat, inner, &mut gw);
            out[1] = Some(Tensor::from_parts(gw, &self.spec.param_shape));
        }
        if self.has_bias && cx.needs_grad(1 + w_slot) {
            let mut gb = crate::tensor::buffer(self.spec.op, count)?;
            k::param_sums(gy.packed(), inner, &mut gb);
            out[1 + w_slot] = Some(Tensor::from_parts(gb, &self.spec.param_shape));
        }
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        8 * self.spec.sets.len
    }
}
