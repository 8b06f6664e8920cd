//! Pooling and resizing over `[N, C, H, W]`: max_pool2d (gradient to the argmax),
//! avg_pool2d (padding counted in the divisor), global average pooling, and nearest-neighbour
//! upsampling (the last two composed from differentiable views and reductions).

use std::sync::Arc;

use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::pool::{self as k, PoolGeom};
use crate::tensor::{Scratch, Size};

const OP_UP: &str = "upsample_nearest2d";

/// Checks a pooling's arguments and returns its geometry and the number of planes.
fn geometry(
    op: &'static str,
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
) -> Result<(PoolGeom, usize)> {
    let &[n, c, h, w] = x.shape() else {
        return fail(ErrorKind::RankMismatch { op, expected: "rank 4 [N, C, H, W]", shape: x.shape().to_vec() });
    };
    let invalid = |arg, reason: String| fail(ErrorKind::InvalidArgument { op, arg, reason });
    if kernel.0 == 0 || kernel.1 == 0 {
        return invalid("kernel", format!("must be at least 1, got {kernel:?}"));
    }
    if stride.0 == 0 || stride.1 == 0 {
        return invalid("stride", format!("must be at least 1, got {stride:?}"));
    }
    // Checked: a padding near usize::MAX must not wrap into a small one.
    let twice = |p: usize| p.saturating_mul(2);
    if twice(padding.0) > kernel.0 || twice(padding.1) > kernel.1 {
        return invalid("padding", format!("{padding:?} must be at most half the kernel {kernel:?}"));
    }
    let (ph, pw) = (Size::add(op, x.shape(), h, 2 * padding.0)?, Size::add(op, x.shape(), w, 2 * padding.1)?);
    if kernel.0 > ph || kernel.1 > pw {
        return invalid("kernel", format!("kernel {kernel:?} is larger than the padded input {:?}", [h, w]));
    }
    let oh = (ph - kernel.0) / stride.0 + 1;
    let ow = (pw - kernel.1) / stride.1 + 1;
    Ok((PoolGeom { h, w, oh, ow, k: kernel, s: stride, p: padding }, n * c))
}

impl Tensor {
    /// Max over `kernel` windows of `[N, C, H, W]` moved by `stride`, with implicit `-inf`
    /// `padding` → `[N, C, OH, OW]`, `OH = (H + 2p - k)/s + 1`.
    ///
    /// Backward: each `gy` goes to its window's maximum (argmax indices are saved; ties go to
    /// the first maximum); that scatter's own gradient reads the argmax back (a gather), so
    /// every order is differentiable.
    ///
    /// # Errors
    /// `RankMismatch` for non rank-4 input; `InvalidArgument` for a zero kernel or stride,
    /// padding above half the kernel, or a kernel larger than the padded input.
    pub fn max_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Result<Tensor> {
        let (g, count) = geometry("max_pool2d", self, kernel, stride, padding)?;
        let (y, arg) = self.try_with_data("max_pool2d", |d| {
            let n = count * g.oh * g.ow;
            // Every output is written when the planes are not empty (then they stay zero).
            let y = if g.h * g.w > 0 {
                crate::tensor::buffer("max_pool2d", n)?
            } else {
                crate::tensor::zeroed("max_pool2d", n)?
            };
            let (mut y, mut arg) = (y, Argmax::new(n, g.h * g.w > 0)?);
            k::max_forward(&g, d, &mut y, arg.as_mut_slice());
            Ok((y, arg))
        })?;
        let planes = [self.shape()[0], self.shape()[1]];
        let out = Tensor::from_parts(y, &[planes[0], planes[1], g.oh, g.ow]);
        Ok(attach(out, &[self], || PoolBackward { geom: g, map: PoolMap::Scatter(Arc::new(arg)), planes }))
    }

    /// Mean over `kernel` windows with zero `padding` counted in the divisor `kh·kw`
    /// (PyTorch's `count_include_pad = true`).
    ///
    /// Backward: `gy / (kh·kw)` spread over each window (the transpose of the op; its
    /// gradient is avg_pool2d again, so every order is differentiable).
    ///
    /// # Errors
    /// As [`Tensor::max_pool2d`].
    pub fn avg_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Result<Tensor> {
        let (g, _) = geometry("avg_pool2d", self, kernel, stride, padding)?;
        pool_map(PoolMap::Avg, self, g, [self.shape()[0], self.shape()[1]])
    }

    /// Global average pooling `[N, C, H, W]` → `[N, C, 1, 1]` (adaptive average pooling to
    /// 1x1): a mean over the spatial axes, differentiable to any order.
    ///
    /// # Errors
    /// `RankMismatch` for non rank-4 input; `EmptyTensor` for an empty plane.
    pub fn adaptive_avg_pool2d_1x1(&self) -> Result<Tensor> {
        if self.rank() != 4 {
            let shape = self.shape().to_vec();
            return fail(ErrorKind::RankMismatch { op: "adaptive_avg_pool2d_1x1", expected: "rank 4", shape });
        }
        self.mean([2, 3], true)
    }

    /// Nearest-neighbour upsampling by an integer `scale`: `[N, C, H, W]` → `[N, C, sH, sW]`,
    /// each value repeated in an `s × s` block. Composed of views (unsqueeze, broadcast,
    /// reshape), so the backward (block sums) is differentiable.
    ///
    /// # Errors
    /// `RankMismatch` for non rank-4 input; `InvalidArgument` for a zero scale.
    pub fn upsample_nearest2d(&self, scale: usize) -> Result<Tensor> {
        let &[n, c, h, w] = self.shape() else {
            let shape = self.shape().to_vec();
            return fail(ErrorKind::RankMismatch { op: "upsample_nearest2d", expected: "rank 4", shape });
        };
        if scale == 0 {
            let reason = "must be at least 1".into();
            return fail(ErrorKind::InvalidArgument { op: "upsample_nearest2d", arg: "scale", reason });
        }
        let (oh, ow) = (Size::mul(OP_UP, self.shape(), h, scale)?, Size::mul(OP_UP, self.shape(), w, scale)?);
        self.reshape(&[n, c, h, 1, w, 1])?.broadcast_to(&[n, c, h, scale, w, scale])?.reshape(&[n, c, oh, ow])
    }
}

/// The in-plane argmax index of each output of a max pooling, held in a buffer of the tensor
/// buffer cache (as `f32` storage of the same length, viewed as `u32`), so the indices of
/// every training step reuse the memory of the last instead of faulting in fresh pages.
struct Argmax(Scratch);

impl Argmax {
    /// `n` indices: unspecified values when the kernel writes them all (`written`), else zeros.
    fn new(n: usize, written: bool) -> Result<Argmax> {
        let mut buf = Scratch::new("max_pool2d", n)?;
        if !written {
            buf.fill(0.0); // all-zero bits: index 0
        }
        Ok(Argmax(buf))
    }

    fn as_slice(&self) -> &[u32] {
        // SAFETY: `f32` and `u32` have the same size and alignment and every bit pattern is a
        // valid value of both, so the buffer's `len` floats are `len` valid `u32`s, borrowed
        // for as long as `self` is.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<u32>(), self.0.len()) }
    }

    fn as_mut_slice(&mut self) -> &mut [u32] {
        // SAFETY: as in `as_slice`, with the unique borrow of `self` making this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u32>(), self.0.len()) }
    }
}

/// Which linear map of one pooling geometry a node computes: max pooling reads its saved
/// argmax (`Gather`) and its gradient scatters to it (`Scatter`); average pooling (`Avg`) and
/// its gradient (`AvgT`, its transpose). Each map's gradient is its partner, so the records
/// are differentiable to any order.
#[derive(Clone)]
enum PoolMap {
    /// `[.., H, W] → [.., OH, OW]`: `y[o] = x[argmax[o]]` (max_pool2d and its second order).
    Gather(Arc<Argmax>),
    /// `[.., OH, OW] → [.., H, W]`: `gx[argmax[o]] += gy[o]`.
    Scatter(Arc<Argmax>),
    /// `[.., H, W] → [.., OH, OW]`: window means.
    Avg,
    /// `[.., OH, OW] → [.., H, W]`: each value spread `/ (kh·kw)` over its window.
    AvgT,
}

impl PoolMap {
    fn name(&self) -> &'static str {
        match self {
            PoolMap::Gather(_) => "max_pool2d",
            PoolMap::Scatter(_) => "max_pool2d_backward",
            PoolMap::Avg => "avg_pool2d",
            PoolMap::AvgT => "avg_pool2d_backward",
        }
    }

    /// The partner map (this map's gradient).
    fn transpose(&self) -> PoolMap {
        match self {
            PoolMap::Gather(a) => PoolMap::Scatter(a.clone()),
            PoolMap::Scatter(a) => PoolMap::Gather(a.clone()),
            PoolMap::Avg => PoolMap::AvgT,
            PoolMap::AvgT => PoolMap::Avg,
        }
    }

    /// True for the maps that produce the input-sized side `[.., H, W]`.
    fn to_input(&self) -> bool {
        matches!(self, PoolMap::Scatter(_) | PoolMap::AvgT)
    }
}

/// Applies `map` of geometry `g` to `t` (`planes = [N, C]`) and attaches its record.
fn pool_map(map: PoolMap, t: &Tensor, g: PoolGeom, planes: [usize; 2]) -> Result<Tensor> {
    let op = map.name();
    let (h, w) = if map.to_input() { (g.h, g.w) } else { (g.oh, g.ow) };
    let count = planes[0] * planes[1];
    let out = t.try_with_data(op, |d| {
        let n = count * h * w;
        let mut out = match &map {
            PoolMap::Scatter(_) if k::max_backward_overwrites(&g) => crate::tensor::buffer(op, n)?,
            _ => crate::tensor::zeroed(op, n)?,
        };
        match &map {
            PoolMap::Gather(arg) => k::max_gather(&g, d, arg.as_slice(), &mut out),
            PoolMap::Scatter(arg) => k::max_backward(&g, d, arg.as_slice(), &mut out),
            PoolMap::Avg => k::avg_forward(&g, d, &mut out),
            PoolMap::AvgT => k::avg_backward(&g, d, &mut out),
        }
        Ok(out)
    })?;
    let out = Tensor::from_parts(out, &[planes[0], planes[1], h, w]);
    Ok(attach(out, &[t], || PoolBackward { geom: g, map: map.transpose(), planes }))
}

/// The record of every pooling map: the geometry and the map that is its gradient.
struct PoolBackward {
    geom: PoolGeom,
    /// The map applied to `gy` (the transpose of the forward one).
    map: PoolMap,
    planes: [usize; 2],
}

impl Backward for PoolBackward {
    fn name(&self) -> &'static str {
        // The op whose record this is: the partner of the map applied to `gy`.
        match self.map {
            PoolMap::Scatter(_) => "max_pool2d",
            PoolMap::Gather(_) => "max_pool2d_backward",
            PoolMap::AvgT => "avg_pool2d",
            PoolMap::Avg => "avg_pool2d_backward",
        }
    }

    /// `gx = mapᵀ(gy)`: the fused kernel, with its own record (the forward map again) in a
    /// `create_graph` pass; grad mode is off in a plain pass, so no record is built there.
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let gx = pool_map(self.map.clone(), gy, self.geom, self.planes)?;
        out.push(Some(gx));
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        let g = &self.geom;
        crate::tensor::work(&[self.planes[0], self.planes[1], g.oh, g.ow, g.k.0, g.k.1])
    }
}
