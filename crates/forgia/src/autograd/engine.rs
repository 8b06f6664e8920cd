//! The backward engine: validate seeds, count consumer edges in an iterative prepare walk,
//! then drain pending counters, firing each node exactly once, on one of the library's pool
//! threads (the calling thread when the pool adopted it) and — for heavy independent
//! branches — on the others. It never names an op.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use smallvec::SmallVec;

use super::capture::Capture;
use super::hooks::PassLeaves;
use super::mode::set_grad_enabled;
use super::node::{
    attach, Backward, GradSlot, Grads, Held, Node, Parent, VjpCtx, ACCUMULATED, DONE, IDLE, PENDING, RETAIN, RUNNING,
};
use super::reduce_to::{expandable, sum_to};
use crate::autograd::Tensor;
use crate::error::{fail, Error, ErrorKind, Result};
use crate::tensor::layout::same_shape;

/// How a backward pass runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct BackwardOptions {
    /// Keep records and saved tensors so the graph can be backpropagated again.
    pub retain_graph: bool,
    /// Run records with recording on, so the gradients are themselves differentiable
    /// (Hessian-vector products, gradient penalties). Implies keeping the graph.
    pub create_graph: bool,
    /// Run the whole pass on the calling thread.
    pub serial: bool,
    /// Fail with `AnomalyDetected`, naming the op, when a record produces a NaN or infinity.
    pub detect_anomaly: bool,
}

/// A record is shipped to another pool thread only when its estimated work reaches this many
/// multiply-adds (2^19); smaller ones run inline. Chosen by the sweep in `benches/engine.rs`
/// (sixteen branches joined by adds, the threshold lowered to 2^12 for the sweep; 2 cores,
/// 2026-12-01): at branch products of 2^17 multiply-adds the pool ties the serial pass (248 vs
/// 257 µs), from 2^19 on it wins by about a fifth (515 vs 634 µs; 1.17 vs 1.50 ms at 2^21;
/// 4.6 vs 5.9 ms at 2^23). See docs/BENCHMARKS.md.
pub(crate) const ASYNC_WORK_THRESHOLD: usize = 1 << 19;

// Relaxed: pass ids only need to be unique; nothing is published through this counter.
static NEXT_PASS: AtomicU64 = AtomicU64::new(1);

/// A node ready to fire, with its whole gradient when the contribution that readied it was the
/// only one (handed over directly instead of stored in the node's accumulator and taken out
/// again: the per-op path of a chain), `None` when it sits in the accumulator.
type Ready = (Arc<Node>, Option<Tensor>);

/// State shared by every task of one pass.
struct Pass {
    options: BackwardOptions,
    retain: bool,
    error: Mutex<Option<Error>>,
    failed: AtomicBool,
    /// The hooked leaves this pass reaches, with their own counts (empty without hooks, and in
    /// a capturing pass, which accumulates into no leaf).
    leaves: PassLeaves,
    /// The inputs of a capturing pass ([`super::grad`]): their gradients go to the pass's own
    /// slots, no other gradient is written, and only nodes leading to them run their records.
    capture: Option<Capture>,
    /// The pool's size.
    threads: usize,
}

/// How a pass drains its ready nodes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Drain {
    /// Heavy independent nodes go to the pool (unless `options.serial`: then everything,
    /// kernels included, runs on one thread).
    Public,
    /// On the calling thread, with kernels free to split their work: the nested pass of a
    /// checkpoint, whose gradients must be bitwise those of the plain path.
    Inline,
}

/// Runs one backward pass from `outputs` with optional explicit `seeds` (same length).
pub(crate) fn run(outputs: &[&Tensor], seeds: &[Option<&Tensor>], options: BackwardOptions) -> Result<()> {
    run_with(outputs, seeds, options, Drain::Public)
}

/// [`run`] with an explicit drain mode.
pub(super) fn run_with(
    outputs: &[&Tensor],
    seeds: &[Option<&Tensor>],
    options: BackwardOptions,
    mode: Drain,
) -> Result<()> {
    run_pass(outputs, seeds, options, mode, None).map(drop)
}

/// A capturing pass (see [`super::grad`]): returns `capture` with the inputs' gradients.
pub(super) fn run_capturing(
    outputs: &[&Tensor],
    seeds: &[Option<&Tensor>],
    options: BackwardOptions,
    capture: Capture,
) -> Result<Capture> {
    Ok(run_pass(outputs, seeds, options, Drain::Public, Some(capture))?.expect("a capturing pass returns its capture"))
}

/// One pass: validate, prepare, seed, drain, finish (README: "A pass, step by step").
fn run_pass(
    outputs: &[&Tensor],
    seeds: &[Option<&Tensor>],
    options: BackwardOptions,
    mode: Drain,
    mut capture: Option<Capture>,
) -> Result<Option<Capture>> {
    if outputs.len() != seeds.len() {
        return fail(ErrorKind::InvalidArgument {
            op: "backward_many",
            arg: "seeds",
            reason: format!("{} outputs but {} seeds", outputs.len(), seeds.len()),
        });
    }
    // 1. Validate everything before any counter is installed (failure atomicity).
    let mut roots: Vec<(Arc<Node>, Option<Tensor>)> = Vec::with_capacity(outputs.len());
    for (out, seed) in outputs.iter().zip(seeds) {
        let Some(node) = out.node.clone() else { return fail(ErrorKind::NoGradientGraph) };
        // Acquire: pairs with the Release store that marked a completed pass.
        if node.flags.load(Ordering::Acquire) & DONE != 0 {
            return fail(ErrorKind::BackwardAlreadyRun);
        }
        let seed = match seed {
            Some(s) if s.shape() != out.shape() => {
                return fail(ErrorKind::ShapeMismatch {
                    op: "backward",
                    lhs: out.shape().to_vec(),
                    rhs: s.shape().to_vec(),
                })
            }
            Some(s) => Some(if options.create_graph { (*s).clone() } else { s.detach() }),
            None if !node.leaf && node.grad.lock().acc.is_some() => None,
            None if out.numel() == 1 => Some(Tensor::ones(out.shape())?),
            None => return fail(ErrorKind::MissingOutputGradient { shape: out.shape().to_vec() }),
        };
        roots.push((node, seed));
    }

    // 2. Count consumer edges.
    let pass_id = NEXT_PASS.fetch_add(1, Ordering::Relaxed);
    let mut visited: Vec<Arc<Node>> = Vec::new();
    if let Err(e) = prepare(&roots, pass_id, &mut visited) {
        rollback(&visited, pass_id);
        return Err(e);
    }

    // 3. Deliver the seeds; each counts as one pending contribution of its output.
    if let Some(capture) = capture.as_mut() {
        capture.mark(roots.iter().map(|(n, _)| n));
    }
    let leaves = match capture {
        None => PassLeaves::collect(roots.iter().map(|(n, _)| n), &visited),
        Some(_) => PassLeaves::default(),
    };
    let pass = Pass {
        options,
        retain: options.retain_graph || options.create_graph,
        error: Mutex::new(None),
        failed: AtomicBool::new(false),
        leaves,
        capture,
        threads: crate::parallel::num_threads(),
    };
    let mut ready: Vec<Ready> = Vec::new();
    for (node, seed) in &roots {
        if let Some(s) = seed {
            let delivered = match &pass.capture {
                Some(c) if node.leaf => c.deliver(node, s, options.create_graph),
                _ => accumulate(node, s.clone(), options.create_graph),
            };
            if let Err(e) = delivered {
                rollback(&visited, pass_id);
                return Err(e);
            }
        }
        if node.leaf && !pass.leaves.is_empty() {
            if let Err(e) = pass.leaves.arrive(node, seed.is_some()) {
                rollback(&visited, pass_id);
                return Err(e);
            }
        }
        // AcqRel: see `fire`.
        if !node.leaf && node.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            ready.push((node.clone(), None));
        }
    }

    // 4. Drain.
    let use_pool = mode == Drain::Public
        && !options.serial
        && pass.threads > 1
        && visited.iter().filter(|n| n.heavy).nth(1).is_some();
    if use_pool {
        let pass = &pass;
        crate::parallel::install(|| {
            rayon::in_place_scope(|scope| {
                for start in ready {
                    drain(start, pass, Some(scope));
                }
            })
        });
    } else if mode == Drain::Public && options.serial {
        // The whole pass, kernels included, on the pool's one-thread sibling (DESIGN rule 9).
        let pass = &pass;
        crate::parallel::serially(|| {
            for start in ready {
                drain(start, pass, None);
            }
        });
    } else {
        for start in ready {
            drain(start, &pass, None);
        }
    }

    if let Some(e) = pass.error.into_inner() {
        rollback(&visited, pass_id);
        return Err(e);
    }
    if !pass.retain {
        for (node, _) in &roots {
            if !node.leaf {
                // Release: a later `run` on another thread that sees `done` sees a finished pass.
                node.flags.fetch_or(DONE, Ordering::Release);
            }
        }
    }
    Ok(pass.capture)
}

/// The prepare walk: an explicit stack, one pending contribution per consumer edge (and per
/// seed), and a visit of a node's parents only on its idle → pending transition.
fn prepare(roots: &[(Arc<Node>, Option<Tensor>)], pass_id: u64, visited: &mut Vec<Arc<Node>>) -> Result<()> {
    let mut stack: Vec<Arc<Node>> = roots.iter().filter(|(n, _)| !n.leaf).map(|(n, _)| n.clone()).collect();
    while let Some(node) = stack.pop() {
        // Acquire on success: we take the node over from whoever left it idle.
        match node.state.compare_exchange(IDLE, PENDING, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => {
                // Relaxed: the counter and marker are only read by this thread until the drain
                // starts, and spawning a task (or the AcqRel drain) publishes them.
                node.pass.store(pass_id, Ordering::Relaxed);
                node.pending.store(1, Ordering::Relaxed);
                // The list owns the node from here (the rollback finds it there).
                visited.push(node);
                let node = visited.last().expect("pushed above");
                // SAFETY: this pass won the node's idle → pending CAS just above and the drain
                // has not started: this thread owns the node.
                let Some(edge) = (unsafe { node.edge() }) else {
                    return fail(ErrorKind::GraphReleased { op: node.name });
                };
                for p in edge.parents.iter().flatten().filter_map(Parent::interior) {
                    stack.push(p.clone());
                }
            }
            Err(_) => {
                if node.pass.load(Ordering::Relaxed) != pass_id {
                    return fail(ErrorKind::ConcurrentBackward);
                }
                node.pending.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}

/// Returns every node a failed pass still owns to idle, with no counter stranded and the
/// partial sums it produced freed. Nodes the pass already fired are idle and may since have
/// been claimed by another pass over the same retained graph: those are left alone (their
/// `pass` marker is not ours), or that pass would run with zeroed counters.
fn rollback(visited: &[Arc<Node>], pass_id: u64) {
    for node in visited {
        // Relaxed: a node still marked with our id is pending or running for this pass, so no
        // other pass can claim it (it is not idle); every task of this pass has been joined.
        // A node we fired reads 0 or another pass's id, either way not ours.
        if node.pass.load(Ordering::Relaxed) != pass_id {
            continue;
        }
        take_accumulated(node, &mut node.grad.lock());
        node.pending.store(0, Ordering::Relaxed);
        node.pass.store(0, Ordering::Relaxed);
        // Release: the next pass's Acquire CAS sees the reset counter and slots.
        node.state.store(IDLE, Ordering::Release);
    }
}

/// Fires ready nodes depth-first from `start`. With a scope, a ready heavy node (work at least
/// [`ASYNC_WORK_THRESHOLD`]) goes to the pool whenever this thread has other ready work: the
/// light nodes on its own stack as well as the other heavy nodes of the same firing. The
/// thread keeps one heavy node only when it has nothing else to do, so parallelism does not
/// depend on how the loss was joined (`concat`, `stack`, a chain of adds). A spawned node is
/// ready (its counter drained), so no task ever waits for a gradient.
fn drain<'s>(start: Ready, pass: &'s Pass, scope: Option<&rayon::Scope<'s>>) {
    let mut local = vec![start];
    while let Some((node, handed)) = local.pop() {
        // Acquire: pairs with the Release store of the task that failed.
        if pass.failed.load(Ordering::Acquire) {
            return;
        }
        let before = local.len();
        // `fire` pushes the operands it readied onto `local`, in operand order.
        if let Err(e) = fire(&node, handed, pass, scope.is_some(), &mut local) {
            pass.error.lock().get_or_insert(e);
            pass.failed.store(true, Ordering::Release);
            return;
        }
        let Some(scope) = scope else { continue };
        if !local[before..].iter().any(|(n, _)| n.heavy) {
            continue;
        }
        let mut heavy: SmallVec<[Ready; 4]> = SmallVec::new();
        let fired: SmallVec<[Ready; 4]> = local.drain(before..).collect();
        for next in fired {
            if next.0.heavy {
                heavy.push(next);
            } else {
                local.push(next);
            }
        }
        let keep = if local.is_empty() { heavy.pop() } else { None };
        for next in heavy {
            scope.spawn(move |s| drain(next, pass, Some(s)));
        }
        local.extend(keep);
    }
}

/// Runs one node's record with its complete gradient (`handed`, or the accumulator's), delivers
/// the operand gradients and pushes the operands that became ready onto `ready`.
/// `on_pool`: the record runs with its kernels free to split over the pool, whatever the
/// thread was doing when it took this drain (a thread waiting inside a kernel's own parallel
/// loop, which keeps its kernels on the thread, may run a spawned drain in that wait); off the
/// pool the setting is left alone.
fn fire(node: &Arc<Node>, handed: Option<Tensor>, pass: &Pass, on_pool: bool, ready: &mut Vec<Ready>) -> Result<()> {
    let options = &pass.options;
    // Relaxed: only this thread touches the node while it runs.
    node.state.store(RUNNING, Ordering::Relaxed);
    let capture = pass.capture.as_ref();
    // A capturing pass keeps no gradient on the node (it writes no `.grad` anywhere).
    let retain = capture.is_none() && node.flags.load(Ordering::Relaxed) & RETAIN != 0;
    let gy = if handed.is_some() && !retain {
        handed
    } else {
        let mut slot = node.grad.lock();
        let g = handed.or_else(|| take_accumulated(node, &mut slot));
        if retain {
            if let Some(g) = &g {
                let extra = slot.extra_mut();
                let kept = match extra.retained.take() {
                    None => g.clone(),
                    Some(r) => sum(r, g, options.create_graph).map_err(|b| b.1)?,
                };
                extra.retained = Some(kept);
            }
        }
        g
    };
    if let (Some(c), Some(g)) = (capture, &gy) {
        c.deliver(node, g, options.create_graph)?; // an op result given as an input
    }
    // SAFETY: this thread took the node's counter to 0 (or seeded it) and fires it; it stays
    // the owner until the Release store of `IDLE` below, after the last use of the edge.
    let edge = unsafe { node.edge() }.as_ref().expect("a prepared node keeps its edge until it fires");
    // The record reads the operand links in place (`VjpCtx::parents`); a leaf dropped meanwhile
    // gets no gradient (none can read it).
    let n = edge.parents.len();
    // In a capturing pass, only the operands that lead to an input get a gradient.
    let wanted: Option<SmallVec<[bool; 2]>> = capture
        .map(|c| edge.parents.iter().map(|p| p.as_ref().and_then(Parent::get).is_some_and(|p| c.needed(&p))).collect());
    let cx = VjpCtx { node, parents: &edge.parents, wanted: wanted.as_deref(), create_graph: options.create_graph };
    // Filled in place by the record (an empty list when it does not run): the list is a few
    // hundred bytes, so it is written once instead of moved through every return.
    let mut grads = Grads::new();
    if let Some(gy) = gy.as_ref().filter(|_| (0..n).any(|i| cx.needs_grad(i))) {
        let _mode = set_grad_enabled(options.create_graph);
        if on_pool {
            crate::parallel::with_kernels_on_this_thread(false, || run_record(&*edge.record, &cx, gy, &mut grads))?
        } else {
            run_record(&*edge.record, &cx, gy, &mut grads)?
        }
        check(&*edge.record, &edge.parents, &mut grads, options.detect_anomaly)?;
    }
    let wanted = wanted.as_deref();
    // Without `retain_graph` the edge is released here: its operand links move onto the ready
    // list (no reference-count traffic), and its record with the saved tensors is freed below.
    let released = if pass.retain {
        for (i, p) in edge.parents.iter().enumerate() {
            if let Some(parent) = p.as_ref().and_then(Parent::get) {
                deliver(i, parent, &mut grads, wanted, pass, ready)?;
            }
        }
        None
    } else {
        // SAFETY: as above; `edge` and `cx` (its only borrows) are not used after this point.
        let mut released = unsafe { node.edge_mut() }.take().expect("a prepared node keeps its edge until it fires");
        for i in 0..released.parents.len() {
            if let Some(parent) = released.parents[i].take().and_then(Parent::into_held) {
                deliver(i, parent, &mut grads, wanted, pass, ready)?;
            }
        }
        Some(released)
    };
    drop(released);
    node.pass.store(0, Ordering::Relaxed);
    // Release: a later pass's Acquire CAS on the state sees everything this firing did.
    node.state.store(IDLE, Ordering::Release);
    Ok(())
}

/// Delivers operand `i`'s gradient from a firing (taken out of `grads`; none when the record
/// did not run or computed none, or the operand is not wanted by a capturing pass), counts the
/// delivery, and pushes the operand onto `ready` when this was its last pending contribution.
fn deliver(
    i: usize,
    parent: Held<'_>,
    grads: &mut Grads,
    wanted: Option<&[bool]>,
    pass: &Pass,
    ready: &mut Vec<Ready>,
) -> Result<()> {
    let create_graph = pass.options.create_graph;
    let delivered = grads.get_mut(i).and_then(Option::take).filter(|_| wanted.is_none_or(|w| w[i]));
    let got = delivered.is_some();
    let mut handed = None;
    match (&pass.capture, delivered) {
        (Some(c), Some(g)) if parent.leaf => c.deliver(&parent, &g, create_graph)?,
        (_, Some(g)) if !parent.leaf => handed = hand_or_accumulate(&parent, g, create_graph)?,
        (_, Some(g)) => accumulate(&parent, g, create_graph)?,
        (_, None) => {}
    }
    if parent.leaf && !pass.leaves.is_empty() {
        pass.leaves.arrive(&parent, got)?;
    }
    // AcqRel: the thread that takes the counter from 1 to 0 fires the parent, and must see
    // every contribution the other threads delivered before their decrements.
    if !parent.leaf && parent.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        ready.push((parent.into_owned(), handed));
    } else {
        debug_assert!(handed.is_none(), "a gradient is handed over only with the last contribution");
    }
    Ok(())
}

/// Runs a record, turning a panic in it (user code: a custom op's backward, a checkpointed
/// block) into `BackwardPanicked`, so the pass fails and rolls back like any other error
/// instead of unwinding past the rollback with nodes left pending or running.
///
/// `AssertUnwindSafe`: after a panic the engine touches only what the rollback resets (the
/// node's counters, state and partial sum); the record itself is left as the panic left it,
/// which is the user's state to fix, exactly as with a record that returns an error.
/// The gradients go to `out` (written once, not moved through the unwinding boundary).
fn run_record(record: &dyn Backward, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
    catch_unwind(AssertUnwindSafe(|| record.backward(cx, gy, out))).unwrap_or_else(|payload| {
        let message = match payload.downcast::<String>() {
            Ok(s) => *s,
            Err(payload) => match payload.downcast::<&'static str>() {
                Ok(s) => (*s).to_string(),
                Err(_) => "a panic with a non-string payload".to_string(),
            },
        };
        fail(ErrorKind::BackwardPanicked { op: record.name(), message })
    })
}

/// Validates a record's output before any of it is delivered, and sums each gradient that
/// arrives in a broadcast of its operand's shape back to that shape (the one place broadcast
/// gradients are reduced; records never do it themselves).
fn check(record: &dyn Backward, parents: &[Option<Parent>], grads: &mut [Option<Tensor>], anomaly: bool) -> Result<()> {
    if grads.len() != parents.len() {
        let operand = grads.len().min(parents.len());
        return fail(ErrorKind::MissingBackwardGradient { op: record.name(), operand });
    }
    for (i, (p, g)) in parents.iter().zip(grads.iter_mut()).enumerate() {
        // A dropped leaf's gradient is never delivered: nothing to check.
        let (Some(p), Some(g)) = (p.as_ref().and_then(Parent::get), g) else { continue };
        if same_shape(g.shape(), &p.shape) {
            // The common case: nothing to sum or to report.
        } else if expandable(&p.shape, g.shape()) {
            *g = sum_to(g, &p.shape)?;
        } else {
            return fail(ErrorKind::GradientShapeMismatch {
                op: record.name(),
                operand: i,
                expected: p.shape.to_vec(),
                got: g.shape().to_vec(),
            });
        }
        if anomaly && g.with_data(|d| d.iter().any(|v| !v.is_finite())) {
            return fail(ErrorKind::AnomalyDetected { op: record.name(), operand: i });
        }
    }
    Ok(())
}

/// Delivers a contribution to an interior node: hands it back (`Some`) when it is the node's
/// whole gradient — the last contribution the pass counted, with nothing accumulated before it
/// — so the caller fires the node with it directly; else adds it to the accumulator (`None`).
///
/// # Errors
/// As [`accumulate`].
fn hand_or_accumulate(node: &Node, g: Tensor, differentiable: bool) -> Result<Option<Tensor>> {
    // Acquire: pairs with the AcqRel decrements of the node's other contributions (the last
    // of them heads a release sequence of decrements), so when this one is the last
    // outstanding (1), their accumulations and the `ACCUMULATED` flag they set are visible
    // below, read without the lock. Nothing can add to the node after it: every other
    // contribution has been delivered.
    if node.pending.load(Ordering::Acquire) == 1 && node.flags.load(Ordering::Relaxed) & ACCUMULATED == 0 {
        return Ok(Some(g));
    }
    accumulate(node, g, differentiable)?;
    Ok(None)
}

/// Adds a contribution to a node's accumulator under its lock.
///
/// # Errors
/// `OutOfMemory` when the sum needs a fresh buffer that cannot be allocated (the accumulator
/// is then left as it was).
pub(super) fn accumulate(node: &Node, g: Tensor, differentiable: bool) -> Result<()> {
    let mut slot = node.grad.lock();
    if !node.leaf && slot.acc.is_none() {
        // Relaxed: published by this contribution's AcqRel decrement (`hand_or_accumulate`).
        node.flags.fetch_or(ACCUMULATED, Ordering::Relaxed);
    }
    slot.acc = Some(match slot.acc.take() {
        None => Box::new(g),
        Some(acc) => Box::new(sum(*acc, &g, differentiable).map_err(|b| {
            let (acc, e) = *b;
            slot.acc = Some(Box::new(acc));
            e
        })?),
    });
    Ok(())
}

/// Takes an op result's accumulated sum out of its slot (`slot` is the node's locked
/// `grad`), clearing [`ACCUMULATED`] with it.
fn take_accumulated(node: &Node, slot: &mut GradSlot) -> Option<Tensor> {
    let acc = slot.acc.take()?;
    // Relaxed: the node is owned by this thread (firing, or rolled back after the pass).
    node.flags.fetch_and(!ACCUMULATED, Ordering::Relaxed);
    Some(*acc)
}

/// `acc + g` for gradient accumulation: in place when `acc` owns its buffer outright, else a
/// fresh buffer (a buffer shared with anyone — a user's snapshot, a view — is never mutated).
/// In a `create_graph` pass the sum is itself recorded ([`GradSum`]), so the accumulated
/// gradient stays differentiable. Both operands have the node's shape (checked when each
/// contribution arrived); their axis names play no part.
///
/// # Errors
/// The error of a failed allocation, with `acc` handed back unchanged.
pub(super) fn sum(
    mut acc: Tensor,
    g: &Tensor,
    differentiable: bool,
) -> std::result::Result<Tensor, Box<(Tensor, Error)>> {
    let recorded = differentiable && (acc.node.is_some() || g.node.is_some());
    if !recorded {
        if let Some(dst) = acc.exclusive_mut() {
            if let Err(e) = g.try_with_data("backward", |src| {
                crate::kernels::pointwise::add_assign(dst, src);
                Ok(())
            }) {
                return Err(Box::new((acc, e)));
            }
            return Ok(acc);
        }
    }
    let data = crate::tensor::buffer("backward", acc.layout.numel()).map(|mut data| {
        let (a, b) = (acc.storage(), g.storage());
        crate::kernels::pointwise::zip_broadcast(
            a.as_slice(),
            &acc.layout,
            b.as_slice(),
            &g.layout,
            &mut data,
            |a, b| a + b,
        );
        data
    });
    let value = match data {
        Ok(data) => Tensor::from_parts(data, acc.shape()),
        Err(e) => return Err(Box::new((acc, e))),
    };
    if !recorded {
        return Ok(value);
    }
    let _mode = set_grad_enabled(true);
    Ok(attach(value, &[&acc, g], || GradSum))
}

/// The record of a gradient sum in a `create_graph` pass: `y = a + b`, backward `ga = gb = gy`.
struct GradSum;

impl Backward for GradSum {
    fn name(&self) -> &'static str {
        "grad_accumulate"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.extend((0..2).map(|i| cx.needs_grad(i).then(|| gy.clone())));
        Ok(())
    }
}
