//! Sorting and selection along an axis: `sort`, `argsort`, `topk`, `kthvalue`, `median`
//! (and `median_all`). The order is PyTorch's: NaN is larger than every number, ties keep
//! their original order (every sort here is stable), so results are deterministic.
//!
//! Index outputs are [`Indices`] (the type `gather`, `scatter` and `index_select` read) with
//! the value output's shape. The value outputs are differentiable: each is `x` gathered at the
//! indices, so its record scatters the incoming gradient back through them
//! (`gx = zeros(x.shape).scatter_add(axis, idx, gy)`), which is itself differentiable (its
//! backward is a gather), so second order works.

use super::reduce::scalar_as_vector;
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::sort::{self as k, Lines};
use crate::ops::index::Indices;
use crate::tensor::layout::numel;
use crate::tensor::{Array, Axes, Axis, Shape};

/// A selection's output: values and indices of `shape`.
struct Picked {
    vals: Vec<f32>,
    idx: Vec<i64>,
}

/// `[outer, d, inner]` around `axis`.
fn split3(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (numel(&shape[..axis]), shape[axis], numel(&shape[axis + 1..]))
}

fn index_buffer(op: &'static str, n: usize) -> Result<Vec<i64>> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        return fail(ErrorKind::OutOfMemory { op, bytes: n.saturating_mul(8) });
    }
    v.resize(n, 0);
    Ok(v)
}

impl Tensor {
    /// The values along `axis` in ascending (or, with `descending`, descending) order, and
    /// the position each came from (`torch.sort(x, dim, descending, stable=True)`). NaN sorts
    /// as the largest value (last ascending, first descending); equal values keep their order.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let x = Tensor::from_vec(vec![2.0, f32::NAN, -1.0, 2.0], &[4])?;
    /// let (values, indices) = x.sort(0, false)?;
    /// assert_eq!(indices.data(), &[2, 0, 3, 1]);
    /// assert!(values.to_vec()[3].is_nan());
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// Backward: `gx = zeros(x.shape).scatter_add(axis, indices, gy)` (a permutation).
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis.
    pub fn sort(&self, axis: impl Into<Axis>, descending: bool) -> Result<(Tensor, Indices)> {
        self.sort_op("sort", axis.into(), descending)
    }

    /// The positions that sort `x` along `axis` (the indices of [`Tensor::sort`]).
    ///
    /// # Errors
    /// As [`Tensor::sort`].
    pub fn argsort(&self, axis: impl Into<Axis>, descending: bool) -> Result<Indices> {
        let _guard = crate::autograd::no_grad();
        Ok(self.sort_op("argsort", axis.into(), descending)?.1)
    }

    fn sort_op(&self, op: &'static str, axis: Axis, descending: bool) -> Result<(Tensor, Indices)> {
        if let Some(v) = scalar_as_vector(self, op, &Axes(vec![axis.clone()]))? {
            let (y, i) = v.sort_op(op, Axis::Index(0), descending)?;
            return Ok((y.reshape(&[])?, i.reshape(&[])?));
        }
        let a = self.axis(op, axis)?;
        self.top_along(op, a, self.shape()[a], descending, true)
    }

    /// The `k` largest (or, with `largest == false`, smallest) values along `axis` and their
    /// positions (`torch.topk`). With `sorted` they come in order (largest first, or smallest
    /// first); otherwise in their original order along the axis. NaN counts as the largest
    /// value; among equal values the earlier position wins.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let x = Tensor::from_vec(vec![0.1, 0.7, 0.2, 0.9], &[4])?;
    /// let (values, indices) = x.topk(2, 0, true, true)?;
    /// assert_eq!((values.to_vec(), indices.data().to_vec()), (vec![0.9, 0.7], vec![3, 1]));
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// Backward: `gx = zeros(x.shape).scatter_add(axis, indices, gy)`: each value's gradient
    /// goes back to the position it was taken from, every other position gets 0.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis; `InvalidArgument` when `k` is
    /// larger than the axis.
    pub fn topk(&self, k: usize, axis: impl Into<Axis>, largest: bool, sorted: bool) -> Result<(Tensor, Indices)> {
        let axis = axis.into();
        if let Some(v) = scalar_as_vector(self, "topk", &Axes(vec![axis.clone()]))? {
            let (y, i) = v.topk(k, 0, largest, sorted)?;
            return if k == 1 { Ok((y.reshape(&[])?, i.reshape(&[])?)) } else { Ok((y, i)) };
        }
        let a = self.axis("topk", axis)?;
        let d = self.shape()[a];
        if k > d {
            return fail(ErrorKind::InvalidArgument {
                op: "topk",
                arg: "k",
                reason: format!("k = {k} is larger than axis {a} of shape {:?}", self.shape()),
            });
        }
        self.top_along("topk", a, k, largest, sorted)
    }

    /// The `k`-th smallest value along `axis` (`k` counts from 1, as `torch.kthvalue`) and its
    /// position. NaN counts as the largest value; among equal values the position is the one
    /// a stable sort would put `k`-th.
    ///
    /// Backward: `gx = zeros(x.shape).scatter_add(axis, index, gy)`.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis; `InvalidArgument` when `k` is 0
    /// or larger than the axis.
    pub fn kthvalue(&self, k: usize, axis: impl Into<Axis>, keepdim: bool) -> Result<(Tensor, Indices)> {
        let axis = axis.into();
        if let Some(v) = scalar_as_vector(self, "kthvalue", &Axes(vec![axis.clone()]))? {
            let (y, i) = v.kthvalue(k, 0, false)?;
            return Ok((y, i));
        }
        let a = self.axis("kthvalue", axis)?;
        let d = self.shape()[a];
        if k == 0 || k > d {
            return fail(ErrorKind::InvalidArgument {
                op: "kthvalue",
                arg: "k",
                reason: format!("k = {k} is outside 1..={d} for axis {a} of shape {:?}", self.shape()),
            });
        }
        self.kth_along("kthvalue", a, k - 1, false, keepdim)
    }

    /// The lower median along `axis` (for an even count, the smaller of the two middle values,
    /// as `torch.median(x, dim)`) and its position. A line holding a NaN gives NaN and the
    /// position of its first NaN.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let x = Tensor::from_vec(vec![4.0, 1.0, 3.0, 2.0], &[1, 4])?;
    /// let (m, at) = x.median(1, false)?;
    /// assert_eq!((m.to_vec(), at.data().to_vec()), (vec![2.0], vec![3]));
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// Backward: `gx = zeros(x.shape).scatter_add(axis, index, gy)`.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis; `EmptyTensor` when the axis has
    /// size 0.
    pub fn median(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<(Tensor, Indices)> {
        let axis = axis.into();
        if let Some(v) = scalar_as_vector(self, "median", &Axes(vec![axis.clone()]))? {
            return v.median(0, false);
        }
        let a = self.axis("median", axis)?;
        let d = self.shape()[a];
        if d == 0 {
            return fail(ErrorKind::EmptyTensor { op: "median", shape: self.shape().to_vec() });
        }
        self.kth_along("median", a, (d - 1) / 2, true, keepdim)
    }

    /// The lower median of every element, as a rank-0 tensor (`torch.median(x)`); NaN when any
    /// element is NaN.
    ///
    /// Backward: `gy` is split evenly between the elements equal to the median (the NaNs, when
    /// it is NaN), as `torch.median()` does.
    ///
    /// # Errors
    /// `EmptyTensor` on an empty tensor.
    pub fn median_all(&self) -> Result<Tensor> {
        if self.numel() == 0 {
            return fail(ErrorKind::EmptyTensor { op: "median_all", shape: self.shape().to_vec() });
        }
        let flat = self.detach().reshape(&[self.numel()])?;
        let m = flat.median(0, false)?.0.item()?;
        Ok(attach(Tensor::scalar(m), &[self], || {
            let hit = |x: f32| x == m || (m.is_nan() && x.is_nan());
            let count = flat.with_data(|d| d.iter().filter(|&&x| hit(x)).count()) as f32;
            let weights = flat.with_data(|d| d.iter().map(|&x| if hit(x) { 1.0 / count } else { 0.0 }).collect());
            TiedBackward { weights: Tensor::from_parts(weights, self.shape()).value() }
        }))
    }

    /// The first `k` of every line along `a` in order, with the record.
    fn top_along(
        &self,
        op: &'static str,
        a: usize,
        k: usize,
        descending: bool,
        sorted: bool,
    ) -> Result<(Tensor, Indices)> {
        let (outer, d, inner) = split3(self.shape(), a);
        let mut shape: Shape = self.shape().into();
        shape[a] = k;
        let n = outer * k * inner;
        let x = self.contiguous_data(op)?;
        let mut p = Picked { vals: crate::tensor::buffer(op, n)?, idx: index_buffer(op, n)? };
        let lines = Lines { outer, d, inner, descending };
        let mut perm = vec![0usize; d * k::top_parts(lines, k)];
        k::top(x.packed(), lines, k, sorted, &mut perm, &mut p.vals, &mut p.idx);
        let indices = Indices::new(p.idx, &shape)?;
        let out = Tensor::from_parts(p.vals, &shape);
        let y = attach(out, &[self], || TakeBackward {
            name: op,
            axis: a,
            indices: indices.clone(),
            in_shape: self.shape().into(),
        });
        Ok((y, indices))
    }

    /// The `k`-th (0-based) of every line along `a`, reduced (or kept as size 1), with the record.
    fn kth_along(
        &self,
        op: &'static str,
        a: usize,
        k: usize,
        nan_wins: bool,
        keepdim: bool,
    ) -> Result<(Tensor, Indices)> {
        let (outer, d, inner) = split3(self.shape(), a);
        let mut kept: Shape = self.shape().into();
        kept[a] = 1;
        let n = outer * inner;
        let x = self.contiguous_data(op)?;
        let mut p = Picked { vals: crate::tensor::buffer(op, n)?, idx: index_buffer(op, n)? };
        let mut perm = vec![0usize; d];
        k::kth(x.packed(), (outer, d, inner), k, nan_wins, &mut perm, &mut p.vals, &mut p.idx);
        let at = Indices::new(p.idx, &kept)?;
        let out_shape: Shape = if keepdim {
            kept.clone()
        } else {
            self.shape().iter().enumerate().filter(|&(i, _)| i != a).map(|(_, &s)| s).collect()
        };
        let out = Tensor::from_parts(p.vals, &out_shape);
        let y = attach(out, &[self], || TakeBackward {
            name: op,
            axis: a,
            indices: at.clone(),
            in_shape: self.shape().into(),
        });
        Ok((y, at.reshape(&out_shape)?))
    }
}

/// `gx = zeros(in_shape).scatter_add(axis, indices, gy)`, `gy` first reshaped to the indices'
/// shape (a reduced axis put back as size 1). Differentiable: scatter_add's backward is a gather.
struct TakeBackward {
    name: &'static str,
    axis: usize,
    /// The positions taken, in the kept shape (same rank as the input).
    indices: Indices,
    in_shape: Shape,
}

impl Backward for TakeBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let gy = gy.reshape(self.indices.shape())?;
        let gx = Tensor::zeros(&self.in_shape)?.scatter_add(self.axis, &self.indices, &gy)?;
        out.push(Some(gx));
        Ok(())
    }
}

/// `gx = gy · w`, `w` the constant weights `1/count` on the tied medians.
struct TiedBackward {
    weights: Array,
}

impl Backward for TiedBackward {
    fn name(&self) -> &'static str {
        "median_all"
    }

    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let w = Tensor::from(&self.weights);
        let g = gy.reshape(&vec![1; w.rank()])?.broadcast_to(w.shape())?.mul(&w)?;
        out.push(Some(g));
        Ok(())
    }
}
