//! Convolutions: literal values, gradcheck over strides/padding/dilation/groups, JAX goldens,
//! and named errors for bad input.

mod common;

use common::golden;
use common::{check, normal_var as var};
use forgia::{
    gradcheck, Conv1dOptions, Conv2dOptions, ConvTranspose2dOptions, ErrorKind, GradcheckOptions, Rng, Tensor,
};

#[test]
fn conv2d_of_a_single_tap_kernel_scales_the_image() {
    // y = 2x + 1, so dy/dx = 2 everywhere, dy/dw = Σx, dy/db = count.
    let x = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]).unwrap();
    let w = Tensor::variable(vec![2.0], &[1, 1, 1, 1]).unwrap();
    let b = Tensor::variable(vec![1.0], &[1]).unwrap();
    let y = x.conv2d(&w, Some(&b), Conv2dOptions::default()).unwrap();
    assert_eq!(y.to_vec(), vec![3.0, 5.0, 7.0, 9.0]);
    y.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![2.0; 4]);
    assert_eq!(w.grad().unwrap().to_vec(), vec![10.0]);
    assert_eq!(b.grad().unwrap().to_vec(), vec![4.0]);
}

#[test]
fn conv2d_sums_a_3x3_window() {
    // A ones kernel over a 3x3 image of 1..9 with padding 1: the centre sees all nine.
    let x = Tensor::from_vec((1..=9).map(|v| v as f32).collect(), &[1, 1, 3, 3]).unwrap();
    let w = Tensor::ones(&[1, 1, 3, 3]).unwrap();
    let opts = Conv2dOptions { padding: (1, 1), ..Default::default() };
    let y = x.conv2d(&w, None, opts).unwrap();
    assert_eq!(y.to_vec(), vec![12.0, 21.0, 16.0, 27.0, 45.0, 33.0, 24.0, 39.0, 28.0]);
}

#[test]
fn conv2d_gradients_pass_gradcheck_across_configurations() {
    let configs = [
        ((2, 2, 5, 5), (3, 2, 3, 3), Conv2dOptions::default()),
        ((2, 2, 6, 5), (2, 2, 3, 2), Conv2dOptions { stride: (2, 1), padding: (1, 2), ..Default::default() }),
        ((1, 2, 7, 7), (2, 2, 3, 3), Conv2dOptions { dilation: (2, 2), padding: (1, 1), ..Default::default() }),
        ((2, 4, 4, 4), (6, 2, 3, 3), Conv2dOptions { groups: 2, padding: (1, 1), ..Default::default() }),
        ((2, 3, 4, 4), (6, 1, 2, 2), Conv2dOptions { groups: 3, stride: (2, 2), ..Default::default() }),
        ((2, 3, 3, 3), (4, 3, 1, 1), Conv2dOptions::default()),
    ];
    for (i, (xs, ws, opts)) in configs.into_iter().enumerate() {
        let x = var(&[xs.0, xs.1, xs.2, xs.3], i as u64);
        let w = var(&[ws.0, ws.1, ws.2, ws.3], 100 + i as u64);
        let b = var(&[ws.0], 200 + i as u64);
        check(|v| v[0].conv2d(&v[1], Some(&v[2]), opts), &[x, w, b], &format!("config {i}"));
    }
}

#[test]
fn conv2d_accepts_non_contiguous_inputs() {
    // A transposed image and a sliced weight.
    let x = var(&[1, 2, 5, 4], 1);
    let w = var(&[4, 2, 3, 3], 2);
    check(
        |v| {
            let xt = v[0].transpose(2, 3)?;
            let ws = v[1].slice(0, 0, 4, 2)?;
            xt.conv2d(&ws, None, Conv2dOptions { padding: (1, 0), ..Default::default() })
        },
        &[x, w],
        "strided",
    );
}

#[test]
fn conv2d_computes_only_the_gradients_that_are_needed() {
    let x = Tensor::randn(&[1, 1, 4, 4], 0.0, 1.0, &mut Rng::new(3)).unwrap(); // constant
    let w = var(&[2, 1, 3, 3], 4);
    x.conv2d(&w, None, Conv2dOptions::default()).unwrap().sum_all().backward().unwrap();
    assert!(x.grad().is_none() && w.grad().is_some());
}

#[test]
fn conv1d_gradients_pass_gradcheck() {
    let x = var(&[2, 4, 9], 5);
    let w = var(&[4, 2, 3], 6);
    let b = var(&[4], 7);
    let opts = Conv1dOptions { stride: 2, padding: 2, dilation: 2, groups: 2 };
    check(|v| v[0].conv1d(&v[1], Some(&v[2]), opts), &[x, w, b], "conv1d");
}

#[test]
fn conv_transpose2d_gradients_pass_gradcheck() {
    let configs = [
        ((1, 2, 3, 3), (2, 3, 3, 3), ConvTranspose2dOptions { stride: (2, 2), padding: (1, 1), ..Default::default() }),
        (
            (2, 2, 3, 2),
            (2, 2, 3, 2),
            ConvTranspose2dOptions { stride: (2, 3), padding: (1, 0), output_padding: (1, 2), ..Default::default() },
        ),
        ((1, 4, 2, 2), (4, 1, 2, 2), ConvTranspose2dOptions { groups: 2, dilation: (2, 1), ..Default::default() }),
    ];
    for (i, (xs, ws, opts)) in configs.into_iter().enumerate() {
        let x = var(&[xs.0, xs.1, xs.2, xs.3], 10 + i as u64);
        let w = var(&[ws.0, ws.1, ws.2, ws.3], 20 + i as u64);
        let b = var(&[ws.1 * opts.groups], 30 + i as u64);
        check(|v| v[0].conv_transpose2d(&v[1], Some(&v[2]), opts), &[x, w, b], &format!("transpose {i}"));
    }
}

fn golden_conv(case: &golden::Case, v: &[Tensor]) -> forgia::Result<Tensor> {
    let a = &case.attrs;
    let int = |k: &str| a[k].as_u64().unwrap_or(0) as usize;
    let bias = v.get(2);
    match case.op.as_str() {
        "conv1d" => v[0].conv1d(
            &v[1],
            bias,
            Conv1dOptions {
                stride: int("stride"),
                padding: int("padding"),
                dilation: int("dilation"),
                groups: int("groups"),
            },
        ),
        "conv2d" => {
            let p = |k: &str| (int(k), int(k));
            v[0].conv2d(
                &v[1],
                bias,
                Conv2dOptions {
                    stride: p("stride"),
                    padding: p("padding"),
                    dilation: p("dilation"),
                    groups: int("groups"),
                },
            )
        }
        _ => {
            let p = |k: &str| (int(k), int(k));
            let opts = ConvTranspose2dOptions {
                stride: p("stride"),
                padding: p("padding"),
                output_padding: p("output_padding"),
                ..Default::default()
            };
            v[0].conv_transpose2d(&v[1], bias, opts)
        }
    }
}

#[test]
fn convolutions_match_the_jax_goldens() {
    let cases: Vec<_> = golden::load("nn").into_iter().filter(|c| c.op.starts_with("conv")).collect();
    assert_eq!(cases.len(), 12);
    for case in &cases {
        golden::check_case(case, 1e-5, |v| golden_conv(case, v));
    }
}

#[test]
fn bad_convolution_inputs_are_named_errors() {
    let x = Tensor::zeros(&[1, 4, 5, 5]).unwrap();
    let kind = |r: forgia::Result<Tensor>| r.unwrap_err().into_kind();
    // Kernel larger than the padded input.
    let big = Tensor::zeros(&[2, 4, 8, 8]).unwrap();
    assert!(matches!(
        kind(x.conv2d(&big, None, Conv2dOptions::default())),
        ErrorKind::InvalidArgument { arg: "kernel", .. }
    ));
    // Channels not divisible by groups.
    let w = Tensor::zeros(&[3, 2, 3, 3]).unwrap();
    let g3 = Conv2dOptions { groups: 3, ..Default::default() };
    assert!(matches!(kind(x.conv2d(&w, None, g3)), ErrorKind::InvalidArgument { arg: "groups", .. }));
    // Weight channels that do not match, a wrong bias, a wrong rank, a zero stride.
    let w = Tensor::zeros(&[2, 3, 3, 3]).unwrap();
    assert!(matches!(kind(x.conv2d(&w, None, Conv2dOptions::default())), ErrorKind::ShapeMismatch { .. }));
    let w = Tensor::zeros(&[2, 4, 3, 3]).unwrap();
    let b = Tensor::zeros(&[3]).unwrap();
    assert!(matches!(kind(x.conv2d(&w, Some(&b), Conv2dOptions::default())), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(
        kind(Tensor::zeros(&[4, 5, 5]).unwrap().conv2d(&w, None, Conv2dOptions::default())),
        ErrorKind::RankMismatch { .. }
    ));
    let s0 = Conv2dOptions { stride: (0, 1), ..Default::default() };
    assert!(matches!(kind(x.conv2d(&w, None, s0)), ErrorKind::InvalidArgument { arg: "stride", .. }));
    // conv1d: rank and kernel size.
    let x1 = Tensor::zeros(&[1, 2, 3]).unwrap();
    assert!(matches!(
        kind(x1.conv1d(&Tensor::zeros(&[1, 2, 4]).unwrap(), None, Conv1dOptions::default())),
        ErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(kind(x1.conv1d(&w, None, Conv1dOptions::default())), ErrorKind::RankMismatch { .. }));
    // conv_transpose2d: output padding not below the stride, groups not dividing.
    let wt = Tensor::zeros(&[4, 2, 3, 3]).unwrap();
    let bad_op = ConvTranspose2dOptions { output_padding: (1, 1), ..Default::default() };
    assert!(matches!(
        kind(x.conv_transpose2d(&wt, None, bad_op)),
        ErrorKind::InvalidArgument { arg: "output_padding", .. }
    ));
    let g3 = ConvTranspose2dOptions { groups: 3, ..Default::default() };
    assert!(matches!(kind(x.conv_transpose2d(&wt, None, g3)), ErrorKind::InvalidArgument { arg: "groups", .. }));
}

/// The kernels' fast paths, each with gradcheck: one input channel ("same" 5x5 as in the main
/// job, unpadded, over-padded, strided rows), "same" convolutions whose taps are one
/// contiguous run (with and without dilation), stride-1 rows shorter than the input, batch 1.
#[test]
fn every_kernel_path_passes_gradcheck() {
    let pad = |p: usize| Conv2dOptions { padding: (p, p), ..Default::default() };
    let configs = [
        ((2, 1, 7, 6), (3, 1, 5, 5), pad(2)),
        ((1, 1, 6, 7), (2, 1, 3, 3), pad(0)),
        ((2, 1, 3, 4), (2, 1, 3, 3), pad(3)),
        ((2, 1, 7, 7), (3, 1, 5, 5), Conv2dOptions { stride: (2, 1), padding: (2, 2), ..Default::default() }),
        ((1, 2, 4, 5), (3, 2, 5, 5), pad(2)),
        ((1, 2, 7, 5), (3, 2, 3, 3), Conv2dOptions { padding: (2, 2), dilation: (2, 2), ..Default::default() }),
        ((3, 2, 6, 5), (2, 2, 3, 2), pad(0)),
        ((1, 4, 5, 5), (4, 2, 3, 3), Conv2dOptions { padding: (1, 1), groups: 2, ..Default::default() }),
    ];
    for (i, (xs, ws, opts)) in configs.into_iter().enumerate() {
        let x = var(&[xs.0, xs.1, xs.2, xs.3], 300 + i as u64);
        let w = var(&[ws.0, ws.1, ws.2, ws.3], 400 + i as u64);
        let b = var(&[ws.0], 500 + i as u64);
        check(|v| v[0].conv2d(&v[1], Some(&v[2]), opts), &[x, w, b], &format!("path {i}"));
    }
}

/// The implicit GEMM's forward and stride-1 input gradient (16 channels, a kernel row of 4
/// taps: `kernels/conv/implicit.rs`, where AVX-512 is present). A step of 0.1: the convolution
/// is linear in each input, so a wide step adds no truncation error and keeps the f32 rounding
/// of a 128-term sum out of the difference (at the default 1e-3 it was 2% of a derivative).
#[test]
fn the_implicit_gemm_path_passes_gradcheck() {
    let opts = Conv2dOptions { padding: (1, 1), ..Default::default() };
    let inputs = [var(&[1, 16, 3, 5], 700), var(&[16, 16, 2, 4], 701), var(&[16], 702)];
    let report = gradcheck(
        |v| v[0].conv2d(&v[1], Some(&v[2]), opts),
        &inputs,
        GradcheckOptions { eps: 0.1, ..Default::default() },
    )
    .unwrap();
    assert!(report.passed(), "{:?}", report.first_mismatch);
}

#[test]
fn same_convolutions_are_twice_differentiable() {
    use common::second_order::check as second_order;
    let pad2 = Conv2dOptions { padding: (2, 2), ..Default::default() };
    for (i, (xs, ws)) in [([2, 1, 6, 5], [2, 1, 5, 5]), ([1, 2, 5, 6], [3, 2, 5, 5])].into_iter().enumerate() {
        let s = 600 + 10 * i as u64;
        let inputs = [var(&xs, s), var(&ws, s + 1), var(&[ws[0]], s + 2)];
        let f = |x: &[Tensor]| -> forgia::Result<Tensor> { Ok(x[0].conv2d(&x[1], Some(&x[2]), pad2)?.tanh()) };
        let cot = var(f(&inputs).unwrap().shape(), s + 3).detach();
        let c: Vec<Tensor> =
            inputs.iter().enumerate().map(|(j, t)| var(t.shape(), s + 4 + j as u64).detach()).collect();
        second_order(f, &inputs, &cot, &c);
    }
}

#[test]
fn a_non_contiguous_image_takes_the_same_fast_path() {
    // A channel slice of a larger image (strided batch axis) against its packed copy.
    let pad2 = Conv2dOptions { padding: (2, 2), ..Default::default() };
    let big = Tensor::randn(&[3, 4, 6, 6], 0.0, 1.0, &mut Rng::new(9)).unwrap();
    let w = Tensor::randn(&[5, 2, 5, 5], 0.0, 1.0, &mut Rng::new(10)).unwrap();
    let view = big.slice(1, 1, 3, 1).unwrap();
    let packed = Tensor::from_vec(view.to_vec(), &[3, 2, 6, 6]).unwrap();
    assert_eq!(view.conv2d(&w, None, pad2).unwrap().to_vec(), packed.conv2d(&w, None, pad2).unwrap().to_vec());
}

#[test]
fn the_kernel_paths_match_the_torch_goldens() {
    let cases = golden::load("conv");
    assert_eq!(cases.len(), 11);
    for case in &cases {
        golden::check_case(case, 1e-4, |v| golden_conv(case, v));
    }
}
