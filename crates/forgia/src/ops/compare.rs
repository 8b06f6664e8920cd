//! Comparisons, logic and mask queries: `eq ne lt le gt ge` (tensor–tensor with broadcasting,
//! and `*_scalar` forms), `logical_and / or / xor / not`, `isnan isinf isfinite`, `any all`
//! (per axis or over everything) and `nonzero` / `argwhere`.
//!
//! # The mask convention
//!
//! forgia has one mask type for the whole library: **a mask is an `f32` tensor whose nonzero
//! entries mean true.** Every op here returns a *constant* tensor of `0.0` (false) and `1.0`
//! (true) — no gradient flows through a comparison, even of variables, as in PyTorch where a
//! bool tensor has no gradient. Every op that takes a mask reads it the same way:
//! [`Tensor::where_`], [`Tensor::masked_fill`], [`Tensor::masked_select`],
//! [`Tensor::masked_scatter`] and the logic ops here. So a mask built here feeds any of them
//! directly, and so does a hand-made 0/1 tensor; attention's boolean and key-padding mask
//! options read the same convention. (Attention's plain `mask` option is additive, as
//! PyTorch's float `attn_mask`: `zeros.masked_fill(&keep.logical_not(), f32::NEG_INFINITY)`
//! turns a keep-mask into one, as the example below does.)
//!
//! A NaN in a mask is nonzero, so it is **true**, exactly as `torch.tensor(float('nan')).bool()`
//! is `True`. The comparison and logic ops never produce NaN (a comparison with NaN is false,
//! `ne` with NaN is true, as IEEE 754 and PyTorch say), so a NaN can only enter a mask that was
//! built by hand or by arithmetic; use `isnan` to test for it explicitly.
//!
//! Index-valued results (`nonzero`, `argwhere`) are [`Indices`], the type every index-taking op
//! (`index_select`, `gather`, `scatter`, ...) reads.
//!
//! ```
//! use forgia::Tensor;
//! let lengths = Tensor::from_vec(vec![2.0, 3.0], &[2, 1])?;
//! let positions = Tensor::arange(0.0, 4.0, 1.0)?;
//! let pad = positions.ge(&lengths)?;                      // [2, 4] mask: 1 where padding
//! let scores = Tensor::zeros(&[2, 4])?.masked_fill(&pad, f32::NEG_INFINITY)?;
//! assert_eq!(pad.to_vec(), vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
//! assert_eq!(scores.to_vec()[2], f32::NEG_INFINITY);
//! # Ok::<(), forgia::Error>(())
//! ```

use super::binary::broadcast_map;
use super::reduce::{scalar_as_vector, Plan};
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::{compare as k, pointwise};
use crate::ops::index::Indices;
use crate::tensor::Axes;

/// `1.0` for true, `0.0` for false.
#[inline(always)]
fn truth(b: bool) -> f32 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// A constant of `f` of each element (broadcast views map their storage only).
fn map_mask(x: &Tensor, op: &'static str, f: impl Fn(f32) -> bool + Sync) -> Tensor {
    x.map_stored(op, |d| {
        let mut y = crate::tensor::buffer(op, d.len())?;
        pointwise::map(d, &mut y, |v| truth(f(v)));
        Ok(y)
    })
}

/// A constant of `f` of each broadcast pair.
fn zip_mask(op: &'static str, a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> bool + Sync) -> Result<Tensor> {
    broadcast_map(op, a, b, |x, y| truth(f(x, y)))
}

impl Tensor {
    /// `a == b` elementwise with broadcasting, as a 0/1 mask (a constant; see the module docs
    /// for the mask convention). NaN equals nothing, itself included.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn eq(&self, other: &Tensor) -> Result<Tensor> {
        zip_mask("eq", self, other, |a, b| a == b)
    }

    /// `a != b` elementwise with broadcasting, as a 0/1 mask. NaN differs from everything.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn ne(&self, other: &Tensor) -> Result<Tensor> {
        zip_mask("ne", self, other, |a, b| a != b)
    }

    /// `a < b` elementwise with broadcasting, as a 0/1 mask (false where either is NaN).
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn lt(&self, other: &Tensor) -> Result<Tensor> {
        zip_mask("lt", self, other, |a, b| a < b)
    }

    /// `a <= b` elementwise with broadcasting, as a 0/1 mask (false where either is NaN).
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn le(&self, other: &Tensor) -> Result<Tensor> {
        zip_mask("le", self, other, |a, b| a <= b)
    }

    /// `a > b` elementwise with broadcasting, as a 0/1 mask (false where either is NaN).
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn gt(&self, other: &Tensor) -> Result<Tensor> {
        zip_mask("gt", self, other, |a, b| a > b)
    }

    /// `a >= b` elementwise with broadcasting, as a 0/1 mask (false where either is NaN).
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn ge(&self, other: &Tensor) -> Result<Tensor> {
        zip_mask("ge", self, other, |a, b| a >= b)
    }

    /// `x == value` elementwise, as a 0/1 mask of `x`'s shape.
    pub fn eq_scalar(&self, value: f32) -> Tensor {
        map_mask(self, "eq_scalar", move |v| v == value)
    }

    /// `x != value` elementwise, as a 0/1 mask.
    pub fn ne_scalar(&self, value: f32) -> Tensor {
        map_mask(self, "ne_scalar", move |v| v != value)
    }

    /// `x < value` elementwise, as a 0/1 mask.
    pub fn lt_scalar(&self, value: f32) -> Tensor {
        map_mask(self, "lt_scalar", move |v| v < value)
    }

    /// `x <= value` elementwise, as a 0/1 mask.
    pub fn le_scalar(&self, value: f32) -> Tensor {
        map_mask(self, "le_scalar", move |v| v <= value)
    }

    /// `x > value` elementwise, as a 0/1 mask.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0, 0.5, f32::NAN], &[3])?;
    /// assert_eq!(x.gt_scalar(0.0).to_vec(), vec![0.0, 1.0, 0.0]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    pub fn gt_scalar(&self, value: f32) -> Tensor {
        map_mask(self, "gt_scalar", move |v| v > value)
    }

    /// `x >= value` elementwise, as a 0/1 mask.
    pub fn ge_scalar(&self, value: f32) -> Tensor {
        map_mask(self, "ge_scalar", move |v| v >= value)
    }

    /// Both nonzero, elementwise with broadcasting, as a 0/1 mask (NaN counts as true).
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn logical_and(&self, other: &Tensor) -> Result<Tensor> {
        zip_mask("logical_and", self, other, |a, b| a != 0.0 && b != 0.0)
    }

    /// Either nonzero, elementwise with broadcasting, as a 0/1 mask.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn logical_or(&self, other: &Tensor) -> Result<Tensor> {
        zip_mask("logical_or", self, other, |a, b| a != 0.0 || b != 0.0)
    }

    /// Exactly one nonzero, elementwise with broadcasting, as a 0/1 mask.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn logical_xor(&self, other: &Tensor) -> Result<Tensor> {
        zip_mask("logical_xor", self, other, |a, b| (a != 0.0) != (b != 0.0))
    }

    /// `1` where `x` is zero, `0` elsewhere (NaN is true, so its negation is `0`).
    pub fn logical_not(&self) -> Tensor {
        map_mask(self, "logical_not", |v| v == 0.0)
    }

    /// `1` where `x` is NaN.
    pub fn isnan(&self) -> Tensor {
        map_mask(self, "isnan", f32::is_nan)
    }

    /// `1` where `x` is `+inf` or `-inf`.
    pub fn isinf(&self) -> Tensor {
        map_mask(self, "isinf", f32::is_infinite)
    }

    /// `1` where `x` is neither infinite nor NaN.
    pub fn isfinite(&self) -> Tensor {
        map_mask(self, "isfinite", f32::is_finite)
    }

    /// `1` where any element over `axes` is nonzero (NaN included), else `0`, as
    /// `torch.any(x, dim, keepdim)`; over an empty axis the result is `0`. A constant mask.
    ///
    /// # Errors
    /// `AxisOutOfRange`, `UnknownAxisName` or `DuplicateAxis` for bad axes.
    pub fn any(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        self.any_all_axes("any", axes.into(), keepdim, false)
    }

    /// `1` where every element over `axes` is nonzero, else `0`, as `torch.all(x, dim,
    /// keepdim)`; over an empty axis the result is `1`. A constant mask.
    ///
    /// # Errors
    /// As [`Tensor::any`].
    pub fn all(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        self.any_all_axes("all", axes.into(), keepdim, true)
    }

    /// Whether any element is nonzero, as a rank-0 0/1 tensor (`torch.any(x)`; `0` when empty).
    pub fn any_all(&self) -> Tensor {
        // Over the stored elements only: a broadcast view costs its storage, not its logical size.
        Tensor::scalar(truth(self.stored().0.with_data(|d| d.iter().any(|&v| v != 0.0))))
    }

    /// Whether every element is nonzero, as a rank-0 0/1 tensor (`torch.all(x)`; `1` when
    /// empty).
    pub fn all_all(&self) -> Tensor {
        Tensor::scalar(truth(self.stored().0.with_data(|d| d.iter().all(|&v| v != 0.0))))
    }

    fn any_all_axes(&self, op: &'static str, axes: Axes, keepdim: bool, all: bool) -> Result<Tensor> {
        if let Some(v) = scalar_as_vector(self, op, &axes)? {
            return v.any_all_axes(op, Axes::from(0), false, all);
        }
        let axes = self.axes(op, axes)?;
        let plan = Plan::new(op, self, &axes, keepdim)?;
        let mut data = crate::tensor::buffer(op, plan.outer * plan.inner)?;
        k::any_all(plan.data.packed(), (plan.outer, plan.red, plan.inner), all, &mut data);
        Ok(Tensor::from_parts(data, &plan.out))
    }

    /// The coordinates of the nonzero elements (NaN included) in row-major order, as an
    /// index tensor of shape `[n, rank]` (`torch.nonzero`; a rank-0 tensor gives `[n, 0]`).
    ///
    /// ```
    /// use forgia::Tensor;
    /// let m = Tensor::from_vec(vec![0.0, 1.0, 1.0, 0.0], &[2, 2])?;
    /// let at = m.nonzero()?;
    /// assert_eq!((at.shape(), at.data()), (&[2usize, 2][..], &[0i64, 1, 1, 0][..]));
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `OutOfMemory` when the coordinates cannot be stored.
    pub fn nonzero(&self) -> Result<Indices> {
        let x = self.contiguous_data("nonzero")?;
        let d = x.packed();
        let n = d.iter().filter(|&&v| v != 0.0).count();
        let rank = self.rank();
        let len = n.saturating_mul(rank);
        let mut coords = Vec::new();
        if coords.try_reserve_exact(len).is_err() {
            return fail(ErrorKind::OutOfMemory { op: "nonzero", bytes: len.saturating_mul(8) });
        }
        coords.resize(len, 0i64);
        k::nonzero(d, self.shape(), &mut coords);
        Indices::new(coords, &[n, rank])
    }

    /// NumPy's and PyTorch's other name for [`Tensor::nonzero`] (the same `[n, rank]` result).
    ///
    /// # Errors
    /// As [`Tensor::nonzero`].
    pub fn argwhere(&self) -> Result<Indices> {
        self.nonzero()
    }
}
