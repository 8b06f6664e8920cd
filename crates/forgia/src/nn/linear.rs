//! The fully connected layer `y = x · Wᵀ + b`, with the weight stored `[out, in]` as in PyTorch.

use super::init;
use super::{Forward, Module};
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::tensor::Rng;

/// A fully connected layer: `y = x · Wᵀ + b` over any leading axes of `x`.
///
/// Parameters: `weight` of shape `[out, in]` and, optionally, `bias` of shape `[out]`.
pub struct Linear {
    /// The weight, `[out_features, in_features]`, a variable.
    pub weight: Tensor,
    /// The bias, `[out_features]`, a variable (absent when built without bias).
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A layer with PyTorch's default initialization: the weight is Kaiming-uniform with
    /// `a = √5` (so `U(-1/√in, 1/√in)`), and the bias `U(-1/√in, 1/√in)`. The weight is drawn
    /// first, then the bias, from `rng`.
    ///
    /// # Errors
    /// `InvalidArgument` when `in_features` or `out_features` is zero.
    pub fn new(in_features: usize, out_features: usize, bias: bool, rng: &mut Rng) -> Result<Linear> {
        if in_features == 0 || out_features == 0 {
            return fail(ErrorKind::InvalidArgument {
                op: "Linear::new",
                arg: "features",
                reason: format!("in_features {in_features} and out_features {out_features} must be positive"),
            });
        }
        let mut weight = Tensor::zeros(&[out_features, in_features])?.into_variable();
        let gain = init::gain(init::Nonlinearity::LeakyRelu(5f32.sqrt()));
        init::kaiming_uniform(&mut weight, gain, init::FanMode::FanIn, rng)?;
        let bias = if bias {
            let bound = 1.0 / (in_features as f32).sqrt();
            let mut b = Tensor::zeros(&[out_features])?.into_variable();
            init::uniform(&mut b, -bound, bound, rng)?;
            Some(b)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }

    /// A layer from given tensors (made variables if they are not already).
    ///
    /// # Errors
    /// `RankMismatch` when the weight is not rank 2; `ShapeMismatch` when the bias is not
    /// `[out_features]`.
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Result<Linear> {
        if weight.rank() != 2 {
            return fail(ErrorKind::RankMismatch {
                op: "Linear::from_tensors",
                expected: "a rank-2 weight [out, in]",
                shape: weight.shape().to_vec(),
            });
        }
        if let Some(b) = &bias {
            if b.shape() != [weight.shape()[0]] {
                return fail(ErrorKind::ShapeMismatch {
                    op: "Linear::from_tensors",
                    lhs: weight.shape().to_vec(),
                    rhs: b.shape().to_vec(),
                });
            }
        }
        let var = |t: Tensor| if t.is_variable() { t } else { t.into_variable() };
        Ok(Linear { weight: var(weight), bias: bias.map(var) })
    }

    /// Input features.
    pub fn in_features(&self) -> usize {
        self.weight.shape()[1]
    }

    /// Output features.
    pub fn out_features(&self) -> usize {
        self.weight.shape()[0]
    }

    /// `x · Wᵀ + b` for `x` of shape `[..., in]`, giving `[..., out]`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the last axis of `x` is not `in_features`; `RankMismatch` for a
    /// rank-0 input.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.linear(&self.weight, self.bias.as_ref())
    }
}

impl Module for Linear {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        super::visit_weight_bias(&self.weight, self.bias.as_ref(), f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        super::visit_weight_bias_mut(&mut self.weight, self.bias.as_mut(), f);
    }
}

impl Forward for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Linear::forward(self, x)
    }
}
