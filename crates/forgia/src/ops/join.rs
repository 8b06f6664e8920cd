//! Shape ops that join, split or rebuild tensors: concat, stack, split, chunk, pad (constant,
//! reflect, replicate, circular), flip, roll, repeat, and reshape with an inferred axis. Splits are views; the others write one
//! packed output. Every backward is built from views (narrow) or from these same ops, so it
//! is differentiable.

use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{fail, within, ErrorKind, Result};
use crate::kernels::copy;
use crate::tensor::layout::numel;
use crate::tensor::{names, Axis, Layout, Shape, Size};

/// Checks that every tensor has the rank and shape of the first, except along `axis`.
fn check_same_but(op: &'static str, ts: &[&Tensor], axis: Option<usize>) -> Result<()> {
    let first = ts[0].shape();
    for t in &ts[1..] {
        let ok = t.rank() == first.len()
            && t.shape().iter().zip(first).enumerate().all(|(i, (a, b))| a == b || Some(i) == axis);
        if !ok {
            return fail(ErrorKind::ShapeMismatch { op, lhs: first.to_vec(), rhs: t.shape().to_vec() });
        }
    }
    Ok(())
}

impl Tensor {
    /// Joins tensors along an existing `axis` (resolved against the first tensor); all other
    /// axes must match.
    ///
    /// Backward: operand `i` gets `gy.narrow(axis, offset_i, len_i)` (a view).
    ///
    /// # Errors
    /// `InvalidArgument` for an empty list; `AxisOutOfRange`; `ShapeMismatch` when ranks or
    /// the other axes differ.
    pub fn concat(tensors: &[&Tensor], axis: impl Into<Axis>) -> Result<Tensor> {
        if tensors.is_empty() {
            return fail(ErrorKind::InvalidArgument { op: "concat", arg: "tensors", reason: "empty list".into() });
        }
        let a = tensors[0].axis("concat", axis)?;
        check_same_but("concat", tensors, Some(a))?;
        let sizes: Vec<usize> = tensors.iter().map(|t| t.shape()[a]).collect();
        let mut shape: Shape = tensors[0].shape().into();
        shape[a] = sizes.iter().try_fold(0usize, |acc, &s| acc.checked_add(s)).unwrap_or(usize::MAX);
        Size::of("concat", &shape)?;
        let mut data = crate::tensor::zeroed("concat", numel(&shape))?;
        let full = Layout::contiguous(&shape);
        let mut start = 0;
        for (t, &len) in tensors.iter().zip(&sizes) {
            t.with_data(|v| copy::scatter(&mut data, &full.narrowed(a, start, len, 1), v));
            start += len;
        }
        let mut out = Tensor::from_parts(data, &shape);
        out.names = names::unified("concat", tensors.iter().map(|t| (t.names.as_ref(), t.rank())))?;
        Ok(attach(out, tensors, || ConcatBackward { axis: a, sizes }))
    }

    /// Joins equally shaped tensors along a new `axis` (`0..=rank`, negative counts from the
    /// end of the output).
    ///
    /// Backward: through `unsqueeze` and `concat` (a view per operand).
    ///
    /// # Errors
    /// `InvalidArgument` for an empty list; `AxisOutOfRange` (naming the valid range);
    /// `UnknownAxisName` for a name (the new axis has none); `ShapeMismatch` when shapes differ.
    pub fn stack(tensors: &[&Tensor], axis: impl Into<Axis>) -> Result<Tensor> {
        within("stack", || {
            if tensors.is_empty() {
                return fail(ErrorKind::InvalidArgument { op: "stack", arg: "tensors", reason: "empty list".into() });
            }
            check_same_but("stack", tensors, None)?;
            let axis = crate::tensor::resolve_insert("stack", &axis.into(), tensors[0].rank())?;
            let parts = tensors.iter().map(|t| t.unsqueeze(axis)).collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = parts.iter().collect();
            Tensor::concat(&refs, axis)
        })
    }

    /// Splits `axis` into consecutive parts of the given `sizes` (views).
    ///
    /// # Errors
    /// `AxisOutOfRange`; `InvalidArgument` when the sizes do not add up to the axis.
    pub fn split(&self, axis: impl Into<Axis>, sizes: &[usize]) -> Result<Vec<Tensor>> {
        let a = self.axis("split", axis)?;
        let total = sizes.iter().try_fold(0usize, |acc, &s| acc.checked_add(s));
        if total != Some(self.shape()[a]) {
            return fail(ErrorKind::InvalidArgument {
                op: "split",
                arg: "sizes",
                reason: format!("{sizes:?} do not add up to {} (shape {:?})", self.shape()[a], self.shape()),
            });
        }
        let mut start = 0;
        let mut parts = Vec::with_capacity(sizes.len());
        for &len in sizes {
            parts.push(self.narrow(a, start, len)?);
            start += len;
        }
        Ok(parts)
    }

    /// Splits `axis` into `n` views of `ceil(size / n)` elements (the last may be smaller, and
    /// there may be fewer than `n` parts), like `torch.chunk`; an empty axis gives `n` empty
    /// views.
    ///
    /// # Errors
    /// `AxisOutOfRange`; `InvalidArgument` for `n == 0`.
    pub fn chunk(&self, n: usize, axis: impl Into<Axis>) -> Result<Vec<Tensor>> {
        within("chunk", || {
            let a = self.axis("chunk", axis)?;
            if n == 0 {
                return fail(ErrorKind::InvalidArgument { op: "chunk", arg: "n", reason: "must be at least 1".into() });
            }
            let size = self.shape()[a];
            let step = size.div_ceil(n).max(1);
            // An empty axis gives `n` empty parts, as in PyTorch (the list allocated fallibly).
            let sizes: Vec<usize> = if size == 0 {
                let mut zeros = Vec::new();
                zeros.try_reserve_exact(n).map_err(|_| ErrorKind::OutOfMemory {
                    op: "chunk",
                    bytes: n.saturating_mul(size_of::<Tensor>()),
                })?;
                zeros.resize(n, 0);
                zeros
            } else {
                (0..size).step_by(step).map(|s| step.min(size - s)).collect()
            };
            self.split(a, &sizes)
        })
    }

    /// Constant padding: `pads[i] = (before, after)` elements of `value` around axis `i`
    /// (one pair per axis, in axis order).
    ///
    /// Backward: `gx = gy` narrowed back to the interior (a view).
    ///
    /// # Errors
    /// `RankMismatch` unless there is one pair per axis.
    pub fn pad(&self, pads: &[(usize, usize)], value: f32) -> Result<Tensor> {
        if pads.len() != self.rank() {
            return fail(ErrorKind::RankMismatch {
                op: "pad",
                expected: "one (before, after) pair per axis",
                shape: self.shape().to_vec(),
            });
        }
        let mut shape = Shape::new();
        for (&d, &(b, e)) in self.shape().iter().zip(pads) {
            shape.push(Size::add("pad", self.shape(), d, b).and_then(|s| Size::add("pad", self.shape(), s, e))?);
        }
        let mut data = crate::tensor::buffer("pad", Size::of("pad", &shape)?.numel())?;
        data.fill(value);
        let mut inner = Layout::contiguous(&shape);
        for (i, (&d, &(b, _))) in self.shape().iter().zip(pads).enumerate() {
            inner = inner.narrowed(i, b, d, 1);
        }
        self.with_data(|v| copy::scatter(&mut data, &inner, v));
        let mut out = Tensor::from_parts(data, &shape);
        out.names = self.names.clone();
        Ok(attach(out, &[self], || PadBackward { pads: pads.to_vec(), in_shape: self.shape().into() }))
    }

    /// Padding in any of PyTorch's modes (`torch.nn.functional.pad`): `pads[i] = (before,
    /// after)` around axis `i`, one pair per axis in axis order (not `F.pad`'s reversed flat
    /// list). Any axis may be padded; the axes are padded in order, so corners come out as in
    /// PyTorch. `Reflect` mirrors without repeating the edge (`[1 2 3]` → `3 2 [1 2 3] 2 1`),
    /// `Replicate` repeats the edge, `Circular` wraps around.
    ///
    /// Backward: built from `narrow`, `flip`, `broadcast_to` and `concat`, so border elements
    /// collect the gradient of every copy (differentiable to every order).
    ///
    /// # Errors
    /// `RankMismatch` unless there is one pair per axis; `InvalidArgument` when a `Reflect`
    /// pad is not smaller than its axis, a `Circular` pad is larger than its axis, or a
    /// `Replicate` pad extends an empty axis.
    pub fn pad_with(&self, pads: &[(usize, usize)], mode: PadMode) -> Result<Tensor> {
        match mode {
            PadMode::Constant(value) => self.pad(pads, value),
            _ if pads.len() != self.rank() => fail(ErrorKind::RankMismatch {
                op: "pad",
                expected: "one (before, after) pair per axis",
                shape: self.shape().to_vec(),
            }),
            _ => pads.iter().enumerate().try_fold(self.clone(), |x, (a, &p)| x.pad_axis(a, p, mode)),
        }
    }

    /// Pads one axis in a non-constant mode.
    fn pad_axis(&self, axis: usize, (before, after): (usize, usize), mode: PadMode) -> Result<Tensor> {
        let n = self.shape()[axis];
        if before == 0 && after == 0 {
            return Ok(self.clone());
        }
        let limit_ok = match mode {
            PadMode::Reflect => before < n && after < n,
            PadMode::Circular => before <= n && after <= n,
            _ => n > 0,
        };
        if !limit_ok {
            return fail(ErrorKind::InvalidArgument {
                op: "pad",
                arg: "pads",
                reason: format!("{mode:?} padding ({before}, {after}) does not fit axis {axis} of size {n}"),
            });
        }
        let edge = |start: usize, len: usize| -> Result<Tensor> {
            let mut shape = self.shape().to_vec();
            shape[axis] = len;
            self.narrow(axis, start, 1)?.broadcast_to(&shape)
        };
        let (left, right) = match mode {
            PadMode::Reflect => {
                (self.narrow(axis, 1, before)?.flip(axis)?, self.narrow(axis, n - 1 - after, after)?.flip(axis)?)
            }
            PadMode::Circular => (self.narrow(axis, n - before, before)?, self.narrow(axis, 0, after)?),
            _ => (edge(0, before)?, edge(n - 1, after)?),
        };
        Tensor::concat(&[&left, self, &right], axis)
    }

    /// Rolls elements along `dims` by `shifts` (`torch.roll`): element `i` moves to
    /// `(i + shift) mod n`. With no `dims`, the tensor is rolled as if flattened, by the one
    /// shift given.
    ///
    /// Backward: `gx = roll(gy, -shifts, dims)` (through `narrow` and `concat`).
    ///
    /// # Errors
    /// `InvalidArgument` when `shifts` and `dims` differ in length (or, with no `dims`, when
    /// there is not exactly one shift); `AxisOutOfRange` for a bad dim.
    pub fn roll(&self, shifts: &[isize], dims: &[isize]) -> Result<Tensor> {
        if dims.is_empty() {
            if shifts.len() != 1 {
                let reason = format!("{} shifts without dims (need exactly one)", shifts.len());
                return fail(ErrorKind::InvalidArgument { op: "roll", arg: "shifts", reason });
            }
            return self.reshape(&[self.numel()])?.roll(shifts, &[0])?.reshape(self.shape());
        }
        if shifts.len() != dims.len() {
            let reason = format!("{} shifts for {} dims", shifts.len(), dims.len());
            return fail(ErrorKind::InvalidArgument { op: "roll", arg: "shifts", reason });
        }
        let mut out = self.clone();
        for (&shift, &dim) in shifts.iter().zip(dims) {
            let a = self.axis("roll", dim)?;
            let n = self.shape()[a];
            let s = if n == 0 { 0 } else { shift.rem_euclid(n as isize) as usize };
            if s != 0 {
                out = Tensor::concat(&[&out.narrow(a, n - s, s)?, &out.narrow(a, 0, n - s)?], a)?;
            }
        }
        Ok(out)
    }

    /// Reverses the order of elements along each of `axes` (a packed copy: views never carry
    /// negative strides).
    ///
    /// Backward: `gx = gy.flip(axes)`.
    ///
    /// # Errors
    /// `AxisOutOfRange`, `UnknownAxisName` or `DuplicateAxis` for bad axes.
    pub fn flip(&self, axes: impl Into<crate::tensor::Axes>) -> Result<Tensor> {
        let axes = self.axes("flip", axes)?;
        let mut l = self.layout.clone();
        for &a in &axes {
            let d = l.shape[a];
            if d > 0 {
                l.offset = (l.offset as isize + (d as isize - 1) * l.strides[a]) as usize;
            }
            l.strides[a] = -l.strides[a];
        }
        let mut out = Tensor::from_parts(crate::tensor::gather("flip", self.storage().as_slice(), &l)?, self.shape());
        out.names = self.names.clone();
        Ok(attach(out, &[self], || FlipBackward { axes: axes.to_vec() }))
    }

    /// Tiles the tensor: axis `i` is repeated `repeats[i]` times (`torch.Tensor.repeat`).
    /// With more repeats than axes, leading size-1 axes are prepended first.
    ///
    /// Backward: through `reshape` and `broadcast_to` (a sum over the copies).
    ///
    /// # Errors
    /// `RankMismatch` when there are fewer repeats than axes.
    pub fn repeat(&self, repeats: &[usize]) -> Result<Tensor> {
        within("repeat", || {
            if repeats.len() < self.rank() {
                return fail(ErrorKind::RankMismatch {
                    op: "repeat",
                    expected: "at least one repeat count per axis",
                    shape: self.shape().to_vec(),
                });
            }
            let extra = repeats.len() - self.rank();
            let dims: Vec<usize> = std::iter::repeat_n(1, extra).chain(self.shape().iter().copied()).collect();
            // [1, d0, 1, d1, ...] broadcast to [r0, d0, r1, d1, ...], then merged pairwise.
            let interleaved: Vec<usize> = dims.iter().flat_map(|&d| [1, d]).collect();
            let expanded: Vec<usize> = repeats.iter().zip(&dims).flat_map(|(&r, &d)| [r, d]).collect();
            let merged = repeats.iter().zip(&dims).map(|(&r, &d)| Size::mul("repeat", self.shape(), r, d));
            let merged = merged.collect::<Result<Vec<usize>>>()?;
            let mut out = self.reshape(&interleaved)?.broadcast_to(&expanded)?.reshape(&merged)?;
            // The tiled axes keep their names; prepended ones have none.
            out.names = names::picked(
                self.names.as_ref(),
                &(0..repeats.len()).map(|i| i.checked_sub(extra)).collect::<Vec<_>>(),
            );
            Ok(out)
        })
    }

    /// [`Tensor::reshape`] where one entry may be `-1`, inferred from the element count.
    ///
    /// # Errors
    /// `InvalidReshape` for more than one `-1`, another negative entry, or sizes that do not fit
    /// (the `-1` shows as `usize::MAX` in the error).
    pub fn reshape_infer(&self, shape: &[isize]) -> Result<Tensor> {
        within("reshape_infer", || {
            let to: Vec<usize> = shape.iter().map(|&d| if d < 0 { usize::MAX } else { d as usize }).collect();
            let bad = || ErrorKind::InvalidReshape { op: "reshape_infer", from: self.shape().to_vec(), to: to.clone() };
            let inferred: Vec<usize> = (0..shape.len()).filter(|&i| shape[i] < 0).collect();
            if inferred.len() > 1 || inferred.iter().any(|&i| shape[i] != -1) {
                return fail(bad());
            }
            let mut dims = to.clone();
            if let Some(&i) = inferred.first() {
                let known =
                    Size::of("reshape_infer", &to.iter().copied().filter(|&d| d != usize::MAX).collect::<Vec<_>>())?;
                let known = known.numel();
                if known == 0 || !self.numel().is_multiple_of(known) {
                    return fail(bad());
                }
                dims[i] = self.numel() / known;
            }
            self.reshape(&dims)
        })
    }
}

/// How [`Tensor::pad_with`] fills the border.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// A constant value (PyTorch's `"constant"`).
    Constant(f32),
    /// The mirror image without the edge element (`"reflect"`).
    Reflect,
    /// The edge element repeated (`"replicate"`).
    Replicate,
    /// The other end of the axis (`"circular"`).
    Circular,
}

struct ConcatBackward {
    axis: usize,
    sizes: Vec<usize>,
}
impl Backward for ConcatBackward {
    fn name(&self) -> &'static str {
        "concat"
    }
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, self.sizes.len());
        let mut start = 0;
        for (i, &len) in self.sizes.iter().enumerate() {
            if cx.needs_grad(i) {
                out[i] = Some(gy.narrow(self.axis, start, len)?);
            }
            start += len;
        }
        Ok(())
    }
}

struct PadBackward {
    pads: Vec<(usize, usize)>,
    in_shape: Shape,
}
impl Backward for PadBackward {
    fn name(&self) -> &'static str {
        "pad"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let mut g = gy.clone();
        for (i, (&d, &(b, _))) in self.in_shape.iter().zip(&self.pads).enumerate() {
            g = g.narrow(i, b, d)?;
        }
        out.push(Some(g));
        Ok(())
    }
}

struct FlipBackward {
    axes: Vec<usize>,
}
impl Backward for FlipBackward {
    fn name(&self) -> &'static str {
        "flip"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.flip(self.axes.clone())?));
        Ok(())
    }
}
