//! Modules with parameters: the [`Module`] trait (visit named parameters, training mode), the
//! [`Forward`] trait for single-input layers, and the layers — [`Linear`], [`Conv2d`],
//! [`Embedding`], [`LayerNorm`], [`RmsNorm`], [`BatchNorm2d`], [`Dropout`],
//! [`MultiHeadAttention`], [`TransformerBlock`], [`Sequential`] and the activations [`Relu`],
//! [`Tanh`], [`Gelu`], [`PRelu`], [`Elu`], [`Selu`], [`Silu`], [`Mish`], [`Hardswish`],
//! [`Hardsigmoid`], [`LogSigmoid`], [`Glu`], the SwiGLU block [`SwiGluFeedForward`] — with seeded initializers in [`init`].
//!
//! Parameters are variables held by the module. Names are dotted like PyTorch's
//! `state_dict` keys: `"weight"`, `"0.bias"`, `"fc1.weight"`. An optimizer updates a parameter
//! in place through [`Module::visit_params_mut`]; a checkpoint reads them through
//! [`Module::visit_params`].
//!
//! ```
//! use forgia::nn::{Linear, Module, Sequential, Tanh};
//! use forgia::{Rng, Tensor};
//! let mut rng = Rng::new(0);
//! let mlp = Sequential::new()
//!     .push(Linear::new(2, 8, true, &mut rng)?)
//!     .push(Tanh)
//!     .push(Linear::new(8, 1, true, &mut rng)?);
//! let names: Vec<String> = mlp.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
//! assert_eq!(mlp.num_parameters(), 2 * 8 + 8 + 8 + 1);
//! let y = mlp.forward(&Tensor::zeros(&[4, 2])?)?;
//! assert_eq!(y.shape(), &[4, 1]);
//! # Ok::<(), forgia::Error>(())
//! ```

mod activation;
mod attention;
mod conv;
mod dropout;
mod embedding;
mod gated;
pub mod init;
mod linear;
mod norm;
mod sequential;
mod transformer;

pub use activation::{Elu, Glu, Hardsigmoid, Hardswish, LogSigmoid, Mish, PRelu, Selu, Silu};
pub use attention::MultiHeadAttention;
pub use conv::Conv2d;
pub use dropout::Dropout;
pub use embedding::{Embedding, EmbeddingLora};
pub use gated::SwiGluFeedForward;
pub use linear::Linear;
pub use norm::{BatchNorm2d, LayerNorm, RmsNorm};
pub use sequential::{Gelu, Relu, Sequential, Tanh};
pub use transformer::{FeedForward, TransformerBlock};

use crate::autograd::Tensor;
use crate::error::Result;

/// Something that owns named parameters.
///
/// Implement the two visitors; everything else is provided. A composite module visits each
/// child under a prefix with [`visit_child`] / [`visit_child_mut`].
pub trait Module {
    /// Calls `f` with every parameter and its dotted name, in a fixed order.
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor));

    /// Calls `f` with mutable access to every parameter, in the same order as
    /// [`Module::visit_params`]. Optimizers and checkpoint loading update values through it.
    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor));

    /// Switches training behaviour (dropout, batch statistics) on or off. Layers without such
    /// behaviour keep the default no-op; composites forward it to their children.
    fn set_training(&mut self, training: bool) {
        let _ = training;
    }

    /// Every parameter with its name (cheap handles sharing storage and gradient node). A
    /// parameter the module holds twice (tied weights) is listed once, under the name it is
    /// first visited with.
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        let mut seen = Seen::default();
        self.visit_params(&mut |name, t| {
            if seen.first(t) {
                out.push((name.to_string(), t.clone()));
            }
        });
        out
    }

    /// The total number of scalar parameters (a tied parameter counted once).
    fn num_parameters(&self) -> usize {
        let mut n = 0;
        let mut seen = Seen::default();
        self.visit_params(&mut |_, t| {
            if seen.first(t) {
                n += t.numel();
            }
        });
        n
    }

    /// Forgets every parameter's accumulated gradient.
    fn zero_grad(&self) {
        self.visit_params(&mut |_, t| t.zero_grad());
    }
}

/// Tells the first visit of each parameter from a repeated one: a module may hold one
/// variable under two names (tied weights), and optimizers, checkpoints and
/// [`Module::named_parameters`] treat it once.
#[derive(Default)]
pub(crate) struct Seen(std::collections::HashSet<usize>);

impl Seen {
    /// True the first time a handle of `t`'s variable is seen (always true for constants).
    pub(crate) fn first(&mut self, t: &Tensor) -> bool {
        t.variable_key().is_none_or(|k| self.0.insert(k))
    }
}

/// A module that maps one tensor to one tensor, so it can be chained in a [`Sequential`].
pub trait Forward {
    /// Applies the layer.
    ///
    /// # Errors
    /// Whatever the layer's ops return for a badly shaped input.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
}

/// A single-input layer: a [`Module`] that is also [`Forward`]. Implemented for every type
/// that is both.
pub trait Layer: Module + Forward {}

impl<T: Module + Forward> Layer for T {}

/// Visits `child`'s parameters with names prefixed by `prefix.` (for composite modules).
pub fn visit_child(prefix: &str, child: &dyn Module, f: &mut dyn FnMut(&str, &Tensor)) {
    child.visit_params(&mut |name, t| f(&format!("{prefix}.{name}"), t));
}

/// Visits a `weight` and an optional `bias` under those names (Linear, Conv2d).
pub(crate) fn visit_weight_bias(weight: &Tensor, bias: Option<&Tensor>, f: &mut dyn FnMut(&str, &Tensor)) {
    f("weight", weight);
    if let Some(b) = bias {
        f("bias", b);
    }
}

/// Mutable twin of [`visit_weight_bias`].
pub(crate) fn visit_weight_bias_mut(
    weight: &mut Tensor,
    bias: Option<&mut Tensor>,
    f: &mut dyn FnMut(&str, &mut Tensor),
) {
    f("weight", weight);
    if let Some(b) = bias {
        f("bias", b);
    }
}

/// Mutable twin of [`visit_child`].
pub fn visit_child_mut(prefix: &str, child: &mut dyn Module, f: &mut dyn FnMut(&str, &mut Tensor)) {
    child.visit_params_mut(&mut |name, t| f(&format!("{prefix}.{name}"), t));
}
