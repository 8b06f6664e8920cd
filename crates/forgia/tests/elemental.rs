//! Elemental ops from scalar closures: softplus as `elemental_unary`, a broadcasting
//! `elemental_binary`, the parallel path above the chunking threshold, and the errors.

mod common;

use common::lcg;

use forgia::{elemental_binary, elemental_unary, gradcheck, BackwardOptions, ErrorKind, GradcheckOptions, Tensor};

/// softplus: y = log(1 + eˣ); backward returns the propagated gx = sigmoid(x) · gy.
fn softplus(x: &Tensor) -> Tensor {
    elemental_unary(x, |x| x.exp().ln_1p(), |x, _y, gy| gy / (1.0 + (-x).exp()))
}

/// y = a · b² with broadcasting; (ga, gb) = (b² · gy, 2ab · gy).
fn ab2(a: &Tensor, b: &Tensor) -> forgia::Result<Tensor> {
    elemental_binary(a, b, |a, b| a * b * b, |a, b, _y, gy| (b * b * gy, 2.0 * a * b * gy))
}

#[test]
fn elemental_softplus_gives_log_two_and_half_at_zero() {
    let x = Tensor::variable(vec![0.0, 2.0], &[2]).unwrap();
    let y = softplus(&x);
    assert_eq!(y.grad_fn(), Some("elemental_unary"));
    y.sum_all().backward().unwrap();
    // y(0) = ln 2; dy/dx = sigmoid(x): 1/2 at 0, 1/(1+e⁻²) at 2
    assert!((y.to_vec()[0] - std::f32::consts::LN_2).abs() < 1e-6);
    let g = x.grad().unwrap().to_vec();
    assert!((g[0] - 0.5).abs() < 1e-6 && (g[1] - 1.0 / (1.0 + (-2.0f32).exp())).abs() < 1e-6);
}

#[test]
fn elemental_softplus_passes_gradcheck_on_several_shapes_and_transposed_input() {
    for shape in [vec![1], vec![3, 4], vec![2, 2, 3]] {
        let n = shape.iter().product();
        let x = Tensor::variable(lcg(n, 7 + n as u64, 2.0), &shape).unwrap();
        let r = gradcheck(|xs| Ok(softplus(&xs[0]).sum_all()), &[x], GradcheckOptions::default()).unwrap();
        assert!(r.passed(), "{shape:?}: {:?}", r.first_mismatch);
    }
    let x = Tensor::variable(lcg(12, 5, 2.0), &[3, 4]).unwrap();
    let w = Tensor::from_vec(lcg(12, 6, 2.0), &[4, 3]).unwrap();
    let f = |xs: &[Tensor]| Ok(softplus(&xs[0].transpose(0, 1)?).mul(&w)?.sum_all());
    let r = gradcheck(f, &[x], GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);
}

#[test]
fn elemental_binary_gives_hand_values_with_broadcasting() {
    let a = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let b = Tensor::variable(vec![3.0, 5.0], &[2]).unwrap();
    let y = ab2(&a, &b).unwrap();
    y.sum_all().backward().unwrap();
    assert_eq!(y.to_vec(), vec![9.0, 50.0, 27.0, 100.0]);
    assert_eq!(a.grad().unwrap().to_vec(), vec![9.0, 25.0, 9.0, 25.0]); // b²
    assert_eq!(b.grad().unwrap().to_vec(), vec![24.0, 60.0]); // Σ_rows 2ab
}

#[test]
fn elemental_binary_passes_gradcheck_with_broadcast_and_strided_operands() {
    let cases: [(&[usize], &[usize]); 4] = [(&[2, 3], &[2, 3]), (&[2, 3], &[3]), (&[2, 1], &[1, 3]), (&[], &[2, 2])];
    for (sa, sb) in cases {
        let a = Tensor::variable(lcg(sa.iter().product(), 11, 2.0), sa).unwrap();
        let b = Tensor::variable(lcg(sb.iter().product(), 12, 2.0), sb).unwrap();
        let r = gradcheck(|xs| Ok(ab2(&xs[0], &xs[1])?.sum_all()), &[a, b], GradcheckOptions::default()).unwrap();
        assert!(r.passed(), "{sa:?} {sb:?}: {:?}", r.first_mismatch);
    }
    // a transposed [3,2] -> [2,3] with a stepped slice [2,6] -> [2,3], then with a [2,1] column
    let a = Tensor::variable(lcg(6, 13, 2.0), &[3, 2]).unwrap();
    let b = Tensor::variable(lcg(12, 14, 2.0), &[2, 6]).unwrap();
    let f = |xs: &[Tensor]| {
        let at = xs[0].transpose(0, 1)?;
        let y = ab2(&at, &xs[1].slice(1, 0, 6, 2)?)?.add(&ab2(&at, &xs[1].slice(1, 1, 2, 1)?)?)?;
        Ok(y.sum_all())
    };
    let r = gradcheck(f, &[a, b], GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);
}

#[test]
fn elemental_binary_skips_constant_operands() {
    let a = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let c = Tensor::from_vec(vec![3.0], &[1]).unwrap();
    ab2(&a, &c).unwrap().sum_all().backward().unwrap();
    assert_eq!(a.grad().unwrap().to_vec(), vec![9.0, 9.0]);
    assert!(c.grad().is_none());
    assert!(!ab2(&a.detach(), &c).unwrap().requires_grad());
}

#[test]
fn elemental_ops_match_scalar_loops_above_the_parallel_threshold() {
    let n = (1 << 16) * 2 + 37; // several chunks and a ragged tail
    let xv = lcg(n, 21, 2.0);
    let x = Tensor::variable(xv.clone(), &[n]).unwrap();
    let y = softplus(&x);
    y.backward_with_grad(&Tensor::full(&[n], 2.0).unwrap()).unwrap();
    let (yv, gv) = (y.to_vec(), x.grad().unwrap().to_vec());
    for i in (0..n).step_by(997) {
        assert_eq!(yv[i], xv[i].exp().ln_1p());
        assert_eq!(gv[i], 2.0 / (1.0 + (-xv[i]).exp()));
    }

    let rows = 1 << 10;
    let a = Tensor::variable(lcg(rows * 130, 22, 2.0), &[rows, 130]).unwrap();
    let b = Tensor::variable(lcg(130, 23, 2.0), &[130]).unwrap();
    ab2(&a, &b).unwrap().sum_all().backward().unwrap();
    let (av, bv) = (a.to_vec(), b.to_vec());
    let (ga, gb) = (a.grad().unwrap().to_vec(), b.grad().unwrap().to_vec());
    for i in (0..rows * 130).step_by(331) {
        assert_eq!(ga[i], bv[i % 130] * bv[i % 130]);
    }
    for j in 0..130 {
        let expected: f64 = (0..rows).map(|r| 2.0 * av[r * 130 + j] as f64 * bv[j] as f64).sum();
        assert!((gb[j] as f64 - expected).abs() <= 1e-4 * (1.0 + expected.abs()), "{j}");
    }
}

#[test]
fn elemental_binary_rejects_shapes_that_do_not_broadcast() {
    let a = Tensor::variable(vec![1.0; 6], &[2, 3]).unwrap();
    let b = Tensor::from_vec(vec![1.0; 2], &[2]).unwrap();
    let e = ab2(&a, &b).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ShapeMismatch { op: "elemental_binary", .. }), "{e:?}");
}

#[test]
fn create_graph_through_elemental_ops_is_double_backward_unsupported() {
    let opts = BackwardOptions { create_graph: true, ..Default::default() };
    let x = Tensor::variable(vec![0.5, 1.0], &[2]).unwrap();
    let e = softplus(&x).sum_all().backward_with(None, opts).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::DoubleBackwardUnsupported { op: "elemental_unary" }), "{e:?}");
    let e = ab2(&x, &x).unwrap().sum_all().backward_with(None, opts).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::DoubleBackwardUnsupported { op: "elemental_binary" }), "{e:?}");
}

#[test]
fn a_straight_through_estimator_is_one_line() {
    // forward rounds, backward passes gy through unchanged (a deliberate, useful lie)
    let x = Tensor::variable(vec![0.4, 1.6], &[2]).unwrap();
    let y = elemental_unary(&x, f32::round, |_, _, gy| gy);
    y.sum_all().backward().unwrap();
    assert_eq!(y.to_vec(), vec![0.0, 2.0]);
    assert_eq!(x.grad().unwrap().to_vec(), vec![1.0, 1.0]);
}
