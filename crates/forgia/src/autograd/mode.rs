//! Grad mode: a thread-local depth counter of `no_grad` guards, plus the explicit override the
//! engine sets on pool threads.

use std::cell::Cell;
use std::marker::PhantomData;

/// This thread's grad mode: the number of open [`no_grad`] guards, and the explicit setting of
/// the innermost [`set_grad_enabled`] scope together with the guard count when it began.
#[derive(Clone, Copy)]
struct Mode {
    depth: u32,
    base: u32,
    base_enabled: bool,
}

thread_local! {
    static MODE: Cell<Mode> = const { Cell::new(Mode { depth: 0, base: 0, base_enabled: true }) };
}

/// True when ops on variables record graph nodes on this thread (no [`no_grad`] guard open).
pub fn is_grad_enabled() -> bool {
    let m = MODE.with(Cell::get);
    m.base_enabled && m.depth <= m.base
}

/// A guard that turns recording off on this thread until it is dropped. Guards nest, and may
/// be dropped in any order: recording resumes when the last open one is dropped. A guard
/// belongs to the thread that opened it (it is neither `Send` nor `Sync`).
///
/// ```
/// use forgia::{no_grad, Tensor};
/// let w = Tensor::variable(vec![1.0, 2.0], &[2])?;
/// let y = {
///     let _guard = no_grad();
///     w.scale(2.0)
/// };
/// assert!(!y.requires_grad());
/// # Ok::<(), forgia::Error>(())
/// ```
#[must_use = "recording resumes as soon as the guard is dropped"]
pub struct NoGradGuard {
    /// Thread-bound: the count it decrements is this thread's.
    _thread: PhantomData<*const ()>,
}

/// Opens a no-grad region on this thread: the same forward kernels run, but no node is built.
pub fn no_grad() -> NoGradGuard {
    MODE.with(|m| {
        let mode = m.get();
        m.set(Mode { depth: mode.depth + 1, ..mode });
    });
    NoGradGuard { _thread: PhantomData }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        MODE.with(|m| {
            let mode = m.get();
            m.set(Mode { depth: mode.depth.saturating_sub(1), ..mode });
        });
    }
}

/// The guard of [`enable_grad`] (and of the engine's explicit scopes): restores the enclosing
/// setting when dropped. Thread-bound, like [`NoGradGuard`].
#[must_use = "the setting ends as soon as the guard is dropped"]
pub struct GradModeGuard {
    saved: (u32, bool),
    _thread: PhantomData<*const ()>,
}

/// Turns recording on for this thread until the guard drops, even inside a [`no_grad`] region
/// (PyTorch's `torch.enable_grad`); a `no_grad` guard opened inside it still turns recording
/// off. The function transforms use it, so they work under an outer `no_grad` as `torch.func`
/// does.
///
/// ```
/// use forgia::{enable_grad, is_grad_enabled, no_grad};
/// let _off = no_grad();
/// {
///     let _on = enable_grad();
///     assert!(is_grad_enabled());
/// }
/// assert!(!is_grad_enabled());
/// ```
pub fn enable_grad() -> GradModeGuard {
    set_grad_enabled(true)
}

/// Sets grad mode on this thread to `enabled` until the guard drops, whatever guards are open
/// (the engine runs records with recording on only for `create_graph` passes; pool threads
/// need it set explicitly). A [`no_grad`] guard opened inside the scope still turns recording
/// off. Scopes nest strictly (each guard is dropped before the one opened before it).
pub(crate) fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    let saved = MODE.with(|m| {
        let mode = m.get();
        m.set(Mode { base: mode.depth, base_enabled: enabled, ..mode });
        (mode.base, mode.base_enabled)
    });
    GradModeGuard { saved, _thread: PhantomData }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        let (base, base_enabled) = self.saved;
        MODE.with(|m| m.set(Mode { base, base_enabled, ..m.get() }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_grad_nests_and_is_per_thread() {
        assert!(is_grad_enabled());
        {
            let _a = no_grad();
            {
                let _b = no_grad();
                assert!(!is_grad_enabled());
                std::thread::spawn(|| assert!(is_grad_enabled())).join().unwrap();
            }
            assert!(!is_grad_enabled());
        }
        assert!(is_grad_enabled());
    }

    #[test]
    fn a_guard_cannot_move_to_another_thread() {
        // Compiles only while `NoGradGuard` is not `Send`: with a `Send` guard the two impls
        // below would both apply and the call would be ambiguous.
        trait AmbiguousIfSend<A> {
            fn check() {}
        }
        impl<T: ?Sized> AmbiguousIfSend<()> for T {}
        #[allow(dead_code)]
        struct Marker;
        impl<T: ?Sized + Send> AmbiguousIfSend<Marker> for T {}
        <NoGradGuard as AmbiguousIfSend<_>>::check();
    }

    #[test]
    fn guards_dropped_out_of_order_leave_recording_on_once_all_are_gone() {
        let a = no_grad();
        let b = no_grad();
        drop(a);
        assert!(!is_grad_enabled(), "b is still open");
        drop(b);
        assert!(is_grad_enabled());
    }

    #[test]
    fn an_explicit_setting_holds_until_its_guard_drops_and_no_grad_inside_it_still_wins() {
        let outer = no_grad();
        {
            let _on = set_grad_enabled(true);
            assert!(is_grad_enabled());
            {
                let _off = no_grad();
                assert!(!is_grad_enabled());
            }
            assert!(is_grad_enabled());
            let _off = set_grad_enabled(false);
            assert!(!is_grad_enabled());
        }
        assert!(!is_grad_enabled(), "the outer no_grad is back in force");
        drop(outer);
        assert!(is_grad_enabled());
    }
}
