//! Second order through the fused records: every conv, pooling and normalization record, the
//! checkpoint and the elemental ops give a differentiable gradient in a `create_graph` pass,
//! checked against finite differences of first-order gradients (`common::second_order`).

mod common;

use common::normal_var;
use common::second_order::check;
use forgia::{Conv1dOptions, Conv2dOptions, ConvTranspose2dOptions, Result, RunningStats, Tensor};

/// Random weights for the gradients of `xs` (one per input) and a random output cotangent.
fn weights(xs: &[Tensor], seed: u64) -> Vec<Tensor> {
    xs.iter().enumerate().map(|(i, x)| normal_var(x.shape(), seed + 100 + i as u64).detach()).collect()
}

/// Runs the second-order check of `f` at `xs` with a random cotangent of `f`'s output.
fn second_order(f: impl Fn(&[Tensor]) -> Result<Tensor>, xs: &[Tensor], seed: u64) {
    let out = f(xs).unwrap();
    let cot = normal_var(out.shape(), seed + 99).detach();
    check(f, xs, &cot, &weights(xs, seed));
}

#[test]
fn conv2d_with_bias_stride_and_padding_is_twice_differentiable() {
    let xs = [normal_var(&[2, 2, 5, 4], 1), normal_var(&[3, 2, 3, 3], 2), normal_var(&[3], 3)];
    let opts = Conv2dOptions { stride: (2, 1), padding: (1, 1), ..Conv2dOptions::default() };
    // tanh makes the loss non-quadratic, so the check sees more than the bilinear cross terms.
    second_order(|x| x[0].conv2d(&x[1], Some(&x[2]), opts)?.tanh().mul(&x[0].sum_all()), &xs, 1);
    second_order(|x| Ok(x[0].conv2d(&x[1], Some(&x[2]), opts)?.tanh()), &xs, 2);
}

#[test]
fn conv2d_with_groups_and_dilation_is_twice_differentiable() {
    let xs = [normal_var(&[1, 4, 6, 6], 4), normal_var(&[2, 2, 2, 2], 5)];
    let opts = Conv2dOptions { dilation: (2, 2), groups: 2, stride: (1, 2), padding: (1, 0) };
    second_order(|x| Ok(x[0].conv2d(&x[1], None, opts)?.tanh()), &xs, 3);
}

#[test]
fn conv1d_is_twice_differentiable() {
    let xs = [normal_var(&[2, 2, 7], 6), normal_var(&[4, 1, 3], 7), normal_var(&[4], 8)];
    let opts = Conv1dOptions { stride: 2, padding: 1, groups: 2, ..Conv1dOptions::default() };
    second_order(|x| Ok(x[0].conv1d(&x[1], Some(&x[2]), opts)?.tanh()), &xs, 4);
}

#[test]
fn conv_transpose2d_is_twice_differentiable() {
    let xs = [normal_var(&[1, 2, 3, 3], 9), normal_var(&[2, 3, 3, 3], 10), normal_var(&[3], 11)];
    let opts = ConvTranspose2dOptions { stride: (2, 2), padding: (1, 1), ..ConvTranspose2dOptions::default() };
    second_order(|x| Ok(x[0].conv_transpose2d(&x[1], Some(&x[2]), opts)?.tanh()), &xs, 5);
}

#[test]
fn conv_gradients_are_differentiable_to_third_order() {
    // y = Σ conv(x, w)³ is cubic; its third derivative along x, x, w is a constant the
    // nested passes must reproduce: d³/dx dx dw of the scalar, checked against the second
    // order by finite differences (the gradient of the second order is itself checked).
    let xs = [normal_var(&[1, 1, 3, 3], 12), normal_var(&[1, 1, 2, 2], 13)];
    let grad_of = |x: &[Tensor]| -> Result<Tensor> {
        let y = x[0].conv2d(&x[1], None, Conv2dOptions::default())?;
        let s = y.mul(&y)?.mul(&y)?.sum_all();
        let opts = forgia::BackwardOptions { create_graph: true, ..Default::default() };
        s.backward_with(None, opts)?;
        let g = x[0].grad().expect("gradient");
        x.iter().for_each(Tensor::zero_grad);
        Ok(g.tanh())
    };
    second_order(grad_of, &xs, 6);
}

#[test]
fn max_pool2d_is_twice_differentiable() {
    // Distinct values 0.1 apart: the finite-difference step never changes an argmax.
    let x = {
        let n = 50;
        let data: Vec<f32> = (0..n).map(|i| ((i * 37) % n) as f32 * 0.1 - 2.5).collect();
        Tensor::variable(data, &[1, 2, 5, 5]).unwrap()
    };
    second_order(
        |x| Ok(x[0].max_pool2d((3, 3), (2, 2), (1, 1))?.mul(&x[0].max_pool2d((3, 3), (2, 2), (1, 1))?)?),
        &[x],
        7,
    );
}

#[test]
fn avg_pool2d_is_twice_differentiable() {
    let x = normal_var(&[1, 2, 5, 4], 14);
    second_order(|x| Ok(x[0].avg_pool2d((2, 2), (2, 1), (1, 0))?.tanh()), &[x], 8);
}

#[test]
fn layer_norm_is_twice_differentiable() {
    let xs = [normal_var(&[3, 2, 4], 15), normal_var(&[2, 4], 16), normal_var(&[2, 4], 17)];
    second_order(|x| Ok(x[0].layer_norm(&[2, 4], Some(&x[1]), Some(&x[2]), 1e-5)?.tanh()), &xs, 9);
    second_order(|x| Ok(x[0].layer_norm(&[2, 4], None, None, 1e-5)?.tanh()), &xs[..1], 10);
}

#[test]
fn rms_norm_is_twice_differentiable() {
    let xs = [normal_var(&[3, 5], 18), normal_var(&[5], 19)];
    second_order(|x| Ok(x[0].rms_norm(Some(&x[1]), 1e-5)?.tanh()), &xs, 11);
}

#[test]
fn group_norm_is_twice_differentiable() {
    let xs = [normal_var(&[2, 4, 3], 20), normal_var(&[4], 21), normal_var(&[4], 22)];
    second_order(|x| Ok(x[0].group_norm(2, Some(&x[1]), Some(&x[2]), 1e-5)?.tanh()), &xs, 12);
}

#[test]
fn batch_norm_in_training_is_twice_differentiable() {
    let xs = [normal_var(&[3, 2, 2, 2], 23), normal_var(&[2], 24), normal_var(&[2], 25)];
    let f =
        |x: &[Tensor]| Ok(x[0].batch_norm(&mut RunningStats::new(2)?, Some(&x[1]), Some(&x[2]), true, 1e-5)?.tanh());
    second_order(f, &xs, 13);
}
