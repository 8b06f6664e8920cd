//! The value layer: [`Array`], a node-free n-dimensional `f32` array (refcounted storage or a
//! variable's shared cell, a layout, optional axis names), with its storage, layouts and
//! views, checked sizes, creation, gathers and display. Nothing here knows about graphs: the
//! autograd layer's `Tensor` is an `Array` plus an optional node.

mod axis;
mod create;
mod display;
mod gather;
pub(crate) mod layout;
pub(crate) mod names;
mod random;
mod reduce_plan;
mod saved;
pub(crate) mod size;
mod storage;
pub(crate) mod transpose;
mod var;

use std::borrow::Cow;
use std::sync::Arc;

pub(crate) use axis::{check_scalar_axes, resolve, resolve_index, resolve_insert, resolve_set, Names};
pub use axis::{Axes, Axis};
pub(crate) use gather::gather;
pub(crate) use layout::Layout;
pub use layout::Shape;
pub(crate) use random::mix64;
pub use random::Rng;
pub(crate) use reduce_plan::ReducePlan;
pub(crate) use saved::Saved;
pub use size::MAX_WORK;
pub(crate) use size::{work, Size};
pub(crate) use storage::Storage;
pub(crate) use storage::{alloc, buffer, zeroed, Scratch, DEFAULT_BUFFER_CACHE_BYTES};
pub use storage::{
    buffer_cache_limit, cached_bytes, clear_buffer_cache, live_bytes, peak_bytes, reset_peak_bytes,
    set_buffer_cache_limit,
};
pub(crate) use var::VarCell;

use crate::error::{fail, ErrorKind, Result};

/// An n-dimensional array of `f32` with no gradient node: the value a
/// [`Tensor`](crate::Tensor) holds (a tensor dereferences to it, so every method here is a
/// tensor's too), and what backward records save, so a record can never own a graph edge.
///
/// Its elements are a refcounted buffer shared with views and clones (never written while
/// shared), or, for a variable, the value cell all handles of that variable share (see
/// `Tensor::with_data_mut`).
#[derive(Clone)]
pub struct Array {
    data: Data,
    pub(crate) layout: Layout,
    pub(crate) names: Option<Names>,
}

/// Where a tensor's elements live.
#[derive(Clone)]
enum Data {
    /// A buffer of the tensor's own (shared with views and clones, never written while shared).
    Value(Arc<Storage>),
    /// A variable's cell, shared by all its handles (its layout is packed row-major).
    Variable(Arc<VarCell>),
}

impl Array {
    /// A constant over `storage` with `layout` (the caller has checked that the layout
    /// addresses only elements of the buffer).
    pub(crate) fn from_storage(storage: Arc<Storage>, layout: Layout) -> Array {
        Array { data: Data::Value(storage), layout, names: None }
    }

    /// Wraps a contiguous buffer (internal: the length is trusted).
    pub(crate) fn from_parts(data: Vec<f32>, shape: &[usize]) -> Array {
        debug_assert!(Size::of("from_parts", shape).is_ok(), "unchecked shape {shape:?}");
        debug_assert_eq!(data.len(), layout::numel(shape));
        Array::from_storage(Arc::new(Storage::new(data)), Layout::contiguous(shape))
    }

    /// A fresh contiguous array of `shape` whose every element `fill` writes (it is handed
    /// unspecified values): one allocation for a small array (see [`Storage::filled`]).
    ///
    /// # Errors
    /// `OutOfMemory` as [`alloc`].
    #[inline]
    pub(crate) fn filled(op: &'static str, shape: &[usize], fill: impl FnOnce(&mut [f32])) -> Result<Array> {
        debug_assert!(Size::of("filled", shape).is_ok(), "unchecked shape {shape:?}");
        let storage = Storage::filled(op, layout::numel(shape), fill)?;
        Ok(Array::from_storage(storage, Layout::contiguous(shape)))
    }

    /// A fresh value cell over this array's values (packed row-major): the value of a new
    /// variable.
    pub(crate) fn new_variable(&self) -> Array {
        let storage = match self.layout.contiguous_range() {
            Some(r) if r.start == 0 && r.len() == self.storage().as_slice().len() => self.storage().into_owned(),
            _ => Arc::new(Storage::new(self.to_vec())),
        };
        Array {
            data: Data::Variable(Arc::new(VarCell::new(storage))),
            layout: Layout::contiguous(self.shape()),
            names: self.names.clone(),
        }
    }

    /// The buffer behind this tensor: borrowed for constants and op results, the current
    /// snapshot for a variable.
    #[inline]
    pub(crate) fn storage(&self) -> Cow<'_, Arc<Storage>> {
        match &self.data {
            Data::Value(storage) => Cow::Borrowed(storage),
            Data::Variable(cell) => Cow::Owned(cell.get()),
        }
    }

    /// The whole buffer of a constant or op result, for kernels that address it through the
    /// layout (a variable's values are read through a snapshot: `detach` first).
    #[inline]
    pub(crate) fn buffer_slice(&self) -> &[f32] {
        match &self.data {
            Data::Value(storage) => storage.as_slice(),
            Data::Variable(_) => panic!("buffer_slice() on a variable handle: take a snapshot with detach() first"),
        }
    }

    /// A new constant sharing this tensor's storage under another layout.
    pub(crate) fn with_layout(&self, layout: Layout) -> Array {
        Array::from_storage(self.storage().into_owned(), layout)
    }

    /// True when `self` and `other` are handles of one variable (clones of it, or the same
    /// parameter held by two modules, as tied weights are). False for constants and op results.
    pub fn same_variable(&self, other: &Array) -> bool {
        match (&self.data, &other.data) {
            (Data::Variable(a), Data::Variable(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Identity of a variable's value cell (`None` otherwise), for deduplicating tied handles.
    pub(crate) fn variable_key(&self) -> Option<usize> {
        match &self.data {
            Data::Variable(cell) => Some(Arc::as_ptr(cell) as usize),
            Data::Value(_) => None,
        }
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
    pub fn shares_storage(&self, other: &Array) -> bool {
        Arc::ptr_eq(&self.storage(), &other.storage())
    }

    /// The single value of a one-element tensor.
    ///
    /// # Errors
    /// `NotScalar` when the tensor has more or fewer than one element.
    pub fn item(&self) -> Result<f32> {
        if self.numel() != 1 {
            return fail(ErrorKind::NotScalar { op: "item", shape: self.shape().to_vec() });
        }
        Ok(self.storage().as_slice()[self.layout.offset])
    }

    /// The elements in row-major order (a copy).
    ///
    /// # Panics
    /// When the copy cannot be allocated (a broadcast view far larger than memory, see
    /// [`Array::try_to_vec`]), like any `Vec` that does not fit.
    pub fn to_vec(&self) -> Vec<f32> {
        self.try_to_vec().unwrap_or_else(|e| panic!("to_vec: {e}"))
    }

    /// The elements in row-major order (a copy), or an error when they cannot be had.
    ///
    /// ```
    /// let huge = forgia::Tensor::scalar(1.0).broadcast_to(&[1 << 40])?;
    /// assert!(huge.try_to_vec().is_err()); // 4 TiB: refused, not an abort
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `WorkLimitExceeded` for a broadcast view of more than [`MAX_WORK`] elements;
    /// `OutOfMemory` when the copy cannot be allocated.
    pub fn try_to_vec(&self) -> Result<Vec<f32>> {
        match self.layout.contiguous_range() {
            Some(r) => {
                let mut out = alloc("to_vec", r.len())?;
                out.copy_from_slice(&self.storage().as_slice()[r]);
                Ok(out)
            }
            None => gather("to_vec", self.storage().as_slice(), &self.layout),
        }
    }

    /// Read access to the elements as a contiguous slice, copying only when the layout is not
    /// already contiguous.
    ///
    /// # Panics
    /// When that copy cannot be allocated, as [`Array::to_vec`].
    pub fn with_data<R>(&self, f: impl FnOnce(&[f32]) -> R) -> R {
        self.try_with_data("with_data", |d| Ok(f(d))).unwrap_or_else(|e| panic!("with_data: {e}"))
    }

    /// [`Array::with_data`] for ops: the copy of a non-contiguous layout, and `f`, are fallible.
    pub(crate) fn try_with_data<R>(&self, op: &'static str, f: impl FnOnce(&[f32]) -> Result<R>) -> Result<R> {
        let storage = self.storage();
        match self.layout.contiguous_range() {
            Some(r) => f(&storage.as_slice()[r]),
            None => f(&Scratch::from_vec(gather(op, storage.as_slice(), &self.layout)?)),
        }
    }

    /// The contiguous values of this tensor as a fresh constant (shared when possible).
    pub(crate) fn contiguous_data(&self, op: &'static str) -> Result<Array> {
        if self.is_contiguous() {
            return Ok(self.snapshot());
        }
        let data = gather(op, self.storage().as_slice(), &self.layout)?;
        Ok(Array::from_parts(data, self.shape()))
    }

    /// The elements this tensor stores, as a view: the layout with every broadcast axis (stride
    /// 0, size above 1) narrowed to size 1, and how many times each of them repeats in the
    /// logical tensor (1 when nothing is broadcast).
    pub(crate) fn stored(&self) -> (Array, usize) {
        let mut layout = self.layout.clone();
        for (d, &s) in layout.shape.iter_mut().zip(&self.layout.strides) {
            if s == 0 && *d > 1 {
                *d = 1;
            }
        }
        let stored = layout.numel();
        let repeats = self.numel().checked_div(stored).unwrap_or(1);
        let t = if repeats == 1 { self.snapshot() } else { self.with_layout(layout) };
        (t, repeats)
    }

    /// A constant of this tensor's shape whose elements are `f` of this tensor's elements, for
    /// ops that map each element on its own and cannot fail: `f` runs over the stored elements
    /// only (see [`Array::stored`]) and a broadcast input gives a broadcast result, so the
    /// work and the memory are those of the storage, never of the logical size.
    ///
    /// # Panics
    /// Only when memory cannot hold a copy of the stored elements (like any `Vec`).
    pub(crate) fn map_stored(&self, op: &'static str, f: impl FnOnce(&[f32]) -> Result<Vec<f32>>) -> Array {
        self.map_stored_storage(op, |d| Ok(Arc::new(Storage::new(f(d)?))))
    }

    /// [`Array::map_stored`] for a map that writes into the output it is handed, `f(input,
    /// output)` (every output element written): a small result is then one allocation.
    ///
    /// # Panics
    /// As [`Array::map_stored`].
    pub(crate) fn map_stored_into(&self, op: &'static str, f: impl FnOnce(&[f32], &mut [f32])) -> Array {
        self.map_stored_storage(op, |d| Storage::filled(op, d.len(), |out| f(d, out)))
    }

    /// The common body of the two above: `f` makes the storage of the mapped stored elements.
    fn map_stored_storage(&self, op: &'static str, f: impl FnOnce(&[f32]) -> Result<Arc<Storage>>) -> Array {
        if !self.layout.strides.contains(&0) {
            // Nothing is broadcast (the common case): map the elements as they are.
            let storage = self.try_with_data(op, f).unwrap_or_else(|e| panic!("{e}"));
            debug_assert_eq!(storage.as_slice().len(), self.numel());
            let mut out = Array::from_storage(storage, Layout::contiguous(self.shape()));
            out.names = self.names.clone();
            return out;
        }
        let (src, repeats) = self.stored();
        let storage = src.try_with_data(op, f).unwrap_or_else(|e| panic!("{e}"));
        debug_assert_eq!(storage.as_slice().len(), src.numel());
        let out = Array::from_storage(storage, Layout::contiguous(src.shape()));
        let out = if repeats == 1 { out } else { out.with_layout(out.layout.broadcast_to(self.shape())) };
        let mut out = out;
        out.names = self.names.clone();
        out
    }

    /// The contiguous slice of a constant or op result known to be contiguous (a variable's
    /// values are read through a snapshot: `detach` or `contiguous_data` first).
    #[inline]
    pub(crate) fn packed(&self) -> &[f32] {
        let r = self.layout.contiguous_range().expect("packed() needs a contiguous tensor");
        &self.buffer_slice()[r]
    }

    /// Runs `f` with mutable access to the elements (row-major). On a variable's cell the
    /// write is seen by every handle of it, and snapshots taken before keep their values; on a
    /// plain buffer, it is copied first if anything else shares it. (`Tensor::with_data_mut`
    /// adds the graph's rules on top.)
    ///
    /// # Errors
    /// `OutOfMemory` when the copy cannot be allocated.
    pub(crate) fn with_data_mut<R>(&mut self, f: impl FnOnce(&mut [f32]) -> R) -> Result<R> {
        if let Data::Variable(cell) = &self.data {
            return Ok(cell.update(f));
        }
        if self.exclusive_mut().is_none() {
            let data = self.try_to_vec()?;
            self.data = Data::Value(Arc::new(Storage::new(data)));
            self.layout = Layout::contiguous(&self.layout.shape);
        }
        Ok(f(self.exclusive_mut().expect("storage made exclusive above")))
    }

    /// The elements of a constant or op result that owns its packed buffer outright (no other
    /// handle, view or saved value shares it), for writing in place; `None` otherwise.
    pub(crate) fn exclusive_mut(&mut self) -> Option<&mut [f32]> {
        let packed = self.layout.offset == 0 && self.layout.is_contiguous();
        let n = self.layout.numel();
        match &mut self.data {
            Data::Value(storage) if packed && storage.as_slice().len() == n => {
                Arc::get_mut(storage).map(Storage::as_mut_slice)
            }
            _ => None,
        }
    }

    /// The same values as a plain buffer: shared with `self`, or for a variable's cell a
    /// snapshot of its current values, which later updates do not change.
    pub(crate) fn snapshot(&self) -> Array {
        Array { data: Data::Value(self.storage().into_owned()), layout: self.layout.clone(), names: self.names.clone() }
    }

    /// The axis names, if any were given.
    pub fn names(&self) -> Option<Vec<Option<String>>> {
        self.names.as_ref().map(|n| n.to_vec())
    }

    /// The same array (same storage) with axis names, one per axis (`None` leaves an axis
    /// unnamed).
    ///
    /// # Errors
    /// `RankMismatch` when the count differs from the rank; `DuplicateAxis` on a repeated name.
    pub(crate) fn with_names<S: AsRef<str>>(&self, names: &[Option<S>]) -> Result<Array> {
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
