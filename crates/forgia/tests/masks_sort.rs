//! Masks, sorting and index writes: comparisons and logic as 0/1 constant masks fed into
//! `where_` / `masked_fill` / `masked_select` / `masked_scatter`; sort, topk, kthvalue, median,
//! argmax; scatter, index_copy, index_put — PyTorch goldens, literal values (NaN and
//! duplicate-index rules), gradchecks and second-order checks.

mod common;

use common::golden::{self, assert_close, Case};
use common::second_order;
use common::{passes, var};
use forgia::{Indices, Result, Tensor};
use serde_json::Value;

fn indices(v: &Value) -> Indices {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<i64> = v["data"].as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).collect();
    Indices::new(data, &shape).unwrap()
}

fn f(c: &Case, key: &str) -> f32 {
    c.attrs[key].as_f64().unwrap() as f32
}

fn i(c: &Case, key: &str) -> i64 {
    c.attrs[key].as_i64().unwrap()
}

fn b(c: &Case, key: &str) -> bool {
    c.attrs[key].as_bool().unwrap()
}

/// The op of a golden case on `xs`: its value output and, for index-valued ops, the indices.
fn apply(c: &Case, xs: &[Tensor]) -> Result<(Tensor, Option<Indices>)> {
    let plain = |t: Result<Tensor>| t.map(|t| (t, None));
    let pair = |r: Result<(Tensor, Indices)>| r.map(|(t, i)| (t, Some(i)));
    let index_only = |r: Result<Indices>| r.map(|i| (Tensor::scalar(0.0), Some(i)));
    match c.op.as_str() {
        "eq" => plain(xs[0].eq(&xs[1])),
        "ne" => plain(xs[0].ne(&xs[1])),
        "lt" => plain(xs[0].lt(&xs[1])),
        "le" => plain(xs[0].le(&xs[1])),
        "gt" => plain(xs[0].gt(&xs[1])),
        "ge" => plain(xs[0].ge(&xs[1])),
        "gt_scalar" => Ok((xs[0].gt_scalar(f(c, "scalar")), None)),
        "le_scalar" => Ok((xs[0].le_scalar(f(c, "scalar")), None)),
        "eq_scalar" => Ok((xs[0].eq_scalar(f(c, "scalar")), None)),
        "logical_and" => plain(xs[0].logical_and(&xs[1])),
        "logical_or" => plain(xs[0].logical_or(&xs[1])),
        "logical_xor" => plain(xs[0].logical_xor(&xs[1])),
        "logical_not" => Ok((xs[0].logical_not(), None)),
        "any" => plain(xs[0].any(i(c, "axis") as isize, b(c, "keepdim"))),
        "all" => plain(xs[0].all(i(c, "axis") as isize, b(c, "keepdim"))),
        "nonzero" => index_only(xs[0].nonzero()),
        "where_gt_scalar" => plain(Tensor::where_(&xs[0].gt_scalar(f(c, "scalar")), &xs[1], &xs[2])),
        "where_lt" => plain(Tensor::where_(&xs[0].lt(&xs[1])?, &xs[2], &xs[3])),
        "masked_fill_ge" => plain(xs[0].masked_fill(&xs[0].ge(&xs[1])?, f(c, "value"))),
        "masked_fill_band" => {
            let outside = xs[0].lt_scalar(f(c, "low")).logical_or(&xs[0].gt_scalar(f(c, "high")))?;
            plain(xs[0].masked_fill(&outside, f(c, "value")))
        }
        "masked_select_gt" => plain(xs[0].masked_select(&xs[1].gt_scalar(f(c, "scalar")))),
        "masked_scatter_lt" => plain(xs[0].masked_scatter(&xs[1].lt_scalar(f(c, "scalar")), &xs[2])),
        "sort" => pair(xs[0].sort(i(c, "axis") as isize, b(c, "descending"))),
        "argsort" => index_only(xs[0].argsort(i(c, "axis") as isize, b(c, "descending"))),
        "topk" => pair(xs[0].topk(i(c, "k") as usize, i(c, "axis") as isize, b(c, "largest"), true)),
        "kthvalue" => pair(xs[0].kthvalue(i(c, "k") as usize, i(c, "axis") as isize, b(c, "keepdim"))),
        "median" => pair(xs[0].median(i(c, "axis") as isize, b(c, "keepdim"))),
        "median_all" => plain(xs[0].median_all()),
        "argmax" => index_only(xs[0].argmax(i(c, "axis") as isize, b(c, "keepdim"))),
        "argmin" => index_only(xs[0].argmin(i(c, "axis") as isize, b(c, "keepdim"))),
        "scatter" => plain(xs[0].scatter(i(c, "axis") as isize, &indices(&c.attrs["index"]), &xs[1])),
        "scatter_value" => {
            plain(xs[0].scatter_value(i(c, "axis") as isize, &indices(&c.attrs["index"]), f(c, "value")))
        }
        "index_copy" => plain(xs[0].index_copy(i(c, "axis") as isize, &indices(&c.attrs["index"]), &xs[1])),
        "index_put" => {
            let idx: Vec<Indices> = c.attrs["indices"].as_array().unwrap().iter().map(indices).collect();
            plain(xs[0].index_put(&idx, &xs[1], b(c, "accumulate")))
        }
        op => panic!("unhandled op {op}"),
    }
}

#[test]
fn masks_sort_and_scatter_match_the_pytorch_goldens() {
    let cases = golden::load("masks_sort");
    assert!(cases.len() >= 50);
    for c in &cases {
        let vars: Vec<Tensor> = c.inputs.iter().map(|t| t.clone().into_variable()).collect();
        let (y, idx) = apply(c, &vars).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        if let Some(want) = c.raw.get("output_indices") {
            let want = indices(want);
            let got = idx.unwrap_or_else(|| panic!("{}: no indices", c.name));
            assert_eq!(got, want, "{} indices", c.name);
        }
        if idx_only(c) {
            continue;
        }
        assert_close(&y, c.output.as_ref().unwrap(), 1e-6, &c.name);
        if let Some(ct) = &c.cotangent {
            y.backward_with_grad(ct).unwrap();
            for (k, (v, g)) in vars.iter().zip(&c.grads).enumerate() {
                if let Some(g) = g {
                    let what = format!("{} grad {k}", c.name);
                    assert_close(&v.grad().unwrap_or_else(|| panic!("{what}: none")), g, 1e-6, &what);
                }
            }
        } else {
            assert!(!y.requires_grad(), "{}: a mask or index op is a constant", c.name);
        }
    }
}

/// Cases whose value output is a placeholder (only the indices are compared).
fn idx_only(c: &Case) -> bool {
    matches!(c.op.as_str(), "nonzero" | "argsort" | "argmax" | "argmin")
}

#[test]
fn comparisons_follow_ieee_and_pytorch_on_nan_and_return_constants() {
    let nan = f32::NAN;
    let x = Tensor::variable(vec![1.0, nan, -0.0, f32::INFINITY], &[4]).unwrap();
    let y = Tensor::from_vec(vec![1.0, nan, 0.0, 1.0], &[4]).unwrap();
    assert_eq!(x.eq(&y).unwrap().to_vec(), [1.0, 0.0, 1.0, 0.0]); // NaN != NaN, -0 == 0
    assert_eq!(x.ne(&y).unwrap().to_vec(), [0.0, 1.0, 0.0, 1.0]);
    assert_eq!(x.le(&y).unwrap().to_vec(), [1.0, 0.0, 1.0, 0.0]);
    assert_eq!(x.gt(&y).unwrap().to_vec(), [0.0, 0.0, 0.0, 1.0]);
    assert_eq!(x.isnan().to_vec(), [0.0, 1.0, 0.0, 0.0]);
    assert_eq!(x.isinf().to_vec(), [0.0, 0.0, 0.0, 1.0]);
    assert_eq!(x.isfinite().to_vec(), [1.0, 0.0, 1.0, 0.0]);
    // A NaN is true, as `torch.tensor(nan).bool()`.
    assert_eq!(x.logical_not().to_vec(), [0.0, 0.0, 1.0, 0.0]);
    assert_eq!(x.logical_and(&y).unwrap().to_vec(), [1.0, 1.0, 0.0, 1.0]);
    assert_eq!(x.logical_xor(&y).unwrap().to_vec(), [0.0, 0.0, 0.0, 0.0]);
    for m in [x.eq(&y).unwrap(), x.gt_scalar(0.0), x.isnan(), x.any(0, false).unwrap(), x.logical_not()] {
        assert!(!m.requires_grad(), "masks are constants");
    }
    // Broadcast [2, 1] against [3].
    let col = Tensor::from_vec(vec![0.0, 2.0], &[2, 1]).unwrap();
    let row = Tensor::from_vec(vec![0.0, 1.0, 2.0], &[3]).unwrap();
    let m = col.lt(&row).unwrap();
    assert_eq!(m.shape(), &[2, 3]);
    assert_eq!(m.to_vec(), [0.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn any_and_all_follow_pytorch_including_empty_axes_and_scalars() {
    let x = Tensor::from_vec(vec![0.0, 0.0, f32::NAN, 1.0, 0.0, 2.0], &[2, 3]).unwrap();
    assert_eq!(x.any(1, false).unwrap().to_vec(), [1.0, 1.0]);
    assert_eq!(x.all(1, true).unwrap().shape(), &[2, 1]);
    assert_eq!(x.all(0, false).unwrap().to_vec(), [0.0, 0.0, 1.0]);
    assert_eq!(x.any([0, 1], false).unwrap().shape(), &[] as &[usize]);
    assert_eq!(x.any_all().to_vec(), [1.0]);
    assert_eq!(x.all_all().to_vec(), [0.0]);
    let empty = Tensor::zeros(&[0, 3]).unwrap();
    assert_eq!(empty.any(0, false).unwrap().to_vec(), [0.0; 3]);
    assert_eq!(empty.all(0, false).unwrap().to_vec(), [1.0; 3]);
    assert_eq!((empty.any_all().item().unwrap(), empty.all_all().item().unwrap()), (0.0, 1.0));
    let s = Tensor::scalar(3.0);
    assert_eq!(s.all(-1, true).unwrap().shape(), &[] as &[usize]);
    let at = s.nonzero().unwrap();
    assert_eq!(at.shape(), &[1, 0]);
    assert_eq!(Tensor::zeros(&[2, 2]).unwrap().argwhere().unwrap().shape(), &[0, 2]);
}

#[test]
fn masks_from_comparisons_feed_where_and_masked_fill_directly_and_nan_in_a_mask_is_true() {
    let x = Tensor::variable(vec![-1.0, 0.5, 2.0, -3.0], &[4]).unwrap();
    let keep = x.gt_scalar(0.0);
    let y = Tensor::where_(&keep, &x, &Tensor::scalar(0.0)).unwrap(); // relu through a mask
    assert_eq!(y.to_vec(), [0.0, 0.5, 2.0, 0.0]);
    y.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), [0.0, 1.0, 1.0, 0.0]);
    let filled = x.masked_fill(&keep.logical_not(), -9.0).unwrap();
    assert_eq!(filled.to_vec(), [-9.0, 0.5, 2.0, -9.0]);
    // A hand-made mask with NaN, -0.0 and a large value: nonzero (NaN included) selects.
    let mask = Tensor::from_vec(vec![f32::NAN, -0.0, 7.0, 0.0], &[4]).unwrap();
    assert_eq!(Tensor::where_(&mask, &x, &Tensor::scalar(5.0)).unwrap().to_vec(), [-1.0, 5.0, 2.0, 5.0]);
    assert_eq!(x.masked_fill(&mask, 1.0).unwrap().to_vec(), [1.0, 0.5, 1.0, -3.0]);
    assert_eq!(x.masked_select(&mask).unwrap().to_vec(), [-1.0, 2.0]);
}

#[test]
fn sort_is_stable_and_puts_nan_last_ascending_and_first_descending() {
    let nan = f32::NAN;
    let x = Tensor::from_vec(vec![3.0, nan, 1.0, 2.0, nan, 1.0], &[6]).unwrap();
    let (v, i) = x.sort(0, false).unwrap();
    assert_eq!(i.data(), &[2, 5, 3, 0, 1, 4]);
    assert_eq!(&v.to_vec()[..4], &[1.0, 1.0, 2.0, 3.0]);
    let (_, i) = x.sort(-1, true).unwrap();
    assert_eq!(i.data(), &[1, 4, 0, 3, 2, 5]);
    assert_eq!(x.argsort(0, false).unwrap().data(), &[2, 5, 3, 0, 1, 4]);
    let (v, i) = x.topk(3, 0, true, true).unwrap();
    assert!(v.to_vec()[0].is_nan() && v.to_vec()[2] == 3.0);
    assert_eq!(i.data(), &[1, 4, 0]);
    let (v, i) = x.topk(3, 0, false, false).unwrap(); // unsorted: original order
    assert_eq!((v.to_vec(), i.data().to_vec()), (vec![1.0, 2.0, 1.0], vec![2, 3, 5]));
    let (m, at) = x.median(0, false).unwrap();
    assert!(m.item().unwrap().is_nan() && at.data() == [1]);
    assert!(x.median_all().unwrap().item().unwrap().is_nan());
    let (k, at) = x.kthvalue(3, 0, true).unwrap();
    assert_eq!((k.to_vec(), at.shape().to_vec(), at.data().to_vec()), (vec![2.0], vec![1], vec![3]));
    // A NaN is argmax's and argmin's answer (its first position), as in PyTorch.
    assert_eq!(x.argmax(0, false).unwrap().data(), &[1]);
    assert_eq!(x.argmin(0, true).unwrap().data(), &[1]);
    // Rank 0 and empty axes.
    let s = Tensor::scalar(4.0);
    let (v, i) = s.sort(0, false).unwrap();
    assert_eq!((v.shape(), i.shape()), (&[] as &[usize], &[] as &[usize]));
    assert_eq!(s.topk(1, -1, true, true).unwrap().1.data(), &[0]);
    let e = Tensor::zeros(&[2, 0]).unwrap();
    assert_eq!(e.sort(1, false).unwrap().0.shape(), &[2, 0]);
    assert_eq!(e.topk(0, 1, true, true).unwrap().1.shape(), &[2, 0]);
}

#[test]
fn scatter_index_copy_and_index_put_let_the_last_duplicate_win_and_only_it_get_a_gradient() {
    let x = Tensor::variable(vec![0.0; 4], &[4]).unwrap();
    let src = Tensor::variable(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let y = x.scatter(0, &Indices::from(vec![1i64, 1, 2]), &src).unwrap();
    assert_eq!(y.to_vec(), [0.0, 2.0, 3.0, 0.0]);
    y.backward_with_grad(&Tensor::from_vec(vec![10.0, 20.0, 30.0, 40.0], &[4]).unwrap()).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), [10.0, 0.0, 0.0, 40.0]);
    assert_eq!(src.grad().unwrap().to_vec(), [0.0, 20.0, 30.0]);

    let x = Tensor::variable(vec![0.0; 6], &[3, 2]).unwrap();
    let rows = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let y = x.index_copy(0, &Indices::from(vec![2usize, 2]), &rows).unwrap();
    assert_eq!(y.to_vec(), [0.0, 0.0, 0.0, 0.0, 3.0, 4.0]);
    y.sum_all().backward().unwrap();
    assert_eq!(rows.grad().unwrap().to_vec(), [0.0, 0.0, 1.0, 1.0]);
    assert_eq!(x.grad().unwrap().to_vec(), [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]);

    let x = Tensor::zeros(&[2, 2]).unwrap();
    let v = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let (r, c) = (Indices::from(vec![0i64, 0, -1]), Indices::from(vec![1i64, 1, 0]));
    let over = x.index_put(&[r.clone(), c.clone()], &v, false).unwrap();
    assert_eq!(over.to_vec(), [0.0, 2.0, 3.0, 0.0]);
    let acc = x.index_put(&[r, c], &v, true).unwrap();
    assert_eq!(acc.to_vec(), [0.0, 3.0, 3.0, 0.0]);
    // A scalar value broadcasts over the selected rows.
    let rows = x.index_put(&[Indices::from(vec![1i64])], &Tensor::scalar(7.0), false).unwrap();
    assert_eq!(rows.to_vec(), [0.0, 0.0, 7.0, 7.0]);
    let filled = x.scatter_value(1, &Indices::new(vec![1, 0], &[2, 1]).unwrap(), 5.0).unwrap();
    assert_eq!(filled.to_vec(), [0.0, 5.0, 5.0, 0.0]);
}

#[test]
fn masked_scatter_reads_the_source_in_row_major_order_and_ignores_its_tail() {
    let x = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let src = Tensor::variable(vec![10.0, 20.0, 30.0], &[3]).unwrap();
    let mask = Tensor::from_vec(vec![0.0, 1.0], &[2]).unwrap(); // broadcast over rows
    let y = x.masked_scatter(&mask, &src).unwrap();
    assert_eq!(y.to_vec(), [1.0, 10.0, 3.0, 20.0]);
    y.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), [1.0, 0.0, 1.0, 0.0]);
    assert_eq!(src.grad().unwrap().to_vec(), [1.0, 1.0, 0.0]);
}

#[test]
fn value_outputs_of_selections_pass_gradcheck() {
    let w = |n: usize| Tensor::from_vec((0..n).map(|k| 0.3 + 0.1 * k as f32).collect(), &[n]).unwrap();
    passes(|x| Ok(x[0].sort(1, false)?.0.mul(&w(4))?.sum_all()), &[var(&[3, 4], 1)]);
    passes(|x| Ok(x[0].sort(0, true)?.0.square().sum_all()), &[var(&[3, 4], 2)]);
    passes(|x| Ok(x[0].topk(2, -1, true, true)?.0.square().sum_all()), &[var(&[3, 4], 3)]);
    passes(|x| Ok(x[0].topk(2, 0, false, false)?.0.square().sum_all()), &[var(&[3, 4], 4)]);
    passes(|x| Ok(x[0].kthvalue(2, 1, false)?.0.square().sum_all()), &[var(&[3, 4], 5)]);
    passes(|x| Ok(x[0].median(0, true)?.0.square().sum_all()), &[var(&[3, 4], 6)]);
    passes(|x| Ok(x[0].median_all()?.square()), &[var(&[3, 4], 7)]);
}

#[test]
fn index_writes_pass_gradcheck() {
    let idx = Indices::new(vec![2, 0, 2, 1, 1, 3], &[3, 2]).unwrap(); // duplicates in row 1
    passes(|x| Ok(x[0].scatter(1, &idx, &x[1])?.square().sum_all()), &[var(&[3, 4], 1), var(&[3, 3], 2)]);
    passes(|x| Ok(x[0].scatter_value(1, &idx, 0.5)?.square().sum_all()), &[var(&[3, 4], 3)]);
    let rows = Indices::from(vec![1usize, 3, 1]);
    passes(|x| Ok(x[0].index_copy(0, &rows, &x[1])?.square().sum_all()), &[var(&[4, 2], 4), var(&[3, 2], 5)]);
    let (r, c) = (Indices::new(vec![0, 2, 0], &[3, 1]).unwrap(), Indices::from(vec![1i64, 1]));
    for acc in [false, true] {
        passes(
            |x| Ok(x[0].index_put(&[r.clone(), c.clone()], &x[1], acc)?.square().sum_all()),
            &[var(&[3, 2], 6), var(&[1, 2], 7)],
        );
    }
    let mask = Tensor::from_vec(vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0], &[2, 3]).unwrap();
    passes(|x| Ok(x[0].masked_select(&mask)?.square().sum_all()), &[var(&[3], 8)]);
    passes(|x| Ok(x[0].masked_scatter(&mask, &x[1])?.square().sum_all()), &[var(&[2, 3], 9), var(&[5], 10)]);
}

#[test]
fn selections_and_index_writes_support_second_order() {
    let c3 = [Tensor::from_vec(vec![0.3, -0.2, 0.7, 1.1, -0.4, 0.9], &[2, 3]).unwrap()];
    let cube = |t: Tensor| -> Result<Tensor> { Ok(t.square().mul(&t)?.sum_all()) };
    second_order::check(|x| cube(x[0].sort(1, true)?.0), &[var(&[2, 3], 1)], &Tensor::scalar(1.0), &c3);
    second_order::check(|x| cube(x[0].topk(2, 1, true, true)?.0), &[var(&[2, 3], 2)], &Tensor::scalar(1.0), &c3);
    second_order::check(|x| cube(x[0].median(1, false)?.0), &[var(&[2, 3], 3)], &Tensor::scalar(1.0), &c3);
    let idx = Indices::new(vec![1, 1, 0], &[1, 3]).unwrap();
    let c2 = [c3[0].clone(), Tensor::from_vec(vec![0.5, -1.0, 0.25], &[1, 3]).unwrap()];
    second_order::check(
        |x| cube(x[0].scatter(1, &idx, &x[1])?),
        &[var(&[2, 3], 4), var(&[1, 3], 5)],
        &Tensor::scalar(1.0),
        &c2,
    );
    let (r, c) = (Indices::from(vec![1i64, 0, 1]), Indices::from(vec![2i64, 0, 2]));
    let cv = [c3[0].clone(), Tensor::from_vec(vec![0.5, -1.0, 0.25], &[3]).unwrap()];
    for acc in [false, true] {
        second_order::check(
            |x| cube(x[0].index_put(&[r.clone(), c.clone()], &x[1], acc)?),
            &[var(&[2, 3], 6), var(&[3], 7)],
            &Tensor::scalar(1.0),
            &cv,
        );
    }
}

#[test]
fn a_large_last_axis_sort_split_over_threads_matches_row_by_row_sorts() {
    // 64 × 2048 passes the parallel threshold; every row must equal its own (serial) sort.
    let data = common::lcg(64 * 2048, 11, 1.0).iter().map(|v| (v * 64.0).round()).collect::<Vec<f32>>();
    let x = Tensor::from_vec(data, &[64, 2048]).unwrap();
    let (v, i) = x.sort(1, true).unwrap();
    let (tv, ti) = x.topk(5, 1, true, true).unwrap();
    for r in [0usize, 17, 63] {
        let row = x.narrow(0, r, 1).unwrap();
        let (rv, ri) = row.sort(1, true).unwrap();
        assert_eq!(v.narrow(0, r, 1).unwrap().to_vec(), rv.to_vec());
        assert_eq!(&i.data()[r * 2048..(r + 1) * 2048], ri.data());
        assert_eq!(&ti.data()[r * 5..(r + 1) * 5], &ri.data()[..5]);
        assert_eq!(tv.narrow(0, r, 1).unwrap().to_vec(), rv.to_vec()[..5].to_vec());
    }
}

#[test]
fn the_other_selections_and_writes_support_second_order_too() {
    let one = Tensor::scalar(1.0);
    let cube = |t: Tensor| -> Result<Tensor> { Ok(t.square().mul(&t)?.sum_all()) };
    let c = |n: usize| Tensor::from_vec((0..n).map(|k| 0.4 - 0.15 * k as f32).collect(), &[2, n / 2]).unwrap();
    second_order::check(|x| cube(x[0].kthvalue(2, 1, true)?.0), &[var(&[2, 3], 1)], &one, &[c(6)]);
    second_order::check(|x| cube(x[0].median_all()?), &[var(&[2, 3], 2)], &one, &[c(6)]);
    let mask = Tensor::from_vec(vec![1.0, 0.0, 1.0, 1.0, 0.0, 1.0], &[2, 3]).unwrap();
    second_order::check(|x| cube(x[0].masked_select(&mask)?), &[var(&[2, 3], 3)], &one, &[c(6)]);
    let src = Tensor::from_vec(vec![0.5, -1.0, 0.25, 2.0], &[2, 2]).unwrap();
    second_order::check(
        |x| cube(x[0].masked_scatter(&mask, &x[1])?),
        &[var(&[2, 3], 4), var(&[2, 2], 5)],
        &one,
        &[c(6), src],
    );
    let rows = Indices::from(vec![1usize, 1]);
    let cs = Tensor::from_vec(vec![0.5, -1.0, 0.25, 2.0, 0.1, -0.3], &[2, 3]).unwrap();
    second_order::check(
        |x| cube(x[0].index_copy(0, &rows, &x[1])?),
        &[var(&[2, 3], 6), var(&[2, 3], 7)],
        &one,
        &[c(6), cs],
    );
}
