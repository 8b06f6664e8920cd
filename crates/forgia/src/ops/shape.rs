//! Shape ops. Views first: reshape of contiguous data, permute, transpose, narrow/slice with a
//! step, broadcast, squeeze/unsqueeze and flatten never copy; `contiguous` copies only when
//! the layout is not packed already.

use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, within, ErrorKind, Result};
use crate::kernels::copy;
use crate::tensor::layout::numel;
use crate::tensor::{names, Axis, Layout, Shape, Size};

/// A new tensor over the same storage with another layout (no node yet, names dropped).
fn view(x: &Tensor, layout: Layout) -> Tensor {
    x.with_layout(layout)
}

/// A packed copy of `x`, differentiable (the backward is the identity).
pub(crate) fn materialize(x: &Tensor) -> Result<Tensor> {
    let mut out =
        Tensor::from_parts(crate::tensor::gather("contiguous", x.storage().as_slice(), &x.layout)?, x.shape());
    out.names = x.names.clone();
    Ok(attach(out, &[x], || IdentityBackward))
}

impl Tensor {
    /// A contiguous tensor with the same values: `self` (shared) when already contiguous, else
    /// a copy. Differentiable.
    ///
    /// # Errors
    /// `WorkLimitExceeded` / `OutOfMemory` when the copy of a broadcast view is too large.
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        materialize(self)
    }

    /// The same elements with another shape of equal size: a view of contiguous data, a copy
    /// otherwise.
    ///
    /// Backward: `gx = gy.reshape(x.shape)`.
    ///
    /// # Errors
    /// `InvalidReshape` when the element counts differ; `SizeOverflow` when the new shape's
    /// size overflows (`[0]` into `[4, 2^62]`: 4 · 2^62 wraps to 0, and is refused).
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if Size::of("reshape", shape)?.numel() != self.numel() {
            return fail(ErrorKind::InvalidReshape { op: "reshape", from: self.shape().to_vec(), to: shape.to_vec() });
        }
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let out = match self.layout.reshaped(shape) {
            Some(l) => view(self, l),
            None => {
                Tensor::from_parts(crate::tensor::gather("reshape", self.storage().as_slice(), &self.layout)?, shape)
            }
        };
        Ok(attach(out, &[self], || ReshapeBackward { in_shape: self.shape().into() }))
    }

    /// Flattens axes `start..=end` into one.
    ///
    /// # Errors
    /// `AxisOutOfRange` for bad axes, or `end` before `start`.
    pub fn flatten(&self, start: impl Into<Axis>, end: impl Into<Axis>) -> Result<Tensor> {
        within("flatten", || {
            if self.rank() == 0 {
                return self.reshape(&[1]);
            }
            let (s, e) = (self.axis("flatten", start)?, self.axis("flatten", end)?);
            if e < s {
                return fail(ErrorKind::InvalidArgument {
                    op: "flatten",
                    arg: "end",
                    reason: format!("end axis {e} is before start axis {s}"),
                });
            }
            let mut shape: Vec<usize> = self.shape()[..s].to_vec();
            shape.push(numel(&self.shape()[s..=e]));
            shape.extend_from_slice(&self.shape()[e + 1..]);
            self.reshape(&shape)
        })
    }

    /// Reorders the axes: output axis `i` is input axis `dims[i]`. A view.
    ///
    /// Backward: `gx = gy.permute(inverse(dims))`.
    ///
    /// # Errors
    /// `RankMismatch` unless `dims` is a permutation of the axes.
    pub fn permute(&self, dims: &[usize]) -> Result<Tensor> {
        let mut seen = vec![false; self.rank()];
        if dims.len() != self.rank() || dims.iter().any(|&d| d >= self.rank() || std::mem::replace(&mut seen[d], true))
        {
            return fail(ErrorKind::RankMismatch {
                op: "permute",
                expected: "a permutation of every axis",
                shape: self.shape().to_vec(),
            });
        }
        let mut out = view(self, self.layout.permuted(dims));
        out.names = self.names.as_ref().map(|n| dims.iter().map(|&d| n[d].clone()).collect::<Vec<_>>().into());
        let mut inverse = vec![0; dims.len()];
        for (i, &d) in dims.iter().enumerate() {
            inverse[d] = i;
        }
        Ok(attach(out, &[self], || PermuteBackward { inverse }))
    }

    /// Swaps two axes. A view.
    ///
    /// # Errors
    /// `AxisOutOfRange` for bad axes.
    pub fn transpose(&self, a: impl Into<Axis>, b: impl Into<Axis>) -> Result<Tensor> {
        let (a, b) = (self.axis("transpose", a)?, self.axis("transpose", b)?);
        let mut dims: Vec<usize> = (0..self.rank()).collect();
        dims.swap(a, b);
        self.permute(&dims)
    }

    /// `len` elements of `axis` starting at `start`. A view.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `IndexOutOfRange` when the range leaves the axis.
    pub fn narrow(&self, axis: impl Into<Axis>, start: usize, len: usize) -> Result<Tensor> {
        let a = self.axis("narrow", axis)?;
        // Checked: a huge `start + len` must be an error, not an overflow panic.
        let end = start.checked_add(len).filter(|&e| e <= self.shape()[a]);
        if end.is_none() {
            return fail(ErrorKind::IndexOutOfRange {
                op: "narrow",
                index: start.saturating_add(len).min(i64::MAX as usize) as i64,
                size: self.shape()[a],
            });
        }
        Ok(self.strided_slice(a, start, len, 1))
    }

    /// Python-style `x[start:end:step]` along `axis`; negative `start`/`end` count from the
    /// end and are clamped like Python's. A view.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `InvalidArgument` for a step of 0.
    pub fn slice(&self, axis: impl Into<Axis>, start: isize, end: isize, step: usize) -> Result<Tensor> {
        let a = self.axis("slice", axis)?;
        if step == 0 {
            return fail(ErrorKind::InvalidArgument { op: "slice", arg: "step", reason: "must be at least 1".into() });
        }
        let n = self.shape()[a] as isize;
        let clamp = |i: isize| if i < 0 { (i + n).max(0) } else { i.min(n) } as usize;
        let (s, e) = (clamp(start), clamp(end));
        let len = if e > s { (e - s).div_ceil(step) } else { 0 };
        Ok(self.strided_slice(a, s, len, step))
    }

    fn strided_slice(&self, axis: usize, start: usize, len: usize, step: usize) -> Tensor {
        let mut out = view(self, self.layout.narrowed(axis, start, len, step));
        out.names = self.names.clone();
        attach(out, &[self], || NarrowBackward { in_shape: self.shape().into(), axis, start, step })
    }

    /// This tensor seen with a broadcast `shape` (stride 0 on stretched axes). A view.
    ///
    /// Backward: `gx = sum_to(gy, x.shape)`.
    ///
    /// # Errors
    /// `ShapeMismatch` when `x` does not broadcast to `shape`.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        Size::of("broadcast_to", shape)?;
        let ok = shape.len() >= self.rank()
            && self.shape().iter().zip(&shape[shape.len() - self.rank()..]).all(|(&a, &b)| a == b || a == 1);
        if !ok {
            return fail(ErrorKind::ShapeMismatch {
                op: "broadcast_to",
                lhs: self.shape().to_vec(),
                rhs: shape.to_vec(),
            });
        }
        if shape == self.shape() {
            return Ok(self.clone());
        }
        let mut out = view(self, self.layout.broadcast_to(shape));
        // The stretched axes keep their names; new leading axes have none.
        let extra = shape.len() - self.rank();
        out.names =
            names::picked(self.names.as_ref(), &(0..shape.len()).map(|i| i.checked_sub(extra)).collect::<Vec<_>>());
        Ok(attach(out, &[self], || ExpandBackward))
    }

    /// Removes `axis`, which must have size 1. A view.
    ///
    /// PyTorch silently returns the input when the axis is not of size 1; we refuse it, since
    /// the caller's shape is then not the one they wrote the code for.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `InvalidArgument` (arg `axis`, naming its size) when the axis is not
    /// of size 1.
    pub fn squeeze(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        let a = self.axis("squeeze", axis)?;
        if self.shape()[a] != 1 {
            let reason = format!("axis {a} has size {}, not 1 (shape {:?})", self.shape()[a], self.shape());
            return fail(ErrorKind::InvalidArgument { op: "squeeze", arg: "axis", reason });
        }
        let mut l = self.layout.clone();
        l.shape.remove(a);
        l.strides.remove(a);
        let mut out = view(self, l);
        out.names = names::without(self.names.as_ref(), &[a]);
        Ok(attach(out, &[self], || ReshapeBackward { in_shape: self.shape().into() }))
    }

    /// Inserts a size-1 axis at position `axis` (`0..=rank`; negative counts from the end of
    /// the output). A view.
    ///
    /// # Errors
    /// `AxisOutOfRange` outside `-(rank+1)..=rank` (the error names that range);
    /// `UnknownAxisName` for a name (the new axis has none).
    pub fn unsqueeze(&self, axis: impl Into<Axis>) -> Result<Tensor> {
        let a = crate::tensor::resolve_insert("unsqueeze", &axis.into(), self.rank())?;
        let mut l = self.layout.clone();
        l.shape.insert(a, 1);
        l.strides.insert(a, 0);
        let mut out = view(self, l);
        out.names = names::inserted(self.names.as_ref(), a);
        Ok(attach(out, &[self], || ReshapeBackward { in_shape: self.shape().into() }))
    }
}

struct IdentityBackward;
impl Backward for IdentityBackward {
    fn name(&self) -> &'static str {
        "contiguous"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.clone()));
        Ok(())
    }
}

struct ReshapeBackward {
    in_shape: Shape,
}
impl Backward for ReshapeBackward {
    fn name(&self) -> &'static str {
        "reshape"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.reshape(&self.in_shape)?));
        Ok(())
    }
}

struct PermuteBackward {
    inverse: Vec<usize>,
}
impl Backward for PermuteBackward {
    fn name(&self) -> &'static str {
        "permute"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.permute(&self.inverse)?));
        Ok(())
    }
}

/// Backward of `broadcast_to`: `gy` as it is, in the broadcast shape (the engine sums it back
/// to the input's shape).
struct ExpandBackward;
impl Backward for ExpandBackward {
    fn name(&self) -> &'static str {
        "broadcast_to"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.clone()));
        Ok(())
    }
}

struct NarrowBackward {
    in_shape: Shape,
    axis: usize,
    start: usize,
    step: usize,
}
impl Backward for NarrowBackward {
    fn name(&self) -> &'static str {
        "slice"
    }
    /// `gx = zeros(x.shape)` with `gy` written at the sliced positions.
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(slice_scatter(gy, &self.in_shape, self.axis, self.start, self.step)?));
        Ok(())
    }
}

/// Embeds `g` into zeros of `shape` at positions `start, start+step, …` of `axis`.
///
/// Backward: `gg = gy` sliced the same way.
fn slice_scatter(g: &Tensor, shape: &[usize], axis: usize, start: usize, step: usize) -> Result<Tensor> {
    let mut data = crate::tensor::zeroed("slice", numel(shape))?;
    let target = Layout::contiguous(shape).narrowed(axis, start, g.shape()[axis], step);
    g.with_data(|v| copy::scatter_add(&mut data, &target, v));
    let out = Tensor::from_parts(data, shape);
    let len = g.shape()[axis];
    Ok(attach(out, &[g], || SliceScatterBackward { axis, start, len, step }))
}

struct SliceScatterBackward {
    axis: usize,
    start: usize,
    len: usize,
    step: usize,
}
impl Backward for SliceScatterBackward {
    fn name(&self) -> &'static str {
        "slice_scatter"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.strided_slice(self.axis, self.start, self.len, self.step)));
        Ok(())
    }
}
