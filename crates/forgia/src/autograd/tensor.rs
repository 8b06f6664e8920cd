//! [`Tensor`]: a value ([`Array`]) plus an optional gradient node. It dereferences to its
//! value, so every read-only method of [`Array`] (shape, elements, names) is a tensor's too;
//! what involves the graph (kinds of tensors, detaching, writing values, constructors that
//! make constants and variables) lives here, and the gradient API in `api.rs`.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::mode::is_grad_enabled;
use super::node::Node;
use crate::error::{fail, ErrorKind, Result};
use crate::tensor::{Array, Layout, Rng};

/// An n-dimensional array of `f32` that may take part in reverse-mode differentiation.
///
/// A tensor is one of three kinds: a **constant** (no gradient node), a **variable** (a leaf
/// node, see [`Tensor::into_variable`]), or an **op result** that points at the record of the
/// op that made it. The graph lives in these pointers; there is no tape.
///
/// A clone is another handle to the same tensor. Every handle of a variable sees every update
/// of it (an optimizer step, a checkpoint load, [`Tensor::with_data_mut`]); a constant's
/// buffer is never written while anything else shares it, so a clone of a constant keeps its
/// values. The value itself is an [`Array`], which the tensor dereferences to.
#[derive(Clone)]
pub struct Tensor {
    value: Array,
    pub(crate) node: Option<Arc<Node>>,
}

impl Deref for Tensor {
    type Target = Array;
    fn deref(&self) -> &Array {
        &self.value
    }
}

impl DerefMut for Tensor {
    fn deref_mut(&mut self) -> &mut Array {
        &mut self.value
    }
}

impl From<Array> for Tensor {
    /// A constant holding `value`.
    fn from(value: Array) -> Tensor {
        Tensor { value, node: None }
    }
}

impl From<&Array> for Tensor {
    /// A constant sharing `value`'s storage.
    fn from(value: &Array) -> Tensor {
        Tensor { value: value.clone(), node: None }
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.write_to(f, self.node.as_ref().map(|n| n.name()))
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Tensor {
    /// The value without the node (shared storage; for a variable, its current values).
    pub fn value(&self) -> Array {
        self.value.snapshot()
    }

    /// Wraps a contiguous buffer (internal: the length is trusted).
    pub(crate) fn from_parts(data: Vec<f32>, shape: &[usize]) -> Tensor {
        Array::from_parts(data, shape).into()
    }

    /// A fresh contiguous constant of `shape` whose every element `fill` writes (see
    /// [`Array::filled`]: one allocation when small).
    ///
    /// # Errors
    /// `OutOfMemory` when the buffer cannot be allocated.
    #[inline]
    pub(crate) fn filled(op: &'static str, shape: &[usize], fill: impl FnOnce(&mut [f32])) -> Result<Tensor> {
        Ok(Array::filled(op, shape, fill)?.into())
    }

    /// A new constant sharing this tensor's storage under another layout.
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        self.value.with_layout(layout).into()
    }

    /// The contiguous values of this tensor as a fresh constant (shared when possible).
    pub(crate) fn contiguous_data(&self, op: &'static str) -> Result<Tensor> {
        Ok(self.value.contiguous_data(op)?.into())
    }

    /// The stored elements as a constant view, and how often each repeats (see
    /// [`Array::stored`]).
    pub(crate) fn stored(&self) -> (Tensor, usize) {
        let (value, repeats) = self.value.stored();
        (value.into(), repeats)
    }

    /// A constant of `f` of the stored elements (see [`Array::map_stored`]).
    pub(crate) fn map_stored(&self, op: &'static str, f: impl FnOnce(&[f32]) -> Result<Vec<f32>>) -> Tensor {
        self.value.map_stored(op, f).into()
    }

    /// A constant of `f(stored elements, output)` (see [`Array::map_stored_into`]).
    pub(crate) fn map_stored_into(&self, op: &'static str, f: impl FnOnce(&[f32], &mut [f32])) -> Tensor {
        self.value.map_stored_into(op, f).into()
    }

    /// The same values without a gradient node: the graph is cut here. Shares storage (for a
    /// variable: a snapshot of its current values, which later updates do not change).
    pub fn detach(&self) -> Tensor {
        self.value().into()
    }

    /// Turns this tensor's values into a variable: a fresh leaf node that accumulates
    /// gradients, and a value of its own that every clone of the result shares (the original
    /// handle is unaffected by later updates of the variable).
    pub fn into_variable(self) -> Tensor {
        let node = Node::leaf(self.shape());
        Tensor { value: self.value.new_variable(), node: Some(Arc::new(node)) }
    }

    /// The same tensor (same storage and node) with axis names, one per axis (`None` leaves an
    /// axis unnamed). Names let axis arguments be strings: `x.sum("batch", false)`.
    ///
    /// Names travel with the values: an op keeps the name of every axis it keeps (pointwise
    /// ops, reductions less the reduced axes, views, `concat`, norms, index ops, the batch and
    /// free axes of `matmul`); an axis an op creates is unnamed (`unsqueeze`, `stack`, the
    /// output features of `linear`, any `reshape`). Operands that broadcast align from the
    /// right, as their shapes do: an unnamed axis takes the other's name, and two different
    /// names meeting (or one name at two positions) is `AxisNameMismatch` rather than a
    /// silent positional match. PyTorch's named tensors follow the same rules.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let x = Tensor::ones(&[2, 3])?.with_names(&[Some("batch"), Some("feat")])?;
    /// assert_eq!(x.sum("batch", false)?.sum("feat", false)?.shape(), &[] as &[usize]);
    /// let per_batch = Tensor::ones(&[2])?.with_names(&[Some("batch")])?;
    /// assert!(x.add(&per_batch).is_err()); // `batch` would meet `feat`
    /// assert!(x.add(&per_batch.unsqueeze(1)?).is_ok());
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `RankMismatch` when the count differs from the rank; `DuplicateAxis` on a repeated name.
    pub fn with_names<S: AsRef<str>>(&self, names: &[Option<S>]) -> Result<Tensor> {
        Ok(Tensor { value: self.value.with_names(names)?, node: self.node.clone() })
    }

    /// Runs `f` with mutable access to the elements (row-major), for code that updates values
    /// in place: optimizers, initializers, checkpoint loading, a user's own update.
    ///
    /// On a variable the write is seen by every handle of it; a graph built before the write
    /// keeps the values its forward pass saw (the write goes to a fresh copy while such a
    /// graph holds the old buffer). On a constant, the buffer is copied first if anything else
    /// shares it, so no other tensor sees the change. `f` must not read this same variable
    /// (that is reported as a panic, not a deadlock).
    ///
    /// ```
    /// use forgia::{no_grad, Tensor};
    /// let mut w = Tensor::variable(vec![1.0, 2.0], &[2])?;
    /// let held = w.clone();
    /// {
    ///     let _guard = no_grad();
    ///     w.with_data_mut(|d| d.iter_mut().for_each(|v| *v *= 10.0))?;
    /// }
    /// assert_eq!(held.to_vec(), vec![10.0, 20.0]); // every handle sees the update
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `MutableDataRequiresNoGrad` when the tensor is an op result, or a variable while grad
    /// mode is on (wrap the update in [`crate::no_grad`]); `OutOfMemory` when a shared
    /// constant's copy cannot be allocated.
    pub fn with_data_mut<R>(&mut self, f: impl FnOnce(&mut [f32]) -> R) -> Result<R> {
        if let Some(node) = &self.node {
            if !node.is_leaf() || is_grad_enabled() {
                return fail(ErrorKind::MutableDataRequiresNoGrad { op: "with_data_mut" });
            }
        }
        self.value.with_data_mut(f)
    }

    /// A constant from row-major `data` with `shape`.
    ///
    /// ```
    /// let t = forgia::Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
    /// assert_eq!(t.shape(), &[2, 2]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Array::from_vec`].
    pub fn from_vec(data: Vec<f32>, shape: &[usize]) -> Result<Tensor> {
        Ok(Array::from_vec(data, shape)?.into())
    }

    /// A constant from a slice.
    ///
    /// # Errors
    /// As [`Array::from_vec`].
    pub fn from_slice(data: &[f32], shape: &[usize]) -> Result<Tensor> {
        Ok(Array::from_slice(data, shape)?.into())
    }

    /// A trainable leaf (variable) from data: shorthand for `from_vec(..)?.into_variable()`.
    ///
    /// # Errors
    /// As [`Array::from_vec`].
    pub fn variable(data: Vec<f32>, shape: &[usize]) -> Result<Tensor> {
        Ok(Tensor::from_vec(data, shape)?.into_variable())
    }

    /// A rank-0 constant.
    pub fn scalar(value: f32) -> Tensor {
        Array::scalar(value).into()
    }

    /// A constant filled with `value`.
    ///
    /// # Errors
    /// As [`Array::full`].
    pub fn full(shape: &[usize], value: f32) -> Result<Tensor> {
        Ok(Array::full(shape, value)?.into())
    }

    /// A constant of zeros.
    ///
    /// ```
    /// let t = forgia::Tensor::zeros(&[2, 3])?;
    /// assert_eq!(t.to_vec(), vec![0.0; 6]);
    /// // A size the machine cannot hold is an error, not an abort.
    /// assert!(forgia::Tensor::zeros(&[1 << 40]).is_err());
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Array::zeros`].
    pub fn zeros(shape: &[usize]) -> Result<Tensor> {
        Ok(Array::zeros(shape)?.into())
    }

    /// A constant of ones.
    ///
    /// # Errors
    /// As [`Array::ones`].
    pub fn ones(shape: &[usize]) -> Result<Tensor> {
        Ok(Array::ones(shape)?.into())
    }

    /// Zeros with the shape of `other`.
    ///
    /// # Errors
    /// As [`Array::zeros_like`].
    pub fn zeros_like(other: &Array) -> Result<Tensor> {
        Ok(Array::zeros_like(other)?.into())
    }

    /// Ones with the shape of `other`.
    ///
    /// # Errors
    /// As [`Array::ones_like`].
    pub fn ones_like(other: &Array) -> Result<Tensor> {
        Ok(Array::ones_like(other)?.into())
    }

    /// `start, start + step, …` below `end`, as a rank-1 constant.
    ///
    /// # Errors
    /// As [`Array::arange`].
    pub fn arange(start: f32, end: f32, step: f32) -> Result<Tensor> {
        Ok(Array::arange(start, end, step)?.into())
    }

    /// `n` evenly spaced values from `start` to `end` inclusive, as a rank-1 constant.
    ///
    /// # Errors
    /// As [`Array::linspace`].
    pub fn linspace(start: f32, end: f32, n: usize) -> Result<Tensor> {
        Ok(Array::linspace(start, end, n)?.into())
    }

    /// The `n × n` identity matrix, as a constant.
    ///
    /// # Errors
    /// As [`Array::eye`].
    pub fn eye(n: usize) -> Result<Tensor> {
        Ok(Array::eye(n)?.into())
    }

    /// One-hot rows `[len, classes]` for `indices`, as a constant.
    ///
    /// # Errors
    /// As [`Array::one_hot`].
    pub fn one_hot(indices: &[usize], classes: usize) -> Result<Tensor> {
        Ok(Array::one_hot(indices, classes)?.into())
    }

    /// Uniform values in `[low, high)` from `rng`, as a constant.
    ///
    /// # Errors
    /// As [`Array::rand`].
    pub fn rand(shape: &[usize], low: f32, high: f32, rng: &mut Rng) -> Result<Tensor> {
        Ok(Array::rand(shape, low, high, rng)?.into())
    }

    /// Normal values `N(mean, std²)` from `rng`, as a constant.
    ///
    /// # Errors
    /// As [`Array::randn`].
    pub fn randn(shape: &[usize], mean: f32, std: f32, rng: &mut Rng) -> Result<Tensor> {
        Ok(Array::randn(shape, mean, std, rng)?.into())
    }
}
