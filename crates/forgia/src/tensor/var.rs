//! A variable's value cell: the one buffer every handle of a variable reads and every update
//! (optimizer step, checkpoint load, a user's write under `no_grad`) replaces or writes, so
//! that all handles see every update.
//!
//! Handles never hold the buffer themselves: they hold the cell, and read it by taking a
//! snapshot (an `Arc` clone) under its lock. A graph built before an update keeps the snapshot
//! its records saved, so an update while such a graph is alive writes a fresh copy instead of
//! the shared buffer (copy-on-write on the saved side): the graph still backpropagates through
//! the values its forward pass saw, and an update with nothing else holding the buffer writes in
//! place, with no copy.

use std::cell::RefCell;
use std::sync::Arc;

use parking_lot::ReentrantMutex;

use super::Storage;

/// The shared value of one variable: a packed, row-major buffer.
///
/// A reentrant lock around a `RefCell`: an update holds the lock while the caller's closure
/// writes, so a read of the same variable from inside that closure hits the `RefCell` borrow
/// check (a panic naming the misuse) instead of deadlocking.
pub(crate) struct VarCell {
    value: ReentrantMutex<RefCell<Arc<Storage>>>,
}

impl VarCell {
    /// A cell holding `storage` (packed in the variable's shape).
    pub(crate) fn new(storage: Arc<Storage>) -> VarCell {
        VarCell { value: ReentrantMutex::new(RefCell::new(storage)) }
    }

    /// The current buffer (a snapshot: later updates do not write into it while it is held).
    pub(crate) fn get(&self) -> Arc<Storage> {
        let guard = self.value.lock();
        let storage =
            guard.try_borrow().expect("a variable was read from inside its own update closure (with_data_mut)").clone();
        storage
    }

    /// Runs `f` on the buffer with exclusive access: in place when nothing else holds the
    /// buffer, else on a fresh copy that replaces it (snapshots keep the old values).
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut [f32]) -> R) -> R {
        let guard = self.value.lock();
        let mut slot = guard.borrow_mut();
        if Arc::get_mut(&mut slot).is_none() {
            *slot = Arc::new(Storage::new(slot.as_slice().to_vec()));
        }
        let storage = Arc::get_mut(&mut slot).expect("made exclusive above");
        f(storage.as_mut_slice())
    }
}
