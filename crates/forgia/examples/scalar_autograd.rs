//! A complete scalar reverse-mode autograd in one file: the course code of the autograd
//! chapter (§7.3, "Build it yourself"), rebuilt in idiomatic Rust, plus the chapter's four
//! warm-up exercises.
//!
//! This is a reading entry point, not part of the library: it does not use `forgia` at all.
//! The real engine does the same thing at tensor rank; here nothing can hide.
//!
//! The ideas, in the order the file presents them:
//!
//! * **The graph is implicit in the values.** Every value records the [`Rule`] (op) that
//!   produced it, and the rule names its operands. Following those edges from the loss
//!   recovers the whole computation. Values live in an arena ([`Graph`]) and refer to each
//!   other by [`ValueId`] index, which keeps Rust's borrow checker out of the way while
//!   reading exactly like the chapter's pointers.
//! * **One local rule per op.** [`Graph::local_grads`] is the only place that knows calculus:
//!   given `dL/dy` for one value, it returns `dL/dx` for each operand (a vector–Jacobian
//!   product, at rank zero).
//! * **Two schedulers over the same rules.** [`Graph::naive_backward`] recurses into an operand
//!   as soon as one contribution arrives, and double counts on any DAG.
//!   [`Graph::backward_unguarded`] first counts consumer edges ([`Graph::prepare`]), then fires
//!   a node only when its pending counter drains to zero ([`Graph::contribute`]).
//! * **Exercises.** `tanh` reusing its saved output (1), a finite-difference oracle
//!   ([`gradcheck`], 2), constants that neither accumulate nor propagate (3), and a
//!   `backward_done` guard making a second backward an error instead of a silent 3x gradient (4).
//!
//! Run the demo with `cargo run -p forgia --example scalar_autograd`, and the tests with
//! `cargo test -p forgia --example scalar_autograd`.

use std::fmt;

/// A handle to one value of a [`Graph`]: its index in the arena.
///
/// Operands are always pushed before the values computed from them, so index order is a
/// topological order of the graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ValueId(usize);

/// The op that produced a value: the implicit graph edge back to its operands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    /// An input or a constant: there is nothing behind it to propagate into.
    Leaf,
    /// `a + b`.
    Add(ValueId, ValueId),
    /// `a * b`.
    Mul(ValueId, ValueId),
    /// `tanh(a)`. Its backward rule needs only the value's own (saved) output.
    Tanh(ValueId),
}

impl Rule {
    /// The operands this rule reads, one entry per consumer edge (`s * s` lists `s` twice).
    fn operands(self) -> Vec<ValueId> {
        match self {
            Rule::Leaf => Vec::new(),
            Rule::Add(a, b) | Rule::Mul(a, b) => vec![a, b],
            Rule::Tanh(a) => vec![a],
        }
    }
}

/// One scalar in the arena: the chapter's `Value` struct.
#[derive(Clone, Debug)]
struct ValueData {
    /// The forward result.
    data: f64,
    /// The accumulated `dL/d(this value)`.
    grad: f64,
    /// Which op produced the value, and from which operands.
    rule: Rule,
    /// Exercise 3: `false` for constants, and for any value computed only from constants.
    /// Such values are pruned from backward: they neither accumulate nor propagate.
    requires_grad: bool,
    /// Consumer edges whose contribution has not arrived yet in the current backward pass.
    pending: u32,
}

/// The error of a guarded [`Graph::backward`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BackwardError {
    /// Backward already ran over this graph; its interior gradients are spent (exercise 4).
    AlreadyRun,
}

impl fmt::Display for BackwardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackwardError::AlreadyRun => f.write_str("backward already ran over this graph; rebuild it to run again"),
        }
    }
}

impl std::error::Error for BackwardError {}

/// An arena of scalar values: the whole computation, in creation order.
///
/// The arena is just storage; the graph structure is carried by each value's [`Rule`].
#[derive(Debug, Default)]
struct Graph {
    /// Every value created so far, indexed by [`ValueId`].
    values: Vec<ValueData>,
    /// Exercise 3 instrumentation: how many times an op's backward rule has fired.
    rules_fired: usize,
    /// Exercise 4: set by the first guarded [`Graph::backward`].
    backward_done: bool,
}

impl Graph {
    /// An empty graph.
    fn new() -> Self {
        Self::default()
    }

    /// A trainable leaf: gradients accumulate into it.
    fn variable(&mut self, data: f64) -> ValueId {
        self.push(data, Rule::Leaf, true)
    }

    /// A constant leaf (`requires_grad = false`): backward never touches it.
    fn constant(&mut self, data: f64) -> ValueId {
        self.push(data, Rule::Leaf, false)
    }

    /// `a + b`.
    fn add(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.push_op(self.data(a) + self.data(b), Rule::Add(a, b))
    }

    /// `a * b`.
    fn mul(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.push_op(self.data(a) * self.data(b), Rule::Mul(a, b))
    }

    /// `tanh(a)` (exercise 1). The output is stored as the value's data, which is all the
    /// backward rule needs: d/dx tanh(x) = 1 - tanh(x)^2 = 1 - y^2.
    fn tanh(&mut self, a: ValueId) -> ValueId {
        self.push_op(self.data(a).tanh(), Rule::Tanh(a))
    }

    /// The forward value of `id`.
    fn data(&self, id: ValueId) -> f64 {
        self.values[id.0].data
    }

    /// The gradient accumulated into `id` so far.
    fn grad(&self, id: ValueId) -> f64 {
        self.values[id.0].grad
    }

    /// Pushes an op result; it requires grad when any operand does (exercise 3).
    fn push_op(&mut self, data: f64, rule: Rule) -> ValueId {
        let requires_grad = rule.operands().iter().any(|&operand| self.values[operand.0].requires_grad);
        self.push(data, rule, requires_grad)
    }

    /// Appends a value to the arena and returns its handle.
    fn push(&mut self, data: f64, rule: Rule, requires_grad: bool) -> ValueId {
        self.values.push(ValueData { data, grad: 0.0, rule, requires_grad, pending: 0 });
        ValueId(self.values.len() - 1)
    }

    /// The local backward rule (vector–Jacobian product) of `id`: given `g = dL/d(id)`,
    /// returns `(operand, dL/d(operand))` for each operand that requires grad. This is all
    /// the calculus in the file; both schedulers below only decide *when* to call it.
    fn local_grads(&self, id: ValueId, g: f64) -> Vec<(ValueId, f64)> {
        let value = &self.values[id.0];
        let grads = match value.rule {
            Rule::Leaf => Vec::new(),
            Rule::Add(a, b) => vec![(a, g), (b, g)],
            // The product rule: each operand's gradient is g times the other operand.
            Rule::Mul(a, b) => vec![(a, g * self.data(b)), (b, g * self.data(a))],
            // Reuses the saved output y = tanh(x) instead of recomputing tanh.
            Rule::Tanh(a) => vec![(a, g * (1.0 - value.data * value.data))],
        };
        // Exercise 3: constants get no contribution at all.
        grads.into_iter().filter(|&(operand, _)| self.values[operand.0].requires_grad).collect()
    }

    /// The chapter's first, buggy backward: seed `dL/dL = 1`, then recursively push gradient
    /// into each operand as soon as one contribution arrives.
    ///
    /// Correct on chains and trees. On a DAG a shared node propagates once per consumer, each
    /// time re-sending everything it has accumulated so far, so earlier contributions are
    /// delivered again: kept only to pin that failure in a test.
    fn naive_backward(&mut self, output: ValueId) {
        self.values[output.0].grad = 1.0;
        self.naive_propagate(output);
    }

    /// The recursive step of [`Graph::naive_backward`].
    fn naive_propagate(&mut self, id: ValueId) {
        for (operand, g) in self.local_grads(id, self.grad(id)) {
            self.values[operand.0].grad += g;
            // BUG: the operand propagates now, before its other consumers have delivered.
            self.naive_propagate(operand);
        }
    }

    /// Pass 1 of the fixed backward: walk the operand edges from the output and count, on
    /// every value, one pending contribution per consumer edge. The counter doubles as the
    /// visited set: recurse into a value's operands only on its first visit. Constants are
    /// never counted, so the walk never enters a frozen subgraph.
    fn prepare(&mut self, id: ValueId) {
        let value = &mut self.values[id.0];
        if !value.requires_grad {
            return;
        }
        value.pending += 1;
        if value.pending > 1 {
            return; // already visited in this pass
        }
        for operand in value.rule.operands() {
            self.prepare(operand);
        }
    }

    /// Pass 2 of the fixed backward: accumulate one contribution into `id`, and fire its
    /// local rule only when the last expected contribution has landed, so the value
    /// propagates its complete gradient exactly once.
    fn contribute(&mut self, id: ValueId, g: f64) {
        let value = &mut self.values[id.0];
        if !value.requires_grad {
            return; // constants neither accumulate nor propagate
        }
        value.grad += g;
        value.pending -= 1;
        if value.pending > 0 {
            return; // more consumers still owe this value gradient
        }
        if value.rule != Rule::Leaf {
            self.rules_fired += 1;
        }
        let complete = value.grad;
        for (operand, g) in self.local_grads(id, complete) {
            self.contribute(operand, g);
        }
    }

    /// The fixed two-pass backward with no protection against running twice: the seed counts
    /// as one pending contribution on the output, then `dL/dL = 1` is delivered.
    fn backward_unguarded(&mut self, output: ValueId) {
        self.prepare(output);
        self.contribute(output, 1.0);
    }

    /// The fixed backward with exercise 4's guard: one backward per graph. A second call
    /// returns [`BackwardError::AlreadyRun`] and changes nothing.
    fn backward(&mut self, output: ValueId) -> Result<(), BackwardError> {
        if self.backward_done {
            return Err(BackwardError::AlreadyRun);
        }
        self.backward_done = true;
        self.backward_unguarded(output);
        Ok(())
    }

    /// Exercise 3 instrumentation: how many op rules have fired in all backward passes so far.
    fn rules_fired(&self) -> usize {
        self.rules_fired
    }
}

/// Central-difference step of the finite-difference oracle (§7.11's default).
const FD_EPS: f64 = 1e-3;
/// Absolute tolerance floor of the oracle's mixed criterion.
const FD_ABS_TOL: f64 = 1e-3;
/// Relative tolerance factor of the oracle's mixed criterion.
const FD_REL_TOL: f64 = 1e-2;

/// What a successful [`gradcheck`] checked.
#[derive(Clone, Copy, Debug, PartialEq)]
struct GradcheckReport {
    /// How many input gradients were compared.
    checked: usize,
    /// The largest `|numeric - analytic|` seen.
    max_abs_error: f64,
}

/// The first input whose analytic gradient failed the finite-difference check.
#[derive(Clone, Copy, Debug, PartialEq)]
struct GradMismatch {
    /// Index of the input in the `at` slice.
    input: usize,
    /// The central-difference slope.
    numeric: f64,
    /// The gradient backward produced.
    analytic: f64,
}

/// Exercise 2, a miniature gradcheck: compares the fixed backward's gradients of `build` at
/// the point `at` against central finite differences.
///
/// `build` receives a fresh graph and one variable per entry of `at`, and returns the scalar
/// output. See [`gradcheck_with`] for the criterion.
fn gradcheck<F>(build: F, at: &[f64]) -> Result<GradcheckReport, GradMismatch>
where
    F: Fn(&mut Graph, &[ValueId]) -> ValueId,
{
    gradcheck_with(build, at, Graph::backward_unguarded)
}

/// [`gradcheck`] with the backward pass to test given explicitly.
///
/// The analytic gradient comes from one run of `backward` over a freshly built graph. For
/// each input `i`, the forward is rebuilt at `x_i ± FD_EPS` and the slope
/// `(f(x + eps) - f(x - eps)) / (2 eps)` must satisfy
/// `|numeric - analytic| <= FD_ABS_TOL + FD_REL_TOL * |analytic|`. The oracle shares no code
/// with the backward rules: it only runs forwards and subtracts.
fn gradcheck_with<F>(build: F, at: &[f64], backward: fn(&mut Graph, ValueId)) -> Result<GradcheckReport, GradMismatch>
where
    F: Fn(&mut Graph, &[ValueId]) -> ValueId,
{
    let forward = |point: &[f64]| {
        let mut graph = Graph::new();
        let inputs: Vec<ValueId> = point.iter().map(|&x| graph.variable(x)).collect();
        let output = build(&mut graph, &inputs);
        (graph, inputs, output)
    };

    let (mut graph, inputs, output) = forward(at);
    backward(&mut graph, output);

    let mut report = GradcheckReport { checked: 0, max_abs_error: 0.0 };
    for (i, &input) in inputs.iter().enumerate() {
        let analytic = graph.grad(input);
        let mut point = at.to_vec();
        point[i] = at[i] + FD_EPS;
        let (plus_graph, _, plus_output) = forward(&point);
        point[i] = at[i] - FD_EPS;
        let (minus_graph, _, minus_output) = forward(&point);
        let numeric = (plus_graph.data(plus_output) - minus_graph.data(minus_output)) / (2.0 * FD_EPS);

        let error = (numeric - analytic).abs();
        if error > FD_ABS_TOL + FD_REL_TOL * analytic.abs() {
            return Err(GradMismatch { input: i, numeric, analytic });
        }
        report.checked += 1;
        report.max_abs_error = report.max_abs_error.max(error);
    }
    Ok(report)
}

/// The diamond of §7.3, `s = x + 1` and `y = s * s`, in a fresh graph. Returns the graph,
/// `x` and `y`.
fn diamond(x: f64) -> (Graph, ValueId, ValueId) {
    let mut graph = Graph::new();
    let x = graph.variable(x);
    let one = graph.constant(1.0);
    let s = graph.add(x, one);
    let y = graph.mul(s, s);
    (graph, x, y)
}

/// A short tour: the product rule, the DAG bug and its fix, `tanh` checked by the oracle,
/// a frozen subgraph, and the one-backward-per-graph guard.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut graph = Graph::new();
    let x = graph.variable(3.0);
    let y = graph.variable(5.0);
    let z = graph.mul(x, y);
    graph.backward(z)?;
    println!("z = x * y at (3, 5):           dz/dx = {}, dz/dy = {}", graph.grad(x), graph.grad(y));

    let (mut naive, naive_x, naive_y) = diamond(2.0);
    naive.naive_backward(naive_y);
    let (mut fixed, fixed_x, fixed_y) = diamond(2.0);
    fixed.backward(fixed_y)?;
    println!(
        "y = (x + 1)^2 at x = 2:        naive dy/dx = {} (wrong), counted dy/dx = {} (2s)",
        naive.grad(naive_x),
        fixed.grad(fixed_x)
    );

    let tanh_xy = |graph: &mut Graph, inputs: &[ValueId]| {
        let product = graph.mul(inputs[0], inputs[1]);
        graph.tanh(product)
    };
    match gradcheck(tanh_xy, &[0.5, -1.5]) {
        Ok(report) => println!(
            "gradcheck tanh(x * y):         {} gradients agree, max error {:.1e}",
            report.checked, report.max_abs_error
        ),
        Err(mismatch) => println!("gradcheck tanh(x * y):         MISMATCH {mismatch:?}"),
    }

    let mut frozen = Graph::new();
    let w = frozen.variable(0.5);
    let c = frozen.constant(2.0);
    let d = frozen.constant(-1.0);
    let frozen_product = frozen.mul(c, d);
    let frozen_branch = frozen.tanh(frozen_product);
    let loss = frozen.add(w, frozen_branch);
    frozen.backward(loss)?;
    println!(
        "w + tanh(c * d), c, d frozen:  {} rule fired, dc = {}, dw = {}",
        frozen.rules_fired(),
        frozen.grad(c),
        frozen.grad(w)
    );

    let mut twice = Graph::new();
    let x = twice.variable(3.0);
    let square = twice.mul(x, x);
    twice.backward(square)?;
    match twice.backward(square) {
        Ok(()) => println!("second backward over x * x:    ran (unexpected)"),
        Err(err) => println!("second backward over x * x:    refused: {err}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// d/dx tanh(x * y) = (1 - tanh^2(xy)) * y, and symmetrically for y: worked by hand.
    fn tanh_xy_analytic(x: f64, y: f64) -> (f64, f64) {
        let sech2 = 1.0 - (x * y).tanh().powi(2);
        (sech2 * y, sech2 * x)
    }

    /// Builds `tanh(x * y)` over two inputs.
    fn tanh_xy(graph: &mut Graph, inputs: &[ValueId]) -> ValueId {
        let product = graph.mul(inputs[0], inputs[1]);
        graph.tanh(product)
    }

    /// A composite with fan-out, a constant and tanh: `tanh(x * y + z) * x + y * y * 0.5`.
    fn composite(graph: &mut Graph, inputs: &[ValueId]) -> ValueId {
        let (x, y, z) = (inputs[0], inputs[1], inputs[2]);
        let xy = graph.mul(x, y);
        let inner = graph.add(xy, z);
        let squashed = graph.tanh(inner);
        let left = graph.mul(squashed, x);
        let half = graph.constant(0.5);
        let yy = graph.mul(y, y);
        let right = graph.mul(yy, half);
        graph.add(left, right)
    }

    #[test]
    fn product_rule_gives_each_operand_the_other() -> Result<(), BackwardError> {
        let mut graph = Graph::new();
        let x = graph.variable(3.0);
        let y = graph.variable(5.0);
        let z = graph.mul(x, y);
        graph.backward(z)?;
        assert_eq!(graph.grad(x), 5.0);
        assert_eq!(graph.grad(y), 3.0);
        Ok(())
    }

    #[test]
    fn naive_walk_double_counts_a_shared_node() {
        let (mut graph, x, y) = diamond(2.0); // s = 3, y = s^2: dy/dx should be 2s = 6
        graph.naive_backward(y);
        // Deliberately asserts the WRONG value, to pin the failure mode: s propagates once
        // per consumer, and its second propagation re-sends the first contribution on top of
        // the second, so x receives 3 + 6 = 9 = 3s instead of 2s.
        assert_eq!(graph.grad(x), 9.0);
    }

    #[test]
    fn shared_interior_node_fires_exactly_once() -> Result<(), BackwardError> {
        let (mut graph, x, y) = diamond(2.0);
        graph.backward(y)?;
        assert_eq!(graph.grad(x), 6.0); // 2s: correct
        assert_eq!(graph.rules_fired(), 2); // the mul, then the add, each once
        Ok(())
    }

    #[test]
    fn fan_out_accumulates_the_derivative_of_x_squared_plus_4x() -> Result<(), BackwardError> {
        let mut graph = Graph::new();
        let x = graph.variable(3.0);
        let four = graph.constant(4.0);
        let square = graph.mul(x, x); // x feeds this node twice
        let linear = graph.mul(four, x); // and a third consumer here
        let loss = graph.add(square, linear);
        graph.backward(loss)?;
        assert_eq!(graph.grad(x), 10.0); // 2 * 3 + 4
        Ok(())
    }

    #[test]
    fn exercise_1_tanh_rule_reuses_the_saved_output() -> Result<(), BackwardError> {
        for (x0, y0) in [(0.5, -1.5), (2.0, 0.3)] {
            let mut graph = Graph::new();
            let x = graph.variable(x0);
            let y = graph.variable(y0);
            let out = tanh_xy(&mut graph, &[x, y]);
            // The forward output is exactly what the rule reads back.
            assert_eq!(graph.data(out), (x0 * y0).tanh());
            graph.backward(out)?;
            let (dx, dy) = tanh_xy_analytic(x0, y0);
            assert!((graph.grad(x) - dx).abs() < 1e-12, "d/dx at ({x0}, {y0})");
            assert!((graph.grad(y) - dy).abs() < 1e-12, "d/dy at ({x0}, {y0})");
        }
        Ok(())
    }

    #[test]
    fn exercise_2_finite_differences_agree_with_tanh_of_a_product() {
        for at in [[0.5, -1.5], [2.0, 0.3], [-0.7, 0.9]] {
            let report = gradcheck(tanh_xy, &at).expect("tanh(x * y) gradients");
            assert_eq!(report.checked, 2);
            assert!(report.max_abs_error < 1e-5, "{report:?} at {at:?}");
        }
    }

    #[test]
    fn exercise_2_finite_differences_agree_with_a_composite() {
        for at in [[0.3, -0.8, 0.1], [1.5, 0.4, -2.0]] {
            let report = gradcheck(composite, &at).expect("composite gradients");
            assert_eq!(report.checked, 3);
        }
    }

    #[test]
    fn exercise_2_finite_differences_catch_the_naive_walk() {
        let square_of_x_plus_one = |graph: &mut Graph, inputs: &[ValueId]| {
            let one = graph.constant(1.0);
            let s = graph.add(inputs[0], one);
            graph.mul(s, s)
        };
        let mismatch = gradcheck_with(square_of_x_plus_one, &[2.0], Graph::naive_backward)
            .expect_err("the oracle must reject the DAG bug");
        assert_eq!(mismatch.input, 0);
        assert_eq!(mismatch.analytic, 9.0);
        assert!((mismatch.numeric - 6.0).abs() < 1e-6);
        assert!(gradcheck(square_of_x_plus_one, &[2.0]).is_ok());
    }

    #[test]
    fn exercise_3_constants_neither_accumulate_nor_propagate() -> Result<(), BackwardError> {
        let mut graph = Graph::new();
        let x = graph.variable(3.0);
        let c = graph.constant(7.0);
        let one = graph.constant(1.0);
        let frozen = graph.add(c, one); // computed only from constants: frozen too
        let y = graph.mul(x, frozen);
        graph.backward(y)?;
        assert_eq!(graph.grad(x), 8.0);
        for constant in [c, one, frozen] {
            assert_eq!(graph.grad(constant), 0.0);
            assert_eq!(graph.values[constant.0].pending, 0, "never even counted");
        }
        assert_eq!(graph.rules_fired(), 1, "only the mul fired");
        Ok(())
    }

    #[test]
    fn exercise_3_a_frozen_operand_adds_zero_backward_work() -> Result<(), BackwardError> {
        // loss = tanh(x * y) + tanh(a * b), with (a, b) frozen or trainable.
        let rules_fired = |frozen: bool| -> Result<(usize, f64), BackwardError> {
            let mut graph = Graph::new();
            let x = graph.variable(0.5);
            let y = graph.variable(-1.0);
            let (a, b) = if frozen {
                (graph.constant(2.0), graph.constant(0.25))
            } else {
                (graph.variable(2.0), graph.variable(0.25))
            };
            let left = tanh_xy(&mut graph, &[x, y]);
            let right = tanh_xy(&mut graph, &[a, b]);
            let loss = graph.add(left, right);
            graph.backward(loss)?;
            Ok((graph.rules_fired(), graph.grad(a)))
        };
        // The baseline: the same loss with the second branch replaced by one constant.
        let mut graph = Graph::new();
        let x = graph.variable(0.5);
        let y = graph.variable(-1.0);
        let left = tanh_xy(&mut graph, &[x, y]);
        let k = graph.constant((2.0f64 * 0.25).tanh());
        let loss = graph.add(left, k);
        graph.backward(loss)?;
        let baseline = graph.rules_fired();

        let (frozen_work, frozen_grad) = rules_fired(true)?;
        let (trainable_work, trainable_grad) = rules_fired(false)?;
        assert_eq!(baseline, 3); // add, tanh, mul
        assert_eq!(frozen_work, baseline, "a frozen branch costs nothing");
        assert_eq!(trainable_work, baseline + 2, "a trainable branch fires its tanh and mul");
        assert_eq!(frozen_grad, 0.0);
        assert_ne!(trainable_grad, 0.0);
        Ok(())
    }

    /// Builds the retained `loss = x * x` graph of exercise 4 at x = 3.
    fn square_graph() -> (Graph, ValueId, ValueId) {
        let mut graph = Graph::new();
        let x = graph.variable(3.0);
        let loss = graph.mul(x, x);
        (graph, x, loss)
    }

    #[test]
    fn exercise_4_a_second_unguarded_backward_triples_the_gradient() {
        let (mut graph, x, loss) = square_graph();
        graph.backward_unguarded(loss);
        assert_eq!(graph.grad(x), 6.0); // 2x
        graph.backward_unguarded(loss);
        // The second pass seeds the loss on top of the 1 it kept, so it fires with 2 and
        // adds 2 * (2x) to the 2x already there: 3 * (2x).
        assert_eq!(graph.grad(x), 3.0 * 6.0);
    }

    #[test]
    fn exercise_4_a_leaf_only_zero_grad_is_not_enough() {
        let (mut graph, x, loss) = square_graph();
        graph.backward_unguarded(loss);
        // Zero every leaf gradient, as a parameter-only zero_grad would. That is not enough:
        // interior values hold gradients too. `loss` still holds dL/dL = 1 from the first
        // pass, the new seed lands on top of it, and the loss fires with 2 instead of 1. The
        // leaf ends at 2 * (2x): still wrong. Only refusing to reuse a spent graph (or
        // zeroing every interior value as well) gives a correct second pass.
        for value in graph.values.iter_mut().filter(|v| v.rule == Rule::Leaf) {
            value.grad = 0.0;
        }
        graph.backward_unguarded(loss);
        assert_eq!(graph.grad(loss), 2.0);
        assert_eq!(graph.grad(x), 2.0 * 6.0);
    }

    #[test]
    fn exercise_4_the_backward_done_guard_refuses_a_second_pass() {
        let (mut graph, x, loss) = square_graph();
        assert_eq!(graph.backward(loss), Ok(()));
        assert_eq!(graph.backward(loss), Err(BackwardError::AlreadyRun));
        assert_eq!(graph.grad(x), 6.0, "the refused pass changed nothing");
        assert_eq!(graph.rules_fired(), 1);
    }
}
