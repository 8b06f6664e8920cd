//! Normalization layers: [`LayerNorm`], [`RmsNorm`] and [`BatchNorm2d`] (running statistics,
//! train / eval through [`Module::set_training`]).

use parking_lot::Mutex;

use super::{Forward, Module};
use crate::autograd::Tensor;
use crate::error::{check, fail, ErrorKind, Result};
use crate::ops::norm::RunningStats;

fn positive(op: &'static str, size: &[usize], eps: f32) -> Result<()> {
    if size.is_empty() || size.contains(&0) {
        return fail(ErrorKind::InvalidArgument {
            op,
            arg: "shape",
            reason: format!("{size:?} must be non-empty and positive"),
        });
    }
    check::non_negative(op, "eps", eps)
}

/// Layer normalization over the trailing `normalized_shape` axes (`nn.LayerNorm`), with a
/// learned elementwise `weight` (initially 1) and `bias` (initially 0).
pub struct LayerNorm {
    /// Scale, shape `normalized_shape`, a variable.
    pub weight: Tensor,
    /// Shift, shape `normalized_shape`, a variable.
    pub bias: Tensor,
    /// Added to the variance (PyTorch's default 1e-5).
    pub eps: f32,
}

impl LayerNorm {
    /// A layer over the trailing axes `normalized_shape`, weight 1, bias 0.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty or zero-sized shape or a negative / non-finite `eps`.
    pub fn new(normalized_shape: &[usize], eps: f32) -> Result<LayerNorm> {
        positive("LayerNorm::new", normalized_shape, eps)?;
        let weight = Tensor::ones(normalized_shape)?.into_variable();
        let bias = Tensor::zeros(normalized_shape)?.into_variable();
        Ok(LayerNorm { weight, bias, eps })
    }

    /// `(x - mean) / sqrt(var + eps) · weight + bias` over the trailing axes.
    ///
    /// # Errors
    /// As [`Tensor::layer_norm`].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.layer_norm(self.weight.shape(), Some(&self.weight), Some(&self.bias), self.eps)
    }
}

impl Module for LayerNorm {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("weight", &self.weight);
        f("bias", &self.bias);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f("weight", &mut self.weight);
        f("bias", &mut self.bias);
    }
}

impl Forward for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        LayerNorm::forward(self, x)
    }
}

/// RMS normalization over the last axis (`nn.RMSNorm`): `x / sqrt(mean(x²) + eps) · weight`,
/// weight initially 1.
pub struct RmsNorm {
    /// Scale `[dim]`, a variable.
    pub weight: Tensor,
    /// Added to the mean square.
    pub eps: f32,
}

impl RmsNorm {
    /// A layer over a last axis of size `dim`, weight 1.
    ///
    /// # Errors
    /// `InvalidArgument` for `dim == 0` or a negative / non-finite `eps`.
    pub fn new(dim: usize, eps: f32) -> Result<RmsNorm> {
        positive("RmsNorm::new", &[dim], eps)?;
        Ok(RmsNorm { weight: Tensor::ones(&[dim])?.into_variable(), eps })
    }

    /// The normalized input.
    ///
    /// # Errors
    /// As [`Tensor::rms_norm`].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.rms_norm(Some(&self.weight), self.eps)
    }
}

impl Module for RmsNorm {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("weight", &self.weight);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f("weight", &mut self.weight);
    }
}

impl Forward for RmsNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        RmsNorm::forward(self, x)
    }
}

/// Batch normalization of `[N, C, H, W]` per channel (`nn.BatchNorm2d`).
///
/// In training mode (the default) it normalizes with the batch statistics and updates the
/// running mean and variance (momentum 0.1); after `set_training(false)` it normalizes with the
/// running statistics. The running statistics are visited as the constants `running_mean` and
/// `running_var` next to `weight` and `bias`, so checkpoints carry them (optimizers skip them:
/// they never get a gradient).
///
/// ```
/// use forgia::nn::{BatchNorm2d, Forward, Module};
/// use forgia::{Rng, Tensor};
/// let mut bn = BatchNorm2d::new(3, 1e-5)?;
/// let x = Tensor::randn(&[4, 3, 2, 2], 5.0, 2.0, &mut Rng::new(0))?;
/// bn.forward(&x)?; // training: batch statistics, running stats move towards them
/// assert!(bn.running_mean().to_vec().iter().all(|&m| m > 0.2));
/// bn.set_training(false);
/// assert_eq!(bn.forward(&x)?.shape(), &[4, 3, 2, 2]);
/// # Ok::<(), forgia::Error>(())
/// ```
pub struct BatchNorm2d {
    /// Scale `[C]`, a variable, initially 1.
    pub weight: Tensor,
    /// Shift `[C]`, a variable, initially 0.
    pub bias: Tensor,
    /// Added to the variance.
    pub eps: f32,
    stats: Mutex<RunningStats>,
    training: bool,
}

impl BatchNorm2d {
    /// A layer over `channels` channels in training mode, running mean 0 and variance 1.
    ///
    /// # Errors
    /// `InvalidArgument` for zero channels or a negative / non-finite `eps`.
    pub fn new(channels: usize, eps: f32) -> Result<BatchNorm2d> {
        positive("BatchNorm2d::new", &[channels], eps)?;
        Ok(BatchNorm2d {
            weight: Tensor::ones(&[channels])?.into_variable(),
            bias: Tensor::zeros(&[channels])?.into_variable(),
            eps,
            stats: Mutex::new(RunningStats::new(channels)?),
            training: true,
        })
    }

    /// The running mean `[C]`.
    pub fn running_mean(&self) -> Tensor {
        self.stats.lock().mean.clone()
    }

    /// The running (unbiased) variance `[C]`.
    pub fn running_var(&self) -> Tensor {
        self.stats.lock().var.clone()
    }

    /// True in training mode.
    pub fn is_training(&self) -> bool {
        self.training
    }

    /// Normalizes `x [N, C, H, W]`; in training mode also updates the running statistics.
    ///
    /// # Errors
    /// `RankMismatch` for an input that is not rank 4; otherwise as [`Tensor::batch_norm`].
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.rank() != 4 {
            return fail(ErrorKind::RankMismatch {
                op: "BatchNorm2d",
                expected: "rank 4 [N, C, H, W]",
                shape: x.shape().to_vec(),
            });
        }
        let mut stats = self.stats.lock();
        x.batch_norm(&mut stats, Some(&self.weight), Some(&self.bias), self.training, self.eps)
    }
}

impl Module for BatchNorm2d {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("weight", &self.weight);
        f("bias", &self.bias);
        let stats = self.stats.lock();
        f("running_mean", &stats.mean);
        f("running_var", &stats.var);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f("weight", &mut self.weight);
        f("bias", &mut self.bias);
        let stats = self.stats.get_mut();
        f("running_mean", &mut stats.mean);
        f("running_var", &mut stats.var);
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

impl Forward for BatchNorm2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        BatchNorm2d::forward(self, x)
    }
}
