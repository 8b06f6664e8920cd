//! Activation layers beyond those in `sequential.rs`: [`PRelu`] (learnable slopes) and the
//! parameter-free [`Elu`], [`Selu`], [`Silu`], [`Mish`], [`Hardswish`], [`Hardsigmoid`],
//! [`LogSigmoid`] and [`Glu`] (PyTorch's `torch.nn` names and defaults).

use super::{Forward, Module};
use crate::autograd::Tensor;
use crate::error::{check, Result};

/// The layer form of [`Tensor::selu`]. No parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Selu;

impl Module for Selu {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Selu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.selu())
    }
}

/// The layer form of [`Tensor::silu`] (`torch.nn.SiLU`). No parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silu;

impl Module for Silu {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Silu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.silu())
    }
}

/// The layer form of [`Tensor::mish`]. No parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mish;

impl Module for Mish {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Mish {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.mish())
    }
}

/// The layer form of [`Tensor::hardswish`]. No parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hardswish;

impl Module for Hardswish {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Hardswish {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.hardswish())
    }
}

/// The layer form of [`Tensor::hardsigmoid`]. No parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hardsigmoid;

impl Module for Hardsigmoid {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Hardsigmoid {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.hardsigmoid())
    }
}

/// The layer form of [`Tensor::log_sigmoid`] (`torch.nn.LogSigmoid`). No parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogSigmoid;

impl Module for LogSigmoid {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for LogSigmoid {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.log_sigmoid())
    }
}

/// The layer form of [`Tensor::elu`] (`torch.nn.ELU`, default `alpha = 1`). No parameters.
#[derive(Clone, Copy, Debug)]
pub struct Elu {
    /// The negative-side scale.
    pub alpha: f32,
}

impl Default for Elu {
    fn default() -> Self {
        Elu { alpha: 1.0 }
    }
}

impl Module for Elu {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Elu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.elu(self.alpha)
    }
}

/// The layer form of [`Tensor::glu`] (`torch.nn.GLU`, default `dim = -1`). No parameters.
#[derive(Clone, Copy, Debug)]
pub struct Glu {
    /// The axis cut in half.
    pub dim: isize,
}

impl Default for Glu {
    fn default() -> Self {
        Glu { dim: -1 }
    }
}

impl Module for Glu {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Glu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.glu(self.dim)
    }
}

/// PReLU (`torch.nn.PReLU`): [`Tensor::prelu`] with a learnable `weight` of
/// `num_parameters` slopes (1, shared, or one per channel of axis 1), initialised to `init`
/// (PyTorch's default 0.25).
///
/// ```
/// use forgia::nn::{Forward, Module, PRelu};
/// use forgia::Tensor;
/// let prelu = PRelu::new(1, 0.25)?;
/// let y = prelu.forward(&Tensor::from_vec(vec![-2.0, 3.0], &[2])?)?;
/// assert_eq!(y.to_vec(), [-0.5, 3.0]);
/// assert_eq!(prelu.named_parameters()[0].0, "weight");
/// # Ok::<(), forgia::Error>(())
/// ```
pub struct PRelu {
    /// The slopes, `[num_parameters]`, a variable.
    pub weight: Tensor,
}

impl PRelu {
    /// A layer with `num_parameters` slopes, all `init`.
    ///
    /// # Errors
    /// `InvalidArgument` for `num_parameters == 0` or a non-finite `init`.
    pub fn new(num_parameters: usize, init: f32) -> Result<PRelu> {
        check::positive_count("PRelu::new", "num_parameters", num_parameters as u64)?;
        check::finite("PRelu::new", "init", init)?;
        Ok(PRelu { weight: Tensor::full(&[num_parameters], init)?.into_variable() })
    }
}

impl Module for PRelu {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("weight", &self.weight);
    }
    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f("weight", &mut self.weight);
    }
}

impl Forward for PRelu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.prelu(&self.weight)
    }
}
