//! # forgia
//!
//! A CPU-first tensor and reverse-mode autograd library. The graph is implicit in the values:
//! every op result points at the record of the op that made it, which points at its operands'
//! nodes — no tape, no graph object, no central engine. `backward()` counts consumer edges,
//! fires each node exactly once when its atomic counter drains, and spreads heavy independent
//! branches over one bounded worker pool.
//!
//! ## Three kinds of tensors
//!
//! A **constant** ([`Tensor::from_vec`], [`Tensor::zeros`], [`Tensor::randn`]) never gets a
//! gradient. A **variable** ([`Tensor::variable`], [`Tensor::into_variable`]) is a trainable
//! leaf that collects one. An **op result** of a variable records how it was made, so
//! [`Tensor::backward`] can walk back to the variables. An op that can fail on its operands
//! (shapes, axes) returns a [`Result`]: shapes are checked, never assumed.
//!
//! ```
//! use forgia::Tensor;
//! let x = Tensor::variable(vec![3.0, 5.0], &[2])?;   // a variable
//! let c = Tensor::from_vec(vec![2.0, 2.0], &[2])?;   // a constant
//! let loss = x.mul(&c)?.tanh().sum_all();            // an op result, with a graph
//! loss.backward()?;
//! assert!(x.grad().is_some() && c.grad().is_none());
//! assert!(x.add(&Tensor::zeros(&[3])?).is_err());     // [2] + [3] does not broadcast
//! # Ok::<(), forgia::Error>(())
//! ```
//!
//! ## Inference without a graph
//!
//! While a [`no_grad`] guard lives, ops on variables record nothing; [`Tensor::detach`] cuts
//! one value off its graph.
//!
//! ```
//! use forgia::{no_grad, Tensor};
//! let w = Tensor::variable(vec![0.5, -1.0], &[2])?;
//! let y = {
//!     let _guard = no_grad();
//!     w.scale(3.0).relu()
//! };
//! assert!(!y.requires_grad());
//! # Ok::<(), forgia::Error>(())
//! ```
//!
//! ## Masks and indices
//!
//! One mask convention holds everywhere: **a mask is an `f32` tensor whose nonzero entries
//! mean true**. Comparisons and logic ([`Tensor::gt`], [`Tensor::eq_scalar`],
//! [`Tensor::logical_and`], [`Tensor::isnan`], [`Tensor::any`], ...) return constant tensors of
//! `0.0` / `1.0` (no gradient flows through them), and every op that takes a mask
//! ([`Tensor::where_`], [`Tensor::masked_fill`], [`Tensor::masked_select`],
//! [`Tensor::masked_scatter`]) reads any nonzero value, NaN included, as true, as PyTorch
//! reads a float tensor cast to bool; so do attention's boolean and key-padding mask options.
//! ([`AttentionOptions::mask`] is additive, as PyTorch's float `attn_mask`:
//! `zeros.masked_fill(&keep.logical_not(), f32::NEG_INFINITY)` makes one.) Index-valued results ([`Tensor::nonzero`],
//! [`Tensor::argmax`], the indices of [`Tensor::sort`] and [`Tensor::topk`]) are [`Indices`],
//! the type `gather`, `scatter` and `index_select` take.
//!
//! ```
//! use forgia::Tensor;
//! let scores = Tensor::from_vec(vec![0.2, 0.9, 0.4, 0.7], &[4])?;
//! let keep = scores.ge_scalar(0.5);                       // [0, 1, 0, 1], a constant
//! let masked = scores.masked_fill(&keep.logical_not(), 0.0)?;
//! assert_eq!(masked.to_vec(), vec![0.0, 0.9, 0.0, 0.7]);
//! let (_, best) = scores.topk(2, 0, true, true)?;
//! assert_eq!(best.data(), &[1, 3]);
//! # Ok::<(), forgia::Error>(())
//! ```
//!
//! ## Modules, optimizers and checkpoints
//!
//! Layers in [`nn`] own named parameters (PyTorch-style names such as `0.weight`); an
//! optimizer in [`optim`] updates them in place; [`io`] writes and reads them as safetensors
//! files, alone ([`io::save_model`]) or with the optimizer's state ([`io::save_checkpoint`]).
//! Pretrained architectures (BERT, GPT-2, Llama, ResNet, LoRA) with `transformers`' parameter
//! names are in [`models`]; their Hugging Face checkpoints load through [`io::load_hf`].
//!
//! ```
//! use forgia::nn::{Linear, Module, Sequential, Tanh};
//! use forgia::optim::{Adam, AdamConfig, Optimizer};
//! use forgia::{io, Rng, Tensor};
//!
//! let mut rng = Rng::new(0);
//! let new_model = |rng: &mut Rng| -> forgia::Result<Sequential> {
//!     Ok(Sequential::new().push(Linear::new(2, 8, true, rng)?).push(Tanh).push(Linear::new(8, 1, true, rng)?))
//! };
//! let mut model = new_model(&mut rng)?;
//! let mut opt = Adam::new(AdamConfig { lr: 1e-2, ..AdamConfig::adam() })?;
//! let (x, y) = (Tensor::randn(&[16, 2], 0.0, 1.0, &mut rng)?, Tensor::zeros(&[16, 1])?);
//! for _ in 0..10 {
//!     opt.zero_grad(&model);
//!     let d = model.forward(&x)?.sub(&y)?;
//!     d.mul(&d)?.mean_all()?.backward()?;
//!     opt.step(&mut model)?;
//! }
//!
//! let path = std::env::temp_dir().join(format!("forgia-doc-lib-{}.safetensors", std::process::id()));
//! io::save_checkpoint(&path, &model, &opt)?;                      // weights + Adam state
//! let (mut restored, mut opt2) = (new_model(&mut Rng::new(1))?, Adam::new(AdamConfig::adam())?);
//! io::load_checkpoint(&mut restored, &mut opt2, &path)?;          // validated, then assigned
//! assert_eq!(restored.forward(&x)?.to_vec(), model.forward(&x)?.to_vec());
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), forgia::Error>(())
//! ```
//!
//! Also here: activation [`checkpoint`]ing (recompute a block in backward instead of keeping
//! its activations), your own differentiable ops ([`custom_op`]), second-order gradients
//! ([`BackwardOptions::create_graph`]) and finite-difference checks ([`gradcheck`]).
//!
//! ## Examples
//!
//! Complete programs in the crate's `examples/` folder, each run as a test by `cargo test`;
//! run one with `cargo run --release -p forgia --example NAME`:
//!
//! | example | shows |
//! | --- | --- |
//! | `spirals_mlp` | an MLP, cross-entropy and Adam, in under 40 lines |
//! | `mnist_cnn` | a CNN as a struct implementing [`nn::Module`], batches, test accuracy |
//! | `char_transformer` | embeddings, causal [`nn::TransformerBlock`]s, padding, sampling |
//! | `custom_op` | a [`CustomOp`] with its own backward, checked by [`gradcheck`] |
//! | `gradient_penalty` | a penalty on input gradients with `create_graph` |
//! | `checkpoint_deep` | [`checkpoint`] on a deep residual MLP: lower peak, same gradients |
//! | `scalar_autograd` | the whole idea at rank zero, in one file without the library |

pub mod autograd;
pub mod data;
mod error;
pub mod func;
pub mod io;
pub(crate) mod kernels;
pub mod models;
pub mod nn;
pub(crate) mod ops;
pub mod optim;
mod parallel;
pub mod runtime;
pub mod tensor;

pub use autograd::grad;
pub use autograd::gradcheck::{gradcheck, GradcheckOptions, GradcheckReport, Mismatch};
pub use autograd::HookHandle;
pub use autograd::{checkpoint, checkpoint_with, custom_op, CustomOp};
pub use autograd::{enable_grad, is_grad_enabled, no_grad, BackwardOptions, GradModeGuard, NoGradGuard, Tensor};
pub use error::{Error, ErrorKind, Result};
pub use ops::attention::AttentionOptions;
pub use ops::attention::{alibi_slopes, AttentionDropout};
pub use ops::conv::{Conv1dOptions, Conv2dOptions, ConvTranspose2dOptions};
pub use ops::elemental::{elemental_binary, elemental_unary};
pub use ops::elemental::{elemental_binary_with_second, elemental_unary_with_second};
pub use ops::index::Indices;
pub use ops::join::PadMode;
pub use ops::loss;
pub use ops::norm::RunningStats;
pub use ops::rope::RopeOptions;
pub use ops::smooth_activation::{SELU_ALPHA, SELU_SCALE};
pub use ops::softmax::MaskedSoftmaxOptions;
pub use ops::unfold::UnfoldOptions;
pub use parallel::{num_threads, set_num_threads};
pub use tensor::{
    buffer_cache_limit, cached_bytes, clear_buffer_cache, live_bytes, peak_bytes, reset_peak_bytes,
    set_buffer_cache_limit, Array, Axes, Axis, Rng, Shape, MAX_WORK,
};

/// The examples of the repository's `README.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
