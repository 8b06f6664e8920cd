//! Integer indexing: index_select, gather / take_along_axis, scatter_add, index_add —
//! literal values, gradchecks, JAX goldens, second order, and out-of-range indices.

mod common;

use common::golden;
use common::second_order;
use common::{passes, var};
use forgia::{ErrorKind, Indices, Result, Tensor};
use serde_json::Value;

fn indices(v: &Value) -> Indices {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<i64> = v["data"].as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).collect();
    Indices::new(data, &shape).unwrap()
}

#[test]
fn index_goldens_match_jax() {
    for c in golden::load("index") {
        let axis = c.attrs["axis"].as_i64().unwrap();
        let idx = indices(&c.attrs["index"]);
        golden::check_case(&c, 1e-5, |xs| match c.op.as_str() {
            "index_select" => xs[0].index_select(axis, &idx),
            "gather" => xs[0].gather(axis, &idx),
            "take_along_axis" => xs[0].take_along_axis(axis, &idx),
            "scatter_add" => xs[0].scatter_add(axis, &idx, &xs[1]),
            "index_add" => xs[0].index_add(axis, &idx, &xs[1]),
            op => panic!("unhandled index op {op}"),
        });
    }
}

#[test]
fn index_ops_give_literal_values_and_gradients() {
    let table = Tensor::variable(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]).unwrap();
    let rows = table.index_select(0, &Indices::from(vec![2usize, 0, 2])).unwrap();
    assert_eq!(rows.to_vec(), vec![4.0, 5.0, 0.0, 1.0, 4.0, 5.0]);
    rows.sum_all().backward().unwrap();
    // Each lookup adds 1 to its row's gradient: row 2 twice, row 0 once.
    assert_eq!(table.grad().unwrap().to_vec(), vec![1.0, 1.0, 0.0, 0.0, 2.0, 2.0]);

    let x = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let idx = Indices::new(vec![1, 1, 0, 1], &[2, 2]).unwrap();
    let g = x.gather(1, &idx).unwrap();
    assert_eq!(g.to_vec(), vec![2.0, 2.0, 3.0, 4.0]);
    g.sum_all().backward().unwrap();
    // d/dx sum(gather) counts how often each element is picked.
    assert_eq!(x.grad().unwrap().to_vec(), vec![0.0, 2.0, 1.0, 1.0]);

    let z = Tensor::zeros(&[2, 3]).unwrap();
    let src = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let s = z.scatter_add(1, &Indices::new(vec![2, 2, 0, 1], &[2, 2]).unwrap(), &src).unwrap();
    assert_eq!(s.to_vec(), vec![0.0, 0.0, 3.0, 3.0, 4.0, 0.0]);
    let a = z.index_add(1, &Indices::from(vec![2usize, 2]), &src).unwrap();
    assert_eq!(a.to_vec(), vec![0.0, 0.0, 3.0, 0.0, 0.0, 7.0]);
}

#[test]
fn index_ops_pass_gradcheck_including_strided_inputs() {
    let x = var(&[3, 4], 1);
    let i1 = Indices::from(vec![3usize, 0, 3]);
    let i2 = Indices::new(vec![2, 0, 1, 1, 0, 2], &[2, 3]).unwrap();
    passes(|v| v[0].index_select(1, &i1), std::slice::from_ref(&x));
    passes(|v| v[0].transpose(0, 1)?.index_select(0, &i1), std::slice::from_ref(&x));
    passes(|v| v[0].gather(0, &i2), std::slice::from_ref(&x));
    passes(|v| v[0].transpose(0, 1)?.gather(1, &i2), std::slice::from_ref(&x));
    let src = var(&[2, 3], 2);
    passes(|v| v[0].scatter_add(0, &i2, &v[1]), &[x.clone(), src.clone()]);
    // src larger than the index: the uncovered part gets zero gradient
    let big = var(&[3, 4], 3);
    passes(|v| v[0].scatter_add(0, &i2, &v[1].transpose(0, 1)?.transpose(0, 1)?), &[x.clone(), big]);
    let s3 = var(&[3, 3], 4);
    passes(|v| v[0].index_add(1, &i1, &v[1].transpose(0, 1)?), &[x, s3]);
}

#[test]
fn gather_and_index_select_are_twice_differentiable() {
    // y = sum(gather(x)^2 * w): grad = scatter_add(2 * gather(x) * w), linear in x, so the
    // second-order check exercises gather's record building scatter_add's (and back).
    let idx = Indices::new(vec![1, 0, 1, 2], &[2, 2]).unwrap();
    let w = Tensor::from_vec(vec![0.5, -1.0, 2.0, 1.5], &[2, 2]).unwrap();
    let f = |xs: &[Tensor]| -> Result<Tensor> {
        let g = xs[0].gather(1, &idx)?;
        Ok(g.mul(&g)?.mul(&w)?.sum_all())
    };
    let c = [Tensor::from_vec(vec![0.3, -0.2, 0.7, 1.1, -0.4, 0.9], &[2, 3]).unwrap()];
    second_order::check(f, &[var(&[2, 3], 5)], &Tensor::scalar(1.0), &c);
    let rows = Indices::from(vec![1usize, 1, 0]);
    let f = |xs: &[Tensor]| -> Result<Tensor> {
        let g = xs[0].index_select(0, &rows)?;
        Ok(g.mul(&g)?.sum_all())
    };
    second_order::check(f, &[var(&[2, 3], 6)], &Tensor::scalar(1.0), &c);
    // Along a later axis: the gradient is scattered into zeros between outer and inner runs.
    let cols = Indices::from(vec![2usize, 0, 2, 2]);
    let f = |xs: &[Tensor]| -> Result<Tensor> {
        let g = xs[0].index_select(1, &cols)?;
        Ok(g.mul(&g)?.mul(&g)?.sum_all())
    };
    second_order::check(f, &[var(&[2, 3], 7)], &Tensor::scalar(1.0), &c);
}

#[test]
fn out_of_range_and_misshapen_indices_are_errors() {
    let x = Tensor::zeros(&[2, 3]).unwrap();
    let kind = |r: Result<Tensor>| r.err().unwrap().into_kind();
    let too_big = Indices::from(vec![3usize]);
    let negative = Indices::from(vec![-1i64]);
    assert!(matches!(
        kind(x.index_select(1, &too_big)),
        ErrorKind::IndexOutOfRange { op: "index_select", index: 3, size: 3 }
    ));
    assert!(matches!(kind(x.index_select(1, &negative)), ErrorKind::IndexOutOfRange { index: -1, .. }));
    assert!(matches!(kind(x.index_select(2, &too_big)), ErrorKind::AxisOutOfRange { .. }));
    let two_d = Indices::new(vec![0, 0], &[1, 2]).unwrap();
    assert!(matches!(kind(x.index_select(0, &two_d)), ErrorKind::RankMismatch { .. }));
    assert!(matches!(
        kind(x.gather(1, &Indices::new(vec![0, 5], &[1, 2]).unwrap())),
        ErrorKind::IndexOutOfRange { op: "gather", .. }
    ));
    assert!(matches!(kind(x.gather(1, &too_big)), ErrorKind::ShapeMismatch { op: "gather", .. }));
    assert!(matches!(kind(x.gather(1, &Indices::new(vec![0; 3], &[3, 1]).unwrap())), ErrorKind::ShapeMismatch { .. }));
    let src = Tensor::zeros(&[1, 2]).unwrap();
    assert!(matches!(
        kind(x.scatter_add(1, &Indices::new(vec![0, 3], &[1, 2]).unwrap(), &src)),
        ErrorKind::IndexOutOfRange { op: "scatter_add", .. }
    ));
    assert!(matches!(
        kind(x.scatter_add(1, &Indices::new(vec![0, 0, 0], &[1, 3]).unwrap(), &src)),
        ErrorKind::ShapeMismatch { .. }
    ));
    assert!(matches!(
        kind(x.index_add(0, &Indices::from(vec![2usize]), &Tensor::zeros(&[1, 3]).unwrap())),
        ErrorKind::IndexOutOfRange { op: "index_add", .. }
    ));
    assert!(matches!(
        kind(x.index_add(0, &Indices::from(vec![0usize]), &Tensor::zeros(&[2, 3]).unwrap())),
        ErrorKind::ShapeMismatch { op: "index_add", .. }
    ));
    assert!(matches!(Indices::new(vec![0; 3], &[2, 2]).unwrap_err().kind(), ErrorKind::LengthMismatch { .. }));
    // A failed scatter leaves the destination untouched (no partial write).
    assert_eq!(x.to_vec(), vec![0.0; 6]);
}
