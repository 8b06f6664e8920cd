//! Index writes: overwriting `scatter` (with a source or a value), `index_copy`, `index_put`
//! (overwrite or accumulate), and the mask-driven `masked_select` / `masked_scatter` (masks
//! follow the convention of `ops/compare.rs`: nonzero is true).
//!
//! Every write reduces to one primitive, a put of a 1-D vector of values at flat offsets of
//! `x`, with one record ("put"): `gx = gy * keep` (`keep` a constant 0 at every written
//! position) and `gv = gy.flatten().index_select(0, offsets) * win` (`win` a constant 1 for the
//! values left in the output). Both are differentiable, so second order works.
//!
//! # Duplicate indices
//! PyTorch leaves the result of an overwrite with duplicate targets undefined (any of the
//! writes may win, and its backward hands every duplicate the gradient). forgia is
//! deterministic: **the last write wins**, in row-major order of the index (for `index_put`,
//! of the broadcast indices; for `masked_scatter` there are no duplicates), and only the value
//! that survived gets a gradient, so finite differences agree with the backward. With
//! `accumulate` (`index_put`) duplicates add up, as in PyTorch.

use super::index::{check_like, split3};
use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{fail, within, ErrorKind, Result};
use crate::kernels::scatter as k;
use crate::ops::index::Indices;
use crate::tensor::layout::{broadcast_shapes, numel};
use crate::tensor::{Array, Axis, Shape, Size};

/// A 1-D index of flat offsets (never negative: each is below a tensor's element count).
fn offsets_index(offsets: &[usize]) -> Indices {
    Indices::from(offsets.to_vec())
}

/// Writes the 1-D `values` into `x` at the flat `offsets` (same length), overwriting (last
/// write wins) or adding, with the `put` record. `op` names the public op.
fn put(op: &'static str, x: &Tensor, offsets: Vec<usize>, values: &Tensor, accumulate: bool) -> Result<Tensor> {
    debug_assert_eq!(values.shape(), &[offsets.len()]);
    let mut data = within(op, || x.try_to_vec())?;
    values.try_with_data(op, |v| {
        k::put(&mut data, &offsets, v, accumulate);
        Ok(())
    })?;
    let out = Tensor::from_parts(data, x.shape());
    Ok(attach(out, &[x, values], || {
        let masks = (!accumulate).then(|| {
            let n = x.numel();
            let (mut last, mut keep, mut win) = (vec![0usize; n], vec![0.0; n], vec![0.0; offsets.len()]);
            k::survivors(&offsets, &mut last, &mut keep, &mut win);
            (Array::from_parts(keep, x.shape()), Array::from_parts(win, &[offsets.len()]))
        });
        PutBackward { name: op, at: offsets_index(&offsets), masks, out_shape: x.shape().into() }
    }))
}

/// An empty vector with room for `n` offsets, or `OutOfMemory`.
fn offsets_buffer(op: &'static str, n: usize) -> Result<Vec<usize>> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        return fail(ErrorKind::OutOfMemory { op, bytes: n.saturating_mul(std::mem::size_of::<usize>()) });
    }
    Ok(v)
}

/// Resolves an `index_put` index value against an axis of `size` (negative counts from the
/// end, as PyTorch's advanced indexing does).
fn wrap(op: &'static str, i: i64, size: usize) -> Result<usize> {
    let s = size as i64;
    let j = if i < 0 { i + s } else { i };
    if j < 0 || j >= s {
        return fail(ErrorKind::IndexOutOfRange { op, index: i, size });
    }
    Ok(j as usize)
}

/// The flat row-major positions (in a tensor of `shape`) where `mask`, broadcast to `shape`,
/// is nonzero.
fn mask_positions(op: &'static str, mask: &Tensor, shape: &[usize]) -> Result<Vec<usize>> {
    let m = crate::tensor::gather(op, mask.storage().as_slice(), &mask.layout.broadcast_to(shape))?;
    Ok(m.iter().enumerate().filter(|(_, &v)| v != 0.0).map(|(p, _)| p).collect())
}

impl Tensor {
    /// `x` with `src[p]` written at `p with axis replaced by idx[p]` (`torch.scatter(dim,
    /// index, src)`). The index has `x`'s rank, is no larger than `src`, and no larger than
    /// `x` off `axis`. Duplicate targets: the last write (row-major in the index) wins.
    ///
    /// ```
    /// use forgia::{Indices, Tensor};
    /// let x = Tensor::zeros(&[2, 3])?;
    /// let src = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let y = x.scatter(1, &Indices::new(vec![2, 0, 1, 1], &[2, 2])?, &src)?;
    /// assert_eq!(y.to_vec(), vec![2.0, 0.0, 1.0, 0.0, 4.0, 0.0]);   // 3 is overwritten by 4
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// Backward: `gx = gy` with the written positions zeroed; `gsrc = gy.gather(axis, idx)`
    /// at the surviving writes, 0 at overwritten ones and outside the index.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `ShapeMismatch` for mismatched ranks or sizes; `IndexOutOfRange`.
    pub fn scatter(&self, axis: impl Into<Axis>, indices: &Indices, src: &Tensor) -> Result<Tensor> {
        let a = self.axis("scatter", axis)?;
        check_like("scatter", indices, src.shape(), a, false)?;
        let offsets = self.scatter_offsets("scatter", a, indices)?;
        // The source elements at the index's coordinates, row-major.
        let taken = (0..src.rank()).try_fold(src.clone(), |t, d| t.narrow(d, 0, indices.shape()[d]))?;
        put("scatter", self, offsets, &taken.reshape(&[indices.len()])?, false)
    }

    /// `x` with `value` written at `p with axis replaced by idx[p]` for every position `p` of
    /// the index (`torch.scatter(dim, index, value)`).
    ///
    /// Backward: `gx = gy` with the written positions zeroed.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `ShapeMismatch` for an index of another rank or too large off `axis`;
    /// `IndexOutOfRange`.
    pub fn scatter_value(&self, axis: impl Into<Axis>, indices: &Indices, value: f32) -> Result<Tensor> {
        let a = self.axis("scatter_value", axis)?;
        let offsets = self.scatter_offsets("scatter_value", a, indices)?;
        put("scatter_value", self, offsets, &Tensor::full(&[indices.len()], value)?, false)
    }

    /// Checks a scatter index against `x` and returns its flat target offsets.
    fn scatter_offsets(&self, op: &'static str, a: usize, indices: &Indices) -> Result<Vec<usize>> {
        check_like(op, indices, self.shape(), a, true)?;
        let idx = indices.checked(op, self.shape()[a])?;
        let mut offsets = vec![0usize; idx.len()];
        k::scatter_offsets(self.shape(), a, (&idx, indices.shape()), &mut offsets);
        Ok(offsets)
    }

    /// `x` with the slices `idx[j]` of `axis` replaced by the slices `j` of `src`
    /// (`torch.index_copy`); `src` has `x`'s shape with `axis` of size `idx.len()`. Duplicate
    /// indices: the last slice wins.
    ///
    /// Backward: `gx = gy` with the copied slices zeroed; `gsrc = gy.index_select(axis, idx)`
    /// for the surviving slices, 0 for overwritten ones.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `RankMismatch` for an index that is not rank 1; `ShapeMismatch` for a
    /// `src` of the wrong shape; `IndexOutOfRange`.
    pub fn index_copy(&self, axis: impl Into<Axis>, indices: &Indices, src: &Tensor) -> Result<Tensor> {
        let a = self.axis("index_copy", axis)?;
        if indices.rank() != 1 {
            return fail(ErrorKind::RankMismatch {
                op: "index_copy",
                expected: "rank-1 indices",
                shape: indices.shape().to_vec(),
            });
        }
        let mut want: Shape = self.shape().into();
        want[a] = indices.len();
        if src.shape() != want.as_slice() {
            return fail(ErrorKind::ShapeMismatch { op: "index_copy", lhs: want.to_vec(), rhs: src.shape().to_vec() });
        }
        let idx = indices.checked("index_copy", self.shape()[a])?;
        let (outer, d, inner) = split3(self.shape(), a);
        let mut offsets = Vec::with_capacity(src.numel());
        for o in 0..if src.numel() == 0 { 0 } else { outer } {
            for &j in &idx {
                offsets.extend((0..inner).map(|i| (o * d + j) * inner + i));
            }
        }
        put("index_copy", self, offsets, &src.reshape(&[src.numel()])?, false)
    }

    /// `x[indices[0], indices[1], ..] = values` (`torch.index_put(indices, values,
    /// accumulate)`): the `k` index tensors broadcast together to a shape `B` and address the
    /// first `k` axes of `x` (negative values count from the end); `values` broadcasts to `B`
    /// followed by `x`'s remaining axes. With `accumulate` the values add (duplicates sum);
    /// otherwise they overwrite and, for duplicate targets, the last (row-major in `B`) wins.
    ///
    /// ```
    /// use forgia::{Indices, Tensor};
    /// let x = Tensor::zeros(&[2, 3])?;
    /// let (rows, cols) = (Indices::from(vec![0i64, 1, 1]), Indices::from(vec![2i64, 0, -1]));
    /// let y = x.index_put(&[rows, cols], &Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?, false)?;
    /// assert_eq!(y.to_vec(), vec![0.0, 0.0, 1.0, 2.0, 0.0, 3.0]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// Backward: `gx = gy` (accumulate) or `gy` with the written positions zeroed;
    /// `gvalues = sum_to(gy[indices], values.shape)` (overwritten duplicates get 0).
    ///
    /// # Errors
    /// `InvalidArgument` for no index or more indices than axes; `ShapeMismatch` when the
    /// indices or the values do not broadcast; `IndexOutOfRange`.
    pub fn index_put(&self, indices: &[Indices], values: &Tensor, accumulate: bool) -> Result<Tensor> {
        let op = "index_put";
        let kx = indices.len();
        if kx == 0 || kx > self.rank() {
            return fail(ErrorKind::InvalidArgument {
                op,
                arg: "indices",
                reason: format!(
                    "{kx} index tensors for a tensor of shape {:?} (need 1 to {})",
                    self.shape(),
                    self.rank()
                ),
            });
        }
        let b = indices.iter().try_fold(Shape::new(), |s, i| broadcast_shapes(op, &s, i.shape()))?;
        let tail = &self.shape()[kx..];
        let full: Shape = b.iter().chain(tail).copied().collect();
        // The broadcast indices can address more positions than memory holds: checked sizes,
        // fallible buffers.
        let m = Size::of(op, &full)?.numel();
        Size::work(op, &full, &[m, kx])?;
        if broadcast_shapes(op, values.shape(), &full)?.as_slice() != full.as_slice() {
            return fail(ErrorKind::ShapeMismatch { op, lhs: full.to_vec(), rhs: values.shape().to_vec() });
        }
        let strides = crate::tensor::layout::contiguous_strides(self.shape());
        // Per index tensor: its values resolved, and broadcast to `B`.
        let mut resolved = Vec::with_capacity(kx);
        for (axis, i) in indices.iter().enumerate() {
            let vals: Vec<usize> = i.data().iter().map(|&v| wrap(op, v, self.shape()[axis])).collect::<Result<_>>()?;
            let layout = crate::tensor::Layout::contiguous(i.shape()).broadcast_to(&b);
            let mut at = offsets_buffer(op, numel(&b))?;
            crate::tensor::layout::for_each_offset(&layout, |off| at.push(vals[off]));
            resolved.push(at);
        }
        let (nb, nt) = (numel(&b), numel(tail));
        let mut offsets = offsets_buffer(op, m)?;
        for p in 0..nb {
            let base: usize = resolved.iter().enumerate().map(|(axis, r)| r[p] * strides[axis] as usize).sum();
            offsets.extend((0..nt).map(|t| base + t));
        }
        let v = values.broadcast_to(&full)?;
        put(op, self, offsets, &v.reshape(&[m])?, accumulate)
    }

    /// The elements of `x` where `mask` is nonzero, row-major, as a 1-D tensor
    /// (`torch.masked_select`); `x` and `mask` broadcast together first.
    ///
    /// Backward: `gx = sum_to(zeros(shape).masked_scatter(mask, gy), x.shape)` (through
    /// `index_select`).
    ///
    /// # Errors
    /// `ShapeMismatch` when `x` and `mask` do not broadcast.
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        let shape = broadcast_shapes("masked_select", self.shape(), mask.shape())?;
        let at = mask_positions("masked_select", mask, &shape)?;
        let flat = self.broadcast_to(&shape)?.reshape(&[numel(&shape)])?;
        flat.index_select(0, &offsets_index(&at))
    }

    /// `x` with the positions where `mask` is nonzero filled, in row-major order, by the first
    /// elements of `source` (any shape, read row-major; `torch.masked_scatter`). The mask
    /// broadcasts to `x`'s shape.
    ///
    /// Backward: `gx = gy` with the masked positions zeroed; `gsource` holds
    /// `gy.masked_select(mask)` in its first elements and 0 after them.
    ///
    /// # Errors
    /// `ShapeMismatch` when the mask does not broadcast to `x`'s shape; `InvalidArgument` when
    /// `source` has fewer elements than the mask has nonzeros.
    pub fn masked_scatter(&self, mask: &Tensor, source: &Tensor) -> Result<Tensor> {
        let op = "masked_scatter";
        let shape = broadcast_shapes(op, self.shape(), mask.shape())?;
        if shape.as_slice() != self.shape() {
            return fail(ErrorKind::ShapeMismatch { op, lhs: self.shape().to_vec(), rhs: mask.shape().to_vec() });
        }
        let at = mask_positions(op, mask, &shape)?;
        if source.numel() < at.len() {
            return fail(ErrorKind::InvalidArgument {
                op,
                arg: "source",
                reason: format!(
                    "the mask selects {} elements but source of shape {:?} has {}",
                    at.len(),
                    source.shape(),
                    source.numel()
                ),
            });
        }
        let v = source.reshape(&[source.numel()])?.narrow(0, 0, at.len())?;
        put(op, self, at, &v, false)
    }
}

/// The record of [`put`]: `gx = gy * keep` (or `gy` when accumulating) and
/// `gv = gy.flatten().index_select(0, at) * win` (or without `win`).
struct PutBackward {
    name: &'static str,
    /// The flat offsets written, one per value.
    at: Indices,
    /// `(keep, win)` for an overwrite; `None` when accumulating.
    masks: Option<(Array, Array)>,
    out_shape: Shape,
}

impl Backward for PutBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, 2);
        if cx.needs_grad(0) {
            out[0] = Some(match &self.masks {
                Some((keep, _)) => gy.mul(&Tensor::from(keep))?,
                None => gy.clone(),
            });
        }
        if cx.needs_grad(1) {
            let g = gy.reshape(&[numel(&self.out_shape)])?.index_select(0, &self.at)?;
            out[1] = Some(match &self.masks {
                Some((_, win)) => g.mul(&Tensor::from(win))?,
                None => g,
            });
        }
        Ok(())
    }
}
