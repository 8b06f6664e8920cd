//! A value a backward record keeps: only the buffer when it is packed in the op's own shape
//! (the shape then comes back with the incoming gradient), otherwise the whole detached view.
//! Keeps the records of small elementwise ops a few bytes instead of a full tensor handle.

use std::sync::Arc;

use super::{Array, Layout, Storage};

/// A detached value saved for backward.
pub(crate) enum Saved {
    /// A packed buffer holding exactly the value, in row-major order.
    Packed(Arc<Storage>),
    /// Any other layout.
    View(Box<Array>),
}

impl Saved {
    /// Saves `t`'s value (never its node).
    pub(crate) fn new(t: &Array) -> Saved {
        // An op result's or constant's own buffer (the common case): borrowed, cloned once.
        if let super::Data::Value(storage) = &t.data {
            let n = t.layout.numel();
            if t.layout.offset == 0 && storage.as_slice().len() == n && t.layout.is_contiguous() {
                return Saved::Packed(storage.clone());
            }
            return Saved::View(Box::new(t.snapshot()));
        }
        let storage = t.storage();
        let packed = t.layout.offset == 0 && t.layout.is_contiguous() && storage.as_slice().len() == t.numel();
        if packed {
            Saved::Packed(storage.into_owned())
        } else {
            Saved::View(Box::new(t.snapshot()))
        }
    }

    /// The saved value as a constant of `shape` (the shape it had when saved).
    pub(crate) fn value(&self, shape: &[usize]) -> Array {
        match self {
            Saved::Packed(storage) => {
                debug_assert_eq!(storage.as_slice().len(), super::layout::numel(shape));
                Array::from_storage(storage.clone(), Layout::contiguous(shape))
            }
            Saved::View(t) => (**t).clone(),
        }
    }

    /// Runs `f` on the saved elements in row-major order (the value has `shape`, the shape it
    /// had when saved), copying only a view that is not packed.
    pub(crate) fn try_with_data<R>(
        &self,
        op: &'static str,
        shape: &[usize],
        f: impl FnOnce(&[f32]) -> crate::error::Result<R>,
    ) -> crate::error::Result<R> {
        match self {
            Saved::Packed(storage) => {
                debug_assert_eq!(storage.as_slice().len(), super::layout::numel(shape));
                f(storage.as_slice())
            }
            Saved::View(t) => t.try_with_data(op, f),
        }
    }

    /// Number of elements saved.
    pub(crate) fn numel(&self) -> usize {
        match self {
            Saved::Packed(storage) => storage.as_slice().len(),
            Saved::View(t) => t.numel(),
        }
    }
}
