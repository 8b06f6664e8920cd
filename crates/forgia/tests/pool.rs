//! Pooling and resizing: literal values, gradcheck, JAX goldens and named errors.

mod common;

use common::check;
use common::golden;
use forgia::{ErrorKind, Rng, Tensor};

/// Distinct values (no ties in any window), away from kinks.
fn var(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut rng = Rng::new(seed);
    let mut idx: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut idx);
    Tensor::from_vec(idx.iter().map(|&i| i as f32 * 0.1 - 1.0).collect(), shape).unwrap().into_variable()
}

#[test]
fn max_pool2d_picks_window_maxima_and_routes_gradient_to_them() {
    let x = Tensor::variable(
        vec![1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 9.0, 8.0, 7.0, 6.0, 1.0, 2.0, 0.0, 1.0, 3.0, 4.0],
        &[1, 1, 4, 4],
    )
    .unwrap();
    let y = x.max_pool2d((2, 2), (2, 2), (0, 0)).unwrap();
    assert_eq!(y.to_vec(), vec![5.0, 9.0, 7.0, 4.0]);
    // d max / d x is 1 at each argmax, 0 elsewhere.
    y.sum_all().backward().unwrap();
    let g = x.grad().unwrap().to_vec();
    assert_eq!(g.iter().sum::<f32>(), 4.0);
    assert_eq!((g[1], g[6], g[8], g[15]), (1.0, 1.0, 1.0, 1.0));
}

#[test]
fn avg_pool2d_counts_padding_in_the_divisor() {
    // A 2x2 ones image, kernel 3, padding 1, stride 1: each window holds 4 ones of 9 cells.
    let x = Tensor::ones(&[1, 1, 2, 2]).unwrap().into_variable();
    let y = x.avg_pool2d((3, 3), (1, 1), (1, 1)).unwrap();
    assert_eq!(y.to_vec(), vec![4.0 / 9.0; 4]);
    // Each input sits in all 4 windows: gradient 4/9.
    y.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![4.0 / 9.0; 4]);
}

#[test]
fn global_average_and_upsampling_have_the_expected_values() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]).unwrap();
    assert_eq!(x.adaptive_avg_pool2d_1x1().unwrap().to_vec(), vec![2.5]);
    let u = x.upsample_nearest2d(2).unwrap();
    assert_eq!(u.shape(), &[1, 1, 4, 4]);
    assert_eq!(&u.to_vec()[..8], &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]);
}

#[test]
fn pooling_gradients_pass_gradcheck() {
    let x = var(&[2, 2, 5, 6], 1);
    check(|v| v[0].max_pool2d((3, 2), (2, 2), (1, 1)), std::slice::from_ref(&x), "max k3x2 s2 p1");
    check(|v| v[0].max_pool2d((2, 2), (1, 1), (0, 0)), std::slice::from_ref(&x), "max k2 s1");
    check(|v| v[0].avg_pool2d((3, 3), (2, 1), (1, 1)), std::slice::from_ref(&x), "avg k3 s2x1 p1");
    check(|v| v[0].adaptive_avg_pool2d_1x1(), std::slice::from_ref(&x), "global avg");
    check(|v| v[0].upsample_nearest2d(3), std::slice::from_ref(&x), "upsample");
    // Non-contiguous input: a transposed view.
    check(|v| v[0].transpose(2, 3)?.max_pool2d((2, 2), (2, 2), (0, 0)), std::slice::from_ref(&x), "max transposed");
    check(|v| v[0].transpose(2, 3)?.avg_pool2d((2, 2), (2, 2), (1, 1)), &[x], "avg transposed");
}

#[test]
fn pooling_matches_the_jax_goldens() {
    let ops = ["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d_1x1", "upsample_nearest2d"];
    let cases: Vec<_> = golden::load("nn").into_iter().filter(|c| ops.contains(&c.op.as_str())).collect();
    assert_eq!(cases.len(), 9);
    for case in &cases {
        let int = |k: &str| case.attrs[k].as_u64().unwrap_or(0) as usize;
        let pair = |k: &str| (int(k), int(k));
        golden::check_case(case, 1e-5, |v| match case.op.as_str() {
            "max_pool2d" => v[0].max_pool2d(pair("kernel"), pair("stride"), pair("padding")),
            "avg_pool2d" => v[0].avg_pool2d(pair("kernel"), pair("stride"), pair("padding")),
            "adaptive_avg_pool2d_1x1" => v[0].adaptive_avg_pool2d_1x1(),
            _ => v[0].upsample_nearest2d(int("scale")),
        });
    }
}

#[test]
fn bad_pooling_inputs_are_named_errors() {
    let x = Tensor::zeros(&[1, 1, 3, 3]).unwrap();
    let kind = |r: forgia::Result<Tensor>| r.unwrap_err().into_kind();
    assert!(matches!(kind(x.max_pool2d((4, 4), (1, 1), (0, 0))), ErrorKind::InvalidArgument { arg: "kernel", .. }));
    assert!(matches!(kind(x.avg_pool2d((2, 2), (0, 1), (0, 0))), ErrorKind::InvalidArgument { arg: "stride", .. }));
    assert!(matches!(kind(x.max_pool2d((2, 2), (1, 1), (2, 2))), ErrorKind::InvalidArgument { arg: "padding", .. }));
    assert!(matches!(
        kind(Tensor::zeros(&[3, 3]).unwrap().max_pool2d((2, 2), (1, 1), (0, 0))),
        ErrorKind::RankMismatch { .. }
    ));
    assert!(matches!(kind(Tensor::zeros(&[3]).unwrap().adaptive_avg_pool2d_1x1()), ErrorKind::RankMismatch { .. }));
    assert!(matches!(kind(x.upsample_nearest2d(0)), ErrorKind::InvalidArgument { arg: "scale", .. }));
}
