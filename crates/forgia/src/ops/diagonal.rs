//! Matrix-structure ops over two axes (PyTorch semantics): `tril`, `triu`, `diagonal` (a
//! view), `diag` (both directions), `diag_embed` and `trace`. `diagonal` and the private
//! `diagonal_scatter` are each other's backward, so every order of derivative works.

use super::unary::constant_map;
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::copy;
use crate::tensor::layout::numel;
use crate::tensor::layout::Strides;
use crate::tensor::resolve_index;
use crate::tensor::{Layout, Shape};

/// The layout of the `offset` diagonal of axes `d1`, `d2` of `l`: both axes removed, the
/// diagonal appended last with stride `s1 + s2`.
fn diagonal_layout(l: &Layout, offset: isize, d1: usize, d2: usize) -> Layout {
    let (n1, n2) = (l.shape[d1] as isize, l.shape[d2] as isize);
    // Saturating: an offset near `isize::MIN` or `MAX` is simply an empty diagonal.
    let len =
        if offset >= 0 { n1.min(n2.saturating_sub(offset)) } else { n1.saturating_add(offset).min(n2) }.max(0) as usize;
    let start = if len == 0 {
        0
    } else if offset >= 0 {
        offset * l.strides[d2]
    } else {
        -offset * l.strides[d1]
    };
    let keep = (0..l.rank()).filter(|&a| a != d1 && a != d2);
    let mut shape: Shape = keep.clone().map(|a| l.shape[a]).collect();
    let mut strides: Strides = keep.map(|a| l.strides[a]).collect();
    shape.push(len);
    strides.push(l.strides[d1] + l.strides[d2]);
    Layout { shape, strides, offset: (l.offset as isize + start) as usize }
}

/// Two distinct axes among `rank`.
fn two_axes(op: &'static str, d1: isize, d2: isize, rank: usize) -> Result<(usize, usize)> {
    let (a, b) = (resolve_index(op, d1, rank, rank)?, resolve_index(op, d2, rank, rank)?);
    if a == b {
        let reason = format!("dim1 and dim2 are both axis {a}");
        return fail(ErrorKind::InvalidArgument { op, arg: "dim2", reason });
    }
    Ok((a, b))
}

/// Zeros of `shape` with `src` written on the `offset` diagonal of axes `d1`, `d2` (`src`
/// has that diagonal's shape: the other axes, then the diagonal).
///
/// Backward: `g_src = gy.diagonal(offset, d1, d2)`.
fn diagonal_scatter(src: &Tensor, shape: &[usize], offset: isize, d1: usize, d2: usize) -> Result<Tensor> {
    let mut data = crate::tensor::zeroed("diagonal_scatter", numel(shape))?;
    let target = diagonal_layout(&Layout::contiguous(shape), offset, d1, d2);
    src.try_with_data("diagonal_scatter", |v| {
        copy::scatter_add(&mut data, &target, v);
        Ok(())
    })?;
    let out = Tensor::from_parts(data, shape);
    Ok(attach(out, &[src], || DiagonalScatterBackward { offset, d1, d2 }))
}

impl Tensor {
    /// The lower triangle of the last two axes: elements with `col - row <= diagonal` are
    /// kept, the rest are 0 (`torch.tril`; `diagonal` 0 is the main diagonal, positive above
    /// it). NaN and ∞ above the triangle become 0, as in PyTorch.
    ///
    /// Backward: `gx = tril(gy, diagonal)`.
    ///
    /// # Errors
    /// `RankMismatch` below rank 2.
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("tril", move |d| d <= diagonal as f32)
    }

    /// The upper triangle of the last two axes: elements with `col - row >= diagonal` are
    /// kept (`torch.triu`).
    ///
    /// Backward: `gx = triu(gy, diagonal)`.
    ///
    /// # Errors
    /// `RankMismatch` below rank 2.
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle("triu", move |d| d >= diagonal as f32)
    }

    fn triangle(&self, op: &'static str, keep: impl Fn(f32) -> bool + Sync) -> Result<Tensor> {
        if self.rank() < 2 {
            return fail(ErrorKind::RankMismatch { op, expected: "rank >= 2", shape: self.shape().to_vec() });
        }
        let (r, c) = (self.shape()[self.rank() - 2], self.shape()[self.rank() - 1]);
        let rows = Tensor::arange(0.0, r as f32, 1.0)?.reshape(&[r, 1])?;
        let cols = Tensor::arange(0.0, c as f32, 1.0)?.reshape(&[1, c])?;
        let mask = constant_map(op, &cols.sub(&rows)?, |d| if keep(d) { 1.0 } else { 0.0 })?;
        Tensor::where_(&mask, self, &Tensor::scalar(0.0))
    }

    /// The `offset` diagonal of axes `dim1` and `dim2` (`torch.diagonal`): both axes are
    /// removed and the diagonal is appended as the last axis. Positive `offset` is above the
    /// main diagonal. A view.
    ///
    /// Backward: `gx` = zeros with `gy` written on that diagonal (itself differentiable).
    ///
    /// # Errors
    /// `AxisOutOfRange` for a bad axis; `InvalidArgument` when `dim1 == dim2`.
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Result<Tensor> {
        let (d1, d2) = two_axes("diagonal", dim1, dim2, self.rank())?;
        let out = self.with_layout(diagonal_layout(&self.layout, offset, d1, d2));
        Ok(attach(out, &[self], || DiagonalBackward { in_shape: self.shape().into(), offset, d1, d2 }))
    }

    /// `torch.diag`: a vector `[n]` becomes the `[m, m]` matrix (`m = n + |diagonal|`) with it
    /// on the `diagonal` diagonal; a matrix gives its `diagonal` diagonal as a vector.
    ///
    /// Backward: the other direction (`diag` of `gy` with the same offset).
    ///
    /// # Errors
    /// `RankMismatch` unless the rank is 1 or 2.
    pub fn diag(&self, diagonal: isize) -> Result<Tensor> {
        match self.rank() {
            1 => {
                let m = crate::tensor::Size::add("diag", self.shape(), self.shape()[0], diagonal.unsigned_abs())?;
                crate::tensor::Size::of("diag", &[m, m])?;
                diagonal_scatter(self, &[m, m], diagonal, 0, 1)
            }
            2 => self.diagonal(diagonal, 0, 1),
            _ => fail(ErrorKind::RankMismatch { op: "diag", expected: "rank 1 or 2", shape: self.shape().to_vec() }),
        }
    }

    /// `torch.diag_embed`: the last axis of `self` (size `n`) is written on the `offset`
    /// diagonal of a new pair of axes `dim1`, `dim2` of size `n + |offset|` (resolved against
    /// the output's rank, `rank + 1`; defaults in PyTorch are -2 and -1); the other axes keep
    /// their order.
    ///
    /// Backward: `gx = gy.diagonal(offset, dim1, dim2)`.
    ///
    /// # Errors
    /// `RankMismatch` for a rank-0 input; `AxisOutOfRange` / `InvalidArgument` for bad axes.
    pub fn diag_embed(&self, offset: isize, dim1: isize, dim2: isize) -> Result<Tensor> {
        if self.rank() == 0 {
            return fail(ErrorKind::RankMismatch { op: "diag_embed", expected: "rank >= 1", shape: vec![] });
        }
        let rank = self.rank() + 1;
        let (d1, d2) = two_axes("diag_embed", dim1, dim2, rank)?;
        let m =
            crate::tensor::Size::add("diag_embed", self.shape(), self.shape()[self.rank() - 1], offset.unsigned_abs())?;
        let mut batch = self.shape()[..self.rank() - 1].iter();
        let shape: Vec<usize> =
            (0..rank).map(|a| if a == d1 || a == d2 { m } else { *batch.next().unwrap_or(&0) }).collect();
        crate::tensor::Size::of("diag_embed", &shape)?;
        diagonal_scatter(self, &shape, offset, d1, d2)
    }

    /// The sum of the main diagonal of a matrix (`torch.trace`), as a rank-0 tensor.
    ///
    /// Backward: `gx = gy · I` (the identity pattern of the input's shape).
    ///
    /// # Errors
    /// `RankMismatch` unless the input is a matrix.
    pub fn trace(&self) -> Result<Tensor> {
        if self.rank() != 2 {
            return fail(ErrorKind::RankMismatch { op: "trace", expected: "rank 2", shape: self.shape().to_vec() });
        }
        Ok(self.diagonal(0, 0, 1)?.sum_all())
    }
}

struct DiagonalBackward {
    in_shape: Shape,
    offset: isize,
    d1: usize,
    d2: usize,
}
impl Backward for DiagonalBackward {
    fn name(&self) -> &'static str {
        "diagonal"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(diagonal_scatter(gy, &self.in_shape, self.offset, self.d1, self.d2)?));
        Ok(())
    }
}

struct DiagonalScatterBackward {
    offset: isize,
    d1: usize,
    d2: usize,
}
impl Backward for DiagonalScatterBackward {
    fn name(&self) -> &'static str {
        "diagonal_scatter"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.diagonal(self.offset, self.d1 as isize, self.d2 as isize)?));
        Ok(())
    }
}
