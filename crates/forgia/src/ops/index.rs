//! Integer indexing: the [`Indices`] type and the ops that read or add through it —
//! `index_select` (embedding lookup), `gather` / `take_along_axis`, `scatter_add`, `index_add`.
//! Every index is checked against its axis before a kernel runs (`IndexOutOfRange`, never a
//! wild write). The backward of each gather is the matching scatter and vice versa, so the
//! records are differentiable.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{fail, within, ErrorKind, Result};
use crate::kernels::index as k;
use crate::tensor::layout::numel;
use crate::tensor::{Axis, Shape, Size};

/// A tensor of integer indices (class labels, token ids, gather positions), row-major.
///
/// Values are `i64` so that sentinels such as cross-entropy's `ignore_index = -100` fit;
/// ops reject negative or too large values with `IndexOutOfRange`.
///
/// ```
/// use forgia::{Indices, Tensor};
/// let table = Tensor::from_vec(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2])?;
/// let rows = table.index_select(0, &Indices::from(vec![2usize, 0]))?;
/// assert_eq!(rows.to_vec(), vec![4.0, 5.0, 0.0, 1.0]);
/// # Ok::<(), forgia::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Indices {
    data: Arc<[i64]>,
    shape: Shape,
}

impl Indices {
    /// Indices from row-major `data` with `shape`.
    ///
    /// # Errors
    /// `LengthMismatch` when `data.len()` is not the product of `shape`; `SizeOverflow` when
    /// that product does not fit.
    pub fn new(data: Vec<i64>, shape: &[usize]) -> Result<Indices> {
        let expected = Size::of("Indices::new", shape)?.numel();
        if data.len() != expected {
            return fail(ErrorKind::LengthMismatch {
                op: "Indices::new",
                shape: shape.to_vec(),
                expected,
                got: data.len(),
            });
        }
        Ok(Indices { data: data.into(), shape: shape.into() })
    }

    /// The values, row-major.
    pub fn data(&self) -> &[i64] {
        &self.data
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of axes.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of indices.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when there are no indices.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The values as positions, row-major (a negative value, which no axis has, becomes
    /// `usize::MAX`): for comparing predictions such as [`Tensor::argmax`] with labels.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let logits = Tensor::from_vec(vec![0.1, 0.7, 0.9, 0.0], &[2, 2])?;
    /// assert_eq!(logits.argmax(1, false)?.positions(), vec![1, 0]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    pub fn positions(&self) -> Vec<usize> {
        self.data.iter().map(|&i| usize::try_from(i).unwrap_or(usize::MAX)).collect()
    }

    /// The same values with another shape of equal size.
    ///
    /// # Errors
    /// `InvalidReshape` when the element counts differ.
    pub fn reshape(&self, shape: &[usize]) -> Result<Indices> {
        if numel(shape) != self.len() {
            return fail(ErrorKind::InvalidReshape {
                op: "Indices::reshape",
                from: self.shape.to_vec(),
                to: shape.to_vec(),
            });
        }
        Ok(Indices { data: self.data.clone(), shape: shape.into() })
    }

    /// Every index as a position in an axis of `size`.
    pub(crate) fn checked(&self, op: &'static str, size: usize) -> Result<Vec<usize>> {
        self.data
            .iter()
            .map(|&i| {
                if i < 0 || i as u64 >= size as u64 {
                    fail(ErrorKind::IndexOutOfRange { op, index: i, size })
                } else {
                    Ok(i as usize)
                }
            })
            .collect()
    }
}

impl From<Vec<i64>> for Indices {
    /// A rank-1 index.
    fn from(data: Vec<i64>) -> Self {
        let n = data.len();
        Indices { data: data.into(), shape: SmallVec::from_slice(&[n]) }
    }
}

impl From<Vec<usize>> for Indices {
    /// A rank-1 index.
    fn from(data: Vec<usize>) -> Self {
        Indices::from(data.into_iter().map(|i| i64::try_from(i).unwrap_or(i64::MAX)).collect::<Vec<i64>>())
    }
}

impl From<&[usize]> for Indices {
    /// A rank-1 index.
    fn from(data: &[usize]) -> Self {
        Indices::from(data.to_vec())
    }
}

impl From<&[i64]> for Indices {
    /// A rank-1 index.
    fn from(data: &[i64]) -> Self {
        Indices::from(data.to_vec())
    }
}

/// `[outer, d, inner]` sizes around `axis`.
pub(crate) fn split3(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (numel(&shape[..axis]), shape[axis], numel(&shape[axis + 1..]))
}

/// Checks a gather/scatter index against a tensor: same rank, and no larger than `bound` on
/// every axis (but `axis` when `skip_axis`).
pub(crate) fn check_like(op: &'static str, idx: &Indices, bound: &[usize], axis: usize, skip_axis: bool) -> Result<()> {
    let ok = idx.rank() == bound.len()
        && idx.shape().iter().zip(bound).enumerate().all(|(i, (&a, &b))| a <= b || (skip_axis && i == axis));
    if !ok {
        return fail(ErrorKind::ShapeMismatch { op, lhs: bound.to_vec(), rhs: idx.shape().to_vec() });
    }
    Ok(())
}

impl Tensor {
    /// The slices `x[.., idx[j], ..]` of `axis`, for a rank-1 index (an embedding lookup with
    /// `axis = 0`). Duplicates allowed.
    ///
    /// Backward: `gx = zeros(x.shape).index_add(axis, idx, gy)`.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `RankMismatch` for an index that is not rank 1; `IndexOutOfRange`.
    pub fn index_select(&self, axis: impl Into<Axis>, indices: &Indices) -> Result<Tensor> {
        let a = self.axis("index_select", axis)?;
        if indices.rank() != 1 {
            return fail(ErrorKind::RankMismatch {
                op: "index_select",
                expected: "rank-1 indices",
                shape: indices.shape().to_vec(),
            });
        }
        let idx = indices.checked("index_select", self.shape()[a])?;
        let (outer, d, inner) = split3(self.shape(), a);
        let x = self.contiguous_data("index_select")?;
        let mut shape: Shape = self.shape().into();
        shape[a] = idx.len();
        let mut data = crate::tensor::buffer("index_select", outer * idx.len() * inner)?;
        k::index_select(x.packed(), (outer, d, inner), &idx, &mut data);
        let mut out = Tensor::from_parts(data, &shape);
        out.names = self.names.clone();
        Ok(attach(out, &[self], || IndexSelectBackward {
            axis: a,
            indices: indices.clone(),
            in_shape: self.shape().into(),
        }))
    }

    /// `x` plus `src` added at the slices `idx[j]` of `axis` (`torch.index_add`); `src` has
    /// `x`'s shape with `axis` of size `idx.len()`. Duplicates accumulate.
    ///
    /// Backward: `gx = gy`, `gsrc = gy.index_select(axis, idx)`.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `RankMismatch` for an index that is not rank 1; `ShapeMismatch` for a
    /// `src` of the wrong shape; `IndexOutOfRange`.
    pub fn index_add(&self, axis: impl Into<Axis>, indices: &Indices, src: &Tensor) -> Result<Tensor> {
        let a = self.axis("index_add", axis)?;
        if indices.rank() != 1 {
            return fail(ErrorKind::RankMismatch {
                op: "index_add",
                expected: "rank-1 indices",
                shape: indices.shape().to_vec(),
            });
        }
        let mut want: Shape = self.shape().into();
        want[a] = indices.len();
        if src.shape() != want.as_slice() {
            return fail(ErrorKind::ShapeMismatch { op: "index_add", lhs: want.to_vec(), rhs: src.shape().to_vec() });
        }
        let idx = indices.checked("index_add", self.shape()[a])?;
        let (outer, d, inner) = split3(self.shape(), a);
        let mut data = within("index_add", || self.try_to_vec())?;
        src.try_with_data("index_add", |s| {
            k::index_add(&mut data, outer, d, inner, &idx, s);
            Ok(())
        })?;
        let mut out = Tensor::from_parts(data, self.shape());
        out.names = self.names.clone();
        Ok(attach(out, &[self, src], || IndexAddBackward { axis: a, indices: indices.clone() }))
    }

    /// `out[p] = x[p with axis replaced by idx[p]]` (`torch.gather`): the index has `x`'s rank
    /// and is no larger than `x` on the other axes; the output has the index's shape.
    ///
    /// Backward: `gx = zeros(x.shape).scatter_add(axis, idx, gy)`.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `ShapeMismatch` for an index of another rank or too large;
    /// `IndexOutOfRange`.
    pub fn gather(&self, axis: impl Into<Axis>, indices: &Indices) -> Result<Tensor> {
        let a = self.axis("gather", axis)?;
        check_like("gather", indices, self.shape(), a, true)?;
        let idx = indices.checked("gather", self.shape()[a])?;
        let x = self.contiguous_data("gather")?;
        let mut data = crate::tensor::buffer("gather", idx.len())?;
        k::gather(x.packed(), self.shape(), a, (&idx, indices.shape()), &mut data);
        let mut out = Tensor::from_parts(data, indices.shape());
        out.names = self.names.clone();
        Ok(attach(out, &[self], || GatherBackward { axis: a, indices: indices.clone(), in_shape: self.shape().into() }))
    }

    /// NumPy's name for [`Tensor::gather`] (the same computation).
    ///
    /// # Errors
    /// As [`Tensor::gather`].
    pub fn take_along_axis(&self, axis: impl Into<Axis>, indices: &Indices) -> Result<Tensor> {
        self.gather(axis, indices)
    }

    /// `x` plus `src[p]` added at `p with axis replaced by idx[p]` (`torch.scatter_add`). The
    /// index has `x`'s rank, is no larger than `src`, and no larger than `x` off `axis`.
    ///
    /// Backward: `gx = gy`, `gsrc = gy.gather(axis, idx)` (zero-padded to `src`'s shape).
    ///
    /// # Errors
    /// `AxisOutOfRange`; `ShapeMismatch` for mismatched ranks or sizes; `IndexOutOfRange`.
    pub fn scatter_add(&self, axis: impl Into<Axis>, indices: &Indices, src: &Tensor) -> Result<Tensor> {
        let a = self.axis("scatter_add", axis)?;
        check_like("scatter_add", indices, self.shape(), a, true)?;
        check_like("scatter_add", indices, src.shape(), a, false)?;
        let idx = indices.checked("scatter_add", self.shape()[a])?;
        let mut data = within("scatter_add", || self.try_to_vec())?;
        let mut vals = crate::tensor::buffer("scatter_add", idx.len())?;
        let (dst, at) = ((&mut data[..], self.shape()), (&idx[..], indices.shape()));
        src.try_with_data("scatter_add", |s| {
            k::scatter_add(dst, a, at, (s, src.shape()), &mut vals);
            Ok(())
        })?;
        let mut out = Tensor::from_parts(data, self.shape());
        out.names = self.names.clone();
        Ok(attach(out, &[self, src], || ScatterAddBackward {
            axis: a,
            indices: indices.clone(),
            src_shape: src.shape().into(),
        }))
    }
}

struct IndexSelectBackward {
    axis: usize,
    indices: Indices,
    in_shape: Shape,
}
impl Backward for IndexSelectBackward {
    fn name(&self) -> &'static str {
        "index_select"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let gx = index_add_to_zeros(&self.in_shape, self.axis, &self.indices, gy)?;
        out.push(Some(gx));
        Ok(())
    }
}

/// `zeros(shape).index_add(axis, idx, src)` without a zeros operand to copy: `index_select`'s
/// gradient (an embedding table's), written straight into a fresh zeroed buffer instead of a
/// copy of a zeros tensor the size of the table. The indices were checked by the forward.
///
/// Backward: `gsrc = gy.index_select(axis, idx)`.
fn index_add_to_zeros(shape: &[usize], axis: usize, indices: &Indices, src: &Tensor) -> Result<Tensor> {
    let idx = indices.checked("index_select", shape[axis])?;
    let (outer, d, inner) = split3(shape, axis);
    let mut data = crate::tensor::alloc("index_select", numel(shape))?;
    src.try_with_data("index_select", |s| {
        k::index_add(&mut data, outer, d, inner, &idx, s);
        Ok(())
    })?;
    Ok(attach(Tensor::from_parts(data, shape), &[src], || ScatterToZerosBackward { axis, indices: indices.clone() }))
}

/// The record of [`index_add_to_zeros`]: the gradient of the scattered source is the gathered
/// incoming gradient.
struct ScatterToZerosBackward {
    axis: usize,
    indices: Indices,
}
impl Backward for ScatterToZerosBackward {
    fn name(&self) -> &'static str {
        "index_select backward"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.index_select(self.axis, &self.indices)?));
        Ok(())
    }
}

struct IndexAddBackward {
    axis: usize,
    indices: Indices,
}
impl Backward for IndexAddBackward {
    fn name(&self) -> &'static str {
        "index_add"
    }
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, 2);
        if cx.needs_grad(0) {
            out[0] = Some(gy.clone());
        }
        if cx.needs_grad(1) {
            out[1] = Some(gy.index_select(self.axis, &self.indices)?);
        }
        Ok(())
    }
}

struct GatherBackward {
    axis: usize,
    indices: Indices,
    in_shape: Shape,
}
impl Backward for GatherBackward {
    fn name(&self) -> &'static str {
        "gather"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let gx = Tensor::zeros(&self.in_shape)?.scatter_add(self.axis, &self.indices, gy)?;
        out.push(Some(gx));
        Ok(())
    }
}

struct ScatterAddBackward {
    axis: usize,
    indices: Indices,
    src_shape: Shape,
}
impl Backward for ScatterAddBackward {
    fn name(&self) -> &'static str {
        "scatter_add"
    }
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, 2);
        if cx.needs_grad(0) {
            out[0] = Some(gy.clone());
        }
        if cx.needs_grad(1) {
            let g = gy.gather(self.axis, &self.indices)?;
            let pads: Vec<(usize, usize)> =
                self.src_shape.iter().zip(self.indices.shape()).map(|(&s, &i)| (0, s - i)).collect();
            out[1] = Some(if g.shape() == self.src_shape.as_slice() { g } else { g.pad(&pads, 0.0)? });
        }
        Ok(())
    }
}
