//! Contractions: matmul, dot over a named or positional axis, two-operand einsum — literal
//! values, gradchecks (incl. transposed operands), JAX goldens, second order, bad inputs.

mod common;

use common::golden;
use common::second_order;
use common::{passes, var};
use forgia::{ErrorKind, Result, Tensor};

#[test]
fn contract_goldens_match_jax() {
    for c in golden::load("contract") {
        golden::check_case(&c, 1e-5, |xs| match c.op.as_str() {
            "matmul" => xs[0].matmul(&xs[1]),
            "einsum" => Tensor::einsum(c.attrs["equation"].as_str().unwrap(), &xs[0], &xs[1]),
            op => panic!("unhandled contract op {op}"),
        });
    }
}

#[test]
fn dot_contracts_a_named_axis_like_the_chapter() {
    // x [batch=2, in=3], w [out=2, in=3] (torch layout): x.dot(w, "in") = x · wᵀ, shape [batch, out].
    let x = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let w = Tensor::variable(vec![1.0, 0.0, -1.0, 0.5, 0.5, 0.5], &[2, 3]).unwrap();
    let xn = x.with_names(&[Some("batch"), Some("in")]).unwrap();
    let wn = w.with_names(&[Some("out"), Some("in")]).unwrap();
    let y = xn.dot(&wn, "in").unwrap();
    assert_eq!(y.shape(), &[2, 2]);
    assert_eq!(y.to_vec(), vec![-2.0, 3.0, -2.0, 7.5]);
    assert_eq!(y.names().unwrap(), vec![Some("batch".to_string()), Some("out".to_string())]);
    y.sum_all().backward().unwrap();
    // d/dx sum(x · wᵀ) = ones · w = column sums of w per row; d/dw = onesᵀ · x = column sums of x.
    assert_eq!(x.grad().unwrap().to_vec(), vec![1.5, 0.5, -0.5, 1.5, 0.5, -0.5]);
    assert_eq!(w.grad().unwrap().to_vec(), vec![5.0, 7.0, 9.0, 5.0, 7.0, 9.0]);
    // Positional: contract axis 0 of both ([3,2]·[3,4] -> [2,4]) = aᵀ·b.
    let a = var(&[3, 2], 1);
    let b = var(&[3, 4], 2);
    let want = a.transpose(0, 1).unwrap().matmul(&b).unwrap();
    assert_eq!(a.dot(&b, 0).unwrap().to_vec(), want.to_vec());
    // A contiguous operand whose axis is already in place is not copied on the way in.
    assert_eq!(var(&[2, 3, 4], 3).dot(&var(&[5, 4], 4), -1).unwrap().shape(), &[2, 3, 5]);
}

#[test]
fn einsum_covers_batch_contracted_free_and_summed_labels() {
    let a = var(&[2, 3], 1);
    let b = var(&[3, 4], 2);
    assert_eq!(Tensor::einsum("ij,jk->ik", &a, &b).unwrap().to_vec(), a.matmul(&b).unwrap().to_vec());
    // Implicit output: labels appearing once, sorted.
    assert_eq!(Tensor::einsum("ij,jk", &a, &b).unwrap().to_vec(), a.matmul(&b).unwrap().to_vec());
    // Transposed output.
    let t = Tensor::einsum("ij,jk->ki", &a, &b).unwrap();
    assert_eq!(t.to_vec(), a.matmul(&b).unwrap().transpose(0, 1).unwrap().to_vec());
    // Outer product and a label summed in only one operand: sum_j a_ij * c_k.
    let u = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
    let v = Tensor::from_vec(vec![3.0, 4.0, 5.0], &[3]).unwrap();
    assert_eq!(Tensor::einsum("i,j->ij", &u, &v).unwrap().to_vec(), vec![3.0, 4.0, 5.0, 6.0, 8.0, 10.0]);
    let m = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    assert_eq!(Tensor::einsum("ij,k->ik", &m, &v).unwrap().to_vec(), vec![9.0, 12.0, 15.0, 21.0, 28.0, 35.0]);
    // Full contraction to a scalar: sum of m*m = 1 + 4 + 9 + 16.
    let s = Tensor::einsum("ij,ij->", &m, &m).unwrap();
    assert_eq!(s.shape(), &[] as &[usize]);
    assert_eq!(s.item().unwrap(), 30.0);
}

#[test]
fn contractions_pass_gradcheck_with_transposed_and_broadcast_operands() {
    let (a, b) = (var(&[3, 4], 1), var(&[4, 2], 2));
    passes(|x| x[0].matmul(&x[1]), &[a.clone(), b.clone()]);
    passes(|x| x[1].transpose(0, 1)?.matmul(&x[0].transpose(0, 1)?), &[a.clone(), b.clone()]);
    passes(|x| var(&[2, 1, 3, 4], 5).detach().matmul(&x[1]), &[a.clone(), b.clone()]);
    passes(|x| x[0].dot(&x[1], 1), &[a.clone(), var(&[2, 4], 3)]);
    passes(|x| x[0].transpose(0, 1)?.dot(&x[1], 0), &[a.clone(), var(&[4, 5], 4)]);
    let (p, q) = (var(&[2, 3, 4], 6), var(&[2, 4, 5], 7));
    passes(|x| Tensor::einsum("bij,bjk->bik", &x[0], &x[1]), &[p.clone(), q.clone()]);
    passes(|x| Tensor::einsum("bij,bjk->kib", &x[0].slice(2, 0, 4, 1)?, &x[1]), &[p.clone(), q]);
    passes(|x| Tensor::einsum("bij,jk->bk", &x[0], &x[1]), &[p, var(&[4, 3], 8)]);
    passes(|x| Tensor::einsum("ij,ij->i", &x[0], &x[1].transpose(0, 1)?), &[a, var(&[4, 3], 9)]);
}

#[test]
fn matmul_and_einsum_are_twice_differentiable() {
    // The gradients of a·b are GEMMs through matmul's record, so d/d(a,b) sum(ga*c0 + gb*c1)
    // is well defined (bilinear: only cross terms survive).
    let (a, b) = (var(&[2, 3], 1), var(&[3, 2], 2));
    let seed = Tensor::from_vec(vec![1.0, -0.5, 0.25, 2.0], &[2, 2]).unwrap();
    let c = [var(&[2, 3], 3).detach(), var(&[3, 2], 4).detach()];
    second_order::check(|x| x[0].matmul(&x[1]), &[a.clone(), b.clone()], &seed, &c);
    // Through a nonlinearity so the second derivative is not just cross terms.
    second_order::check(|x| Ok(x[0].matmul(&x[1])?.tanh()), &[a.clone(), b.clone()], &seed, &c);
    second_order::check(
        |x| Tensor::einsum("ij,jk->ki", &x[0], &x[1]),
        &[a, b],
        &seed.transpose(0, 1).unwrap().contiguous().unwrap(),
        &c,
    );
}

#[test]
fn bad_contractions_are_named_errors() {
    let kind = |r: Result<Tensor>| r.err().unwrap().into_kind();
    let a = Tensor::zeros(&[2, 3]).unwrap();
    let b = Tensor::zeros(&[4, 5]).unwrap();
    assert!(matches!(kind(a.matmul(&b)), ErrorKind::ShapeMismatch { op: "matmul", .. }));
    assert!(matches!(kind(a.matmul(&Tensor::scalar(1.0))), ErrorKind::RankMismatch { op: "matmul", .. }));
    assert!(matches!(kind(a.dot(&b, 1)), ErrorKind::ShapeMismatch { op: "dot", .. }));
    assert!(matches!(kind(a.dot(&b, 2)), ErrorKind::AxisOutOfRange { op: "dot", .. }));
    assert!(matches!(kind(a.dot(&b, "in")), ErrorKind::UnknownAxisName { op: "dot", .. }));
    let e = |eq: &str, x: &Tensor, y: &Tensor| kind(Tensor::einsum(eq, x, y));
    assert!(matches!(e("ij,jk->ik", &a, &b), ErrorKind::ShapeMismatch { op: "einsum", .. }));
    assert!(matches!(e("ijk,jk->i", &a, &b), ErrorKind::RankMismatch { op: "einsum", .. }));
    assert!(matches!(e("ii,jk->i", &a, &b), ErrorKind::InvalidArgument { op: "einsum", .. }));
    assert!(matches!(e("ij,jk->iz", &a, &b), ErrorKind::InvalidArgument { op: "einsum", .. }));
    assert!(matches!(e("ij->ij", &a, &b), ErrorKind::InvalidArgument { op: "einsum", .. }));
    assert!(matches!(e("i1,jk->i", &a, &b), ErrorKind::InvalidArgument { op: "einsum", .. }));
    assert!(matches!(e("ij,jk->ii", &a, &b), ErrorKind::InvalidArgument { op: "einsum", .. }));
}

#[test]
fn the_weight_gradient_of_x_times_w_transposed_arrives_packed_and_exact() {
    // y = x·Wᵀ: ∂W = gyᵀ·x. The record computes it packed instead of as a strided view.
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let w = Tensor::variable(vec![1.0, 0.0, -1.0, 2.0, 1.0, 0.5, 0.0, 3.0, 1.0, -2.0, 1.0, 1.0], &[4, 3]).unwrap();
    let gy = Tensor::from_vec((1..=8).map(|v| v as f32).collect(), &[2, 4]).unwrap();
    x.matmul(&w.transpose(0, 1).unwrap()).unwrap().backward_with_grad(&gy).unwrap();
    let g = w.grad().unwrap();
    assert!(g.is_contiguous(), "strides {:?}", g.strides());
    // gyᵀ·x, row o: gy[0][o]·x[0] + gy[1][o]·x[1]
    let expected: Vec<f32> = (0..4)
        .flat_map(|o| {
            let (a, b) = ((o + 1) as f32, (o + 5) as f32);
            [a * 1.0 + b * 4.0, a * 2.0 + b * 5.0, a * 3.0 + b * 6.0]
        })
        .collect();
    assert_eq!(g.to_vec(), expected);
}

#[test]
fn a_batch_times_a_matrix_with_unit_batch_axes_matches_per_batch_products() {
    let mut rng = forgia::Rng::new(21);
    let a = Tensor::randn(&[2, 3, 4], 0.0, 1.0, &mut rng).unwrap();
    let b = Tensor::randn(&[1, 1, 4, 5], 0.0, 1.0, &mut rng).unwrap();
    let y = a.matmul(&b).unwrap();
    assert_eq!(y.shape(), &[1, 2, 3, 5]);
    let b2 = b.reshape(&[4, 5]).unwrap();
    for i in 0..2 {
        let want = a.narrow(0, i, 1).unwrap().squeeze(0).unwrap().matmul(&b2).unwrap().to_vec();
        let got = y.narrow(1, i, 1).unwrap().to_vec();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-5, "{g} vs {w}");
        }
    }
}
