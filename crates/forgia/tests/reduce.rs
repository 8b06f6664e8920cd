//! Reductions and scans: literal values with their analytic derivatives, gradchecks over
//! several axis sets and strided inputs, second-order gradchecks, JAX goldens, and bad input.

mod common;

use common::golden::{self, assert_close, Case};
use common::second_order_unary;
use forgia::{gradcheck, ErrorKind, GradcheckOptions, Result, Rng, Tensor};

type ReduceFn = fn(&Tensor) -> Result<Tensor>;

fn t(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape).unwrap()
}

fn close(actual: &Tensor, expected: &[f32]) {
    assert_close(actual, &t(expected, actual.shape()), 1e-5, "value");
}

/// Distinct values (no ties for max/min), shuffled, in roughly `-2..2`.
fn distinct(shape: &[usize], rng: &mut Rng) -> Tensor {
    let n: usize = shape.iter().product();
    let mut data: Vec<f32> = (0..n).map(|i| -2.0 + 4.0 * i as f32 / n.max(1) as f32).collect();
    for i in (1..n).rev() {
        let j = (rng.uniform() * (i + 1) as f32) as usize % (i + 1);
        data.swap(i, j);
    }
    Tensor::from_vec(data, shape).unwrap()
}

/// Every reduction under test, each applied to a `[2, 3, 4]` input.
fn reductions() -> Vec<(&'static str, ReduceFn)> {
    vec![
        ("sum", |x| x.sum([0, 2], false)),
        ("mean", |x| x.mean([-1], true)),
        ("max", |x| x.max(1, false)),
        ("min", |x| x.min(-1, true)),
        ("max_all", |x| x.max_all()),
        ("min_all", |x| x.min_all()),
        ("var", |x| x.var([0, 2], 1, false)),
        ("var_biased", |x| x.var([1], 0, true)),
        ("logsumexp", |x| x.logsumexp([1, 2], false)),
        ("prod", |x| x.prod(1, false)),
        ("prod_keepdim", |x| x.prod(-1, true)),
        ("cumsum", |x| x.cumsum(1)),
        ("cumsum_last", |x| x.cumsum(-1)),
        ("sum_all", |x| Ok(x.sum_all())),
        ("mean_all", |x| x.mean_all()),
    ]
}

#[test]
fn max_and_min_send_the_gradient_to_the_first_extremum() {
    let x = Tensor::variable(vec![1.0, 3.0, 3.0, 0.0, -1.0, 5.0, -1.0, 2.0], &[2, 4]).unwrap();
    let y = x.max(1, false).unwrap();
    close(&y, &[3.0, 5.0]);
    let z = x.min(1, true).unwrap();
    assert_eq!(z.shape(), &[2, 1]);
    close(&z, &[0.0, -1.0]);
    y.add(&z.reshape(&[2]).unwrap().scale(10.0)).unwrap().sum_all().backward().unwrap();
    // d max: 1 at the first 3 (index 1) and at 5; d min (×10): at 0 and the first -1.
    close(&x.grad().unwrap(), &[0.0, 1.0, 0.0, 10.0, 10.0, 1.0, 0.0, 0.0]);
    assert_eq!(x.argmax(1, false).unwrap().positions(), vec![1, 1]);
    assert_eq!(x.argmin(-1, false).unwrap().positions(), vec![3, 0]);
    assert_eq!(x.argmax(0, false).unwrap().positions(), vec![0, 1, 0, 1]);
}

#[test]
fn max_all_and_min_all_reduce_every_element() {
    let x = Tensor::variable(vec![1.0, 7.0, -3.0, 7.0], &[2, 2]).unwrap();
    let hi = x.max_all().unwrap();
    let lo = x.min_all().unwrap();
    assert_eq!(hi.shape(), &[] as &[usize]);
    assert_eq!((hi.item().unwrap(), lo.item().unwrap()), (7.0, -3.0));
    hi.sub(&lo).unwrap().backward().unwrap();
    close(&x.grad().unwrap(), &[0.0, 0.5, -1.0, 0.5]); // the two 7s share +1, -3 gets -1
    assert_eq!(Tensor::scalar(2.0).max_all().unwrap().item().unwrap(), 2.0);
}

#[test]
fn var_matches_hand_computed_values_and_derivative() {
    let x = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0, 4.0, 4.0], &[2, 3]).unwrap();
    let v = x.var(1, 1, false).unwrap();
    close(&v, &[1.0, 0.0]); // mean 2: (1 + 0 + 1)/2; constant row: 0
    v.sum_all().backward().unwrap();
    // d var / dx = 2 (x - mean) / (n - 1)
    close(&x.grad().unwrap(), &[-1.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    let pop = t(&[1.0, 2.0, 3.0, 4.0], &[4]).var(0, 0, true).unwrap();
    assert_eq!(pop.shape(), &[1]);
    close(&pop, &[1.25]);
}

#[test]
fn logsumexp_is_stable_for_large_and_infinite_inputs() {
    let x = Tensor::variable(vec![1000.0, 1000.0, -1.0, 0.0], &[2, 2]).unwrap();
    let y = x.logsumexp(1, false).unwrap();
    close(&y, &[1000.0 + 2f32.ln(), (1.0 + (-1f32).exp()).ln()]);
    y.sum_all().backward().unwrap();
    // d lse / dx = softmax(x)
    let e = (-1f32).exp();
    close(&x.grad().unwrap(), &[0.5, 0.5, e / (1.0 + e), 1.0 / (1.0 + e)]);
    let neg_inf = t(&[f32::NEG_INFINITY, f32::NEG_INFINITY], &[2]).logsumexp(0, false).unwrap();
    assert_eq!(neg_inf.item().unwrap(), f32::NEG_INFINITY);
}

#[test]
fn prod_gradient_handles_zeros_exactly() {
    // One zero: only that element gets the product of the others; two zeros: all gradients 0.
    let x = Tensor::variable(vec![2.0, 0.0, 3.0, 0.0, 5.0, 0.0, 1.5, 2.0, 4.0], &[3, 3]).unwrap();
    let y = x.prod(1, false).unwrap();
    close(&y, &[0.0, 0.0, 12.0]);
    y.sum_all().backward().unwrap();
    close(&x.grad().unwrap(), &[0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 8.0, 6.0, 3.0]);
    assert_eq!(t(&[], &[0]).prod(0, false).unwrap().item().unwrap(), 1.0);
}

#[test]
fn cumsum_runs_along_the_axis_and_backward_sums_from_the_end() {
    let x = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let y = x.cumsum(1).unwrap();
    close(&y, &[1.0, 3.0, 6.0, 4.0, 9.0, 15.0]);
    close(&x.cumsum(0).unwrap(), &[1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
    y.backward_with_grad(&t(&[1.0, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3])).unwrap();
    // gx_j = Σ_{k >= j} gy_k
    close(&x.grad().unwrap(), &[6.0, 5.0, 3.0, 3.0, 2.0, 1.0]);
}

#[test]
fn every_reduction_passes_gradcheck_on_plain_transposed_and_sliced_inputs() {
    let mut rng = Rng::new(21);
    for (name, f) in reductions() {
        let check = |g: &dyn Fn(&[Tensor]) -> Result<Tensor>, x: Tensor| {
            let report = gradcheck(g, &[x], GradcheckOptions::default()).unwrap();
            assert!(report.passed(), "{name}: {:?}", report.first_mismatch);
        };
        check(&|xs| f(&xs[0]), distinct(&[2, 3, 4], &mut rng).into_variable());
        check(&|xs| f(&xs[0].permute(&[2, 0, 1])?), distinct(&[4, 2, 3], &mut rng).into_variable());
        check(&|xs| f(&xs[0].slice(0, 0, 4, 2)?), distinct(&[4, 3, 4], &mut rng).into_variable());
    }
}

#[test]
fn reduction_backward_records_are_differentiable_a_second_time() {
    let mut rng = Rng::new(22);
    // Nonlinear wrappers make the first-order gradient depend on x for the linear ops too.
    let cases: Vec<(&str, ReduceFn)> = vec![
        ("sum", |x| Ok(x.square().sum([0, 2], false)?.square())),
        ("mean", |x| Ok(x.mean(1, true)?.square())),
        ("max", |x| Ok(x.max(1, false)?.square())),
        ("min_all", |x| Ok(x.min_all()?.square())),
        ("var", |x| x.var([0, 2], 1, false)),
        ("logsumexp", |x| x.logsumexp([1, 2], true)),
        ("prod", |x| x.prod(1, false)),
        ("cumsum", |x| Ok(x.cumsum(-1)?.square())),
    ];
    for (name, f) in cases {
        let report = second_order_unary::check(&f, &distinct(&[2, 3, 4], &mut rng));
        assert!(report.passed(), "second order {name}: {:?}", report.first_mismatch);
    }
}

/// Applies a golden case's op to its input.
fn apply(case: &Case, x: &Tensor) -> Result<Tensor> {
    let a = &case.attrs;
    let axes =
        || -> Vec<isize> { a["axes"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap() as isize).collect() };
    let axis = || a["axis"].as_i64().unwrap() as isize;
    let keepdim = || a["keepdim"].as_bool().unwrap_or(false);
    match case.op.as_str() {
        "sum" => x.sum(axes(), keepdim()),
        "mean" => x.mean(axes(), keepdim()),
        "max" => x.max(axis(), keepdim()),
        "min" => x.min(axis(), keepdim()),
        "var" => x.var(axes(), a["correction"].as_u64().unwrap() as usize, keepdim()),
        "logsumexp" => x.logsumexp(axes(), keepdim()),
        "prod" => x.prod(axis(), keepdim()),
        "cumsum" => x.cumsum(axis()),
        "sum_all" => Ok(x.sum_all()),
        "mean_all" => x.mean_all(),
        other => panic!("golden op {other} has no mapping"),
    }
}

#[test]
fn reductions_match_the_jax_goldens() {
    let cases = golden::load("reduce");
    assert!(cases.len() >= 30);
    for case in &cases {
        let rel = if case.inputs[0].numel() > 1000 { 1e-4 } else { 1e-5 };
        golden::check_case(case, rel, |xs| apply(case, &xs[0]));
        if let Some(idx) = case.raw.get("output_indices") {
            let x = &case.inputs[0];
            let want: Vec<usize> = golden::tensor(idx).to_vec().iter().map(|&v| v as usize).collect();
            let axis = case.attrs["axis"].as_i64().unwrap() as isize;
            let got = if case.op == "max" { x.argmax(axis, false) } else { x.argmin(axis, false) };
            assert_eq!(got.unwrap().positions(), want, "{} indices", case.name);
        }
    }
}

#[test]
fn reductions_reject_bad_axes() {
    let x = t(&[1.0; 6], &[2, 3]);
    for (name, f) in [
        ("sum", (|x| x.sum(2, false)) as ReduceFn),
        ("mean", |x| x.mean(-3, false)),
        ("max", |x| x.max(2, false)),
        ("min", |x| x.min(-3, true)),
        ("var", |x| x.var(5, 0, false)),
        ("logsumexp", |x| x.logsumexp(2, false)),
        ("prod", |x| x.prod(2, false)),
        ("cumsum", |x| x.cumsum(-3)),
        ("argmax", |x| x.argmax(2, false).map(|_| Tensor::scalar(0.0))),
        ("argmin", |x| x.argmin(2, false).map(|_| Tensor::scalar(0.0))),
    ] {
        let e = f(&x).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::AxisOutOfRange { .. }), "{name}: {e}");
    }
    for e in [x.sum([1, 1], false).unwrap_err(), x.var([0, -2], 0, false).unwrap_err()] {
        assert!(matches!(e.kind(), ErrorKind::DuplicateAxis { .. }), "{e}");
    }
    let e = x.max("rows", false).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::UnknownAxisName { .. }));
}

#[test]
fn reductions_over_empty_axes_are_errors_where_they_have_no_value() {
    let empty = Tensor::zeros(&[2, 0]).unwrap();
    for (name, r) in [
        ("max", empty.max(1, false)),
        ("min", empty.min(1, false)),
        ("max_all", empty.max_all()),
        ("min_all", empty.min_all()),
        ("var", empty.var(1, 0, false)),
        ("logsumexp", empty.logsumexp(1, false)),
        ("mean", empty.mean(1, false)),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::EmptyTensor { .. }), "{name}: {e}");
    }
    assert!(matches!(empty.argmax(1, false).unwrap_err().kind(), ErrorKind::EmptyTensor { .. }));
    // Reducing the non-empty axis is fine.
    assert_eq!(empty.max(0, false).unwrap().shape(), &[0]);
    assert_eq!(empty.cumsum(1).unwrap().shape(), &[2, 0]);
    assert_eq!(empty.sum(1, false).unwrap().to_vec(), vec![0.0, 0.0]);
}

#[test]
fn var_rejects_a_correction_that_leaves_no_degrees_of_freedom() {
    let e = t(&[1.0, 2.0], &[2]).var(0, 2, false).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { op: "var", arg: "correction", .. }));
}

#[test]
fn max_all_with_ties_splits_the_gradient_evenly_like_torch_max() {
    let x = Tensor::variable(vec![2.0, 5.0, 5.0, 1.0, 5.0], &[5]).unwrap();
    x.max_all().unwrap().scale(3.0).backward().unwrap();
    close(&x.grad().unwrap(), &[0.0, 1.0, 1.0, 0.0, 1.0]); // 3 shared by three maxima
    let y = Tensor::variable(vec![1.0, f32::NAN, 0.0, f32::NAN], &[2, 2]).unwrap();
    let m = y.min_all().unwrap();
    assert!(m.item().unwrap().is_nan());
    m.backward().unwrap();
    close(&y.grad().unwrap(), &[0.0, 0.5, 0.0, 0.5]); // a NaN extremum: the NaNs share it
                                                      // the axis form still picks one position, as torch.max(dim) does
    let z = Tensor::variable(vec![5.0, 5.0], &[2]).unwrap();
    z.max(0, false).unwrap().backward().unwrap();
    close(&z.grad().unwrap(), &[1.0, 0.0]);
}

#[test]
fn the_variance_of_identical_values_is_exactly_zero() {
    let x = Tensor::from_vec(vec![0.1; 3], &[3]).unwrap();
    assert_eq!(x.var(0, 1, false).unwrap().to_vec(), [0.0]);
    let rows = Tensor::from_vec(vec![0.1, 0.1, 0.1, 1e4 + 1.0, 1e4 + 2.0, 1e4 + 3.0], &[2, 3]).unwrap();
    assert_eq!(rows.var(1, 1, false).unwrap().to_vec(), [0.0, 1.0]);
    let cols = Tensor::from_vec(vec![0.7; 12], &[3, 4]).unwrap();
    assert_eq!(cols.var([0, 1], 0, true).unwrap().to_vec(), [0.0]);
}
