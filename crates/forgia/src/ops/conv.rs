//! Convolutions: conv1d, conv2d and conv_transpose2d, lowered through im2col onto GEMM
//! (`kernels/conv.rs`; a forward with one input channel runs a direct kernel). One record serves all three; the weight and bias gradients are
//! computed only for operands that need them.

use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{fail, within, ErrorKind, Result};
use crate::kernels::conv::{self as k, ConvGeom};
use crate::tensor::{Array, Size};

/// Options of [`Tensor::conv2d`] (height, width pairs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// Step between output positions.
    pub stride: (usize, usize),
    /// Zeros added on both sides of each spatial axis.
    pub padding: (usize, usize),
    /// Spacing between kernel taps.
    pub dilation: (usize, usize),
    /// Channel groups: input and output channels split into this many independent blocks.
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions { stride: (1, 1), padding: (0, 0), dilation: (1, 1), groups: 1 }
    }
}

/// Options of [`Tensor::conv1d`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dOptions {
    /// Step between output positions.
    pub stride: usize,
    /// Zeros added on both sides.
    pub padding: usize,
    /// Spacing between kernel taps.
    pub dilation: usize,
    /// Channel groups.
    pub groups: usize,
}

impl Default for Conv1dOptions {
    fn default() -> Self {
        Conv1dOptions { stride: 1, padding: 0, dilation: 1, groups: 1 }
    }
}

/// Options of [`Tensor::conv_transpose2d`] (height, width pairs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose2dOptions {
    /// Stride of the convolution this op transposes.
    pub stride: (usize, usize),
    /// Padding of the convolution this op transposes (removed from the output).
    pub padding: (usize, usize),
    /// Extra rows/columns added at the end of the output (each `< stride` or `< dilation`).
    pub output_padding: (usize, usize),
    /// Spacing between kernel taps.
    pub dilation: (usize, usize),
    /// Channel groups.
    pub groups: usize,
}

impl Default for ConvTranspose2dOptions {
    fn default() -> Self {
        ConvTranspose2dOptions { stride: (1, 1), padding: (0, 0), output_padding: (0, 0), dilation: (1, 1), groups: 1 }
    }
}

fn invalid<T>(op: &'static str, arg: &'static str, reason: String) -> Result<T> {
    fail(ErrorKind::InvalidArgument { op, arg, reason })
}

/// Checks the ranks and scalar options shared by both 2-D convolutions.
fn check_common(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    pairs: [(&'static str, (usize, usize)); 2],
    groups: usize,
) -> Result<()> {
    for t in [x, w] {
        if t.rank() != 4 {
            return fail(ErrorKind::RankMismatch { op, expected: "rank 4", shape: t.shape().to_vec() });
        }
    }
    for (name, (a, b)) in pairs {
        if a == 0 || b == 0 {
            return invalid(op, name, format!("must be at least 1, got ({a}, {b})"));
        }
    }
    if groups == 0 {
        return invalid(op, "groups", "must be at least 1".into());
    }
    Ok(())
}

fn check_bias(op: &'static str, bias: Option<&Tensor>, channels: usize) -> Result<()> {
    match bias {
        Some(b) if b.shape() != [channels] => {
            fail(ErrorKind::ShapeMismatch { op, lhs: b.shape().to_vec(), rhs: vec![channels] })
        }
        _ => Ok(()),
    }
}

/// Output size of a convolution along one axis, or an error when the (dilated) kernel does
/// not fit in the padded input.
fn out_len(op: &'static str, len: usize, k: usize, s: usize, p: usize, d: usize) -> Result<usize> {
    // Checked: a padding or dilation near usize::MAX must not wrap into a small size.
    let overflow = || ErrorKind::SizeOverflow { op, shape: vec![len, k, s, p, d] };
    let span = d.checked_mul(k.saturating_sub(1)).and_then(|v| v.checked_add(1)).ok_or_else(overflow)?;
    let padded = p.checked_mul(2).and_then(|v| v.checked_add(len)).ok_or_else(overflow)?;
    if k == 0 || span > padded {
        return invalid(
            op,
            "kernel",
            format!("kernel {k} (dilated to {span}) is larger than the padded input {padded}"),
        );
    }
    Ok((padded - span) / s + 1)
}

impl Tensor {
    /// 2-D cross-correlation (PyTorch's `conv2d`): `x [N, C, H, W]`, `w [O, C/groups, kh, kw]`,
    /// optional `bias [O]` → `[N, O, OH, OW]` with `OH = (H + 2p - d(kh-1) - 1)/s + 1`.
    ///
    /// Forward per sample and group: `y = W · im2col(x)` (one GEMM). Backward:
    /// `gx = col2im(Wᵀ · gy)`, `gw = Σ_n gy · im2col(x)ᵀ`, `gb = Σ_{n,h,w} gy`, each computed
    /// only when its operand needs it. The three maps (correlation, its transpose, the weight
    /// gradient) are each other's gradients, so a `create_graph` pass differentiates to any order.
    ///
    /// # Errors
    /// `RankMismatch` for non rank-4 `x`/`w`; `InvalidArgument` for a zero stride, dilation or
    /// group count, channels not divisible by `groups`, or a kernel larger than the padded
    /// input; `ShapeMismatch` when `w`'s channels or the bias do not fit.
    pub fn conv2d(&self, w: &Tensor, bias: Option<&Tensor>, opts: Conv2dOptions) -> Result<Tensor> {
        const OP: &str = "conv2d";
        check_common(OP, self, w, [("stride", opts.stride), ("dilation", opts.dilation)], opts.groups)?;
        let (&[n, c, h, wd], &[o, cg, kh, kw]) = (self.shape(), w.shape()) else { unreachable!("rank checked") };
        if c % opts.groups != 0 || o % opts.groups != 0 {
            return invalid(
                OP,
                "groups",
                format!("{} groups do not divide {c} input and {o} output channels", opts.groups),
            );
        }
        if cg != c / opts.groups {
            return fail(ErrorKind::ShapeMismatch { op: OP, lhs: self.shape().to_vec(), rhs: w.shape().to_vec() });
        }
        check_bias(OP, bias, o)?;
        let oh = out_len(OP, h, kh, opts.stride.0, opts.padding.0, opts.dilation.0)?;
        let ow = out_len(OP, wd, kw, opts.stride.1, opts.padding.1, opts.dilation.1)?;
        let g = ConvGeom {
            n,
            c,
            h,
            w: wd,
            o,
            oh,
            ow,
            k: (kh, kw),
            stride: opts.stride,
            pad: opts.padding,
            dil: opts.dilation,
            groups: opts.groups,
        };
        run_conv(self, w, bias, g, [n, o, oh, ow], false)
    }

    /// 1-D cross-correlation: `x [N, C, L]`, `w [O, C/groups, k]`, optional `bias [O]` →
    /// `[N, O, L_out]`. Runs as [`Tensor::conv2d`] with a height of 1 (views, no copies).
    ///
    /// # Errors
    /// As [`Tensor::conv2d`]; `RankMismatch` for non rank-3 operands.
    pub fn conv1d(&self, w: &Tensor, bias: Option<&Tensor>, opts: Conv1dOptions) -> Result<Tensor> {
        const OP: &str = "conv1d";
        for t in [self, w] {
            if t.rank() != 3 {
                return fail(ErrorKind::RankMismatch { op: OP, expected: "rank 3", shape: t.shape().to_vec() });
            }
        }
        // Checked here, in conv1d's own terms, so no error speaks of the conv2d it runs as.
        for (name, v) in [("stride", opts.stride), ("dilation", opts.dilation), ("groups", opts.groups)] {
            if v == 0 {
                return invalid(OP, name, format!("must be at least 1, got {v}"));
            }
        }
        let (&[_, c, len], &[o, cg, k]) = (self.shape(), w.shape()) else { unreachable!("rank checked") };
        if c % opts.groups != 0 || o % opts.groups != 0 {
            let reason = format!("{} groups do not divide {c} input and {o} output channels", opts.groups);
            return invalid(OP, "groups", reason);
        }
        if cg != c / opts.groups {
            return fail(ErrorKind::ShapeMismatch { op: OP, lhs: self.shape().to_vec(), rhs: w.shape().to_vec() });
        }
        check_bias(OP, bias, o)?;
        out_len(OP, len, k, opts.stride, opts.padding, opts.dilation)?;
        let o2 = Conv2dOptions {
            stride: (1, opts.stride),
            padding: (0, opts.padding),
            dilation: (1, opts.dilation),
            groups: opts.groups,
        };
        within(OP, || self.unsqueeze(2)?.conv2d(&w.unsqueeze(2)?, bias, o2)?.squeeze(2))
    }

    /// Transposed 2-D convolution (PyTorch's `conv_transpose2d`, the gradient of conv2d with
    /// respect to its input): `x [N, Cin, H, W]`, `w [Cin, Cout/groups, kh, kw]`, optional
    /// `bias [Cout]` → `[N, Cout, OH, OW]` with
    /// `OH = (H-1)s - 2p + d(kh-1) + output_padding + 1`.
    ///
    /// Forward: `y = col2im(Wᵀ · x)`. Backward: `gx = W · im2col(gy)` (a conv2d),
    /// `gw = Σ_n x · im2col(gy)ᵀ`, `gb = Σ gy`.
    ///
    /// # Errors
    /// As [`Tensor::conv2d`], plus `InvalidArgument` when `output_padding` is not smaller than
    /// the stride or the dilation, or the output would be empty.
    pub fn conv_transpose2d(&self, w: &Tensor, bias: Option<&Tensor>, opts: ConvTranspose2dOptions) -> Result<Tensor> {
        const OP: &str = "conv_transpose2d";
        check_common(OP, self, w, [("stride", opts.stride), ("dilation", opts.dilation)], opts.groups)?;
        let (&[n, cin, h, wd], &[wcin, cog, kh, kw]) = (self.shape(), w.shape()) else { unreachable!("rank checked") };
        if cin % opts.groups != 0 {
            return invalid(OP, "groups", format!("{} groups do not divide {cin} input channels", opts.groups));
        }
        if wcin != cin {
            return fail(ErrorKind::ShapeMismatch { op: OP, lhs: self.shape().to_vec(), rhs: w.shape().to_vec() });
        }
        let cout = cog * opts.groups;
        check_bias(OP, bias, cout)?;
        let (op_h, op_w) = opts.output_padding;
        if (op_h >= opts.stride.0 && op_h >= opts.dilation.0) || (op_w >= opts.stride.1 && op_w >= opts.dilation.1) {
            return invalid(
                OP,
                "output_padding",
                format!("{:?} must be smaller than the stride or dilation", opts.output_padding),
            );
        }
        let size = |len: usize, k: usize, s: usize, p: usize, d: usize, extra: usize| -> Result<usize> {
            let overflow = || ErrorKind::SizeOverflow { op: OP, shape: vec![len, k, s, p, d] };
            let full = (len.saturating_sub(1).checked_mul(s))
                .and_then(|v| v.checked_add(d.checked_mul(k.saturating_sub(1))?))
                .and_then(|v| v.checked_add(extra + 1))
                .ok_or_else(overflow)?;
            if len == 0 || k == 0 || full <= p.saturating_mul(2) {
                return invalid(OP, "padding", format!("padding {p} leaves no output from size {full}"));
            }
            Ok(full - 2 * p)
        };
        let oh = size(h, kh, opts.stride.0, opts.padding.0, opts.dilation.0, op_h)?;
        let ow = size(wd, kw, opts.stride.1, opts.padding.1, opts.dilation.1, op_w)?;
        // The image side is the output; the column side is the input.
        let g = ConvGeom {
            n,
            c: cout,
            h: oh,
            w: ow,
            o: cin,
            oh: h,
            ow: wd,
            k: (kh, kw),
            stride: opts.stride,
            pad: opts.padding,
            dil: opts.dilation,
            groups: opts.groups,
        };
        run_conv(self, w, bias, g, [n, cout, oh, ow], true)
    }
}

/// The three bilinear maps of one convolution geometry (`image [N, C, H, W]`, `cols
/// [N, O, OH, OW]`, `weight [O, C/groups, kh, kw]`), tied by
/// `⟨corr(I, W), C⟩ = ⟨I, corr_t(C, W)⟩ = ⟨W, weight(I, C)⟩`. conv2d is `Corr`,
/// conv_transpose2d is `CorrT`; each map's gradients are two of the three maps, so the records
/// of all three are differentiable to any order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Map {
    /// `(image, weight) → cols`: the forward correlation (conv2d).
    Corr,
    /// `(cols, weight) → image`: the data-gradient scatter (conv_transpose2d).
    CorrT,
    /// `(image, cols) → weight`: the weight gradient.
    Weight,
}

impl Map {
    fn name(self) -> &'static str {
        match self {
            Map::Corr => "conv2d",
            Map::CorrT => "conv_transpose2d",
            Map::Weight => "conv2d_weight_grad",
        }
    }

    fn out_shape(self, g: &ConvGeom) -> [usize; 4] {
        match self {
            Map::Corr => [g.n, g.o, g.oh, g.ow],
            Map::CorrT => [g.n, g.c, g.h, g.w],
            Map::Weight => [g.o, g.c / g.groups, g.k.0, g.k.1],
        }
    }

    /// Runs the fused kernel of this map on packed operands into a fresh buffer, adding
    /// `bias` per output channel (the two maps that produce an activation take one).
    fn run(self, g: &ConvGeom, a: &[f32], b: &[f32], bias: Option<&[f32]>) -> Result<Vec<f32>> {
        let op = self.name();
        let shape = self.out_shape(g);
        let n = Size::of(op, &shape)?.numel();
        // The two activation maps overwrite every element; the weight map sums into zeros.
        let mut out = if self == Map::Weight { crate::tensor::zeroed(op, n)? } else { crate::tensor::buffer(op, n)? };
        let parts = g.parts();
        // Column matrices come back to the buffer cache after the call (the kernels overwrite
        // what they read of them), instead of a fresh zeroed allocation per call.
        let mut buf = crate::tensor::Scratch::new(op, g.scratch_len(parts, self == Map::Weight))?;
        let scratch = k::ConvScratch { parts, buf: &mut buf };
        match self {
            Map::Corr => k::forward(g, a, b, bias, &mut out, scratch),
            Map::CorrT => k::backward_data(g, a, b, bias, &mut out, scratch),
            Map::Weight => k::backward_weight(g, a, b, &mut out, scratch),
        }
        Ok(out)
    }
}

/// One map of `g` on `(a, b)`, optionally plus a per-channel bias, with its record attached.
fn conv_map(map: Map, a: &Tensor, b: &Tensor, bias: Option<&Tensor>, g: ConvGeom) -> Result<Tensor> {
    let (ad, bd) = (a.contiguous_data(map.name())?, b.contiguous_data(map.name())?);
    let shape = map.out_shape(&g);
    let y = match bias {
        Some(bias) => {
            let bias = bias.contiguous_data(map.name())?;
            map.run(&g, ad.packed(), bd.packed(), Some(bias.packed()))?
        }
        None => map.run(&g, ad.packed(), bd.packed(), None)?,
    };
    let out = Tensor::from_parts(y, &shape);
    let record = || ConvBackward { a: ad.value(), b: bd.value(), geom: g, map, operands: 2 + bias.is_some() as usize };
    Ok(match bias {
        Some(bias) => attach(out, &[a, b, bias], record),
        None => attach(out, &[a, b], record),
    })
}

/// The shared tail of conv2d and conv_transpose2d: the kernel (forward correlation, or the
/// data-gradient scatter that a transposed convolution is), the bias, and the record.
fn run_conv(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    g: ConvGeom,
    shape: [usize; 4],
    transposed: bool,
) -> Result<Tensor> {
    let map = if transposed { Map::CorrT } else { Map::Corr };
    debug_assert_eq!(map.out_shape(&g), shape);
    conv_map(map, x, w, bias, g)
}

/// The record of the three convolution maps (conv2d, conv_transpose2d and the weight
/// gradient): the two operands, the geometry, and whether a bias was added.
struct ConvBackward {
    a: Array,
    b: Array,
    geom: ConvGeom,
    map: Map,
    /// 2, or 3 with a bias.
    operands: usize,
}

impl Backward for ConvBackward {
    fn name(&self) -> &'static str {
        self.map.name()
    }

    /// `corr(I, W)`: `gI = corr_t(gy, W)`, `gW = weight(I, gy)`; `corr_t(C, W)`:
    /// `gC = corr(gy, W)`, `gW = weight(gy, C)`; `weight(I, C)`: `gI = corr_t(C, gy)`,
    /// `gC = corr(I, gy)`; a bias gets `Σ_{n,h,w} gy`. A plain pass runs the fused kernels on
    /// constants (no record is built: grad mode is off); a `create_graph` pass runs the same
    /// kernels through [`conv_map`] on the reconnected operands, so each gradient carries its
    /// own differentiable record.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let g = self.geom;
        let (a, b) = (cx.input(0, &self.a), cx.input(1, &self.b));
        empty_slots(out, self.operands);
        let (ga, gb) = match self.map {
            Map::Corr => ((Map::CorrT, gy, &b), (Map::Weight, &a, gy)),
            Map::CorrT => ((Map::Corr, gy, &b), (Map::Weight, gy, &a)),
            Map::Weight => ((Map::CorrT, &b, gy), (Map::Corr, &a, gy)),
        };
        if cx.needs_grad(0) {
            out[0] = Some(conv_map(ga.0, ga.1, ga.2, None, g)?);
        }
        if cx.needs_grad(1) {
            out[1] = Some(conv_map(gb.0, gb.1, gb.2, None, g)?);
        }
        if self.operands == 3 && cx.needs_grad(2) {
            out[2] = Some(if cx.create_graph() {
                gy.sum([0usize, 2, 3], false)?
            } else {
                let shape = self.map.out_shape(&g);
                let gyd = gy.contiguous_data(self.name())?;
                let mut gb = crate::tensor::zeroed(self.name(), shape[1])?;
                k::channel_sum(gyd.packed(), shape[2] * shape[3], &mut gb);
                Tensor::from_parts(gb, &[shape[1]])
            });
        }
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        4 * self.geom.macs()
    }
}
