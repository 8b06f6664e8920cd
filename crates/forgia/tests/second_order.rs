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
    second_order(|x| x[0].max_pool2d((3, 3), (2, 2), (1, 1))?.mul(&x[0].max_pool2d((3, 3), (2, 2), (1, 1))?), &[x], 7);
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

#[test]
fn a_checkpointed_block_is_twice_differentiable() {
    let xs = [normal_var(&[2, 3], 26), normal_var(&[3, 3], 27)];
    let f = |x: &[Tensor]| forgia::checkpoint(|xs| xs[0].matmul(&xs[1])?.tanh().matmul(&xs[1]), &[&x[0], &x[1]]);
    second_order(f, &xs, 14);
}

#[test]
fn a_checkpoint_with_a_constant_input_and_a_nested_checkpoint_is_twice_differentiable() {
    let xs = [normal_var(&[2, 3], 28)];
    let frozen = normal_var(&[3, 3], 29).detach();
    let f = move |x: &[Tensor]| {
        let inner = |xs: &[Tensor]| forgia::checkpoint(|ys| Ok(ys[0].matmul(&ys[1])?.sin()), &[&xs[0], &xs[1]]);
        forgia::checkpoint(move |xs| inner(xs)?.mul(&xs[0]), &[&x[0], &frozen])
    };
    second_order(f, &xs, 15);
}

#[test]
fn a_checkpointed_linear_block_has_a_zero_hessian_not_an_error() {
    // The gradient of a linear block does not depend on its input: the second pass through
    // the gradient's own checkpoint contributes nothing instead of failing.
    let x = normal_var(&[2, 3], 30);
    let w = normal_var(&[3, 2], 31).detach();
    let y = forgia::checkpoint_with(|w: &Tensor, xs| xs[0].matmul(w), w, &[&x]).unwrap();
    let opts = forgia::BackwardOptions { create_graph: true, ..Default::default() };
    y.sum_all().backward_with(None, opts).unwrap();
    let g = x.grad().unwrap();
    x.zero_grad();
    g.mul(&x).unwrap().sum_all().backward().unwrap();
    // d/dx Σ g·x = g (g is constant in x).
    assert_eq!(x.grad().unwrap().to_vec(), g.to_vec());
}

#[test]
fn elemental_ops_with_a_second_derivative_are_twice_differentiable() {
    let x = normal_var(&[2, 3], 32);
    let f = |x: &[Tensor]| {
        Ok(forgia::elemental_unary_with_second(
            &x[0],
            |v| v.sin() * v,
            |v, _y, g| g * (v.cos() * v + v.sin()),
            |v, _y, g, u| (u * g * (2.0 * v.cos() - v * v.sin()), u * (v.cos() * v + v.sin())),
        ))
    };
    second_order(f, &[x], 16);
    let xs = [normal_var(&[2, 3], 33), normal_var(&[3], 34)];
    let f = |x: &[Tensor]| {
        forgia::elemental_binary_with_second(
            &x[0],
            &x[1],
            |a, b| a * b.exp(),
            |a, b, _y, g| (g * b.exp(), g * a * b.exp()),
            |a, b, _y, g, ga, gb| (gb * g * b.exp(), (ga + gb * a) * g * b.exp(), (ga + gb * a) * b.exp()),
        )
    };
    second_order(f, &xs, 17);
}

#[test]
fn elemental_ops_without_a_second_derivative_refuse_second_order_by_name() {
    let opts = forgia::BackwardOptions { create_graph: true, ..Default::default() };
    let x = normal_var(&[3], 35);
    let y = forgia::elemental_unary(&x, f32::sin, |v, _y, g| g * v.cos());
    let e = y.sum_all().backward_with(None, opts).unwrap_err();
    assert!(matches!(e.kind(), forgia::ErrorKind::DoubleBackwardUnsupported { op: "elemental_unary" }), "{e:?}");
    // With the closure, a third order is refused by the gradient's own name.
    let x = normal_var(&[3], 36);
    let y = forgia::elemental_unary_with_second(
        &x,
        f32::sin,
        |v, _y, g| g * v.cos(),
        |v, _y, g, u| (-u * g * v.sin(), u * v.cos()),
    );
    y.sum_all().backward_with(None, opts).unwrap();
    let g = x.grad().unwrap();
    x.zero_grad();
    let e = g.sum_all().backward_with(None, opts).unwrap_err();
    let op = "elemental_unary_backward";
    assert!(matches!(e.kind(), forgia::ErrorKind::DoubleBackwardUnsupported { op: o } if *o == op), "{e:?}");
}

#[test]
fn a_hessian_vector_product_through_a_checkpointed_pre_norm_block_matches_finite_differences() {
    // x + W2·gelu(W1·layer_norm(x)) (a transformer block's MLP half), checkpointed.
    let xs = [normal_var(&[2, 4], 37), normal_var(&[6, 4], 38), normal_var(&[4, 6], 39), normal_var(&[4], 40)];
    let f = |x: &[Tensor]| {
        let block = |xs: &[Tensor]| {
            let h = xs[0].layer_norm(&[4], Some(&xs[3]), None, 1e-5)?;
            xs[0].add(&h.linear(&xs[1], None)?.gelu().linear(&xs[2], None)?)
        };
        forgia::checkpoint(block, &[&x[0], &x[1], &x[2], &x[3]])?.rms_norm(None, 1e-5)
    };
    second_order(f, &xs, 18);
}

/// The CNN critic of `tools/reference/generate_second_order.py`.
fn critic(v: &[Tensor]) -> Result<Tensor> {
    let pad1 = Conv2dOptions { padding: (1, 1), ..Conv2dOptions::default() };
    let h = v[0].conv2d(&v[1], Some(&v[2]), pad1)?.group_norm(2, Some(&v[3]), Some(&v[4]), 1e-5)?;
    let h = h.tanh().max_pool2d((2, 2), (2, 2), (0, 0))?;
    let h = h.conv2d(&v[5], Some(&v[6]), Conv2dOptions::default())?.layer_norm(&[3, 2, 2], None, None, 1e-5)?;
    h.softplus().avg_pool2d((2, 2), (1, 1), (0, 0))?.sum([1usize, 2, 3], false)
}

#[test]
fn a_gradient_penalty_through_a_cnn_critic_matches_pytorch() {
    use common::golden::{assert_close, load, tensor};
    let case = load("second_order").into_iter().next().expect("one case");
    let v: Vec<Tensor> = case.inputs.iter().map(|t| t.clone().into_variable()).collect();
    let d = critic(&v).unwrap();
    assert_close(&d, &tensor(&case.raw["critic"]), 1e-4, "critic");
    let opts = forgia::BackwardOptions { create_graph: true, ..Default::default() };
    d.sum_all().backward_with(None, opts).unwrap();
    let g = v[0].grad().unwrap();
    v.iter().for_each(Tensor::zero_grad);
    let n = g.shape()[0];
    let norms = g.reshape(&[n, g.numel() / n]).unwrap().square().sum([1usize], false).unwrap().sqrt();
    let penalty = norms.sub_scalar(1.0).square().mean_all().unwrap();
    let want = case.raw["penalty"].as_f64().unwrap() as f32;
    assert!(
        (penalty.item().unwrap() - want).abs() <= 1e-4 * (1.0 + want.abs()),
        "penalty {:?} vs {want}",
        penalty.to_vec()
    );
    penalty.backward().unwrap();
    for (i, g) in case.grads.iter().enumerate() {
        let what = format!("gradient of {}", case.attrs["params"][i]);
        assert_close(&v[i + 1].grad().expect("a parameter gradient"), g.as_ref().unwrap(), 1e-4, &what);
    }
}

#[test]
fn elemental_binary_with_second_rejects_shapes_that_do_not_broadcast() {
    let (a, b) = (normal_var(&[2, 3], 41), normal_var(&[2], 42));
    let e = forgia::elemental_binary_with_second(
        &a,
        &b,
        |a, b| a * b,
        |a, b, _y, g| (b * g, a * g),
        |a, b, _y, g, ga, gb| (gb * g, ga * g, ga * b + gb * a),
    )
    .unwrap_err();
    assert!(matches!(e.kind(), forgia::ErrorKind::ShapeMismatch { op: "elemental_binary", .. }), "{e:?}");
}

#[test]
fn forward_mode_through_conv_norm_and_pool_matches_finite_differences() {
    // jvp is the double-VJP construction: it needs every record's backward to be
    // differentiable in gy, which the conv, norm and pool records now are.
    let x = normal_var(&[1, 2, 6, 6], 43).detach();
    let t = normal_var(&[1, 2, 6, 6], 44).detach();
    let w = normal_var(&[3, 2, 3, 3], 45).detach();
    let f = move |xs: &[Tensor]| {
        let h = xs[0].conv2d(&w, None, Conv2dOptions::default())?.group_norm(3, None, None, 1e-5)?;
        h.tanh().max_pool2d((2, 2), (2, 2), (0, 0))?.avg_pool2d((2, 2), (1, 1), (0, 0))
    };
    let (_, jt) = forgia::func::jvp(&f, std::slice::from_ref(&x), std::slice::from_ref(&t)).unwrap();
    let h = 1e-2f32;
    let at = |s: f32| f(&[x.add(&t.scale(s)).unwrap()]).unwrap().to_vec();
    let (up, down) = (at(h), at(-h));
    for (i, (&j, (&u, &d))) in jt.to_vec().iter().zip(up.iter().zip(&down)).enumerate() {
        let numeric = (u - d) / (2.0 * h);
        assert!((numeric - j).abs() <= 1e-2 + 1e-2 * j.abs(), "element {i}: numeric {numeric}, jvp {j}");
    }
}

#[test]
fn dropout_and_the_2x2_max_pool_fast_paths_are_twice_differentiable() {
    // Dropout's backward is dropout of the gradient (same seed), a linear map with its own
    // record; the 2x2 pool's backward writes whole rows, its gradient is the gather.
    let x = normal_var(&[2, 3, 6, 5], 21);
    second_order(|x| x[0].dropout(0.4, 5, true)?.tanh().mul(&x[0].sum_all()), std::slice::from_ref(&x), 21);
    second_order(|x| Ok(x[0].max_pool2d((2, 2), (2, 2), (0, 0))?.tanh()), std::slice::from_ref(&x), 22);
}
