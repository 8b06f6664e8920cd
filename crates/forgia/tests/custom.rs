//! Custom VJPs through `custom_op`: softplus validated by gradcheck, a two-input op with
//! per-operand pruning, the named errors for misbehaving backwards, and second order through
//! a backward written with differentiable ops.

mod common;

use common::lcg;

use std::sync::{Arc, Mutex};

use forgia::{custom_op, gradcheck, BackwardOptions, CustomOp, ErrorKind, GradcheckOptions, Result, Tensor};

fn softplus(x: f32) -> f32 {
    x.exp().ln_1p()
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// y = log(1 + eˣ); backward: gx = gy · sigmoid(x), with sigmoid(x) = (1 + tanh(x/2)) / 2 in
/// differentiable ops so that create_graph passes can differentiate it again.
struct Softplus;

impl CustomOp for Softplus {
    fn name(&self) -> &'static str {
        "softplus"
    }

    fn forward(&self, xs: &[Tensor]) -> Result<Tensor> {
        assert!(!xs[0].requires_grad(), "forward sees detached inputs");
        Tensor::from_vec(xs[0].to_vec().into_iter().map(softplus).collect(), xs[0].shape())
    }

    fn backward(&self, xs: &[Tensor], _y: &Tensor, gy: &Tensor, _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let s = xs[0].scale(0.5).tanh().add_scalar(1.0).scale(0.5);
        Ok(vec![Some(gy.mul(&s)?)])
    }
}

/// y = a · b (same shapes), recording which operands the adapter asked for.
struct Product {
    asked: Arc<Mutex<Vec<Vec<bool>>>>,
}

impl CustomOp for Product {
    fn name(&self) -> &'static str {
        "product"
    }

    fn forward(&self, xs: &[Tensor]) -> Result<Tensor> {
        xs[0].mul(&xs[1])
    }

    fn backward(&self, xs: &[Tensor], _y: &Tensor, gy: &Tensor, needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        self.asked.lock().unwrap().push(needs.to_vec());
        let ga = if needs[0] { Some(gy.mul(&xs[1])?) } else { None };
        let gb = if needs[1] { Some(gy.mul(&xs[0])?) } else { None };
        Ok(vec![ga, gb])
    }
}

/// An op whose backward misbehaves in a chosen way.
enum Faulty {
    WrongShape,
    Missing,
    TooMany,
    Fails,
}

impl CustomOp for Faulty {
    fn name(&self) -> &'static str {
        "faulty"
    }

    fn forward(&self, xs: &[Tensor]) -> Result<Tensor> {
        Ok(xs[0].scale(2.0))
    }

    fn backward(&self, _xs: &[Tensor], _y: &Tensor, gy: &Tensor, _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        match self {
            Faulty::WrongShape => Ok(vec![Some(gy.sum_all())]),
            Faulty::Missing => Ok(vec![None]),
            Faulty::TooMany => Ok(vec![Some(gy.scale(2.0)), Some(gy.clone())]),
            Faulty::Fails => gy.reshape(&[7]).map(|g| vec![Some(g)]),
        }
    }
}

#[test]
fn softplus_custom_op_gives_log_two_and_half_at_zero() {
    let x = Tensor::variable(vec![0.0, 1.0], &[2]).unwrap();
    let y = custom_op(Softplus, &[&x]).unwrap();
    assert_eq!(y.grad_fn(), Some("softplus"));
    y.sum_all().backward().unwrap();
    // y(0) = ln 2, dy/dx(0) = sigmoid(0) = 1/2; dy/dx(1) = sigmoid(1)
    let (yv, g) = (y.to_vec(), x.grad().unwrap().to_vec());
    assert!((yv[0] - std::f32::consts::LN_2).abs() < 1e-6);
    assert!((g[0] - 0.5).abs() < 1e-6 && (g[1] - sigmoid(1.0)).abs() < 1e-6);
}

#[test]
fn softplus_custom_op_passes_gradcheck_on_several_shapes() {
    for shape in [vec![5], vec![2, 3], vec![2, 1, 4]] {
        let n = shape.iter().product();
        let x = Tensor::variable(lcg(n, n as u64, 2.0), &shape).unwrap();
        let r =
            gradcheck(|xs| Ok(custom_op(Softplus, &[&xs[0]])?.sum_all()), &[x], GradcheckOptions::default()).unwrap();
        assert!(r.passed(), "{shape:?}: {:?}", r.first_mismatch);
    }
}

#[test]
fn softplus_custom_op_passes_gradcheck_on_transposed_input() {
    let x = Tensor::variable(lcg(12, 3, 2.0), &[3, 4]).unwrap();
    let f = |xs: &[Tensor]| {
        let y = custom_op(Softplus, &[&xs[0].transpose(0, 1)?])?;
        y.mul(&Tensor::from_vec(lcg(12, 9, 2.0), &[4, 3])?).map(|t| t.sum_all())
    };
    let r = gradcheck(f, &[x], GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);
}

#[test]
fn two_input_custom_op_passes_gradcheck_and_asks_only_for_needed_operands() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let a = Tensor::variable(lcg(6, 1, 2.0), &[2, 3]).unwrap();
    let b = Tensor::variable(lcg(6, 2, 2.0), &[2, 3]).unwrap();
    let op = |xs: &[Tensor]| {
        Ok(custom_op(Product { asked: Arc::new(Mutex::new(Vec::new())) }, &[&xs[0], &xs[1]])?.sum_all())
    };
    let r = gradcheck(op, &[a.clone(), b.clone()], GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);

    let c = b.detach(); // a constant operand
    custom_op(Product { asked: asked.clone() }, &[&a, &c]).unwrap().sum_all().backward().unwrap();
    assert_eq!(*asked.lock().unwrap(), vec![vec![true, false]]);
    assert_eq!(a.grad().unwrap().to_vec(), c.to_vec()); // d(a·c)/da = c
    assert!(c.grad().is_none());
}

#[test]
fn custom_op_builds_no_node_under_no_grad_or_over_constants() {
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let y = {
        let _g = forgia::no_grad();
        custom_op(Softplus, &[&x]).unwrap()
    };
    assert!(!y.requires_grad());
    assert!(!custom_op(Softplus, &[&x.detach()]).unwrap().requires_grad());
}

fn backward_error(op: Faulty) -> ErrorKind {
    let x = Tensor::variable(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let y = custom_op(op, &[&x]).unwrap();
    y.sum_all().backward().unwrap_err().into_kind()
}

#[test]
fn wrong_gradient_shape_is_named_gradient_shape_mismatch() {
    let e = backward_error(Faulty::WrongShape);
    assert!(
        matches!(&e, ErrorKind::GradientShapeMismatch { op: "faulty", operand: 0, expected, got }
            if expected == &[3] && got.is_empty()),
        "{e:?}"
    );
}

#[test]
fn omitted_needed_gradient_is_named_missing_backward_gradient() {
    let e = backward_error(Faulty::Missing);
    assert!(matches!(e, ErrorKind::MissingBackwardGradient { op: "faulty", operand: 0 }), "{e:?}");
}

#[test]
fn too_many_gradient_slots_are_an_invalid_argument() {
    let e = backward_error(Faulty::TooMany);
    assert!(matches!(e, ErrorKind::InvalidArgument { op: "faulty", arg: "backward", .. }), "{e:?}");
}

#[test]
fn an_error_inside_the_users_backward_is_nested_under_the_op_name() {
    let e = backward_error(Faulty::Fails);
    match e {
        ErrorKind::Nested { context: "faulty", source } => {
            assert!(matches!(source.kind(), ErrorKind::InvalidReshape { .. }), "{source:?}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_backward_leaves_the_graph_runnable_again() {
    let x = Tensor::variable(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let y = custom_op(Faulty::Missing, &[&x]).unwrap().sum_all();
    assert!(y.backward().is_err());
    assert!(y.backward().is_err()); // not BackwardAlreadyRun: the pass rolled back
    assert!(x.grad().is_none());
}

/// Hessian-vector product of L = Σ softplus(x): H = diag(s(1 - s)) with s = sigmoid(x).
#[test]
fn create_graph_through_a_differentiable_custom_backward_gives_the_analytic_hvp() {
    let xv = vec![-1.5f32, -0.2, 0.4, 2.0];
    let vv = vec![1.0f32, -2.0, 0.5, 3.0];
    let x = Tensor::variable(xv.clone(), &[4]).unwrap();
    let loss = custom_op(Softplus, &[&x]).unwrap().sum_all();
    loss.backward_with(None, BackwardOptions { create_graph: true, ..Default::default() }).unwrap();
    let g = x.grad().unwrap();
    assert!(g.requires_grad(), "the gradient carries a graph");
    x.zero_grad();
    let v = Tensor::from_vec(vv.clone(), &[4]).unwrap();
    g.mul(&v).unwrap().sum_all().backward().unwrap();
    let hvp = x.grad().unwrap().to_vec();
    for i in 0..4 {
        let s = sigmoid(xv[i]);
        let expected = s * (1.0 - s) * vv[i];
        assert!((hvp[i] - expected).abs() <= 1e-5 * (1.0 + expected.abs()), "{i}: {} vs {expected}", hvp[i]);
    }
}
