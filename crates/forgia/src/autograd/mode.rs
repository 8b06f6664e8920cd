//! Grad mode: a thread-local depth counter of `no_grad` guards, plus the explicit override the
//! engine sets on pool threads.

use std::cell::Cell;

thread_local! {
    static NO_GRAD_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// True when ops on variables record graph nodes on this thread (no [`no_grad`] guard open).
pub fn is_grad_enabled() -> bool {
    NO_GRAD_DEPTH.with(|d| d.get() == 0)
}

/// A guard that turns recording off on this thread until it is dropped. Guards nest.
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
    previous: u32,
}

/// Opens a no-grad region on this thread: the same forward kernels run, but no node is built.
pub fn no_grad() -> NoGradGuard {
    let previous = NO_GRAD_DEPTH.with(|d| {
        let p = d.get();
        d.set(p + 1);
        p
    });
    NoGradGuard { previous }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        NO_GRAD_DEPTH.with(|d| d.set(self.previous));
    }
}

/// Sets grad mode on this thread to `enabled` until the guard drops (the engine runs records
/// with recording on only for `create_graph` passes; pool threads need it set explicitly).
pub(crate) fn set_grad_enabled(enabled: bool) -> NoGradGuard {
    let previous = NO_GRAD_DEPTH.with(|d| {
        let p = d.get();
        d.set(if enabled { 0 } else { p.max(1) });
        p
    });
    NoGradGuard { previous }
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
}
