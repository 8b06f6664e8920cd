//! Post-accumulate-grad hooks on variables (PyTorch's `register_post_accumulate_grad_hook`):
//! a hook runs once per backward pass, as soon as the variable's gradient for that pass is
//! final. The engine knows when that is because a pass counts the consumer edges of every
//! hooked leaf it reaches, exactly as it counts interior nodes, in per-pass state
//! ([`PassLeaves`]) so independent passes over the same leaves keep their own counts.
//!
//! A pass only does this work when some live variable has a hook (one atomic load per pass
//! otherwise): leaves without hooks cost what they always did.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use smallvec::SmallVec;

use super::node::{Node, Parent};
use crate::autograd::Tensor;
use crate::error::{fail, Error, ErrorKind, Result};

/// A registered hook: called with the variable's accumulated gradient.
pub(super) type GradHook = Arc<dyn Fn(&Tensor) -> Result<()> + Send + Sync>;

/// Hooks registered on live variables, over all variables. Zero means no pass needs to look
/// at leaves at all.
static LIVE_HOOKS: AtomicUsize = AtomicUsize::new(0);
// Relaxed: hook ids only need to be unique.
static NEXT_HOOK: AtomicU64 = AtomicU64::new(1);

/// Removes a hook registered with [`Tensor::register_post_accumulate_grad_hook`]. Dropping
/// the handle keeps the hook (as in PyTorch); call [`HookHandle::remove`] to take it off.
#[derive(Debug)]
pub struct HookHandle {
    node: Weak<Node>,
    id: u64,
}

impl HookHandle {
    /// Takes the hook off its variable. A pass already running may still call it once.
    /// Nothing happens when the variable is gone or the hook was already removed.
    pub fn remove(self) {
        let Some(node) = self.node.upgrade() else { return };
        let mut slot = node.grad.lock();
        let before = slot.hooks().len();
        if before == 0 {
            return;
        }
        let hooks = &mut slot.extra_mut().hooks;
        hooks.retain(|(id, _)| *id != self.id);
        if hooks.len() < before {
            // Release: pairs with the Acquire load of a pass (only a hint; see `register`).
            LIVE_HOOKS.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Called from `Node::drop` with the number of hooks the dropped leaf still had.
pub(super) fn forget(count: usize) {
    if count > 0 {
        LIVE_HOOKS.fetch_sub(count, Ordering::Release);
    }
}

impl Tensor {
    /// Registers `hook` on this variable, to run once per backward pass that reaches it, as
    /// soon as its gradient for that pass is final: after the last contribution of the pass
    /// has been added to [`Tensor::grad`], and before the pass returns. The hook receives that
    /// accumulated gradient (the sum over passes since the last [`Tensor::zero_grad`], as
    /// `grad()` would return it). This is PyTorch's `register_post_accumulate_grad_hook`.
    ///
    /// Details:
    /// - A pass that does not reach the variable, or reaches it only through paths that
    ///   deliver no gradient (pruned or gradient-free branches), does not call the hook.
    /// - With several hooks, they run in registration order.
    /// - The hook may run on any of the library's pool threads (whichever delivered the last
    ///   contribution), while other parts of the pass are still running: that is the point
    ///   (data-parallel training starts communicating a gradient while backward goes on). It
    ///   must not start a backward pass of its own over the same graph, and must not call
    ///   [`Tensor::grad`] or [`Tensor::zero_grad`] on this same variable (the gradient is its
    ///   argument).
    /// - An error returned by the hook, or a panic in it, fails the pass like a failing
    ///   record: the pass rolls back and returns the error (wrapped as `Nested` with the
    ///   context "post-accumulate-grad hook", or `BackwardPanicked`). Contributions already
    ///   delivered to variables stay, as for any failed pass.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use forgia::Tensor;
    /// let w = Tensor::variable(vec![1.0, 2.0], &[2])?;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let handle = w.register_post_accumulate_grad_hook(move |g| {
    ///     log.lock().unwrap().push(g.to_vec());
    ///     Ok(())
    /// })?;
    /// // Two uses of `w`: the hook runs once, with both contributions summed (d/dw 3w = 3).
    /// w.add(&w.scale(2.0))?.sum_all().backward()?;
    /// assert_eq!(*seen.lock().unwrap(), vec![vec![3.0, 3.0]]);
    /// handle.remove();
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` when this tensor is not a variable (a constant or an op result).
    pub fn register_post_accumulate_grad_hook<F>(&self, hook: F) -> Result<HookHandle>
    where
        F: Fn(&Tensor) -> Result<()> + Send + Sync + 'static,
    {
        let Some(node) = self.node.as_ref().filter(|n| n.is_leaf()) else {
            return fail(ErrorKind::InvalidArgument {
                op: "register_post_accumulate_grad_hook",
                arg: "self",
                reason: format!(
                    "hooks attach to variables (leaves); this tensor of shape {:?} is {}",
                    self.shape(),
                    if self.node.is_some() { "an op result" } else { "a constant" }
                ),
            });
        };
        let id = NEXT_HOOK.fetch_add(1, Ordering::Relaxed);
        node.grad.lock().extra_mut().hooks.push((id, Arc::new(hook)));
        // Release: a pass started after this call on another thread that sees the count also
        // sees the hook (the hook itself sits under the leaf's lock, so this is a hint only).
        LIVE_HOOKS.fetch_add(1, Ordering::Release);
        Ok(HookHandle { node: Arc::downgrade(node), id })
    }
}

/// One hooked leaf's count in one pass.
struct Entry {
    node: Arc<Node>,
    /// Consumer edges (and seeds) of this pass not yet delivered.
    pending: AtomicU32,
    /// Set when some delivery carried a gradient.
    got: AtomicBool,
}

/// The hooked leaves a pass reaches, keyed by node address, with their pending counts. Empty
/// (and never looked at) when no variable has a hook.
#[derive(Default)]
pub(super) struct PassLeaves {
    map: HashMap<usize, Entry>,
}

fn key(node: &Arc<Node>) -> usize {
    Arc::as_ptr(node) as usize
}

impl PassLeaves {
    /// Counts, for every hooked leaf, the edges from the pass's counted interior nodes
    /// (`visited`, each fires once) and the seeds that target it directly (`roots`).
    pub(super) fn collect<'a>(roots: impl Iterator<Item = &'a Arc<Node>>, visited: &[Arc<Node>]) -> PassLeaves {
        let mut leaves = PassLeaves::default();
        // Acquire: pairs with the Release of `register`.
        if LIVE_HOOKS.load(Ordering::Acquire) == 0 {
            return leaves;
        }
        let mut count = |node: Arc<Node>| {
            if !node.grad.lock().hooks().is_empty() {
                leaves
                    .map
                    .entry(key(&node))
                    .or_insert_with(|| Entry { node, pending: AtomicU32::new(0), got: AtomicBool::new(false) })
                    .pending
                    // Relaxed: read only after the drain starts (see `PassLeaves::arrive`).
                    .fetch_add(1, Ordering::Relaxed);
            }
        };
        for root in roots.filter(|n| n.is_leaf()) {
            count(root.clone());
        }
        for node in visited {
            // SAFETY: `visited` holds the nodes this pass's prepare walk claimed, and the
            // drain has not started: this thread owns them.
            let Some(edge) = (unsafe { node.edge() }) else { continue };
            for parent in edge.parents.iter().flatten() {
                if let Parent::Leaf(w) = parent {
                    if let Some(leaf) = w.upgrade() {
                        count(leaf);
                    }
                }
            }
        }
        leaves
    }

    /// True when the pass reaches no hooked leaf.
    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// One delivery to `leaf` (`got`: it carried a gradient, already accumulated). The
    /// delivery that takes the count to zero runs the leaf's hooks.
    ///
    /// # Errors
    /// The first hook error (`Nested`) or panic (`BackwardPanicked`).
    pub(super) fn arrive(&self, leaf: &Arc<Node>, got: bool) -> Result<()> {
        let Some(entry) = self.map.get(&key(leaf)) else { return Ok(()) };
        if got {
            // Relaxed: published by the AcqRel decrement below.
            entry.got.store(true, Ordering::Relaxed);
        }
        // AcqRel: the delivery that takes the count to zero must see every other thread's
        // accumulation and `got` flag (the decrements form one release sequence).
        if entry.pending.fetch_sub(1, Ordering::AcqRel) == 1 && entry.got.load(Ordering::Relaxed) {
            run_hooks(&entry.node)?;
        }
        Ok(())
    }
}

/// Runs a leaf's hooks on its final gradient, outside its lock.
fn run_hooks(node: &Node) -> Result<()> {
    let (grad, hooks) = {
        let slot = node.grad.lock();
        let hooks: SmallVec<[GradHook; 2]> = slot.hooks().iter().map(|(_, h)| h.clone()).collect();
        (slot.acc.as_deref().cloned(), hooks)
    };
    let Some(grad) = grad else { return Ok(()) };
    for hook in hooks {
        // AssertUnwindSafe: after a panic the engine only rolls the pass back; the hook's own
        // state is the user's to fix, as with a panicking record.
        match catch_unwind(AssertUnwindSafe(|| hook(&grad))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(Error::from(ErrorKind::Nested {
                    context: "post-accumulate-grad hook",
                    source: Box::new(e),
                }))
            }
            Err(payload) => {
                let message = match payload.downcast::<String>() {
                    Ok(s) => *s,
                    Err(payload) => match payload.downcast::<&'static str>() {
                        Ok(s) => (*s).to_string(),
                        Err(_) => "a panic with a non-string payload".to_string(),
                    },
                };
                return fail(ErrorKind::BackwardPanicked { op: "post_accumulate_grad_hook", message });
            }
        }
    }
    Ok(())
}
