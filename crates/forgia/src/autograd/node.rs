//! The graph node: gradient accumulator under a lock, atomic pending counter, state, pass
//! marker, and the backward record with its operands' nodes. Plus the `Backward` trait every
//! op's record implements and the one funnel (`attach`) that decides whether an op result
//! gets a node.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::engine::ASYNC_WORK_THRESHOLD;
use super::mode::is_grad_enabled;
use super::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::tensor::Array;

/// A node's shape: inline up to rank 2 (a rank-2 node is 16 bytes smaller than with the
/// tensors' rank-4 `Shape`, which keeps W8's million nodes in a smaller allocator size class;
/// a higher rank spills to the heap, once per node of a heavy op).
pub(super) type NodeShape = SmallVec<[usize; 2]>;

/// The list a record fills with its gradients ([`Backward::backward`]), one slot per operand
/// (`None`: no contribution).
pub(crate) type Grads = SmallVec<[Option<Tensor>; 2]>;

/// Puts `n` empty slots in a record's gradient list, one per operand, for the record to fill
/// the ones it computes. Pushes rather than `SmallVec::resize`, whose generic loop was not
/// inlined: about 70 instructions a firing on the per-op path of long chains (the product's
/// record, docs/BENCHMARKS.md, session thirty-one).
#[inline]
pub(crate) fn empty_slots(out: &mut Grads, n: usize) {
    for _ in 0..n {
        out.push(None);
    }
}

/// The backward half of an op: given the gradient of the loss with respect to the op's output,
/// produce the gradient with respect to each operand (a vector–Jacobian product).
///
/// Records keep what they need as named fields holding *detached* tensors (no node), so the
/// engine can free them as soon as the node fires and a record never owns a graph edge; the
/// context hands the nodes back (`VjpCtx::input`, `VjpCtx::output`) when a pass builds a graph.
pub(crate) trait Backward: Send + Sync {
    /// The op's name, for errors and `Display`.
    fn name(&self) -> &'static str;

    /// The VJP, into `out` (empty on entry): one slot per operand, a gradient only for
    /// operands with `cx.needs_grad(i)`. Written in place rather than returned: the list is a
    /// few hundred bytes, and each move of it was a `memcpy` call on the engine's per-op path
    /// (6% of W1's samples).
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()>;

    /// Whether this kind of record reads values — its op's operands or output — in backward:
    /// true unless a record says otherwise. An op whose record reads none (`add`, `sub`) may
    /// run on an operand nobody computed, as after a checkpointed block's final product
    /// during its recompute (see `checkpoint`).
    fn reads_values() -> bool
    where
        Self: Sized,
    {
        true
    }

    /// Work units (about one multiply-add each) of this backward, so the engine can run heavy
    /// independent branches on the pool. Small ops keep the default.
    fn estimated_work(&self) -> usize {
        0
    }
}

/// What a record sees while it runs: which operands need a gradient, and whether the pass
/// builds a graph of the gradients themselves (`create_graph`).
pub(crate) struct VjpCtx<'a> {
    pub(super) node: &'a Arc<Node>,
    /// The operand links of the firing node's edge (read in place: firing clones no `Arc`).
    pub(super) parents: &'a [Option<Parent>],
    /// In a capturing pass (`grad`), which operands lead to one of its inputs.
    pub(super) wanted: Option<&'a [bool]>,
    pub(super) create_graph: bool,
}

impl VjpCtx<'_> {
    /// True when operand `i` needs a gradient: it is not a constant (and, in a pass that
    /// returns the gradients of given inputs, it leads to one of them).
    pub(crate) fn needs_grad(&self, i: usize) -> bool {
        self.parents.get(i).is_some_and(|p| p.as_ref().is_some_and(Parent::is_live)) && self.wanted.is_none_or(|w| w[i])
    }

    /// True during a `create_graph` pass (records then run with recording on).
    pub(crate) fn create_graph(&self) -> bool {
        self.create_graph
    }

    /// The saved value of operand `i`, reconnected to its node in a `create_graph` pass (a
    /// constant otherwise), whether or not that operand needs a gradient in this pass: the
    /// gradients built stay differentiable with respect to every variable they depend on.
    pub(crate) fn input(&self, i: usize, saved: &Array) -> Tensor {
        let mut t = Tensor::from(saved);
        if self.create_graph {
            t.node = self.parents[i].as_ref().and_then(Parent::get).map(Held::into_owned);
        }
        t
    }

    /// The saved output of this op, reconnected to this node in a `create_graph` pass (a
    /// constant otherwise).
    pub(crate) fn output(&self, saved: &Array) -> Tensor {
        let mut t = Tensor::from(saved);
        if self.create_graph {
            t.node = Some(self.node.clone());
        }
        t
    }

    /// Fails with `DoubleBackwardUnsupported` in a `create_graph` pass: for records that use a
    /// fused, non-differentiable kernel.
    pub(crate) fn fused(&self, op: &'static str) -> Result<()> {
        if self.create_graph {
            return fail(ErrorKind::DoubleBackwardUnsupported { op });
        }
        Ok(())
    }
}

/// A record and the nodes of its operands (`None` for constants).
pub(super) struct Edge {
    pub(super) record: Box<dyn Backward>,
    pub(super) parents: SmallVec<[Option<Parent>; 2]>,
}

/// An operand's node held for one delivery: borrowed from the edge (or moved out of a released
/// one) for an op result, an upgraded handle for a variable (so firing costs no reference-count
/// traffic on interior edges).
pub(super) type Held<'a> = std::borrow::Cow<'a, Arc<Node>>;

/// A link from a node to an operand's node: it owns an op result's node (the graph keeps its
/// interior alive), but not a variable's: only the variable's handles own a leaf. So a leaf's
/// gradient that carries a graph reaching back to the leaf (a `create_graph` pass) makes no
/// `Arc` cycle, and dropping the variable frees the gradient and its graph. A contribution to
/// a leaf nobody holds any more is dropped: no handle is left to read it.
pub(super) enum Parent {
    Interior(Arc<Node>),
    Leaf(Weak<Node>),
}

impl Parent {
    fn new(node: &Arc<Node>) -> Parent {
        if node.leaf {
            Parent::Leaf(Arc::downgrade(node))
        } else {
            Parent::Interior(node.clone())
        }
    }

    /// False for a leaf that was dropped (no handle is left to read its gradient).
    pub(super) fn is_live(&self) -> bool {
        match self {
            Parent::Interior(_) => true,
            Parent::Leaf(w) => w.strong_count() > 0,
        }
    }

    /// The operand's node, `None` for a leaf that was dropped.
    pub(super) fn get(&self) -> Option<Held<'_>> {
        match self {
            Parent::Interior(n) => Some(Held::Borrowed(n)),
            Parent::Leaf(w) => w.upgrade().map(Held::Owned),
        }
    }

    /// The operand's node when it is an op result (what the prepare walk and the drop follow).
    pub(super) fn interior(&self) -> Option<&Arc<Node>> {
        match self {
            Parent::Interior(n) => Some(n),
            Parent::Leaf(_) => None,
        }
    }

    /// The operand's node, moved out of the link (`None` for a leaf that was dropped).
    pub(super) fn into_held(self) -> Option<Held<'static>> {
        match self {
            Parent::Interior(n) => Some(Held::Owned(n)),
            Parent::Leaf(w) => w.upgrade().map(Held::Owned),
        }
    }

    fn into_interior(self) -> Option<Arc<Node>> {
        match self {
            Parent::Interior(n) => Some(n),
            Parent::Leaf(_) => None,
        }
    }
}

/// Node states: idle between passes, pending once a pass counted it, running while it fires.
pub(super) const IDLE: u8 = 0;
pub(super) const PENDING: u8 = 1;
pub(super) const RUNNING: u8 = 2;

/// Node flag: a non-retained pass with this node as an output completed.
pub(super) const DONE: u8 = 1;
/// Node flag: `retain_grad` was asked for.
pub(super) const RETAIN: u8 = 2;
/// Node flag: an op result's accumulator holds a partial sum of the current pass (set and
/// cleared with the accumulator, under its lock), so a contribution can learn that it is the
/// node's whole gradient without taking the lock (`engine::hand_or_accumulate`).
pub(super) const ACCUMULATED: u8 = 4;

/// The gradient slots of a node.
#[derive(Default)]
pub(super) struct GradSlot {
    /// The accumulator: a leaf's gradient, or an interior node's incoming sum during a pass.
    pub(super) acc: Option<Box<Tensor>>,
    /// What few nodes use, boxed so that the node of a tiny op stays small (W8 holds a million).
    extra: Option<Box<Extra>>,
}

/// The rarely used gradient slots of a node.
#[derive(Default)]
pub(super) struct Extra {
    /// An interior node's gradient kept by `retain_grad`.
    pub(super) retained: Option<Tensor>,
    /// A variable's post-accumulate-grad hooks with their ids (see `hooks.rs`).
    pub(super) hooks: Vec<(u64, super::hooks::GradHook)>,
}

impl GradSlot {
    /// The hooks of a variable (none for most).
    pub(super) fn hooks(&self) -> &[(u64, super::hooks::GradHook)] {
        self.extra.as_ref().map_or(&[], |e| &e.hooks)
    }

    /// The gradient kept by `retain_grad`, if any.
    pub(super) fn retained(&self) -> Option<&Tensor> {
        self.extra.as_ref().and_then(|e| e.retained.as_ref())
    }

    /// The rarely used slots, made on first use.
    pub(super) fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// Forgets the kept gradient (nothing is made when there is none).
    pub(super) fn clear_retained(&mut self) {
        if let Some(e) = self.extra.as_mut() {
            e.retained = None;
        }
    }
}

/// One node of the implicit graph. Owned by `Arc`: the values that point at it keep it alive.
pub(crate) struct Node {
    pub(super) shape: NodeShape,
    pub(super) name: &'static str,
    /// The record's `estimated_work()` reaches `ASYNC_WORK_THRESHOLD`: worth a pool task.
    pub(super) heavy: bool,
    pub(super) leaf: bool,
    pub(super) grad: Mutex<GradSlot>,
    /// Consumer edges not yet delivered in the current pass.
    pub(super) pending: AtomicU32,
    pub(super) state: AtomicU8,
    /// The id of the pass that counted this node (0 when idle).
    pub(super) pass: AtomicU64,
    /// [`DONE`], [`RETAIN`] and [`ACCUMULATED`] (one byte for all keeps the node in its size
    /// class).
    pub(super) flags: AtomicU8,
    /// `None` for a leaf, and for an interior node whose record a pass released. Not behind a
    /// lock: the node's state machine already gives one thread at a time the right to touch it
    /// (see [`Node::edge`]), and a lock taken twice per op for nothing cost W1 four atomic
    /// read-modify-writes per op.
    edge: UnsafeCell<Option<Edge>>,
}

// SAFETY: every field but `edge` is `Sync` on its own. `edge` is read or written only through
// `Node::edge` / `Node::edge_mut`, whose callers own the node for a pass (they won its
// idle → pending CAS, or took its counter to 0), or through `&mut Node`; ownership passes
// between threads through the state's Acquire CAS and Release stores and the counter's AcqRel
// decrement (`autograd/README.md`, memory orderings), so no two threads ever access it at once.
unsafe impl Sync for Node {}

impl Node {
    #[inline]
    fn new(shape: &[usize], name: &'static str, heavy: bool, edge: Option<Edge>) -> Node {
        Node {
            shape: crate::tensor::layout::copy_small(shape),
            name,
            heavy,
            leaf: edge.is_none(),
            grad: Mutex::new(GradSlot::default()),
            pending: AtomicU32::new(0),
            state: AtomicU8::new(IDLE),
            pass: AtomicU64::new(0),
            flags: AtomicU8::new(0),
            edge: UnsafeCell::new(edge),
        }
    }

    /// An op result's node, built in its `Arc`'s own allocation (a node built first and moved
    /// in costs a copy of its 160 bytes on every op).
    #[inline]
    fn new_arc(shape: &[usize], name: &'static str, heavy: bool, edge: Edge) -> Arc<Node> {
        let node = Arc::<Node>::new_uninit();
        // SAFETY: `node` was created just above and has no other handle, so this is the only
        // access to its contents; `Arc::as_ptr` points at them (a raw pointer, no shared
        // reference is made).
        let slot = unsafe { &mut *Arc::as_ptr(&node).cast_mut() };
        slot.write(Node::new(shape, name, heavy, Some(edge)));
        // SAFETY: written just above.
        unsafe { node.assume_init() }
    }

    /// A leaf node (a variable).
    pub(crate) fn leaf(shape: &[usize]) -> Node {
        Node::new(shape, "variable", false, None)
    }

    /// The node's edge.
    ///
    /// # Safety
    /// The calling thread owns the node in the current pass: it won the node's idle → pending
    /// CAS in `prepare` and the drain has not started (the walks of `prepare`, `Capture::mark`,
    /// `PassLeaves::collect`), or it took the node's pending counter to 0 and is firing it, and
    /// the node is not back to idle. No [`Node::edge_mut`] borrow is alive.
    pub(super) unsafe fn edge(&self) -> &Option<Edge> {
        // SAFETY: the caller owns the node (above), so nothing writes the edge meanwhile.
        unsafe { &*self.edge.get() }
    }

    /// The node's edge, to release it.
    ///
    /// # Safety
    /// As [`Node::edge`], and no other borrow of the edge is alive.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn edge_mut(&self) -> &mut Option<Edge> {
        // SAFETY: the caller owns the node and holds no other borrow of the edge (above).
        unsafe { &mut *self.edge.get() }
    }

    /// True for a variable's node.
    pub(crate) fn is_leaf(&self) -> bool {
        self.leaf
    }

    /// The name of the op that made this node ("variable" for leaves).
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }
}

impl Drop for Node {
    /// Drops the chain of ancestors iteratively: a node whose last owner goes away hands its
    /// parents to an explicit stack instead of recursing, so a 1,000,000-op chain drops
    /// without overflowing the stack.
    fn drop(&mut self) {
        super::hooks::forget(self.grad.get_mut().hooks().len());
        let Some(edge) = self.edge.get_mut().take() else { return };
        let mut stack: Vec<Arc<Node>> = edge.parents.into_iter().flatten().filter_map(Parent::into_interior).collect();
        drop(edge.record);
        while let Some(node) = stack.pop() {
            if let Some(mut inner) = Arc::into_inner(node) {
                if let Some(e) = inner.edge.get_mut().take() {
                    stack.extend(e.parents.into_iter().flatten().filter_map(Parent::into_interior));
                }
                // `inner` drops here with no edge left, so its own Drop does not recurse.
            }
        }
    }
}

/// The one funnel every differentiable op ends in: returns `value` as a constant when grad
/// mode is off or no operand has a node, and otherwise attaches a node holding the record
/// built by `record` (built lazily, so the inference path clones nothing).
pub(crate) fn attach<R: Backward + 'static>(value: Tensor, inputs: &[&Tensor], record: impl FnOnce() -> R) -> Tensor {
    attach_saving_output(value, inputs, |_| record())
}

/// [`attach`] for a record that keeps the op's own output: `record` is handed the value (and
/// still runs only when a node is made).
pub(crate) fn attach_saving_output<R: Backward + 'static>(
    value: Tensor,
    inputs: &[&Tensor],
    record: impl FnOnce(&Tensor) -> R,
) -> Tensor {
    if R::reads_values() {
        super::note_reading_op();
    }
    if !is_grad_enabled() || inputs.iter().all(|t| t.node.is_none()) {
        return value;
    }
    let record = record(&value);
    let (name, heavy) = (record.name(), record.estimated_work() >= ASYNC_WORK_THRESHOLD);
    let mut parents = SmallVec::new();
    for t in inputs {
        parents.push(t.node.as_ref().map(Parent::new));
    }
    let edge = Edge { parents, record: Box::new(record) };
    let mut out = value;
    out.node = Some(Node::new_arc(out.shape(), name, heavy, edge));
    out
}

#[cfg(test)]
mod tests {
    use super::Node;

    /// W8 keeps a million nodes alive between forward and backward: with its two `Arc`
    /// counts a node fits mimalloc's 160-byte size class (it took the 192-byte one).
    #[test]
    fn a_node_and_its_arc_counts_fit_in_160_bytes() {
        let size = std::mem::size_of::<Node>() + 2 * std::mem::size_of::<usize>();
        assert!(size <= 160, "Arc<Node> allocations are {size} bytes");
    }
}
