//! `unfold` and `fold` (`torch.nn.functional.unfold` / `fold`, im2col and col2im): sliding
//! windows of a batched image as columns, and back, summing overlaps. Each is the other's
//! adjoint, and so each other's backward: every order of derivative works.

use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::unfold::{self as k, Windows};

/// The window settings of [`Tensor::unfold`] and [`Tensor::fold`] (per spatial axis, height
/// first), with PyTorch's defaults from [`UnfoldOptions::new`]: dilation 1, padding 0,
/// stride 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnfoldOptions {
    /// The window size.
    pub kernel: [usize; 2],
    /// The spacing between window elements.
    pub dilation: [usize; 2],
    /// Zeros added on both sides of each spatial axis.
    pub padding: [usize; 2],
    /// The step between windows.
    pub stride: [usize; 2],
}

impl UnfoldOptions {
    /// A `kernel`-sized window with dilation 1, padding 0 and stride 1.
    pub fn new(kernel: [usize; 2]) -> Self {
        UnfoldOptions { kernel, dilation: [1, 1], padding: [0, 0], stride: [1, 1] }
    }

    /// The geometry for `channels` channels of an `image`, checked.
    fn windows(&self, op: &'static str, channels: usize, image: [usize; 2]) -> Result<Windows> {
        let positive = [self.kernel, self.dilation, self.stride].iter().flatten().all(|&v| v > 0);
        let mut blocks = [0; 2];
        for a in 0..2 {
            let span = self.dilation[a].checked_mul(self.kernel[a].saturating_sub(1)).and_then(|s| s.checked_add(1));
            let room = image[a].checked_add(2usize.saturating_mul(self.padding[a]));
            blocks[a] = match (span, room) {
                (Some(s), Some(r)) if positive && r >= s => (r - s) / self.stride[a] + 1,
                _ => 0,
            };
        }
        if !positive || blocks.contains(&0) {
            return fail(ErrorKind::InvalidArgument {
                op,
                arg: "kernel",
                reason: format!("{self:?} leaves no window position in an image of {image:?}"),
            });
        }
        Ok(Windows {
            channels,
            image,
            kernel: self.kernel,
            dilation: self.dilation,
            padding: self.padding,
            stride: self.stride,
            blocks,
        })
    }
}

impl Tensor {
    /// im2col (`torch.nn.functional.unfold`, not `Tensor.unfold`): every sliding window of a
    /// `[N, C, H, W]` (or unbatched `[C, H, W]`) image as a column of
    /// `[N, C·kh·kw, L]` (`[C·kh·kw, L]`), `L` the number of window positions; rows run over
    /// `(channel, kernel row, kernel column)`, columns over positions in row-major order.
    ///
    /// Backward: `gx = fold(gy)` with the same options (the adjoint).
    ///
    /// # Errors
    /// `RankMismatch` unless the rank is 3 or 4; `InvalidArgument` for a zero kernel, stride
    /// or dilation, or a window larger than the padded image.
    pub fn unfold(&self, options: UnfoldOptions) -> Result<Tensor> {
        const OP: &str = "unfold";
        let batched = match self.rank() {
            4 => true,
            3 => false,
            _ => {
                return fail(ErrorKind::RankMismatch {
                    op: OP,
                    expected: "[N, C, H, W] or [C, H, W]",
                    shape: self.shape().to_vec(),
                })
            }
        };
        let s = self.shape();
        let (n, c, image) = if batched { (s[0], s[1], [s[2], s[3]]) } else { (1, s[0], [s[1], s[2]]) };
        let g = options.windows(OP, c, image)?;
        let rows = crate::tensor::Size::mul(OP, s, c, options.kernel[0].saturating_mul(options.kernel[1]))?;
        let l = crate::tensor::Size::mul(OP, s, g.blocks[0], g.blocks[1])?;
        let shape = if batched { vec![n, rows, l] } else { vec![rows, l] };
        let numel = crate::tensor::Size::of(OP, &shape)?.numel();
        let mut cols = crate::tensor::zeroed(OP, numel)?;
        let x = self.contiguous_data(OP)?;
        k::unfold(x.packed(), &g, &mut cols);
        let out = Tensor::from_parts(cols, &shape);
        Ok(attach(out, &[self], || UnfoldBackward { image, options }))
    }

    /// col2im (`torch.nn.functional.fold`): columns `[N, C·kh·kw, L]` (or unbatched
    /// `[C·kh·kw, L]`) summed back into an image of `[N, C, H, W]` with
    /// `output_size = [H, W]`; overlapping windows add. The adjoint of [`Tensor::unfold`].
    ///
    /// Backward: `gx = unfold(gy)` with the same options.
    ///
    /// # Errors
    /// `RankMismatch` unless the rank is 2 or 3; `ShapeMismatch` when the rows are not a
    /// multiple of `kh·kw` or `L` is not the number of window positions of `output_size`;
    /// `InvalidArgument` as [`Tensor::unfold`].
    pub fn fold(&self, output_size: [usize; 2], options: UnfoldOptions) -> Result<Tensor> {
        const OP: &str = "fold";
        let batched = match self.rank() {
            3 => true,
            2 => false,
            _ => {
                return fail(ErrorKind::RankMismatch {
                    op: OP,
                    expected: "[N, C·kh·kw, L] or [C·kh·kw, L]",
                    shape: self.shape().to_vec(),
                })
            }
        };
        let s = self.shape();
        let (n, rows, l) = if batched { (s[0], s[1], s[2]) } else { (1, s[0], s[1]) };
        let per = options.kernel[0].saturating_mul(options.kernel[1]);
        let c = rows.checked_div(per).unwrap_or(0);
        let g = options.windows(OP, c, output_size)?;
        let positions = g.blocks[0].checked_mul(g.blocks[1]);
        if !rows.is_multiple_of(per.max(1)) || positions != Some(l) {
            let want = vec![c * per, positions.unwrap_or(usize::MAX)];
            return fail(ErrorKind::ShapeMismatch { op: OP, lhs: s.to_vec(), rhs: want });
        }
        let shape =
            if batched { vec![n, c, output_size[0], output_size[1]] } else { vec![c, output_size[0], output_size[1]] };
        let numel = crate::tensor::Size::of(OP, &shape)?.numel();
        let mut image = crate::tensor::zeroed(OP, numel)?;
        let x = self.contiguous_data(OP)?;
        k::fold(x.packed(), &g, &mut image);
        let out = Tensor::from_parts(image, &shape);
        Ok(attach(out, &[self], || FoldBackward { options }))
    }
}

struct UnfoldBackward {
    image: [usize; 2],
    options: UnfoldOptions,
}
impl Backward for UnfoldBackward {
    fn name(&self) -> &'static str {
        "unfold"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.fold(self.image, self.options)?));
        Ok(())
    }
}

struct FoldBackward {
    options: UnfoldOptions,
}
impl Backward for FoldBackward {
    fn name(&self) -> &'static str {
        "fold"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.unfold(self.options)?));
        Ok(())
    }
}
