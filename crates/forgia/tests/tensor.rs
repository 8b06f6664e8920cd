//! The tensor core: every view against a naive copy, property tests for broadcasting, strides,
//! reshape and reductions against straightforward references, GEMM against a triple loop, and
//! the bad-input table.

use forgia::{ErrorKind, Rng, Tensor};
use proptest::prelude::*;

/// Row-major index → multi-index.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (d, &n) in shape.iter().enumerate().rev() {
        idx[d] = i % n;
        i /= n;
    }
    idx
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|v| v as f32).collect(), shape).unwrap()
}

#[test]
fn permute_matches_a_naive_copy() {
    let x = iota(&[2, 3, 4]);
    let y = x.permute(&[2, 0, 1]).unwrap();
    assert!(y.shares_storage(&x));
    let (xs, ys) = (x.to_vec(), y.to_vec());
    for (i, &v) in ys.iter().enumerate() {
        let o = unravel(i, y.shape());
        assert_eq!(v, xs[ravel(&[o[1], o[2], o[0]], x.shape())]);
    }
}

#[test]
fn slice_with_a_step_matches_a_naive_copy() {
    let x = iota(&[5, 7]);
    let y = x.slice(1, 1, 7, 2).unwrap();
    assert_eq!(y.shape(), &[5, 3]);
    let expected: Vec<f32> = (0..5).flat_map(|r| [1, 3, 5].map(|c| (r * 7 + c) as f32)).collect();
    assert_eq!(y.to_vec(), expected);
    assert_eq!(x.slice(0, -2, 100, 1).unwrap().shape(), &[2, 7]);
    assert_eq!(x.narrow(0, 1, 2).unwrap().to_vec(), (7..21).map(|v| v as f32).collect::<Vec<_>>());
}

#[test]
fn broadcast_squeeze_unsqueeze_and_flatten_are_views_with_the_right_values() {
    let x = iota(&[3, 1]);
    let b = x.broadcast_to(&[2, 3, 4]).unwrap();
    assert!(b.shares_storage(&x));
    assert_eq!(b.to_vec(), (0..24).map(|i| ((i / 4) % 3) as f32).collect::<Vec<_>>());
    let s = x.squeeze(1).unwrap();
    assert_eq!((s.shape(), s.to_vec()), (&[3][..], vec![0.0, 1.0, 2.0]));
    assert_eq!(s.unsqueeze(0).unwrap().shape(), &[1, 3]);
    assert_eq!(s.unsqueeze(-1).unwrap().shape(), &[3, 1]);
    let f = iota(&[2, 3, 4]).flatten(1, 2).unwrap();
    assert_eq!(f.shape(), &[2, 12]);
}

#[test]
fn contiguous_copies_only_when_needed() {
    let x = iota(&[3, 4]);
    assert!(x.contiguous().unwrap().shares_storage(&x));
    let t = x.transpose(0, 1).unwrap();
    assert!(!t.is_contiguous());
    let c = t.contiguous().unwrap();
    assert!(c.is_contiguous() && !c.shares_storage(&x));
    assert_eq!(c.to_vec(), t.to_vec());
    // Reshape of strided data copies, and is still right.
    assert_eq!(t.reshape(&[12]).unwrap().to_vec(), t.to_vec());
}

#[test]
fn a_transposed_view_copies_to_the_transpose_of_its_storage() {
    // The blocked transpose (sides of 8 and more, partial blocks and tiles), a batch of
    // matrices, a narrowed view with an offset and a longer row, and a small one that goes
    // element by element; each against the definition.
    for (rows, cols) in [(9, 13), (64, 70), (3, 40), (8, 8)] {
        let t = iota(&[rows, cols]).transpose(0, 1).unwrap().contiguous().unwrap();
        let want: Vec<f32> = (0..rows * cols).map(|i| ((i % rows) * cols + i / rows) as f32).collect();
        assert_eq!(t.to_vec(), want, "[{rows}, {cols}]ᵀ");
    }
    let (b, r, c) = (3, 20, 17);
    let t = iota(&[b, r, c]).transpose(1, 2).unwrap().contiguous().unwrap();
    assert_eq!(t.shape(), &[b, c, r]);
    let v = t.to_vec();
    for (i, &got) in v.iter().enumerate() {
        let (k, j, q) = (i / (c * r), (i / r) % c, i % r);
        assert_eq!(got, (k * r * c + q * c + j) as f32, "batch {k} at ({j}, {q})");
    }
    // Columns 2 .. 2 + 12 of a [30, 19] matrix, transposed: offset 2, row stride 19.
    let t = iota(&[30, 19]).narrow(1, 2, 12).unwrap().transpose(0, 1).unwrap().contiguous().unwrap();
    let want: Vec<f32> = (0..12 * 30).map(|i| ((i % 30) * 19 + 2 + i / 30) as f32).collect();
    assert_eq!(t.to_vec(), want);
}

#[test]
fn axis_names_work_as_axis_arguments() {
    let x = iota(&[2, 3]).with_names(&[Some("batch"), Some("feat")]).unwrap();
    assert_eq!(x.dim("feat").unwrap(), 3);
    assert_eq!(x.sum("feat", false).unwrap().to_vec(), vec![3.0, 12.0]);
    assert_eq!(x.sum(-1, false).unwrap().to_vec(), vec![3.0, 12.0]);
    let e = x.sum("time", false).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::UnknownAxisName { .. }));
    let t = x.transpose("batch", "feat").unwrap();
    assert_eq!(t.names().unwrap(), vec![Some("feat".to_string()), Some("batch".to_string())]);
}

#[test]
fn gemm_matches_a_triple_loop_for_transposed_strided_and_batched_operands() {
    let mut rng = Rng::new(11);
    for &(m, k, n) in &[(1, 1, 1), (7, 33, 1), (33, 7, 257), (257, 33, 7)] {
        let a = Tensor::randn(&[k, m], 0.0, 1.0, &mut rng).unwrap().transpose(0, 1).unwrap(); // transposed view
        let big = Tensor::randn(&[k, 2 * n], 0.0, 1.0, &mut rng).unwrap();
        let b = big.slice(1, 0, 2 * n as isize, 2).unwrap(); // strided view
        let c = a.matmul(&b).unwrap();
        let (av, bv, cv) = (a.to_vec(), b.to_vec(), c.to_vec());
        for i in 0..m {
            for j in 0..n {
                let r: f32 = (0..k).map(|p| av[i * k + p] * bv[p * n + j]).sum();
                assert!((cv[i * n + j] - r).abs() <= 1e-4 * (1.0 + r.abs()), "{m}x{k}x{n} at ({i},{j})");
            }
        }
    }
    // Batched, with a broadcast batch axis on the right operand.
    let a = Tensor::randn(&[3, 4, 5], 0.0, 1.0, &mut rng).unwrap();
    let b = Tensor::randn(&[5, 2], 0.0, 1.0, &mut rng).unwrap();
    let c = a.matmul(&b).unwrap();
    for bi in 0..3 {
        let ci = a.narrow(0, bi, 1).unwrap().squeeze(0).unwrap().matmul(&b).unwrap();
        assert_eq!(c.narrow(0, bi, 1).unwrap().to_vec(), ci.to_vec());
    }
}

#[test]
fn bad_input_is_a_named_error_never_a_panic() {
    let x = iota(&[2, 3]);
    type Case = (&'static str, forgia::Error, fn(&ErrorKind) -> bool);
    let cases: Vec<Case> = vec![
        ("add", x.add(&iota(&[4])).unwrap_err(), |k| matches!(k, ErrorKind::ShapeMismatch { .. })),
        ("matmul", x.matmul(&iota(&[2, 3])).unwrap_err(), |k| matches!(k, ErrorKind::ShapeMismatch { .. })),
        ("matmul rank 0", x.matmul(&Tensor::scalar(1.0)).unwrap_err(), |k| matches!(k, ErrorKind::RankMismatch { .. })),
        ("sum axis", x.sum(2, false).unwrap_err(), |k| matches!(k, ErrorKind::AxisOutOfRange { .. })),
        ("sum dup", x.sum([0, -2], false).unwrap_err(), |k| matches!(k, ErrorKind::DuplicateAxis { .. })),
        ("reshape", x.reshape(&[4]).unwrap_err(), |k| matches!(k, ErrorKind::InvalidReshape { .. })),
        ("from_vec", Tensor::from_vec(vec![1.0], &[2]).unwrap_err(), |k| matches!(k, ErrorKind::LengthMismatch { .. })),
        ("item", x.item().unwrap_err(), |k| matches!(k, ErrorKind::NotScalar { .. })),
        ("mean empty", iota(&[0, 3]).mean(0, false).unwrap_err(), |k| matches!(k, ErrorKind::EmptyTensor { .. })),
        ("mean_all empty", iota(&[0]).mean_all().unwrap_err(), |k| matches!(k, ErrorKind::EmptyTensor { .. })),
        ("narrow", x.narrow(1, 2, 2).unwrap_err(), |k| matches!(k, ErrorKind::IndexOutOfRange { .. })),
        ("slice step", x.slice(1, 0, 3, 0).unwrap_err(), |k| matches!(k, ErrorKind::InvalidArgument { .. })),
        ("permute", x.permute(&[0, 0]).unwrap_err(), |k| matches!(k, ErrorKind::RankMismatch { .. })),
        ("broadcast_to", x.broadcast_to(&[3, 3]).unwrap_err(), |k| matches!(k, ErrorKind::ShapeMismatch { .. })),
        ("squeeze", x.squeeze(0).unwrap_err(), |k| matches!(k, ErrorKind::InvalidArgument { .. })),
        ("unsqueeze", x.unsqueeze(4).unwrap_err(), |k| matches!(k, ErrorKind::AxisOutOfRange { .. })),
        ("names", x.with_names(&[Some("a")]).unwrap_err(), |k| matches!(k, ErrorKind::RankMismatch { .. })),
    ];
    for (what, err, ok) in cases {
        assert!(ok(err.kind()), "{what}: {err}");
        assert!(!err.to_string().is_empty());
    }
    // Empty tensors flow through ops that allow them.
    assert_eq!(iota(&[0, 3]).sum(1, false).unwrap().shape(), &[0]);
    assert_eq!(iota(&[0, 3]).tanh().shape(), &[0, 3]);
}

fn shape_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..4, 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn broadcasting_matches_a_reference(a in shape_strategy(), b in shape_strategy(), mask in prop::collection::vec(any::<bool>(), 4)) {
        // Make b broadcast-compatible with a by setting some of its trailing axes to 1 or a's size.
        let b: Vec<usize> = b.iter().enumerate().map(|(i, &d)| {
            let ai = (a.len() + i).checked_sub(b.len()).and_then(|j| a.get(j)).copied();
            match ai { Some(n) if mask[i] => n, Some(_) => 1, None => d }
        }).collect();
        let (x, y) = (iota(&a), iota(&b).scale(0.5));
        let z = x.add(&y).unwrap();
        let rank = a.len().max(b.len());
        let pad = |s: &[usize]| { let mut v = vec![1; rank - s.len()]; v.extend_from_slice(s); v };
        let (pa, pb) = (pad(&a), pad(&b));
        let out: Vec<usize> = pa.iter().zip(&pb).map(|(&p, &q)| p.max(q)).collect();
        prop_assert_eq!(z.shape(), &out[..]);
        let (xv, yv, zv) = (x.to_vec(), y.to_vec(), z.to_vec());
        for (i, &v) in zv.iter().enumerate() {
            let idx = unravel(i, &out);
            let ia: Vec<usize> = idx.iter().zip(&pa).map(|(&k, &n)| if n == 1 { 0 } else { k }).collect();
            let ib: Vec<usize> = idx.iter().zip(&pb).map(|(&k, &n)| if n == 1 { 0 } else { k }).collect();
            prop_assert_eq!(v, xv[ravel(&ia, &pa)] + yv[ravel(&ib, &pb)]);
        }
    }

    #[test]
    fn strided_views_reduce_like_a_reference(shape in prop::collection::vec(1usize..5, 1..4), axes_mask in 1u8..8, keep in any::<bool>(), transpose in any::<bool>()) {
        let x = iota(&shape);
        let x = if transpose && shape.len() >= 2 { x.transpose(0, -1).unwrap() } else { x };
        let axes: Vec<usize> = (0..x.rank()).filter(|i| axes_mask & (1 << i) != 0).collect();
        prop_assume!(!axes.is_empty());
        let s = x.sum(axes.clone(), keep).unwrap();
        let xv = x.to_vec();
        let kept: Vec<usize> = x.shape().iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
        let mut reference = vec![0.0f32; kept.iter().product()];
        for (i, &v) in xv.iter().enumerate() {
            let idx: Vec<usize> = unravel(i, x.shape()).iter().enumerate().map(|(d, &k)| if axes.contains(&d) { 0 } else { k }).collect();
            reference[ravel(&idx, &kept)] += v;
        }
        prop_assert_eq!(s.to_vec(), reference);
        // Reshape round-trips through any factorization.
        let n = x.numel();
        prop_assert_eq!(x.reshape(&[n]).unwrap().reshape(x.shape()).unwrap().to_vec(), xv);
    }
}
