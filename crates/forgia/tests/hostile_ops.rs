//! Random ops on hostile inputs (shared/DESIGN.md, "Errors"): shapes with empty and huge axes,
//! axes far out of range, NaN- and infinity-laden values, nonsense parameters. Whatever is
//! drawn, every op and the backward pass after it must
//! - not panic, abort or hang;
//! - return an `Err` whose message names the op that was called; or
//! - return `Ok`, and then, for an op defined everywhere on finite inputs, finite values and
//!   finite gradients of the input's shape whenever the inputs are finite.

use std::panic::{catch_unwind, AssertUnwindSafe};

use forgia::loss::{self, CrossEntropyOptions, Reduction};
use forgia::{AttentionOptions, Conv1dOptions, Conv2dOptions, Indices, Result, Rng, Tensor};
use proptest::prelude::*;

/// Sizes above 2^40: views far beyond memory, and products that overflow. Not 2^40 itself:
/// a `[1, 2^40] · [2^40, 1]` product of broadcast views is exactly [`forgia::MAX_WORK`], work
/// an op accepts and runs (for minutes), which is not what this test is about.
const HUGE: [usize; 4] = [1 << 41, 1 << 62, usize::MAX / 2, usize::MAX];

/// What a case draws: two operands, a mask, axes, a scalar parameter, a count and a shape.
#[derive(Debug)]
struct Args {
    x: Tensor,
    y: Tensor,
    mask: Tensor,
    ax: isize,
    ax2: isize,
    s: f32,
    k: usize,
    shape: Vec<usize>,
    idx: Indices,
    finite: bool,
}

/// One row of the table: the op's name (what its errors must say), whether it is defined for
/// every finite input (so that finite inputs must give finite values and gradients), and the call.
struct Op {
    name: &'static str,
    total: bool,
    f: fn(&Args) -> Result<Tensor>,
}

const fn op(name: &'static str, total: bool, f: fn(&Args) -> Result<Tensor>) -> Op {
    Op { name, total, f }
}

fn ops() -> Vec<Op> {
    vec![
        // Pointwise, unary and with a scalar.
        op("neg", true, |a| Ok(a.x.neg())),
        op("exp", true, |a| Ok(a.x.exp())),
        op("log", false, |a| Ok(a.x.log())),
        op("sqrt", false, |a| Ok(a.x.sqrt())),
        op("rsqrt", false, |a| Ok(a.x.rsqrt())),
        op("reciprocal", false, |a| Ok(a.x.reciprocal())),
        op("abs", true, |a| Ok(a.x.abs())),
        op("sin", true, |a| Ok(a.x.sin())),
        op("tanh", true, |a| Ok(a.x.tanh())),
        op("erf", true, |a| Ok(a.x.erf())),
        op("sigmoid", true, |a| Ok(a.x.sigmoid())),
        op("relu", true, |a| Ok(a.x.relu())),
        op("gelu", true, |a| Ok(a.x.gelu())),
        op("silu", true, |a| Ok(a.x.silu())),
        op("softplus", true, |a| Ok(a.x.softplus())),
        op("pow_scalar", false, |a| Ok(a.x.pow_scalar(a.s))),
        op("leaky_relu", false, |a| Ok(a.x.leaky_relu(a.s))),
        op("clamp", false, |a| a.x.clamp(-a.s.abs(), a.s.abs())),
        op("dropout", false, |a| a.x.dropout(a.s, 3, true)),
        // Broadcasting binary ops.
        op("add", true, |a| a.x.add(&a.y)),
        op("sub", true, |a| a.x.sub(&a.y)),
        op("mul", true, |a| a.x.mul(&a.y)),
        op("div", false, |a| a.x.div(&a.y)),
        op("pow", false, |a| a.x.pow(&a.y)),
        op("maximum", true, |a| a.x.maximum(&a.y)),
        op("where", true, |a| Tensor::where_(&a.mask, &a.x, &a.y)),
        op("masked_fill", false, |a| a.x.masked_fill(&a.mask, a.s)),
        // Reductions and scans.
        op("sum", true, |a| a.x.sum(a.ax, a.k % 2 == 0)),
        op("mean", true, |a| a.x.mean(a.ax, false)),
        op("max", true, |a| a.x.max(a.ax, a.k % 2 == 0)),
        op("min", true, |a| a.x.min(a.ax, false)),
        op("var", false, |a| a.x.var(a.ax, a.k % 3, false)),
        op("logsumexp", true, |a| a.x.logsumexp(a.ax, false)),
        op("prod", true, |a| a.x.prod(a.ax, false)),
        op("cumsum", true, |a| a.x.cumsum(a.ax)),
        op("softmax", true, |a| a.x.softmax(a.ax)),
        op("log_softmax", true, |a| a.x.log_softmax(a.ax)),
        op("max_all", true, |a| a.x.max_all()),
        op("mean_all", true, |a| a.x.mean_all()),
        // Shapes and views.
        op("reshape", true, |a| a.x.reshape(&a.shape)),
        op("permute", true, |a| a.x.permute(&a.shape)),
        op("transpose", true, |a| a.x.transpose(a.ax, a.ax2)),
        op("narrow", true, |a| a.x.narrow(a.ax, a.k, a.k / 2)),
        op("slice", true, |a| a.x.slice(a.ax, a.ax2, a.k as isize, a.k % 3)),
        op("broadcast_to", true, |a| a.x.broadcast_to(&a.shape)),
        op("squeeze", true, |a| a.x.squeeze(a.ax)),
        op("unsqueeze", true, |a| a.x.unsqueeze(a.ax)),
        op("flatten", true, |a| a.x.flatten(a.ax, a.ax2)),
        op("concat", true, |a| Tensor::concat(&[&a.x, &a.y], a.ax)),
        op("stack", true, |a| Tensor::stack(&[&a.x, &a.y], a.ax)),
        op("split", true, |a| a.x.split(a.ax, &[a.k, 1]).map(|p| p[0].clone())),
        op("chunk", true, |a| a.x.chunk(a.k, a.ax).map(|p| p[0].clone())),
        op("pad", true, |a| a.x.pad(&vec![(a.k, 1); a.shape.len()], a.s)),
        op("flip", true, |a| a.x.flip(a.ax)),
        op("repeat", true, |a| a.x.repeat(&a.shape)),
        op("reshape_infer", true, |a| a.x.reshape_infer(&a.shape.iter().map(|&d| d as isize - 1).collect::<Vec<_>>())),
        // Indexing.
        op("index_select", true, |a| a.x.index_select(a.ax, &a.idx)),
        op("gather", true, |a| a.x.gather(a.ax, &a.idx)),
        op("index_add", true, |a| a.x.index_add(a.ax, &a.idx, &a.y)),
        op("scatter_add", true, |a| a.x.scatter_add(a.ax, &a.idx, &a.y)),
        // Products.
        op("matmul", true, |a| a.x.matmul(&a.y)),
        op("linear", true, |a| a.x.linear(&a.y, None)),
        op("dot", true, |a| a.x.dot(&a.y, a.ax)),
        op("einsum", true, |a| Tensor::einsum("ij,jk->ik", &a.x, &a.y)),
        // Normalization, convolution, pooling, attention, position.
        op("layer_norm", false, |a| a.x.layer_norm(&a.shape, None, None, a.s)),
        op("rms_norm", false, |a| a.x.rms_norm(None, a.s)),
        op("conv2d", true, |a| {
            let opts = Conv2dOptions { stride: (a.k, 1), padding: (a.k % 2, 0), dilation: (1, a.k), groups: 1 };
            a.x.conv2d(&a.y, None, opts)
        }),
        op("conv1d", true, |a| {
            a.x.conv1d(&a.y, None, Conv1dOptions { stride: a.k, padding: 0, dilation: 1, groups: 1 })
        }),
        op("max_pool2d", true, |a| a.x.max_pool2d((a.k, 2), (a.k % 3, 1), (1, 0))),
        op("avg_pool2d", true, |a| a.x.avg_pool2d((2, a.k), (1, 1), (0, a.k % 2))),
        op("scaled_dot_product_attention", true, |a| {
            let opts = AttentionOptions { causal: a.k % 2 == 0, scale: Some(a.s), ..Default::default() };
            a.x.scaled_dot_product_attention(&a.y, &a.y, opts)
        }),
        op("rope", false, |a| a.x.rope(a.s)),
        // Losses.
        op("mse_loss", true, |a| loss::mse_loss(&a.x, &a.y, Reduction::Mean)),
        op("huber_loss", false, |a| loss::huber_loss(&a.x, &a.y, a.s, Reduction::Sum)),
        op("binary_cross_entropy_with_logits", true, |a| {
            loss::binary_cross_entropy_with_logits(&a.x, &a.y, Reduction::Mean)
        }),
        // `Mean` over no counted rows (an empty batch) is NaN, as in PyTorch: only the sum is total.
        op("cross_entropy", false, |a| {
            let options = CrossEntropyOptions { label_smoothing: a.s, ..Default::default() };
            loss::cross_entropy(&a.x, &a.idx, options)
        }),
        op("cross_entropy", true, |a| {
            let options = CrossEntropyOptions { label_smoothing: a.s, reduction: Reduction::Sum, ..Default::default() };
            loss::cross_entropy(&a.x, &a.idx, options)
        }),
    ]
}

/// Axes: mostly near the valid range, sometimes far outside it.
fn axis() -> impl Strategy<Value = isize> {
    prop_oneof![8 => -5isize..5, 1 => Just(isize::MIN), 1 => Just(isize::MAX), 1 => Just(-(1 << 40))]
}

/// Sizes: mostly 0..=3 (empty axes included), now and then huge.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![12 => 0usize..4, 1 => prop::sample::select(HUGE.to_vec())]
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(size(), 0..5)
}

/// Scalar parameters: ordinary, degenerate and non-finite.
fn scalar() -> impl Strategy<Value = f32> {
    prop_oneof![
        6 => -2.0f32..2.0,
        1 => Just(0.0),
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
        1 => Just(f32::NEG_INFINITY),
        1 => Just(1e30),
    ]
}

/// How values are filled: finite in [-2, 2], or with NaN / infinities mixed in.
#[derive(Clone, Copy, Debug)]
enum Fill {
    Finite,
    Nan,
    Inf,
}

fn fill() -> impl Strategy<Value = Fill> {
    prop_oneof![6 => Just(Fill::Finite), 1 => Just(Fill::Nan), 1 => Just(Fill::Inf)]
}

/// A tensor of `shape`: stored in full when small, else one stored element per huge axis
/// broadcast to the shape (a view far beyond memory). `None` when even that shape is refused
/// (its size overflows), which is an error of the constructor, not of the op under test.
fn tensor(shape: &[usize], fill: Fill, variable: bool, seed: u64) -> Option<Tensor> {
    let stored: Vec<usize> = shape.iter().map(|&d| if d >= 1 << 41 { 1 } else { d }).collect();
    let mut rng = Rng::new(seed);
    let mut t = Tensor::rand(&stored, -2.0, 2.0, &mut rng).ok()?;
    let special = match fill {
        Fill::Finite => None,
        Fill::Nan => Some(f32::NAN),
        Fill::Inf => Some(f32::INFINITY),
    };
    if let Some(v) = special {
        let mut data = t.to_vec();
        for (i, d) in data.iter_mut().enumerate() {
            if i % 3 == 0 {
                *d = if i % 2 == 0 { v } else { -v };
            }
        }
        t = Tensor::from_vec(data, &stored).ok()?;
    }
    let t = if variable { t.into_variable() } else { t };
    if stored == shape {
        Some(t)
    } else {
        t.broadcast_to(shape).ok()
    }
}

/// Indices: a few small values, sometimes negative or far out of range.
fn indices(k: usize, wild: bool) -> Indices {
    let data: Vec<i64> =
        (0..k as i64).map(|i| if wild && i == 0 { i64::MIN + i } else { i % 3 - i64::from(wild) }).collect();
    Indices::new(data.clone(), &[data.len()]).expect("a rank-1 index")
}

/// Runs `f`, turning a panic into a test failure that names the op and the inputs.
fn no_panic<T>(what: &str, args: &Args, f: impl FnOnce() -> T) -> std::result::Result<T, TestCaseError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|e| {
        let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
        TestCaseError::fail(format!("{what} panicked ({msg:?}) on {args:?}"))
    })
}

fn all_finite(t: &Tensor) -> bool {
    t.try_to_vec().map(|v| v.iter().all(|x| x.is_finite())).unwrap_or(true)
}

/// Elements above which values are not read back (a huge view is read by its own ops only).
const READ_LIMIT: usize = 1 << 16;

fn check(op: &Op, args: &Args) -> std::result::Result<(), TestCaseError> {
    let out = no_panic(op.name, args, || (op.f)(args))?;
    let out = match out {
        Err(e) => {
            let message = e.to_string();
            prop_assert!(
                message.contains(op.name),
                "{}: the error does not name the op: {message} ({args:?})",
                op.name
            );
            return Ok(());
        }
        Ok(out) => out,
    };
    let small = out.numel() <= READ_LIMIT;
    let inputs_finite = args.finite && args.s.is_finite();
    if op.total && inputs_finite && small {
        prop_assert!(all_finite(&out), "{}: non-finite values from finite inputs ({args:?})", op.name);
    }
    if !out.requires_grad() || !small {
        return Ok(());
    }
    let pass = no_panic(&format!("{} backward", op.name), args, || out.sum_all().backward())?;
    if pass.is_ok() {
        for (which, t) in [("x", &args.x), ("y", &args.y)] {
            if let Some(g) = t.grad() {
                prop_assert_eq!(g.shape(), t.shape(), "{} gradient of {}", op.name, which);
                if op.total && inputs_finite && g.numel() <= READ_LIMIT {
                    prop_assert!(all_finite(&g), "{}: non-finite gradient of {which} ({args:?})", op.name);
                }
            }
        }
    }
    Ok(())
}

fn args(
    xs: Vec<usize>,
    ys: Vec<usize>,
    fills: (Fill, Fill),
    axes: (isize, isize),
    s: f32,
    k: usize,
    shape: Vec<usize>,
    seed: u64,
) -> Option<Args> {
    let x = tensor(&xs, fills.0, true, seed)?;
    let y = tensor(&ys, fills.1, seed.is_multiple_of(2), seed + 1)?;
    // The mask has x's shape half the time, y's otherwise (so it may not broadcast).
    let mask_shape = if seed % 4 < 2 { &xs } else { &ys };
    // Nonzero is true: about half the entries.
    let mask = tensor(mask_shape, Fill::Finite, false, seed + 2)?.relu();
    let finite = matches!(fills, (Fill::Finite, Fill::Finite));
    let idx = indices(k, seed.is_multiple_of(5));
    Some(Args { x, y, mask, ax: axes.0, ax2: axes.1, s, k, shape, idx, finite })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_op_on_hostile_inputs_returns_finite_values_or_an_error_naming_it(
        which in 0usize..1000,
        xs in shape(),
        ys in shape(),
        fills in (fill(), fill()),
        axes in (axis(), axis()),
        s in scalar(),
        k in 0usize..5,
        shape in shape(),
        seed in 0u64..1000,
    ) {
        let table = ops();
        let op = &table[which % table.len()];
        if let Some(a) = args(xs, ys, fills, axes, s, k, shape, seed) {
            check(op, &a)?;
        }
    }
}

/// The same table with inputs chosen to be valid for most ops: the finite-value rule is
/// exercised, not only the errors.
#[test]
fn every_op_on_ordinary_inputs_is_finite_or_names_itself() {
    let shapes: [&[usize]; 4] = [&[2, 3], &[3, 3], &[1, 2, 3, 3], &[2, 1, 3, 4]];
    let mut failures = Vec::new();
    for op in ops() {
        'op: for (i, xs) in shapes.iter().enumerate() {
            for ys in shapes {
                let a = args(
                    xs.to_vec(),
                    ys.to_vec(),
                    (Fill::Finite, Fill::Finite),
                    (1, -1),
                    0.5,
                    2,
                    xs.to_vec(),
                    i as u64,
                )
                .expect("small shapes");
                if let Err(e) = check(&op, &a) {
                    failures.push(e.to_string());
                    break 'op;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} ops broke a rule:\n{}", failures.len(), failures.join("\n"));
}

/// Every op over many seeded hostile draws, reporting every op that breaks a rule at once (the
/// property test above stops, and shrinks, at the first): `cargo test -p forgia --test
/// hostile_ops -- --ignored`.
#[test]
#[ignore = "a long sweep: run with --ignored"]
fn a_long_sweep_reports_every_op_that_breaks_a_rule() {
    let mut rng = Rng::new(11);
    let mut pick = |n: usize| rng.below(n);
    let mut failures = std::collections::BTreeMap::new();
    let table = ops();
    for case in 0..5_000u64 {
        let draw_shape = |pick: &mut dyn FnMut(usize) -> usize| -> Vec<usize> {
            (0..pick(5)).map(|_| if pick(13) == 0 { HUGE[pick(HUGE.len())] } else { pick(4) }).collect()
        };
        let xs = draw_shape(&mut pick);
        let ys = draw_shape(&mut pick);
        let shape = draw_shape(&mut pick);
        let fills = [Fill::Finite, Fill::Finite, Fill::Finite, Fill::Nan, Fill::Inf];
        let f = (fills[pick(5)], fills[pick(5)]);
        let axes = [-3, -2, -1, 0, 1, 2, 3, 4, isize::MIN, isize::MAX];
        let ax = (axes[pick(axes.len())], axes[pick(axes.len())]);
        let scalars = [0.5, -1.5, 0.0, f32::NAN, f32::INFINITY, 1e30, 2.0];
        let s = scalars[pick(scalars.len())];
        let op = &table[case as usize % table.len()];
        if failures.contains_key(op.name) {
            continue;
        }
        if let Some(a) = args(xs, ys, f, ax, s, pick(5), shape, case) {
            if let Err(e) = check(op, &a) {
                failures.insert(op.name, e.to_string());
            }
        }
    }
    let report: Vec<String> = failures.values().cloned().collect();
    assert!(report.is_empty(), "{} ops broke a rule:\n{}", report.len(), report.join("\n"));
}

// Cases the property test above drew on CI or in seeded sweeps (`PROPTEST_RNG_SEED=N
// PROPTEST_CASES=3000`), kept as named regressions.

/// `[2^40, 0]`: nothing stored, but an outer axis of 2^40 that a kernel's loop once walked
/// element by element (CI ran out of its 90 minutes on index_select of such a view).
fn empty_with_a_huge_axis() -> Tensor {
    Tensor::zeros(&[1, 0]).unwrap().broadcast_to(&[1 << 40, 0]).unwrap()
}

#[test]
fn ops_on_an_empty_tensor_with_a_huge_axis_return_without_walking_it() {
    let x = empty_with_a_huge_axis();
    let none = Indices::new(vec![], &[0]).unwrap();
    assert_eq!(x.index_select(1, &none).unwrap().shape(), &[1 << 40, 0]);
    let y = Tensor::zeros(&[1, 3, 0]).unwrap().broadcast_to(&[1 << 40, 3, 0]).unwrap();
    assert_eq!(y.prod(1, false).unwrap().shape(), &[1 << 40, 0]);
    assert_eq!(y.cumsum(1).unwrap().shape(), &[1 << 40, 3, 0]);
    assert_eq!(y.max(1, false).unwrap().shape(), &[1 << 40, 0]);
    assert_eq!(y.logsumexp(1, false).unwrap().shape(), &[1 << 40, 0]);
    assert_eq!(y.softmax(1).unwrap().shape(), &[1 << 40, 3, 0]);
}

#[test]
fn composite_ops_name_themselves_when_a_view_is_too_large_for_their_callees() {
    let huge = Tensor::scalar(1.0).broadcast_to(&[1 << 40, 3]).unwrap();
    let small = Tensor::ones(&[3, 3]).unwrap();
    let msg = |r: Result<Tensor>| r.expect_err("a view of 3·2^40 elements is refused").to_string();
    assert!(msg(Tensor::einsum("ij,jk->ik", &huge, &small)).contains("einsum"));
    assert!(msg(huge.unsqueeze(0).unwrap().matmul(&small)).contains("matmul"));
    let line = Tensor::scalar(1.0).broadcast_to(&[1 << 40]).unwrap();
    assert!(msg(loss::mse_loss(&line, &line, Reduction::Mean)).contains("mse_loss"));
    let x = Tensor::zeros(&[0, 1, 1]).unwrap().broadcast_to(&[0, 1, 1 << 40]).unwrap();
    let w = Tensor::zeros(&[0, 1, 1]).unwrap();
    let opts = Conv1dOptions { stride: 2, padding: 0, dilation: 1, groups: 1 };
    if let Err(e) = x.conv1d(&w, None, opts) {
        assert!(e.to_string().contains("conv1d"), "{e}");
    }
}

#[test]
fn a_scatter_add_of_a_view_too_large_to_read_is_an_error_not_a_panic() {
    let x = Tensor::zeros(&[0]).unwrap();
    let src = Tensor::scalar(1.0).broadcast_to(&[1 << 40]).unwrap();
    let none = Indices::new(vec![], &[0]).unwrap();
    let err = x.scatter_add(0, &none, &src).expect_err("4 TiB of source is refused");
    assert!(err.to_string().contains("scatter_add"), "{err}");
}

#[test]
fn a_linear_whose_empty_result_has_an_overflowing_shape_is_refused() {
    let x = Tensor::zeros(&[0, 2, 0]).unwrap();
    let w = Tensor::zeros(&[1, 0]).unwrap().broadcast_to(&[1 << 62, 0]).unwrap();
    let err = x.linear(&w, None).expect_err("[0, 2, 2^62] overflows");
    assert!(err.to_string().contains("linear"), "{err}");
}

#[test]
fn a_linear_of_an_empty_view_with_a_huge_leading_axis_gives_its_empty_result() {
    let x = Tensor::zeros(&[1, 0]).unwrap().broadcast_to(&[usize::MAX / 2, 0]).unwrap().into_variable();
    let w = Tensor::zeros(&[0, 0]).unwrap().into_variable();
    match x.linear(&w, None) {
        Ok(y) => {
            assert_eq!(y.shape(), &[usize::MAX / 2, 0]);
            y.sum_all().backward().unwrap();
            assert_eq!(w.grad().unwrap().shape(), &[0, 0]);
        }
        Err(e) => assert!(e.to_string().contains("linear"), "{e}"),
    }
}
