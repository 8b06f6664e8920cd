//! Issue 15's shape half: tril, triu, diagonal, diag, diag_embed, trace, roll, cumprod (with
//! zeros), cummax/cummin, unfold/fold (tested as adjoints) and the reflect, replicate and
//! circular pad modes. PyTorch goldens, gradcheck, second order and edge cases.

mod common;

use common::golden::{self, Case};
use common::second_order;
use forgia::{PadMode, Result, Rng, Tensor, UnfoldOptions};

fn t(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn list(v: &serde_json::Value) -> Vec<i64> {
    v.as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).collect()
}

fn pair(v: &serde_json::Value) -> [usize; 2] {
    let l = list(v);
    [l[0] as usize, l[1] as usize]
}

fn unfold_options(case: &Case) -> UnfoldOptions {
    let a = &case.attrs;
    UnfoldOptions {
        kernel: pair(&a["kernel"]),
        dilation: pair(&a["dilation"]),
        padding: pair(&a["padding"]),
        stride: pair(&a["stride"]),
    }
}

fn apply(case: &Case, xs: &[Tensor]) -> Option<Result<Tensor>> {
    let a = &case.attrs;
    let i = |k: &str| a[k].as_i64().unwrap();
    let dims = |k: &str| list(&a[k]).into_iter().map(|d| d as isize).collect::<Vec<_>>();
    Some(match case.op.as_str() {
        "tril" => xs[0].tril(i("diagonal")),
        "triu" => xs[0].triu(i("diagonal")),
        "diagonal" => xs[0].diagonal(i("offset") as isize, i("dim1") as isize, i("dim2") as isize),
        "diag" => xs[0].diag(i("diagonal") as isize),
        "diag_embed" => xs[0].diag_embed(i("offset") as isize, i("dim1") as isize, i("dim2") as isize),
        "trace" => xs[0].trace(),
        "roll" => xs[0].roll(&dims("shifts"), &dims("dims")),
        "cumprod" => xs[0].cumprod(i("axis")),
        "cummax" => xs[0].cummax(i("axis")).map(|(v, _)| v),
        "unfold" => xs[0].unfold(unfold_options(case)),
        "fold" => xs[0].fold(pair(&a["output_size"]), unfold_options(case)),
        "pad_mode" => {
            let pads: Vec<(usize, usize)> = a["pads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_u64().unwrap() as usize, p[1].as_u64().unwrap() as usize))
                .collect();
            let mode = match a["mode"].as_str().unwrap() {
                "reflect" => PadMode::Reflect,
                "replicate" => PadMode::Replicate,
                "circular" => PadMode::Circular,
                m => panic!("mode {m}"),
            };
            xs[0].pad_with(&pads, mode)
        }
        _ => return None,
    })
}

#[test]
fn shape_goldens_match_pytorch() {
    let ran = golden::check_known("layers_loss", 1e-5, apply);
    for case in ran.iter().filter(|c| c.op == "cummax") {
        let (_, idx) = case.inputs[0].cummax(case.attrs["axis"].as_i64().unwrap()).unwrap();
        assert_eq!(idx.data(), list(&case.raw["output_indices"]["data"]).as_slice(), "{}", case.name);
    }
    let n = ran.len();
    assert!(n >= 28, "only {n} shape goldens ran");
}

type Op = (&'static str, fn(&Tensor) -> Result<Tensor>, Vec<usize>);

fn ops() -> Vec<Op> {
    vec![
        ("tril", |x| x.tril(0), vec![3, 4]),
        ("triu", |x| x.triu(-1), vec![2, 3, 3]),
        ("diagonal", |x| x.diagonal(1, 0, 1), vec![3, 4]),
        ("diagonal batched", |x| x.diagonal(-1, 2, 0), vec![3, 2, 4]),
        ("diag vector", |x| x.diag(-1), vec![3]),
        ("diag matrix", |x| x.diag(1), vec![3, 3]),
        ("diag_embed", |x| x.diag_embed(1, 0, 2), vec![2, 3]),
        ("trace", |x| x.trace(), vec![3, 4]),
        ("roll", |x| x.roll(&[1, -5], &[0, 1]), vec![3, 4]),
        ("roll flat", |x| x.roll(&[7], &[]), vec![3, 4]),
        ("cumprod", |x| x.cumprod(1), vec![2, 4]),
        ("cumprod axis 0", |x| x.cumprod(0), vec![4, 2]),
        ("cummax", |x| x.cummax(1).map(|(v, _)| v), vec![3, 4]),
        ("cummin", |x| x.cummin(0).map(|(v, _)| v), vec![3, 4]),
        (
            "unfold",
            |x| x.unfold(UnfoldOptions { padding: [1, 0], stride: [2, 1], ..UnfoldOptions::new([2, 2]) }),
            vec![1, 2, 4, 3],
        ),
        ("fold", |x| x.fold([3, 3], UnfoldOptions::new([2, 2])), vec![1, 8, 4]),
        ("pad reflect", |x| x.pad_with(&[(1, 2), (2, 1)], PadMode::Reflect), vec![3, 4]),
        ("pad replicate", |x| x.pad_with(&[(2, 1), (0, 3)], PadMode::Replicate), vec![3, 4]),
        ("pad circular", |x| x.pad_with(&[(3, 1), (1, 4)], PadMode::Circular), vec![3, 4]),
    ]
}

#[test]
fn shape_ops_pass_gradcheck_and_second_order() {
    let mut rng = Rng::new(31);
    for (name, f, shape) in ops() {
        let x = common::normal_var(&shape, rng.next_u64());
        common::check(|v| f(&v[0]), std::slice::from_ref(&x), name);
        // Squared, so the second derivative is not identically zero.
        let g = |v: &[Tensor]| Ok(f(&v[0])?.square());
        let seed = Tensor::randn(g(std::slice::from_ref(&x)).unwrap().shape(), 0.0, 1.0, &mut rng).unwrap();
        let c = [Tensor::randn(&shape, 0.0, 1.0, &mut rng).unwrap()];
        second_order::check(g, std::slice::from_ref(&x), &seed, &c);
    }
}

#[test]
fn cumprod_has_exact_gradients_and_second_order_with_zeros() {
    let x = Tensor::variable(vec![2.0, 0.0, 3.0, 0.0, 5.0], &[5]).unwrap();
    let y = x.cumprod(0).unwrap();
    assert_eq!(y.to_vec(), [2.0, 0.0, 0.0, 0.0, 0.0]);
    y.sum_all().backward().unwrap();
    // d/dx0 = 1 + x1 + x1x2 + ... = 1; d/dx1 = x0 + x0x2 + x0x2x3 + ... = 2 + 6 = 8; the rest
    // are behind the zero at 1.
    assert_eq!(x.grad().unwrap().to_vec(), [1.0, 8.0, 0.0, 0.0, 0.0]);
    let f = |v: &[Tensor]| v[0].cumprod(1);
    let z = t(&[1.5, 0.0, 2.0, -1.0, 0.0, 0.0, 3.0, 0.5], &[2, 4]);
    common::check(f, &[z.clone().into_variable()], "cumprod with zeros");
    second_order::check(f, &[z], &t(&[1.0, -2.0, 0.5, 1.0, 0.3, 1.0, -1.0, 2.0], &[2, 4]), &[t(&[0.5; 8], &[2, 4])]);
}

#[test]
fn cummax_takes_the_later_index_on_ties_and_propagates_nan() {
    let x = t(&[1.0, 3.0, 3.0, 2.0, f32::NAN, 5.0], &[6]);
    let (v, i) = x.cummax(0).unwrap();
    assert_eq!(i.data(), [0, 1, 2, 2, 4, 4]);
    assert_eq!(v.to_vec()[..4], [1.0, 3.0, 3.0, 3.0]);
    assert!(v.to_vec()[4..].iter().all(|v| v.is_nan()));
    let (v, i) = t(&[2.0, 1.0, 1.0, 3.0], &[4]).cummin(0).unwrap();
    assert_eq!((v.to_vec(), i.data().to_vec()), (vec![2.0, 1.0, 1.0, 1.0], vec![0, 1, 2, 2]));
    let x = Tensor::variable(vec![1.0, 3.0, 2.0], &[3]).unwrap();
    x.cummax(0).unwrap().0.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), [1.0, 2.0, 0.0]);
}

#[test]
fn unfold_and_fold_are_adjoints() {
    let mut rng = Rng::new(32);
    let settings = [
        ([3, 3], [1, 1], [0, 0], [1, 1], [2, 3, 5, 6]),
        ([2, 3], [2, 1], [1, 2], [2, 1], [1, 2, 7, 5]),
        ([1, 1], [1, 1], [0, 0], [3, 2], [2, 1, 4, 4]),
        ([2, 2], [1, 1], [1, 1], [1, 1], [1, 3, 3, 3]),
    ];
    for (kernel, dilation, padding, stride, shape) in settings {
        let o = UnfoldOptions { kernel, dilation, padding, stride };
        let x = Tensor::randn(&shape, 0.0, 1.0, &mut rng).unwrap();
        let cols = x.unfold(o).unwrap();
        let y = Tensor::randn(cols.shape(), 0.0, 1.0, &mut rng).unwrap();
        let lhs = cols.mul(&y).unwrap().sum_all().item().unwrap();
        let rhs = x.mul(&y.fold([shape[2], shape[3]], o).unwrap()).unwrap().sum_all().item().unwrap();
        assert!((lhs - rhs).abs() <= 1e-4 * (1.0 + lhs.abs()), "{o:?}: <unfold x, y> {lhs} vs <x, fold y> {rhs}");
        // Unbatched forms are the batched ones without the leading axis.
        let one = x.narrow(0, 0, 1).unwrap();
        let unbatched = one.reshape(&shape[1..]).unwrap().unfold(o).unwrap();
        assert_eq!(unbatched.to_vec(), one.unfold(o).unwrap().to_vec());
    }
    // fold(unfold(x)) counts how many windows cover each pixel.
    let ones = Tensor::ones(&[1, 1, 3, 3]).unwrap();
    let cover = ones.unfold(UnfoldOptions::new([2, 2])).unwrap().fold([3, 3], UnfoldOptions::new([2, 2])).unwrap();
    assert_eq!(cover.to_vec(), [1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]);
}

#[test]
fn pad_modes_follow_pytorch_on_one_axis() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    assert_eq!(x.pad_with(&[(2, 2)], PadMode::Reflect).unwrap().to_vec(), [3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]);
    assert_eq!(x.pad_with(&[(2, 1)], PadMode::Replicate).unwrap().to_vec(), [1.0, 1.0, 1.0, 2.0, 3.0, 3.0]);
    assert_eq!(x.pad_with(&[(1, 3)], PadMode::Circular).unwrap().to_vec(), [3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    assert_eq!(x.pad_with(&[(1, 0)], PadMode::Constant(9.0)).unwrap().to_vec(), [9.0, 1.0, 2.0, 3.0]);
    // Border elements collect the gradient of every copy.
    let v = Tensor::variable(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    v.pad_with(&[(2, 1)], PadMode::Replicate).unwrap().sum_all().backward().unwrap();
    assert_eq!(v.grad().unwrap().to_vec(), [3.0, 1.0, 2.0]);
}

#[test]
fn diagonal_ops_agree_with_each_other() {
    let m = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert_eq!(m.diagonal(0, 0, 1).unwrap().to_vec(), [1.0, 5.0]);
    assert_eq!(m.diagonal(1, 0, 1).unwrap().to_vec(), [2.0, 6.0]);
    assert_eq!(m.diagonal(-1, 0, 1).unwrap().to_vec(), [4.0]);
    assert_eq!(m.diagonal(5, 0, 1).unwrap().shape(), &[0]);
    assert_eq!(m.trace().unwrap().item().unwrap(), 6.0);
    let v = t(&[1.0, 2.0], &[2]);
    assert_eq!(v.diag(1).unwrap().to_vec(), [0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0]);
    assert_eq!(v.diag(1).unwrap().diag(1).unwrap().to_vec(), [1.0, 2.0]);
    assert_eq!(v.diag_embed(0, -2, -1).unwrap().to_vec(), Tensor::eye(2).unwrap().mul(&v).unwrap().to_vec());
    let inf = t(&[1.0, f32::INFINITY, f32::NAN, 2.0], &[2, 2]);
    let lower = inf.tril(0).unwrap().to_vec();
    assert_eq!((lower[0], lower[1], lower[3]), (1.0, 0.0, 2.0), "∞ above the diagonal becomes 0");
    assert!(lower[2].is_nan(), "NaN inside the triangle stays");
    assert_eq!(inf.triu(1).unwrap().to_vec(), [0.0, f32::INFINITY, 0.0, 0.0]);
}
