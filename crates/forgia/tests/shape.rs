//! Shape ops: views against naive copies, joins, pads, flips, repeats; literal values,
//! gradchecks (incl. non-contiguous inputs), JAX goldens and bad inputs.

mod common;

use common::golden::{self, assert_close};
use common::{passes, var};
use forgia::{ErrorKind, Result, Tensor};
use serde_json::Value;

fn ints(v: &Value) -> Vec<isize> {
    v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap() as isize).collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

/// Row-major multi-index of a linear position.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        idx[a] = i % shape[a];
        i /= shape[a];
    }
    idx
}

#[test]
fn shape_goldens_match_jax() {
    for c in golden::load("shape") {
        let a = &c.attrs;
        if c.op == "split" {
            let x = c.inputs[0].clone().into_variable();
            let parts = x.split(a["axis"].as_i64().unwrap(), &usizes(&a["sizes"])).unwrap();
            let outs = c.raw["outputs"].as_array().unwrap();
            let cots = c.raw["cotangents"].as_array().unwrap();
            let mut loss = Tensor::scalar(0.0);
            for (p, (o, ct)) in parts.iter().zip(outs.iter().zip(cots)) {
                assert_close(p, &golden::tensor(o), 1e-5, &c.name);
                loss = loss.add(&p.mul(&golden::tensor(ct)).unwrap().sum_all()).unwrap();
            }
            loss.backward().unwrap();
            assert_close(&x.grad().unwrap(), c.grads[0].as_ref().unwrap(), 1e-5, &c.name);
            continue;
        }
        let int = |k: &str| a[k].as_i64().unwrap();
        golden::check_case(&c, 1e-5, |xs| {
            let x = &xs[0];
            let refs: Vec<&Tensor> = xs.iter().collect();
            match c.op.as_str() {
                "reshape" => x.reshape_infer(&ints(&a["shape"])),
                "permute" => {
                    let r = x.rank() as isize;
                    let dims: Vec<usize> = ints(&a["dims"]).iter().map(|&d| ((d + r) % r) as usize).collect();
                    x.permute(&dims)
                }
                "transpose" => x.transpose(int("dim0"), int("dim1")),
                "narrow" => x.narrow(int("axis"), int("start") as usize, int("len") as usize),
                "slice" => x.slice(int("axis"), int("start") as isize, int("end") as isize, int("step") as usize),
                "concat" => Tensor::concat(&refs, int("axis")),
                "stack" => Tensor::stack(&refs, int("axis") as isize),
                "broadcast_to" => x.broadcast_to(&usizes(&a["shape"])),
                "squeeze" => x.squeeze(int("axis")),
                "unsqueeze" => x.unsqueeze(int("axis") as isize),
                "flatten" => x.flatten(int("start"), int("end")),
                "pad" => {
                    let pads: Vec<(usize, usize)> =
                        a["pads"].as_array().unwrap().iter().map(|p| (usizes(p)[0], usizes(p)[1])).collect();
                    x.pad(&pads, a["value"].as_f64().unwrap() as f32)
                }
                "flip" => x.flip(ints(&a["axes"])),
                "repeat" => x.repeat(&usizes(&a["repeats"])),
                op => panic!("unhandled shape op {op}"),
            }
        });
    }
}

#[test]
fn every_view_matches_a_naive_copy() {
    let x = var(&[2, 3, 4], 1);
    let v = x.to_vec();
    let at = |i: usize, j: usize, k: usize| v[i * 12 + j * 4 + k];
    // permute [2, 0, 1]: out[k, i, j] = x[i, j, k]
    let p = x.permute(&[2, 0, 1]).unwrap();
    assert!(p.shares_storage(&x));
    let pv = p.to_vec();
    for (n, &val) in pv.iter().enumerate() {
        let idx = unravel(n, &[4, 2, 3]);
        assert_eq!(val, at(idx[1], idx[2], idx[0]));
    }
    // transpose(0, 2)
    let t = x.transpose(0, 2).unwrap();
    for (n, &val) in t.to_vec().iter().enumerate() {
        let idx = unravel(n, &[4, 3, 2]);
        assert_eq!(val, at(idx[2], idx[1], idx[0]));
    }
    // narrow(1, 1, 2)
    let nw = x.narrow(1, 1, 2).unwrap();
    assert!(nw.shares_storage(&x));
    for (n, &val) in nw.to_vec().iter().enumerate() {
        let idx = unravel(n, &[2, 2, 4]);
        assert_eq!(val, at(idx[0], idx[1] + 1, idx[2]));
    }
    // slice(2, 0, 4, 3): k in {0, 3}
    let s = x.slice(2, 0, 4, 3).unwrap();
    for (n, &val) in s.to_vec().iter().enumerate() {
        let idx = unravel(n, &[2, 3, 2]);
        assert_eq!(val, at(idx[0], idx[1], idx[2] * 3));
    }
    // broadcast_to [5, 2, 3, 4]
    let b = x.broadcast_to(&[5, 2, 3, 4]).unwrap();
    assert!(b.shares_storage(&x));
    for (n, &val) in b.to_vec().iter().enumerate() {
        assert_eq!(val, v[n % 24]);
    }
    // squeeze / unsqueeze / flatten / reshape keep row-major order
    assert_eq!(x.unsqueeze(1).unwrap().squeeze(1).unwrap().to_vec(), v);
    assert_eq!(x.unsqueeze(-1).unwrap().shape(), &[2, 3, 4, 1]);
    assert_eq!(x.flatten(0, 1).unwrap().to_vec(), v);
    assert!(x.flatten(0, 1).unwrap().shares_storage(&x));
    assert_eq!(x.reshape(&[6, 4]).unwrap().to_vec(), v);
    // a view of a view: transpose then slice then reshape (copies when non-contiguous)
    let tv = x.transpose(0, 1).unwrap().slice(0, 1, 3, 1).unwrap().reshape(&[16]).unwrap();
    let mut naive = vec![];
    for j in 1..3 {
        for i in 0..2 {
            for k in 0..4 {
                naive.push(at(i, j, k));
            }
        }
    }
    assert_eq!(tv.to_vec(), naive);
    // split and chunk are views
    for part in x.chunk(2, 1).unwrap() {
        assert!(part.shares_storage(&x));
    }
}

#[test]
fn concat_stack_split_chunk_give_literal_values() {
    let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let b = Tensor::from_vec(vec![5.0, 6.0], &[2, 1]).unwrap();
    assert_eq!(Tensor::concat(&[&a, &b], 1).unwrap().to_vec(), vec![1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
    let s = Tensor::stack(&[&a, &a], 2).unwrap();
    assert_eq!(s.shape(), &[2, 2, 2]);
    assert_eq!(s.to_vec(), vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
    let parts = Tensor::arange(0.0, 5.0, 1.0).unwrap().chunk(3, 0).unwrap();
    let sizes: Vec<usize> = parts.iter().map(|p| p.shape()[0]).collect();
    assert_eq!(sizes, vec![2, 2, 1]);
    assert_eq!(parts[2].to_vec(), vec![4.0]);
    // torch.chunk may return fewer parts: 4 elements in 3 chunks -> [2, 2]
    assert_eq!(Tensor::zeros(&[4]).unwrap().chunk(3, 0).unwrap().len(), 2);
    let sp = a.split(0, &[1, 1]).unwrap();
    assert_eq!(sp[1].to_vec(), vec![3.0, 4.0]);
}

#[test]
fn pad_flip_repeat_give_literal_values() {
    let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let p = a.pad(&[(1, 0), (0, 1)], 9.0).unwrap();
    assert_eq!(p.to_vec(), vec![9.0, 9.0, 9.0, 1.0, 2.0, 9.0, 3.0, 4.0, 9.0]);
    assert_eq!(a.flip(0).unwrap().to_vec(), vec![3.0, 4.0, 1.0, 2.0]);
    assert_eq!(a.flip([0, 1]).unwrap().to_vec(), vec![4.0, 3.0, 2.0, 1.0]);
    // flip of a transposed view
    assert_eq!(a.transpose(0, 1).unwrap().flip(1).unwrap().to_vec(), vec![3.0, 1.0, 4.0, 2.0]);
    let r = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap().repeat(&[2, 3]).unwrap();
    assert_eq!(r.shape(), &[2, 6]);
    assert_eq!(r.to_vec(), vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
    assert_eq!(a.reshape_infer(&[-1]).unwrap().shape(), &[4]);
    assert_eq!(a.reshape_infer(&[1, -1, 2]).unwrap().shape(), &[1, 2, 2]);
}

#[test]
fn join_and_rebuild_gradients_have_hand_values() {
    // d/da sum(concat(a, b) * w) = w[:, :2]; repeat sums the copies: d/dx sum(repeat(x, 3)) = 3.
    let a = var(&[2, 2], 1);
    let b = var(&[2, 1], 2);
    let w = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]).unwrap();
    Tensor::concat(&[&a, &b], 1).unwrap().mul(&w).unwrap().sum_all().backward().unwrap();
    assert_eq!(a.grad().unwrap().to_vec(), vec![0.0, 1.0, 3.0, 4.0]);
    assert_eq!(b.grad().unwrap().to_vec(), vec![2.0, 5.0]);
    let x = var(&[2], 3);
    x.repeat(&[3]).unwrap().sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![3.0, 3.0]);
    // pad: the padding gets no gradient, the interior gets gy
    let y = var(&[2], 4);
    y.pad(&[(1, 2)], 7.0).unwrap().mul(&Tensor::arange(0.0, 5.0, 1.0).unwrap()).unwrap().sum_all().backward().unwrap();
    assert_eq!(y.grad().unwrap().to_vec(), vec![1.0, 2.0]);
}

#[test]
fn shape_ops_pass_gradcheck_on_contiguous_and_strided_inputs() {
    let (a, b, c) = (var(&[2, 3], 1), var(&[2, 3], 2), var(&[3, 2], 3));
    passes(|x| Tensor::concat(&[&x[0], &x[1], &x[2].transpose(0, 1)?], 0), &[a.clone(), b.clone(), c.clone()]);
    passes(|x| Tensor::concat(&[&x[0].slice(1, 0, 3, 2)?, &x[1]], 1), &[a.clone(), b.clone()]);
    passes(|x| Tensor::stack(&[&x[0], &x[1].slice(0, 0, 2, 1)?], -1), &[a.clone(), b.clone()]);
    passes(|x| x[0].split(1, &[1, 2])?[1].mul(&x[0].chunk(3, 1)?[0]), std::slice::from_ref(&a));
    passes(|x| x[0].transpose(0, 1)?.pad(&[(1, 0), (2, 1)], 0.5), std::slice::from_ref(&a));
    passes(|x| x[0].transpose(0, 1)?.flip([0, 1]), std::slice::from_ref(&a));
    passes(|x| x[0].transpose(0, 1)?.repeat(&[2, 1, 2]), std::slice::from_ref(&a));
    passes(|x| x[0].transpose(0, 1)?.reshape_infer(&[-1, 2]), std::slice::from_ref(&a));
    passes(|x| x[0].broadcast_to(&[4, 2, 3])?.permute(&[2, 0, 1])?.narrow(0, 1, 2), &[a]);
}

#[test]
fn bad_shape_arguments_are_named_errors() {
    let a = Tensor::zeros(&[2, 3]).unwrap();
    let b = Tensor::zeros(&[3, 3]).unwrap();
    let kind = |r: Result<Tensor>| r.err().unwrap().into_kind();
    assert!(matches!(kind(Tensor::concat(&[&a, &b], 1)), ErrorKind::ShapeMismatch { op: "concat", .. }));
    assert!(matches!(kind(Tensor::concat(&[], 0)), ErrorKind::InvalidArgument { op: "concat", .. }));
    assert!(matches!(kind(Tensor::concat(&[&a], 2)), ErrorKind::AxisOutOfRange { .. }));
    assert!(matches!(kind(Tensor::stack(&[&a, &b], 0)), ErrorKind::ShapeMismatch { op: "stack", .. }));
    assert!(matches!(kind(Tensor::stack(&[&a], 3)), ErrorKind::AxisOutOfRange { op: "stack", .. }));
    assert!(matches!(a.split(1, &[1, 1]).err().unwrap().kind(), ErrorKind::InvalidArgument { op: "split", .. }));
    assert!(matches!(a.chunk(0, 0).err().unwrap().kind(), ErrorKind::InvalidArgument { op: "chunk", .. }));
    assert!(matches!(kind(a.pad(&[(1, 1)], 0.0)), ErrorKind::RankMismatch { op: "pad", .. }));
    assert!(matches!(kind(a.flip([0, 0])), ErrorKind::DuplicateAxis { op: "flip", .. }));
    assert!(matches!(kind(a.flip(5)), ErrorKind::AxisOutOfRange { op: "flip", .. }));
    assert!(matches!(kind(a.repeat(&[2])), ErrorKind::RankMismatch { op: "repeat", .. }));
    assert!(matches!(kind(a.reshape_infer(&[-1, -1])), ErrorKind::InvalidReshape { .. }));
    assert!(matches!(kind(a.reshape_infer(&[4, -1])), ErrorKind::InvalidReshape { .. }));
    assert!(matches!(kind(a.reshape_infer(&[-2, 3])), ErrorKind::InvalidReshape { .. }));
    assert!(matches!(kind(a.reshape(&[5])), ErrorKind::InvalidReshape { .. }));
    assert!(matches!(kind(a.permute(&[0, 0])), ErrorKind::RankMismatch { op: "permute", .. }));
    assert!(matches!(kind(a.narrow(1, 2, 2)), ErrorKind::IndexOutOfRange { op: "narrow", .. }));
    assert!(matches!(kind(a.narrow(1, usize::MAX, 2)), ErrorKind::IndexOutOfRange { op: "narrow", .. }));
    assert!(matches!(kind(a.slice(0, 0, 1, 0)), ErrorKind::InvalidArgument { op: "slice", .. }));
    assert!(matches!(kind(a.broadcast_to(&[2, 4])), ErrorKind::ShapeMismatch { op: "broadcast_to", .. }));
    assert!(matches!(kind(a.squeeze(0)), ErrorKind::InvalidArgument { op: "squeeze", arg: "axis", .. }));
    assert!(matches!(kind(a.unsqueeze(4)), ErrorKind::AxisOutOfRange { op: "unsqueeze", .. }));
    assert!(matches!(kind(a.flatten(1, 0)), ErrorKind::InvalidArgument { op: "flatten", .. }));
}
