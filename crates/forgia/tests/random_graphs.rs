//! Random DAGs checked against finite differences: a graph is a plain list of op descriptors
//! over a few variables and constants, so proptest shrinks a failure to a minimal graph.
//!
//! Each descriptor names its operands by index (modulo the nodes built so far), so every op
//! can reuse any earlier node: fan-out, diamonds and `x * x` come for free. Ops that would be
//! invalid for the shapes they meet adapt in a fixed, data-independent way (a binary op whose
//! operands do not broadcast uses the mean of the second; a matmul without a matching right
//! operand multiplies by its own transpose). Values stay O(1): every node carries a static
//! magnitude bound and is squashed with `tanh` once the bound passes [`SQUASH_ABOVE`]. `relu`
//! gets a shift, chosen once from the initial values, that keeps every input away from the
//! kink by [`KINK_MARGIN`], so finite differences never straddle it.

use std::cell::{Cell, RefCell};

use forgia::{gradcheck, GradcheckOptions, Result, Rng, Tensor};
use proptest::prelude::*;

/// Per-op squash decisions: a shift and which elements sit near a kink.
type Plan = Vec<Option<(f32, Vec<bool>)>>;

/// Squash a node with `tanh` once its magnitude bound passes this.
const SQUASH_ABOVE: f32 = 3.0;
/// Skip (reuse the operand) when an op result would exceed this many elements.
const MAX_NUMEL: usize = 64;
/// Minimum distance of a `relu` input from 0.
const KINK_MARGIN: f32 = 0.05;

/// A leaf: a variable or a constant of a small shape, filled from `seed`.
#[derive(Clone, Debug)]
struct Leaf {
    shape: Vec<usize>,
    variable: bool,
    seed: u64,
}

/// One op of the graph; `a`, `b` pick operands modulo the nodes built so far.
#[derive(Clone, Debug)]
enum Op {
    Tanh(usize),
    Relu(usize),
    Scale(usize, i8),
    AddScalar(usize, i8),
    Add(usize, usize),
    Sub(usize, usize),
    Mul(usize, usize),
    /// `a / (1 + b²)`: a division whose denominator stays away from 0.
    Div(usize, usize),
    Matmul(usize, usize),
    Transpose(usize, u8, u8),
    Permute(usize, u8),
    Slice(usize, u8, u8, u8),
    BroadcastTo(usize, u8),
    Reshape(usize, u8),
    Unsqueeze(usize, u8),
    Squeeze(usize, u8),
    Sum(usize, u8, bool),
    Mean(usize, u8, bool),
    SumAll(usize),
    MeanAll(usize),
}

#[derive(Clone, Debug)]
struct Graph {
    leaves: Vec<Leaf>,
    ops: Vec<Op>,
}

impl Graph {
    fn initial_values(&self) -> Vec<Tensor> {
        self.leaves
            .iter()
            .map(|l| {
                let mut rng = Rng::new(l.seed);
                let t = Tensor::rand(&l.shape, -1.2, 1.2, &mut rng).unwrap();
                if l.variable {
                    t.into_variable()
                } else {
                    t
                }
            })
            .collect()
    }
}

/// A node while the graph is evaluated: its value and a static bound on `|value|`.
struct Built {
    t: Tensor,
    bound: f32,
}

/// Evaluates `graph` on `leaves` (in order). `shifts` holds one `relu` shift per op: `None`
/// entries are chosen from the current values on the first evaluation and then frozen, so
/// every later evaluation (the finite differences) computes the same function.
fn evaluate(graph: &Graph, leaves: &[Tensor], kinks: &Kinks) -> Result<Tensor> {
    let mut nodes: Vec<Built> = leaves.iter().map(|t| Built { t: t.clone(), bound: 1.2 }).collect();
    let mut used = vec![false; leaves.len() + graph.ops.len()];
    for (i, op) in graph.ops.iter().enumerate() {
        let n = nodes.len();
        let (a, b) = operands(op);
        used[a % n] = true;
        if let Some(b) = b {
            used[b % n] = true;
        }
        let (t, bound) = apply(op, &nodes, i, kinks)?;
        let (t, bound) = if bound > SQUASH_ABOVE { (t.tanh(), 1.0) } else { (t, bound) };
        nodes.push(Built { t, bound });
    }
    // The output stacks the sums of every unused op result (and the last node) into one vector,
    // exactly: one-hot columns times a scalar, added over disjoint supports.
    let sinks: Vec<&Tensor> = nodes
        .iter()
        .enumerate()
        .skip(leaves.len())
        .filter(|&(i, _)| !used[i] || i + 1 == nodes.len())
        .map(|(_, b)| &b.t)
        .collect();
    stack_sums(&sinks)
}

fn stack_sums(sinks: &[&Tensor]) -> Result<Tensor> {
    let k = sinks.len().max(1);
    let mut out = Tensor::zeros(&[k]).unwrap();
    for (j, s) in sinks.iter().enumerate() {
        let mut column = vec![0.0; k];
        column[j] = 1.0;
        let column = Tensor::from_vec(column, &[k, 1])?;
        out = out.add(&column.matmul(&s.sum_all().reshape(&[1])?)?)?;
    }
    Ok(out)
}

fn operands(op: &Op) -> (usize, Option<usize>) {
    match *op {
        Op::Add(a, b) | Op::Sub(a, b) | Op::Mul(a, b) | Op::Div(a, b) | Op::Matmul(a, b) => (a, Some(b)),
        Op::Tanh(a) | Op::Relu(a) | Op::SumAll(a) | Op::MeanAll(a) => (a, None),
        Op::Scale(a, _) | Op::AddScalar(a, _) | Op::Permute(a, _) | Op::BroadcastTo(a, _) => (a, None),
        Op::Reshape(a, _) | Op::Unsqueeze(a, _) | Op::Squeeze(a, _) => (a, None),
        Op::Transpose(a, ..) | Op::Slice(a, ..) | Op::Sum(a, ..) | Op::Mean(a, ..) => (a, None),
    }
}

/// `x op y`, or `x op mean(y)` when the shapes do not broadcast (decided by shapes only).
fn binary(x: &Tensor, y: &Tensor, f: impl Fn(&Tensor, &Tensor) -> Result<Tensor>) -> Result<Tensor> {
    f(x, y).or_else(|_| f(x, &y.mean_all()?))
}

/// Applies one op; returns the result and its magnitude bound.
fn apply(op: &Op, nodes: &[Built], i: usize, kinks: &Kinks) -> Result<(Tensor, f32)> {
    let n = nodes.len();
    let (a, b) = operands(op);
    let (x, bx) = (&nodes[a % n].t, nodes[a % n].bound);
    let (y, by) = b.map(|b| (&nodes[b % n].t, nodes[b % n].bound)).unwrap_or((x, bx));
    let rank = x.rank();
    let same = Ok((x.clone(), bx));
    let r = match *op {
        Op::Tanh(_) => (x.tanh(), 1.0),
        Op::Relu(_) => relu_shifted(x, bx, i, kinks)?,
        Op::Scale(_, s) => (x.scale(s as f32 / 64.0), bx * (s as f32 / 64.0).abs()),
        Op::AddScalar(_, c) => (x.add_scalar(c as f32 / 64.0), bx + (c as f32 / 64.0).abs()),
        Op::Add(..) => (binary(x, y, |p, q| p.add(q))?, bx + by),
        Op::Sub(..) => (binary(x, y, |p, q| p.sub(q))?, bx + by),
        Op::Mul(..) => (binary(x, y, |p, q| p.mul(q))?, bx * by),
        Op::Div(..) => (binary(x, y, |p, q| p.div(&q.mul(q)?.add_scalar(1.0)))?, bx),
        Op::Matmul(..) => return matmul(x, bx, y, by),
        Op::Transpose(_, p, q) if rank >= 2 => (x.transpose(p as usize % rank, q as usize % rank)?, bx),
        Op::Permute(_, p) if rank >= 2 => (x.permute(&rotation(rank, p as usize))?, bx),
        Op::Slice(_, axis, start, step) if rank >= 1 => {
            let ax = axis as usize % rank;
            let start = (start as usize % x.shape()[ax]) as isize;
            (x.slice(ax, start, isize::MAX, 1 + step as usize % 3)?, bx)
        }
        Op::BroadcastTo(_, k) => return broadcast(x, bx, k).map_or(same, Ok),
        Op::Reshape(_, k) => (x.reshape(&refold(x.shape(), k))?, bx),
        Op::Unsqueeze(_, k) => (x.unsqueeze((k as usize % (rank + 1)) as isize)?, bx),
        Op::Squeeze(_, k) => match x.shape().iter().rposition(|&d| d == 1) {
            Some(axis) if k % 2 == 0 => (x.squeeze(axis)?, bx),
            _ => return same,
        },
        Op::Sum(_, axis, keep) if rank >= 1 => {
            let ax = axis as usize % rank;
            (x.sum(ax, keep)?, bx * x.shape()[ax] as f32)
        }
        Op::Mean(_, axis, keep) if rank >= 1 => (x.mean(axis as usize % rank, keep)?, bx),
        Op::SumAll(_) => (x.sum_all(), bx * x.numel() as f32),
        Op::MeanAll(_) => (x.mean_all()?, bx),
        // A view or reduction that needs more axes than `x` has: reuse `x` (no new node).
        _ => return same,
    };
    Ok(r)
}

/// The `relu` shifts, frozen at the first evaluation, and whether a later (perturbed)
/// evaluation pushed some `relu` input across its kink anyway.
struct Kinks {
    /// Per op: the shift and the sign pattern of the shifted input at the first evaluation.
    plan: RefCell<Plan>,
    crossed: Cell<bool>,
}

impl Kinks {
    fn new(ops: usize) -> Kinks {
        Kinks { plan: RefCell::new(vec![None; ops]), crossed: Cell::new(false) }
    }
}

/// `relu(x + shift)` with a shift frozen at the first evaluation so no input is near 0.
fn relu_shifted(x: &Tensor, bx: f32, i: usize, kinks: &Kinks) -> Result<(Tensor, f32)> {
    let v = x.to_vec();
    let mut plan = kinks.plan.borrow_mut();
    let (shift, signs) = plan[i].get_or_insert_with(|| {
        let clear = |s: f32| v.iter().all(|&e| (e + s).abs() >= KINK_MARGIN);
        // Candidates 0, -0.13, 0.13, -0.26, ...: irregular steps so one collision does not repeat.
        let shift = (0..40)
            .map(|k| if k % 2 == 0 { 0.13 * (k / 2) as f32 } else { -0.13 * (k / 2 + 1) as f32 })
            .find(|&s| clear(s))
            .unwrap_or(f32::NAN);
        (shift, v.iter().map(|&e| e + shift > 0.0).collect())
    });
    if shift.is_nan() {
        return Ok((x.tanh(), 1.0)); // no clear shift: a smooth op instead
    }
    if v.iter().zip(signs.iter()).any(|(&e, &s)| (e + *shift > 0.0) != s) {
        kinks.crossed.set(true);
    }
    Ok((x.add_scalar(*shift).relu(), bx + shift.abs()))
}

fn matmul(x: &Tensor, bx: f32, y: &Tensor, by: f32) -> Result<(Tensor, f32)> {
    let x = if x.rank() == 0 { x.unsqueeze(0)? } else { x.clone() };
    let k = x.shape()[x.rank() - 1];
    if y.rank() >= 1 {
        if let Ok(t) = x.matmul(y) {
            if t.numel() <= MAX_NUMEL {
                return Ok((t, k as f32 * bx * by));
            }
        }
    }
    // Without a matching right operand: x · xᵀ (x twice, once through a transposed view).
    let xt = if x.rank() >= 2 { x.transpose(-1, -2)? } else { x.clone() };
    let t = x.matmul(&xt)?;
    Ok((t, k as f32 * bx * bx))
}

/// Prepends an axis of size 1..=3 and stretches the first size-1 axis, within [`MAX_NUMEL`].
fn broadcast(x: &Tensor, bx: f32, k: u8) -> Option<(Tensor, f32)> {
    let mut shape = x.shape().to_vec();
    if let Some(p) = shape.iter().position(|&d| d == 1) {
        shape[p] = 2 + k as usize % 2;
    }
    if !k.is_multiple_of(3) || shape == x.shape() {
        shape.insert(0, 1 + k as usize % 3);
    }
    if shape.iter().product::<usize>() > MAX_NUMEL {
        return None;
    }
    x.broadcast_to(&shape).ok().map(|t| (t, bx))
}

/// Another shape with the same elements: flat, split off a divisor, or with a unit axis.
fn refold(shape: &[usize], k: u8) -> Vec<usize> {
    let n: usize = shape.iter().product();
    match k % 3 {
        0 => vec![n],
        1 => match (2..=n).find(|&d| n.is_multiple_of(d) && d % 2 == (k as usize / 3) % 2) {
            Some(d) => vec![n / d, d],
            None => vec![1, n],
        },
        _ => {
            let mut s = shape.to_vec();
            s.push(1);
            s
        }
    }
}

/// The axes rotated by `p` (a permutation that is not a single swap for rank 3).
fn rotation(rank: usize, p: usize) -> Vec<usize> {
    (0..rank).map(|i| (i + 1 + p % (rank - 1)) % rank).collect()
}

fn leaf(variable: impl Strategy<Value = bool>) -> impl Strategy<Value = Leaf> {
    (prop::collection::vec(1usize..=3, 0..=3), variable, any::<u64>()).prop_map(|(shape, variable, seed)| Leaf {
        shape,
        variable,
        seed,
    })
}

fn op() -> impl Strategy<Value = Op> {
    let i = || 0usize..1000;
    prop_oneof![
        3 => i().prop_map(Op::Tanh),
        1 => i().prop_map(Op::Relu),
        1 => (i(), any::<i8>()).prop_map(|(a, s)| Op::Scale(a, s)),
        1 => (i(), any::<i8>()).prop_map(|(a, c)| Op::AddScalar(a, c)),
        3 => (i(), i()).prop_map(|(a, b)| Op::Add(a, b)),
        2 => (i(), i()).prop_map(|(a, b)| Op::Sub(a, b)),
        3 => (i(), i()).prop_map(|(a, b)| Op::Mul(a, b)),
        1 => (i(), i()).prop_map(|(a, b)| Op::Div(a, b)),
        2 => (i(), i()).prop_map(|(a, b)| Op::Matmul(a, b)),
        1 => (i(), any::<u8>(), any::<u8>()).prop_map(|(a, p, q)| Op::Transpose(a, p, q)),
        1 => (i(), any::<u8>()).prop_map(|(a, p)| Op::Permute(a, p)),
        2 => (i(), any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(a, x, s, t)| Op::Slice(a, x, s, t)),
        1 => (i(), any::<u8>()).prop_map(|(a, k)| Op::BroadcastTo(a, k)),
        1 => (i(), any::<u8>()).prop_map(|(a, k)| Op::Reshape(a, k)),
        1 => (i(), any::<u8>()).prop_map(|(a, k)| Op::Unsqueeze(a, k)),
        1 => (i(), any::<u8>()).prop_map(|(a, k)| Op::Squeeze(a, k)),
        1 => (i(), any::<u8>(), any::<bool>()).prop_map(|(a, x, k)| Op::Sum(a, x, k)),
        1 => (i(), any::<u8>(), any::<bool>()).prop_map(|(a, x, k)| Op::Mean(a, x, k)),
        1 => i().prop_map(Op::SumAll),
        1 => i().prop_map(Op::MeanAll),
    ]
}

/// A graph of 1..=2 variables first (so index 0 is always a variable), then a few more
/// leaves, then `1..=max_ops` ops.
fn graph(max_ops: usize) -> impl Strategy<Value = Graph> {
    (
        prop::collection::vec(leaf(Just(true)), 1..=2),
        prop::collection::vec(leaf(any::<bool>()), 0..=3),
        prop::collection::vec(op(), 1..=max_ops),
    )
        .prop_map(|(mut leaves, more, ops)| {
            leaves.extend(more);
            Graph { leaves, ops }
        })
}

/// Tolerances for f32 evaluation. The output is O(1) per element and reduced in f64, but
/// finite differences divide f32 rounding by `eps`, and that rounding is amplified along the
/// same paths as the gradient. So the absolute floor grows with the largest gradient element
/// `scale` (a normwise criterion), more in the long configuration where paths are deeper. A
/// structural bug (a missed or doubled path) moves an element by a large fraction of the
/// gradient and still fails.
fn options(eps: f64, long: bool, scale: f64) -> GradcheckOptions {
    let (abs_tol, rel_tol) = if long { (5e-3 + 2e-2 * scale, 3e-2) } else { (2e-3 + 2e-3 * scale, 2e-2) };
    GradcheckOptions { eps, abs_tol, rel_tol, ..GradcheckOptions::default() }
}

/// The largest analytic gradient element, with the cotangent `gradcheck` uses.
fn gradient_scale(f: impl Fn(&[Tensor]) -> Result<Tensor>, leaves: &[Tensor]) -> Result<f64> {
    let fresh: Vec<Tensor> = leaves
        .iter()
        .map(|t| if t.is_variable() { t.detach().contiguous().unwrap().into_variable() } else { t.clone() })
        .collect();
    let y = f(&fresh)?;
    if !y.requires_grad() {
        return Ok(0.0);
    }
    let seed = GradcheckOptions::default().seed;
    y.backward_with_grad(&Tensor::randn(y.shape(), 0.0, 1.0, &mut Rng::new(seed)).unwrap())?;
    let max = |g: Tensor| g.to_vec().iter().fold(0.0f64, |m, v| m.max(v.abs() as f64));
    Ok(fresh.iter().filter_map(Tensor::grad).map(max).fold(0.0, f64::max))
}

/// Steps tried in turn: f32 rounding noise scatters the numeric estimate differently at each
/// step, and the truncation error of a curved graph shrinks with the step's square, while a
/// wrong backward disagrees at all of them, so one passing step suffices. The two smallest
/// came after a graph of products of `x @ tanh(x)` summed 27 times over (the case kept in
/// `random_graphs.proptest-regressions`) was off by 3%, 5% and 20% at the other three, the
/// error falling fourfold with each halving: a correct gradient, a step too coarse for it.
const STEPS: [f64; 5] = [5e-3, 1e-2, 2e-2, 2.5e-3, 1.25e-3];

/// Passes when some step passes, or when every failing step pushed a `relu` input across its
/// kink (inconclusive: the finite difference straddled a corner). Fails when every step fails
/// and at least one failed cleanly.
fn check(graph: &Graph, long: bool) -> std::result::Result<(), TestCaseError> {
    let leaves = graph.initial_values();
    let kinks = Kinks::new(graph.ops.len());
    let f = |xs: &[Tensor]| evaluate(graph, xs, &kinks);
    let scale = gradient_scale(f, &leaves).map_err(|e| TestCaseError::fail(format!("the graph failed: {e}")))?;
    let mut clean_failures = Vec::new();
    for eps in STEPS {
        kinks.crossed.set(false);
        let report =
            gradcheck(f, &leaves, options(eps, long, scale)).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        if report.passed() {
            return Ok(());
        }
        if !kinks.crossed.get() {
            clean_failures.push((eps, report.first_mismatch));
        }
    }
    if clean_failures.is_empty() {
        return Ok(());
    }
    Err(TestCaseError::fail(format!("gradient mismatch at every step: {clean_failures:?}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_variable_gradient_of_a_random_graph_matches_finite_differences(g in graph(30)) {
        check(&g, false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, max_shrink_iters: 512, ..ProptestConfig::default() })]

    /// Long configuration: `cargo test -p forgia --test random_graphs -- --ignored`.
    #[test]
    #[ignore = "long configuration: graphs of up to 300 ops"]
    fn every_variable_gradient_of_a_large_random_graph_matches_finite_differences(g in graph(300)) {
        check(&g, true)?;
    }
}

#[test]
fn a_hand_built_graph_with_a_diamond_fan_out_and_views_passes() {
    let g = Graph {
        leaves: vec![
            Leaf { shape: vec![2, 3], variable: true, seed: 1 },
            Leaf { shape: vec![3], variable: true, seed: 2 },
            Leaf { shape: vec![2, 1], variable: false, seed: 3 },
        ],
        ops: vec![
            Op::Mul(0, 1),          // 3: [2,3] * [3]  (broadcast)
            Op::Transpose(3, 0, 1), // 4: [3,2] view
            Op::Matmul(3, 4),       // 5: [2,2], node 3 reached twice (diamond)
            Op::Slice(0, 1, 1, 1),  // 6: x[:, 1::2]
            Op::Add(6, 2),          // 7: with the constant
            Op::Div(5, 7),          // 8: [2,2] / (1 + [2,1]²) broadcast
            Op::Relu(8),            // 9
            Op::Sum(9, 0, false),   // 10
            Op::Mul(10, 10),        // 11: x * x
        ],
    };
    check(&g, false).unwrap();
}
