//! Pointwise ops: literal values with their analytic derivatives, gradchecks over several
//! shapes (broadcast, transposed and sliced inputs), second-order gradchecks, JAX goldens,
//! operators, and one bad-input test per op.

mod common;

use common::golden::{self, assert_close, Case};
use common::second_order_unary;
use forgia::{gradcheck, ErrorKind, GradcheckOptions, Result, Rng, Tensor};

type UnaryFn = fn(&Tensor) -> Result<Tensor>;
type BinaryFn = fn(&Tensor, &Tensor) -> Result<Tensor>;
/// A binary op with the ranges its two operands are sampled from.
type BinaryCase = (&'static str, BinaryFn, (f32, f32), (f32, f32));

fn t(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape).unwrap()
}

fn close(actual: &Tensor, expected: &[f32]) {
    assert_close(actual, &t(expected, actual.shape()), 1e-5, "value");
}

/// Values in `lo..hi`, pushed at least 0.1 away from every point in `kinks`.
fn sample(shape: &[usize], lo: f32, hi: f32, kinks: &[f32], rng: &mut Rng) -> Tensor {
    let data = Tensor::rand(shape, lo, hi, rng).unwrap().to_vec();
    let data = data
        .into_iter()
        .map(|mut v| {
            for &k in kinks {
                if (v - k).abs() < 0.1 {
                    v = if v >= k { k + 0.1 + (v - k) } else { k - 0.1 + (v - k) };
                }
            }
            v
        })
        .collect();
    Tensor::from_vec(data, shape).unwrap()
}

/// Every unary op with the input range it is checked on and its kinks.
fn unary_ops() -> Vec<(&'static str, UnaryFn, f32, f32, Vec<f32>)> {
    vec![
        ("neg", |x| Ok(x.neg()), -2.0, 2.0, vec![]),
        ("exp", |x| Ok(x.exp()), -2.0, 2.0, vec![]),
        ("log", |x| Ok(x.log()), 0.3, 3.0, vec![]),
        ("sqrt", |x| Ok(x.sqrt()), 0.3, 3.0, vec![]),
        ("rsqrt", |x| Ok(x.rsqrt()), 0.3, 3.0, vec![]),
        ("square", |x| Ok(x.square()), -2.0, 2.0, vec![]),
        ("reciprocal", |x| Ok(x.reciprocal()), 0.5, 3.0, vec![]),
        ("abs", |x| Ok(x.abs()), -2.0, 2.0, vec![0.0]),
        ("sin", |x| Ok(x.sin()), -3.0, 3.0, vec![]),
        ("cos", |x| Ok(x.cos()), -3.0, 3.0, vec![]),
        ("tanh", |x| Ok(x.tanh()), -2.0, 2.0, vec![]),
        ("erf", |x| Ok(x.erf()), -2.0, 2.0, vec![]),
        ("sigmoid", |x| Ok(x.sigmoid()), -4.0, 4.0, vec![]),
        ("relu", |x| Ok(x.relu()), -2.0, 2.0, vec![0.0]),
        ("leaky_relu", |x| Ok(x.leaky_relu(0.2)), -2.0, 2.0, vec![0.0]),
        ("gelu", |x| Ok(x.gelu()), -3.0, 3.0, vec![]),
        ("gelu_tanh", |x| Ok(x.gelu_tanh()), -3.0, 3.0, vec![]),
        ("silu", |x| Ok(x.silu()), -3.0, 3.0, vec![]),
        ("softplus", |x| Ok(x.softplus()), -3.0, 3.0, vec![]),
        ("clamp", |x| x.clamp(-0.5, 0.7), -2.0, 2.0, vec![-0.5, 0.7]),
        ("pow_scalar", |x| Ok(x.pow_scalar(2.5)), 0.3, 2.0, vec![]),
        ("add_scalar", |x| Ok(x.add_scalar(0.5)), -2.0, 2.0, vec![]),
        ("sub_scalar", |x| Ok(x.sub_scalar(0.5)), -2.0, 2.0, vec![]),
        ("div_scalar", |x| Ok(x.div_scalar(4.0)), -2.0, 2.0, vec![]),
        ("scale", |x| Ok(x.scale(-1.5)), -2.0, 2.0, vec![]),
    ]
}

/// Every binary op with the operand ranges it is checked on.
fn binary_ops() -> Vec<BinaryCase> {
    vec![
        ("add", |a, b| a.add(b), (-2.0, 2.0), (-2.0, 2.0)),
        ("sub", |a, b| a.sub(b), (-2.0, 2.0), (-2.0, 2.0)),
        ("mul", |a, b| a.mul(b), (-2.0, 2.0), (-2.0, 2.0)),
        ("div", |a, b| a.div(b), (-2.0, 2.0), (0.5, 2.0)),
        ("pow", |a, b| a.pow(b), (0.3, 2.0), (-1.5, 2.0)),
        // Disjoint ranges keep maximum/minimum away from ties.
        ("maximum", |a, b| a.maximum(b), (-2.0, -0.1), (0.1, 2.0)),
        ("minimum", |a, b| a.minimum(b), (0.1, 2.0), (-2.0, -0.1)),
    ]
}

fn gradcheck_passes(name: &str, f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    let report = gradcheck(f, inputs, GradcheckOptions::default()).unwrap();
    assert!(report.passed(), "{name}: {:?}", report.first_mismatch);
}

#[test]
fn unary_values_and_derivatives_match_hand_computed_ones() {
    // (op, x, y, dy/dx) at x = 0.5, analytic derivatives written out.
    let x0 = 0.5f32;
    let s = 1.0 / (1.0 + (-x0).exp());
    let cases: Vec<(&str, UnaryFn, f32, f32)> = vec![
        ("neg", |x| Ok(x.neg()), -0.5, -1.0),                                // d(-x) = -1
        ("exp", |x| Ok(x.exp()), x0.exp(), x0.exp()),                        // d eˣ = eˣ
        ("log", |x| Ok(x.log()), x0.ln(), 2.0),                              // d ln x = 1/x
        ("sqrt", |x| Ok(x.sqrt()), x0.sqrt(), 0.5 / x0.sqrt()),              // 1/(2√x)
        ("rsqrt", |x| Ok(x.rsqrt()), 1.0 / x0.sqrt(), -0.5 * x0.powf(-1.5)), // -x^(-3/2)/2
        ("square", |x| Ok(x.square()), 0.25, 1.0),                           // 2x
        ("reciprocal", |x| Ok(x.reciprocal()), 2.0, -4.0),                   // -1/x²
        ("abs", |x| Ok(x.abs()), 0.5, 1.0),                                  // sign x
        ("sin", |x| Ok(x.sin()), x0.sin(), x0.cos()),                        // cos x
        ("cos", |x| Ok(x.cos()), x0.cos(), -x0.sin()),                       // -sin x
        ("tanh", |x| Ok(x.tanh()), x0.tanh(), 1.0 - x0.tanh().powi(2)),      // 1 - tanh²
        ("erf", |x| Ok(x.erf()), 0.520_499_9, std::f32::consts::FRAC_2_SQRT_PI * (-0.25f32).exp()), // 2/√π e^(-x²)
        ("sigmoid", |x| Ok(x.sigmoid()), s, s * (1.0 - s)),                  // σ(1-σ)
        ("relu", |x| Ok(x.relu()), 0.5, 1.0),                                // 1 for x > 0
        ("leaky_relu", |x| Ok(x.leaky_relu(0.1)), 0.5, 1.0),                 // 1 for x > 0
        // gelu: Φ(x) + x φ(x) with Φ(0.5) = 0.691462, φ(0.5) = 0.352065
        ("gelu", |x| Ok(x.gelu()), 0.5 * 0.691_462_5, 0.691_462_5 + 0.5 * 0.352_065_3),
        ("silu", |x| Ok(x.silu()), x0 * s, s * (1.0 + x0 * (1.0 - s))), // σ(1 + x(1-σ))
        ("softplus", |x| Ok(x.softplus()), (1.0 + x0.exp()).ln(), s),   // σ(x)
        ("clamp", |x| x.clamp(-1.0, 0.25), 0.25, 0.0),                  // 0 outside [min, max]
        ("pow_scalar", |x| Ok(x.pow_scalar(3.0)), 0.125, 0.75),         // 3x²
    ];
    for (name, f, y, dy) in cases {
        let x = Tensor::variable(vec![x0], &[1]).unwrap();
        let out = f(&x).unwrap();
        assert!((out.item().unwrap() - y).abs() < 1e-5, "{name}: y = {}, want {y}", out.item().unwrap());
        out.sum_all().backward().unwrap();
        let g = x.grad().unwrap().item().unwrap();
        assert!((g - dy).abs() < 1e-5, "{name}: dy/dx = {g}, want {dy}");
    }
}

#[test]
fn gelu_tanh_and_negative_side_values_match_hand_computed_ones() {
    // gelu_tanh(1) = 0.5 (1 + tanh(√(2/π) 1.044715)) = 0.841192; leaky_relu(-2, 0.1) = -0.2,
    // derivative 0.1; abs'(-2) = -1; softplus(30) = 30 (threshold), derivative 1.
    let x = Tensor::variable(vec![1.0, -2.0, 30.0], &[3]).unwrap();
    close(&x.gelu_tanh().narrow(0, 0, 1).unwrap(), &[0.841_192]);
    let y = x.leaky_relu(0.1).add(&x.abs()).unwrap().add(&x.softplus()).unwrap();
    close(&y, &[1.0 + 1.0 + 1.313_261_7, -0.2 + 2.0 + 0.126_928, 60.0 + 30.0]);
    y.sum_all().backward().unwrap();
    // d/dx: [1 + 1 + σ(1), 0.1 - 1 + σ(-2), 1 + 1 + 1]
    close(&x.grad().unwrap(), &[2.0 + 0.731_058_6, 0.1 - 1.0 + 0.119_202_92, 3.0]);
}

#[test]
fn binary_values_and_derivatives_match_hand_computed_ones() {
    let a = Tensor::variable(vec![2.0, 3.0, 1.0], &[3]).unwrap();
    let b = Tensor::variable(vec![3.0, 3.0, 0.5], &[3]).unwrap();
    let y = a.pow(&b).unwrap();
    close(&y, &[8.0, 27.0, 1.0]);
    y.sum_all().backward().unwrap();
    // d/da a^b = b a^(b-1); d/db a^b = a^b ln a
    close(&a.grad().unwrap(), &[12.0, 27.0, 0.5]);
    close(&b.grad().unwrap(), &[8.0 * 2f32.ln(), 27.0 * 3f32.ln(), 0.0]);

    let a = Tensor::variable(vec![1.0, 5.0, 2.0], &[3]).unwrap();
    let b = Tensor::variable(vec![3.0, 4.0, 2.0], &[3]).unwrap();
    let y = a.maximum(&b).unwrap().add(&a.minimum(&b).unwrap().scale(10.0)).unwrap();
    close(&y, &[3.0 + 10.0, 5.0 + 40.0, 2.0 + 20.0]);
    y.sum_all().backward().unwrap();
    // max sends gy to the larger, min to the smaller; ties split evenly (½ · 1 + ½ · 10).
    close(&a.grad().unwrap(), &[10.0, 1.0, 5.5]);
    close(&b.grad().unwrap(), &[1.0, 10.0, 5.5]);
}

#[test]
fn pow_of_zero_gives_the_exponent_no_gradient() {
    let a = Tensor::variable(vec![0.0, 0.0], &[2]).unwrap();
    let b = Tensor::variable(vec![2.0, 1.0], &[2]).unwrap();
    a.pow(&b).unwrap().sum_all().backward().unwrap();
    close(&b.grad().unwrap(), &[0.0, 0.0]);
    close(&a.grad().unwrap(), &[0.0, 1.0]); // b 0^(b-1)
}

#[test]
fn where_and_masked_fill_select_and_route_gradients() {
    let mask = t(&[1.0, 0.0, 1.0], &[3]);
    let a = Tensor::variable(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let b = Tensor::variable(vec![-1.0], &[1]).unwrap();
    let y = Tensor::where_(&mask, &a, &b).unwrap();
    close(&y, &[1.0, -1.0, 3.0]);
    y.backward_with_grad(&t(&[1.0, 2.0, 3.0], &[3])).unwrap();
    close(&a.grad().unwrap(), &[1.0, 0.0, 3.0]); // gy where mask
    close(&b.grad().unwrap(), &[2.0]); // summed over the broadcast
                                       // A [2,1] mask broadcasts against a [3] input to [2,3].
    let x = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let y = x.masked_fill(&t(&[0.0, 1.0, 0.0], &[3]), 9.0).unwrap();
    close(&y, &[1.0, 9.0, 3.0, 4.0, 9.0, 6.0]);
    y.sum_all().backward().unwrap();
    close(&x.grad().unwrap(), &[1.0, 0.0, 1.0, 1.0, 0.0, 1.0]);
    let y = Tensor::where_(&t(&[1.0, 0.0], &[2, 1]), &t(&[1.0, 2.0, 3.0], &[3]), &Tensor::scalar(0.0)).unwrap();
    assert_eq!(y.shape(), &[2, 3]);
    close(&y, &[1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
}

#[test]
fn operators_on_references_match_the_methods() {
    let a = t(&[1.0, 2.0], &[2]);
    let b = t(&[4.0, 8.0], &[2]);
    close(&(&a + &b).unwrap(), &[5.0, 10.0]);
    close(&(&a - &b).unwrap(), &[-3.0, -6.0]);
    close(&(&a * &b).unwrap(), &[4.0, 16.0]);
    close(&(&a / &b).unwrap(), &[0.25, 0.25]);
    close(&(&a + 1.0), &[2.0, 3.0]);
    close(&(&a - 1.0), &[0.0, 1.0]);
    close(&(&a * 2.0), &[2.0, 4.0]);
    close(&(&a / 2.0), &[0.5, 1.0]);
    close(&-&a, &[-1.0, -2.0]);
    assert!(matches!((&a + &t(&[1.0; 3], &[3])).unwrap_err().kind(), ErrorKind::ShapeMismatch { .. }));
}

#[test]
fn every_unary_op_passes_gradcheck_on_plain_transposed_and_sliced_inputs() {
    let mut rng = Rng::new(11);
    for (name, f, lo, hi, kinks) in unary_ops() {
        let plain = sample(&[5], lo, hi, &kinks, &mut rng).into_variable();
        gradcheck_passes(name, |xs| f(&xs[0]), &[plain]);
        let m = sample(&[3, 4], lo, hi, &kinks, &mut rng).into_variable();
        gradcheck_passes(name, |xs| f(&xs[0].transpose(0, 1)?), &[m]);
        let cube = sample(&[2, 3, 4], lo, hi, &kinks, &mut rng).into_variable();
        gradcheck_passes(name, |xs| f(&xs[0].slice(2, 0, 4, 2)?), &[cube]);
    }
}

#[test]
fn every_binary_op_passes_gradcheck_with_broadcasting_and_strided_operands() {
    let mut rng = Rng::new(12);
    for (name, f, (alo, ahi), (blo, bhi)) in binary_ops() {
        let shapes: [(&[usize], &[usize]); 4] = [(&[2, 3], &[2, 3]), (&[2, 3], &[3]), (&[2, 1], &[1, 3]), (&[], &[4])];
        for (sa, sb) in shapes {
            let a = Tensor::rand(sa, alo, ahi, &mut rng).unwrap().into_variable();
            let b = Tensor::rand(sb, blo, bhi, &mut rng).unwrap().into_variable();
            gradcheck_passes(name, |xs| f(&xs[0], &xs[1]), &[a, b]);
        }
        // Transposed left operand, stepped slice on the right.
        let a = Tensor::rand(&[4, 3], alo, ahi, &mut rng).unwrap().into_variable();
        let b = Tensor::rand(&[3, 8], blo, bhi, &mut rng).unwrap().into_variable();
        gradcheck_passes(name, |xs| f(&xs[0].transpose(0, 1)?, &xs[1].slice(1, 0, 8, 2)?), &[a, b]);
    }
}

#[test]
fn where_and_masked_fill_pass_gradcheck_with_broadcast_masks() {
    let mut rng = Rng::new(13);
    let mask = t(&[1.0, 0.0, 0.0, 1.0, 1.0, 0.0], &[2, 3]);
    let a = Tensor::randn(&[2, 3], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let b = Tensor::randn(&[3], 0.0, 1.0, &mut rng).unwrap().into_variable();
    gradcheck_passes("where", |xs| Tensor::where_(&mask, &xs[0], &xs[1]), &[a, b]);
    let x = Tensor::randn(&[3, 2], 0.0, 1.0, &mut rng).unwrap().into_variable();
    let row = t(&[0.0, 1.0], &[2]);
    gradcheck_passes("masked_fill", |xs| xs[0].transpose(0, 1)?.masked_fill(&row.reshape(&[2, 1])?, 3.0), &[x]);
}

#[test]
fn pointwise_backward_records_are_differentiable_a_second_time() {
    let mut rng = Rng::new(14);
    for (name, f, lo, hi, kinks) in unary_ops() {
        let x = sample(&[2, 3], lo, hi, &kinks, &mut rng);
        let report = second_order_unary::check(&f, &x);
        assert!(report.passed(), "second order {name}: {:?}", report.first_mismatch);
    }
    for (name, f, (alo, ahi), (blo, bhi)) in binary_ops() {
        let b = Tensor::rand(&[3], blo, bhi, &mut rng).unwrap();
        let a = Tensor::rand(&[2, 3], alo, ahi, &mut rng).unwrap();
        let lhs = |x: &Tensor| f(x, &b);
        let report = second_order_unary::check(&lhs, &a);
        assert!(report.passed(), "second order {name} (lhs): {:?}", report.first_mismatch);
        let rhs = |x: &Tensor| f(&a, x);
        let report = second_order_unary::check(&rhs, &b);
        assert!(report.passed(), "second order {name} (rhs): {:?}", report.first_mismatch);
    }
    let mask = t(&[1.0, 0.0, 1.0], &[3]);
    let f = |x: &Tensor| Tensor::where_(&mask, &x.square(), &x.exp());
    assert!(second_order_unary::check(&f, &t(&[0.3, -0.4, 1.1], &[3])).passed());
}

/// Applies a golden case's op to `xs` (the case's inputs as variables).
fn apply(case: &Case, xs: &[Tensor]) -> Result<Tensor> {
    let attr = |k: &str| case.attrs[k].as_f64().map(|v| v as f32);
    let mask = || golden::tensor(&case.attrs["mask"]);
    Ok(match case.op.as_str() {
        "add" => xs[0].add(&xs[1])?,
        "sub" => xs[0].sub(&xs[1])?,
        "mul" => xs[0].mul(&xs[1])?,
        "div" => xs[0].div(&xs[1])?,
        "pow" => xs[0].pow(&xs[1])?,
        "maximum" => xs[0].maximum(&xs[1])?,
        "minimum" => xs[0].minimum(&xs[1])?,
        "add_scalar" => xs[0].add_scalar(attr("scalar").unwrap()),
        "scale" => xs[0].scale(attr("scalar").unwrap()),
        "pow_scalar" => xs[0].pow_scalar(attr("exponent").unwrap()),
        "neg" => xs[0].neg(),
        "exp" => xs[0].exp(),
        "log" => xs[0].log(),
        "sqrt" => xs[0].sqrt(),
        "rsqrt" => xs[0].rsqrt(),
        "square" => xs[0].square(),
        "reciprocal" => xs[0].reciprocal(),
        "abs" => xs[0].abs(),
        "sin" => xs[0].sin(),
        "cos" => xs[0].cos(),
        "tanh" => xs[0].tanh(),
        "sigmoid" => xs[0].sigmoid(),
        "relu" => xs[0].relu(),
        "silu" => xs[0].silu(),
        "softplus" => xs[0].softplus(),
        "leaky_relu" => xs[0].leaky_relu(attr("negative_slope").unwrap()),
        "gelu" if case.attrs["approximate"] == "tanh" => xs[0].gelu_tanh(),
        "gelu" => xs[0].gelu(),
        "clamp" => xs[0].clamp(attr("min").unwrap(), attr("max").unwrap())?,
        "where" => Tensor::where_(&mask(), &xs[0], &xs[1])?,
        "masked_fill" => xs[0].masked_fill(&mask(), attr("value").unwrap())?,
        other => panic!("golden op {other} has no mapping"),
    })
}

#[test]
fn pointwise_ops_match_the_jax_goldens() {
    let cases = golden::load("pointwise");
    assert!(cases.len() >= 49);
    for case in &cases {
        golden::check_case(case, 1e-5, |xs| apply(case, xs));
    }
}

#[test]
fn binary_ops_reject_shapes_that_do_not_broadcast() {
    let (a, b) = (t(&[1.0; 6], &[2, 3]), t(&[1.0; 2], &[2]));
    for (name, f, _, _) in binary_ops() {
        let e = f(&a, &b).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::ShapeMismatch { .. }), "{name}: {e}");
    }
}

#[test]
fn unary_ops_accept_empty_and_scalar_tensors() {
    for (name, f, lo, _, _) in unary_ops() {
        assert_eq!(f(&Tensor::zeros(&[0, 3]).unwrap()).unwrap().shape(), &[0, 3], "{name}");
        assert_eq!(f(&Tensor::scalar(lo + 0.5)).unwrap().shape(), &[] as &[usize], "{name}");
    }
}

#[test]
fn clamp_rejects_inverted_or_nan_bounds() {
    let x = t(&[1.0], &[1]);
    assert!(matches!(x.clamp(1.0, 0.0).unwrap_err().kind(), ErrorKind::InvalidArgument { op: "clamp", .. }));
    assert!(matches!(x.clamp(f32::NAN, 0.0).unwrap_err().kind(), ErrorKind::InvalidArgument { .. }));
}

#[test]
fn where_and_masked_fill_reject_bad_shapes() {
    let x = t(&[1.0; 6], &[2, 3]);
    let e = Tensor::where_(&t(&[1.0, 0.0], &[2]), &x, &x).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ShapeMismatch { .. }));
    // The mask may not grow the input's shape.
    let e = t(&[1.0; 3], &[3]).masked_fill(&t(&[1.0; 6], &[2, 3]), 0.0).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ShapeMismatch { op: "masked_fill", .. }));
}

#[test]
fn any_nonzero_mask_value_is_true_as_in_pytorch() {
    let (a, b) = (t(&[1.0, 2.0, 3.0, 4.0], &[4]), t(&[-1.0; 4], &[4]));
    let mask = t(&[0.5, 0.0, -2.0, f32::NAN], &[4]);
    assert_eq!(Tensor::where_(&mask, &a, &b).unwrap().to_vec(), [1.0, -1.0, 3.0, 4.0]);
    assert_eq!(a.masked_fill(&mask, 9.0).unwrap().to_vec(), [9.0, 2.0, 9.0, 9.0]);
    let v = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0], &[4]).unwrap();
    Tensor::where_(&mask, &v, &b).unwrap().sum_all().backward().unwrap();
    assert_eq!(v.grad().unwrap().to_vec(), [1.0, 0.0, 1.0, 1.0]);
}

#[test]
fn relu_and_its_relatives_propagate_nan() {
    let x = Tensor::variable(vec![f32::NAN, -1.0, 2.0], &[3]).unwrap();
    let y = x.relu();
    let v = y.to_vec();
    assert!(v[0].is_nan(), "relu(NaN) was 0");
    assert_eq!(&v[1..], [0.0, 2.0]);
    y.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), [1.0, 0.0, 1.0]); // PyTorch's threshold_backward
    let nan = t(&[f32::NAN], &[1]);
    assert!(nan.leaky_relu(0.1).item().unwrap().is_nan());
    assert!(nan.clamp(-1.0, 1.0).unwrap().item().unwrap().is_nan());
    assert!(nan.maximum(&t(&[0.0], &[1])).unwrap().item().unwrap().is_nan());
    assert!(t(&[0.0], &[1]).minimum(&nan).unwrap().item().unwrap().is_nan());
    assert!(nan.softplus().item().unwrap().is_nan());
}

#[test]
fn gelu_uses_an_accurate_erf() {
    // erf(x) reference values (Python math.erf, correctly rounded) at f32-exact points.
    let x = t(&[0.0, 0.25, -1.5, 3.0, -4.0], &[5]);
    let want = [0.0, 0.276_326_4, -0.966_105_16, 0.999_977_9, -0.999_999_98];
    for (g, w) in x.erf().to_vec().iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "erf: {g} vs {w}");
    }
}
