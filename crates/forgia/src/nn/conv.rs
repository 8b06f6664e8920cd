//! [`Conv2d`]: a 2-D convolution layer over `[N, C, H, W]` with PyTorch's default init.

use super::init;
use super::{Forward, Module};
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::ops::conv::Conv2dOptions;
use crate::tensor::Rng;

/// A 2-D convolution: `y = conv2d(x, weight, bias, options)`.
///
/// Parameters: `weight [out, in/groups, kh, kw]` and, optionally, `bias [out]`.
///
/// ```
/// use forgia::nn::{Conv2d, Forward};
/// use forgia::{Conv2dOptions, Rng, Tensor};
/// let opts = Conv2dOptions { padding: (2, 2), ..Conv2dOptions::default() };
/// let conv = Conv2d::new(1, 8, (5, 5), opts, true, &mut Rng::new(0))?;
/// assert_eq!(conv.forward(&Tensor::zeros(&[2, 1, 28, 28])?)?.shape(), &[2, 8, 28, 28]);
/// # Ok::<(), forgia::Error>(())
/// ```
pub struct Conv2d {
    /// The kernels, `[out_channels, in_channels / groups, kh, kw]`, a variable.
    pub weight: Tensor,
    /// The bias, `[out_channels]`, a variable (absent when built without bias).
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups.
    pub options: Conv2dOptions,
}

impl Conv2d {
    /// A layer with PyTorch's default initialization: weight Kaiming-uniform with `a = √5`
    /// (`U(±1/√fan_in)`, `fan_in = in/groups · kh · kw`), then bias `U(±1/√fan_in)`, both
    /// drawn from `rng` in that order.
    ///
    /// # Errors
    /// `InvalidArgument` for a zero size, zero groups, or channels not divisible by `groups`.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: (usize, usize),
        options: Conv2dOptions,
        bias: bool,
        rng: &mut Rng,
    ) -> Result<Conv2d> {
        let g = options.groups;
        let sizes_ok = in_channels > 0 && out_channels > 0 && kernel.0 > 0 && kernel.1 > 0 && g > 0;
        if !sizes_ok || !in_channels.is_multiple_of(g) || !out_channels.is_multiple_of(g) {
            return fail(ErrorKind::InvalidArgument {
                op: "Conv2d::new",
                arg: "sizes",
                reason: format!(
                    "in {in_channels}, out {out_channels}, kernel {kernel:?} must be positive and channels divisible by groups {g}"
                ),
            });
        }
        let mut weight = Tensor::zeros(&[out_channels, in_channels / g, kernel.0, kernel.1])?.into_variable();
        let gain = init::gain(init::Nonlinearity::LeakyRelu(5f32.sqrt()));
        init::kaiming_uniform(&mut weight, gain, init::FanMode::FanIn, rng)?;
        let bias = if bias {
            let bound = 1.0 / ((in_channels / g * kernel.0 * kernel.1) as f32).sqrt();
            let mut b = Tensor::zeros(&[out_channels])?.into_variable();
            init::uniform(&mut b, -bound, bound, rng)?;
            Some(b)
        } else {
            None
        };
        Ok(Conv2d { weight, bias, options })
    }

    /// A layer from given tensors (made variables if they are not already).
    ///
    /// # Errors
    /// `RankMismatch` when the weight is not rank 4; `ShapeMismatch` when the bias is not
    /// `[out_channels]`.
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>, options: Conv2dOptions) -> Result<Conv2d> {
        if weight.rank() != 4 {
            return fail(ErrorKind::RankMismatch {
                op: "Conv2d::from_tensors",
                expected: "a rank-4 weight [out, in/groups, kh, kw]",
                shape: weight.shape().to_vec(),
            });
        }
        if let Some(b) = &bias {
            if b.shape() != [weight.shape()[0]] {
                return fail(ErrorKind::ShapeMismatch {
                    op: "Conv2d::from_tensors",
                    lhs: weight.shape().to_vec(),
                    rhs: b.shape().to_vec(),
                });
            }
        }
        let var = |t: Tensor| if t.is_variable() { t } else { t.into_variable() };
        Ok(Conv2d { weight: var(weight), bias: bias.map(var), options })
    }

    /// The convolution of `x [N, C, H, W]`.
    ///
    /// # Errors
    /// As [`Tensor::conv2d`].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d(&self.weight, self.bias.as_ref(), self.options)
    }
}

impl Module for Conv2d {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        super::visit_weight_bias(&self.weight, self.bias.as_ref(), f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        super::visit_weight_bias_mut(&mut self.weight, self.bias.as_mut(), f);
    }
}

impl Forward for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Conv2d::forward(self, x)
    }
}
