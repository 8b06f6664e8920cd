//! The [`Tensor`] handle: refcounted storage, a layout, an optional gradient node and optional
//! axis names. Cloning is cheap (a few reference counts); views share storage.

mod axis;
mod create;
mod display;
pub(crate) mod layout;
mod random;
mod saved;
mod storage;

use std::sync::Arc;

pub(crate) use axis::{resolve, resolve_set, Names};
pub use axis::{Axes, Axis};
pub(crate) use layout::Layout;
pub use layout::Shape;
pub(crate) use random::mix64;
pub use random::Rng;
pub(crate) use saved::Saved;
pub(crate) use storage::Storage;
pub(crate) use storage::{buffer, zeroed, Scratch};
pub use storage::{
    buffer_cache_limit, cached_bytes, clear_buffer_cache, live_bytes, peak_bytes, reset_peak_bytes,
    set_buffer_cache_limit,
};

use crate::autograd::Node;
use crate::error::{fail, ErrorKind, Result};

/// An n-dimensional array of `f32` that may take part in reverse-mode differentiation.
///
/// A tensor is one of three kinds: a **constant** (no gradient node), a **variable** (a leaf
/// node, see [`Tensor::into_variable`]), or an **op result** that points at the record of the
/// op that made it. The graph lives in these pointers; there is no tape.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) storage: Arc<Storage>,
    pub(crate) layout: Layout,
    pub(crate) node: Option<Arc<Node>>,
    pub(crate) names: Option<Names>,
}

impl Tensor {
    /// Wraps a contiguous buffer (internal: the length is trusted).
    pub(crate) fn from_parts(data: Vec<f32>, shape: &[usize]) -> Tensor {
        debug_assert_eq!(data.len(), layout::numel(shape));
        Tensor { storage: Arc::new(Storage::new(data)), layout: Layout::contiguous(shape), node: None, names: None }
    }

    /// A new constant sharing this tensor's storage under another layout.
    pub(crate) fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor { storage: self.storage.clone(), layout, node: None, names: None }
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.layout.shape
    }

    /// Number of axes.
    pub fn rank(&self) -> usize {
        self.layout.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// The size of one axis.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis.
    pub fn dim(&self, axis: impl Into<Axis>) -> Result<usize> {
        let a = self.axis("dim", axis)?;
        Ok(self.layout.shape[a])
    }

    /// Element strides per axis (0 on broadcast axes).
    pub fn strides(&self) -> &[isize] {
        &self.layout.strides
    }

    /// True when the elements are packed row-major in storage.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// True when `self` and `other` view the same storage buffer.
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// The single value of a one-element tensor.
    ///
    /// # Errors
    /// `NotScalar` when the tensor has more or fewer than one element.
    pub fn item(&self) -> Result<f32> {
        if self.numel() != 1 {
            return fail(ErrorKind::NotScalar { op: "item", shape: self.shape().to_vec() });
        }
        Ok(self.storage.as_slice()[self.layout.offset])
    }

    /// The elements in row-major order (a copy).
    pub fn to_vec(&self) -> Vec<f32> {
        match self.layout.contiguous_range() {
            Some(r) => self.storage.as_slice()[r].to_vec(),
            None => crate::kernels::copy::gather(self.storage.as_slice(), &self.layout),
        }
    }

    /// Read access to the elements as a contiguous slice, copying only when the layout is not
    /// already contiguous.
    pub fn with_data<R>(&self, f: impl FnOnce(&[f32]) -> R) -> R {
        match self.layout.contiguous_range() {
            Some(r) => f(&self.storage.as_slice()[r]),
            None => f(&Scratch::from_vec(crate::kernels::copy::gather(self.storage.as_slice(), &self.layout))),
        }
    }

    /// A contiguous tensor with the same values: `self` (shared) when already contiguous, else
    /// a copy. Differentiable.
    pub fn contiguous(&self) -> Tensor {
        if self.is_contiguous() {
            return self.clone();
        }
        crate::ops::shape::materialize(self)
    }

    /// The contiguous values of this tensor as a fresh constant (shared when possible).
    pub(crate) fn contiguous_data(&self) -> Tensor {
        if self.is_contiguous() {
            return self.detach();
        }
        Tensor::from_parts(crate::kernels::copy::gather(self.storage.as_slice(), &self.layout), self.shape())
    }

    /// The contiguous slice of a tensor known to be contiguous.
    pub(crate) fn packed(&self) -> &[f32] {
        let r = self.layout.contiguous_range().expect("packed() needs a contiguous tensor");
        &self.storage.as_slice()[r]
    }

    /// Mutable access to the elements, for code that updates values in place (optimizers,
    /// initializers). The buffer is copied first if anything else shares it, so no other
    /// tensor ever sees the change.
    ///
    /// # Errors
    /// `MutableDataRequiresNoGrad` when the tensor is an op result, or a variable while grad
    /// mode is on (wrap the update in [`crate::no_grad`]).
    pub fn data_mut(&mut self) -> Result<&mut [f32]> {
        if let Some(node) = &self.node {
            if !node.is_leaf() || crate::autograd::is_grad_enabled() {
                return fail(ErrorKind::MutableDataRequiresNoGrad { op: "data_mut" });
            }
        }
        let exclusive = self.layout.offset == 0
            && self.layout.is_contiguous()
            && self.numel() == self.storage.as_slice().len()
            && Arc::get_mut(&mut self.storage).is_some();
        if !exclusive {
            let data = self.to_vec();
            self.storage = Arc::new(Storage::new(data));
            self.layout = Layout::contiguous(&self.layout.shape);
        }
        let storage = Arc::get_mut(&mut self.storage).expect("storage made exclusive above");
        Ok(storage.as_mut_slice())
    }

    /// The same values without a gradient node: the graph is cut here. Shares storage.
    pub fn detach(&self) -> Tensor {
        Tensor { storage: self.storage.clone(), layout: self.layout.clone(), node: None, names: self.names.clone() }
    }

    /// The axis names, if any were given.
    pub fn names(&self) -> Option<Vec<Option<String>>> {
        self.names.as_ref().map(|n| n.to_vec())
    }

    /// The same tensor (same storage and node) with axis names, one per axis (`None` leaves an
    /// axis unnamed). Names let axis arguments be strings: `x.sum("batch", false)`.
    ///
    /// # Errors
    /// `RankMismatch` when the count differs from the rank; `DuplicateAxis` on a repeated name.
    pub fn with_names<S: AsRef<str>>(&self, names: &[Option<S>]) -> Result<Tensor> {
        if names.len() != self.rank() {
            return fail(ErrorKind::RankMismatch {
                op: "with_names",
                expected: "one name per axis",
                shape: self.shape().to_vec(),
            });
        }
        let names: Vec<Option<String>> = names.iter().map(|n| n.as_ref().map(|s| s.as_ref().to_string())).collect();
        for (i, n) in names.iter().enumerate() {
            if n.is_some() && names[..i].contains(n) {
                return fail(ErrorKind::DuplicateAxis { op: "with_names", axis: i });
            }
        }
        let mut out = self.clone();
        out.names = Some(names.into());
        Ok(out)
    }

    /// Resolves an axis argument of this tensor to a position.
    pub(crate) fn axis(&self, op: &'static str, axis: impl Into<Axis>) -> Result<usize> {
        resolve(op, &axis.into(), self.rank(), self.names.as_ref())
    }

    /// Resolves a set of axes to sorted, distinct positions.
    pub(crate) fn axes(&self, op: &'static str, axes: impl Into<Axes>) -> Result<smallvec::SmallVec<[usize; 4]>> {
        resolve_set(op, &axes.into(), self.rank(), self.names.as_ref())
    }
}
