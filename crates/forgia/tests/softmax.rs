//! The softmax family: literal values, stability on large logits, gradchecks (incl. strided
//! inputs), JAX goldens, second order through `create_graph`, bad axes.

mod common;

use common::golden::{self, assert_close};
use common::second_order;
use common::{passes, var};
use forgia::{ErrorKind, Tensor};

#[test]
fn softmax_goldens_match_jax() {
    for c in golden::load("softmax") {
        let x = c.inputs[0].clone().into_variable();
        let axis = c.attrs["axis"].as_i64().unwrap();
        let y = match c.op.as_str() {
            "softmax" => x.softmax(axis),
            "log_softmax" => x.log_softmax(axis),
            op => panic!("unhandled softmax op {op}"),
        }
        .unwrap();
        assert_close(&y, c.output.as_ref().unwrap(), 1e-5, &c.name);
        y.backward_with_grad(c.cotangent.as_ref().unwrap()).unwrap();
        assert_close(&x.grad().unwrap(), c.grads[0].as_ref().unwrap(), 1e-5, &format!("{} grad", c.name));
    }
}

#[test]
fn softmax_gives_literal_values_and_gradients() {
    // softmax([0, ln 3]) = [1/4, 3/4]; with gy = [1, 0]: gx = y*(gy - y·gy) = [1/4*3/4, -3/4*1/4].
    let x = Tensor::variable(vec![0.0, 3f32.ln()], &[2]).unwrap();
    let y = x.softmax(0).unwrap();
    assert_close(&y, &Tensor::from_vec(vec![0.25, 0.75], &[2]).unwrap(), 1e-6, "softmax");
    y.backward_with_grad(&Tensor::from_vec(vec![1.0, 0.0], &[2]).unwrap()).unwrap();
    assert_close(&x.grad().unwrap(), &Tensor::from_vec(vec![0.1875, -0.1875], &[2]).unwrap(), 1e-6, "grad");
    // log_softmax: gx = gy - softmax * sum(gy); with gy = [1, 0]: [1 - 1/4, -3/4].
    let z = Tensor::variable(vec![0.0, 3f32.ln()], &[2]).unwrap();
    let l = z.log_softmax(-1).unwrap();
    assert_close(&l, &Tensor::from_vec(vec![0.25f32.ln(), 0.75f32.ln()], &[2]).unwrap(), 1e-6, "log_softmax");
    l.backward_with_grad(&Tensor::from_vec(vec![1.0, 0.0], &[2]).unwrap()).unwrap();
    assert_close(&z.grad().unwrap(), &Tensor::from_vec(vec![0.75, -0.75], &[2]).unwrap(), 1e-6, "grad");
}

#[test]
fn softmax_is_stable_for_huge_logits() {
    let x = Tensor::from_vec(vec![1e4, 1e4 + 1.0, -1e4, 0.0], &[2, 2]).unwrap();
    let y = x.softmax(1).unwrap().to_vec();
    assert!(y.iter().all(|v| v.is_finite()));
    assert!((y[0] + y[1] - 1.0).abs() < 1e-6 && y[2] == 0.0 && y[3] == 1.0, "{y:?}");
    let l = x.log_softmax(1).unwrap().to_vec();
    assert!(l.iter().all(|v| v.is_finite()));
    assert!((l[2] + 1e4).abs() < 1.0);
}

#[test]
fn softmax_family_passes_gradcheck_on_every_axis_and_strided_inputs() {
    let x = var(&[2, 3, 4], 1);
    for axis in [0isize, 1, 2, -1] {
        passes(|v| v[0].softmax(axis), std::slice::from_ref(&x));
        passes(|v| v[0].log_softmax(axis), std::slice::from_ref(&x));
    }
    passes(|v| v[0].transpose(0, 2)?.softmax(1), std::slice::from_ref(&x));
    passes(|v| v[0].slice(2, 0, 4, 2)?.log_softmax(-1), std::slice::from_ref(&x));
    passes(|v| v[0].softmax(1)?.log_softmax(0), &[x]);
}

#[test]
fn softmax_and_log_softmax_are_twice_differentiable() {
    let x = var(&[2, 3], 1);
    let seed = Tensor::from_vec(vec![0.5, -1.0, 2.0, 1.0, 0.25, -0.5], &[2, 3]).unwrap();
    let c = [var(&[2, 3], 2).detach()];
    second_order::check(|v| v[0].softmax(1), std::slice::from_ref(&x), &seed, &c);
    second_order::check(|v| v[0].log_softmax(1), std::slice::from_ref(&x), &seed, &c);
    second_order::check(
        |v| v[0].transpose(0, 1)?.softmax(0),
        &[x],
        &seed.transpose(0, 1).unwrap().contiguous().unwrap(),
        &c,
    );
}

#[test]
fn softmax_with_a_bad_axis_is_an_error() {
    let x = Tensor::zeros(&[2, 3]).unwrap();
    assert!(matches!(x.softmax(2).unwrap_err().kind(), ErrorKind::AxisOutOfRange { op: "softmax", .. }));
    assert!(matches!(x.log_softmax(-3).unwrap_err().kind(), ErrorKind::AxisOutOfRange { op: "log_softmax", .. }));
    assert!(matches!(x.softmax("classes").unwrap_err().kind(), ErrorKind::UnknownAxisName { .. }));
    // A 0-d tensor takes axis 0 or -1, as in PyTorch; any other is out of range.
    assert_eq!(Tensor::scalar(1.0).softmax(0).unwrap().to_vec(), [1.0]);
    assert!(matches!(Tensor::scalar(1.0).softmax(1).unwrap_err().kind(), ErrorKind::AxisOutOfRange { .. }));
}

#[test]
fn a_large_softmax_over_the_first_axis_matches_the_last_axis_of_its_transpose() {
    // [1024, 300] over axis 0: one block, large enough to be split between threads by columns;
    // its transpose over the last axis runs the lines one by one.
    let (rows, cols) = (1024, 300);
    let data: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 1013) as f32 * 0.02 - 10.0).collect();
    let cot = Tensor::from_vec((0..rows * cols).map(|i| ((i * 31) % 17) as f32 * 0.1 - 0.8).collect(), &[rows, cols])
        .unwrap();
    for log in [false, true] {
        let f = |t: &Tensor, axis: isize| if log { t.log_softmax(axis) } else { t.softmax(axis) };
        let x = Tensor::variable(data.clone(), &[rows, cols]).unwrap();
        let y = f(&x, 0).unwrap();
        y.backward_with_grad(&cot).unwrap();
        let xt = Tensor::variable(data.clone(), &[rows, cols]).unwrap();
        let yt = f(&xt.transpose(0, 1).unwrap(), -1).unwrap().transpose(0, 1).unwrap();
        yt.backward_with_grad(&cot).unwrap();
        assert_close(&y, &yt.contiguous().unwrap(), 1e-5, &format!("log {log}: values"));
        assert_close(&x.grad().unwrap(), &xt.grad().unwrap(), 1e-5, &format!("log {log}: gradients"));
    }
}
