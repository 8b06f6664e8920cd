//! Loss functions (PyTorch semantics): class losses over logits or log-probabilities with
//! integer labels (`cross_entropy` with a fused one-pass backward, `nll_loss`), with class
//! weights (`cross_entropy_weighted`) or probability targets (`cross_entropy_probs`), the fused
//! `linear_cross_entropy` (an LM head without its full logits, in `loss_linear`), and the
//! elementwise regression / binary losses re-exported from `loss_elementwise`.
//!
//! ```
//! use forgia::loss::{cross_entropy, CrossEntropyOptions};
//! use forgia::{Indices, Tensor};
//! let logits = Tensor::variable(vec![2.0, 0.0, 0.0, 2.0], &[2, 2])?;
//! let loss = cross_entropy(&logits, &Indices::from(vec![0usize, 1]), CrossEntropyOptions::default())?;
//! loss.backward()?;
//! assert!(loss.item()? < 0.2);
//! # Ok::<(), forgia::Error>(())
//! ```

pub use super::loss_elementwise::{
    binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss, huber_loss, kl_div, l1_loss,
    margin_ranking_loss, mse_loss, smooth_l1_loss,
};
pub use super::loss_linear::{linear_cross_entropy, LinearCrossEntropyOptions};
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{check, fail, within, ErrorKind, Result};
use crate::kernels::loss as k;
use crate::kernels::softmax::row_logsumexp;
use crate::ops::index::Indices;
use crate::tensor::Array;

/// How a loss combines its per-element (or per-row) values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The mean (for class losses: over the rows that are not ignored).
    #[default]
    Mean,
    /// The sum.
    Sum,
    /// No reduction: one value per element (per row for class losses).
    None,
    /// The sum divided by the size of the first axis (`kl_div`'s mathematically correct
    /// mean); elementwise losses only.
    BatchMean,
}

/// Options of [`cross_entropy`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrossEntropyOptions {
    /// Rows with this label contribute nothing and are not counted by `Mean` (default -100).
    pub ignore_index: i64,
    /// `ε` in `[0, 1]`: the target is `(1-ε)·one_hot + ε/C` (default 0).
    pub label_smoothing: f32,
    /// How rows are combined (default `Mean`).
    pub reduction: Reduction,
}

impl Default for CrossEntropyOptions {
    fn default() -> Self {
        CrossEntropyOptions { ignore_index: -100, label_smoothing: 0.0, reduction: Reduction::Mean }
    }
}

/// Options of [`nll_loss`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NllLossOptions {
    /// Rows with this label contribute nothing and are not counted by `Mean` (default -100).
    pub ignore_index: i64,
    /// How rows are combined (default `Mean`).
    pub reduction: Reduction,
}

impl Default for NllLossOptions {
    fn default() -> Self {
        NllLossOptions { ignore_index: -100, reduction: Reduction::Mean }
    }
}

/// Cross-entropy of class `logits` `[N, C]` (or `[N, C, d...]`) against integer `labels`
/// `[N]` (or `[N, d...]`): `(1-ε)·(lse - x_y) + ε·(lse - mean_c x_c)` per row, `lse` the row's
/// log-sum-exp; ignored rows give 0. `Mean` divides by the rows not ignored (NaN if none).
///
/// Backward, one pass from the saved per-row log-sum-exp:
/// `gx = (softmax(x) - target) * w_row * gy / count`, with `target = (1-ε)·one_hot + ε/C`.
/// Under `create_graph` the same formula runs in differentiable tensor ops.
///
/// # Errors
/// `RankMismatch` for logits of rank < 2; `ShapeMismatch` for labels of the wrong shape;
/// `IndexOutOfRange` for a label outside `0..C` that is not `ignore_index`; `InvalidArgument`
/// for `label_smoothing` outside `[0, 1]` or `BatchMean`.
pub fn cross_entropy(logits: &Tensor, labels: &Indices, options: CrossEntropyOptions) -> Result<Tensor> {
    within("cross_entropy", || {
        let eps = options.label_smoothing;
        check::unit_interval("cross_entropy", "label_smoothing", eps)?;
        per_row("cross_entropy", logits, labels, options.ignore_index, options.reduction, |x, t| {
            cross_entropy_2d(x, t, eps, options.reduction)
        })
    })
}

/// [`cross_entropy`] with a weight per class (PyTorch's `weight=`): row `r` with label `y`
/// costs `(1-ε)·w_y·(lse - x_y) + (ε/C)·Σ_c w_c·(lse - x_c)`; ignored rows cost 0. `Mean`
/// divides the sum by `Σ w_y` over the rows not ignored (PyTorch's weighted mean; NaN when
/// that is 0), not by the row count.
///
/// Backward: through `log_softmax` (its fused record) and a constant coefficient matrix:
/// `gx = (Σ_c a_c · softmax(x) - a) · gy / denom` per row, `a` the coefficients above.
/// Differentiable to every order.
///
/// # Errors
/// As [`cross_entropy`], plus `ShapeMismatch` when `weight` is not `[C]`.
pub fn cross_entropy_weighted(
    logits: &Tensor,
    labels: &Indices,
    weight: &Tensor,
    options: CrossEntropyOptions,
) -> Result<Tensor> {
    within("cross_entropy", || {
        const OP: &str = "cross_entropy";
        let eps = options.label_smoothing;
        check::unit_interval(OP, "label_smoothing", eps)?;
        per_row(OP, logits, labels, options.ignore_index, options.reduction, |x, t| {
            let (n, c) = (x.shape()[0], x.shape()[1]);
            if weight.shape() != [c] {
                return fail(ErrorKind::ShapeMismatch {
                    op: OP,
                    lhs: x.shape().to_vec(),
                    rhs: weight.shape().to_vec(),
                });
            }
            let w = weight.to_vec();
            let mut a = crate::tensor::buffer(OP, n * c)?;
            k::weighted_targets(t, &w, eps, &mut a);
            let rows = x.log_softmax(1)?.mul(&Tensor::from_parts(a, &[n, c]))?.sum(1, false)?.neg();
            match options.reduction {
                Reduction::None => Ok(rows),
                Reduction::Sum => Ok(rows.sum_all()),
                _ => {
                    let denom: f64 = t.iter().flatten().map(|&y| w[y] as f64).sum();
                    Ok(rows.sum_all().scale((1.0 / denom) as f32))
                }
            }
        })
    })
}

/// Cross-entropy against probability ("soft") targets of the logits' shape (PyTorch's
/// `cross_entropy` with a float target): row cost `-Σ_c w_c·t'_c·log_softmax(x)_c` with the
/// smoothed target `t' = (1-ε)·t + ε/C` and optional class weights `w` (`[C]`, default 1).
/// `Mean` divides by the number of rows (`N·d…`), whatever the weights; `ignore_index` does
/// not apply to probability targets.
///
/// Backward: through `log_softmax` and `mul`: `g_logits = (Σ_c w_c t'_c · softmax(x) - w·t')
/// · gy`, `g_target = -(1-ε)·w·log_softmax(x)·gy`. Differentiable to every order.
///
/// # Errors
/// `RankMismatch` for logits of rank < 2; `ShapeMismatch` when the target's shape differs from
/// the logits' or `weight` is not `[C]`; `InvalidArgument` for `label_smoothing` outside
/// `[0, 1]` or `BatchMean`; `EmptyTensor` for zero classes.
pub fn cross_entropy_probs(
    logits: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    options: CrossEntropyOptions,
) -> Result<Tensor> {
    within("cross_entropy", || {
        const OP: &str = "cross_entropy";
        let eps = options.label_smoothing;
        check::unit_interval(OP, "label_smoothing", eps)?;
        if options.reduction == Reduction::BatchMean {
            let reason = "BatchMean is for elementwise losses".into();
            return fail(ErrorKind::InvalidArgument { op: OP, arg: "reduction", reason });
        }
        if logits.rank() < 2 {
            return fail(ErrorKind::RankMismatch {
                op: OP,
                expected: "rank >= 2 ([N, C, ...])",
                shape: logits.shape().to_vec(),
            });
        }
        if target.shape() != logits.shape() {
            return fail(ErrorKind::ShapeMismatch {
                op: OP,
                lhs: logits.shape().to_vec(),
                rhs: target.shape().to_vec(),
            });
        }
        let c = logits.shape()[1];
        if c == 0 {
            return fail(ErrorKind::EmptyTensor { op: OP, shape: logits.shape().to_vec() });
        }
        if let Some(w) = weight.filter(|w| w.shape() != [c]) {
            return fail(ErrorKind::ShapeMismatch { op: OP, lhs: logits.shape().to_vec(), rhs: w.shape().to_vec() });
        }
        let rows_shape: Vec<usize> =
            [logits.shape()[0]].into_iter().chain(logits.shape()[2..].iter().copied()).collect();
        let flat = |t: &Tensor| -> Result<Tensor> {
            if t.rank() == 2 {
                return Ok(t.clone());
            }
            let perm: Vec<usize> = [0].into_iter().chain(2..t.rank()).chain([1]).collect();
            t.permute(&perm)?.reshape(&[rows_shape.iter().product(), c])
        };
        let mut coef = flat(target)?.scale(1.0 - eps).add_scalar(eps / c as f32);
        if let Some(w) = weight {
            coef = coef.mul(&w.detach())?;
        }
        let rows = flat(logits)?.log_softmax(1)?.mul(&coef)?.sum(1, false)?.neg();
        match options.reduction {
            Reduction::None => rows.reshape(&rows_shape),
            Reduction::Sum => Ok(rows.sum_all()),
            _ => rows.mean_all(),
        }
    })
}

/// Negative log-likelihood of log-probabilities `[N, C]` (or `[N, C, d...]`) at integer
/// `labels`: `-x[row, label]`, 0 for ignored rows; `Mean` divides by the rows not ignored.
///
/// Backward: `gx = -one_hot(labels) * w_row * gy / count` (linear in `gy`, so differentiable).
///
/// # Errors
/// As [`cross_entropy`] (without the smoothing check).
pub fn nll_loss(log_probs: &Tensor, labels: &Indices, options: NllLossOptions) -> Result<Tensor> {
    within("nll_loss", || {
        per_row("nll_loss", log_probs, labels, options.ignore_index, options.reduction, |x, t| {
            let (n, c) = (x.shape()[0], x.shape()[1]);
            let rows: Vec<f32> =
                x.with_data(|d| t.iter().enumerate().map(|(r, y)| y.map_or(0.0, |y| -d[r * c + y])).collect());
            let (out, count) = combine(rows, t, options.reduction);
            Ok(attach(out, &[x], || NllBackward { targets: t.to_vec(), n, c, reduction: options.reduction, count }))
        })
    })
}

/// Validates the shapes and labels of a class loss, flattens `[N, C, d...]` to `[M, C]`, runs
/// `f` on the 2-D form, and reshapes a `None` reduction back to the labels' shape.
fn per_row(
    op: &'static str,
    x: &Tensor,
    labels: &Indices,
    ignore: i64,
    reduction: Reduction,
    f: impl FnOnce(&Tensor, &[Option<usize>]) -> Result<Tensor>,
) -> Result<Tensor> {
    if reduction == Reduction::BatchMean {
        return fail(ErrorKind::InvalidArgument {
            op,
            arg: "reduction",
            reason: "BatchMean is for elementwise losses".into(),
        });
    }
    if x.rank() < 2 {
        return fail(ErrorKind::RankMismatch { op, expected: "rank >= 2 ([N, C, ...])", shape: x.shape().to_vec() });
    }
    let c = x.shape()[1];
    let want: Vec<usize> = [x.shape()[0]].into_iter().chain(x.shape()[2..].iter().copied()).collect();
    if labels.shape() != want.as_slice() {
        return fail(ErrorKind::ShapeMismatch { op, lhs: x.shape().to_vec(), rhs: labels.shape().to_vec() });
    }
    let targets = class_targets(op, labels, c, ignore)?;
    if x.rank() == 2 {
        return f(x, &targets);
    }
    let perm: Vec<usize> = [0].into_iter().chain(2..x.rank()).chain([1]).collect();
    let flat = x.permute(&perm)?.reshape(&[labels.len(), c])?;
    let out = f(&flat, &targets)?;
    if reduction == Reduction::None {
        out.reshape(labels.shape())
    } else {
        Ok(out)
    }
}

/// Each label as a class in `0..c`, or `None` for `ignore`.
pub(super) fn class_targets(op: &'static str, labels: &Indices, c: usize, ignore: i64) -> Result<Vec<Option<usize>>> {
    labels
        .data()
        .iter()
        .map(|&l| match l {
            l if l == ignore => Ok(None),
            l if l >= 0 && (l as u64) < c as u64 => Ok(Some(l as usize)),
            l => fail(ErrorKind::IndexOutOfRange { op, index: l, size: c }),
        })
        .collect()
}

/// Per-row values combined by `reduction`, and the count of rows not ignored.
pub(super) fn combine(rows: Vec<f32>, targets: &[Option<usize>], reduction: Reduction) -> (Tensor, usize) {
    let count = targets.iter().filter(|t| t.is_some()).count();
    let total = rows.iter().map(|&v| v as f64).sum::<f64>();
    let out = match reduction {
        Reduction::None => Tensor::from_parts(rows.clone(), &[rows.len()]),
        Reduction::Sum => Tensor::scalar(total as f32),
        _ => Tensor::scalar((total / count as f64) as f32),
    };
    (out, count)
}

/// The per-row gradient scale `w_row * g_row` (ignoring `gy`): 0 for ignored rows, `1/count`
/// under `Mean`, 1 otherwise, as an `[N, 1]` constant.
pub(super) fn row_weights(targets: &[Option<usize>], reduction: Reduction, count: usize) -> Tensor {
    let w = if reduction == Reduction::Mean { 1.0 / count as f32 } else { 1.0 };
    let data = targets.iter().map(|t| if t.is_some() { w } else { 0.0 }).collect();
    Tensor::from_parts(data, &[targets.len(), 1])
}

/// `gy` shaped to broadcast against `[N, C]`: `[N, 1]` per row, or `[1, 1]` for a scalar.
pub(super) fn gy_rows(gy: &Tensor) -> Result<Tensor> {
    if gy.rank() == 0 {
        gy.reshape(&[1, 1])
    } else {
        gy.reshape(&[gy.numel(), 1])
    }
}

fn cross_entropy_2d(x: &Tensor, targets: &[Option<usize>], eps: f32, reduction: Reduction) -> Result<Tensor> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    if c == 0 {
        return fail(ErrorKind::EmptyTensor { op: "cross_entropy", shape: x.shape().to_vec() });
    }
    let data = x.contiguous_data("cross_entropy")?;
    let d = data.packed();
    let mut lse = vec![(0.0, 0.0); n];
    row_logsumexp(d, c, &mut lse);
    let mut rows = vec![0.0; n];
    k::cross_entropy_rows(d, c, &lse, targets, eps, &mut rows);
    let (out, count) = combine(rows, targets, reduction);
    Ok(attach(out, &[x], || CrossEntropyBackward {
        x: data.value(),
        lse,
        targets: targets.to_vec(),
        eps,
        reduction,
        count,
    }))
}

struct CrossEntropyBackward {
    x: Array,
    /// Per row `(max, log Σ exp(x - max))`.
    lse: Vec<(f32, f32)>,
    targets: Vec<Option<usize>>,
    eps: f32,
    reduction: Reduction,
    count: usize,
}

impl CrossEntropyBackward {
    /// The smoothed target's value off and at the class: `eps / c` and `eps / c + 1 - eps`.
    fn target_values(&self, c: usize) -> (f32, f32) {
        let off = self.eps / c as f32;
        (off, off + (1.0 - self.eps))
    }

    /// The smoothed target distribution, `[N, C]`.
    fn target(&self, c: usize) -> Result<Vec<f32>> {
        let mut t = crate::tensor::buffer("cross_entropy", self.targets.len() * c)?;
        k::one_hot_rows(&self.targets, c, self.target_values(c), &mut t);
        Ok(t)
    }
}

impl Backward for CrossEntropyBackward {
    fn name(&self) -> &'static str {
        "cross_entropy"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let (n, c) = (self.x.shape()[0], self.x.shape()[1]);
        let w = row_weights(&self.targets, self.reduction, self.count);
        let gx = if cx.create_graph() {
            let target = Tensor::from_parts(self.target(c)?, &[n, c]);
            cx.input(0, &self.x).softmax(1)?.sub(&target)?.mul(&w)?.mul(&gy_rows(gy)?)?
        } else {
            let g = gy.to_vec();
            let (w, d) = (w.packed(), self.x.packed());
            let scale = |r: usize| w[r] * if g.len() == 1 { g[0] } else { g[r] };
            let mut buf = crate::tensor::buffer("cross_entropy", n * c)?;
            k::cross_entropy_grad(d, c, &self.lse, &self.targets, self.target_values(c), scale, &mut buf);
            Tensor::from_parts(buf, &[n, c])
        };
        out.push(Some(gx));
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        4 * self.x.numel()
    }
}

struct NllBackward {
    targets: Vec<Option<usize>>,
    n: usize,
    c: usize,
    reduction: Reduction,
    count: usize,
}

impl Backward for NllBackward {
    fn name(&self) -> &'static str {
        "nll_loss"
    }

    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let mut hot = crate::tensor::buffer("nll_loss", self.n * self.c)?;
        k::one_hot_rows(&self.targets, self.c, (0.0, -1.0), &mut hot);
        let w = row_weights(&self.targets, self.reduction, self.count);
        let gx = Tensor::from_parts(hot, &[self.n, self.c]).mul(&w)?.mul(&gy_rows(gy)?)?;
        out.push(Some(gx));
        Ok(())
    }
}
