//! Seeded parameter initializers with PyTorch's formulas (`torch.nn.init`): Kaiming (He) and
//! Xavier (Glorot), uniform and normal, plus plain uniform / normal / constant fills.
//!
//! Each fills a tensor in place from an explicit [`Rng`], in row-major order, so the same seed
//! gives the same weights everywhere. Fans come from the shape like PyTorch: for a weight of
//! shape `[out, in, k...]`, `fan_in = in * prod(k)` and `fan_out = out * prod(k)`.
//!
//! ```
//! use forgia::nn::init::{self, FanMode, Nonlinearity};
//! use forgia::{Rng, Tensor};
//! let mut w = Tensor::zeros(&[64, 32])?.into_variable();
//! let gain = init::gain(Nonlinearity::Relu);
//! init::kaiming_uniform(&mut w, gain, FanMode::FanIn, &mut Rng::new(0))?;
//! let bound = gain * (3.0f32 / 32.0).sqrt();
//! assert!(w.to_vec().iter().all(|v| v.abs() <= bound));
//! # Ok::<(), forgia::Error>(())
//! ```

use crate::autograd::no_grad;
use crate::autograd::Tensor;
use crate::error::{check, fail, ErrorKind, Result};
use crate::tensor::Rng;

/// Which fan a Kaiming initializer scales by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// Preserve the variance of activations in the forward pass (PyTorch's default).
    FanIn,
    /// Preserve the variance of gradients in the backward pass.
    FanOut,
}

/// The nonlinearity following a layer, for [`gain`] (`torch.nn.init.calculate_gain`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Nonlinearity {
    /// Identity (and convolutions): gain 1.
    Linear,
    /// Sigmoid: gain 1.
    Sigmoid,
    /// Tanh: gain 5/3.
    Tanh,
    /// ReLU: gain √2.
    Relu,
    /// Leaky ReLU with this negative slope: gain √(2 / (1 + slope²)).
    LeakyRelu(f32),
}

/// The recommended gain for a nonlinearity, as `torch.nn.init.calculate_gain`.
pub fn gain(nonlinearity: Nonlinearity) -> f32 {
    match nonlinearity {
        Nonlinearity::Linear | Nonlinearity::Sigmoid => 1.0,
        Nonlinearity::Tanh => 5.0 / 3.0,
        Nonlinearity::Relu => std::f32::consts::SQRT_2,
        Nonlinearity::LeakyRelu(slope) => (2.0 / (1.0 + slope * slope)).sqrt(),
    }
}

/// `(fan_in, fan_out)` of a weight shape `[out, in, k...]`.
///
/// # Errors
/// `RankMismatch` for fewer than two axes; `EmptyTensor` when a fan is zero.
pub fn fans(shape: &[usize]) -> Result<(usize, usize)> {
    if shape.len() < 2 {
        return fail(ErrorKind::RankMismatch {
            op: "init",
            expected: "rank >= 2 to compute fans",
            shape: shape.to_vec(),
        });
    }
    let receptive: usize = shape[2..].iter().product();
    let (fan_in, fan_out) = (shape[1] * receptive, shape[0] * receptive);
    if fan_in == 0 || fan_out == 0 {
        return fail(ErrorKind::EmptyTensor { op: "init", shape: shape.to_vec() });
    }
    Ok((fan_in, fan_out))
}

/// Kaiming (He) uniform: `U(-b, b)` with `b = gain · √(3 / fan)`.
///
/// PyTorch's default for linear and conv weights is `gain = gain(LeakyRelu(√5))`, which gives
/// `b = 1/√fan_in`.
///
/// # Errors
/// As [`fans`]; `InvalidArgument` for a negative or non-finite `gain`;
/// `MutableDataRequiresNoGrad` when `t` is an op result.
pub fn kaiming_uniform(t: &mut Tensor, gain: f32, mode: FanMode, rng: &mut Rng) -> Result<()> {
    let bound = 3f32.sqrt() * kaiming_std(t.shape(), gain, mode)?;
    uniform(t, -bound, bound, rng)
}

/// Kaiming (He) normal: `N(0, std²)` with `std = gain / √fan`.
///
/// # Errors
/// As [`kaiming_uniform`].
pub fn kaiming_normal(t: &mut Tensor, gain: f32, mode: FanMode, rng: &mut Rng) -> Result<()> {
    let std = kaiming_std(t.shape(), gain, mode)?;
    normal(t, 0.0, std, rng)
}

/// Xavier (Glorot) uniform: `U(-b, b)` with `b = gain · √(6 / (fan_in + fan_out))`.
///
/// # Errors
/// As [`kaiming_uniform`].
pub fn xavier_uniform(t: &mut Tensor, gain: f32, rng: &mut Rng) -> Result<()> {
    let bound = 3f32.sqrt() * xavier_std(t.shape(), gain)?;
    uniform(t, -bound, bound, rng)
}

/// Xavier (Glorot) normal: `N(0, std²)` with `std = gain · √(2 / (fan_in + fan_out))`.
///
/// # Errors
/// As [`kaiming_uniform`].
pub fn xavier_normal(t: &mut Tensor, gain: f32, rng: &mut Rng) -> Result<()> {
    let std = xavier_std(t.shape(), gain)?;
    normal(t, 0.0, std, rng)
}

/// Fills with `U(low, high)`.
///
/// # Errors
/// `InvalidArgument` when a bound is not finite or `low > high`; `MutableDataRequiresNoGrad`
/// when `t` is an op result.
pub fn uniform(t: &mut Tensor, low: f32, high: f32, rng: &mut Rng) -> Result<()> {
    check::ordered_range("init::uniform", low, high)?;
    fill_with(t, || low + (high - low) * rng.uniform())
}

/// Fills with `N(mean, std²)`.
///
/// # Errors
/// `InvalidArgument` when `mean` is not finite or `std` is negative or not finite;
/// `MutableDataRequiresNoGrad` when `t` is an op result.
pub fn normal(t: &mut Tensor, mean: f32, std: f32, rng: &mut Rng) -> Result<()> {
    check::finite("init::normal", "mean", mean)?;
    check::non_negative("init::normal", "std", std)?;
    fill_with(t, || mean + std * rng.normal())
}

/// Fills with one value.
///
/// # Errors
/// `MutableDataRequiresNoGrad` when `t` is an op result.
pub fn constant(t: &mut Tensor, value: f32) -> Result<()> {
    fill_with(t, || value)
}

fn kaiming_std(shape: &[usize], gain: f32, mode: FanMode) -> Result<f32> {
    check::non_negative("init::kaiming", "gain", gain)?;
    let (fan_in, fan_out) = fans(shape)?;
    let fan = if mode == FanMode::FanIn { fan_in } else { fan_out };
    Ok(gain / (fan as f32).sqrt())
}

fn xavier_std(shape: &[usize], gain: f32) -> Result<f32> {
    check::non_negative("init::xavier", "gain", gain)?;
    let (fan_in, fan_out) = fans(shape)?;
    Ok(gain * (2.0 / (fan_in + fan_out) as f32).sqrt())
}

/// Overwrites every element in row-major order, with recording off (variables allowed).
fn fill_with(t: &mut Tensor, mut next: impl FnMut() -> f32) -> Result<()> {
    let _guard = no_grad();
    t.with_data_mut(|data| data.iter_mut().for_each(|v| *v = next()))
}
